/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for sandbox-totals: the host read from a fake /proc, "auto" resolved, and the admission sum. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "macro.h"
#include "sandbox-totals.h"
#include "test-util.h"

static char tmpdir[] = "/tmp/test-sandbox-totals.XXXXXX";

static void put(const char *name, const char *content) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
        FILE *f = fopen(path, "we");
        if (!f || fputs(content, f) < 0 || fclose(f) != 0) {
                perror(path);
                exit(EXIT_FAILURE);
        }
}

static void fake_proc(const char *meminfo, const char *threads_max, const char *pid_max) {
        char path[512];
        snprintf(path, sizeof(path), "%s/sys", tmpdir);
        (void) mkdir(path, 0755);
        snprintf(path, sizeof(path), "%s/sys/kernel", tmpdir);
        (void) mkdir(path, 0755);
        put("meminfo", meminfo);
        put("sys/kernel/threads-max", threads_max);
        put("sys/kernel/pid_max", pid_max);
}

static void test_host_read(void) {
        HostInfo h = {};

        /* The attack host of issue 21: 23 GiB, threads-max 192739, pid_max 32768, 2 CPUs. */
        fake_proc("MemTotal:       24683756 kB\nMemFree:         1000 kB\n", "192739\n", "32768\n");
        CHECK_INT(host_info_read(tmpdir, 2, &h), 0);
        CHECK_U64(h.mem_total, UINT64_C(24683756) * 1024);
        CHECK_U64(h.threads_max, 192739);
        CHECK_U64(h.pid_max, 32768);
        CHECK_U64(h.n_cpus, 2);

        /* nproc 0 (sysconf failed) counts as one CPU */
        CHECK_INT(host_info_read(tmpdir, 0, &h), 0);
        CHECK_U64(h.n_cpus, 1);

        /* bad files: an error, and *ret untouched */
        HostInfo before = h;
        fake_proc("MemFree: 1 kB\n", "192739\n", "32768\n");
        CHECK_INT(host_info_read(tmpdir, 2, &h), -EBADMSG);
        fake_proc("MemTotal: 12 MB\n", "192739\n", "32768\n");
        CHECK_INT(host_info_read(tmpdir, 2, &h), -EBADMSG);
        fake_proc("MemTotal: 1000 kB\n", "lots\n", "32768\n");
        CHECK_INT(host_info_read(tmpdir, 2, &h), -EBADMSG);
        fake_proc("MemTotal: 1000 kB\n", "100\n", "-1\n");
        CHECK_INT(host_info_read(tmpdir, 2, &h), -EBADMSG);
        CHECK(memcmp(&h, &before, sizeof(h)) == 0);
        CHECK_INT(host_info_read("/nonexistent-proc", 2, &h), -ENOENT);
}

static void test_resolve(void) {
        const HostInfo host = { .mem_total = UINT64_C(24683756) * 1024, .threads_max = 192739,
                                .pid_max = 32768, .n_cpus = 2 };
        SandboxdConfig c;
        SandboxTotals t;

        sandboxd_config_defaults(&c);
        sandbox_totals_resolve(&c.totals, &host, &t);
        /* 80 % of 23.5 GiB in whole MiB; 75 % of pid_max (the smaller); 90 % of two CPUs */
        CHECK_U64(t.memory_max, UINT64_C(24683756) * 1024 * 80 / 100 / (1 << 20) * (1 << 20));
        CHECK_U64(t.memory_max >> 20, 19284);
        CHECK_U64(t.tasks_max, 24576);
        CHECK_U64(t.cpu_quota_percent, 180);
        CHECK_U64(t.overcommit_percent, 100);
        /* the two large sandboxes (16 GiB each) do not fit; one does */
        CHECK(t.memory_max >= UINT64_C(16) << 30 && t.memory_max < UINT64_C(32) << 30);

        /* threads-max the smaller */
        HostInfo small = { .mem_total = 1000, .threads_max = 1000, .pid_max = 4194304, .n_cpus = 1 };
        sandbox_totals_resolve(&c.totals, &small, &t);
        CHECK_U64(t.tasks_max, 750);
        CHECK_U64(t.memory_max, UINT64_C(1) << 20); /* never below 1 MiB */
        CHECK_U64(t.cpu_quota_percent, 90);

        /* what the configuration says wins over the host */
        c.totals.memory_max = UINT64_C(3) << 30;
        c.totals.tasks_max = SANDBOX_TOTAL_INFINITY;
        c.totals.cpu_quota_percent = 150;
        c.totals.overcommit_percent = 200;
        sandbox_totals_resolve(&c.totals, &host, &t);
        CHECK_U64(t.memory_max, UINT64_C(3) << 30);
        CHECK_U64(t.tasks_max, SANDBOX_TOTAL_INFINITY);
        CHECK_U64(t.cpu_quota_percent, 150);
        CHECK_U64(t.overcommit_percent, 200);
}

static void test_admit(void) {
        const uint64_t G = UINT64_C(1) << 30;
        SandboxTotals t = { .memory_max = 19284 * (UINT64_C(1) << 20), .tasks_max = 24576,
                            .cpu_quota_percent = 180, .overcommit_percent = 100 };
        SandboxPromised p = {};
        char msg[512] = "";

        /* the issue: one large (16 GiB, 4096 tasks) fits, a second does not */
        CHECK_INT(sandbox_totals_admit(&t, &p, 16 * G, 4096, msg, sizeof(msg)), 0);
        p = (SandboxPromised) { .memory = 16 * G, .tasks = 4096, .n = 1 };
        CHECK_INT(sandbox_totals_admit(&t, &p, 16 * G, 4096, msg, sizeof(msg)), -E2BIG);
        CHECK_STR(msg, "The sandboxes' memory is used up: 1 sandboxes are promised 16384 MiB, this one would "
                       "add 16384 MiB, and [Sandboxes] allows 19284 MiB (MemoryMax=19284M, Overcommit=100%).");
        /* ... but two more small ones do */
        CHECK_INT(sandbox_totals_admit(&t, &p, 2 * G, 512, msg, sizeof(msg)), 0);

        /* exactly at the bound is fine, one byte more is not */
        t.memory_max = 2 * G;
        p = (SandboxPromised) { .memory = 1 * G, .tasks = 256, .n = 1 };
        CHECK_INT(sandbox_totals_admit(&t, &p, 1 * G, 256, msg, sizeof(msg)), 0);
        CHECK_INT(sandbox_totals_admit(&t, &p, 1 * G + 1, 256, msg, sizeof(msg)), -E2BIG);

        /* overcommit multiplies both */
        t.overcommit_percent = 150;
        p = (SandboxPromised) { .memory = 2 * G, .tasks = 256, .n = 2 };
        CHECK_INT(sandbox_totals_admit(&t, &p, 1 * G, 256, msg, sizeof(msg)), 0);
        CHECK_INT(sandbox_totals_admit(&t, &p, 1 * G + 1, 256, msg, sizeof(msg)), -E2BIG);

        /* tasks */
        t = (SandboxTotals) { .memory_max = SANDBOX_TOTAL_INFINITY, .tasks_max = 600, .overcommit_percent = 100 };
        p = (SandboxPromised) { .memory = 100 * G, .tasks = 512, .n = 2 };
        CHECK_INT(sandbox_totals_admit(&t, &p, 1 * G, 88, msg, sizeof(msg)), 0);
        CHECK_INT(sandbox_totals_admit(&t, &p, 1 * G, 89, msg, sizeof(msg)), -E2BIG);
        CHECK_STR(msg, "The sandboxes' tasks are used up: 2 sandboxes are promised 512 tasks, this one would add "
                       "89, and [Sandboxes] allows 600 (TasksMax=600, Overcommit=100%).");

        /* no overflow at the edges */
        t = (SandboxTotals) { .memory_max = UINT64_MAX - 1, .tasks_max = SANDBOX_TOTAL_INFINITY,
                              .overcommit_percent = 10000 };
        p = (SandboxPromised) { .memory = UINT64_MAX - 10, .tasks = UINT64_MAX, .n = 1 };
        CHECK_INT(sandbox_totals_admit(&t, &p, 5, UINT64_MAX, msg, sizeof(msg)), 0);
        t.overcommit_percent = 100;
        CHECK_INT(sandbox_totals_admit(&t, &p, 100, 1, msg, sizeof(msg)), -E2BIG);
}

int main(void) {
        test_mkdtemp(tmpdir);

        test_host_read();
        test_resolve();
        test_admit();

        test_rm_rf(tmpdir);
        return test_finish("test-sandbox-totals");
}
