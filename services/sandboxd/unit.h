/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Talking to systemd: transient units, stop requests, and waiting for their jobs to finish. */
#pragma once

#include <systemd/sd-bus.h>

#include "sandbox-id.h"

typedef struct Manager Manager;
typedef struct JobWait JobWait;

/* Called once with the job's result ("done", "failed", "canceled", "timeout", …), or with NULL and
 * an error when the request itself failed. */
typedef void (*job_done_t)(Manager *m, const char *result, const sd_bus_error *error, void *userdata);

/* Fills in the properties array (a(sv)) of StartTransientUnit. */
typedef int (*append_props_t)(sd_bus_message *m, void *userdata);

/* Adds the match for systemd's JobRemoved, with which the jobs sandboxd queued are followed. */
int unit_watch_jobs(Manager *m);

/* Both return a handle owned by the Manager; it is freed after the callback ran. job_wait_cancel()
 * drops the callback (for owners that go away first). */
/* append fills the unit's properties; append_aux (may be NULL) the auxiliary units, a(sa(sv)), that
 * systemd creates together with it (a sandbox's slice comes with its init scope this way). */
int unit_start_transient(Manager *m, const char *name, append_props_t append, append_props_t append_aux,
                         void *append_userdata, job_done_t cb, void *userdata, JobWait **ret);
int unit_stop(Manager *m, const char *name, job_done_t cb, void *userdata, JobWait **ret);
void job_wait_cancel(JobWait *w);

/* Stop in the background; errors are ignored (the unit may be gone already). At most a few such
 * stops are in flight at once, the rest wait in a queue (see unit.c). */
int unit_stop_nowait(Manager *m, const char *name);

/* At exit: sends every queued background stop without waiting for it. */
void unit_flush_stops(Manager *m);

void manager_free_jobs(Manager *m);

/* Unit names of ours. ret must hold at least UNIT_NAME_MAX bytes. */
#define UNIT_NAME_MAX 256

/* The units sandboxd makes, by name: sandbox-<id>.slice, sandbox-<id>-init.scope,
 * sandbox-<id>-exec-<n>.scope, sandbox-<id>-shell-<n>.scope, sandbox-<id>-process-<n>.scope. */
typedef enum UnitKind {
        UNIT_KIND_SLICE,
        UNIT_KIND_INIT,
        UNIT_KIND_EXEC,
        UNIT_KIND_SHELL,
        UNIT_KIND_PROCESS,
        _UNIT_KIND_MAX,
} UnitKind;

/* Takes a unit name apart: 0 with the sandbox id and the kind, or -EINVAL for any other name (our own
 * services are called sandbox-… too). */
int unit_name_parse(const char *name, char ret_id[static SANDBOX_ID_LEN + 1], UnitKind *ret_kind);

/* At start-up, before the bus name is ours: asks systemd for every unit of ours and stops those that
 * nobody will ever stop otherwise — everything of a sandbox we do not know (its background stop was
 * still queued when an earlier sandboxd died, or its creation never finished), and the shell scopes of
 * known sandboxes (their relay was the earlier sandboxd), and the background processes' scopes of known
 * sandboxes (their output and stdin were the earlier sandboxd's pipes: they are not re-adopted). Returns how many stops it queued, or a
 * negative errno if systemd could not be asked. */
int unit_reconcile(Manager *m, bool (*known)(Manager *m, const char *id));
