/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The run-session export of the audit log: rows to audit.jsonl events and run metadata (audit-api.md). */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

/* "run-" + a row id in decimal, or "run-" + a sandbox id + "-p" + a process number, and the NUL. */
#define AUDIT_EXPORT_RUN_ID_MAX 48

typedef enum AuditExportKind {
        AUDIT_EXPORT_NONE,    /* maps to no event (sandbox.*, api_key.*, the gateway's read refusals, auth) */
        AUDIT_EXPORT_COMMAND, /* exec, takeover: sandbox.command.* events and a run directory */
        AUDIT_EXPORT_FILE,    /* the file operations: one sandbox.file.<operation> event */
        AUDIT_EXPORT_PROCESS, /* process.start, .signal, .exit: one run per background process, over rows */
} AuditExportKind;

/* What a row does to its run directory (audit_export_process_metadata()). */
typedef enum AuditExportRunWrite {
        AUDIT_EXPORT_RUN_UNCHANGED, /* nothing: a signal that was not sent */
        AUDIT_EXPORT_RUN_METADATA,  /* metadata.json only: the process runs on */
        AUDIT_EXPORT_RUN_ENDED,     /* metadata.json, and stdout.txt/stderr.txt from this row's output */
} AuditExportRunWrite;

/* Reads one a{sv} row of GetLog or EntryAdded into a JSON object with the row's own keys and types:
 * started_at stays µs since the epoch, detail and output_truncated are parsed JSON (kept as strings if
 * they are not JSON), keys of types we do not know are skipped. Returns 1, or 0 at the end of the
 * enclosing array (nothing read). */
int audit_export_read_row(sd_bus_message *m, json_object **ret);

AuditExportKind audit_export_kind(json_object *row);

/* The row's run id: "run-<row id>". Built from the number only, never from a string of the row, so it is
 * always a safe file name. A background process's rows share one run: "run-<sandbox id>-p<n>", made
 * only when the row's session_id is a valid sandbox id and its detail's process is "p" + 1 to 10
 * digits (else the row's own "run-<row id>"), so that is a safe file name too. -EINVAL if the row has
 * no id. */
int audit_export_run_id(json_object *row, char ret[static AUDIT_EXPORT_RUN_ID_MAX]);

/* The events a row maps to, in order, as a new JSON array (empty for AUDIT_EXPORT_NONE rows): started
 * and then finished or failed for a command that ran, denied or blocked for one that did not, one
 * sandbox.file.* event for a file operation. */
int audit_export_events(json_object *row, json_object **ret);

/* A command row's metadata.json; -EINVAL for rows of other kinds. */
int audit_export_metadata(json_object *row, json_object **ret);

/* A background process's metadata.json after one of its rows: existing is what its run directory holds
 * (NULL if none yet), events the row's events (audit_export_events()). Only the events are read, so
 * anything that has the lines of audit.jsonl can do the same (the SDKs do). Sets *ret (a new object)
 * and returns what to write: AUDIT_EXPORT_RUN_UNCHANGED (*ret untouched), _METADATA, or _ENDED. The
 * same row applied twice gives the same metadata (a resumed export may apply it again). */
int audit_export_process_metadata(json_object *existing, json_object *events, json_object **ret);

/* A command's argv as one shell-quoted line: words of safe characters as they are, others in single
 * quotes. */
char *audit_export_command_line(json_object *argv);
