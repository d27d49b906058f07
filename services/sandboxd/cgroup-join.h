/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Children of sandboxd born into another process's cgroups: what they need, opened ahead. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

/* What clone3() says where it or CLONE_INTO_CGROUP is missing (or filtered). */
#define CLONE3_UNSUPPORTED(e) ((e) == ENOSYS || (e) == EINVAL || (e) == E2BIG || (e) == EPERM)

/* struct clone_args up to its cgroup field (CLONE_ARGS_SIZE_VER2), spelled out: <linux/sched.h> and
 * glibc's <sched.h> do not mix. */
struct clone_args_v2 {
        uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
                set_tid_size, cgroup;
};

#define CGROUP_JOIN_FDS_MAX 16 /* cgroup v1 hierarchies: there are about a dozen */

/* The text of /proc/PID/cgroup. */
int cgroup_read(pid_t pid, char **ret);

/* Opens what a child of sandboxd needs to be in the cgroups that cgroups (a /proc/PID/cgroup text)
 * names, in every hierarchy where they differ from sandboxd's own: the cgroup2 directory, to be born
 * there (clone3(CLONE_INTO_CGROUP)), into *ret_cgroup2_fd (-EBADF if none), and each cgroup v1
 * hierarchy's "tasks" file, into fds, where the child writes "0" first thing: a single thread moving
 * itself through "tasks" takes no global lock, where a write to cgroup.procs takes the kernel's
 * cgroup_threadgroup_rwsem (whose first taker after a quiet spell waits out an RCU grace period, 8-16
 * ms here). The hierarchies systemd tracks and limits with (name=systemd, memory, pids) must open;
 * others may be missing. 0, or a negative errno with nothing left open. */
int cgroup_join_open(const char *cgroups, int *fds, size_t n_max, size_t *ret_n, int *ret_cgroup2_fd);

/* fork(), born in the cgroup2 cgroup of cgroup2_fd (-EBADF: a plain fork), minus glibc's atfork
 * handlers: the child may only make system calls until it execs or exits. Where clone3() or
 * CLONE_INTO_CGROUP is missing, a plain fork, and *ret_born_in is false: the child writes itself into
 * the cgroup2 cgroup's cgroup.procs if it needs to be there. */
pid_t cgroup_fork_into(int cgroup2_fd, bool *ret_born_in);
