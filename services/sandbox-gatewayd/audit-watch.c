/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The audit log live: EntryAdded, each row's REST JSON, the watch streams it feeds, catch-up, heartbeat. */
#include "audit-watch.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "http-server.h"
#include "process-follow.h"
#include "sse.h"

/* Catching up after Last-Event-ID reads pages of this many rows. */
#define CATCH_UP_PAGE 1000

static inline void json_object_putp(json_object **o) {
        json_object_put(*o);
}

int audit_row_to_json(sd_bus_message *m, json_object **ret, uint64_t *ret_id) {
        json_object *o;
        uint64_t id = 0;
        int k;

        o = json_object_new_object();
        if (!o)
                return -ENOMEM;
        k = sd_bus_message_enter_container(m, 'a', "{sv}");
        while (k >= 0 && (k = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                const char *key, *contents;
                json_object *v = NULL;

                k = sd_bus_message_read(m, "s", &key);
                if (k >= 0)
                        k = sd_bus_message_peek_type(m, NULL, &contents);
                if (k < 0)
                        break;
                if (streq(contents, "s")) {
                        const char *s;
                        k = sd_bus_message_read(m, "v", "s", &s);
                        if (k < 0)
                                break;
                        if (streq(key, "detail") || streq(key, "output_truncated")) {
                                v = json_tokener_parse(s);
                                if (!v && !streq(s, "null"))
                                        v = json_object_new_string(s);
                        } else
                                v = json_object_new_string(s);
                } else if (streq(contents, "t")) {
                        uint64_t t;
                        k = sd_bus_message_read(m, "v", "t", &t);
                        if (k < 0)
                                break;
                        if (streq(key, "started_at"))
                                v = json_time(t);
                        else
                                v = json_object_new_uint64(t);
                        if (streq(key, "id"))
                                id = t;
                } else if (streq(contents, "i")) {
                        int32_t i;
                        k = sd_bus_message_read(m, "v", "i", &i);
                        if (k < 0)
                                break;
                        v = json_object_new_int(i);
                } else if (streq(contents, "b")) {
                        int b;
                        k = sd_bus_message_read(m, "v", "b", &b);
                        if (k < 0)
                                break;
                        v = json_object_new_boolean(b);
                } else {
                        k = sd_bus_message_skip(m, "v");
                        if (k < 0)
                                break;
                        k = sd_bus_message_exit_container(m);
                        continue;
                }
                json_object_object_add(o, key, v);
                k = sd_bus_message_exit_container(m);
        }
        if (k >= 0)
                k = sd_bus_message_exit_container(m);
        if (k < 0) {
                json_object_put(o);
                return k;
        }
        *ret = o;
        if (ret_id)
                *ret_id = id;
        return 0;
}

/* --- watchers ----------------------------------------------------------------------------------- */

typedef struct Pending {
        uint64_t id;
        char *text;
} Pending;

struct Watcher {
        Manager *manager;
        Request *req;
        char *session_id;
        uint64_t last_id;      /* the last row sent */
        bool catching_up;      /* rows before Last-Event-ID's successors are being read */
        uint64_t catch_offset;
        Pending *held;         /* live rows that came while catching up, and the catch-up rows */
        size_t n_held, n_alloc;
        Watcher *prev, *next;
};

static void watcher_free(Watcher *w) {
        Manager *m;

        if (!w)
                return;
        m = w->manager;
        if (w->prev)
                w->prev->next = w->next;
        else if (m->watchers == w)
                m->watchers = w->next;
        if (w->next)
                w->next->prev = w->prev;
        for (size_t i = 0; i < w->n_held; i++)
                free(w->held[i].text);
        free(w->held);
        free(w->session_id);
        if (w->req) {
                w->req->on_close = NULL;
                w->req->data = NULL;
                request_unref(w->req);
        }
        free(w);
}

void watchers_free_all(Manager *m) {
        while (m->watchers)
                watcher_free(m->watchers);
}

static void watcher_on_close(Request *r) {
        watcher_free(r->data);
}

static int watcher_hold(Watcher *w, uint64_t id, const char *text) {
        if (w->n_held >= w->n_alloc) {
                size_t a = MAX(w->n_alloc * 2, 16);
                Pending *p = realloc(w->held, a * sizeof(Pending));
                if (!p)
                        return -ENOMEM;
                w->held = p;
                w->n_alloc = a;
        }
        w->held[w->n_held].text = strdup(text);
        if (!w->held[w->n_held].text)
                return -ENOMEM;
        w->held[w->n_held++].id = id;
        return 0;
}

static void watcher_send(Watcher *w, uint64_t id, const char *text, bool catch_up) {
        char idbuf[32];

        if (id <= w->last_id)
                return; /* already sent (catch-up and live overlap) */
        snprintf(idbuf, sizeof(idbuf), "%" PRIu64, id);
        if (catch_up)
                (void) sse_send_unbounded(w->req->sse, idbuf, "entry", text, strlen(text));
        else
                (void) sse_send(w->req->sse, idbuf, "entry", text, strlen(text));
        w->last_id = id;
}

/* Ends a stream with an error event (the error body) after what is queued. */
static void watcher_fail(Request *r, unsigned status, const char *code, const char *message) {
        _cleanup_free_ char *body = http_error_body(status, code, message, r->request_id);

        if (body)
                (void) sse_send_unbounded(r->sse, NULL, "error", body, strlen(body));
        sse_finish(r->sse);
}

static int pending_cmp(const void *a, const void *b) {
        const Pending *x = a, *y = b;
        return x->id < y->id ? -1 : x->id > y->id;
}

static int build_catch_up(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        Watcher *w = r->data;
        int k;

        k = sd_bus_message_append(m, "a{sv}", 2, "session_id", "s", w->session_id, "after_id", "t", w->last_id);
        if (k >= 0)
                k = sd_bus_message_append(m, "tt", (uint64_t) CATCH_UP_PAGE, w->catch_offset);
        return k;
}

static void on_catch_up(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        Watcher *w = r->data;
        size_t n = 0;
        int k;

        if (!w || r->closed)
                return;
        if (sd_bus_error_is_set(error)) {
                unsigned status;
                const char *code;
                http_status_from_bus_error(error->name, &status, &code);
                watcher_fail(r, status, code, error->message);
                return;
        }
        k = sd_bus_message_enter_container(reply, 'a', "a{sv}");
        while (k >= 0 && (k = sd_bus_message_peek_type(reply, NULL, NULL)) > 0) {
                json_object *o;
                uint64_t id;
                k = audit_row_to_json(reply, &o, &id);
                if (k < 0)
                        break;
                k = watcher_hold(w, id, json_text(o, NULL));
                json_object_put(o);
                n++;
        }
        if (k < 0) {
                watcher_fail(r, 500, "internal", "Cannot read the audit log's rows.");
                return;
        }
        if (w->n_held > w->manager->config.watch_queue_max) {
                /* Held in memory and sent at once: more than a stream's queue may hold is refused
                 * rather than sent with a gap. */
                watcher_fail(r, 409, "too_far_behind",
                             "More rows were written after Last-Event-ID than a stream holds (WatchQueueMax=): "
                             "page them from GET /v1/sandboxes/{id}/log?after_id=, then watch again.");
                return;
        }
        if (n == CATCH_UP_PAGE) {
                /* more: the next (older) page; rows are sorted by id before they are sent */
                w->catch_offset += CATCH_UP_PAGE;
                k = req_call(r, AUDITD_BUS_NAME, AUDITD_BUS_PATH, AUDITD_LOG_INTERFACE, "GetLog",
                             build_catch_up, on_catch_up, 0);
                if (k < 0)
                        sse_finish(r->sse);
                return;
        }

        /* Everything after Last-Event-ID, and whatever came live meanwhile, in id order, each once. */
        if (w->n_held > 0) /* held is NULL when nothing came live meanwhile */
                qsort(w->held, w->n_held, sizeof(Pending), pending_cmp);
        w->catching_up = false;
        for (size_t i = 0; i < w->n_held; i++) {
                watcher_send(w, w->held[i].id, w->held[i].text, true);
                free(w->held[i].text);
        }
        w->n_held = 0;
}

static int on_entry_added(sd_bus_message *msg, void *userdata, sd_bus_error *ret_error) {
        Manager *m = userdata;
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *session_id, *text = NULL;
        uint64_t id;
        Watcher *w, *next;
        int k;

        if (!m->watchers)
                return 0;
        k = sd_bus_message_read(msg, "ts", &id, &session_id);
        if (k < 0)
                return 0;
        for (w = m->watchers; w; w = next) {
                next = w->next;
                if (!streq(w->session_id, session_id))
                        continue;
                if (!text) {
                        /* made once, for every watcher of this sandbox */
                        if (audit_row_to_json(msg, &o, NULL) < 0)
                                return 0;
                        text = json_text(o, NULL);
                }
                if (sse_dropped(w->req->sse))
                        continue; /* its connection goes at its timeout; on_close frees it */
                if (w->catching_up)
                        (void) watcher_hold(w, id, text);
                else
                        watcher_send(w, id, text, false);
        }
        return 0;
}

static int on_heartbeat(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        size_t n = 0, f;

        for (Watcher *w = m->watchers; w; w = w->next, n++)
                if (!sse_dropped(w->req->sse))
                        (void) sse_comment(w->req->sse, "heartbeat");
        f = follows_heartbeat(m);
        /* systemctl status shows it */
        (void) sd_notifyf(false,
                          "STATUS=Serving HTTP: %zu watch streams, %zu output follows, %zu bus calls waiting for "
                          "a connection.", n, f, bus_pool_queued(m->pool));
        (void) sd_event_source_set_time_relative(s, m->config.heartbeat_usec);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ON);
        return 0;
}

int watchers_setup(Manager *m) {
        int r;

        r = sd_bus_match_signal(m->signal_bus, &m->entry_match, AUDITD_BUS_NAME, AUDITD_BUS_PATH,
                                AUDITD_LOG_INTERFACE, "EntryAdded", on_entry_added, m);
        if (r < 0)
                return r;
        return sd_event_add_time_relative(m->event, &m->heartbeat, CLOCK_MONOTONIC, m->config.heartbeat_usec, 0,
                                          on_heartbeat, m);
}

int watcher_start(Request *r, const char *session_id, bool catch_up, uint64_t last_id) {
        Watcher *w;
        int k;

        assert(r);
        assert(session_id);

        w = calloc(1, sizeof(Watcher));
        if (!w)
                return -ENOMEM;
        w->manager = r->manager;
        w->session_id = strdup(session_id);
        if (!w->session_id) {
                free(w);
                return -ENOMEM;
        }
        k = req_start_sse(r, (size_t) r->manager->config.watch_queue_max);
        if (k < 0) {
                free(w->session_id);
                free(w);
                return k;
        }
        /* Linked before the catch-up call, so nothing committed from now on can be missed. */
        w->req = request_ref(r);
        r->data = w;
        r->on_close = watcher_on_close;
        w->next = r->manager->watchers;
        if (w->next)
                w->next->prev = w;
        r->manager->watchers = w;
        (void) sse_comment(r->sse, "watching");

        if (catch_up) {
                w->last_id = last_id;
                w->catching_up = true;
                k = req_call(r, AUDITD_BUS_NAME, AUDITD_BUS_PATH, AUDITD_LOG_INTERFACE, "GetLog",
                             build_catch_up, on_catch_up, 0);
                if (k < 0)
                        return k;
        }
        return 0;
}
