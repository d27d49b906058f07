/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for audit-config: defaults, the shipped file, drop-in order, and every error path. */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "audit-config.h"
#include "macro.h"
#include "time-util.h"
#include "test-util.h"

static char tmpdir[] = "/tmp/test-audit-config.XXXXXX";

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

static void reset_dir(void) {
        test_rm_rf(path_in("etc"));
        if (mkdir(path_in("etc"), 0755) < 0 || mkdir(path_in("etc/conf.d"), 0755) < 0) {
                perror("mkdir");
                exit(EXIT_FAILURE);
        }
}

static int load(AuditConfig *c, char **error) {
        audit_config_defaults(c);
        return audit_config_load(c, path_in("etc/main.conf"), path_in("etc/conf.d"), error);
}

/* main.conf with content fails with -EINVAL and "<main.conf>:line: msg", leaving the config alone. */
static void check_error_at(int at, const char *content, const char *expected_tail) {
        AuditConfig c, before;
        _cleanup_free_ char *error = NULL;
        char expected[512];

        reset_dir();
        write_file("etc/main.conf", content);
        audit_config_defaults(&c);
        c.max_rows = 7; /* not the default: a failed load must leave exactly this */
        before = c;
        int r = audit_config_load(&c, path_in("etc/main.conf"), path_in("etc/conf.d"), &error);
        snprintf(expected, sizeof(expected), "%s:%s", path_in("etc/main.conf"), expected_tail);
        if (r != -EINVAL || !streq_ptr(error, expected)) {
                fprintf(stderr, "%s:%d: load returned %d \"%s\"\n    expected -EINVAL \"%s\"\n", __FILE__,
                        at, r, strna(error), expected);
                failures++;
        }
        if (memcmp(&c, &before, sizeof(c)) != 0) {
                fprintf(stderr, "%s:%d: config changed by a failed load\n", __FILE__, at);
                failures++;
        }
        CHECK(audit_config_load(&c, path_in("etc/main.conf"), path_in("etc/conf.d"), NULL) == -EINVAL);
}
#define CHECK_ERROR(content, msg) check_error_at(__LINE__, (content), (msg))

/* field by field: the struct has padding after its bool */
static bool config_eq(const AuditConfig *a, const AuditConfig *b) {
        return a->max_age_usec == b->max_age_usec && a->max_rows == b->max_rows &&
               a->output_max == b->output_max && a->detail_max == b->detail_max &&
               a->journal_rows == b->journal_rows && a->checkpoint_rows == b->checkpoint_rows &&
               a->checkpoint_interval_usec == b->checkpoint_interval_usec;
}

static void test_defaults(void) {
        AuditConfig c, d;
        char *error = (char *) "untouched";

        audit_config_defaults(&c);
        CHECK_U64(c.max_age_usec, 90 * USEC_PER_DAY);
        CHECK_U64(c.max_rows, 10000000);
        CHECK_U64(c.output_max, 1 << 20);
        CHECK_U64(c.detail_max, 4096);
        CHECK(!c.journal_rows);
        CHECK_U64(c.checkpoint_rows, 1000);
        CHECK_U64(c.checkpoint_interval_usec, 5 * USEC_PER_MINUTE);

        d = c;
        CHECK(audit_config_load(&d, path_in("nonexistent.conf"), path_in("nonexistent.d"), &error) == 0);
        CHECK(config_eq(&c, &d));
        CHECK(streq(error, "untouched"));
        CHECK(audit_config_load(&d, NULL, NULL, NULL) == 0);
        CHECK(config_eq(&c, &d));
        CHECK(audit_config_load(NULL, NULL, NULL, NULL) == -EINVAL);
}

/* units/sandbox-auditd.conf, the file we install: all comments, so the defaults; uncommented, the
 * same values. */
static void test_shipped_file(void) {
        AuditConfig c, defaults;
        _cleanup_free_ char *error = NULL, *uncommented = NULL;
        char path[1024], *buf = NULL;
        size_t size = 0;

        /* __FILE__ is absolute, or relative to the build directory the compiler (and the test) run in */
        const char *self = __FILE__, *tests = strstr(self, "tests/unit/");
        snprintf(path, sizeof(path), "%.*sunits/sandbox-auditd.conf", (int) (tests - self), self);
        FILE *f = fopen(path, "re");
        CHECK(f);
        if (!f)
                return;
        FILE *m = open_memstream(&buf, &size);
        char line[1024];
        while (fgets(line, sizeof(line), f)) {
                bool setting = line[0] == '#' && (line[1] == '[' || (line[1] >= 'A' && line[1] <= 'Z'));
                fputs(setting ? line + 1 : line, m);
        }
        fclose(f);
        fclose(m);
        uncommented = buf;

        audit_config_defaults(&defaults);
        reset_dir();
        audit_config_defaults(&c);
        CHECK(audit_config_load(&c, path, NULL, &error) == 0);
        CHECK(config_eq(&c, &defaults));
        write_file("etc/main.conf", uncommented);
        CHECK(strstr(uncommented, "\n[Log]\n") && strstr(uncommented, "\nMaxRows="));
        CHECK(load(&c, &error) == 0);
        if (error)
                fprintf(stderr, "%s\n", error);
        CHECK(config_eq(&c, &defaults));
}

static void test_values(void) {
        AuditConfig c;
        _cleanup_free_ char *error = NULL;

        reset_dir();
        write_file("etc/main.conf",
                   "; a comment\r\n"
                   "   # an indented comment\n"
                   "\t\n"
                   "[Log]\n"
                   "  MaxAgeSec =  7d 12h \n"
                   "MaxRows\t=\t5000\r\n"
                   "OutputMax=64K ; inline\n"
                   "DetailMax=512 # inline\n");
        CHECK(load(&c, &error) == 0);
        CHECK(!error);
        CHECK_U64(c.max_age_usec, 7 * USEC_PER_DAY + 12 * USEC_PER_HOUR);
        CHECK_U64(c.max_rows, 5000);
        CHECK_U64(c.output_max, 64 << 10);
        CHECK_U64(c.detail_max, 512);

        /* 0 switches retention off; the bounds are accepted */
        write_file("etc/main.conf", "[Log]\nMaxAgeSec=0\nMaxRows=0\nOutputMax=15M\nDetailMax=64K\n");
        CHECK(load(&c, &error) == 0);
        CHECK_U64(c.max_age_usec, 0);
        CHECK_U64(c.max_rows, 0);
        CHECK_U64(c.output_max, 15 << 20);
        CHECK_U64(c.detail_max, 64 << 10);
        write_file("etc/main.conf", "[Log]\nOutputMax=1\nDetailMax=256\n[Log]\nMaxAgeSec=90\n");
        CHECK(load(&c, &error) == 0);
        CHECK_U64(c.output_max, 1);
        CHECK_U64(c.detail_max, 256);
        CHECK_U64(c.max_age_usec, 90 * USEC_PER_SEC);

        write_file("etc/main.conf", "[Journal]\nRows=yes\nCheckpointRows=10\nCheckpointIntervalSec=2s\n"
                                    "[Log]\nMaxRows=7\n");
        CHECK(load(&c, &error) == 0);
        CHECK(c.journal_rows);
        CHECK_U64(c.checkpoint_rows, 10);
        CHECK_U64(c.checkpoint_interval_usec, 2 * USEC_PER_SEC);
        CHECK_U64(c.max_rows, 7);
        write_file("etc/main.conf", "[Journal]\nRows=off\nCheckpointRows=0\nCheckpointIntervalSec=0\n");
        CHECK(load(&c, &error) == 0);
        CHECK(!c.journal_rows);
        CHECK_U64(c.checkpoint_rows, 0);
        CHECK_U64(c.checkpoint_interval_usec, 0);
        CHECK_STR(c.pg_url, "");
        CHECK_STR(c.pg_host, "");

        /* the copy in PostgreSQL (issue 29) */
        write_file("etc/main.conf", "[PostgreSQL]\nURL=postgresql://auditd@db.example/sandboxd\nHost=host-a\n"
                                    "[Log]\nMaxRows=8\n");
        CHECK(load(&c, &error) == 0);
        CHECK_STR(c.pg_url, "postgresql://auditd@db.example/sandboxd");
        CHECK_STR(c.pg_host, "host-a");
        CHECK_U64(c.max_rows, 8);
}

static void test_dropins(void) {
        AuditConfig c;
        _cleanup_free_ char *error = NULL;

        reset_dir();
        write_file("etc/main.conf", "[Log]\nMaxRows=100\nMaxAgeSec=1h\n");
        write_file("etc/conf.d/20-b.conf", "[Log]\nMaxRows=300\n");
        write_file("etc/conf.d/10-a.conf", "[Log]\nMaxRows=200\nDetailMax=1K\n");
        write_file("etc/conf.d/30-c.conf.disabled", "[Log]\nMaxRows=999\n");
        write_file("etc/conf.d/.hidden.conf", "[Log]\nMaxRows=998\n");
        CHECK(mkdir(path_in("etc/conf.d/40-dir.conf"), 0755) == 0); /* a directory is skipped */
        CHECK(load(&c, &error) == 0);
        CHECK(!error);
        CHECK_U64(c.max_rows, 300); /* lexical order: the last one wins */
        CHECK_U64(c.detail_max, 1024);
        CHECK_U64(c.max_age_usec, USEC_PER_HOUR);

        /* an error in a drop-in names the drop-in */
        write_file("etc/conf.d/50-bad.conf", "[Log]\n\nMaxRows=many\n");
        free(error);
        error = NULL;
        CHECK(load(&c, &error) == -EINVAL);
        char expected[512];
        snprintf(expected, sizeof(expected),
                 "%s:3: Invalid MaxRows=many: not understood (expected a number, or 0 for no limit)",
                 path_in("etc/conf.d/50-bad.conf"));
        CHECK(streq_ptr(error, expected));

        /* the main file may not be a directory */
        reset_dir();
        CHECK(mkdir(path_in("etc/main.conf"), 0755) == 0);
        free(error);
        error = NULL;
        audit_config_defaults(&c);
        CHECK(audit_config_load(&c, path_in("etc/main.conf"), NULL, &error) == -EISDIR);
        snprintf(expected, sizeof(expected), "%s: cannot read: %s", path_in("etc/main.conf"),
                 strerror(EISDIR));
        CHECK(streq_ptr(error, expected));
}

static void test_errors(void) {
        CHECK_ERROR("[Manager]\nMaxRows=1\n", "1: Unknown section [Manager] (expected [Log], [Journal] or [PostgreSQL])");
        CHECK_ERROR("[PostgreSQL]\nURL=mysql://db/x\n",
                    "2: Invalid URL=mysql://db/x: not understood (expected a PostgreSQL URI such as "
                    "postgresql://user@host/db: expected a PostgreSQL URI, postgresql://…)");
        CHECK_ERROR("[PostgreSQL]\nHost=a b\n",
                    "2: Invalid Host=a b: not understood (expected a name without spaces or control characters, "
                    "up to 255 bytes)");
        CHECK_ERROR("[PostgreSQL]\nRows=yes\n", "2: Unknown key Rows= in section [PostgreSQL]");
        CHECK_ERROR("[Journal]\nRows=maybe\n", "2: Invalid Rows=maybe: not understood (expected yes or no)");
        CHECK_ERROR("[Journal]\nMaxRows=5\n", "2: Unknown key MaxRows= in section [Journal]");
        CHECK_ERROR("[Log]\nRows=yes\n", "2: Unknown key Rows= in section [Log]");
        CHECK_ERROR("[Journal]\nCheckpointRows=many\n",
                    "2: Invalid CheckpointRows=many: not understood (expected a number of rows, or 0)");
        CHECK_ERROR("[Journal]\nCheckpointIntervalSec=soon\n",
                    "2: Invalid CheckpointIntervalSec=soon: not understood (expected a time such as 5min, or 0)");
        CHECK_ERROR("[Log\n", "1: Section header without closing ']': [Log");
        CHECK_ERROR("MaxRows=1\n", "1: Assignment MaxRows= before any [Section]");
        CHECK_ERROR("[Log]\nMaxRows\n", "2: Expected Key=Value, a [Section] or a comment: MaxRows");
        CHECK_ERROR("[Log]\n=5\n", "2: Assignment without a key");
        CHECK_ERROR("[Log]\nMaxRows=\n", "2: Empty value for MaxRows=");
        CHECK_ERROR("[Log]\nMaxRows= # nothing\n", "2: Empty value for MaxRows=");
        CHECK_ERROR("[Log]\nMaxLines=5\n", "2: Unknown key MaxLines= in section [Log]");
        CHECK_ERROR("[Log]\nmaxrows=5\n", "2: Unknown key maxrows= in section [Log]");
        CHECK_ERROR("[Log]\nMaxRows=-1\n",
                    "2: Invalid MaxRows=-1: not understood (expected a number, or 0 for no limit)");
        CHECK_ERROR("[Log]\nMaxRows=99999999999999999999\n",
                    "2: Invalid MaxRows=99999999999999999999: out of range"
                    " (expected a number, or 0 for no limit)");
        CHECK_ERROR("[Log]\nMaxAgeSec=forever\n",
                    "2: Invalid MaxAgeSec=forever: not understood"
                    " (expected a time such as 90d, 12h, or 0 to keep rows)");
        CHECK_ERROR("[Log]\nOutputMax=0\n",
                    "2: Invalid OutputMax=0: out of range (expected a size from 1 to 15M, such as 1M)");
        CHECK_ERROR("[Log]\nOutputMax=16M\n",
                    "2: Invalid OutputMax=16M: out of range (expected a size from 1 to 15M, such as 1M)");
        CHECK_ERROR("[Log]\nOutputMax=1MB\n",
                    "2: Invalid OutputMax=1MB: not understood (expected a size from 1 to 15M, such as 1M)");
        CHECK_ERROR("[Log]\nDetailMax=255\n",
                    "2: Invalid DetailMax=255: out of range (expected a size from 256 to 64K, such as 4K)");
        CHECK_ERROR("[Log]\nDetailMax=65537\n",
                    "2: Invalid DetailMax=65537: out of range"
                    " (expected a size from 256 to 64K, such as 4K)");

        /* a NUL byte in a line */
        AuditConfig c;
        _cleanup_free_ char *error = NULL;
        char expected[512];
        reset_dir();
        FILE *f = fopen(path_in("etc/main.conf"), "we");
        CHECK(f && fwrite("[Log]\nMaxRows=1\0x\n", 1, 18, f) == 18 && fclose(f) == 0);
        CHECK(load(&c, &error) == -EINVAL);
        snprintf(expected, sizeof(expected), "%s:2: Line contains a NUL byte", path_in("etc/main.conf"));
        CHECK(streq_ptr(error, expected));
}

int main(void) {
        test_mkdtemp(tmpdir);

        test_defaults();
        test_shipped_file();
        test_values();
        test_dropins();
        test_errors();

        test_rm_rf(tmpdir);
        return test_finish("test-audit-config");
}
