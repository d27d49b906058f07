/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The gateway's key store: its API and the SQLite backend (PostgreSQL's is key-store-pg.c). API keys (secrets
 * only as SHA-256 hashes) and single-use takeover tokens. */
#include "key-store.h"

#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "key-store-internal.h"
#include "macro.h"
#include "sqlite-util.h"

/* Several gateway processes (replicas, a second instance on another port) may share the file: a writer
 * waits this long for another's lock before a request fails. */
#define KEY_STORE_BUSY_TIMEOUT_MSEC 5000
#define HASH_SIZE KEY_STORE_HASH_SIZE
#define SECRET_RANDOM_BYTES 32
#define KEY_ID_PREFIX "key_"
#define KEY_ID_RANDOM_CHARS 20
/* Spent and expired tokens are kept this long after they expire, then removed when new ones are made. */
#define TOKEN_KEEP_USEC (UINT64_C(3600) * USEC_PER_SEC)

/* Append-only: migrations[i] moves the schema from version i to i + 1. Actions and scopes are stored by
 * their wire names, so reordering the enums in code never changes what a stored key may do. */
static const char *const migrations[] = {
        /* 1: API keys. expires_at/revoked_at: µs since the epoch, 0 = never/not. sandboxes: NULL = "*",
         * else comma-separated ids. */
        "CREATE TABLE api_keys ("
        "        id TEXT PRIMARY KEY NOT NULL,"
        "        secret_hash BLOB NOT NULL UNIQUE,"
        "        name TEXT NOT NULL,"
        "        role TEXT NOT NULL,"
        "        actions TEXT NOT NULL,"
        "        sandboxes TEXT,"
        "        created_by TEXT NOT NULL,"
        "        created_at INTEGER NOT NULL,"
        "        expires_at INTEGER NOT NULL DEFAULT 0,"
        "        revoked_at INTEGER NOT NULL DEFAULT 0"
        ");",
        /* 2: takeover tokens, single use: used_at is set exactly once, by the redeeming UPDATE. */
        "CREATE TABLE takeover_tokens ("
        "        token_hash BLOB PRIMARY KEY NOT NULL,"
        "        key_id TEXT NOT NULL REFERENCES api_keys(id),"
        "        sandbox_id TEXT NOT NULL,"
        "        route TEXT NOT NULL,"
        "        created_at INTEGER NOT NULL,"
        "        expires_at INTEGER NOT NULL,"
        "        used_at INTEGER"
        ");"
        "CREATE INDEX takeover_tokens_by_key ON takeover_tokens(key_id);"
        "CREATE INDEX takeover_tokens_by_expiry ON takeover_tokens(expires_at);",
};

#define KEY_COLUMNS "id, name, role, actions, sandboxes, created_by, created_at, expires_at, revoked_at"

enum {
        ST_INSERT_KEY,
        ST_KEY_BY_HASH,
        ST_KEY_BY_ID,
        ST_KEYS_ALL,
        ST_REVOKE_KEY,
        ST_SPEND_KEY_TOKENS,
        ST_INSERT_TOKEN,
        ST_PRUNE_TOKENS,
        ST_REDEEM_TOKEN,
        ST_TOKEN_BY_HASH,
        ST_DATA_VERSION,
        _ST_MAX,
};

static const char *const statements[_ST_MAX] = {
        [ST_INSERT_KEY] = "INSERT INTO api_keys (id, secret_hash, name, role, actions, sandboxes, created_by, "
                          "created_at, expires_at, revoked_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 0)",
        [ST_KEY_BY_HASH] = "SELECT secret_hash, " KEY_COLUMNS " FROM api_keys WHERE secret_hash = ?1",
        [ST_KEY_BY_ID] = "SELECT secret_hash, " KEY_COLUMNS " FROM api_keys WHERE id = ?1",
        [ST_KEYS_ALL] = "SELECT secret_hash, " KEY_COLUMNS " FROM api_keys ORDER BY created_at, rowid",
        [ST_REVOKE_KEY] = "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at = 0",
        [ST_SPEND_KEY_TOKENS] = "UPDATE takeover_tokens SET used_at = ?2 WHERE key_id = ?1 AND used_at IS NULL",
        [ST_INSERT_TOKEN] = "INSERT INTO takeover_tokens (token_hash, key_id, sandbox_id, route, created_at, "
                            "expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        [ST_PRUNE_TOKENS] = "DELETE FROM takeover_tokens WHERE expires_at < ?1",
        /* The whole decision in one statement: of several processes redeeming the same token, exactly one
         * changes the row. */
        [ST_REDEEM_TOKEN] = "UPDATE takeover_tokens SET used_at = ?1 "
                            "WHERE token_hash = ?2 AND sandbox_id = ?3 AND route = ?4 AND used_at IS NULL "
                            "AND expires_at > ?1 AND EXISTS (SELECT 1 FROM api_keys k "
                            "WHERE k.id = takeover_tokens.key_id AND k.revoked_at = 0 "
                            "AND (k.expires_at = 0 OR k.expires_at > ?1))",
        [ST_TOKEN_BY_HASH] = "SELECT key_id, sandbox_id, route, expires_at, used_at FROM takeover_tokens "
                             "WHERE token_hash = ?1",
        [ST_DATA_VERSION] = "PRAGMA data_version",
};

/* Exactly one of db and pg. */
struct KeyStore {
        sqlite3 *db;
        sqlite3_stmt *st[_ST_MAX];
        PgStore *pg;
};

KeyStore *key_store_free(KeyStore *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < _ST_MAX; i++)
                sqlite3_finalize(s->st[i]);
        sqlite3_close_v2(s->db);
        pg_store_free(s->pg);
        free(s);
        return NULL;
}

int key_store_open(const char *path, KeyStore **ret) {
        _cleanup_(key_store_freep) KeyStore *s = NULL;
        int r;

        if (!path || !ret)
                return -EINVAL;

        /* The file holds only hashes, but nobody else needs to read it: create it 0600 before SQLite does
         * (its -wal and -shm files take the database file's mode). The descriptor is closed before SQLite
         * opens the file: POSIX locks belong to the process, and closing any descriptor of the file drops
         * all of them, SQLite's too. Without its shared lock on keys.db this process would look gone to
         * other processes sharing the file (a second gateway, sqlite3), and the next of them to close would
         * checkpoint and remove the -wal and -shm files this one still writes to: nobody else would see
         * the keys and tokens it makes afterwards. */
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
        if (fd < 0)
                return -errno;
        safe_close(fd);

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        r = sqlite_open_wal(path, KEY_STORE_BUSY_TIMEOUT_MSEC, &s->db);
        if (r < 0)
                return r;
        r = sqlite_migrate(s->db, migrations, ELEMENTSOF(migrations));
        if (r < 0)
                return r;
        for (size_t i = 0; i < _ST_MAX; i++) {
                r = sqlite_prepare_persistent(s->db, statements[i], &s->st[i]);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(s);
        return 0;
}

int key_store_open_postgresql(const char *url, KeyStore **ret) {
        _cleanup_(key_store_freep) KeyStore *s = NULL;
        int r;

        if (!url || !ret)
                return -EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        r = pg_store_open(url, &s->pg);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

/* RFC 4648 base32, lower-cased, unpadded: the same alphabet as sandbox ids. */
static const char base32_alphabet[32] = "abcdefghijklmnopqrstuvwxyz234567";

static void base32_encode(const uint8_t *in, size_t n, char *out) {
        uint32_t buf = 0;
        int bits = 0;

        for (size_t i = 0; i < n; i++) {
                buf = (buf << 8) | in[i];
                bits += 8;
                while (bits >= 5) {
                        *out++ = base32_alphabet[(buf >> (bits - 5)) & 31];
                        bits -= 5;
                }
        }
        if (bits > 0)
                *out++ = base32_alphabet[(buf << (5 - bits)) & 31];
        *out = 0;
}

/* prefix + base32 of 32 bytes from gnutls' key-grade generator. */
static int secret_generate(const char *prefix, char **ret) {
        uint8_t raw[SECRET_RANDOM_BYTES];
        size_t n = strlen(prefix);
        char *s;

        if (gnutls_rnd(GNUTLS_RND_KEY, raw, sizeof(raw)) < 0)
                return -EIO;
        s = malloc(n + (sizeof(raw) * 8 + 4) / 5 + 1);
        if (!s) {
                gnutls_memset(raw, 0, sizeof(raw));
                return -ENOMEM;
        }
        memcpy(s, prefix, n);
        base32_encode(raw, sizeof(raw), s + n);
        gnutls_memset(raw, 0, sizeof(raw));
        *ret = s;
        return 0;
}

static int key_id_generate(char ret[static sizeof(KEY_ID_PREFIX) + KEY_ID_RANDOM_CHARS]) {
        uint8_t raw[KEY_ID_RANDOM_CHARS];

        /* 256 is a multiple of 32: masking each byte keeps the characters uniform. */
        if (gnutls_rnd(GNUTLS_RND_KEY, raw, sizeof(raw)) < 0)
                return -EIO;
        memcpy(ret, KEY_ID_PREFIX, sizeof(KEY_ID_PREFIX) - 1);
        for (size_t i = 0; i < KEY_ID_RANDOM_CHARS; i++)
                ret[sizeof(KEY_ID_PREFIX) - 1 + i] = base32_alphabet[raw[i] & 31];
        ret[sizeof(KEY_ID_PREFIX) - 1 + KEY_ID_RANDOM_CHARS] = 0;
        return 0;
}

static bool key_id_is_valid(const char *s) {
        if (!s || strncmp(s, KEY_ID_PREFIX, sizeof(KEY_ID_PREFIX) - 1) != 0)
                return false;
        s += sizeof(KEY_ID_PREFIX) - 1;
        for (size_t i = 0; i < KEY_ID_RANDOM_CHARS; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '2' && s[i] <= '7')))
                        return false;
        return s[KEY_ID_RANDOM_CHARS] == 0;
}

static int hash_secret(const char *secret, uint8_t ret[static HASH_SIZE]) {
        if (gnutls_hash_fast(GNUTLS_DIG_SHA256, secret, strlen(secret), ret) < 0)
                return -EIO;
        return 0;
}

static void stmt_done(sqlite3_stmt *st) {
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
}

static int step_changes(KeyStore *s, sqlite3_stmt *st, int *ret_changes) {
        int r = sqlite_step_done(st);
        if (r < 0)
                return r;
        if (ret_changes)
                *ret_changes = sqlite3_changes(s->db);
        return 0;
}

static int exec_sql(KeyStore *s, const char *sql) {
        return sqlite_errno(sqlite3_exec(s->db, sql, NULL, NULL, NULL));
}

/* "a,b,c" of the wire names in mask. */
static char *actions_to_text(uint64_t mask) {
        size_t size = 1, n = 0;
        char *t;

        for (int a = 0; a < _GATEWAY_ACTION_MAX; a++)
                if (mask & GATEWAY_ACTION_BIT(a))
                        size += strlen(gateway_action_to_string(a)) + 1;
        t = malloc(size);
        if (!t)
                return NULL;
        t[0] = 0;
        for (int a = 0; a < _GATEWAY_ACTION_MAX; a++)
                if (mask & GATEWAY_ACTION_BIT(a))
                        n += (size_t) snprintf(t + n, size - n, "%s%s", n ? "," : "", gateway_action_to_string(a));
        return t;
}

/* Unknown names (written by a later version) grant nothing here. */
static uint64_t actions_from_text(const char *t) {
        uint64_t mask = 0;

        while (t && *t) {
                const char *e = strchrnul(t, ',');
                char name[64];
                if ((size_t) (e - t) < sizeof(name)) {
                        memcpy(name, t, (size_t) (e - t));
                        name[e - t] = 0;
                        GatewayAction a = gateway_action_from_string(name);
                        if (a >= 0)
                                mask |= GATEWAY_ACTION_BIT(a);
                }
                t = *e ? e + 1 : e;
        }
        return mask;
}

static char *strv_join_commas(char **l) {
        size_t size = 1, n = 0;
        char *t;

        for (char **i = l; *i; i++)
                size += strlen(*i) + 1;
        t = malloc(size);
        if (!t)
                return NULL;
        t[0] = 0;
        for (char **i = l; *i; i++)
                n += (size_t) snprintf(t + n, size - n, "%s%s", n ? "," : "", *i);
        return t;
}

static char **strv_split_commas(const char *t) {
        size_t n = 1, i = 0;
        char **l;

        for (const char *p = t; *p; p++)
                n += *p == ',';
        l = calloc(n + 1, sizeof(char *));
        if (!l)
                return NULL;
        for (const char *p = t; *p;) {
                const char *e = strchrnul(p, ',');
                if (e > p && !(l[i++] = strndup(p, (size_t) (e - p)))) {
                        strv_free(l);
                        return NULL;
                }
                p = *e ? e + 1 : e;
        }
        return l;
}

static char *column_strdup(sqlite3_stmt *st, int col) {
        const unsigned char *t = sqlite3_column_text(st, col);
        return strdup(t ? (const char *) t : "");
}

int key_row_to_key(const KeyRow *row, ApiKey **ret) {
        _cleanup_(api_key_freep) ApiKey *k = calloc(1, sizeof(ApiKey));

        if (!k)
                return -ENOMEM;
        k->id = strdup(strempty(row->id));
        k->name = strdup(strempty(row->name));
        k->role = key_role_from_string(row->role);
        if (k->role < 0)
                k->role = KEY_ROLE_MEMBER; /* a role this version does not know gets the least */
        k->actions = actions_from_text(row->actions) & key_role_actions(k->role);
        if (row->sandboxes) {
                k->sandboxes = strv_split_commas(row->sandboxes);
                if (!k->sandboxes)
                        return -ENOMEM;
        }
        k->created_by = strdup(strempty(row->created_by));
        k->created_at = row->created_at;
        k->expires_at = row->expires_at;
        k->revoked_at = row->revoked_at;
        if (!k->id || !k->name || !k->created_by)
                return -ENOMEM;
        *ret = TAKE_PTR(k);
        return 0;
}

/* A row of "SELECT secret_hash, KEY_COLUMNS" as an ApiKey. */
static int key_from_row(sqlite3_stmt *st, ApiKey **ret) {
        const KeyRow row = {
                .id = (const char *) sqlite3_column_text(st, 1),
                .name = (const char *) sqlite3_column_text(st, 2),
                .role = (const char *) sqlite3_column_text(st, 3),
                .actions = (const char *) sqlite3_column_text(st, 4),
                .sandboxes = sqlite3_column_type(st, 5) != SQLITE_NULL ? (const char *) sqlite3_column_text(st, 5)
                                                                        : NULL,
                .created_by = (const char *) sqlite3_column_text(st, 6),
                .created_at = (uint64_t) sqlite3_column_int64(st, 7),
                .expires_at = (uint64_t) sqlite3_column_int64(st, 8),
                .revoked_at = (uint64_t) sqlite3_column_int64(st, 9),
        };
        return key_row_to_key(&row, ret);
}

/* Runs a statement expected to yield at most one key row. -ENOENT if none. */
static int fetch_one_key(sqlite3_stmt *st, const uint8_t *expected_hash, ApiKey **ret) {
        int rc, r;

        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) {
                stmt_done(st);
                return -ENOENT;
        }
        if (rc != SQLITE_ROW) {
                stmt_done(st);
                return sqlite_errno(rc);
        }
        if (expected_hash) {
                const void *h = sqlite3_column_blob(st, 0);
                /* Constant time, though the row was found by this very hash: nothing about a stored hash
                 * should leak through timing, whatever index SQLite uses. */
                if (!h || sqlite3_column_bytes(st, 0) != HASH_SIZE || gnutls_memcmp(h, expected_hash, HASH_SIZE) != 0) {
                        stmt_done(st);
                        return -ENOENT;
                }
        }
        r = key_from_row(st, ret);
        stmt_done(st);
        return r;
}

int key_store_create(KeyStore *s, const KeySpec *spec, const ApiKey *creator, const char *created_by,
                     uint64_t now, char **ret_secret, ApiKey **ret_key, char **ret_error) {
        _cleanup_strv_free_ char **sandboxes = NULL;
        _cleanup_free_ char *actions_text = NULL, *sandboxes_text = NULL;
        uint64_t actions, expires_at;
        KeyRole role;
        int r;

        if (!s || !spec || !created_by || !ret_secret || !ret_key)
                return -EINVAL;

        r = key_spec_resolve(spec, creator, now, &role, &actions, &sandboxes, &expires_at, ret_error);
        if (r < 0)
                return r;

        actions_text = actions_to_text(actions);
        if (!actions_text)
                return -ENOMEM;
        if (sandboxes && !(sandboxes_text = strv_join_commas(sandboxes)))
                return -ENOMEM;

        /* A fresh id or secret colliding with a stored one is astronomically unlikely; retry rather than
         * fail if it ever happens. */
        for (unsigned attempt = 0;; attempt++) {
                char id[sizeof(KEY_ID_PREFIX) + KEY_ID_RANDOM_CHARS];
                _cleanup_free_ char *secret = NULL;
                uint8_t hash[HASH_SIZE];
                sqlite3_stmt *st = s->pg ? NULL : s->st[ST_INSERT_KEY];

                r = key_id_generate(id);
                if (r < 0)
                        return r;
                r = secret_generate(API_KEY_SECRET_PREFIX, &secret);
                if (r < 0)
                        return r;
                r = hash_secret(secret, hash);
                if (r < 0)
                        return r;

                if (s->pg)
                        r = pg_store_insert_key(s->pg, id, hash, strempty(spec->name), key_role_to_string(role),
                                                actions_text, sandboxes_text, created_by, now, expires_at);
                else {
                        sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
                        sqlite3_bind_blob(st, 2, hash, HASH_SIZE, SQLITE_TRANSIENT);
                        sqlite3_bind_text(st, 3, strempty(spec->name), -1, SQLITE_STATIC);
                        sqlite3_bind_text(st, 4, key_role_to_string(role), -1, SQLITE_STATIC);
                        sqlite3_bind_text(st, 5, actions_text, -1, SQLITE_STATIC);
                        if (sandboxes_text)
                                sqlite3_bind_text(st, 6, sandboxes_text, -1, SQLITE_STATIC);
                        else
                                sqlite3_bind_null(st, 6);
                        sqlite3_bind_text(st, 7, created_by, -1, SQLITE_STATIC);
                        sqlite3_bind_int64(st, 8, (sqlite3_int64) now);
                        sqlite3_bind_int64(st, 9, (sqlite3_int64) expires_at);
                        r = sqlite_step_done(st);
                }
                if (r == -EEXIST && attempt < 3)
                        continue;
                if (r < 0)
                        return r;

                _cleanup_(api_key_freep) ApiKey *k = calloc(1, sizeof(ApiKey));
                if (!k)
                        return -ENOMEM;
                k->id = strdup(id);
                k->name = strdup(strempty(spec->name));
                k->created_by = strdup(created_by);
                if (!k->id || !k->name || !k->created_by)
                        return -ENOMEM;
                k->role = role;
                k->actions = actions;
                k->sandboxes = TAKE_PTR(sandboxes);
                k->created_at = now;
                k->expires_at = expires_at;
                *ret_secret = TAKE_PTR(secret);
                *ret_key = TAKE_PTR(k);
                return 0;
        }
}

int key_store_authenticate(KeyStore *s, const char *secret, uint64_t now, ApiKey **ret_key) {
        _cleanup_(api_key_freep) ApiKey *k = NULL;
        uint8_t hash[HASH_SIZE];
        sqlite3_stmt *st;
        int r;

        if (!s || !ret_key)
                return -EINVAL;
        if (!secret_is_well_formed(secret, API_KEY_SECRET_PREFIX))
                return -EINVAL;
        r = hash_secret(secret, hash);
        if (r < 0)
                return r;

        if (s->pg)
                r = pg_store_key_by_hash(s->pg, hash, &k);
        else {
                st = s->st[ST_KEY_BY_HASH];
                sqlite3_bind_blob(st, 1, hash, HASH_SIZE, SQLITE_TRANSIENT);
                r = fetch_one_key(st, hash, &k);
        }
        if (r == -ENOENT)
                return -ENOKEY;
        if (r < 0)
                return r;

        switch (api_key_state(k, now)) {
        case KEY_STATE_REVOKED:
                return -EKEYREVOKED;
        case KEY_STATE_EXPIRED:
                return -EKEYEXPIRED;
        case KEY_STATE_ACTIVE:
                break;
        }
        *ret_key = TAKE_PTR(k);
        return 0;
}

int key_store_get(KeyStore *s, const char *id, ApiKey **ret_key) {
        sqlite3_stmt *st;

        if (!s || !ret_key)
                return -EINVAL;
        if (!key_id_is_valid(id))
                return -ENOENT;
        if (s->pg)
                return pg_store_key_by_id(s->pg, id, ret_key);
        st = s->st[ST_KEY_BY_ID];
        sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
        return fetch_one_key(st, NULL, ret_key);
}

int key_store_data_version(KeyStore *s, uint64_t *ret) {
        sqlite3_stmt *st;
        int k;

        if (!s || !ret)
                return -EINVAL;
        if (s->pg)
                return pg_store_revoked_count(s->pg, ret);
        st = s->st[ST_DATA_VERSION];
        k = sqlite3_step(st);
        if (k == SQLITE_ROW)
                *ret = (uint64_t) sqlite3_column_int64(st, 0);
        stmt_done(st);
        return k == SQLITE_ROW ? 0 : (sqlite_errno(k) ?: -EIO);
}

void api_key_array_free(ApiKey **l) {
        for (ApiKey **i = l; i && *i; i++)
                api_key_free(*i);
        free(l);
}

int key_store_list(KeyStore *s, ApiKey ***ret) {
        sqlite3_stmt *st;
        ApiKey **l = NULL;
        size_t n = 0, allocated = 0;
        int rc, r = 0;

        if (!s || !ret)
                return -EINVAL;
        if (s->pg)
                return pg_store_keys_all(s->pg, ret);
        st = s->st[ST_KEYS_ALL];
        l = calloc(1, sizeof(ApiKey *));
        if (!l)
                return -ENOMEM;
        allocated = 1;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (n + 1 >= allocated) {
                        ApiKey **nl = realloc(l, allocated * 2 * sizeof(ApiKey *));
                        if (!nl) {
                                r = -ENOMEM;
                                break;
                        }
                        l = nl;
                        allocated *= 2;
                }
                l[n + 1] = NULL;
                r = key_from_row(st, &l[n]);
                if (r < 0) {
                        l[n] = NULL;
                        break;
                }
                l[++n] = NULL;
        }
        if (r == 0 && rc != SQLITE_DONE)
                r = sqlite_errno(rc);
        stmt_done(st);
        if (r < 0) {
                api_key_array_free(l);
                return r;
        }
        *ret = l;
        return 0;
}

int key_store_revoke(KeyStore *s, const char *id, uint64_t now) {
        _cleanup_(api_key_freep) ApiKey *k = NULL;
        sqlite3_stmt *st;
        int r;

        if (!s)
                return -EINVAL;
        /* 0 means "not revoked" in the table: a clock at the epoch still revokes. */
        now = MAX(now, UINT64_C(1));
        if (s->pg)
                return key_id_is_valid(id) ? pg_store_revoke(s->pg, id, now) : -ENOENT;

        /* One transaction: the key and its tokens die together, whoever reads in between. */
        r = exec_sql(s, "BEGIN IMMEDIATE");
        if (r < 0)
                return r;
        r = key_store_get(s, id, &k);
        if (r < 0)
                goto rollback;
        if (k->revoked_at == 0) {
                st = s->st[ST_REVOKE_KEY];
                sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
                sqlite3_bind_int64(st, 2, (sqlite3_int64) now);
                r = step_changes(s, st, NULL);
                if (r < 0)
                        goto rollback;
        }
        st = s->st[ST_SPEND_KEY_TOKENS];
        sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 2, (sqlite3_int64) now);
        r = step_changes(s, st, NULL);
        if (r < 0)
                goto rollback;
        r = exec_sql(s, "COMMIT");
        if (r < 0)
                goto rollback;
        return 0;

rollback:
        (void) exec_sql(s, "ROLLBACK");
        return r;
}

int key_store_token_create(KeyStore *s, const ApiKey *k, const char *sandbox_id, const char *route,
                           uint64_t now, uint64_t ttl_usec, char **ret_token, uint64_t *ret_expires_at) {
        _cleanup_free_ char *token = NULL;
        uint64_t prune_before;
        uint8_t hash[HASH_SIZE];
        sqlite3_stmt *st;
        int r;

        if (!s || !k || !key_id_is_valid(k->id) || isempty(sandbox_id) || isempty(route) || ttl_usec == 0 ||
            ttl_usec > UINT64_MAX - now || !ret_token)
                return -EINVAL;

        r = secret_generate(TAKEOVER_TOKEN_PREFIX, &token);
        if (r < 0)
                return r;
        r = hash_secret(token, hash);
        if (r < 0)
                return r;

        /* Keep the table small: what expired long ago can never be redeemed. Best effort. */
        prune_before = now > TOKEN_KEEP_USEC ? now - TOKEN_KEEP_USEC : 0;
        if (s->pg) {
                r = pg_store_insert_token(s->pg, hash, k->id, sandbox_id, route, now, now + ttl_usec, prune_before);
                if (r < 0)
                        return r;
                goto done;
        }
        st = s->st[ST_PRUNE_TOKENS];
        sqlite3_bind_int64(st, 1, (sqlite3_int64) prune_before);
        (void) sqlite_step_done(st);

        st = s->st[ST_INSERT_TOKEN];
        sqlite3_bind_blob(st, 1, hash, HASH_SIZE, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, k->id, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 3, sandbox_id, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 4, route, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 5, (sqlite3_int64) now);
        sqlite3_bind_int64(st, 6, (sqlite3_int64) (now + ttl_usec));
        r = sqlite_step_done(st);
        if (r < 0)
                return r;
done:
        *ret_token = TAKE_PTR(token);
        if (ret_expires_at)
                *ret_expires_at = now + ttl_usec;
        return 0;
}

/* SQLite's half of a redemption: the single-use UPDATE, then the token's row. -ENOENT: no such token. */
static int sqlite_redeem(KeyStore *s, const uint8_t hash[static HASH_SIZE], const char *sandbox_id,
                         const char *route, uint64_t now, bool *ret_won, TokenRow *ret_row) {
        sqlite3_stmt *st;
        int changes = 0, rc, r;

        st = s->st[ST_REDEEM_TOKEN];
        sqlite3_bind_int64(st, 1, (sqlite3_int64) now);
        sqlite3_bind_blob(st, 2, hash, HASH_SIZE, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 3, sandbox_id, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 4, route, -1, SQLITE_TRANSIENT);
        r = step_changes(s, st, &changes);
        if (r < 0)
                return r;

        st = s->st[ST_TOKEN_BY_HASH];
        sqlite3_bind_blob(st, 1, hash, HASH_SIZE, SQLITE_TRANSIENT);
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW) {
                stmt_done(st);
                return rc == SQLITE_DONE ? -ENOENT : sqlite_errno(rc);
        }
        *ret_row = (TokenRow) {
                .key_id = column_strdup(st, 0),
                .bound_here = streq_ptr((const char *) sqlite3_column_text(st, 1), sandbox_id) &&
                              streq_ptr((const char *) sqlite3_column_text(st, 2), route),
                .expires_at = (uint64_t) sqlite3_column_int64(st, 3),
                .used = sqlite3_column_type(st, 4) != SQLITE_NULL,
        };
        stmt_done(st);
        *ret_won = changes > 0;
        return ret_row->key_id ? 0 : -ENOMEM;
}

int key_store_token_redeem(KeyStore *s, const char *token, const char *sandbox_id, const char *route,
                           uint64_t now, ApiKey **ret_key) {
        _cleanup_(api_key_freep) ApiKey *k = NULL;
        TokenRow row = {};
        uint8_t hash[HASH_SIZE];
        bool won = false;
        int r;

        if (!s || !ret_key || !sandbox_id || !route)
                return -EINVAL;
        if (!secret_is_well_formed(token, TAKEOVER_TOKEN_PREFIX))
                return -EINVAL;
        r = hash_secret(token, hash);
        if (r < 0)
                return r;

        /* Won or lost, the row is read: on a win for its key, on a loss to say why. */
        if (s->pg)
                r = pg_store_redeem(s->pg, hash, sandbox_id, route, now, &won, &row);
        else
                r = sqlite_redeem(s, hash, sandbox_id, route, now, &won, &row);
        if (r == -ENOENT)
                return -ENOKEY;
        if (r < 0)
                return r;
        _cleanup_free_ char *key_id = row.key_id;

        /* A token for another sandbox or route is, here, no token at all. */
        if (!row.bound_here)
                return -ENOKEY;

        r = key_store_get(s, key_id, &k);
        if (r == -ENOENT)
                return -ENOKEY;
        if (r < 0)
                return r;

        if (!won) {
                if (k->revoked_at > 0)
                        return -EKEYREVOKED;
                if (row.used)
                        return -EALREADY;
                if (now >= row.expires_at || api_key_state(k, now) == KEY_STATE_EXPIRED)
                        return -EKEYEXPIRED;
                return -ENOKEY;
        }

        /* The UPDATE checked the key too; a revocation committed since cannot matter more than a moment. */
        if (api_key_state(k, now) == KEY_STATE_REVOKED)
                return -EKEYREVOKED;
        *ret_key = TAKE_PTR(k);
        return 0;
}
