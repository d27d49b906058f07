/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests cgroup-join.c: reading /proc/PID/cgroup and what is opened for which lines (no root needed). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup-join.h"
#include "macro.h"
#include "test-util.h"

static int join_open(const char *text, size_t *ret_n, int *ret_cg2) {
        int fds[CGROUP_JOIN_FDS_MAX];
        size_t n = 99;
        int cg2 = 99;
        int r = cgroup_join_open(text, fds, ELEMENTSOF(fds), &n, &cg2);
        if (r >= 0) {
                for (size_t i = 0; i < n; i++)
                        close(fds[i]);
                if (cg2 >= 0)
                        close(cg2);
                *ret_n = n;
                *ret_cg2 = cg2;
        }
        return r;
}

int main(void) {
        char *self = NULL;
        size_t n;
        int cg2;

        CHECK_INT(cgroup_read(getpid(), &self), 0);
        CHECK(self && strchr(self, ':'));
        CHECK_INT(cgroup_read(-1, &self) < 0, 1 /* no such process: an error, *ret untouched */);

        /* Where everything is our own cgroup, a child is there already: nothing to open. */
        CHECK_INT(join_open(self, &n, &cg2), 0);
        CHECK_U64(n, 0);
        CHECK(cg2 < 0);

        /* The hierarchies systemd needs must open; the others may be missing; junk is skipped. */
        CHECK_INT(join_open("0::/no-such-cgroup-of-a-test\n", &n, &cg2), -ENOENT);
        CHECK_INT(join_open("4:memory:/no-such-cgroup-of-a-test\n", &n, &cg2), -ENOENT);
        CHECK_INT(join_open("8:pids:/no-such-cgroup-of-a-test\n", &n, &cg2), -ENOENT);
        CHECK_INT(join_open("9:name=systemd:/no-such-cgroup-of-a-test\n", &n, &cg2), -ENOENT);
        CHECK_INT(join_open("3:cpuset:/no-such-cgroup-of-a-test\nnot a line\n\n", &n, &cg2), 0);
        CHECK_U64(n, 0);
        CHECK(cg2 < 0);

        /* Without a cgroup2 fd, a plain fork. */
        bool born_in = true;
        pid_t pid = cgroup_fork_into(-EBADF, &born_in);
        if (pid == 0)
                _exit(42);
        CHECK(pid > 0 && !born_in);
        int st;
        CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 42);

        free(self);
        return test_finish("test-cgroup-join");
}
