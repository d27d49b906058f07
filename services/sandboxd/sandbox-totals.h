/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What all sandboxes together may have: limits derived from the host, and the admission sum. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "sandboxd-config.h"

/* What the host has, as read at start-up. */
typedef struct HostInfo {
        uint64_t mem_total;   /* bytes, MemTotal: of meminfo */
        uint64_t threads_max; /* sys/kernel/threads-max */
        uint64_t pid_max;     /* sys/kernel/pid_max */
        unsigned n_cpus;
} HostInfo;

/* [Sandboxes] with every "auto" resolved: a number, or SANDBOX_TOTAL_INFINITY. */
typedef struct SandboxTotals {
        uint64_t memory_max;
        uint64_t tasks_max;
        uint64_t cpu_quota_percent;
        unsigned overcommit_percent;
} SandboxTotals;

/* What the sandboxes (pooled ones included) were promised: the sums of their types' limits. */
typedef struct SandboxPromised {
        uint64_t memory;
        uint64_t tasks;
        uint64_t n;
} SandboxPromised;

/* Shares of the host that "auto" means: sandboxes together get 80 % of the RAM, 75 % of the smaller of
 * threads-max and pid_max, and 90 % of the CPUs; the rest stays for the host and our own services. */
#define SANDBOX_TOTAL_MEMORY_PERCENT 80
#define SANDBOX_TOTAL_TASKS_PERCENT 75
#define SANDBOX_TOTAL_CPU_PERCENT 90

/* Reads meminfo, sys/kernel/threads-max and sys/kernel/pid_max below proc_dir ("/proc"); n_cpus is
 * the caller's (sysconf). Returns 0, or a negative errno if a file is missing or unreadable
 * (-EBADMSG: no MemTotal: line, or a value that is not a number). */
int host_info_read(const char *proc_dir, unsigned n_cpus, HostInfo *ret);

/* Resolves "auto" from host: memory rounded down to whole MiB, at least 1 MiB; tasks at least 1; CPU at
 * least 1 %. */
void sandbox_totals_resolve(const SandboxTotalsConfig *c, const HostInfo *host, SandboxTotals *ret);

/* Whether one more sandbox promised memory bytes and tasks tasks fits: the promises, its own included,
 * may add up to overcommit_percent of memory_max and of tasks_max (infinity: no bound). Returns 0, or
 * -E2BIG with a message for the caller in buf ("…" saying what, how much is promised and how much the
 * configuration allows). CPU is not summed: CPU time over the quota waits, it is never exhausted. */
int sandbox_totals_admit(const SandboxTotals *t, const SandboxPromised *promised, uint64_t memory,
                         uint64_t tasks, char *buf, size_t size);
