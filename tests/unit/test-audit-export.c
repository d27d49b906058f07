/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for audit-export: every row kind to its audit.jsonl events and metadata.json, exactly. */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit-export.h"
#include "macro.h"
#include "test-util.h"

/* 2025-10-31T13:03:21.590139Z */
#define T0 "1761915801590139"

static json_object *row(const char *json) {
        json_object *o = json_tokener_parse(json);
        if (!o) {
                fprintf(stderr, "bad test row: %s\n", json);
                abort();
        }
        return o;
}

static const char *field(json_object *o, const char *key) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v))
                return "(absent)";
        return v ? json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
                 : "null";
}

/* Maps the row and checks how many events, their names, and a field of the last one. */
static json_object *events_of(const char *json, size_t n, const char *first, const char *last) {
        json_object *r = row(json), *ev = NULL;

        CHECK_INT(audit_export_events(r, &ev), 0);
        json_object_put(r);
        if (!ev)
                return NULL;
        CHECK_U64(json_object_array_length(ev), n);
        if (n > 0 && json_object_array_length(ev) == n) {
                CHECK_STR(field(json_object_array_get_idx(ev, 0), "event"), first);
                CHECK_STR(field(json_object_array_get_idx(ev, n - 1), "event"), last);
        }
        return ev;
}

static void test_exec_finished(void) {
        json_object *ev, *started, *done;

        ev = events_of("{\"id\":42,\"session_id\":\"sb_abcdefgh23\",\"account_id\":\"uid:0\","
                       "\"source\":\"agent\",\"operation\":\"exec\",\"event\":\"finished\",\"exit_code\":0,"
                       "\"started_at\":" T0 ","
                       "\"duration_ms\":1500,\"request_id\":\"req_1\",\"stdout_size\":6,\"stderr_size\":0,"
                       "\"detail\":{\"argv\":[\"python3\",\"-c\",\"print('hi')\"],\"cwd\":\"/tmp\","
                       "\"timeout_seconds\":20,\"memory_max\":0,\"tasks_max\":0,\"signal\":0,"
                       "\"stdout_truncated\":false,\"stderr_truncated\":true,\"unit\":\"u.scope\"}}",
                       2, "\"sandbox.command.started\"", "\"sandbox.command.finished\"");
        if (!ev)
                return;
        started = json_object_array_get_idx(ev, 0);
        done = json_object_array_get_idx(ev, 1);
        CHECK_STR(field(started, "runId"), "\"run-42\"");
        CHECK_STR(field(started, "time"), "\"2025-10-31T13:03:21.590139Z\"");
        CHECK_STR(field(started, "command"), "\"python3 -c 'print('\\\\''hi'\\\\'')'\"");
        CHECK_STR(field(started, "exitCode"), "(absent)");
        CHECK_STR(field(done, "runId"), "\"run-42\"");
        CHECK_STR(field(done, "time"), "\"2025-10-31T13:03:23.090139Z\"");
        CHECK_STR(field(done, "exitCode"), "0");
        CHECK_STR(field(done, "durationMs"), "1500");
        CHECK_STR(field(done, "stdoutBytes"), "6");
        CHECK_STR(field(done, "stderrBytes"), "0");
        CHECK_STR(field(done, "stderrTruncated"), "true");
        CHECK_STR(field(done, "status"), "\"finished\"");
        CHECK_STR(field(done, "reason"), "(absent)");
        CHECK_STR(field(done, "limits"), "{\"timeoutSeconds\":20,\"memoryMax\":0,\"tasksMax\":0}");
        CHECK_STR(field(done, "sandbox"), "\"sb_abcdefgh23\"");
        CHECK_STR(field(done, "account"), "\"uid:0\"");
        CHECK_STR(field(done, "source"), "\"agent\"");
        CHECK_STR(field(done, "rowId"), "42");
        CHECK_STR(field(done, "requestId"), "\"req_1\"");
        CHECK_STR(field(done, "rowEvent"), "\"finished\"");
        json_object_put(ev);
}

static void test_exec_failures(void) {
        static const struct {
                const char *event;
                int exit_code, signal;
                const char *reason;
        } cases[] = {
                { "finished", 3, 0, "\"exit_code\"" },   { "finished", 137, 9, "\"signal\"" },
                { "timed_out", 124, 0, "\"timed_out\"" }, { "oom_killed", 137, 9, "\"oom_killed\"" },
                { "cancelled", -1, 0, "\"cancelled\"" },  { "failed", 127, 0, "\"error\"" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *json;
                json_object *ev;

                CHECK(asprintf(&json,
                               "{\"id\":7,\"operation\":\"exec\",\"event\":\"%s\",\"exit_code\":%d,"
                               "\"started_at\":" T0 ",\"detail\":{\"argv\":[\"x\"],\"signal\":%d}}",
                               cases[i].event, cases[i].exit_code, cases[i].signal) > 0);
                ev = events_of(json, 2, "\"sandbox.command.started\"", "\"sandbox.command.failed\"");
                if (ev) {
                        json_object *done = json_object_array_get_idx(ev, 1);
                        CHECK_STR(field(done, "reason"), cases[i].reason);
                        CHECK_INT(json_object_get_int(json_object_object_get(done, "exitCode")),
                                  cases[i].exit_code);
                }
                json_object_put(ev);
                free(json);
        }
}

static void test_exec_refused(void) {
        json_object *ev;

        /* refused before it started: only {"error","message"} in the detail */
        ev = events_of("{\"id\":8,\"operation\":\"exec\",\"event\":\"failed\",\"exit_code\":-1,"
                       "\"started_at\":" T0 ",\"detail\":{\"error\":\"org.sandboxd.sandbox1.NoSuchSandbox\","
                       "\"message\":\"No sandbox 'x'.\"}}",
                       1, "\"sandbox.command.blocked\"", "\"sandbox.command.blocked\"");
        if (ev) {
                json_object *e = json_object_array_get_idx(ev, 0);
                CHECK_STR(field(e, "exitCode"), "null");
                CHECK_STR(field(e, "time"), "\"2025-10-31T13:03:21.590139Z\"");
                CHECK_STR(field(e, "error"), "\"org.sandboxd.sandbox1.NoSuchSandbox\"");
                CHECK_STR(field(e, "message"), "\"No sandbox 'x'.\"");
                CHECK_STR(field(e, "command"), "null");
        }
        json_object_put(ev);
        json_object_put(events_of("{\"id\":9,\"operation\":\"exec\",\"event\":\"denied\",\"exit_code\":-1,"
                                  "\"detail\":{\"error\":\"org.freedesktop.DBus.Error.AccessDenied\"}}",
                                  1, "\"sandbox.command.denied\"", "\"sandbox.command.denied\""));
        json_object_put(events_of("{\"id\":10,\"operation\":\"exec\",\"event\":\"blocked\",\"detail\":{}}", 1,
                                  "\"sandbox.command.blocked\"", "\"sandbox.command.blocked\""));
}

static void test_takeover(void) {
        json_object *r, *ev, *md = NULL;

        ev = events_of("{\"id\":11,\"operation\":\"takeover\",\"event\":\"finished\",\"exit_code\":0,"
                       "\"source\":\"human_takeover\",\"started_at\":" T0 ",\"stdout_size\":100,"
                       "\"detail\":{\"unit\":\"sh.scope\",\"recording\":\"asciicast-v2\",\"signal\":0}}",
                       2, "\"sandbox.command.started\"", "\"sandbox.command.finished\"");
        if (ev) {
                CHECK_STR(field(json_object_array_get_idx(ev, 1), "kind"), "\"takeover\"");
                CHECK_STR(field(json_object_array_get_idx(ev, 1), "command"), "null");
        }
        json_object_put(ev);
        json_object_put(events_of("{\"id\":12,\"operation\":\"takeover\",\"event\":\"failed\",\"detail\":{"
                                  "\"error\":\"org.sandboxd.sandbox1.NotRunning\"}}",
                                  1, "\"sandbox.command.blocked\"", "\"sandbox.command.blocked\""));

        r = row("{\"id\":11,\"operation\":\"takeover\",\"event\":\"finished\",\"exit_code\":0,"
                "\"started_at\":" T0 ",\"duration_ms\":2000,\"detail\":{\"unit\":\"sh.scope\","
                "\"recording\":\"asciicast-v2\",\"ended_by\":\"client\"}}");
        CHECK_INT(audit_export_metadata(r, &md), 0);
        if (md) {
                CHECK_STR(field(md, "kind"), "\"takeover\"");
                CHECK_STR(field(md, "recording"), "\"asciicast-v2\"");
                CHECK_STR(field(md, "endedBy"), "\"client\"");
                CHECK_STR(field(md, "finishedAt"), "\"2025-10-31T13:03:23.590139Z\"");
        }
        json_object_put(md);
        json_object_put(r);
}

/* metadata.json is the run's last event without "time" and "event", with both ends of the run: the SDKs
 * rebuild it from the JSON lines alone. */
static void test_metadata_is_the_last_event(void) {
        json_object *r, *ev = NULL, *md = NULL, *last;

        r = row("{\"id\":5,\"session_id\":\"sb_abcdefgh23\",\"operation\":\"exec\",\"event\":\"timed_out\","
                "\"exit_code\":124,\"started_at\":" T0 ",\"duration_ms\":1000,\"stdout_size\":2,"
                "\"detail\":{\"argv\":[\"sleep\",\"9\"],\"timeout_seconds\":1,\"signal\":9,\"unit\":\"u\"}}");
        CHECK_INT(audit_export_events(r, &ev), 0);
        CHECK_INT(audit_export_metadata(r, &md), 0);
        if (ev && md) {
                last = json_object_array_get_idx(ev, 1);
                json_object_object_foreach(last, key, val) {
                        (void) val;
                        if (streq(key, "time") || streq(key, "event"))
                                CHECK_STR(field(md, key), "(absent)");
                        else
                                CHECK_STR(field(md, key), field(last, key));
                }
                CHECK_STR(field(md, "startedAt"), "\"2025-10-31T13:03:21.590139Z\"");
                CHECK_STR(field(md, "finishedAt"), "\"2025-10-31T13:03:22.590139Z\"");
                CHECK_STR(field(md, "timedOut"), "true");
                CHECK_STR(field(md, "oomKilled"), "false");
                CHECK_STR(field(md, "signal"), "9");
                CHECK_U64(json_object_object_length(md), json_object_object_length(last));
        }
        json_object_put(ev);
        json_object_put(md);
        json_object_put(r);
}

static void test_files(void) {
        static const char *const ops[] = { "file_create", "write", "read", "view", "str_replace",
                                           "insert",      "ls",    "glob", "grep" };
        json_object *ev;

        for (size_t i = 0; i < ELEMENTSOF(ops); i++) {
                char *json, *name;

                CHECK(asprintf(&json,
                               "{\"id\":20,\"operation\":\"%s\",\"event\":\"finished\",\"exit_code\":0,"
                               "\"started_at\":" T0 ",\"detail\":{\"path\":\"/tmp/a\",\"bytes\":3}}",
                               ops[i]) > 0);
                CHECK(asprintf(&name, "\"sandbox.file.%s\"", ops[i]) > 0);
                ev = events_of(json, 1, name, name);
                if (ev) {
                        json_object *e = json_object_array_get_idx(ev, 0);
                        CHECK_STR(field(e, "path"), "\"/tmp/a\"");
                        CHECK_STR(field(e, "status"), "\"finished\"");
                        CHECK_STR(field(e, "detail"), "{\"path\":\"/tmp/a\",\"bytes\":3}");
                        CHECK_STR(field(e, "runId"), "\"run-20\"");
                }
                json_object_put(ev);
                free(json);
                free(name);
        }

        ev = events_of("{\"id\":21,\"operation\":\"str_replace\",\"event\":\"failed\",\"exit_code\":-1,"
                       "\"detail\":{\"path\":\"/tmp/a\",\"error\":\"org.sandboxd.sandbox1.NoMatch\"}}",
                       1, "\"sandbox.file.str_replace\"", "\"sandbox.file.str_replace\"");
        if (ev) {
                json_object *e = json_object_array_get_idx(ev, 0);
                CHECK_STR(field(e, "status"), "\"failed\"");
                CHECK_STR(field(e, "exitCode"), "-1");
                CHECK_STR(field(e, "error"), "\"org.sandboxd.sandbox1.NoMatch\"");
        }
        json_object_put(ev);
}

/* A background process's rows, as sandboxd writes them (dbus-api.md, "Audit records"). */
#define PROC_DETAIL \
        "\"process\":\"p3\",\"argv\":[\"python3\",\"-m\",\"http.server\"],\"cwd\":\"/tmp\"," \
        "\"unit\":\"sandbox-sb_abcdefgh23-process-3.scope\",\"timeout_seconds\":600,\"memory_max\":0," \
        "\"tasks_max\":0"
#define PROC_START                                                                                            \
        "{\"id\":50,\"session_id\":\"sb_abcdefgh23\",\"account_id\":\"uid:0\",\"source\":\"agent\","          \
        "\"operation\":\"process.start\",\"event\":\"finished\",\"exit_code\":0,\"started_at\":" T0 ","       \
        "\"duration_ms\":3,\"request_id\":\"req_s\",\"detail\":{" PROC_DETAIL "}}"
#define PROC_SIGNAL(id, sig, event)                                                                           \
        "{\"id\":" #id ",\"session_id\":\"sb_abcdefgh23\",\"account_id\":\"key:k2\",\"source\":\"agent\","    \
        "\"operation\":\"process.signal\",\"event\":\"" event "\",\"exit_code\":0,\"started_at\":" T0 ","      \
        "\"request_id\":\"req_" #id "\",\"detail\":{\"process\":\"p3\",\"signal\":" #sig                      \
        ",\"unit\":\"sandbox-sb_abcdefgh23-process-3.scope\"}}"
#define PROC_EXIT                                                                                             \
        "{\"id\":60,\"session_id\":\"sb_abcdefgh23\",\"account_id\":\"uid:0\",\"source\":\"agent\","          \
        "\"operation\":\"process.exit\",\"event\":\"finished\",\"exit_code\":143,\"started_at\":" T0 ","      \
        "\"duration_ms\":2000,\"request_id\":\"req_s\",\"stdout_size\":5,\"stderr_size\":7,\"detail\":{"      \
        PROC_DETAIL ",\"state\":\"killed\",\"signal\":15,\"oom_killed\":false,\"stdout_first_offset\":0,"    \
        "\"stderr_first_offset\":4096,\"stdout_bytes\":5,\"stderr_bytes\":4103,\"sandbox_gone\":false}}"

/* Applies rows in order to a run's metadata, as an export does, and returns the last write's kind. */
static int apply(json_object **md, const char *json, json_object **ret_events) {
        json_object *r = row(json), *ev = NULL, *next = NULL;
        int k;

        CHECK_INT(audit_export_events(r, &ev), 0);
        json_object_put(r);
        k = audit_export_process_metadata(*md, ev, &next);
        CHECK(k >= 0);
        if (k > 0) {
                json_object_put(*md);
                *md = next;
        }
        if (ret_events)
                *ret_events = ev;
        else
                json_object_put(ev);
        return k;
}

static void test_process_run(void) {
        json_object *ev = NULL, *md = NULL, *r, *e;
        char run_id[AUDIT_EXPORT_RUN_ID_MAX];
        char *before;

        /* its start: the started event, and a run directory that says it runs */
        CHECK_INT(apply(&md, PROC_START, &ev), AUDIT_EXPORT_RUN_METADATA);
        CHECK_U64(json_object_array_length(ev), 1);
        e = json_object_array_get_idx(ev, 0);
        CHECK_STR(field(e, "event"), "\"sandbox.command.started\"");
        CHECK_STR(field(e, "runId"), "\"run-sb_abcdefgh23-p3\"");
        CHECK_STR(field(e, "kind"), "\"process\"");
        CHECK_STR(field(e, "command"), "\"python3 -m http.server\"");
        CHECK_STR(field(e, "process"), "\"p3\"");
        CHECK_STR(field(e, "unit"), "\"sandbox-sb_abcdefgh23-process-3.scope\"");
        CHECK_STR(field(e, "limits"), "{\"timeoutSeconds\":600,\"memoryMax\":0,\"tasksMax\":0}");
        CHECK_STR(field(e, "exitCode"), "(absent)");
        CHECK_STR(field(e, "operation"), "\"process.start\"");
        json_object_put(ev);
        CHECK_STR(field(md, "state"), "\"running\"");
        CHECK_STR(field(md, "startedAt"), "\"2025-10-31T13:03:21.590139Z\"");
        CHECK_STR(field(md, "finishedAt"), "null");
        CHECK_STR(field(md, "startRowId"), "50");
        CHECK_STR(field(md, "signals"), "[]");
        CHECK_STR(field(md, "argv"), "[\"python3\",\"-m\",\"http.server\"]");
        CHECK_STR(field(md, "account"), "\"uid:0\"");
        CHECK_STR(field(md, "time"), "(absent)");

        /* signals sent, in row order even when applied out of it; one refused changes nothing */
        CHECK_INT(apply(&md, PROC_SIGNAL(56, 10, "finished"), &ev), AUDIT_EXPORT_RUN_METADATA);
        e = json_object_array_get_idx(ev, 0);
        CHECK_STR(field(e, "event"), "\"sandbox.command.signal\"");
        CHECK_STR(field(e, "runId"), "\"run-sb_abcdefgh23-p3\"");
        CHECK_STR(field(e, "signal"), "10");
        CHECK_STR(field(e, "status"), "\"finished\"");
        json_object_put(ev);
        CHECK_INT(apply(&md, PROC_SIGNAL(55, 15, "finished"), NULL), AUDIT_EXPORT_RUN_METADATA);
        CHECK_INT(apply(&md, PROC_SIGNAL(57, 9, "failed"), NULL), AUDIT_EXPORT_RUN_UNCHANGED);
        CHECK_STR(field(md, "signals"),
                  "[{\"signal\":15,\"time\":\"2025-10-31T13:03:21.590139Z\",\"rowId\":55,\"account\":\"key:k2\","
                  "\"source\":\"agent\",\"requestId\":\"req_55\"},{\"signal\":10,\"time\":"
                  "\"2025-10-31T13:03:21.590139Z\",\"rowId\":56,\"account\":\"key:k2\",\"source\":\"agent\","
                  "\"requestId\":\"req_56\"}]");
        /* a row applied again (a resumed export) adds nothing */
        before = strdup(json_object_to_json_string(md));
        CHECK_INT(apply(&md, PROC_SIGNAL(55, 15, "finished"), NULL), AUDIT_EXPORT_RUN_METADATA);
        CHECK_STR(json_object_to_json_string(md), before);
        free(before);

        /* its end, in a later row: the end event alone, and the whole run with its output */
        CHECK_INT(apply(&md, PROC_EXIT, &ev), AUDIT_EXPORT_RUN_ENDED);
        CHECK_U64(json_object_array_length(ev), 1);
        e = json_object_array_get_idx(ev, 0);
        CHECK_STR(field(e, "event"), "\"sandbox.command.failed\"");
        CHECK_STR(field(e, "runId"), "\"run-sb_abcdefgh23-p3\"");
        CHECK_STR(field(e, "time"), "\"2025-10-31T13:03:23.590139Z\"");
        CHECK_STR(field(e, "reason"), "\"signal\"");
        CHECK_STR(field(e, "exitCode"), "143");
        CHECK_STR(field(e, "signal"), "15");
        CHECK_STR(field(e, "state"), "\"killed\"");
        CHECK_STR(field(e, "startedAt"), "\"2025-10-31T13:03:21.590139Z\"");
        CHECK_STR(field(e, "stdoutBytes"), "5");
        CHECK_STR(field(e, "stderrBytes"), "7");
        CHECK_STR(field(e, "stdoutTruncated"), "false");
        CHECK_STR(field(e, "stderrTruncated"), "true");
        CHECK_STR(field(e, "stderrOffset"), "4096");
        CHECK_STR(field(e, "stderrTotalBytes"), "4103");
        CHECK_STR(field(e, "sandboxGone"), "false");
        CHECK_STR(field(e, "operation"), "\"process.exit\"");
        CHECK_STR(field(md, "state"), "\"killed\"");
        CHECK_STR(field(md, "finishedAt"), "\"2025-10-31T13:03:23.590139Z\"");
        CHECK_STR(field(md, "startRowId"), "50");
        CHECK_STR(field(md, "rowId"), "60");
        CHECK_STR(field(md, "exitCode"), "143");
        CHECK_STR(field(md, "command"), "\"python3 -m http.server\"");
        CHECK(strstr(field(md, "signals"), "\"rowId\":55") && strstr(field(md, "signals"), "\"rowId\":56"));
        /* metadata.json is the end event less time and event, plus what the directory carried */
        json_object_object_foreach(e, key, val) {
                (void) val;
                if (!streq(key, "time") && !streq(key, "event"))
                        CHECK_STR(field(md, key), field(e, key));
        }
        json_object_put(ev);

        /* a page applied again after the end was written: its start and signals leave the end as it is */
        before = strdup(json_object_to_json_string(md));
        CHECK_INT(apply(&md, PROC_START, NULL), AUDIT_EXPORT_RUN_UNCHANGED);
        CHECK_INT(apply(&md, PROC_SIGNAL(55, 15, "finished"), NULL), AUDIT_EXPORT_RUN_METADATA);
        CHECK_INT(apply(&md, PROC_EXIT, NULL), AUDIT_EXPORT_RUN_ENDED);
        CHECK_STR(json_object_to_json_string(md), before);
        free(before);
        json_object_put(md);

        /* the start out of the export (retention removed it): a signal starts the directory, the end fills it */
        md = NULL;
        CHECK_INT(apply(&md, PROC_SIGNAL(55, 15, "finished"), NULL), AUDIT_EXPORT_RUN_METADATA);
        CHECK_STR(field(md, "state"), "null");
        CHECK_STR(field(md, "runId"), "\"run-sb_abcdefgh23-p3\"");
        CHECK_INT(apply(&md, PROC_EXIT, NULL), AUDIT_EXPORT_RUN_ENDED);
        CHECK_STR(field(md, "startRowId"), "null");
        CHECK_STR(field(md, "state"), "\"killed\"");
        CHECK_STR(field(md, "argv"), "[\"python3\",\"-m\",\"http.server\"]");
        CHECK(strstr(field(md, "signals"), "\"rowId\":55") != NULL);
        json_object_put(md);
        md = NULL;
        CHECK_INT(apply(&md, PROC_SIGNAL(57, 9, "failed"), NULL), AUDIT_EXPORT_RUN_UNCHANGED);
        CHECK(md == NULL);

        /* its exit code 0, a timeout, an OOM kill, and an end cut off by a restart of sandboxd */
        static const struct {
                const char *event, *extra, *name, *reason;
                int exit_code;
        } ends[] = {
                { "finished", ",\"state\":\"exited\",\"signal\":0", "\"sandbox.command.finished\"", "(absent)", 0 },
                { "timed_out", ",\"state\":\"timed-out\",\"signal\":15", "\"sandbox.command.failed\"",
                  "\"timed_out\"", 143 },
                { "oom_killed", ",\"state\":\"killed\",\"signal\":9", "\"sandbox.command.failed\"",
                  "\"oom_killed\"", 137 },
                { "failed", ",\"error\":\"org.sandboxd.sandbox1.Interrupted\",\"message\":\"m\"",
                  "\"sandbox.command.failed\"", "\"error\"", -1 },
        };
        for (size_t i = 0; i < ELEMENTSOF(ends); i++) {
                char *json;

                CHECK(asprintf(&json,
                               "{\"id\":61,\"session_id\":\"sb_abcdefgh23\",\"operation\":\"process.exit\","
                               "\"event\":\"%s\",\"exit_code\":%d,\"started_at\":" T0 ",\"detail\":{" PROC_DETAIL
                               "%s}}",
                               ends[i].event, ends[i].exit_code, ends[i].extra) > 0);
                ev = events_of(json, 1, ends[i].name, ends[i].name);
                if (ev) {
                        e = json_object_array_get_idx(ev, 0);
                        CHECK_STR(field(e, "reason"), ends[i].reason);
                        CHECK_INT(json_object_get_int(json_object_object_get(e, "exitCode")), ends[i].exit_code);
                        CHECK_STR(field(e, "runId"), "\"run-sb_abcdefgh23-p3\"");
                }
                json_object_put(ev);
                free(json);
        }

        /* a start that never ran: argv[0] not executable (started, failed, in its run); refused before it
         * had an id (its own run, as an exec's) */
        md = NULL;
        CHECK_INT(apply(&md,
                        "{\"id\":70,\"session_id\":\"sb_abcdefgh23\",\"operation\":\"process.start\","
                        "\"event\":\"failed\",\"exit_code\":-1,\"started_at\":" T0 ",\"detail\":{" PROC_DETAIL
                        ",\"error\":\"org.sandboxd.sandbox1.NoSuchFile\",\"message\":\"Cannot execute\"}}",
                        &ev),
                  AUDIT_EXPORT_RUN_ENDED);
        CHECK_U64(json_object_array_length(ev), 2);
        CHECK_STR(field(json_object_array_get_idx(ev, 0), "event"), "\"sandbox.command.started\"");
        CHECK_STR(field(json_object_array_get_idx(ev, 1), "event"), "\"sandbox.command.failed\"");
        CHECK_STR(field(json_object_array_get_idx(ev, 1), "error"), "\"org.sandboxd.sandbox1.NoSuchFile\"");
        CHECK_STR(field(md, "startRowId"), "70");
        CHECK_STR(field(md, "reason"), "\"error\"");
        json_object_put(ev);
        json_object_put(md);
        md = NULL;
        CHECK_INT(apply(&md,
                        "{\"id\":71,\"session_id\":\"sb_abcdefgh23\",\"operation\":\"process.start\","
                        "\"event\":\"denied\",\"exit_code\":-1,\"started_at\":" T0 ",\"detail\":{"
                        "\"error\":\"org.freedesktop.DBus.Error.AccessDenied\"}}",
                        &ev),
                  AUDIT_EXPORT_RUN_ENDED);
        CHECK_U64(json_object_array_length(ev), 1);
        CHECK_STR(field(json_object_array_get_idx(ev, 0), "event"), "\"sandbox.command.denied\"");
        CHECK_STR(field(json_object_array_get_idx(ev, 0), "runId"), "\"run-71\"");
        CHECK_STR(field(md, "exitCode"), "null");
        json_object_put(ev);
        json_object_put(md);
        json_object_put(events_of("{\"id\":72,\"session_id\":\"x\",\"operation\":\"process.start\","
                                  "\"event\":\"failed\",\"detail\":{\"error\":\"e\"}}",
                                  1, "\"sandbox.command.blocked\"", "\"sandbox.command.blocked\""));

        /* the run id is made only of a valid sandbox id and process id; anything else is the row's own */
        static const char *const odd[] = {
                "\"session_id\":\"sb_abcdefgh23\",\"detail\":{\"process\":\"../../etc\"}",
                "\"session_id\":\"sb_abcdefgh23\",\"detail\":{\"process\":\"p\"}",
                "\"session_id\":\"sb_abcdefgh23\",\"detail\":{\"process\":\"p12345678901\"}",
                "\"session_id\":\"sb_abcdefgh23\",\"detail\":{\"process\":\"p1/x\"}",
                "\"session_id\":\"sb_abcdefgh23\",\"detail\":{\"process\":3}",
                "\"session_id\":\"../sb_abcdefgh23\",\"detail\":{\"process\":\"p3\"}",
                "\"session_id\":\"my-sandbox\",\"detail\":{\"process\":\"p3\"}",
        };
        for (size_t i = 0; i < ELEMENTSOF(odd); i++) {
                char *json;

                CHECK(asprintf(&json, "{\"id\":80,\"operation\":\"process.signal\",\"event\":\"failed\",%s}",
                               odd[i]) > 0);
                r = row(json);
                CHECK_INT(audit_export_kind(r), AUDIT_EXPORT_PROCESS);
                CHECK_INT(audit_export_run_id(r, run_id), 0);
                CHECK_STR(run_id, "run-80");
                json_object_put(r);
                free(json);
        }
        r = row("{\"id\":80,\"session_id\":\"sb_abcdefgh23\",\"operation\":\"process.exit\","
                "\"detail\":{\"process\":\"p4294967295\"}}");
        CHECK_INT(audit_export_run_id(r, run_id), 0);
        CHECK_STR(run_id, "run-sb_abcdefgh23-p4294967295");
        /* the process rows have no exec-style metadata: theirs is built over the run */
        CHECK_INT(audit_export_metadata(r, &md), -EINVAL);
        json_object_put(r);
}

static void test_unmapped(void) {
        static const char *const ops[] = { "sandbox.create", "sandbox.update", "sandbox.delete",
                                           "sandbox.expire", "api_key.create", "api_key.revoke",
                                           "sandbox.read",   "log.read",       "api_key.list",
                                           "auth",           "bogus" };
        json_object *r, *md = (json_object *) 1;
        char run_id[AUDIT_EXPORT_RUN_ID_MAX];

        for (size_t i = 0; i < ELEMENTSOF(ops); i++) {
                char *json;

                CHECK(asprintf(&json, "{\"id\":30,\"operation\":\"%s\",\"event\":\"finished\"}", ops[i]) > 0);
                json_object_put(events_of(json, 0, NULL, NULL));
                r = row(json);
                CHECK_INT(audit_export_kind(r), AUDIT_EXPORT_NONE);
                CHECK_INT(audit_export_metadata(r, &md), -EINVAL);
                CHECK(md == (json_object *) 1);
                json_object_put(r);
                free(json);
        }

        /* no id: no run id, so no event */
        r = row("{\"operation\":\"exec\",\"event\":\"finished\"}");
        CHECK_INT(audit_export_run_id(r, run_id), -EINVAL);
        CHECK(audit_export_events(r, &md) == -EINVAL);
        json_object_put(r);
        /* a run id is made of the number alone, whatever the strings of the row say */
        r = row("{\"id\":18446744073709551615,\"session_id\":\"../../etc\",\"operation\":\"exec\"}");
        CHECK_INT(audit_export_run_id(r, run_id), 0);
        CHECK_STR(run_id, "run-18446744073709551615");
        json_object_put(r);
}

static void test_command_line(void) {
        static const struct {
                const char *argv, *line;
        } cases[] = {
                { "[]", "" },
                { "[\"ls\",\"-l\",\"/tmp\"]", "ls -l /tmp" },
                { "[\"sh\",\"-c\",\"echo $HOME; ls\"]", "sh -c 'echo $HOME; ls'" },
                { "[\"printf\",\"\"]", "printf ''" },
                { "[\"echo\",\"it's\"]", "echo 'it'\\''s'" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                json_object *a = json_tokener_parse(cases[i].argv);
                char *line = audit_export_command_line(a);
                CHECK_STR(line, cases[i].line);
                free(line);
                json_object_put(a);
        }
}

int main(void) {
        test_exec_finished();
        test_exec_failures();
        test_exec_refused();
        test_takeover();
        test_metadata_is_the_last_event();
        test_files();
        test_process_run();
        test_unmapped();
        test_command_line();
        return test_finish("test-audit-export");
}
