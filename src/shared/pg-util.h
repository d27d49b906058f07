/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A PostgreSQL connection through libpq for the stores that may live there (docs/scale-out.md): reconnects
 * at most once a second, creates its tables on each new connection, runs statements with binary results. */
#pragma once

#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>

#include "macro.h"

/* The negated errno of every call while the server cannot be reached. */
#define PG_UNAVAILABLE ENOTCONN

typedef struct PgConn PgConn;

/* Whether s is a libpq URI, postgresql://… or postgres://…: 0, or -EINVAL with *ret_error (may be NULL)
 * saying why. */
int pg_check_url(const char *s, char **ret_error);

/* A connection to url for application_name, running schema_sql (idempotent: CREATE … IF NOT EXISTS, in
 * one transaction) on every new connection. Connects now; a server that cannot be reached is not an error
 * here (calls then fail with -PG_UNAVAILABLE until it is back). -EINVAL for a bad URI; -EIO if the server
 * refuses the schema. */
int pg_conn_new(const char *url, const char *application_name, const char *schema_sql, PgConn **ret);
PgConn *pg_conn_free(PgConn *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(PgConn *, pg_conn_free);
/* libpq's last message (connection or statement), without its newline; "" if none. */
const char *pg_conn_error(PgConn *c);

/* One parameter: text (length 0), or length bytes of binary (bytea). value NULL: SQL NULL. */
typedef struct PgParam {
        const char *value;
        int length;
} PgParam;

#define PG_U64_PARAM(buf, v)                                                           \
        (PgParam) {                                                                    \
                .value = (snprintf(buf, sizeof(buf), "%" PRIu64, (uint64_t) (v)), buf) \
        }

/* Runs sql with params; results are binary. A connection found broken is made again once and the statement
 * sent again (callers' statements must be safe to repeat). Returns 0 and the result (PQclear it), or:
 * -PG_UNAVAILABLE, -EEXIST (unique violation), -EBUSY (timeout, serialization failure, deadlock), -EIO.
 * sql may hold several statements only without params. */
int pg_query(PgConn *c, const char *sql, const PgParam *params, int n, PGresult **ret);

PGresult *pg_result_free(PGresult *res);
DEFINE_TRIVIAL_CLEANUP_FUNC(PGresult *, pg_result_free);

/* A binary bigint/int8 column (0 if NULL), a text column (NULL if NULL), a binary boolean column. */
uint64_t pg_u64(const PGresult *res, int row, int col);
const char *pg_text(const PGresult *res, int row, int col);
bool pg_bool(const PGresult *res, int row, int col);
