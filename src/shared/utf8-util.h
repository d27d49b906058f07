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
