/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests for sandboxctl's pure helpers: argument syntax, formatting, fd I/O and exit statuses. */
#include <errno.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "sandboxctl-util.h"
#include "test-bus-msg.h"
#include "test-util.h"

static void test_parse_uint64(void) {
        uint64_t v = 7;

        CHECK(parse_uint64("0", &v) == 0 && v == 0);
        CHECK(parse_uint64("18446744073709551615", &v) == 0 && v == UINT64_MAX);
        CHECK(parse_uint64("18446744073709551616", &v) == -ERANGE);
        v = 7;
        CHECK(parse_uint64("", &v) == -EINVAL && v == 7);
        CHECK(parse_uint64(NULL, &v) == -EINVAL);
        CHECK(parse_uint64("-1", &v) == -EINVAL);
        CHECK(parse_uint64(" 1", &v) == -EINVAL);
        CHECK(parse_uint64("1k", &v) == -EINVAL);
}

static void test_parse_seconds(void) {
        uint64_t v = 0;

        CHECK(parse_seconds("30", &v) == 0 && v == 30);
        CHECK(parse_seconds("5min", &v) == 0 && v == 300);
        CHECK(parse_seconds("1h 30min", &v) == 0 && v == 5400);
        CHECK(parse_seconds("500ms", &v) == 0 && v == 1);
        CHECK(parse_seconds("0", &v) == 0 && v == 0);
        CHECK(parse_seconds("x", &v) == -EINVAL);
        CHECK(parse_seconds("", &v) < 0);
}

static void test_parse_mode(void) {
        uint32_t m = 1;

        CHECK(parse_mode("0644", &m) == 0 && m == 0644);
        CHECK(parse_mode("755", &m) == 0 && m == 0755);
        CHECK(parse_mode("07777", &m) == 0 && m == 07777);
        CHECK(parse_mode("10000", &m) == -ERANGE);
        CHECK(parse_mode("0688", &m) == -EINVAL);
        CHECK(parse_mode("", &m) == -EINVAL);
}

static void test_parse_env_assignment(void) {
        char *k = NULL, *v = NULL;

        CHECK(parse_env_assignment("A=b", &k, &v) == 0 && streq(k, "A") && streq(v, "b"));
        free(k);
        free(v);
        CHECK(parse_env_assignment("A=", &k, &v) == 0 && streq(k, "A") && streq(v, ""));
        free(k);
        free(v);
        CHECK(parse_env_assignment("A=b=c", &k, &v) == 0 && streq(k, "A") && streq(v, "b=c"));
        free(k);
        free(v);
        k = v = NULL;
        CHECK(parse_env_assignment("=b", &k, &v) == -EINVAL && !k && !v);
        CHECK(parse_env_assignment("A", &k, &v) == -EINVAL && !k && !v);
        CHECK(parse_env_assignment("", &k, &v) == -EINVAL);
}

/* exec's and start's --env: in order, a repeated KEY replacing its value, bad syntax changing nothing */
static void test_env_list(void) {
        EnvVar *l = NULL;
        size_t n = 0;

        CHECK(env_list_add(&l, &n, "A=1") == 0);
        CHECK(env_list_add(&l, &n, "B=x=y") == 0);
        CHECK(env_list_add(&l, &n, "A=2") == 0);
        CHECK(env_list_add(&l, &n, "=bad") == -EINVAL);
        CHECK(env_list_add(&l, &n, "C") == -EINVAL);
        CHECK(n == 2);
        if (n == 2) {
                CHECK(streq(l[0].key, "A") && streq(l[0].value, "2"));
                CHECK(streq(l[1].key, "B") && streq(l[1].value, "x=y"));
        }
        env_list_free(&l, &n);
        CHECK(!l && n == 0);
        env_list_free(&l, &n);
}

static void test_split_sandbox_path(void) {
        char *id = NULL, *path = NULL;

        CHECK(split_sandbox_path("sb_abcdefgh23:/tmp/x", &id, &path) == 1);
        CHECK(streq_ptr(id, "sb_abcdefgh23") && streq_ptr(path, "/tmp/x"));
        free(id);
        free(path);
        CHECK(split_sandbox_path("sb_abcdefgh23:rel/a:b", &id, &path) == 1 && streq_ptr(path, "rel/a:b"));
        free(id);
        free(path);
        id = path = NULL;
        CHECK(split_sandbox_path("sb_abcdefgh23:", &id, &path) == -EINVAL && !id && !path);
        CHECK(split_sandbox_path("./sb_abcdefgh23:/x", &id, &path) == 0);
        CHECK(split_sandbox_path("notes:txt", &id, &path) == 0);
        CHECK(split_sandbox_path("sb_ABCDEFGH23:/x", &id, &path) == 0);
        CHECK(split_sandbox_path("/tmp/file", &id, &path) == 0);
        CHECK(split_sandbox_path("-", &id, &path) == 0 && !id && !path);
}

static void test_path_basename(void) {
        char *b;

        CHECK((b = path_basename("/a/b")) && streq(b, "b"));
        free(b);
        CHECK((b = path_basename("a/b//")) && streq(b, "b"));
        free(b);
        CHECK((b = path_basename("file")) && streq(b, "file"));
        free(b);
        CHECK(!path_basename("/"));
        CHECK(!path_basename(""));
}

static void test_format_timestamp(void) {
        char buf[FORMAT_TIMESTAMP_MAX];

        setenv("TZ", "UTC", 1);
        tzset();
        /* 2026-12-02 15:39:31 UTC */
        CHECK(streq_ptr(format_timestamp(UINT64_C(1796225971) * 1000000 + 123, buf),
                        "Wed 2026-12-02 15:39:31 UTC"));
        CHECK(streq_ptr(format_timestamp(0, buf), "Thu 1970-01-01 00:00:00 UTC"));
        CHECK(!format_timestamp(UINT64_MAX, buf));
}

static void test_make_printable(void) {
        char *p;

        CHECK((p = make_printable("plain name")) && streq(p, "plain name"));
        free(p);
        CHECK((p = make_printable("a\033[2Jb\n\x7f")) && streq(p, "a\\x1b[2Jb\\n\\x7f"));
        free(p);
        /* U+009B (CSI) is a control; U+00E9 (é) is not. */
        CHECK((p = make_printable("x\xc2\x9b" "1m\xc3\xa9")) && streq(p, "x\\u009b1m\xc3\xa9"));
        free(p);
        /* A window title (OSC 0) and a clipboard write (OSC 52), each ended by BEL or ST. */
        CHECK((p = make_printable("\033]0;owned\a\033]52;c;ZWNobw==\033\\")) &&
              streq(p, "\\x1b]0;owned\\x07\\x1b]52;c;ZWNobw==\\x1b\\\\"));
        free(p);
        /* The bidi override that makes "txt.exe" read as "exe.txt", a soft hyphen, invalid UTF-8. */
        CHECK((p = make_printable("a\xe2\x80\xaetxt.exe\xc2\xad\xff")) &&
              streq(p, "a\\u202etxt.exe\\u00ad\\xff"));
        free(p);
        CHECK((p = make_printable(NULL)) && streq(p, ""));
        free(p);
}

static void test_fd_io(void) {
        int p[2];
        char *data = NULL;
        size_t size = 0;
        char big[100000];

        memset(big, 'x', sizeof(big));

        CHECK(pipe(p) == 0);
        CHECK(loop_write(p[1], "hello", 5) == 0);
        close(p[1]);
        CHECK(read_full_fd(p[0], 100, &data, &size) == 0 && size == 5 && streq(data, "hello"));
        free(data);
        close(p[0]);

        /* Larger than the first allocation, and than the pipe buffer: write from a child. */
        CHECK(pipe(p) == 0);
        pid_t pid = fork();
        if (pid == 0) {
                close(p[0]);
                _exit(loop_write(p[1], big, sizeof(big)) == 0 ? 0 : 1);
        }
        close(p[1]);
        data = NULL;
        CHECK(read_full_fd(p[0], sizeof(big), &data, &size) == 0 && size == sizeof(big) &&
              memcmp(data, big, size) == 0 && data[size] == 0);
        free(data);
        close(p[0]);

        CHECK(pipe(p) == 0);
        CHECK(loop_write(p[1], "too long", 8) == 0);
        close(p[1]);
        data = NULL;
        CHECK(read_full_fd(p[0], 4, &data, &size) == -EFBIG && !data);
        close(p[0]);
}

static void test_exec_exit_status(void) {
        CHECK(exec_exit_status(0, 0, false, false) == 0);
        CHECK(exec_exit_status(3, 0, false, false) == 3);
        CHECK(exec_exit_status(255, 0, false, false) == 255);
        CHECK(exec_exit_status(-1, 0, false, false) == 125);
        CHECK(exec_exit_status(256, 0, false, false) == 125);
        CHECK(exec_exit_status(0, 15, false, false) == 143);
        CHECK(exec_exit_status(0, 9, true, false) == 124);
        CHECK(exec_exit_status(0, 9, false, true) == 137);
        CHECK(exec_exit_status(0, 0, false, true) == 137);
}

static void test_format_log_time(void) {
        char buf[FORMAT_LOG_TIME_MAX];

        setenv("TZ", "UTC", 1);
        tzset();
        CHECK(streq_ptr(format_log_time(UINT64_C(1796225971) * 1000000 + 590139, buf),
                        "Dec 02 15:39:31.590"));
        CHECK(streq_ptr(format_log_time(999, buf), "Jan 01 00:00:00.000"));
        CHECK(streq_ptr(format_log_time(UINT64_C(1796225971) * 1000000 + 999999, buf),
                        "Dec 02 15:39:31.999"));
        CHECK(!format_log_time(UINT64_MAX, buf));
        setenv("TZ", "Europe/Berlin", 1);
        tzset();
        if (streq_ptr(format_log_time(UINT64_C(1796225971) * 1000000, buf), "Dec 02 16:39:31.000"))
                CHECK(true);
        else /* no zoneinfo installed: localtime falls back to UTC */
                CHECK(streq_ptr(buf, "Dec 02 15:39:31.000"));
        setenv("TZ", "UTC", 1);
        tzset();
}

static void test_shell_quote(void) {
        static const char *const cases[][2] = {
                { "echo", "echo" },
                { "/tmp/task.py", "/tmp/task.py" },
                { "--opt=a,b:c@d%e+f", "--opt=a,b:c@d%e+f" },
                { "", "''" },
                { "a b", "'a b'" },
                { "echo hi; exit 3", "'echo hi; exit 3'" },
                { "it's", "'it'\\''s'" },
                { "$HOME", "'$HOME'" },
                { "\xc3\xa9", "'\xc3\xa9'" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *q = shell_quote(cases[i][0]);
                CHECK(streq_ptr(q, cases[i][1]));
                if (!streq_ptr(q, cases[i][1]))
                        fprintf(stderr, "  shell_quote(\"%s\") = \"%s\"\n", cases[i][0], q);
                free(q);
        }
}

/* log_detail_summary() of the JSON text d (NULL: no detail). */
static char *summary(const char *d, size_t max) {
        json_object *o = d ? json_tokener_parse(d) : NULL;
        char *s;

        if (d && !o) /* not JSON: the logger's string as it is */
                o = json_object_new_string(d);
        s = log_detail_summary(o, max);
        json_object_put(o);
        return s;
}

static void check_summary(const char *detail, size_t max, const char *want, int line) {
        char *s = summary(detail, max);

        if (!streq_ptr(s, want)) {
                fprintf(stderr, "%s:%d: summary of %s: got \"%s\", want \"%s\"\n", __FILE__, line,
                        strna(detail), strna(s), want);
                failures++;
        }
        free(s);
}
#define CHECK_SUMMARY(d, max, want) check_summary(d, max, want, __LINE__)

static void test_log_detail_summary(void) {
        CHECK_SUMMARY(NULL, 100, "");
        CHECK_SUMMARY("{}", 100, "");
        CHECK_SUMMARY(
                "{\"argv\":[\"sh\",\"-c\",\"echo hi; exit 3\"],\"cwd\":\"/home/sandbox\",\"signal\":0}", 100,
                "sh -c 'echo hi; exit 3'");
        CHECK_SUMMARY("{\"argv\":[\"true\"],\"error\":\"org.freedesktop.DBus.Error.InvalidArgs\","
                      "\"message\":\"No such directory: /nonexistent\"}",
                      100, "true (No such directory: /nonexistent)");
        CHECK_SUMMARY("{\"path\":\"/tmp/f.txt\",\"bytes\":4,\"mode\":420}", 100, "/tmp/f.txt");
        CHECK_SUMMARY("{\"path\":\"/tmp/missing\",\"error\":\"System.Error.ENOENT\",\"message\":\"\"}", 100,
                      "/tmp/missing (System.Error.ENOENT)");
        CHECK_SUMMARY("{\"path\":\"/tmp/nope\",\"error\":\"org.sandboxd.sandbox1.NoSuchFile\","
                      "\"message\":\"Cannot read /tmp/nope: No such file or directory\"}",
                      100, "Cannot read /tmp/nope: No such file or directory");
        CHECK_SUMMARY("{\"name\":\"demo\",\"type\":\"small\",\"network\":\"none\"}", 100, "demo");
        CHECK_SUMMARY("{\"error\":\"org.sandboxd.sandbox1.NoSuchSandbox\",\"message\":\"No sandbox 'x'.\"}",
                      100, "No sandbox 'x'.");
        CHECK_SUMMARY("{\"key_id\":\"key_1\",\"role\":\"admin\"}", 100,
                      "{\"key_id\":\"key_1\",\"role\":\"admin\"}");
        CHECK_SUMMARY("not json", 100, "not json");
        /* Controls cannot reach the terminal. */
        CHECK_SUMMARY("{\"argv\":[\"printf\",\"\\u001b[2J\\n\"]}", 100, "printf '\\x1b[2J\\n'");
        /* Nor bidi or other format characters (U+202E, U+2066, U+200B), and a backslash is doubled. */
        CHECK_SUMMARY("{\"path\":\"/tmp/\\u202egnp.sh\\u2066\\u200b\\\\\"}", 100,
                      "/tmp/\\u202egnp.sh\\u2066\\u200b\\\\");
        /* Cut before an escape rather than inside it. */
        CHECK_SUMMARY("{\"path\":\"/ab\\u001bcdef\"}", 9, "/ab\xe2\x80\xa6");
        CHECK_SUMMARY("{\"path\":\"/ab\\u001bcdef\"}", 10, "/ab\\x1b\xe2\x80\xa6");
        /* Cut to max bytes with "…", never inside a character. */
        CHECK_SUMMARY("{\"path\":\"/abcdefghij\"}", 8, "/abcd\xe2\x80\xa6");
        CHECK_SUMMARY("{\"path\":\"/abcdefg\"}", 8, "/abcdefg");
        CHECK_SUMMARY("{\"path\":\"/\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}", 8,
                      "/\xc3\xa9\xc3\xa9\xe2\x80\xa6");
        CHECK_SUMMARY("{\"path\":\"/\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}", 7, "/\xc3\xa9\xe2\x80\xa6");
        CHECK_SUMMARY("{\"path\":\"/abc\"}", 2, "");
}

/* A raw row as read from the bus, turned into what --json prints. */
static json_object *sample_row(const char *detail) {
        json_object *raw = json_object_new_object();

        json_object_object_add(raw, "request_id", json_object_new_string("req_abc"));
        json_object_object_add(raw, "id", json_object_new_uint64(42));
        json_object_object_add(raw, "session_id", json_object_new_string("sb_abcdefgh23"));
        json_object_object_add(raw, "account_id", json_object_new_string("uid:0"));
        json_object_object_add(raw, "source", json_object_new_string("agent"));
        json_object_object_add(raw, "operation", json_object_new_string("exec"));
        json_object_object_add(raw, "event", json_object_new_string("finished"));
        json_object_object_add(raw, "detail", json_object_new_string(detail));
        json_object_object_add(raw, "exit_code", json_object_new_int64(3));
        json_object_object_add(raw, "output_truncated",
                               json_object_new_string("{\"stdout\":\"hi\\n\",\"stderr\":\"\"}"));
        json_object_object_add(raw, "started_at", json_object_new_uint64(UINT64_C(1796225971590139)));
        json_object_object_add(raw, "duration_ms", json_object_new_uint64(12));
        json_object_object_add(raw, "future_field", json_object_new_boolean(1));

        json_object *row = log_row_to_json(raw);
        json_object_put(raw);
        return row;
}

static const char *compact(json_object *o) {
        return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

static void test_log_row_to_json(void) {
        json_object *row = sample_row("{\"argv\":[\"sh\",\"-c\",\"echo hi; exit 3\"]}");

        CHECK(row);
        CHECK(streq(
                compact(row),
                "{\"id\":42,\"session_id\":\"sb_abcdefgh23\",\"account_id\":\"uid:0\",\"source\":\"agent\","
                "\"operation\":\"exec\",\"event\":\"finished\",\"exit_code\":3,"
                "\"started_at\":\"2026-12-02T15:39:31.590139Z\",\"started_at_usec\":1796225971590139,"
                "\"duration_ms\":12,\"request_id\":\"req_abc\","
                "\"detail\":{\"argv\":[\"sh\",\"-c\",\"echo hi; exit 3\"]},"
                "\"output_truncated\":{\"stdout\":\"hi\\n\",\"stderr\":\"\"},\"future_field\":true}"));
        CHECK(log_row_id(row) == 42);
        json_object_put(row);

        /* A detail that is not exactly one JSON value stays the string it was. */
        row = sample_row("{\"argv\":[]} trailing");
        json_object *d;
        CHECK(json_object_object_get_ex(row, "detail", &d) && json_object_is_type(d, json_type_string) &&
              streq(json_object_get_string(d), "{\"argv\":[]} trailing"));
        json_object_put(row);
        row = sample_row("{\"argv\":[\"x\"]}\n");
        CHECK(json_object_object_get_ex(row, "detail", &d) && json_object_is_type(d, json_type_object));
        json_object_put(row);
        row = sample_row("");
        CHECK(json_object_object_get_ex(row, "detail", &d) && json_object_is_type(d, json_type_string));
        json_object_put(row);

        /* started_at 0 is unknown: null, the number kept. */
        json_object *raw = json_object_new_object();
        json_object_object_add(raw, "started_at", json_object_new_uint64(0));
        row = log_row_to_json(raw);
        CHECK(streq(compact(row), "{\"started_at\":null,\"started_at_usec\":0}"));
        CHECK(log_row_id(row) == 0);
        json_object_put(row);
        json_object_put(raw);
}

static void test_log_row_matches(void) {
        json_object *row = sample_row("{}");
        const uint64_t t = UINT64_C(1796225971590139);

        CHECK(log_row_matches(row, &(LogFilter) {}));
        CHECK(log_row_matches(row, &(LogFilter) { .session_id = "sb_abcdefgh23", .operation = "exec",
                                                  .event = "finished", .account_id = "uid:0",
                                                  .source = "agent" }));
        CHECK(!log_row_matches(row, &(LogFilter) { .session_id = "sb_zzzzzzzzzz" }));
        CHECK(!log_row_matches(row, &(LogFilter) { .operation = "write" }));
        CHECK(!log_row_matches(row, &(LogFilter) { .event = "failed" }));
        CHECK(!log_row_matches(row, &(LogFilter) { .account_id = "uid:1000" }));
        CHECK(!log_row_matches(row, &(LogFilter) { .source = "human_takeover" }));
        CHECK(log_row_matches(row, &(LogFilter) { .since = t, .until = t + 1 }));
        CHECK(!log_row_matches(row, &(LogFilter) { .since = t + 1 }));
        CHECK(!log_row_matches(row, &(LogFilter) { .until = t }));
        json_object_put(row);
}

static void test_log_row_cells(void) {
        char *cells[_LOG_COLUMN_MAX];
        json_object *row = sample_row("{\"argv\":[\"sh\",\"-c\",\"echo hi; exit 3\"]}");

        setenv("TZ", "UTC", 1);
        tzset();
        CHECK(log_row_cells(row, cells) == 0);
        CHECK(streq(cells[LOG_COLUMN_TIME], "Dec 02 15:39:31.590"));
        CHECK(streq(cells[LOG_COLUMN_ID], "42"));
        CHECK(streq(cells[LOG_COLUMN_SANDBOX], "sb_abcdefgh23"));
        CHECK(streq(cells[LOG_COLUMN_ACCOUNT], "uid:0"));
        CHECK(streq(cells[LOG_COLUMN_SOURCE], "agent"));
        CHECK(streq(cells[LOG_COLUMN_OPERATION], "exec"));
        CHECK(streq(cells[LOG_COLUMN_EVENT], "finished"));
        CHECK(streq(cells[LOG_COLUMN_EXIT], "3"));
        CHECK(streq(cells[LOG_COLUMN_DURATION], "12ms"));
        CHECK(streq(cells[LOG_COLUMN_DETAIL], "sh -c 'echo hi; exit 3'"));
        log_cells_free(cells);
        CHECK(!cells[0] && !cells[_LOG_COLUMN_MAX - 1]);
        json_object_put(row);

        /* Not an exec: exit code 0 says nothing, a failure's code does. */
        json_object *raw = json_object_new_object();
        json_object_object_add(raw, "operation", json_object_new_string("write"));
        json_object_object_add(raw, "session_id", json_object_new_string(""));
        json_object_object_add(raw, "account_id", json_object_new_string("evil\033[2J"));
        json_object_object_add(raw, "exit_code", json_object_new_int64(0));
        json_object_object_add(raw, "detail", json_object_new_string("{\"path\":\"/tmp/f\"}"));
        row = log_row_to_json(raw);
        CHECK(log_row_cells(row, cells) == 0);
        CHECK(streq(cells[LOG_COLUMN_TIME], "-") && streq(cells[LOG_COLUMN_ID], "-"));
        CHECK(streq(cells[LOG_COLUMN_SANDBOX], "-") && streq(cells[LOG_COLUMN_ACCOUNT], "evil\\x1b[2J"));
        CHECK(streq(cells[LOG_COLUMN_SOURCE], "-") && streq(cells[LOG_COLUMN_EVENT], "-"));
        CHECK(streq(cells[LOG_COLUMN_EXIT], "-") && streq(cells[LOG_COLUMN_DURATION], "-"));
        CHECK(streq(cells[LOG_COLUMN_DETAIL], "/tmp/f"));
        log_cells_free(cells);
        json_object_put(row);

        json_object_object_add(raw, "exit_code", json_object_new_int64(-2));
        row = log_row_to_json(raw);
        CHECK(log_row_cells(row, cells) == 0 && streq(cells[LOG_COLUMN_EXIT], "-2"));
        log_cells_free(cells);
        json_object_put(row);
        json_object_put(raw);

        for (size_t c = 0; c < _LOG_COLUMN_MAX; c++)
                CHECK(!isempty(log_column_header[c]));
}

static void test_split_commas(void) {
        char **l = split_commas("exec,file.read");
        CHECK(l && l[0] && l[1] && !l[2]);
        CHECK_STR(l[0], "exec");
        CHECK_STR(l[1], "file.read");
        strv_free(l);
        l = split_commas(",,a,,");
        CHECK(l && l[0] && !l[1]);
        CHECK_STR(l[0], "a");
        strv_free(l);
        l = split_commas("");
        CHECK(l && !l[0]);
        strv_free(l);
}

static void test_egress_policy_text(void) {
        _cleanup_(egress_policy_donep) EgressPolicy p = EGRESS_POLICY_INIT;
        _cleanup_free_ char *none = NULL, *allow = NULL;
        json_object *j;

        none = egress_entries_join(p.allow, p.n_allow);
        CHECK_STR(none, "-");
        CHECK_INT(egress_policy_add(&p, true, "PyPI.org.", NULL), 0);
        CHECK_INT(egress_policy_add(&p, true, "*.pythonhosted.org", NULL), 0);
        CHECK_INT(egress_policy_add(&p, true, "198.51.100.7", NULL), 0);
        CHECK_INT(egress_policy_add(&p, false, "10.0.0.0/8", NULL), 0);
        allow = egress_entries_join(p.allow, p.n_allow);
        CHECK_STR(allow, "pypi.org *.pythonhosted.org 198.51.100.7/32");

        p.default_action = EGRESS_DEFAULT_ALLOW;
        j = egress_policy_json(&p);
        CHECK_STR(j ? json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
                    : NULL,
                  "{\"default\":\"allow\",\"allow\":[\"pypi.org\",\"*.pythonhosted.org\",\"198.51.100.7/32\"],"
                  "\"deny\":[\"10.0.0.0/8\"]}");
        json_object_put(j);
}

/* A reply's a{sv} into JSON: each type it reads, others skipped, and a value of the wrong shape refused. */
static void test_bus_read_dict(void) {
        sd_bus_message *m = new_msg();
        json_object *o = json_object_new_object();
        uint8_t bytes[] = { 1, 2 };

        CHECK(sd_bus_message_open_container(m, 'a', "{sv}") >= 0);
        CHECK(sd_bus_message_append(m, "{sv}{sv}{sv}{sv}{sv}{sv}", "t", "t", UINT64_C(1) << 40, "u", "u", 7u, "i", "i",
                                    -3, "b", "b", 1, "s", "s", "text", "o", "o", "/a/b") >= 0);
        CHECK(sd_bus_message_open_container(m, 'e', "sv") >= 0 && sd_bus_message_append(m, "s", "ay") >= 0 &&
              sd_bus_message_open_container(m, 'v', "ay") >= 0 &&
              sd_bus_message_append_array(m, 'y', bytes, sizeof(bytes)) >= 0 && sd_bus_message_close_container(m) >= 0 &&
              sd_bus_message_close_container(m) >= 0);
        CHECK(sd_bus_message_close_container(m) >= 0);
        CHECK(sd_bus_message_append(m, "s", "after") >= 0);
        m = done(m);

        CHECK_INT(bus_read_dict(m, o), 1);
        CHECK_STR(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
                  "{\"t\":1099511627776,\"u\":7,\"i\":-3,\"b\":true,\"s\":\"text\",\"o\":\"/a/b\"}");
        const char *after = NULL;
        CHECK(sd_bus_message_read(m, "s", &after) > 0 && after && streq(after, "after"));
        json_object_put(o);
        sd_bus_message_unref(m);

        /* not an a{sv} */
        m = new_msg();
        CHECK(sd_bus_message_append(m, "s", "x") >= 0);
        m = done(m);
        o = json_object_new_object();
        CHECK(bus_read_dict(m, o) < 0);
        json_object_put(o);
        sd_bus_message_unref(m);
}

int main(void) {
        bus_setup();
        test_bus_read_dict();
        test_parse_uint64();
        test_parse_seconds();
        test_parse_mode();
        test_parse_env_assignment();
        test_env_list();
        test_split_sandbox_path();
        test_split_commas();
        test_path_basename();
        test_format_timestamp();
        test_make_printable();
        test_fd_io();
        test_exec_exit_status();
        test_format_log_time();
        test_shell_quote();
        test_log_detail_summary();
        test_log_row_to_json();
        test_log_row_matches();
        test_log_row_cells();
        test_egress_policy_text();

        return test_finish("test-sandboxctl-util");
}
