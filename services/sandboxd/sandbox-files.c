/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* WriteFile and ReadFile, and the helpers that do every file call, seeing the sandbox's mount tree as
 * the sandbox's user.
 *
 * sandboxd never opens a sandbox's files itself: sandboxd-file-helper (file-helper.h) runs in the
 * sandbox's mount namespace as the sandbox's uid, so symlinks, permissions and mounts are exactly what
 * the sandbox's own processes get, and nothing outside the sandbox is reachable. Data moves through
 * memfds; the helper answers each job with 0 or an errno. */
#include "sandbox-files.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit-row.h"
#include "caller.h"
#include "cgroup-join.h"
#include "confine.h"
#include "io-util.h"
#include "log.h"
#include "sandbox.h"
#include "sandboxd-bus.h"
#include "sandboxd-manager.h"
#include "time-util.h"

typedef struct FileOp {
        Manager *manager;
        sd_bus_message *request;
        int memfd;
        int hdr_fd;          /* read: size, mode, truncated, written by the helper */
        bool is_read, to_fd;
        char *path;
        /* for the audit row */
        Caller caller;
        char session_id[SANDBOX_ID_LEN + 1];
        uint64_t started_at, mono;
        uint64_t size;           /* bytes written (from the message), or asked for */
        uint64_t offset;
        uint32_t mode;
        bool append;
} FileOp;

static void file_op_audit(FileOp *op, int error, const char *error_name, const char *error_message,
                          uint64_t bytes) {
        json_object *o = json_object_new_object();
        _cleanup_free_ char *detail = NULL;

        if (o) {
                json_object_object_add(o, "path", json_object_new_string(op->path));
                json_object_object_add(o, "bytes", json_object_new_uint64(bytes));
                if (op->is_read)
                        json_object_object_add(o, "offset", json_object_new_uint64(op->offset));
                else {
                        json_object_object_add(o, "mode", json_object_new_uint64(op->mode));
                        json_object_object_add(o, "append", json_object_new_boolean(op->append));
                }
                json_object_object_add(o, "to_fd", json_object_new_boolean(op->to_fd));
                if (error_name) {
                        json_object_object_add(o, "error", json_object_new_string(error_name));
                        json_object_object_add(o, "message", json_object_new_string(strempty(error_message)));
                }
                detail = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
                json_object_put(o);
        }
        AuditRow row = {
                .session_id = op->session_id,
                .operation = op->is_read ? "read" : "write",
                .event = error == 0 ? "finished" : error == EACCES || error == EPERM ? "denied" : "failed",
                .detail = detail,
                .exit_code = error == 0 ? 0 : -error,
                .started_at = op->started_at,
                .duration_usec = now_usec(CLOCK_MONOTONIC) - op->mono,
        };
        manager_audit(op->manager, &op->caller, &row);
}

static FileOp *file_op_free(FileOp *op) {
        if (!op)
                return NULL;
        safe_close(op->memfd);
        safe_close(op->hdr_fd);
        sd_bus_message_unref(op->request);
        free(op->path);
        free(op);
        return NULL;
}

int sandbox_resolve_path(const char *path, char **ret) {
        char *p;

        if (isempty(path) || strlen(path) >= PATH_MAX - 64)
                return -EINVAL;
        if (path[0] == '/')
                p = strdup(path);
        else if (asprintf(&p, "%s/%s", SANDBOXD_SANDBOX_HOME, path) < 0)
                p = NULL;
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

/* --- helpers ------------------------------------------------------------------------------------ */

/* A sandbox's file calls are done by sandboxd-file-helper (file-helper.h), started confined as the
 * sandbox's user in its mount namespace. Starting one (fork, confinement, exec) costs several times the
 * file work of a small call, so a helper serves one job after another: once a sandbox has one, its
 * calls find it idle. A call that finds none idle starts another, so calls still run in parallel; when
 * it is done and the sandbox has an idle helper already, it is let go. A sandbox has at most
 * FILE_HELPERS_MAX helpers; further calls wait in a queue for one to be free. Helpers run in the
 * sandbox's cgroups (its init's scope), so their memory and tasks are the sandbox's. A helper exits
 * after FILE_HELPER_IDLE_MSEC without a job, when the sandbox's init dies or when sandboxd goes away
 * (its socket closes), and is killed (and reaped) when the sandbox is deleted. */

/* A helper that takes this long over one job is stuck (a hung file system, say): it is killed and the
 * caller hears why. */
#define FILE_JOB_TIMEOUT_USEC (120 * USEC_PER_SEC)
#define FILE_HELPERS_MAX 8

typedef struct FileHelper {
        struct FileHelper *next;
        Manager *manager;
        char id[SANDBOX_ID_LEN + 1];
        pid_t pid;
        int sock; /* -EBADF once let go */
        sd_event_source *child_source, *io_source, *timeout_source;
        file_job_done_t done; /* the job it is doing, if any */
        void *userdata;
        bool busy, timed_out;
} FileHelper;

/* Few at a time (about one per sandbox that used files in the last seconds); a global, so that they
 * stay reachable until they are reaped. */
static FileHelper *file_helpers = NULL;

/* Jobs waiting for one of their sandbox's helpers, oldest first. */
typedef struct QueuedJob {
        struct QueuedJob *next;
        char id[SANDBOX_ID_LEN + 1];
        ToolBuf buf; /* the encoding */
        int job_fd, fd0, fd1;
        file_job_done_t done;
        void *userdata;
} QueuedJob;

static QueuedJob *queued_jobs = NULL;

static QueuedJob *queued_job_free(QueuedJob *q) {
        tool_buf_free(&q->buf);
        safe_close(q->job_fd);
        safe_close(q->fd0);
        safe_close(q->fd1);
        free(q);
        return NULL;
}

static void queue_kick(Manager *m, const char *id);

static FileHelper *helper_find_idle(const char *id, const FileHelper *except) {
        for (FileHelper *h = file_helpers; h; h = h->next)
                if (h != except && !h->busy && h->io_source && streq(h->id, id))
                        return h;
        return NULL;
}

/* It exits on the hang-up; its exit reaps it. */
static void helper_let_go(FileHelper *h) {
        h->io_source = sd_event_source_disable_unref(h->io_source);
        h->sock = safe_close(h->sock);
}

/* Forgets the helper; the job it was doing, if any, ends with status. A job waiting for the sandbox's
 * helpers gets its place. */
static void helper_free(FileHelper *h, int status) {
        Manager *m = h->manager;
        char id[SANDBOX_ID_LEN + 1];

        snprintf(id, sizeof(id), "%s", h->id);
        for (FileHelper **p = &file_helpers; *p; p = &(*p)->next)
                if (*p == h) {
                        *p = h->next;
                        break;
                }
        sd_event_source_disable_unref(h->child_source);
        sd_event_source_disable_unref(h->io_source);
        sd_event_source_disable_unref(h->timeout_source);
        safe_close(h->sock);
        file_job_done_t done = h->busy ? h->done : NULL;
        void *userdata = h->userdata;
        free(h);
        if (done)
                done(userdata, status);
        queue_kick(m, id);
}

static int on_helper_exit(sd_event_source *es, const siginfo_t *si, void *userdata) {
        FileHelper *h = userdata;

        if (h->busy && !h->timed_out)
                log_sandbox(LOG_WARNING, h->id, "The file helper of sandbox %s ended (%s %d) during a call.",
                            h->id, si->si_code == CLD_EXITED ? "status" : "signal", si->si_status);
        helper_free(h, h->timed_out ? ETIMEDOUT : EIO);
        return 0;
}

static int on_helper_io(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        FileHelper *h = userdata;
        int32_t status;

        ssize_t n = recv(fd, &status, sizeof(status), MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n != (ssize_t) sizeof(status) || !h->busy) {
                /* gone, or talking out of turn: its exit answers what it was doing */
                if (n == (ssize_t) sizeof(status))
                        (void) kill(h->pid, SIGKILL);
                helper_let_go(h);
                return 0;
        }
        file_job_done_t done = h->done;
        void *job_userdata = h->userdata;
        Manager *m = h->manager;
        char id[SANDBOX_ID_LEN + 1];
        snprintf(id, sizeof(id), "%s", h->id);
        h->busy = false;
        h->done = NULL;
        h->userdata = NULL;
        h->timeout_source = sd_event_source_disable_unref(h->timeout_source);
        /* the next job waiting for this sandbox's helpers takes it; else one idle helper is enough */
        queue_kick(m, id);
        if (!h->busy && helper_find_idle(id, h))
                helper_let_go(h);
        done(job_userdata, status < 0 || status > 4095 ? EIO : status);
        return 0;
}

static int on_helper_timeout(sd_event_source *es, uint64_t usec, void *userdata) {
        FileHelper *h = userdata;

        h->timed_out = true;
        (void) kill(h->pid, SIGKILL); /* its exit answers the call */
        return 0;
}

/* The child: enters the sandbox, confines itself and becomes sandboxd-file-helper. */
static _noreturn_ void helper_exec(Sandbox *s, int sock, pid_t sandboxd) {
        Manager *m = s->manager;

        if (confine_reset_signals() < 0)
                _exit(EXIT_FAILURE);
        /* The helper as the host has it: an image sandbox's root has no /usr/libexec of ours (issue 24). It
         * is linked statically, so it needs nothing else of the host's tree. */
        int exe = open(m->file_helper_path, O_PATH | O_CLOEXEC);
        int exe_high = exe < 0 ? -1 : fcntl(exe, F_DUPFD_CLOEXEC, 10); /* above the fds set up below */
        if (exe_high < 0)
                _exit(EXIT_FAILURE);
        safe_close(exe);
        /* Its root and cwd become the sandbox's; nothing of sandboxd's stdio comes along. */
        if (setns(s->init_pidfd, CLONE_NEWNS) < 0)
                _exit(EXIT_FAILURE);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        int sock_high = fcntl(sock, F_DUPFD_CLOEXEC, 10), watch_high = fcntl(s->init_pidfd, F_DUPFD_CLOEXEC, 10);
        if (null < 0 || sock_high < 0 || watch_high < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
            dup2(null, 2) < 0 || dup2(sock_high, FILE_HELPER_SOCKET_FD) < 0 ||
            dup2(watch_high, FILE_HELPER_WATCH_FD) < 0)
                _exit(EXIT_FAILURE);
        /* The sandbox's own confinement: what the helper does, the sandbox's processes could do too. */
        int keep[] = { FILE_HELPER_SOCKET_FD, FILE_HELPER_WATCH_FD, exe_high };
        if (confine_sandbox_process(keep, ELEMENTSOF(keep), s->uid, NULL) < 0 ||
            chdir(SANDBOXD_SANDBOX_HOME) < 0)
                _exit(EXIT_FAILURE);
        /* It dies with sandboxd: in the sandbox's cgroups, stopping sandboxd.service does not end it.
         * Only now, as the sandbox's user: a change of uid clears the parent-death signal. (Its socket
         * closing ends an idle helper too, but not one busy on a job.) sandboxd may be gone already. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != sandboxd)
                _exit(EXIT_FAILURE);
        char *argv[] = { (char *) "sandboxd-file-helper", NULL };
        char *envp[] = { NULL };
        execveat(exe_high, "", argv, envp, AT_EMPTY_PATH);
        _exit(EXIT_FAILURE);
}

static void close_fds(int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                safe_close(fds[i]);
}

/* What a helper needs to be in the sandbox's init scope, in every hierarchy: its memory and tasks
 * then count against the sandbox's limits, not sandboxd's. */
static int helper_cgroups_open(Sandbox *s, int *fds, size_t n_max, size_t *ret_n, int *ret_cgroup2_fd) {
        _cleanup_free_ char *cgroups = NULL;
        int r;

        r = cgroup_read(s->init_pid, &cgroups);
        if (r < 0)
                return r;
        /* Read by pid: only if the init is still alive (its pidfd not readable) was the pid its own. */
        struct pollfd p = { .fd = s->init_pidfd, .events = POLLIN };
        if (poll(&p, 1, 0) != 0)
                return -ESRCH;
        return cgroup_join_open(cgroups, fds, n_max, ret_n, ret_cgroup2_fd);
}

static int helper_spawn(Sandbox *s, FileHelper **ret) {
        Manager *m = s->manager;
        int sv[2], r, cgroup_fds[CGROUP_JOIN_FDS_MAX];
        size_t n_cgroup_fds = 0;
        _cleanup_close_ int cgroup2_fd = -EBADF;

        if (s->state != SANDBOX_RUNNING || s->init_pidfd < 0)
                return -ESRCH;
        r = helper_cgroups_open(s, cgroup_fds, ELEMENTSOF(cgroup_fds), &n_cgroup_fds, &cgroup2_fd);
        if (r < 0) {
                log_sandbox(LOG_WARNING, s->id, "Cannot start a file helper in sandbox %s's cgroups: %s", s->id,
                            strerror(-r));
                return r;
        }
        FileHelper *h = calloc(1, sizeof(FileHelper));
        if (!h || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                r = h ? -errno : -ENOMEM;
                free(h);
                close_fds(cgroup_fds, n_cgroup_fds);
                return r;
        }
        bool born_in;
        pid_t self = getpid();
        pid_t pid = cgroup_fork_into(cgroup2_fd, &born_in);
        if (pid < 0) {
                r = -errno;
                safe_close(sv[0]);
                safe_close(sv[1]);
                free(h);
                close_fds(cgroup_fds, n_cgroup_fds);
                return r;
        }
        if (pid == 0) {
                /* Into the init scope's cgroups first: nothing of the helper's is ever charged to ours. */
                if (!born_in && cgroup2_fd >= 0) {
                        int fd = openat(cgroup2_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
                        if (fd < 0 || write(fd, "0", 1) != 1)
                                _exit(EXIT_FAILURE);
                }
                for (size_t i = 0; i < n_cgroup_fds; i++)
                        if (write(cgroup_fds[i], "0", 1) != 1)
                                _exit(EXIT_FAILURE);
                safe_close(sv[0]);
                helper_exec(s, sv[1], self);
        }
        close_fds(cgroup_fds, n_cgroup_fds);
        safe_close(sv[1]);
        h->manager = m;
        snprintf(h->id, sizeof(h->id), "%s", s->id);
        h->pid = pid;
        h->sock = sv[0];
        h->next = file_helpers;
        file_helpers = h;
        r = sd_event_add_child(m->event, &h->child_source, pid, WEXITED, on_helper_exit, h);
        if (r >= 0)
                r = sd_event_add_io(m->event, &h->io_source, h->sock, EPOLLIN, on_helper_io, h);
        if (r < 0) {
                h->child_source = sd_event_source_disable_unref(h->child_source);
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                helper_free(h, EIO);
                return r;
        }
        *ret = h;
        return 0;
}

/* Sends the job: its encoding in the message if small, else in a memfd (job_fd, made once per job). */
static int helper_send(FileHelper *h, const ToolBuf *job, int *job_fd, int fd0, int fd1) {
        int fds[3], n_fds = 0;
        FileJobMessage msg = { .magic = FILE_JOB_MAGIC, .n_fds = fd1 >= 0 ? 2 : fd0 >= 0 ? 1 : 0 };
        char control[CMSG_SPACE(sizeof(fds))] = {};

        if (job->size <= FILE_JOB_INLINE_MAX)
                msg.inline_size = job->size;
        else {
                if (*job_fd < 0) {
                        _cleanup_close_ int fd = memfd_create("sandbox-file-job", MFD_CLOEXEC);
                        if (fd < 0)
                                return -errno;
                        int r = loop_write(fd, job->data, job->size);
                        if (r < 0)
                                return r;
                        *job_fd = TAKE_FD(fd);
                }
                fds[n_fds++] = *job_fd;
        }
        if (fd0 >= 0)
                fds[n_fds++] = fd0;
        if (fd1 >= 0)
                fds[n_fds++] = fd1;
        struct iovec iov[2] = { { .iov_base = &msg, .iov_len = sizeof(msg) },
                                { .iov_base = job->data, .iov_len = msg.inline_size } };
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = control,
                             .msg_controllen = CMSG_SPACE(sizeof(int) * n_fds) };
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        if (n_fds == 0)
                mh.msg_control = NULL, mh.msg_controllen = 0;
        if (sendmsg(h->sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t) (sizeof(msg) + msg.inline_size))
                return -errno ?: -EIO;
        return 0;
}

static unsigned helpers_of(const char *id) {
        unsigned n = 0;
        for (FileHelper *h = file_helpers; h; h = h->next)
                n += streq(h->id, id);
        return n;
}

/* Hands the job to an idle helper of the sandbox's, or to a new one while it has fewer than
 * FILE_HELPERS_MAX: 1 if one took it, 0 if none can (it has to wait), or a negative errno. */
static int job_start(Sandbox *s, const ToolBuf *buf, int *job_fd, int fd0, int fd1, file_job_done_t done,
                     void *userdata) {
        for (;;) {
                bool fresh = false;
                FileHelper *h = helper_find_idle(s->id, NULL);
                if (!h) {
                        if (helpers_of(s->id) >= FILE_HELPERS_MAX)
                                return 0;
                        int r = helper_spawn(s, &h);
                        if (r < 0)
                                return r;
                        fresh = true;
                }
                int r = helper_send(h, buf, job_fd, fd0, fd1);
                if (r >= 0) {
                        h->busy = true;
                        h->timed_out = false;
                        h->done = done;
                        h->userdata = userdata;
                        /* without a deadline, should this fail: the helper's answer still comes */
                        (void) sd_event_add_time_relative(s->manager->event, &h->timeout_source,
                                                          CLOCK_MONOTONIC, FILE_JOB_TIMEOUT_USEC, 0,
                                                          on_helper_timeout, h);
                        return 1;
                }
                helper_let_go(h); /* going away: its exit cleans up (and it is not found idle again) */
                if (fresh)
                        return r;
        }
}

/* Starts the jobs waiting for the sandbox's helpers, oldest first, as far as its helpers allow. */
static void queue_kick(Manager *m, const char *id) {
        static bool kicking = false;

        /* A helper that fails to start, on the way, is freed, which kicks again: the loop below goes on
         * with the queue instead, so no job is started twice. */
        if (kicking)
                return;
        kicking = true;
        for (QueuedJob **p = &queued_jobs; *p;) {
                QueuedJob *q = *p;
                if (!streq(q->id, id)) {
                        p = &q->next;
                        continue;
                }
                Sandbox *s = hashmap_get(m->sandboxes, id);
                int r = s ? job_start(s, &q->buf, &q->job_fd, q->fd0, q->fd1, q->done, q->userdata) : -ESRCH;
                if (r == 0)
                        break; /* all busy: the rest wait their turn */
                *p = q->next;
                file_job_done_t done = q->done;
                void *userdata = q->userdata;
                queued_job_free(q);
                if (r < 0) {
                        done(userdata, -r);
                        p = &queued_jobs; /* done() may have changed the queue */
                }
        }
        kicking = false;
}

int sandbox_file_job(Sandbox *s, const FileJob *job, int fd0, int fd1, file_job_done_t done, void *userdata) {
        _cleanup_(tool_buf_free) ToolBuf buf = {};
        _cleanup_close_ int job_fd = -EBADF;
        int r;

        if (fd0 < 0 && fd1 >= 0)
                return -EINVAL;
        r = file_job_encode(job, &buf);
        if (r < 0)
                return r;
        /* behind the sandbox's jobs that wait already, if any */
        bool waiting = false;
        for (QueuedJob *q = queued_jobs; q && !waiting; q = q->next)
                waiting = streq(q->id, s->id);
        r = waiting ? 0 : job_start(s, &buf, &job_fd, fd0, fd1, done, userdata);
        if (r != 0)
                return r < 0 ? r : 0;

        QueuedJob *q = calloc(1, sizeof(QueuedJob));
        if (!q)
                return -ENOMEM;
        *q = (QueuedJob) { .buf = buf, .job_fd = TAKE_FD(job_fd), .fd0 = -EBADF, .fd1 = -EBADF, .done = done,
                           .userdata = userdata };
        buf = (ToolBuf) {};
        snprintf(q->id, sizeof(q->id), "%s", s->id);
        if ((fd0 >= 0 && (q->fd0 = fcntl(fd0, F_DUPFD_CLOEXEC, 3)) < 0) ||
            (fd1 >= 0 && (q->fd1 = fcntl(fd1, F_DUPFD_CLOEXEC, 3)) < 0)) {
                r = -errno;
                queued_job_free(q);
                return r;
        }
        QueuedJob **tail = &queued_jobs;
        while (*tail)
                tail = &(*tail)->next;
        *tail = q;
        return 0;
}

/* Sandboxes that get a helper when sandboxd is idle; one defer source for all. */
static sd_event_source *helper_defer = NULL;
static char (*helper_pending)[SANDBOX_ID_LEN + 1] = NULL;
static size_t helper_n_pending = 0, helper_pending_alloc = 0;

static bool sandbox_has_helper(const char *id) {
        for (FileHelper *h = file_helpers; h; h = h->next)
                if (h->io_source && streq(h->id, id))
                        return true;
        return false;
}

static int on_helper_defer(sd_event_source *es, void *userdata) {
        Manager *m = userdata;

        for (size_t i = 0; i < helper_n_pending; i++) {
                Sandbox *s = hashmap_get(m->sandboxes, helper_pending[i]);
                FileHelper *h;
                if (s && !sandbox_has_helper(s->id))
                        (void) helper_spawn(s, &h);
        }
        helper_n_pending = 0;
        return 0;
}

void sandbox_files_prepare(Sandbox *s) {
        Manager *m = s->manager;

        if (sandbox_has_helper(s->id))
                return;
        for (size_t i = 0; i < helper_n_pending; i++)
                if (streq(helper_pending[i], s->id))
                        return;
        if (helper_n_pending == helper_pending_alloc) {
                size_t a = MAX(helper_pending_alloc * 2, (size_t) 16);
                void *l = reallocarray(helper_pending, a, sizeof(*helper_pending));
                if (!l)
                        return;
                helper_pending = l;
                helper_pending_alloc = a;
        }
        snprintf(helper_pending[helper_n_pending++], SANDBOX_ID_LEN + 1, "%s", s->id);
        if (!helper_defer) {
                if (sd_event_add_defer(m->event, &helper_defer, on_helper_defer, m) < 0)
                        return;
                (void) sd_event_source_set_priority(helper_defer, SD_EVENT_PRIORITY_IDLE);
        } else
                (void) sd_event_source_set_enabled(helper_defer, SD_EVENT_ONESHOT);
}

bool sandbox_files_busy(const char *id) {
        for (QueuedJob *q = queued_jobs; q; q = q->next)
                if (streq(q->id, id))
                        return true;
        for (FileHelper *h = file_helpers; h; h = h->next)
                if (h->busy && streq(h->id, id))
                        return true;
        return false;
}

void sandbox_files_forget(Sandbox *s) {
        /* the waiting first, so that no helper is started for them as the others go */
        for (QueuedJob **p = &queued_jobs; *p;) {
                QueuedJob *q = *p;
                if (!streq(q->id, s->id)) {
                        p = &q->next;
                        continue;
                }
                *p = q->next;
                file_job_done_t done = q->done;
                void *userdata = q->userdata;
                queued_job_free(q);
                done(userdata, ECANCELED);
                p = &queued_jobs;
        }
        for (;;) {
                FileHelper *h = file_helpers;
                while (h && !streq(h->id, s->id))
                        h = h->next;
                if (!h)
                        break;
                /* gone before the caller hears the sandbox is: nothing of its uid may be left */
                h->child_source = sd_event_source_disable_unref(h->child_source);
                (void) kill(h->pid, SIGKILL);
                while (waitpid(h->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                helper_free(h, ECANCELED);
        }
}

/* --- the parent ---------------------------------------------------------------------------------- */

static void reply_errno(FileOp *op, int error) {
        const char *verb = op->is_read ? "read" : "write", *name;
        char message[PATH_MAX + 128];

        switch (error) {
        case ENOENT:
        case ENOTDIR:
                name = SANDBOXD_ERROR_NO_SUCH_FILE;
                snprintf(message, sizeof(message), "Cannot %s %s: %s", verb, op->path, strerror(error));
                break;
        case EACCES:
        case EPERM:
        case EROFS:
                name = SANDBOXD_ERROR_PERMISSION_DENIED;
                snprintf(message, sizeof(message), "Cannot %s %s in the sandbox: %s", verb, op->path, strerror(error));
                break;
        case EISDIR:
        case EINVAL:
        case ELOOP:
        case ENAMETOOLONG:
                name = SD_BUS_ERROR_INVALID_ARGS;
                snprintf(message, sizeof(message), "Cannot %s %s: %s", verb, op->path,
                         error == EINVAL ? "not a regular file" : strerror(error));
                break;
        case ENOSPC:
        case EDQUOT:
        case EFBIG:
                name = SANDBOXD_ERROR_LIMIT_EXCEEDED;
                snprintf(message, sizeof(message), "Cannot %s %s: %s", verb, op->path, strerror(error));
                break;
        default:
                name = SD_BUS_ERROR_FAILED;
                snprintf(message, sizeof(message), "Cannot %s %s: %s", verb, op->path, strerror(error));
        }
        file_op_audit(op, error, name, message, 0);
        (void) sd_bus_reply_method_errorf(op->request, name, "%s", message);
}

static void reply_read(FileOp *op) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        FileHeader h = {};
        void *map = NULL;
        size_t len = 0;
        int r;

        if (pread(op->hdr_fd, &h, sizeof(h), 0) != sizeof(h))
                return reply_errno(op, EIO);
        if (!op->to_fd) {
                struct stat st;
                if (fstat(op->memfd, &st) < 0)
                        return reply_errno(op, errno);
                len = (size_t) st.st_size;
                if (len > 0) {
                        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, op->memfd, 0);
                        if (map == MAP_FAILED)
                                return reply_errno(op, errno);
                }
        }
        file_op_audit(op, 0, NULL, NULL, op->to_fd ? h.size : len);
        r = sd_bus_message_new_method_return(op->request, &reply);
        if (r >= 0)
                r = sd_bus_message_append_array(reply, 'y', map ?: "", len);
        if (r >= 0)
                r = sd_bus_message_append(reply, "a{sv}", 3, "size", "t", h.size, "mode", "u", h.mode,
                                          "truncated", "b", (int) h.truncated);
        if (map)
                munmap(map, len);
        if (r >= 0)
                r = sd_bus_send(NULL, reply, NULL);
        if (r < 0)
                (void) sd_bus_reply_method_errno(op->request, r, NULL);
}

/* Answers the call from the job's status: 0 or an errno. */
static void file_op_done(void *userdata, int status) {
        FileOp *op = userdata;

        if (status != 0)
                reply_errno(op, status);
        else if (op->is_read)
                reply_read(op);
        else {
                file_op_audit(op, 0, NULL, NULL, op->size);
                (void) sd_bus_reply_method_return(op->request, NULL);
        }
        file_op_free(op);
}

static FileOp *file_op_new(Sandbox *s, sd_bus_message *request, const char *path, bool is_read,
                           const Caller *caller) {
        FileOp *op = calloc(1, sizeof(FileOp));
        if (!op)
                return NULL;
        op->started_at = now_usec(CLOCK_REALTIME);
        op->mono = now_usec(CLOCK_MONOTONIC);
        snprintf(op->session_id, sizeof(op->session_id), "%s", s->id);
        if (caller)
                op->caller = *caller;
        else
                caller_system(&op->caller);
        op->manager = s->manager;
        op->memfd = op->hdr_fd = -EBADF;
        op->is_read = is_read;
        op->path = strdup(path);
        if (!op->path)
                return file_op_free(op);
        op->request = sd_bus_message_ref(request);
        return op;
}

int sandbox_write_file(Sandbox *s, const FileWriteSpec *spec, const Caller *caller, sd_bus_message *request) {
        _cleanup_close_ int src = -EBADF;
        FileOp *op;

        if (spec->data_fd >= 0)
                src = fcntl(spec->data_fd, F_DUPFD_CLOEXEC, 3);
        else {
                src = memfd_create("sandbox-write", MFD_CLOEXEC);
                if (src >= 0 && spec->size > 0 && write(src, spec->data, spec->size) != (ssize_t) spec->size)
                        return -EIO;
                if (src >= 0 && lseek(src, 0, SEEK_SET) < 0)
                        return -errno;
        }
        if (src < 0)
                return -errno;
        op = file_op_new(s, request, spec->path, false, caller);
        if (!op)
                return -ENOMEM;
        op->size = spec->size;
        op->mode = spec->mode;
        op->append = spec->append;
        op->to_fd = spec->data_fd >= 0;
        FileJob job = { .kind = FILE_JOB_WRITE, .path = spec->path, .mode = spec->mode,
                        .create_dirs = spec->create_dirs, .append = spec->append };
        int r = sandbox_file_job(s, &job, src, -EBADF, file_op_done, op);
        if (r < 0)
                file_op_free(op);
        return r;
}

int sandbox_read_file(Sandbox *s, const FileReadSpec *spec, const Caller *caller, sd_bus_message *request) {
        FileOp *op;
        int dst;

        op = file_op_new(s, request, spec->path, true, caller);
        if (!op)
                return -ENOMEM;
        op->offset = spec->offset;
        op->to_fd = spec->out_fd >= 0;
        op->memfd = op->to_fd ? fcntl(spec->out_fd, F_DUPFD_CLOEXEC, 3) : memfd_create("sandbox-read", MFD_CLOEXEC);
        if (op->memfd < 0) {
                int r = -errno;
                file_op_free(op);
                return r;
        }
        dst = op->memfd;
        op->hdr_fd = memfd_create("sandbox-read-info", MFD_CLOEXEC);
        if (op->hdr_fd < 0) {
                int r = -errno;
                file_op_free(op);
                return r;
        }
        FileJob job = { .kind = FILE_JOB_READ, .path = spec->path, .offset = spec->offset,
                        .length = spec->length, .cap = spec->cap };
        int r = sandbox_file_job(s, &job, dst, op->hdr_fd, file_op_done, op);
        if (r < 0) {
                file_op_free(op);
                return r;
        }
        if (op->to_fd)
                op->memfd = safe_close(op->memfd); /* the helper has its copy */
        return 0;
}
