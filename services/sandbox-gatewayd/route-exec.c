/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* POST …/exec: sandboxd's Exec as one JSON answer, or streamed as SSE from pipes passed as stdout_fd/stderr_fd. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gatewayd-routes.h"
#include "log.h"
#include "sse.h"
#include "time-util.h"

/* Output queued for a client that reads slower than the command writes: past the high mark the pipes are
 * not read (sandboxd, and then the command, wait), below the low mark they are again. */
#define STREAM_HIGH_WATER (UINT64_C(1) << 20)
#define STREAM_LOW_WATER (UINT64_C(256) << 10)

static const JsonField exec_fields[] = {
        { "command", JSON_FIELD_STRING },
        { "argv", JSON_FIELD_STRV },
        { "cwd", JSON_FIELD_STRING },
        { "env", JSON_FIELD_STRMAP },
        { "stdin", JSON_FIELD_STRING },
        { "timeout_seconds", JSON_FIELD_UINT },
        { "encoding", JSON_FIELD_STRING },
};

typedef struct ExecPipe {
        int fd;
        sd_event_source *source;
        uint8_t tail[4]; /* an incomplete UTF-8 sequence left from the last read */
        size_t n_tail;
} ExecPipe;

typedef struct Exec {
        Request *req; /* weak: the Exec lives in req->data */
        json_object *body;
        char **argv;
        uint8_t *stdin_data;
        size_t stdin_size;
        bool base64, stream, stream_started;
        bool draining; /* the command is done: take all that is left, whatever the client's pace */
        int out_fds[2]; /* write ends, for the call */
        int cancel_read_fd; /* for the call; the write end is req->cancel_fd */
        ExecPipe pipes[2];
} Exec;

static void exec_pipe_close(ExecPipe *p) {
        p->source = sd_event_source_disable_unref(p->source);
        p->fd = safe_close(p->fd);
}

static void exec_free(void *p) {
        Exec *e = p;

        if (!e)
                return;
        json_object_put(e->body);
        strv_free(e->argv);
        free(e->stdin_data);
        safe_close(e->out_fds[0]);
        safe_close(e->out_fds[1]);
        safe_close(e->cancel_read_fd);
        exec_pipe_close(&e->pipes[0]);
        exec_pipe_close(&e->pipes[1]);
        free(e);
}

int exec_append_cwd_env(sd_bus_message *m, json_object *body) {
        const char *cwd;
        json_object *env;
        int k = 0;

        if ((cwd = json_get_string(body, "cwd")))
                k = sd_bus_message_append(m, "{sv}", "cwd", "s", cwd);
        if (k >= 0 && json_object_object_get_ex(body, "env", &env)) {
                k = sd_bus_message_open_container(m, 'e', "sv");
                if (k >= 0)
                        k = sd_bus_message_append(m, "s", "env");
                if (k >= 0)
                        k = sd_bus_message_open_container(m, 'v', "a{ss}");
                if (k >= 0)
                        k = sd_bus_message_open_container(m, 'a', "{ss}");
                json_object_object_foreach(env, key, val) {
                        if (k >= 0)
                                k = sd_bus_message_append(m, "{ss}", key, json_object_get_string(val));
                }
                for (int i = 0; i < 3 && k >= 0; i++)
                        k = sd_bus_message_close_container(m);
        }
        return k < 0 ? k : 0;
}

static int build_exec(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        Exec *e = r->data;
        int k;

        k = sd_bus_message_append(m, "s", req_param(r, 0));
        if (k >= 0)
                k = sd_bus_message_append_strv(m, e->argv);
        if (k >= 0)
                k = sd_bus_message_open_container(m, 'a', "{sv}");
        if (k >= 0)
                k = exec_append_cwd_env(m, e->body);
        if (k >= 0 && e->stdin_data) {
                k = sd_bus_message_open_container(m, 'e', "sv");
                if (k >= 0)
                        k = sd_bus_message_append(m, "s", "stdin");
                if (k >= 0)
                        k = sd_bus_message_open_container(m, 'v', "ay");
                if (k >= 0)
                        k = sd_bus_message_append_array(m, 'y', e->stdin_data, e->stdin_size);
                for (int i = 0; i < 2 && k >= 0; i++)
                        k = sd_bus_message_close_container(m);
        }
        if (k >= 0 && json_object_object_get_ex(e->body, "timeout_seconds", NULL))
                k = sd_bus_message_append(m, "{sv}", "timeout_seconds", "t",
                                          json_get_uint(e->body, "timeout_seconds"));
        if (k >= 0 && e->stream)
                /* the message holds duplicates; ours are closed once it is sent */
                k = sd_bus_message_append(m, "{sv}{sv}", "stdout_fd", "h", e->out_fds[0], "stderr_fd", "h",
                                          e->out_fds[1]);
        if (k >= 0 && e->cancel_read_fd >= 0)
                k = sd_bus_message_append(m, "{sv}", "cancel_fd", "h", e->cancel_read_fd);
        if (k >= 0)
                k = sd_bus_message_append(m, "{sv}{sv}{sv}", "account_id", "s", r->account_id, "request_id", "s",
                                          r->request_id, "source", "s", "agent");
        if (k >= 0)
                k = sd_bus_message_close_container(m);
        /* the message holds its own copy */
        e->cancel_read_fd = safe_close(e->cancel_read_fd);
        if (e->stream) {
                e->out_fds[0] = safe_close(e->out_fds[0]);
                e->out_fds[1] = safe_close(e->out_fds[1]);
        }
        return k;
}

/* The result object from Exec's reply (the exit code and output already read into place). */
static json_object *exec_result(Exec *e, int32_t exit_code, const void *out, size_t out_size, const void *err,
                                size_t err_size, sd_bus_message *reply) {
        bool out_trunc = false, err_trunc = false, timed_out = false, oom = false;
        uint64_t duration = 0;
        json_object *o;
        int k;

        k = sd_bus_message_enter_container(reply, 'a', "{sv}");
        while (k >= 0 && (k = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                const char *key;
                int b;
                k = sd_bus_message_read(reply, "s", &key);
                if (k < 0)
                        break;
                if (streq(key, "duration_usec"))
                        k = sd_bus_message_read(reply, "v", "t", &duration);
                else if (streq(key, "stdout_truncated") || streq(key, "stderr_truncated") ||
                         streq(key, "timed_out") || streq(key, "oom_killed")) {
                        k = sd_bus_message_read(reply, "v", "b", &b);
                        if (streq(key, "stdout_truncated"))
                                out_trunc = b;
                        else if (streq(key, "stderr_truncated"))
                                err_trunc = b;
                        else if (streq(key, "timed_out"))
                                timed_out = b;
                        else
                                oom = b;
                } else
                        k = sd_bus_message_skip(reply, "v");
                if (k >= 0)
                        k = sd_bus_message_exit_container(reply);
        }
        o = json_object_new_object();
        if (!o)
                return NULL;
        json_object_object_add(o, "exit_code", json_object_new_int(exit_code));
        json_object_object_add(o, "stdout", json_bytes(out, out_size, e->base64));
        json_object_object_add(o, "stderr", json_bytes(err, err_size, e->base64));
        json_object_object_add(o, "stdout_truncated", json_object_new_boolean(out_trunc));
        json_object_object_add(o, "stderr_truncated", json_object_new_boolean(err_trunc));
        json_object_object_add(o, "duration_ms", json_object_new_uint64(duration / USEC_PER_MSEC));
        json_object_object_add(o, "timed_out", json_object_new_boolean(timed_out));
        json_object_object_add(o, "oom_killed", json_object_new_boolean(oom));
        return o;
}

/* --- streaming ---------------------------------------------------------------------------------- */

static void pipes_enable(Exec *e, bool on) {
        for (int i = 0; i < 2; i++)
                if (e->pipes[i].source)
                        (void) sd_event_source_set_enabled(e->pipes[i].source, on ? SD_EVENT_ON : SD_EVENT_OFF);
}

static void on_stream_drained(void *userdata) {
        pipes_enable(userdata, true);
}

static int stream_start(Exec *e) {
        Request *r = e->req;
        int k;

        if (e->stream_started)
                return 0;
        /* bounded by bytes (the high water mark), not by events */
        k = req_start_sse(r, SIZE_MAX);
        if (k < 0)
                return k;
        sse_set_drain_callback(r->sse, STREAM_LOW_WATER, on_stream_drained, e);
        e->stream_started = true;
        return 0;
}

/* Sends data read from pipe i (with the tail left last time); final: no more will come. */
static void stream_output(Exec *e, int i, const uint8_t *data, size_t size, bool final) {
        _cleanup_free_ uint8_t *joined = NULL;
        _cleanup_free_ char *text = NULL;
        ExecPipe *p = &e->pipes[i];
        json_object *o, *v;
        size_t len, used;
        const char *s;

        if (p->n_tail > 0) {
                joined = malloc(p->n_tail + size);
                if (!joined)
                        return;
                memcpy(joined, p->tail, p->n_tail);
                memcpy(joined + p->n_tail, data, size);
                data = joined;
                size += p->n_tail;
                p->n_tail = 0;
        }
        if (size == 0)
                return;
        if (e->base64)
                v = json_bytes(data, size, true);
        else {
                if (utf8_sanitize(data, size, final ? 0 : UTF8_KEEP_TAIL, &text, &len, &used) < 0)
                        return;
                /* keep an incomplete character for the next read, so it is not cut into U+FFFDs */
                memcpy(p->tail, data + used, size - used);
                p->n_tail = size - used;
                if (len == 0)
                        return;
                v = json_object_new_string_len(text, (int) len);
        }
        if (stream_start(e) < 0 || sse_dropped(e->req->sse)) {
                json_object_put(v);
                return;
        }
        o = json_object_new_object();
        json_object_object_add(o, "data", v);
        s = json_text(o, &len);
        (void) sse_send(e->req->sse, NULL, i == 0 ? "stdout" : "stderr", s, len);
        json_object_put(o);
        if (sse_buffered(e->req->sse) >= STREAM_HIGH_WATER)
                pipes_enable(e, false);
}

/* Reads what pipe i has now. Returns > 0 while it may have more later, 0 at EOF/error. */
static int pipe_read(Exec *e, int i) {
        uint8_t buf[65536];
        ExecPipe *p = &e->pipes[i];

        if (p->fd < 0)
                return 0;
        for (;;) {
                int enabled = SD_EVENT_ON;
                ssize_t n = read(p->fd, buf, sizeof(buf));
                if (n > 0) {
                        stream_output(e, i, buf, (size_t) n, false);
                        /* paused by the high water mark: leave the rest in the pipe */
                        if (p->source && sd_event_source_get_enabled(p->source, &enabled) >= 0 &&
                            enabled == SD_EVENT_OFF && !e->draining)
                                return 1;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return 1;
                exec_pipe_close(p);
                return 0;
        }
}

static int on_pipe(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Exec *e = userdata;
        int i = fd == e->pipes[0].fd ? 0 : 1;

        (void) pipe_read(e, i);
        return 0;
}

/* --- the reply ---------------------------------------------------------------------------------- */

static void on_exec_reply(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        Exec *e = r->data;
        const void *out = NULL, *err = NULL;
        size_t out_size = 0, err_size = 0;
        json_object *o;
        int32_t code;
        int k;

        if (sd_bus_error_is_set(error)) {
                if (e->stream && e->stream_started) {
                        _cleanup_free_ char *body = NULL;
                        unsigned status;
                        const char *c;
                        http_status_from_bus_error(error->name, &status, &c);
                        body = http_error_body(status, c, error->message, r->request_id);
                        if (body)
                                (void) sse_send(r->sse, NULL, "error", body, strlen(body));
                        sse_finish(r->sse);
                        return;
                }
                return req_reply_bus_error(r, error);
        }

        k = sd_bus_message_read(reply, "i", &code);
        if (k >= 0)
                k = sd_bus_message_read_array(reply, 'y', &out, &out_size);
        if (k >= 0)
                k = sd_bus_message_read_array(reply, 'y', &err, &err_size);
        if (k < 0)
                return req_reply_errno(r, k);

        if (!e->stream) {
                o = exec_result(e, code, out, out_size, err, err_size, reply);
                return req_reply_json(r, 200, o);
        }

        /* The command is done: what it wrote is in the pipes. Background processes may keep them open,
         * so take what is there and stop. */
        e->draining = true;
        for (int i = 0; i < 2; i++) {
                (void) pipe_read(e, i);
                exec_pipe_close(&e->pipes[i]);
                stream_output(e, i, NULL, 0, true);
        }
        o = exec_result(e, code, out, out_size, err, err_size, reply);
        if (!o)
                return req_reply_errno(r, -ENOMEM);
        if (stream_start(e) >= 0) {
                size_t len;
                const char *s = json_text(o, &len);
                (void) sse_send(r->sse, NULL, "exit", s, len);
                sse_finish(r->sse);
        }
        json_object_put(o);
}

static bool wants_stream(Request *r) {
        const char *q = req_query(r, "stream"), *accept = req_header(r, "Accept");

        if (q)
                return streq(q, "true") || streq(q, "1");
        return accept && strstr(accept, "text/event-stream");
}

int route_exec(Request *r) {
        json_object *body, *argv;
        const char *command, *encoding, *in;
        Exec *e;
        int k;

        k = req_parse_json(r, exec_fields, ELEMENTSOF(exec_fields), &body);
        if (k < 0)
                return 0;
        e = calloc(1, sizeof(Exec));
        if (!e) {
                json_object_put(body);
                return -ENOMEM;
        }
        e->req = r;
        e->body = body;
        e->out_fds[0] = e->out_fds[1] = e->pipes[0].fd = e->pipes[1].fd = -EBADF;
        e->cancel_read_fd = -EBADF;
        r->data = e;
        r->data_free = exec_free;

        encoding = json_get_string(body, "encoding");
        if (encoding && !streq(encoding, "base64") && !streq(encoding, "utf-8")) {
                req_reply_error(r, 400, "invalid_request", "Field 'encoding' must be \"utf-8\" or \"base64\".");
                return 0;
        }
        e->base64 = encoding && streq(encoding, "base64");

        command = json_get_string(body, "command");
        if (command && json_object_object_get_ex(body, "argv", NULL)) {
                req_reply_error(r, 400, "invalid_request", "Give either 'command' or 'argv', not both.");
                return 0;
        }
        if (command) {
                e->argv = calloc(4, sizeof(char *));
                if (!e->argv || !(e->argv[0] = strdup("/bin/sh")) || !(e->argv[1] = strdup("-c")) ||
                    !(e->argv[2] = strdup(command)))
                        return -ENOMEM;
        } else if (json_object_object_get_ex(body, "argv", &argv) && json_object_array_length(argv) > 0) {
                k = json_get_strv(body, "argv", &e->argv);
                if (k < 0)
                        return k;
        } else {
                req_reply_error(r, 400, "invalid_request", "Field 'command' or a non-empty 'argv' is required.");
                return 0;
        }

        in = json_get_string(body, "stdin");
        if (in) {
                if (e->base64) {
                        k = base64_decode_alloc(in, &e->stdin_data, &e->stdin_size);
                        if (k == -EINVAL) {
                                req_reply_error(r, 400, "invalid_request", "Field 'stdin' is not valid base64.");
                                return 0;
                        }
                        if (k < 0)
                                return k;
                } else {
                        e->stdin_size = strlen(in);
                        e->stdin_data = (uint8_t *) strdup(in);
                        if (!e->stdin_data)
                                return -ENOMEM;
                }
        }

        /* Each Exec starts a process in a new scope through systemd, and may be cancelled a moment later:
         * the costliest thing a key can make the fleet do again and again. Its budget of starts is checked
         * once the request is known to be good, before anything is held or called. */
        k = req_exec_start_take(r);
        if (k < 0)
                return k == -EBUSY ? 0 : k; /* -EBUSY: answered 429 */

        e->stream = wants_stream(r);
        if (e->stream) {
                int fds[2][2];

                /* Cut like a watch when the key is revoked or expires; that cancels the command too. */
                k = req_stream_acquire(r);
                if (k < 0)
                        return k == -EBUSY ? 0 : k; /* -EBUSY: answered 429 */
                for (int i = 0; i < 2; i++) {
                        if (pipe2(fds[i], O_CLOEXEC) < 0)
                                return -errno;
                        e->pipes[i].fd = fds[i][0];
                        e->out_fds[i] = fds[i][1];
                        (void) fcntl(fds[i][0], F_SETFL, O_NONBLOCK);
                        k = sd_event_add_io(r->manager->event, &e->pipes[i].source, fds[i][0], EPOLLIN, on_pipe, e);
                        if (k < 0)
                                return k;
                }
        }

        /* A client that leaves cancels the command (on_client_gone()). */
        k = req_cancel_pipe(r, &e->cancel_read_fd);
        if (k < 0)
                return k;

        /* long: it must not take the bus room that short calls need (BusShortCallReserve=) */
        k = req_call_full(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "Exec",
                          build_exec, on_exec_reply,
                          manager_exec_call_timeout(r->manager, NULL, json_get_uint(body, "timeout_seconds")),
                          BUS_POOL_LONG);
        return k == -EBUSY ? 0 : k; /* -EBUSY: answered 429 */
}
