/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for scope-child's pure parts: when a child may go, what follows its exit, the child's side. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scope-child.h"
#include "test-util.h"

static void dummy_done(ScopeChild *c) {
}

static const ScopeChildOps ops_plain = { .done = dummy_done };
static const ScopeChildOps ops_keep = { .done = dummy_done, .keep_scope = true };

/* Every combination of the flags: may it go? Only when ready and in its scope, not yet started, not
 * killed, and alive (or, self-entered, running already). */
static void test_may_go(void) {
        for (unsigned bits = 0; bits < 64; bits++) {
                ScopeChild c = SCOPE_CHILD_INIT;
                c.ops = &ops_plain;
                c.ready = bits & 1;
                c.scope_up = bits & 2;
                c.started = bits & 4;
                c.killed = bits & 8;
                c.exited = bits & 16;
                c.self_entered = bits & 32;
                bool expected = c.ready && c.scope_up && !c.started && !c.killed &&
                                (c.self_entered || !c.exited);
                CHECK_INT(scope_child_may_go(&c), expected);
        }
}

/* After the exit: a child that ran is done; one that never ran waits for its scope's start job, or has
 * its scope stopped first (so a failed call leaves no unit), unless its owner keeps the scope. */
static void test_after_exit(void) {
        JobWait *some_job = (JobWait *) &some_job; /* only compared with NULL */

        for (unsigned bits = 0; bits < 16; bits++) {
                ScopeChild c = SCOPE_CHILD_INIT;
                bool keep = bits & 8;
                c.ops = keep ? &ops_keep : &ops_plain;
                c.exited = true;
                c.started = bits & 1;
                c.scope_up = bits & 2;
                c.job = (bits & 4) ? some_job : NULL;
                ScopeChildNext expected = c.started || keep ? SCOPE_CHILD_DONE
                                          : c.job       ? SCOPE_CHILD_WAIT_JOB
                                          : c.scope_up  ? SCOPE_CHILD_STOP_SCOPE
                                                        : SCOPE_CHILD_DONE;
                CHECK_INT(scope_child_after_exit(&c), expected);
        }
}

/* The child's failure report reaches scope_child_read_failure(), and its exit status is the one given. */
static void test_failure_report(void) {
        int p[2];
        int status = 0;

        CHECK(pipe2(p, O_CLOEXEC) == 0);
        pid_t pid = fork();
        if (pid == 0) {
                close(p[0]);
                scope_child_fail(p[1], SCOPE_CHILD_STAGE_SETUP + 1, "change to the working directory", EACCES,
                                 7);
        }
        CHECK(pid > 0);
        close(p[1]);
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 7);

        ScopeChild c = SCOPE_CHILD_INIT;
        c.err_fd = p[0];
        ScopeChildFailure f;
        CHECK_INT(scope_child_read_failure(&c, &f), 1);
        CHECK_INT(f.stage, SCOPE_CHILD_STAGE_SETUP + 1);
        CHECK_INT(f.error, EACCES);
        CHECK_STR(f.step, "change to the working directory"); /* same binary: the pointer is valid here */
        /* nothing more: read once */
        CHECK_INT(scope_child_read_failure(&c, &f), 0);
        CHECK_INT(f.stage, 0);
        close(p[0]);

        /* no failure pipe: nothing */
        c.err_fd = -EBADF;
        CHECK_INT(scope_child_read_failure(&c, &f), 0);
}

/* "ready" with and without an fd passed along, and go or EOF. */
static void test_ready_and_go(void) {
        int sp[2], passed[2];
        char byte = 0;

        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
        CHECK(pipe2(passed, O_CLOEXEC) == 0);

        /* plain */
        CHECK_INT(scope_child_send_ready(sp[0], -EBADF), 0);
        CHECK(read(sp[1], &byte, 1) == 1);
        CHECK_INT(byte, 'r');

        /* with an fd: it arrives, and is the same pipe */
        CHECK_INT(scope_child_send_ready(sp[0], passed[1]), 0);
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int))];
        } control = {};
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                             .msg_controllen = sizeof(control.buf) };
        byte = 0;
        CHECK(recvmsg(sp[1], &mh, MSG_CMSG_CLOEXEC) == 1);
        CHECK_INT(byte, 'r');
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        CHECK(cm && cm->cmsg_type == SCM_RIGHTS);
        if (cm && cm->cmsg_type == SCM_RIGHTS) {
                int fd;
                memcpy(&fd, CMSG_DATA(cm), sizeof(int));
                CHECK(write(fd, "x", 1) == 1);
                CHECK(read(passed[0], &byte, 1) == 1);
                CHECK_INT(byte, 'x');
                close(fd);
        }

        /* go, then EOF: sandboxd gave up */
        CHECK(write(sp[1], "g", 1) == 1);
        CHECK_INT(scope_child_wait_go(sp[0]), 0);
        close(sp[1]);
        CHECK_INT(scope_child_wait_go(sp[0]), -EPIPE);
        close(sp[0]);
        close(passed[0]);
        close(passed[1]);
}

/* An Exec's or a shell's scope: its description and whether RuntimeMaxUSec= is set. */
static void test_props_sandbox(void) {
        char desc[SCOPE_DESCRIPTION_MAX];

        ScopeProps p = scope_props_sandbox(desc, "sb_abcdefgh23", "command", "sandbox-sb_abcdefgh23.slice",
                                           42, 256, 1024, 20000000);
        CHECK_STR(p.description, "sandbox sb_abcdefgh23 command");
        CHECK_STR(p.slice, "sandbox-sb_abcdefgh23.slice");
        CHECK_INT(p.pid, 42);
        CHECK(p.limits && p.tasks_max == 256 && p.memory_max == 1024);
        CHECK(p.runtime_max && p.runtime_max_usec == 20000000);
        CHECK(p.send_sighup);
        CHECK_INT(p.kill_signal, 0);

        p = scope_props_sandbox(desc, "sb_abcdefgh23", "shell", "sandbox-sb_abcdefgh23.slice", 43, 1, 2,
                                UINT64_MAX);
        CHECK_STR(p.description, "sandbox sb_abcdefgh23 shell");
        CHECK(!p.runtime_max);
}

int main(void) {
        test_may_go();
        test_after_exit();
        test_failure_report();
        test_ready_and_go();
        test_props_sandbox();
        return test_finish("test-scope-child");
}
