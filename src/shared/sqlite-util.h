/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* SQLite helpers for the stores: result codes as errnos, opening in WAL mode, append-only migrations. */
#pragma once

#include <sqlite3.h>
#include <stddef.h>

/* A SQLite result code (primary or extended) as 0 or a negative errno: SQLITE_OK, _ROW and _DONE
 * → 0; _NOMEM → -ENOMEM, _FULL → -ENOSPC, _CONSTRAINT → -EEXIST, _BUSY and _LOCKED → -EBUSY, _READONLY →
 * -EROFS, _CANTOPEN → -EACCES, _TOOBIG → -E2BIG; anything else → -EIO. */
int sqlite_errno(int rc);

/* Opens (creating if need be) the database at path for use from one thread, waits up to
 * busy_timeout_msec for another connection's lock, and sets journal_mode=WAL and synchronous=NORMAL:
 * a commit survives a crash of any process, a power loss may lose the last commits. Returns 0 and
 * *ret (close it with sqlite3_close_v2()), or a negative errno, leaving *ret untouched. */
int sqlite_open_wal(const char *path, int busy_timeout_msec, sqlite3 **ret);

/* Brings the schema to version n: migrations[i] (one or more statements) moves it from version i to
 * i + 1, and the list is append-only. The missing steps and PRAGMA user_version = n, last, run in one
 * BEGIN IMMEDIATE transaction, so two processes opening at once do not both migrate and a failing step
 * leaves the database as it was. Returns 0 (also if there was nothing to do), -EPROTO if the database
 * is newer than n (written by a later version of the program), or a negative errno. */
int sqlite_migrate(sqlite3 *db, const char *const *migrations, size_t n);

/* sqlite3_prepare_v3() with SQLITE_PREPARE_PERSISTENT, for statements kept as long as the handle.
 * Returns 0 and *ret, or a negative errno, leaving *ret untouched. */
int sqlite_prepare_persistent(sqlite3 *db, const char *sql, sqlite3_stmt **ret);

/* Steps a statement that returns no rows that matter, then resets it and clears its bindings, ready for
 * the next use. Returns 0 or a negative errno. */
int sqlite_step_done(sqlite3_stmt *st);
