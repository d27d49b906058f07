/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* offload.c: jobs run in worker threads, their done() back in the loop's thread, each exactly once,
 * with the loop's signals left alone; offload_free() finishes what was submitted. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "offload.h"
#include "test-util.h"

#define N_JOBS 200

typedef struct TestJob {
        OffloadJob job;
        unsigned index;
        pid_t run_tid, done_tid;
        unsigned runs, dones;
        bool signals_blocked; /* in the worker: all of them */
        unsigned *done_count;
        sd_event *event;
        unsigned stop_at;
} TestJob;

static pid_t gettid_(void) {
        return (pid_t) syscall(SYS_gettid);
}

static void test_run(OffloadJob *job) {
        TestJob *t = container_of(job, TestJob, job);
        sigset_t mask;

        t->run_tid = gettid_();
        t->runs++;
        t->signals_blocked = pthread_sigmask(SIG_SETMASK, NULL, &mask) == 0 && sigismember(&mask, SIGTERM) == 1 &&
                             sigismember(&mask, SIGCHLD) == 1;
        /* Long enough that the jobs overlap and the queue fills. */
        struct timespec ts = { .tv_nsec = (long) (t->index % 7) * 50000L };
        nanosleep(&ts, NULL);
}

static void test_done(OffloadJob *job) {
        TestJob *t = container_of(job, TestJob, job);

        t->done_tid = gettid_();
        t->dones++;
        (*t->done_count)++;
        if (t->event && *t->done_count == t->stop_at)
                (void) sd_event_exit(t->event, 0);
}

static void check_jobs(TestJob *jobs, size_t n, pid_t main_tid) {
        for (size_t i = 0; i < n; i++) {
                CHECK_INT(jobs[i].runs, 1);
                CHECK_INT(jobs[i].dones, 1);
                CHECK(jobs[i].run_tid != main_tid && jobs[i].run_tid > 0);
                CHECK_INT(jobs[i].done_tid, main_tid);
                CHECK(jobs[i].signals_blocked);
        }
}

int main(void) {
        static TestJob jobs[N_JOBS], more[N_JOBS];
        sd_event *event = NULL;
        Offload *o = NULL;
        unsigned done_count = 0, more_done = 0;
        pid_t main_tid = gettid_();
        sigset_t mask, before;

        CHECK(offload_new(NULL, 1, &o) == -EINVAL);
        CHECK(sd_event_new(&event) >= 0);
        CHECK(offload_new(event, 0, &o) == -EINVAL);

        /* The loop's mask is its own business: SIGTERM stays unblocked here. */
        sigemptyset(&mask);
        CHECK(pthread_sigmask(SIG_SETMASK, &mask, NULL) == 0);
        CHECK(offload_new(event, 2, &o) >= 0);
        CHECK(pthread_sigmask(SIG_SETMASK, NULL, &before) == 0 && sigismember(&before, SIGTERM) == 0);
        CHECK_INT(offload_pending(o), 0);

        for (unsigned i = 0; i < N_JOBS; i++) {
                jobs[i] = (TestJob) { .job = { .run = test_run, .done = test_done }, .index = i,
                                      .done_count = &done_count, .event = event, .stop_at = N_JOBS };
                offload_submit(o, &jobs[i].job);
        }
        CHECK_INT(offload_pending(o), N_JOBS);
        /* Nothing is done() before the loop runs: done() belongs to the loop. */
        CHECK_INT(done_count, 0);
        CHECK(sd_event_loop(event) >= 0);
        CHECK_INT(done_count, N_JOBS);
        CHECK_INT(offload_pending(o), 0);
        check_jobs(jobs, N_JOBS, main_tid);

        /* Submitted and not run yet when it is freed: all of them still run, and are done() in the
         * caller's thread, without the loop. */
        for (unsigned i = 0; i < N_JOBS; i++) {
                more[i] = (TestJob) { .job = { .run = test_run, .done = test_done }, .index = i,
                                      .done_count = &more_done };
                offload_submit(o, &more[i].job);
        }
        o = offload_free(o);
        CHECK(!o);
        CHECK_INT(more_done, N_JOBS);
        check_jobs(more, N_JOBS, main_tid);

        sd_event_unref(event);
        return test_finish("test-offload");
}
