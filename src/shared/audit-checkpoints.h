/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-auditd's checkpoints of its hash chain, read back from the system journal. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

/* MESSAGE_ID= of a checkpoint (services/sandbox-auditd/auditd-journal.h writes it). */
#define AUDIT_CHECKPOINT_MESSAGE_ID "2cdcf263b8a64da892cdc6d37b58c533"

typedef struct AuditCheckpoint {
        uint64_t row;           /* SANDBOX_ROW= */
        char hash[65];          /* SANDBOX_HASH=, 64 hex digits */
        uint64_t realtime_usec; /* when journald received it */
} AuditCheckpoint;

/* Calls cb for every checkpoint in the system journal, newest first, that journald itself attributes
 * to sandbox-auditd.service running as uid (its trusted _SYSTEMD_UNIT= and _UID= fields: any process
 * can send a MESSAGE_ID= of its choosing, not those). Entries without a well-formed row and hash are
 * skipped. cb returns < 0 to stop with that error, 0 to go on, > 0 to stop. Returns the number of
 * checkpoints passed to cb, or a negative errno (-EACCES-like errors are the caller's to word: a user
 * who may not read the system journal sees none of it, which is 0 here). */
int audit_checkpoints_read(uid_t uid, int (*cb)(const AuditCheckpoint *c, void *userdata), void *userdata);

/* What the checkpoints say about the log as it is now. */
typedef struct AuditCheckpointCheck {
        unsigned agreed;     /* checkpoints whose row is in the log with the same hash */
        unsigned removed;    /* checkpoints of rows retention removed (at or below the chain's anchor) */
        uint64_t newest_row; /* the newest checkpoint that agreed (0: none) */
        bool broken;         /* a checkpoint disagrees: bad (and log_hash, or row_missing) say which */
        bool row_missing;
        AuditCheckpoint bad;
        char log_hash[65];
} AuditCheckpointCheck;

/* Compares every checkpoint (audit_checkpoints_read()) with its row in the log, asked of
 * sandbox-auditd over bus (GetLog with max_id, one row), newest first, stopping at the first that
 * disagrees. anchor_id: VerifyLog's, rows at or below it are gone. Returns 0 with *ret filled, or a
 * negative errno (with error set if the bus call failed). */
int audit_checkpoints_check(sd_bus *bus, uid_t uid, uint64_t anchor_id, AuditCheckpointCheck *ret,
                            sd_bus_error *error);
