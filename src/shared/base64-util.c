// SPDX-License-Identifier: LGPL-2.1-or-later
/* base64 both ways via gnutls, with a strict check of what is decoded. */
#include <errno.h>
#include <gnutls/gnutls.h>
#include <stdlib.h>
#include <string.h>

#include "base64-util.h"

int base64_encode_alloc(const uint8_t *data, size_t size, char **ret) {
        gnutls_datum_t in = { .data = (unsigned char *) data, .size = (unsigned) size }, out = {};
        char *s;

        if (size > UINT32_MAX / 2)
                return -E2BIG;
        if (size == 0) {
                s = strdup("");
                if (!s)
                        return -ENOMEM;
                *ret = s;
                return 0;
        }
        if (gnutls_base64_encode2(&in, &out) < 0)
                return -ENOMEM;
        s = malloc(out.size + 1);
        if (!s) {
                gnutls_free(out.data);
                return -ENOMEM;
        }
        memcpy(s, out.data, out.size);
        s[out.size] = 0;
        gnutls_free(out.data);
        *ret = s;
        return 0;
}

int base64_decode_alloc(const char *s, uint8_t **ret, size_t *ret_size) {
        size_t n = strlen(s);
        gnutls_datum_t in = { .data = (unsigned char *) s, .size = (unsigned) n }, out = {};
        uint8_t *d;

        if (n > UINT32_MAX / 2)
                return -E2BIG;
        /* gnutls is lenient about some of these; the API is not */
        if (n % 4 != 0)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
                      c == '/' || (c == '=' && i >= n - 2)))
                        return -EINVAL;
        }
        if (n >= 2 && s[n - 2] == '=' && s[n - 1] != '=')
                return -EINVAL;
        if (n == 0) {
                d = malloc(1);
                if (!d)
                        return -ENOMEM;
                d[0] = 0;
                *ret = d;
                *ret_size = 0;
                return 0;
        }
        if (gnutls_base64_decode2(&in, &out) < 0)
                return -EINVAL;
        d = malloc(out.size + 1);
        if (!d) {
                gnutls_free(out.data);
                return -ENOMEM;
        }
        memcpy(d, out.data, out.size);
        d[out.size] = 0;
        *ret_size = out.size;
        gnutls_free(out.data);
        *ret = d;
        return 0;
}
