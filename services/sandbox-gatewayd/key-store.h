/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The gateway's key store: API keys (secrets only as SHA-256 hashes) and single-use takeover tokens, in its
 * SQLite file (one host) or in PostgreSQL (KeyStore=postgresql://…, shared by the gateways of many hosts). */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway-auth.h"

typedef struct KeyStore KeyStore;

/* Opens (creating, migrating) the database at path, WAL mode, busy timeout so that several gateway
 * processes may share it. */
int key_store_open(const char *path, KeyStore **ret);
/* Connects to PostgreSQL at a libpq URI (postgresql://… or postgres://…), creating the tables if need be.
 * -EINVAL for a URI libpq cannot parse. A database that cannot be reached now is not an error: every
 * operation then fails with -KEY_STORE_UNAVAILABLE and the store reconnects, at most once a second, when
 * asked again. */
int key_store_open_postgresql(const char *url, KeyStore **ret);
/* Whether s is such a URI: 0, or -EINVAL with *ret_error saying why (for KeyStore= in the configuration). */
int key_store_check_url(const char *s, char **ret_error);
KeyStore *key_store_free(KeyStore *s);

/* The errno (negated) of every operation when the shared store cannot be reached: the gateway answers 503
 * key_store_unavailable, and the bus KeyStoreUnavailable. SQLite never returns it. */
#define KEY_STORE_UNAVAILABLE ENOTCONN
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
/* A number that changes when another gateway may have revoked a key. SQLite: PRAGMA data_version of this
 * handle (changes whenever another connection commits, not for this handle's own commits). PostgreSQL: the
 * number of revoked keys (it only grows). */
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
