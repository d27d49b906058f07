/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One engine for a confined child of sandboxd in a transient scope: the init, an Exec, a shell.
 *
 * The life cycle the three share (docs/architecture.md, "A confined child in a transient scope"):
 *
 *   1. spawn: sandboxd forks (or clone3()s, possibly straight into a warm scope's cgroup) a child in
 *      the sandbox's PID namespace (a new one for the init), with sandboxd as its parent. Two channels
 *      go with it: a failure pipe (close-on-exec: EOF means it exec'd, a ScopeChildFailure means it
 *      gave up, with the step and errno) and the go channel (ready/go handshake).
 *   2. setup: the child joins the sandbox's namespaces and confines itself, then says "ready" on the
 *      go channel (an Exec's and a shell's; a shell passes its PTY master along), or, like the init,
 *      is ready from the start and sets itself up only after go.
 *   3. scope: meanwhile sandboxd asks systemd for the child's transient scope (StartTransientUnit with
 *      PIDs= the child), or the child entered a warm scope made ahead by itself (self_entered: no go
 *      is waited for, its "ready" means it runs).
 *   4. go: once ready and in its scope, whichever comes last, the owner lets it go (scope_child_go()):
 *      nothing of the caller's ever runs outside its scope.
 *   5. exit: the child's exit is reaped (sd_event_add_child). If it never ran (a setup failure), the
 *      answer waits until its scope is gone (stop, then done), so a call that fails leaves no unit
 *      behind; if its scope could not be made, the child is killed and the owner answers.
 *   6. done: the owner answers the bus message it kept, from what the child reported and its status.
 *
 * What differs stays with the owners: an Exec's output pipes, deadline and cancel_fd, a shell's PTY
 * and relay, the init's report and its sandbox. The engine's decisions (when to go, what to do at an
 * exit) are pure functions of its flags, scope_child_may_go() and scope_child_after_exit(). */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "macro.h"
#include "unit.h"

typedef struct Manager Manager;
typedef struct ScopeChild ScopeChild;

/* What a child that gave up writes to its failure pipe before it exits. step: a static string, valid
 * in the parent too (same binary after fork). stage: the owner's own numbering, from
 * SCOPE_CHILD_STAGE_SETUP on; 0 means no report. */
typedef struct ScopeChildFailure {
        int stage;
        int error;
        const char *step;
} ScopeChildFailure;

#define SCOPE_CHILD_STAGE_SETUP 1

/* --- in the child (only system calls: safe in a child that shares sandboxd's memory) ---------------- */

/* Reports the failure on err_fd and exits with status. */
_noreturn_ void scope_child_fail(int err_fd, int stage, const char *step, int error, int status);

/* Says "ready" on the go channel, passing fd along (SCM_RIGHTS) unless it is negative. 0 or -errno. */
int scope_child_send_ready(int go_fd, int fd);

/* Waits for go: 0, or -EPIPE when sandboxd gave up on us (EOF). */
int scope_child_wait_go(int go_fd);

/* --- spawning ------------------------------------------------------------------------------------ */

typedef struct ScopeChildSpawn {
        int pidns_fd;       /* the PID namespace to be born in (a pidfd of its init); -EBADF: a new one */
        int host_pidns_fd;  /* sandboxd's own, to return to */
        /* The fast path (Exec in a warm scope): born in this cgroup2 cgroup with clone3(CLONE_INTO_CGROUP),
         * and on x86-64 sharing our memory until it execs (like vfork()), on a stack of its own; or
         * -EBADF: fork(). */
        int cgroup2_fd;
        /* Where clone3() or CLONE_INTO_CGROUP is missing (before Linux 5.7): prepares arg's child to
         * enter cgroup2_fd's cgroup itself, and it is forked instead; or fails with -errno (the spawn
         * then fails with EIO). NULL: the spawn fails. */
        int (*no_clone3)(void *arg, int cgroup2_fd);
        void (*child)(void *arg); /* never returns */
        void *arg;
} ScopeChildSpawn;

/* Spawns the child in the calling thread; returns its pid, or -1 with errno. Aborts if the thread
 * cannot go back to host_pidns_fd (every later child would land in the other namespace). In a worker
 * thread too: setns(CLONE_NEWPID) is the calling thread's alone. */
pid_t scope_child_spawn(const ScopeChildSpawn *sp);

/* --- in sandboxd -------------------------------------------------------------------------------- */

/* A scope's properties, as StartTransientUnit takes them (with TimeoutStopUSec=1s and
 * CollectMode=inactive-or-failed always). */
typedef struct ScopeProps {
        const char *description;
        const char *slice;
        pid_t pid;
        bool limits;             /* TasksMax= and MemoryMax= */
        uint64_t tasks_max, memory_max;
        bool runtime_max;        /* RuntimeMaxUSec= */
        uint64_t runtime_max_usec;
        int kill_signal;         /* KillSignal=, 0: systemd's default */
        bool send_sighup;        /* SendSIGHUP= */
} ScopeProps;

/* Appends the a(sv) entries of props. */
int scope_props_append(sd_bus_message *m, const ScopeProps *props);

#define SCOPE_DESCRIPTION_MAX 128

/* The properties of the scope of a process of a sandbox (an Exec's, a shell's): description "sandbox
 * <id> <what>" (written to desc) in the sandbox's slice, with these limits and SendSIGHUP=;
 * runtime_max_usec: RuntimeMaxUSec=, or UINT64_MAX for none. */
ScopeProps scope_props_sandbox(char desc[static SCOPE_DESCRIPTION_MAX], const char *sandbox_id,
                               const char *what, const char *slice, pid_t pid, uint64_t tasks_max,
                               uint64_t memory_max, uint64_t runtime_max_usec);

typedef struct ScopeChildOps {
        /* The go channel said something (ok: "ready") or failed; fd: what the child passed along, the
         * owner's to take, or -EBADF. Returns whether the child counts as ready. NULL: as ok says. */
        bool (*ready)(ScopeChild *c, bool ok, int fd);
        /* The init's way: the failure pipe is watched from the start. f NULL: EOF, the child exec'd;
         * else its failure (a short read is reported as step NULL with the errno, or EIO). */
        void (*report)(ScopeChild *c, const ScopeChildFailure *f);
        /* The scope is up and the child alive, before it may go. */
        void (*scope_up)(ScopeChild *c);
        /* Ready and in its scope: let it go (scope_child_go()), or not. */
        void (*go)(ScopeChild *c);
        /* systemd could not make the scope of a living child; the engine killed it. error: an errno. */
        void (*scope_failed)(ScopeChild *c, int error, const sd_bus_error *bus_error);
        /* The child exited (status in c->status), before the engine decides about the scope. */
        void (*exited)(ScopeChild *c);
        /* The end: the child exited and, had it not run, its scope is gone. May free the owner. */
        void (*done)(ScopeChild *c);
        /* The child needs no go: ready from the start (the init reads go before it sets itself up). */
        bool ready_at_spawn;
        /* A child that never ran does not wait for its scope to stop (the init's owner stops the
         * sandbox's slice, with everything in it). */
        bool keep_scope;
} ScopeChildOps;

struct ScopeChild {
        Manager *manager;
        const ScopeChildOps *ops;
        void *userdata;
        char unit[UNIT_NAME_MAX];
        pid_t pid;
        int go_fd, err_fd;       /* our ends of the go channel and the failure pipe */
        sd_event_source *child_source, *ready_source, *report_source;
        JobWait *job;            /* starting or stopping its scope */
        bool ready;              /* confined, waiting for go (self_entered: running) */
        bool scope_up;           /* in its scope: systemd's job is done, or it entered a warm scope */
        bool self_entered;       /* it entered a warm scope itself and needs no go */
        bool started;            /* go was sent (self_entered: it said ready): it runs */
        bool exited;
        bool killed;             /* killed before it ran: it never gets go */
        siginfo_t status;
};

#define SCOPE_CHILD_INIT { .go_fd = -EBADF, .err_fd = -EBADF }

void scope_child_setup(ScopeChild *c, Manager *m, const ScopeChildOps *ops, void *userdata);

/* The child is born: watches its exit, its go channel and (ops->report) its failure pipe. Takes go_fd
 * and err_fd (non-blocking from now). On failure the child is still the caller's to kill and reap. */
int scope_child_attach(ScopeChild *c, pid_t pid, int go_fd, int err_fd);

/* Asks systemd for the child's scope c->unit; append_aux (may be NULL) adds auxiliary units. */
int scope_child_start_scope(ScopeChild *c, const ScopeProps *props, append_props_t append_aux,
                            void *aux_userdata);

/* Lets it go: it runs from now on. 0, or -errno if the go could not be sent (kill it then). */
int scope_child_go(ScopeChild *c);

/* Kills it before it runs: it will never get go; its exit goes the way of a failed setup. */
void scope_child_kill(ScopeChild *c);

/* Reads the failure it reported, if any: 1 and *ret, or 0 (nothing, *ret zeroed). */
int scope_child_read_failure(ScopeChild *c, ScopeChildFailure *ret);

/* Stops its scope, then ops->done (at once if the stop cannot be asked for). */
void scope_child_stop_then_done(ScopeChild *c);

/* Releases sources, fds and the job. A child not reaped yet is reaped by a floating source. */
void scope_child_release(ScopeChild *c);

/* The engine's decisions, pure. */
bool scope_child_may_go(const ScopeChild *c);

typedef enum ScopeChildNext {
        SCOPE_CHILD_WAIT_JOB,    /* its scope's start job is still running: its result decides */
        SCOPE_CHILD_STOP_SCOPE,  /* it never ran but its scope is up: stop it, then done */
        SCOPE_CHILD_DONE,        /* answer now */
} ScopeChildNext;

/* What follows the child's exit. */
ScopeChildNext scope_child_after_exit(const ScopeChild *c);
