/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What all sandboxes together may have: limits derived from the host, and the admission sum. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "sandbox-totals.h"

static int read_u64_file(const char *proc_dir, const char *name, uint64_t *ret) {
        _cleanup_fclose_ FILE *f = NULL;
        char path[4096], line[64], *end;

        snprintf(path, sizeof(path), "%s/%s", proc_dir, name);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        if (!fgets(line, sizeof(line), f))
                return ferror(f) ? -EIO : -EBADMSG;
        errno = 0;
        unsigned long long v = strtoull(line, &end, 10);
        if (errno != 0 || end == line || (*end != '\n' && *end != 0) || line[0] == '-')
                return -EBADMSG;
        *ret = v;
        return 0;
}

int host_info_read(const char *proc_dir, unsigned n_cpus, HostInfo *ret) {
        _cleanup_fclose_ FILE *f = NULL;
        char path[4096], line[256];
        HostInfo h = { .n_cpus = n_cpus > 0 ? n_cpus : 1 };
        bool found = false;
        int r;

        snprintf(path, sizeof(path), "%s/meminfo", proc_dir);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                unsigned long long kib;
                char unit[8];

                if (strncmp(line, "MemTotal:", 9) != 0)
                        continue;
                if (sscanf(line + 9, "%llu %7s", &kib, unit) != 2 || !streq(unit, "kB") ||
                    kib > UINT64_MAX / 1024)
                        return -EBADMSG;
                h.mem_total = (uint64_t) kib * 1024;
                found = true;
                break;
        }
        if (!found)
                return -EBADMSG;

        r = read_u64_file(proc_dir, "sys/kernel/threads-max", &h.threads_max);
        if (r < 0)
                return r;
        r = read_u64_file(proc_dir, "sys/kernel/pid_max", &h.pid_max);
        if (r < 0)
                return r;

        *ret = h;
        return 0;
}

static uint64_t share(uint64_t v, unsigned percent) {
        /* v / 100 * percent would lose up to 99 for small v; v * percent may overflow for huge v */
        return v > UINT64_MAX / 100 ? v / 100 * percent : v * percent / 100;
}

void sandbox_totals_resolve(const SandboxTotalsConfig *c, const HostInfo *host, SandboxTotals *ret) {
        SandboxTotals t = {
                .memory_max = c->memory_max,
                .tasks_max = c->tasks_max,
                .cpu_quota_percent = c->cpu_quota_percent,
                .overcommit_percent = c->overcommit_percent ?: 100,
        };

        if (t.memory_max == SANDBOX_TOTAL_AUTO) {
                uint64_t mib = UINT64_C(1) << 20;
                t.memory_max = MAX(share(host->mem_total, SANDBOX_TOTAL_MEMORY_PERCENT) / mib * mib, mib);
        }
        if (t.tasks_max == SANDBOX_TOTAL_AUTO) {
                /* Every task has a pid in the host's namespace as well as a thread slot. */
                uint64_t cap = MIN(host->threads_max, host->pid_max);
                t.tasks_max = MAX(share(cap, SANDBOX_TOTAL_TASKS_PERCENT), UINT64_C(1));
        }
        if (t.cpu_quota_percent == SANDBOX_TOTAL_AUTO)
                t.cpu_quota_percent =
                        MAX(share((uint64_t) MAX(host->n_cpus, 1U) * 100, SANDBOX_TOTAL_CPU_PERCENT),
                            UINT64_C(1));
        *ret = t;
}

/* The most the promises may add up to: limit × overcommit, or infinity. */
static uint64_t allowed(uint64_t limit, unsigned overcommit_percent) {
        if (limit == SANDBOX_TOTAL_INFINITY)
                return UINT64_MAX;
        if (limit <= UINT64_MAX / overcommit_percent)
                return limit * overcommit_percent / 100;
        if (limit / 100 > UINT64_MAX / overcommit_percent)
                return UINT64_MAX;
        return limit / 100 * overcommit_percent;
}

static uint64_t add_sat(uint64_t a, uint64_t b) {
        return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

int sandbox_totals_admit(const SandboxTotals *t, const SandboxPromised *promised, uint64_t memory,
                         uint64_t tasks, char *buf, size_t size) {
        unsigned oc = t->overcommit_percent ?: 100;
        uint64_t mem_allowed = allowed(t->memory_max, oc), tasks_allowed = allowed(t->tasks_max, oc);

        if (t->memory_max != SANDBOX_TOTAL_INFINITY && add_sat(promised->memory, memory) > mem_allowed) {
                snprintf(buf, size,
                         "The sandboxes' memory is used up: %" PRIu64 " sandboxes are promised %" PRIu64
                         " MiB, this one would add %" PRIu64 " MiB, and [Sandboxes] allows %" PRIu64
                         " MiB (MemoryMax=%" PRIu64 "M, Overcommit=%u%%).",
                         promised->n, promised->memory >> 20, memory >> 20, mem_allowed >> 20,
                         t->memory_max >> 20, oc);
                return -E2BIG;
        }
        if (t->tasks_max != SANDBOX_TOTAL_INFINITY && add_sat(promised->tasks, tasks) > tasks_allowed) {
                snprintf(buf, size,
                         "The sandboxes' tasks are used up: %" PRIu64 " sandboxes are promised %" PRIu64
                         " tasks, this one would add %" PRIu64 ", and [Sandboxes] allows %" PRIu64
                         " (TasksMax=%" PRIu64 ", Overcommit=%u%%).",
                         promised->n, promised->tasks, tasks, tasks_allowed, t->tasks_max, oc);
                return -E2BIG;
        }
        return 0;
}
