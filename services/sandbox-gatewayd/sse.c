/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Server-Sent Events on a request: the event queue and its framing, the reader, streams bound to keys. */
#include "sse.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "key-sessions.h"
#include "log.h"

struct SseStream {
        Request *req;
        char *buf;
        size_t size, alloc, off;
        size_t n_events, max_events;
        bool finished, dropped, reader_suspended;
        char last_sent[2];                /* the last two bytes the client was given ("\n\n" at first) */
        void (*on_drain)(void *userdata); /* the client read what was queued, down to low_water bytes */
        void *drain_userdata;
        size_t low_water;
        /* While the stream sleeps MHD does not look at its socket: this notices a client that leaves. */
        sd_event_source *hangup;
};

SseStream *sse_free(SseStream *s) {
        if (!s)
                return NULL;
        sd_event_source_disable_unref(s->hangup);
        free(s->buf);
        free(s);
        return NULL;
}

void sse_detach(SseStream *s) {
        if (!s)
                return;
        s->reader_suspended = false;
        /* MHD closes the socket after this */
        s->hangup = sd_event_source_disable_unref(s->hangup);
}

static int on_hangup(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        SseStream *s = userdata;

        s->hangup = sd_event_source_disable_unref(s->hangup);
        sse_drop(s);
        return 0;
}

static void sse_watch_hangup(SseStream *s) {
        const union MHD_ConnectionInfo *info;

        if (s->hangup || !s->req->connection)
                return;
        info = MHD_get_connection_info(s->req->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (info)
                (void) sd_event_add_io(s->req->manager->event, &s->hangup, info->connect_fd, EPOLLRDHUP,
                                       on_hangup, s);
}

static ssize_t sse_reader(void *cls, uint64_t pos, char *buf, size_t max) {
        Request *r = cls;
        SseStream *s = r->sse;
        size_t n;

        if (!s || s->dropped || !r->connection)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        if (s->off == s->size) {
                if (s->finished)
                        return MHD_CONTENT_READER_END_OF_STREAM;
                /* Nothing to send: sleep until sse_send() wakes us (returning 0 awake would spin). */
                s->reader_suspended = true;
                sse_watch_hangup(s);
                MHD_suspend_connection(r->connection);
                return 0;
        }
        n = MIN(max, s->size - s->off);
        memcpy(buf, s->buf + s->off, n);
        s->off += n;
        if (n >= 2)
                memcpy(s->last_sent, buf + n - 2, 2);
        else {
                s->last_sent[0] = s->last_sent[1];
                s->last_sent[1] = buf[0];
        }
        if (s->off == s->size) {
                s->off = s->size = 0;
                s->n_events = 0; /* the client keeps up */
        }
        if (s->on_drain && s->size - s->off <= s->low_water)
                s->on_drain(s->drain_userdata);
        return (ssize_t) n;
}

static void sse_reader_free(void *cls) {
        request_unref(cls);
}

static void sse_wake(SseStream *s) {
        Request *r = s->req;

        if (s->reader_suspended && r->connection) {
                s->reader_suspended = false;
                MHD_resume_connection(r->connection);
                http_server_kick(r->manager->server);
        }
}

static int start_stream(Request *r, size_t max_events, const char *content_type) {
        struct MHD_Response *resp;
        SseStream *s;

        if (r->response || r->sse)
                return -EBUSY;
        s = calloc(1, sizeof(SseStream));
        if (!s)
                return -ENOMEM;
        s->req = r;
        s->max_events = max_events;
        memcpy(s->last_sent, "\n\n", 2);
        r->sse = s;
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, sse_reader, request_ref(r),
                                                 sse_reader_free);
        if (!resp) {
                request_unref(r);
                return -ENOMEM;
        }
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        (void) MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        req_reply_response(r, 200, resp);
        return 0;
}

int req_start_sse(Request *r, size_t max_events) {
        return start_stream(r, max_events, "text/event-stream");
}

int req_start_stream(Request *r, const char *content_type) {
        return start_stream(r, SIZE_MAX, content_type);
}

static int sse_append(SseStream *s, const char *p, size_t n) {
        if (s->size + n > s->alloc) {
                /* move what is left to the front before growing */
                if (s->off > 0) {
                        memmove(s->buf, s->buf + s->off, s->size - s->off);
                        s->size -= s->off;
                        s->off = 0;
                }
                if (s->size + n > s->alloc) {
                        size_t a = MAX(s->alloc * 2, s->size + n + 256);
                        char *b = realloc(s->buf, a);
                        if (!b)
                                return -ENOMEM;
                        s->buf = b;
                        s->alloc = a;
                }
        }
        memcpy(s->buf + s->size, p, n);
        s->size += n;
        return 0;
}

void sse_drop(SseStream *s) {
        s->dropped = true;
        free(s->buf);
        s->buf = NULL;
        s->size = s->alloc = s->off = 0;
        sse_wake(s);
}

static int sse_send_internal(SseStream *s, const char *id, const char *event, const char *data, size_t size,
                             bool bounded) {
        int k = 0;

        if (!s || s->dropped || s->finished)
                return -EPIPE;
        if (bounded && s->n_events >= s->max_events) {
                /* the client does not read: let it go rather than hold its events for ever */
                log_msg(LOG_INFO, "Dropping SSE stream of request %s: %zu events not read.",
                        s->req->request_id, s->n_events);
                sse_drop(s);
                return -ENOBUFS;
        }
        if (id)
                k = k ?: sse_append(s, "id: ", 4) ?: sse_append(s, id, strlen(id)) ?: sse_append(s, "\n", 1);
        if (event)
                k = k ?: sse_append(s, "event: ", 7) ?: sse_append(s, event, strlen(event)) ?:
                         sse_append(s, "\n", 1);
        /* our data is one line of JSON: no newlines to split */
        k = k ?: sse_append(s, "data: ", 6) ?: sse_append(s, data, size) ?: sse_append(s, "\n\n", 2);
        if (k < 0) {
                sse_drop(s);
                return k;
        }
        s->n_events++;
        sse_wake(s);
        return 0;
}

int sse_send(SseStream *s, const char *id, const char *event, const char *data, size_t size) {
        return sse_send_internal(s, id, event, data, size, true);
}

int sse_send_unbounded(SseStream *s, const char *id, const char *event, const char *data, size_t size) {
        return sse_send_internal(s, id, event, data, size, false);
}

int sse_send_raw(SseStream *s, const char *data, size_t size) {
        int k;

        if (!s || s->dropped || s->finished)
                return -EPIPE;
        k = sse_append(s, data, size);
        if (k < 0) {
                sse_drop(s);
                return k;
        }
        sse_wake(s);
        return 0;
}

int sse_comment(SseStream *s, const char *text) {
        int k;

        if (!s || s->dropped || s->finished)
                return -EPIPE;
        k = sse_append(s, ": ", 2) ?: sse_append(s, text, strlen(text)) ?: sse_append(s, "\n\n", 2);
        if (k < 0)
                return k;
        sse_wake(s);
        return 0;
}

void sse_finish(SseStream *s) {
        if (!s)
                return;
        s->finished = true;
        sse_wake(s);
}

void sse_cut(SseStream *s, const char *event, const char *data, size_t size) {
        size_t keep;

        if (!s || s->dropped || s->finished)
                return;
        /* Events and comments end in a blank line and hold no other: finish the one the client is in
         * the middle of, if any, and drop the rest. */
        if (s->last_sent[0] == '\n' && s->last_sent[1] == '\n')
                keep = s->off;
        else if (s->last_sent[1] == '\n' && s->off < s->size && s->buf[s->off] == '\n')
                keep = s->off + 1;
        else {
                const char *e = memmem(s->buf + s->off, s->size - s->off, "\n\n", 2);
                keep = e ? (size_t) (e - s->buf) + 2 : s->size;
        }
        s->size = keep;
        s->n_events = 0;
        (void) sse_send_unbounded(s, NULL, event, data, size);
        sse_finish(s);
}

size_t sse_buffered(SseStream *s) {
        return s ? s->size - s->off : 0;
}

void sse_set_drain_callback(SseStream *s, size_t low_water, void (*cb)(void *userdata), void *userdata) {
        s->low_water = low_water;
        s->on_drain = cb;
        s->drain_userdata = userdata;
}

bool sse_dropped(SseStream *s) {
        return !s || s->dropped || !s->req->connection;
}

size_t sse_queued(SseStream *s) {
        return s ? s->n_events : 0;
}

/* --- streams bound to their key ----------------------------------------------------------------- */

static void on_request_key_ended(void *userdata, int why) {
        Request *r = userdata;
        _cleanup_free_ char *body = NULL;
        const char *message = key_session_end_message(why);

        if (!r->sse) {
                /* nothing sent yet (a streamed exec before its first output): a plain 401 */
                req_reply_error(r, 401, "unauthorized", "%s", message);
                return;
        }
        body = http_error_body(401, "unauthorized", message, r->request_id);
        if (body)
                sse_cut(r->sse, "error", body, strlen(body));
        else
                sse_drop(r->sse);
}

int req_bind_to_key(Request *r) {
        if (!r->key || r->key_session)
                return r->key ? 0 : -EINVAL;
        return key_session_add(r->manager, r->key, on_request_key_ended, r, &r->key_session);
}

int req_stream_acquire(Request *r) {
        int k;

        assert(r);
        assert(r->key);

        k = manager_stream_acquire(r->manager, r->key->id);
        if (k == -EBUSY) {
                req_reply_error(r, 429, "too_many_streams",
                                "This API key has %" PRIu64 " open streams already (MaxStreamsPerKey=).",
                                r->manager->config.max_streams_per_key);
                return k;
        }
        if (k < 0)
                return k;
        r->counts_stream = true;
        return req_bind_to_key(r);
}
