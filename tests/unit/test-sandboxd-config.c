/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for sandboxd-config: defaults, the documented format, drop-in order, and every error path. */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "macro.h"
#include "sandboxd-config.h"
#include "time-util.h"
#include "test-util.h"

static char tmpdir[] = "/tmp/test-sandboxd-config.XXXXXX";

static char *path_in(const char *name) {
        static char buf[4][256];
        static unsigned i = 0;
        char *p = buf[i++ % 4];

        snprintf(p, sizeof(buf[0]), "%s/%s", tmpdir, name);
        return p;
}

static void write_file(const char *name, const char *content) {
        FILE *f = fopen(path_in(name), "we");
        if (!f || fputs(content, f) < 0 || fclose(f) != 0) {
                perror(name);
                exit(EXIT_FAILURE);
        }
}

/* A fresh, empty tmpdir/etc with a conf.d in it. */
static void reset_dir(void) {
        test_rm_rf(path_in("etc"));
        if (mkdir(path_in("etc"), 0755) < 0 || mkdir(path_in("etc/conf.d"), 0755) < 0) {
                perror("mkdir");
                exit(EXIT_FAILURE);
        }
}

/* Loads etc/main.conf and etc/conf.d over the defaults and expects result expected_r with exactly the
 * message expected_msg ("@" stands for tmpdir; NULL: no message), and on failure an unchanged config. */
static void check_error_at(int line, int expected_r, const char *expected_msg) {
        SandboxdConfig c, before;
        _cleanup_free_ char *error = NULL;
        char expected[512] = "";
        const char *at = expected_msg ? strchr(expected_msg, '@') : NULL;

        if (at)
                snprintf(expected, sizeof(expected), "%.*s%s%s", (int) (at - expected_msg), expected_msg,
                         tmpdir, at + 1);
        else if (expected_msg)
                snprintf(expected, sizeof(expected), "%s", expected_msg);

        sandboxd_config_defaults(&c);
        before = c;
        int r = sandboxd_config_load(&c, path_in("etc/main.conf"), path_in("etc/conf.d"), &error);
        if (r != expected_r || !streq_ptr(error, expected_msg ? expected : NULL)) {
                fprintf(stderr, "%s:%d: load returned %d \"%s\"\n    expected %d \"%s\"\n", __FILE__,
                        line, r, strna(error), expected_r, expected_msg ? expected : "n/a");
                failures++;
        }
        if (r < 0 && memcmp(&c, &before, sizeof(c)) != 0) {
                fprintf(stderr, "%s:%d: config changed by a failed load\n", __FILE__, line);
                failures++;
        }

        /* The same without a place for the message. */
        sandboxd_config_done(&c);
        sandboxd_config_defaults(&c);
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), path_in("etc/conf.d"), NULL) == expected_r);
        sandboxd_config_done(&c);
}
#define CHECK_ERROR(r, msg) check_error_at(__LINE__, (r), (msg))

/* The common case: an -EINVAL at line n of the main file. */
#define CHECK_MAIN_ERROR(n, msg) check_error_at(__LINE__, -EINVAL, "@/etc/main.conf:" #n ": " msg)

static void test_defaults(void) {
        SandboxdConfig c;

        sandboxd_config_defaults(&c);
        CHECK_U64(c.uid_min, 1879048192);
        CHECK_U64(c.uid_max, 1879113727);
        CHECK_U64(c.output_max, 1 << 20);
        CHECK_U64(c.stdin_max, 16 << 20);
        CHECK_U64(c.file_max, 16 << 20);
        CHECK_U64(c.max_sandboxes, 4096);
        CHECK_U64(c.default_ttl_usec, USEC_PER_HOUR);
        CHECK_U64(c.max_ttl_usec, 7 * USEC_PER_DAY);
        CHECK(streq(c.default_type, "small"));
        CHECK_U64(c.n_types, 3);

        const SandboxType *t = sandboxd_config_find_type(&c, "small");
        CHECK(t && streq(t->name, "small"));
        if (t) {
                CHECK_U64(t->cpu_quota_percent, 100);
                CHECK_U64(t->memory_max, UINT64_C(1) << 30);
                CHECK_U64(t->tasks_max, 256);
                CHECK_U64(t->max_timeout_usec, USEC_PER_HOUR);
                CHECK_U64(t->default_timeout_usec, 20 * USEC_PER_SEC);
                CHECK_U64(t->disk_max, UINT64_C(4) << 30);
        }
        t = sandboxd_config_find_type(&c, "medium");
        CHECK(t);
        if (t) {
                CHECK_U64(t->cpu_quota_percent, 200);
                CHECK_U64(t->memory_max, UINT64_C(4) << 30);
                CHECK_U64(t->tasks_max, 1024);
                CHECK_U64(t->max_timeout_usec, 6 * USEC_PER_HOUR);
                CHECK_U64(t->default_timeout_usec, 60 * USEC_PER_SEC);
                CHECK_U64(t->disk_max, UINT64_C(16) << 30);
        }
        t = sandboxd_config_find_type(&c, "large");
        CHECK(t);
        if (t) {
                CHECK_U64(t->cpu_quota_percent, 400);
                CHECK_U64(t->memory_max, UINT64_C(16) << 30);
                CHECK_U64(t->tasks_max, 4096);
                CHECK_U64(t->max_timeout_usec, 24 * USEC_PER_HOUR);
                CHECK_U64(t->default_timeout_usec, 120 * USEC_PER_SEC);
                CHECK_U64(t->disk_max, UINT64_C(64) << 30);
        }
        CHECK(sandboxd_config_find_type(&c, NULL) == sandboxd_config_find_type(&c, "small"));
        CHECK(sandboxd_config_find_type(&c, "") == sandboxd_config_find_type(&c, "small"));
        CHECK(!sandboxd_config_find_type(&c, "huge"));
        CHECK(!sandboxd_config_find_type(&c, "Small"));
        CHECK(!sandboxd_config_find_type(NULL, "small"));

        /* Nothing on disk: success, nothing changed, the message untouched. */
        SandboxdConfig d = c;
        char *error = (char *) "untouched";
        CHECK(sandboxd_config_load(&d, path_in("nonexistent.conf"), path_in("nonexistent.d"), &error) == 0);
        CHECK(memcmp(&c, &d, sizeof(c)) == 0);
        CHECK(streq(error, "untouched"));
        CHECK(sandboxd_config_load(&d, NULL, NULL, NULL) == 0);
        CHECK(memcmp(&c, &d, sizeof(c)) == 0);
}

static void test_documented_example(void) {
        SandboxdConfig c;
        _cleanup_free_ char *error = NULL;

        reset_dir();
        write_file("etc/main.conf",
                   "# sandboxd.conf as documented\n"
                   "[Manager]\n"
                   "UidMin=1879048192\n"
                   "UidMax=1879113727\n"
                   "OutputMax=1M          # captured output cap per stream\n"
                   "StdinMax=16M\n"
                   "FileMax=16M           # WriteFile/ReadFile data cap in a message\n"
                   "MaxSandboxes=4096\n"
                   "DefaultTTLSec=1h\n"
                   "MaxTTLSec=7d\n"
                   "DefaultType=small\n"
                   "\n"
                   "[Type:small]\n"
                   "CPUQuota=100%\n"
                   "MemoryMax=1G\n"
                   "TasksMax=256\n"
                   "MaxTimeoutSec=1h\n"
                   "DefaultTimeoutSec=20\n"
                   "PoolSize=2\n"
                   "DiskMax=4G\n");

        SandboxdConfig defaults;
        sandboxd_config_defaults(&defaults);
        sandboxd_config_defaults(&c);
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), path_in("etc/conf.d"), &error) == 0);
        CHECK(!error);
        CHECK(memcmp(&c, &defaults, sizeof(c)) == 0); /* the example spells out the defaults */

        /* Every key changed, with comments, blanks, CRLF and odd spacing around everything. */
        write_file("etc/main.conf",
                   "; a comment\r\n"
                   "   # an indented comment\n"
                   "\t\n"
                   "[Manager]\n"
                   "  UidMin =  2000000000 \n"
                   "UidMax\t=\t2000000999\r\n"
                   "OutputMax=64K ; inline\n"
                   "StdinMax=2M\n"
                   "FileMax=8M\n"
                   "MaxSandboxes=1000\n"
                   "HostTag=q\n"
                   "DefaultTTLSec=30min\n"
                   "MaxTTLSec=1d\n"
                   "DefaultType=medium\n"
                   "[Type:medium]\n"
                   "CPUQuota=150%\n"
                   "MemoryMax=3G\n"
                   "TasksMax=512\n"
                   "MaxTimeoutSec=2h\n"
                   "DefaultTimeoutSec=500ms\n"
                   "PoolSize=5\n"
                   "DiskMax=16M\n"
                   "[Type:large]\n"
                   "DiskMax=infinity\n"
                   "[Manager]\n"
                   "StdinMax=3M\n");
        sandboxd_config_defaults(&c);
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), NULL, &error) == 0);
        CHECK(!error);
        CHECK_U64(c.uid_min, 2000000000);
        CHECK_U64(c.uid_max, 2000000999);
        CHECK_U64(c.output_max, 64 << 10);
        CHECK_U64(c.stdin_max, 3 << 20); /* later assignment wins, also across sections */
        CHECK_U64(c.file_max, 8 << 20);
        CHECK_U64(c.max_sandboxes, 1000);
        CHECK_INT(c.host_tag, 'q');
        CHECK_U64(c.default_ttl_usec, 30 * USEC_PER_MINUTE);
        CHECK_U64(c.max_ttl_usec, USEC_PER_DAY);
        CHECK(streq(c.default_type, "medium"));
        const SandboxType *t = sandboxd_config_find_type(&c, NULL);
        CHECK(t && streq(t->name, "medium"));
        if (t) {
                CHECK_U64(t->cpu_quota_percent, 150);
                CHECK_U64(t->memory_max, UINT64_C(3) << 30);
                CHECK_U64(t->tasks_max, 512);
                CHECK_U64(t->max_timeout_usec, 2 * USEC_PER_HOUR);
                CHECK_U64(t->default_timeout_usec, 500 * USEC_PER_MSEC);
                CHECK_U64(t->pool_size, 5);
                CHECK_U64(t->disk_max, UINT64_C(16) << 20);
        }
        t = sandboxd_config_find_type(&c, "large");
        CHECK(t && t->disk_max == 0); /* infinity: no disk image */
        /* The other presets are untouched. */
        CHECK(memcmp(sandboxd_config_find_type(&c, "small"), sandboxd_config_find_type(&defaults, "small"),
                     sizeof(SandboxType)) == 0);
}

static void test_dropins(void) {
        SandboxdConfig c;
        _cleanup_free_ char *error = NULL;

        reset_dir();
        write_file("etc/main.conf",
                   "[Type:small]\nMemoryMax=1G\n"
                   "[Type:gpu]\nMemoryMax=32G\nCPUQuota=800%\n");
        /* Lexical order: "10-…" sorts before "9-…", so 9 wins. */
        write_file("etc/conf.d/10-first.conf", "[Type:small]\nMemoryMax=2G\nTasksMax=100\n");
        write_file("etc/conf.d/9-second.conf", "[Type:small]\nMemoryMax=3G\n[Manager]\nDefaultType=gpu\n");
        /* None of these are drop-ins. */
        write_file("etc/conf.d/99-ignored.conf.bak", "[Type:small]\nMemoryMax=4G\n");
        write_file("etc/conf.d/.99-hidden.conf", "garbage\n");
        write_file("etc/conf.d/README", "garbage\n");
        CHECK(mkdir(path_in("etc/conf.d/98-dir.conf"), 0755) == 0);

        sandboxd_config_defaults(&c);
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), path_in("etc/conf.d"), &error) == 0);
        if (error)
                fprintf(stderr, "unexpected error: %s\n", error);

        const SandboxType *t = sandboxd_config_find_type(&c, "small");
        CHECK(t);
        if (t) {
                CHECK_U64(t->memory_max, UINT64_C(3) << 30);
                CHECK_U64(t->tasks_max, 100);
        }

        /* A new type starts from small's built-in values, but with no pool. */
        CHECK_U64(c.n_types, 4);
        t = sandboxd_config_find_type(&c, NULL);
        CHECK(t && streq(t->name, "gpu"));
        if (t) {
                CHECK_U64(t->memory_max, UINT64_C(32) << 30);
                CHECK_U64(t->cpu_quota_percent, 800);
                CHECK_U64(t->tasks_max, 256);
                CHECK_U64(t->max_timeout_usec, USEC_PER_HOUR);
                CHECK_U64(t->default_timeout_usec, 20 * USEC_PER_SEC);
                CHECK_U64(t->pool_size, 0);
        }
        CHECK_U64(sandboxd_config_find_type(&c, "small")->pool_size, 2);

        /* Loading again on top of the result is fine: the types are found, not defined twice. */
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), path_in("etc/conf.d"), &error) == 0);
        CHECK_U64(c.n_types, 4);

        /* Drop-ins apply without a main file too. */
        sandboxd_config_defaults(&c);
        CHECK(sandboxd_config_load(&c, path_in("etc/nonexistent.conf"), path_in("etc/conf.d"), NULL) ==
              -EINVAL); /* DefaultType=gpu, but gpu was defined in the main file only */
        write_file("etc/conf.d/9-second.conf", "[Type:small]\nMemoryMax=3G\n");
        CHECK(sandboxd_config_load(&c, path_in("etc/nonexistent.conf"), path_in("etc/conf.d"), NULL) == 0);
        CHECK_U64(sandboxd_config_find_type(&c, "small")->memory_max, UINT64_C(3) << 30);
}

static void test_type_limit(void) {
        char buf[4096] = "";
        SandboxdConfig c;

        reset_dir();
        /* 3 presets + 13 = 16 types: fine. */
        for (int i = 0; i < 13; i++)
                snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "[Type:t%d]\nTasksMax=%d\n", i,
                         i + 1);
        write_file("etc/main.conf", buf);
        sandboxd_config_defaults(&c);
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), NULL, NULL) == 0);
        CHECK_U64(c.n_types, 16);
        CHECK(sandboxd_config_find_type(&c, "t12") && sandboxd_config_find_type(&c, "t12")->tasks_max == 13);

        /* The 17th is one too many. */
        write_file("etc/conf.d/x.conf", "# one more\n[Type:one-too-many]\n");
        CHECK_ERROR(-EINVAL, "@/etc/conf.d/x.conf:2: Too many sandbox types, at most 16 may be defined");
}

static void test_audit_switch(void) {
        SandboxdConfig c;
        char *error = NULL;

        reset_dir();
        sandboxd_config_defaults(&c);
        CHECK(c.audit);
        write_file("etc/main.conf", "[Manager]\nAudit=no\n");
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), path_in("etc/conf.d"), &error) == 0);
        CHECK(!c.audit);
        write_file("etc/main.conf", "[Manager]\nAudit=Yes\n");
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), path_in("etc/conf.d"), &error) == 0);
        CHECK(c.audit);
        free(error);
}

/* [Sandboxes]: what all sandboxes together may have; auto (the default) is resolved by sandboxd. */
static void test_sandboxes_totals(void) {
        SandboxdConfig c;
        _cleanup_free_ char *error = NULL;

        reset_dir();
        sandboxd_config_defaults(&c);
        CHECK_U64(c.totals.memory_max, SANDBOX_TOTAL_AUTO);
        CHECK_U64(c.totals.tasks_max, SANDBOX_TOTAL_AUTO);
        CHECK_U64(c.totals.cpu_quota_percent, SANDBOX_TOTAL_AUTO);
        CHECK_U64(c.totals.overcommit_percent, 100);
        CHECK_U64(c.totals.max_per_account, SANDBOX_TOTAL_INFINITY);

        write_file("etc/main.conf", "[Sandboxes]\nMemoryMax=1G\nTasksMax=500\nCPUQuota=150%\nOvercommit=250%\n"
                                    "MaxSandboxesPerAccount=8\n");
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), path_in("etc/conf.d"), &error) == 0);
        CHECK_U64(c.totals.memory_max, UINT64_C(1) << 30);
        CHECK_U64(c.totals.tasks_max, 500);
        CHECK_U64(c.totals.cpu_quota_percent, 150);
        CHECK_U64(c.totals.overcommit_percent, 250);
        CHECK_U64(c.totals.max_per_account, 8);

        /* a drop-in sets them back, or lifts them */
        write_file("etc/conf.d/50-x.conf", "[Sandboxes]\nMemoryMax=auto\nTasksMax=infinity\nCPUQuota=infinity\n");
        sandboxd_config_defaults(&c);
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), path_in("etc/conf.d"), &error) == 0);
        CHECK_U64(c.totals.memory_max, SANDBOX_TOTAL_AUTO);
        CHECK_U64(c.totals.tasks_max, SANDBOX_TOTAL_INFINITY);
        CHECK_U64(c.totals.cpu_quota_percent, SANDBOX_TOTAL_INFINITY);
        CHECK_U64(c.totals.overcommit_percent, 250);
        CHECK(remove(path_in("etc/conf.d/50-x.conf")) == 0);

        write_file("etc/main.conf", "[Sandboxes]\nMemoryMax=0\n");
        CHECK_MAIN_ERROR(2, "Invalid MemoryMax=0: out of range (expected auto, infinity or a non-zero size such as 16G)");
        write_file("etc/main.conf", "[Sandboxes]\nTasksMax=-1\n");
        CHECK_MAIN_ERROR(2, "Invalid TasksMax=-1: not understood (expected auto, infinity or a number of at least 1)");
        write_file("etc/main.conf", "[Sandboxes]\nCPUQuota=0%\n");
        CHECK_MAIN_ERROR(2, "Invalid CPUQuota=0%: out of range (expected auto, infinity or 1%..10000%)");
        write_file("etc/main.conf", "[Sandboxes]\nOvercommit=99%\n");
        CHECK_MAIN_ERROR(2, "Invalid Overcommit=99%: out of range (expected 100%..10000%)");
        write_file("etc/main.conf", "[Sandboxes]\nOvercommit=auto\n");
        CHECK_MAIN_ERROR(2, "Invalid Overcommit=auto: not understood (expected 100%..10000%)");
        write_file("etc/main.conf", "[Manager]\nHostTag=B\n");
        CHECK_MAIN_ERROR(2, "Invalid HostTag=B: not understood (expected one character of a-z or 2-7 (the host's tag in sandbox ids), or no)");
        write_file("etc/main.conf", "[Manager]\nHostTag=ab\n");
        CHECK_MAIN_ERROR(2, "Invalid HostTag=ab: not understood (expected one character of a-z or 2-7 (the host's tag in sandbox ids), or no)");
        write_file("etc/main.conf", "[Manager]\nHostTag=\n");
        CHECK_MAIN_ERROR(2, "Empty value for HostTag=");
        write_file("etc/main.conf", "[Sandboxes]\nMaxSandboxesPerAccount=0\n");
        CHECK_MAIN_ERROR(2, "Invalid MaxSandboxesPerAccount=0: out of range (expected infinity or a number of at least 1)");
        write_file("etc/main.conf", "[Sandboxes]\nMaxSandboxesPerAccount=auto\n");
        CHECK_MAIN_ERROR(2, "Invalid MaxSandboxesPerAccount=auto: not understood (expected infinity or a number of at least 1)");
        write_file("etc/main.conf", "[Sandboxes]\nMaxSandboxes=3\n");
        CHECK_MAIN_ERROR(2, "Unknown key MaxSandboxes= in section [Sandboxes]");
}

static void test_hide_paths(void) {
        SandboxdConfig c;
        _cleanup_free_ char *error = NULL;

        /* what may be hidden */
        CHECK_INT(sandboxd_hide_path_check("/srv"), 0);
        CHECK_INT(sandboxd_hide_path_check("/etc/ssl/private"), 0);
        CHECK_INT(sandboxd_hide_path_check("/var/lib/secrets"), 0);
        CHECK_INT(sandboxd_hide_path_check("/usr/share/keys"), 0);
        CHECK_INT(sandboxd_hide_path_check("/homes"), 0);       /* not /home */
        CHECK_INT(sandboxd_hide_path_check("/tmpdata"), 0);     /* not /tmp */
        CHECK_INT(sandboxd_hide_path_check("/opt/a..b"), 0);    /* dots within a name are fine */
        /* what may not */
        const char *bad[] = { "", "/", "srv", "./srv", "/srv/", "//srv", "/srv//x", "/srv/./x", "/srv/../etc",
                              "/srv/.", "/has space", "/tab\tx", "/usr", "/etc", "/var", "/home",
                              "/home/sandbox", "/home/x/y", "/tmp", "/tmp/x", "/var/tmp", "/var/tmp/x", "/dev",
                              "/dev/shm", "/proc", "/proc/1" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (sandboxd_hide_path_check(bad[i]) != -EINVAL) {
                        fprintf(stderr, "hide path check accepted '%s'\n", bad[i]);
                        failures++;
                }
        char longest[300];
        memset(longest, 'a', sizeof(longest));
        longest[0] = '/';
        longest[255] = 0;
        CHECK_INT(sandboxd_hide_path_check(longest), 0); /* 255 bytes */
        longest[255] = 'a';
        longest[256] = 0;
        CHECK_INT(sandboxd_hide_path_check(longest), -EINVAL);

        /* none by default; assignments add, across files, in order, with any whitespace between */
        reset_dir();
        sandboxd_config_defaults(&c);
        CHECK_STR(c.hide_paths, "");
        write_file("etc/main.conf", "[Manager]\nHidePaths=/srv/a   /etc/ssl/private\nHidePaths=/opt/keys\n");
        write_file("etc/conf.d/50-more.conf", "[Manager]\nHidePaths=\t/root2\n");
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), path_in("etc/conf.d"), &error) == 0);
        CHECK_STR(c.hide_paths, "/srv/a /etc/ssl/private /opt/keys /root2");

        /* a bad path: the file and line, and nothing of that assignment kept */
        write_file("etc/conf.d/50-more.conf", "[Manager]\nHidePaths=/ok /tmp/x\n");
        sandboxd_config_defaults(&c);
        CHECK_ERROR(-EINVAL, "@/etc/conf.d/50-more.conf:2: Invalid HidePaths= path /tmp/x (expected absolute, "
                             "normalized paths, not /, /usr, /etc, /var, nor /home, /tmp, /var/tmp, /dev, /proc, "
                             "what holds them or what is below them)");
        CHECK(remove(path_in("etc/conf.d/50-more.conf")) == 0);

        /* all of them together at most 4095 bytes */
        char buf[8192] = "[Manager]\n";
        for (int i = 0; i < 40; i++)
                snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "HidePaths=/p%03d/%0100d\n", i, 0);
        write_file("etc/main.conf", buf);
        CHECK_MAIN_ERROR(40, "Invalid HidePaths=: more than 4095 bytes of paths in all"); /* the 39th */
}

static void test_errors(void) {
        reset_dir();

        /* Syntax. */
        write_file("etc/main.conf", "UidMin=1\n");
        CHECK_MAIN_ERROR(1, "Assignment UidMin= before any [Section]");
        write_file("etc/main.conf", "[Manager]\n\n[Bogus]\n");
        CHECK_MAIN_ERROR(3, "Unknown section [Bogus] (expected [Manager], [Sandboxes], [Network] or "
                            "[Type:<name>])");
        write_file("etc/main.conf", "[manager]\n");
        CHECK_MAIN_ERROR(1, "Unknown section [manager] (expected [Manager], [Sandboxes], [Network] or "
                            "[Type:<name>])");
        write_file("etc/main.conf", "[Manager\n");
        CHECK_MAIN_ERROR(1, "Section header without closing ']': [Manager");
        write_file("etc/main.conf", "[Manager]\nUidMin\n");
        CHECK_MAIN_ERROR(2, "Expected Key=Value, a [Section] or a comment: UidMin");
        write_file("etc/main.conf", "[Manager]\n=5\n");
        CHECK_MAIN_ERROR(2, "Assignment without a key");
        write_file("etc/main.conf", "[Manager]\nOutputMax=   # nothing\n");
        CHECK_MAIN_ERROR(2, "Empty value for OutputMax=");
        write_file("etc/main.conf", "[Manager]\nOutputmax=1M\n");
        CHECK_MAIN_ERROR(2, "Unknown key Outputmax= in section [Manager]");
        write_file("etc/main.conf", "[Manager]\nAudit=maybe\n");
        CHECK_MAIN_ERROR(2, "Invalid Audit=maybe: not understood (expected yes or no)");
        write_file("etc/main.conf", "[Manager]\nMemoryMax=1G\n");
        CHECK_MAIN_ERROR(2, "Unknown key MemoryMax= in section [Manager]");
        write_file("etc/main.conf", "[Type:small]\nUidMin=1\n");
        CHECK_MAIN_ERROR(2, "Unknown key UidMin= in section [Type:small]");
        write_file("etc/main.conf", "[Type:.hidden]\n");
        CHECK_MAIN_ERROR(1, "Invalid type name '.hidden' (1..64 of A-Z a-z 0-9 . _ -, not starting with "
                            ". or -)");
        write_file("etc/main.conf", "[Type:]\n");
        CHECK_MAIN_ERROR(1, "Invalid type name '' (1..64 of A-Z a-z 0-9 . _ -, not starting with . or -)");

        /* Values. */
        write_file("etc/main.conf", "[Manager]\nUidMin=-1\n");
        CHECK_MAIN_ERROR(2, "Invalid UidMin=-1: not understood (expected a uid below 4294967295)");
        write_file("etc/main.conf", "[Manager]\nUidMax=4294967295\n");
        CHECK_MAIN_ERROR(2, "Invalid UidMax=4294967295: out of range (expected a uid below 4294967295)");
        write_file("etc/main.conf", "[Manager]\nOutputMax=1MB\n");
        CHECK_MAIN_ERROR(2, "Invalid OutputMax=1MB: not understood (expected a size such as 1048576, "
                            "64K, 1M, 1G)");
        write_file("etc/main.conf", "[Manager]\nFileMax=16E\n");
        CHECK_MAIN_ERROR(2, "Invalid FileMax=16E: out of range (expected a size such as 1048576, 64K, "
                            "1M, 1G)");
        write_file("etc/main.conf", "[Manager]\nMaxSandboxes=0\n");
        CHECK_MAIN_ERROR(2, "Invalid MaxSandboxes=0: out of range (expected a number of at least 1)");
        write_file("etc/main.conf", "[Manager]\nMaxTTLSec=forever\n");
        CHECK_MAIN_ERROR(2, "Invalid MaxTTLSec=forever: not understood (expected a non-zero time such as "
                            "3600, 1h, 7d)");
        write_file("etc/main.conf", "[Manager]\nDefaultType=no/slash\n");
        CHECK_MAIN_ERROR(2, "Invalid DefaultType=no/slash: not understood (expected a type name)");
        write_file("etc/main.conf", "[Type:small]\nCPUQuota=100\n");
        CHECK_MAIN_ERROR(2, "Invalid CPUQuota=100: not understood (expected 1%..10000%, 100% being one "
                            "CPU)");
        write_file("etc/main.conf", "[Type:small]\nCPUQuota=0%\n");
        CHECK_MAIN_ERROR(2, "Invalid CPUQuota=0%: out of range (expected 1%..10000%, 100% being one CPU)");
        write_file("etc/main.conf", "[Type:small]\nMemoryMax=0\n");
        CHECK_MAIN_ERROR(2, "Invalid MemoryMax=0: out of range (expected a non-zero size such as 512M, 1G)");
        write_file("etc/main.conf", "[Type:small]\nTasksMax=1K\n");
        CHECK_MAIN_ERROR(2, "Invalid TasksMax=1K: not understood (expected a number of at least 1)");
        write_file("etc/main.conf", "[Type:small]\nDiskMax=15M\n");
        CHECK_MAIN_ERROR(2, "Invalid DiskMax=15M: out of range (expected a size of at least 16M such as 4G, or "
                            "infinity)");
        write_file("etc/main.conf", "[Type:small]\nDiskMax=0\n");
        CHECK_MAIN_ERROR(2, "Invalid DiskMax=0: out of range (expected a size of at least 16M such as 4G, or "
                            "infinity)");
        write_file("etc/main.conf", "[Type:small]\nDiskMax=lots\n");
        CHECK_MAIN_ERROR(2, "Invalid DiskMax=lots: not understood (expected a size of at least 16M such as 4G, "
                            "or infinity)");
        write_file("etc/main.conf", "[Type:small]\nPoolSize=65\n");
        CHECK_MAIN_ERROR(2, "Invalid PoolSize=65: out of range (expected a number from 0 to 64)");
        write_file("etc/main.conf", "[Type:small]\nDefaultTimeoutSec=0\n");
        CHECK_MAIN_ERROR(2, "Invalid DefaultTimeoutSec=0: out of range (expected a non-zero time such as "
                            "20, 5min, 1h)");

        /* The result as a whole. */
        write_file("etc/main.conf", "[Manager]\nUidMin=1879113728\n");
        CHECK_MAIN_ERROR(2, "UidMin=1879113728 is greater than UidMax=1879113727");
        write_file("etc/main.conf", "[Manager]\nUidMin=0\nUidMax=1000\nMaxSandboxes=10\n");
        CHECK_MAIN_ERROR(3, "UidMin=0..UidMax=1000 includes the reserved uid 0");
        write_file("etc/main.conf", "[Manager]\nUidMax=70000\nUidMin=60000\n");
        CHECK_MAIN_ERROR(3, "UidMin=60000..UidMax=70000 includes the reserved uid 65534");
        write_file("etc/main.conf", "[Manager]\nUidMin=65535\nUidMax=65535\nMaxSandboxes=1\n");
        CHECK_MAIN_ERROR(3, "UidMin=65535..UidMax=65535 includes the reserved uid 65535");
        write_file("etc/main.conf", "[Manager]\nUidMin=65536\nUidMax=66000\n");
        CHECK_MAIN_ERROR(3, "MaxSandboxes=4096 exceeds the 465 uids in UidMin=..UidMax=");
        write_file("etc/main.conf", "[Manager]\nDefaultTTLSec=8d\n");
        CHECK_MAIN_ERROR(2, "DefaultTTLSec= is greater than MaxTTLSec=");
        write_file("etc/main.conf", "[Manager]\nDefaultType=huge\n");
        CHECK_MAIN_ERROR(2, "DefaultType=huge names no defined type");
        write_file("etc/main.conf", "[Type:large]\nDefaultTimeoutSec=2d\n");
        CHECK_MAIN_ERROR(2, "DefaultTimeoutSec= is greater than MaxTimeoutSec= in [Type:large]");

        /* A range fixed up by a later drop-in is fine; a bad one is reported where it was last touched. */
        write_file("etc/main.conf", "[Manager]\nUidMin=1879113728\n");
        write_file("etc/conf.d/50-range.conf", "# widen\n[Manager]\nUidMax=1879179263\n");
        CHECK_ERROR(0, NULL);
        write_file("etc/conf.d/50-range.conf", "# narrow\n[Manager]\nUidMax=1879113700\n");
        CHECK_ERROR(-EINVAL, "@/etc/conf.d/50-range.conf:3: UidMin=1879113728 is greater than "
                             "UidMax=1879113700");
        CHECK(remove(path_in("etc/conf.d/50-range.conf")) == 0);

        /* An error in a drop-in names the drop-in; the main file is fine. */
        write_file("etc/main.conf", "[Manager]\n");
        write_file("etc/conf.d/20-bad.conf", "[Manager]\nMaxSandboxes=lots\n");
        CHECK_ERROR(-EINVAL, "@/etc/conf.d/20-bad.conf:2: Invalid MaxSandboxes=lots: not understood "
                             "(expected a number of at least 1)");
        CHECK(remove(path_in("etc/conf.d/20-bad.conf")) == 0);

        /* NUL bytes. */
        FILE *f = fopen(path_in("etc/main.conf"), "we");
        CHECK(f);
        if (f) {
                fwrite("[Manager]\nUidMin=1\0x\n", 1, 21, f);
                fclose(f);
                CHECK_MAIN_ERROR(2, "Line contains a NUL byte");
        }

        /* A main "file" that is a directory is reported, not skipped. */
        CHECK(remove(path_in("etc/main.conf")) == 0);
        CHECK(mkdir(path_in("etc/main.conf"), 0755) == 0);
        CHECK_ERROR(-EISDIR, "@/etc/main.conf: cannot read: Is a directory");
}

/* Issue 21: ShellIdleSec= per type. */
static void test_shell_idle(void) {
        SandboxdConfig c;
        const SandboxType *t;

        sandboxd_config_defaults(&c);
        for (size_t i = 0; i < c.n_types; i++)
                CHECK_U64(c.types[i].shell_idle_usec, 30 * USEC_PER_MINUTE);

        reset_dir();
        write_file("etc/main.conf", "[Type:small]\nShellIdleSec=90s\n[Type:quiet]\n[Type:large]\n"
                                    "ShellIdleSec=infinity\n");
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), NULL, NULL) == 0);
        t = sandboxd_config_find_type(&c, "small");
        CHECK(t && t->shell_idle_usec == 90 * USEC_PER_SEC);
        t = sandboxd_config_find_type(&c, "quiet"); /* a new type starts from the built-in small's values */
        CHECK(t && t->shell_idle_usec == 30 * USEC_PER_MINUTE);
        t = sandboxd_config_find_type(&c, "large");
        CHECK(t && t->shell_idle_usec == 0);

        write_file("etc/main.conf", "[Type:small]\nShellIdleSec=0\n");
        CHECK_MAIN_ERROR(2, "Invalid ShellIdleSec=0: out of range (expected a time from 1s to 7d such as "
                            "30min, or infinity)");
        write_file("etc/main.conf", "[Type:small]\nShellIdleSec=8d\n");
        CHECK_MAIN_ERROR(2, "Invalid ShellIdleSec=8d: out of range (expected a time from 1s to 7d such as "
                            "30min, or infinity)");
        write_file("etc/main.conf", "[Type:small]\nShellIdleSec=soon\n");
        CHECK_MAIN_ERROR(2, "Invalid ShellIdleSec=soon: not understood (expected a time from 1s to 7d "
                            "such as 30min, or infinity)");
}

/* Issue 26: IdlePauseSec= and AutoResume= per type. */
static void test_idle_pause(void) {
        SandboxdConfig c;
        const SandboxType *t;

        sandboxd_config_defaults(&c);
        for (size_t i = 0; i < c.n_types; i++) {
                CHECK_U64(c.types[i].idle_pause_usec, 0);
                CHECK(!c.types[i].auto_resume);
        }

        reset_dir();
        write_file("etc/main.conf", "[Type:small]\nIdlePauseSec=10min\nAutoResume=yes\n[Type:lazy]\n"
                                    "IdlePauseSec=2s\n[Type:large]\nIdlePauseSec=infinity\nAutoResume=off\n");
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), NULL, NULL) == 0);
        t = sandboxd_config_find_type(&c, "small");
        CHECK(t && t->idle_pause_usec == 10 * USEC_PER_MINUTE && t->auto_resume);
        t = sandboxd_config_find_type(&c, "lazy");
        CHECK(t && t->idle_pause_usec == 2 * USEC_PER_SEC && !t->auto_resume);
        t = sandboxd_config_find_type(&c, "large");
        CHECK(t && t->idle_pause_usec == 0 && !t->auto_resume);

        write_file("etc/main.conf", "[Type:small]\nIdlePauseSec=0\n");
        CHECK_MAIN_ERROR(2, "Invalid IdlePauseSec=0: out of range (expected a time from 1s to 30d such as "
                            "10min, or infinity)");
        write_file("etc/main.conf", "[Type:small]\nIdlePauseSec=31d\n");
        CHECK_MAIN_ERROR(2, "Invalid IdlePauseSec=31d: out of range (expected a time from 1s to 30d such as "
                            "10min, or infinity)");
        write_file("etc/main.conf", "[Type:small]\nAutoResume=maybe\n");
        CHECK_MAIN_ERROR(2, "Invalid AutoResume=maybe: not understood (expected yes or no)");

        /* and the snapshots' store */
        sandboxd_config_defaults(&c);
        CHECK_U64(c.snapshot_store_max, 0);
        write_file("etc/main.conf", "[Manager]\nSnapshotStoreMax=20G\n");
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), NULL, NULL) == 0);
        CHECK_U64(c.snapshot_store_max, UINT64_C(20) << 30);
        write_file("etc/main.conf", "[Manager]\nSnapshotStoreMax=infinity\n");
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), NULL, NULL) == 0);
        CHECK_U64(c.snapshot_store_max, 0);
        write_file("etc/main.conf", "[Manager]\nSnapshotStoreMax=0\n");
        CHECK_MAIN_ERROR(2, "Invalid SnapshotStoreMax=0: out of range (expected a size such as 20G, or infinity)");
}

/* Issue 25: ProcessOutputMax= per type. */
static void test_process_output_max(void) {
        SandboxdConfig c;
        const SandboxType *t;

        sandboxd_config_defaults(&c);
        for (size_t i = 0; i < c.n_types; i++)
                CHECK_U64(c.types[i].process_output_max, 1024 * 1024);

        reset_dir();
        write_file("etc/main.conf", "[Type:small]\nProcessOutputMax=64K\n[Type:quiet]\n");
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), NULL, NULL) == 0);
        t = sandboxd_config_find_type(&c, "small");
        CHECK(t && t->process_output_max == 64 * 1024);
        t = sandboxd_config_find_type(&c, "quiet");
        CHECK(t && t->process_output_max == 1024 * 1024);

        write_file("etc/main.conf", "[Type:small]\nProcessOutputMax=1K\n");
        CHECK_MAIN_ERROR(2, "Invalid ProcessOutputMax=1K: out of range (expected a size from 4K to 16M such as "
                            "1M)");
        write_file("etc/main.conf", "[Type:small]\nProcessOutputMax=17M\n");
        CHECK_MAIN_ERROR(2, "Invalid ProcessOutputMax=17M: out of range (expected a size from 4K to 16M such "
                            "as 1M)");
}

/* Issue 24: Image=, host by default, a name, and the disk it needs. */
static void test_image(void) {
        SandboxdConfig c;
        const SandboxType *t;

        sandboxd_config_defaults(&c);
        for (size_t i = 0; i < c.n_types; i++)
                CHECK_STR(c.types[i].image, "");

        reset_dir();
        write_file("etc/main.conf", "[Type:small]\nImage=py312\n[Type:img]\nImage=node-20\nDiskMax=1G\n"
                                    "[Type:medium]\nImage=py312\nImage=host\n");
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), NULL, NULL) == 0);
        t = sandboxd_config_find_type(&c, "small");
        CHECK(t && streq(t->image, "py312"));
        t = sandboxd_config_find_type(&c, "img");
        CHECK(t && streq(t->image, "node-20"));
        t = sandboxd_config_find_type(&c, "medium");
        CHECK(t && streq(t->image, "")); /* the last assignment wins: host */

        write_file("etc/main.conf", "[Type:small]\nImage=../etc\n");
        CHECK_MAIN_ERROR(2, "Invalid Image=../etc: not understood (expected host, or an image's name)");
        write_file("etc/main.conf", "[Type:small]\nImage=py312\nDiskMax=infinity\n");
        CHECK_MAIN_ERROR(2, "Image=py312 in [Type:small] needs a DiskMax= other than infinity");
        sandboxd_config_defaults(&c);
}

static void test_network(void) {
        SandboxdConfig c;
        const SandboxType *t;
        char buf[EGRESS_ENTRY_TEXT_MAX];

        /* defaults: the documented pool, no host network, every type network none with no policy */
        sandboxd_config_defaults(&c);
        CHECK_INT(c.network.pool.family, AF_INET);
        CHECK_INT((int) c.network.pool.prefixlen, 16);
        CHECK(c.network.pool.addr[0] == 10 && c.network.pool.addr[1] == 237 && c.network.pool.addr[2] == 0);
        EgressCidr def;
        CHECK(egress_cidr_parse(SANDBOXD_NETWORK_POOL_DEFAULT, &def, NULL) == 0);
        CHECK(memcmp(&def, &c.network.pool, sizeof(def)) == 0);
        CHECK(!c.network.allow_host_network);
        for (size_t i = 0; i < c.n_types; i++) {
                CHECK_INT(c.types[i].network, SANDBOX_NETWORK_NONE);
                CHECK(!c.types[i].egress);
        }

        /* the string table round-trips */
        for (SandboxNetwork n = 0; n < _SANDBOX_NETWORK_MAX; n++)
                CHECK_INT(sandbox_network_from_string(sandbox_network_to_string(n)), n);
        CHECK_INT(sandbox_network_from_string("bridge"), -EINVAL);

        /* the keys, a policy across files (each assignment adds), a new type with its own */
        reset_dir();
        write_file("etc/main.conf", "[Network]\nPool=192.168.240.0/20\nAllowHostNetwork=yes\n"
                                    "[Type:small]\nNetwork=egress\nEgressAllow=pypi.org  *.pythonhosted.org\n"
                                    "[Type:open]\nNetwork=host\n");
        write_file("etc/conf.d/50-more.conf", "[Type:small]\nEgressAllow=203.0.113.0/24\nEgressDeny=bad.pypi.org\n"
                                              "[Type:web]\nNetwork=egress\nEgress=allow\nEgressDeny=10.0.0.0/8\n");
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), path_in("etc/conf.d"), NULL) == 0);
        CHECK(c.network.allow_host_network);
        CHECK(c.network.pool.addr[0] == 192 && c.network.pool.addr[1] == 168 && c.network.pool.addr[2] == 240 &&
              c.network.pool.prefixlen == 20);
        t = sandboxd_config_find_type(&c, "small");
        CHECK(t && t->network == SANDBOX_NETWORK_EGRESS && t->egress);
        if (t && t->egress) {
                CHECK_INT(t->egress->default_action, EGRESS_DEFAULT_DENY);
                CHECK_INT((int) t->egress->n_allow, 3);
                CHECK_INT((int) t->egress->n_deny, 1);
                if (t->egress->n_allow == 3) {
                        CHECK_STR(egress_entry_to_string(&t->egress->allow[1], buf), "*.pythonhosted.org");
                        CHECK_STR(egress_entry_to_string(&t->egress->allow[2], buf), "203.0.113.0/24");
                }
        }
        t = sandboxd_config_find_type(&c, "open");
        CHECK(t && t->network == SANDBOX_NETWORK_HOST && !t->egress);
        t = sandboxd_config_find_type(&c, "web");
        CHECK(t && t->network == SANDBOX_NETWORK_EGRESS && t->egress &&
              t->egress->default_action == EGRESS_DEFAULT_ALLOW && t->egress->n_deny == 1);
        t = sandboxd_config_find_type(&c, "medium");
        CHECK(t && t->network == SANDBOX_NETWORK_NONE && !t->egress);

        /* a second load over a loaded config: the policies are copied, added to, the old ones freed */
        write_file("etc/main.conf", "[Type:small]\nEgressAllow=example.org\n");
        CHECK(remove(path_in("etc/conf.d/50-more.conf")) == 0);
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), NULL, NULL) == 0);
        t = sandboxd_config_find_type(&c, "small");
        CHECK(t && t->egress && t->egress->n_allow == 4);

        /* a failed load over it changes nothing (the same pointers, the same entries) */
        SandboxdConfig before = c;
        write_file("etc/main.conf", "[Type:small]\nEgressAllow=more.example.org\nEgressAllow=10.0.0.1/8\n");
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), NULL, NULL) == -EINVAL);
        CHECK(memcmp(&c, &before, sizeof(c)) == 0);
        t = sandboxd_config_find_type(&c, "small");
        CHECK(t && t->egress && t->egress->n_allow == 4);
        sandboxd_config_done(&c);
        sandboxd_config_done(NULL);

        /* errors, each at its line */
        reset_dir();
        write_file("etc/main.conf", "[Network]\nPool=10.0.0.1/8\n");
        CHECK_MAIN_ERROR(2, "Invalid Pool=10.0.0.1/8: host bits are set (did you mean 10.0.0.0/8?).");
        write_file("etc/main.conf", "[Network]\nPool=pool.example.org\n");
        CHECK_MAIN_ERROR(2, "Invalid Pool=pool.example.org: not an IPv4 or IPv6 address or CIDR.");
        write_file("etc/main.conf", "[Network]\nPool=fd00::/64\n");
        CHECK_MAIN_ERROR(2, "Invalid Pool=fd00::/64: IPv6 is not supported yet (expected an IPv4 CIDR such as "
                            "10.237.0.0/16)");
        write_file("etc/main.conf", "[Network]\nPool=10.0.0.0/7\n");
        CHECK_MAIN_ERROR(2, "Invalid Pool=10.0.0.0/7: the prefix must be /8../28 (a /30 per egress sandbox)");
        write_file("etc/main.conf", "[Network]\nPool=10.0.0.0/29\n");
        CHECK_MAIN_ERROR(2, "Invalid Pool=10.0.0.0/29: the prefix must be /8../28 (a /30 per egress sandbox)");
        write_file("etc/main.conf", "[Network]\nPool=10.1.2.0/28\nPool=10.0.0.0/8\nAllowHostNetwork=maybe\n");
        CHECK_MAIN_ERROR(4, "Invalid AllowHostNetwork=maybe: not understood (expected yes or no)");
        write_file("etc/main.conf", "[Network]\nBridge=br0\n");
        CHECK_MAIN_ERROR(2, "Unknown key Bridge= in section [Network]");
        write_file("etc/main.conf", "[Type:small]\nNetwork=bridge\n");
        CHECK_MAIN_ERROR(2, "Invalid Network=bridge: not understood (expected none, egress or host)");
        write_file("etc/main.conf", "[Type:small]\nEgress=maybe\n");
        CHECK_MAIN_ERROR(2, "Invalid Egress=maybe: expected deny or allow.");
        write_file("etc/main.conf", "[Type:small]\nEgressAllow=pypi.org\nEgressDeny=pypi.org:443\n");
        CHECK_MAIN_ERROR(3, "Invalid EgressDeny=: Invalid egress entry 'pypi.org:443': not a CIDR; ports, "
                            "protocols and paths are not supported (give a name, \"*.\" and a name, or a CIDR).");
        /* EgressRateMax=: bytes per second, or infinity (the default: no limit) */
        write_file("etc/main.conf", "[Type:small]\nEgressRateMax=1023\n");
        CHECK_MAIN_ERROR(2, "Invalid EgressRateMax=1023: out of range (expected bytes per second from 1K to 4G "
                            "such as 10M, or infinity)");
        write_file("etc/main.conf", "[Type:small]\nEgressRateMax=5G\n");
        CHECK_MAIN_ERROR(2, "Invalid EgressRateMax=5G: out of range (expected bytes per second from 1K to 4G "
                            "such as 10M, or infinity)");
        write_file("etc/main.conf", "[Type:small]\nEgressRateMax=fast\n");
        CHECK_MAIN_ERROR(2, "Invalid EgressRateMax=fast: not understood (expected bytes per second from 1K to "
                            "4G such as 10M, or infinity)");
        write_file("etc/main.conf", "[Type:small]\nEgressRateMax=10M\n[Type:medium]\nEgressRateMax=1K\n"
                                    "EgressRateMax=infinity\n");
        sandboxd_config_defaults(&c);
        CHECK_U64(c.types[0].egress_rate_max, 0);
        CHECK(sandboxd_config_load(&c, path_in("etc/main.conf"), NULL, NULL) == 0);
        t = sandboxd_config_find_type(&c, "small");
        CHECK(t && t->egress_rate_max == 10 * 1024 * 1024);
        t = sandboxd_config_find_type(&c, "medium");
        CHECK(t && t->egress_rate_max == 0);
        sandboxd_config_done(&c);
        /* host without AllowHostNetwork=yes: at the later of the two lines */
        write_file("etc/main.conf", "[Type:small]\nNetwork=host\n");
        CHECK_MAIN_ERROR(2, "Network=host in [Type:small] needs AllowHostNetwork=yes in [Network]");
        write_file("etc/main.conf", "[Network]\nAllowHostNetwork=yes\n[Type:small]\nNetwork=host\n");
        write_file("etc/conf.d/90-off.conf", "[Network]\nAllowHostNetwork=no\n");
        CHECK_ERROR(-EINVAL, "@/etc/conf.d/90-off.conf:2: Network=host in [Type:small] needs "
                             "AllowHostNetwork=yes in [Network]");
        CHECK(remove(path_in("etc/conf.d/90-off.conf")) == 0);
        CHECK_ERROR(0, NULL);
}

int main(void) {
        test_mkdtemp(tmpdir);

        test_defaults();
        test_shell_idle();
        test_idle_pause();
        test_process_output_max();
        test_documented_example();
        test_dropins();
        test_type_limit();
        test_audit_switch();
        test_sandboxes_totals();
        test_hide_paths();
        test_errors();
        test_network();
        test_image();

        test_rm_rf(tmpdir);

        return test_finish("test-sandboxd-config");
}
