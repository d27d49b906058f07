/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One audit row as sandbox-auditd's Record takes it (docs/dbus-api.md), and its one a{sv} encoder. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

/* The idempotency keys sandboxd's spool makes: "sbd-" + 32 hex digits, and the NUL. */
#define AUDIT_KEY_SIZE 37

typedef struct AuditRow {
        const char *key;         /* the idempotency key */
        const char *session_id;  /* NULL: "" */
        const char *account_id;
        const char *source;      /* "agent" | "human_takeover" */
        const char *operation;
        const char *event;
        const char *detail;      /* JSON; NULL: left out, the logger stores {} */
        int32_t exit_code;
        const void *out;
        size_t out_size;
        const void *err;
        size_t err_size;
        uint64_t started_at;     /* µs since the epoch */
        uint64_t duration_usec;
        const char *request_id;  /* NULL: left out, the logger stores "" */
} AuditRow;

/* Appends the row as one a{sv} to m. A key, account_id, source, operation and event are required
 * (-EINVAL otherwise); the logger's own checks (lengths, JSON) are its business. */
int audit_row_append(sd_bus_message *m, const AuditRow *row);
