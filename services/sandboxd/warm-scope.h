/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Warm scopes: the next Exec's scope, made ahead of time, so a command waits for no systemd job. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct Sandbox Sandbox;
typedef struct WarmScope WarmScope;

/* How a scope made for one waiting Exec reaches it: once up (ok), or when it could not be made. The
 * waiter takes it over (it is already the waiter's to free, see below). */
typedef void (*warm_scope_made_t)(void *waiter, bool ok);

/* Starts making one more scope for the sandbox's next Execs with these limits (nothing if it has
 * the most it may have). max_timeout_usec: the longest timeout an Exec may ask for; the scope's
 * RuntimeMaxUSec= bound. */
int warm_scope_prepare(Sandbox *s, uint64_t tasks_max, uint64_t memory_max, uint64_t max_timeout_usec);

/* warm_scope_prepare() with the limits of the sandbox's type, which is what an Exec that asks for
 * nothing else gets, until the sandbox has n warm scopes (made or being made; at least 1, at most
 * WARM_MAX): one per Exec running keeps a burst of Execs out of the slow path. */
int warm_scope_prepare_default(Sandbox *s, unsigned n);

/* A scope made for one waiting Exec, with its own limits (runtime_max: its RuntimeMaxUSec=): when it
 * is up, or could not be made, made(waiter, …) is called. Not one of the sandbox's warm scopes; *ret
 * is the waiter's to free. */
int warm_scope_prepare_for(Sandbox *s, uint64_t tasks_max, uint64_t memory_max, uint64_t runtime_max,
                           warm_scope_made_t made, void *waiter, WarmScope **ret);

/* Whether the sandbox has a warm scope with these limits ready to take; or one on its way (systemd's
 * job not done yet). */
bool warm_scope_has_ready(Sandbox *s, uint64_t tasks_max, uint64_t memory_max);
bool warm_scope_has_pending(Sandbox *s, uint64_t tasks_max, uint64_t memory_max);

/* One of the sandbox's warm scopes with these limits still on its way, for one waiting Exec: it
 * leaves the sandbox's list and, once up (or if it cannot be), made(waiter, …) is called,
 * as if made for it, but with a warm scope's RuntimeMaxUSec= bound (sandboxd keeps the Exec's own
 * deadline, as with any warm scope). false if there is none; *ret is the waiter's to free. */
bool warm_scope_adopt(Sandbox *s, uint64_t tasks_max, uint64_t memory_max, warm_scope_made_t made, void *waiter,
                      WarmScope **ret);

/* Hands over a ready scope of the sandbox with these limits (the oldest); NULL if it has none. */
WarmScope *warm_scope_take(Sandbox *s, uint64_t tasks_max, uint64_t memory_max);

const char *warm_scope_unit(const WarmScope *w);


/* The way an Exec uses it: opens what the forked child needs to enter the scope itself before it runs
 * anything of the caller's. fds: the cgroup v1 hierarchies' "tasks" files, *ret_n of them (at most
 * n_max), for the child to write "0" into; *ret_cgroup2_fd: the scope's cgroup2 directory, for
 * clone3(CLONE_INTO_CGROUP), or -EBADF if there is no cgroup2 hierarchy. All O_CLOEXEC, the caller's to
 * close. Hierarchies where a child of sandboxd already is in the right place are left out. Once the
 * child said it is in, warm_scope_release() lets the placeholder go. */
#define WARM_SCOPE_FDS_MAX 16

/* How an Exec's child lets the placeholder go once it is in the scope itself: in memory the two share
 * (a MAP_SHARED page, so a forked child too). */
typedef struct WarmScopeHold {
        uint32_t go;   /* set by the child: the placeholder exits */
        uint32_t tid;  /* the placeholder's, cleared by the kernel when it has exited */
        pid_t parent;  /* sandboxd */
} WarmScopeHold;

/* A placeholder whose hold a child of ours may still touch: its stack is not reused for another
 * placeholder until warm_scope_unpin(), even once it is reaped. */
typedef struct Placeholder WarmScopePin;

/* The warm scope's hold, or NULL if its placeholder is gone already. *ret_pin keeps its stack (and so
 * the hold) from being reused until warm_scope_unpin(*ret_pin): call that once the child is past
 * warm_scope_hold_wait() (it said 'r', exec'd or died). sandboxd goes on while such a child sets
 * itself up, and may reap the placeholder meanwhile: without the pin, the next placeholder could
 * get the same stack, and the child would wait on a hold that is no longer its. */
WarmScopeHold *warm_scope_hold(WarmScope *w, WarmScopePin **ret_pin);
void warm_scope_unpin(WarmScopePin *pin);

/* In the Exec's child, once it is in the scope (in the hierarchy systemd watches for emptiness, so the
 * scope never looks empty): warm_scope_hold_go() tells the placeholder to exit; warm_scope_hold_wait(),
 * before anything of the caller's runs, waits until it has. In between the child sets itself up while
 * the placeholder exits. Only system calls, no errno: safe in a child that shares sandboxd's memory. */
void warm_scope_hold_go(WarmScopeHold *hold);
void warm_scope_hold_wait(WarmScopeHold *hold);

/* A placeholder on its own, in no scope, for tests (test-warm-scope.c): its pid and its hold. Once it
 * is reaped, warm_placeholder_done() gives its stack back. */
int warm_placeholder_spawn(pid_t *ret_pid, WarmScopeHold **ret_hold, WarmScopePin **ret);
void warm_placeholder_done(WarmScopePin *p);
int warm_scope_open_cgroups(WarmScope *w, int *fds, size_t n_max, size_t *ret_n, int *ret_cgroup2_fd);
void warm_scope_release(WarmScope *w);

/* Frees it; an unused scope empties (its placeholder is killed) and systemd collects it. */
WarmScope *warm_scope_free(WarmScope *w);
static inline void warm_scope_freep(WarmScope **w) {
        warm_scope_free(*w);
}
/* Frees every warm scope the sandbox has. */
void warm_scope_free_all(Sandbox *s);
