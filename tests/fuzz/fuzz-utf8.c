/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes utf8_sanitize() and utf8_escape(): valid UTF-8 of the length claimed, and escapes that leave
 * nothing a terminal acts on and read back to the very input. */
#include "fuzz.h"
#include "utf8-util.h"

static int unhex(char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Reads utf8_escape()'s output back into bytes, as a reader of the documented form would; aborts on
 * anything the form does not allow. Returns the length written to out. */
static size_t unescape(const char *s, size_t n, uint8_t *out) {
        size_t o = 0;

        for (size_t i = 0; i < n;) {
                uint32_t c = 0;
                size_t digits;

                if (s[i] != '\\') {
                        out[o++] = (uint8_t) s[i++];
                        continue;
                }
                FUZZ_ASSERT(i + 1 < n);
                switch (s[i + 1]) {
                case '\\':
                case 't':
                case 'n':
                case 'r':
                        out[o++] = s[i + 1] == 't'   ? '\t'
                                   : s[i + 1] == 'n' ? '\n'
                                   : s[i + 1] == 'r' ? '\r'
                                                     : '\\';
                        i += 2;
                        continue;
                case 'x':
                        digits = 2;
                        break;
                case 'u':
                        digits = 4;
                        break;
                case 'U':
                        digits = 8;
                        break;
                default:
                        FUZZ_ASSERT(!"unknown escape");
                }
                FUZZ_ASSERT(i + 2 + digits <= n);
                for (size_t d = 0; d < digits; d++) {
                        int h = unhex(s[i + 2 + d]);
                        FUZZ_ASSERT(h >= 0);
                        c = (c << 4) | (uint32_t) h;
                }
                FUZZ_ASSERT(utf8_escaped_unit_len(s + i) == 2 + digits);
                i += 2 + digits;
                if (digits == 2) {
                        /* a control or DEL, else a byte that is not UTF-8, never a shorter form */
                        FUZZ_ASSERT(c < 0x20 || c >= 0x7f);
                        FUZZ_ASSERT(c != '\t' && c != '\n' && c != '\r');
                        out[o++] = (uint8_t) c;
                        continue;
                }
                /* a code point that needs it, in its shortest form, as UTF-8 */
                FUZZ_ASSERT(c >= 0x80 && unichar_is_unprintable(c));
                FUZZ_ASSERT((digits == 8) == (c > 0xffff));
                if (c < 0x800) {
                        out[o++] = (uint8_t) (0xc0 | (c >> 6));
                        out[o++] = (uint8_t) (0x80 | (c & 0x3f));
                } else if (c < 0x10000) {
                        out[o++] = (uint8_t) (0xe0 | (c >> 12));
                        out[o++] = (uint8_t) (0x80 | ((c >> 6) & 0x3f));
                        out[o++] = (uint8_t) (0x80 | (c & 0x3f));
                } else {
                        out[o++] = (uint8_t) (0xf0 | (c >> 18));
                        out[o++] = (uint8_t) (0x80 | ((c >> 12) & 0x3f));
                        out[o++] = (uint8_t) (0x80 | ((c >> 6) & 0x3f));
                        out[o++] = (uint8_t) (0x80 | (c & 0x3f));
                }
        }
        return o;
}

static void check_escape(const uint8_t *data, size_t size, Utf8EscapeFlags flags) {
        char *s = NULL;
        size_t len = 0;
        uint8_t *back;

        if (utf8_escape(data, size, flags, &s, &len) < 0)
                return;
        FUZZ_ASSERT(s && s[len] == 0 && strlen(s) == len);
        FUZZ_ASSERT(len <= size * 4);
        /* Nothing left that a terminal acts on or hides: only TAB, if it was asked to stay. */
        for (size_t i = 0; i < len;) {
                size_t l = utf8_sequence_len((const uint8_t *) s + i, len - i, NULL);
                FUZZ_ASSERT(l > 0);
                uint32_t c = utf8_decode((const uint8_t *) s + i, l);
                FUZZ_ASSERT(!unichar_is_unprintable(c) || (c == '\t' && (flags & UTF8_ESCAPE_KEEP_TAB)));
                i += l;
        }
        /* Printable input without a backslash comes back as it is. */
        if (utf8_is_printable(data, size) && !memchr(data, '\\', size))
                FUZZ_ASSERT(len == size && memcmp(s, data, size) == 0);
        /* And the escapes read back exactly. */
        back = malloc(len + 1);
        if (back) {
                FUZZ_ASSERT(unescape(s, len, back) == size);
                FUZZ_ASSERT(size == 0 || memcmp(back, data, size) == 0);
                free(back);
        }
        free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Utf8SanitizeFlags flags;
        size_t len = 0, consumed = 0;
        char *s = NULL;

        if (size < 1)
                return 0;
        /* The first byte picks the flags (bit 2: the escape's UTF8_ESCAPE_KEEP_TAB), the rest the text. */
        flags = data[0] & (UTF8_KEEP_TAIL | UTF8_REPLACE_NUL);
        check_escape(data + 1, size - 1, (data[0] & 4) ? UTF8_ESCAPE_KEEP_TAB : 0);
        data++, size--;

        if (utf8_sanitize(data, size, flags, &s, &len, &consumed) < 0)
                return 0;
        FUZZ_ASSERT(s);
        FUZZ_ASSERT(s[len] == 0);
        FUZZ_ASSERT(utf8_is_valid((const uint8_t *) s, len));
        FUZZ_ASSERT(consumed <= size);
        if (!(flags & UTF8_KEEP_TAIL))
                FUZZ_ASSERT(consumed == size);
        if (flags & UTF8_REPLACE_NUL)
                FUZZ_ASSERT(strlen(s) == len);
        /* Valid input comes back unchanged. */
        if (utf8_is_valid(data, size) && !(flags & UTF8_REPLACE_NUL))
                FUZZ_ASSERT(len == size && memcmp(s, data, size) == 0);
        free(s);
        return 0;
}
