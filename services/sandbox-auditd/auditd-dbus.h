/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-auditd on the bus: the Log vtable, its errors, the rows as a{sv}, and EntryAdded. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include "audit-store.h"
#include "sandboxd-bus.h"

typedef struct Manager Manager;

/* A GetLog reply stops adding rows beyond this many bytes (the system bus caps a message at 32 MiB). */
#define AUDITD_REPLY_BYTES_MAX (UINT64_C(16) << 20)

/* RecordBatch takes at most this many rows per call (the bus caps the message at 32 MiB anyway). */
#define AUDITD_BATCH_ROWS_MAX 4096u

int manager_bus_setup(Manager *m);

/* Record's row and GetLog's filter, read from msg (at the a{sv}, left past it) into *rec or *f: strings
 * point into msg. Unknown or repeated keys, wrong types and unknown operation/event/source names are
 * refused with InvalidArgs saying which; the row's own checks are audit_record_normalize()'s. */
int audit_parse_row(sd_bus_message *msg, AuditRecord *rec, sd_bus_error *error);
int audit_parse_filter(sd_bus_message *msg, AuditFilter *f, sd_bus_error *error);
/* VerifyLog's options: max_id t (≥ 1; 0 in *ret_max_id if not given, meaning every row). */
int audit_parse_verify_options(sd_bus_message *msg, uint64_t *ret_max_id, sd_bus_error *error);

/* Answers a Record call: the row's id, or StorageFull for a storage error (negative errno). */
int audit_reply_recorded(sd_bus_message *msg, uint64_t id);
/* Answers a RecordBatch call: the rows' ids, in the order of the rows. */
int audit_reply_recorded_batch(sd_bus_message *msg, const uint64_t *ids, size_t n);
int audit_reply_storage_error(sd_bus_message *msg, int error);
/* A human-readable reason for a storage error, in SQLite's words. */
const char *audit_storage_error_string(int error);

void audit_emit_entry_added(Manager *m, const AuditEntry *e);

/* Answers a VerifyLog call with the walk's outcome, or (error < 0) with Failed. */
int audit_reply_verified(sd_bus_message *msg, const AuditVerify *v, int error);
