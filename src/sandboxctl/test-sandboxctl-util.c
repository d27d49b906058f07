/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests for sandboxctl's pure helpers: argument syntax, formatting, fd I/O and exit statuses. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "sandboxctl-util.h"

static int failures = 0;

#define CHECK(expr)                                                                                         \
        do {                                                                                                \
                if (!(expr)) {                                                                              \
                        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #expr);            \
                        failures++;                                                                         \
                }                                                                                           \
        } while (0)

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
        CHECK((p = make_printable("a\033[2Jb\n\x7f")) && streq(p, "a?[2Jb??"));
        free(p);
        /* U+009B (CSI) is a control; U+00E9 (é) is not. */
        CHECK((p = make_printable("x\xc2\x9b" "1m\xc3\xa9")) && streq(p, "x??1m\xc3\xa9"));
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

int main(void) {
        test_parse_uint64();
        test_parse_seconds();
        test_parse_mode();
        test_parse_env_assignment();
        test_split_sandbox_path();
        test_path_basename();
        test_format_timestamp();
        test_make_printable();
        test_fd_io();
        test_exec_exit_status();

        if (failures > 0) {
                fprintf(stderr, "%d check(s) failed\n", failures);
                return EXIT_FAILURE;
        }
        return EXIT_SUCCESS;
}
