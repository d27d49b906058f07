/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Warm scopes: the next Exec's scope, made ahead of time, so a command waits for no systemd job.
 *
 * Starting a transient scope costs a StartTransientUnit round trip and a JobRemoved signal, several
 * milliseconds on a busy systemd, which dwarfs everything else an Exec does. So after an Exec,
 * sandboxd asks for the next one's scope right away, holding a placeholder process of ours (host
 * PID namespace, invisible to the sandbox) that waits for EOF on a pipe. The next Exec with the same
 * limits moves its confined child into that scope's cgroups, in every hierarchy exactly where the
 * placeholder is and closes the pipe. Nothing of the command runs before it is in its scope.
 *
 * systemd 252 takes RuntimeMaxUSec= of a scope only when it is created, so a warm scope carries an
 * upper bound (the type's longest timeout plus the time it may wait warm) and sandboxd stops it at
 * the Exec's own deadline (sandbox-exec.c); without sandboxd, systemd's bound still ends it. A warm
 * scope unused for a while is let go. */
#include "warm-scope.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "sandbox.h"
#include "sandboxd-manager.h"
#include "time-util.h"
#include "unit.h"

#define WARM_IDLE_USEC (5 * 60 * USEC_PER_SEC)

struct WarmScope {
        Sandbox *sandbox;
        char unit[UNIT_NAME_MAX];
        uint64_t tasks_max, memory_max, runtime_max;
        pid_t placeholder;
        int hold_fd;                 /* closing it ends the placeholder */
        sd_event_source *child_source, *idle_timer;
        JobWait *job;
        bool ready;
        char *cgroups;               /* the placeholder's /proc/PID/cgroup */
        int fds[WARM_SCOPE_FDS_MAX];  /* opened ahead for the Exec that takes it (warm_scope_open_cgroups()) */
        size_t n_fds;
        int cgroup2_fd;
        bool opened;
};

static int open_cgroups(WarmScope *w, int *fds, size_t n_max, size_t *ret_n, int *ret_cgroup2_fd);

const char *warm_scope_unit(const WarmScope *w) {
        return w->unit;
}

WarmScope *warm_scope_free(WarmScope *w) {
        if (!w)
                return NULL;
        if (w->sandbox && w->sandbox->warm == w)
                w->sandbox->warm = NULL;
        job_wait_cancel(w->job);
        w->hold_fd = safe_close(w->hold_fd);
        /* The child source stays until the placeholder is reaped: it is ours. */
        if (w->child_source) {
                (void) sd_event_source_set_userdata(w->child_source, NULL);
                (void) sd_event_source_set_floating(w->child_source, true);
                w->child_source = sd_event_source_unref(w->child_source);
        }
        w->idle_timer = sd_event_source_disable_unref(w->idle_timer);
        for (size_t i = 0; i < w->n_fds; i++)
                safe_close(w->fds[i]);
        safe_close(w->cgroup2_fd);
        free(w->cgroups);
        free(w);
        return NULL;
}

static int on_placeholder_exit(sd_event_source *es, const siginfo_t *si, void *userdata) {
        WarmScope *w = userdata;

        if (w) {
                w->child_source = sd_event_source_disable_unref(w->child_source);
                if (w->sandbox && w->sandbox->warm == w)
                        warm_scope_free(w); /* died before it was used: no warm scope then */
        } else
                sd_event_source_disable_unref(es);
        return 0;
}

static int on_idle(sd_event_source *es, uint64_t usec, void *userdata) {
        warm_scope_free(userdata);
        return 0;
}

static int read_cgroups(pid_t pid, char **ret) {
        char path[64], buf[4096];
        _cleanup_close_ int fd = -EBADF;
        ssize_t n;

        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
                return n < 0 ? -errno : -EIO;
        buf[n] = 0;
        *ret = strdup(buf);
        return *ret ? 0 : -ENOMEM;
}

static void on_warm_started(Manager *m, const char *result, const sd_bus_error *error, void *userdata) {
        WarmScope *w = userdata;

        w->job = NULL;
        if (!result || !streq(result, "done") || read_cgroups(w->placeholder, &w->cgroups) < 0) {
                warm_scope_free(w);
                return;
        }
        w->ready = true;
        /* What the Exec's child needs to enter the scope, opened now rather than on its way. */
        if (open_cgroups(w, w->fds, ELEMENTSOF(w->fds), &w->n_fds, &w->cgroup2_fd) >= 0)
                w->opened = true;
        (void) sd_event_add_time_relative(m->event, &w->idle_timer, CLOCK_MONOTONIC, WARM_IDLE_USEC, USEC_PER_SEC,
                                          on_idle, w);
}

static int append_warm_props(sd_bus_message *msg, void *userdata) {
        WarmScope *w = userdata;
        char desc[128];

        snprintf(desc, sizeof(desc), "sandbox %s command", w->sandbox->id);
        return sd_bus_message_append(msg, "(sv)(sv)(sv)(sv)(sv)(sv)(sv)(sv)(sv)",
                                     "Description", "s", desc,
                                     "Slice", "s", w->sandbox->slice,
                                     "PIDs", "au", 1, (uint32_t) w->placeholder,
                                     "TasksMax", "t", w->tasks_max,
                                     "MemoryMax", "t", w->memory_max,
                                     "RuntimeMaxUSec", "t", w->runtime_max,
                                     "TimeoutStopUSec", "t", (uint64_t) USEC_PER_SEC,
                                     "CollectMode", "s", "inactive-or-failed",
                                     "SendSIGHUP", "b", 1);
}

static int spawn_placeholder(const char *init_path, int hold_fd, pid_t *ret) {
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        sigset_t all, none;
        int r;

        r = posix_spawn_file_actions_init(&fa);
        if (r != 0)
                return -r;
        r = posix_spawnattr_init(&attr);
        if (r != 0) {
                posix_spawn_file_actions_destroy(&fa);
                return -r;
        }
        (void) sigfillset(&all);
        (void) sigemptyset(&none);
        if ((r = posix_spawn_file_actions_adddup2(&fa, hold_fd, 0)) == 0 &&
            (r = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0)) == 0 &&
            (r = posix_spawn_file_actions_adddup2(&fa, 1, 2)) == 0 &&
            (r = posix_spawn_file_actions_addclosefrom_np(&fa, 3)) == 0 &&
            (r = posix_spawnattr_setsigdefault(&attr, &all)) == 0 &&
            (r = posix_spawnattr_setsigmask(&attr, &none)) == 0 &&
            (r = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK)) == 0) {
                char *argv[] = { (char *) "sandbox-init", (char *) "--hold", NULL };
                char *envp[] = { NULL };
                r = posix_spawn(ret, init_path, &fa, &attr, argv, envp);
        }
        posix_spawnattr_destroy(&attr);
        posix_spawn_file_actions_destroy(&fa);
        return -r;
}

int warm_scope_prepare(Sandbox *s, uint64_t tasks_max, uint64_t memory_max, uint64_t max_timeout_usec) {
        Manager *m = s->manager;
        _cleanup_close_pair_ int hold[2] = { -EBADF, -EBADF };
        WarmScope *w;
        int r;

        if (s->warm || s->state != SANDBOX_RUNNING || m->exiting)
                return 0;
        if (pipe2(hold, O_CLOEXEC) < 0)
                return -errno;
        w = calloc(1, sizeof(WarmScope));
        if (!w)
                return -ENOMEM;
        w->sandbox = s;
        w->hold_fd = -EBADF;
        w->cgroup2_fd = -EBADF;
        w->tasks_max = tasks_max;
        w->memory_max = memory_max;
        w->runtime_max = max_timeout_usec + WARM_IDLE_USEC + 60 * USEC_PER_SEC;
        snprintf(w->unit, sizeof(w->unit), "sandbox-%s-exec-%" PRIu64 ".scope", s->id, sandbox_next_unit_number(s));

        /* posix_spawn() (CLONE_VM | CLONE_VFORK in glibc) rather than fork(): no copy of our page
         * tables, and nothing of ours in the child but a pipe on stdin and /dev/null on stdout and
         * stderr, default signal dispositions and an empty mask. */
        pid_t pid;
        r = spawn_placeholder(m->init_path, hold[0], &pid);
        if (r < 0) {
                free(w);
                return r;
        }
        w->placeholder = pid;
        w->hold_fd = TAKE_FD(hold[1]);
        s->warm = w;
        r = sd_event_add_child(m->event, &w->child_source, pid, WEXITED, on_placeholder_exit, w);
        if (r >= 0)
                r = unit_start_transient(m, w->unit, append_warm_props, NULL, w, on_warm_started, w, &w->job);
        if (r < 0) {
                (void) kill(pid, SIGKILL);
                warm_scope_free(w);
                return r;
        }
        return 0;
}

int warm_scope_prepare_default(Sandbox *s) {
        const SandboxType *t = sandboxd_config_find_type(&s->manager->config, s->type);

        if (!t)
                return -ENOENT;
        return warm_scope_prepare(s, t->tasks_max, t->memory_max, t->max_timeout_usec);
}

WarmScope *warm_scope_take(Sandbox *s, uint64_t tasks_max, uint64_t memory_max) {
        WarmScope *w = s->warm;

        if (!w || !w->ready || w->tasks_max != tasks_max || w->memory_max != memory_max || !w->child_source)
                return NULL;
        s->warm = NULL;
        w->idle_timer = sd_event_source_disable_unref(w->idle_timer);
        return w;
}

static int cgroup_dir(const char *controllers, char *buf, size_t n) {
        if (isempty(controllers)) {
                /* the cgroup2 line: its own mount on a hybrid host, the root on a pure one */
                snprintf(buf, n, access("/sys/fs/cgroup/unified", F_OK) == 0 ? "/sys/fs/cgroup/unified"
                                                                              : "/sys/fs/cgroup");
                return 1;
        }
        snprintf(buf, n, "/sys/fs/cgroup/%s",
                 strncmp(controllers, "name=", 5) == 0 ? controllers + 5 : controllers);
        /* the hierarchies systemd tracks and limits with; any other may legitimately be missing */
        return strstr(controllers, "name=systemd") || strstr(controllers, "memory") || strstr(controllers, "pids");
}

static char *self_cgroups = NULL; /* sandboxd's own /proc/self/cgroup, read once, never freed */

static bool cgroup_line_is_ours(const char *line) {
        size_t n = strlen(line);

        for (const char *p = self_cgroups; p && *p;) {
                const char *end = strchrnul(p, '\n');
                if ((size_t) (end - p) == n && strncmp(p, line, n) == 0)
                        return true;
                p = *end ? end + 1 : end;
        }
        return false;
}

/* Calls fn for every hierarchy the placeholder is in where a child of ours is not already, with the
 * directory of its cgroup there, whether that is the cgroup2 hierarchy, and whether systemd needs the
 * command there. */
static int for_each_cgroup(WarmScope *w, int (*fn)(const char *dir, bool v2, bool essential, void *userdata),
                           void *userdata) {
        _cleanup_free_ char *copy = strdup(w->cgroups);
        char *save = NULL;
        int r;

        if (!copy)
                return -ENOMEM;
        /* Our own cgroups, once: sandboxd never moves. A child we forked starts there. */
        if (!self_cgroups && read_cgroups(getpid(), &self_cgroups) < 0)
                self_cgroups = NULL;
        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *a = strchr(line, ':'), *b;
                if (!a || !(b = strchr(a + 1, ':')))
                        continue;
                /* Where the placeholder sits in the same cgroup as sandboxd (typically the root of the
                 * hierarchies systemd does not manage), the child is there already: every migration is
                 * work the kernel serializes, so skip it. */
                if (cgroup_line_is_ours(line))
                        continue;
                *b = 0;
                char dir[256], path[4096];
                bool v2 = isempty(a + 1);
                int essential = cgroup_dir(a + 1, dir, sizeof(dir));
                snprintf(path, sizeof(path), "%s%s", dir, streq(b + 1, "/") ? "" : b + 1);
                r = fn(path, v2, essential, userdata);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int enter_one(const char *dir, bool v2, bool essential, void *userdata) {
        const char *pidbuf = userdata;
        size_t n = strlen(pidbuf);
        char path[4096 + 16];

        snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if ((fd < 0 || write(fd, pidbuf, n) != (ssize_t) n) && essential)
                return -errno ?: -EIO;
        return 0;
}

int warm_scope_enter(WarmScope *w, pid_t pid) {
        char pidbuf[32];
        int r;

        if (!w->sandbox)
                return -ESTALE;
        snprintf(pidbuf, sizeof(pidbuf), "%d", (int) pid);
        r = for_each_cgroup(w, enter_one, pidbuf);
        if (r < 0)
                return r;
        /* The command is in; the placeholder may go. */
        warm_scope_release(w);
        return 0;
}

typedef struct OpenCgroups {
        int *fds;
        size_t n, n_max;
        int cgroup2_fd;
} OpenCgroups;

static int open_one(const char *dir, bool v2, bool essential, void *userdata) {
        OpenCgroups *o = userdata;
        char path[4096 + 16];
        int fd;

        if (v2) {
                fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        return -errno;
                safe_close(o->cgroup2_fd);
                o->cgroup2_fd = fd;
                return 0;
        }
        if (o->n >= o->n_max)
                return -E2BIG;
        /* "tasks", not cgroup.procs: a thread writing "0" there moves only itself, which the kernel
         * does without the global write lock that cgroup.procs takes, whose first taker after a quiet
         * spell waits out an RCU grace period (8-16 ms here). The child is single-threaded. */
        snprintf(path, sizeof(path), "%s/tasks", dir);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return essential ? -errno : 0;
        o->fds[o->n++] = fd;
        return 0;
}

int warm_scope_open_cgroups(WarmScope *w, int *fds, size_t n_max, size_t *ret_n, int *ret_cgroup2_fd) {
        if (w->opened && w->n_fds <= n_max) {
                /* Handed over: the caller closes them. */
                memcpy(fds, w->fds, w->n_fds * sizeof(int));
                *ret_n = w->n_fds;
                *ret_cgroup2_fd = w->cgroup2_fd;
                w->n_fds = 0;
                w->cgroup2_fd = -EBADF;
                w->opened = false;
                return 0;
        }
        return open_cgroups(w, fds, n_max, ret_n, ret_cgroup2_fd);
}

static int open_cgroups(WarmScope *w, int *fds, size_t n_max, size_t *ret_n, int *ret_cgroup2_fd) {
        OpenCgroups o = { .fds = fds, .n_max = n_max, .cgroup2_fd = -EBADF };
        int r;

        if (!w->sandbox)
                return -ESTALE;
        r = for_each_cgroup(w, open_one, &o);
        if (r < 0) {
                for (size_t i = 0; i < o.n; i++)
                        safe_close(fds[i]);
                safe_close(o.cgroup2_fd);
                return r;
        }
        *ret_n = o.n;
        *ret_cgroup2_fd = o.cgroup2_fd;
        return 0;
}

void warm_scope_release(WarmScope *w) {
        w->hold_fd = safe_close(w->hold_fd);
}
