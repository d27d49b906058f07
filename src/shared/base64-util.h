// SPDX-License-Identifier: LGPL-2.1-or-later
/* Standard base64 with padding, both ways, through gnutls: one implementation for every daemon and the CLI. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* ret: a NUL-terminated string; "" for no bytes. -E2BIG beyond 2 GiB, -ENOMEM. */
int base64_encode_alloc(const uint8_t *data, size_t size, char **ret);

/* Strict: the length a multiple of 4, only the alphabet, '=' only as the last one or two characters;
 * anything else is -EINVAL (gnutls alone is lenient about some of these). ret is NUL-terminated too. */
int base64_decode_alloc(const char *s, uint8_t **ret, size_t *ret_size);
