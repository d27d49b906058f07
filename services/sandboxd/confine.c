/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Confinement applied in sandboxd's forked child right before it execs an untrusted program. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "confine.h"
#include "macro.h"

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_IS_SET 1
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

/* Capability numbers are below 64 for as long as the kernel keeps them in one u64 per set. */
#define CAP_NUMBER_MAX 64

static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

static void seccomp_releasep(scmp_filter_ctx *ctx) {
        if (*ctx)
                seccomp_release(*ctx);
}

/* Blocked outright, whatever the arguments. */
static const struct {
        const char *name;
        int error;
} blocked_syscalls[] = {
        /* clone3 passes its flags in memory, where seccomp cannot look: pretend it does not exist,
         * and glibc (fork, pthread_create, posix_spawn) falls back to clone. */
        { "clone3", ENOSYS },

        /* io_uring performs its operations in the kernel, where seccomp never sees them: in a sandbox an
         * IORING_OP_SOCKET made an AF_VSOCK socket that socket() itself refuses (the address families
         * sandboxd.service restricts), and any future rule on a syscall with an io_uring twin would be
         * just as void. Pretend the kernel has none, as without CONFIG_IO_URING: its users (libuv,
         * liburing programs) fall back to plain syscalls. */
        { "io_uring_setup", ENOSYS },
        { "io_uring_enter", ENOSYS },
        { "io_uring_register", ENOSYS },

        /* The kernel keyring is shared by everything that runs under one uid and is not namespaced. */
        { "keyctl", EPERM },
        { "add_key", EPERM },
        { "request_key", EPERM },

        /* Large kernel attack surface, nothing a sandboxed program needs. */
        { "bpf", EPERM },
        { "perf_event_open", EPERM },
        { "userfaultfd", EPERM }, /* a favourite for widening kernel race windows */
        { "lookup_dcookie", EPERM },

        /* The mount table belongs to sandboxd, old API and new. */
        { "mount", EPERM },
        { "umount", EPERM }, /* i386 only */
        { "umount2", EPERM },
        { "pivot_root", EPERM },
        { "move_mount", EPERM },
        { "open_tree", EPERM },
        { "fsopen", EPERM },
        { "fsmount", EPERM },
        { "fspick", EPERM },
        { "fsconfig", EPERM },
        { "mount_setattr", EPERM },
        { "chroot", EPERM },

        /* Namespaces are sandboxd's to make and join. */
        { "setns", EPERM },

        /* Whole-machine state. Most need capabilities a sandbox never has; the filter also covers a
         * child that was confined without confine_drop_privileges(). */
        { "kexec_load", EPERM },
        { "kexec_file_load", EPERM },
        { "init_module", EPERM },
        { "finit_module", EPERM },
        { "delete_module", EPERM },
        { "acct", EPERM },
        { "swapon", EPERM },
        { "swapoff", EPERM },
        { "reboot", EPERM },
        { "settimeofday", EPERM },
        { "stime", EPERM }, /* i386 only */
        { "clock_settime", EPERM },
        { "clock_settime64", EPERM }, /* i386's 64-bit time variants */
        { "clock_adjtime", EPERM },
        { "clock_adjtime64", EPERM },
        { "adjtimex", EPERM },
        { "quotactl", EPERM },
        { "quotactl_fd", EPERM },
        { "open_by_handle_at", EPERM }, /* opens any inode of a file system, past mount boundaries */
        { "name_to_handle_at", EPERM },
        { "iopl", EPERM },
        { "ioperm", EPERM },
        { "syslog", EPERM },
        { "vhangup", EPERM },
        { "nfsservctl", EPERM },
};

/* CLONE_NEWTIME shares its bit with the exit signal in clone()'s flags (it only works through clone3
 * and unshare), so for clone() it is left out: there it is no namespace flag at all. */
#define CLONE_NAMESPACE_FLAGS                                                                               \
        (CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC |          \
         CLONE_NEWCGROUP)
#define UNSHARE_NAMESPACE_FLAGS (CLONE_NAMESPACE_FLAGS | CLONE_NEWTIME)

/* clone()'s flags are its first argument everywhere but on s390, where the stack comes first. */
#if defined(__s390__) || defined(__s390x__)
#define CLONE_FLAGS_ARG 1
#else
#define CLONE_FLAGS_ARG 0
#endif

/* Adds rule by name to every architecture of the filter. libseccomp translates the native number (or
 * its pseudo number, for a syscall the native ABI lacks, e.g. i386's stime) to each architecture and
 * leaves out those that lack the syscall; a name this libseccomp does not know at all is skipped. */
static int add_rule(scmp_filter_ctx ctx, const char *name, int error, unsigned n_args,
                    const struct scmp_arg_cmp *args) {
        int nr = seccomp_syscall_resolve_name(name);
        if (nr == __NR_SCMP_ERROR)
                return 0;

        return seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(error), nr, n_args, args);
}

/* One rule per flag, because a rule ANDs its comparisons, and any one flag must be enough to match. */
static int add_flag_rules(scmp_filter_ctx ctx, const char *name, unsigned arg, uint64_t flags) {
        for (unsigned bit = 0; bit < 64; bit++) {
                uint64_t flag = UINT64_C(1) << bit;
                if (!(flags & flag))
                        continue;
                struct scmp_arg_cmp cmp = SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, flag, flag);
                int r = add_rule(ctx, name, EPERM, 1, &cmp);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int seccomp_build(scmp_filter_ctx *ret) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        int r;

        ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return -ENOMEM;

        /* Without the compat ABIs in the filter, a program could make the same calls through int 0x80
         * (or x32's numbers) and never meet a rule. seccomp_arch_add() only fails if this libseccomp
         * does not know the ABI; syscalls of an ABI the filter lacks hit the bad-arch action below, so
         * a failure here makes the filter stricter, never weaker. */
#if defined(__x86_64__)
        (void) seccomp_arch_add(ctx, SCMP_ARCH_X86);
        (void) seccomp_arch_add(ctx, SCMP_ARCH_X32);
#elif defined(__aarch64__)
        (void) seccomp_arch_add(ctx, SCMP_ARCH_ARM);
#endif

        /* Kill the whole process, not just the thread (libseccomp's default), on any other ABI. */
        (void) seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
#if SCMP_VER_MAJOR > 2 || (SCMP_VER_MAJOR == 2 && SCMP_VER_MINOR >= 5)
        /* The kernel's own errno from seccomp_load(), not -ECANCELED for everything. */
        (void) seccomp_attr_set(ctx, SCMP_FLTATR_API_SYSRAWRC, 1);

        /* A binary tree over syscall numbers rather than a linear chain: half the kernel's cost to
         * attach the filter (it emulates the program for every syscall number to build its cache of
         * always-allowed ones), and fewer instructions per checked syscall. */
        (void) seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
#endif
        /* SCMP_FLTATR_CTL_NNP stays at its default (on): loading as non-root needs no_new_privs anyway,
         * and it keeps setuid binaries inside the sandbox from gaining anything. */

        for (size_t i = 0; i < ELEMENTSOF(blocked_syscalls); i++) {
                r = add_rule(ctx, blocked_syscalls[i].name, blocked_syscalls[i].error, 0, NULL);
                if (r < 0)
                        return r;
        }

        /* Terminal injection: TIOCSTI pushes input into a terminal (e.g. the takeover shell's), and
         * TIOCLINUX's selection paste does the same on a VT. The kernel takes the request as an unsigned
         * int, so compare only the low 32 bits: TIOCSTI | 1 << 32 is still TIOCSTI to it. */
        const unsigned long tty_injection[] = { TIOCSTI, TIOCLINUX };
        for (size_t i = 0; i < ELEMENTSOF(tty_injection); i++) {
                struct scmp_arg_cmp cmp = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, tty_injection[i]);
                r = add_rule(ctx, "ioctl", EPERM, 1, &cmp);
                if (r < 0)
                        return r;
        }

        /* No nested namespaces: a new user namespace would hand the program every capability over
         * its own mounts and network, a large and often buggy kernel surface. */
        r = add_flag_rules(ctx, "unshare", 0, UNSHARE_NAMESPACE_FLAGS);
        if (r < 0)
                return r;
        r = add_flag_rules(ctx, "clone", CLONE_FLAGS_ARG, CLONE_NAMESPACE_FLAGS);
        if (r < 0)
                return r;

        /* personality() is left alone: libseccomp cannot say "anything but these few values" in a
         * default-allow filter without dozens of rules (it refuses two comparisons of one argument in
         * a rule), and what the flags change (address layout, READ_IMPLIES_EXEC) only weakens the
         * calling process itself; vm.mmap_min_addr defuses MMAP_PAGE_ZERO. */

        *ret = TAKE_PTR(ctx);
        return 0;
}

/* The compiled program, when confine_seccomp_prepare() ran in sandboxd before it forked. Never freed:
 * it is small and needed for the life of the process. */
static struct sock_filter *prepared_filter = NULL;
static unsigned short prepared_len = 0;

int confine_seccomp_prepare(void) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        int r;

        if (prepared_filter)
                return 0;

        r = seccomp_build(&ctx);
        if (r < 0)
                return r;

        /* libseccomp 2.5 exports only to an fd (seccomp_export_bpf_mem() is 2.6). */
        _cleanup_close_ int fd = memfd_create("sandboxd-seccomp", MFD_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return r;
        off_t size = lseek(fd, 0, SEEK_END);
        if (size < 0)
                return negative_errno();
        if (size == 0 || size % sizeof(struct sock_filter) != 0 ||
            size / sizeof(struct sock_filter) > BPF_MAXINSNS)
                return -EBADMSG;

        _cleanup_free_ struct sock_filter *filter = malloc(size);
        if (!filter)
                return -ENOMEM;
        ssize_t n = pread(fd, filter, size, 0);
        if (n < 0)
                return negative_errno();
        if (n != size)
                return -EIO;

        prepared_len = (unsigned short) (size / sizeof(struct sock_filter));
        prepared_filter = TAKE_PTR(filter);
        return 0;
}

int confine_seccomp_install(void) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        int r;

        if (prepared_filter) {
                struct sock_fprog prog = {
                        .len = prepared_len,
                        .filter = prepared_filter,
                };

                /* What seccomp_load() does with libseccomp's default attributes: no_new_privs, then the
                 * filter without flags. */
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                        return negative_errno();
                if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
                        return negative_errno();
                return 0;
        }

        r = seccomp_build(&ctx);
        if (r < 0)
                return r;
        return seccomp_load(ctx);
}

/* capget()/capset() have no glibc wrappers; the raw calls spare a libcap dependency. */
static int capabilities_set_zero(void) {
        struct __user_cap_header_struct header = {
                .version = _LINUX_CAPABILITY_VERSION_3,
                .pid = 0,
        };
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};

        if (syscall(SYS_capset, &header, data) < 0)
                return negative_errno();
        return 0;
}

static int capabilities_verify_zero(void) {
        struct __user_cap_header_struct header = {
                .version = _LINUX_CAPABILITY_VERSION_3,
                .pid = 0,
        };
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};

        if (syscall(SYS_capget, &header, data) < 0)
                return negative_errno();
        for (size_t i = 0; i < ELEMENTSOF(data); i++)
                if (data[i].effective != 0 || data[i].permitted != 0 || data[i].inheritable != 0)
                        return -EPERM;

        /* The ambient set needs no check of its own: the kernel keeps it a subset of permitted and
         * inheritable, both empty now. */
        for (unsigned long cap = 0; cap < CAP_NUMBER_MAX; cap++) {
                int b = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
                if (b < 0 && errno == EINVAL)
                        break; /* past the kernel's last capability */
                if (b != 0)
                        return -EPERM;
        }
        return 0;
}

/* Drops capabilities until PR_CAPBSET_DROP says EINVAL, which it does exactly past the running
 * kernel's last one: no /proc/sys/kernel/cap_last_cap needed (it may not be mounted in the child's
 * mount namespace), and no guessed maximum that a newer kernel outgrows. Dropping one that is not in
 * the set succeeds too, so no read first: this runs on every command's start. */
static int bounding_set_drop_all(void) {
        for (unsigned long cap = 0; cap < CAP_NUMBER_MAX; cap++)
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
                        if (errno == EINVAL)
                                return 0;
                        return negative_errno();
                }
        return 0;
}

int confine_drop_privileges(uid_t uid, gid_t gid) {
        int r;

        if (uid == 0 || gid == 0 || uid == (uid_t) -1 || gid == (gid_t) -1)
                return -EINVAL;

        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return negative_errno();

        /* Before setresuid(): emptying the bounding set needs CAP_SETPCAP. With it empty, no file
         * capability and no setuid-root binary can give anything back. */
        r = bounding_set_drop_all();
        if (r < 0)
                return r;

        /* EINVAL: a kernel older than 4.3 has no ambient set, so nothing to clear. */
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return negative_errno();

        /* Groups first, while CAP_SETGID is still there. The raw system calls, not glibc's wrappers:
         * in a process with threads those change every thread's credentials (a signal to each), and
         * an Exec's child shares sandboxd's memory, threads' bookkeeping included, until it execs. */
        if (syscall(SYS_setgroups, 0, NULL) < 0)
                return negative_errno();
        if (syscall(SYS_setresgid, gid, gid, gid) < 0)
                return negative_errno();
        if (syscall(SYS_setresuid, uid, uid, uid) < 0)
                return negative_errno();

        /* Leaving uid 0 already cleared the permitted and effective sets (no SECBIT_KEEP_CAPS here);
         * inheritable survives that, and clearing all three is cheap. */
        r = capabilities_set_zero();
        if (r < 0)
                return r;

        /* Trust, but verify: a silently ignored step here means untrusted code as root. */
        uid_t ruid, euid, suid;
        gid_t rgid, egid, sgid;
        if (getresuid(&ruid, &euid, &suid) < 0 || getresgid(&rgid, &egid, &sgid) < 0)
                return negative_errno();
        if (ruid != uid || euid != uid || suid != uid || rgid != gid || egid != gid || sgid != gid)
                return -EPERM;
        if (getgroups(0, NULL) != 0)
                return -EPERM;
        if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
                return -EPERM;

        return capabilities_verify_zero();
}

/* Sets both limits to at most value, never above the current hard limit (which would need
 * CAP_SYS_RESOURCE and is not what a confinement step should do). */
static int rlimit_lower(int resource, rlim_t value) {
        struct rlimit rl;

        if (getrlimit(resource, &rl) < 0)
                return negative_errno();
        rl.rlim_cur = rl.rlim_max = MIN(value, rl.rlim_max);
        if (setrlimit(resource, &rl) < 0)
                return negative_errno();
        return 0;
}

int confine_set_rlimits(uint64_t nofile_soft, uint64_t nofile_hard) {
        int r;

        if (nofile_soft == 0 || nofile_soft > nofile_hard)
                return -EINVAL;

        /* select() breaks above 1024, so the soft limit stays there unless told otherwise; programs
         * that need more raise it themselves up to the hard limit. Exactly these values, whatever ours
         * are: above our own hard limit too, which needs CAP_SYS_RESOURCE. */
        struct rlimit nofile = { .rlim_cur = nofile_soft, .rlim_max = nofile_hard };
        if (setrlimit(RLIMIT_NOFILE, &nofile) < 0) {
                if (errno != EPERM)
                        return negative_errno();
                /* Without CAP_SYS_RESOURCE (a container's bounding set may lack it) the hard limit cannot
                 * go up: the most we have (sandboxd says so at start, confine_nofile_effective()). */
                struct rlimit cur;
                if (getrlimit(RLIMIT_NOFILE, &cur) < 0)
                        return negative_errno();
                nofile.rlim_max = MIN(nofile.rlim_max, cur.rlim_max);
                nofile.rlim_cur = MIN(nofile.rlim_cur, nofile.rlim_max);
                if (setrlimit(RLIMIT_NOFILE, &nofile) < 0)
                        return negative_errno();
        }

        const struct {
                int resource;
                rlim_t value;
        } lowered[] = {
                { RLIMIT_CORE, 0 },
                { RLIMIT_MEMLOCK, 8U * 1024U * 1024U },
                { RLIMIT_RTPRIO, 0 },
                { RLIMIT_NICE, 0 },
        };
        for (size_t i = 0; i < ELEMENTSOF(lowered); i++) {
                r = rlimit_lower(lowered[i].resource, lowered[i].value);
                if (r < 0)
                        return r;
        }
        return 0;
}

uint64_t confine_nofile_effective(uint64_t nofile_hard) {
        struct rlimit cur;

        if (getrlimit(RLIMIT_NOFILE, &cur) < 0)
                return 0;
        if (cur.rlim_max == RLIM_INFINITY || cur.rlim_max >= nofile_hard)
                return nofile_hard;
        /* Raise our own hard limit (the soft one stays), so that every child may have it. */
        struct rlimit raised = { .rlim_cur = cur.rlim_cur, .rlim_max = nofile_hard };
        if (setrlimit(RLIMIT_NOFILE, &raised) >= 0)
                return nofile_hard;
        return cur.rlim_max;
}

static bool fd_in_set(int fd, const int *keep, size_t n_keep) {
        for (size_t i = 0; i < n_keep; i++)
                if (keep[i] == fd)
                        return true;
        return false;
}

/* close_range() over every gap between the kept fds, lowest first. The list is short (stdio sits
 * below 3 anyway), so it is scanned for each gap rather than sorted into a copy. */
static int close_range_except(const int *keep, size_t n_keep) {
#ifdef __NR_close_range
        unsigned first = 3;

        for (;;) {
                bool found = false;
                unsigned next = 0;
                for (size_t i = 0; i < n_keep; i++) {
                        if (keep[i] < 0)
                                continue;
                        unsigned k = (unsigned) keep[i];
                        if (k >= first && (!found || k < next)) {
                                next = k;
                                found = true;
                        }
                }

                if (!found) {
                        if (syscall(__NR_close_range, first, ~0U, 0) < 0)
                                return negative_errno();
                        return 0;
                }
                if (next > first && syscall(__NR_close_range, first, next - 1, 0) < 0)
                        return negative_errno();
                first = next + 1; /* next <= INT_MAX, so this cannot wrap */
        }
#else
        return -ENOSYS;
#endif
}

struct linux_dirent64 {
        uint64_t d_ino;
        int64_t d_off;
        unsigned short d_reclen;
        unsigned char d_type;
        char d_name[];
};

static int parse_fd(const char *s) {
        int v = 0;

        if (!*s)
                return -EINVAL;
        for (; *s; s++) {
                if (*s < '0' || *s > '9' || v > (INT_MAX - 9) / 10)
                        return -EINVAL;
                v = v * 10 + (*s - '0');
        }
        return v;
}

/* getdents64() into a stack buffer instead of opendir(), which would malloc. Closing entries while
 * reading is fine: /proc/self/fd is generated by fd number, so the position stays meaningful. */
static int close_proc_fds_except(const int *keep, size_t n_keep) {
        _cleanup_close_ int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return negative_errno();

        for (;;) {
                _Alignas(struct linux_dirent64) char buf[4096];
                long n = syscall(SYS_getdents64, dfd, buf, sizeof(buf));
                if (n < 0)
                        return negative_errno();
                if (n == 0)
                        return 0;

                for (long off = 0; off < n;) {
                        struct linux_dirent64 *de = (struct linux_dirent64 *) (buf + off);
                        off += de->d_reclen;

                        int fd = parse_fd(de->d_name); /* "." and ".." fail to parse */
                        if (fd < 3 || fd == dfd || fd_in_set(fd, keep, n_keep))
                                continue;
                        (void) close(fd);
                }
        }
}

int confine_close_all_fds_except(const int *keep, size_t n_keep) {
        struct rlimit rl;

        if (n_keep > 0 && !keep)
                return -EINVAL;

        /* close_range() fails only as a whole (ENOSYS before Linux 5.9, EPERM under a seccomp filter
         * that does not know it); anything it closed before failing is simply not found again below. */
        if (close_range_except(keep, n_keep) >= 0)
                return 0;
        if (close_proc_fds_except(keep, n_keep) >= 0)
                return 0;

        /* No /proc: every possible fd number. */
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return negative_errno();
        int max = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1U << 20) ? 1 << 20 : (int) rl.rlim_cur;
        for (int fd = 3; fd < max; fd++)
                if (!fd_in_set(fd, keep, n_keep))
                        (void) close(fd);
        return 0;
}

/* After confine_signals_prepare(): the signals that were not SIG_DFL then. */
static bool signals_prepared = false;
static sigset_t signals_changed;

int confine_signals_prepare(void) {
        struct sigaction old;

        if (sigemptyset(&signals_changed) < 0)
                return negative_errno();
        for (int sig = 1; sig < _NSIG; sig++) {
                if (sig == SIGKILL || sig == SIGSTOP)
                        continue;
                if (sigaction(sig, NULL, &old) < 0) {
                        if (errno == EINVAL)
                                continue; /* glibc's own (32, 33) */
                        return negative_errno();
                }
                if (old.sa_handler != SIG_DFL)
                        (void) sigaddset(&signals_changed, sig);
        }
        signals_prepared = true;
        return 0;
}

int confine_reset_signals(void) {
        struct sigaction sa = {
                .sa_handler = SIG_DFL,
        };
        sigset_t mask;

        (void) sigemptyset(&sa.sa_mask);
        for (int sig = 1; sig < _NSIG; sig++) {
                if (sig == SIGKILL || sig == SIGSTOP)
                        continue;
                if (signals_prepared && sigismember(&signals_changed, sig) != 1)
                        continue;
                /* EINVAL for the signals glibc keeps for itself (32, 33); the kernel resets those on
                 * execve like every handled signal. */
                if (sigaction(sig, &sa, NULL) < 0 && errno != EINVAL)
                        return negative_errno();
        }

        if (sigemptyset(&mask) < 0 || sigprocmask(SIG_SETMASK, &mask, NULL) < 0)
                return negative_errno();
        return 0;
}

/* execvpe() with the search path taken from envp's PATH (glibc's takes it from our own environ, which a
 * child sharing sandboxd's memory must not touch). Like execvp(): a name with a slash is run as it
 * is; otherwise each directory of PATH (an empty one is the working directory; no PATH at all:
 * "/bin:/usr/bin") is tried in turn, going on past the errors that mean "not here"; EACCES is
 * remembered for the end. A file the kernel does not know how to run (ENOEXEC) is run by /bin/sh, as
 * POSIX asks. Allocates nothing. Returns only on failure, with errno set. */
static void exec_or_sh(const char *path, char *const argv[], char *const envp[]) {
        execve(path, argv, envp);
        if (errno != ENOEXEC)
                return;
        size_t argc = 0;
        while (argv[argc])
                argc++;
        if (argc > 4096)
                return; /* errno is ENOEXEC still */
        const char *sh_argv[argc + 2];
        sh_argv[0] = "/bin/sh";
        sh_argv[1] = path;
        for (size_t i = 1; i <= argc; i++) /* argv[argc], the NULL, too */
                sh_argv[i + 1] = argv[i];
        execve("/bin/sh", (char *const *) sh_argv, envp);
        errno = ENOEXEC;
}

void confine_execvpe(const char *file, char *const argv[], char *const envp[]) {
        const char *search = "/bin:/usr/bin";
        char path[PATH_MAX];
        bool denied = false;

        if (!file || !*file) {
                errno = ENOENT;
                return;
        }
        if (strchr(file, '/')) {
                exec_or_sh(file, argv, envp);
                return;
        }
        for (char *const *e = envp; e && *e; e++)
                if (strncmp(*e, "PATH=", 5) == 0) {
                        search = *e + 5;
                        break;
                }
        size_t flen = strlen(file);
        for (const char *p = search;;) {
                const char *end = strchrnul(p, ':');
                size_t dlen = (size_t) (end - p);
                if (dlen + 1 + flen < sizeof(path)) {
                        if (dlen > 0) {
                                memcpy(path, p, dlen);
                                path[dlen] = '/';
                                memcpy(path + dlen + 1, file, flen + 1);
                        } else
                                memcpy(path, file, flen + 1);
                        exec_or_sh(path, argv, envp);
                        switch (errno) {
                        case EACCES:
                                denied = true;
                                break;
                        case ENOENT:
                        case ENOTDIR:
                        case ESTALE:
                        case ENODEV:
                        case ETIMEDOUT:
                                break;
                        default:
                                return; /* found, and it failed for a reason of its own */
                        }
                }
                if (!*end)
                        break;
                p = end + 1;
        }
        errno = denied ? EACCES : ENOENT;
}

int confine_sandbox_process(const int *keep, size_t n_keep, uid_t uid, const char **ret_step) {
        const char *step;
        int r;

        step = "close file descriptors";
        r = confine_close_all_fds_except(keep, n_keep);
        if (r >= 0) {
                step = "set resource limits";
                r = confine_set_rlimits(SANDBOX_NOFILE_SOFT, SANDBOX_NOFILE_HARD);
        }
        if (r >= 0) {
                step = "drop privileges";
                r = confine_drop_privileges(uid, (gid_t) uid);
        }
        if (r >= 0) {
                umask(0022);
                step = "install the seccomp filter";
                r = confine_seccomp_install();
        }
        if (r < 0 && ret_step)
                *ret_step = step;
        return r < 0 ? r : 0;
}
