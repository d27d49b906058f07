/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The key store in PostgreSQL (KeyStore=postgresql://…): the tables of key-store.c, shared by every gateway. */
#include "key-store-internal.h"
#include "key-store.h"

#include <assert.h>
#include <endian.h>
#include <gnutls/gnutls.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "time-util.h"

/* A database that is down is asked again at most this often, so that requests meanwhile fail at once
 * instead of each waiting for a connection attempt. */
#define PG_RECONNECT_USEC USEC_PER_SEC
/* Unless the URI says otherwise: how long one connection attempt may stall the gateway's loop, and how long
 * one statement may run (a redemption waiting on another gateway's lock takes a moment, never this). */
#define PG_CONNECT_TIMEOUT_SEC "2"
/* and no NOTICEs (libpq would print "already exists, skipping" to stderr on every connect) */
#define PG_OPTIONS "-c statement_timeout=5000 -c client_min_messages=warning"
/* pg_advisory_xact_lock's key while creating the tables: "sbx29" as a number. */
#define PG_SCHEMA_LOCK "7568728329"

/* The tables of key-store.c's SQLite migrations, column for column. Creating them is idempotent and
 * serialised by the advisory lock, so that gateways starting together do not race on the catalog. */
static const char schema_sql[] =
        "BEGIN;"
        "SELECT pg_advisory_xact_lock(" PG_SCHEMA_LOCK ");"
        "CREATE TABLE IF NOT EXISTS sandbox_gateway_schema (version integer NOT NULL);"
        "INSERT INTO sandbox_gateway_schema SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM sandbox_gateway_schema);"
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

#define PG_KEY_COLUMNS "secret_hash, id, name, role, actions, sandboxes, created_by, created_at, expires_at, revoked_at"

struct PgStore {
        char *url;
        PGconn *conn;
        bool schema_done;
        uint64_t last_attempt; /* CLOCK_MONOTONIC µs of the last connection attempt */
};

PgStore *pg_store_free(PgStore *p) {
        if (!p)
                return NULL;
        PQfinish(p->conn);
        free(p->url);
        free(p);
        return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(PgStore *, pg_store_free);
static PGresult *pg_result_free(PGresult *res) {
        PQclear(res);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(PGresult *, pg_result_free);

int key_store_check_url(const char *s, char **ret_error) {
        char *why = NULL;
        PQconninfoOption *o;

        if (!s || (strncmp(s, "postgresql://", 13) != 0 && strncmp(s, "postgres://", 11) != 0)) {
                if (ret_error)
                        *ret_error = strdup("expected a PostgreSQL URI, postgresql://…");
                return -EINVAL;
        }
        o = PQconninfoParse(s, &why);
        if (!o) {
                if (ret_error) {
                        *ret_error = why ? strdup(why) : strdup("libpq cannot parse the URI");
                        /* libpq's message ends in a newline */
                        if (*ret_error)
                                (*ret_error)[strcspn(*ret_error, "\n")] = 0;
                }
                PQfreemem(why);
                return -EINVAL;
        }
        PQconninfoFree(o);
        return 0;
}

/* A live connection with the tables in place, or -KEY_STORE_UNAVAILABLE. */
static int pg_connect(PgStore *p) {
        /* Ours first: the URI's own settings, expanded from dbname, come later and win. */
        static const char *const keywords[] = { "connect_timeout", "options", "application_name", "dbname", NULL };
        const char *values[] = { PG_CONNECT_TIMEOUT_SEC, PG_OPTIONS, "sandbox-gatewayd", p->url, NULL };
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        if (p->conn && PQstatus(p->conn) == CONNECTION_OK && p->schema_done)
                return 0;
        if (p->last_attempt > 0 && now - p->last_attempt < PG_RECONNECT_USEC)
                return -KEY_STORE_UNAVAILABLE;
        p->last_attempt = now;

        PQfinish(p->conn);
        p->conn = PQconnectdbParams(keywords, values, 1);
        if (!p->conn)
                return -ENOMEM;
        if (PQstatus(p->conn) != CONNECTION_OK) {
                log_msg(LOG_WARNING, "Cannot connect to the key store in PostgreSQL: %s",
                        PQerrorMessage(p->conn));
                return -KEY_STORE_UNAVAILABLE;
        }
        if (!p->schema_done) {
                _cleanup_(pg_result_freep) PGresult *res = PQexec(p->conn, schema_sql);
                if (PQresultStatus(res) != PGRES_COMMAND_OK) {
                        log_msg(LOG_ERR, "Cannot create the key store's tables in PostgreSQL: %s",
                                PQerrorMessage(p->conn));
                        return PQstatus(p->conn) == CONNECTION_OK ? -EIO : -KEY_STORE_UNAVAILABLE;
                }
                p->schema_done = true;
        }
        return 0;
}

int pg_store_open(const char *url, PgStore **ret) {
        _cleanup_(pg_store_freep) PgStore *p = NULL;
        int r;

        r = key_store_check_url(url, NULL);
        if (r < 0)
                return r;
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->url = strdup(url);
        if (!p->url)
                return -ENOMEM;
        /* Down now is fine (see key_store_open_postgresql); tables the server refuses to make are not. */
        r = pg_connect(p);
        if (r < 0 && r != -KEY_STORE_UNAVAILABLE)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}

/* One parameter of a statement: text, or n bytes of binary (bytea). */
typedef struct PgParam {
        const char *value;
        int length; /* > 0: binary */
} PgParam;

static int pg_error(PgStore *p, const PGresult *res) {
        const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

        if (PQstatus(p->conn) != CONNECTION_OK)
                return -KEY_STORE_UNAVAILABLE;
        if (state && streq(state, "23505")) /* unique_violation */
                return -EEXIST;
        if (state && (streq(state, "57014") || streq(state, "40001") || streq(state, "40P01")))
                return -EBUSY; /* statement timeout, serialization failure, deadlock */
        log_msg(LOG_ERR, "The key store in PostgreSQL refused a statement: %s", PQerrorMessage(p->conn));
        return -EIO;
}

/* Runs sql with params, results in binary. A connection found broken is made again once and the statement
 * sent again: every statement here is safe to repeat (a repeated redemption finds its token spent, a
 * repeated key insert leaves an unusable row whose secret nobody was shown). */
static int pg_query(PgStore *p, const char *sql, const PgParam *params, int n, PGresult **ret) {
        const char *values[16];
        int lengths[16], formats[16];
        int r;

        assert(n <= (int) ELEMENTSOF(values));
        for (int i = 0; i < n; i++) {
                values[i] = params[i].value;
                lengths[i] = params[i].length;
                formats[i] = params[i].length > 0;
        }
        for (unsigned attempt = 0;; attempt++) {
                r = pg_connect(p);
                if (r < 0)
                        return r;
                PGresult *res = PQexecParams(p->conn, sql, n, NULL, values, lengths, formats, 1);
                ExecStatusType st = PQresultStatus(res);
                if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
                        *ret = res;
                        return 0;
                }
                r = pg_error(p, res);
                PQclear(res);
                if (r != -KEY_STORE_UNAVAILABLE || attempt > 0)
                        return r;
                p->last_attempt = 0; /* it worked until now: try once at once */
        }
}

static uint64_t pg_u64(const PGresult *res, int row, int col) {
        uint64_t v;

        if (PQgetisnull(res, row, col) || PQgetlength(res, row, col) != (int) sizeof(v))
                return 0;
        memcpy(&v, PQgetvalue(res, row, col), sizeof(v));
        return be64toh(v);
}

static const char *pg_text(const PGresult *res, int row, int col) {
        return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
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

#define U64_PARAM(buf, v) (PgParam) { .value = (snprintf(buf, sizeof(buf), "%" PRIu64, (uint64_t) (v)), buf) }
#define HASH_PARAM(h) (PgParam) { .value = (const char *) (h), .length = KEY_STORE_HASH_SIZE }

int pg_store_insert_key(PgStore *p, const char *id, const uint8_t hash[static KEY_STORE_HASH_SIZE],
                        const char *name, const char *role, const char *actions, const char *sandboxes,
                        const char *created_by, uint64_t now, uint64_t expires_at) {
        _cleanup_(pg_result_freep) PGresult *res = NULL;
        char b1[32], b2[32];

        return pg_query(p,
                        "INSERT INTO api_keys (id, secret_hash, name, role, actions, sandboxes, created_by, "
                        "created_at, expires_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0)",
                        (PgParam[]) { { id }, HASH_PARAM(hash), { name }, { role }, { actions }, { sandboxes },
                                      { created_by }, U64_PARAM(b1, now), U64_PARAM(b2, expires_at) },
                        9, &res);
}

static int pg_one_key(PgStore *p, const char *sql, const PgParam *param, const uint8_t *expected_hash,
                      ApiKey **ret) {
        _cleanup_(pg_result_freep) PGresult *res = NULL;
        int r;

        r = pg_query(p, sql, param, 1, &res);
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
        return pg_one_key(p, "SELECT " PG_KEY_COLUMNS " FROM api_keys WHERE secret_hash = $1", &HASH_PARAM(hash),
                          hash, ret);
}

int pg_store_key_by_id(PgStore *p, const char *id, ApiKey **ret) {
        return pg_one_key(p, "SELECT " PG_KEY_COLUMNS " FROM api_keys WHERE id = $1", &(PgParam) { id }, NULL,
                          ret);
}

int pg_store_keys_all(PgStore *p, ApiKey ***ret) {
        _cleanup_(pg_result_freep) PGresult *res = NULL;
        ApiKey **l;
        int n, r;

        r = pg_query(p, "SELECT " PG_KEY_COLUMNS " FROM api_keys ORDER BY created_at, id", NULL, 0, &res);
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

        /* One statement: the key and its unspent tokens die together, whoever reads in between. A key revoked
         * before keeps its first revocation time. */
        r = pg_query(p,
                     "WITH k AS (UPDATE api_keys SET revoked_at = CASE WHEN revoked_at = 0 THEN $2 "
                     "ELSE revoked_at END WHERE id = $1 RETURNING id), "
                     "t AS (UPDATE takeover_tokens SET used_at = $2 "
                     "WHERE key_id IN (SELECT id FROM k) AND used_at IS NULL) "
                     "SELECT count(*) FROM k",
                     (PgParam[]) { { id }, U64_PARAM(b, now) }, 2, &res);
        if (r < 0)
                return r;
        return pg_u64(res, 0, 0) > 0 ? 0 : -ENOENT;
}

int pg_store_revoked_count(PgStore *p, uint64_t *ret) {
        _cleanup_(pg_result_freep) PGresult *res = NULL;
        int r;

        r = pg_query(p, "SELECT count(*) FROM api_keys WHERE revoked_at <> 0", NULL, 0, &res);
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
        (void) pg_query(p, "DELETE FROM takeover_tokens WHERE expires_at < $1",
                        (PgParam[]) { U64_PARAM(b3, prune_before) }, 1, &prune);
        return pg_query(p,
                        "INSERT INTO takeover_tokens (token_hash, key_id, sandbox_id, route, created_at, "
                        "expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
                        (PgParam[]) { HASH_PARAM(hash), { key_id }, { sandbox_id }, { route }, U64_PARAM(b1, now),
                                      U64_PARAM(b2, expires_at) },
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
        r = pg_query(p,
                     "UPDATE takeover_tokens t SET used_at = $1 "
                     "WHERE token_hash = $2 AND sandbox_id = $3 AND route = $4 AND used_at IS NULL "
                     "AND expires_at > $1 AND EXISTS (SELECT 1 FROM api_keys k WHERE k.id = t.key_id "
                     "AND k.revoked_at = 0 AND (k.expires_at = 0 OR k.expires_at > $1)) RETURNING key_id",
                     (PgParam[]) { U64_PARAM(b, now), HASH_PARAM(hash), { sandbox_id }, { route } }, 4, &won);
        if (r < 0)
                return r;
        r = pg_query(p,
                     "SELECT key_id, sandbox_id = $2 AND route = $3, expires_at, used_at IS NOT NULL "
                     "FROM takeover_tokens WHERE token_hash = $1",
                     (PgParam[]) { HASH_PARAM(hash), { sandbox_id }, { route } }, 3, &res);
        if (r < 0)
                return r;
        if (PQntuples(res) < 1)
                return -ENOENT;
        *ret_row = (TokenRow) {
                .key_id = strdup(PQgetvalue(res, 0, 0)),
                /* booleans in binary are one byte */
                .bound_here = PQgetvalue(res, 0, 1)[0] == 1,
                .expires_at = pg_u64(res, 0, 2),
                .used = PQgetvalue(res, 0, 3)[0] == 1,
        };
        *ret_won = PQntuples(won) > 0;
        return ret_row->key_id ? 0 : -ENOMEM;
}
