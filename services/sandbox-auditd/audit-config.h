/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-auditd's configuration: built-in defaults, sandbox-auditd.conf and its drop-ins. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#ifdef SYSCONFDIR
#define AUDIT_CONFIG_DIR SYSCONFDIR "/sandboxd"
#else
#define AUDIT_CONFIG_DIR "/etc/sandboxd"
#endif
#define AUDIT_CONFIG_FILE AUDIT_CONFIG_DIR "/sandbox-auditd.conf"
#define AUDIT_CONFIG_DROPIN_DIR AUDIT_CONFIG_DIR "/sandbox-auditd.conf.d"

#define AUDIT_MAX_AGE_DEFAULT (UINT64_C(90) * UINT64_C(86400000000)) /* 90 days, in µs */
#define AUDIT_MAX_ROWS_DEFAULT UINT64_C(10000000)
#define AUDIT_OUTPUT_MAX_DEFAULT (UINT64_C(1) << 20)
#define AUDIT_DETAIL_MAX_DEFAULT (UINT64_C(4) << 10)
#define AUDIT_CHECKPOINT_ROWS_DEFAULT UINT64_C(1000)
#define AUDIT_CHECKPOINT_INTERVAL_DEFAULT (UINT64_C(300) * UINT64_C(1000000)) /* 5 min, in µs */

/* Bounds of the settings. Both captured streams of a row travel in one message (Record, GetOutput),
 * and the system bus caps a message at 32 MiB; a capped detail must still hold its
 * {"truncated":true,"size":N,"head":"…"} wrapper. */
#define AUDIT_OUTPUT_MAX_LIMIT (UINT64_C(15) << 20)
#define AUDIT_DETAIL_MAX_MIN UINT64_C(256)
#define AUDIT_DETAIL_MAX_LIMIT (UINT64_C(64) << 10)

typedef struct AuditConfig {
        uint64_t max_age_usec; /* rows whose started_at is older are deleted; 0: kept for ever */
        uint64_t max_rows;     /* at most this many of the newest ids are kept; 0: no limit */
        uint64_t output_max;   /* bytes per captured stream in one row */
        uint64_t detail_max;   /* bytes of detail JSON stored as given; larger ones are capped */

        /* [Journal] */
        bool journal_rows;                 /* each stored row also goes to the journal */
        uint64_t checkpoint_rows;          /* a chain checkpoint after this many new rows; 0: not by count */
        uint64_t checkpoint_interval_usec; /* and this long after an uncovered row; 0: not by time */

        /* [PostgreSQL]: a copy of every row there (audit-ship.h, docs/scale-out.md) */
        char pg_url[1024];  /* URL=: a libpq URI; "": no copy */
        char pg_host[256];  /* Host=: this host's name in the copy; "": the hostname */
} AuditConfig;

/* [Log] MaxAgeSec=90d, MaxRows=10000000, OutputMax=1M, DetailMax=4K; [Journal] Rows=no,
 * CheckpointRows=1000, CheckpointIntervalSec=5min; [PostgreSQL] URL= (none), Host= (the hostname). */
void audit_config_defaults(AuditConfig *c);

/* Applies main_path, then every "*.conf" in dropin_dir in lexical (strcmp) order, on top of what c
 * holds (normally the defaults); later assignments win. Either path may be NULL, and missing files or
 * directories are fine.
 *
 * Format: a "[Log]" section of Key=Value lines (MaxAgeSec=, MaxRows=, OutputMax=, DetailMax=) and a
 * "[Journal]" section (Rows= yes/no, true/false, on/off or 1/0; CheckpointRows=,
 * CheckpointIntervalSec=); '#' or ';' starts a comment at the start of a line, or after whitespace
 * within a value; whitespace around keys and values is ignored.
 *
 * Returns 0 and updates c; or, leaving c untouched: -EINVAL for a bad file (unknown section or key,
 * bad or out-of-range value), with *ret_error = "file:line: what is wrong"; a negative errno if a file
 * exists but cannot be read, with *ret_error = "file: reason"; -ENOMEM. ret_error may be NULL; the
 * caller frees the message. */
int audit_config_load(AuditConfig *c, const char *main_path, const char *dropin_dir, char **ret_error);
