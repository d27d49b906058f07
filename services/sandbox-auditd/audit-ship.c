/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-auditd's copy of its rows in PostgreSQL ([PostgreSQL] URL=): in id order, each row once
 * (docs/scale-out.md). */
#include "audit-ship.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit-pg.h"

struct AuditShip {
        PgConn *conn;
        char *host;
        bool cursor_known;
        uint64_t cursor; /* the newest id of this host PostgreSQL holds */
};

AuditShip *audit_ship_free(AuditShip *s) {
        if (!s)
                return NULL;
        pg_conn_free(s->conn);
        free(s->host);
        free(s);
        return NULL;
}

int audit_ship_new(const char *url, const char *host, AuditShip **ret) {
        _cleanup_(audit_ship_freep) AuditShip *s = NULL;
        int r;

        if (!host || !host[0] || strlen(host) > 255 || !ret)
                return -EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->host = strdup(host);
        if (!s->host)
                return -ENOMEM;
        r = pg_conn_new(url, "sandbox-auditd", AUDIT_PG_SCHEMA_SQL, &s->conn);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

const char *audit_ship_error(AuditShip *s) {
        return pg_conn_error(s ? s->conn : NULL);
}

static int exec_simple(AuditShip *s, const char *sql) {
        _cleanup_(pg_result_freep) PGresult *res = NULL;
        return pg_query(s->conn, sql, NULL, 0, &res);
}

typedef struct Batch {
        AuditShip *ship;
        uint64_t newest;
        unsigned n;
} Batch;

static int insert_row(const AuditEntry *e, void *userdata) {
        _cleanup_(pg_result_freep) PGresult *res = NULL;
        Batch *b = userdata;
        char id[32], code[16], started[32], duration[32], recorded[32];

        snprintf(code, sizeof(code), "%" PRIi32, e->exit_code);
        int r = pg_query(
                b->ship->conn,
                "INSERT INTO audit_rows (host, id, session_id, account_id, source, operation, event, "
                "detail, exit_code, output_truncated, started_at, duration_usec, recorded_at, request_id, "
                "detail_truncated) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, "
                "$15) "
                "ON CONFLICT (host, id) DO NOTHING",
                (PgParam[]){{b->ship->host},
                            PG_U64_PARAM(id, e->id),
                            {strempty(e->session_id)},
                            {strempty(e->account_id)},
                            {strempty(e->source)},
                            {strempty(e->operation)},
                            {strempty(e->event)},
                            {strempty(e->detail)},
                            {code},
                            {e->output_truncated},
                            PG_U64_PARAM(started, e->started_at),
                            PG_U64_PARAM(duration, e->duration_usec),
                            PG_U64_PARAM(recorded, e->recorded_at),
                            {e->request_id},
                            {e->detail_truncated ? "t" : "f"}},
                15, &res);
        if (r < 0)
                return r;
        b->newest = MAX(b->newest, e->id);
        b->n++;
        return 0;
}

static int read_cursor(AuditShip *s) {
        _cleanup_(pg_result_freep) PGresult *res = NULL;
        int r;

        r = pg_query(s->conn, "SELECT coalesce(max(id), 0)::bigint FROM audit_rows WHERE host = $1",
                     (PgParam[]){{s->host}}, 1, &res);
        if (r < 0)
                return r;
        s->cursor = pg_u64(res, 0, 0);
        s->cursor_known = true;
        return 0;
}

int audit_ship_step(AuditShip *s, AuditStore *store, unsigned max_rows) {
        Batch b = {.ship = s};
        uint64_t top;
        int r;

        if (!s || !store || max_rows == 0 || max_rows > AUDIT_LIMIT_MAX)
                return -EINVAL;
        if (!s->cursor_known) {
                r = read_cursor(s);
                if (r < 0)
                        return r;
        }
        r = audit_store_max_id(store, &top);
        if (r < 0)
                return r;
        if (top <= s->cursor)
                return 0;

        /* The next max_rows ids; ids are never reused, so a window without rows (retention removed them
         * before they were copied) is passed over for good. */
        for (;;) {
                AuditFilter f = {
                        .has_after_id = true,
                        .after_id = s->cursor,
                        .has_max_id = true,
                        .max_id = top - s->cursor > max_rows ? s->cursor + max_rows : top,
                };

                r = exec_simple(s, "BEGIN");
                if (r < 0)
                        goto fail;
                r = audit_store_query(store, &f, max_rows, 0, insert_row, &b);
                if (r < 0)
                        goto fail;
                r = exec_simple(s, "COMMIT");
                if (r < 0)
                        goto fail;
                if (b.n > 0) {
                        s->cursor = b.newest;
                        return (int) b.n;
                }
                s->cursor = f.max_id;
                if (f.max_id == top)
                        return 0;
        }

fail:
        (void) exec_simple(s, "ROLLBACK");
        s->cursor_known = false; /* whatever happened, PostgreSQL says where to go on */
        return r;
}
