/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests confine.c in forked children: the seccomp filter, privilege drop, rlimits, fd closing, signals. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/keyctl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "confine.h"
#include "macro.h"

#define EXIT_SETUP 254 /* the child could not prepare the check */
#define NONEXISTENT "/nonexistent-sandboxd-test-confine"

extern char **environ;

static int tty_fd = -EBADF;

static void out(const char *format, ...) _printf_(1, 2);
static void out(const char *format, ...) {
        va_list ap;

        va_start(ap, format);
        vfprintf(stdout, format, ap);
        va_end(ap);
        fflush(stdout);
}

/* Returns the exit code, or 1000 + signal number if killed. */
static int wait_child(pid_t pid) {
        int status;

        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        if (WIFSIGNALED(status))
                return 1000 + WTERMSIG(status);
        return -EIO;
}

/* A call that creates a process on success (clone, clone3, when the filter failed to stop it): the new
 * process leaves at once, the caller gets the success value. */
static long reap_if_child(long r) {
        if (r == 0)
                _exit(0);
        if (r > 0)
                (void) wait_child((pid_t) r);
        return r;
}

/* A new session whose controlling terminal is a fresh pty, so TIOCSTI is allowed natively (the
 * kernel refuses it on any tty but one's own controlling one, unless CAP_SYS_ADMIN) and vhangup()
 * can only ever hang up that pty. */
static int setup_pty(void) {
        if (setsid() < 0)
                return -errno;

        _cleanup_close_ int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master < 0)
                return -errno;
        if (grantpt(master) < 0 || unlockpt(master) < 0)
                return -errno;
        const char *name = ptsname(master);
        if (!name)
                return -errno;
        int slave = open(name, O_RDWR | O_CLOEXEC); /* no O_NOCTTY: becomes our controlling tty */
        if (slave < 0)
                return -errno;
        if (ioctl(slave, TIOCSCTTY, 0) < 0 && errno != EPERM) {
                /* open() already made it ours when this fails with EPERM */
                int e = -errno;
                close(slave);
                return e;
        }
        tty_fd = slave;
        (void) TAKE_FD(master); /* keep the master open, or the slave hangs up */
        return 0;
}

static long call_tiocsti(void) {
        char c = ' ';
        return ioctl(tty_fd, TIOCSTI, &c);
}

static long call_tiocsti_high_bits(void) {
        char c = ' ';
        /* The kernel reads the request as an unsigned int, so this is TIOCSTI to it. */
        return syscall(SYS_ioctl, tty_fd, (unsigned long) TIOCSTI | 0x100000000UL, &c);
}

static long call_tioclinux(void) {
        char subcode = 3; /* TIOCL_PASTESEL; a pty answers EINVAL or ENOTTY */
        return ioctl(tty_fd, TIOCLINUX, &subcode);
}

static long call_keyctl(void) {
        return syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
}

static long call_add_key(void) {
        return syscall(SYS_add_key, "user", "sandboxd-test-confine", "x", (size_t) 1,
                       KEY_SPEC_PROCESS_KEYRING);
}

static long call_request_key(void) {
        return syscall(SYS_request_key, "user", "sandboxd-test-confine-missing", NULL, 0);
}

static long call_unshare_newuser(void) {
        return unshare(CLONE_NEWUSER);
}

static long call_unshare_newns(void) {
        return unshare(CLONE_NEWNS);
}

static long call_unshare_newnet_files(void) {
        return unshare(CLONE_FILES | CLONE_NEWNET);
}

static long call_clone_newuser(void) {
#if defined(__s390__) || defined(__s390x__)
        long r = syscall(SYS_clone, NULL, (unsigned long) (CLONE_NEWUSER | SIGCHLD), NULL, NULL, NULL);
#else
        long r = syscall(SYS_clone, (unsigned long) (CLONE_NEWUSER | SIGCHLD), NULL, NULL, NULL, NULL);
#endif
        return reap_if_child(r);
}

static long call_clone3(void) {
        struct {
                uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
        } args = { .exit_signal = SIGCHLD }; /* CLONE_ARGS_SIZE_VER0; no flags at all */

        return reap_if_child(syscall(SYS_clone3, &args, sizeof(args)));
}

/* A ring's operations bypass the filter (IORING_OP_SOCKET, IORING_OP_OPENAT, …), so there must be no ring. */
static long call_io_uring_setup(void) {
        struct {
                uint32_t fields[10];
                uint32_t offsets[20];
        } params = {}; /* struct io_uring_params, 120 bytes, all zero */
        long r = syscall(SYS_io_uring_setup, 1, &params);
        if (r >= 0)
                close((int) r);
        return r;
}

static long call_io_uring_enter(void) {
        return syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0); /* EBADF natively */
}

static long call_io_uring_register(void) {
        return syscall(SYS_io_uring_register, -1, 0, NULL, 0); /* EBADF natively */
}

static long call_mount(void) {
        return mount("none", NONEXISTENT, "tmpfs", 0, NULL);
}

static long call_umount2(void) {
        return umount2(NONEXISTENT, 0);
}

static long call_open_tree(void) {
        return syscall(SYS_open_tree, AT_FDCWD, NONEXISTENT, 0);
}

static long call_fsopen(void) {
        return syscall(SYS_fsopen, "sandboxd-test-nonexistent-fs", 0);
}

static long call_chroot(void) {
        return chroot(NONEXISTENT);
}

static long call_setns(void) {
        return setns(-1, 0);
}

static long call_bpf(void) {
        return syscall(SYS_bpf, 10000, NULL, 0); /* no such command */
}

static long call_perf_event_open(void) {
        return syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0);
}

static long call_userfaultfd(void) {
        return syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
}

static long call_clock_settime(void) {
        struct timespec ts = {};
        return clock_settime(CLOCK_MONOTONIC, &ts); /* EINVAL natively: it cannot be set */
}

static long call_syslog(void) {
        return syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
}

static long call_finit_module(void) {
        return syscall(SYS_finit_module, -1, "", 0);
}

static long call_delete_module(void) {
        return syscall(SYS_delete_module, "sandboxd_test_no_such_module", O_NONBLOCK);
}

static long call_swapon(void) {
        return swapon(NONEXISTENT, 0);
}

static long call_name_to_handle_at(void) {
        struct {
                unsigned handle_bytes;
                int handle_type;
        } fh = {}; /* handle_bytes 0: EOVERFLOW natively, nothing is returned */
        int mount_id;
        return syscall(SYS_name_to_handle_at, AT_FDCWD, "/", &fh, &mount_id, 0);
}

static long call_vhangup(void) {
        return vhangup(); /* only ever our own pty, see setup_pty() */
}

#if defined(__x86_64__) || defined(__i386__)
static long call_iopl(void) {
        return syscall(SYS_iopl, 4); /* EINVAL natively: levels go to 3 */
}
#endif

#if defined(__x86_64__)
/* Puts SIGSEGV back to its default with the raw system call, past ASan's interceptor: where int 0x80
 * raises SIGSEGV the child must die of it, not abort in ASan's handler. */
static void default_sigsegv(void) {
        struct {
                void (*handler)(int);
                unsigned long flags;
                void (*restorer)(void);
                uint64_t mask;
        } sa = { .handler = SIG_DFL }; /* struct kernel_sigaction */
        (void) syscall(SYS_rt_sigaction, SIGSEGV, &sa, NULL, sizeof(uint64_t));
}

/* The same keyctl() through the compat ABIs, which a filter for x86_64 alone would let through. Without
 * IA32 emulation int 0x80 raises SIGSEGV before any filter sees it (then the probe says "unreachable"
 * and the check is skipped); without x32 support the kernel answers ENOSYS, but only after the filter
 * has seen the call, so the x32 check holds on every kernel. */
static long call_keyctl_i386(void) {
        long r;
        default_sigsegv();
        __asm__ volatile("int $0x80"
                         : "=a"(r)
                         : "a"(288L /* i386 keyctl */), "b"((long) KEYCTL_GET_KEYRING_ID),
                           "c"((long) KEY_SPEC_SESSION_KEYRING), "d"(0L)
                         : "memory");
        if (r < 0 && r > -4096) {
                errno = (int) -r;
                return -1;
        }
        return r;
}

static long call_keyctl_x32(void) {
        return syscall(0x40000000L /* __X32_SYSCALL_BIT */ | SYS_keyctl, KEYCTL_GET_KEYRING_ID,
                       KEY_SPEC_SESSION_KEYRING, 0);
}
#endif

static const struct {
        const char *name;
        long (*call)(void);
        int error;           /* what the filter answers */
        const char *feature; /* the kernel probe's feature that must be in reachable_state, or NULL */
        const char *reachable_state;
} blocked_checks[] = {
        { "ioctl(TIOCSTI)", call_tiocsti, EPERM },
        { "ioctl(TIOCSTI | 1 << 32)", call_tiocsti_high_bits, EPERM },
        { "ioctl(TIOCLINUX)", call_tioclinux, EPERM },
        { "keyctl", call_keyctl, EPERM },
#if defined(__x86_64__)
        { "keyctl via int 0x80 (i386 ABI)", call_keyctl_i386, EPERM, "ia32", "reachable" },
        { "keyctl via x32 ABI", call_keyctl_x32, EPERM },
#endif
        { "add_key", call_add_key, EPERM },
        { "request_key", call_request_key, EPERM },
        { "unshare(CLONE_NEWUSER)", call_unshare_newuser, EPERM },
        { "unshare(CLONE_NEWNS)", call_unshare_newns, EPERM },
        { "unshare(CLONE_FILES | CLONE_NEWNET)", call_unshare_newnet_files, EPERM },
        { "clone(CLONE_NEWUSER)", call_clone_newuser, EPERM },
        { "clone3", call_clone3, ENOSYS },
        { "io_uring_setup", call_io_uring_setup, ENOSYS },
        { "io_uring_enter", call_io_uring_enter, ENOSYS },
        { "io_uring_register", call_io_uring_register, ENOSYS },
        { "mount", call_mount, EPERM },
        { "umount2", call_umount2, EPERM },
        { "open_tree", call_open_tree, EPERM },
        { "fsopen", call_fsopen, EPERM },
        { "chroot", call_chroot, EPERM },
        { "setns", call_setns, EPERM },
        { "bpf", call_bpf, EPERM },
        { "perf_event_open", call_perf_event_open, EPERM },
        { "userfaultfd", call_userfaultfd, EPERM },
        { "clock_settime", call_clock_settime, EPERM },
        { "syslog", call_syslog, EPERM },
        { "finit_module", call_finit_module, EPERM },
        { "delete_module", call_delete_module, EPERM },
        { "swapon", call_swapon, EPERM },
        { "name_to_handle_at", call_name_to_handle_at, EPERM },
        { "vhangup", call_vhangup, EPERM },
#if defined(__x86_64__) || defined(__i386__)
        { "iopl", call_iopl, EPERM },
#endif
};

/* Runs call in a child with a pty of its own, filtered or not. Returns 0 if the call succeeded, its errno
 * if it failed, EXIT_SETUP, or 1000 + signal. */
static int run_call(long (*call)(void), bool filtered) {
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                if (setup_pty() < 0)
                        _exit(EXIT_SETUP);
                if (filtered && confine_seccomp_install() < 0)
                        _exit(EXIT_SETUP);
                errno = 0;
                long r = call();
                _exit(r >= 0 ? 0 : (errno > 0 && errno < EXIT_SETUP ? errno : EXIT_SETUP - 1));
        }
        return wait_child(pid);
}

static const char *describe(int code, char *buf, size_t size) {
        if (code == 0)
                snprintf(buf, size, "succeeded");
        else if (code == EXIT_SETUP)
                snprintf(buf, size, "child setup failed");
        else if (code >= 1000)
                snprintf(buf, size, "killed by signal %s", strsignal(code - 1000));
        else if (code < 0)
                snprintf(buf, size, "fork/wait failed: %s", strerror(-code));
        else
                snprintf(buf, size, "failed with %s", strerrorname_np(code) ?: "?");
        return buf;
}

/* What the kernel probe (tests/probe, built without sanitizers) says of feature: its state and detail.
 * The probe is $SANDBOXD_KERNEL_PROBE (set by meson test), or ../probe/sandboxd-kernel-probe beside this
 * binary when it is run by hand. Returns 0, or -errno if the probe could not be run. */
static int kernel_probe(const char *feature, char *state, size_t ssize, char *detail, size_t dsize) {
        char exe[PATH_MAX], cmd[PATH_MAX + 64], line[512];
        const char *probe = getenv("SANDBOXD_KERNEL_PROBE");

        if (!probe) {
                ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
                if (n < 0)
                        return -errno;
                exe[n] = 0;
                char *slash = strrchr(exe, '/');
                if (!slash)
                        return -EINVAL;
                snprintf(slash, sizeof(exe) - (size_t) (slash - exe), "/../probe/sandboxd-kernel-probe");
                probe = exe;
        }
        snprintf(cmd, sizeof(cmd), "'%s' %s", probe, feature);
        FILE *f = popen(cmd, "re");
        if (!f)
                return -errno;
        bool got = fgets(line, sizeof(line), f) != NULL;
        if (pclose(f) != 0 || !got)
                return -EIO;
        line[strcspn(line, "\n")] = 0;
        char *tab1 = strchr(line, '\t'), *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
        if (!tab2)
                return -EBADMSG;
        *tab2 = 0;
        snprintf(state, ssize, "%s", tab1 + 1);
        snprintf(detail, dsize, "%s", tab2 + 1);
        return 0;
}

static int test_blocked(void) {
        int failures = 0;

        for (size_t i = 0; i < ELEMENTSOF(blocked_checks); i++) {
                char before[64], after[64];

                if (blocked_checks[i].feature) {
                        char state[32], detail[256];
                        int r = kernel_probe(blocked_checks[i].feature, state, sizeof(state), detail,
                                             sizeof(detail));
                        if (r < 0) {
                                out("FAIL %s: the kernel probe could not be run: %s\n", blocked_checks[i].name,
                                    strerror(-r));
                                failures++;
                                continue;
                        }
                        if (strcmp(state, blocked_checks[i].reachable_state) != 0) {
                                /* Not checkable here: the call never reaches the filter. What is asserted
                                 * instead is what the probe saw: the filtered call dies of SIGSEGV too. A
                                 * forced probe result may stand on a kernel where the filter does answer. */
                                int filtered = run_call(blocked_checks[i].call, true);
                                bool forced = strstr(detail, "forced") != NULL;
                                bool ok = filtered == 1000 + SIGSEGV ||
                                          (forced && filtered == blocked_checks[i].error);
                                out("%s %s: filtered %s, as the probe found (%s: %s, %s)\n", ok ? "ok  " : "FAIL",
                                    blocked_checks[i].name, describe(filtered, after, sizeof(after)),
                                    blocked_checks[i].feature, state, detail);
                                out("SKIP: %s: the filter's answer cannot be checked on this kernel (%s: %s, "
                                    "%s)\n", blocked_checks[i].name, blocked_checks[i].feature, state, detail);
                                if (!ok)
                                        failures++;
                                continue;
                        }
                }

                /* Informational: without the filter the call must not already give the filter's answer,
                 * or the check below proves nothing on this machine (e.g. EPERM for lack of a
                 * capability when not running as root). */
                int native = run_call(blocked_checks[i].call, false);
                int filtered = run_call(blocked_checks[i].call, true);
                bool ok = filtered == blocked_checks[i].error;

                out("%s %s: filtered %s; unfiltered %s%s\n", ok ? "ok  " : "FAIL", blocked_checks[i].name,
                    describe(filtered, after, sizeof(after)), describe(native, before, sizeof(before)),
                    native == blocked_checks[i].error ? " (same: not discriminating here)" : "");
                if (!ok)
                        failures++;
        }
        return failures;
}

#define CHECK(cond)                                                                                         \
        do {                                                                                                \
                if (!(cond)) {                                                                              \
                        out("  FAIL %s:%d: %s (errno %s)\n", __func__, __LINE__, #cond,                     \
                            strerrorname_np(errno) ?: "0");                                                 \
                        failures++;                                                                         \
                }                                                                                           \
        } while (0)

#define CHECK_EQ(a, b)                                                                                      \
        do {                                                                                                \
                long long _a = (a), _b = (b);                                                               \
                if (_a != _b) {                                                                             \
                        out("  FAIL %s:%d: %s is %lld, expected %lld\n", __func__, __LINE__, #a, _a, _b);   \
                        failures++;                                                                         \
                }                                                                                           \
        } while (0)

static void *thread_main(void *arg) {
        return arg;
}

/* What a sandboxed program does all day must keep working under the filter. */
static int child_allowed(void) {
        int failures = 0;
        char buf[16];

        CHECK(setup_pty() >= 0);
        CHECK(confine_seccomp_install() >= 0);

        /* fork() is clone() without namespace flags. */
        pid_t pid = fork();
        if (pid == 0)
                _exit(0);
        CHECK(pid > 0 && wait_child(pid) == 0);

        /* posix_spawn() and pthread_create() try clone3 first: ENOSYS must send them to clone(). */
        char *argv[] = { (char *) "true", NULL };
        CHECK(posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) == 0 && wait_child(pid) == 0);

        pthread_t thread;
        void *ret = NULL;
        int r = pthread_create(&thread, NULL, thread_main, (void *) 0x2a);
        CHECK(r == 0);
        if (r == 0)
                CHECK(pthread_join(thread, &ret) == 0 && ret == (void *) 0x2a);

        /* Files, pipes, ordinary ioctls. */
        int p[2];
        CHECK(pipe2(p, O_CLOEXEC) == 0);
        CHECK(write(p[1], "hello", 5) == 5);
        int n = -1;
        CHECK(ioctl(p[0], FIONREAD, &n) == 0 && n == 5);
        CHECK(read(p[0], buf, sizeof(buf)) == 5 && memcmp(buf, "hello", 5) == 0);
        close(p[0]);
        close(p[1]);

        int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
        CHECK(fd >= 0);
        CHECK(read(fd, buf, 5) == 5 && memcmp(buf, "Name:", 5) == 0);
        close(fd);

        struct winsize ws;
        CHECK(ioctl(tty_fd, TIOCGWINSZ, &ws) == 0);

        /* Flags other than namespace ones, and queries. */
        CHECK(unshare(CLONE_FILES) == 0);
        CHECK(personality(0xffffffff) >= 0);

        /* The filter is inherited and still lets execve through. */
        pid = fork();
        if (pid == 0) {
                execl("/bin/sh", "sh", "-c", "exit 7", (char *) NULL);
                _exit(1);
        }
        CHECK(pid > 0 && wait_child(pid) == 7);

        return failures;
}

static bool status_field_is_zero(const char *status, const char *field) {
        const char *p = strstr(status, field);
        if (!p)
                return false;
        p += strlen(field);
        p += strspn(p, " \t");
        size_t digits = strspn(p, "0");
        return digits > 0 && (p[digits] == '\n' || p[digits] == '\0');
}

static int read_proc_self_status(char *buf, size_t size) {
        _cleanup_close_ int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, size - 1);
        if (n < 0)
                return -errno;
        buf[n] = 0;
        return 0;
}

static int child_drop_privileges_root(void) {
        int failures = 0;
        char status[8192];

        CHECK(confine_drop_privileges(65534, 65534) == 0);
        CHECK(getuid() == 65534 && geteuid() == 65534);
        CHECK(getgid() == 65534 && getegid() == 65534);
        CHECK(getgroups(0, NULL) == 0);
        CHECK(read_proc_self_status(status, sizeof(status)) == 0);
        const char *fields[] = { "CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:" };
        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                if (!status_field_is_zero(status, fields[i])) {
                        out("  FAIL %s not zero\n", fields[i]);
                        failures++;
                }
        CHECK(strstr(status, "NoNewPrivs:\t1\n"));
        CHECK(setuid(0) < 0 && errno == EPERM);
        CHECK(setgid(0) < 0 && errno == EPERM);
        return failures;
}

static int child_full_sequence(void) {
        int failures = 0;

        CHECK(confine_reset_signals() == 0);
        CHECK(confine_close_all_fds_except(NULL, 0) == 0);
        struct rlimit rl;
        CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
        CHECK(confine_set_rlimits(MIN(1024, rl.rlim_max), rl.rlim_max) == 0);
        if (getuid() == 0)
                CHECK(confine_drop_privileges(65534, 65534) == 0);
        CHECK(confine_seccomp_install() == 0);
        if (failures > 0)
                return failures;

        /* unshare -U is how a program would try for a user namespace; id -u shows who we are. */
        execl("/bin/sh", "sh", "-c",
              "u=$(id -u); test \"$u\" = \"$EXPECT_UID\" || { echo \"  FAIL uid $u\"; exit 1; }; "
              "if command -v unshare >/dev/null && unshare -U true 2>/dev/null; then "
              "echo '  FAIL unshare -U worked'; exit 1; fi",
              (char *) NULL);
        out("  FAIL execl: %s\n", strerror(errno));
        return 1;
}

static int child_drop_privileges_unprivileged(void) {
        int failures = 0;

        /* Not root: the bounding set cannot be emptied, and that must be an error, not a half drop. */
        CHECK(confine_drop_privileges(getuid() == 65534 ? 65533 : 65534, 65534) < 0);
        return failures;
}

static int child_drop_privileges_invalid(void) {
        int failures = 0;

        CHECK(confine_drop_privileges(0, 65534) == -EINVAL);
        CHECK(confine_drop_privileges(65534, 0) == -EINVAL);
        CHECK(confine_drop_privileges((uid_t) -1, 65534) == -EINVAL);
        CHECK(confine_drop_privileges(65534, (gid_t) -1) == -EINVAL);
        return failures;
}

static bool has_effective_cap(unsigned cap) {
        struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};

        if (syscall(SYS_capget, &header, data) < 0)
                return false;
        return data[cap / 32].effective & (UINT32_C(1) << (cap % 32));
}

static int child_rlimits(void) {
        int failures = 0;
        struct rlimit rl, before;

        CHECK(getrlimit(RLIMIT_NOFILE, &before) == 0);
        CHECK(confine_set_rlimits(0, 100) == -EINVAL);
        CHECK(confine_set_rlimits(200, 100) == -EINVAL);

        /* Only the current hard limit is sure to be allowed without CAP_SYS_RESOURCE. */
        rlim_t hard = MIN(before.rlim_max, (rlim_t) 65536);
        CHECK(confine_set_rlimits(256, hard) == 0);
        CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur == 256 && rl.rlim_max == hard);
        CHECK(getrlimit(RLIMIT_CORE, &rl) == 0 && rl.rlim_cur == 0 && rl.rlim_max == 0);
        CHECK(getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_max <= 8U * 1024U * 1024U &&
              rl.rlim_cur == rl.rlim_max);
        CHECK(getrlimit(RLIMIT_RTPRIO, &rl) == 0 && rl.rlim_max == 0);
        CHECK(getrlimit(RLIMIT_NICE, &rl) == 0 && rl.rlim_max == 0);

        if (has_effective_cap(CAP_SYS_RESOURCE)) {
                /* With CAP_SYS_RESOURCE (root, usually) the hard limit may also go up. */
                CHECK(confine_set_rlimits(1024, 65537) == 0);
                CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur == 1024 && rl.rlim_max == 65537);
        }
        return failures;
}

/* Every fd in /proc/self/fd but the directory's own must be one of want. */
static int check_open_fds(const int *want, size_t n_want) {
        int failures = 0;

        for (size_t i = 0; i < n_want; i++)
                if (fcntl(want[i], F_GETFD) < 0) {
                        out("  FAIL fd %d was closed\n", want[i]);
                        failures++;
                }

        for (int fd = 3; fd < 1100; fd++) {
                bool wanted = false;
                for (size_t i = 0; i < n_want; i++)
                        wanted = wanted || want[i] == fd;
                if (!wanted && fcntl(fd, F_GETFD) >= 0) {
                        out("  FAIL fd %d is still open\n", fd);
                        failures++;
                }
        }
        return failures;
}

static int child_close_fds(bool without_close_range) {
        int failures = 0;

        /* fd 1000 needs a soft limit above it: raise it if the hard limit allows, else leave 1000 out. */
        struct rlimit rl;
        CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
        if (rl.rlim_cur <= 1000 && rl.rlim_max > 1000) {
                rl.rlim_cur = 1001;
                CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
        }
        const int opened[] = { 10, 11, 12, 50, 100, 1000 };
        size_t n_opened = rl.rlim_cur > 1000 ? ELEMENTSOF(opened) : ELEMENTSOF(opened) - 1;

        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        CHECK(null >= 0);
        for (size_t i = 0; i < n_opened; i++)
                CHECK(dup2(null, opened[i]) == opened[i]);

        if (without_close_range) {
                /* Like an old kernel, or a seccomp filter of sandboxd's own that predates close_range. */
                scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
                CHECK(ctx);
                int nr = seccomp_syscall_resolve_name("close_range");
                CHECK(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0) == 0);
                CHECK(seccomp_load(ctx) == 0);
                seccomp_release(ctx);
                CHECK(syscall(SYS_close_range, 1000, 1000, 0) < 0 && errno == ENOSYS);
        }

        /* Unsorted, with duplicates, stdio, a negative and a closed fd in the list. */
        const int keep[] = { 50, -1, 11, 2, 5000, 11 };
        CHECK(confine_close_all_fds_except(keep, ELEMENTSOF(keep)) == 0);
        const int want[] = { 0, 1, 2, 11, 50 };
        failures += check_open_fds(want, ELEMENTSOF(want));

        CHECK(confine_close_all_fds_except(NULL, 0) == 0);
        failures += check_open_fds(want, 3);
        CHECK(confine_close_all_fds_except(NULL, 1) == -EINVAL);
        return failures;
}

static int child_close_fds_close_range(void) {
        return child_close_fds(false);
}

static int child_close_fds_proc(void) {
        return child_close_fds(true);
}

static void handler(int sig) {
}

/* After confine_signals_prepare(), only what was not SIG_DFL then is reset; the result for those is
 * the same as without it. */
static int child_reset_signals_prepared(void) {
        int failures = 0;
        struct sigaction sa = { .sa_handler = handler }, old;
        sigset_t mask;

        CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
        CHECK(signal(SIGPIPE, SIG_IGN) != SIG_ERR);
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        CHECK(sigprocmask(SIG_BLOCK, &mask, NULL) == 0);
        CHECK(confine_signals_prepare() == 0);
        CHECK(signal(SIGUSR2, SIG_IGN) != SIG_ERR); /* too late: documented as not reset */

        CHECK(confine_reset_signals() == 0);
        CHECK(sigaction(SIGUSR1, NULL, &old) == 0 && old.sa_handler == SIG_DFL);
        CHECK(sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL);
        CHECK(sigaction(SIGUSR2, NULL, &old) == 0 && old.sa_handler == SIG_IGN);
        CHECK(sigprocmask(SIG_SETMASK, NULL, &mask) == 0 && sigisemptyset(&mask));
        return failures;
}

static int child_reset_signals(void) {
        int failures = 0;
        struct sigaction sa = { .sa_handler = handler };
        sigset_t mask;

        CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
        CHECK(signal(SIGPIPE, SIG_IGN) != SIG_ERR);
        CHECK(signal(SIGTERM, SIG_IGN) != SIG_ERR);
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGRTMIN + 3);
        CHECK(sigprocmask(SIG_BLOCK, &mask, NULL) == 0);

        CHECK(confine_reset_signals() == 0);

        for (int sig = 1; sig < _NSIG; sig++) {
                struct sigaction old;
                if (sigaction(sig, NULL, &old) < 0)
                        continue; /* glibc's own */
                if (old.sa_handler != SIG_DFL) {
                        out("  FAIL signal %d not SIG_DFL\n", sig);
                        failures++;
                }
        }
        CHECK(sigprocmask(SIG_SETMASK, NULL, &mask) == 0 && sigisemptyset(&mask));

        /* What it is for: a program that writes to a closed pipe dies of SIGPIPE, as it expects. */
        pid_t pid = fork();
        if (pid == 0) {
                raise(SIGPIPE);
                _exit(0);
        }
        CHECK(pid > 0 && wait_child(pid) == 1000 + SIGPIPE);
        return failures;
}

/* confine_execvpe(file) in a child: its exit code, or 100 + what errno it came back with
 * (ENOENT 100+2, EACCES 100+13, ENOEXEC 100+8). */
static int execvpe_status(const char *file, char *const envp[]) {
        pid_t pid = fork();
        if (pid == 0) {
                char *argv[] = { (char *) file, (char *) "arg1", NULL };
                confine_execvpe(file, argv, envp);
                _exit(100 + errno);
        }
        return pid > 0 ? wait_child(pid) : -1;
}

static bool write_file_mode(const char *path, const char *content, mode_t mode) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        if (fd < 0)
                return false;
        bool ok = write(fd, content, strlen(content)) == (ssize_t) strlen(content);
        return close(fd) == 0 && ok && chmod(path, mode) == 0;
}

/* The search path is envp's, not ours; the errors execvp() goes on past, and those it stops at. */
static int child_execvpe(void) {
        int failures = 0;
        char dir[] = "/tmp/test-confine-XXXXXX", other[] = "/tmp/test-confine-XXXXXX", path[PATH_MAX],
             env_path[3 * PATH_MAX];

        CHECK(mkdtemp(dir) && mkdtemp(other));
        snprintf(path, sizeof(path), "%s/seven", dir);
        CHECK(write_file_mode(path, "#!/bin/sh\ntest \"$1\" = arg1 && exit 7\nexit 1\n", 0755));
        snprintf(path, sizeof(path), "%s/noshebang", dir);
        CHECK(write_file_mode(path, "test \"$1\" = arg1 && exit 9\nexit 1\n", 0755));
        snprintf(path, sizeof(path), "%s/seven", other); /* found first, but not executable */
        CHECK(write_file_mode(path, "#!/bin/sh\nexit 3\n", 0644));
        snprintf(path, sizeof(path), "%s/denied", other);
        CHECK(write_file_mode(path, "#!/bin/sh\nexit 3\n", 0644));

        /* Our own PATH leads nowhere; envp's finds it, past a missing directory and a non-executable
         * file of the same name. */
        const char *our_path = getenv("PATH");
        char *saved_path = strdup(our_path ?: "/usr/bin:/bin");
        CHECK(saved_path && setenv("PATH", "/nonexistent-sandboxd", 1) == 0);
        snprintf(env_path, sizeof(env_path), "PATH=/nonexistent-sandboxd:%s:%s", other, dir);
        char *envp[] = { (char *) "A=1", env_path, NULL };
        CHECK_EQ(execvpe_status("seven", envp), 7);
        /* A file the kernel cannot run goes to /bin/sh, arguments and all. */
        CHECK_EQ(execvpe_status("noshebang", envp), 9);
        /* Nowhere: ENOENT; only somewhere without the x bit: EACCES. */
        CHECK_EQ(execvpe_status("no-such-program-sandboxd", envp), 100 + ENOENT);
        CHECK_EQ(execvpe_status("denied", envp), 100 + EACCES);
        /* A name with a slash is not searched for. */
        snprintf(path, sizeof(path), "%s/seven", dir);
        CHECK_EQ(execvpe_status(path, envp), 7);
        CHECK_EQ(execvpe_status("./seven", envp), 100 + ENOENT);
        /* An empty element is the working directory. */
        CHECK(chdir(dir) == 0);
        char *envp_cwd[] = { (char *) "PATH=/nonexistent-sandboxd::", NULL };
        CHECK_EQ(execvpe_status("seven", envp_cwd), 7);
        /* No PATH in envp: /bin:/usr/bin. */
        char *envp_none[] = { (char *) "A=1", NULL };
        CHECK_EQ(execvpe_status("true", envp_none), 0);
        CHECK_EQ(execvpe_status("", envp_none), 100 + ENOENT);

        CHECK(saved_path && setenv("PATH", saved_path, 1) == 0);
        free(saved_path);
        char cmd[2 * PATH_MAX + 16];
        snprintf(cmd, sizeof(cmd), "rm -rf %s %s", dir, other);
        CHECK(system(cmd) == 0);
        return failures;
}

/* Runs fn in a child and reports it under name; the child's exit code is its number of failures. */
static int run_test(const char *name, int (*fn)(void)) {
        pid_t pid = fork();
        if (pid < 0)
                return 1;
        if (pid == 0) {
                int n = fn();
                _exit(MIN(n, 250));
        }

        int code = wait_child(pid);
        char buf[64];
        out("%s %s%s%s\n", code == 0 ? "ok  " : "FAIL", name, code == 0 ? "" : ": ",
            code == 0 ? "" : (code > 0 && code < 1000 ? "see above" : describe(code, buf, sizeof(buf))));
        return code != 0;
}

int main(void) {
        int failures = 0;
        char uid[16];

        /* What the full sequence ends as: nobody if we can drop to it, else ourselves. */
        snprintf(uid, sizeof(uid), "%u", getuid() == 0 ? 65534U : (unsigned) getuid());
        setenv("EXPECT_UID", uid, 1);
        out("running as uid %u\n", (unsigned) getuid());

        /* Each child builds the filter itself, then the same with the program compiled beforehand. */
        failures += test_blocked();
        failures += run_test("allowed calls under the filter", child_allowed);
        bool prepared = confine_seccomp_prepare() >= 0 && confine_seccomp_prepare() >= 0; /* idempotent */
        out("%s confine_seccomp_prepare(), twice\n", prepared ? "ok  " : "FAIL");
        failures += !prepared;
        out("with the prepared filter:\n");
        failures += test_blocked();
        failures += run_test("allowed calls under the prepared filter", child_allowed);
        failures += run_test("confine_drop_privileges() rejects uid/gid 0 and -1",
                             child_drop_privileges_invalid);
        if (getuid() == 0)
                failures += run_test("confine_drop_privileges(65534, 65534)", child_drop_privileges_root);
        else
                failures += run_test("confine_drop_privileges() fails without privileges",
                                     child_drop_privileges_unprivileged);
        failures += run_test("confine_set_rlimits()", child_rlimits);
        failures += run_test("confine_close_all_fds_except() with close_range", child_close_fds_close_range);
        failures += run_test("confine_close_all_fds_except() via /proc/self/fd", child_close_fds_proc);
        failures += run_test("confine_reset_signals()", child_reset_signals);
        failures += run_test("confine_reset_signals() after confine_signals_prepare()",
                             child_reset_signals_prepared);
        failures += run_test("full sequence, then exec", child_full_sequence);
        failures += run_test("confine_execvpe() searches envp's PATH", child_execvpe);

        out("%s: %d failure(s)\n", failures ? "FAILED" : "passed", failures);
        return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
