/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Worker threads for blocking calls, with completions handed back to the sd-event loop. */

#include "offload.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "macro.h"

#define OFFLOAD_THREADS_MAX 16

struct Offload {
        pthread_mutex_t lock;
        pthread_cond_t work;
        OffloadJob *queue, *queue_tail; /* submitted, not yet picked up */
        OffloadJob *done, *done_tail;   /* run, waiting for the loop */
        bool stopping;
        int efd;
        sd_event_source *source;
        pthread_t threads[OFFLOAD_THREADS_MAX];
        unsigned n_threads;
        unsigned pending; /* the loop's own count: submitted and not yet done() */
};

static void *worker(void *userdata) {
        Offload *o = userdata;

        pthread_mutex_lock(&o->lock);
        for (;;) {
                while (!o->queue && !o->stopping)
                        pthread_cond_wait(&o->work, &o->lock);
                OffloadJob *j = o->queue;
                if (!j)
                        break; /* stopping, and nothing left */
                o->queue = j->next;
                if (!o->queue)
                        o->queue_tail = NULL;
                pthread_mutex_unlock(&o->lock);

                j->run(j);

                pthread_mutex_lock(&o->lock);
                j->next = NULL;
                if (o->done_tail)
                        o->done_tail->next = j;
                else
                        o->done = j;
                o->done_tail = j;
                /* A wake-up of the loop; a full counter (never, in practice) still leaves it readable. */
                uint64_t one = 1;
                (void) !write(o->efd, &one, sizeof(one));
        }
        pthread_mutex_unlock(&o->lock);
        return NULL;
}

static void dispatch_done(Offload *o) {
        pthread_mutex_lock(&o->lock);
        OffloadJob *j = o->done;
        o->done = o->done_tail = NULL;
        pthread_mutex_unlock(&o->lock);

        while (j) {
                OffloadJob *next = j->next;
                j->next = NULL;
                o->pending--;
                j->done(j); /* may free j */
                j = next;
        }
}

static int on_done(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Offload *o = userdata;
        uint64_t n;

        (void) !read(fd, &n, sizeof(n));
        dispatch_done(o);
        return 0;
}

int offload_new(sd_event *event, unsigned n_threads, Offload **ret) {
        sigset_t all, saved;
        int r;

        if (!event || !ret || n_threads == 0)
                return -EINVAL;
        Offload *o = calloc(1, sizeof(Offload));
        if (!o)
                return -ENOMEM;
        pthread_mutex_init(&o->lock, NULL);
        pthread_cond_init(&o->work, NULL);
        o->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (o->efd < 0) {
                r = -errno;
                goto fail;
        }
        r = sd_event_add_io(event, &o->source, o->efd, EPOLLIN, on_done, o);
        if (r < 0)
                goto fail;

        /* Signals stay the loop's (sd-event blocks the ones it handles in its own thread only). */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &saved);
        for (unsigned i = 0; i < MIN(n_threads, (unsigned) OFFLOAD_THREADS_MAX); i++) {
                r = -pthread_create(&o->threads[i], NULL, worker, o);
                if (r < 0)
                        break;
                o->n_threads++;
        }
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        if (o->n_threads == 0)
                goto fail;
        *ret = o;
        return 0;
fail:
        offload_free(o);
        return r;
}

Offload *offload_free(Offload *o) {
        if (!o)
                return NULL;
        pthread_mutex_lock(&o->lock);
        o->stopping = true;
        pthread_cond_broadcast(&o->work);
        pthread_mutex_unlock(&o->lock);
        for (unsigned i = 0; i < o->n_threads; i++)
                pthread_join(o->threads[i], NULL);
        dispatch_done(o);
        sd_event_source_disable_unref(o->source);
        if (o->efd >= 0)
                close(o->efd);
        pthread_cond_destroy(&o->work);
        pthread_mutex_destroy(&o->lock);
        free(o);
        return NULL;
}

void offload_submit(Offload *o, OffloadJob *job) {
        job->next = NULL;
        o->pending++;
        pthread_mutex_lock(&o->lock);
        if (o->queue_tail)
                o->queue_tail->next = job;
        else
                o->queue = job;
        o->queue_tail = job;
        pthread_cond_signal(&o->work);
        pthread_mutex_unlock(&o->lock);
}

unsigned offload_pending(const Offload *o) {
        return o ? o->pending : 0;
}
