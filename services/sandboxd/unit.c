/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Talking to systemd: transient units, stop requests, and waiting for their jobs to finish. */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "log.h"
#include "macro.h"
#include "sandboxd-manager.h"

struct JobWait {
        Manager *manager;
        char *job;            /* object path, once systemd answered */
        sd_bus_slot *slot;    /* the pending method call */
        job_done_t cb;
        void *userdata;
};

static JobWait *job_wait_free(JobWait *w) {
        if (!w)
                return NULL;
        if (w->job && w->manager)
                (void) hashmap_remove(w->manager->jobs, w->job);
        sd_bus_slot_unref(w->slot);
        free(w->job);
        free(w);
        return NULL;
}

void job_wait_cancel(JobWait *w) {
        if (!w)
                return;
        w->cb = NULL;
        w->userdata = NULL;
        /* A call still in flight: drop it now. A job already queued: keep waiting for its
         * JobRemoved so the entry is freed then. */
        if (!w->job)
                job_wait_free(w);
}

static void job_wait_finish(JobWait *w, const char *result, const sd_bus_error *error) {
        job_done_t cb = w->cb;
        void *userdata = w->userdata;
        Manager *m = w->manager;

        job_wait_free(w);
        if (cb)
                cb(m, result, error, userdata);
}

static int on_job_removed(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const char *path, *unit, *result;
        uint32_t id;
        int r;

        r = sd_bus_message_read(message, "uoss", &id, &path, &unit, &result);
        if (r < 0)
                return 0;

        JobWait *w = hashmap_get(m->jobs, path);
        if (w) {
                job_wait_finish(w, result, NULL);
                return 0;
        }

        /* systemd answers the method call before it runs the job, so JobRemoved should never
         * overtake the reply; if it does for one of our units, keep the result for the reply. */
        if (strncmp(unit, "sandbox-", 8) == 0) {
                if (hashmap_size(m->early_jobs) > 1024)
                        manager_clear_early_jobs(m);
                /* one allocation "path\0result": the key and the value at once */
                size_t lp = strlen(path) + 1, lr = strlen(result) + 1;
                char *e = malloc(lp + lr);
                if (e) {
                        memcpy(e, path, lp);
                        memcpy(e + lp, result, lr);
                        if (hashmap_put(m->early_jobs, e, e) < 0)
                                free(e);
                }
        }
        return 0;
}

int unit_watch_jobs(Manager *m) {
        /* Only the match, no Manager.Subscribe(): systemd sends a job's JobNew and JobRemoved to the
         * bus whenever the client that queued it is still connected (it tracks the job's requester),
         * and every job we wait for is one we queued. Subscribe() would make systemd build and the bus
         * route a UnitNew, a UnitRemoved and about ten PropertiesChanged signals for every unit of the
         * host, each scope of every Exec included: most of what an Exec cost systemd and dbus-daemon. */
        return sd_bus_match_signal_async(m->bus, NULL, "org.freedesktop.systemd1",
                                         "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                                         "JobRemoved", on_job_removed, NULL, m);
}

static int on_job_queued(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        JobWait *w = userdata;
        const sd_bus_error *e;
        const char *path;
        int r;

        w->slot = sd_bus_slot_unref(w->slot);

        e = sd_bus_message_get_error(reply);
        if (e) {
                job_wait_finish(w, NULL, e);
                return 0;
        }
        r = sd_bus_message_read(reply, "o", &path);
        if (r < 0) {
                sd_bus_error err = SD_BUS_ERROR_NULL;
                sd_bus_error_set_errno(&err, r);
                job_wait_finish(w, NULL, &err);
                sd_bus_error_free(&err);
                return 0;
        }

        _cleanup_free_ char *early = NULL;
        early = hashmap_remove(w->manager->early_jobs, path);
        if (early) {
                job_wait_finish(w, early + strlen(early) + 1, NULL);
                return 0;
        }

        w->job = strdup(path);
        if (!w->job || hashmap_put(w->manager->jobs, w->job, w) < 0) {
                sd_bus_error err = SD_BUS_ERROR_NULL;
                free(w->job);
                w->job = NULL;
                sd_bus_error_set_errno(&err, -ENOMEM);
                job_wait_finish(w, NULL, &err);
                sd_bus_error_free(&err);
        }
        return 0;
}

static int job_wait_new(Manager *m, job_done_t cb, void *userdata, JobWait **ret) {
        JobWait *w = calloc(1, sizeof(JobWait));
        if (!w)
                return -ENOMEM;
        w->manager = m;
        w->cb = cb;
        w->userdata = userdata;
        *ret = w;
        return 0;
}

int unit_start_transient(Manager *m, const char *name, append_props_t append, append_props_t append_aux,
                         void *append_userdata, job_done_t cb, void *userdata, JobWait **ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *msg = NULL;
        JobWait *w;
        int r;

        r = sd_bus_message_new_method_call(m->bus, &msg, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                           "org.freedesktop.systemd1.Manager", "StartTransientUnit");
        if (r < 0)
                return r;
        r = sd_bus_message_append(msg, "ss", name, "fail");
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(msg, 'a', "(sv)");
        if (r < 0)
                return r;
        r = append(msg, append_userdata);
        if (r < 0)
                return r;
        r = sd_bus_message_close_container(msg);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(msg, 'a', "(sa(sv))");
        if (r < 0)
                return r;
        if (append_aux) {
                r = append_aux(msg, append_userdata);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(msg);
        if (r < 0)
                return r;

        r = job_wait_new(m, cb, userdata, &w);
        if (r < 0)
                return r;
        r = sd_bus_call_async(m->bus, &w->slot, msg, on_job_queued, w, 0);
        if (r < 0) {
                job_wait_free(w);
                return r;
        }
        if (ret)
                *ret = w;
        return 0;
}

int unit_stop(Manager *m, const char *name, job_done_t cb, void *userdata, JobWait **ret) {
        JobWait *w;
        int r;

        r = job_wait_new(m, cb, userdata, &w);
        if (r < 0)
                return r;
        r = sd_bus_call_method_async(m->bus, &w->slot, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                     "org.freedesktop.systemd1.Manager", "StopUnit", on_job_queued, w, "ss",
                                     name, "replace");
        if (r < 0) {
                job_wait_free(w);
                return r;
        }
        if (ret)
                *ret = w;
        return 0;
}

/* Background stops in flight at once. systemd tracks the sender of every job it queues with a match
 * rule of its own on its bus connection, and the system bus allows a connection 512 of them: with a
 * burst of deletions (1000 sandboxes, 64 at a time) fire-and-forget stops piled up jobs until systemd
 * hit that limit and dropped its bus connection. So the stops wait their turn here. */
#define BACKGROUND_STOPS_MAX 32

typedef struct QueuedStop {
        struct QueuedStop *next;
        char name[];
} QueuedStop;

static void background_stop_done(Manager *m, const char *result, const sd_bus_error *error, void *userdata);

static int background_stop_send(Manager *m, const char *name) {
        int r = unit_stop(m, name, background_stop_done, NULL, NULL);
        if (r >= 0)
                m->background_stops++;
        return r;
}

static void background_stop_done(Manager *m, const char *result, const sd_bus_error *error, void *userdata) {
        if (m->background_stops > 0)
                m->background_stops--;
        while (m->stop_queue && m->background_stops < BACKGROUND_STOPS_MAX) {
                QueuedStop *q = m->stop_queue;
                m->stop_queue = q->next;
                if (!m->stop_queue)
                        m->stop_queue_tail = NULL;
                (void) background_stop_send(m, q->name);
                free(q);
        }
}

int unit_stop_nowait(Manager *m, const char *name) {
        if (m->background_stops < BACKGROUND_STOPS_MAX && !m->stop_queue)
                return background_stop_send(m, name);

        QueuedStop *q = malloc(sizeof(QueuedStop) + strlen(name) + 1);
        if (!q)
                return -ENOMEM;
        q->next = NULL;
        strcpy(q->name, name);
        if (m->stop_queue_tail)
                m->stop_queue_tail->next = q;
        else
                m->stop_queue = q;
        m->stop_queue_tail = q;
        return 0;
}

void unit_flush_stops(Manager *m) {
        /* At exit: whatever still waits goes out now, not waited for (best effort: sandboxd stops
         * sandboxes only in bursts of deletions, and the next start removes leftovers it knows of). */
        while (m->stop_queue) {
                QueuedStop *q = m->stop_queue;
                m->stop_queue = q->next;
                (void) sd_bus_call_method_async(m->bus, NULL, "org.freedesktop.systemd1",
                                                "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                                                "StopUnit", NULL, NULL, "ss", q->name, "replace");
                free(q);
        }
        m->stop_queue_tail = NULL;
}

void manager_free_jobs(Manager *m) {
        JobWait *w;
        size_t state = 0;

        while (hashmap_iterate(m->jobs, &state, (void **) &w, NULL)) {
                w->manager = NULL;
                (void) hashmap_remove(m->jobs, w->job);
                job_wait_free(w);
        }
}

static int parse_number_suffix(const char *p, const char *suffix) {
        /* "<n><suffix>": at least one digit, nothing else */
        const char *q = p;
        while (*q >= '0' && *q <= '9')
                q++;
        return q > p && streq(q, suffix) ? 0 : -EINVAL;
}

int unit_name_parse(const char *name, char ret_id[static SANDBOX_ID_LEN + 1], UnitKind *ret_kind) {
        char id[SANDBOX_ID_LEN + 1];
        const char *rest;
        UnitKind kind;

        if (!name || strncmp(name, "sandbox-", 8) != 0 || strlen(name) < 8 + SANDBOX_ID_LEN)
                return -EINVAL;
        memcpy(id, name + 8, SANDBOX_ID_LEN);
        id[SANDBOX_ID_LEN] = 0;
        if (!sandbox_id_is_valid(id))
                return -EINVAL;
        rest = name + 8 + SANDBOX_ID_LEN;
        if (streq(rest, ".slice"))
                kind = UNIT_KIND_SLICE;
        else if (streq(rest, "-init.scope"))
                kind = UNIT_KIND_INIT;
        else if (strncmp(rest, "-exec-", 6) == 0 && parse_number_suffix(rest + 6, ".scope") == 0)
                kind = UNIT_KIND_EXEC;
        else if (strncmp(rest, "-shell-", 7) == 0 && parse_number_suffix(rest + 7, ".scope") == 0)
                kind = UNIT_KIND_SHELL;
        else if (strncmp(rest, "-process-", 9) == 0 && parse_number_suffix(rest + 9, ".scope") == 0)
                kind = UNIT_KIND_PROCESS;
        else
                return -EINVAL;
        memcpy(ret_id, id, sizeof(id));
        *ret_kind = kind;
        return 0;
}

int unit_reconcile(Manager *m, bool (*known)(Manager *m, const char *id)) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(hashmap_freep) Hashmap *stopped = NULL;
        const char *name, *active;
        int r, n = 0;

        /* Every loaded unit of that pattern, whatever its state: inactive ones are skipped below. */
        r = sd_bus_call_method(m->bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "ListUnitsByPatterns", &error, &reply, "asas", 0,
                               1, "sandbox-*");
        if (r < 0) {
                log_msg(LOG_WARNING, "Could not list the units of earlier sandboxes: %s", error.message ?: strerror(-r));
                sd_bus_error_free(&error);
                return r;
        }
        stopped = hashmap_new();
        if (!stopped)
                return -ENOMEM;
        r = sd_bus_message_enter_container(reply, 'a', "(ssssssouso)");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(reply, "(ssssssouso)", &name, NULL, NULL, &active, NULL, NULL, NULL,
                                        NULL, NULL, NULL)) > 0) {
                char id[SANDBOX_ID_LEN + 1], slice[UNIT_NAME_MAX];
                UnitKind kind;

                if (unit_name_parse(name, id, &kind) < 0 || streq(active, "inactive"))
                        continue;
                if (known(m, id)) {
                        if (kind != UNIT_KIND_SHELL && kind != UNIT_KIND_PROCESS)
                                continue; /* the sandbox's own, and its commands' background processes */
                        log_sandbox(LOG_NOTICE, id, "Stopping %s: its %s was an earlier sandboxd.", name,
                                    kind == UNIT_KIND_SHELL ? "shell's relay" : "process's output reader");
                        if (unit_stop_nowait(m, name) >= 0)
                                n++;
                        continue;
                }
                /* Of a sandbox that is gone: its slice takes every scope in it along, once. */
                if (hashmap_get(stopped, id))
                        continue;
                snprintf(slice, sizeof(slice), "sandbox-%s.slice", id);
                log_sandbox(LOG_NOTICE, id, "Stopping %s (and %s): sandbox %s is gone.", slice, name, id);
                if (unit_stop_nowait(m, slice) >= 0)
                        n++;
                char *key = strdup(id);
                if (!key || hashmap_put(stopped, key, key) < 0) {
                        free(key);
                        continue;
                }
        }
        /* the keys are ours to free */
        void *v;
        size_t state = 0;
        while (hashmap_iterate(stopped, &state, &v, NULL)) {
                (void) hashmap_remove(stopped, v);
                free(v);
        }
        return r < 0 ? r : n;
}
