/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A background process of a sandbox (StartProcess).
 *
 * It runs on the engine of every confined child (scope-child.h): sandboxd forks the child into the
 * sandbox's PID namespace, the child joins the other namespaces and confines itself exactly as an
 * Exec's does, then waits until systemd has put it in its own scope (sandbox-<id>-process-<n>.scope,
 * with the type's TasksMax= and MemoryMax=, or the caller's lower ones), and only then execs. The call
 * is answered when the exec happened (the failure pipe, close-on-exec, reached EOF): a program that is
 * not there is the call's error, not a process that exits 127.
 *
 * From then on it lives until its main process exits, is signalled (SignalProcess), reaches its runtime
 * limit (timeout_seconds: our timer stops its scope; RuntimeMaxUSec= a little later is the backstop), or
 * its sandbox goes (the slice's stop ends it). When its main process exits, its scope is stopped too, so
 * nothing it started outlives it. Its output goes into a ring per stream (the type's ProcessOutputMax=),
 * its stdin is a pipe that WriteProcessStdin feeds without blocking the loop.
 *
 * An OOM kill in its scope is told apart as an Exec's is (oom.c): oom_killed in WaitProcess's info, and
 * its exit row's event "oom_killed".
 *
 * Audit rows: "process.start" when it runs (or failed to), "process.signal" per signal sent, and
 * "process.exit" at its end with the last output of each stream. The exit row is noted in the spool
 * while it runs (manager_audit_begin()): should sandboxd stop meanwhile, the next one records it as
 * interrupted, and stops its scope at start-up (unit_reconcile()): a process is never re-adopted, and
 * never outlives the sandboxd that started it by more than that restart. */
#include "sandbox-process.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
#include "log.h"
#include "sandbox-exec.h"
#include "sandbox.h"
#include "sandboxd-bus.h"
#include "sandboxd-manager.h"
#include "time-util.h"
#include "unit.h"

/* The stages of a failure report (ScopeChildFailure.stage). */
typedef enum ProcessStage {
        PROCESS_STAGE_SETUP = SCOPE_CHILD_STAGE_SETUP,
        PROCESS_STAGE_CWD,
        PROCESS_STAGE_EXEC,
} ProcessStage;

/* After its runtime limit, its scope is stopped (SIGTERM, SIGKILL after 1 s); this much later its main
 * process gets SIGKILL from us, and systemd's RuntimeMaxUSec= is this much after the limit too. */
#define PROCESS_DEADLINE_GRACE_USEC (3 * USEC_PER_SEC)

static const char *const process_state_table[_PROCESS_STATE_MAX] = {
        [PROCESS_STARTING] = "starting",
        [PROCESS_RUNNING] = "running",
        [PROCESS_EXITED] = "exited",
        [PROCESS_KILLED] = "killed",
        [PROCESS_TIMED_OUT] = "timed-out",
};

DEFINE_STRING_TABLE(process_state, ProcessState, _PROCESS_STATE_MAX);

static const char *const process_stream_table[_PROCESS_STREAM_MAX] = {
        [PROCESS_STDOUT] = "stdout",
        [PROCESS_STDERR] = "stderr",
};

DEFINE_STRING_TABLE(process_stream, ProcessStream, _PROCESS_STREAM_MAX);

struct ProcessAttach {
        ProcessOutput *output;
        ProcessAttach *next;
        int fd;
        uint64_t pos;              /* the stream's offset of the next byte for fd */
        sd_event_source *source;
};

/* A pipe that polls writable takes this much without blocking (as Exec's relay writes). */
#define ATTACH_CHUNK 4096

static ProcessAttach *attach_free(ProcessAttach *a) {
        if (!a)
                return NULL;
        for (ProcessAttach **i = &a->output->attaches; *i; i = &(*i)->next)
                if (*i == a) {
                        *i = a->next;
                        break;
                }
        a->source = sd_event_source_disable_unref(a->source);
        safe_close(a->fd); /* the reader sees EOF */
        free(a);
        return NULL;
}

/* There is something to write, or the stream's end to pass on, or nothing (wait for output). */
static void attach_kick(ProcessAttach *a) {
        OutputRing *r = &a->output->ring;

        if (a->pos < output_ring_first_offset(r))
                a->pos = output_ring_first_offset(r); /* the reader fell behind the ring: dropped */
        if (a->pos < r->total) {
                (void) sd_event_source_set_io_events(a->source, EPOLLOUT);
                return;
        }
        if (r->ended) {
                attach_free(a);
                return;
        }
        /* Nothing to write: not EPOLLOUT (it would spin), but still watched, as epoll reports EPOLLERR
         * without being asked: a reader that goes while the process is quiet is dropped at once, not at
         * its next write, and does not hold one of the PROCESS_ATTACH_MAX places meanwhile. */
        (void) sd_event_source_set_io_events(a->source, 0);
}

static void output_kick_attaches(ProcessOutput *o) {
        for (ProcessAttach *a = o->attaches, *next; a; a = next) {
                next = a->next;
                attach_kick(a);
        }
}

static int on_attach_writable(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ProcessAttach *a = userdata;
        char buf[ATTACH_CHUNK];
        uint64_t start;
        size_t n;

        if (revents & (EPOLLERR | EPOLLHUP)) {
                attach_free(a); /* the reader went */
                return 0;
        }
        if (output_ring_read(&a->output->ring, a->pos, buf, sizeof(buf), &start, &n) < 0) {
                attach_free(a);
                return 0;
        }
        a->pos = start;
        if (n > 0) {
                ssize_t k = write(a->fd, buf, n);
                if (k < 0 && errno != EAGAIN && errno != EINTR) {
                        attach_free(a);
                        return 0;
                }
                if (k > 0)
                        a->pos += k;
        }
        attach_kick(a);
        return 0;
}

int process_attach_output(Process *p, ProcessStream stream, uint64_t offset, int fd, uint64_t *ret_start) {
        ProcessOutput *o = stream == PROCESS_STDOUT ? &p->out : &p->err;
        ProcessAttach *a;
        struct stat st;
        size_t n = 0;
        int r;

        if (offset > o->ring.total)
                return -ERANGE;
        if (fstat(fd, &st) < 0)
                return -errno;
        /* Only these poll and hang up; a file or a device might do neither. */
        if (!S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode))
                return -ENOTSOCK;
        for (ProcessAttach *i = p->out.attaches; i; i = i->next)
                n++;
        for (ProcessAttach *i = p->err.attaches; i; i = i->next)
                n++;
        if (n >= PROCESS_ATTACH_MAX)
                return -EUSERS;
        a = calloc(1, sizeof(ProcessAttach));
        if (!a)
                return -ENOMEM;
        a->output = o;
        a->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (a->fd < 0) {
                r = -errno;
                free(a);
                return r;
        }
        a->pos = MAX(offset, output_ring_first_offset(&o->ring));
        r = sd_event_add_io(p->manager->event, &a->source, a->fd, EPOLLOUT, on_attach_writable, a);
        if (r < 0) {
                safe_close(a->fd);
                free(a);
                return r;
        }
        a->next = o->attaches;
        o->attaches = a;
        *ret_start = a->pos;
        attach_kick(a);
        return 0;
}

static void output_done(ProcessOutput *o) {
        while (o->attaches)
                attach_free(o->attaches);
        o->source = sd_event_source_disable_unref(o->source);
        o->fd = safe_close(o->fd);
        output_ring_done(&o->ring);
}

static void process_unlink(Process *p) {
        if (!p->sandbox)
                return;
        for (Process **i = &p->sandbox->processes; *i; i = &(*i)->next)
                if (*i == p) {
                        *i = p->next;
                        p->sandbox->n_processes--;
                        break;
                }
        p->sandbox = NULL;
        p->next = NULL;
}

static Process *process_free(Process *p) {
        if (!p)
                return NULL;
        process_unlink(p);
        manager_audit_cancel(p->manager, p->audit_key);
        scope_child_release(&p->child);
        output_done(&p->out);
        output_done(&p->err);
        p->stdin_source = sd_event_source_disable_unref(p->stdin_source);
        p->stdin_fd = safe_close(p->stdin_fd);
        free(p->stdin_pending);
        p->deadline_source = sd_event_source_disable_unref(p->deadline_source);
        p->oom_source = sd_event_source_disable_unref(p->oom_source);
        oom_watch_done(&p->oom);
        sd_bus_message_unref(p->request);
        for (size_t i = 0; i < p->n_waiters; i++)
                sd_bus_message_unref(p->waiters[i]);
        free(p->waiters);
        strv_free(p->argv);
        free(p->cwd);
        free(p);
        return NULL;
}

static void process_evict(Sandbox *s);

char *process_bus_path(const Process *p) {
        _cleanup_free_ char *sandbox = NULL;
        char *path = NULL;

        if (sd_bus_path_encode(SANDBOXD_SANDBOX_PATH_PREFIX, p->session_id, &sandbox) < 0)
                return NULL;
        if (asprintf(&path, "%s/process/%s", sandbox, p->id) < 0)
                return NULL;
        return path;
}

Process *process_find(Sandbox *s, const char *id) {
        for (Process *p = s->processes; p; p = p->next)
                if (p->state != PROCESS_STARTING && streq(p->id, id))
                        return p;
        return NULL;
}

/* --- the child --------------------------------------------------------------------------------- */

typedef struct ChildArgs {
        int init_pidfd;
        int ns_flags;
        int stdin_fd, stdout_fd, stderr_fd;
        int go_fd, err_fd;
        uid_t uid;
        const char *cwd;
        char **argv;
        char **envp;
} ChildArgs;

#define CHILD_FAIL(step, error) scope_child_fail(a->err_fd, PROCESS_STAGE_SETUP, step, error, 127)

static _noreturn_ void process_child(const ChildArgs *a) {
        const char *step = NULL;
        int r;

        if (confine_reset_signals() < 0)
                CHILD_FAIL("reset signals", errno);
        /* The sandbox's mount, IPC, UTS (and network) namespaces; the PID namespace we were born in. */
        if (setns(a->init_pidfd, a->ns_flags) < 0)
                CHILD_FAIL("join the sandbox's namespaces", errno);
        if (setsid() < 0)
                CHILD_FAIL("setsid", errno);
        if (dup2(a->stdin_fd, 0) < 0 || dup2(a->stdout_fd, 1) < 0 || dup2(a->stderr_fd, 2) < 0)
                CHILD_FAIL("set up stdio", errno);
        int keep[] = { a->go_fd, a->err_fd };
        r = confine_sandbox_process(keep, ELEMENTSOF(keep), a->uid, &step);
        if (r < 0)
                CHILD_FAIL(step, -r);
        if (chdir(a->cwd) < 0)
                scope_child_fail(a->err_fd, PROCESS_STAGE_CWD, __func__, errno, 127);
        /* Confined: nothing of the caller's runs before systemd has put us in our scope. */
        r = scope_child_send_ready(a->go_fd, -EBADF);
        if (r < 0)
                CHILD_FAIL("report readiness", -r);
        if (scope_child_wait_go(a->go_fd) < 0)
                _exit(127);
        close(a->go_fd);
        /* Not execvp(): it would take the search path from our environ, which is sandboxd's. */
        confine_execvpe(a->argv[0], a->argv, a->envp);
        scope_child_fail(a->err_fd, PROCESS_STAGE_EXEC, __func__, errno, 127);
}

static void process_child_run(void *userdata) {
        process_child(userdata);
}

/* --- output and stdin ---------------------------------------------------------------------------- */

#define OUTPUT_READS_MAX 16

/* Reads what is there (at most OUTPUT_READS_MAX pipefuls: a fast writer must not hold the loop). 1 at
 * EOF, 0 otherwise, or -errno. */
static int output_read_some(ProcessOutput *o) {
        char tmp[65536];

        for (unsigned i = 0; i < OUTPUT_READS_MAX; i++) {
                ssize_t n = read(o->fd, tmp, sizeof(tmp));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? 0 : -errno;
                }
                if (n == 0)
                        return 1;
                (void) output_ring_append(&o->ring, tmp, n);
                output_kick_attaches(o);
        }
        return 0;
}

static void output_close(ProcessOutput *o) {
        o->source = sd_event_source_disable_unref(o->source);
        o->fd = safe_close(o->fd);
        o->ring.ended = true;
        output_kick_attaches(o); /* those at the end get EOF now */
}

static int on_output(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ProcessOutput *o = userdata;

        if (output_read_some(o) != 0)
                output_close(o);
        return 0;
}

/* An attached stdin source is read while less than this waits for the process. */
#define STDIN_SRC_HIGH_WATER (64 * 1024)

static void stdin_src_close(Process *p) {
        p->stdin_src_source = sd_event_source_disable_unref(p->stdin_src_source);
        p->stdin_src_fd = safe_close(p->stdin_src_fd);
}

static void stdin_src_update(Process *p) {
        /* Backpressure: the caller's writes wait while the process does not read. */
        if (p->stdin_src_source)
                (void) sd_event_source_set_enabled(p->stdin_src_source,
                                                   p->stdin_pending_len < STDIN_SRC_HIGH_WATER ? SD_EVENT_ON
                                                                                               : SD_EVENT_OFF);
}

static void stdin_close_now(Process *p) {
        stdin_src_close(p);
        p->stdin_source = sd_event_source_disable_unref(p->stdin_source);
        p->stdin_fd = safe_close(p->stdin_fd);
        free(p->stdin_pending);
        p->stdin_pending = NULL;
        p->stdin_pending_len = 0;
        p->stdin_close = false;
}

/* Writes what is pending as far as the pipe takes it; then closes stdin if asked. */
static void stdin_flush(Process *p) {
        while (p->stdin_fd >= 0 && p->stdin_pending_len > 0) {
                ssize_t k = write(p->stdin_fd, p->stdin_pending, p->stdin_pending_len);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        /* EPIPE: it closed its end; what is pending goes nowhere */
                        stdin_close_now(p);
                        return;
                }
                memmove(p->stdin_pending, p->stdin_pending + k, p->stdin_pending_len - k);
                p->stdin_pending_len -= k;
        }
        if (p->stdin_fd >= 0 && p->stdin_pending_len == 0 && p->stdin_close)
                stdin_close_now(p);
        if (p->stdin_source)
                (void) sd_event_source_set_enabled(p->stdin_source,
                                                   p->stdin_pending_len > 0 ? SD_EVENT_ON : SD_EVENT_OFF);
        stdin_src_update(p);
}

static int on_stdin_writable(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Process *p = userdata;

        if (revents & (EPOLLERR | EPOLLHUP)) {
                stdin_close_now(p);
                return 0;
        }
        stdin_flush(p);
        return 0;
}

int process_write_stdin(Process *p, const void *data, size_t size, bool close) {
        if (p->state != PROCESS_RUNNING)
                return -ESRCH;
        if (p->stdin_fd < 0 || p->stdin_close)
                return -EPIPE;
        if (size > PROCESS_STDIN_PENDING_MAX - p->stdin_pending_len)
                return -E2BIG;
        if (size > 0) {
                char *np = realloc(p->stdin_pending, p->stdin_pending_len + size);
                if (!np)
                        return -ENOMEM;
                p->stdin_pending = np;
                memcpy(p->stdin_pending + p->stdin_pending_len, data, size);
                p->stdin_pending_len += size;
        }
        p->stdin_close = close;
        stdin_flush(p);
        return 0;
}

static int on_stdin_src(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Process *p = userdata;
        char buf[STDIN_SRC_HIGH_WATER];
        ssize_t n;

        /* One read per wake-up: after EPOLLIN it returns at once, blocking or not. */
        n = read(fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0) {
                /* EOF (or the caller's end failed): the process's stdin ends once the rest is written */
                stdin_src_close(p);
                p->stdin_close = true;
                stdin_flush(p);
                return 0;
        }
        char *np = realloc(p->stdin_pending, p->stdin_pending_len + n);
        if (!np) {
                stdin_src_close(p);
                return 0;
        }
        p->stdin_pending = np;
        memcpy(p->stdin_pending + p->stdin_pending_len, buf, n);
        p->stdin_pending_len += n;
        stdin_flush(p);
        return 0;
}

int process_attach_stdin(Process *p, int fd) {
        struct stat st;
        int r;

        if (p->state != PROCESS_RUNNING)
                return -ESRCH;
        if (p->stdin_fd < 0 || p->stdin_close)
                return -EPIPE;
        if (p->stdin_src_fd >= 0)
                return -EBUSY;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode))
                return -ENOTSOCK;
        p->stdin_src_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (p->stdin_src_fd < 0)
                return -errno;
        r = sd_event_add_io(p->manager->event, &p->stdin_src_source, p->stdin_src_fd, EPOLLIN, on_stdin_src, p);
        if (r < 0) {
                p->stdin_src_fd = safe_close(p->stdin_src_fd);
                return r;
        }
        stdin_src_update(p);
        return 0;
}

/* --- the end ------------------------------------------------------------------------------------- */

int process_append_info(sd_bus_message *m, Process *p) {
        uint64_t end = p->end_mono ?: now_usec(CLOCK_MONOTONIC);

        return sd_bus_message_append(m, "a{sv}", 10,
                                     "duration_usec", "t", p->start_mono ? end - p->start_mono : (uint64_t) 0,
                                     "stdout_truncated", "b", (int) (output_ring_first_offset(&p->out.ring) > 0),
                                     "stderr_truncated", "b", (int) (output_ring_first_offset(&p->err.ring) > 0),
                                     "timed_out", "b", (int) p->timed_out,
                                     "cancelled", "b", 0,
                                     "oom_killed", "b", (int) p->oom_killed,
                                     "signal", "i", p->signal,
                                     "unit", "s", p->child.unit,
                                     "state", "s", process_state_to_string(p->state),
                                     "pid", "u", (uint32_t) p->ns_pid);
}

static json_object *argv_json(char **argv) {
        json_object *a = json_object_new_array();
        for (char **i = argv; a && i && *i; i++)
                json_object_array_add(a, json_object_new_string(*i));
        return a;
}

/* The detail of its rows; extra (taken, may be NULL) adds keys. */
static char *process_detail(Process *p, json_object *extra) {
        json_object *o = json_object_new_object();
        char *s = NULL;

        if (!o) {
                json_object_put(extra);
                return NULL;
        }
        json_object_object_add(o, "process", json_object_new_string(p->id));
        json_object_object_add(o, "argv", argv_json(p->argv));
        json_object_object_add(o, "cwd", json_object_new_string(p->cwd ?: SANDBOXD_SANDBOX_HOME));
        json_object_object_add(o, "unit", json_object_new_string(p->child.unit));
        json_object_object_add(o, "timeout_seconds", json_object_new_uint64(p->timeout_usec / USEC_PER_SEC));
        json_object_object_add(o, "memory_max", json_object_new_uint64(p->memory_max));
        json_object_object_add(o, "tasks_max", json_object_new_uint64(p->tasks_max));
        if (extra) {
                json_object_object_foreach(extra, k, v)
                        json_object_object_add(o, k, json_object_get(v));
                json_object_put(extra);
        }
        s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
        return s;
}

/* The last bytes of a stream, at most the Exec capture's size (OutputMax=, what the logger takes). */
static char *output_tail(Process *p, ProcessOutput *o, size_t *ret_n) {
        size_t cap = (size_t) MIN((uint64_t) o->ring.len, p->manager->config.output_max);
        uint64_t start;
        char *buf = malloc(MAX(cap, (size_t) 1));

        *ret_n = 0;
        if (!buf)
                return NULL;
        if (output_ring_read(&o->ring, o->ring.total - cap, buf, cap, &start, ret_n) < 0)
                *ret_n = 0;
        return buf;
}

static void process_reply_waiters(Process *p) {
        for (size_t i = 0; i < p->n_waiters; i++) {
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
                int r = sd_bus_message_new_method_return(p->waiters[i], &reply);
                if (r >= 0)
                        r = sd_bus_message_append(reply, "i", p->exit_code);
                if (r >= 0)
                        r = process_append_info(reply, p);
                if (r >= 0)
                        r = sd_bus_send(NULL, reply, NULL);
                if (r < 0)
                        (void) sd_bus_reply_method_errno(p->waiters[i], r, NULL);
                p->waiters[i] = sd_bus_message_unref(p->waiters[i]);
        }
        free(p->waiters);
        p->waiters = NULL;
        p->n_waiters = 0;
}

int process_wait(Process *p, sd_bus_message *request) {
        if (p->state == PROCESS_RUNNING) {
                sd_bus_message **w = reallocarray(p->waiters, p->n_waiters + 1, sizeof(*w));
                if (!w)
                        return -ENOMEM;
                p->waiters = w;
                p->waiters[p->n_waiters++] = sd_bus_message_ref(request);
                return 0;
        }
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r = sd_bus_message_new_method_return(request, &reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "i", p->exit_code);
        if (r >= 0)
                r = process_append_info(reply, p);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* It ran and its main process ended: its state, its row, its waiters; its scope goes with it. */
static void process_ended(Process *p) {
        const siginfo_t *si = &p->child.status;
        _cleanup_free_ char *out = NULL, *err = NULL, *detail = NULL;
        size_t out_n = 0, err_n = 0;

        p->end_mono = now_usec(CLOCK_MONOTONIC);
        p->deadline_source = sd_event_source_disable_unref(p->deadline_source);
        if (si->si_code == CLD_EXITED) {
                p->exit_code = si->si_status;
                p->signal = 0;
        } else {
                p->signal = si->si_status;
                p->exit_code = 128 + p->signal;
        }
        p->oom_killed = oom_watch_check(&p->oom, p->signal == SIGKILL);
        p->oom_source = sd_event_source_disable_unref(p->oom_source);
        oom_watch_done(&p->oom); /* its fds: an ended process may be kept a long time */
        p->state = p->timed_out ? PROCESS_TIMED_OUT : p->signal ? PROCESS_KILLED : PROCESS_EXITED;
        /* What it wrote before it ended is in the pipes now; what it left behind writing more is
         * stopped with its scope. */
        for (ProcessOutput *o = &p->out; o; o = o == &p->out ? &p->err : NULL)
                if (o->fd >= 0) {
                        (void) output_read_some(o);
                        output_close(o);
                }
        stdin_close_now(p);
        (void) unit_stop_nowait(p->manager, p->child.unit);

        out = output_tail(p, &p->out, &out_n);
        err = output_tail(p, &p->err, &err_n);
        json_object *extra = json_object_new_object();
        if (extra) {
                json_object_object_add(extra, "state", json_object_new_string(process_state_to_string(p->state)));
                json_object_object_add(extra, "signal", json_object_new_int(p->signal));
                json_object_object_add(extra, "oom_killed", json_object_new_boolean(p->oom_killed));
                json_object_object_add(extra, "stdout_first_offset",
                                       json_object_new_uint64(p->out.ring.total - out_n));
                json_object_object_add(extra, "stderr_first_offset",
                                       json_object_new_uint64(p->err.ring.total - err_n));
                json_object_object_add(extra, "stdout_bytes", json_object_new_uint64(p->out.ring.total));
                json_object_object_add(extra, "stderr_bytes", json_object_new_uint64(p->err.ring.total));
                bool gone = !p->sandbox || p->sandbox->state != SANDBOX_RUNNING;
                json_object_object_add(extra, "sandbox_gone", json_object_new_boolean(gone));
        }
        detail = process_detail(p, extra);
        AuditRow row = {
                .session_id = p->session_id,
                .operation = "process.exit",
                .event = p->timed_out ? "timed_out" : p->oom_killed ? "oom_killed" : "finished",
                .detail = detail,
                .exit_code = p->exit_code,
                .out = out,
                .out_size = out_n,
                .err = err,
                .err_size = err_n,
                .started_at = p->started_at,
                .duration_usec = p->end_mono - p->start_mono,
        };
        manager_audit_finish(p->manager, &p->caller, &row, p->audit_key);
        if (p->sandbox)
                log_sandbox(LOG_INFO, p->session_id, "Process %s of sandbox %s is %s (exit code %d).", p->id,
                            p->session_id, process_state_to_string(p->state), p->exit_code);
        process_emit_changed(p);
        process_reply_waiters(p);
}

/* It never ran (or could not be told to): the call's error, its row, and it is gone. */
static void process_start_failed(Process *p) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        const ScopeChildFailure *f = &p->failure;

        if (p->scope_error)
                (void) sd_bus_error_setf(&error, SD_BUS_ERROR_FAILED, "Could not start the process's scope: %s",
                                         strerror(p->scope_error));
        else if (f->stage == PROCESS_STAGE_CWD)
                (void) sd_bus_error_setf(&error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Cannot change to the working directory %s: %s",
                                         p->cwd ?: SANDBOXD_SANDBOX_HOME, strerror(f->error));
        else if (f->stage == PROCESS_STAGE_EXEC && f->error == ENOENT)
                (void) sd_bus_error_setf(&error, SANDBOXD_ERROR_NO_SUCH_FILE, "Cannot execute %s: %s",
                                         p->argv[0], strerror(f->error));
        else if (f->stage == PROCESS_STAGE_EXEC)
                (void) sd_bus_error_setf(&error, SD_BUS_ERROR_FAILED, "Cannot execute %s: %s", p->argv[0],
                                         strerror(f->error));
        else if (f->stage == PROCESS_STAGE_SETUP)
                (void) sd_bus_error_setf(&error, SD_BUS_ERROR_FAILED, "Could not set up the process (%s): %s",
                                         f->step ?: "setup", strerror(f->error));
        else
                (void) sd_bus_error_setf(&error, SD_BUS_ERROR_FAILED,
                                         "The process ended before it ran (the sandbox went away?).");
        _cleanup_free_ char *detail = process_detail(p, NULL);
        json_object *o = detail ? json_tokener_parse(detail) : NULL;
        if (o) {
                json_object_object_add(o, "error", json_object_new_string(error.name));
                json_object_object_add(o, "message", json_object_new_string(strempty(error.message)));
                free(detail);
                detail = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
                json_object_put(o);
        }
        manager_audit_failed(p->manager, &p->caller, p->session_id, "process.start", &error, detail,
                             p->call_started_at, p->call_mono);
        if (p->request)
                (void) sd_bus_reply_method_error(p->request, &error);
        process_free(p);
}

/* It exec'd: the call's answer and the start row. */
static void process_running(Process *p) {
        _cleanup_free_ char *path = process_bus_path(p), *detail = NULL;
        char status[64], line[256];
        int r;

        p->state = PROCESS_RUNNING;
        p->started_at = now_usec(CLOCK_REALTIME);
        if (p->sandbox)
                process_evict(p->sandbox);
        /* Its pid as the sandbox sees it: the last of NSpid. */
        p->ns_pid = p->child.pid;
        snprintf(status, sizeof(status), "/proc/%i/status", (int) p->child.pid);
        _cleanup_fclose_ FILE *f = fopen(status, "re");
        while (f && fgets(line, sizeof(line), f))
                if (strncmp(line, "NSpid:", 6) == 0) {
                        const char *last = strrchr(line, '\t');
                        int v;
                        if (last && sscanf(last, "%d", &v) == 1 && v > 0)
                                p->ns_pid = v;
                        break;
                }

        detail = process_detail(p, NULL);
        AuditRow row = {
                .session_id = p->session_id,
                .operation = "process.start",
                .event = "finished",
                .detail = detail,
                .started_at = p->call_started_at,
                .duration_usec = now_usec(CLOCK_MONOTONIC) - p->call_mono,
        };
        manager_audit(p->manager, &p->caller, &row);
        log_sandbox(LOG_INFO, p->session_id, "Process %s of sandbox %s runs %s (%s).", p->id, p->session_id,
                    p->argv[0], p->child.unit);
        if (!path)
                r = sd_bus_reply_method_errno(p->request, -ENOMEM, NULL);
        else
                r = sd_bus_reply_method_return(p->request, "so", p->id, path);
        (void) r;
        p->request = sd_bus_message_unref(p->request);
}

static void process_child_report(ScopeChild *c, const ScopeChildFailure *f) {
        Process *p = c->userdata;

        if (f) {
                p->failure = *f;
                return; /* its exit ends it */
        }
        /* EOF: it exec'd, if it was let go (else it died before, and its exit says so) */
        if (p->state == PROCESS_STARTING && c->started && !c->exited)
                process_running(p);
}

static void process_child_exited(ScopeChild *c) {
        Process *p = c->userdata;
        ScopeChildFailure f;

        /* The report and the exit may come in one batch: a failure it wrote is in the pipe still. */
        if (c->report_source && scope_child_read_failure(c, &f) > 0)
                p->failure = f;
        c->report_source = sd_event_source_disable_unref(c->report_source);
        if (p->state == PROCESS_STARTING && c->started && p->failure.stage == 0)
                process_running(p); /* it exec'd and ended at once */
}

static void process_child_done(ScopeChild *c) {
        Process *p = c->userdata;

        if (p->state == PROCESS_STARTING) {
                process_start_failed(p);
                return;
        }
        process_ended(p);
        if (!p->sandbox)
                process_free(p); /* its sandbox is gone: nobody can read it any more */
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        Process *p = userdata;

        if (!p->timed_out) {
                /* SIGTERM to everything in its scope, SIGKILL after 1 s; we make sure a little later. */
                p->timed_out = true;
                (void) unit_stop_nowait(p->manager, p->child.unit);
                (void) sd_event_source_set_time(s, usec + PROCESS_DEADLINE_GRACE_USEC);
                (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
                return 0;
        }
        if (!p->child.exited)
                (void) kill(p->child.pid, SIGKILL);
        return 0;
}

void process_hold_deadlines(Sandbox *s, bool hold, uint64_t paused_usec) {
        uint64_t t;

        for (Process *p = s->processes; p; p = p->next) {
                if (!p->deadline_source || p->timed_out || p->child.exited)
                        continue;
                if (hold) {
                        (void) sd_event_source_set_enabled(p->deadline_source, SD_EVENT_OFF);
                        continue;
                }
                if (sd_event_source_get_time(p->deadline_source, &t) >= 0)
                        (void) sd_event_source_set_time(p->deadline_source, t + paused_usec);
                (void) sd_event_source_set_enabled(p->deadline_source, SD_EVENT_ONESHOT);
        }
}

unsigned process_count_running(Sandbox *s) {
        unsigned n = 0;

        for (Process *p = s->processes; p; p = p->next)
                if (p->state == PROCESS_STARTING || p->state == PROCESS_RUNNING)
                        n++;
        return n;
}

static void process_child_go(ScopeChild *c) {
        Process *p = c->userdata;

        p->start_mono = now_usec(CLOCK_MONOTONIC);
        if (p->timeout_usec > 0)
                (void) sd_event_add_time(p->manager->event, &p->deadline_source, CLOCK_MONOTONIC,
                                         p->start_mono + p->timeout_usec, 0, on_deadline, p);
        if (scope_child_go(c) < 0)
                scope_child_kill(c);
}

static int on_oom_event(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Process *p = userdata;
        oom_watch_poll(&p->oom);
        return 0;
}

/* Its scope is up: watch it for OOM kills, as an Exec's (systemd does not report them on every host). */
static void process_child_scope_up(ScopeChild *c) {
        Process *p = c->userdata;
        Manager *m = p->manager;
        char slice_path[512], unit_path[768];

        if (!p->sandbox)
                return;
        snprintf(slice_path, sizeof(slice_path), "sandbox.slice/%s", p->sandbox->slice);
        snprintf(unit_path, sizeof(unit_path), "%s/%s", slice_path, c->unit);
        if (oom_watch_start(&p->oom, m->memory_layout, m->memory_prefix, slice_path, unit_path) >= 0 &&
            p->oom.event_fd >= 0 &&
            sd_event_add_io(m->event, &p->oom_source, p->oom.event_fd, EPOLLIN, on_oom_event, p) >= 0)
                (void) sd_event_source_set_priority(p->oom_source, SD_EVENT_PRIORITY_IMPORTANT);
}

static void process_child_scope_failed(ScopeChild *c, int error, const sd_bus_error *bus_error) {
        Process *p = c->userdata;
        p->scope_error = error;
}

static const ScopeChildOps process_child_ops = {
        .report = process_child_report,
        .scope_up = process_child_scope_up,
        .go = process_child_go,
        .scope_failed = process_child_scope_failed,
        .exited = process_child_exited,
        .done = process_child_done,
};

/* --- starting ------------------------------------------------------------------------------------ */

/* Whether one more may start: not with PROCESS_MAX_PER_SANDBOX running or starting (ended ones make room,
 * but only once the new one runs: a start that fails changes nothing). */
static int process_check_room(Sandbox *s) {
        unsigned live = 0;

        for (Process *p = s->processes; p; p = p->next)
                if (p->state == PROCESS_STARTING || p->state == PROCESS_RUNNING)
                        live++;
        return live >= PROCESS_MAX_PER_SANDBOX ? -EUSERS : 0;
}

/* A new one runs: the oldest ended ones go while there are more than PROCESS_MAX_PER_SANDBOX. */
static void process_evict(Sandbox *s) {
        while (s->n_processes > PROCESS_MAX_PER_SANDBOX) {
                Process *oldest = NULL;
                for (Process *p = s->processes; p; p = p->next)
                        if (p->state != PROCESS_STARTING && p->state != PROCESS_RUNNING)
                                oldest = p; /* newest first: the last one found is the oldest */
                if (!oldest)
                        return;
                process_free(oldest);
        }
}

static int output_init(Process *p, ProcessOutput *o, int fd, size_t cap) {
        o->process = p;
        o->fd = fd;
        output_ring_init(&o->ring, cap);
        (void) fcntl(fd, F_SETFL, O_NONBLOCK);
        return sd_event_add_io(p->manager->event, &o->source, fd, EPOLLIN, on_output, o);
}

int process_start(Sandbox *s, const ProcessSpec *spec, sd_bus_message *request) {
        Manager *m = s->manager;
        int in[2] = { -EBADF, -EBADF }, out[2] = { -EBADF, -EBADF }, err[2] = { -EBADF, -EBADF };
        int go[2] = { -EBADF, -EBADF }, fail[2] = { -EBADF, -EBADF };
        _cleanup_strv_free_ char **env = NULL;
        Process *p = NULL;
        pid_t pid;
        int r;

        r = process_check_room(s);
        if (r < 0)
                return r;
        const SandboxType *t = sandboxd_config_find_type(&m->config, s->type);
        size_t ring_cap = t ? (size_t) t->process_output_max : (size_t) SANDBOX_PROCESS_OUTPUT_DEFAULT;

        env = exec_build_env(s, spec->env);
        if (!env)
                return -ENOMEM;
        p = calloc(1, sizeof(Process));
        if (!p)
                return -ENOMEM;
        p->manager = m;
        p->stdin_fd = p->stdin_src_fd = p->out.fd = p->err.fd = -EBADF;
        p->oom = (OomWatch) OOM_WATCH_INIT;
        scope_child_setup(&p->child, m, &process_child_ops, p);
        snprintf(p->session_id, sizeof(p->session_id), "%s", s->id);
        uint64_t n = sandbox_next_unit_number(s);
        snprintf(p->id, sizeof(p->id), "p%" PRIu64, n);
        snprintf(p->child.unit, sizeof(p->child.unit), "sandbox-%s-process-%" PRIu64 ".scope", s->id, n);
        p->argv = strv_copy(spec->argv);
        p->cwd = spec->cwd ? strdup(spec->cwd) : NULL;
        p->timeout_usec = spec->timeout_usec;
        p->memory_max = spec->memory_max;
        p->tasks_max = spec->tasks_max;
        p->call_started_at = spec->started_at ?: now_usec(CLOCK_REALTIME);
        p->call_mono = spec->call_mono ?: now_usec(CLOCK_MONOTONIC);
        if (spec->caller)
                p->caller = *spec->caller;
        else
                caller_system(&p->caller);
        output_ring_init(&p->out.ring, ring_cap);
        output_ring_init(&p->err.ring, ring_cap);
        if (!p->argv || (spec->cwd && !p->cwd)) {
                r = -ENOMEM;
                goto fail;
        }
        if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
            socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) < 0 || pipe2(fail, O_CLOEXEC) < 0) {
                r = -errno;
                goto fail;
        }

        ChildArgs a = {
                .init_pidfd = s->init_pidfd,
                .ns_flags = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS |
                            (s->network != SANDBOX_NETWORK_HOST ? CLONE_NEWNET : 0),
                .stdin_fd = in[0],
                .stdout_fd = out[1],
                .stderr_fd = err[1],
                .go_fd = go[0],
                .err_fd = fail[1],
                .uid = s->uid,
                .cwd = p->cwd ?: SANDBOXD_SANDBOX_HOME,
                .argv = p->argv,
                .envp = env,
        };
        pid = scope_child_spawn(&(ScopeChildSpawn) {
                .pidns_fd = s->init_pidfd,
                .host_pidns_fd = m->host_pidns_fd,
                .cgroup2_fd = -EBADF,
                .child = process_child_run,
                .arg = &a,
        });
        if (pid < 0) {
                r = -errno;
                goto fail;
        }
        in[0] = safe_close(in[0]);
        out[1] = safe_close(out[1]);
        err[1] = safe_close(err[1]);
        go[0] = safe_close(go[0]);
        fail[1] = safe_close(fail[1]);

        r = scope_child_attach(&p->child, pid, TAKE_FD(go[1]), TAKE_FD(fail[0]));
        if (r < 0)
                goto fail_kill;
        p->stdin_fd = TAKE_FD(in[1]);
        (void) fcntl(p->stdin_fd, F_SETFL, O_NONBLOCK);
        r = sd_event_add_io(m->event, &p->stdin_source, p->stdin_fd, EPOLLOUT, on_stdin_writable, p);
        if (r < 0)
                goto fail_kill;
        (void) sd_event_source_set_enabled(p->stdin_source, SD_EVENT_OFF);
        r = output_init(p, &p->out, TAKE_FD(out[0]), ring_cap);
        if (r < 0)
                goto fail_kill;
        r = output_init(p, &p->err, TAKE_FD(err[0]), ring_cap);
        if (r < 0)
                goto fail_kill;
        char desc[SCOPE_DESCRIPTION_MAX];
        ScopeProps props = scope_props_sandbox(desc, s->id, "process", s->slice, pid, p->tasks_max,
                                               p->memory_max,
                                               p->timeout_usec > 0 ? p->timeout_usec + PROCESS_DEADLINE_GRACE_USEC
                                                                   : UINT64_MAX);
        r = scope_child_start_scope(&p->child, &props, NULL, NULL);
        if (r < 0)
                goto fail_kill;

        /* Noted before it can run: should sandboxd die while it does, the note becomes its exit row
         * ("interrupted") at the next start. */
        {
                _cleanup_free_ char *detail = process_detail(p, NULL);
                manager_audit_begin(m, &p->caller,
                                    &(AuditRow) { .session_id = p->session_id, .operation = "process.exit",
                                                  .detail = detail, .started_at = p->call_started_at },
                                    p->audit_key);
        }
        p->sandbox = s;
        p->next = s->processes;
        s->processes = p;
        s->n_processes++;
        p->request = sd_bus_message_ref(request);
        return 0;

fail_kill:
        /* It has run nothing of the caller's: it dies before it gets go. */
        (void) kill(pid, SIGKILL);
        if (!p->child.child_source)
                (void) waitpid(pid, NULL, 0);
fail:
        close_pairp(&in);
        close_pairp(&out);
        close_pairp(&err);
        close_pairp(&go);
        close_pairp(&fail);
        process_free(p);
        return r;
}

int process_signal(Process *p, int sig) {
        if (p->state != PROCESS_RUNNING || p->child.exited)
                return -ESRCH;
        /* Not reaped yet, so the pid is still this process's. */
        if (kill(p->child.pid, sig) < 0)
                return -errno;
        return 0;
}

void process_detach_all(Sandbox *s) {
        while (s->processes) {
                Process *p = s->processes;
                if (s->manager->exiting) {
                        /* sandboxd stops: the note of its exit row stays, to be recorded as interrupted at
                         * the next start, which also stops its scope (unit_reconcile()). */
                        p->audit_key[0] = 0;
                        process_free(p);
                } else if (p->state == PROCESS_RUNNING || p->state == PROCESS_STARTING)
                        process_unlink(p); /* its child's exit frees it */
                else
                        process_free(p);
        }
        s->n_processes = 0;
}
