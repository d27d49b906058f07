/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The run-session export of the audit log: rows to audit.jsonl events and run metadata (audit-api.md). */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

/* "run-" + a row id in decimal, and the NUL. */
#define AUDIT_EXPORT_RUN_ID_MAX 32

typedef enum AuditExportKind {
        AUDIT_EXPORT_NONE,    /* maps to no event (sandbox.*, api_key.*, the gateway's read refusals, auth) */
        AUDIT_EXPORT_COMMAND, /* exec, takeover: sandbox.command.* events and a run directory */
        AUDIT_EXPORT_FILE,    /* the file operations: one sandbox.file.<operation> event */
} AuditExportKind;

/* Reads one a{sv} row of GetLog or EntryAdded into a JSON object with the row's own keys and types:
 * started_at stays µs since the epoch, detail and output_truncated are parsed JSON (kept as strings if
 * they are not JSON), keys of types we do not know are skipped. Returns 1, or 0 at the end of the
 * enclosing array (nothing read). */
int audit_export_read_row(sd_bus_message *m, json_object **ret);

AuditExportKind audit_export_kind(json_object *row);

/* The row's run id: "run-<row id>". Built from the number only, never from a string of the row, so it is
 * always a safe file name. -EINVAL if the row has no id. */
int audit_export_run_id(json_object *row, char ret[static AUDIT_EXPORT_RUN_ID_MAX]);

/* The events a row maps to, in order, as a new JSON array (empty for AUDIT_EXPORT_NONE rows): started
 * and then finished or failed for a command that ran, denied or blocked for one that did not, one
 * sandbox.file.* event for a file operation. */
int audit_export_events(json_object *row, json_object **ret);

/* A command row's metadata.json; -EINVAL for rows of other kinds. */
int audit_export_metadata(json_object *row, json_object **ret);

/* A command's argv as one shell-quoted line: words of safe characters as they are, others in single
 * quotes. */
char *audit_export_command_line(json_object *argv);
