/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-auditd's journal sink: each row as a structured entry, and the hash chain's checkpoints. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "audit-store.h"

/* MESSAGE_ID= of each kind of row, and of a checkpoint (docs/audit-sinks.md lists them). */
#define AUDITD_MESSAGE_EXEC "395ffae0c4224acda950cfabc1bd5d44"       /* exec */
#define AUDITD_MESSAGE_FILE "74a16b0e346b4e3387d4f2c476517eb2"       /* the file tools */
#define AUDITD_MESSAGE_TAKEOVER "6a8b5c6efdd04a60921a6ff822d1f1f9"   /* takeover */
#define AUDITD_MESSAGE_SANDBOX "ad7ec25ea2d74aaa8134c37fc2176f4d"    /* sandbox.create, … .expire */
#define AUDITD_MESSAGE_ACCESS "5dcc0863be6f432e9505d31a41936ac5"     /* api_key.*, the gateway's refusals */
#define AUDITD_MESSAGE_CHECKPOINT "2cdcf263b8a64da892cdc6d37b58c533" /* a checkpoint of the chain */

/* The MESSAGE_ID= for a row of this operation (one of audit_operation_to_string()'s names). */
const char *auditd_journal_message_id(const char *operation);

/* The row's one-line MESSAGE=, e.g. "exec finished in sb_x by uid:0 (exit 0), row 42": control
 * characters of the values (chosen by callers) become spaces. Truncated to size − 1 bytes. */
void auditd_journal_message(const AuditEntry *e, char *buf, size_t size);

/* Writes a stored row to the journal with SANDBOX_* fields. Returns 0 or a negative errno. */
int auditd_journal_row(const AuditEntry *e);

/* Writes a checkpoint: the row id, its hash and how many rows were stored since the last one. */
int auditd_journal_checkpoint(uint64_t id, const uint8_t *hash, uint64_t rows);
