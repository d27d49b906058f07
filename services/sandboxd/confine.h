/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Confinement applied in sandboxd's forked child right before it execs an untrusted program. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Every function here is meant for the forked child of single-threaded sandboxd: no stdio, no logging,
 * no malloc except inside libseccomp. Each returns 0 or a negative errno; on failure the child must
 * _exit() rather than exec anything. The intended order in the child is:
 *
 *   confine_reset_signals()            first, so nothing of sandboxd's sigmask or SIG_IGNs leaks
 *   dup2() stdio into place, then
 *   confine_close_all_fds_except()     while still root (the /proc fallback needs a dumpable process)
 *   confine_set_rlimits()              while still root (raising a hard limit needs CAP_SYS_RESOURCE)
 *   setns(), chdir(), …                whatever else needs privileges
 *   confine_drop_privileges()
 *   confine_seccomp_install()          last: it forbids setns(), mount() and friends
 *   execve()
 */

/* Loads a seccomp filter, default allow, that makes these fail with EPERM: ioctl TIOCSTI and TIOCLINUX
 * (request compared on its low 32 bits, as the kernel does), keyctl, add_key, request_key, bpf,
 * perf_event_open, the mount API (mount, umount, umount2, pivot_root, move_mount, open_tree, fsopen,
 * fsmount, fspick, fsconfig, mount_setattr), chroot, setns, unshare and clone with any namespace flag,
 * the kexec and module calls, acct, swapon/swapoff, reboot, the clock setters, quotactl, lookup_dcookie,
 * userfaultfd, open_by_handle_at, name_to_handle_at, iopl, ioperm, syslog, vhangup, nfsservctl. clone3
 * fails with ENOSYS so that libc falls back to clone, whose flags the filter can see. ptrace and
 * process_vm_* stay allowed: debugging inside a sandbox is legitimate, and other sandboxes run under
 * other uids in other PID namespaces.
 *
 * On x86_64 the filter also covers the i386 and x32 ABIs, on aarch64 the 32-bit ARM one; syscalls of
 * any other ABI kill the process. Sets no_new_privs (libseccomp does so before loading).
 *
 * Building the filter with libseccomp costs over a millisecond in each child; after
 * confine_seccomp_prepare() this only hands the program compiled then to the kernel (~0.2 ms here). */
int confine_seccomp_install(void);

/* Optional, in sandboxd itself before it forks (once, e.g. at startup): compiles the filter that
 * confine_seccomp_install() loads, so children need neither libseccomp's time nor its mallocs.
 * Idempotent. */
int confine_seccomp_prepare(void);

/* Becomes uid/gid for good: empties the capability bounding and ambient sets while still privileged,
 * sets no_new_privs, drops supplementary groups, sets real/effective/saved gid and uid, zeroes the
 * remaining capability sets, then verifies all of it. Needs CAP_SETPCAP, CAP_SETGID and CAP_SETUID, so
 * in practice root. uid 0, gid 0 and (uid_t) -1 / (gid_t) -1 are refused with -EINVAL: a sandbox never
 * runs as root, and -1 would mean "leave unchanged" to setresuid(). */
int confine_drop_privileges(uid_t uid, gid_t gid);

/* RLIMIT_NOFILE of every process sandboxd starts in a sandbox (docs/security.md#confinement). */
#define SANDBOX_NOFILE_SOFT 1024
#define SANDBOX_NOFILE_HARD 65536

/* Sets RLIMIT_NOFILE to nofile_soft/nofile_hard exactly (-EINVAL if soft is 0 or above hard); only if
 * raising the hard limit above ours is refused (no CAP_SYS_RESOURCE) to our hard limit instead, and the
 * soft one at most to that. It cannot pass fs.nr_open. Lowers, never raises:
 * RLIMIT_CORE to 0 (no core files of untrusted programs landing on the host), RLIMIT_MEMLOCK to 8 MiB
 * (the kernel's own default; sandboxd may have been started with more), RLIMIT_RTPRIO and RLIMIT_NICE
 * to 0 (no realtime scheduling or raised priority). Process counts are the cgroup's TasksMax, not
 * RLIMIT_NPROC, which counts per real uid and does not stop a fork bomb any better. */
int confine_set_rlimits(uint64_t nofile_soft, uint64_t nofile_hard);

/* The hard RLIMIT_NOFILE that confine_set_rlimits(…, nofile_hard) will give: nofile_hard if our own
 * hard limit is as high or can be raised to it (which this does), else our own. 0 if it cannot tell. */
uint64_t confine_nofile_effective(uint64_t nofile_hard);

/* Closes every fd >= 3 that is not listed in keep (negative entries and entries below 3 are ignored;
 * 0, 1 and 2 are never closed). Uses close_range(2) over the gaps, and falls back to walking
 * /proc/self/fd, then to every fd below RLIMIT_NOFILE, where close_range is missing or filtered. */
int confine_close_all_fds_except(const int *keep, size_t n_keep);

/* Resets every signal's disposition to SIG_DFL (sandboxd ignores some, e.g. SIGPIPE, and SIG_IGN
 * survives execve) and unblocks all signals (sd-event blocks SIGCHLD and friends, and the mask survives
 * execve too). After confine_signals_prepare(), only the signals that were not SIG_DFL then are reset:
 * 2 system calls instead of 65. */
int confine_reset_signals(void);

/* Optional, in sandboxd itself once its signal dispositions are final (after main() set them up; a
 * disposition changed later would not be reset in children): notes which signals are not SIG_DFL,
 * for confine_reset_signals(). */
int confine_signals_prepare(void);

/* execvpe() that searches envp's PATH rather than our own environment's, and allocates nothing: for a
 * child that shares sandboxd's memory until it execs. Returns only on failure, with errno set. */
void confine_execvpe(const char *file, char *const argv[], char *const envp[]);

/* What every process of a sandbox goes through in sandboxd's child before it runs anything of the
 * sandbox's, once it is in the sandbox's namespaces: every fd closed but 0-2 and keep's, the sandbox's
 * rlimits, the sandbox's uid (and gid) with no capabilities and no_new_privs, umask 022, and the seccomp
 * filter, in that order. Returns 0, or a negative errno with *ret_step (if not NULL) saying which step
 * failed. Allocates nothing: safe in a child that shares sandboxd's memory. */
int confine_sandbox_process(const int *keep, size_t n_keep, uid_t uid, const char **ret_step);
