/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The key store in PostgreSQL (KeyStore=postgresql://…): the tables of key-store.c, shared by every gateway.
 */
#include "key-store-internal.h"
#include "key-store.h"

#include <gnutls/gnutls.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "pg-util.h"

/* pg_advisory_xact_lock's key while creating the tables: "sbx29" as a number. */
#define PG_SCHEMA_LOCK "7568728329"

/* The tables of key-store.c's SQLite migrations, column for column. Creating them is idempotent and
 * serialised by the advisory lock, so that gateways starting together do not race on the catalog. */
static const char schema_sql[] =
        "BEGIN;"
        "SELECT pg_advisory_xact_lock(" PG_SCHEMA_LOCK ");"
        "CREATE TABLE IF NOT EXISTS sandbox_gateway_schema (version integer NOT NULL);"
        "INSERT INTO sandbox_gateway_schema SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM "
        "sandbox_gateway_schema);"
        "CREATE TABLE IF NOT EXISTS api_keys ("
        "        id text PRIMARY KEY,"
        "        secret_hash bytea NOT NULL UNIQUE,"
        "        name text NOT NULL,"
        "        role text NOT NULL,"
        "        actions text NOT NULL,"
        "        sandboxes text,"
        "        created_by text NOT NULL,"
        "        created_at bigint NOT NULL,"
        "        expires_at bigint NOT NULL DEFAULT 0,"
        "        revoked_at bigint NOT NULL DEFAULT 0);"
        "CREATE TABLE IF NOT EXISTS takeover_tokens ("
        "        token_hash bytea PRIMARY KEY,"
        "        key_id text NOT NULL REFERENCES api_keys(id),"
        "        sandbox_id text NOT NULL,"
        "        route text NOT NULL,"
        "        created_at bigint NOT NULL,"
        "        expires_at bigint NOT NULL,"
        "        used_at bigint);"
        "CREATE INDEX IF NOT EXISTS takeover_tokens_by_key ON takeover_tokens(key_id);"
        "CREATE INDEX IF NOT EXISTS takeover_tokens_by_expiry ON takeover_tokens(expires_at);"
        "COMMIT;";

#define PG_KEY_COLUMNS \
        "secret_hash, id, name, role, actions, sandboxes, created_by, created_at, expires_at, revoked_at"

_Static_assert(KEY_STORE_UNAVAILABLE == PG_UNAVAILABLE, "one errno for an unreachable server");

struct PgStore {
        PgConn *conn;
        bool failing; /* the last statement could not reach the server: said once, and once when it is back
                       */
};

PgStore *pg_store_free(PgStore *p) {
        if (!p)
                return NULL;
        pg_conn_free(p->conn);
        free(p);
        return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(PgStore *, pg_store_free);

int key_store_check_url(const char *s, char **ret_error) {
        return pg_check_url(s, ret_error);
}

int pg_store_open(const char *url, PgStore **ret) {
        _cleanup_(pg_store_freep) PgStore *p = calloc(1, sizeof(PgStore));
        int r;

        if (!p)
                return -ENOMEM;
        r = pg_conn_new(url, "sandbox-gatewayd", schema_sql, &p->conn);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}

/* Statements of this file: an unreachable server is the store's -KEY_STORE_UNAVAILABLE, logged when it
 * starts and when it ends, not for every request meanwhile; a statement the server refuses, each time. */
static int pg_store_query(PgStore *p, const char *sql, const PgParam *params, int n, PGresult **ret) {
        int r = pg_query(p->conn, sql, params, n, ret);
        if (r == -PG_UNAVAILABLE && !p->failing)
                log_msg(LOG_WARNING,
                        "The key store in PostgreSQL cannot be reached (requests answer 503 until it "
                        "is back): %s",
                        pg_conn_error(p->conn));
        else if (r != -PG_UNAVAILABLE && p->failing)
                log_msg(LOG_INFO, "The key store in PostgreSQL is reachable again.");
        else if (r == -EIO)
                log_msg(LOG_WARNING, "The key store in PostgreSQL refused a statement: %s",
                        pg_conn_error(p->conn));
        p->failing = r == -PG_UNAVAILABLE;
        return r;
}

static int pg_key_from_row(const PGresult *res, int row, ApiKey **ret) {
        const KeyRow k = {
                .id = pg_text(res, row, 1),
                .name = pg_text(res, row, 2),
                .role = pg_text(res, row, 3),
                .actions = pg_text(res, row, 4),
                .sandboxes = pg_text(res, row, 5),
                .created_by = pg_text(res, row, 6),
                .created_at = pg_u64(res, row, 7),
                .expires_at = pg_u64(res, row, 8),
                .revoked_at = pg_u64(res, row, 9),
        };
        return key_row_to_key(&k, ret);
}

#define HASH_PARAM(h)                                                      \
        (PgParam) {                                                        \
                .value = (const char *) (h), .length = KEY_STORE_HASH_SIZE \
        }

int pg_store_insert_key(PgStore *p, const char *id, const uint8_t hash[static KEY_STORE_HASH_SIZE],
                        const char *name, const char *role, const char *actions, const char *sandboxes,
                        const char *created_by, uint64_t now, uint64_t expires_at) {
        _cleanup_(pg_result_freep) PGresult *res = NULL;
        char b1[32], b2[32];

        return pg_store_query(
                p,
                "INSERT INTO api_keys (id, secret_hash, name, role, actions, sandboxes, created_by, "
                "created_at, expires_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0)",
                (PgParam[]){{id},
                            HASH_PARAM(hash),
                            {name},
                            {role},
                            {actions},
                            {sandboxes},
                            {created_by},
                            PG_U64_PARAM(b1, now),
                            PG_U64_PARAM(b2, expires_at)},
                9, &res);
}

static int pg_one_key(PgStore *p, const char *sql, const PgParam *param, const uint8_t *expected_hash,
                      ApiKey **ret) {
        _cleanup_(pg_result_freep) PGresult *res = NULL;
        int r;

        r = pg_store_query(p, sql, param, 1, &res);
        if (r < 0)
                return r;
        if (PQntuples(res) < 1)
                return -ENOENT;
        /* As on the SQLite side: constant time, though the row was found by this very hash. */
        if (expected_hash && (PQgetlength(res, 0, 0) != KEY_STORE_HASH_SIZE ||
                              gnutls_memcmp(PQgetvalue(res, 0, 0), expected_hash, KEY_STORE_HASH_SIZE) != 0))
                return -ENOENT;
        return pg_key_from_row(res, 0, ret);
}

int pg_store_key_by_hash(PgStore *p, const uint8_t hash[static KEY_STORE_HASH_SIZE], ApiKey **ret) {
        return pg_one_key(p, "SELECT " PG_KEY_COLUMNS " FROM api_keys WHERE secret_hash = $1",
                          &HASH_PARAM(hash), hash, ret);
}

int pg_store_key_by_id(PgStore *p, const char *id, ApiKey **ret) {
        return pg_one_key(p, "SELECT " PG_KEY_COLUMNS " FROM api_keys WHERE id = $1", &(PgParam){id}, NULL,
                          ret);
}

int pg_store_keys_all(PgStore *p, ApiKey ***ret) {
        _cleanup_(pg_result_freep) PGresult *res = NULL;
        ApiKey **l;
        int n, r;

        r = pg_store_query(p, "SELECT " PG_KEY_COLUMNS " FROM api_keys ORDER BY created_at, id", NULL, 0,
                           &res);
        if (r < 0)
                return r;
        n = PQntuples(res);
        l = calloc((size_t) n + 1, sizeof(ApiKey *));
        if (!l)
                return -ENOMEM;
        for (int i = 0; i < n; i++) {
                r = pg_key_from_row(res, i, &l[i]);
                if (r < 0) {
                        api_key_array_free(l);
                        return r;
                }
        }
        *ret = l;
        return 0;
}

int pg_store_revoke(PgStore *p, const char *id, uint64_t now) {
        _cleanup_(pg_result_freep) PGresult *res = NULL;
        char b[32];
        int r;

        /* One statement: the key and its unspent tokens die together, whoever reads in between. A key
         * revoked before keeps its first revocation time. */
        r = pg_store_query(p,
                           "WITH k AS (UPDATE api_keys SET revoked_at = CASE WHEN revoked_at = 0 THEN $2 "
                           "ELSE revoked_at END WHERE id = $1 RETURNING id), "
                           "t AS (UPDATE takeover_tokens SET used_at = $2 "
                           "WHERE key_id IN (SELECT id FROM k) AND used_at IS NULL) "
                           "SELECT count(*) FROM k",
                           (PgParam[]){{id}, PG_U64_PARAM(b, now)}, 2, &res);
        if (r < 0)
                return r;
        return pg_u64(res, 0, 0) > 0 ? 0 : -ENOENT;
}

int pg_store_revoked_count(PgStore *p, uint64_t *ret) {
        _cleanup_(pg_result_freep) PGresult *res = NULL;
        int r;

        r = pg_store_query(p, "SELECT count(*) FROM api_keys WHERE revoked_at <> 0", NULL, 0, &res);
        if (r < 0)
                return r;
        *ret = pg_u64(res, 0, 0);
        return 0;
}

int pg_store_insert_token(PgStore *p, const uint8_t hash[static KEY_STORE_HASH_SIZE], const char *key_id,
                          const char *sandbox_id, const char *route, uint64_t now, uint64_t expires_at,
                          uint64_t prune_before) {
        _cleanup_(pg_result_freep) PGresult *res = NULL, *prune = NULL;
        char b1[32], b2[32], b3[32];

        /* Best effort, as on the SQLite side. */
        (void) pg_store_query(p, "DELETE FROM takeover_tokens WHERE expires_at < $1",
                              (PgParam[]){PG_U64_PARAM(b3, prune_before)}, 1, &prune);
        return pg_store_query(
                p,
                "INSERT INTO takeover_tokens (token_hash, key_id, sandbox_id, route, created_at, "
                "expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
                (PgParam[]){HASH_PARAM(hash),
                            {key_id},
                            {sandbox_id},
                            {route},
                            PG_U64_PARAM(b1, now),
                            PG_U64_PARAM(b2, expires_at)},
                6, &res);
}

int pg_store_redeem(PgStore *p, const uint8_t hash[static KEY_STORE_HASH_SIZE], const char *sandbox_id,
                    const char *route, uint64_t now, bool *ret_won, TokenRow *ret_row) {
        _cleanup_(pg_result_freep) PGresult *won = NULL, *res = NULL;
        char b[32];
        int r;

        /* The whole decision in one statement. Of several gateways redeeming the same token, the first to
         * lock the row changes it; the others wait for its commit, re-check used_at IS NULL on the new
         * version of the row (READ COMMITTED), and change nothing. */
        r = pg_store_query(
                p,
                "UPDATE takeover_tokens t SET used_at = $1 "
                "WHERE token_hash = $2 AND sandbox_id = $3 AND route = $4 AND used_at IS NULL "
                "AND expires_at > $1 AND EXISTS (SELECT 1 FROM api_keys k WHERE k.id = t.key_id "
                "AND k.revoked_at = 0 AND (k.expires_at = 0 OR k.expires_at > $1)) RETURNING key_id",
                (PgParam[]){PG_U64_PARAM(b, now), HASH_PARAM(hash), {sandbox_id}, {route}}, 4, &won);
        if (r < 0)
                return r;
        r = pg_store_query(p,
                           "SELECT key_id, sandbox_id = $2 AND route = $3, expires_at, used_at IS NOT NULL "
                           "FROM takeover_tokens WHERE token_hash = $1",
                           (PgParam[]){HASH_PARAM(hash), {sandbox_id}, {route}}, 3, &res);
        if (r < 0)
                return r;
        if (PQntuples(res) < 1)
                return -ENOENT;
        *ret_row = (TokenRow){
                .key_id = strdup(PQgetvalue(res, 0, 0)),
                .bound_here = pg_bool(res, 0, 1),
                .expires_at = pg_u64(res, 0, 2),
                .used = pg_bool(res, 0, 3),
        };
        *ret_won = PQntuples(won) > 0;
        return ret_row->key_id ? 0 : -ENOMEM;
}
