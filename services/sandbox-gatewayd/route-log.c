/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The audit log's routes: log pages (one sandbox's, or all a key may read), a row's output, watch. */
#include "gatewayd-routes.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit-export.h"
#include "audit-watch.h"
#include "ini-util.h"
#include "log.h"
#include "sandbox-id.h"
#include "sse.h"
#include "time-util.h"

#define LOG_LIMIT_DEFAULT 50
#define LOG_LIMIT_MAX 1000
/* A key limited to some sandboxes pages a merge of their logs: each one's first offset + limit rows. */
#define LOG_MERGED_OFFSET_MAX 10000

/* --- log pages ---------------------------------------------------------------------------------- */

typedef struct LogQuery {
        const char *session_id; /* from the path, or the query */
        uint64_t limit, offset;
        char *text[5];          /* account_id, operation, source, event, session_id (query); copies, as a
                                 * queued call is built after the query may be gone */
        uint64_t since, until, after_id, before_id;
        bool has_since, has_until, has_after, has_before;

        /* /v1/log with a key limited to some sandboxes: one GetLog per sandbox, merged by id */
        char **scope;           /* the key's sandboxes, NULL otherwise */
        size_t next_build, n_pending;
        json_object *merged;
        bool failed;
} LogQuery;

static void log_query_free(void *p) {
        LogQuery *q = p;

        if (!q)
                return;
        for (size_t i = 0; i < ELEMENTSOF(q->text); i++)
                free(q->text[i]);
        strv_free(q->scope);
        json_object_put(q->merged);
        free(q);
}

static const char *const text_filters[] = { "account_id", "operation", "source", "event", "session_id" };

static int build_get_log(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        LogQuery *q = r->data;
        int k;

        /* calls are built in the order they were made, so the n-th build is the n-th sandbox's */
        const char *session = q->scope ? q->scope[q->next_build++] : q->session_id;

        k = sd_bus_message_open_container(m, 'a', "{sv}");
        if (k >= 0 && session)
                k = sd_bus_message_append(m, "{sv}", "session_id", "s", session);
        for (size_t i = 0; k >= 0 && i < ELEMENTSOF(text_filters); i++)
                if (q->text[i] && !(i == 4 && session))
                        k = sd_bus_message_append(m, "{sv}", text_filters[i], "s", q->text[i]);
        if (k >= 0 && q->has_since)
                k = sd_bus_message_append(m, "{sv}", "since", "t", q->since);
        if (k >= 0 && q->has_until)
                k = sd_bus_message_append(m, "{sv}", "until", "t", q->until);
        if (k >= 0 && q->has_after)
                k = sd_bus_message_append(m, "{sv}", "after_id", "t", q->after_id);
        if (k >= 0 && q->has_before)
                /* before_id ≥ 1 (checked): the logger's max_id is inclusive */
                k = sd_bus_message_append(m, "{sv}", "max_id", "t", q->before_id - 1);
        if (k >= 0)
                k = sd_bus_message_close_container(m);
        if (k >= 0)
                /* merged pages need every sandbox's first offset + limit rows */
                k = sd_bus_message_append(m, "tt", q->scope ? q->limit + q->offset : q->limit,
                                          q->scope ? UINT64_C(0) : q->offset);
        return k;
}

static int row_id_cmp_desc(const void *a, const void *b) {
        json_object *x = *(json_object *const *) a, *y = *(json_object *const *) b;
        uint64_t i = json_object_get_uint64(json_object_object_get(x, "id")),
                 j = json_object_get_uint64(json_object_object_get(y, "id"));
        return i > j ? -1 : i < j;
}

static void on_log_part(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        LogQuery *q = r->data;
        json_object *o, *entries;
        int k = 0;

        q->n_pending--;
        if (sd_bus_error_is_set(error)) {
                if (!q->failed)
                        req_reply_bus_error(r, error);
                q->failed = true;
        }
        if (!q->failed && reply) {
                k = sd_bus_message_enter_container(reply, 'a', "a{sv}");
                while (k >= 0 && (k = sd_bus_message_peek_type(reply, NULL, NULL)) > 0) {
                        k = audit_row_to_json(reply, &o, NULL);
                        if (k >= 0)
                                json_object_array_add(q->merged, o);
                }
                if (k < 0) {
                        req_reply_errno(r, k);
                        q->failed = true;
                }
        }
        if (q->n_pending > 0 || q->failed)
                return;

        json_object_array_sort(q->merged, row_id_cmp_desc);
        entries = json_object_new_array();
        for (size_t i = q->offset; entries && i < json_object_array_length(q->merged) && i < q->offset + q->limit; i++)
                json_object_array_add(entries, json_object_get(json_object_array_get_idx(q->merged, i)));
        o = json_object_new_object();
        if (!o || !entries) {
                json_object_put(o);
                json_object_put(entries);
                return req_reply_errno(r, -ENOMEM);
        }
        json_object_object_add(o, "entries", entries);
        json_object_object_add(o, "limit", json_object_new_uint64(q->limit));
        json_object_object_add(o, "offset", json_object_new_uint64(q->offset));
        req_reply_json(r, 200, o);
}

static void on_log(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        LogQuery *q = r->data;
        json_object *entries, *o;
        int k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        entries = json_object_new_array();
        if (!entries)
                return req_reply_errno(r, -ENOMEM);
        k = sd_bus_message_enter_container(reply, 'a', "a{sv}");
        while (k >= 0 && (k = sd_bus_message_peek_type(reply, NULL, NULL)) > 0) {
                k = audit_row_to_json(reply, &o, NULL);
                if (k >= 0)
                        json_object_array_add(entries, o);
        }
        if (k < 0) {
                json_object_put(entries);
                return req_reply_errno(r, k);
        }
        o = json_object_new_object();
        json_object_object_add(o, "entries", entries);
        json_object_object_add(o, "limit", json_object_new_uint64(q->limit));
        json_object_object_add(o, "offset", json_object_new_uint64(q->offset));
        req_reply_json(r, 200, o);
}

static int query_uint(Request *r, const char *name, uint64_t *ret, bool *ret_set) {
        const char *v = req_query(r, name);

        if (!v)
                return 0;
        if (parse_decimal(v, ret) < 0) {
                req_reply_error(r, 400, "invalid_request", "The query parameter '%s' must be a number.", name);
                return -EINVAL;
        }
        if (ret_set)
                *ret_set = true;
        return 0;
}

static int query_time(Request *r, const char *name, uint64_t *ret, bool *ret_set) {
        const char *v = req_query(r, name);

        if (!v)
                return 0;
        if (parse_rfc3339_usec(v, ret) < 0) {
                req_reply_error(r, 400, "invalid_request",
                                "The query parameter '%s' must be an RFC 3339 time (2026-10-31T13:03:21Z).", name);
                return -EINVAL;
        }
        *ret_set = true;
        return 0;
}

/* GET /v1/log with ClusterLog=yes: every host's rows, from their copy in PostgreSQL. 0, or answered. */
static int log_cluster(Request *r, LogQuery *q) {
        const ClusterLogQuery cq = {
                .account_id = q->text[0],
                .operation = q->text[1],
                .source = q->text[2],
                .event = q->text[3],
                .session_id = q->text[4],
                .sessions = r->key->sandboxes,
                .has_since = q->has_since,
                .since = q->since,
                .has_until = q->has_until,
                .until = q->until,
                .limit = q->limit,
                .offset = q->offset,
        };
        json_object *entries = NULL, *o;
        int k;

        if (q->has_after || q->has_before) {
                req_reply_error(r, 400, "invalid_request",
                                "'after_id' and 'before_id' name one host's rows: with ClusterLog=yes, page "
                                "GET /v1/log with 'offset', 'since' and 'until'.");
                return 0;
        }
        if (r->key->sandboxes && q->text[4] && !api_key_allows(r->key, GATEWAY_ACTION_LOG_READ, q->text[4])) {
                req_deny(r, 403, "forbidden", NULL, "Sandbox %s is outside this API key's scope.", q->text[4]);
                return 0;
        }
        k = cluster_log_page(r->manager->cluster_log, &cq, &entries);
        if (k < 0) {
                log_msg(LOG_ERR, "Cannot read the audit log's copy in PostgreSQL: %s", strerror(-k));
                req_reply_errno(r, k);
                return 0;
        }
        o = json_object_new_object();
        if (!o) {
                json_object_put(entries);
                return -ENOMEM;
        }
        json_object_object_add(o, "entries", entries);
        json_object_object_add(o, "limit", json_object_new_uint64(q->limit));
        json_object_object_add(o, "offset", json_object_new_uint64(q->offset));
        req_reply_json(r, 200, o);
        return 0;
}

static int log_start(Request *r, const char *session_id) {
        LogQuery *q;

        q = calloc(1, sizeof(LogQuery));
        if (!q)
                return -ENOMEM;
        r->data = q;
        r->data_free = log_query_free;
        q->session_id = session_id;
        q->limit = LOG_LIMIT_DEFAULT;
        if (query_uint(r, "limit", &q->limit, NULL) < 0 || query_uint(r, "offset", &q->offset, NULL) < 0 ||
            query_uint(r, "after_id", &q->after_id, &q->has_after) < 0 ||
            query_uint(r, "before_id", &q->before_id, &q->has_before) < 0 ||
            query_time(r, "since", &q->since, &q->has_since) < 0 ||
            query_time(r, "until", &q->until, &q->has_until) < 0)
                return 0;
        if (q->limit == 0 || q->limit > LOG_LIMIT_MAX) {
                req_reply_error(r, 400, "invalid_request", "The query parameter 'limit' must be from 1 to %d.",
                                LOG_LIMIT_MAX);
                return 0;
        }
        if (q->has_before && q->before_id == 0) {
                req_reply_error(r, 400, "invalid_request",
                                "The query parameter 'before_id' must be at least 1 (no row has an id below 1).");
                return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(text_filters); i++) {
                const char *v = req_query(r, text_filters[i]);
                if (v && !(q->text[i] = strdup(v)))
                        return -ENOMEM;
        }
        if (session_id && q->text[4]) {
                req_reply_error(r, 400, "invalid_request", "Unknown query parameter 'session_id' on this route.");
                return 0;
        }
        if (!session_id && r->manager->cluster_log)
                return log_cluster(r, q);
        /* A key limited to some sandboxes reads only their rows. */
        if (r->key->sandboxes) {
                const char *sid = session_id ?: q->text[4];
                if (sid && !api_key_allows(r->key, GATEWAY_ACTION_LOG_READ, sid)) {
                        req_deny(r, 403, "forbidden", NULL, "Sandbox %s is outside this API key's scope.", sid);
                        return 0;
                }
                if (!sid) {
                        int k;

                        if (q->offset > LOG_MERGED_OFFSET_MAX) {
                                req_reply_error(r, 400, "invalid_request",
                                                "With an API key limited to some sandboxes, 'offset' goes up to %d "
                                                "(or give session_id=).", LOG_MERGED_OFFSET_MAX);
                                return 0;
                        }
                        q->scope = strv_copy(r->key->sandboxes);
                        q->merged = json_object_new_array();
                        if (!q->scope || !q->merged)
                                return -ENOMEM;
                        if (!q->scope[0]) {
                                /* no sandbox at all: an empty page */
                                q->n_pending = 1;
                                on_log_part(r, NULL, NULL);
                                return 0;
                        }
                        for (char **i = q->scope; *i; i++) {
                                k = req_call(r, AUDITD_BUS_NAME, AUDITD_BUS_PATH, AUDITD_LOG_INTERFACE,
                                             "GetLog", build_get_log, on_log_part, 0);
                                if (k < 0) {
                                        q->failed = true;
                                        return q->n_pending > 0 ? (req_reply_errno(r, k), 0) : k;
                                }
                                q->n_pending++;
                        }
                        return 0;
                }
        }
        return req_call(r, AUDITD_BUS_NAME, AUDITD_BUS_PATH, AUDITD_LOG_INTERFACE, "GetLog", build_get_log,
                        on_log, 0);
}

int route_log_sandbox(Request *r) {
        return log_start(r, req_param(r, 0));
}

int route_log_all(Request *r) {
        return log_start(r, NULL);
}

/* --- row output --------------------------------------------------------------------------------- */

static int build_output(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        return sd_bus_message_append(m, "t", *(uint64_t *) r->data);
}

static void on_output(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        const void *out = NULL, *err = NULL;
        size_t out_size = 0, err_size = 0;
        const char *enc = req_query(r, "encoding");
        bool b64 = enc && streq(enc, "base64");
        json_object *o;
        int k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        k = sd_bus_message_read_array(reply, 'y', &out, &out_size);
        if (k >= 0)
                k = sd_bus_message_read_array(reply, 'y', &err, &err_size);
        if (k < 0)
                return req_reply_errno(r, k);
        o = json_object_new_object();
        if (!o)
                return req_reply_errno(r, -ENOMEM);
        json_object_object_add(o, "id", json_object_new_uint64(*(uint64_t *) r->data));
        json_object_object_add(o, "stdout", json_bytes(out, out_size, b64));
        json_object_object_add(o, "stderr", json_bytes(err, err_size, b64));
        req_reply_json(r, 200, o);
}

int route_log_output(Request *r) {
        const char *enc = req_query(r, "encoding");
        uint64_t *id;

        id = malloc(sizeof(uint64_t));
        if (!id)
                return -ENOMEM;
        r->data = id;
        r->data_free = free;
        if (parse_decimal(req_param(r, 0), id) < 0 || *id == 0) {
                req_reply_error(r, 404, "not_found", "No log row '%s'.", req_param(r, 0));
                return 0;
        }
        if (enc && !streq(enc, "base64") && !streq(enc, "utf-8")) {
                req_reply_error(r, 400, "invalid_request", "The query parameter 'encoding' is utf-8 or base64.");
                return 0;
        }
        if (r->key->sandboxes) {
                /* the row's sandbox is not known before reading it */
                req_deny(r, 403, "forbidden", NULL,
                         "This API key is limited to some sandboxes; read output through their log rows' ids "
                         "with a key for every sandbox.");
                return 0;
        }
        return req_call(r, AUDITD_BUS_NAME, AUDITD_BUS_PATH, AUDITD_LOG_INTERFACE, "GetOutput", build_output,
                        on_output, 0);
}

/* --- watch -------------------------------------------------------------------------------------- */

int route_watch(Request *r) {
        const char *last = req_header(r, "Last-Event-ID");
        uint64_t after = 0;
        int k;

        if (last && parse_decimal(last, &after) < 0) {
                req_reply_error(r, 400, "invalid_request", "Last-Event-ID must be a row id (a number).");
                return 0;
        }
        /* A revoked or expired key's stream ends (docs/security.md, "API keys"): rows carry output heads. */
        k = req_stream_acquire(r);
        if (k < 0)
                return k == -EBUSY ? 0 : k; /* -EBUSY: answered 429 */
        return watcher_start(r, req_param(r, 0), !!last, after);
}

/* --- export ------------------------------------------------------------------------------------- */

/* The run-session export as JSON lines (docs/API.md): the rows after ?since= up to the newest when the
 * request came, oldest first, in id windows of at most EXPORT_PAGE rows (a window whose page is full is
 * halved, one that is not is complete and the next one twice as wide), each page's events queued only
 * while the client has read what was queued before: memory stays at a page and EXPORT_HIGH_WATER bytes,
 * however large the log. */
#define EXPORT_PAGE UINT64_C(200) /* 200 of the largest rows stay below GetLog's 16 MiB reply cap */
#define EXPORT_WINDOW_FIRST UINT64_C(4096)
#define EXPORT_WINDOW_MAX (UINT64_C(1) << 40)
#define EXPORT_HIGH_WATER (1024 * 1024)
#define EXPORT_LOW_WATER (256 * 1024)

typedef struct LogExport {
        Request *req;
        char *session_id;
        uint64_t last, top, window, max;
        bool calling, waiting, streaming;
} LogExport;

static void log_export_free(void *p) {
        LogExport *e = p;

        if (!e)
                return;
        free(e->session_id);
        free(e);
}

static void export_next(LogExport *e);

static int build_export(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        LogExport *e = r->data;
        int k;

        k = sd_bus_message_open_container(m, 'a', "{sv}");
        if (k >= 0 && e->session_id)
                k = sd_bus_message_append(m, "{sv}", "session_id", "s", e->session_id);
        if (k >= 0 && e->streaming && e->last > 0)
                k = sd_bus_message_append(m, "{sv}", "after_id", "t", e->last);
        if (k >= 0 && e->streaming)
                k = sd_bus_message_append(m, "{sv}", "max_id", "t", e->max);
        if (k >= 0)
                k = sd_bus_message_close_container(m);
        if (k >= 0)
                /* before the stream: the newest row only, to know where the export ends */
                k = sd_bus_message_append(m, "tt", e->streaming ? EXPORT_PAGE : UINT64_C(1), UINT64_C(0));
        return k;
}

/* Once the stream has begun, a failure is its last line: the error body. */
static void export_fail(LogExport *e, unsigned status, const char *code, const char *message) {
        _cleanup_free_ char *body = http_error_body(status, code, message, e->req->request_id);

        if (body) {
                (void) sse_send_raw(e->req->sse, body, strlen(body));
                (void) sse_send_raw(e->req->sse, "\n", 1);
        }
        sse_finish(e->req->sse);
}

static int export_row_cmp(const void *a, const void *b) {
        uint64_t x = json_object_get_uint64(json_object_object_get(*(json_object *const *) a, "id")),
                 y = json_object_get_uint64(json_object_object_get(*(json_object *const *) b, "id"));
        return x < y ? -1 : x > y;
}

static void on_export_page(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        LogExport *e = r->data;
        json_object *rows = NULL, *row;
        size_t n;
        int k;

        e->calling = false;
        if (sse_dropped(r->sse))
                return;
        if (sd_bus_error_is_set(error)) {
                unsigned status;
                const char *code;

                http_status_from_bus_error(error->name, &status, &code);
                return export_fail(e, status, code, error->message ?: "The audit log could not be read.");
        }
        rows = json_object_new_array();
        k = rows ? sd_bus_message_enter_container(reply, 'a', "a{sv}") : -ENOMEM;
        while (k >= 0 && (k = audit_export_read_row(reply, &row)) > 0)
                if (json_object_array_add(rows, row) < 0) {
                        json_object_put(row);
                        k = -ENOMEM;
                }
        if (k < 0) {
                json_object_put(rows);
                return export_fail(e, 500, "internal", "Cannot read the audit log's rows.");
        }
        n = json_object_array_length(rows);
        if (n >= EXPORT_PAGE && e->max - e->last > EXPORT_PAGE) {
                /* the window may hold more than a page: a narrower one */
                e->window = MAX((e->max - e->last) / 2, EXPORT_PAGE);
                json_object_put(rows);
                return export_next(e);
        }
        json_object_array_sort(rows, export_row_cmp);
        for (size_t i = 0; k >= 0 && i < n; i++) {
                json_object *events = NULL;

                k = audit_export_events(json_object_array_get_idx(rows, i), &events);
                for (size_t j = 0; k >= 0 && j < json_object_array_length(events); j++) {
                        size_t len;
                        const char *line = json_object_to_json_string_length(
                                json_object_array_get_idx(events, j),
                                JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
                        k = line ? sse_send_raw(r->sse, line, len) : -ENOMEM;
                        if (k >= 0)
                                k = sse_send_raw(r->sse, "\n", 1);
                }
                json_object_put(events);
        }
        json_object_put(rows);
        if (k < 0)
                return sse_dropped(r->sse) ? (void) 0 : export_fail(e, 500, "internal", "Out of memory.");
        e->last = e->max;
        if (n < EXPORT_PAGE / 2)
                e->window = MIN(e->window * 2, EXPORT_WINDOW_MAX);
        if (sse_buffered(r->sse) > EXPORT_HIGH_WATER) {
                e->waiting = true; /* on_export_drained() goes on */
                return;
        }
        export_next(e);
}

static void export_next(LogExport *e) {
        Request *r = e->req;
        int k;

        if (e->last >= e->top) {
                sse_finish(r->sse);
                return;
        }
        e->max = e->top - e->last > e->window ? e->last + e->window : e->top;
        e->calling = true;
        k = req_call(r, AUDITD_BUS_NAME, AUDITD_BUS_PATH, AUDITD_LOG_INTERFACE, "GetLog", build_export,
                     on_export_page, 0);
        if (k < 0) {
                e->calling = false;
                export_fail(e, k == -EBUSY ? 429 : 500, k == -EBUSY ? "too_many_calls" : "internal",
                            "The export could not go on.");
        }
}

static void on_export_drained(void *userdata) {
        LogExport *e = userdata;

        if (!e->waiting || e->calling)
                return;
        e->waiting = false;
        export_next(e);
}

static void on_export_top(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        LogExport *e = r->data;
        json_object *row = NULL;
        int k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        k = sd_bus_message_enter_container(reply, 'a', "a{sv}");
        if (k >= 0)
                k = audit_export_read_row(reply, &row);
        if (k < 0)
                return req_reply_errno(r, k);
        e->top = row ? json_object_get_uint64(json_object_object_get(row, "id")) : 0;
        json_object_put(row);

        k = req_start_stream(r, "application/x-ndjson");
        if (k < 0)
                return req_reply_errno(r, k);
        sse_set_drain_callback(r->sse, EXPORT_LOW_WATER, on_export_drained, e);
        e->streaming = true;
        export_next(e);
}

int route_log_export(Request *r) {
        const char *since = req_query(r, "since"), *sandbox = req_query(r, "sandbox");
        LogExport *e;

        /* the whole log's commands, output sizes and errors: for admins, not for members */
        if (r->key->role != KEY_ROLE_ADMIN) {
                req_deny(r, 403, "forbidden", NULL, "Exporting the audit log needs an admin key.");
                return 0;
        }
        e = calloc(1, sizeof(LogExport));
        if (!e)
                return -ENOMEM;
        r->data = e;
        r->data_free = log_export_free;
        e->req = r;
        e->window = EXPORT_WINDOW_FIRST;
        if (since && parse_decimal(since, &e->last) < 0) {
                req_reply_error(r, 400, "invalid_request",
                                "The query parameter 'since' must be a row id (a number; the rowId of the last "
                                "line you have).");
                return 0;
        }
        if (sandbox && !sandbox_id_is_valid(sandbox)) {
                req_reply_error(r, 400, "invalid_request",
                                "The query parameter 'sandbox' must be a sandbox id (sb_ and 10 characters).");
                return 0;
        }
        if (r->key->sandboxes && (!sandbox || !api_key_allows(r->key, GATEWAY_ACTION_LOG_READ, sandbox))) {
                if (sandbox)
                        req_deny(r, 403, "forbidden", NULL, "Sandbox %s is outside this API key's scope.", sandbox);
                else
                        req_deny(r, 403, "forbidden", NULL,
                                 "This API key is limited to some sandboxes: export one of them (sandbox=).");
                return 0;
        }
        if (sandbox && !(e->session_id = strdup(sandbox)))
                return -ENOMEM;
        return req_call(r, AUDITD_BUS_NAME, AUDITD_BUS_PATH, AUDITD_LOG_INTERFACE, "GetLog", build_export,
                        on_export_top, 0);
}
