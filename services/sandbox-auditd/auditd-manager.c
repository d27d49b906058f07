/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-auditd's state: the bus, the event loop, the store, rows waiting for their commit, retention. */
#include "auditd-manager.h"

#include <assert.h>
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "auditd-dbus.h"
#include "auditd-journal.h"
#include "daemon-util.h"
#include "log.h"
#include "macro.h"
#include "time-util.h"
#include "user-util.h"
#include "sender-cache.h"

/* One Record or RecordBatch call waiting for its commit. */
struct PendingRecord {
        sd_bus_message *msg; /* holds what the records' borrowed pointers point into */
        bool batch;          /* RecordBatch: answered with (at), else (t) */
        size_t n;
        AuditRecord *recs;
        uint64_t *ids;
        bool *is_new;
        uint8_t (*hashes)[AUDIT_HASH_SIZE]; /* each new row's chain hash */
        uint64_t recorded_at;
        PendingRecord *next;
};

static PendingRecord *pending_free(PendingRecord *p) {
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n; i++)
                audit_record_clear(&p->recs[i]);
        free(p->recs);
        free(p->ids);
        free(p->is_new);
        free(p->hashes);
        sd_bus_message_unref(p->msg);
        free(p);
        return NULL;
}

bool manager_uid_may_record(Manager *m, uid_t uid) {
        return uid == 0 || (m->gateway_uid != (uid_t) -1 && uid == m->gateway_uid);
}

bool manager_uid_may_read(Manager *m, uid_t uid) {
        /* getpwuid + getgrouplist per GetLog would cost more than the query; membership changes are
         * seen within a few seconds */
        return uid == 0 || group_cache_test(&m->readers, uid);
}

/* --- callers' credentials ----------------------------------------------------------------------- */

int manager_sender_uid(Manager *m, sd_bus_message *msg, uid_t *ret) {
        return sender_cache_uid(m->senders, msg, ret);
}

int manager_watch_senders(Manager *m) {
        /* Installed before the name is requested (the bus handles a connection's messages in order), so
         * no caller can be remembered unwatched. */
        return sender_cache_watch(m->senders, m->bus, &m->name_owner_slot);
}

/* --- group commit ------------------------------------------------------------------------------- */

static void storage_state(Manager *m, int error) {
        if (error < 0 && !m->storage_failing) {
                log_msg(LOG_WARNING, "Cannot store audit rows: %s. Callers keep their rows and retry.",
                        audit_storage_error_string(error));
                (void) sd_notifyf(false, "STATUS=Cannot store rows: %s", audit_storage_error_string(error));
        } else if (error >= 0 && m->storage_failing) {
                log_msg(LOG_NOTICE, "Storing audit rows again.");
                (void) sd_notify(false, "STATUS=Recording.");
        }
        m->storage_failing = error < 0;
}

/* --- checkpoints ---------------------------------------------------------------------------------- */

static void checkpoint_now(Manager *m) {
        if (m->checkpoint_rows == 0)
                return;
        (void) auditd_journal_checkpoint(m->chain_last_id, m->chain_last_hash, m->checkpoint_rows);
        m->checkpoint_rows = 0;
        if (m->checkpoint_timer)
                (void) sd_event_source_set_enabled(m->checkpoint_timer, SD_EVENT_OFF);
}

static int on_checkpoint_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        checkpoint_now(userdata);
        return 0;
}

/* After a commit: a checkpoint once CheckpointRows= rows are uncovered, or CheckpointIntervalSec= after
 * the first uncovered row. */
static void checkpoint_maybe(Manager *m) {
        int enabled = SD_EVENT_OFF;

        if (m->checkpoint_rows == 0)
                return;
        if (m->config.checkpoint_rows > 0 && m->checkpoint_rows >= m->config.checkpoint_rows) {
                checkpoint_now(m);
                return;
        }
        if (m->config.checkpoint_interval_usec == 0)
                return;
        if (!m->checkpoint_timer) {
                if (sd_event_add_time_relative(m->event, &m->checkpoint_timer, CLOCK_MONOTONIC,
                                               m->config.checkpoint_interval_usec, USEC_PER_SEC,
                                               on_checkpoint_timer, m) < 0)
                        return;
                (void) sd_event_source_set_enabled(m->checkpoint_timer, SD_EVENT_ONESHOT);
                return;
        }
        (void) sd_event_source_get_enabled(m->checkpoint_timer, &enabled);
        if (enabled == SD_EVENT_OFF) {
                (void) sd_event_source_set_time_relative(m->checkpoint_timer,
                                                         m->config.checkpoint_interval_usec);
                (void) sd_event_source_set_enabled(m->checkpoint_timer, SD_EVENT_ONESHOT);
        }
}

/* Answers every waiting caller: with its id if r >= 0 (the batch is committed), else with r. */
static void answer_pending(Manager *m, int r) {
        PendingRecord *p;

        while ((p = m->pending)) {
                m->pending = p->next;
                if (r < 0)
                        (void) audit_reply_storage_error(p->msg, r);
                else {
                        if (p->batch)
                                (void) audit_reply_recorded_batch(p->msg, p->ids, p->n);
                        else
                                (void) audit_reply_recorded(p->msg, p->ids[0]);
                        for (size_t i = 0; i < p->n; i++)
                                if (p->is_new[i]) {
                                        AuditEntry e;
                                        audit_record_to_entry(&p->recs[i], p->ids[i], p->recorded_at, &e);
                                        e.hash = p->hashes[i];
                                        audit_emit_entry_added(m, &e);
                                        if (m->config.journal_rows)
                                                (void) auditd_journal_row(&e);
                                        m->chain_last_id = e.id;
                                        memcpy(m->chain_last_hash, p->hashes[i], AUDIT_HASH_SIZE);
                                        m->checkpoint_rows++;
                                }
                }
                pending_free(p);
        }
        m->pending_tail = NULL;
        m->n_pending = 0;
        m->pending_bytes = 0;
        if (r >= 0)
                checkpoint_maybe(m);
}

void manager_flush(Manager *m) {
        int r;

        if (!m->store || (!m->pending && !audit_store_in_transaction(m->store)))
                return;
        r = audit_store_commit(m->store);
        storage_state(m, r);
        answer_pending(m, r);
        if (m->commit_event)
                (void) sd_event_source_set_enabled(m->commit_event, SD_EVENT_OFF);
}

static int on_commit(sd_event_source *s, void *userdata) {
        manager_flush(userdata);
        return 0;
}

int manager_record(Manager *m, sd_bus_message *msg, AuditRecord *recs, size_t n, bool batch) {
        PendingRecord *p;
        int r = 0;

        assert(batch || n == 1);
        p = calloc(1, sizeof(PendingRecord));
        if (!p)
                return -ENOMEM;
        p->recs = calloc(MAX(n, (size_t) 1), sizeof(AuditRecord));
        p->ids = calloc(MAX(n, (size_t) 1), sizeof(uint64_t));
        p->is_new = calloc(MAX(n, (size_t) 1), sizeof(bool));
        p->hashes = calloc(MAX(n, (size_t) 1), AUDIT_HASH_SIZE);
        if (!p->recs || !p->ids || !p->is_new || !p->hashes) {
                pending_free(p);
                return -ENOMEM;
        }
        p->msg = sd_bus_message_ref(msg);
        p->batch = batch;
        p->n = n;
        for (size_t i = 0; i < n; i++) {
                p->recs[i] = recs[i];
                recs[i].detail_capped = recs[i].output_truncated = NULL;
                recs[i].normalized = false;
        }
        p->recorded_at = now_usec(CLOCK_REALTIME);

        r = audit_store_begin(m->store);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                r = audit_store_insert_hashed(m->store, &p->recs[i], p->recorded_at, &p->ids[i],
                                              p->hashes[i]);
                if (r >= 0)
                        p->is_new[i] = r > 0;
        }
        if (r < 0) {
                /* The transaction may be gone with it: fail the whole group, nobody has an answer yet.
                 * A batch's earlier rows go with it, so a batch is stored whole or not at all. */
                audit_store_rollback(m->store);
                storage_state(m, r);
                answer_pending(m, r);
                (void) audit_reply_storage_error(p->msg, r);
                pending_free(p);
                return 0;
        }

        if (m->pending_tail)
                m->pending_tail->next = p;
        else
                m->pending = p;
        m->pending_tail = p;
        m->n_pending += n;
        for (size_t i = 0; i < n; i++)
                m->pending_bytes += p->recs[i].stdout_size + p->recs[i].stderr_size +
                                    strlen(audit_record_detail(&p->recs[i]));

        if (m->n_pending >= AUDITD_COMMIT_ROWS_MAX || m->pending_bytes >= AUDITD_COMMIT_BYTES_MAX)
                manager_flush(m);
        else
                /* below the bus's priority: every call already queued joins this commit */
                (void) sd_event_source_set_enabled(m->commit_event, SD_EVENT_ONESHOT);
        return 0;
}

/* --- VerifyLog ---------------------------------------------------------------------------------- */

struct VerifyJob {
        sd_bus_message *msg;
        AuditVerify v;
        VerifyJob *next;
};

static VerifyJob *verify_job_free(VerifyJob *j) {
        if (!j)
                return NULL;
        sd_bus_message_unref(j->msg);
        free(j);
        return NULL;
}

int manager_verify(Manager *m, sd_bus_message *msg, uint64_t max_id) {
        VerifyJob *j, **tail;

        if (m->n_verify_jobs >= AUDITD_VERIFY_JOBS_MAX)
                return -EBUSY;
        j = calloc(1, sizeof(VerifyJob));
        if (!j)
                return -ENOMEM;
        j->msg = sd_bus_message_ref(msg);
        j->v = AUDIT_VERIFY_INIT;
        j->v.max_id = max_id;
        /* rows already answered are part of the log the walk covers */
        manager_flush(m);
        for (tail = &m->verify_jobs; *tail; tail = &(*tail)->next)
                ;
        *tail = j;
        m->n_verify_jobs++;
        return sd_event_source_set_enabled(m->verify_event, SD_EVENT_ON);
}

static int on_verify_step(sd_event_source *s, void *userdata) {
        Manager *m = userdata;
        VerifyJob *j = m->verify_jobs, **tail;
        int r;

        if (!j) {
                (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
                return 0;
        }
        m->verify_jobs = j->next;
        j->next = NULL;
        r = audit_store_verify_step(m->store, &j->v, AUDITD_VERIFY_STEP_ROWS, AUDITD_VERIFY_STEP_BYTES);
        if (r != 0) {
                (void) audit_reply_verified(j->msg, &j->v, r < 0 ? r : 0);
                verify_job_free(j);
                m->n_verify_jobs--;
        } else {
                /* the walks take turns */
                for (tail = &m->verify_jobs; *tail; tail = &(*tail)->next)
                        ;
                *tail = j;
        }
        if (!m->verify_jobs)
                (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
        return 0;
}

/* --- retention ---------------------------------------------------------------------------------- */

static void retention_done(Manager *m, int r) {
        (void) sd_event_source_set_enabled(m->retention_event, SD_EVENT_OFF);
        if (r < 0 && !m->storage_failing) /* a full disk is reported once, by the writers */
                log_msg(LOG_WARNING, "Retention stopped: %s; next attempt in %" PRIu64 " s.",
                        audit_storage_error_string(r), AUDITD_RETENTION_INTERVAL_USEC / USEC_PER_SEC);
        else if (m->retention_deleted > 0)
                log_msg(LOG_INFO, "Retention removed %" PRIu64 " audit rows (MaxAgeSec=, MaxRows=).",
                        m->retention_deleted);
}

static int on_retention_batch(sd_event_source *s, void *userdata) {
        Manager *m = userdata;
        uint64_t t0, dt;
        int r;

        manager_flush(m);
        t0 = now_usec(CLOCK_MONOTONIC);
        if (!m->retention_age_done)
                r = audit_store_delete_older(m->store, m->retention_cutoff, m->retention_batch);
        else
                r = audit_store_delete_excess(m->store, m->config.max_rows, m->retention_batch);
        dt = now_usec(CLOCK_MONOTONIC) - t0;
        if (r < 0) {
                retention_done(m, r);
                return 0;
        }
        m->retention_deleted += (uint64_t) r;

        /* Keep each batch short, whatever the rows weigh: writers wait while it runs. */
        if (dt > 10 * USEC_PER_MSEC && m->retention_batch > AUDITD_RETENTION_BATCH_MIN)
                m->retention_batch = MAX(m->retention_batch / 2, AUDITD_RETENTION_BATCH_MIN);
        else if (dt < 2 * USEC_PER_MSEC && m->retention_batch < AUDITD_RETENTION_BATCH_MAX)
                m->retention_batch = MIN(m->retention_batch * 2, AUDITD_RETENTION_BATCH_MAX);

        /* an empty batch ends a phase: by age first, then by count */
        if (r == 0) {
                if (!m->retention_age_done)
                        m->retention_age_done = true;
                else
                        retention_done(m, 0);
        }
        return 0;
}

static int on_retention_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        int enabled = SD_EVENT_OFF;
        uint64_t now = now_usec(CLOCK_REALTIME);

        (void) sd_event_source_set_time_relative(s, AUDITD_RETENTION_INTERVAL_USEC);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);

        /* hourly: the planner's statistics follow the log's growth */
        if (++m->retention_ticks % 60 == 0) {
                manager_flush(m);
                audit_store_optimize(m->store);
        }

        (void) sd_event_source_get_enabled(m->retention_event, &enabled);
        if (enabled != SD_EVENT_OFF)
                return 0; /* the last pass is still going */
        if (m->config.max_age_usec == 0 && m->config.max_rows == 0)
                return 0;

        m->retention_age_done = m->config.max_age_usec == 0 || now <= m->config.max_age_usec;
        m->retention_cutoff = m->retention_age_done ? 0 : now - m->config.max_age_usec;
        m->retention_deleted = 0;
        (void) sd_event_source_set_enabled(m->retention_event, SD_EVENT_ON);
        return 0;
}

/* --- life cycle --------------------------------------------------------------------------------- */

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;
        (void) sd_notify(false, "STOPPING=1\nSTATUS=Shutting down.");
        manager_flush(m);
        return sd_event_exit(m->event, 0);
}

int manager_new(const DaemonOptions *o, Manager **ret, char **ret_error) {
        Manager *m;
        int r;

        m = calloc(1, sizeof(Manager));
        if (!m)
                return -ENOMEM;
        audit_config_defaults(&m->config);
        r = audit_config_load(&m->config, o->config, o->config_dir, ret_error);
        if (r < 0)
                goto fail;

        r = daemon_state_dir(AUDITD_STATE_DIR, &m->state_dir);
        if (r < 0)
                goto fail;

        group_cache_init(&m->readers, "sandbox-admin", AUDITD_READER_CACHE_USEC, NULL);
        r = sender_cache_new(AUDITD_SENDER_CACHE_MAX, &m->senders);
        if (r < 0)
                goto fail;
        struct passwd *pw = getpwnam("sandbox-gateway");
        m->gateway_uid = pw ? pw->pw_uid : (uid_t) -1;
        m->retention_batch = AUDITD_RETENTION_BATCH_MAX;

        r = daemon_event_new(on_signal, m, &m->event, &m->sigterm, &m->sigint);
        if (r < 0)
                goto fail;

        r = sd_event_add_defer(m->event, &m->commit_event, on_commit, m);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_priority(m->commit_event, SD_EVENT_PRIORITY_NORMAL + 10);
        (void) sd_event_source_set_enabled(m->commit_event, SD_EVENT_OFF);

        r = sd_event_add_defer(m->event, &m->retention_event, on_retention_batch, m);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_priority(m->retention_event, SD_EVENT_PRIORITY_IDLE);
        (void) sd_event_source_set_enabled(m->retention_event, SD_EVENT_OFF);

        r = sd_event_add_defer(m->event, &m->verify_event, on_verify_step, m);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_priority(m->verify_event, SD_EVENT_PRIORITY_IDLE);
        (void) sd_event_source_set_enabled(m->verify_event, SD_EVENT_OFF);

        *ret = m;
        return 0;
fail:
        manager_free(m);
        return r;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        /* whoever still waits gets an answer before the bus goes */
        manager_flush(m);
        while (m->verify_jobs) {
                VerifyJob *j = m->verify_jobs;
                m->verify_jobs = j->next;
                (void) sd_bus_reply_method_errorf(
                        j->msg, SD_BUS_ERROR_FAILED,
                        "sandbox-auditd stopped before the walk was done; call again.");
                verify_job_free(j);
        }
        checkpoint_now(m); /* what the last rows chained to, before the logger goes */
        sd_event_source_disable_unref(m->checkpoint_timer);
        sd_event_source_disable_unref(m->ship_timer);
        audit_ship_free(m->ship);
        sd_event_source_disable_unref(m->verify_event);
        sd_event_source_disable_unref(m->commit_event);
        sd_event_source_disable_unref(m->retention_event);
        sd_event_source_disable_unref(m->retention_timer);
        sd_event_source_disable_unref(m->sigterm);
        sd_event_source_disable_unref(m->sigint);
        sd_bus_slot_unref(m->name_owner_slot);
        sender_cache_free(m->senders);
        sd_bus_flush_close_unref(m->bus);
        audit_store_free(m->store);
        sd_event_unref(m->event);
        free(m->state_dir);
        free(m);
        return NULL;
}

/* Copies what is new to PostgreSQL: committed rows only (the pending batch is committed first), a few
 * batches a turn, every AUDITD_SHIP_INTERVAL_USEC, at once again while there is more. */
static int on_ship_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        uint64_t next = AUDITD_SHIP_INTERVAL_USEC;
        int r = 0;

        manager_flush(m);
        for (unsigned i = 0; i < AUDITD_SHIP_BATCHES_PER_TURN; i++) {
                r = audit_ship_step(m->ship, m->store, AUDITD_SHIP_BATCH);
                if (r < (int) AUDITD_SHIP_BATCH)
                        break;
        }
        if (r == (int) AUDITD_SHIP_BATCH)
                next = 0;
        if (r < 0 && !m->ship_failing)
                log_msg(LOG_WARNING, "Cannot copy the audit log to PostgreSQL (trying again every second): %s",
                        r == -PG_UNAVAILABLE || r == -EIO ? audit_ship_error(m->ship) : strerror(-r));
        else if (r >= 0 && m->ship_failing)
                log_msg(LOG_INFO, "Copying the audit log to PostgreSQL again.");
        m->ship_failing = r < 0;
        (void) sd_event_source_set_time_relative(s, next);
        return sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

static int ship_setup(Manager *m) {
        char host[256] = "";
        int r;

        if (!m->config.pg_url[0])
                return 0;
        if (m->config.pg_host[0])
                snprintf(host, sizeof(host), "%s", m->config.pg_host);
        else if (gethostname(host, sizeof(host) - 1) < 0 || !host[0])
                return log_msg_errno(LOG_ERR, -errno, "[PostgreSQL] without Host=, and no hostname: %m");
        r = audit_ship_new(m->config.pg_url, host, &m->ship);
        if (r < 0)
                return log_msg_errno(LOG_ERR, r, "Could not set up the copy of the audit log in PostgreSQL: %m");
        r = sd_event_add_time_relative(m->event, &m->ship_timer, CLOCK_MONOTONIC, 0, 0, on_ship_timer, m);
        if (r < 0)
                return r;
        (void) sd_event_source_set_priority(m->ship_timer, SD_EVENT_PRIORITY_IDLE);
        log_msg(LOG_INFO, "Copying the audit log to PostgreSQL as host %s.", host);
        return 0;
}

int manager_startup(Manager *m) {
        char path[4096];
        int r;

        snprintf(path, sizeof(path), "%s/" AUDITD_DB_FILE, m->state_dir);
        r = audit_store_open(path, &m->store);
        if (r < 0) {
                log_msg(LOG_ERR, "Could not open %s: %s", path,
                        r == -EPROTO ? "written by a newer sandbox-auditd" : audit_storage_error_string(r));
                return r;
        }

        r = manager_bus_setup(m);
        if (r >= 0)
                r = manager_watch_senders(m);
        if (r < 0) {
                log_msg(LOG_ERR, "Could not connect to the system bus: %s", strerror(-r));
                return r;
        }

        /* At start, then every AUDITD_RETENTION_INTERVAL_USEC. */
        r = sd_event_add_time_relative(m->event, &m->retention_timer, CLOCK_MONOTONIC, 0, USEC_PER_SEC,
                                       on_retention_timer, m);
        if (r < 0)
                return r;

        r = ship_setup(m);
        if (r < 0)
                return r;

        /* Last, and synchronously: once the name is ours, callers find everything in place. */
        r = sd_bus_request_name(m->bus, AUDITD_BUS_NAME, 0);
        if (r < 0) {
                log_msg(LOG_ERR, "Could not acquire %s: %s", AUDITD_BUS_NAME, strerror(-r));
                return r;
        }
        return 0;
}

int manager_run(Manager *m) {
        uint64_t top = 0;

        (void) audit_store_max_id(m->store, &top);
        return daemon_run(m->event, "Recording (last id %" PRIu64 ").", top);
}
