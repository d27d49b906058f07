/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests file-tools.c: line logic, str_replace counting, globs, caps, every tool on a scratch root. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file-tools.h"
#include "macro.h"
#include "test-util.h"

static char *buf_str(ToolBuf *b) {
        char *s = strndup(b->data ? (char *) b->data : "", b->size);
        tool_buf_free(b);
        return s;
}

static void test_pure(void) {
        CHECK_U64(tool_count_lines("", 0), 0);
        CHECK_U64(tool_count_lines("a", 1), 1);
        CHECK_U64(tool_count_lines("a\n", 2), 1);
        CHECK_U64(tool_count_lines("a\nb", 3), 2);
        CHECK_U64(tool_count_lines("\n\n", 2), 2);

        size_t first = 99;
        CHECK_U64(tool_count_occurrences("hello", 5, "x", 1, 0, &first), 0);
        CHECK_U64(first, 99);
        CHECK_U64(tool_count_occurrences("hello", 5, "ll", 2, 0, &first), 1);
        CHECK_U64(first, 2);
        CHECK_U64(tool_count_occurrences("abcabc", 6, "bc", 2, 0, &first), 2);
        CHECK_U64(tool_count_occurrences("aaa", 3, "aa", 2, 0, NULL), 2); /* overlapping: not unique */
        CHECK_U64(tool_count_occurrences("aaaa", 4, "a", 1, 2, NULL), 2); /* stops at max */
        CHECK_U64(tool_count_occurrences("a", 1, "", 0, 0, NULL), 0);
        CHECK_U64(tool_count_occurrences("a\0b\0", 4, "\0", 1, 0, NULL), 2);

        CHECK_U64(tool_line_of_offset("a\nb\nc", 5, 0), 1);
        CHECK_U64(tool_line_of_offset("a\nb\nc", 5, 2), 2);
        CHECK_U64(tool_line_of_offset("a\nb\nc", 5, 4), 3);

        CHECK(tool_is_binary("a\0b", 3));
        CHECK(!tool_is_binary("abc", 3));
}

static void test_number_lines(void) {
        const char *text = "one\ntwo\nthree\nfour";
        ToolResult res = {};
        ToolBuf b = {};
        char *s;

        CHECK_INT(tool_number_lines(text, strlen(text), 0, 0, 0, &b, &res), 0);
        s = buf_str(&b);
        CHECK_STR(s, "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour\n");
        free(s);
        CHECK_U64(res.n[0], 4);
        CHECK_U64(res.n[1], 1);
        CHECK_U64(res.n[2], 4);

        res = (ToolResult){};
        CHECK_INT(tool_number_lines(text, strlen(text), 2, 3, 0, &b, &res), 0);
        s = buf_str(&b);
        CHECK_STR(s, "     2\ttwo\n     3\tthree\n");
        free(s);

        res = (ToolResult){};
        CHECK_INT(tool_number_lines(text, strlen(text), 3, 99, 0, &b, &res), 0);
        s = buf_str(&b);
        CHECK_STR(s, "     3\tthree\n     4\tfour\n");
        free(s);
        CHECK_U64(res.n[2], 4);

        res = (ToolResult){};
        CHECK_INT(tool_number_lines(text, strlen(text), 5, 0, 0, &b, &res), 0);
        CHECK_INT(res.status, TOOL_LINE_RANGE);
        tool_buf_free(&b);

        /* an empty file shows nothing but is no error */
        res = (ToolResult){};
        CHECK_INT(tool_number_lines("", 0, 1, 0, 0, &b, &res), 0);
        CHECK_INT(res.status, TOOL_OK);
        CHECK_U64(b.size, 0);

        /* the cap cuts at a line boundary and says so */
        res = (ToolResult){};
        CHECK_INT(tool_number_lines(text, strlen(text), 1, 0, 25, &b, &res), 0);
        s = buf_str(&b);
        CHECK_STR(s, "     1\tone\n     2\ttwo\n");
        free(s);
        CHECK(res.flags & TOOL_FLAG_TRUNCATED);
        CHECK_U64(res.n[2], 2);
}

static void check_insert(const char *data, uint64_t line, const char *text, const char *expect) {
        ToolBuf b = {};
        int r = tool_insert_lines(data, strlen(data), line, text, strlen(text), &b);
        char *s = buf_str(&b);
        if (expect) {
                CHECK_INT(r, 0);
                CHECK_STR(s, expect);
        } else
                CHECK_INT(r, -ERANGE);
        free(s);
}

static void test_insert_lines(void) {
        check_insert("a\nb\n", 0, "x", "x\na\nb\n");
        check_insert("a\nb\n", 1, "x\n", "a\nx\nb\n");
        check_insert("a\nb\n", 2, "x\ny", "a\nb\nx\ny\n");
        check_insert("a\nb", 2, "x", "a\nb\nx\n"); /* the unterminated last line gets its newline */
        check_insert("a\nb", 1, "x", "a\nx\nb");
        check_insert("", 0, "x", "x\n");
        check_insert("a\n", 2, "x", NULL);
}

static void test_glob_match(void) {
        static const struct {
                const char *pattern, *path;
                bool match;
        } cases[] = {
                {"*.py", "a.py", true},
                {"*.py", "dir/a.py", false},
                {"*.py", ".hidden.py", false},
                {".*.py", ".hidden.py", true},
                {"**/*.py", "a.py", true},
                {"**/*.py", "x/y/z/a.py", true},
                {"**/*.py", "x/.git/a.py", false},
                {"src/**", "src/a/b", true},
                {"src/**", "src", true},
                {"src/*/c.txt", "src/b/c.txt", true},
                {"src/*/c.txt", "src/b/d/c.txt", false},
                {"a?c", "abc", true},
                {"a?c", "a/c", false},
                {"[ab]*", "bcd", true},
                {"[!ab]*", "bcd", false},
                {"**", "anything/at/all", true},
                {"x/**/y", "x/y", true},
                {"x/**/y", "x/1/2/y", true},
                {"x/**/y", "x/1/2/z", false},
                /* repeated "**" are folded into one: same answers */
                {"**/**/y", "y", true},
                {"**/**/y", "1/2/y", true},
                {"x/**/**/**", "x", true},
                {"**/**/y", "1/.h/y", false},
                {"**/**/**/**/**/**/**/**/**/**/**/**/**/**/**/**/**/**/**/**/a", "b/b/b/b/b/b/b/b/b/b/b/c", false},
                {"**/*/**/*/**/*/**/*/**/*/**/*/**/*/**/*/**/*/**/*/**/*/**/*/q", "b/b/b/b/b/b/b/b/b/b/b/b/b/b/b/b/b/b/b/b/b/b/b/b", false},
                {"**/*/**/*/q", "a/b/c/q", true},
                {"**/*/**/*/q", "a/q", false},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                if (tool_glob_match(cases[i].pattern, cases[i].path) != cases[i].match) {
                        fprintf(stderr, "glob '%s' on '%s': expected %s\n", cases[i].pattern, cases[i].path,
                                cases[i].match ? "a match" : "none");
                        failures++;
                }

        CHECK(tool_glob_match_dir("src/*/c.txt", "src"));
        CHECK(tool_glob_match_dir("src/*/c.txt", "src/b"));
        CHECK(!tool_glob_match_dir("src/*/c.txt", "src/b/d"));
        CHECK(!tool_glob_match_dir("src/*.c", "lib"));
        CHECK(tool_glob_match_dir("**/*.c", "lib/x"));
        CHECK(!tool_glob_match_dir("**/*.c", ".git"));

        char *base;
        const char *rest;
        CHECK_INT(tool_glob_split("src/lib/*.c", &base, &rest), 0);
        CHECK_STR(base, "src/lib");
        CHECK_STR(rest, "*.c");
        free(base);
        CHECK_INT(tool_glob_split("/home/sandbox/**", &base, &rest), 0);
        CHECK_STR(base, "/home/sandbox");
        CHECK_STR(rest, "**");
        free(base);
        CHECK_INT(tool_glob_split("*.c", &base, &rest), 0);
        CHECK_STR(base, "");
        CHECK_STR(rest, "*.c");
        free(base);
        CHECK_INT(tool_glob_split("/*", &base, &rest), 0);
        CHECK_STR(base, "/");
        CHECK_STR(rest, "*");
        free(base);
        CHECK_INT(tool_glob_split("a/b.c", &base, &rest), 0);
        CHECK_STR(base, "a");
        CHECK_STR(rest, "b.c");
        free(base);
}

static void test_utf8(void) {
        char *s = tool_utf8_sanitize("ok \xc3\xa9", 5);
        CHECK_STR(s, "ok \xc3\xa9");
        free(s);
        s = tool_utf8_sanitize("a\xff"
                               "b",
                               3);
        CHECK_STR(s, "a\xef\xbf\xbd"
                     "b");
        free(s);
        s = tool_utf8_sanitize("\xed\xa0\x80", 3); /* a surrogate */
        CHECK_STR(s, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
        free(s);
        s = tool_utf8_sanitize("a\0b", 3);
        CHECK_STR(s, "a\xef\xbf\xbd"
                     "b");
        free(s);
}

static void test_buf_reader(void) {
        ToolBuf b = {};
        const void *p;
        size_t n;
        uint32_t u;
        uint64_t t;

        CHECK_INT(tool_buf_put_bytes(&b, "name", 4), 0);
        CHECK_INT(tool_buf_put_u32(&b, 7), 0);
        CHECK_INT(tool_buf_put_u64(&b, UINT64_MAX), 0);
        ToolReader r = {.p = b.data, .left = b.size};
        CHECK_INT(tool_read_bytes(&r, &p, &n), 0);
        CHECK(n == 4 && memcmp(p, "name", 4) == 0);
        CHECK_INT(tool_read_u32(&r, &u), 0);
        CHECK_U64(u, 7);
        CHECK_INT(tool_read_u64(&r, &t), 0);
        CHECK_U64(t, UINT64_MAX);
        CHECK_INT(tool_read_u32(&r, &u), -EBADMSG);
        tool_buf_free(&b);
}

/* --- on a tree ----------------------------------------------------------------------------------- */

static void putn(const char *dir, const char *rel, const char *content, size_t n) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", dir, rel);
        FILE *f = fopen(p, "w");
        if (!f) {
                perror(p);
                exit(EXIT_FAILURE);
        }
        fwrite(content, 1, n, f);
        fclose(f);
}

static void put(const char *dir, const char *rel, const char *content) {
        putn(dir, rel, content, strlen(content));
}

static char *get(const char *dir, const char *rel) {
        char p[PATH_MAX], *s = NULL;
        size_t n = 0;
        snprintf(p, sizeof(p), "%s/%s", dir, rel);
        FILE *f = fopen(p, "r");
        if (!f)
                return NULL;
        FILE *m = open_memstream(&s, &n);
        int c;
        while ((c = fgetc(f)) != EOF)
                fputc(c, m);
        fclose(m);
        fclose(f);
        return s;
}

static void mk(const char *dir, const char *rel) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", dir, rel);
        if (mkdir(p, 0755) < 0) {
                perror(p);
                exit(EXIT_FAILURE);
        }
}

static void ln(const char *dir, const char *target, const char *rel) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", dir, rel);
        if (symlink(target, p) < 0) {
                perror(p);
                exit(EXIT_FAILURE);
        }
}

static void test_tree(bool fallback) {
        char root[] = "/tmp/test-file-tools.XXXXXX", outside[] = "/tmp/test-file-tools-outside.XXXXXX";
        ToolResult res;
        ToolBuf b = {};
        char *s;
        int fd;

        tool_open_force_fallback(fallback);
        test_mkdtemp(root);
        test_mkdtemp(outside);
        put(outside, "secret", "outside\n");
        mk(root, "src");
        mk(root, "src/sub");
        mk(root, ".git");
        put(root, "src/a.py", "def f():\n    return 1\n");
        put(root, "src/sub/b.py", "x = 1\ny = 2\n");
        putn(root, "src/bin.dat", "ab\0cd", 5);
        put(root, ".git/config", "return here\n");
        /* links that point out of the tree, as the root sees them or as the host does */
        char target[PATH_MAX];
        snprintf(target, sizeof(target), "%s/secret", outside);
        ln(root, target, "abs-out");
        ln(root, "../../../../../../../../..", "up");
        ln(root, "/", "rootlink");
        ln(root, "/proc/self/root", "magic");

        fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        CHECK(fd >= 0);

        /* file_create: new, exists, overwrite, dirs */
        ToolCreateSpec cs = {
                .path = "/new/deep/f.txt", .data = "hi\n", .size = 3, .data_fd = -1, .mode = 0600};
        res = (ToolResult){};
        CHECK_INT(tool_file_create(fd, &cs, &res), -ENOENT);
        cs.create_dirs = true;
        CHECK_INT(tool_file_create(fd, &cs, &res), 0);
        CHECK(res.flags & TOOL_FLAG_CREATED);
        s = get(root, "new/deep/f.txt");
        CHECK_STR(s, "hi\n");
        free(s);
        struct stat st;
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/new/deep/f.txt", root);
        CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0600);
        res = (ToolResult){};
        CHECK_INT(tool_file_create(fd, &cs, &res), -EEXIST);
        cs.overwrite = true;
        cs.data = "bye\n";
        cs.size = 4;
        res = (ToolResult){};
        CHECK_INT(tool_file_create(fd, &cs, &res), 0);
        CHECK(!(res.flags & TOOL_FLAG_CREATED));
        s = get(root, "new/deep/f.txt");
        CHECK_STR(s, "bye\n");
        free(s);

        /* escapes: every way out lands inside root, or fails */
        ToolCreateSpec esc = {.path = "/up/etc/x",
                              .data = "x",
                              .size = 1,
                              .data_fd = -1,
                              .mode = 0644,
                              .create_dirs = true};
        res = (ToolResult){};
        CHECK_INT(tool_file_create(fd, &esc, &res), 0);
        s = get(root, "etc/x"); /* "up" is the root itself */
        CHECK_STR(s, "x");
        free(s);
        char *data = NULL;
        size_t size = 0;
        CHECK_INT(tool_read_file(fd, "/abs-out", TOOLS_FILE_MAX, &data, &size), -ENOENT);
        CHECK_INT(tool_read_file(fd, "/../../../../secret", TOOLS_FILE_MAX, &data, &size), -ENOENT);
        CHECK_INT(tool_read_file(fd, "/rootlink/src/a.py", TOOLS_FILE_MAX, &data, &size), 0);
        CHECK_STR(data, "def f():\n    return 1\n");
        free(data);
        data = NULL;
        int r = tool_read_file(fd, "/magic/etc/passwd", TOOLS_FILE_MAX, &data, &size);
        CHECK(r == -ELOOP || r == -ENOENT || r == -EXDEV);
        free(data);
        data = NULL;
        s = get(outside, "secret");
        CHECK_STR(s, "outside\n");
        free(s);

        /* view */
        res = (ToolResult){};
        CHECK_INT(tool_view(fd, "/src/a.py", 2, 0, 0, &b, &res), 0);
        s = buf_str(&b);
        CHECK_STR(s, "     2\t    return 1\n");
        free(s);
        res = (ToolResult){};
        CHECK_INT(tool_view(fd, "/src/bin.dat", 0, 0, 0, &b, &res), 0);
        CHECK_INT(res.status, TOOL_BINARY);
        tool_buf_free(&b);
        res = (ToolResult){};
        CHECK_INT(tool_view(fd, "/src", 0, 0, 0, &b, &res), 0);
        CHECK(res.flags & TOOL_FLAG_DIRECTORY);
        s = buf_str(&b);
        CHECK_STR(s, "a.py\nbin.dat\nsub/\nsub/b.py\n");
        free(s);

        /* str_replace: the uniqueness rule; nothing changes unless old occurs exactly once */
        res = (ToolResult){};
        CHECK_INT(tool_str_replace(fd, "/src/sub/b.py", " = ", 3, " := ", 4, &res), 0);
        CHECK_INT(res.status, TOOL_AMBIGUOUS);
        CHECK_U64(res.n[0], 2);
        res = (ToolResult){};
        CHECK_INT(tool_str_replace(fd, "/src/sub/b.py", "zzz", 3, "", 0, &res), 0);
        CHECK_INT(res.status, TOOL_NO_MATCH);
        s = get(root, "src/sub/b.py");
        CHECK_STR(s, "x = 1\ny = 2\n");
        free(s);
        res = (ToolResult){};
        CHECK_INT(tool_str_replace(fd, "/src/sub/b.py", "y = 2", 5, "y = 3", 5, &res), 0);
        CHECK_INT(res.status, TOOL_OK);
        CHECK_U64(res.n[1], 2);
        s = get(root, "src/sub/b.py");
        CHECK_STR(s, "x = 1\ny = 3\n");
        free(s);

        /* insert */
        res = (ToolResult){};
        CHECK_INT(tool_insert(fd, "/src/sub/b.py", 1, "z = 0", 5, &res), 0);
        s = get(root, "src/sub/b.py");
        CHECK_STR(s, "x = 1\nz = 0\ny = 3\n");
        free(s);
        CHECK_U64(res.n[0], 3);
        res = (ToolResult){};
        CHECK_INT(tool_insert(fd, "/src/sub/b.py", 9, "w", 1, &res), 0);
        CHECK_INT(res.status, TOOL_LINE_RANGE);

        /* ls */
        res = (ToolResult){};
        CHECK_INT(tool_ls(fd, "/src", 0, 0, &b, &res), 0);
        CHECK_U64(res.n[0], 3);
        ToolReader rd = {.p = b.data, .left = b.size};
        const void *name;
        size_t nlen;
        uint32_t type, mode;
        uint64_t fsize, mtime;
        CHECK_INT(tool_read_bytes(&rd, &name, &nlen), 0);
        CHECK(nlen == 4 && memcmp(name, "a.py", 4) == 0);
        CHECK_INT(tool_read_u32(&rd, &type), 0);
        CHECK_U64(type, 'f');
        CHECK_INT(tool_read_u32(&rd, &mode), 0);
        CHECK_INT(tool_read_u64(&rd, &fsize), 0);
        CHECK_U64(fsize, 22);
        CHECK_INT(tool_read_u64(&rd, &mtime), 0);
        CHECK(mtime > 0);
        tool_buf_free(&b);
        res = (ToolResult){};
        CHECK_INT(tool_ls(fd, "/src", 2, 0, &b, &res), 0);
        CHECK_U64(res.n[0], 2);
        CHECK(res.flags & TOOL_FLAG_TRUNCATED);
        tool_buf_free(&b);

        /* glob: sorted, hidden directories left alone, links not followed */
        res = (ToolResult){};
        CHECK_INT(tool_glob(fd, "/", "**/*.py", 0, 0, &b, &res), 0);
        CHECK_U64(res.n[0], 2);
        rd = (ToolReader){.p = b.data, .left = b.size};
        CHECK_INT(tool_read_bytes(&rd, &name, &nlen), 0);
        CHECK(nlen == 9 && memcmp(name, "/src/a.py", 9) == 0);
        CHECK_INT(tool_read_bytes(&rd, &name, &nlen), 0);
        CHECK(nlen == 13 && memcmp(name, "/src/sub/b.py", 13) == 0);
        tool_buf_free(&b);
        res = (ToolResult){};
        CHECK_INT(tool_glob(fd, "/src", "**/*.py", 1, 0, &b, &res), 0);
        CHECK_U64(res.n[0], 1);
        CHECK(res.flags & TOOL_FLAG_TRUNCATED);
        tool_buf_free(&b);

        /* grep */
        char err[256];
        void *code = tool_grep_compile("RETURN|y =", true, err, sizeof(err));
        CHECK(code);
        ToolGrepSpec gs = {.path = "/", .code = code};
        res = (ToolResult){};
        CHECK_INT(tool_grep(fd, &gs, &b, &res), 0);
        CHECK_U64(res.n[0], 3); /* src/a.py:2, src/sub/b.py:3, and .git/config: grep -r searches it too */
        tool_buf_free(&b);
        gs.glob = "*.py";
        res = (ToolResult){};
        CHECK_INT(tool_grep(fd, &gs, &b, &res), 0);
        CHECK_U64(res.n[0], 2);
        rd = (ToolReader){.p = b.data, .left = b.size};
        CHECK_INT(tool_read_bytes(&rd, &name, &nlen), 0);
        CHECK(nlen == 9 && memcmp(name, "/src/a.py", 9) == 0);
        uint32_t line;
        CHECK_INT(tool_read_u32(&rd, &line), 0);
        CHECK_U64(line, 2);
        CHECK_INT(tool_read_bytes(&rd, &name, &nlen), 0);
        CHECK(nlen == 12 && memcmp(name, "    return 1", 12) == 0);
        tool_buf_free(&b);
        gs.glob = NULL;
        gs.max = 1;
        res = (ToolResult){};
        CHECK_INT(tool_grep(fd, &gs, &b, &res), 0);
        CHECK_U64(res.n[0], 1);
        CHECK(res.flags & TOOL_FLAG_TRUNCATED);
        tool_buf_free(&b);
        tool_grep_free(code);
        CHECK(!tool_grep_compile("(", false, err, sizeof(err)));
        CHECK(strstr(err, "offset") != NULL);

        safe_close(fd);
        test_rm_rf(root);
        test_rm_rf(outside);
        tool_open_force_fallback(false);
}

/* Grep searches a whole file first where the pattern allows; the lines it reports must be exactly those
 * that matching every line on its own reports. */
static void test_grep_prefilter(void) {
        static const char *const patterns[] = {
                "foo", "^foo", "foo$", "^$", "o+", "\\bfoo\\b", "f.o", "[^a]", "\\s", "a\\sb", "x*", "(?i)FOO",
                "(?m)^b", "\\d+$", "foo|^bar", "\\Afoo", "(?<=a)b", "o\\n", "^\\s*$", ".", "r$", "\\Bo",
                "(?s)o.b", "é", "\\x{ff}", "[[:space:]]foo", "^.{3}$",
        };
        static const char text[] = "foo\nbar foo\n\na b\nxfoo\nfoo bar\r\n \n123\nab\n\xff\xfe foo\n"
                                   "caf\xc3\xa9\nzzz\nb\nfoo";
        char root[] = "/tmp/test-file-tools-grep.XXXXXX", err[256];

        test_mkdtemp(root);
        putn(root, "t.txt", text, sizeof(text) - 1);
        putn(root, "u.txt", "\n\nfoo\n", 6);
        int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        CHECK(fd >= 0);
        for (size_t i = 0; i < ELEMENTSOF(patterns); i++)
                for (int ic = 0; ic < 2; ic++) {
                        void *code = tool_grep_compile(patterns[i], ic, err, sizeof(err));
                        ToolBuf a = {}, b = {};
                        ToolResult ra = {}, rb = {};
                        ToolGrepSpec gs = { .path = "/", .code = code };

                        CHECK(code);
                        if (!code)
                                continue;
                        tool_grep_force_per_line(true);
                        CHECK_INT(tool_grep(fd, &gs, &a, &ra), 0);
                        tool_grep_force_per_line(false);
                        CHECK_INT(tool_grep(fd, &gs, &b, &rb), 0);
                        if (a.size != b.size || (a.size > 0 && memcmp(a.data, b.data, a.size) != 0) ||
                            ra.n[0] != rb.n[0]) {
                                fprintf(stderr, "grep '%s' (ignore_case %d): %" PRIu64 " matches line by line, "
                                        "%" PRIu64 " with the whole-file search\n", patterns[i], ic, ra.n[0], rb.n[0]);
                                failures++;
                        }
                        tool_buf_free(&a);
                        tool_buf_free(&b);
                        tool_grep_free(code);
                }
        safe_close(fd);
        test_rm_rf(root);
}

typedef struct Swapper {
        char dir[PATH_MAX];
        volatile int stop;
        unsigned swaps;
} Swapper;

static void *swap_loop(void *userdata) {
        Swapper *sw = userdata;
        char d[PATH_MAX + 8], real[PATH_MAX + 8], evil[PATH_MAX + 8];

        snprintf(d, sizeof(d), "%s/d", sw->dir);
        snprintf(real, sizeof(real), "%s/real", sw->dir);
        snprintf(evil, sizeof(evil), "%s/evil", sw->dir);
        while (sw->swaps < 10000 || !sw->stop) {
                if (rename(d, real) < 0 || rename(evil, d) < 0 || rename(d, evil) < 0 || rename(real, d) < 0)
                        break;
                sw->swaps++;
        }
        return NULL;
}

/* A directory swapped for symlinks out of the root (absolute, and a chain of ".."), at least 10,000
 * times while the tools write and read through it: nothing outside the root is ever touched. */
static void test_swap_race(bool fallback) {
        char root[] = "/tmp/test-file-tools-race.XXXXXX", outside[] = "/tmp/test-file-tools-target.XXXXXX";
        char p[PATH_MAX], target[PATH_MAX];
        Swapper sw = {};
        pthread_t t;

        tool_open_force_fallback(fallback);
        test_mkdtemp(root);
        test_mkdtemp(outside);
        put(outside, "f.txt", "outside\n");
        mk(root, "w");
        mk(root, "w/d");
        put(root, "w/d/f.txt", "inside\n");
        snprintf(target, sizeof(target), "%s", outside);
        ln(root, target, "w/evil");
        snprintf(sw.dir, sizeof(sw.dir), "%s/w", root);
        int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        CHECK(fd >= 0);
        CHECK(pthread_create(&t, NULL, swap_loop, &sw) == 0);
        for (unsigned i = 0; i < 3000 || sw.swaps < 10000; i++) {
                ToolCreateSpec cs = { .path = "/w/d/f.txt", .data = "written\n", .size = 8, .data_fd = -1,
                                      .mode = 0644, .overwrite = true };
                ToolCreateSpec cn = { .path = "/w/d/new.txt", .data = "new\n", .size = 4, .data_fd = -1,
                                      .mode = 0644, .overwrite = true };
                ToolResult res = {};
                ToolBuf b = {};
                (void) tool_file_create(fd, &cs, &res);
                (void) tool_file_create(fd, &cn, &res);
                (void) tool_str_replace(fd, "/w/d/f.txt", "side", 4, "SIDE", 4, &res);
                (void) tool_insert(fd, "/w/d/f.txt", 0, "x", 1, &res);
                (void) tool_view(fd, "/w/d/f.txt", 0, 0, 0, &b, &res);
                CHECK(b.size == 0 || memmem(b.data, b.size, "outside", 7) == NULL);
                tool_buf_free(&b);
                if (i > 1000000)
                        break;
        }
        sw.stop = 1;
        pthread_join(t, NULL);
        CHECK(sw.swaps >= 10000);
        /* the target is as it was: one file, its content */
        char *s = get(outside, "f.txt");
        CHECK_STR(s, "outside\n");
        free(s);
        snprintf(p, sizeof(p), "%s/new.txt", outside);
        CHECK(access(p, F_OK) < 0);
        safe_close(fd);
        test_rm_rf(root);
        test_rm_rf(outside);
        tool_open_force_fallback(false);
}

int main(void) {
        test_pure();
        test_number_lines();
        test_insert_lines();
        test_glob_match();
        test_utf8();
        test_buf_reader();
        test_tree(false);
        test_tree(true);
        test_grep_prefilter();
        test_swap_race(false);
        test_swap_race(true);
        return test_finish("test-file-tools");
}
