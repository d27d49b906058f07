// SPDX-License-Identifier: LGPL-2.1-or-later
/* Tests of base64-util: round trips of every byte value and lengths, and the strict decoder's refusals. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base64-util.h"
#include "test-util.h"

static void test_base64(void) {
        uint8_t all[256], *d = NULL;
        char *s = NULL;
        size_t n;

        for (int i = 0; i < 256; i++)
                all[i] = (uint8_t) i;
        for (size_t len = 0; len <= 256; len += 37) {
                CHECK(base64_encode_alloc(all, len, &s) == 0);
                CHECK(base64_decode_alloc(s, &d, &n) == 0);
                CHECK_U64(n, len);
                CHECK(memcmp(d, all, len) == 0);
                free(s);
                free(d);
        }
        CHECK(base64_encode_alloc((const uint8_t *) "hello", 5, &s) == 0);
        CHECK_STR(s, "aGVsbG8=");
        free(s);
        CHECK_INT(base64_decode_alloc("aGVsbG8", &d, &n), -EINVAL);   /* no padding */
        CHECK_INT(base64_decode_alloc("aGV*bG8=", &d, &n), -EINVAL);  /* bad character */
        CHECK_INT(base64_decode_alloc("a=Vs", &d, &n), -EINVAL);      /* padding inside */
        CHECK_INT(base64_decode_alloc("aGVsbG8=\n", &d, &n), -EINVAL);
        CHECK(base64_decode_alloc("", &d, &n) == 0 && n == 0 && d[0] == 0);
        free(d);
        CHECK_INT(base64_decode_alloc("aGVsbG8=", &d, &n), 0);
        CHECK_STR((const char *) d, "hello");                          /* NUL-terminated */
        free(d);
        CHECK_INT(base64_decode_alloc("aGVsbA==", &d, &n), 0);
        CHECK_U64(n, 4);
        free(d);
        CHECK_INT(base64_decode_alloc("aGVsbA=a", &d, &n), -EINVAL);  /* data after padding */
}

int main(void) {
        test_base64();
        return test_finish("test-base64-util");
}
