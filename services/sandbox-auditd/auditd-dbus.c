/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-auditd on the bus: the Log vtable, its errors, the rows as a{sv}, and EntryAdded. */
#include "auditd-dbus.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auditd-manager.h"
#include "bus-fields.h"
#include "daemon-util.h"
#include "macro.h"

const char *audit_storage_error_string(int error) {
        switch (error) {
        case -ENOSPC:
                return "database or disk is full";
        case -EIO:
                return "disk I/O error";
        case -EBUSY:
                return "database is locked";
        case -EROFS:
                return "attempt to write a readonly database";
        case -ENOMEM:
                return "out of memory";
        default:
                return strerror(-error);
        }
}

static int check_reader(Manager *m, sd_bus_message *msg, sd_bus_error *error) {
        uid_t uid;
        int r = manager_sender_uid(m, msg, &uid);
        if (r < 0)
                return r;
        if (!manager_uid_may_read(m, uid))
                return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED,
                                        "Only root and members of sandbox-admin may read the audit log.");
        return 0;
}

static int bad_type(sd_bus_error *error, const char *what, const char *key, const char *expected,
                    const char *got) {
        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                 "%s field '%s' must be of type '%s', not '%s'.", what, key, expected, got);
}

/* "a, b, c" of a string table, for messages. */
#define JOIN_TABLE(buf, name, max)                                                                      \
        ({                                                                                              \
                size_t _n = 0;                                                                          \
                (buf)[0] = 0;                                                                           \
                for (int _i = 0; _i < (int) (max); _i++)                                                \
                        _n += (size_t) snprintf((buf) + _n, sizeof(buf) - MIN(_n, sizeof(buf)), "%s%s", \
                                                _i ? ", " : "", name##_to_string(_i));                  \
                (buf);                                                                                  \
        })

static int unknown_value(sd_bus_error *error, const char *key, const char *value) {
        char list[512];

        if (streq(key, "operation"))
                JOIN_TABLE(list, audit_operation, _AUDIT_OPERATION_MAX);
        else if (streq(key, "event"))
                JOIN_TABLE(list, audit_event, _AUDIT_EVENT_MAX);
        else
                JOIN_TABLE(list, audit_source, _AUDIT_SOURCE_MAX);
        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Unknown %s '%s' (expected one of: %s).",
                                 key, value, list);
}

/* --- Record ------------------------------------------------------------------------------------- */

enum {
        ROW_KEY,
        ROW_SESSION_ID,
        ROW_ACCOUNT_ID,
        ROW_SOURCE,
        ROW_OPERATION,
        ROW_EVENT,
        ROW_DETAIL,
        ROW_EXIT_CODE,
        ROW_STDOUT,
        ROW_STDERR,
        ROW_STARTED_AT,
        ROW_DURATION_USEC,
        ROW_REQUEST_ID,
        _ROW_MAX,
};

static const BusField row_fields[_ROW_MAX] = {
        [ROW_KEY] = { "key", "s" },
        [ROW_SESSION_ID] = { "session_id", "s" },
        [ROW_ACCOUNT_ID] = { "account_id", "s" },
        [ROW_SOURCE] = { "source", "s" },
        [ROW_OPERATION] = { "operation", "s" },
        [ROW_EVENT] = { "event", "s" },
        [ROW_DETAIL] = { "detail", "s" },
        [ROW_EXIT_CODE] = { "exit_code", "i" },
        [ROW_STDOUT] = { "stdout", "ay" },
        [ROW_STDERR] = { "stderr", "ay" },
        [ROW_STARTED_AT] = { "started_at", "t" },
        [ROW_DURATION_USEC] = { "duration_usec", "t" },
        [ROW_REQUEST_ID] = { "request_id", "s" },
};

static int read_row_field(size_t f, const char *key, sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        AuditRecord *rec = userdata;
        const char *s;
        int r;

        switch (f) {
        case ROW_STDOUT:
        case ROW_STDERR:
                r = sd_bus_message_enter_container(msg, 'v', "ay");
                if (r < 0)
                        return r;
                r = sd_bus_message_read_array(msg, 'y',
                                              f == ROW_STDOUT ? &rec->stdout_data : &rec->stderr_data,
                                              f == ROW_STDOUT ? &rec->stdout_size : &rec->stderr_size);
                if (r < 0)
                        return r;
                return sd_bus_message_exit_container(msg);
        case ROW_EXIT_CODE:
                return sd_bus_message_read(msg, "v", "i", &rec->exit_code);
        case ROW_STARTED_AT:
                return sd_bus_message_read(msg, "v", "t", &rec->started_at);
        case ROW_DURATION_USEC:
                return sd_bus_message_read(msg, "v", "t", &rec->duration_usec);
        default:
                break;
        }

        r = sd_bus_message_read(msg, "v", "s", &s);
        if (r < 0)
                return r;
        switch (f) {
        case ROW_KEY:
                rec->key = s;
                break;
        case ROW_SESSION_ID:
                rec->session_id = s;
                break;
        case ROW_ACCOUNT_ID:
                rec->account_id = s;
                break;
        case ROW_REQUEST_ID:
                rec->request_id = s;
                break;
        case ROW_DETAIL:
                rec->detail = s;
                break;
        case ROW_SOURCE:
                rec->source = audit_source_from_string(s);
                if (rec->source < 0)
                        return unknown_value(error, "source", s);
                break;
        case ROW_OPERATION:
                rec->operation = audit_operation_from_string(s);
                if (rec->operation < 0)
                        return unknown_value(error, "operation", s);
                break;
        case ROW_EVENT:
                rec->event = audit_event_from_string(s);
                if (rec->event < 0)
                        return unknown_value(error, "event", s);
                break;
        }
        return 0;
}

int audit_parse_row(sd_bus_message *msg, AuditRecord *rec, sd_bus_error *error) {
        return bus_read_fields(msg, row_fields, _ROW_MAX, "Row", NULL, read_row_field, rec, NULL, error);
}

static int method_record(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(audit_record_clear) AuditRecord rec = AUDIT_RECORD_INIT;
        _cleanup_free_ char *why = NULL;
        Manager *m = userdata;
        uid_t uid;
        int r;

        r = manager_sender_uid(m, msg, &uid);
        if (r < 0)
                return r;
        if (!manager_uid_may_record(m, uid))
                return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED,
                                        "Only root and sandbox-gateway may record audit rows.");
        r = audit_parse_row(msg, &rec, error);
        if (r < 0)
                return r;
        r = audit_record_normalize(&rec, m->config.output_max, m->config.detail_max, &why);
        if (r == -EINVAL)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "%s", why ?: "Invalid row.");
        if (r < 0)
                return r;
        r = manager_record(m, msg, &rec, 1, false);
        if (r < 0)
                return r;
        return 1; /* answered once the row is committed */
}

/* Rows of one RecordBatch: the array, each freed with audit_record_clear(). */
typedef struct RecordArray {
        AuditRecord *recs;
        size_t n, allocated;
} RecordArray;

static void record_array_done(RecordArray *a) {
        for (size_t i = 0; i < a->n; i++)
                audit_record_clear(&a->recs[i]);
        free(a->recs);
        *a = (RecordArray) {};
}

/* error as "Row <i>: <what was wrong>", keeping its name; r passes through */
static int row_error(sd_bus_error *error, const sd_bus_error *e, size_t i, int r) {
        if (!sd_bus_error_is_set(e))
                return r;
        return sd_bus_error_setf(error, e->name, "Row %zu: %s", i, strna(e->message));
}

static int method_record_batch(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(record_array_done) RecordArray a = {};
        Manager *m = userdata;
        uid_t uid;
        int r;

        r = manager_sender_uid(m, msg, &uid);
        if (r < 0)
                return r;
        if (!manager_uid_may_record(m, uid))
                return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED,
                                        "Only root and sandbox-gateway may record audit rows.");

        /* Every row is read and checked before any is stored: one bad row refuses the whole batch. */
        r = sd_bus_message_enter_container(msg, 'a', "a{sv}");
        if (r < 0)
                return r;
        for (;;) {
                _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;

                r = sd_bus_message_at_end(msg, false);
                if (r < 0)
                        return r;
                if (r > 0)
                        break;
                if (a.n >= AUDITD_BATCH_ROWS_MAX)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "A batch holds at most %u rows.", AUDITD_BATCH_ROWS_MAX);
                if (a.n == a.allocated) {
                        size_t na = MAX(a.allocated * 2, (size_t) 16);
                        AuditRecord *nr = realloc(a.recs, na * sizeof(AuditRecord));
                        if (!nr)
                                return -ENOMEM;
                        a.recs = nr;
                        a.allocated = na;
                }
                a.recs[a.n++] = AUDIT_RECORD_INIT;
                r = audit_parse_row(msg, &a.recs[a.n - 1], &e);
                if (r < 0)
                        return row_error(error, &e, a.n - 1, r);
        }
        r = sd_bus_message_exit_container(msg);
        if (r < 0)
                return r;
        for (size_t i = 0; i < a.n; i++) {
                _cleanup_free_ char *why = NULL;

                r = audit_record_normalize(&a.recs[i], m->config.output_max, m->config.detail_max, &why);
                if (r == -EINVAL)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Row %zu: %s", i,
                                                 why ?: "Invalid row.");
                if (r < 0)
                        return r;
        }
        if (a.n == 0)
                return sd_bus_reply_method_return(msg, "at", 0);
        r = manager_record(m, msg, a.recs, a.n, true);
        if (r < 0)
                return r;
        return 1; /* answered once the rows are committed */
}

int audit_reply_recorded(sd_bus_message *msg, uint64_t id) {
        return sd_bus_reply_method_return(msg, "t", id);
}

int audit_reply_recorded_batch(sd_bus_message *msg, const uint64_t *ids, size_t n) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = sd_bus_message_new_method_return(msg, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_append_array(reply, 't', ids, n * sizeof(uint64_t));
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

int audit_reply_storage_error(sd_bus_message *msg, int error) {
        return sd_bus_reply_method_errorf(msg, AUDITD_ERROR_STORAGE_FULL,
                                          "The row was not stored, keep it and retry: %s.",
                                          audit_storage_error_string(error));
}

/* --- rows out ----------------------------------------------------------------------------------- */

static int append_entry(sd_bus_message *m, const AuditEntry *e) {
        char hash[AUDIT_HASH_HEX_SIZE];

        return sd_bus_message_append(
                m, "a{sv}", 17,
                "id", "t", e->id,
                "key", "s", e->key,
                "session_id", "s", e->session_id,
                "account_id", "s", e->account_id,
                "source", "s", e->source,
                "operation", "s", e->operation,
                "event", "s", e->event,
                "detail", "s", e->detail,
                "detail_truncated", "b", (int) e->detail_truncated,
                "exit_code", "i", e->exit_code,
                "output_truncated", "s", e->output_truncated,
                "started_at", "t", e->started_at,
                "duration_ms", "t", e->duration_usec / 1000,
                "request_id", "s", e->request_id,
                "stdout_size", "t", e->stdout_size,
                "stderr_size", "t", e->stderr_size,
                "hash", "s", audit_hash_to_hex(e->hash, hash));
}

static uint64_t entry_bytes(const AuditEntry *e) {
        return 320 + strlen(e->key) + strlen(e->session_id) + strlen(e->account_id) + strlen(e->detail) +
               strlen(e->output_truncated) + strlen(e->request_id);
}

void audit_emit_entry_added(Manager *m, const AuditEntry *e) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *s = NULL;

        if (sd_bus_message_new_signal(m->bus, &s, AUDITD_BUS_PATH, AUDITD_LOG_INTERFACE, "EntryAdded") < 0 ||
            sd_bus_message_append(s, "ts", e->id, e->session_id) < 0 || append_entry(s, e) < 0)
                return;
        (void) sd_bus_send(m->bus, s, NULL);
}

/* --- GetLog ------------------------------------------------------------------------------------- */

static int filter_entry(const char *key, sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        AuditFilter *f = userdata;
        const char **text = NULL, *contents;
        uint64_t *num = NULL;
        bool *has = NULL;
        int r;

        if (streq(key, "session_id"))
                text = &f->session_id;
        else if (streq(key, "account_id"))
                text = &f->account_id;
        else if (streq(key, "operation"))
                text = &f->operation;
        else if (streq(key, "source"))
                text = &f->source;
        else if (streq(key, "event"))
                text = &f->event;
        else if (streq(key, "since"))
                num = &f->since, has = &f->has_since;
        else if (streq(key, "until"))
                num = &f->until, has = &f->has_until;
        else if (streq(key, "after_id"))
                num = &f->after_id, has = &f->has_after_id;
        else if (streq(key, "max_id"))
                num = &f->max_id, has = &f->has_max_id;
        else
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Unknown filter '%s'.", key);

        r = sd_bus_message_peek_type(msg, NULL, &contents);
        if (r < 0)
                return r;
        if (!streq(contents, text ? "s" : "t"))
                return bad_type(error, "Filter", key, text ? "s" : "t", contents);
        if (!text) {
                r = sd_bus_message_read(msg, "v", "t", num);
                if (r < 0)
                        return r;
                *has = true;
                return 0;
        }
        r = sd_bus_message_read(msg, "v", "s", text);
        if (r < 0)
                return r;
        if ((streq(key, "operation") && audit_operation_from_string(*text) < 0) ||
            (streq(key, "event") && audit_event_from_string(*text) < 0) ||
            (streq(key, "source") && audit_source_from_string(*text) < 0))
                return unknown_value(error, key, *text);
        return 0;
}

int audit_parse_filter(sd_bus_message *msg, AuditFilter *f, sd_bus_error *error) {
        return bus_foreach_sv(msg, filter_entry, f, error);
}

typedef struct PageBuilder {
        sd_bus_message *reply;
        uint64_t bytes;
} PageBuilder;

static int page_add(const AuditEntry *e, void *userdata) {
        PageBuilder *b = userdata;
        int r = append_entry(b->reply, e);
        if (r < 0)
                return r;
        b->bytes += entry_bytes(e);
        return b->bytes >= AUDITD_REPLY_BYTES_MAX ? 1 : 0;
}

static int method_get_log(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        AuditFilter f = {};
        uint64_t limit, offset;
        int r;

        r = check_reader(m, msg, error);
        if (r < 0)
                return r;
        r = audit_parse_filter(msg, &f, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(msg, "tt", &limit, &offset);
        if (r < 0)
                return r;

        /* rows whose callers still wait for their commit are part of the log already */
        manager_flush(m);

        r = sd_bus_message_new_method_return(msg, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        if (r < 0)
                return r;
        PageBuilder b = { .reply = reply };
        r = audit_store_query(m->store, &f, limit, offset, page_add, &b);
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED, "Could not read the log: %s",
                                         audit_storage_error_string(r));
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* --- GetOutput ---------------------------------------------------------------------------------- */

static int output_add(const void *out, size_t out_size, const void *err, size_t err_size, void *userdata) {
        sd_bus_message *reply = userdata;
        int r;

        /* an empty blob comes back as NULL */
        r = sd_bus_message_append_array(reply, 'y', out ?: "", out_size);
        if (r < 0)
                return r;
        return sd_bus_message_append_array(reply, 'y', err ?: "", err_size);
}

static int method_get_output(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        uint64_t id;
        int r;

        r = check_reader(m, msg, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(msg, "t", &id);
        if (r < 0)
                return r;
        manager_flush(m);

        r = sd_bus_message_new_method_return(msg, &reply);
        if (r < 0)
                return r;
        r = audit_store_get_output(m->store, id, output_add, reply);
        if (r == -ENOENT)
                return sd_bus_error_setf(error, AUDITD_ERROR_NO_SUCH_ENTRY, "No audit entry %" PRIu64 ".",
                                         id);
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED, "Could not read entry %" PRIu64 ": %s",
                                         id, audit_storage_error_string(r));
        return sd_bus_send(NULL, reply, NULL);
}

/* --- VerifyLog --------------------------------------------------------------------------------- */

enum {
        VERIFY_MAX_ID,
        _VERIFY_MAX,
};

static const BusField verify_fields[_VERIFY_MAX] = {
        [VERIFY_MAX_ID] = { "max_id", "t" },
};

static int read_verify_field(size_t f, const char *key, sd_bus_message *msg, void *userdata,
                             sd_bus_error *error) {
        uint64_t *max_id = userdata;
        int r;

        r = sd_bus_message_read(msg, "v", "t", max_id);
        if (r < 0)
                return r;
        if (*max_id == 0)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS,
                                        "max_id must be 1 or more (leave it out to verify every row).");
        return 0;
}

int audit_parse_verify_options(sd_bus_message *msg, uint64_t *ret_max_id, sd_bus_error *error) {
        uint64_t max_id = 0;
        int r;

        r = bus_read_fields(msg, verify_fields, _VERIFY_MAX, "Option", " (expected max_id)",
                            read_verify_field, &max_id, NULL, error);
        if (r < 0)
                return r;
        *ret_max_id = max_id;
        return 0;
}

static int method_verify_log(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        uint64_t max_id = 0;
        int r;

        r = check_reader(m, msg, error);
        if (r < 0)
                return r;
        r = audit_parse_verify_options(msg, &max_id, error);
        if (r < 0)
                return r;
        r = manager_verify(m, msg, max_id);
        if (r == -EBUSY)
                return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                         "At most %u verifications run at once; try again when one is done.",
                                         AUDITD_VERIFY_JOBS_MAX);
        if (r < 0)
                return r;
        return 1; /* answered when the walk is done */
}

int audit_reply_verified(sd_bus_message *msg, const AuditVerify *v, int error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        char anchor[AUDIT_HASH_HEX_SIZE], last[AUDIT_HASH_HEX_SIZE], stored[AUDIT_HASH_HEX_SIZE],
                expected[AUDIT_HASH_HEX_SIZE], message[320];
        bool ok = v->result == AUDIT_CHAIN_OK;
        int r;

        if (error < 0)
                return sd_bus_reply_method_errorf(msg, SD_BUS_ERROR_FAILED, "Could not read the log: %s",
                                                  audit_storage_error_string(error));
        if (ok && v->rows == 0)
                snprintf(message, sizeof(message), "No rows to verify after row %" PRIu64 ".", v->anchor_id);
        else if (ok)
                snprintf(message, sizeof(message),
                         "All %" PRIu64 " rows from %" PRIu64 " to %" PRIu64 " verify.", v->rows,
                         v->anchor_id + 1, v->prev_id);
        else
                snprintf(message, sizeof(message), "%s", v->message);

        r = sd_bus_message_new_method_return(msg, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_append(
                reply, "a{sv}", ok ? 9 : 12,
                "verified", "b", (int) ok,
                "reason", "s", audit_chain_break_to_string(v->result),
                "message", "s", message,
                "rows", "t", v->rows,
                "unhashed", "t", v->unhashed,
                "anchor_id", "t", v->anchor_id,
                "anchor_hash", "s", audit_hash_to_hex(v->anchor_has_hash ? v->anchor_hash : NULL, anchor),
                "last_id", "t", v->prev_id,
                "last_hash", "s", audit_hash_to_hex(v->prev_id > v->anchor_id ? v->prev_hash : NULL, last),
                "bad_id", "t", v->bad_id,
                "stored_hash", "s", audit_hash_to_hex(v->has_stored ? v->stored : NULL, stored),
                "expected_hash", "s",
                audit_hash_to_hex(v->result == AUDIT_CHAIN_TRUNCATED ? NULL : v->expected, expected));
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static const sd_bus_vtable log_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD_WITH_ARGS("Record", SD_BUS_ARGS("a{sv}", row), SD_BUS_RESULT("t", id), method_record,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("RecordBatch", SD_BUS_ARGS("aa{sv}", rows), SD_BUS_RESULT("at", ids),
                                method_record_batch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetLog", SD_BUS_ARGS("a{sv}", filter, "t", limit, "t", offset),
                                SD_BUS_RESULT("aa{sv}", rows), method_get_log, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetOutput", SD_BUS_ARGS("t", id), SD_BUS_RESULT("ay", stdout, "ay", stderr),
                                method_get_output, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("VerifyLog", SD_BUS_ARGS("a{sv}", options), SD_BUS_RESULT("a{sv}", result),
                                method_verify_log, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("EntryAdded", SD_BUS_ARGS("t", id, "s", session_id, "a{sv}", row), 0),
        SD_BUS_VTABLE_END,
};

int manager_bus_setup(Manager *m) {
        int r;

        r = daemon_bus_open(m->event, true, &m->bus);
        if (r < 0)
                return r;
        r = sd_bus_add_object_vtable(m->bus, NULL, AUDITD_BUS_PATH, AUDITD_LOG_INTERFACE, log_vtable, m);
        if (r < 0)
                return r;
        return sd_bus_error_add_map(auditd_bus_errors);
}
