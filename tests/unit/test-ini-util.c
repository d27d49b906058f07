/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for ini-util: the line syntax, positions, drop-in order, every error, and value helpers. */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ini-util.h"
#include "macro.h"
#include "test-util.h"

static char tmpdir[] = "/tmp/test-ini-util.XXXXXX";

static char *path_in(const char *name) {
        static char buf[4][256];
        static unsigned i = 0;
        char *p = buf[i++ % 4];

        snprintf(p, sizeof(buf[0]), "%s/%s", tmpdir, name);
        return p;
}

static void write_file(const char *name, const char *content, size_t size) {
        FILE *f = fopen(path_in(name), "we");
        if (!f || fwrite(content, 1, size, f) != size || fclose(f) != 0) {
                perror(name);
                exit(EXIT_FAILURE);
        }
}
#define WRITE(name, content) write_file((name), (content), strlen(content))

static void reset_dir(void) {
        test_rm_rf(path_in("etc"));
        if (mkdir(path_in("etc"), 0755) < 0 || mkdir(path_in("etc/conf.d"), 0755) < 0) {
                perror("mkdir");
                exit(EXIT_FAILURE);
        }
}

/* Records every callback as one line "S|A <base name>#<file index>:<line> <what>". */
typedef struct Recorder {
        FILE *log;
        char *text;
        size_t size;
        const char *reject_section; /* the section callback fails for this name */
        int finish_result;
        unsigned n_finish;
        char **error;
} Recorder;

static const char *base_name(const char *path) {
        const char *slash = strrchr(path, '/');
        return slash ? slash + 1 : path;
}

static int on_section(const IniPosition *at, const char *name, void *userdata) {
        Recorder *rec = userdata;

        fprintf(rec->log, "S %s#%zu:%u [%s]\n", base_name(at->file), at->file_index, at->line, name);
        if (rec->reject_section && streq(name, rec->reject_section))
                return ini_error(rec->error, at, "Unknown section [%s]", name);
        return 0;
}

static int on_assignment(const IniPosition *at, const char *key, const char *value, void *userdata) {
        Recorder *rec = userdata;

        fprintf(rec->log, "A %s#%zu:%u %s=%s|\n", base_name(at->file), at->file_index, at->line, key, value);
        if (streq(key, "Fail"))
                return ini_bad_value(rec->error, at, key, value, -ERANGE, "anything else");
        return 0;
}

static int on_finish(void *userdata) {
        Recorder *rec = userdata;

        rec->n_finish++;
        fprintf(rec->log, "F\n");
        return rec->finish_result;
}

static const IniHandler handler = {
        .section = on_section,
        .assignment = on_assignment,
        .finish = on_finish,
};

/* Parses etc/main.conf and etc/conf.d; returns the result, *ret_log the callbacks, *ret_error the
 * message (both to be freed). */
static int parse(Recorder *rec, char **ret_log, char **ret_error) {
        int r;

        *ret_error = NULL;
        rec->error = ret_error;
        rec->log = open_memstream(&rec->text, &rec->size);
        if (!rec->log) {
                perror("open_memstream");
                exit(EXIT_FAILURE);
        }
        r = ini_parse_files(path_in("etc/main.conf"), path_in("etc/conf.d"), &handler, rec, ret_error);
        fclose(rec->log);
        *ret_log = rec->text;
        return r;
}

static void test_syntax(void) {
        Recorder rec = {};
        _cleanup_free_ char *log = NULL, *error = NULL;

        reset_dir();
        WRITE("etc/main.conf",
              "# a comment\n"
              "; another\n"
              "\n"
              "   \t\n"
              "  [First]  \n"
              "Key=Value\n"
              "  Spaced Key  =  spaced value  \n"
              "Inline=1 # comment\n"
              "Semi=2\t; comment\n"
              "Hash=a#b;c\n"
              "Equals=x=y\n"
              "[Second:part]\n"
              "Last=no newline at the end");
        CHECK(parse(&rec, &log, &error) == 0);
        CHECK_STR(error, NULL);
        CHECK_STR(log,
                  "S main.conf#1:5 [First]\n"
                  "A main.conf#1:6 Key=Value|\n"
                  "A main.conf#1:7 Spaced Key=spaced value|\n"
                  "A main.conf#1:8 Inline=1|\n"
                  "A main.conf#1:9 Semi=2|\n"
                  "A main.conf#1:10 Hash=a#b;c|\n"
                  "A main.conf#1:11 Equals=x=y|\n"
                  "S main.conf#1:12 [Second:part]\n"
                  "A main.conf#1:13 Last=no newline at the end|\n"
                  "F\n");
        CHECK(rec.n_finish == 1);
}

static void test_missing(void) {
        Recorder rec = {};
        _cleanup_free_ char *log = NULL, *error = NULL;
        char *untouched = (char *) "untouched";

        reset_dir();
        CHECK(parse(&rec, &log, &error) == 0);
        CHECK_STR(log, "F\n");
        CHECK_STR(error, NULL);

        /* NULL paths, a missing drop-in directory, and no finish callback */
        static const IniHandler bare = { .section = on_section, .assignment = on_assignment };
        CHECK(ini_parse_files(NULL, NULL, &bare, &rec, &untouched) == 0);
        CHECK(ini_parse_files(path_in("nonexistent.conf"), path_in("nonexistent.d"), &bare, &rec,
                              &untouched) == 0);
        CHECK(ini_parse_files(NULL, NULL, &bare, &rec, NULL) == 0);
        CHECK(streq(untouched, "untouched"));
}

static void test_dropins(void) {
        Recorder rec = {};
        _cleanup_free_ char *log = NULL, *error = NULL;

        reset_dir();
        WRITE("etc/main.conf", "[Main]\nA=main\n");
        WRITE("etc/conf.d/20-b.conf", "[B]\nA=b\n");
        WRITE("etc/conf.d/10-a.conf", "\n[A]\nA=a\n");
        WRITE("etc/conf.d/9-c.conf", "[C]\n");           /* "9" sorts after "2" */
        WRITE("etc/conf.d/.hidden.conf", "[Hidden]\n"); /* never read */
        WRITE("etc/conf.d/.conf", "[Bare]\n");
        WRITE("etc/conf.d/notes.txt", "not a drop-in\n");
        WRITE("etc/conf.d/30-x.conf.bak", "[Backup]\n");
        CHECK(mkdir(path_in("etc/conf.d/15-dir.conf"), 0755) == 0); /* a directory is skipped */
        CHECK(parse(&rec, &log, &error) == 0);
        CHECK_STR(log,
                  "S main.conf#1:1 [Main]\n"
                  "A main.conf#1:2 A=main|\n"
                  "S 10-a.conf#2:2 [A]\n"
                  "A 10-a.conf#2:3 A=a|\n"
                  "S 20-b.conf#3:1 [B]\n"
                  "A 20-b.conf#3:2 A=b|\n"
                  "S 9-c.conf#4:1 [C]\n"
                  "F\n");

        /* without the main file, the first drop-in is file 1; a section is needed in every file */
        free(TAKE_PTR(log));
        CHECK(remove(path_in("etc/main.conf")) == 0);
        WRITE("etc/conf.d/20-b.conf", "A=b\n");
        CHECK(parse(&rec, &log, &error) == -EINVAL);
        CHECK_STR(log, "S 10-a.conf#1:2 [A]\nA 10-a.conf#1:3 A=a|\n");
        char expected[512];
        snprintf(expected, sizeof(expected), "%s:1: Assignment A= before any [Section]",
                 path_in("etc/conf.d/20-b.conf"));
        CHECK_STR(error, expected);
}

/* etc/main.conf holding content fails with r and the message "<main.conf>:<tail>". */
static void check_error_at(int at, const char *content, size_t size, const char *reject, int finish_result,
                           int expected_r, const char *expected_tail) {
        Recorder rec = { .reject_section = reject, .finish_result = finish_result };
        _cleanup_free_ char *log = NULL, *error = NULL;
        char expected[512];
        int r;

        reset_dir();
        write_file("etc/main.conf", content, size);
        r = parse(&rec, &log, &error);
        if (expected_tail)
                snprintf(expected, sizeof(expected), "%s:%s", path_in("etc/main.conf"), expected_tail);
        if (r != expected_r || !streq_ptr(error, expected_tail ? expected : NULL)) {
                fprintf(stderr, "%s:%d: parse returned %d \"%s\"\n    expected %d \"%s\"\n", __FILE__, at, r,
                        strna(error), expected_r, expected_tail ? expected : "(null)");
                failures++;
        }
        if (expected_r < 0 && finish_result == 0 && rec.n_finish != 0) {
                fprintf(stderr, "%s:%d: finish called after an error\n", __FILE__, at);
                failures++;
        }
        /* without ret_error: the same result, no message */
        rec = (Recorder) { .reject_section = reject, .finish_result = finish_result };
        rec.log = fopen("/dev/null", "we");
        CHECK(rec.log);
        if (rec.log) {
                r = ini_parse_files(path_in("etc/main.conf"), NULL, &handler, &rec, NULL);
                fclose(rec.log);
                if (r != expected_r) {
                        fprintf(stderr, "%s:%d: without ret_error, parse returned %d\n", __FILE__, at, r);
                        failures++;
                }
        }
}
/* content is a string literal, and may hold a NUL byte */
#define CHECK_ERROR(content, r, tail)                                                                       \
        check_error_at(__LINE__, content, sizeof(content) - 1, NULL, 0, (r), (tail))

static void test_errors(void) {
        CHECK_ERROR("[A]\nno equals sign\n", -EINVAL,
                    "2: Expected Key=Value, a [Section] or a comment: no equals sign");
        CHECK_ERROR("[A\n", -EINVAL, "1: Section header without closing ']': [A");
        CHECK_ERROR("[\n", -EINVAL, "1: Section header without closing ']': [");
        CHECK_ERROR("[A]\n = value\n", -EINVAL, "2: Assignment without a key");
        CHECK_ERROR("\nKey=value\n[A]\n", -EINVAL, "2: Assignment Key= before any [Section]");
        CHECK_ERROR("[A]\nKey=\n", -EINVAL, "2: Empty value for Key=");
        CHECK_ERROR("[A]\nKey= # only a comment\n", -EINVAL, "2: Empty value for Key=");
        CHECK_ERROR("[A]\nKey=a\0b\n", -EINVAL, "2: Line contains a NUL byte");

        /* the callbacks' errors stop the parse and are its result */
        CHECK_ERROR("[A]\nFail=7\nNever=read\n", -EINVAL,
                    "2: Invalid Fail=7: out of range (expected anything else)");
        static const char bad_section[] = "[A]\n[Bad]\nKey=value\n";
        check_error_at(__LINE__, bad_section, strlen(bad_section), "Bad", 0, -EINVAL,
                       "2: Unknown section [Bad]");
        check_error_at(__LINE__, "[A]\n", 4, NULL, -ENOTUNIQ, -ENOTUNIQ, NULL); /* finish's own result */

        /* the main file as a directory is an error (a drop-in directory is skipped, see above) */
        Recorder rec = {};
        _cleanup_free_ char *log = NULL, *error = NULL;
        char expected[512];
        reset_dir();
        CHECK(mkdir(path_in("etc/main.conf"), 0755) == 0);
        CHECK(parse(&rec, &log, &error) == -EISDIR);
        snprintf(expected, sizeof(expected), "%s: cannot read: %s", path_in("etc/main.conf"),
                 strerror(EISDIR));
        CHECK_STR(error, expected);
        CHECK_STR(log, "");
}

static void test_messages(void) {
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL, *d = NULL;

        const IniPosition x = { .file = "/etc/x.conf", .file_index = 1, .line = 3 }, initial = {};

        CHECK(ini_error(&a, &x, "Bad %s", "thing") == -EINVAL);
        CHECK_STR(a, "/etc/x.conf:3: Bad thing");
        CHECK(ini_error(&b, &initial, "Inconsistent %d", 42) == -EINVAL);
        CHECK_STR(b, "initial configuration: Inconsistent 42");
        free(TAKE_PTR(b));
        CHECK(ini_error(&b, NULL, "No position") == -EINVAL);
        CHECK_STR(b, "initial configuration: No position");
        CHECK(ini_error(NULL, &x, "nobody reads this") == -EINVAL);
        CHECK(ini_bad_value(&c, &x, "K", "v", -ERANGE, "small") == -EINVAL);
        CHECK_STR(c, "/etc/x.conf:3: Invalid K=v: out of range (expected small)");
        CHECK(ini_bad_value(&d, &initial, "K", "v", -EINVAL, "a number") == -EINVAL);
        CHECK_STR(d, "initial configuration: Invalid K=v: not understood (expected a number)");
}

static void test_parse_decimal(void) {
        uint64_t v = 12345;

        CHECK(parse_decimal("0", &v) == 0 && v == 0);
        CHECK(parse_decimal("007", &v) == 0 && v == 7);
        CHECK(parse_decimal("18446744073709551615", &v) == 0 && v == UINT64_MAX);
        v = 12345;
        CHECK(parse_decimal("18446744073709551616", &v) == -ERANGE);
        CHECK(parse_decimal("99999999999999999999", &v) == -ERANGE);
        CHECK(parse_decimal("", &v) == -EINVAL);
        CHECK(parse_decimal(NULL, &v) == -EINVAL);
        CHECK(parse_decimal("-1", &v) == -EINVAL);
        CHECK(parse_decimal("+1", &v) == -EINVAL);
        CHECK(parse_decimal(" 1", &v) == -EINVAL);
        CHECK(parse_decimal("1 ", &v) == -EINVAL);
        CHECK(parse_decimal("0x10", &v) == -EINVAL);
        CHECK(parse_decimal("1K", &v) == -EINVAL);
        CHECK(v == 12345); /* untouched on failure */
}

static void test_parse_boolean(void) {
        CHECK_INT(parse_boolean("yes"), 1);
        CHECK_INT(parse_boolean("TRUE"), 1);
        CHECK_INT(parse_boolean("on"), 1);
        CHECK_INT(parse_boolean("1"), 1);
        CHECK_INT(parse_boolean("No"), 0);
        CHECK_INT(parse_boolean("false"), 0);
        CHECK_INT(parse_boolean("OFF"), 0);
        CHECK_INT(parse_boolean("0"), 0);
        CHECK_INT(parse_boolean(""), -EINVAL);
        CHECK_INT(parse_boolean("2"), -EINVAL);
        CHECK_INT(parse_boolean("yess"), -EINVAL);
        CHECK_INT(parse_boolean(NULL), -EINVAL);
}

int main(void) {
        test_mkdtemp(tmpdir);
        test_parse_boolean();

        test_syntax();
        test_missing();
        test_dropins();
        test_errors();
        test_messages();
        test_parse_decimal();

        test_rm_rf(tmpdir);
        return test_finish("test-ini-util");
}
