/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-auditd's checkpoints of its hash chain, read back from the system journal. */
#include "audit-checkpoints.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-journal.h>

#include "macro.h"
#include "sandboxd-bus.h"

/* The value of field (e.g. "SANDBOX_ROW") of the current entry, NUL-terminated into buf. */
static int field(sd_journal *j, const char *name, char *buf, size_t size) {
        const void *data;
        size_t len, n = strlen(name);
        int r;

        r = sd_journal_get_data(j, name, &data, &len);
        if (r < 0)
                return r;
        if (len <= n + 1 || len - n - 1 >= size)
                return -EBADMSG;
        memcpy(buf, (const char *) data + n + 1, len - n - 1);
        buf[len - n - 1] = 0;
        return 0;
}

static void journal_closep(sd_journal **j) {
        if (*j)
                sd_journal_close(*j);
}

int audit_checkpoints_read(uid_t uid, int (*cb)(const AuditCheckpoint *c, void *userdata), void *userdata) {
        _cleanup_(journal_closep) sd_journal *j = NULL;
        char match[64];
        int r, n = 0;

        r = sd_journal_open(&j, SD_JOURNAL_LOCAL_ONLY | SD_JOURNAL_SYSTEM);
        if (r < 0)
                return r;
        snprintf(match, sizeof(match), "_UID=%u", (unsigned) uid);
        if ((r = sd_journal_add_match(j, "MESSAGE_ID=" AUDIT_CHECKPOINT_MESSAGE_ID, 0)) < 0 ||
            (r = sd_journal_add_match(j, "_SYSTEMD_UNIT=sandbox-auditd.service", 0)) < 0 ||
            (r = sd_journal_add_match(j, match, 0)) < 0)
                return r;
        r = sd_journal_seek_tail(j);
        if (r < 0)
                return r;
        while ((r = sd_journal_previous(j)) > 0) {
                AuditCheckpoint c = {};
                char row[32], *end;

                if (field(j, "SANDBOX_ROW", row, sizeof(row)) < 0 ||
                    field(j, "SANDBOX_HASH", c.hash, sizeof(c.hash)) < 0 || strlen(c.hash) != 64 ||
                    strspn(c.hash, "0123456789abcdef") != 64)
                        continue;
                errno = 0;
                c.row = strtoull(row, &end, 10);
                if (errno != 0 || *end || end == row)
                        continue;
                (void) sd_journal_get_realtime_usec(j, &c.realtime_usec);
                n++;
                r = cb(&c, userdata);
                if (r != 0)
                        break;
        }
        return r < 0 ? r : n;
}

typedef struct CheckState {
        sd_bus *bus;
        uint64_t anchor_id;
        AuditCheckpointCheck *out;
        sd_bus_error *error;
} CheckState;

/* The id and hash of the newest row at or below row, from GetLog. */
static int row_hash(CheckState *st, uint64_t row, uint64_t *ret_id, char ret_hash[static 65]) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        *ret_id = 0;
        ret_hash[0] = 0;
        r = sd_bus_call_method(st->bus, AUDITD_BUS_NAME, AUDITD_BUS_PATH, AUDITD_LOG_INTERFACE, "GetLog",
                               st->error, &reply, "a{sv}tt", 1, "max_id", "t", row, (uint64_t) 1,
                               (uint64_t) 0);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "a{sv}");
        if (r <= 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        if (r <= 0)
                return r; /* no row at all */
        while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                const char *key, *h;

                r = sd_bus_message_read(reply, "s", &key);
                if (r < 0)
                        return r;
                if (streq(key, "id"))
                        r = sd_bus_message_read(reply, "v", "t", ret_id);
                else if (streq(key, "hash")) {
                        r = sd_bus_message_read(reply, "v", "s", &h);
                        if (r >= 0)
                                snprintf(ret_hash, 65, "%s", h);
                } else
                        r = sd_bus_message_skip(reply, "v");
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        return r;
        }
        return r;
}

static int check_one(const AuditCheckpoint *c, void *userdata) {
        CheckState *st = userdata;
        AuditCheckpointCheck *out = st->out;
        char hash[65];
        uint64_t id;
        int r;

        if (c->row <= st->anchor_id) {
                out->removed++;
                return 0;
        }
        r = row_hash(st, c->row, &id, hash);
        if (r < 0)
                return r;
        if (id != c->row || !streq(hash, c->hash)) {
                out->broken = true;
                out->row_missing = id != c->row;
                out->bad = *c;
                snprintf(out->log_hash, sizeof(out->log_hash), "%s", hash);
                return 1;
        }
        out->agreed++;
        if (c->row > out->newest_row)
                out->newest_row = c->row;
        return 0;
}

int audit_checkpoints_check(sd_bus *bus, uid_t uid, uint64_t anchor_id, AuditCheckpointCheck *ret,
                            sd_bus_error *error) {
        AuditCheckpointCheck out = {};
        CheckState st = { .bus = bus, .anchor_id = anchor_id, .out = &out, .error = error };
        int r;

        r = audit_checkpoints_read(uid, check_one, &st);
        if (r < 0)
                return r;
        *ret = out;
        return 0;
}
