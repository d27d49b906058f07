/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* OOM-kill detection for a scope, on hybrid (v1 memory controller) and pure cgroup2 hosts. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct OomWatch {
        int event_fd;     /* v1: eventfd registered with cgroup.event_control */
        int control_fd;   /* v1: memory.oom_control; v2: the scope's memory.events */
        int parent_fd;    /* v2: the slice's memory.events (hierarchical counts) */
        uint64_t parent_before;
        uint64_t events;  /* v1: eventfd counts seen so far */
        bool v1;
        bool seen;        /* an OOM kill was observed while the scope lived */
} OomWatch;

#define OOM_WATCH_INIT { .event_fd = -1, .control_fd = -1, .parent_fd = -1 }

/* Layout of the memory controller, found once. */
typedef enum CgroupMemoryLayout {
        CGROUP_MEMORY_NONE,
        CGROUP_MEMORY_V1,
        CGROUP_MEMORY_V2,
} CgroupMemoryLayout;

/* prefix: where systemd's tree starts in the memory hierarchy ("" when systemd owns the root). */
int oom_detect_layout(CgroupMemoryLayout *ret_layout, char **ret_prefix);

/* unit_path: the unit's path below systemd's root, e.g. sandbox.slice/sandbox-x.slice/sandbox-x-exec-1.scope;
 * parent_path: the slice holding it. */
int oom_watch_start(OomWatch *w, CgroupMemoryLayout layout, const char *prefix, const char *parent_path,
                    const char *unit_path);

/* Reads pending notifications (call when event_fd is readable). */
void oom_watch_poll(OomWatch *w);

/* Whether the scope saw an OOM kill; killed_by_sigkill disambiguates the one racy case (see oom.c). */
bool oom_watch_check(OomWatch *w, bool killed_by_sigkill);

void oom_watch_done(OomWatch *w);
