/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Sandbox ids ("sb_" + 10 chars of [a-z2-7]) and the rules for user-given sandbox names. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

#include "macro.h"
#include "sandbox-id.h"

/* RFC 4648 base32, lower-cased: no 0/1/8/9, so ids never contain look-alikes of o, l or b. */
static const char base32_alphabet[32] = "abcdefghijklmnopqrstuvwxyz234567";

_Static_assert(SANDBOX_ID_LEN == sizeof(SANDBOX_ID_PREFIX) - 1 + SANDBOX_ID_RANDOM_CHARS, "id length");

static int fill_random(void *p, size_t n) {
        uint8_t *b = p;

        while (n > 0) {
                ssize_t k = getrandom(b, n, 0);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                b += k;
                n -= (size_t) k;
        }
        return 0;
}

int sandbox_id_generate(char ret[static SANDBOX_ID_LEN + 1]) {
        uint64_t bits;
        int r;

        r = fill_random(&bits, sizeof(bits));
        if (r < 0)
                return r;

        /* Build into a local buffer so ret stays untouched on failure (only getrandom can fail, but the
         * rule is cheap to keep). */
        char id[SANDBOX_ID_LEN + 1];
        memcpy(id, SANDBOX_ID_PREFIX, sizeof(SANDBOX_ID_PREFIX) - 1);
        for (size_t i = 0; i < SANDBOX_ID_RANDOM_CHARS; i++, bits >>= 5)
                id[sizeof(SANDBOX_ID_PREFIX) - 1 + i] = base32_alphabet[bits & 31];
        id[SANDBOX_ID_LEN] = 0;

        memcpy(ret, id, sizeof(id));
        return 0;
}

int sandbox_id_generate_tagged(char host_tag, char ret[static SANDBOX_ID_LEN + 1]) {
        char id[SANDBOX_ID_LEN + 1];
        int r;

        if (host_tag != 0 && !sandbox_id_char_is_valid(host_tag))
                return -EINVAL;
        r = sandbox_id_generate(id);
        if (r < 0)
                return r;
        if (host_tag != 0)
                id[sizeof(SANDBOX_ID_PREFIX) - 1] = host_tag;
        memcpy(ret, id, sizeof(id));
        return 0;
}

bool sandbox_id_char_is_valid(char c) {
        /* Explicit ranges rather than islower(): ids must not depend on the locale. */
        return (c >= 'a' && c <= 'z') || (c >= '2' && c <= '7');
}

bool sandbox_id_is_valid(const char *s) {
        if (!s || strncmp(s, SANDBOX_ID_PREFIX, sizeof(SANDBOX_ID_PREFIX) - 1) != 0)
                return false;

        s += sizeof(SANDBOX_ID_PREFIX) - 1;
        for (size_t i = 0; i < SANDBOX_ID_RANDOM_CHARS; i++)
                if (!sandbox_id_char_is_valid(s[i]))
                        return false;

        return s[SANDBOX_ID_RANDOM_CHARS] == 0;
}

bool name_is_valid(const char *s) {
        size_t n = 0;

        if (isempty(s) || s[0] == '.' || s[0] == '-')
                return false;

        for (; s[n]; n++) {
                char c = s[n];

                if (n >= SANDBOX_NAME_MAX)
                        return false;
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-'))
                        return false;
        }
        return true;
}
