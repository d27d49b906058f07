/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd's side of the audit log: every operation's row goes into a local spool before the caller
 * is answered, and from there to sandbox-auditd, in order, exactly once. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "audit-row.h"
#include "caller.h"

typedef struct Manager Manager;
typedef struct AuditSpool AuditSpool;

int audit_spool_open(Manager *m, const char *path, AuditSpool **ret);
AuditSpool *audit_spool_free(AuditSpool *s);

/* Stores the row durably (it survives kill -9 of anyone) and schedules its delivery. Never waits
 * for the logger. Returns negative errno only if the spool itself could not take it. */
int audit_record(AuditSpool *s, const Caller *c, const AuditRow *row);
/* (In these, the row's key, account_id, source and request_id are the spool's and the Caller's: the
 * row's own are ignored.) */

/* An operation that runs for a while: audit_begin() notes it (row: session, operation, detail,
 * started_at) under a new key, before it starts; audit_finish() writes its row and drops the note in one
 * transaction (with an empty key it is audit_record()); audit_cancel() drops the note when the call
 * failed before it ran and its failure is recorded otherwise. A note left when sandboxd stops becomes
 * a "failed" row at the next start, the detail's error SANDBOXD_ERROR_INTERRUPTED (sandboxd-bus.h). */
int audit_begin(AuditSpool *s, const Caller *c, const AuditRow *row, char key[static AUDIT_KEY_SIZE]);
int audit_finish(AuditSpool *s, const Caller *c, const AuditRow *row, const char *key);
void audit_cancel(AuditSpool *s, const char *key);

/* {"error": name, "message": message}, for the rows of failed calls. NULL on OOM. */
char *audit_detail_error(const char *name, const char *message);

/* Rows still waiting for the logger. */
uint64_t audit_spool_pending(AuditSpool *s);
