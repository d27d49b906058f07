/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* WriteFile and ReadFile: done by a helper that sees the sandbox's mount tree as the sandbox's user.
 *
 * sandboxd never opens a sandbox's files itself: a forked helper joins the sandbox's mount
 * namespace and drops to the sandbox's uid first, so symlinks, permissions and mounts are exactly
 * what the sandbox's own processes get, and nothing outside the sandbox is reachable. Data moves
 * through a memfd; the helper's exit status is 0 or an errno. */
#include "sandbox-files.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit-spool.h"
#include "confine.h"
#include "sandbox.h"
#include "sandboxd-dbus.h"
#include "sandboxd-manager.h"
#include "time-util.h"

typedef struct FileHeader {
        uint64_t size;
        uint32_t mode;
        uint32_t truncated;
} FileHeader;

typedef struct FileOp {
        Manager *manager;
        sd_bus_message *request;
        sd_event_source *child_source, *timeout_source;
        pid_t pid;
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
        struct FileServer *server;   /* the file server doing it, or NULL: a helper of its own (pid) */
        struct FileOp *next;         /* in running_ops, while a helper of its own runs */
} FileOp;

/* The calls with helpers of their own, so that deleting their sandbox can end them. */
static FileOp *running_ops = NULL;

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
        for (FileOp **p = &running_ops; *p; p = &(*p)->next)
                if (*p == op) {
                        *p = op->next;
                        break;
                }
        sd_event_source_disable_unref(op->child_source);
        sd_event_source_disable_unref(op->timeout_source);
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

/* --- the helper -------------------------------------------------------------------------------- */

static int enter_sandbox(Sandbox *s, const int *keep, size_t n_keep) {
        int r;

        if (confine_reset_signals() < 0)
                return -errno;
        if (setns(s->init_pidfd, CLONE_NEWNS) < 0)
                return -errno;
        /* Nothing of sandboxd's (its databases, its bus connection) stays open in the helper, and the
         * same confinement as the sandbox's own processes: what we do here, they could do too. */
        r = confine_sandbox_process(keep, n_keep, s->uid, NULL);
        if (r < 0)
                return r;
        return chdir(SANDBOXD_SANDBOX_HOME) < 0 ? -errno : 0;
}

static int mkdir_parents(const char *path) {
        char buf[PATH_MAX];

        snprintf(buf, sizeof(buf), "%s", path);
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = 0;
                if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        return 0;
}

static int copy_fd(int from, int to, uint64_t max, uint64_t *ret_copied) {
        char buf[65536];
        uint64_t total = 0;

        while (max == 0 || total < max) {
                size_t want = sizeof(buf);
                if (max > 0 && max - total < want)
                        want = max - total;
                ssize_t n = read(from, buf, want);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                for (ssize_t off = 0; off < n;) {
                        ssize_t k = write(to, buf + off, n - off);
                        if (k < 0) {
                                if (errno == EINTR)
                                        continue;
                                return -errno;
                        }
                        off += k;
                }
                total += n;
        }
        if (ret_copied)
                *ret_copied = total;
        return 0;
}

/* The work of a WriteFile, in a helper that has entered the sandbox: 0 or a negative errno. */
static int do_write(const FileWriteSpec *spec, const char *path, int src) {
        int r, fd;

        if (spec->create_dirs) {
                r = mkdir_parents(path);
                if (r < 0)
                        return r;
        }
        /* O_NONBLOCK so that a FIFO planted at the path cannot make us wait for a reader; no O_TRUNC
         * before we know it is a regular file. */
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (spec->append ? O_APPEND : 0),
                  spec->mode);
        if (fd < 0)
                return errno == ENXIO ? -EINVAL : -errno; /* ENXIO: a FIFO without a reader */
        _cleanup_close_ int fd_close = fd;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL; /* a FIFO or device would hang or surprise us */
        if (fcntl(fd, F_SETFL, spec->append ? O_APPEND : 0) < 0)
                return -errno;
        if (!spec->append && ftruncate(fd, 0) < 0)
                return -errno;
        r = copy_fd(src, fd, 0, NULL);
        if (r < 0)
                return r;
        fd_close = -EBADF;
        if (close(fd) < 0)
                return -errno;
        return 0;
}

static _noreturn_ void write_helper(Sandbox *s, const FileWriteSpec *spec, const char *path, int src) {
        int r;

        r = enter_sandbox(s, (int[]) { src }, 1);
        if (r >= 0)
                r = do_write(spec, path, src);
        _exit(r < 0 ? -r : 0);
}

/* The work of a ReadFile, in a helper that has entered the sandbox: 0 or a negative errno. */
static int do_read(const FileReadSpec *spec, const char *path, int dst, int hdr) {
        FileHeader h = {};
        uint64_t copied = 0, want;
        struct stat st;
        int r;

        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        h.size = st.st_size;
        h.mode = st.st_mode & 07777;
        if (spec->offset > 0 && lseek(fd, (off_t) spec->offset, SEEK_SET) < 0)
                return -errno;
        want = spec->length;
        uint64_t left = spec->offset < h.size ? h.size - spec->offset : 0;
        if (want == 0 || want > left)
                want = left;
        if (spec->cap > 0 && want > spec->cap) {
                want = spec->cap;
                h.truncated = 1;
        }
        if (pwrite(hdr, &h, sizeof(h), 0) != sizeof(h))
                return -EIO;
        r = copy_fd(fd, dst, want, &copied);
        return r < 0 ? r : 0;
}

static _noreturn_ void read_helper(Sandbox *s, const FileReadSpec *spec, const char *path, int dst, int hdr) {
        int r;

        r = enter_sandbox(s, (int[]) { dst, hdr }, 2);
        if (r >= 0)
                r = do_read(spec, path, dst, hdr);
        _exit(r < 0 ? -r : 0);
}

/* --- file servers ---------------------------------------------------------------------------------- */

/* Forking a helper and confining it (setns, privileges, seccomp) costs several times more than the
 * file work of a small WriteFile or ReadFile. So once a sandbox has used a file call, sandboxd keeps a
 * confined helper for it running: a file server, forked and confined exactly like a per-call helper
 * (the sandbox's mount namespace and uid, no capabilities, its rlimits and seccomp filter, and no fd
 * but its socket and the sandbox init's pidfd). A call sends it the job (a FileJob and the memfds,
 * over a SOCK_SEQPACKET socketpair); it does the job and answers with 0 or an errno, and sandboxd
 * answers the caller from that, as from a per-call helper's exit status. One job at a time: a call
 * that finds the server busy forks a per-call helper as before, so calls still run in parallel. The
 * server exits when the sandbox's init dies, when sandboxd goes away (its socket closes), after
 * FILE_SERVER_IDLE_MSEC without a job, and is killed (and reaped) when the sandbox is deleted. */

#define FILE_SERVER_IDLE_MSEC 30000

typedef struct FileJob {
        uint32_t is_read;
        uint32_t mode;
        uint32_t create_dirs, append;
        uint64_t offset, length, cap;
        char path[PATH_MAX];
} FileJob;

typedef struct FileServer {
        struct FileServer *next;
        Manager *manager;
        char id[SANDBOX_ID_LEN + 1];
        pid_t pid;
        int sock;
        sd_event_source *child_source, *io_source;
        FileOp *current;          /* the job it is doing, or NULL */
} FileServer;

/* Few at a time (one per sandbox that used files in the last seconds); a global, so that they stay
 * reachable until they exit. */
static FileServer *file_servers = NULL;

static void file_op_finish(FileOp *op, int status);

static void server_unlink(FileServer *f) {
        for (FileServer **p = &file_servers; *p; p = &(*p)->next)
                if (*p == f) {
                        *p = f->next;
                        return;
                }
}

/* Forgets the server; its job, if any, fails with error. */
static void server_free(FileServer *f, int error) {
        if (!f)
                return;
        server_unlink(f);
        sd_event_source_disable_unref(f->child_source);
        sd_event_source_disable_unref(f->io_source);
        safe_close(f->sock);
        FileOp *op = f->current;
        free(f);
        if (op) {
                op->server = NULL;
                file_op_finish(op, error);
        }
}

static int on_server_exit(sd_event_source *es, const siginfo_t *si, void *userdata) {
        server_free(userdata, si->si_code == CLD_KILLED && si->si_status == SIGKILL ? ETIMEDOUT : EIO);
        return 0;
}

static int on_server_io(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        FileServer *f = userdata;
        int32_t status;

        ssize_t n = recv(fd, &status, sizeof(status), MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n != (ssize_t) sizeof(status)) {
                /* gone: its exit (on_server_exit) answers what it was doing */
                f->io_source = sd_event_source_disable_unref(f->io_source);
                return 0;
        }
        FileOp *op = f->current;
        f->current = NULL;
        if (op)
                file_op_finish(op, status < 0 || status > 4095 ? EIO : status);
        return 0;
}

static _noreturn_ void file_server_main(Sandbox *s, int sock) {
        int keep[] = { sock, s->init_pidfd };

        if (confine_reset_signals() < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                _exit(EXIT_FAILURE);
        if (setns(s->init_pidfd, CLONE_NEWNS) < 0 || confine_sandbox_process(keep, ELEMENTSOF(keep), s->uid, NULL) < 0 ||
            chdir(SANDBOXD_SANDBOX_HOME) < 0)
                _exit(EXIT_FAILURE);
        for (;;) {
                char control[CMSG_SPACE(sizeof(int) * 2)] = {};
                int fds[2] = { -EBADF, -EBADF }, r;
                FileJob job;

                struct pollfd p[2] = { { .fd = sock, .events = POLLIN }, { .fd = s->init_pidfd, .events = POLLIN } };
                r = poll(p, 2, FILE_SERVER_IDLE_MSEC);
                if (r < 0 && errno == EINTR)
                        continue;
                /* idle too long, the sandbox's init died, or sandboxd is gone */
                if (r <= 0 || p[1].revents != 0 || !(p[0].revents & POLLIN))
                        _exit(EXIT_SUCCESS);
                struct iovec iov = { .iov_base = &job, .iov_len = sizeof(job) };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                                     .msg_controllen = sizeof(control) };
                ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
                if (n != (ssize_t) sizeof(job) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
                        _exit(EXIT_FAILURE);
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                                memcpy(fds, CMSG_DATA(c), MIN(c->cmsg_len - CMSG_LEN(0), sizeof(fds)));
                job.path[sizeof(job.path) - 1] = 0;
                if (job.is_read) {
                        FileReadSpec spec = { .path = job.path, .offset = job.offset, .length = job.length,
                                              .cap = job.cap };
                        r = fds[0] >= 0 && fds[1] >= 0 ? do_read(&spec, job.path, fds[0], fds[1]) : -EBADF;
                } else {
                        FileWriteSpec spec = { .path = job.path, .mode = job.mode, .create_dirs = job.create_dirs,
                                               .append = job.append, .data_fd = fds[0] };
                        r = fds[0] >= 0 ? do_write(&spec, job.path, fds[0]) : -EBADF;
                }
                safe_close(fds[0]);
                safe_close(fds[1]);
                int32_t status = r < 0 ? -r : 0;
                if (send(sock, &status, sizeof(status), MSG_NOSIGNAL) != sizeof(status))
                        _exit(EXIT_FAILURE);
        }
}

/* Starts the sandbox's file server, unless it has one. */
static int server_start(Sandbox *s) {
        int sv[2], r;

        if (s->state != SANDBOX_RUNNING || s->init_pidfd < 0)
                return 0;
        for (FileServer *f = file_servers; f; f = f->next)
                if (streq(f->id, s->id))
                        return 0;
        FileServer *f = calloc(1, sizeof(FileServer));
        if (!f)
                return -ENOMEM;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                free(f);
                return -errno;
        }
        pid_t pid = fork();
        if (pid < 0) {
                r = -errno;
                safe_close(sv[0]);
                safe_close(sv[1]);
                free(f);
                return r;
        }
        if (pid == 0) {
                safe_close(sv[0]);
                file_server_main(s, sv[1]);
        }
        safe_close(sv[1]);
        f->manager = s->manager;
        snprintf(f->id, sizeof(f->id), "%s", s->id);
        f->pid = pid;
        f->sock = sv[0];
        f->next = file_servers;
        file_servers = f;
        r = sd_event_add_child(s->manager->event, &f->child_source, pid, WEXITED, on_server_exit, f);
        if (r >= 0)
                r = sd_event_add_io(s->manager->event, &f->io_source, f->sock, EPOLLIN, on_server_io, f);
        if (r < 0) {
                f->child_source = sd_event_source_disable_unref(f->child_source);
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                server_free(f, EIO);
                return r;
        }
        return 0;
}

/* Sandboxes whose server is to be started when sandboxd is idle; one defer source for all. */
static sd_event_source *server_defer = NULL;
static char (*server_pending)[SANDBOX_ID_LEN + 1] = NULL;
static size_t server_n_pending = 0, server_pending_alloc = 0;

static int on_server_defer(sd_event_source *es, void *userdata) {
        Manager *m = userdata;

        for (size_t i = 0; i < server_n_pending; i++) {
                Sandbox *s = hashmap_get(m->sandboxes, server_pending[i]);
                if (s)
                        (void) server_start(s);
        }
        server_n_pending = 0;
        return 0;
}

static void server_schedule(Manager *m, const char *id) {
        for (FileServer *f = file_servers; f; f = f->next)
                if (streq(f->id, id))
                        return;
        for (size_t i = 0; i < server_n_pending; i++)
                if (streq(server_pending[i], id))
                        return;
        if (server_n_pending == server_pending_alloc) {
                size_t a = MAX(server_pending_alloc * 2, (size_t) 16);
                void *l = reallocarray(server_pending, a, sizeof(*server_pending));
                if (!l)
                        return;
                server_pending = l;
                server_pending_alloc = a;
        }
        snprintf(server_pending[server_n_pending++], SANDBOX_ID_LEN + 1, "%s", id);
        if (!server_defer) {
                if (sd_event_add_defer(m->event, &server_defer, on_server_defer, m) < 0)
                        return;
                (void) sd_event_source_set_priority(server_defer, SD_EVENT_PRIORITY_IDLE);
        } else
                (void) sd_event_source_set_enabled(server_defer, SD_EVENT_ONESHOT);
}

void sandbox_files_prepare(Sandbox *s) {
        server_schedule(s->manager, s->id);
}

/* Hands the job to the sandbox's file server if it has an idle one: 1 if it took it, 0 if not. */
static int server_take(Sandbox *s, FileOp *op, const FileJob *job, const int *fds, size_t n_fds) {
        char control[CMSG_SPACE(sizeof(int) * 2)] = {};
        FileServer *f = file_servers;

        while (f && !streq(f->id, s->id))
                f = f->next;
        if (!f || f->current || !f->io_source)
                return 0;
        struct iovec iov = { .iov_base = (void *) job, .iov_len = sizeof(*job) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                             .msg_controllen = CMSG_SPACE(sizeof(int) * n_fds) };
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        if (sendmsg(f->sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t) sizeof(*job))
                return 0; /* going away: its exit cleans up; this call forks its own helper */
        f->current = op;
        op->server = f;
        return 1;
}

static void file_op_finish(FileOp *op, int status);

void sandbox_files_forget(Sandbox *s) {
        for (FileOp *op = running_ops, *next; op; op = next) {
                next = op->next;
                if (!streq(op->session_id, s->id))
                        continue;
                op->child_source = sd_event_source_disable_unref(op->child_source);
                (void) kill(op->pid, SIGKILL);
                while (waitpid(op->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                file_op_finish(op, ECANCELED);
        }
        for (FileServer *f = file_servers; f;) {
                FileServer *next = f->next;
                if (streq(f->id, s->id)) {
                        /* gone before the caller hears the sandbox is: nothing of its uid may be left */
                        f->child_source = sd_event_source_disable_unref(f->child_source);
                        (void) kill(f->pid, SIGKILL);
                        while (waitpid(f->pid, NULL, 0) < 0 && errno == EINTR)
                                ;
                        server_free(f, EIO);
                }
                f = next;
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

/* Answers the call from the helper's result: 0, an errno, or -1 for a helper that died. */
static void file_op_finish(FileOp *op, int status) {
        if (op->server && op->server->current == op)
                op->server->current = NULL;
        op->server = NULL;
        if (status < 0)
                reply_errno(op, EIO);
        else if (status != 0)
                reply_errno(op, status);
        else if (op->is_read)
                reply_read(op);
        else {
                file_op_audit(op, 0, NULL, NULL, op->size);
                (void) sd_bus_reply_method_return(op->request, NULL);
        }
        /* the sandbox's file server takes the next call (see "file servers") */
        server_schedule(op->manager, op->session_id);
        file_op_free(op);
}

static int on_helper_exit(sd_event_source *es, const siginfo_t *si, void *userdata) {
        FileOp *op = userdata;

        file_op_finish(op, si->si_code != CLD_EXITED ? -1 : si->si_status);
        return 0;
}

/* A helper that takes this long is stuck (a hung file system, say): it dies, the caller hears why. */
#define FILE_OP_TIMEOUT_USEC (120 * USEC_PER_SEC)

static int on_helper_timeout(sd_event_source *es, uint64_t usec, void *userdata) {
        FileOp *op = userdata;
        /* its exit answers the call; a file server's answers the call it was doing */
        (void) kill(op->server ? op->server->pid : op->pid, SIGKILL);
        return 0;
}

static int file_op_start(Sandbox *s, FileOp *op, pid_t pid) {
        int r = 0;

        op->pid = pid;
        if (!op->server)
                r = sd_event_add_child(s->manager->event, &op->child_source, pid, WEXITED, on_helper_exit, op);
        if (r >= 0)
                r = sd_event_add_time_relative(s->manager->event, &op->timeout_source, CLOCK_MONOTONIC,
                                               FILE_OP_TIMEOUT_USEC, 0, on_helper_timeout, op);
        if (r < 0 && op->server) {
                /* the server is doing it: let its answer come, with no deadline */
                return 0;
        }
        if (r < 0) {
                op->child_source = sd_event_source_disable_unref(op->child_source);
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                file_op_free(op);
                return r;
        }
        if (!op->server) {
                op->next = running_ops;
                running_ops = op;
        }
        return 0;
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
        FileJob job = { .mode = spec->mode, .create_dirs = spec->create_dirs, .append = spec->append };
        snprintf(job.path, sizeof(job.path), "%s", spec->path);
        pid_t pid = 0;
        if (server_take(s, op, &job, (int[]) { src }, 1) == 0) {
                pid = fork();
                if (pid < 0) {
                        file_op_free(op);
                        return -errno;
                }
                if (pid == 0)
                        write_helper(s, spec, spec->path, src);
        }
        return file_op_start(s, op, pid);
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
        FileJob job = { .is_read = 1, .offset = spec->offset, .length = spec->length, .cap = spec->cap };
        snprintf(job.path, sizeof(job.path), "%s", spec->path);
        pid_t pid = 0;
        if (server_take(s, op, &job, (int[]) { dst, op->hdr_fd }, 2) == 0) {
                pid = fork();
                if (pid < 0) {
                        file_op_free(op);
                        return -errno;
                }
                if (pid == 0)
                        read_helper(s, spec, spec->path, dst, op->hdr_fd);
        }
        if (op->to_fd)
                op->memfd = safe_close(op->memfd); /* the helper has its copy */
        return file_op_start(s, op, pid);
}
