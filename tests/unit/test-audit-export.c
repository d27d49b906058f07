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
        test_unmapped();
        test_command_line();
        return test_finish("test-audit-export");
}
