/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Blocking work off the event loop: a few worker threads run a job's run(), and its done() is then
 * called back in the event loop's thread. sandboxd uses it for the calls that block it for long:
 * clone3(CLONE_VM | CLONE_VFORK) of an Exec's child, which returns only when the child has confined
 * itself and exec'd (sandbox-exec.c), and the close() that unmounts a deleted sandbox's disk
 * (sandbox.c). Nothing else of sandboxd runs in a worker: no sd-bus, no sd-event, no allocation, just
 * the job's system calls. */

#include <systemd/sd-event.h>

typedef struct Offload Offload;
typedef struct OffloadJob OffloadJob;

struct OffloadJob {
        void (*run)(OffloadJob *job);  /* in a worker thread */
        void (*done)(OffloadJob *job); /* then in the event loop's thread; may free the job */
        OffloadJob *next;              /* the queues' link: ours while submitted */
};

/* n_threads workers (at least 1), their signals all blocked, so that every signal stays the event
 * loop's. */
int offload_new(sd_event *event, unsigned n_threads, Offload **ret);

/* Runs what was submitted to its end (done() included, in the caller's thread), then joins the
 * workers. */
Offload *offload_free(Offload *o);

/* Queues job; its run() starts as soon as a worker is free, in the order submitted. */
void offload_submit(Offload *o, OffloadJob *job);

/* Jobs submitted and not yet done(). */
unsigned offload_pending(const Offload *o);
