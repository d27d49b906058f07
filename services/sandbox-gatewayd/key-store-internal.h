/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Between key-store.c (the API, SQLite) and key-store-pg.c (PostgreSQL): the shapes both backends share. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "gateway-auth.h"

#define KEY_STORE_HASH_SIZE 32

/* One API key's stored columns as text (times as decimal µs), as both backends read them back.
 * sandboxes NULL means "*". */
typedef struct KeyRow {
        const char *id, *name, *role, *actions, *sandboxes, *created_by;
        uint64_t created_at, expires_at, revoked_at;
} KeyRow;

int key_row_to_key(const KeyRow *row, ApiKey **ret);

/* What a redeeming statement and the token's row said; key_store_token_redeem() decides from it. */
typedef struct TokenRow {
        char *key_id;
        bool bound_here, used;
        uint64_t expires_at;
} TokenRow;

/* PostgreSQL's half. Errors: -KEY_STORE_UNAVAILABLE when the database cannot be reached, -EEXIST for a
 * unique violation, -ENOENT for no such row, -EIO for anything else the server refused. */
typedef struct PgStore PgStore;

int pg_store_open(const char *url, PgStore **ret);
PgStore *pg_store_free(PgStore *p);
int pg_store_insert_key(PgStore *p, const char *id, const uint8_t hash[static KEY_STORE_HASH_SIZE],
                        const char *name, const char *role, const char *actions, const char *sandboxes,
                        const char *created_by, uint64_t now, uint64_t expires_at);
/* -ENOENT if none; by hash checks the stored hash in constant time, as the SQLite side does. */
int pg_store_key_by_hash(PgStore *p, const uint8_t hash[static KEY_STORE_HASH_SIZE], ApiKey **ret);
int pg_store_key_by_id(PgStore *p, const char *id, ApiKey **ret);
int pg_store_keys_all(PgStore *p, ApiKey ***ret);
int pg_store_revoke(PgStore *p, const char *id, uint64_t now);
int pg_store_revoked_count(PgStore *p, uint64_t *ret);
int pg_store_insert_token(PgStore *p, const uint8_t hash[static KEY_STORE_HASH_SIZE], const char *key_id,
                          const char *sandbox_id, const char *route, uint64_t now, uint64_t expires_at,
                          uint64_t prune_before);
/* The single-use UPDATE, then the token's row: *ret_won says whether this call spent it. -ENOENT: no
 * such token. */
int pg_store_redeem(PgStore *p, const uint8_t hash[static KEY_STORE_HASH_SIZE], const char *sandbox_id,
                    const char *route, uint64_t now, bool *ret_won, TokenRow *ret_row);
