/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Talking to systemd: transient units, stop requests, and waiting for their jobs to finish. */
#pragma once

#include <systemd/sd-bus.h>

typedef struct Manager Manager;
typedef struct JobWait JobWait;

/* Called once with the job's result ("done", "failed", "canceled", "timeout", …), or with NULL and
 * an error when the request itself failed. */
typedef void (*job_done_t)(Manager *m, const char *result, const sd_bus_error *error, void *userdata);

/* Fills in the properties array (a(sv)) of StartTransientUnit. */
typedef int (*append_props_t)(sd_bus_message *m, void *userdata);

int unit_subscribe(Manager *m);

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
