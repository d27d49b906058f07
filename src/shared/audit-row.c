/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One audit row as sandbox-auditd's Record takes it (docs/dbus-api.md), and its one a{sv} encoder. */
#include "audit-row.h"

#include <assert.h>
#include <errno.h>

#include "macro.h"

static int append_bytes(sd_bus_message *m, const char *key, const void *p, size_t size) {
        int r;

        r = sd_bus_message_open_container(m, 'e', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", key);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "ay");
        if (r >= 0)
                r = sd_bus_message_append_array(m, 'y', size > 0 ? p : "", size);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

int audit_row_append(sd_bus_message *m, const AuditRow *row) {
        int r;

        assert(m);
        assert(row);

        if (!row->key || !row->account_id || !row->source || !row->operation || !row->event)
                return -EINVAL;
        if ((row->out_size > 0 && !row->out) || (row->err_size > 0 && !row->err))
                return -EINVAL;

        r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "{sv}{sv}{sv}{sv}{sv}{sv}", "key", "s", row->key, "session_id", "s",
                                  row->session_id ?: "", "account_id", "s", row->account_id, "source", "s",
                                  row->source, "operation", "s", row->operation, "event", "s", row->event);
        if (r >= 0 && row->detail)
                r = sd_bus_message_append(m, "{sv}", "detail", "s", row->detail);
        if (r >= 0)
                r = sd_bus_message_append(m, "{sv}", "exit_code", "i", row->exit_code);
        if (r >= 0)
                r = append_bytes(m, "stdout", row->out, row->out_size);
        if (r >= 0)
                r = append_bytes(m, "stderr", row->err, row->err_size);
        if (r >= 0)
                r = sd_bus_message_append(m, "{sv}{sv}", "started_at", "t", row->started_at, "duration_usec",
                                          "t", row->duration_usec);
        if (r >= 0 && row->request_id)
                r = sd_bus_message_append(m, "{sv}", "request_id", "s", row->request_id);
        if (r < 0)
                return r;
        return sd_bus_message_close_container(m);
}
