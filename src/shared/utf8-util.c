/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* UTF-8: validating sequences and turning arbitrary bytes into valid text, for JSON, D-Bus and logs. */
#include "utf8-util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

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

uint32_t utf8_decode(const uint8_t *p, size_t len) {
        static const uint8_t lead_mask[5] = { 0, 0x7f, 0x1f, 0x0f, 0x07 };
        uint32_t c;

        if (len < 1 || len > 4)
                return 0;
        c = p[0] & lead_mask[len];
        for (size_t i = 1; i < len; i++)
                c = (c << 6) | (p[i] & 0x3f);
        return c;
}

bool unichar_is_unprintable(uint32_t c) {
        /* Format characters (Cf, Unicode 15.0) and the two separators, as sorted, inclusive ranges. */
        static const struct {
                uint32_t first, last;
        } format[] = {
                { 0x00AD, 0x00AD },   { 0x0600, 0x0605 },   { 0x061C, 0x061C },   { 0x06DD, 0x06DD },
                { 0x070F, 0x070F },   { 0x0890, 0x0891 },   { 0x08E2, 0x08E2 },   { 0x180E, 0x180E },
                { 0x200B, 0x200F },   { 0x2028, 0x202E },   { 0x2060, 0x2064 },   { 0x2066, 0x206F },
                { 0xFEFF, 0xFEFF },   { 0xFFF9, 0xFFFB },   { 0x110BD, 0x110BD }, { 0x110CD, 0x110CD },
                { 0x13430, 0x1343F }, { 0x1BCA0, 0x1BCA3 }, { 0x1D173, 0x1D17A }, { 0xE0001, 0xE0001 },
                { 0xE0020, 0xE007F },
        };

        if (c < 0x20 || (c >= 0x7f && c <= 0x9f))
                return true;
        if (c < 0xAD)
                return false;
        for (size_t i = 0; i < sizeof(format) / sizeof(format[0]); i++) {
                if (c < format[i].first)
                        return false;
                if (c <= format[i].last)
                        return true;
        }
        return false;
}

bool utf8_is_printable(const uint8_t *p, size_t n) {
        for (size_t i = 0; i < n;) {
                size_t len = utf8_sequence_len(p + i, n - i, NULL);
                if (len == 0 || unichar_is_unprintable(utf8_decode(p + i, len)))
                        return false;
                i += len;
        }
        return true;
}

int utf8_escape(const uint8_t *data, size_t size, Utf8EscapeFlags flags, char **ret, size_t *ret_len) {
        static const char hex[] = "0123456789abcdef";
        char *out, *w;

        /* Worst case: every byte becomes the four characters of "\xNN" (a sequence of 2, 3 or 4 bytes
         * becomes at most 6, 6 or 10). */
        if (size > (SIZE_MAX - 1) / 4)
                return -ENOMEM;
        out = malloc(size * 4 + 1);
        if (!out)
                return -ENOMEM;
        w = out;
        for (size_t i = 0; i < size;) {
                size_t len = utf8_sequence_len(data + i, size - i, NULL);
                uint32_t c;

                if (len == 0) {
                        /* not UTF-8: the byte itself */
                        *w++ = '\\';
                        *w++ = 'x';
                        *w++ = hex[data[i] >> 4];
                        *w++ = hex[data[i] & 0xf];
                        i++;
                        continue;
                }
                c = utf8_decode(data + i, len);
                if (c == '\\') {
                        *w++ = '\\';
                        *w++ = '\\';
                } else if (c == '\t' && (flags & UTF8_ESCAPE_KEEP_TAB))
                        *w++ = '\t';
                else if (c == '\t' || c == '\n' || c == '\r') {
                        *w++ = '\\';
                        *w++ = c == '\t' ? 't' : c == '\n' ? 'n' : 'r';
                } else if (c < 0x20 || c == 0x7f) {
                        *w++ = '\\';
                        *w++ = 'x';
                        *w++ = hex[c >> 4];
                        *w++ = hex[c & 0xf];
                } else if (unichar_is_unprintable(c)) {
                        int digits = c > 0xffff ? 8 : 4;

                        *w++ = '\\';
                        *w++ = c > 0xffff ? 'U' : 'u';
                        for (int d = digits - 1; d >= 0; d--)
                                *w++ = hex[(c >> (4 * d)) & 0xf];
                } else {
                        memcpy(w, data + i, len);
                        w += len;
                }
                i += len;
        }
        *w = 0;
        *ret = out;
        if (ret_len)
                *ret_len = (size_t) (w - out);
        return 0;
}

size_t utf8_escaped_unit_len(const char *s) {
        size_t n = strnlen(s, UTF8_ESCAPE_UNIT_MAX), len;

        if (n == 0)
                return 0;
        if (s[0] == '\\' && n >= 2) {
                len = s[1] == 'x' ? 4 : s[1] == 'u' ? 6 : s[1] == 'U' ? 10 : 2;
                return MIN(len, n);
        }
        len = utf8_sequence_len((const uint8_t *) s, n, NULL);
        return len > 0 ? len : 1;
}
