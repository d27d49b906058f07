/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A PostgreSQL connection through libpq for the stores that may live there (docs/scale-out.md). */
#include "pg-util.h"

#include <assert.h>
#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "time-util.h"

/* A server that is down is asked again at most this often, so that calls meanwhile fail at once instead of
 * each waiting for a connection attempt. */
#define PG_RECONNECT_USEC USEC_PER_SEC
/* Unless the URI says otherwise: how long one connection attempt may stall the caller's loop, how long one
 * statement may run, and no NOTICEs (libpq would print "already exists, skipping" on every connect). */
#define PG_CONNECT_TIMEOUT_SEC "2"
#define PG_OPTIONS             "-c statement_timeout=5000 -c client_min_messages=warning"

struct PgConn {
        char *url, *application_name, *schema_sql;
        PGconn *conn;
        bool schema_done;
        uint64_t last_attempt; /* CLOCK_MONOTONIC µs of the last connection attempt, 0: none yet */
};

int pg_check_url(const char *s, char **ret_error) {
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
                        *ret_error = strdup(why ?: "libpq cannot parse the URI");
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

PgConn *pg_conn_free(PgConn *c) {
        if (!c)
                return NULL;
        PQfinish(c->conn);
        free(c->url);
        free(c->application_name);
        free(c->schema_sql);
        free(c);
        return NULL;
}

PGresult *pg_result_free(PGresult *res) {
        PQclear(res);
        return NULL;
}

const char *pg_conn_error(PgConn *c) {
        static __thread char buf[512];
        const char *m = c && c->conn ? PQerrorMessage(c->conn) : "";

        snprintf(buf, sizeof(buf), "%s", m ?: "");
        buf[strcspn(buf, "\n")] = 0;
        return buf;
}

/* A live connection with the tables in place, or -PG_UNAVAILABLE. */
static int pg_connect(PgConn *c) {
        /* Ours first: the URI's own settings, expanded from dbname, come later and win. */
        static const char *const keywords[] = {"connect_timeout", "options", "application_name", "dbname",
                                               NULL};
        const char *values[] = {PG_CONNECT_TIMEOUT_SEC, PG_OPTIONS, c->application_name, c->url, NULL};
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        if (c->conn && PQstatus(c->conn) == CONNECTION_OK && c->schema_done)
                return 0;
        if (c->last_attempt > 0 && now - c->last_attempt < PG_RECONNECT_USEC)
                return -PG_UNAVAILABLE;
        c->last_attempt = now;

        PQfinish(c->conn);
        c->schema_done = false;
        c->conn = PQconnectdbParams(keywords, values, 1);
        if (!c->conn)
                return -ENOMEM;
        if (PQstatus(c->conn) != CONNECTION_OK)
                return -PG_UNAVAILABLE;
        _cleanup_(pg_result_freep) PGresult *res = PQexec(c->conn, c->schema_sql);
        if (PQresultStatus(res) != PGRES_COMMAND_OK)
                return PQstatus(c->conn) == CONNECTION_OK ? -EIO : -PG_UNAVAILABLE;
        c->schema_done = true;
        return 0;
}

int pg_conn_new(const char *url, const char *application_name, const char *schema_sql, PgConn **ret) {
        _cleanup_(pg_conn_freep) PgConn *c = NULL;
        int r;

        if (!application_name || !schema_sql || !ret)
                return -EINVAL;
        r = pg_check_url(url, NULL);
        if (r < 0)
                return r;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->url = strdup(url);
        c->application_name = strdup(application_name);
        c->schema_sql = strdup(schema_sql);
        if (!c->url || !c->application_name || !c->schema_sql)
                return -ENOMEM;
        r = pg_connect(c);
        if (r < 0 && r != -PG_UNAVAILABLE)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

static int pg_error(PgConn *c, const PGresult *res) {
        const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

        if (PQstatus(c->conn) != CONNECTION_OK)
                return -PG_UNAVAILABLE;
        if (state && streq(state, "23505")) /* unique_violation */
                return -EEXIST;
        if (state && (streq(state, "57014") || streq(state, "40001") || streq(state, "40P01")))
                return -EBUSY; /* statement timeout, serialization failure, deadlock */
        return -EIO;
}

int pg_query(PgConn *c, const char *sql, const PgParam *params, int n, PGresult **ret) {
        const char *values[16];
        int lengths[16], formats[16];
        int r;

        assert(n >= 0 && n <= (int) ELEMENTSOF(values));
        for (int i = 0; i < n; i++) {
                values[i] = params[i].value;
                lengths[i] = params[i].length;
                formats[i] = params[i].length > 0;
        }
        for (unsigned attempt = 0;; attempt++) {
                r = pg_connect(c);
                if (r < 0)
                        return r;
                PGresult *res = n > 0 ? PQexecParams(c->conn, sql, n, NULL, values, lengths, formats, 1)
                                      : PQexecParams(c->conn, sql, 0, NULL, NULL, NULL, NULL, 1);
                ExecStatusType st = PQresultStatus(res);
                if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
                        *ret = res;
                        return 0;
                }
                r = pg_error(c, res);
                PQclear(res);
                if (r != -PG_UNAVAILABLE || attempt > 0)
                        return r;
                c->last_attempt = 0; /* it worked until now: try once at once */
        }
}

uint64_t pg_u64(const PGresult *res, int row, int col) {
        uint64_t v;

        if (PQgetisnull(res, row, col) || PQgetlength(res, row, col) != (int) sizeof(v))
                return 0;
        memcpy(&v, PQgetvalue(res, row, col), sizeof(v));
        return be64toh(v);
}

const char *pg_text(const PGresult *res, int row, int col) {
        return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

bool pg_bool(const PGresult *res, int row, int col) {
        return !PQgetisnull(res, row, col) && PQgetlength(res, row, col) == 1 &&
               PQgetvalue(res, row, col)[0] == 1;
}
