/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests the snapshots' pieces that need no root and no bus (issue 26): their ids, their rows in sandboxd's
 * store (kept across a reopen, as across a restart), and the store's migration of an older database. Taking
 * one needs a sandbox: tests/integration/test_snapshots.py. */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "sandbox-snapshot.h"
#include "sandbox-store.h"
#include "test-util.h"

static char dir[] = "/tmp/test-sandbox-snapshot.XXXXXX";

static void test_ids(void) {
        CHECK(snapshot_id_is_valid("sn_abcdefgh23"));
        CHECK(snapshot_id_is_valid("sn_7777777777"));
        CHECK(!snapshot_id_is_valid("sb_abcdefgh23")); /* a sandbox's */
        CHECK(!snapshot_id_is_valid("sn_abcdefgh2"));
        CHECK(!snapshot_id_is_valid("sn_abcdefgh234"));
        CHECK(!snapshot_id_is_valid("sn_abcdefgh18")); /* 1 and 8 are not base32 */
        CHECK(!snapshot_id_is_valid("sn_ABCDEFGH23"));
        CHECK(!snapshot_id_is_valid(""));
        CHECK(!snapshot_id_is_valid(NULL));
}

typedef struct Seen {
        unsigned n;
        char names[4][32];
        char images[4][32];
        uint64_t sizes[4];
        uid_t uids[4];
} Seen;

static int collect(const SnapshotRecord *r, void *userdata) {
        Seen *s = userdata;
        if (s->n < 4) {
                snprintf(s->names[s->n], sizeof(s->names[0]), "%s", r->name);
                snprintf(s->images[s->n], sizeof(s->images[0]), "%s", r->image ?: "(null)");
                s->sizes[s->n] = r->size;
                s->uids[s->n] = r->source_uid;
        }
        s->n++;
        return 0;
}

static void test_store_rows(void) {
        char path[256];
        SandboxStore *st = NULL;
        Seen seen = {};

        snprintf(path, sizeof(path), "%s/sandboxd.db", dir);
        CHECK_INT(sandbox_store_open(path, &st), 0);
        if (!st)
                return;
        SnapshotRecord a = { .id = "sn_aaaaaaaaaa", .name = "before-refactor", .source = "sb_bbbbbbbbbb",
                             .type = "small", .owner = "uid:0", .source_uid = 1879048200, .size = 176128,
                             .disk_size = UINT64_C(4) << 30, .created_at = 1790000000000000 };
        SnapshotRecord b = a;
        b.id = "sn_cccccccccc";
        b.name = "later";
        b.image = "py312"; /* a snapshot of an image sandbox: the image is kept with it */
        b.created_at++;
        CHECK_INT(sandbox_store_snapshot_insert(st, &a), 0);
        CHECK_INT(sandbox_store_snapshot_insert(st, &b), 0);
        /* names and ids are unique */
        b.id = "sn_dddddddddd";
        CHECK(sandbox_store_snapshot_insert(st, &b) < 0);
        b.id = "sn_aaaaaaaaaa";
        b.name = "third";
        CHECK(sandbox_store_snapshot_insert(st, &b) < 0);
        sandbox_store_free(st);

        /* across a reopen, oldest first */
        st = NULL;
        CHECK_INT(sandbox_store_open(path, &st), 0);
        if (!st)
                return;
        CHECK_INT(sandbox_store_snapshot_load(st, collect, &seen), 0);
        CHECK_INT(seen.n, 2);
        CHECK_STR(seen.names[0], "before-refactor");
        CHECK_STR(seen.names[1], "later");
        CHECK(seen.sizes[0] == 176128 && seen.uids[0] == 1879048200);
        CHECK_STR(seen.images[0], ""); /* NULL: stored as the host's tree */
        CHECK_STR(seen.images[1], "py312");
        CHECK_INT(sandbox_store_snapshot_delete(st, "sn_aaaaaaaaaa"), 0);
        seen = (Seen) {};
        CHECK_INT(sandbox_store_snapshot_load(st, collect, &seen), 0);
        CHECK_INT(seen.n, 1);
        CHECK_STR(seen.names[0], "later");
        sandbox_store_free(st);
}

/* A database of an earlier sandboxd (schema 2: no paused sandboxes, no snapshots) is migrated: its sandbox
 * loads as running, with no TTL held. One of schema 4 (snapshots without their image) gets the image column,
 * '' (the host's tree) for its rows. */
static int load_sandbox(const SandboxRecord *r, void *userdata) {
        SandboxRecord *out = userdata;
        out->paused_at = r->paused_at;
        out->ttl_left = r->ttl_left;
        out->expires_at = r->expires_at;
        return 0;
}

/* The schemas of earlier sandboxds, as their migrations left them. */
#define SCHEMA_2                                                                                                   \
        "CREATE TABLE sandboxes (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, type TEXT NOT NULL, owner TEXT "  \
        "NOT NULL, uid INTEGER NOT NULL UNIQUE, network TEXT NOT NULL, created_at INTEGER NOT NULL, expires_at "    \
        "INTEGER NOT NULL, init_pid INTEGER NOT NULL, init_start INTEGER NOT NULL, exec_next INTEGER NOT NULL);"   \
        "ALTER TABLE sandboxes ADD COLUMN egress_address TEXT NOT NULL DEFAULT '';"                                \
        "ALTER TABLE sandboxes ADD COLUMN egress_policy TEXT NOT NULL DEFAULT '';"
#define SCHEMA_4                                                                                                   \
        SCHEMA_2 "ALTER TABLE sandboxes ADD COLUMN paused_at INTEGER NOT NULL DEFAULT 0;"                          \
                 "ALTER TABLE sandboxes ADD COLUMN ttl_left INTEGER NOT NULL DEFAULT 0;"                           \
                 "CREATE TABLE snapshots (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, source TEXT NOT NULL, "  \
                 "type TEXT NOT NULL, owner TEXT NOT NULL, source_uid INTEGER NOT NULL, size INTEGER NOT NULL, "   \
                 "disk_size INTEGER NOT NULL, created_at INTEGER NOT NULL);"

/* A database made by sql (ending in its user_version) in dir, then opened by this sandboxd; NULL if not. */
static SandboxStore *open_old(const char *name, const char *sql) {
        char path[256];
        sqlite3 *db = NULL;
        SandboxStore *st = NULL;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        CHECK(sqlite3_open(path, &db) == SQLITE_OK);
        CHECK(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);
        sqlite3_close(db);
        CHECK_INT(sandbox_store_open(path, &st), 0);
        return st;
}

static void test_migration(void) {
        SandboxRecord got = { .paused_at = 1, .ttl_left = 1 };
        SandboxStore *st;

        st = open_old("old.db", SCHEMA_2 "INSERT INTO sandboxes VALUES ('sb_bbbbbbbbbb', 'x', 'small', 'uid:0', "
                                         "1879048200, 'none', 1, 1790000000000000, 42, 7, 1, '', '');"
                                         "PRAGMA user_version = 2;");
        if (!st)
                return;
        CHECK_INT(sandbox_store_load(st, load_sandbox, &got), 0);
        CHECK(got.paused_at == 0 && got.ttl_left == 0 && got.expires_at == 1790000000000000);
        /* paused, then running again */
        CHECK_INT(sandbox_store_set_paused(st, "sb_bbbbbbbbbb", 5, 600, 1790000000000000), 0);
        CHECK_INT(sandbox_store_load(st, load_sandbox, &got), 0);
        CHECK(got.paused_at == 5 && got.ttl_left == 600);
        CHECK_INT(sandbox_store_set_paused(st, "sb_bbbbbbbbbb", 0, 0, 1790000000000123), 0);
        CHECK_INT(sandbox_store_load(st, load_sandbox, &got), 0);
        CHECK(got.paused_at == 0 && got.ttl_left == 0 && got.expires_at == 1790000000000123);
        sandbox_store_free(st);

        /* schema 4 (snapshots without their image): its rows load as of the host's tree */
        st = open_old("old4.db", SCHEMA_4 "INSERT INTO snapshots VALUES ('sn_aaaaaaaaaa', 'old', 'sb_bbbbbbbbbb', "
                                          "'small', 'uid:0', 1879048200, 4096, 1073741824, 1);"
                                          "PRAGMA user_version = 4;");
        if (!st)
                return;
        Seen seen = {};
        CHECK_INT(sandbox_store_snapshot_load(st, collect, &seen), 0);
        CHECK_INT(seen.n, 1);
        CHECK_STR(seen.names[0], "old");
        CHECK_STR(seen.images[0], "");
        sandbox_store_free(st);
}

int main(void) {
        test_mkdtemp(dir);
        test_ids();
        test_store_rows();
        test_migration();
        test_rm_rf(dir);
        return test_finish("test-sandbox-snapshot");
}
