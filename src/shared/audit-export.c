/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The run-session export of the audit log: rows to audit.jsonl events and run metadata (audit-api.md). */
#include "audit-export.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "sandbox-id.h"
#include "time-util.h"

static const char *const command_operations[] = { "exec", "takeover" };
static const char *const file_operations[] = {
        "file_create", "write", "read", "view", "str_replace", "insert", "ls", "glob", "grep",
};
static const char *const process_operations[] = { "process.start", "process.signal", "process.exit" };

int audit_export_read_row(sd_bus_message *m, json_object **ret) {
        json_object *o;
        int k;

        k = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (k <= 0)
                return k;
        o = json_object_new_object();
        if (!o)
                return -ENOMEM;
        while ((k = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                const char *key, *contents;
                json_object *v = NULL;
                union {
                        const char *s;
                        int b;
                        int32_t i;
                        uint64_t t;
                } u;

                k = sd_bus_message_read(m, "s", &key);
                if (k >= 0)
                        k = sd_bus_message_peek_type(m, NULL, &contents);
                if (k < 0)
                        break;
                if (streq(contents, "s") || streq(contents, "b") || streq(contents, "i") ||
                    streq(contents, "t")) {
                        k = sd_bus_message_enter_container(m, 'v', contents);
                        if (k >= 0)
                                k = sd_bus_message_read_basic(m, contents[0], &u);
                        if (k >= 0)
                                k = sd_bus_message_exit_container(m);
                        if (k < 0)
                                break;
                        switch (contents[0]) {
                        case 's':
                                if (streq(key, "detail") || streq(key, "output_truncated")) {
                                        v = json_tokener_parse(u.s);
                                        if (!v && !streq(u.s, "null"))
                                                v = json_object_new_string(u.s);
                                } else
                                        v = json_object_new_string(u.s);
                                break;
                        case 'b':
                                v = json_object_new_boolean(u.b);
                                break;
                        case 'i':
                                v = json_object_new_int(u.i);
                                break;
                        default:
                                v = json_object_new_uint64(u.t);
                        }
                        if (json_object_object_add(o, key, v) < 0) {
                                json_object_put(v);
                                k = -ENOMEM;
                                break;
                        }
                } else if ((k = sd_bus_message_skip(m, "v")) < 0)
                        break;
                k = sd_bus_message_exit_container(m);
                if (k < 0)
                        break;
        }
        if (k >= 0)
                k = sd_bus_message_exit_container(m);
        if (k < 0) {
                json_object_put(o);
                return k;
        }
        *ret = o;
        return 1;
}

static const char *row_string(json_object *row, const char *key) {
        json_object *v;

        if (!json_object_object_get_ex(row, key, &v) || !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

static uint64_t row_uint(json_object *row, const char *key) {
        json_object *v;

        if (!json_object_object_get_ex(row, key, &v) || !json_object_is_type(v, json_type_int))
                return 0;
        return json_object_get_uint64(v);
}

static bool in_list(const char *s, const char *const *list, size_t n) {
        for (size_t i = 0; s && i < n; i++)
                if (streq(s, list[i]))
                        return true;
        return false;
}

AuditExportKind audit_export_kind(json_object *row) {
        const char *op = row_string(row, "operation");

        if (in_list(op, command_operations, ELEMENTSOF(command_operations)))
                return AUDIT_EXPORT_COMMAND;
        if (in_list(op, file_operations, ELEMENTSOF(file_operations)))
                return AUDIT_EXPORT_FILE;
        if (in_list(op, process_operations, ELEMENTSOF(process_operations)))
                return AUDIT_EXPORT_PROCESS;
        return AUDIT_EXPORT_NONE;
}

static json_object *detail_get(json_object *row, const char *key) {
        json_object *d, *v;

        if (!json_object_object_get_ex(row, "detail", &d) || !json_object_is_type(d, json_type_object) ||
            !json_object_object_get_ex(d, key, &v))
                return NULL;
        return v;
}

static uint64_t detail_uint(json_object *row, const char *key) {
        json_object *v = detail_get(row, key);
        return v && json_object_is_type(v, json_type_int) ? json_object_get_uint64(v) : 0;
}

/* sandboxd's process ids: "p" and the number of its scope (dbus-api.md). */
static bool process_id_is_valid(const char *s) {
        size_t n;

        if (!s || s[0] != 'p')
                return false;
        n = strspn(s + 1, "0123456789");
        return n >= 1 && n <= 10 && s[1 + n] == '\0';
}

/* All rows of one background process name its sandbox and its id, which is never reused within the
 * sandbox: together they are its run. Both are checked for their exact form, so the result is a safe
 * file name whatever a row says. */
static bool process_run_id(json_object *row, char ret[static AUDIT_EXPORT_RUN_ID_MAX]) {
        const char *sandbox = row_string(row, "session_id");
        json_object *v = detail_get(row, "process");
        const char *process = v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;

        if (!sandbox_id_is_valid(sandbox) || !process_id_is_valid(process))
                return false;
        snprintf(ret, AUDIT_EXPORT_RUN_ID_MAX, "run-%s-%s", sandbox, process);
        return true;
}

int audit_export_run_id(json_object *row, char ret[static AUDIT_EXPORT_RUN_ID_MAX]) {
        uint64_t id = row_uint(row, "id");

        if (id == 0)
                return -EINVAL;
        if (audit_export_kind(row) == AUDIT_EXPORT_PROCESS && process_run_id(row, ret))
                return 0;
        snprintf(ret, AUDIT_EXPORT_RUN_ID_MAX, "run-%" PRIu64, id);
        return 0;
}

static bool detail_bool(json_object *row, const char *key) {
        json_object *v = detail_get(row, key);
        return v && json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v);
}

static bool word_is_safe(const char *s) {
        if (!*s)
                return false;
        for (; *s; s++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-", *s))
                        return false;
        return true;
}

char *audit_export_command_line(json_object *argv) {
        size_t n = argv && json_object_is_type(argv, json_type_array) ? json_object_array_length(argv) : 0;
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        f = open_memstream(&buf, &size);
        if (!f)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                const char *w = json_object_get_string(json_object_array_get_idx(argv, i));

                if (i > 0)
                        fputc(' ', f);
                if (word_is_safe(w)) {
                        fputs(w, f);
                        continue;
                }
                fputc('\'', f);
                for (const char *p = w; *p; p++)
                        if (*p == '\'')
                                fputs("'\\''", f);
                        else
                                fputc(*p, f);
                fputc('\'', f);
        }
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

/* What became of a command: "finished" (ran, exit code 0), "failed" (ran, and ended otherwise), "denied"
 * or "blocked" (never ran); for "failed" also why. */
static const char *command_status(json_object *row, const char **ret_reason) {
        const char *event = row_string(row, "event"), *op = row_string(row, "operation");
        json_object *exit_code = NULL, *sig;

        *ret_reason = NULL;
        if (!event || streq(event, "denied"))
                return "denied";
        if (streq(event, "blocked"))
                return "blocked";
        /* A call refused before it started records only {"error","message"}: no argv (exec), no unit
         * (takeover). */
        if (streq(event, "failed") && !detail_get(row, streq_ptr(op, "takeover") ? "unit" : "argv"))
                return "blocked";
        if (streq(event, "finished")) {
                (void) json_object_object_get_ex(row, "exit_code", &exit_code);
                sig = detail_get(row, "signal");
                if (sig && json_object_get_int(sig) != 0) {
                        *ret_reason = "signal";
                        return "failed";
                }
                if (exit_code && json_object_get_int(exit_code) != 0) {
                        *ret_reason = "exit_code";
                        return "failed";
                }
                return "finished";
        }
        /* timed_out, oom_killed, cancelled, and failed after it started (could not execute argv[0],
         * sandboxd went away: "error" in the detail) */
        *ret_reason = streq(event, "failed") ? "error" : event;
        return "failed";
}

static int add(json_object *o, const char *key, json_object *v) {
        if (json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

static int add_copy(json_object *o, const char *key, json_object *v) {
        return v ? add(o, key, json_object_get(v)) : 0;
}

static int add_time(json_object *o, const char *key, uint64_t usec) {
        char buf[RFC3339_USEC_MAX];

        if (format_rfc3339_usec(usec, buf) < 0)
                return add(o, key, NULL);
        return add(o, key, json_object_new_string(buf));
}

static int add_string(json_object *o, const char *key, const char *s) {
        return add(o, key, s ? json_object_new_string(s) : NULL);
}

static int add_row_fields(json_object *o, json_object *row) {
        json_object *v;
        int k;

        /* ours, after the common layout's: where, who, through what, and the row to look it up by */
        k = add_string(o, "sandbox", row_string(row, "session_id"));
        k = k ?: add_string(o, "account", row_string(row, "account_id"));
        k = k ?: add_string(o, "source", row_string(row, "source"));
        k = k ?: add(o, "rowId", json_object_new_uint64(row_uint(row, "id")));
        k = k ?: add_string(o, "requestId", row_string(row, "request_id"));
        k = k ?: add_string(o, "operation", row_string(row, "operation"));
        k = k ?: add_string(o, "rowEvent", row_string(row, "event"));
        if (!k && (v = detail_get(row, "error")))
                k = add_copy(o, "error", v) ?: add_copy(o, "message", detail_get(row, "message"));
        return k;
}

static int add_command_fields(json_object *o, json_object *row) {
        _cleanup_free_ char *line = NULL;
        const char *op = row_string(row, "operation");
        json_object *argv = detail_get(row, "argv");
        int k;

        k = add_string(o, "kind", audit_export_kind(row) == AUDIT_EXPORT_PROCESS ? "process" : op);
        if (argv && !streq_ptr(op, "takeover")) {
                line = audit_export_command_line(argv);
                if (!line)
                        return -ENOMEM;
        }
        /* a takeover runs the sandbox user's login shell: there is no command line */
        k = k ?: add_string(o, "command", line);
        k = k ?: add_copy(o, "argv", argv);
        k = k ?: add_copy(o, "cwd", detail_get(row, "cwd"));
        k = k ?: add_copy(o, "process", detail_get(row, "process"));
        return k;
}

static int add_result_fields(json_object *o, json_object *row, const char *status, const char *reason,
                             bool ran) {
        json_object *v = NULL;
        int k;

        (void) json_object_object_get_ex(row, "exit_code", &v);
        /* a command that never ran has no exit code (the row says -1) */
        k = add(o, "exitCode", ran && v ? json_object_new_int(json_object_get_int(v)) : NULL);
        k = k ?: add(o, "durationMs", json_object_new_uint64(row_uint(row, "duration_ms")));
        k = k ?: add(o, "stdoutBytes", json_object_new_uint64(row_uint(row, "stdout_size")));
        k = k ?: add(o, "stderrBytes", json_object_new_uint64(row_uint(row, "stderr_size")));
        /* an exec's capture lost its end (stdout_truncated); a process's exit row holds the last bytes of
         * its ring, so it lost the beginning (stdout_first_offset > 0) */
        k = k ?: add(o, "stdoutTruncated",
                     json_object_new_boolean(detail_bool(row, "stdout_truncated") ||
                                             detail_uint(row, "stdout_first_offset") > 0));
        k = k ?: add(o, "stderrTruncated",
                     json_object_new_boolean(detail_bool(row, "stderr_truncated") ||
                                             detail_uint(row, "stderr_first_offset") > 0));
        k = k ?: add_string(o, "status", status);
        if (!k && reason)
                k = add_string(o, "reason", reason);
        return k;
}

static int add_limits(json_object *o, json_object *row) {
        static const char *const keys[][2] = {
                { "timeout_seconds", "timeoutSeconds" },
                { "memory_max", "memoryMax" },
                { "tasks_max", "tasksMax" },
        };
        json_object *limits = json_object_new_object();
        int k = limits ? 0 : -ENOMEM;

        for (size_t i = 0; !k && i < ELEMENTSOF(keys); i++)
                k = add_copy(limits, keys[i][1], detail_get(row, keys[i][0]));
        if (k) {
                json_object_put(limits);
                return k;
        }
        return add(o, "limits", limits);
}

/* What only a background process's end says: what sandboxd calls its state, when it exec'd, where in each
 * stream its recorded output begins, how much it wrote in all, and whether its sandbox went. */
static int add_process_end_fields(json_object *o, json_object *row) {
        int k;

        k = add(o, "state", json_object_get(detail_get(row, "state")));
        k = k ?: add_time(o, "startedAt", row_uint(row, "started_at"));
        k = k ?: add_copy(o, "stdoutOffset", detail_get(row, "stdout_first_offset"));
        k = k ?: add_copy(o, "stderrOffset", detail_get(row, "stderr_first_offset"));
        k = k ?: add_copy(o, "stdoutTotalBytes", detail_get(row, "stdout_bytes"));
        k = k ?: add_copy(o, "stderrTotalBytes", detail_get(row, "stderr_bytes"));
        k = k ?: add_copy(o, "sandboxGone", detail_get(row, "sandbox_gone"));
        return k;
}

static int command_event(json_object *row, const char *run_id, const char *name, uint64_t usec,
                         const char *status, const char *reason, bool ran, json_object **ret) {
        bool process = audit_export_kind(row) == AUDIT_EXPORT_PROCESS;
        json_object *o = json_object_new_object();
        int k = o ? 0 : -ENOMEM;

        k = k ?: add_string(o, "runId", run_id);
        k = k ?: add_time(o, "time", usec);
        k = k ?: add_string(o, "event", name);
        k = k ?: add_command_fields(o, row);
        /* a process's start says where it runs and within what, for a run directory that is not done */
        if (!k && process && !status) {
                k = add_limits(o, row);
                k = k ?: add_copy(o, "unit", detail_get(row, "unit"));
        }
        if (!k && status) {
                const char *event = row_string(row, "event");

                k = add_result_fields(o, row, status, reason, ran);
                k = k ?: add(o, "timedOut", json_object_new_boolean(streq_ptr(event, "timed_out")));
                k = k ?: add(o, "oomKilled", json_object_new_boolean(streq_ptr(event, "oom_killed")));
                k = k ?: add_copy(o, "signal", detail_get(row, "signal"));
                k = k ?: add_limits(o, row);
                k = k ?: add_copy(o, "unit", detail_get(row, "unit"));
                /* a takeover's stdout.txt is its asciicast v2 recording */
                k = k ?: add_copy(o, "recording", detail_get(row, "recording"));
                k = k ?: add_copy(o, "endedBy", detail_get(row, "ended_by"));
                if (!k && process)
                        k = add_process_end_fields(o, row);
        }
        k = k ?: add_row_fields(o, row);
        if (k) {
                json_object_put(o);
                return k;
        }
        *ret = o;
        return 0;
}

static int file_event(json_object *row, const char *run_id, json_object **ret) {
        _cleanup_free_ char *name = NULL;
        const char *event = row_string(row, "event");
        json_object *o, *v = NULL;
        bool ok = streq_ptr(event, "finished");
        int k;

        if (asprintf(&name, "sandbox.file.%s", row_string(row, "operation")) < 0)
                return -ENOMEM;
        o = json_object_new_object();
        k = o ? 0 : -ENOMEM;
        k = k ?: add_string(o, "runId", run_id);
        k = k ?: add_time(o, "time", row_uint(row, "started_at"));
        k = k ?: add_string(o, "event", name);
        k = k ?: add_copy(o, "path", detail_get(row, "path"));
        k = k ?: add_string(o, "status", event);
        if (!k)
                (void) json_object_object_get_ex(row, "exit_code", &v);
        k = k ?: add(o, "exitCode", json_object_new_int(v ? json_object_get_int(v) : 0));
        k = k ?: add(o, "durationMs", json_object_new_uint64(row_uint(row, "duration_ms")));
        k = k ?: add_copy(o, "detail", ok ? json_object_object_get(row, "detail") : NULL);
        k = k ?: add_row_fields(o, row);
        if (k) {
                json_object_put(o);
                return k;
        }
        *ret = o;
        return 0;
}

/* A signal sent to a background process (or refused: status is the row's event). */
static int signal_event(json_object *row, const char *run_id, json_object **ret) {
        json_object *o = json_object_new_object();
        int k = o ? 0 : -ENOMEM;

        k = k ?: add_string(o, "runId", run_id);
        k = k ?: add_time(o, "time", row_uint(row, "started_at"));
        k = k ?: add_string(o, "event", "sandbox.command.signal");
        k = k ?: add_string(o, "kind", "process");
        k = k ?: add_copy(o, "process", detail_get(row, "process"));
        k = k ?: add_copy(o, "signal", detail_get(row, "signal"));
        k = k ?: add_string(o, "status", row_string(row, "event"));
        k = k ?: add_copy(o, "unit", detail_get(row, "unit"));
        k = k ?: add_row_fields(o, row);
        if (k) {
                json_object_put(o);
                return k;
        }
        *ret = o;
        return 0;
}

int audit_export_events(json_object *row, json_object **ret) {
        char run_id[AUDIT_EXPORT_RUN_ID_MAX];
        AuditExportKind kind = audit_export_kind(row);
        json_object *events, *e = NULL;
        const char *status, *reason;
        int k = 0;

        events = json_object_new_array();
        if (!events)
                return -ENOMEM;
        if (kind == AUDIT_EXPORT_NONE) {
                *ret = events;
                return 0;
        }
        k = audit_export_run_id(row, run_id);
        if (k < 0)
                goto fail;

        const char *op = row_string(row, "operation");
        if (kind == AUDIT_EXPORT_FILE || (kind == AUDIT_EXPORT_PROCESS && streq(op, "process.signal"))) {
                k = kind == AUDIT_EXPORT_FILE ? file_event(row, run_id, &e) : signal_event(row, run_id, &e);
                if (k >= 0 && json_object_array_add(events, e) < 0)
                        k = -ENOMEM;
                goto done;
        }

        uint64_t start = row_uint(row, "started_at"),
                 end = start + row_uint(row, "duration_ms") * USEC_PER_MSEC;
        bool ran;
        char name[64];

        /* A background process is one run over several rows: its start row gives the started event (and
         * its end too, when it never ran), its exit row the end alone. */
        bool exit_row = kind == AUDIT_EXPORT_PROCESS && streq(op, "process.exit");
        if (kind == AUDIT_EXPORT_PROCESS && streq(op, "process.start") &&
            streq_ptr(row_string(row, "event"), "finished")) {
                k = command_event(row, run_id, "sandbox.command.started", start, NULL, NULL, true, &e);
                if (k >= 0 && json_object_array_add(events, e) < 0)
                        k = -ENOMEM;
                goto done;
        }

        status = command_status(row, &reason);
        ran = streq(status, "finished") || streq(status, "failed");
        if (ran && !exit_row) {
                k = command_event(row, run_id, "sandbox.command.started", start, NULL, NULL, true, &e);
                if (k >= 0 && json_object_array_add(events, e) < 0)
                        k = -ENOMEM;
                if (k < 0)
                        goto fail;
        }
        snprintf(name, sizeof name, "sandbox.command.%s", status);
        k = command_event(row, run_id, name, ran ? end : start, status, reason, ran, &e);
        if (k >= 0 && json_object_array_add(events, e) < 0)
                k = -ENOMEM;
done:
        if (k < 0)
                goto fail;
        *ret = events;
        return 0;
fail:
        json_object_put(events);
        return k;
}

int audit_export_metadata(json_object *row, json_object **ret) {
        char run_id[AUDIT_EXPORT_RUN_ID_MAX];
        const char *status, *reason;
        json_object *o = NULL;
        bool ran;
        int k;

        if (audit_export_kind(row) != AUDIT_EXPORT_COMMAND)
                return -EINVAL;
        k = audit_export_run_id(row, run_id);
        if (k < 0)
                return k;
        status = command_status(row, &reason);
        ran = streq(status, "finished") || streq(status, "failed");

        /* the run's last event, less its time and name, plus both ends of the run */
        uint64_t start = row_uint(row, "started_at");
        k = command_event(row, run_id, "", start, status, reason, ran, &o);
        if (k < 0)
                return k;
        json_object_object_del(o, "time");
        json_object_object_del(o, "event");
        k = add_time(o, "startedAt", start);
        k = k ?: add_time(o, "finishedAt", start + row_uint(row, "duration_ms") * USEC_PER_MSEC);
        if (k) {
                json_object_put(o);
                return k;
        }
        *ret = o;
        return 0;
}

static const char *ev_string(json_object *ev, const char *key) {
        return row_string(ev, key);
}

/* An event as metadata: everything but its time and name. */
static json_object *event_as_metadata(json_object *ev) {
        json_object *md = NULL;

        if (json_object_deep_copy(ev, &md, NULL) < 0)
                return NULL;
        json_object_object_del(md, "time");
        json_object_object_del(md, "event");
        return md;
}

/* The signals a process was sent, one entry per signal row, in row order; a row already there (a page
 * applied again) is not added twice. */
static int by_row_id(const void *a, const void *b) {
        uint64_t x = row_uint(*(json_object *const *) a, "rowId"), y = row_uint(*(json_object *const *) b, "rowId");
        return x < y ? -1 : x > y;
}

static int signals_add(json_object *signals, json_object *ev) {
        uint64_t id = row_uint(ev, "rowId");
        json_object *s;
        int k;

        for (size_t i = 0; i < json_object_array_length(signals); i++)
                if (row_uint(json_object_array_get_idx(signals, i), "rowId") == id)
                        return 0;
        s = json_object_new_object();
        k = s ? 0 : -ENOMEM;
        k = k ?: add_copy(s, "signal", json_object_object_get(ev, "signal"));
        k = k ?: add_copy(s, "time", json_object_object_get(ev, "time"));
        k = k ?: add(s, "rowId", json_object_new_uint64(id));
        k = k ?: add_copy(s, "account", json_object_object_get(ev, "account"));
        k = k ?: add_copy(s, "source", json_object_object_get(ev, "source"));
        k = k ?: add_copy(s, "requestId", json_object_object_get(ev, "requestId"));
        if (!k && json_object_array_add(signals, s) < 0)
                k = -ENOMEM;
        if (k) {
                json_object_put(s);
                return k;
        }
        json_object_array_sort(signals, by_row_id);
        return 0;
}

/* What the directory knew before (its signals, the row that started it) carried into new metadata. */
static int carry(json_object *md, json_object *old, json_object *ev, bool start) {
        json_object *v;
        int k = 0;

        if (start)
                k = add(md, "startRowId", json_object_new_uint64(row_uint(ev, "rowId")));
        else if (old && json_object_object_get_ex(old, "startRowId", &v) && v)
                k = add_copy(md, "startRowId", v);
        else
                k = add(md, "startRowId", NULL);
        if (!k && old && json_object_object_get_ex(old, "signals", &v) && json_object_is_type(v, json_type_array))
                k = add_copy(md, "signals", v);
        else if (!k)
                k = add(md, "signals", json_object_new_array());
        return k;
}

int audit_export_process_metadata(json_object *existing, json_object *events, json_object **ret) {
        AuditExportRunWrite what = AUDIT_EXPORT_RUN_UNCHANGED;
        json_object *md = NULL, *v;
        int k = 0;

        if (existing && json_object_deep_copy(existing, &md, NULL) < 0)
                return -ENOMEM;
        for (size_t i = 0; !k && i < json_object_array_length(events); i++) {
                json_object *ev = json_object_array_get_idx(events, i), *next = NULL;
                const char *name = ev_string(ev, "event");

                if (streq_ptr(name, "sandbox.command.signal")) {
                        if (!streq_ptr(ev_string(ev, "status"), "finished"))
                                continue; /* not sent: nothing about the process changed */
                        if (!md) {
                                /* its start is not in this export (retention removed it) */
                                md = json_object_new_object();
                                k = md ? 0 : -ENOMEM;
                                k = k ?: add_copy(md, "runId", json_object_object_get(ev, "runId"));
                                k = k ?: add_string(md, "kind", "process");
                                k = k ?: add_copy(md, "process", json_object_object_get(ev, "process"));
                                k = k ?: add_copy(md, "unit", json_object_object_get(ev, "unit"));
                                k = k ?: add_copy(md, "sandbox", json_object_object_get(ev, "sandbox"));
                                k = k ?: add(md, "state", NULL);
                                k = k ?: add(md, "startedAt", NULL);
                                k = k ?: add(md, "finishedAt", NULL);
                                k = k ?: add(md, "startRowId", NULL);
                                k = k ?: add(md, "signals", json_object_new_array());
                        }
                        if (!k && (!json_object_object_get_ex(md, "signals", &v) ||
                                   !json_object_is_type(v, json_type_array))) {
                                v = json_object_new_array();
                                k = add(md, "signals", v);
                        }
                        k = k ?: signals_add(v, ev);
                        if (what == AUDIT_EXPORT_RUN_UNCHANGED)
                                what = AUDIT_EXPORT_RUN_METADATA;
                        continue;
                }

                if (streq_ptr(name, "sandbox.command.started")) {
                        /* a page applied again after the run's end was written: the end stays */
                        if (md && json_object_object_get_ex(md, "finishedAt", &v) &&
                            json_object_is_type(v, json_type_string))
                                continue;
                        next = event_as_metadata(ev);
                        k = next ? 0 : -ENOMEM;
                        k = k ?: add_string(next, "state", "running");
                        k = k ?: add_copy(next, "startedAt", json_object_object_get(ev, "time"));
                        k = k ?: add(next, "finishedAt", NULL);
                        k = k ?: carry(next, md, ev, true);
                        if (what == AUDIT_EXPORT_RUN_UNCHANGED)
                                what = AUDIT_EXPORT_RUN_METADATA;
                } else {
                        /* its end: finished, failed, or denied/blocked for a start that never ran */
                        bool own_start = streq_ptr(ev_string(ev, "operation"), "process.start");

                        next = event_as_metadata(ev);
                        k = next ? 0 : -ENOMEM;
                        if (!k && !json_object_object_get_ex(next, "state", NULL))
                                k = add(next, "state", NULL);
                        if (!k && !json_object_object_get_ex(next, "startedAt", NULL))
                                k = add_copy(next, "startedAt", json_object_object_get(ev, "time"));
                        k = k ?: add_copy(next, "finishedAt", json_object_object_get(ev, "time"));
                        k = k ?: carry(next, md, ev, own_start);
                        what = AUDIT_EXPORT_RUN_ENDED;
                }
                if (k) {
                        json_object_put(next);
                        break;
                }
                json_object_put(md);
                md = next;
        }
        if (k < 0 || what == AUDIT_EXPORT_RUN_UNCHANGED) {
                json_object_put(md);
                return k < 0 ? k : AUDIT_EXPORT_RUN_UNCHANGED;
        }
        *ret = md;
        return what;
}
