/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-auditd's state: the bus, the event loop, the store, rows waiting for their commit, retention. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "audit-config.h"
#include "audit-ship.h"
#include "audit-store.h"
#include "daemon-util.h"
#include "group-cache.h"
#include "hashmap.h"
#include "sender-cache.h"

#define AUDITD_STATE_DIR "/var/lib/sandbox-auditd"
#define AUDITD_DB_FILE "audit.db"

/* Rows that arrive together share one commit: at most this many, or this many bytes of output. */
#define AUDITD_COMMIT_ROWS_MAX 256
#define AUDITD_COMMIT_BYTES_MAX (UINT64_C(8) << 20)

/* Retention runs at start and then this often, deleting at most this many rows per transaction. */
#define AUDITD_RETENTION_INTERVAL_USEC (UINT64_C(60) * UINT64_C(1000000))
#define AUDITD_RETENTION_BATCH_MAX 1000u
#define AUDITD_RETENTION_BATCH_MIN 16u

/* Remembered callers: at most this many connections; a reader's group membership this long. */
#define AUDITD_SENDER_CACHE_MAX 4096u
/* The copy in PostgreSQL: looked at every second; at most this many rows a batch, batches a turn (the loop
 * stays free for Record calls between turns). */
#define AUDITD_SHIP_INTERVAL_USEC (UINT64_C(1) * UINT64_C(1000000))
#define AUDITD_SHIP_BATCH 500u
#define AUDITD_SHIP_BATCHES_PER_TURN 4u
#define AUDITD_READER_CACHE_USEC (UINT64_C(5) * UINT64_C(1000000))

/* VerifyLog: at most this many walks at once, each step at most this many rows or bytes of rows, one
 * step per turn of the event loop at idle priority, so that Record and GetLog are answered between. */
#define AUDITD_VERIFY_JOBS_MAX 4u
#define AUDITD_VERIFY_STEP_ROWS 500u
#define AUDITD_VERIFY_STEP_BYTES (UINT64_C(4) << 20)

typedef struct PendingRecord PendingRecord;
typedef struct VerifyJob VerifyJob;

typedef struct Manager {
        sd_event *event;
        sd_bus *bus;
        AuditConfig config;
        char *state_dir;
        AuditStore *store;

        uid_t gateway_uid; /* sandbox-gateway, or (uid_t) -1 */

        /* Callers' credentials: a bus round trip per connection, not per call (a blocking one, which
         * capped ingest at ~3,000 rows/s); an NSS lookup per reader uid at most every few seconds. */
        SenderCache *senders;        /* callers' uids by unique bus name, until NameOwnerChanged says it left */
        sd_bus_slot *name_owner_slot;
        GroupCache readers;          /* sandbox-admin, per caller uid for AUDITD_READER_CACHE_USEC */

        /* Group commit: stored rows whose callers wait for the commit. */
        PendingRecord *pending, *pending_tail;
        size_t n_pending;
        uint64_t pending_bytes;
        sd_event_source *commit_event;
        bool storage_failing; /* so a full disk is logged once, not once per row */

        /* Retention: a pass deletes by age, then by count, a batch per event loop iteration. */
        sd_event_source *retention_timer, *retention_event;
        unsigned retention_batch;
        bool retention_age_done;
        uint64_t retention_cutoff;
        uint64_t retention_deleted;
        unsigned retention_ticks;

        /* Checkpoints of the chain to the journal: the newest row committed, and how many rows no
         * checkpoint covers yet. */
        uint64_t chain_last_id;
        uint8_t chain_last_hash[AUDIT_HASH_SIZE];
        uint64_t checkpoint_rows;
        sd_event_source *checkpoint_timer;

        /* The copy of the rows in PostgreSQL ([PostgreSQL] URL=), or NULL */
        AuditShip *ship;
        sd_event_source *ship_timer;
        bool ship_failing; /* so an unreachable server is logged once, not once a second */

        /* VerifyLog walks, taking turns */
        VerifyJob *verify_jobs;
        unsigned n_verify_jobs;
        sd_event_source *verify_event;

        sd_event_source *sigterm, *sigint;
} Manager;

int manager_new(const DaemonOptions *o, Manager **ret, char **ret_error);
Manager *manager_free(Manager *m);
int manager_startup(Manager *m);
int manager_run(Manager *m);

/* Record: root and sandbox-gateway. Readers (GetLog, GetOutput): root and members of sandbox-admin
 * (looked up at most every AUDITD_READER_CACHE_USEC per uid). */
bool manager_uid_may_record(Manager *m, uid_t uid);
bool manager_uid_may_read(Manager *m, uid_t uid);

/* The effective uid of a message's sender: asked of the bus once per connection, remembered until the
 * connection leaves the bus (NameOwnerChanged). */
int manager_sender_uid(Manager *m, sd_bus_message *msg, uid_t *ret);
/* Forgets one connection's uid (name: a unique name) or, with NULL, all of them. */
/* Subscribes to the bus's NameOwnerChanged so that callers who left are forgotten. */
int manager_watch_senders(Manager *m);

/* Stores the n normalised records in the current transaction and answers msg once that is committed:
 * with the id (Record, n = 1) or the ids in order (batch: RecordBatch), or with StorageFull if they
 * could not be stored (then none is). Takes over the records' allocations (each is cleared); their
 * borrowed pointers must point into msg. Returns 0, or a negative errno if nothing was done. */
int manager_record(Manager *m, sd_bus_message *msg, AuditRecord *recs, size_t n, bool batch);

/* Starts a VerifyLog walk (max_id 0: every row) and answers msg when it is done. -EBUSY if
 * AUDITD_VERIFY_JOBS_MAX walks are running. */
int manager_verify(Manager *m, sd_bus_message *msg, uint64_t max_id);

/* Commits the current batch now and answers its callers (before reads, retention and exit). */
void manager_flush(Manager *m);
