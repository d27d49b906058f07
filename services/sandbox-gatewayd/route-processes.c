/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* …/processes: sandboxd's background processes (StartProcess, ListProcesses, ReadProcessOutput,
 * WriteProcessStdin, SignalProcess, WaitProcess) as REST routes. The process object is a row of
 * ListProcesses; every route that changes a process answers with it as it is afterwards. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "gatewayd-routes.h"
#include "ini-util.h"
#include "log.h"
#include "process-follow.h"
#include "sse.h"
#include "time-util.h"

/* DELETE: how long a process has after SIGTERM before it gets SIGKILL. */
#define PROCESS_STOP_GRACE_USEC (5 * USEC_PER_SEC)

static const JsonField start_fields[] = {
        { "argv", JSON_FIELD_STRV, .required = true },
        { "cwd", JSON_FIELD_STRING },
        { "env", JSON_FIELD_STRMAP },
        { "timeout_seconds", JSON_FIELD_UINT },
};

static const JsonField stdin_fields[] = {
        { "data", JSON_FIELD_STRING },
        { "close", JSON_FIELD_BOOL },
        { "encoding", JSON_FIELD_STRING },
};

typedef struct ProcessOp {
        json_object *body;
        char **argv;
        char *process;    /* the process's id: the path's, or StartProcess's answer */
        unsigned status;  /* of the answer with the process object */
        /* output */
        const char *stream;
        uint64_t offset;
        uint32_t max;
        bool base64;
        /* stdin */
        uint8_t *data;
        size_t size;
        bool close;
        /* signal, DELETE */
        int signal;
        bool killed;      /* DELETE: SIGKILL was sent */
} ProcessOp;

static void process_op_free(void *p) {
        ProcessOp *op = p;

        if (!op)
                return;
        json_object_put(op->body);
        strv_free(op->argv);
        free(op->process);
        free(op->data);
        free(op);
}

static int process_op_new(Request *r, json_object *body, ProcessOp **ret) {
        ProcessOp *op;

        op = calloc(1, sizeof(ProcessOp));
        if (!op) {
                json_object_put(body);
                return -ENOMEM;
        }
        op->body = body;
        op->status = 200;
        r->data = op;
        r->data_free = process_op_free;
        if (req_param(r, 1)) {
                op->process = strdup(req_param(r, 1));
                if (!op->process)
                        return -ENOMEM;
        }
        *ret = op;
        return 0;
}

/* --- the process object ------------------------------------------------------------------------- */

int process_json(Request *r, sd_bus_message *m, json_object **ret) {
        const char *id, *state, *unit, *path;
        json_object *o, *argv;
        uint64_t started;
        int32_t exit_code;
        uint32_t pid;
        char **a = NULL;
        int k;

        k = sd_bus_message_enter_container(m, 'r', "ssiutasso");
        if (k <= 0)
                return k;
        k = sd_bus_message_read(m, "ssiut", &id, &state, &exit_code, &pid, &started);
        if (k >= 0)
                k = sd_bus_message_read_strv(m, &a);
        if (k >= 0)
                k = sd_bus_message_read(m, "so", &unit, &path);
        if (k >= 0)
                k = sd_bus_message_exit_container(m);
        if (k < 0) {
                strv_free(a);
                return k;
        }
        o = json_object_new_object();
        argv = json_object_new_array();
        if (!o || !argv) {
                json_object_put(o);
                json_object_put(argv);
                strv_free(a);
                return -ENOMEM;
        }
        for (char **s = a; s && *s; s++)
                json_object_array_add(argv, json_object_new_string(*s));
        strv_free(a);
        json_object_object_add(o, "id", json_object_new_string(id));
        json_object_object_add(o, "sandbox", json_object_new_string(req_param(r, 0)));
        json_object_object_add(o, "state", json_object_new_string(state));
        json_object_object_add(o, "exit_code", streq(state, "running") ? NULL : json_object_new_int(exit_code));
        json_object_object_add(o, "pid", json_object_new_uint64(pid));
        json_object_object_add(o, "started_at", json_time(started));
        json_object_object_add(o, "argv", argv);
        json_object_object_add(o, "unit", json_object_new_string(unit));
        *ret = o;
        return 1;
}

static int build_id(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        return sd_bus_message_append(m, "s", req_param(r, 0));
}

static int build_id_process(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        ProcessOp *op = r->data;
        return sd_bus_message_append(m, "ss", req_param(r, 0), op->process);
}

/* ListProcesses' answer: all of them (op->process NULL), or the one of op->process. */
static void on_list(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        ProcessOp *op = r->data;
        json_object *list, *o;
        int k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        list = json_object_new_array();
        if (!list)
                return req_reply_errno(r, -ENOMEM);
        k = sd_bus_message_enter_container(reply, 'a', "(ssiutasso)");
        while (k >= 0 && (k = process_json(r, reply, &o)) > 0) {
                if (op->process && !streq(json_object_get_string(json_object_object_get(o, "id")), op->process)) {
                        json_object_put(o);
                        continue;
                }
                json_object_array_add(list, o);
        }
        if (k < 0) {
                json_object_put(list);
                return req_reply_errno(r, k);
        }
        if (op->process) {
                if (json_object_array_length(list) == 0) {
                        json_object_put(list);
                        return req_reply_error(r, 404, "not_found", "Process %s does not exist in sandbox %s.",
                                               op->process, req_param(r, 0));
                }
                o = json_object_get(json_object_array_get_idx(list, 0));
                json_object_put(list);
                return req_reply_json(r, op->status, o);
        }
        o = json_object_new_object();
        if (!o) {
                json_object_put(list);
                return req_reply_errno(r, -ENOMEM);
        }
        json_object_object_add(o, "processes", list);
        req_reply_json(r, 200, o);
}

/* Answers with op->status and the object of op->process (all of them if NULL). */
static void reply_process(Request *r) {
        int k;

        k = req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "ListProcesses",
                     build_id, on_list, 0);
        if (k == -EBUSY) /* answered 429 */
                return;
        if (k < 0)
                req_reply_errno(r, k);
}

int route_process_list(Request *r) {
        ProcessOp *op;
        int k;

        k = process_op_new(r, NULL, &op);
        if (k < 0)
                return k;
        reply_process(r);
        return 0;
}

int route_process_get(Request *r) {
        return route_process_list(r);
}

/* --- POST …/processes ---------------------------------------------------------------------------- */

static int build_start(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        ProcessOp *op = r->data;
        int k;

        k = sd_bus_message_append(m, "s", req_param(r, 0));
        if (k >= 0)
                k = sd_bus_message_append_strv(m, op->argv);
        if (k >= 0)
                k = sd_bus_message_open_container(m, 'a', "{sv}");
        if (k >= 0)
                k = exec_append_cwd_env(m, op->body);
        if (k >= 0 && json_object_object_get_ex(op->body, "timeout_seconds", NULL))
                k = sd_bus_message_append(m, "{sv}", "timeout_seconds", "t",
                                          json_get_uint(op->body, "timeout_seconds"));
        if (k >= 0)
                k = sd_bus_message_append(m, "{sv}{sv}{sv}", "account_id", "s", r->account_id, "request_id", "s",
                                          r->request_id, "source", "s", "agent");
        if (k >= 0)
                k = sd_bus_message_close_container(m);
        return k;
}

static void on_start(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        ProcessOp *op = r->data;
        const char *id;
        int k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        k = sd_bus_message_read(reply, "s", &id);
        if (k < 0)
                return req_reply_errno(r, k);
        op->process = strdup(id);
        if (!op->process)
                return req_reply_errno(r, -ENOMEM);
        op->status = 201;
        reply_process(r);
}

int route_process_start(Request *r) {
        json_object *body;
        ProcessOp *op;
        int k;

        k = req_parse_json(r, start_fields, ELEMENTSOF(start_fields), &body);
        if (k < 0)
                return 0;
        k = process_op_new(r, body, &op);
        if (k < 0)
                return k;
        k = json_get_strv(body, "argv", &op->argv);
        if (k < 0)
                return k;
        if (!op->argv || !op->argv[0]) {
                req_reply_error(r, 400, "invalid_request", "Field 'argv' must not be empty.");
                return 0;
        }
        /* a start is a new scope through systemd, as an Exec's: the same budget of starts */
        k = req_exec_start_take(r);
        if (k < 0)
                return k == -EBUSY ? 0 : k; /* -EBUSY: answered 429 */
        k = req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "StartProcess",
                     build_start, on_start, 0);
        return k == -EBUSY ? 0 : k;
}

/* --- GET …/processes/{p}/output ------------------------------------------------------------------ */

static int build_read_output(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        ProcessOp *op = r->data;
        return sd_bus_message_append(m, "ssstu", req_param(r, 0), op->process, op->stream, op->offset, op->max);
}

static void on_read_output(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        ProcessOp *op = r->data;
        uint64_t next, first;
        const void *data = NULL;
        size_t size = 0;
        json_object *o, *v;
        int ended, k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        k = sd_bus_message_read_array(reply, 'y', &data, &size);
        if (k >= 0)
                k = sd_bus_message_read(reply, "ttb", &next, &first, &ended);
        if (k < 0)
                return req_reply_errno(r, k);
        if (op->base64)
                v = json_bytes(data, size, true);
        else {
                _cleanup_free_ char *text = NULL;
                size_t len, used;

                /* An incomplete character at the end is left for the next read (next_offset before it),
                 * unless nothing more will come, or it is all there is. */
                k = utf8_sanitize(data, size, ended ? 0 : UTF8_KEEP_TAIL, &text, &len, &used);
                if (k >= 0 && used == 0 && size > 0 && size == op->max) {
                        /* less than one character asked for (max < 4): U+FFFD rather than no progress;
                         * a character the process has not finished writing waits for the rest */
                        free(text);
                        text = NULL;
                        k = utf8_sanitize(data, size, 0, &text, &len, &used);
                }
                if (k < 0)
                        return req_reply_errno(r, k);
                next -= size - used;
                v = json_object_new_string_len(text, (int) len);
        }
        o = json_object_new_object();
        if (!o || !v) {
                json_object_put(o);
                json_object_put(v);
                return req_reply_errno(r, -ENOMEM);
        }
        json_object_object_add(o, "data", v);
        json_object_object_add(o, "encoding", json_object_new_string(op->base64 ? "base64" : "utf-8"));
        json_object_object_add(o, "next_offset", json_object_new_uint64(next));
        json_object_object_add(o, "first_offset", json_object_new_uint64(first));
        json_object_object_add(o, "ended", json_object_new_boolean(ended));
        req_reply_json(r, 200, o);
}

static bool wants_follow(Request *r, int *ret) {
        const char *q = req_query(r, "follow"), *accept = req_header(r, "Accept");

        if (q) {
                if (streq(q, "true") || streq(q, "1"))
                        *ret = 1;
                else if (streq(q, "false") || streq(q, "0"))
                        *ret = 0;
                else
                        return false;
                return true;
        }
        *ret = accept && strstr(accept, "text/event-stream");
        return true;
}

/* GET …/output?follow=true (or Accept: text/event-stream): SSE from offset (or Last-Event-ID) on. */
static int route_process_follow(Request *r, ProcessOp *op) {
        const char *v, *last = req_header(r, "Last-Event-ID");
        uint64_t pos[2] = {};
        unsigned streams;
        int k;

        streams = streq(op->stream, "both") ? FOLLOW_STDOUT | FOLLOW_STDERR :
                  streq(op->stream, "stderr") ? FOLLOW_STDERR : FOLLOW_STDOUT;
        if (req_query(r, "max")) {
                req_reply_error(r, 400, "invalid_request",
                                "The query parameter 'max' is for a read, not for follow=true.");
                return 0;
        }
        if ((v = req_query(r, "offset")) && (k = follow_position_parse(v, pos)) < 0) {
                if (k == -ENOMEM)
                        return k;
                req_reply_error(r, 400, "invalid_request",
                                "The query parameter 'offset' must be a number, or \"<stdout offset>:<stderr "
                                "offset>\" (an event's id).");
                return 0;
        }
        /* a reconnecting client goes on after the last event it has */
        if (last && (k = follow_position_parse(last, pos)) < 0) {
                if (k == -ENOMEM)
                        return k;
                req_reply_error(r, 400, "invalid_request",
                                "Last-Event-ID must be an event's id: \"<stdout offset>:<stderr offset>\".");
                return 0;
        }
        k = req_stream_acquire(r);
        if (k < 0)
                return k == -EBUSY ? 0 : k; /* -EBUSY: answered 429 */
        return follow_start(r, req_param(r, 1), streams, pos, op->base64);
}

int route_process_output(Request *r) {
        const char *v, *enc;
        ProcessOp *op;
        uint64_t max = 0;
        int follow, k;

        k = process_op_new(r, NULL, &op);
        if (k < 0)
                return k;
        if (!wants_follow(r, &follow)) {
                req_reply_error(r, 400, "invalid_request", "The query parameter 'follow' must be true or false.");
                return 0;
        }
        op->stream = req_query(r, "stream") ?: "stdout";
        if (!streq(op->stream, "stdout") && !streq(op->stream, "stderr") && !(follow && streq(op->stream, "both"))) {
                req_reply_error(r, 400, "invalid_request",
                                follow ? "The query parameter 'stream' must be \"stdout\", \"stderr\" or \"both\"." :
                                         "The query parameter 'stream' must be \"stdout\" or \"stderr\" "
                                         "(\"both\" needs follow=true).");
                return 0;
        }
        enc = req_query(r, "encoding");
        if (enc && !streq(enc, "base64") && !streq(enc, "utf-8")) {
                req_reply_error(r, 400, "invalid_request",
                                "The query parameter 'encoding' must be \"utf-8\" or \"base64\".");
                return 0;
        }
        op->base64 = enc && streq(enc, "base64");
        if (follow)
                return route_process_follow(r, op);
        if ((v = req_query(r, "offset")) && parse_decimal(v, &op->offset) < 0) {
                req_reply_error(r, 400, "invalid_request", "The query parameter 'offset' must be a number.");
                return 0;
        }
        if ((v = req_query(r, "max")) && (parse_decimal(v, &max) < 0 || max > UINT32_MAX)) {
                req_reply_error(r, 400, "invalid_request",
                                "The query parameter 'max' must be a number of bytes up to %" PRIu32 ".",
                                UINT32_MAX);
                return 0;
        }
        op->max = (uint32_t) max;
        return req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "ReadProcessOutput",
                        build_read_output, on_read_output, 0);
}

/* --- POST …/processes/{p}/stdin ------------------------------------------------------------------ */

static int build_write_stdin(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        ProcessOp *op = r->data;
        int k;

        k = sd_bus_message_append(m, "ss", req_param(r, 0), op->process);
        if (k >= 0)
                k = sd_bus_message_append_array(m, 'y', op->data ?: (uint8_t *) "", op->size);
        if (k >= 0)
                k = sd_bus_message_append(m, "b", op->close);
        return k;
}

static void on_write_stdin(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        req_reply_empty(r, 204);
}

int route_process_stdin(Request *r) {
        const char *data, *enc;
        json_object *body, *v;
        ProcessOp *op;
        int k;

        k = req_parse_json(r, stdin_fields, ELEMENTSOF(stdin_fields), &body);
        if (k < 0)
                return 0;
        k = process_op_new(r, body, &op);
        if (k < 0)
                return k;
        enc = json_get_string(body, "encoding");
        if (enc && !streq(enc, "base64") && !streq(enc, "utf-8")) {
                req_reply_error(r, 400, "invalid_request", "Field 'encoding' must be \"utf-8\" or \"base64\".");
                return 0;
        }
        op->close = json_object_object_get_ex(body, "close", &v) && json_object_get_boolean(v);
        data = json_get_string(body, "data");
        if (!data && !json_object_object_get_ex(body, "close", NULL)) {
                req_reply_error(r, 400, "invalid_request", "Field 'data' or 'close' is required.");
                return 0;
        }
        if (data && enc && streq(enc, "base64")) {
                k = base64_decode_alloc(data, &op->data, &op->size);
                if (k == -EINVAL) {
                        req_reply_error(r, 400, "invalid_request", "Field 'data' is not valid base64.");
                        return 0;
                }
                if (k < 0)
                        return k;
        } else if (data) {
                op->size = strlen(data);
                op->data = (uint8_t *) strdup(data);
                if (!op->data)
                        return -ENOMEM;
        }
        k = req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "WriteProcessStdin",
                     build_write_stdin, on_write_stdin, 0);
        return k == -EBUSY ? 0 : k;
}

/* --- POST …/processes/{p}/signal, DELETE …/processes/{p} ----------------------------------------- */

/* A signal by number (1 to SIGRTMAX) or name ("TERM", "SIGTERM"); 0 if it is none. */
static int signal_from_json(json_object *v) {
        const char *s;

        if (json_object_is_type(v, json_type_int)) {
                int64_t n = json_object_get_int64(v);
                return n >= 1 && n <= SIGRTMAX ? (int) n : 0;
        }
        if (!json_object_is_type(v, json_type_string))
                return 0;
        s = json_object_get_string(v);
        if (strncmp(s, "SIG", 3) == 0)
                s += 3;
        for (int sig = 1; sig < SIGRTMIN; sig++) {
                const char *name = sigabbrev_np(sig);
                if (name && streq(name, s))
                        return sig;
        }
        return 0;
}

static int build_signal(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        ProcessOp *op = r->data;
        int k;

        k = sd_bus_message_append(m, "ssi", req_param(r, 0), op->process, op->signal);
        if (k >= 0)
                k = req_append_context(r, m);
        return k;
}

static void on_signal(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        reply_process(r);
}

int route_process_signal(Request *r) {
        _cleanup_free_ char *error = NULL;
        json_object *body = NULL, *v;
        ProcessOp *op;
        int k;

        /* "signal" is a number or a name: no JsonField type says that, so the body is checked here */
        k = json_parse_body(r->body ?: "", r->body_size, (unsigned) r->manager->config.json_depth_max, true, &body,
                            &error);
        if (k == -ENOMEM)
                return k;
        if (k < 0) {
                req_reply_error(r, 400, k == -EILSEQ ? "invalid_request" : "invalid_json", "%s",
                                error ?: "The body is not valid JSON.");
                return 0;
        }
        k = process_op_new(r, body, &op);
        if (k < 0)
                return k;
        if (!json_object_is_type(body, json_type_object)) {
                req_reply_error(r, 400, "invalid_request", "The JSON body must be an object.");
                return 0;
        }
        json_object_object_foreach(body, key, val) {
                (void) val;
                if (!streq(key, "signal")) {
                        req_reply_error(r, 400, "invalid_request", "Unknown field '%s'.", key);
                        return 0;
                }
        }
        if (!json_object_object_get_ex(body, "signal", &v)) {
                req_reply_error(r, 400, "invalid_request", "Field 'signal' is required.");
                return 0;
        }
        op->signal = signal_from_json(v);
        if (op->signal == 0) {
                req_reply_error(r, 400, "invalid_request",
                                "Field 'signal' must be a signal's name (\"TERM\", \"SIGTERM\") or number (1 to %d).",
                                SIGRTMAX);
                return 0;
        }
        k = req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "SignalProcess",
                     build_signal, on_signal, 0);
        return k == -EBUSY ? 0 : k;
}

static void on_stop_signal(Request *r, sd_bus_message *reply, const sd_bus_error *error);

static int stop_send(Request *r, int sig) {
        ProcessOp *op = r->data;

        op->signal = sig;
        op->killed = sig == SIGKILL;
        return req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "SignalProcess",
                        build_signal, on_stop_signal, 0);
}

/* The rest of a DELETE whose client left: the grace, then SIGKILL, sent all the same with the request's
 * context, on no request (nobody reads the answers). */
typedef struct DetachedStop {
        Manager *manager;
        char *sandbox, *process, *account_id, *request_id;
} DetachedStop;

static void detached_stop_free(DetachedStop *s) {
        if (!s)
                return;
        free(s->sandbox);
        free(s->process);
        free(s->account_id);
        free(s->request_id);
        free(s);
}

static int build_detached_wait(sd_bus_message *m, void *userdata) {
        DetachedStop *s = userdata;
        return sd_bus_message_append(m, "ss", s->sandbox, s->process);
}

static int build_detached_kill(sd_bus_message *m, void *userdata) {
        DetachedStop *s = userdata;
        return sd_bus_message_append(m, "ssia{sv}", s->sandbox, s->process, SIGKILL, 3, "account_id", "s",
                                     s->account_id, "request_id", "s", s->request_id, "source", "s", "agent");
}

static void on_detached_kill(sd_bus_message *reply, const sd_bus_error *error, void *userdata) {
        DetachedStop *s = userdata;

        if (sd_bus_error_is_set(error) && !sd_bus_error_has_name(error, SANDBOXD_ERROR_NOT_RUNNING))
                log_msg(LOG_WARNING, "Cannot send SIGKILL to process %s of sandbox %s (request %s): %s", s->process,
                        s->sandbox, s->request_id, error->message ?: error->name);
        detached_stop_free(s);
}

static int detached_kill(DetachedStop *s) {
        return bus_pool_call(s->manager->pool, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                             "SignalProcess", build_detached_kill, on_detached_kill, s, 0);
}

static void on_detached_wait(sd_bus_message *reply, const sd_bus_error *error, void *userdata) {
        DetachedStop *s = userdata;
        int k;

        /* ended within the grace (or no such process any more): done */
        if (!sd_bus_error_has_name(error, SD_BUS_ERROR_NO_REPLY))
                return detached_stop_free(s);
        k = detached_kill(s);
        if (k < 0) {
                log_msg(LOG_ERR, "Cannot send SIGKILL to process %s of sandbox %s (request %s): %s", s->process,
                        s->sandbox, s->request_id, strerror(-k));
                detached_stop_free(s);
        }
}

/* Goes on with r's stop without r: the grace first (wait), or SIGKILL now. */
static void stop_detach(Request *r, bool wait) {
        ProcessOp *op = r->data;
        DetachedStop *s;
        int k = -ENOMEM;

        s = calloc(1, sizeof(DetachedStop));
        if (s) {
                s->manager = r->manager;
                s->sandbox = strdup(req_param(r, 0));
                s->process = strdup(op->process);
                s->account_id = strdup(strempty(r->account_id));
                s->request_id = strdup(r->request_id);
        }
        if (s && s->sandbox && s->process && s->account_id && s->request_id)
                k = wait ? bus_pool_call_full(r->manager->pool, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                              SANDBOXD_MANAGER_INTERFACE, "WaitProcess", build_detached_wait,
                                              on_detached_wait, s, PROCESS_STOP_GRACE_USEC, BUS_POOL_LONG)
                         : detached_kill(s);
        if (k < 0) {
                log_msg(LOG_ERR, "Cannot finish stopping process %s of sandbox %s (request %s): %s", op->process,
                        req_param(r, 0), r->request_id, strerror(-k));
                detached_stop_free(s);
        }
}

/* WaitProcess after SIGTERM: it ended, or the grace ran out (the call's timeout) and SIGKILL follows. */
static void on_stop_wait(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        ProcessOp *op = r->data;
        int k;

        if (sd_bus_error_has_name(error, SD_BUS_ERROR_NO_REPLY) && !op->killed) {
                k = stop_send(r, SIGKILL);
                if (k == -ECANCELED)
                        /* the client left during the grace: the process is stopped all the same */
                        return stop_detach(r, false);
                if (k < 0 && k != -EBUSY)
                        req_reply_errno(r, k);
                return;
        }
        if (sd_bus_error_get_errno(error) == ECANCELED && !op->killed)
                /* the client left while the wait still waited for bus room: it was never sent */
                return stop_detach(r, true);
        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        reply_process(r);
}

static void on_stop_signal(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        ProcessOp *op = r->data;
        int k;

        /* it had ended already (or did so just now): nothing to stop */
        if (sd_bus_error_has_name(error, SANDBOXD_ERROR_NOT_RUNNING))
                return reply_process(r);
        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        /* long: the grace must not take the bus room that short calls need */
        k = req_call_full(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "WaitProcess",
                          build_id_process, on_stop_wait, op->killed ? 0 : PROCESS_STOP_GRACE_USEC, BUS_POOL_LONG);
        if (k == -ECANCELED && !op->killed)
                /* the client left once SIGTERM was sent: the grace and SIGKILL follow all the same */
                return stop_detach(r, true);
        if (k < 0 && k != -EBUSY)
                req_reply_errno(r, k);
}

int route_process_delete(Request *r) {
        ProcessOp *op;
        int k;

        k = process_op_new(r, NULL, &op);
        if (k < 0)
                return k;
        k = stop_send(r, SIGTERM);
        return k == -EBUSY ? 0 : k;
}
