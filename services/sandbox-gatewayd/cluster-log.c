/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* GET /v1/log across hosts (ClusterLog=yes): pages of every host's audit rows from their copy in PostgreSQL.
 */
#include "cluster-log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "audit-pg.h"
#include "http-util.h"
#include "pg-util.h"

struct ClusterLog {
        PgConn *conn;
};

int cluster_log_open(const char *url, ClusterLog **ret) {
        _cleanup_free_ ClusterLog *c = calloc(1, sizeof(ClusterLog));
        int r;

        if (!c)
                return -ENOMEM;
        r = pg_conn_new(url, "sandbox-gatewayd", AUDIT_PG_SCHEMA_SQL, &c->conn);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

ClusterLog *cluster_log_free(ClusterLog *c) {
        if (!c)
                return NULL;
        pg_conn_free(c->conn);
        free(c);
        return NULL;
}

/* {"a","b"} for text[]: sandbox ids need no quoting, but quote anyway so that nothing else can break out. */
static char *text_array(char **l) {
        size_t size = 3;
        char *t, *p;

        for (char **i = l; *i; i++)
                size += 2 * strlen(*i) + 3;
        t = p = malloc(size);
        if (!t)
                return NULL;
        *p++ = '{';
        for (char **i = l; *i; i++) {
                if (i != l)
                        *p++ = ',';
                *p++ = '"';
                for (const char *c = *i; *c; c++) {
                        if (*c == '"' || *c == '\\')
                                *p++ = '\\';
                        *p++ = *c;
                }
                *p++ = '"';
        }
        *p++ = '}';
        *p = 0;
        return t;
}

/* detail and output_truncated are JSON text: parsed, as GET /v1/log shows them. */
static json_object *json_from_text(const char *s) {
        json_object *v = s ? json_tokener_parse(s) : NULL;
        return v || !s || streq(s, "null") ? v : json_object_new_string(s);
}

int cluster_log_page(ClusterLog *c, const ClusterLogQuery *q, json_object **ret_entries) {
        _cleanup_(pg_result_freep) PGresult *res = NULL;
        _cleanup_free_ char *sessions = NULL;
        char since[32], until[32], limit[32], offset[32];
        json_object *entries;
        int r;

        if (!c || !q || !ret_entries)
                return -EINVAL;
        if (q->sessions && !(sessions = text_array(q->sessions)))
                return -ENOMEM;
        r = pg_query(
                c->conn,
                "SELECT host, id, session_id, account_id, source, operation, event, detail, "
                "detail_truncated, "
                "exit_code::bigint, output_truncated, started_at, duration_usec, request_id FROM audit_rows "
                "WHERE ($1::text IS NULL OR account_id = $1) AND ($2::text IS NULL OR operation = $2) "
                "AND ($3::text IS NULL OR source = $3) AND ($4::text IS NULL OR event = $4) "
                "AND ($5::text IS NULL OR session_id = $5) AND ($6::text[] IS NULL OR session_id = ANY($6)) "
                "AND ($7::bigint IS NULL OR started_at >= $7) AND ($8::bigint IS NULL OR started_at < $8) "
                "ORDER BY recorded_at DESC, host, id DESC LIMIT $9 OFFSET $10",
                (PgParam[]){{q->account_id},
                            {q->operation},
                            {q->source},
                            {q->event},
                            {q->session_id},
                            {sessions},
                            q->has_since ? PG_U64_PARAM(since, q->since) : (PgParam){},
                            q->has_until ? PG_U64_PARAM(until, q->until) : (PgParam){},
                            PG_U64_PARAM(limit, q->limit),
                            PG_U64_PARAM(offset, q->offset)},
                10, &res);
        if (r < 0)
                return r;
        entries = json_object_new_array();
        if (!entries)
                return -ENOMEM;
        for (int i = 0; i < PQntuples(res); i++) {
                json_object *o = json_object_new_object();
                if (!o) {
                        json_object_put(entries);
                        return -ENOMEM;
                }
                json_object_object_add(o, "host", json_object_new_string(pg_text(res, i, 0)));
                json_object_object_add(o, "id", json_object_new_uint64(pg_u64(res, i, 1)));
                json_object_object_add(o, "session_id", json_object_new_string(pg_text(res, i, 2)));
                json_object_object_add(o, "account_id", json_object_new_string(pg_text(res, i, 3)));
                json_object_object_add(o, "source", json_object_new_string(pg_text(res, i, 4)));
                json_object_object_add(o, "operation", json_object_new_string(pg_text(res, i, 5)));
                json_object_object_add(o, "event", json_object_new_string(pg_text(res, i, 6)));
                json_object_object_add(o, "detail", json_from_text(pg_text(res, i, 7)));
                json_object_object_add(o, "detail_truncated", json_object_new_boolean(pg_bool(res, i, 8)));
                json_object_object_add(o, "exit_code", json_object_new_int((int32_t) pg_u64(res, i, 9)));
                json_object_object_add(o, "output_truncated", json_from_text(pg_text(res, i, 10)));
                json_object_object_add(o, "started_at", json_time(pg_u64(res, i, 11)));
                json_object_object_add(o, "duration_ms", json_object_new_uint64(pg_u64(res, i, 12) / 1000));
                json_object_object_add(o, "request_id", json_object_new_string(pg_text(res, i, 13) ?: ""));
                json_object_array_add(entries, o);
        }
        *ret_entries = entries;
        return 0;
}
