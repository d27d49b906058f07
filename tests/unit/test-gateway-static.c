/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests of the dashboard's static files: accepted names, content types, the no-symlink walk, ETags. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway-static.h"
#include "macro.h"
#include "test-util.h"

static void test_names(void) {
        CHECK_INT(static_name_check("index.html"), 0);
        CHECK_INT(static_name_check("app.js"), 0);
        CHECK_INT(static_name_check("vendor/xterm/xterm.mjs"), 0);
        CHECK_INT(static_name_check("vendor/xterm/xterm.css"), 0);
        CHECK_INT(static_name_check("a-b_c.d.json"), 0);

        CHECK_INT(static_name_check(NULL), -EINVAL);
        CHECK_INT(static_name_check(""), -EINVAL);
        CHECK_INT(static_name_check("../etc/passwd.txt"), -EINVAL);
        CHECK_INT(static_name_check("vendor/../../x.js"), -EINVAL);
        CHECK_INT(static_name_check("vendor/./x.js"), -EINVAL);
        CHECK_INT(static_name_check("./x.js"), -EINVAL);
        CHECK_INT(static_name_check(".."), -EINVAL);
        CHECK_INT(static_name_check(".hidden.js"), -EINVAL);
        CHECK_INT(static_name_check("vendor/.git/config.json"), -EINVAL);
        CHECK_INT(static_name_check("/etc/x.js"), -EINVAL);
        CHECK_INT(static_name_check("a//b.js"), -EINVAL);
        CHECK_INT(static_name_check("dir/"), -EINVAL);
        CHECK_INT(static_name_check("a b.js"), -EINVAL);
        CHECK_INT(static_name_check("a%2e.js"), -EINVAL);
        CHECK_INT(static_name_check("a\\b.js"), -EINVAL);
        CHECK_INT(static_name_check("caf\xc3\xa9.js"), -EINVAL);
        /* no type, no file: nothing the dashboard does not ship as a known type */
        CHECK_INT(static_name_check("keys.db"), -EINVAL);
        CHECK_INT(static_name_check("Makefile"), -EINVAL);
        CHECK_INT(static_name_check("app.js.bak"), -EINVAL);

        char deep[STATIC_NAME_MAX] = "";
        for (int i = 0; i < STATIC_DEPTH_MAX; i++)
                strcat(deep, "d/");
        strcat(deep, "x.js");
        CHECK_INT(static_name_check(deep), -EINVAL);
        CHECK_INT(static_name_check(deep + 2), 0);

        char lng[STATIC_NAME_MAX + 8];
        memset(lng, 'a', sizeof(lng));
        strcpy(lng + STATIC_NAME_MAX - 3, ".js");
        CHECK_INT(static_name_check(lng), -EINVAL);
        CHECK_INT(static_name_check(lng + 1), 0); /* STATIC_NAME_MAX - 1 characters */
}

static void test_types(void) {
        CHECK_STR(static_content_type("index.html"), "text/html; charset=utf-8");
        CHECK_STR(static_content_type("app.js"), "text/javascript; charset=utf-8");
        CHECK_STR(static_content_type("vendor/xterm/xterm.mjs"), "text/javascript; charset=utf-8");
        CHECK_STR(static_content_type("style.css"), "text/css; charset=utf-8");
        CHECK_STR(static_content_type("x.svg"), "image/svg+xml");
        CHECK_STR(static_content_type("x.png"), "image/png");
        CHECK_STR(static_content_type("x.json"), "application/json");
        CHECK_STR(static_content_type("x.woff2"), "font/woff2");
        CHECK_STR(static_content_type("x"), NULL);
        CHECK_STR(static_content_type("x.HTML"), NULL);
        CHECK_STR(static_content_type("x.html.gz"), NULL);
        CHECK_STR(static_content_type("dir.js/x"), NULL); /* the extension of the last segment only */
        CHECK_STR(static_content_type(NULL), NULL);
}

static void write_file(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK(fd >= 0);
        if (fd >= 0) {
                CHECK(write(fd, text, strlen(text)) == (ssize_t) strlen(text));
                close(fd);
        }
}

static void test_open(void) {
        char dir[] = "/tmp/test-gateway-static.XXXXXX", p[512], sub[512], outside[512], buf[64];
        struct stat st;
        int fd = -1;

        test_mkdtemp(dir);
        snprintf(sub, sizeof(sub), "%s/ui", dir);
        CHECK(mkdir(sub, 0755) == 0);
        snprintf(p, sizeof(p), "%s/ui/vendor", dir);
        CHECK(mkdir(p, 0755) == 0);
        snprintf(p, sizeof(p), "%s/ui/index.html", dir);
        write_file(p, "<!doctype html>");
        snprintf(p, sizeof(p), "%s/ui/vendor/lib.js", dir);
        write_file(p, "export {};");
        snprintf(outside, sizeof(outside), "%s/secret.txt", dir);
        write_file(outside, "secret");
        snprintf(p, sizeof(p), "%s/ui/leak.txt", dir);
        CHECK(symlink(outside, p) == 0);
        snprintf(p, sizeof(p), "%s/ui/up", dir);
        CHECK(symlink("..", p) == 0);
        snprintf(p, sizeof(p), "%s/ui/dir.js", dir);
        CHECK(mkdir(p, 0755) == 0);

        CHECK_INT(static_open(sub, "index.html", &fd, &st), 0);
        if (fd >= 0) {
                CHECK_INT(read(fd, buf, sizeof(buf)), 15);
                CHECK_U64(st.st_size, 15);
                CHECK(S_ISREG(st.st_mode));
                CHECK(!(fcntl(fd, F_GETFL) & O_NONBLOCK));
                CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
                close(fd);
                fd = -1;
        }
        CHECK_INT(static_open(sub, "vendor/lib.js", &fd, &st), 0);
        if (fd >= 0)
                close(fd);
        fd = -1;

        /* a symlink, to a file or up a directory, is never followed; neither are directories served */
        CHECK_INT(static_open(sub, "leak.txt", &fd, &st), -ENOENT);
        CHECK_INT(static_open(sub, "up/secret.txt", &fd, &st), -ENOENT);
        CHECK_INT(static_open(sub, "dir.js", &fd, &st), -ENOENT);
        CHECK_INT(static_open(sub, "missing.js", &fd, &st), -ENOENT);
        CHECK_INT(static_open(sub, "index.html/x.js", &fd, &st), -ENOENT);
        CHECK_INT(static_open(sub, "../secret.txt", &fd, &st), -EINVAL);
        CHECK_INT(static_open("relative", "index.html", &fd, &st), -EINVAL);
        snprintf(p, sizeof(p), "%s/none", dir);
        CHECK_INT(static_open(p, "index.html", &fd, &st), -ENOENT);
        CHECK(fd == -1); /* untouched on failure */

        test_rm_rf(dir);
}

static void test_etags(void) {
        struct stat st = { .st_ino = 0x1234, .st_size = 99, .st_mtim = { .tv_sec = 1, .tv_nsec = 5 } };
        char e[STATIC_ETAG_MAX], e2[STATIC_ETAG_MAX];

        static_etag(&st, e);
        CHECK_STR(e, "\"1234-63-3b9aca05\"");
        st.st_mtim.tv_nsec = 6;
        static_etag(&st, e2);
        CHECK(!streq(e, e2));

        CHECK(static_etag_matches(e, e));
        CHECK(static_etag_matches("*", e));
        CHECK(static_etag_matches("\"x\", \"1234-63-3b9aca05\"", e));
        CHECK(static_etag_matches("W/\"1234-63-3b9aca05\"", e));
        CHECK(!static_etag_matches(NULL, e));
        CHECK(!static_etag_matches("", e));
        CHECK(!static_etag_matches("\"1234-63-3b9aca0\"", e));
        CHECK(!static_etag_matches("\"1234-63-3b9aca05\"x", e));
        CHECK(!static_etag_matches(e2, e));
}

int main(void) {
        test_names();
        test_types();
        test_open();
        test_etags();
        return test_finish("test-gateway-static");
}
