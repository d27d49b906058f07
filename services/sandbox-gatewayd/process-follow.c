/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* GET …/processes/{p}/output?follow=true: a process's output as SSE, live, resumable by offset. */
#include "process-follow.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gatewayd-routes.h"
#include "ini-util.h"
#include "log.h"
#include "sse.h"
#include "utf8-util.h"

/* Bytes asked for per ReadProcessOutput: one event at most this large (before JSON/base64). */
#define FOLLOW_CHUNK (64 * 1024)
/* A client that reads slower than the process writes: past the high mark no more is read for it (the
 * ring keeps the process's last bytes meanwhile), below the low mark reading goes on. */
#define FOLLOW_HIGH_WATER (UINT64_C(1) << 20)
#define FOLLOW_LOW_WATER (UINT64_C(256) << 10)

static const char *const stream_name[2] = { "stdout", "stderr" };

int follow_position_parse(const char *s, uint64_t ret[2]) {
        _cleanup_free_ char *first = NULL;
        const char *colon;
        uint64_t a, b;

        if (!s)
                return -EINVAL;
        colon = strchr(s, ':');
        if (!colon) {
                if (parse_decimal(s, &a) < 0)
                        return -EINVAL;
                ret[0] = ret[1] = a;
                return 0;
        }
        first = strndup(s, colon - s);
        if (!first)
                return -ENOMEM;
        if (parse_decimal(first, &a) < 0 || parse_decimal(colon + 1, &b) < 0)
                return -EINVAL;
        ret[0] = a;
        ret[1] = b;
        return 0;
}

void follow_position_format(const uint64_t pos[2], char buf[static FOLLOW_POSITION_MAX]) {
        snprintf(buf, FOLLOW_POSITION_MAX, "%" PRIu64 ":%" PRIu64, pos[0], pos[1]);
}

/* One followed stream. The attached pipe is the wake-up: sandboxd writes into it whenever the process
 * wrote. The bytes and their offsets come from ReadProcessOutput, so every event's offsets are exact even
 * where sandboxd's copy into the pipe fell behind the ring and skipped (which the pipe would not tell). */
typedef struct FollowStream {
        bool active;     /* followed */
        int fd;          /* the read end of the attached pipe, or -1 */
        int attach_fd;   /* its write end, until AttachProcessOutput has its copy */
        sd_event_source *source;
        uint64_t pos;    /* the offset of the next byte to send */
        bool notified;   /* there may be more than pos: read it */
        bool ended;      /* the stream is closed and pos is its end */
} FollowStream;

struct Follow {
        Manager *manager;
        Request *req;    /* weak: the follow is its data */
        char *process;
        FollowStream s[2];
        bool base64;
        bool calling;    /* one bus call at a time per follow */
        bool started;    /* the SSE answer is started */
        bool finishing;  /* every stream ended: the exit event is on its way */
        bool linked;
        unsigned next;   /* the stream read next, when both may be */
        Follow *prev, *nextf; /* in manager->follows while its stream is open */
};

static void follow_stream_close(FollowStream *s) {
        s->source = sd_event_source_disable_unref(s->source);
        s->fd = safe_close(s->fd);
        s->attach_fd = safe_close(s->attach_fd);
}

static void follow_unlink(Follow *f) {
        if (!f->linked)
                return;
        if (f->prev)
                f->prev->nextf = f->nextf;
        else
                f->manager->follows = f->nextf;
        if (f->nextf)
                f->nextf->prev = f->prev;
        f->prev = f->nextf = NULL;
        f->linked = false;
}

static void follow_free(void *p) {
        Follow *f = p;

        if (!f)
                return;
        follow_unlink(f);
        for (int i = 0; i < 2; i++)
                follow_stream_close(&f->s[i]);
        free(f->process);
        free(f);
}

/* The client went: its pipes go now, not when the last bus call for it is answered. sandboxd drops its
 * copies when it next writes into them (the reader is gone). */
static void follow_on_close(Request *r) {
        Follow *f = r->data;

        follow_unlink(f);
        for (int i = 0; i < 2; i++)
                follow_stream_close(&f->s[i]);
}

size_t follows_heartbeat(Manager *m) {
        size_t n = 0;

        for (Follow *f = m->follows; f; f = f->nextf)
                if (!sse_dropped(f->req->sse)) {
                        (void) sse_comment(f->req->sse, "heartbeat");
                        n++;
                }
        return n;
}

static void follow_pump(Follow *f);

/* Once the stream has started, a failure is its last event: the error body. */
static void follow_fail_bus(Follow *f, const sd_bus_error *error) {
        _cleanup_free_ char *body = NULL;
        unsigned status;
        const char *code;

        http_status_from_bus_error(error->name, &status, &code);
        body = http_error_body(status, code, error->message ?: "The process's output could not be read.",
                               f->req->request_id);
        if (body)
                (void) sse_send_unbounded(f->req->sse, NULL, "error", body, strlen(body));
        sse_finish(f->req->sse);
}

static void follow_fail(Follow *f, unsigned status, const char *code, const char *message) {
        _cleanup_free_ char *body = http_error_body(status, code, message, f->req->request_id);

        if (body)
                (void) sse_send_unbounded(f->req->sse, NULL, "error", body, strlen(body));
        sse_finish(f->req->sse);
}

static bool follow_gone(Follow *f) {
        return f->req->closed || sse_dropped(f->req->sse);
}

static void follow_id(Follow *f, char buf[static FOLLOW_POSITION_MAX]) {
        uint64_t pos[2] = { f->s[0].pos, f->s[1].pos };
        follow_position_format(pos, buf);
}

/* --- the pipes ----------------------------------------------------------------------------------- */

static int on_pipe(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Follow *f = userdata;
        FollowStream *s = fd == f->s[0].fd ? &f->s[0] : &f->s[1];
        char buf[4096];

        /* Only the wake-up counts: the bytes are read again, with their offsets, from the ring. */
        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n > 0)
                        continue;
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        break;
                /* EOF: sandboxd copied the stream's end; what is left is read below */
                s->source = sd_event_source_disable_unref(s->source);
                s->fd = safe_close(s->fd);
                break;
        }
        s->notified = true;
        follow_pump(f);
        return 0;
}

/* --- reading ------------------------------------------------------------------------------------- */

static int build_read(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        Follow *f = r->data;
        unsigned i = f->next;

        return sd_bus_message_append(m, "ssstu", req_param(r, 0), f->process, stream_name[i], f->s[i].pos,
                                     (uint32_t) FOLLOW_CHUNK);
}

static void on_read(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        Follow *f = r->data;
        FollowStream *s = &f->s[f->next];
        const void *data = NULL;
        uint64_t next, first;
        size_t size = 0, used;
        json_object *o, *v;
        int ended, k;

        f->calling = false;
        if (follow_gone(f))
                return;
        if (sd_bus_error_is_set(error))
                return follow_fail_bus(f, error);
        k = sd_bus_message_read_array(reply, 'y', &data, &size);
        if (k >= 0)
                k = sd_bus_message_read(reply, "ttb", &next, &first, &ended);
        if (k < 0)
                return follow_fail(f, 500, "internal", "Cannot read sandboxd's answer.");

        used = size;
        if (f->base64)
                v = size > 0 ? json_bytes(data, size, true) : NULL;
        else {
                _cleanup_free_ char *text = NULL;
                size_t len;

                /* an incomplete character at the end is sent with the rest of it, unless none will come */
                k = utf8_sanitize(data, size, ended ? 0 : UTF8_KEEP_TAIL, &text, &len, &used);
                if (k < 0)
                        return follow_fail(f, 500, "internal", "Out of memory.");
                v = len > 0 ? json_object_new_string_len(text, (int) len) : NULL;
        }
        s->pos = next - (size - used);
        s->ended = ended && used == size;
        /* a full chunk: there is more already; else the pipe says when there is */
        if (size == FOLLOW_CHUNK)
                s->notified = true;
        if (v) {
                char id[FOLLOW_POSITION_MAX];
                const char *text;
                size_t len;

                o = json_object_new_object();
                if (!o) {
                        json_object_put(v);
                        return follow_fail(f, 500, "internal", "Out of memory.");
                }
                json_object_object_add(o, "data", v);
                /* where data starts: later than asked where the ring dropped what was between */
                json_object_object_add(o, "offset", json_object_new_uint64(next - size));
                follow_id(f, id);
                text = json_text(o, &len);
                k = text ? sse_send(r->sse, id, stream_name[f->next], text, len) : -ENOMEM;
                json_object_put(o);
                if (k < 0)
                        return; /* dropped */
        }
        f->next ^= 1;
        follow_pump(f);
}

/* --- the end ------------------------------------------------------------------------------------- */

static void on_wait(Request *r, sd_bus_message *reply, const sd_bus_error *error);

static int build_id_process(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        Follow *f = r->data;
        return sd_bus_message_append(m, "ss", req_param(r, 0), f->process);
}

static int build_id(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        return sd_bus_message_append(m, "s", req_param(r, 0));
}

static void on_list(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        Follow *f = r->data;
        json_object *o = NULL;
        int k;

        f->calling = false;
        if (follow_gone(f))
                return;
        if (sd_bus_error_is_set(error))
                return follow_fail_bus(f, error);
        k = sd_bus_message_enter_container(reply, 'a', "(ssiutasso)");
        while (k >= 0 && (k = process_json(r, reply, &o)) > 0) {
                if (streq(json_object_get_string(json_object_object_get(o, "id")), f->process))
                        break;
                json_object_put(o);
                o = NULL;
        }
        if (k < 0)
                return follow_fail(f, 500, "internal", "Cannot read sandboxd's answer.");
        if (!o)
                /* made room for newer ones in the meantime */
                return follow_fail(f, 404, "not_found", "The process is no longer listed.");

        char id[FOLLOW_POSITION_MAX];
        const char *text;
        size_t len;

        follow_id(f, id);
        text = json_text(o, &len);
        if (text)
                (void) sse_send_unbounded(r->sse, id, "exit", text, len);
        json_object_put(o);
        sse_finish(r->sse);
}

static void follow_wait(Follow *f) {
        int k;

        /* Usually answered at once: a stream ends when its process does. A process that closed its own
         * stdout and stderr is waited for, a call at a time, while the client stays. */
        f->calling = true;
        k = req_call_full(f->req, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                          "WaitProcess", build_id_process, on_wait, 0, BUS_POOL_LONG);
        if (k < 0) {
                f->calling = false;
                if (k != -ECANCELED)
                        follow_fail(f, k == -EBUSY ? 429 : 500, k == -EBUSY ? "too_many_calls" : "internal",
                                    "The process's end could not be waited for.");
        }
}

static void on_wait(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        Follow *f = r->data;
        int k;

        f->calling = false;
        if (follow_gone(f))
                return;
        if (sd_bus_error_has_name(error, SD_BUS_ERROR_NO_REPLY))
                return follow_wait(f);
        if (sd_bus_error_is_set(error))
                return follow_fail_bus(f, error);
        f->calling = true;
        k = req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "ListProcesses",
                     build_id, on_list, 0);
        if (k < 0) {
                f->calling = false;
                if (k != -ECANCELED)
                        follow_fail(f, k == -EBUSY ? 429 : 500, k == -EBUSY ? "too_many_calls" : "internal",
                                    "The process could not be read.");
        }
}

/* --- the pump ------------------------------------------------------------------------------------ */

static void on_drained(void *userdata) {
        follow_pump(userdata);
}

/* Reads what is due, one call at a time, alternating between the streams; once all have ended, the end. */
static void follow_pump(Follow *f) {
        bool all_ended = true;
        int k;

        if (f->calling || f->finishing || !f->started || follow_gone(f))
                return;
        if (sse_buffered(f->req->sse) >= FOLLOW_HIGH_WATER)
                return; /* on_drained() goes on */
        for (unsigned n = 0; n < 2; n++) {
                unsigned i = (f->next + n) & 1;
                FollowStream *s = &f->s[i];

                if (!s->active || s->ended)
                        continue;
                all_ended = false;
                if (!s->notified)
                        continue;
                s->notified = false;
                f->next = i;
                f->calling = true;
                k = req_call(f->req, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                             "ReadProcessOutput", build_read, on_read, 0);
                if (k < 0) {
                        f->calling = false;
                        if (k != -ECANCELED)
                                follow_fail(f, k == -EBUSY ? 429 : 500,
                                            k == -EBUSY ? "too_many_calls" : "internal",
                                            "The process's output could not be read.");
                }
                return;
        }
        if (all_ended) {
                f->finishing = true;
                follow_wait(f);
        }
}

/* --- attaching ----------------------------------------------------------------------------------- */

static void follow_attach_next(Follow *f);

static int build_attach(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        Follow *f = r->data;
        FollowStream *s = &f->s[f->next];
        int k;

        k = sd_bus_message_append(m, "ssst", req_param(r, 0), f->process, stream_name[f->next], s->pos);
        if (k >= 0)
                k = sd_bus_message_append(m, "h", s->attach_fd);
        /* the message holds its own copy */
        s->attach_fd = safe_close(s->attach_fd);
        return k;
}

static void on_attach(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        Follow *f = r->data;

        f->calling = false;
        if (r->closed)
                return;
        if (sd_bus_error_is_set(error))
                /* nothing sent yet: answered as the JSON read answers (no such process, offset past the
                 * end, too many followers) */
                return req_reply_bus_error(r, error);
        f->next++;
        follow_attach_next(f);
}

static void follow_attach_next(Follow *f) {
        Request *r = f->req;
        int fds[2], k;

        while (f->next < 2 && !f->s[f->next].active)
                f->next++;
        if (f->next < 2) {
                FollowStream *s = &f->s[f->next];

                if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0)
                        return req_reply_errno(r, -errno);
                s->fd = fds[0];
                s->attach_fd = fds[1];
                k = sd_event_add_io(f->manager->event, &s->source, s->fd, EPOLLIN, on_pipe, f);
                if (k < 0)
                        return req_reply_errno(r, k);
                f->calling = true;
                k = req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                             "AttachProcessOutput", build_attach, on_attach, 0);
                if (k < 0) {
                        f->calling = false;
                        if (k != -EBUSY && k != -ECANCELED) /* -EBUSY: answered 429 */
                                req_reply_errno(r, k);
                }
                return;
        }

        /* attached: the answer starts; what is kept from pos on is read first */
        f->next = 0;
        k = req_start_sse(r, SIZE_MAX); /* bounded by bytes (the high water mark), not by events */
        if (k < 0)
                return req_reply_errno(r, k);
        sse_set_drain_callback(r->sse, FOLLOW_LOW_WATER, on_drained, f);
        f->started = true;
        f->prev = NULL;
        f->nextf = f->manager->follows;
        if (f->nextf)
                f->nextf->prev = f;
        f->manager->follows = f;
        f->linked = true;
        (void) sse_comment(r->sse, "following");
        for (int i = 0; i < 2; i++)
                f->s[i].notified = f->s[i].active;
        follow_pump(f);
}

int follow_start(Request *r, const char *process, unsigned streams, const uint64_t pos[2], bool base64) {
        Follow *f;

        f = calloc(1, sizeof(Follow));
        if (!f)
                return -ENOMEM;
        f->manager = r->manager;
        f->req = r;
        f->base64 = base64;
        for (int i = 0; i < 2; i++) {
                f->s[i].fd = f->s[i].attach_fd = -EBADF;
                f->s[i].active = streams & (1u << i);
                f->s[i].pos = pos[i];
        }
        f->process = strdup(process);
        if (!f->process) {
                free(f);
                return -ENOMEM;
        }
        if (r->data_free)
                r->data_free(r->data);
        r->data = f;
        r->data_free = follow_free;
        r->on_close = follow_on_close;
        follow_attach_next(f);
        return 0;
}
