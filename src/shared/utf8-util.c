/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* UTF-8: validating sequences and turning arbitrary bytes into valid text, for JSON, D-Bus and logs. */
#include "utf8-util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

size_t utf8_sequence_len(const uint8_t *p, size_t n, bool *ret_cut) {
        uint8_t c = p[0], lo = 0x80, hi = 0xBF;
        size_t len;

        if (ret_cut)
                *ret_cut = false;
        if (c < 0x80)
                return 1;
        if (c >= 0xC2 && c <= 0xDF)
                len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
                len = 3;
                if (c == 0xE0)
                        lo = 0xA0; /* no overlong forms */
                else if (c == 0xED)
                        hi = 0x9F; /* no surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
                len = 4;
                if (c == 0xF0)
                        lo = 0x90; /* no overlong forms */
                else if (c == 0xF4)
                        hi = 0x8F; /* nothing above U+10FFFF */
        } else
                return 0;

        for (size_t i = 1; i < len; i++) {
                if (i >= n) {
                        if (ret_cut)
                                *ret_cut = true;
                        return 0;
                }
                /* only the second byte has the narrowed range */
                if (p[i] < (i == 1 ? lo : 0x80) || p[i] > (i == 1 ? hi : 0xBF))
                        return 0;
        }
        return len;
}

bool utf8_is_valid(const uint8_t *p, size_t n) {
        for (size_t i = 0; i < n;) {
                size_t len = utf8_sequence_len(p + i, n - i, NULL);
                if (len == 0)
                        return false;
                i += len;
        }
        return true;
}

int utf8_sanitize(const uint8_t *data, size_t size, Utf8SanitizeFlags flags, char **ret, size_t *ret_len,
                  size_t *ret_consumed) {
        char *out, *w;
        size_t i = 0;

        /* worst case: every byte becomes the 3 bytes of U+FFFD */
        out = malloc(size * 3 + 1);
        if (!out)
                return -ENOMEM;
        w = out;
        while (i < size) {
                bool cut;
                size_t len = utf8_sequence_len(data + i, size - i, &cut);
                if (len > 0 && !(data[i] == 0 && (flags & UTF8_REPLACE_NUL))) {
                        memcpy(w, data + i, len);
                        w += len;
                        i += len;
                        continue;
                }
                if (cut && (flags & UTF8_KEEP_TAIL))
                        break;
                memcpy(w, "\xEF\xBF\xBD", 3);
                w += 3;
                i++;
        }
        *w = 0;
        *ret = out;
        if (ret_len)
                *ret_len = (size_t) (w - out);
        if (ret_consumed)
                *ret_consumed = i;
        return 0;
}
