/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A terminal session recorded as asciicast v2 (a JSON header line, then one JSON array per event), capped.
 *
 * The format: https://docs.asciinema.org/manual/asciicast/v2/ — a header object on the first line, then
 * one [time, code, data] array per line, time in seconds since the start. We write "o" (output), "r"
 * (resize) and "m" (marker, for the truncation); input is not recorded: what matters is echoed anyway,
 * and what is not (passwords) should not land in an audit log. */
#include "asciicast.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

/* Enough for a marker line: the time, the code and its short text. */
#define MARKER_ROOM 96

/* Length of the UTF-8 character at s: > 0 if it is complete and valid, 0 if the n bytes there are a
 * valid beginning of one that continues past them, -1 if they are not UTF-8. */
static int utf8_char(const unsigned char *s, size_t n) {
        unsigned char c = s[0];
        int len;
        unsigned char lo = 0x80, hi = 0xbf; /* what the second byte may be */

        if (c < 0x80)
                return 1;
        if (c >= 0xc2 && c <= 0xdf)
                len = 2;
        else if (c >= 0xe0 && c <= 0xef) {
                len = 3;
                if (c == 0xe0)
                        lo = 0xa0; /* no overlong forms */
                else if (c == 0xed)
                        hi = 0x9f; /* no surrogates */
        } else if (c >= 0xf0 && c <= 0xf4) {
                len = 4;
                if (c == 0xf0)
                        lo = 0x90;
                else if (c == 0xf4)
                        hi = 0x8f; /* nothing above U+10FFFF */
        } else
                return -1;

        for (int i = 1; i < len; i++) {
                if ((size_t) i >= n)
                        return 0;
                unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xbf;
                if (s[i] < l || s[i] > h)
                        return -1;
        }
        return len;
}

size_t asciicast_json_string(char *dst, const unsigned char *s, size_t n, size_t *ret_incomplete) {
        static const char hex[] = "0123456789abcdef";
        char *p = dst;
        size_t i = 0;

        *p++ = '"';
        while (i < n) {
                unsigned char c = s[i];
                int len = utf8_char(s + i, n - i);

                if (len == 0 && ret_incomplete)
                        break; /* the rest comes with the next chunk */
                if (len <= 0) {
                        /* U+FFFD for a byte that is not UTF-8 (or an unfinished character at the end) */
                        memcpy(p, "\xef\xbf\xbd", 3);
                        p += 3;
                        i++;
                        continue;
                }
                if (len > 1) {
                        memcpy(p, s + i, len);
                        p += len;
                        i += len;
                        continue;
                }
                switch (c) {
                case '"':
                        *p++ = '\\', *p++ = '"';
                        break;
                case '\\':
                        *p++ = '\\', *p++ = '\\';
                        break;
                case '\n':
                        *p++ = '\\', *p++ = 'n';
                        break;
                case '\r':
                        *p++ = '\\', *p++ = 'r';
                        break;
                case '\t':
                        *p++ = '\\', *p++ = 't';
                        break;
                case '\b':
                        *p++ = '\\', *p++ = 'b';
                        break;
                case '\f':
                        *p++ = '\\', *p++ = 'f';
                        break;
                default:
                        if (c < 0x20 || c == 0x7f) {
                                memcpy(p, "\\u00", 4);
                                p += 4;
                                *p++ = hex[c >> 4];
                                *p++ = hex[c & 0xf];
                        } else
                                *p++ = (char) c;
                }
                i++;
        }
        *p++ = '"';
        if (ret_incomplete)
                *ret_incomplete = n - i;
        return p - dst;
}

/* Appends a line if it fits with room for the marker left; otherwise writes the marker once. */
static void append_line(Asciicast *a, uint64_t elapsed_usec, const char *line, size_t n) {
        if (a->truncated || !a->buf)
                return;
        if (a->len + n + 1 + MARKER_ROOM <= a->max) {
                memcpy(a->buf + a->len, line, n);
                a->len += n;
                a->buf[a->len++] = '\n';
                return;
        }
        a->truncated = true;
        int k = snprintf(a->buf + a->len, a->max - a->len,
                         "[%" PRIu64 ".%06" PRIu64 ", \"m\", \"truncated\"]\n", elapsed_usec / 1000000,
                         elapsed_usec % 1000000);
        if (k > 0 && (size_t) k < a->max - a->len)
                a->len += k;
}

int asciicast_start(Asciicast *a, size_t max, unsigned cols, unsigned rows, uint64_t timestamp,
                    const char *term, const char *shell, const char *title) {
        if (max < ASCIICAST_MIN_MAX || cols == 0 || rows == 0)
                return -EINVAL;

        size_t lt = term ? strlen(term) : 0, ls = shell ? strlen(shell) : 0, lti = title ? strlen(title) : 0;
        if (lt + ls + lti > 256)
                return -EINVAL; /* the header must leave room for the session */
        char *buf = malloc(max);
        if (!buf)
                return -ENOMEM;

        size_t n = (size_t) snprintf(
                buf, max, "{\"version\": 2, \"width\": %u, \"height\": %u, \"timestamp\": %" PRIu64, cols,
                rows, timestamp);
        if (term || shell) {
                memcpy(buf + n, ", \"env\": {", 10);
                n += 10;
                if (term) {
                        memcpy(buf + n, "\"TERM\": ", 8);
                        n += 8;
                        n += asciicast_json_string(buf + n, (const unsigned char *) term, lt, NULL);
                }
                if (shell) {
                        if (term)
                                buf[n++] = ',', buf[n++] = ' ';
                        memcpy(buf + n, "\"SHELL\": ", 9);
                        n += 9;
                        n += asciicast_json_string(buf + n, (const unsigned char *) shell, ls, NULL);
                }
                buf[n++] = '}';
        }
        if (title) {
                memcpy(buf + n, ", \"title\": ", 11);
                n += 11;
                n += asciicast_json_string(buf + n, (const unsigned char *) title, lti, NULL);
        }
        buf[n++] = '}';
        buf[n++] = '\n';

        free(a->buf);
        *a = (Asciicast){.buf = buf, .len = n, .max = max};
        return 0;
}

void asciicast_output(Asciicast *a, uint64_t elapsed_usec, const void *data, size_t n) {
        const unsigned char *d = data;

        if (a->truncated || !a->buf || n == 0)
                return;

        /* The carried bytes and this chunk as one piece; encoding it whole costs one copy. */
        size_t total = a->carry_len + n;
        _cleanup_free_ unsigned char *joined = NULL;
        if (a->carry_len > 0) {
                joined = malloc(total);
                if (!joined)
                        return;
                memcpy(joined, a->carry, a->carry_len);
                memcpy(joined + a->carry_len, d, n);
                d = joined;
        }

        /* "[1234567.123456, \"o\", " + the string + "]" */
        _cleanup_free_ char *line = malloc(48 + asciicast_json_string_max(total));
        if (!line)
                return;
        size_t k = (size_t) sprintf(line, "[%" PRIu64 ".%06" PRIu64 ", \"o\", ", elapsed_usec / 1000000,
                                    elapsed_usec % 1000000);
        size_t incomplete = 0;
        size_t start = k;
        k += asciicast_json_string(line + k, d, total, &incomplete);
        line[k++] = ']';

        /* At most 3 bytes can be a character's unfinished start. */
        a->carry_len = incomplete;
        memcpy(a->carry, d + total - incomplete, incomplete);
        if (k - start == 3) /* nothing but the incomplete start: "" */
                return;
        append_line(a, elapsed_usec, line, k);
}

void asciicast_resize(Asciicast *a, uint64_t elapsed_usec, unsigned cols, unsigned rows) {
        char line[96];
        int k = snprintf(line, sizeof(line), "[%" PRIu64 ".%06" PRIu64 ", \"r\", \"%ux%u\"]",
                         elapsed_usec / 1000000, elapsed_usec % 1000000, cols, rows);
        append_line(a, elapsed_usec, line, (size_t) k);
}

void asciicast_finish(Asciicast *a, uint64_t elapsed_usec) {
        if (a->carry_len == 0 || !a->buf)
                return;
        char line[96];
        int k = snprintf(line, sizeof(line), "[%" PRIu64 ".%06" PRIu64 ", \"o\", ", elapsed_usec / 1000000,
                         elapsed_usec % 1000000);
        k += (int) asciicast_json_string(line + k, a->carry, a->carry_len, NULL);
        line[k++] = ']';
        a->carry_len = 0;
        append_line(a, elapsed_usec, line, (size_t) k);
}

void asciicast_done(Asciicast *a) {
        free(a->buf);
        *a = (Asciicast) ASCIICAST_INIT;
}
