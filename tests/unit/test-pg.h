/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A scratch PostgreSQL for unit tests of the stores that may live there: Debian's server binaries, a
 * directory under /var/tmp, a Unix socket only, as nobody when the test runs as root (initdb refuses root).
 */
#pragma once

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "test-util.h"

#define TEST_PG_BIN "/usr/lib/postgresql/15/bin"

typedef struct TestPg {
        /* Not under /tmp: it may be 0700 root's. */
        char dir[64];
        char url[256];
} TestPg;

static inline int test_pg_sh(const char *fmt, ...) _printf_(1, 2);
static inline int test_pg_sh(const char *fmt, ...) {
        _cleanup_free_ char *cmd = NULL, *full = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&cmd, fmt, ap);
        va_end(ap);
        if (r < 0)
                abort();
        if (asprintf(&full, "%s sh -c '%s'",
                     geteuid() == 0 ? "setpriv --reuid=nobody --regid=nogroup --clear-groups --" : "",
                     cmd) < 0)
                abort();
        r = system(full);
        return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

static inline bool test_pg_available(void) {
        struct stat st;
        return stat(TEST_PG_BIN "/initdb", &st) == 0;
}

static inline int test_pg_start(TestPg *p) {
        return test_pg_sh(TEST_PG_BIN
                          "/pg_ctl -D %s/data -o \"-k %s -c listen_addresses= -c fsync=off\" -l %s/log "
                          "-w start >/dev/null",
                          p->dir, p->dir, p->dir);
}

static inline int test_pg_stop(TestPg *p) {
        return test_pg_sh(TEST_PG_BIN "/pg_ctl -D %s/data -m fast -w stop >/dev/null", p->dir);
}

/* A fresh server in a fresh directory, started; its URI in p->url. Ends the test if it cannot start. */
static inline void test_pg_init(TestPg *p, const char *name) {
        snprintf(p->dir, sizeof(p->dir), "/var/tmp/%s.XXXXXX", name);
        if (!mkdtemp(p->dir) || chmod(p->dir, 0755) < 0 ||
            (geteuid() == 0 && chown(p->dir, 65534, 65534) < 0) ||
            test_pg_sh(TEST_PG_BIN "/initdb -D %s/data --auth=trust -U sbx --no-sync -E UTF8 >/dev/null",
                       p->dir) != 0 ||
            test_pg_start(p) != 0) {
                fprintf(stderr, "Cannot start PostgreSQL in %s (its log: %s/log)\n", p->dir, p->dir);
                exit(EXIT_FAILURE);
        }
        snprintf(p->url, sizeof(p->url), "postgresql:///postgres?host=%s&user=sbx", p->dir);
}

/* Runs one SQL statement with psql as the server's user; its output (one line, trimmed) into out. */
static inline int test_pg_sql(TestPg *p, const char *sql, char *out, size_t size) {
        _cleanup_free_ char *cmd = NULL;
        FILE *f;

        if (asprintf(&cmd, "%s psql -qAt -h %s -U sbx postgres -c \"%s\"",
                     geteuid() == 0 ? "setpriv --reuid=nobody --regid=nogroup --clear-groups --" : "",
                     p->dir, sql) < 0)
                abort();
        f = popen(cmd, "re");
        if (!f)
                return -errno;
        if (!fgets(out, (int) size, f))
                out[0] = 0;
        out[strcspn(out, "\n")] = 0;
        return pclose(f) == 0 ? 0 : -EIO;
}

static inline void test_pg_done(TestPg *p) {
        (void) test_pg_stop(p);
        test_rm_rf(p->dir);
}
