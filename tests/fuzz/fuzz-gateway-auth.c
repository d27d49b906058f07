/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes the gateway's parsing of what clients send as credentials and rights: the Authorization header,
 * secrets and takeover tokens, base64, and the action/role/preset names of a key mint. */
#include "fuzz.h"
#include "gateway-auth.h"
#include "http-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *secret = NULL;
        uint8_t *bytes = NULL;
        size_t n_bytes = 0;
        uint64_t actions;
        KeyRole role;
        char *s;

        s = fuzz_strndup(data, size);
        if (!s)
                return 0;

        if (auth_parse_bearer(s, &secret) >= 0) {
                /* The secret points into the header, after "Bearer ". */
                FUZZ_ASSERT(secret && secret > s && secret <= s + strlen(s));
                (void) secret_is_well_formed(secret, API_KEY_SECRET_PREFIX);
        }
        if (secret_is_well_formed(s, API_KEY_SECRET_PREFIX))
                FUZZ_ASSERT(strncmp(s, API_KEY_SECRET_PREFIX, strlen(API_KEY_SECRET_PREFIX)) == 0);
        if (secret_is_well_formed(s, TAKEOVER_TOKEN_PREFIX))
                FUZZ_ASSERT(strncmp(s, TAKEOVER_TOKEN_PREFIX, strlen(TAKEOVER_TOKEN_PREFIX)) == 0);

        (void) gateway_action_from_string(s);
        (void) key_role_from_string(s);
        (void) key_preset_lookup(s, &role, &actions);

        /* base64 (file bodies, exec stdin): what decodes re-encodes to something that decodes the same. */
        if (base64_decode_alloc(s, &bytes, &n_bytes) >= 0) {
                char *again = NULL;
                uint8_t *bytes2 = NULL;
                size_t n2 = 0;

                if (base64_encode_alloc(bytes, n_bytes, &again) >= 0) {
                        FUZZ_ASSERT(base64_decode_alloc(again, &bytes2, &n2) >= 0);
                        FUZZ_ASSERT(n2 == n_bytes && (n2 == 0 || memcmp(bytes, bytes2, n2) == 0));
                        free(bytes2);
                        free(again);
                }
                free(bytes);
        }
        free(s);
        return 0;
}
