/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The gateway's SQLite: API keys (secrets only as SHA-256 hashes) and single-use takeover tokens. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "gateway-auth.h"

typedef struct KeyStore KeyStore;

/* Opens (creating, migrating) the database at path, WAL mode, busy timeout so that several gateway
 * processes may share it. */
int key_store_open(const char *path, KeyStore **ret);
KeyStore *key_store_free(KeyStore *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(KeyStore *, key_store_free);

/* Mints a key: resolves spec against creator (NULL = root/local admin; see key_spec_resolve), makes a
 * fresh secret, stores its hash. created_by is recorded as given. Errors as key_spec_resolve, plus
 * storage errors. ret_secret is shown once and never stored. */
int key_store_create(KeyStore *s, const KeySpec *spec, const ApiKey *creator, const char *created_by,
                     uint64_t now, char **ret_secret, ApiKey **ret_key, char **ret_error);

/* Looks a secret up (hash, then constant-time compare). Returns 0 and the key when it is active;
 * -EINVAL malformed secret, -ENOKEY unknown, -EKEYEXPIRED expired, -EKEYREVOKED revoked. */
int key_store_authenticate(KeyStore *s, const char *secret, uint64_t now, ApiKey **ret_key);

int key_store_get(KeyStore *s, const char *id, ApiKey **ret_key); /* -ENOENT if unknown */
/* SQLite's PRAGMA data_version of this handle: it changes whenever another connection (another gateway
 * process) commits to the database, and not for this handle's own commits. */
int key_store_data_version(KeyStore *s, uint64_t *ret);
/* Every key, oldest first; *ret is a NULL-terminated array. */
int key_store_list(KeyStore *s, ApiKey ***ret);
void api_key_array_free(ApiKey **l);
/* Revokes a key (and every takeover token it minted). -ENOENT unknown; revoking twice is 0. */
int key_store_revoke(KeyStore *s, const char *id, uint64_t now);

/* Takeover tokens: short-lived, single use, bound to the key, the sandbox and the route. */
int key_store_token_create(KeyStore *s, const ApiKey *k, const char *sandbox_id, const char *route,
                           uint64_t now, uint64_t ttl_usec, char **ret_token, uint64_t *ret_expires_at);
/* Redeems atomically (one UPDATE … WHERE used_at IS NULL, so two processes cannot both win).
 * Returns 0 and the key that minted it (checked still active); -EINVAL malformed, -ENOKEY unknown or
 * bound to another sandbox/route, -EKEYEXPIRED expired, -EALREADY used, -EKEYREVOKED key revoked. */
int key_store_token_redeem(KeyStore *s, const char *token, const char *sandbox_id, const char *route,
                           uint64_t now, ApiKey **ret_key);
