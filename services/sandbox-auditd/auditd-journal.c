/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-auditd's journal sink: each row as a structured entry, and the hash chain's checkpoints.
 *
 * journald is where systemd hosts already collect logs and forward them (systemd-journal-upload,
 * rsyslog's imjournal, …): a row there leaves the host without code of ours. The checkpoints put the
 * chain's hash where an attacker who rewrites the database would have to rewrite it too. */
#include "auditd-journal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <systemd/sd-journal.h>

#include "macro.h"

const char *auditd_journal_message_id(const char *operation) {
        static const char *const file_ops[] = { "file_create", "write", "read", "view", "str_replace",
                                                "insert", "ls", "glob", "grep" };

        /* a background process's rows are about a command run too (issue 25) */
        if (streq(operation, "exec") || strncmp(operation, "process.", 8) == 0)
                return AUDITD_MESSAGE_EXEC;
        if (streq(operation, "takeover"))
                return AUDITD_MESSAGE_TAKEOVER;
        if (strncmp(operation, "sandbox.", 8) == 0 && !streq(operation, "sandbox.read"))
                return AUDITD_MESSAGE_SANDBOX;
        for (size_t i = 0; i < ELEMENTSOF(file_ops); i++)
                if (streq(operation, file_ops[i]))
                        return AUDITD_MESSAGE_FILE;
        return AUDITD_MESSAGE_ACCESS; /* api_key.*, auth, and the gateway's refused reads */
}

static size_t put_clean(char *buf, size_t at, size_t size, const char *s) {
        for (; *s && at + 1 < size; s++)
                buf[at++] = (unsigned char) *s < 0x20 || *s == 0x7f ? ' ' : *s;
        buf[at] = 0;
        return at;
}

void auditd_journal_message(const AuditEntry *e, char *buf, size_t size) {
        char tail[96];
        size_t n = 0;

        if (size == 0)
                return;
        buf[0] = 0;
        n = put_clean(buf, n, size, e->operation);
        n = put_clean(buf, n, size, " ");
        n = put_clean(buf, n, size, e->event);
        if (!isempty(e->session_id)) {
                n = put_clean(buf, n, size, " in ");
                n = put_clean(buf, n, size, e->session_id);
        }
        if (!isempty(e->account_id)) {
                n = put_clean(buf, n, size, " by ");
                n = put_clean(buf, n, size, e->account_id);
        }
        snprintf(tail, sizeof(tail), " (exit %" PRIi32 "), row %" PRIu64, e->exit_code, e->id);
        (void) put_clean(buf, n, size, tail);
}

static int priority_of(const char *event) {
        if (streq(event, "denied") || streq(event, "blocked"))
                return LOG_WARNING;
        if (streq(event, "finished"))
                return LOG_INFO;
        return LOG_NOTICE; /* failed, timed out, OOM-killed, cancelled */
}

int auditd_journal_row(const AuditEntry *e) {
        char message[512], hash[AUDIT_HASH_HEX_SIZE];

        auditd_journal_message(e, message, sizeof(message));
        return sd_journal_send("MESSAGE_ID=%s", auditd_journal_message_id(e->operation),
                               "PRIORITY=%i", priority_of(e->event),
                               "MESSAGE=%s", message,
                               "SANDBOX_ID=%s", e->session_id,
                               "SANDBOX_OPERATION=%s", e->operation,
                               "SANDBOX_EVENT=%s", e->event,
                               "SANDBOX_ACCOUNT=%s", e->account_id,
                               "SANDBOX_SOURCE=%s", e->source,
                               "SANDBOX_EXIT=%" PRIi32, e->exit_code,
                               "SANDBOX_ROW=%" PRIu64, e->id,
                               "SANDBOX_KEY=%s", e->key,
                               "SANDBOX_REQUEST_ID=%s", e->request_id,
                               "SANDBOX_STARTED_AT=%" PRIu64, e->started_at,
                               "SANDBOX_DURATION_USEC=%" PRIu64, e->duration_usec,
                               "SANDBOX_DETAIL=%s", e->detail,
                               "SANDBOX_HASH=%s", audit_hash_to_hex(e->hash, hash),
                               NULL);
}

int auditd_journal_checkpoint(uint64_t id, const uint8_t *hash, uint64_t rows) {
        char hex[AUDIT_HASH_HEX_SIZE];

        audit_hash_to_hex(hash, hex);
        return sd_journal_send("MESSAGE_ID=" AUDITD_MESSAGE_CHECKPOINT,
                               "PRIORITY=%i", LOG_INFO,
                               "MESSAGE=Audit log checkpoint: row %" PRIu64 ", hash %s.", id, hex,
                               "SANDBOX_ROW=%" PRIu64, id,
                               "SANDBOX_HASH=%s", hex,
                               "SANDBOX_CHECKPOINT_ROWS=%" PRIu64, rows,
                               NULL);
}
