/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd's state: the bus, the event loop, the sandboxes, the uid pool and the systemd jobs we wait for. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "daemon-util.h"
#include "sandboxd-config.h"
#include "hashmap.h"
#include "group-cache.h"
#include "audit-row.h"
#include "sandbox-egress.h"
#include "caller.h"
#include "oom.h"
#include "sandbox-totals.h"
#include "sender-cache.h"

typedef struct Sandbox Sandbox;
typedef struct AuditSpool AuditSpool;
typedef struct SandboxStore SandboxStore;

#define SANDBOXD_STATE_DIR "/var/lib/sandboxd"
#define SANDBOXD_SANDBOX_USER "sandbox"
#define SANDBOXD_SANDBOX_HOME "/home/sandbox"

typedef struct Manager {
        sd_event *event;
        sd_bus *bus;
        SandboxdConfig config;
        char *state_dir;
        char *init_path;            /* sandbox-init on the host, run from a descriptor (statically linked) */
        char *file_helper_path;     /* sandboxd-file-helper, likewise */
        SandboxStore *store;
        AuditSpool *audit;

        Hashmap *sandboxes;         /* id → Sandbox */
        Sandbox *pool;              /* sandboxes made ahead, linked through pool_next (sandbox.c) */
        sd_event_source *pool_timer;
        bool pool_full_logged;      /* the pool waits for room in [Sandboxes], said once */
        Hashmap *sandbox_names;     /* name → Sandbox */
        Hashmap *jobs;              /* systemd job path → JobWait */
        Hashmap *early_jobs;        /* job path → "path\0result" that came before the reply */
        unsigned background_stops;  /* unit_stop_nowait() jobs in flight (unit.c) */
        struct QueuedStop *stop_queue, *stop_queue_tail;
        SenderCache *senders;       /* callers' uids by unique bus name (names are never reused) */
        Hashmap *shells;            /* unit name → Shell (sandbox-shell.c), made on first use */
        GroupCache admins;          /* sandbox-admin, per caller uid for a few seconds */

        uint8_t *uid_used;          /* bitmap over [uid_min, uid_max] */
        uid_t uid_next;

        CgroupMemoryLayout memory_layout;
        char *memory_prefix;
        int host_pidns_fd;
        struct Offload *offload;    /* worker threads that clone Execs' children (offload.c) */

        /* One disk image template per DiskMax= of the types, made at start-up (disk-image.c). */
        struct {
                uint64_t size;
                char *path;         /* NULL if it could not be made: creating such sandboxes fails */
                int error;          /* then why, a negative errno */
        } disk_templates[SANDBOX_TYPES_MAX];
        size_t n_disk_templates;

        /* [Sandboxes] resolved against the host at start-up: sandbox.slice's limits and the admission
         * sums (manager_admit()). */
        HostInfo host;
        SandboxTotals totals;

        uid_t gateway_uid;          /* sandbox-gateway, or (uid_t) -1 */

        ManagerEgress egress;       /* egress sandboxes' addresses and firewall (sandbox-egress.c) */
        struct ManagerEgressDns *egress_dns; /* their resolvers' upstreams, the firewall's NFLOG group
                                              * (sandbox-egress-dns.c) */

        struct ImageState *images;  /* the image store and its jobs (image-dbus.c, issue 24) */
        struct Snapshot *snapshots; /* issue 26: taken and being taken, oldest first (sandbox-snapshot.c) */

        sd_event_source *sigterm, *sigint, *sighup;
        bool exiting;
} Manager;

int manager_new(const DaemonOptions *o, Manager **ret, char **ret_error);
Manager *manager_free(Manager *m);
int manager_startup(Manager *m);
int manager_run(Manager *m);

int manager_allocate_uid(Manager *m, uid_t *ret);
void manager_reserve_uid(Manager *m, uid_t uid);
/* Notes a uid that a sandbox of an earlier run had: new uids are handed out after it. */
void manager_uid_seen(Manager *m, uid_t uid);
void manager_release_uid(Manager *m, uid_t uid);
void manager_clear_early_jobs(Manager *m);
/* The template image for a disk of size bytes (made at start-up); NULL with *ret_error if there is none. */
const char *manager_disk_template(Manager *m, uint64_t size, int *ret_error);

/* Whether one more sandbox of type t fits in what [Sandboxes] allows all of them (pooled ones count:
 * their slices have their limits). Returns 0, or -E2BIG with a message for the caller in buf. */
int manager_admit(Manager *m, const SandboxType *t, char *buf, size_t size);

/* Spools the operation's audit row (unless Audit=no); call before answering the caller. */
void manager_audit(Manager *m, const Caller *c, const AuditRow *row);
/* The row of a call that failed before it ran, or without a row of its own: event "denied" if error is
 * AccessDenied or PermissionDenied, else "failed"; exit code -1; detail {"error": name, "message": …} unless
 * detail is given. session_id "" when the call named no sandbox. */
void manager_audit_failed(Manager *m, const Caller *c, const char *session_id, const char *operation,
                          const sd_bus_error *error, const char *detail, uint64_t started_at, uint64_t mono_start);
/* For an operation that runs a while (audit-spool.h, audit_begin()): the note before it starts (key
 * empty when there is none), its row when it ends, or the note dropped when the call failed before it
 * ran and its failure is recorded otherwise. finish and cancel empty the key. */
void manager_audit_begin(Manager *m, const Caller *c, const AuditRow *row, char key[static AUDIT_KEY_SIZE]);
void manager_audit_finish(Manager *m, const Caller *c, const AuditRow *row, char key[static AUDIT_KEY_SIZE]);
void manager_audit_cancel(Manager *m, char key[static AUDIT_KEY_SIZE]);

/* Whether this uid may use the Manager (root, or a member of sandbox-admin). Group membership is
 * looked up at most every few seconds per uid. */
bool manager_uid_is_admin(Manager *m, uid_t uid);

/* The effective uid of a message's sender, asked of the bus once per connection. */
int manager_sender_uid(Manager *m, sd_bus_message *msg, uid_t *ret);
