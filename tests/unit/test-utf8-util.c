/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for utf8-util: sequence lengths at every boundary, validity, and sanitizing with each flag. */
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "utf8-util.h"
#include "test-util.h"

#define U(s) ((const uint8_t *) (s))

static void test_sequence_len(void) {
        bool cut;

        CHECK_U64(utf8_sequence_len(U("a"), 1, &cut), 1);
        CHECK_U64(utf8_sequence_len(U("\0"), 1, NULL), 1);
        CHECK_U64(utf8_sequence_len(U("\xc3\xa9"), 2, &cut), 2);
        CHECK_U64(utf8_sequence_len(U("\xe2\x82\xac"), 3, &cut), 3);
        CHECK_U64(utf8_sequence_len(U("\xf0\x9f\x98\x80"), 4, &cut), 4);
        CHECK_U64(utf8_sequence_len(U("\xf4\x8f\xbf\xbf"), 4, &cut), 4); /* U+10FFFF */

        /* invalid, and not merely cut short */
        static const char *const bad[] = {
                "\x80",             /* a lone continuation byte */
                "\xc0\xaf",         /* overlong '/' */
                "\xc1\xbf",         /* overlong */
                "\xe0\x80\xaf",     /* overlong, three bytes */
                "\xed\xa0\x80",     /* a surrogate */
                "\xf0\x80\x80\xaf", /* overlong, four bytes */
                "\xf4\x90\x80\x80", /* above U+10FFFF */
                "\xf5\x80\x80\x80",
                "\xff",
                "\xc3\x28", /* a continuation byte missing */
                "\xe2\x28\xac",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                CHECK_U64(utf8_sequence_len(U(bad[i]), strlen(bad[i]), &cut), 0);
                CHECK(!cut);
        }

        /* a valid start that the end cuts short */
        CHECK_U64(utf8_sequence_len(U("\xe2\x82"), 2, &cut), 0);
        CHECK(cut);
        CHECK_U64(utf8_sequence_len(U("\xf0\x9f\x98"), 3, &cut), 0);
        CHECK(cut);
        CHECK_U64(utf8_sequence_len(U("\xc3"), 1, &cut), 0);
        CHECK(cut);
}

static void test_is_valid(void) {
        CHECK(utf8_is_valid(U(""), 0));
        CHECK(utf8_is_valid(U("h\xc3\xa9llo \xce\xbb \xf0\x9f\x98\x80"), 15));
        CHECK(utf8_is_valid(U("a\0b"), 3));
        CHECK(!utf8_is_valid(U("ab\xe2\x82"), 4));
        CHECK(!utf8_is_valid(U("a\xff" "b"), 3));
}

static void test_sanitize(void) {
        size_t len, used;
        char *s;

        CHECK(utf8_sanitize(U("a\xff" "b\xc0\xaf" "c\xed\xa0\x80"), 9, 0, &s, &len, &used) == 0);
        /* every invalid byte becomes one U+FFFD */
        CHECK_STR(s, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
        CHECK_U64(len, strlen(s));
        CHECK_U64(used, 9);
        free(s);

        /* a cut tail is kept for the next chunk only when asked */
        CHECK(utf8_sanitize(U("ab\xe2\x82"), 4, UTF8_KEEP_TAIL, &s, &len, &used) == 0);
        CHECK_STR(s, "ab");
        CHECK_U64(used, 2);
        free(s);
        CHECK(utf8_sanitize(U("ab\xe2\x82"), 4, 0, &s, &len, &used) == 0);
        CHECK_STR(s, "ab\xef\xbf\xbd\xef\xbf\xbd");
        CHECK_U64(used, 4);
        free(s);
        /* an invalid byte is no cut tail */
        CHECK(utf8_sanitize(U("a\x80"), 2, UTF8_KEEP_TAIL, &s, &len, &used) == 0);
        CHECK_STR(s, "a\xef\xbf\xbd");
        CHECK_U64(used, 2);
        free(s);

        /* NUL stays, unless it must not */
        CHECK(utf8_sanitize(U("a\0b"), 3, 0, &s, &len, NULL) == 0);
        CHECK_U64(len, 3);
        CHECK(memcmp(s, "a\0b", 3) == 0);
        free(s);
        CHECK(utf8_sanitize(U("a\0b"), 3, UTF8_REPLACE_NUL, &s, &len, NULL) == 0);
        CHECK_STR(s, "a\xef\xbf\xbd" "b");
        free(s);

        CHECK(utf8_sanitize(U(""), 0, 0, &s, &len, &used) == 0);
        CHECK_STR(s, "");
        CHECK_U64(len, 0);
        CHECK_U64(used, 0);
        free(s);
}

int main(void) {
        test_sequence_len();
        test_is_valid();
        test_sanitize();
        return test_finish("test-utf8-util");
}
