/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes sandbox-auditd's readers of what callers send on the bus: Record's row a{sv} (then the row's own
 * checks, audit_record_normalize, with the default limits), GetLog's filter a{sv} and VerifyLog's options
 * a{sv}, over one message made
 * from the input (fuzz-bus.h). What is accepted must be a whole, valid row or filter; what is refused must
 * say why. */
#include "audit-config.h"
#include "auditd-dbus.h"
#include "fuzz-bus.h"

static void check_row(sd_bus_message *m, const AuditConfig *config) {
        _cleanup_(audit_record_clear) AuditRecord rec = AUDIT_RECORD_INIT;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        char *why = NULL;
        int r;

        r = audit_parse_row(m, &rec, &e);
        if (r < 0) {
                FUZZ_ASSERT_REFUSED(r, &e);
                sd_bus_error_free(&e);
                return;
        }
        FUZZ_ASSERT(rec.stdout_size == 0 || rec.stdout_data);
        FUZZ_ASSERT(rec.stderr_size == 0 || rec.stderr_data);
        r = audit_record_normalize(&rec, config->output_max, config->detail_max, &why);
        if (r < 0) {
                FUZZ_ASSERT(r == -ENOMEM || (r == -EINVAL && why));
                free(why);
                return;
        }
        /* A stored row has a key, an operation and an event, and a detail within the cap. */
        FUZZ_ASSERT(rec.key && rec.key[0]);
        FUZZ_ASSERT(rec.operation >= 0 && rec.operation < _AUDIT_OPERATION_MAX);
        FUZZ_ASSERT(rec.event >= 0 && rec.event < _AUDIT_EVENT_MAX);
        FUZZ_ASSERT(rec.source >= 0 && rec.source < _AUDIT_SOURCE_MAX);
        FUZZ_ASSERT(rec.stdout_size <= config->output_max && rec.stderr_size <= config->output_max);
        FUZZ_ASSERT(audit_record_detail(&rec));
        FUZZ_ASSERT(strlen(audit_record_detail(&rec)) <= config->detail_max || !rec.detail_truncated);
        FUZZ_ASSERT(rec.output_truncated);
}

static void check_filter(sd_bus_message *m) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        AuditFilter f = {};
        int r;

        r = audit_parse_filter(m, &f, &e);
        if (r < 0) {
                FUZZ_ASSERT_REFUSED(r, &e);
                sd_bus_error_free(&e);
                return;
        }
        FUZZ_ASSERT(!f.operation || audit_operation_from_string(f.operation) >= 0);
        FUZZ_ASSERT(!f.event || audit_event_from_string(f.event) >= 0);
        FUZZ_ASSERT(!f.source || audit_source_from_string(f.source) >= 0);
}

static void check_verify_options(sd_bus_message *m) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        uint64_t max_id = 7;
        int r;

        r = audit_parse_verify_options(m, &max_id, &e);
        if (r < 0) {
                FUZZ_ASSERT_REFUSED(r, &e);
                FUZZ_ASSERT(max_id == 7); /* untouched */
                sd_bus_error_free(&e);
                return;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        FuzzInput in = {data, size};
        AuditConfig config;
        sd_bus_message *m;

        audit_config_defaults(&config);
        m = fuzz_options_message(&in);
        if (!m)
                return 0;
        check_row(m, &config);
        FUZZ_ASSERT(sd_bus_message_rewind(m, true) >= 0);
        check_filter(m);
        FUZZ_ASSERT(sd_bus_message_rewind(m, true) >= 0);
        check_verify_options(m);
        sd_bus_message_unref(m);
        return 0;
}
