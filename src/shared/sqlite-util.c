/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* SQLite helpers for the stores: result codes as errnos, opening in WAL mode, append-only migrations. */
#include "sqlite-util.h"

#include <errno.h>
#include <stdio.h>

int sqlite_errno(int rc) {
        switch (rc & 0xff) {
        case SQLITE_OK:
        case SQLITE_DONE:
        case SQLITE_ROW:
                return 0;
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_CONSTRAINT:
                return -EEXIST;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return -EBUSY;
        case SQLITE_READONLY:
                return -EROFS;
        case SQLITE_CANTOPEN:
                return -EACCES;
        case SQLITE_TOOBIG:
                return -E2BIG;
        default:
                return -EIO;
        }
}

int sqlite_open_wal(const char *path, int busy_timeout_msec, sqlite3 **ret) {
        sqlite3 *db = NULL;
        int rc;

        rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             NULL);
        if (rc == SQLITE_OK) {
                (void) sqlite3_busy_timeout(db, busy_timeout_msec);
                rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL", NULL, NULL,
                                  NULL);
        }
        if (rc != SQLITE_OK) {
                sqlite3_close_v2(db); /* a failed open still allocates a handle, unless out of memory */
                return sqlite_errno(rc);
        }
        *ret = db;
        return 0;
}

static int user_version(sqlite3 *db, int *ret) {
        sqlite3_stmt *st;
        int rc, version = 0;

        rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_errno(rc);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                version = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                return sqlite_errno(rc);
        *ret = version;
        return 0;
}

int sqlite_migrate(sqlite3 *db, const char *const *migrations, size_t n) {
        char pragma[64];
        int version = 0, rc, r; /* user_version() sets it; -O3 cannot see that it always does */

        /* Up to date is the common case: it needs no write lock. */
        r = user_version(db, &version);
        if (r < 0)
                return r;
        if (version < 0 || (size_t) version > n)
                return -EPROTO;
        if ((size_t) version == n)
                return 0;

        rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                return sqlite_errno(rc);
        /* Again, inside the transaction: another process may have migrated since we looked. */
        r = user_version(db, &version);
        if (r >= 0 && (version < 0 || (size_t) version > n))
                r = -EPROTO;
        if (r < 0) {
                (void) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
                return r;
        }
        for (size_t i = (size_t) version; i < n; i++) {
                rc = sqlite3_exec(db, migrations[i], NULL, NULL, NULL);
                if (rc != SQLITE_OK)
                        goto rollback;
        }
        if ((size_t) version < n) {
                snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %zu", n);
                rc = sqlite3_exec(db, pragma, NULL, NULL, NULL);
                if (rc != SQLITE_OK)
                        goto rollback;
        }
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
        if (rc == SQLITE_OK)
                return 0;
rollback:
        (void) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return sqlite_errno(rc);
}

int sqlite_prepare_persistent(sqlite3 *db, const char *sql, sqlite3_stmt **ret) {
        sqlite3_stmt *st;
        int rc;

        rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_errno(rc);
        *ret = st;
        return 0;
}

int sqlite_step_done(sqlite3_stmt *st) {
        int r = sqlite_errno(sqlite3_step(st));

        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        return r;
}
