/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests warm-scope.c's placeholder, the clone of sandboxd that holds a warm scope until an Exec's child
 * takes it: what it keeps (no descriptors, no blocked signals, its name), how it goes (the hold's go and
 * wait; SIGTERM, which systemd sends to stop a scope; SIGKILL when sandboxd dies). The scopes
 * themselves need systemd: tests/integration/test_sandboxd.py (test_warm_scope) covers them. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "warm-scope.h"
#include "test-util.h"

static void sleep_ms(unsigned ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
}

/* Its fds, or -1 if it is gone. */
static int count_fds(pid_t pid) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/fd", (int) pid);
        DIR *d = opendir(path);
        if (!d)
                return -1;
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        return n;
}

static void read_proc(pid_t pid, const char *what, char *buf, size_t size) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/%s", (int) pid, what);
        buf[0] = 0;
        FILE *f = fopen(path, "re");
        if (!f)
                return;
        size_t n = fread(buf, 1, size - 1, f);
        buf[n] = 0;
        fclose(f);
}

/* Settled: named, its descriptors closed (it does both first thing). At most 5 s. */
static bool wait_settled(pid_t pid) {
        char comm[64];
        for (int i = 0; i < 500; i++) {
                read_proc(pid, "comm", comm, sizeof(comm));
                if (streq(comm, "sandboxd-warm\n") && count_fds(pid) == 0)
                        return true;
                sleep_ms(10);
        }
        return false;
}

/* waitpid() with a bound: 0 and the status, or -ETIMEDOUT (and the process killed). */
static int wait_exit(pid_t pid, int *ret_status) {
        for (int i = 0; i < 500; i++) {
                pid_t r = waitpid(pid, ret_status, WNOHANG);
                if (r == pid)
                        return 0;
                if (r < 0)
                        return -errno;
                sleep_ms(10);
        }
        kill(pid, SIGKILL);
        (void) waitpid(pid, ret_status, 0);
        return -ETIMEDOUT;
}

static void test_go_and_wait(void) {
        WarmScopeHold *hold = NULL;
        WarmScopePin *p = NULL;
        pid_t pid = 0;
        int status = 0, pipe_fds[2];
        char status_text[4096];

        /* Descriptors of ours it must not hold open, and a signal we block (sandboxd blocks SIGTERM for
         * its signalfd) that it must not. */
        CHECK(pipe(pipe_fds) == 0);
        sigset_t term;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        CHECK(sigprocmask(SIG_BLOCK, &term, NULL) == 0);

        CHECK_INT(warm_placeholder_spawn(&pid, &hold, &p), 0);
        CHECK(pid > 0 && hold);
        CHECK(hold->parent == getpid());
        CHECK(hold->tid == (uint32_t) pid); /* set by the kernel before clone() returned */
        CHECK(wait_settled(pid));
        read_proc(pid, "status", status_text, sizeof(status_text));
        CHECK(strstr(status_text, "\nSigBlk:\t0000000000000000\n"));
        char want[64];
        snprintf(want, sizeof(want), "\nPPid:\t%d\n", (int) getpid());
        CHECK(strstr(status_text, want));
        /* it waits: still there a while later */
        sleep_ms(50);
        CHECK(waitpid(pid, &status, WNOHANG) == 0);

        /* The Exec's child's side: go, then wait until it is gone; the kernel clears the tid. */
        warm_scope_hold_go(hold);
        warm_scope_hold_wait(hold);
        CHECK(hold->tid == 0);
        CHECK_INT(wait_exit(pid, &status), 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        warm_placeholder_done(p);

        /* The stack comes back for the next one, whose hold starts afresh. */
        CHECK_INT(warm_placeholder_spawn(&pid, &hold, &p), 0);
        CHECK(hold->go == 0 && hold->tid == (uint32_t) pid);
        CHECK(wait_settled(pid));
        /* What systemd sends to stop its scope ends it, though we block it. */
        CHECK(kill(pid, SIGTERM) == 0);
        CHECK_INT(wait_exit(pid, &status), 0);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
        warm_placeholder_done(p);

        CHECK(sigprocmask(SIG_UNBLOCK, &term, NULL) == 0);
        close(pipe_fds[0]);
        close(pipe_fds[1]);
}

static void test_dies_with_parent(void) {
        int pipe_fds[2], status = 0;
        pid_t placeholder = 0;

        /* Its parent dies (sandboxd, killed): it gets SIGKILL. We adopt it to see how it ended. */
        CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0);
        CHECK(pipe(pipe_fds) == 0);
        pid_t middle = fork();
        if (middle == 0) {
                WarmScopeHold *hold;
                WarmScopePin *p;
                pid_t pid = -1;
                if (warm_placeholder_spawn(&pid, &hold, &p) < 0 || !wait_settled(pid))
                        pid = -1;
                (void) !write(pipe_fds[1], &pid, sizeof(pid));
                _exit(0);
        }
        CHECK(middle > 0);
        close(pipe_fds[1]);
        CHECK(read(pipe_fds[0], &placeholder, sizeof(placeholder)) == sizeof(placeholder));
        close(pipe_fds[0]);
        CHECK_INT(wait_exit(middle, &status), 0);
        CHECK(placeholder > 0);
        if (placeholder > 0) {
                CHECK_INT(wait_exit(placeholder, &status), 0);
                CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        }
        CHECK(prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) == 0);
}

int main(void) {
        test_go_and_wait();
        test_dies_with_parent();
        return test_finish("test-warm-scope");
}
