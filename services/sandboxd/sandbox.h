/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A sandbox: its slice, its init (which holds its namespaces), its workspace, uid and TTL. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "caller.h"
#include "macro.h"
#include "sandbox-id.h"
#include "sandbox-egress.h"
#include "sandboxd-config.h"
#include "scope-child.h"
#include "unit.h"

typedef struct Manager Manager;
typedef struct Exec Exec;
typedef struct ExecQueued ExecQueued;
typedef struct WarmScope WarmScope;

typedef enum SandboxState {
        SANDBOX_STARTING,
        SANDBOX_RUNNING,
        SANDBOX_STOPPING,
        SANDBOX_FAILED,
        _SANDBOX_STATE_MAX,
        _SANDBOX_STATE_INVALID = -EINVAL,
} SandboxState;

DECLARE_STRING_TABLE(sandbox_state, SandboxState);

typedef struct Sandbox {
        Manager *manager;
        char id[SANDBOX_ID_LEN + 1];
        char *name;
        char *type;
        char *owner;
        char *slice;       /* sandbox-<id>.slice */
        char *workspace;   /* <state>/sandboxes/<id> */
        uid_t uid;
        SandboxNetwork network;
        char *image;        /* the image its root is made of (issue 24); NULL: the host's tree */
        SandboxEgress egress;      /* network egress: its policy, address, link (sandbox-egress.c) */
        struct SandboxEgressDns *egress_dns; /* network egress: its resolver and denials (sandbox-egress-dns.c) */
        uint64_t disk_max;  /* its disk image's size, known while it is created (0: none, or adopted) */
        uid_t disk_from_uid; /* while it is created from a snapshot: the uid owning its files; else -1 */
        char *from_snapshot; /* the snapshot it was created from (for its sandbox.create row), or NULL */
        struct ImageCopy *disk_copy; /* while that snapshot's image is copied for it, off the event loop */
        bool go_deferred;    /* its init may go, once the copy is in place */
        int disk_pin_fd;    /* O_PATH of its home on the disk image: keeps the file system for us to let go */
        uint64_t created_at, expires_at;   /* µs since the epoch */
        SandboxState state;

        pid_t init_pid;
        uint64_t init_start;   /* start time in clock ticks, to tell a reused pid */
        int init_pidfd;
        sd_event_source *init_source;
        sd_event_source *ttl_timer;

        uint64_t exec_next;        /* next unit number; never repeats */
        uint64_t exec_reserved;    /* numbers below this are promised by the store */

        /* creation: the init as a confined child in its scope (and its exit, for the sandbox's life) */
        ScopeChild child;
        JobWait *job;      /* stopping the slice */
        sd_bus_message *create_request;
        Caller create_caller;
        uint64_t create_started, create_mono;

        /* deletion: every caller waiting for it */
        sd_bus_message **delete_requests;
        size_t n_delete_requests;
        const char *delete_operation;
        bool killing_init;   /* deletion waits for the init, which got SIGKILL, to be gone */
        Caller delete_caller;
        uint64_t delete_started, delete_mono;

        bool pooled;          /* made ahead, waiting in the pool: in no table, invisible on the bus */
        struct Sandbox *pool_next;

        Exec *execs;   /* running Execs, linked through Exec.next */
        WarmScope *warm;  /* the next Execs' scopes made ahead, oldest first (warm-scope.c) */
        unsigned n_warm;
        unsigned n_execs; /* Execs running (the list above), to size the warm scopes to */
        struct Process *processes; /* its background processes, newest first (sandbox-process.c) */
        unsigned n_processes;
        ExecQueued *exec_queue; /* Execs waiting for a warm scope in the making (sandbox-exec.c) */
        unsigned n_exec_queued;

        /* Issue 26, sandbox-pause.c: its slice frozen (cgroup.freeze). While paused, state stays RUNNING
         * (the bus says "paused"), the TTL timer is off and ttl_left holds what was left of it. */
        bool paused;
        uint64_t paused_at;          /* µs since the epoch; 0 while it runs */
        uint64_t paused_mono;        /* for the commands' deadlines, moved out at resume */
        uint64_t ttl_left;           /* while paused: µs of TTL left (0: it has none) */
        struct FreezeWaiter *freeze_waiters; /* PauseSandbox calls and snapshots waiting for "frozen 1" */
        size_t n_freeze_waiters;
        unsigned freeze_holds;       /* snapshots that keep it frozen for a moment (sandbox-snapshot.c) */
        sd_event_source *freeze_check;
        uint64_t freeze_deadline;
        uint64_t last_active_mono;   /* IdlePauseSec=: the last call naming it, or end of work in it */
        sd_event_source *idle_timer;
} Sandbox;

typedef struct SandboxCreateSpec {
        const char *name;
        const char *type;
        const char *owner;
        uint64_t ttl_usec;
        SandboxNetwork network;
        const EgressPolicy *egress_policy; /* network egress: its policy (copied); NULL otherwise */
        const Caller *caller;
        const char *image; /* NULL: the host's tree */
        bool pooled;   /* make one for the pool (no request, no audit row, no signal) */
        /* Issue 26: its disk a copy of this snapshot image (whose files snapshot_uid owns); or NULL */
        const char *snapshot_image;
        uid_t snapshot_uid;
        const char *snapshot_id;
} SandboxCreateSpec;

/* Starts creating a sandbox; request gets its reply once it is running (or failed). A sandbox of a
 * type and network that the pool holds ready is claimed instead, and the reply sent right away. */
int sandbox_create(Manager *m, const SandboxCreateSpec *spec, sd_bus_message *request, Sandbox **ret);

/* Stops everything of the sandbox and removes it; request (may be NULL) gets an empty reply then.
 * caller NULL: the system (TTL expiry, clean-up). */
int sandbox_delete(Sandbox *s, sd_bus_message *request, const char *operation, const Caller *caller);

/* Spools an audit row about this sandbox (operation sandbox.*). */
void sandbox_audit(Sandbox *s, const Caller *c, const char *operation, const char *event, const char *error_name,
                   const char *error_message, uint64_t started_at, uint64_t mono_start);
/* The same with more keys in its detail: extra's (a JSON object, taken; may be NULL). */
void sandbox_audit_extra(Sandbox *s, const Caller *c, const char *operation, const char *event,
                         struct json_object *extra, uint64_t started_at, uint64_t mono_start);

int sandbox_set_ttl(Sandbox *s, uint64_t ttl_usec);
/* Arms (or, expiry 0 or paused, disarms) the TTL timer at s->expires_at. */
int sandbox_arm_ttl(Sandbox *s);
/* "paused" for a running sandbox that is paused, else its state's name: what the bus and REST show. */
const char *sandbox_state_name(const Sandbox *s);

/* Re-adopts a sandbox found in the store at start-up. */
int sandbox_adopt(Manager *m, const char *id, const char *name, const char *type, const char *owner, uid_t uid,
                  SandboxNetwork network, uint64_t created_at, uint64_t expires_at, pid_t init_pid,
                  uint64_t init_start, uint64_t exec_next, const char *egress_address,
                  const char *egress_policy, uint64_t paused_at, uint64_t ttl_left);

Sandbox *sandbox_free(Sandbox *s);

/* The pool of sandboxes made ahead (PoolSize= per type, network "none"): at start-up, removes what a
 * previous sandboxd left in <state>/pool/ and starts filling it. */
int sandbox_pool_startup(Manager *m);

/* At exit: ends the pooled sandboxes' inits and asks systemd to stop their slices. */
void sandbox_pool_drain(Manager *m);

/* Tops the pool up soon (after delay_usec), in the background. */
void sandbox_pool_schedule(Manager *m, uint64_t delay_usec);

/* Next unit number for an Exec or shell, persisted in blocks so a restart never reuses one. */
uint64_t sandbox_next_unit_number(Sandbox *s);

char *sandbox_bus_path(const Sandbox *s);

int proc_starttime(pid_t pid, uint64_t *ret);
