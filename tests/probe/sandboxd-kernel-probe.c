/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Probes the kernel features the test suites' expectations depend on, outside any seccomp filter. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Each probe runs in a forked child, so that a call the kernel answers with a signal (int 0x80 without
 * IA32 emulation raises SIGSEGV) ends only that child. The child puts the signals such a call raises back
 * to their defaults with the raw system call, past any sanitizer's interceptor: under ASan the child would
 * otherwise abort in ASan's SEGV handler instead of dying of the signal we want to observe.
 *
 * Output, one line per feature: NAME <tab> STATE <tab> DETAIL. With --human: "kernel: LABEL: STATE (DETAIL)".
 * SANDBOXD_TEST_KERNEL=name=state[,name=state...] replaces what the probe found (a test-only override, to
 * exercise the other branch of a kernel-dependent test on a machine that has only one). docs/testing.md
 * lists what each test checks in each state. */

#define NOBODY 65534

typedef struct Probe {
        const char *name;
        const char *label;
        const char *const *states; /* the first one is what the project's own test machines had */
        void (*probe)(char *state, size_t ssize, char *detail, size_t dsize);
} Probe;

static void reset_fault_signals(void) {
        /* struct kernel_sigaction: handler, flags, restorer, mask; SIG_DFL needs no restorer */
        struct {
                void (*handler)(int);
                unsigned long flags;
                void (*restorer)(void);
                uint64_t mask;
        } sa = { .handler = SIG_DFL };
        for (int sig = 1; sig < 32; sig++)
                if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGSYS)
                        (void) syscall(SYS_rt_sigaction, sig, &sa, NULL, sizeof(uint64_t));
}

static int drop_to_nobody(void) {
        if (geteuid() != 0)
                return 0;
        if (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
            setresuid(NOBODY, NOBODY, NOBODY) < 0)
                return -errno;
        return 0;
}

/* Runs fn in a child (as nobody if unprivileged is set). Returns 0 with *ret = fn's value (negative errno
 * or a non-negative result), or a positive signal number if the child was killed, or -1 on a failure of
 * the probe itself. */
static int in_child(long (*fn)(void), bool unprivileged, long *ret) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -1;
        pid_t pid = fork();
        if (pid < 0) {
                close(p[0]);
                close(p[1]);
                return -1;
        }
        if (pid == 0) {
                close(p[0]);
                reset_fault_signals();
                long r = unprivileged && drop_to_nobody() < 0 ? -ENOTRECOVERABLE : fn();
                (void) !write(p[1], &r, sizeof(r));
                _exit(0);
        }
        close(p[1]);
        long r = 0;
        ssize_t n = read(p[0], &r, sizeof(r));
        close(p[0]);
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -1;
        if (WIFSIGNALED(status))
                return WTERMSIG(status);
        if (n != (ssize_t) sizeof(r) || r == -ENOTRECOVERABLE)
                return -1;
        *ret = r;
        return 0;
}

static long errno_or(long r) {
        return r < 0 ? -errno : r;
}

static void describe_result(int k, long r, const char *call, char *detail, size_t dsize) {
        if (k > 0)
                snprintf(detail, dsize, "%s -> SIG%s", call, sigabbrev_np(k) ?: "?");
        else if (r < 0)
                snprintf(detail, dsize, "%s -> %s", call, strerrorname_np((int) -r) ?: "?");
        else
                snprintf(detail, dsize, "%s -> %ld", call, r);
}

#if defined(__x86_64__)
static long i386_getpid(void) {
        long r;
        __asm__ volatile("int $0x80" : "=a"(r) : "a"(20L /* i386 getpid */) : "memory");
        return r;
}

static void probe_ia32(char *state, size_t ssize, char *detail, size_t dsize) {
        long r = 0;
        int k = in_child(i386_getpid, false, &r);
        describe_result(k, r, "int 0x80 getpid", detail, dsize);
        /* reachable: the compat table answered (the pid, or an errno the compat entry chose) */
        snprintf(state, ssize, "%s", k == 0 && r != -ENOSYS ? "reachable" : k < 0 ? "unknown" : "unreachable");
}

static long x32_getpid(void) {
        return errno_or(syscall(0x40000000L /* __X32_SYSCALL_BIT */ | SYS_getpid));
}

static void probe_x32(char *state, size_t ssize, char *detail, size_t dsize) {
        long r = 0;
        int k = in_child(x32_getpid, false, &r);
        describe_result(k, r, "x32 getpid", detail, dsize);
        snprintf(state, ssize, "%s", k == 0 && r >= 0 ? "present" : k < 0 ? "unknown" : "absent");
}
#else
static void probe_ia32(char *state, size_t ssize, char *detail, size_t dsize) {
        snprintf(state, ssize, "unreachable");
        snprintf(detail, dsize, "not an x86_64 machine");
}

static void probe_x32(char *state, size_t ssize, char *detail, size_t dsize) {
        snprintf(state, ssize, "absent");
        snprintf(detail, dsize, "not an x86_64 machine");
}
#endif

static void read_sysctl(const char *path, char *buf, size_t size) {
        FILE *f = fopen(path, "re");
        if (!f || !fgets(buf, (int) size, f))
                snprintf(buf, size, "-");
        if (f)
                fclose(f);
        buf[strcspn(buf, "\n")] = 0;
}

static long io_uring_setup_one(void) {
        struct {
                uint32_t fields[10];
                uint32_t offsets[20];
        } params = {}; /* struct io_uring_params, 120 bytes */
        long r = errno_or(syscall(SYS_io_uring_setup, 1, &params));
        if (r >= 0)
                close((int) r);
        return r;
}

static void probe_io_uring(char *state, size_t ssize, char *detail, size_t dsize) {
        long r = 0;
        char sysctl[32], call[128];
        read_sysctl("/proc/sys/kernel/io_uring_disabled", sysctl, sizeof(sysctl));
        int k = in_child(io_uring_setup_one, true, &r);
        snprintf(call, sizeof(call), "io_uring_setup as nobody (kernel.io_uring_disabled=%s)", sysctl);
        describe_result(k, r >= 0 ? 0 : r, call, detail, dsize);
        snprintf(state, ssize, "%s",
                 k != 0 ? "unknown" : r >= 0 ? "available" : r == -ENOSYS ? "absent" : "disabled");
}

static long openat2_root(void) {
        struct {
                uint64_t flags, mode, resolve;
        } how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC };
        long r = errno_or(syscall(437 /* SYS_openat2 */, AT_FDCWD, "/", &how, sizeof(how)));
        if (r >= 0)
                close((int) r);
        return r;
}

static void probe_openat2(char *state, size_t ssize, char *detail, size_t dsize) {
        long r = 0;
        int k = in_child(openat2_root, false, &r);
        describe_result(k, r >= 0 ? 0 : r, "openat2(\"/\")", detail, dsize);
        snprintf(state, ssize, "%s", k != 0 ? "unknown" : r >= 0 ? "present" : "absent");
}

static long unshare_user(void) {
        return errno_or(unshare(CLONE_NEWUSER));
}

static void probe_userns(char *state, size_t ssize, char *detail, size_t dsize) {
        long r = 0;
        char clone_sysctl[32], max[32], call[160];
        read_sysctl("/proc/sys/kernel/unprivileged_userns_clone", clone_sysctl, sizeof(clone_sysctl));
        read_sysctl("/proc/sys/user/max_user_namespaces", max, sizeof(max));
        int k = in_child(unshare_user, true, &r);
        snprintf(call, sizeof(call),
                 "unshare(CLONE_NEWUSER) as nobody (kernel.unprivileged_userns_clone=%s, "
                 "user.max_user_namespaces=%s)", clone_sysctl, max);
        describe_result(k, r, call, detail, dsize);
        snprintf(state, ssize, "%s", k != 0 ? "unknown" : r == 0 ? "allowed" : "refused");
}

static void probe_loop(char *state, size_t ssize, char *detail, size_t dsize) {
        int fd = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        if (fd < 0) {
                snprintf(detail, dsize, "open /dev/loop-control -> %s", strerrorname_np(errno) ?: "?");
                snprintf(state, ssize, "absent");
                return;
        }
        close(fd);
        snprintf(detail, dsize, "/dev/loop-control opens");
        snprintf(state, ssize, "present");
}

static void probe_ext4(char *state, size_t ssize, char *detail, size_t dsize) {
        char line[256];
        bool found = false;
        FILE *f = fopen("/proc/filesystems", "re");
        while (f && fgets(line, sizeof(line), f))
                if (strcmp(line + strcspn(line, "\t"), "\text4\n") == 0)
                        found = true;
        if (f)
                fclose(f);
        snprintf(detail, dsize, "%s", found ? "in /proc/filesystems" : "not in /proc/filesystems");
        snprintf(state, ssize, "%s", found ? "present" : "absent");
}

#define CGROUP2_MAGIC 0x63677270
#define TMPFS_MAGIC_ 0x01021994

static void probe_cgroup(char *state, size_t ssize, char *detail, size_t dsize) {
        struct statfs fs;
        if (statfs("/sys/fs/cgroup", &fs) < 0) {
                snprintf(state, ssize, "unknown");
                snprintf(detail, dsize, "statfs /sys/fs/cgroup -> %s", strerrorname_np(errno) ?: "?");
        } else if (fs.f_type == CGROUP2_MAGIC) {
                snprintf(state, ssize, "unified");
                snprintf(detail, dsize, "/sys/fs/cgroup is cgroup2");
        } else if (statfs("/sys/fs/cgroup/unified", &fs) == 0 && fs.f_type == CGROUP2_MAGIC) {
                snprintf(state, ssize, "hybrid");
                snprintf(detail, dsize, "v1 controllers, cgroup2 at /sys/fs/cgroup/unified");
        } else {
                snprintf(state, ssize, "legacy");
                snprintf(detail, dsize, "v1 controllers only");
        }
}

static void probe_tiocsti(char *state, size_t ssize, char *detail, size_t dsize) {
        char v[32];
        read_sysctl("/proc/sys/dev/tty/legacy_tiocsti", v, sizeof(v));
        /* without the sysctl (kernels before 6.2) TIOCSTI is always allowed on one's own terminal */
        bool allowed = strcmp(v, "0") != 0;
        snprintf(detail, dsize, "dev.tty.legacy_tiocsti=%s", v);
        snprintf(state, ssize, "%s", allowed ? "allowed" : "refused");
}

static const Probe probes[] = {
        { "ia32", "ia32 compat entry", (const char *const[]){ "reachable", "unreachable", NULL }, probe_ia32 },
        { "x32", "x32 ABI", (const char *const[]){ "absent", "present", NULL }, probe_x32 },
        { "io_uring", "io_uring for unprivileged users",
          (const char *const[]){ "available", "disabled", "absent", NULL }, probe_io_uring },
        { "openat2", "openat2", (const char *const[]){ "present", "absent", NULL }, probe_openat2 },
        { "userns", "user namespaces for unprivileged users",
          (const char *const[]){ "allowed", "refused", NULL }, probe_userns },
        { "loop", "loop devices", (const char *const[]){ "present", "absent", NULL }, probe_loop },
        { "ext4", "ext4", (const char *const[]){ "present", "absent", NULL }, probe_ext4 },
        { "cgroup", "cgroup layout", (const char *const[]){ "hybrid", "unified", "legacy", NULL }, probe_cgroup },
        { "tiocsti", "TIOCSTI for unprivileged users",
          (const char *const[]){ "allowed", "refused", NULL }, probe_tiocsti },
};

static bool state_valid(const Probe *p, const char *state) {
        for (const char *const *s = p->states; *s; s++)
                if (strcmp(*s, state) == 0)
                        return true;
        return false;
}

/* The override for p from SANDBOXD_TEST_KERNEL, validated. Returns 1 and fills state if there is one, 0
 * if not, -EINVAL (and says why) if the variable is malformed. */
static int override_for(const Probe *p, char *state, size_t ssize) {
        const char *env = getenv("SANDBOXD_TEST_KERNEL");
        int found = 0;

        if (!env || !*env)
                return 0;
        for (const char *item = env; *item;) {
                size_t len = strcspn(item, ",");
                const char *eq = memchr(item, '=', len);
                if (!eq) {
                        fprintf(stderr, "SANDBOXD_TEST_KERNEL: '%.*s' is not NAME=STATE\n", (int) len, item);
                        return -EINVAL;
                }
                size_t nlen = (size_t) (eq - item), vlen = len - nlen - 1;
                bool known = false;
                for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
                        if (strlen(probes[i].name) == nlen && strncmp(probes[i].name, item, nlen) == 0)
                                known = true;
                if (!known) {
                        fprintf(stderr, "SANDBOXD_TEST_KERNEL: no feature '%.*s'\n", (int) nlen, item);
                        return -EINVAL;
                }
                if (strlen(p->name) == nlen && strncmp(p->name, item, nlen) == 0) {
                        snprintf(state, ssize, "%.*s", (int) vlen, eq + 1);
                        if (!state_valid(p, state)) {
                                fprintf(stderr, "SANDBOXD_TEST_KERNEL: '%s' is no state of %s\n", state, p->name);
                                return -EINVAL;
                        }
                        found = 1;
                }
                item += len + (item[len] == ',');
        }
        return found;
}

static void usage(void) {
        printf("sandboxd-kernel-probe [--human] [FEATURE...]\n\n"
               "Probes the kernel features the tests depend on, each in a forked child, and prints\n"
               "NAME<tab>STATE<tab>DETAIL per feature (--human: \"kernel: LABEL: STATE (DETAIL)\").\n"
               "SANDBOXD_TEST_KERNEL=NAME=STATE[,...] replaces a probe's result (tests only).\n\n"
               "Features and their states:\n");
        for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
                printf("  %-9s", probes[i].name);
                for (const char *const *s = probes[i].states; *s; s++)
                        printf(" %s", *s);
                printf("\n");
        }
}

int main(int argc, char *argv[]) {
        bool human = false;
        int first = 1;

        if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
                usage();
                return 0;
        }
        if (argc > 1 && strcmp(argv[1], "--human") == 0) {
                human = true;
                first = 2;
        }
        for (int a = first; a < argc; a++) {
                bool known = false;
                for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
                        known = known || strcmp(argv[a], probes[i].name) == 0;
                if (!known) {
                        fprintf(stderr, "sandboxd-kernel-probe: no feature '%s' (see --help)\n", argv[a]);
                        return 2;
                }
        }

        for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
                const Probe *p = &probes[i];
                char state[32], detail[256];
                bool wanted = first >= argc;

                for (int a = first; a < argc; a++)
                        wanted = wanted || strcmp(argv[a], p->name) == 0;
                if (!wanted)
                        continue;
                int r = override_for(p, state, sizeof(state));
                if (r < 0)
                        return 2;
                if (r > 0)
                        snprintf(detail, sizeof(detail), "forced by SANDBOXD_TEST_KERNEL");
                else
                        p->probe(state, sizeof(state), detail, sizeof(detail));
                if (human)
                        printf("kernel: %s: %s (%s)\n", p->label, state, detail);
                else
                        printf("%s\t%s\t%s\n", p->name, state, detail);
        }
        return 0;
}
