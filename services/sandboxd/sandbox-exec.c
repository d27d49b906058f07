/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One command in a sandbox: its scope, its confinement, its output and its result.
 *
 * sandboxd forks the child with its PID namespace for children set to the sandbox's, so the child is
 * a process of the sandbox whose parent is still sandboxd. The child joins the sandbox's other
 * namespaces, confines itself and then waits on a pipe; sandboxd asks systemd for a scope holding it,
 * and only when the scope's start job is done does it let the child exec: nothing of the command ever
 * runs outside its scope. The reply is sent when the command's main process has exited. */
#include "sandbox-exec.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup-join.h"
#include "confine.h"
#include "offload.h"
#include "oom.h"
#include "sandbox.h"
#include "sandbox-pause.h"
#include "sandboxd-bus.h"
#include "sandboxd-manager.h"
#include "scope-child.h"
#include "time-util.h"
#include "unit.h"
#include "warm-scope.h"

#define RELAY_HIGH_WATER (1024 * 1024)
#define RELAY_CHUNK 4096 /* what a pipe that polls writable takes without blocking */

/* The stages of a failure report (ScopeChildFailure.stage). */
typedef enum ExecStage {
        EXEC_STAGE_SETUP = SCOPE_CHILD_STAGE_SETUP,
        EXEC_STAGE_CWD,
        EXEC_STAGE_EXEC,
} ExecStage;

typedef struct Stream {
        Exec *exec;
        int fd;
        sd_event_source *source;
        char *buf;
        size_t len;
        bool truncated;
        int relay_fd;
        sd_event_source *relay_source;
        char *pending;
        size_t pending_len;
        bool relay_sync;     /* a regular file: epoll refuses it, writes never block */
        bool relay_broken;
} Stream;

struct Exec {
        Manager *manager;
        Sandbox *sandbox;
        Exec *next;
        sd_bus_message *request;
        ScopeChild child;    /* its unit, pid, go channel (a socketpair), failure pipe and scope job */
        sd_event_source *deadline_source, *oom_source, *cancel_source;
        int cancel_fd;       /* our copy of the caller's cancel_fd, or -1 */
        Stream out, err;
        uint64_t timeout_usec, memory_max, tasks_max;
        uint64_t start_mono, start_real, deadline;
        WarmScope *warm;  /* a scope made ahead for us, or NULL: we ask for our own */
        struct ExecSpawn *spawn; /* while a worker thread clones the child (exec_spawn_done()) */
        WarmScopePin *pin; /* the warm scope's placeholder, whose hold the child may still touch */
        bool timed_out, replied;
        bool cancelled;   /* the caller hung up its cancel_fd before the command ended */
        OomWatch oom;
        /* for the audit row */
        Caller caller;
        char session_id[SANDBOX_ID_LEN + 1];
        char **argv;
        char *cwd;
        uint64_t call_started_at, call_mono;
        char audit_key[AUDIT_KEY_SIZE]; /* its note in the spool while it runs (audit_begin()), or "" */
};

/* An Exec waiting for the scope systemd makes for it (exec_start()): its own copy of the call's
 * arguments; stdin and the streaming fds stay in the request, which it keeps. */
struct ExecQueued {
        ExecQueued *next;
        Sandbox *sandbox;
        WarmScope *warm;   /* its scope in the making, ours */
        sd_bus_message *request;
        ExecSpec spec;
        Caller caller;
        uint64_t call_mono;
};

static void exec_spawn_abandon(struct ExecSpawn *sp, WarmScopePin *pin, char **argv, char *cwd);

static ExecQueued *exec_queued_free(ExecQueued *q) {
        if (!q)
                return NULL;
        warm_scope_free(q->warm);
        sd_bus_message_unref(q->request);
        strv_free(q->spec.argv);
        strv_free(q->spec.env);
        free((char *) q->spec.cwd);
        free(q);
        return NULL;
}

static void stream_done(Stream *st) {
        st->source = sd_event_source_disable_unref(st->source);
        st->relay_source = sd_event_source_disable_unref(st->relay_source);
        st->fd = safe_close(st->fd);
        st->relay_fd = safe_close(st->relay_fd);
        free(st->buf);
        free(st->pending);
        st->buf = st->pending = NULL;
}

static Exec *exec_free(Exec *e) {
        if (!e)
                return NULL;
        if (e->sandbox) {
                sandbox_touch(e->sandbox); /* IdlePauseSec= counts from here */
                for (Exec **p = &e->sandbox->execs; *p; p = &(*p)->next)
                        if (*p == e) {
                                *p = e->next;
                                e->sandbox->n_execs--;
                                break;
                        }
        }
        if (e->spawn) {
                /* Its child, if it was born, is killed and reaped when the worker is done; until then
                 * the child may still read its argv and cwd, and the placeholder's hold. */
                exec_spawn_abandon(e->spawn, TAKE_PTR(e->pin), TAKE_PTR(e->argv), TAKE_PTR(e->cwd));
                e->spawn = NULL;
        }
        warm_scope_unpin(TAKE_PTR(e->pin));
        /* Ended without its own row (a failure before the command ran, recorded by whoever answered). */
        manager_audit_cancel(e->manager, e->audit_key);
        scope_child_release(&e->child);
        warm_scope_free(e->warm);
        e->deadline_source = sd_event_source_disable_unref(e->deadline_source);
        e->oom_source = sd_event_source_disable_unref(e->oom_source);
        e->cancel_source = sd_event_source_disable_unref(e->cancel_source);
        e->cancel_fd = safe_close(e->cancel_fd);
        stream_done(&e->out);
        stream_done(&e->err);
        oom_watch_done(&e->oom);
        sd_bus_message_unref(e->request);
        strv_free(e->argv);
        free(e->cwd);
        free(e);
        return NULL;
}

/* An Exec call that fails after exec_start() took it: its error answer and its audit row. */
static void exec_call_failed(Manager *m, const char *session_id, const Caller *caller, sd_bus_message *request,
                             uint64_t started_at, uint64_t call_mono, const sd_bus_error *error) {
        manager_audit_failed(m, caller, session_id, "exec", error, NULL, started_at, call_mono);
        (void) sd_bus_reply_method_error(request, error);
}

static void exec_queued_fail_error(Sandbox *s, ExecQueued *q, const sd_bus_error *error) {
        exec_call_failed(s->manager, s->id, &q->caller, q->request, q->spec.started_at, q->call_mono, error);
        exec_queued_free(q);
}

static void exec_queued_fail(Sandbox *s, ExecQueued *q, const char *name, const char *message) {
        exec_queued_fail_error(s, q, &SD_BUS_ERROR_MAKE_CONST(name, message));
}

void exec_detach_all(Sandbox *s) {
        while (s->execs) {
                Exec *e = s->execs;
                s->execs = e->next;
                e->sandbox = NULL;
                e->next = NULL;
        }
        s->n_execs = 0;
        /* Those still waiting for a scope never ran: they fail, with their row. */
        while (s->exec_queue) {
                ExecQueued *q = s->exec_queue;
                s->exec_queue = q->next;
                exec_queued_fail(s, q, SANDBOXD_ERROR_NOT_RUNNING,
                                 "The sandbox went away before the command ran.");
        }
        s->n_exec_queued = 0;
}

/* --- the child --------------------------------------------------------------------------------- */

typedef struct ChildArgs {
        int init_pidfd;
        int ns_flags;
        int stdin_fd, stdout_fd, stderr_fd;
        int go_fd, err_fd;
        const int *cgroup_fds;   /* a warm scope's cgroup v1 "tasks" files, to enter first thing */
        size_t n_cgroup_fds;
        WarmScopeHold *hold;     /* its placeholder, to end once we are in */
        bool born_in_scope;      /* cloned into the scope's cgroup2 cgroup (CLONE_INTO_CGROUP) */
        bool wait_go;            /* no warm scope: wait until sandboxd says its scope is up */
        uid_t uid;
        const char *cwd;
        char **argv;
        char **envp;
} ChildArgs;

#define child_fail(fd, stage, error) scope_child_fail(fd, stage, __func__, error, 127)
#define CHILD_FAIL(step, error) scope_child_fail(a->err_fd, EXEC_STAGE_SETUP, step, error, 127)

static _noreturn_ void exec_child(const ChildArgs *a) {
        int r;

        if (confine_reset_signals() < 0)
                CHILD_FAIL("reset signals", errno);
        /* Born in the scope's cgroup2 cgroup, the one systemd watches for emptiness: the placeholder may
         * start to go now, while we set ourselves up (it is gone before anything of the caller's
         * runs, below). */
        if (a->hold && a->born_in_scope)
                warm_scope_hold_go(a->hold);
        /* Into the warm scope's other hierarchies before anything else, while still root: "0" is the
         * writer itself. */
        for (size_t i = 0; i < a->n_cgroup_fds; i++)
                if (write(a->cgroup_fds[i], "0", 1) != 1)
                        CHILD_FAIL("enter the command's scope", errno);
        if (a->hold && !a->born_in_scope)
                warm_scope_hold_go(a->hold);
        /* The sandbox's mount, IPC, UTS (and network) namespaces; the PID namespace we were born in. */
        if (setns(a->init_pidfd, a->ns_flags) < 0)
                CHILD_FAIL("join the sandbox's namespaces", errno);
        if (setsid() < 0)
                CHILD_FAIL("setsid", errno);
        if (dup2(a->stdin_fd, 0) < 0 || dup2(a->stdout_fd, 1) < 0 || dup2(a->stderr_fd, 2) < 0)
                CHILD_FAIL("set up stdio", errno);
        int keep[] = { a->go_fd, a->err_fd };
        const char *step = NULL;
        r = confine_sandbox_process(keep, ELEMENTSOF(keep), a->uid, &step);
        if (r < 0)
                CHILD_FAIL(step, -r);
        /* As the sandbox's user, so the sandbox's own permissions decide. */
        if (chdir(a->cwd) < 0)
                child_fail(a->err_fd, EXEC_STAGE_CWD, errno);
        /* The placeholder shares sandboxd's memory: had the OOM killer chosen it in this scope, it
         * would have killed sandboxd too. Nothing of the caller's runs before it is gone. */
        if (a->hold)
                warm_scope_hold_wait(a->hold);

        /* Ready: confined. In a warm scope we are in place already and run on; otherwise we wait for
         * sandboxd to let us go once systemd has put us in our scope (EOF means: give up). */
        r = scope_child_send_ready(a->go_fd, -EBADF);
        if (r < 0)
                CHILD_FAIL("report readiness", -r);
        if (a->wait_go && scope_child_wait_go(a->go_fd) < 0)
                _exit(127);
        close(a->go_fd);

        /* Not execvp(): it would take the search path from our environ, which is sandboxd's. */
        confine_execvpe(a->argv[0], a->argv, a->envp);
        child_fail(a->err_fd, EXEC_STAGE_EXEC, errno);
}


static void exec_child_run(void *userdata) {
        exec_child(userdata);
}

/* What an Exec's child needs until it has exec'd, and what exec_spawned() takes over after: a child
 * cloned in a worker thread outlives the call that asked for it. */
typedef struct ExecSpawn {
        OffloadJob job;
        Exec *exec;                  /* NULL once the Exec was freed meanwhile */
        ChildArgs a;
        int init_pidfd;              /* ours (a dup of the sandbox's) when cloned in a worker */
        int host_pidns_fd;           /* the manager's */
        int cgroup_fds[17];          /* a warm scope's cgroup v1 "tasks" files */
        size_t n_cgroup_fds;
        int cgroup2_fd;
        int in, out[2], err[2], go[2], fail[2], relay_out, relay_err;
        char **env;
        pid_t pid;                   /* the result: the child, or -1 and error */
        int error;
        uint64_t spawn_mono;         /* when it was cloned */
        /* its Exec's, once that was freed meanwhile: what the child may still read */
        WarmScopePin *pin;
        char **argv;
        char *cwd;
} ExecSpawn;

static void exec_spawn_run(OffloadJob *job);
static void exec_spawn_done(OffloadJob *job);
static int exec_spawned(Exec *e, ExecSpawn *sp);

static ExecSpawn *exec_spawn_new(void) {
        ExecSpawn *sp = calloc(1, sizeof(ExecSpawn));

        if (!sp)
                return NULL;
        sp->job = (OffloadJob) { .run = exec_spawn_run, .done = exec_spawn_done };
        sp->init_pidfd = sp->host_pidns_fd = sp->cgroup2_fd = -EBADF;
        sp->in = sp->relay_out = sp->relay_err = -EBADF;
        sp->out[0] = sp->out[1] = sp->err[0] = sp->err[1] = -EBADF;
        sp->go[0] = sp->go[1] = sp->fail[0] = sp->fail[1] = -EBADF;
        sp->pid = -1;
        return sp;
}

static ExecSpawn *exec_spawn_free(ExecSpawn *sp) {
        if (!sp)
                return NULL;
        for (size_t i = 0; i < sp->n_cgroup_fds; i++)
                safe_close(sp->cgroup_fds[i]);
        int *fds[] = { &sp->init_pidfd, &sp->cgroup2_fd, &sp->in, &sp->out[0], &sp->out[1], &sp->err[0],
                       &sp->err[1], &sp->go[0], &sp->go[1], &sp->fail[0], &sp->fail[1], &sp->relay_out,
                       &sp->relay_err };
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                *fds[i] = safe_close(*fds[i]);
        strv_free(sp->env);
        strv_free(sp->argv);
        free(sp->cwd);
        free(sp);
        return NULL;
}

static void exec_spawn_freep(ExecSpawn **sp) {
        exec_spawn_free(*sp);
}

static void exec_spawn_abandon(ExecSpawn *sp, WarmScopePin *pin, char **argv, char *cwd) {
        sp->exec = NULL;
        sp->pin = pin;
        sp->argv = argv;
        sp->cwd = cwd;
}

/* No clone3() or no CLONE_INTO_CGROUP (before Linux 5.7): the child writes itself into the cgroup2
 * hierarchy too, the slow way. */
static int exec_spawn_no_clone3(void *userdata, int cgroup2_fd) {
        ChildArgs *a = userdata;
        ExecSpawn *sp = container_of(a, ExecSpawn, a);

        int fd = openat(cgroup2_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        sp->cgroup_fds[sp->n_cgroup_fds++] = fd;
        sp->a.n_cgroup_fds = sp->n_cgroup_fds;
        sp->a.born_in_scope = false;
        return 0;
}

/* Clones the child into the sandbox's PID namespace: in a worker thread, or in the loop's for a child
 * that does not share our memory. */
static void exec_spawn_run(OffloadJob *job) {
        ExecSpawn *sp = container_of(job, ExecSpawn, job);

        sp->spawn_mono = now_usec(CLOCK_MONOTONIC);
        sp->a.cgroup_fds = sp->cgroup_fds;
        sp->a.n_cgroup_fds = sp->n_cgroup_fds;
        sp->a.born_in_scope = sp->cgroup2_fd >= 0;
        sp->pid = scope_child_spawn(&(ScopeChildSpawn) {
                .pidns_fd = sp->a.init_pidfd,
                .host_pidns_fd = sp->host_pidns_fd,
                .cgroup2_fd = sp->cgroup2_fd,
                .no_clone3 = exec_spawn_no_clone3,
                .child = exec_child_run,
                .arg = &sp->a,
        });
        sp->error = errno;
}

/* --- output ------------------------------------------------------------------------------------- */

static void exec_maybe_finish(Exec *e);

static void stream_capture(Stream *st, const char *data, size_t n) {
        uint64_t cap = st->exec->manager->config.output_max;

        if (st->len < cap) {
                size_t take = MIN(n, (size_t) (cap - st->len));
                char *nb = realloc(st->buf, st->len + take);
                if (nb) {
                        st->buf = nb;
                        memcpy(st->buf + st->len, data, take);
                        st->len += take;
                }
                if (take < n)
                        st->truncated = true;
        } else if (n > 0)
                st->truncated = true;
}

static void relay_update(Stream *st) {
        if (st->relay_source)
                (void) sd_event_source_set_enabled(st->relay_source, st->pending_len > 0 ? SD_EVENT_ON : SD_EVENT_OFF);
        /* Backpressure: stop reading the command's output while the caller does not keep up. */
        if (st->source && !st->exec->child.exited)
                (void) sd_event_source_set_enabled(st->source,
                                                   st->pending_len >= RELAY_HIGH_WATER ? SD_EVENT_OFF : SD_EVENT_ON);
}

static void relay_write_out(Stream *st, bool all) {
        while (st->pending_len > 0 && !st->relay_broken) {
                size_t chunk = all ? st->pending_len : MIN(st->pending_len, (size_t) RELAY_CHUNK);
                ssize_t k = write(st->relay_fd, st->pending, chunk);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        st->relay_broken = true; /* the caller went away; keep capturing for the record */
                        break;
                }
                memmove(st->pending, st->pending + k, st->pending_len - k);
                st->pending_len -= k;
                if (!all)
                        break;
        }
        if (st->relay_broken)
                st->pending_len = 0;
        relay_update(st);
}

static void stream_relay(Stream *st, const char *data, size_t n) {
        if (st->relay_fd < 0 || st->relay_broken)
                return;
        char *np = realloc(st->pending, st->pending_len + n);
        if (!np) {
                st->relay_broken = true;
                return;
        }
        st->pending = np;
        memcpy(st->pending + st->pending_len, data, n);
        st->pending_len += n;
        if (st->relay_sync)
                relay_write_out(st, true);
        else
                relay_update(st);
}

/* Reads per wake-up: a writer as fast as we are (yes, cat /dev/zero) never lets the pipe run dry, and
 * the loop must not wait for that while every other caller waits for us. The pipe stays readable, so
 * the event loop comes back to it after the others had their turn. At the command's exit this also
 * bounds the last read to what the pipe held then (64 KiB): what processes left behind write later
 * is not waited for. */
#define STREAM_READS_MAX 16

static int stream_read_some(Stream *st) {
        char tmp[65536];

        for (unsigned i = 0; i < STREAM_READS_MAX; i++) {
                ssize_t n = read(st->fd, tmp, sizeof(tmp));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? 0 : -errno;
                }
                if (n == 0)
                        return 1; /* EOF */
                stream_capture(st, tmp, n);
                stream_relay(st, tmp, n);
                if (!st->exec->child.exited && st->pending_len >= RELAY_HIGH_WATER)
                        return 0;
        }
        return 0;
}

static int on_stream_readable(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Stream *st = userdata;
        int r = stream_read_some(st);

        if (r != 0) {
                st->source = sd_event_source_disable_unref(st->source);
                st->fd = safe_close(st->fd);
        }
        return 0;
}

static int on_relay_writable(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Stream *st = userdata;

        if (revents & (EPOLLERR | EPOLLHUP))
                st->relay_broken = true;
        relay_write_out(st, false);
        if (st->exec->child.exited)
                exec_maybe_finish(st->exec);
        return 0;
}

static int stream_init(Exec *e, Stream *st, int read_fd, int relay_fd) {
        int r;

        st->exec = e;
        st->fd = read_fd;
        st->relay_fd = relay_fd;
        r = sd_event_add_io(e->manager->event, &st->source, read_fd, EPOLLIN, on_stream_readable, st);
        if (r < 0)
                return r;
        if (relay_fd >= 0) {
                r = sd_event_add_io(e->manager->event, &st->relay_source, relay_fd, EPOLLOUT, on_relay_writable, st);
                if (r == -EPERM) {
                        st->relay_sync = true; /* regular files cannot be polled, and never block */
                        return 0;
                }
                if (r < 0)
                        return r;
                (void) sd_event_source_set_enabled(st->relay_source, SD_EVENT_OFF);
        }
        return 0;
}

/* --- completion ---------------------------------------------------------------------------------- */

static int append_info(sd_bus_message *reply, Exec *e, int sig, bool oom) {
        uint64_t duration = now_usec(CLOCK_MONOTONIC) - e->start_mono;

        return sd_bus_message_append(reply, "a{sv}", 8,
                                     "duration_usec", "t", duration,
                                     "stdout_truncated", "b", (int) e->out.truncated,
                                     "stderr_truncated", "b", (int) e->err.truncated,
                                     "timed_out", "b", (int) e->timed_out,
                                     "cancelled", "b", (int) e->cancelled,
                                     "oom_killed", "b", (int) oom,
                                     "signal", "i", sig,
                                     "unit", "s", e->child.unit);
}

static char *exec_detail(Exec *e, int sig, bool oom, const char *error_name, const char *error_message) {
        json_object *o = json_object_new_object(), *argv = json_object_new_array();
        char *s = NULL;

        if (!o || !argv) {
                json_object_put(o);
                json_object_put(argv);
                return NULL;
        }
        for (char **a = e->argv; a && *a; a++)
                json_object_array_add(argv, json_object_new_string(*a));
        json_object_object_add(o, "argv", argv);
        json_object_object_add(o, "cwd", json_object_new_string(e->cwd ?: SANDBOXD_SANDBOX_HOME));
        json_object_object_add(o, "unit", json_object_new_string(e->child.unit));
        json_object_object_add(o, "timeout_seconds", json_object_new_uint64(e->timeout_usec / USEC_PER_SEC));
        json_object_object_add(o, "memory_max", json_object_new_uint64(e->memory_max));
        json_object_object_add(o, "tasks_max", json_object_new_uint64(e->tasks_max));
        json_object_object_add(o, "signal", json_object_new_int(sig));
        json_object_object_add(o, "stdout_truncated", json_object_new_boolean(e->out.truncated));
        json_object_object_add(o, "stderr_truncated", json_object_new_boolean(e->err.truncated));
        json_object_object_add(o, "streamed", json_object_new_boolean(e->out.relay_fd >= 0 || e->err.relay_fd >= 0));
        if (error_name) {
                json_object_object_add(o, "error", json_object_new_string(error_name));
                json_object_object_add(o, "message", json_object_new_string(strempty(error_message)));
        }
        s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
        return s;
}

/* The row goes to the spool before the answer goes to the caller. */
static void exec_audit(Exec *e, const char *event, int code, int sig, bool oom, const char *error_name,
                       const char *error_message) {
        _cleanup_free_ char *detail = exec_detail(e, sig, oom, error_name, error_message);
        AuditRow row = {
                .session_id = e->session_id,
                .operation = "exec",
                .event = event,
                .detail = detail,
                .exit_code = code,
                .out = e->out.buf,
                .out_size = e->out.len,
                .err = e->err.buf,
                .err_size = e->err.len,
                .started_at = e->call_started_at,
                .duration_usec = now_usec(CLOCK_MONOTONIC) - e->call_mono,
        };
        manager_audit_finish(e->manager, &e->caller, &row, e->audit_key);
}

static void exec_reply_error(Exec *e, const char *name, const char *what, int error) {
        char message[512];

        if (e->replied || !e->request)
                return;
        e->replied = true;
        snprintf(message, sizeof(message), "%s: %s", what, strerror(error));
        exec_audit(e, "failed", -1, 0, false, name, message);
        (void) sd_bus_reply_method_errorf(e->request, name, "%s", message);
}

static void exec_finish(Exec *e) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        ScopeChildFailure f;
        int code = 0, sig = 0, r;
        bool oom;

        /* A failure report from the child, if it wrote one (before exiting, so it is there now). */
        (void) scope_child_read_failure(&e->child, &f);

        if (e->child.status.si_code == CLD_EXITED)
                code = e->child.status.si_status;
        else {
                sig = e->child.status.si_status;
                code = 128 + sig;
        }
        oom = e->child.started && oom_watch_check(&e->oom, sig == SIGKILL);
        if (sig != 0 && e->child.started && !e->timed_out && !e->cancelled && e->timeout_usec > 0 &&
            now_usec(CLOCK_MONOTONIC) + 50 * USEC_PER_MSEC >= e->deadline)
                e->timed_out = true;

        if (f.stage == EXEC_STAGE_CWD) {
                exec_reply_error(e, SD_BUS_ERROR_INVALID_ARGS, "Cannot change to the working directory",
                                 f.error);
                goto done;
        }
        if (f.stage == EXEC_STAGE_SETUP) {
                char what[256];
                snprintf(what, sizeof(what), "Could not set up the command (%s)", f.step ?: "setup");
                exec_reply_error(e, SD_BUS_ERROR_FAILED, what, f.error);
                goto done;
        }
        if (f.stage == EXEC_STAGE_EXEC) {
                char msg[512];
                int n = snprintf(msg, sizeof(msg), "sandboxd: cannot execute the command: %s\n",
                                 strerror(f.error));
                stream_capture(&e->err, msg, n);
                stream_relay(&e->err, msg, n);
        }

        if (e->replied || !e->request)
                goto done;
        exec_audit(e,
                   e->cancelled ? "cancelled"
                   : e->timed_out ? "timed_out"
                   : oom ? "oom_killed"
                   : f.stage == EXEC_STAGE_EXEC ? "failed"
                                                : "finished",
                   code, sig, oom, NULL, NULL);
        r = sd_bus_message_new_method_return(e->request, &reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "i", code);
        if (r >= 0)
                r = sd_bus_message_append_array(reply, 'y', e->out.relay_fd >= 0 ? "" : e->out.buf,
                                                e->out.relay_fd >= 0 ? 0 : e->out.len);
        if (r >= 0)
                r = sd_bus_message_append_array(reply, 'y', e->err.relay_fd >= 0 ? "" : e->err.buf,
                                                e->err.relay_fd >= 0 ? 0 : e->err.len);
        if (r >= 0)
                r = append_info(reply, e, sig, oom);
        if (r >= 0)
                r = sd_bus_send(NULL, reply, NULL);
        if (r < 0)
                (void) sd_bus_reply_method_errno(e->request, r, NULL);
        e->replied = true;
done:
        /* The next Exec's scope, once this one is answered (not while its command runs, which it
         * would compete with for the CPU): a command with the type's limits then waits for no
         * systemd job. One more than there are Execs running: under load each would otherwise find
         * none ready and take the slow path, and a client running commands back to back sends the
         * next right after this reply, when the scope asked for now is not made yet: it takes the
         * spare. Not after a call that failed: that leaves no unit behind. */
        if (e->sandbox && e->child.started)
                (void) warm_scope_prepare_default(e->sandbox,
                                                  e->sandbox->n_execs + e->sandbox->n_exec_queued + 1);
        exec_free(e);
}

static void exec_maybe_finish(Exec *e) {
        if (!e->child.exited)
                return;
        if (!e->cancelled && ((e->out.relay_fd >= 0 && e->out.pending_len > 0 && !e->out.relay_broken) ||
                              (e->err.relay_fd >= 0 && e->err.pending_len > 0 && !e->err.relay_broken)))
                return; /* the caller still has output coming (unless it cancelled: it reads no more) */
        exec_finish(e);
}

/* The child exited: what the command wrote is in the pipes now; processes it left behind may write
 * more, but the answer does not wait for them. */
static void exec_child_exited(ScopeChild *c) {
        Exec *e = c->userdata;

        warm_scope_unpin(TAKE_PTR(e->pin));
        for (Stream *st = &e->out; st; st = st == &e->out ? &e->err : NULL)
                if (st->fd >= 0) {
                        (void) stream_read_some(st);
                        st->source = sd_event_source_disable_unref(st->source);
                        st->fd = safe_close(st->fd);
                        if (st->relay_sync)
                                relay_write_out(st, true);
                        else
                                relay_update(st);
                }
}

/* The child exited and, had it died during its setup (say, a bad cwd), its scope is gone. */
static void exec_child_done(ScopeChild *c) {
        exec_maybe_finish(c->userdata);
}

static int on_oom_event(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Exec *e = userdata;
        oom_watch_poll(&e->oom);
        return 0;
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata);

/* The scope is being stopped (SIGTERM, SIGKILL after 1 s): on_deadline() makes sure, a little later. */
static void exec_make_sure_later(Exec *e, uint64_t now) {
        if (!e->deadline_source) {
                (void) sd_event_add_time(e->manager->event, &e->deadline_source, CLOCK_MONOTONIC,
                                         now + 3 * USEC_PER_SEC, 0, on_deadline, e);
                return;
        }
        (void) sd_event_source_set_time(e->deadline_source, now + 3 * USEC_PER_SEC);
        (void) sd_event_source_set_enabled(e->deadline_source, SD_EVENT_ONESHOT);
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        Exec *e = userdata;

        if (!e->timed_out && !e->cancelled) {
                /* A scope of its own has RuntimeMaxUSec= and systemd ends it right now; a warm one
                 * only has an upper bound, so we stop it (SIGTERM, SIGKILL after 1 s, as systemd
                 * would). Either way: make sure, a little later. */
                e->timed_out = true;
                if (e->warm)
                        (void) unit_stop_nowait(e->manager, e->child.unit);
                exec_make_sure_later(e, usec);
                return 0;
        }
        (void) kill(e->child.pid, SIGKILL);
        (void) unit_stop_nowait(e->manager, e->child.unit);
        return 0;
}

void exec_hold_deadlines(Sandbox *s, bool hold, uint64_t paused_usec) {
        for (Exec *e = s->execs; e; e = e->next) {
                /* Not the "make sure" timer of one being stopped already: that one runs on. */
                if (!e->deadline_source || e->timed_out || e->cancelled || e->timeout_usec == 0)
                        continue;
                if (hold) {
                        (void) sd_event_source_set_enabled(e->deadline_source, SD_EVENT_OFF);
                        continue;
                }
                e->deadline += paused_usec;
                (void) sd_event_source_set_time(e->deadline_source, e->deadline);
                (void) sd_event_source_set_enabled(e->deadline_source, SD_EVENT_ONESHOT);
        }
}

/* The caller hung up its cancel_fd (closed the other end, or died): nobody waits for the answer. The
 * command ends as its timeout ends it, and the answer, with what it wrote so far, goes out as usual. */
static int on_cancel(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Exec *e = userdata;

        e->cancel_source = sd_event_source_disable_unref(e->cancel_source);
        e->cancel_fd = safe_close(e->cancel_fd);
        if (e->child.exited || e->timed_out)
                return 0; /* ending anyway */
        e->cancelled = true;
        if (!e->child.started) {
                /* Nothing of the caller's ran yet (in a warm scope: only just began). The child dies,
                 * and its exit goes the way of a failed setup: the scope is stopped, then the answer. */
                scope_child_kill(&e->child);
                return 0;
        }
        (void) unit_stop_nowait(e->manager, e->child.unit);
        exec_make_sure_later(e, now_usec(CLOCK_MONOTONIC));
        return 0;
}

static void exec_watch_oom(Exec *e) {
        Manager *m = e->manager;
        char slice_path[512], unit_path[768];
        int r;

        if (!e->sandbox)
                return;
        snprintf(slice_path, sizeof(slice_path), "sandbox.slice/%s", e->sandbox->slice);
        snprintf(unit_path, sizeof(unit_path), "%s/%s", slice_path, e->child.unit);
        r = oom_watch_start(&e->oom, m->memory_layout, m->memory_prefix, slice_path, unit_path);
        if (r >= 0 && e->oom.event_fd >= 0) {
                r = sd_event_add_io(m->event, &e->oom_source, e->oom.event_fd, EPOLLIN, on_oom_event, e);
                if (r >= 0)
                        (void) sd_event_source_set_priority(e->oom_source, SD_EVENT_PRIORITY_IMPORTANT);
        }
}

/* Its scope is up, or it is in a warm scope: the command may run once it is confined, whichever comes
 * last (scope_child_may_go()). */
static void exec_child_go(ScopeChild *c) {
        Exec *e = c->userdata;
        Manager *m = e->manager;

        if (c->self_entered) {
                /* It is in the warm scope and runs the command already: the placeholder may go, and
                 * the time counts from the fork. */
                warm_scope_release(e->warm);
                (void) scope_child_go(c);
                e->deadline = e->start_mono + e->timeout_usec;
                if (e->timeout_usec > 0)
                        (void) sd_event_add_time(m->event, &e->deadline_source, CLOCK_MONOTONIC, e->deadline, 0,
                                                 on_deadline, e);
                return;
        }
        e->start_mono = now_usec(CLOCK_MONOTONIC);
        e->deadline = e->start_mono + e->timeout_usec;
        if (e->timeout_usec > 0)
                (void) sd_event_add_time(m->event, &e->deadline_source, CLOCK_MONOTONIC, e->deadline, 0,
                                         on_deadline, e);
        if (scope_child_go(c) < 0)
                (void) kill(c->pid, SIGKILL);
}

static void exec_child_scope_up(ScopeChild *c) {
        exec_watch_oom(c->userdata);
}

static void exec_child_scope_failed(ScopeChild *c, int error, const sd_bus_error *bus_error) {
        exec_reply_error(c->userdata, SD_BUS_ERROR_FAILED, "Could not start the command's scope", error);
}

static bool exec_child_ready(ScopeChild *c, bool ok, int fd) {
        Exec *e = c->userdata;

        safe_close(fd);
        /* "ready" comes after the child let its placeholder go (or it gave up): it touches the hold no
         * more. */
        warm_scope_unpin(TAKE_PTR(e->pin));
        return ok;
}

static const ScopeChildOps exec_child_ops = {
        .ready = exec_child_ready,
        .scope_up = exec_child_scope_up,
        .go = exec_child_go,
        .scope_failed = exec_child_scope_failed,
        .exited = exec_child_exited,
        .done = exec_child_done,
};

char **exec_build_env(Sandbox *s, char **extra) {
        static const char *const base[] = {
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME=" SANDBOXD_SANDBOX_HOME,
                "USER=" SANDBOXD_SANDBOX_USER,
                "LOGNAME=" SANDBOXD_SANDBOX_USER,
                "SHELL=/bin/bash",
                "LANG=C.UTF-8",
                "TERM=dumb",
        };
        size_t n_extra = 0, n = 0;
        for (char **i = extra; i && *i; i++)
                n_extra++;
        char **env = calloc(ELEMENTSOF(base) + n_extra + 1, sizeof(char *));
        if (!env)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(base); i++) {
                /* the caller's value wins */
                size_t kl = strchr(base[i], '=') - base[i] + 1;
                bool overridden = false;
                for (char **x = extra; x && *x; x++)
                        if (strncmp(*x, base[i], kl) == 0)
                                overridden = true;
                if (!overridden && !(env[n++] = strdup(base[i])))
                        goto fail;
        }
        for (char **x = extra; x && *x; x++)
                if (!(env[n++] = strdup(*x)))
                        goto fail;
        return env;
fail:
        strv_free(env);
        return NULL;
}

static int exec_start_at(Sandbox *s, const ExecSpec *spec, sd_bus_message *request, uint64_t call_mono,
                         WarmScope *made);

/* No warm scope ready: rather than fork() a child that waits for its scope (copying our page tables,
 * and copy-on-write faults on both sides until it execs: most of sandboxd's CPU time per Exec under
 * load), the call waits for a warm scope already on its way (one made after an earlier Exec's reply),
 * or else for a scope made for it, with its own limits (RuntimeMaxUSec= its timeout, exactly as a
 * scope of its own), and its child is then born in it like in a warm one. It waits for systemd's job
 * as long as it would have anyway. */
static void exec_scope_made(void *userdata, bool ok);

static int exec_enqueue(Sandbox *s, const ExecSpec *spec, sd_bus_message *request) {
        ExecQueued *q = calloc(1, sizeof(ExecQueued));
        int r;

        if (!q)
                return -ENOMEM;
        q->sandbox = s;
        q->spec = *spec;
        q->spec.argv = strv_copy(spec->argv);
        q->spec.env = spec->env ? strv_copy(spec->env) : NULL;
        q->spec.cwd = spec->cwd ? strdup(spec->cwd) : NULL;
        if (!q->spec.argv || (spec->env && !q->spec.env) || (spec->cwd && !q->spec.cwd)) {
                exec_queued_free(q);
                return -ENOMEM;
        }
        if (spec->caller)
                q->caller = *spec->caller;
        else
                caller_system(&q->caller);
        q->spec.caller = &q->caller;
        q->spec.started_at = spec->started_at ?: now_usec(CLOCK_REALTIME);
        q->call_mono = now_usec(CLOCK_MONOTONIC);
        /* One already on its way is sooner than one made now, and spares systemd a scope. */
        r = warm_scope_adopt(s, spec->tasks_max, spec->memory_max, exec_scope_made, q, &q->warm) ? 0 :
                warm_scope_prepare_for(s, spec->tasks_max, spec->memory_max, spec->timeout_usec,
                                       exec_scope_made, q, &q->warm);
        if (r < 0) {
                exec_queued_free(q);
                return r;
        }
        q->request = sd_bus_message_ref(request);
        ExecQueued **tail = &s->exec_queue;
        while (*tail)
                tail = &(*tail)->next;
        *tail = q;
        s->n_exec_queued++;
        return 0;
}

/* The scope made for a waiting Exec is up (ok), or could not be made: the call goes on. */
static void exec_scope_made(void *userdata, bool ok) {
        ExecQueued *q = userdata;
        Sandbox *s = q->sandbox;
        WarmScope *w = TAKE_PTR(q->warm);
        int r;

        for (ExecQueued **p = &s->exec_queue; *p; p = &(*p)->next)
                if (*p == q) {
                        *p = q->next;
                        s->n_exec_queued--;
                        break;
                }
        if (!ok)
                /* The scope could not be made: the call goes on the way it always could. */
                w = warm_scope_free(w);
        if (s->state != SANDBOX_RUNNING) {
                warm_scope_free(w);
                exec_queued_fail(s, q, SANDBOXD_ERROR_NOT_RUNNING, "The sandbox is no longer running.");
                return;
        }
        r = exec_start_at(s, &q->spec, q->request, q->call_mono, w);
        if (r < 0) {
                /* what the Exec call answers when exec_start() fails */
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                (void) sd_bus_error_set_errnof(&error, r, "Could not start the command: %s", strerror(-r));
                exec_queued_fail_error(s, q, &error);
                return;
        }
        exec_queued_free(q);
}

int exec_start(Sandbox *s, const ExecSpec *spec, sd_bus_message *request) {
        /* Alone, a child that confines itself while systemd makes its scope answers soonest; with other
         * Execs of the sandbox running, the fork() costs more than that overlap saves. And a warm
         * scope on its way (made after the previous Exec's reply, which a client running commands
         * back to back answers at once with this call) comes sooner than a scope of our own, and
         * spares systemd making two. */
        if (!warm_scope_has_ready(s, spec->tasks_max, spec->memory_max) &&
            (s->n_execs > 0 || warm_scope_has_pending(s, spec->tasks_max, spec->memory_max)) &&
            exec_enqueue(s, spec, request) >= 0)
                return 0;
        return exec_start_at(s, spec, request, now_usec(CLOCK_MONOTONIC), NULL);
}

/* made: a scope made for this call, which it takes over (freed on failure too); NULL: a warm one if
 * the sandbox has one ready, else a scope of its own that the child waits for. */
static int exec_start_at(Sandbox *s, const ExecSpec *spec, sd_bus_message *request, uint64_t call_mono,
                         WarmScope *made) {
        _cleanup_(warm_scope_freep) WarmScope *made_scope = made;
        _cleanup_(exec_spawn_freep) ExecSpawn *spawn = exec_spawn_new();
        Manager *m = s->manager;
        Exec *e;
        int r;

        if (!spawn)
                return -ENOMEM;
        if (pipe2(spawn->out, O_CLOEXEC) < 0 || pipe2(spawn->err, O_CLOEXEC) < 0 ||
            socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, spawn->go) < 0 || pipe2(spawn->fail, O_CLOEXEC) < 0)
                return -errno;
        if (spec->stdin_size > 0) {
                spawn->in = memfd_create("sandbox-stdin", MFD_CLOEXEC);
                if (spawn->in < 0)
                        return -errno;
                if (write(spawn->in, spec->stdin_data, spec->stdin_size) != (ssize_t) spec->stdin_size)
                        return -EIO;
                if (lseek(spawn->in, 0, SEEK_SET) < 0)
                        return -errno;
        } else {
                spawn->in = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (spawn->in < 0)
                        return -errno;
        }
        if (spec->stdout_fd >= 0 && (spawn->relay_out = fcntl(spec->stdout_fd, F_DUPFD_CLOEXEC, 3)) < 0)
                return -errno;
        if (spec->stderr_fd >= 0 && (spawn->relay_err = fcntl(spec->stderr_fd, F_DUPFD_CLOEXEC, 3)) < 0)
                return -errno;
        spawn->env = exec_build_env(s, spec->env);
        if (!spawn->env)
                return -ENOMEM;

        e = calloc(1, sizeof(Exec));
        if (!e)
                return -ENOMEM;
        e->manager = m;
        scope_child_setup(&e->child, m, &exec_child_ops, e);
        e->cancel_fd = -EBADF;
        e->out.fd = e->out.relay_fd = e->err.fd = e->err.relay_fd = -EBADF;
        e->oom = (OomWatch) OOM_WATCH_INIT;
        e->timeout_usec = spec->timeout_usec;
        e->memory_max = spec->memory_max;
        e->tasks_max = spec->tasks_max;
        e->start_mono = now_usec(CLOCK_MONOTONIC);
        e->start_real = now_usec(CLOCK_REALTIME);
        e->call_mono = call_mono;
        e->call_started_at = spec->started_at ?: e->start_real;
        if (spec->caller)
                e->caller = *spec->caller;
        else
                caller_system(&e->caller);
        snprintf(e->session_id, sizeof(e->session_id), "%s", s->id);
        e->argv = strv_copy(spec->argv);
        e->cwd = spec->cwd ? strdup(spec->cwd) : NULL;
        if (!e->argv || (spec->cwd && !e->cwd)) {
                strv_free(e->argv);
                free(e->cwd);
                free(e);
                return -ENOMEM;
        }
        if (spec->cancel_fd >= 0 && (e->cancel_fd = fcntl(spec->cancel_fd, F_DUPFD_CLOEXEC, 3)) < 0) {
                r = -errno;
                exec_free(e);
                return r;
        }
        e->warm = TAKE_PTR(made_scope) ?: warm_scope_take(s, e->tasks_max, e->memory_max);
        if (e->warm) {
                snprintf(e->child.unit, sizeof(e->child.unit), "%s", warm_scope_unit(e->warm));
                e->child.scope_up = true;
        } else
                snprintf(e->child.unit, sizeof(e->child.unit), "sandbox-%s-exec-%" PRIu64 ".scope", s->id,
                         sandbox_next_unit_number(s));

        /* With a warm scope the child enters it itself, before anything else: it is born in the
         * scope's cgroup2 cgroup, and writes itself into the cgroup v1 hierarchies' ones. */
        int cgroup_fds[17];
        size_t n_cgroup_fds = 0;
        _cleanup_close_ int cgroup2_fd = -EBADF;
        if (e->warm) {
                r = warm_scope_open_cgroups(e->warm, cgroup_fds, ELEMENTSOF(cgroup_fds) - 1, &n_cgroup_fds,
                                            &cgroup2_fd);
                if (r < 0) {
                        exec_free(e);
                        return r;
                }
                e->child.self_entered = true;
        }

        ExecSpawn *sp = TAKE_PTR(spawn);
        sp->exec = e;
        memcpy(sp->cgroup_fds, cgroup_fds, n_cgroup_fds * sizeof(int));
        sp->n_cgroup_fds = n_cgroup_fds;
        sp->cgroup2_fd = TAKE_FD(cgroup2_fd);
        sp->a = (ChildArgs) {
                .ns_flags = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS |
                            (s->network != SANDBOX_NETWORK_HOST ? CLONE_NEWNET : 0),
                .stdin_fd = sp->in,
                .stdout_fd = sp->out[1],
                .stderr_fd = sp->err[1],
                .go_fd = sp->go[0],
                .err_fd = sp->fail[1],
                .hold = e->warm ? warm_scope_hold(e->warm, &e->pin) : NULL,
                .wait_go = !e->warm,
                .uid = s->uid,
                .cwd = e->cwd ?: SANDBOXD_SANDBOX_HOME,
                .argv = e->argv,
                .envp = sp->env,
        };
        sp->host_pidns_fd = m->host_pidns_fd;
        /* Noted before the command can run: should sandboxd die while it does, the note becomes its
         * row ("interrupted") at the next start. */
        _cleanup_free_ char *detail = exec_detail(e, 0, false, NULL, NULL);
        manager_audit_begin(m, &e->caller,
                            &(AuditRow) { .session_id = e->session_id, .operation = "exec", .detail = detail,
                                          .started_at = e->call_started_at },
                            e->audit_key);
        e->sandbox = s;
        e->next = s->execs;
        s->execs = e;
        s->n_execs++;
        e->request = sd_bus_message_ref(request);

        /* A child born in its warm scope shares our memory until it execs, and its clone3() returns
         * only then: a worker thread waits for that, not the event loop. The pidfd is ours, since the
         * sandbox may go meanwhile. */
        if (sp->cgroup2_fd >= 0 && m->offload) {
                sp->a.init_pidfd = sp->init_pidfd = fcntl(s->init_pidfd, F_DUPFD_CLOEXEC, 3);
                if (sp->init_pidfd >= 0) {
                        e->spawn = sp;
                        offload_submit(m->offload, &sp->job);
                        return 0;
                }
        }
        sp->a.init_pidfd = s->init_pidfd;
        exec_spawn_run(&sp->job);
        r = exec_spawned(e, sp);
        exec_spawn_free(sp);
        return r;
}

/* Back in the event loop with the worker's child (or its errno): the rest of exec_start_at(). */
static void exec_spawn_done(OffloadJob *job) {
        ExecSpawn *sp = container_of(job, ExecSpawn, job);
        Exec *e = sp->exec;

        if (!e) {
                /* Freed meanwhile: nobody waits for this child, which has run nothing of the caller's
                 * (a warm-scope child still had to say 'r'... and is past it: it dies either way). */
                if (sp->pid > 0) {
                        (void) kill(sp->pid, SIGKILL);
                        (void) waitpid(sp->pid, NULL, 0);
                }
                warm_scope_unpin(sp->pin);
                exec_spawn_free(sp);
                return;
        }
        e->spawn = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *request = sd_bus_message_ref(e->request);
        Caller caller = e->caller;
        char session_id[SANDBOX_ID_LEN + 1];
        uint64_t started_at = e->call_started_at, call_mono = e->call_mono;
        Manager *m = e->manager;
        snprintf(session_id, sizeof(session_id), "%s", e->session_id);

        int r = exec_spawned(e, sp);
        exec_spawn_free(sp);
        if (r < 0) {
                /* What the Exec call would have answered had exec_start() failed (e is gone). */
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                (void) sd_bus_error_set_errnof(&error, r, "Could not start the command: %s", strerror(-r));
                exec_call_failed(m, session_id, &caller, request, started_at, call_mono, &error);
        }
}

/* The child is born (or not): its pid, its pipes and sources. On failure e is freed (or, with a child
 * to reap, left to its child source, replied) and the caller answers the call. */
static int exec_spawned(Exec *e, ExecSpawn *sp) {
        Manager *m = e->manager;
        pid_t pid = sp->pid;
        int r;

        if (pid < 0) {
                r = -sp->error;
                e->replied = true;
                exec_free(e);
                return r;
        }
        if (e->warm)
                /* The time counts from the fork. */
                e->start_mono = sp->spawn_mono;

        (void) fcntl(sp->out[0], F_SETFL, O_NONBLOCK);
        (void) fcntl(sp->err[0], F_SETFL, O_NONBLOCK);

        r = scope_child_attach(&e->child, pid, TAKE_FD(sp->go[1]), TAKE_FD(sp->fail[0]));
        if (r < 0)
                goto fail_kill;
        r = stream_init(e, &e->out, TAKE_FD(sp->out[0]), TAKE_FD(sp->relay_out));
        if (r < 0)
                goto fail_kill;
        r = stream_init(e, &e->err, TAKE_FD(sp->err[0]), TAKE_FD(sp->relay_err));
        if (r < 0)
                goto fail_kill;
        if (e->cancel_fd >= 0) {
                /* no events asked for: only its hang-up (or error) wakes us, not data written to it */
                r = sd_event_add_io(m->event, &e->cancel_source, e->cancel_fd, 0, on_cancel, e);
                if (r < 0)
                        goto fail_kill;
        }
        if (e->warm)
                /* The child is in the scope, or fails before it runs anything. */
                exec_watch_oom(e);
        else {
                /* systemd sets up the scope while the child confines itself. */
                char desc[SCOPE_DESCRIPTION_MAX];
                ScopeProps props = scope_props_sandbox(desc, e->sandbox->id, "command", e->sandbox->slice,
                                                       pid, e->tasks_max, e->memory_max, e->timeout_usec);
                r = scope_child_start_scope(&e->child, &props, NULL, NULL);
                if (r < 0)
                        goto fail_kill;
        }
        return 0;

fail_kill:
        /* The child has not run anything of the caller's yet; it dies and we answer now. */
        (void) kill(pid, SIGKILL);
        e->replied = true;
        if (!e->child.child_source) {
                (void) waitpid(pid, NULL, 0);
                exec_free(e);
        } else
                e->request = sd_bus_message_unref(e->request);
        return r;
}
