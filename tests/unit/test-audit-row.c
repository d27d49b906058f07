/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for audit-row: a row encoded by sandboxd's spool or the gateway reads back whole in the logger. */
#include <sys/socket.h>

#include "audit-row.h"
#include "auditd-dbus.h"
#include "macro.h"
#include "test-util.h"

/* A client bus on one end of a socketpair, never connected: enough to make messages on. */
static sd_bus *test_bus(void) {
        sd_bus *bus = NULL;
        int fds[2];

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) < 0 || sd_bus_new(&bus) < 0 ||
            sd_bus_set_fd(bus, fds[0], fds[0]) < 0 || sd_bus_start(bus) < 0) {
                fprintf(stderr, "cannot make a bus to build messages on\n");
                abort();
        }
        return bus;
}

/* Encodes row into a sealed call, as the logger receives it. */
static sd_bus_message *encode(sd_bus *bus, const AuditRow *row, int *ret) {
        static uint64_t cookie = 0;
        sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, "org.sandboxd.audit1", "/org/sandboxd/audit1",
                                           "org.sandboxd.audit1.Log", "Record");
        if (r >= 0)
                r = audit_row_append(m, row);
        if (r >= 0)
                r = sd_bus_message_seal(m, ++cookie, 0);
        if (r >= 0)
                r = sd_bus_message_rewind(m, true);
        *ret = r < 0 ? r : 0;
        return m;
}

int main(void) {
        _cleanup_(sd_bus_close_unrefp) sd_bus *bus = test_bus();
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *m;
        int r;

        /* sandboxd's spool: every field */
        AuditRow full = {
                .key = "k1",
                .session_id = "sb_abcdefghij",
                .account_id = "acct",
                .source = "human_takeover",
                .operation = "exec",
                .event = "failed",
                .detail = "{\"a\":1}",
                .exit_code = -7,
                .out = "out\0put",
                .out_size = 7,
                .err = "err",
                .err_size = 3,
                .started_at = UINT64_C(1700000000123456),
                .duration_usec = 4242,
                .request_id = "req_1",
        };
        m = encode(bus, &full, &r);
        CHECK_INT(r, 0);
        {
                AuditRecord rec = AUDIT_RECORD_INIT;
                CHECK(audit_parse_row(m, &rec, &e) >= 0);
                CHECK_STR(rec.key, "k1");
                CHECK_STR(rec.session_id, "sb_abcdefghij");
                CHECK_STR(rec.account_id, "acct");
                CHECK_INT(rec.source, AUDIT_SOURCE_HUMAN_TAKEOVER);
                CHECK_INT(rec.operation, audit_operation_from_string("exec"));
                CHECK_INT(rec.event, audit_event_from_string("failed"));
                CHECK_STR(rec.detail, "{\"a\":1}");
                CHECK_INT(rec.exit_code, -7);
                CHECK_U64(rec.stdout_size, 7);
                CHECK(rec.stdout_data && memcmp(rec.stdout_data, "out\0put", 7) == 0);
                CHECK_U64(rec.stderr_size, 3);
                CHECK(rec.stderr_data && memcmp(rec.stderr_data, "err", 3) == 0);
                CHECK_U64(rec.started_at, UINT64_C(1700000000123456));
                CHECK_U64(rec.duration_usec, 4242);
                CHECK_STR(rec.request_id, "req_1");
                CHECK(!sd_bus_error_is_set(&e));
        }
        sd_bus_message_unref(m);

        /* the gateway's: no session, detail, output or request id; the logger's defaults apply */
        AuditRow gateway = {
                .key = "gateway:::exec:denied:1:1",
                .account_id = "key_abc",
                .source = "agent",
                .operation = "api_key.create",
                .event = "denied",
                .started_at = 5,
        };
        m = encode(bus, &gateway, &r);
        CHECK_INT(r, 0);
        {
                AuditRecord rec = AUDIT_RECORD_INIT;
                CHECK(audit_parse_row(m, &rec, &e) >= 0);
                CHECK_STR(rec.key, "gateway:::exec:denied:1:1");
                CHECK_STR(rec.session_id, "");
                CHECK_INT(rec.source, AUDIT_SOURCE_AGENT);
                CHECK_INT(rec.operation, audit_operation_from_string("api_key.create"));
                CHECK(rec.detail == NULL);
                CHECK(rec.request_id == NULL);
                CHECK_INT(rec.exit_code, 0);
                CHECK_U64(rec.stdout_size + rec.stderr_size, 0);
                CHECK_U64(rec.started_at, 5);
                CHECK_U64(rec.duration_usec, 0);
        }
        sd_bus_message_unref(m);

        /* a row without what the logger requires is not encoded */
        AuditRow bad = gateway;
        bad.key = NULL;
        m = encode(bus, &bad, &r);
        CHECK_INT(r, -EINVAL);
        sd_bus_message_unref(m);
        bad = gateway;
        bad.out_size = 3;
        m = encode(bus, &bad, &r);
        CHECK_INT(r, -EINVAL);
        sd_bus_message_unref(m);

        sd_bus_error_free(&e);
        return test_finish("test-audit-row");
}
