/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for sqlite-util: errno mapping, opening in WAL mode, migrations applied once and atomically. */
#include <errno.h>
#include <ftw.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "macro.h"
#include "sqlite-util.h"
#include "test-util.h"

static char tmpdir[] = "/tmp/test-sqlite-util.XXXXXX";

static const char *db_path(const char *name) {
        static char buf[512];
        snprintf(buf, sizeof(buf), "%s/%s", tmpdir, name);
        return buf;
}

/* The first column of the first row of sql, or -1. */
static long long query_int(sqlite3 *db, const char *sql) {
        sqlite3_stmt *st;
        long long v = -1;

        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
                return -1;
        if (sqlite3_step(st) == SQLITE_ROW)
                v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        return v;
}

static const char *query_text(sqlite3 *db, const char *sql) {
        static char buf[64];
        sqlite3_stmt *st;

        buf[0] = 0;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
                return NULL;
        if (sqlite3_step(st) == SQLITE_ROW)
                snprintf(buf, sizeof(buf), "%s", (const char *) sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        return buf;
}

static void test_errno(void) {
        CHECK_INT(sqlite_errno(SQLITE_OK), 0);
        CHECK_INT(sqlite_errno(SQLITE_ROW), 0);
        CHECK_INT(sqlite_errno(SQLITE_DONE), 0);
        CHECK_INT(sqlite_errno(SQLITE_NOMEM), -ENOMEM);
        CHECK_INT(sqlite_errno(SQLITE_FULL), -ENOSPC);
        CHECK_INT(sqlite_errno(SQLITE_CONSTRAINT), -EEXIST);
        CHECK_INT(sqlite_errno(SQLITE_CONSTRAINT_UNIQUE), -EEXIST); /* extended codes by their primary */
        CHECK_INT(sqlite_errno(SQLITE_BUSY), -EBUSY);
        CHECK_INT(sqlite_errno(SQLITE_BUSY_SNAPSHOT), -EBUSY);
        CHECK_INT(sqlite_errno(SQLITE_LOCKED), -EBUSY);
        CHECK_INT(sqlite_errno(SQLITE_READONLY), -EROFS);
        CHECK_INT(sqlite_errno(SQLITE_CANTOPEN), -EACCES);
        CHECK_INT(sqlite_errno(SQLITE_TOOBIG), -E2BIG);
        CHECK_INT(sqlite_errno(SQLITE_IOERR), -EIO);
        CHECK_INT(sqlite_errno(SQLITE_IOERR_FSYNC), -EIO);
        CHECK_INT(sqlite_errno(SQLITE_CORRUPT), -EIO);
        CHECK_INT(sqlite_errno(SQLITE_ERROR), -EIO);
}

static void test_open(void) {
        sqlite3 *db = NULL, *untouched = (sqlite3 *) 0x1;

        CHECK_INT(sqlite_open_wal(db_path("open.db"), 1000, &db), 0);
        CHECK(db);
        if (!db)
                return;
        CHECK(streq(query_text(db, "PRAGMA journal_mode"), "wal"));
        CHECK_INT(query_int(db, "PRAGMA synchronous"), 1); /* NORMAL */
        CHECK_INT(query_int(db, "PRAGMA busy_timeout"), 1000);
        sqlite3_close_v2(db);

        /* a directory that does not exist: an errno, and *ret untouched */
        CHECK_INT(sqlite_open_wal(db_path("missing/open.db"), 1000, &untouched), -EACCES);
        CHECK(untouched == (sqlite3 *) 0x1);
}

static const char *const migrations[] = {
        "CREATE TABLE a (x INTEGER NOT NULL)",
        "ALTER TABLE a ADD COLUMN y TEXT; CREATE INDEX a_y ON a (y)",
        "INSERT INTO a (x, y) VALUES (1, 'one')",
};

static sqlite3 *open_db(const char *name) {
        sqlite3 *db = NULL;

        if (sqlite_open_wal(db_path(name), 1000, &db) < 0) {
                fprintf(stderr, "cannot open %s\n", db_path(name));
                exit(EXIT_FAILURE);
        }
        return db;
}

static void test_migrate(void) {
        sqlite3 *db = open_db("migrate.db");

        /* from nothing to the newest version, and each step exactly once */
        CHECK_INT(sqlite_migrate(db, migrations, ELEMENTSOF(migrations)), 0);
        CHECK_INT(query_int(db, "PRAGMA user_version"), 3);
        CHECK_INT(query_int(db, "SELECT count(*) FROM a"), 1);
        CHECK_INT(query_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'a_y'"), 1);
        CHECK(sqlite3_get_autocommit(db)); /* no transaction left open */

        /* again, on the same handle and after re-opening: nothing to do */
        CHECK_INT(sqlite_migrate(db, migrations, ELEMENTSOF(migrations)), 0);
        sqlite3_close_v2(db);
        db = open_db("migrate.db");
        CHECK_INT(sqlite_migrate(db, migrations, ELEMENTSOF(migrations)), 0);
        CHECK_INT(query_int(db, "PRAGMA user_version"), 3);
        CHECK_INT(query_int(db, "SELECT count(*) FROM a"), 1);
        sqlite3_close_v2(db);

        /* a program that knows fewer steps finds the database newer than itself */
        db = open_db("migrate.db");
        CHECK_INT(sqlite_migrate(db, migrations, 2), -EPROTO);
        CHECK_INT(query_int(db, "PRAGMA user_version"), 3);
        CHECK(sqlite3_get_autocommit(db));
        sqlite3_close_v2(db);

        /* stepwise: a database at version 1 gets only the steps after it */
        db = open_db("stepwise.db");
        CHECK_INT(sqlite_migrate(db, migrations, 1), 0);
        CHECK_INT(query_int(db, "PRAGMA user_version"), 1);
        CHECK_INT(query_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'a_y'"), 0);
        CHECK_INT(sqlite_migrate(db, migrations, ELEMENTSOF(migrations)), 0);
        CHECK_INT(query_int(db, "PRAGMA user_version"), 3);
        CHECK_INT(query_int(db, "SELECT x FROM a WHERE y = 'one'"), 1);
        sqlite3_close_v2(db);

        /* no steps at all: version 0 stays */
        db = open_db("empty.db");
        CHECK_INT(sqlite_migrate(db, NULL, 0), 0);
        CHECK_INT(query_int(db, "PRAGMA user_version"), 0);
        sqlite3_close_v2(db);
}

static void test_migrate_failure(void) {
        static const char *const failing[] = {
                "CREATE TABLE a (x INTEGER NOT NULL)",
                "CREATE TABLE b (x INTEGER); INSERT INTO b VALUES (1)",
                "INSERT INTO a (x) VALUES (NULL)", /* violates NOT NULL */
        };
        sqlite3 *db = open_db("failing.db");

        CHECK_INT(sqlite_migrate(db, failing, 1), 0);
        CHECK_INT(query_int(db, "PRAGMA user_version"), 1);

        /* step 2 succeeds and step 3 fails: all of it is rolled back, the version stays */
        CHECK_INT(sqlite_migrate(db, failing, ELEMENTSOF(failing)), -EEXIST);
        CHECK(sqlite3_get_autocommit(db));
        CHECK_INT(query_int(db, "PRAGMA user_version"), 1);
        CHECK_INT(query_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'b'"), 0);
        CHECK_INT(query_int(db, "SELECT count(*) FROM a"), 0);

        /* a syntax error is an I/O error of sorts, and changes nothing either */
        static const char *const broken[] = {
                "CREATE TABLE a (x INTEGER NOT NULL)",
                "CREATE TABLOID c (x)",
        };
        CHECK_INT(sqlite_migrate(db, broken, ELEMENTSOF(broken)), -EIO);
        CHECK_INT(query_int(db, "PRAGMA user_version"), 1);
        sqlite3_close_v2(db);

        /* after a fix the migration goes through */
        db = open_db("failing.db");
        static const char *const fixed[] = { "CREATE TABLE a (x INTEGER NOT NULL)", "CREATE TABLE c (x)" };
        CHECK_INT(sqlite_migrate(db, fixed, ELEMENTSOF(fixed)), 0);
        CHECK_INT(query_int(db, "PRAGMA user_version"), 2);
        sqlite3_close_v2(db);
}

/* Another connection holding the write lock: the migration waits for the busy timeout, then -EBUSY. */
static void test_migrate_busy(void) {
        sqlite3 *db = NULL, *other = open_db("busy.db");

        CHECK_INT(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
        CHECK_INT(sqlite_open_wal(db_path("busy.db"), 50, &db), 0);
        if (db) {
                CHECK_INT(sqlite_migrate(db, migrations, ELEMENTSOF(migrations)), -EBUSY);
                CHECK_INT(sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
                CHECK_INT(sqlite_migrate(db, migrations, ELEMENTSOF(migrations)), 0);
                CHECK_INT(query_int(other, "PRAGMA user_version"), 3);
                sqlite3_close_v2(db);
        }
        sqlite3_close_v2(other);
}

static void test_statements(void) {
        sqlite3 *db = open_db("statements.db");
        sqlite3_stmt *insert = NULL, *untouched = (sqlite3_stmt *) 0x1;

        CHECK_INT(sqlite_migrate(db, migrations, 1), 0);
        CHECK_INT(sqlite_prepare_persistent(db, "SELECT nothing FROM nowhere", &untouched), -EIO);
        CHECK(untouched == (sqlite3_stmt *) 0x1);
        CHECK_INT(sqlite_prepare_persistent(db, "INSERT INTO a (x) VALUES (?)", &insert), 0);
        CHECK(insert);
        if (insert) {
                sqlite3_bind_int(insert, 1, 7);
                CHECK_INT(sqlite_step_done(insert), 0);
                /* the bindings are cleared: NULL violates NOT NULL */
                CHECK_INT(sqlite_step_done(insert), -EEXIST);
                sqlite3_bind_int(insert, 1, 8);
                CHECK_INT(sqlite_step_done(insert), 0);
                sqlite3_finalize(insert);
        }
        CHECK_INT(query_int(db, "SELECT sum(x) FROM a"), 15);
        sqlite3_close_v2(db);
}

int main(void) {
        test_mkdtemp(tmpdir);

        test_errno();
        test_open();
        test_migrate();
        test_migrate_failure();
        test_migrate_busy();
        test_statements();

        test_rm_rf(tmpdir);
        return test_finish("test-sqlite-util");
}
