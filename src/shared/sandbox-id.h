/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Sandbox ids ("sb_" + 10 chars of [a-z2-7]) and the rules for user-given sandbox names. */
#pragma once

#include <stdbool.h>

#define SANDBOX_ID_PREFIX "sb_"
/* 10 base32 characters carry 50 random bits: collisions stay negligible at any plausible fleet size. */
#define SANDBOX_ID_RANDOM_CHARS 10
#define SANDBOX_ID_LEN 13
#define SANDBOX_NAME_MAX 64

/* Fills ret with a fresh NUL-terminated id. Returns 0, or a negative errno from getrandom(). */
int sandbox_id_generate(char ret[static SANDBOX_ID_LEN + 1]);
/* The same with host_tag (a character sandbox_id_char_is_valid() accepts) as the first character after
 * "sb_", the other nine random: the id tells which host made it (HostTag=, docs/scale-out.md). host_tag 0:
 * sandbox_id_generate(). -EINVAL for another character. */
int sandbox_id_generate_tagged(char host_tag, char ret[static SANDBOX_ID_LEN + 1]);
/* Whether c is one of the ids' characters, [a-z2-7]. */
bool sandbox_id_char_is_valid(char c);

/* Exactly "sb_" followed by 10 characters of [a-z2-7]. NULL is not valid. */
bool sandbox_id_is_valid(const char *s);

/* A user-given name: 1..64 chars of [A-Za-z0-9._-], not starting with '.' or '-' (so it can never be
 * ".", "..", a hidden file or look like an option). Also used for sandbox type names. */
bool name_is_valid(const char *s);
