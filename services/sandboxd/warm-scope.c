/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Warm scopes: the next Exec's scope, made ahead of time, so a command waits for no systemd job.
 *
 * Starting a transient scope costs a StartTransientUnit round trip and a JobRemoved signal, several
 * milliseconds on a busy systemd, which dwarfs everything else an Exec does. So after an Exec,
 * sandboxd asks for the next one's scope right away, holding a placeholder process of ours (host
 * PID namespace, invisible to the sandbox). The next Exec with the same limits has its confined child
 * born in that scope's cgroup2 cgroup and write itself into its cgroup v1 ones, exactly where the
 * placeholder is, and the placeholder is killed. Nothing of the command runs before it is in its scope.
 *
 * The placeholder is not a program: it is a clone of sandboxd sharing its memory (like a thread, but
 * a process of its own, so systemd can move it alone), on a small stack of its own, that closes every
 * file descriptor and sleeps until a signal ends it. Creating one costs about what a thread costs; an
 * exec of a binary cost as much again as the Exec's own command (the dynamic loader, glibc's CPU
 * feature probing, which traps to the hypervisor here). It dies with sandboxd (PR_SET_PDEATHSIG).
 *
 * One warm scope is not enough: while it is being made, every other Exec of the sandbox would ask
 * systemd for a scope of its own and fork sandboxd for its child, whose copy-on-write faults were
 * most of sandboxd's CPU time per Exec under load; and a client running commands back to back sends
 * the next one before it is made. So a sandbox keeps one more warm scope than it has Execs running
 * (up to WARM_MAX); those beyond the first go after a short idle time.
 *
 * systemd 252 takes RuntimeMaxUSec= of a scope only when it is created, so a warm scope carries an
 * upper bound (the type's longest timeout plus the time it may wait warm) and sandboxd stops it at
 * the Exec's own deadline (sandbox-exec.c); without sandboxd, systemd's bound still ends it. A warm
 * scope unused for a while is let go. */
#include "warm-scope.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup-join.h"
#include "macro.h"
#include "sandbox.h"
#include "sandboxd-manager.h"
#include "scope-child.h"
#include "time-util.h"
#include "unit.h"

#define WARM_IDLE_USEC (5 * 60 * USEC_PER_SEC)
#define WARM_EXTRA_IDLE_USEC (30 * USEC_PER_SEC) /* the ones beyond the first, made for a burst */
#define WARM_MAX 16
#define PLACEHOLDER_STACK_SIZE (64 * 1024)

/* A placeholder process; it outlives its WarmScope until it is reaped, since it runs on its stack. */
typedef struct Placeholder {
        WarmScope *warm; /* NULL once the scope was freed or taken and released */
        pid_t pid;
        void *stack;     /* MAP_SHARED, so a forked child sees its WarmScopeHold too; the hold at its bottom */
        WarmScopeHold *hold;
        sd_event_source *source;
        bool pinned;     /* a child of ours may still touch the hold (warm_scope_hold()) */
        bool reaped;
} Placeholder;

static void stack_put(void *stack);

struct WarmScope {
        Sandbox *sandbox;
        WarmScope *next;             /* the sandbox's list, while it is in it */
        bool listed;
        char unit[UNIT_NAME_MAX];
        uint64_t tasks_max, memory_max, runtime_max, idle_usec;
        Placeholder *placeholder;    /* NULL once it is gone */
        void *waiter;                /* made for this waiting Exec (not in the sandbox's list) */
        warm_scope_made_t made;      /* and how it is told */
        sd_event_source *idle_timer;
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

static void unlist(WarmScope *w) {
        if (!w->listed || !w->sandbox)
                return;
        for (WarmScope **p = &w->sandbox->warm; *p; p = &(*p)->next)
                if (*p == w) {
                        *p = w->next;
                        break;
                }
        w->sandbox->n_warm -= MIN(w->sandbox->n_warm, 1u);
        w->next = NULL;
        w->listed = false;
}

void warm_scope_release(WarmScope *w) {
        Placeholder *p = w->placeholder;

        if (!p)
                return;
        /* Still our unreaped child (its source has not fired), so the pid is still its own. */
        (void) kill(p->pid, SIGKILL);
        p->warm = NULL;
        w->placeholder = NULL;
}

WarmScope *warm_scope_free(WarmScope *w) {
        if (!w)
                return NULL;
        unlist(w);
        w->waiter = NULL;
        job_wait_cancel(w->job);
        /* An unused scope empties and systemd collects it. */
        warm_scope_release(w);
        w->idle_timer = sd_event_source_disable_unref(w->idle_timer);
        for (size_t i = 0; i < w->n_fds; i++)
                safe_close(w->fds[i]);
        safe_close(w->cgroup2_fd);
        free(w->cgroups);
        free(w);
        return NULL;
}

void warm_scope_free_all(Sandbox *s) {
        while (s->warm)
                warm_scope_free(s->warm);
}

static int on_placeholder_exit(sd_event_source *es, const siginfo_t *si, void *userdata) {
        Placeholder *p = userdata;

        if (p->warm) {
                WarmScope *w = p->warm;
                w->placeholder = NULL;
                /* Died before an Exec took its scope (systemd stopped it, say): no warm scope then. One
                 * taken is its Exec's to free. */
                if (w->waiter)
                        w->made(w->waiter, false); /* frees it; the call goes on without */
                else if (w->listed)
                        warm_scope_free(w);
        }
        p->source = sd_event_source_disable_unref(p->source);
        p->reaped = true;
        if (p->pinned)
                return 0; /* warm_scope_unpin() puts the stack back */
        /* Reaped: nothing runs on its stack any more. */
        stack_put(p->stack);
        free(p);
        return 0;
}

static int on_idle(sd_event_source *es, uint64_t usec, void *userdata) {
        warm_scope_free(userdata);
        return 0;
}

static void on_warm_started(Manager *m, const char *result, const sd_bus_error *error, void *userdata) {
        WarmScope *w = userdata;

        w->job = NULL;
        if (!result || !streq(result, "done") || !w->placeholder ||
            cgroup_read(w->placeholder->pid, &w->cgroups) < 0) {
                if (w->waiter)
                        w->made(w->waiter, false); /* frees it; the call goes on without */
                else
                        warm_scope_free(w);
                return;
        }
        w->ready = true;
        /* What the Exec's child needs to enter the scope, opened now rather than on its way. */
        if (open_cgroups(w, w->fds, ELEMENTSOF(w->fds), &w->n_fds, &w->cgroup2_fd) >= 0)
                w->opened = true;
        if (w->waiter) {
                void *waiter = TAKE_PTR(w->waiter);
                w->made(waiter, true); /* its Exec takes it over */
                return;
        }
        (void) sd_event_add_time_relative(m->event, &w->idle_timer, CLOCK_MONOTONIC, w->idle_usec,
                                          USEC_PER_SEC, on_idle, w);
}

/* An Exec's scope (sandbox-exec.c), with the placeholder in it. */
static int append_warm_props(sd_bus_message *msg, void *userdata) {
        WarmScope *w = userdata;
        char desc[SCOPE_DESCRIPTION_MAX];
        ScopeProps props = scope_props_sandbox(desc, w->sandbox->id, "command", w->sandbox->slice,
                                               w->placeholder->pid, w->tasks_max, w->memory_max, w->runtime_max);

        return scope_props_append(msg, &props);
}

/* The placeholder's whole life, in a clone of sandboxd that shares its memory: only system calls
 * through syscall(), which touch nothing of ours (no errno: none of them fails here), on its own stack,
 * uninstrumented (a sanitizer's shadow of that stack would outlive it). */
__attribute__((no_sanitize_address)) static int placeholder_main(void *userdata) {
        WarmScopeHold *hold = userdata;
        struct {
                void *handler;
                unsigned long flags;
                void *restorer;
                uint64_t mask;
        } dfl = {}; /* the kernel's struct sigaction, SIG_DFL */
        uint64_t none = 0;

        (void) syscall(SYS_close_range, 0U, ~0U, 0U);
        (void) syscall(SYS_prctl, PR_SET_NAME, (unsigned long) "sandboxd-warm", 0UL, 0UL, 0UL);
        (void) syscall(SYS_prctl, PR_SET_PDEATHSIG, (unsigned long) SIGKILL, 0UL, 0UL, 0UL);
        /* What systemd sends to stop a scope ends us; sandboxd blocks these for its signalfd. */
        (void) syscall(SYS_rt_sigaction, SIGTERM, &dfl, NULL, sizeof(uint64_t));
        (void) syscall(SYS_rt_sigaction, SIGHUP, &dfl, NULL, sizeof(uint64_t));
        (void) syscall(SYS_rt_sigaction, SIGINT, &dfl, NULL, sizeof(uint64_t));
        (void) syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof(uint64_t));
        /* sandboxd may have died before PR_SET_PDEATHSIG took. */
        if (syscall(SYS_getppid) != hold->parent)
                (void) syscall(SYS_exit, 0);
        /* Until the Exec's child is in the scope and says so. Not a plain pause() until sandboxd kills
         * us: the child waits for our exit (hold->tid, cleared by the kernel) before it runs anything of
         * the caller's, so that the command never shares a memory cgroup with a process that shares
         * sandboxd's memory: the OOM killer, choosing us there, would kill every process sharing our
         * memory, sandboxd included. */
        while (__atomic_load_n(&hold->go, __ATOMIC_ACQUIRE) == 0)
                (void) syscall(SYS_futex, &hold->go, FUTEX_WAIT, 0, NULL, NULL, 0);
        (void) syscall(SYS_exit, 0);
        return 0;
}

/* Stacks of reaped placeholders, kept for the next ones: an mmap() and a munmap() per Exec under load
 * were a fifth of sandboxd's own CPU time. */
#define STACKS_KEPT 32
static void *stacks_kept[STACKS_KEPT];
static size_t n_stacks_kept = 0;

static void *stack_get(void) {
        if (n_stacks_kept > 0)
                return stacks_kept[--n_stacks_kept];
        void *p = mmap(NULL, PLACEHOLDER_STACK_SIZE, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        return p == MAP_FAILED ? NULL : p;
}

/* Only once nothing runs on it: its placeholder was reaped, or never started. */
static void stack_put(void *stack) {
        if (n_stacks_kept < STACKS_KEPT)
                stacks_kept[n_stacks_kept++] = stack;
        else
                (void) munmap(stack, PLACEHOLDER_STACK_SIZE);
}

static int spawn_placeholder(Placeholder **ret) {
        Placeholder *p = calloc(1, sizeof(Placeholder));
        if (!p)
                return -ENOMEM;
        p->stack = stack_get();
        if (!p->stack) {
                free(p);
                return -ENOMEM;
        }
        /* The hold at the stack's bottom, which the stack grows towards but never reaches. */
        p->hold = p->stack;
        *p->hold = (WarmScopeHold) { .parent = getpid() };
        /* CLONE_VM: no copy of our page tables, no copy-on-write faults, no exec; not CLONE_FILES: it
         * closes its own copy of our descriptors, so it holds none of ours open (a command's pipes).
         * The kernel writes its tid into hold->tid before clone() returns, and clears it and wakes its
         * waiters when it exits. */
        p->pid = clone(placeholder_main, (char *) p->stack + PLACEHOLDER_STACK_SIZE,
                       CLONE_VM | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD, p->hold,
                       (pid_t *) &p->hold->tid, NULL, (pid_t *) &p->hold->tid);
        if (p->pid < 0) {
                int r = -errno;
                stack_put(p->stack);
                free(p);
                return r;
        }
        *ret = p;
        return 0;
}

int warm_placeholder_spawn(pid_t *ret_pid, WarmScopeHold **ret_hold, WarmScopePin **ret) {
        Placeholder *p;
        int r = spawn_placeholder(&p);
        if (r < 0)
                return r;
        *ret_pid = p->pid;
        *ret_hold = p->hold;
        *ret = p;
        return 0;
}

void warm_placeholder_done(WarmScopePin *p) {
        if (!p)
                return;
        stack_put(p->stack);
        free(p);
}

static int prepare(Sandbox *s, uint64_t tasks_max, uint64_t memory_max, uint64_t runtime_max,
                   warm_scope_made_t made, void *waiter, WarmScope **ret) {
        Manager *m = s->manager;
        Placeholder *p = NULL;
        WarmScope *w;
        int r;

        w = calloc(1, sizeof(WarmScope));
        if (!w)
                return -ENOMEM;
        w->sandbox = s;
        w->cgroup2_fd = -EBADF;
        w->tasks_max = tasks_max;
        w->memory_max = memory_max;
        w->runtime_max = runtime_max;
        w->waiter = waiter;
        w->made = made;
        w->idle_usec = s->n_warm == 0 ? WARM_IDLE_USEC : WARM_EXTRA_IDLE_USEC;
        snprintf(w->unit, sizeof(w->unit), "sandbox-%s-exec-%" PRIu64 ".scope", s->id, sandbox_next_unit_number(s));

        r = spawn_placeholder(&p);
        if (r < 0) {
                free(w);
                return r;
        }
        p->warm = w;
        w->placeholder = p;
        if (!waiter) {
                /* At the end: the oldest, soonest ready, is taken first. */
                WarmScope **tail = &s->warm;
                while (*tail)
                        tail = &(*tail)->next;
                *tail = w;
                w->listed = true;
                s->n_warm++;
        }
        r = sd_event_add_child(m->event, &p->source, p->pid, WEXITED, on_placeholder_exit, p);
        if (r < 0) {
                (void) kill(p->pid, SIGKILL);
                (void) waitpid(p->pid, NULL, 0);
                stack_put(p->stack);
                free(p);
                w->placeholder = NULL;
                warm_scope_free(w);
                return r;
        }
        r = unit_start_transient(m, w->unit, append_warm_props, NULL, w, on_warm_started, w, &w->job);
        if (r < 0) {
                warm_scope_free(w); /* kills the placeholder; its exit frees it */
                return r;
        }
        if (ret)
                *ret = w;
        return 0;
}

int warm_scope_prepare(Sandbox *s, uint64_t tasks_max, uint64_t memory_max, uint64_t max_timeout_usec) {
        if (s->state != SANDBOX_RUNNING || s->manager->exiting || s->n_warm >= WARM_MAX)
                return 0;
        return prepare(s, tasks_max, memory_max, max_timeout_usec + WARM_IDLE_USEC + 60 * USEC_PER_SEC, NULL,
                       NULL, NULL);
}

int warm_scope_prepare_for(Sandbox *s, uint64_t tasks_max, uint64_t memory_max, uint64_t runtime_max,
                           warm_scope_made_t made, void *waiter, WarmScope **ret) {
        assert(made);
        assert(waiter);

        if (s->state != SANDBOX_RUNNING || s->manager->exiting)
                return -ESTALE;
        return prepare(s, tasks_max, memory_max, runtime_max, made, waiter, ret);
}

int warm_scope_prepare_default(Sandbox *s, unsigned n) {
        const SandboxType *t = sandboxd_config_find_type(&s->manager->config, s->type);
        int r = 0;

        if (!t)
                return -ENOENT;
        n = MIN(MAX(n, 1u), (unsigned) WARM_MAX);
        while (s->n_warm < n && r >= 0) {
                unsigned before = s->n_warm;
                r = warm_scope_prepare(s, t->tasks_max, t->memory_max, t->max_timeout_usec);
                if (s->n_warm == before)
                        break;
        }
        return r;
}

bool warm_scope_has_ready(Sandbox *s, uint64_t tasks_max, uint64_t memory_max) {
        for (WarmScope *w = s->warm; w; w = w->next)
                if (w->ready && w->tasks_max == tasks_max && w->memory_max == memory_max && w->placeholder)
                        return true;
        return false;
}

static bool pending(const WarmScope *w, uint64_t tasks_max, uint64_t memory_max) {
        return !w->ready && w->job && !w->waiter && w->placeholder && w->tasks_max == tasks_max &&
               w->memory_max == memory_max;
}

bool warm_scope_has_pending(Sandbox *s, uint64_t tasks_max, uint64_t memory_max) {
        for (WarmScope *w = s->warm; w; w = w->next)
                if (pending(w, tasks_max, memory_max))
                        return true;
        return false;
}

bool warm_scope_adopt(Sandbox *s, uint64_t tasks_max, uint64_t memory_max, warm_scope_made_t made, void *waiter,
                      WarmScope **ret) {
        assert(made);
        assert(waiter);

        for (WarmScope *w = s->warm; w; w = w->next)
                if (pending(w, tasks_max, memory_max)) {
                        unlist(w);
                        w->waiter = waiter;
                        w->made = made;
                        *ret = w;
                        return true;
                }
        return false;
}

WarmScope *warm_scope_take(Sandbox *s, uint64_t tasks_max, uint64_t memory_max) {
        for (WarmScope *w = s->warm; w; w = w->next)
                if (w->ready && w->tasks_max == tasks_max && w->memory_max == memory_max && w->placeholder) {
                        unlist(w);
                        w->idle_timer = sd_event_source_disable_unref(w->idle_timer);
                        return w;
                }
        return NULL;
}

WarmScopeHold *warm_scope_hold(WarmScope *w, WarmScopePin **ret_pin) {
        Placeholder *p = w->placeholder;

        *ret_pin = NULL;
        if (!p || p->pinned)
                return NULL;
        p->pinned = true;
        *ret_pin = p;
        return p->hold;
}

void warm_scope_unpin(WarmScopePin *p) {
        if (!p)
                return;
        p->pinned = false;
        if (p->reaped) {
                stack_put(p->stack);
                free(p);
        }
}

void warm_scope_hold_go(WarmScopeHold *hold) {
        __atomic_store_n(&hold->go, 1, __ATOMIC_RELEASE);
        (void) syscall(SYS_futex, &hold->go, FUTEX_WAKE, 1, NULL, NULL, 0);
}

void warm_scope_hold_wait(WarmScopeHold *hold) {
        uint32_t tid;

        while ((tid = __atomic_load_n(&hold->tid, __ATOMIC_ACQUIRE)) != 0)
                (void) syscall(SYS_futex, &hold->tid, FUTEX_WAIT, tid, NULL, NULL, 0);
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
        if (!w->sandbox || !w->cgroups)
                return -ESTALE;
        return cgroup_join_open(w->cgroups, fds, n_max, ret_n, ret_cgroup2_fd);
}

