/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One engine for a confined child of sandboxd in a transient scope: the init, an Exec, a shell. */
#include "scope-child.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup-join.h"
#include "sandboxd-manager.h"
#include "time-util.h"

/* --- in the child -------------------------------------------------------------------------------- */

_noreturn_ void scope_child_fail(int err_fd, int stage, const char *step, int error, int status) {
        ScopeChildFailure f = { .stage = stage, .error = error, .step = step };
        (void) !write(err_fd, &f, sizeof(f));
        _exit(status);
}

int scope_child_send_ready(int go_fd, int fd) {
        char c = 'r';

        if (fd < 0)
                return write(go_fd, &c, 1) == 1 ? 0 : -errno;

        struct iovec iov = { .iov_base = &c, .iov_len = 1 };
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int))];
        } control = {};
        struct msghdr mh = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = control.buf,
                .msg_controllen = sizeof(control.buf),
        };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof(int));
        return sendmsg(go_fd, &mh, MSG_NOSIGNAL) == 1 ? 0 : -errno;
}

int scope_child_wait_go(int go_fd) {
        char go;
        return read(go_fd, &go, 1) == 1 ? 0 : -EPIPE;
}

/* --- spawning ------------------------------------------------------------------------------------ */

#if defined(__x86_64__)
/* clone3() with the child on a stack of its own, which glibc does not offer: the child starts at the
 * instruction after the syscall with the new stack, calls fn(arg) and exits with its result. rdx (fn)
 * and r8 (arg) survive the syscall; rcx and r11 do not. Returns what the syscall returned. */
long sandbox_clone3_call(struct clone_args_v2 *args, size_t size, int (*fn)(void *), void *arg);
__asm__(".text\n"
        ".globl sandbox_clone3_call\n"
        ".hidden sandbox_clone3_call\n"
        ".type sandbox_clone3_call, @function\n"
        "sandbox_clone3_call:\n"
        "        .cfi_startproc\n"
        "        movq %rcx, %r8\n"
        "        movl $435, %eax\n" /* __NR_clone3 */
        "        syscall\n"
        "        testq %rax, %rax\n"
        "        jz 1f\n"
        "        ret\n"
        "1:\n"
        "        .cfi_undefined rip\n"
        "        xorl %ebp, %ebp\n"
        "        movq %r8, %rdi\n"
        "        call *%rdx\n"
        "        movl %eax, %edi\n"
        "        movl $60, %eax\n" /* __NR_exit */
        "        syscall\n"
        "        hlt\n"
        "        .cfi_endproc\n"
        "        .size sandbox_clone3_call, .-sandbox_clone3_call\n");

static int child_entry(void *userdata) {
        const ScopeChildSpawn *sp = userdata;
        sp->child(sp->arg);
        return 127;
}

#define CHILD_STACK_SIZE (256 * 1024)

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
#endif

/* The child, born in cgroup2_fd's cgroup if that is not -EBADF: no migration afterwards, so none of
 * the global lock a write to cgroup.procs takes (and the RCU grace period its first taker after a quiet
 * spell waits out: 8-16 ms here). Such a child does not wait for our go either, so on x86-64 it
 * shares our memory until it execs, like vfork() (we are suspended meanwhile, a fraction of a
 * millisecond), on a stack of its own: no copy of our page tables, no copy-on-write faults charged to
 * its memory cgroup, nothing to tear down at its exec. It writes nothing of ours but that stack and
 * errno. Only the calling thread waits meanwhile (an Exec calls it in a worker thread). */
static pid_t spawn_here(const ScopeChildSpawn *sp, int cgroup2_fd) {
        if (cgroup2_fd >= 0) {
                struct clone_args_v2 args = {
                        .flags = CLONE_INTO_CGROUP,
                        .exit_signal = SIGCHLD,
                        .cgroup = (uint64_t) cgroup2_fd,
                };
                long pid;
#if defined(__x86_64__)
                static _Thread_local void *stack = NULL; /* each thread's children: one at a time */
                if (!stack) {
                        void *p = mmap(NULL, CHILD_STACK_SIZE, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
                        if (p != MAP_FAILED)
                                stack = p;
                }
                if (stack) {
#if defined(__SANITIZE_ADDRESS__)
                        /* The last child's frames never returned (it exec'd): their redzones are still
                         * poisoned in the shadow memory we share, and would be taken for overflows. */
                        __asan_unpoison_memory_region(stack, CHILD_STACK_SIZE);
#endif
                        args.flags |= CLONE_VM | CLONE_VFORK;
                        args.stack = (uint64_t) (uintptr_t) stack;
                        args.stack_size = CHILD_STACK_SIZE;
                        pid = sandbox_clone3_call(&args, sizeof(args), child_entry, (void *) sp);
                        if (pid < 0) {
                                errno = (int) -pid;
                                return -1;
                        }
                        return (pid_t) pid;
                }
#endif
                /* Like fork(), minus glibc's atfork handlers, which the child does not need: it only
                 * makes system calls until it execs. */
                pid = syscall(SYS_clone3, &args, sizeof(args));
                if (pid == 0) {
                        sp->child(sp->arg);
                        _exit(127);
                }
                return (pid_t) pid;
        }
        pid_t pid = fork();
        if (pid == 0) {
                sp->child(sp->arg);
                _exit(127);
        }
        return pid;
}

pid_t scope_child_spawn(const ScopeChildSpawn *sp) {
        assert(sp);
        assert(sp->child);

        /* setns(CLONE_NEWPID) and unshare(CLONE_NEWPID) are the calling thread's alone, and concern
         * only the children it makes from now on: we stay where we are. */
        if ((sp->pidns_fd >= 0 ? setns(sp->pidns_fd, CLONE_NEWPID) : unshare(CLONE_NEWPID)) < 0)
                return -1;
        pid_t pid = spawn_here(sp, sp->cgroup2_fd);
        if (pid < 0 && sp->cgroup2_fd >= 0 && CLONE3_UNSUPPORTED(errno)) {
                if (sp->no_clone3 && sp->no_clone3(sp->arg, sp->cgroup2_fd) >= 0)
                        pid = spawn_here(sp, -EBADF);
                else
                        errno = EIO;
        }
        int saved_errno = errno;
        if (setns(sp->host_pidns_fd, CLONE_NEWPID) < 0)
                abort(); /* every later child would land in that namespace */
        errno = saved_errno;
        return pid;
}

/* --- scopes -------------------------------------------------------------------------------------- */

int scope_props_append(sd_bus_message *m, const ScopeProps *p) {
        int r;

        assert(m);
        assert(p);

        r = sd_bus_message_append(m, "(sv)(sv)(sv)",
                                  "Description", "s", p->description,
                                  "Slice", "s", p->slice,
                                  "PIDs", "au", 1, (uint32_t) p->pid);
        if (r >= 0 && p->limits)
                r = sd_bus_message_append(m, "(sv)(sv)", "TasksMax", "t", p->tasks_max, "MemoryMax", "t",
                                          p->memory_max);
        if (r >= 0 && p->runtime_max)
                r = sd_bus_message_append(m, "(sv)", "RuntimeMaxUSec", "t", p->runtime_max_usec);
        /* SIGKILL for the init: PID 1 of a PID namespace ignores every other signal it has no handler
         * for, also from outside. */
        if (r >= 0 && p->kill_signal > 0)
                r = sd_bus_message_append(m, "(sv)", "KillSignal", "i", (int32_t) p->kill_signal);
        if (r >= 0)
                r = sd_bus_message_append(m, "(sv)(sv)", "TimeoutStopUSec", "t", (uint64_t) USEC_PER_SEC,
                                          "CollectMode", "s", "inactive-or-failed");
        if (r >= 0 && p->send_sighup)
                r = sd_bus_message_append(m, "(sv)", "SendSIGHUP", "b", 1);
        return r;
}

ScopeProps scope_props_sandbox(char desc[static SCOPE_DESCRIPTION_MAX], const char *sandbox_id,
                               const char *what, const char *slice, pid_t pid, uint64_t tasks_max,
                               uint64_t memory_max, uint64_t runtime_max_usec) {
        snprintf(desc, SCOPE_DESCRIPTION_MAX, "sandbox %s %s", sandbox_id, what);
        return (ScopeProps) {
                .description = desc,
                .slice = slice,
                .pid = pid,
                .limits = true,
                .tasks_max = tasks_max,
                .memory_max = memory_max,
                .runtime_max = runtime_max_usec != UINT64_MAX,
                .runtime_max_usec = runtime_max_usec,
                .send_sighup = true,
        };
}

/* --- the decisions ------------------------------------------------------------------------------- */

bool scope_child_may_go(const ScopeChild *c) {
        assert(c);

        if (!c->ready || !c->scope_up || c->started || c->killed)
                return false;
        /* A self-entered child runs already: its exit in the same batch of events does not undo that. */
        return c->self_entered || !c->exited;
}

ScopeChildNext scope_child_after_exit(const ScopeChild *c) {
        assert(c);

        if (c->started || (c->ops && c->ops->keep_scope))
                return SCOPE_CHILD_DONE;
        /* It died during its setup: the answer waits until its scope is gone, so a call that fails
         * leaves no unit behind. */
        if (c->job)
                return SCOPE_CHILD_WAIT_JOB;
        if (c->scope_up)
                return SCOPE_CHILD_STOP_SCOPE;
        return SCOPE_CHILD_DONE;
}

/* --- the life cycle ------------------------------------------------------------------------------ */

void scope_child_setup(ScopeChild *c, Manager *m, const ScopeChildOps *ops, void *userdata) {
        assert(c);
        assert(ops);
        assert(ops->done);

        *c = (ScopeChild) SCOPE_CHILD_INIT;
        c->manager = m;
        c->ops = ops;
        c->userdata = userdata;
        c->ready = ops->ready_at_spawn;
}

static void maybe_go(ScopeChild *c) {
        if (scope_child_may_go(c))
                c->ops->go(c);
}

static int on_ready(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        ScopeChild *c = userdata;
        char byte = 0;
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int))];
        } control = {};
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        struct msghdr mh = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = control.buf,
                .msg_controllen = sizeof(control.buf),
        };
        int passed = -EBADF;
        ssize_t n;

        n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EAGAIN)
                return 0;
        c->ready_source = sd_event_source_disable_unref(c->ready_source);
        for (struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm; cm = CMSG_NXTHDR(&mh, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
                    cm->cmsg_len == CMSG_LEN(sizeof(int))) {
                        safe_close(passed);
                        memcpy(&passed, CMSG_DATA(cm), sizeof(int));
                }
        bool ok = n == 1 && byte == 'r';
        if (c->ops->ready)
                ok = c->ops->ready(c, ok, passed); /* takes passed */
        else
                safe_close(passed);
        if (!ok)
                return 0; /* it failed; its exit tells why */
        c->ready = true;
        maybe_go(c);
        return 0;
}

static int on_report(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        ScopeChild *c = userdata;
        ScopeChildFailure f = {};
        ssize_t n;

        n = read(fd, &f, sizeof(f));
        if (n < 0 && errno == EAGAIN)
                return 0;
        c->report_source = sd_event_source_disable_unref(c->report_source);
        c->err_fd = safe_close(c->err_fd);
        if (n == 0) {
                /* close-on-exec closed it: the child exec'd */
                c->ops->report(c, NULL);
                return 0;
        }
        if (n != sizeof(f))
                f = (ScopeChildFailure) { .stage = SCOPE_CHILD_STAGE_SETUP, .error = n < 0 ? errno : EIO };
        c->ops->report(c, &f);
        return 0;
}

static void on_scope_stopped(Manager *m, const char *result, const sd_bus_error *error, void *userdata) {
        ScopeChild *c = userdata;

        c->job = NULL;
        c->ops->done(c);
}

void scope_child_stop_then_done(ScopeChild *c) {
        assert(c);

        if (unit_stop(c->manager, c->unit, on_scope_stopped, c, &c->job) < 0)
                c->ops->done(c);
}

static int on_child_exit(sd_event_source *es, const siginfo_t *si, void *userdata) {
        ScopeChild *c = userdata;

        if (!c) {
                sd_event_source_disable_unref(es); /* reaped after its owner was freed */
                return 0;
        }
        /* A child in a warm scope says "ready" and runs on: that may be in the same batch of events as
         * its exit. Take the "ready" first, so we know it ran. */
        if (c->self_entered && c->ready_source)
                (void) on_ready(c->ready_source, c->go_fd, EPOLLIN, c);
        c->status = *si;
        c->exited = true;
        c->child_source = sd_event_source_disable_unref(c->child_source);
        if (c->ops->exited)
                c->ops->exited(c);

        switch (scope_child_after_exit(c)) {
        case SCOPE_CHILD_WAIT_JOB:
                return 0; /* on_scope_started() goes on */
        case SCOPE_CHILD_STOP_SCOPE:
                scope_child_stop_then_done(c);
                return 0;
        case SCOPE_CHILD_DONE:
                c->ops->done(c);
                return 0;
        }
        return 0;
}

int scope_child_attach(ScopeChild *c, pid_t pid, int go_fd, int err_fd) {
        Manager *m = c->manager;
        int r;

        assert(c);
        assert(pid > 0);

        c->pid = pid;
        c->go_fd = go_fd;
        c->err_fd = err_fd;
        if (c->err_fd >= 0)
                (void) fcntl(c->err_fd, F_SETFL, O_NONBLOCK);
        if (c->go_fd >= 0)
                (void) fcntl(c->go_fd, F_SETFL, O_NONBLOCK);

        r = sd_event_add_child(m->event, &c->child_source, pid, WEXITED, on_child_exit, c);
        if (r < 0)
                return r;
        if (c->ops->report) {
                r = sd_event_add_io(m->event, &c->report_source, c->err_fd, EPOLLIN, on_report, c);
                if (r < 0)
                        return r;
        }
        if (!c->ops->ready_at_spawn) {
                r = sd_event_add_io(m->event, &c->ready_source, c->go_fd, EPOLLIN, on_ready, c);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* unit_start_transient() hands both appenders the same userdata. */
typedef struct Appenders {
        const ScopeProps *props;
        append_props_t aux;
        void *aux_userdata;
} Appenders;

static int append_props(sd_bus_message *msg, void *userdata) {
        const Appenders *a = userdata;
        return scope_props_append(msg, a->props);
}

static int append_aux_units(sd_bus_message *msg, void *userdata) {
        const Appenders *a = userdata;
        return a->aux(msg, a->aux_userdata);
}

static void on_scope_started(Manager *m, const char *result, const sd_bus_error *error, void *userdata) {
        ScopeChild *c = userdata;

        c->job = NULL;
        if (!result || !streq(result, "done")) {
                if (c->exited) {
                        /* The child died first (that is why systemd could not take its pid): what it
                         * reported is the answer. */
                        c->ops->done(c);
                        return;
                }
                int r = error && sd_bus_error_is_set(error) ? (sd_bus_error_get_errno(error) ?: EIO) : EIO;
                scope_child_kill(c);
                c->ops->scope_failed(c, r, error);
                return; /* the child's exit ends it */
        }
        c->scope_up = true;
        if (c->exited) {
                if (c->ops->keep_scope)
                        c->ops->done(c);
                else
                        scope_child_stop_then_done(c);
                return;
        }
        if (c->ops->scope_up)
                c->ops->scope_up(c);
        maybe_go(c);
}

int scope_child_start_scope(ScopeChild *c, const ScopeProps *props, append_props_t append_aux,
                            void *aux_userdata) {
        assert(c);
        assert(props);

        /* The properties are appended right away: props may live on the caller's stack. */
        Appenders a = { .props = props, .aux = append_aux, .aux_userdata = aux_userdata };
        return unit_start_transient(c->manager, c->unit, append_props, append_aux ? append_aux_units : NULL,
                                    &a, on_scope_started, c, &c->job);
}

int scope_child_go(ScopeChild *c) {
        int r = 0;

        assert(c);
        assert(!c->started);

        c->started = true;
        if (!c->self_entered && write(c->go_fd, "g", 1) != 1)
                r = -errno;
        c->go_fd = safe_close(c->go_fd);
        return r;
}

void scope_child_kill(ScopeChild *c) {
        assert(c);

        c->killed = true;
        if (c->pid > 0 && !c->exited)
                (void) kill(c->pid, SIGKILL);
}

int scope_child_read_failure(ScopeChild *c, ScopeChildFailure *ret) {
        ScopeChildFailure f = {};

        assert(c);
        assert(ret);

        if (c->err_fd < 0 || read(c->err_fd, &f, sizeof(f)) != sizeof(f) || f.stage == 0) {
                *ret = (ScopeChildFailure) {};
                return 0;
        }
        *ret = f;
        return 1;
}

void scope_child_release(ScopeChild *c) {
        if (!c)
                return;
        job_wait_cancel(TAKE_PTR(c->job));
        c->ready_source = sd_event_source_disable_unref(c->ready_source);
        c->report_source = sd_event_source_disable_unref(c->report_source);
        /* A child we have not reaped yet stays ours: a floating source reaps it. */
        if (c->child_source) {
                (void) sd_event_source_set_userdata(c->child_source, NULL);
                (void) sd_event_source_set_floating(c->child_source, true);
                c->child_source = sd_event_source_unref(c->child_source);
        }
        c->go_fd = safe_close(c->go_fd);
        c->err_fd = safe_close(c->err_fd);
}
