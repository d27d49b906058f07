/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd's side of the audit log: every operation's row goes into a local spool before the caller
 * is answered, and from there to sandbox-auditd, in order, exactly once.
 *
 * The spool is a SQLite table in WAL mode with synchronous=NORMAL: a committed row survives kill -9 of
 * sandboxd or of the logger; a power loss may take the last rows committed before it (they were in the page
 * cache, not yet on disk). A pump sends the oldest rows with RecordBatch — each call takes every row
 * waiting (up to a bound), so a row arriving alone goes at once and a backlog drains in a few large calls —
 * with a bounded number of calls in flight on our one connection (which keeps them in order; a third one
 * only once a full batch waits, so under load the rows that come meanwhile go together), and
 * deletes a call's rows once the logger acknowledged them. On any error it stops, waits (with backoff), and
 * resends from the oldest row not acknowledged: the logger stores nothing twice for a key it has, so
 * delivery is exactly once. A logger without RecordBatch gets one Record per row.
 *
 * A row the logger refuses as invalid (InvalidArgs: say its OutputMax= is below ours) would otherwise
 * stop every row after it for good: it is moved to the table "refused" beside the spool, logged, and
 * the others go on; refused rows are queued again when sandboxd next starts.
 *
 * An operation that runs for a while (an Exec) is also noted in the table "running" when it starts
 * (audit_begin()), and its row, when it ends, replaces that note in one transaction (audit_finish(),
 * same key). Should sandboxd die in between, the note becomes a "failed" row at the next start, with
 * "interrupted" in its detail: an Exec cut off by sandboxd's death is on the record too. */
#include "audit-spool.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "log.h"
#include "macro.h"
#include "sandboxd-bus.h"
#include "sandboxd-manager.h"
#include "spool-pump.h"
#include "sqlite-util.h"
#include "time-util.h"

#define MAX_IN_FLIGHT SPOOL_MAX_IN_FLIGHT
#define RECORD_TIMEOUT_USEC (30 * USEC_PER_SEC)

/* One call on the wire: the spool rows first..last (seqs are never reused, so no other row can appear
 * in between), n of them. */
typedef struct InFlight {
        AuditSpool *spool;
        int64_t first, last;
        unsigned n;
        bool batch; /* RecordBatch, else Record */
        sd_bus_slot *slot;
} InFlight;

struct AuditSpool {
        Manager *manager;
        sqlite3 *db;
        sqlite3_stmt *insert, *next, *delete, *count, *nth, *refuse, *begin, *end;
        int64_t last_sent; /* highest seq handed to the bus in this round */
        int64_t last_spooled; /* highest seq we inserted (at start-up: as if all were ours) */
        unsigned n_in_flight;
        InFlight in_flight[MAX_IN_FLIGHT];
        sd_event_source *kick, *retry;
        uint64_t retry_usec;
        uint64_t pending;
        bool failing;
        bool no_batch;       /* the logger has no RecordBatch: one Record per row */
        int64_t single_until; /* rows up to this seq go one per call (to find one the logger refused) */
};

static const char *const migrations[] = {
        "CREATE TABLE spool ("
        " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
        " key TEXT NOT NULL UNIQUE,"
        " session_id TEXT NOT NULL, account_id TEXT NOT NULL, source TEXT NOT NULL,"
        " operation TEXT NOT NULL, event TEXT NOT NULL, detail TEXT NOT NULL,"
        " exit_code INTEGER NOT NULL, stdout BLOB, stderr BLOB,"
        " started_at INTEGER NOT NULL, duration_usec INTEGER NOT NULL, request_id TEXT NOT NULL)",
        /* rows the logger refused as invalid, with its reason; queued again at start-up */
        "CREATE TABLE refused ("
        " seq INTEGER PRIMARY KEY,"
        " key TEXT NOT NULL UNIQUE,"
        " session_id TEXT NOT NULL, account_id TEXT NOT NULL, source TEXT NOT NULL,"
        " operation TEXT NOT NULL, event TEXT NOT NULL, detail TEXT NOT NULL,"
        " exit_code INTEGER NOT NULL, stdout BLOB, stderr BLOB,"
        " started_at INTEGER NOT NULL, duration_usec INTEGER NOT NULL, request_id TEXT NOT NULL,"
        " error TEXT NOT NULL, refused_at INTEGER NOT NULL)",
        /* operations under way (audit_begin()), whose row is not written yet */
        "CREATE TABLE running ("
        " key TEXT PRIMARY KEY,"
        " session_id TEXT NOT NULL, account_id TEXT NOT NULL, source TEXT NOT NULL,"
        " operation TEXT NOT NULL, detail TEXT NOT NULL,"
        " started_at INTEGER NOT NULL, request_id TEXT NOT NULL)",
};

#define SPOOL_COLUMNS                                                                                       \
        "key, session_id, account_id, source, operation, event, detail, exit_code, stdout, stderr,"         \
        " started_at, duration_usec, request_id"

AuditSpool *audit_spool_free(AuditSpool *s) {
        if (!s)
                return NULL;
        for (unsigned i = 0; i < MAX_IN_FLIGHT; i++)
                sd_bus_slot_unref(s->in_flight[i].slot);
        sd_event_source_disable_unref(s->kick);
        sd_event_source_disable_unref(s->retry);
        sqlite3_finalize(s->insert);
        sqlite3_finalize(s->next);
        sqlite3_finalize(s->delete);
        sqlite3_finalize(s->count);
        sqlite3_finalize(s->nth);
        sqlite3_finalize(s->refuse);
        sqlite3_finalize(s->begin);
        sqlite3_finalize(s->end);
        sqlite3_close_v2(s->db);
        free(s);
        return NULL;
}

static void pump(AuditSpool *s);

static int on_kick(sd_event_source *es, void *userdata) {
        AuditSpool *s = userdata;
        (void) sd_event_source_set_enabled(es, SD_EVENT_OFF);
        pump(s);
        return 0;
}

static int on_retry(sd_event_source *es, uint64_t usec, void *userdata) {
        AuditSpool *s = userdata;
        s->failing = false;
        pump(s);
        return 0;
}

static void kick(AuditSpool *s) {
        if (!s->failing)
                (void) sd_event_source_set_enabled(s->kick, SD_EVENT_ONESHOT);
}

static void schedule_retry(AuditSpool *s) {
        uint64_t now;

        s->failing = true;
        s->retry_usec = spool_retry_next(s->retry_usec);
        (void) sd_event_now(s->manager->event, CLOCK_MONOTONIC, &now);
        if (!s->retry)
                (void) sd_event_add_time(s->manager->event, &s->retry, CLOCK_MONOTONIC, now + s->retry_usec,
                                         0, on_retry, s);
        else {
                (void) sd_event_source_set_time(s->retry, now + s->retry_usec);
                (void) sd_event_source_set_enabled(s->retry, SD_EVENT_ONESHOT);
        }
}

/* Everything from the oldest row not acknowledged goes again: this call's rows and those of every call
 * still in flight (whose answers, if they come, are harmless: a resent key stores nothing). */
static void rewind_to(AuditSpool *s, int64_t first) {
        int64_t busy[MAX_IN_FLIGHT];
        size_t n = 0;

        for (unsigned i = 0; i < MAX_IN_FLIGHT; i++)
                if (s->in_flight[i].slot)
                        busy[n++] = s->in_flight[i].first;
        s->last_sent = spool_rewind(s->last_sent, first, busy, n);
}

/* How many ids the answer holds: 1 for Record, the array's length for RecordBatch; -1 if unreadable. */
static int64_t answered_ids(sd_bus_message *reply) {
        const void *ids;
        size_t size;

        if (sd_bus_message_is_method_error(reply, NULL))
                return -1;
        if (streq(sd_bus_message_get_signature(reply, true), "t"))
                return 1;
        if (sd_bus_message_read_array(reply, 't', &ids, &size) < 0)
                return -1;
        return (int64_t) (size / sizeof(uint64_t));
}

/* Moves spool row seq to the table refused, with the logger's reason. */
static int quarantine(AuditSpool *s, int64_t seq, const char *why) {
        int r;

        r = sqlite_errno(sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL));
        if (r < 0)
                return r;
        sqlite3_bind_text(s->refuse, 1, strempty(why), -1, SQLITE_STATIC);
        sqlite3_bind_int64(s->refuse, 2, (sqlite3_int64) now_usec(CLOCK_REALTIME));
        sqlite3_bind_int64(s->refuse, 3, seq);
        r = sqlite_step_done(s->refuse);
        sqlite3_clear_bindings(s->refuse);
        if (r >= 0) {
                sqlite3_bind_int64(s->delete, 1, seq);
                sqlite3_bind_int64(s->delete, 2, seq);
                r = sqlite_step_done(s->delete);
        }
        if (r >= 0)
                r = sqlite_errno(sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL));
        if (r < 0)
                (void) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return r;
}

/* The logger refused the call's rows first..last (n of them) as invalid: one of them is. RecordBatch
 * says which ("Row <i>: …"); failing that, the rows go again one per call until the refusal names one.
 * Returns 0 when the caller may go on sending, < 0 to treat the answer as any other error. */
static int refuse_row(AuditSpool *s, int64_t first, int64_t last, unsigned n, const sd_bus_error *e) {
        const char *msg = strempty(e->message);
        unsigned idx = 0;
        int64_t seq = first;
        int r;

        if (n > 1) {
                if (spool_refused_index(msg, n, &idx) < 0) {
                        s->single_until = MAX(s->single_until, last);
                        return 0;
                }
                sqlite3_bind_int64(s->nth, 1, first);
                sqlite3_bind_int64(s->nth, 2, last);
                sqlite3_bind_int64(s->nth, 3, (sqlite3_int64) idx);
                int rc = sqlite3_step(s->nth);
                seq = rc == SQLITE_ROW ? sqlite3_column_int64(s->nth, 0) : 0;
                sqlite3_reset(s->nth);
                if (seq == 0)
                        return -ENOENT;
        }
        r = quarantine(s, seq, msg);
        if (r < 0)
                return r;
        s->pending -= MIN(s->pending, (uint64_t) 1);
        log_msg(LOG_ERR,
                "The audit log refused a row as invalid (%s); it is kept aside in the spool (table refused)"
                " and queued again when sandboxd next starts. The rows after it go on.",
                msg);
        return 0;
}

static int on_recorded(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        InFlight *f = userdata;
        AuditSpool *s = f->spool;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        int64_t first = f->first, last = f->last;
        unsigned n = f->n;
        bool batch = f->batch;
        SpoolAnswer answer = spool_answer(e ? e->name : NULL, batch, n, answered_ids(reply));

        f->slot = sd_bus_slot_unref(f->slot);
        *f = (InFlight) {};
        s->n_in_flight--;

        if (answer == SPOOL_ANSWER_NO_BATCH) {
                /* a logger from before RecordBatch: the same rows again, one Record each */
                if (!s->no_batch)
                        log_msg(LOG_INFO, "The audit log has no RecordBatch; sending one row per call.");
                s->no_batch = true;
                rewind_to(s, first);
                kick(s);
                return 0;
        }
        if (answer == SPOOL_ANSWER_REFUSED && refuse_row(s, first, last, n, e) >= 0) {
                rewind_to(s, first);
                kick(s);
                return 0;
        }
        if (answer != SPOOL_ANSWER_TAKEN) {
                /* Stop here; everything from the oldest unacknowledged row goes again later. */
                if (!s->failing)
                        log_msg(LOG_WARNING,
                                "The audit log did not take a row (%s: %s); %" PRIu64
                                " rows wait in the spool.",
                                e ? e->name : "unexpected answer",
                                e ? strna(e->message) : "not one id per row", s->pending);
                rewind_to(s, first);
                schedule_retry(s);
                return 0;
        }

        /* one transaction for the call's rows, not one per row */
        sqlite3_bind_int64(s->delete, 1, first);
        sqlite3_bind_int64(s->delete, 2, last);
        int rc = sqlite3_step(s->delete);
        sqlite3_reset(s->delete);
        if (rc == SQLITE_DONE)
                s->pending -= MIN(s->pending, (uint64_t) sqlite3_changes(s->db));
        if (s->retry_usec > 0) {
                log_msg(LOG_INFO, "The audit log takes rows again.");
                s->retry_usec = 0;
        }
        kick(s);
        return 0;
}

/* The spool's row at st (SELECT seq, SPOOL_COLUMNS) as Record takes it. */
static int append_row(sd_bus_message *m, sqlite3_stmt *st) {
        AuditRow row = {
                .key = (const char *) sqlite3_column_text(st, 1),
                .session_id = (const char *) sqlite3_column_text(st, 2),
                .account_id = (const char *) sqlite3_column_text(st, 3),
                .source = (const char *) sqlite3_column_text(st, 4),
                .operation = (const char *) sqlite3_column_text(st, 5),
                .event = (const char *) sqlite3_column_text(st, 6),
                .detail = (const char *) sqlite3_column_text(st, 7),
                .exit_code = (int32_t) sqlite3_column_int(st, 8),
                .out = sqlite3_column_blob(st, 9),
                .out_size = (size_t) sqlite3_column_bytes(st, 9),
                .err = sqlite3_column_blob(st, 10),
                .err_size = (size_t) sqlite3_column_bytes(st, 10),
                .started_at = (uint64_t) sqlite3_column_int64(st, 11),
                .duration_usec = (uint64_t) sqlite3_column_int64(st, 12),
                .request_id = (const char *) sqlite3_column_text(st, 13),
        };
        return audit_row_append(m, &row);
}

/* Sends the rows after s->last_sent (as spool-pump.h says how many) in one call.
 * Returns 1 if it sent some, 0 if there were none, or a negative errno. */
static int send_rows(AuditSpool *s, InFlight *f) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        sqlite3_stmt *st = s->next;
        bool batch = !s->no_batch;
        uint64_t bytes = 0;
        unsigned n = 0;
        int64_t first = 0, last = 0;
        int rc, r;

        r = sd_bus_message_new_method_call(s->manager->bus, &m, AUDITD_BUS_NAME, AUDITD_BUS_PATH,
                                           AUDITD_LOG_INTERFACE, batch ? "RecordBatch" : "Record");
        if (r < 0)
                return r;
        if (batch) {
                r = sd_bus_message_open_container(m, 'a', "a{sv}");
                if (r < 0)
                        return r;
        }
        sqlite3_bind_int64(st, 1, s->last_sent);
        /* one row per call while looking for a row the logger refused */
        sqlite3_bind_int64(st, 2, spool_call_rows(batch, s->last_sent, s->single_until));
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                /* output and detail: what makes a row big */
                uint64_t size = (uint64_t) sqlite3_column_bytes(st, 7);
                size += (uint64_t) sqlite3_column_bytes(st, 9) + (uint64_t) sqlite3_column_bytes(st, 10);
                if (!spool_call_takes(n, bytes, size))
                        break; /* the next call takes it */
                r = append_row(m, st);
                if (r < 0)
                        break;
                if (n == 0)
                        first = sqlite3_column_int64(st, 0);
                last = sqlite3_column_int64(st, 0);
                bytes += size;
                n++;
        }
        sqlite3_reset(st);
        if (r < 0)
                return r;
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                return sqlite_errno(rc);
        if (n == 0)
                return 0;
        if (batch) {
                r = sd_bus_message_close_container(m);
                if (r < 0)
                        return r;
        }
        r = sd_bus_call_async(s->manager->bus, &f->slot, m, on_recorded, f, RECORD_TIMEOUT_USEC);
        if (r < 0)
                return r;
        f->spool = s;
        f->first = first;
        f->last = last;
        f->n = n;
        f->batch = batch;
        s->n_in_flight++;
        s->last_sent = last;
        return 1;
}

static void pump(AuditSpool *s) {
        if (s->failing || !s->manager->bus)
                return;
        while (s->n_in_flight < MAX_IN_FLIGHT) {
                /* Group commit under load: while two calls are out, the rows that come meanwhile wait
                 * for an answer and go together in the next (one call, one commit in the logger, one
                 * delete here, instead of one each per row), unless a full batch waits already. */
                if (!spool_may_send(s->n_in_flight, s->last_spooled, s->last_sent))
                        return;
                InFlight *f = NULL;
                for (unsigned i = 0; i < MAX_IN_FLIGHT && !f; i++)
                        if (!s->in_flight[i].slot)
                                f = &s->in_flight[i];
                if (!f)
                        return;
                int r = send_rows(s, f);
                if (r == 0)
                        return; /* nothing more to send */
                if (r < 0) {
                        log_msg(LOG_WARNING, "Could not send audit rows: %s", strerror(-r));
                        schedule_retry(s);
                        return;
                }
        }
}

/* Operations noted as running when sandboxd last stopped (a row of its end would have dropped the note
 * in the same transaction as audit_finish()): each becomes a "failed" row under the note's key, the detail saying it was
 * interrupted, in the order they started. */
static int spool_interrupted(AuditSpool *s) {
        sqlite3_stmt *st = NULL;
        int n = 0, r;

        r = sqlite_errno(sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL));
        if (r < 0)
                return r;
        r = sqlite_errno(sqlite3_prepare_v2(
                s->db,
                /* OR IGNORE: a key in the spool already has its row (never, by the transaction above) */
                "INSERT OR IGNORE INTO spool (" SPOOL_COLUMNS ")"
                " SELECT key, session_id, account_id, source, operation, 'failed',"
                " json_set(detail, '$.error', '" SANDBOXD_ERROR_INTERRUPTED "', '$.message', ?),"
                " -1, x'', x'', started_at, max(0, ? - started_at), request_id"
                " FROM running ORDER BY started_at",
                -1, &st, NULL));
        if (r >= 0) {
                sqlite3_bind_text(st, 1,
                                  "sandboxd stopped while this ran; its end, exit code and output are unknown",
                                  -1, SQLITE_STATIC);
                sqlite3_bind_int64(st, 2, (sqlite3_int64) now_usec(CLOCK_REALTIME));
                r = sqlite3_step(st) == SQLITE_DONE ? 0 : sqlite_errno(sqlite3_errcode(s->db));
                n = sqlite3_changes(s->db);
        }
        sqlite3_finalize(st);
        if (r >= 0)
                r = sqlite_errno(sqlite3_exec(s->db, "DELETE FROM running; COMMIT", NULL, NULL, NULL));
        if (r < 0) {
                (void) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
                return r;
        }
        if (n > 0)
                log_msg(LOG_WARNING, "%d operation(s) were under way when sandboxd last stopped; recorded as "
                        "interrupted.", n);
        return n;
}

int audit_spool_open(Manager *m, const char *path, AuditSpool **ret) {
        AuditSpool *s;
        int r;

        s = calloc(1, sizeof(AuditSpool));
        if (!s)
                return -ENOMEM;
        s->manager = m;
        r = sqlite_open_wal(path, 5000, &s->db);
        if (r < 0)
                goto fail;
        r = sqlite_migrate(s->db, migrations, ELEMENTSOF(migrations));
        if (r < 0)
                goto fail;
        if ((r = sqlite_prepare_persistent(s->db,
                                           "INSERT INTO spool (key, session_id, account_id, source,"
                                           " operation, event, detail, exit_code, stdout, stderr,"
                                           " started_at, duration_usec, request_id)"
                                           " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                                           &s->insert)) < 0 ||
            (r = sqlite_prepare_persistent(s->db,
                                           "SELECT seq, key, session_id, account_id, source, operation,"
                                           " event, detail, exit_code, stdout, stderr, started_at,"
                                           " duration_usec, request_id FROM spool WHERE seq > ?"
                                           " ORDER BY seq LIMIT ?",
                                           &s->next)) < 0 ||
            (r = sqlite_prepare_persistent(s->db, "DELETE FROM spool WHERE seq BETWEEN ? AND ?",
                                           &s->delete)) < 0 ||
            (r = sqlite_prepare_persistent(s->db, "SELECT count(*) FROM spool", &s->count)) < 0 ||
            (r = sqlite_prepare_persistent(s->db,
                                           "SELECT seq FROM spool WHERE seq BETWEEN ? AND ?"
                                           " ORDER BY seq LIMIT 1 OFFSET ?",
                                           &s->nth)) < 0 ||
            (r = sqlite_prepare_persistent(s->db,
                                           "INSERT INTO refused (seq, " SPOOL_COLUMNS ", error, refused_at)"
                                           " SELECT seq, " SPOOL_COLUMNS ", ?, ? FROM spool WHERE seq = ?",
                                           &s->refuse)) < 0 ||
            (r = sqlite_prepare_persistent(s->db,
                                           "INSERT INTO running (key, session_id, account_id, source,"
                                           " operation, detail, started_at, request_id) VALUES (?,?,?,?,?,?,?,?)",
                                           &s->begin)) < 0 ||
            (r = sqlite_prepare_persistent(s->db, "DELETE FROM running WHERE key = ?", &s->end)) < 0)
                goto fail;
        r = spool_interrupted(s);
        if (r < 0)
                /* they stay noted until the next start; the spool itself works */
                log_msg(LOG_WARNING, "Could not record the operations sandboxd's last run left unfinished: %s",
                        strerror(-r));
        /* Rows the logger refused before: perhaps it takes them now (its configuration changed). They go
         * after everything else, with new sequence numbers. */
        r = sqlite_errno(sqlite3_exec(s->db,
                                      "BEGIN IMMEDIATE;"
                                      " INSERT INTO spool (" SPOOL_COLUMNS ") SELECT " SPOOL_COLUMNS
                                      " FROM refused ORDER BY seq;"
                                      " DELETE FROM refused;"
                                      " COMMIT",
                                      NULL, NULL, NULL));
        if (r < 0) {
                /* they stay aside until the next start; the spool itself works */
                (void) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
                log_msg(LOG_WARNING, "Could not queue the audit rows the logger refused again: %s",
                        strerror(-r));
        }
        if (sqlite3_step(s->count) == SQLITE_ROW)
                s->pending = (uint64_t) sqlite3_column_int64(s->count, 0);
        sqlite3_reset(s->count);
        /* A backlog from before drains with every call in flight that may be. */
        s->last_spooled = s->pending > 0 ? INT64_MAX / 2 : 0;

        r = sd_event_add_defer(m->event, &s->kick, on_kick, s);
        if (r < 0)
                goto fail;
        /* Rows left from before (a crash, the logger away) go first. */
        (void) sd_event_source_set_enabled(s->kick, s->pending > 0 ? SD_EVENT_ONESHOT : SD_EVENT_OFF);
        if (s->pending > 0)
                log_msg(LOG_INFO, "%" PRIu64 " audit rows wait in the spool.", s->pending);
        *ret = s;
        return 0;
fail:
        audit_spool_free(s);
        return r;
}

/* A random key per operation: unique across restarts without any state of ours. */
static int new_key(char key[static AUDIT_KEY_SIZE]) {
        uint8_t rnd[16];

        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                return -errno;
        memcpy(key, "sbd-", 4);
        for (size_t i = 0; i < sizeof(rnd); i++)
                snprintf(key + 4 + 2 * i, 3, "%02x", rnd[i]);
        return 0;
}

/* The columns spool and running begin with: key, session_id, account_id, source, operation. */
static void bind_head(sqlite3_stmt *st, const char *key, const Caller *c, const AuditRow *row) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, strempty(row->session_id), -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, c->account_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, c->source, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, row->operation, -1, SQLITE_STATIC);
}

static int spool_insert(AuditSpool *s, const Caller *c, const AuditRow *row, const char *key) {
        sqlite3_stmt *st = s->insert;
        int rc;

        bind_head(st, key, c, row);
        sqlite3_bind_text(st, 6, row->event, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 7, row->detail ?: "{}", -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 8, row->exit_code);
        sqlite3_bind_blob(st, 9, row->out ?: "", (int) row->out_size, SQLITE_STATIC);
        sqlite3_bind_blob(st, 10, row->err ?: "", (int) row->err_size, SQLITE_STATIC);
        sqlite3_bind_int64(st, 11, (sqlite3_int64) row->started_at);
        sqlite3_bind_int64(st, 12, (sqlite3_int64) row->duration_usec);
        sqlite3_bind_text(st, 13, c->request_id, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        if (rc != SQLITE_DONE) {
                log_msg(LOG_ERR, "Could not spool an audit row (%s %s): %s", row->operation,
                        strempty(row->session_id), sqlite3_errmsg(s->db));
                return sqlite_errno(rc);
        }
        s->pending++;
        s->last_spooled = MAX(s->last_spooled, (int64_t) sqlite3_last_insert_rowid(s->db));
        return 0;
}

int audit_record(AuditSpool *s, const Caller *c, const AuditRow *row) {
        char key[AUDIT_KEY_SIZE];
        int r;

        r = new_key(key);
        if (r < 0)
                return r;
        r = spool_insert(s, c, row, key);
        if (r < 0)
                return r;
        kick(s);
        return 0;
}

int audit_begin(AuditSpool *s, const Caller *c, const AuditRow *row, char key[static AUDIT_KEY_SIZE]) {
        sqlite3_stmt *st = s->begin;
        int r;

        r = new_key(key);
        if (r < 0)
                return r;
        bind_head(st, key, c, row);
        sqlite3_bind_text(st, 6, row->detail ?: "{}", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 7, (sqlite3_int64) row->started_at);
        sqlite3_bind_text(st, 8, c->request_id, -1, SQLITE_STATIC);
        r = sqlite_step_done(st);
        if (r < 0)
                key[0] = 0;
        return r;
}

static int running_delete(AuditSpool *s, const char *key) {
        sqlite3_bind_text(s->end, 1, key, -1, SQLITE_STATIC);
        return sqlite_step_done(s->end);
}

int audit_finish(AuditSpool *s, const Caller *c, const AuditRow *row, const char *key) {
        int r;

        if (isempty(key))
                return audit_record(s, c, row);
        r = sqlite_errno(sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL));
        if (r < 0)
                return r;
        r = spool_insert(s, c, row, key);
        if (r >= 0)
                r = running_delete(s, key);
        if (r >= 0)
                r = sqlite_errno(sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL));
        if (r < 0) {
                (void) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
                s->pending -= MIN(s->pending, 1u); /* spool_insert() counted it */
                return r;
        }
        kick(s);
        return 0;
}

void audit_cancel(AuditSpool *s, const char *key) {
        if (!isempty(key))
                (void) running_delete(s, key);
}

uint64_t audit_spool_pending(AuditSpool *s) {
        return s->pending;
}

char *audit_detail_error(const char *name, const char *message) {
        json_object *o = json_object_new_object();
        char *s = NULL;

        if (!o)
                return NULL;
        if (json_object_object_add(o, "error", json_object_new_string(strempty(name))) >= 0 &&
            json_object_object_add(o, "message", json_object_new_string(strempty(message))) >= 0)
                s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
        return s;
}
