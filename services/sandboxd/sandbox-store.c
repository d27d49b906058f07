/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd's own state in SQLite: the sandboxes that must survive a restart.
 *
 * One module owns the handle and its prepared statements. WAL with synchronous=NORMAL: a commit
 * survives a crash of any process (kill -9), and a power loss may lose the last transactions. */
#include "sandbox-store.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>

#include "macro.h"
#include "sqlite-util.h"

struct SandboxStore {
        sqlite3 *db;
        sqlite3_stmt *insert, *delete, *set_expiry, *set_exec_next, *set_egress_policy, *set_paused, *load,
                     *snap_insert, *snap_delete, *snap_load;
};

/* Append-only: each entry moves the schema one version up. */
static const char *const migrations[] = {
        "CREATE TABLE sandboxes ("
        " id TEXT PRIMARY KEY,"
        " name TEXT NOT NULL UNIQUE,"
        " type TEXT NOT NULL,"
        " owner TEXT NOT NULL,"
        " uid INTEGER NOT NULL UNIQUE,"
        " network TEXT NOT NULL,"
        " created_at INTEGER NOT NULL,"
        " expires_at INTEGER NOT NULL,"
        " init_pid INTEGER NOT NULL,"
        " init_start INTEGER NOT NULL,"
        " exec_next INTEGER NOT NULL)",
        /* 2, issue 23: an egress sandbox's address and policy, so that a restart rebuilds its rules. */
        "ALTER TABLE sandboxes ADD COLUMN egress_address TEXT NOT NULL DEFAULT '';"
        "ALTER TABLE sandboxes ADD COLUMN egress_policy TEXT NOT NULL DEFAULT ''",
        /* 3, issue 26: a paused sandbox (paused_at > 0) stays paused across a restart, with the TTL it had
         * left when it was paused (0: none). */
        "ALTER TABLE sandboxes ADD COLUMN paused_at INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE sandboxes ADD COLUMN ttl_left INTEGER NOT NULL DEFAULT 0",
        /* 4, issue 26: snapshots of sandboxes' disks. A row is written only once its image is whole and
         * renamed into place (sandbox-snapshot.c). */
        "CREATE TABLE snapshots ("
        " id TEXT PRIMARY KEY,"
        " name TEXT NOT NULL UNIQUE,"
        " source TEXT NOT NULL,"
        " type TEXT NOT NULL,"
        " owner TEXT NOT NULL,"
        " source_uid INTEGER NOT NULL,"
        " size INTEGER NOT NULL,"
        " disk_size INTEGER NOT NULL,"
        " created_at INTEGER NOT NULL)",
        /* 5: the image whose writable layer a snapshot's disk holds ('': the host's tree), which a sandbox
         * made from it must run on. Rows from before were all of host sandboxes: no build had both
         * images (issue 24) and snapshots (issue 26) until they were merged together with this. */
        "ALTER TABLE snapshots ADD COLUMN image TEXT NOT NULL DEFAULT ''",
};

SandboxStore *sandbox_store_free(SandboxStore *s) {
        if (!s)
                return NULL;
        sqlite3_finalize(s->insert);
        sqlite3_finalize(s->delete);
        sqlite3_finalize(s->set_expiry);
        sqlite3_finalize(s->set_exec_next);
        sqlite3_finalize(s->set_egress_policy);
        sqlite3_finalize(s->set_paused);
        sqlite3_finalize(s->snap_insert);
        sqlite3_finalize(s->snap_delete);
        sqlite3_finalize(s->snap_load);
        sqlite3_finalize(s->load);
        sqlite3_close_v2(s->db);
        free(s);
        return NULL;
}

int sandbox_store_open(const char *path, SandboxStore **ret) {
        SandboxStore *s;
        int r;

        s = calloc(1, sizeof(SandboxStore));
        if (!s)
                return -ENOMEM;
        r = sqlite_open_wal(path, 5000, &s->db);
        if (r < 0)
                goto fail;
        r = sqlite_errno(sqlite3_exec(s->db, "PRAGMA foreign_keys=ON", NULL, NULL, NULL));
        if (r < 0)
                goto fail;
        r = sqlite_migrate(s->db, migrations, ELEMENTSOF(migrations));
        if (r < 0)
                goto fail; /* -EPROTO: written by a newer sandboxd */

        if ((r = sqlite_prepare_persistent(s->db,
                                           "INSERT INTO sandboxes (id, name, type, owner, uid, network,"
                                           " created_at, expires_at, init_pid, init_start, exec_next,"
                                           " egress_address, egress_policy)"
                                           " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                                           &s->insert)) < 0 ||
            (r = sqlite_prepare_persistent(s->db, "DELETE FROM sandboxes WHERE id = ?", &s->delete)) < 0 ||
            (r = sqlite_prepare_persistent(s->db, "UPDATE sandboxes SET expires_at = ? WHERE id = ?",
                                           &s->set_expiry)) < 0 ||
            (r = sqlite_prepare_persistent(s->db, "UPDATE sandboxes SET exec_next = ? WHERE id = ?",
                                           &s->set_exec_next)) < 0 ||
            (r = sqlite_prepare_persistent(s->db, "UPDATE sandboxes SET egress_policy = ? WHERE id = ?",
                                           &s->set_egress_policy)) < 0 ||
            (r = sqlite_prepare_persistent(s->db,
                                           "UPDATE sandboxes SET paused_at = ?, ttl_left = ?, expires_at = ?"
                                           " WHERE id = ?",
                                           &s->set_paused)) < 0 ||
            (r = sqlite_prepare_persistent(s->db,
                                           "INSERT INTO snapshots (id, name, source, type, owner, source_uid,"
                                           " size, disk_size, created_at, image) VALUES (?,?,?,?,?,?,?,?,?,?)",
                                           &s->snap_insert)) < 0 ||
            (r = sqlite_prepare_persistent(s->db, "DELETE FROM snapshots WHERE id = ?", &s->snap_delete)) < 0 ||
            (r = sqlite_prepare_persistent(s->db,
                                           "SELECT id, name, source, type, owner, source_uid, size, disk_size,"
                                           " created_at, image FROM snapshots ORDER BY created_at",
                                           &s->snap_load)) < 0 ||
            (r = sqlite_prepare_persistent(s->db,
                                           "SELECT id, name, type, owner, uid, network, created_at,"
                                           " expires_at, init_pid, init_start, exec_next, egress_address,"
                                           " egress_policy, paused_at, ttl_left FROM sandboxes"
                                           " ORDER BY created_at",
                                           &s->load)) < 0)
                goto fail;
        *ret = s;
        return 0;
fail:
        sandbox_store_free(s);
        return r;
}

int sandbox_store_insert(SandboxStore *s, const SandboxRecord *r) {
        sqlite3_stmt *st = s->insert;

        sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, r->name, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, r->type, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, r->owner, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, r->uid);
        sqlite3_bind_text(st, 6, sandbox_network_to_string(r->network), -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 7, (sqlite3_int64) r->created_at);
        sqlite3_bind_int64(st, 8, (sqlite3_int64) r->expires_at);
        sqlite3_bind_int64(st, 9, r->init_pid);
        sqlite3_bind_int64(st, 10, (sqlite3_int64) r->init_start);
        sqlite3_bind_int64(st, 11, (sqlite3_int64) r->exec_next);
        sqlite3_bind_text(st, 12, r->egress_address ?: "", -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 13, r->egress_policy ?: "", -1, SQLITE_STATIC);
        return sqlite_step_done(st);
}

int sandbox_store_delete(SandboxStore *s, const char *id) {
        sqlite3_bind_text(s->delete, 1, id, -1, SQLITE_STATIC);
        return sqlite_step_done(s->delete);
}

int sandbox_store_set_expiry(SandboxStore *s, const char *id, uint64_t expires_at) {
        sqlite3_bind_int64(s->set_expiry, 1, (sqlite3_int64) expires_at);
        sqlite3_bind_text(s->set_expiry, 2, id, -1, SQLITE_STATIC);
        return sqlite_step_done(s->set_expiry);
}

int sandbox_store_set_exec_next(SandboxStore *s, const char *id, uint64_t exec_next) {
        sqlite3_bind_int64(s->set_exec_next, 1, (sqlite3_int64) exec_next);
        sqlite3_bind_text(s->set_exec_next, 2, id, -1, SQLITE_STATIC);
        return sqlite_step_done(s->set_exec_next);
}

int sandbox_store_set_egress_policy(SandboxStore *s, const char *id, const char *policy_json) {
        sqlite3_bind_text(s->set_egress_policy, 1, policy_json, -1, SQLITE_STATIC);
        sqlite3_bind_text(s->set_egress_policy, 2, id, -1, SQLITE_STATIC);
        return sqlite_step_done(s->set_egress_policy);
}

int sandbox_store_set_paused(SandboxStore *s, const char *id, uint64_t paused_at, uint64_t ttl_left,
                             uint64_t expires_at) {
        sqlite3_bind_int64(s->set_paused, 1, (sqlite3_int64) paused_at);
        sqlite3_bind_int64(s->set_paused, 2, (sqlite3_int64) ttl_left);
        sqlite3_bind_int64(s->set_paused, 3, (sqlite3_int64) expires_at);
        sqlite3_bind_text(s->set_paused, 4, id, -1, SQLITE_STATIC);
        return sqlite_step_done(s->set_paused);
}

int sandbox_store_snapshot_insert(SandboxStore *s, const SnapshotRecord *r) {
        sqlite3_stmt *st = s->snap_insert;

        sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, r->name, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, r->source, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, r->type, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, r->owner, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 6, r->source_uid);
        sqlite3_bind_int64(st, 7, (sqlite3_int64) r->size);
        sqlite3_bind_int64(st, 8, (sqlite3_int64) r->disk_size);
        sqlite3_bind_int64(st, 9, (sqlite3_int64) r->created_at);
        sqlite3_bind_text(st, 10, r->image ?: "", -1, SQLITE_STATIC);
        return sqlite_step_done(st);
}

int sandbox_store_snapshot_delete(SandboxStore *s, const char *id) {
        sqlite3_bind_text(s->snap_delete, 1, id, -1, SQLITE_STATIC);
        return sqlite_step_done(s->snap_delete);
}

int sandbox_store_snapshot_load(SandboxStore *s, snapshot_store_cb cb, void *userdata) {
        sqlite3_stmt *st = s->snap_load;
        int rc, r = 0;

        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                SnapshotRecord rec = {
                        .id = (const char *) sqlite3_column_text(st, 0),
                        .name = (const char *) sqlite3_column_text(st, 1),
                        .source = (const char *) sqlite3_column_text(st, 2),
                        .type = (const char *) sqlite3_column_text(st, 3),
                        .owner = (const char *) sqlite3_column_text(st, 4),
                        .source_uid = (uid_t) sqlite3_column_int64(st, 5),
                        .size = (uint64_t) sqlite3_column_int64(st, 6),
                        .disk_size = (uint64_t) sqlite3_column_int64(st, 7),
                        .created_at = (uint64_t) sqlite3_column_int64(st, 8),
                        .image = (const char *) sqlite3_column_text(st, 9),
                };
                r = cb(&rec, userdata);
                if (r < 0)
                        break;
        }
        if (r >= 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
                r = sqlite_errno(rc);
        sqlite3_reset(st);
        return r;
}

int sandbox_store_load(SandboxStore *s, sandbox_store_cb cb, void *userdata) {
        sqlite3_stmt *st = s->load;
        int rc, r = 0;

        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                SandboxRecord rec = {
                        .id = (const char *) sqlite3_column_text(st, 0),
                        .name = (const char *) sqlite3_column_text(st, 1),
                        .type = (const char *) sqlite3_column_text(st, 2),
                        .owner = (const char *) sqlite3_column_text(st, 3),
                        .uid = (uid_t) sqlite3_column_int64(st, 4),
                        .network = sandbox_network_from_string((const char *) sqlite3_column_text(st, 5)),
                        .created_at = (uint64_t) sqlite3_column_int64(st, 6),
                        .expires_at = (uint64_t) sqlite3_column_int64(st, 7),
                        .init_pid = (pid_t) sqlite3_column_int64(st, 8),
                        .init_start = (uint64_t) sqlite3_column_int64(st, 9),
                        .exec_next = (uint64_t) sqlite3_column_int64(st, 10),
                        .egress_address = (const char *) sqlite3_column_text(st, 11),
                        .egress_policy = (const char *) sqlite3_column_text(st, 12),
                        .paused_at = (uint64_t) sqlite3_column_int64(st, 13),
                        .ttl_left = (uint64_t) sqlite3_column_int64(st, 14),
                };
                r = cb(&rec, userdata);
                if (r < 0)
                        break;
        }
        if (r >= 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
                r = sqlite_errno(rc);
        sqlite3_reset(st);
        return r;
}
