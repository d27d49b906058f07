/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* UTF-8: validating sequences and turning arbitrary bytes into valid text, for JSON, D-Bus and logs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The length (1-4) of the valid UTF-8 sequence at p, with n > 0 bytes available; 0 if there is none,
 * and then *ret_cut (may be NULL) says whether the bytes are a valid start of a sequence that n cut
 * short. Overlong forms, surrogates and code points above U+10FFFF are invalid; NUL is valid. */
size_t utf8_sequence_len(const uint8_t *p, size_t n, bool *ret_cut);

bool utf8_is_valid(const uint8_t *p, size_t n);

typedef enum Utf8SanitizeFlags {
        UTF8_KEEP_TAIL = 1 << 0,   /* stop before a sequence the end cuts short (more bytes will follow) */
        UTF8_REPLACE_NUL = 1 << 1, /* NUL becomes U+FFFD too (for D-Bus strings and C strings) */
} Utf8SanitizeFlags;

/* data[0..size) as valid UTF-8, every invalid byte replaced by U+FFFD, NUL-terminated. ret_len (may be
 * NULL) gets the text's length; ret_consumed (may be NULL) how many input bytes it covers, less than size
 * only with UTF8_KEEP_TAIL. -ENOMEM, or 0. */
int utf8_sanitize(const uint8_t *data, size_t size, Utf8SanitizeFlags flags, char **ret, size_t *ret_len,
                  size_t *ret_consumed);

/* The code point of a valid sequence of len bytes at p (len as utf8_sequence_len() gave it). */
uint32_t utf8_decode(const uint8_t *p, size_t len);

/* Whether a terminal may act on c or hide it instead of showing a glyph: the C0 controls U+0000..U+001F,
 * DEL, the C1 controls U+0080..U+009F, the format characters (general category Cf as of Unicode 15.0:
 * U+00AD, U+0600..U+0605, U+061C, U+06DD, U+070F, U+0890..U+0891, U+08E2, U+180E, U+200B..U+200F,
 * U+202A..U+202E, U+2060..U+2064, U+2066..U+206F, U+FEFF, U+FFF9..U+FFFB, U+110BD, U+110CD,
 * U+13430..U+1343F, U+1BCA0..U+1BCA3, U+1D173..U+1D17A, U+E0001, U+E0020..U+E007F: the bidi marks,
 * embeddings, overrides and isolates among them), and the line and paragraph separators U+2028, U+2029. */
bool unichar_is_unprintable(uint32_t c);

/* Whether p[0..n) is valid UTF-8 without any code point unichar_is_unprintable() names. */
bool utf8_is_printable(const uint8_t *p, size_t n);

typedef enum Utf8EscapeFlags {
        UTF8_ESCAPE_KEEP_TAB = 1 << 0, /* a TAB stays as it is (for lines of a file, where it indents) */
} Utf8EscapeFlags;

/* The longest escape utf8_escape() writes for one code point or byte: "\U000e0001". */
#define UTF8_ESCAPE_UNIT_MAX 10

/* data[0..size) made safe for a terminal, one rule for everything sandboxctl shows that a sandbox or a
 * client could have chosen: the result is valid UTF-8 in which no unichar_is_unprintable() code point is
 * left, and from which the input can be read back exactly, because a backslash only ever starts one of:
 *   \\          a backslash
 *   \t \n \r    TAB, LF, CR
 *   \xNN        any other C0 control or DEL, or a byte that is not part of valid UTF-8 (NN: 2 hex digits)
 *   \uNNNN      a C1 control or format character up to U+FFFF (4 hex digits)
 *   \UNNNNNNNN  a format character above U+FFFF (8 hex digits)
 * Hex digits are lower case. Everything else is copied. NUL-terminated; ret_len (may be NULL) gets the
 * length. -ENOMEM, or 0. */
int utf8_escape(const uint8_t *data, size_t size, Utf8EscapeFlags flags, char **ret, size_t *ret_len);

/* The length of the unit of escaped text at s: a whole escape that starts there (never past the string's
 * end), or one UTF-8 character, or 1 for anything else; 0 at the end. So escaped text can be cut without
 * splitting either. */
size_t utf8_escaped_unit_len(const char *s);
