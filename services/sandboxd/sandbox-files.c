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
#include <sys/mman.h>
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

static int enter_sandbox(Sandbox *s) {
        int r;

        if (confine_reset_signals() < 0)
                return -errno;
        if (setns(s->init_pidfd, CLONE_NEWNS) < 0)
                return -errno;
        r = confine_set_rlimits(1024, 65536);
        if (r < 0)
                return r;
        r = confine_drop_privileges(s->uid, (gid_t) s->uid);
        if (r < 0)
                return r;
        if (chdir(SANDBOXD_SANDBOX_HOME) < 0)
                return -errno;
        /* The same filter as the sandbox's own processes: what we do here, they could do too. */
        return confine_seccomp_install();
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

static _noreturn_ void write_helper(Sandbox *s, const FileWriteSpec *spec, const char *path, int src) {
        int r, fd;

        r = enter_sandbox(s);
        if (r < 0)
                _exit(-r);
        if (spec->create_dirs) {
                r = mkdir_parents(path);
                if (r < 0)
                        _exit(-r);
        }
        /* O_NONBLOCK so that a FIFO planted at the path cannot make us wait for a reader; no O_TRUNC
         * before we know it is a regular file. */
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (spec->append ? O_APPEND : 0),
                  spec->mode);
        if (fd < 0)
                _exit(errno == ENXIO ? EINVAL : errno); /* ENXIO: a FIFO without a reader */
        struct stat st;
        if (fstat(fd, &st) < 0)
                _exit(errno);
        if (!S_ISREG(st.st_mode))
                _exit(EINVAL); /* a FIFO or device would hang or surprise us */
        if (fcntl(fd, F_SETFL, spec->append ? O_APPEND : 0) < 0)
                _exit(errno);
        if (!spec->append && ftruncate(fd, 0) < 0)
                _exit(errno);
        r = copy_fd(src, fd, 0, NULL);
        if (r < 0)
                _exit(-r);
        if (close(fd) < 0)
                _exit(errno);
        _exit(0);
}

static _noreturn_ void read_helper(Sandbox *s, const FileReadSpec *spec, const char *path, int dst, int hdr) {
        FileHeader h = {};
        uint64_t copied = 0, want;
        struct stat st;
        int r, fd;

        r = enter_sandbox(s);
        if (r < 0)
                _exit(-r);
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                _exit(errno);
        if (fstat(fd, &st) < 0)
                _exit(errno);
        if (S_ISDIR(st.st_mode))
                _exit(EISDIR);
        if (!S_ISREG(st.st_mode))
                _exit(EINVAL);
        h.size = st.st_size;
        h.mode = st.st_mode & 07777;
        if (spec->offset > 0 && lseek(fd, (off_t) spec->offset, SEEK_SET) < 0)
                _exit(errno);
        want = spec->length;
        uint64_t left = spec->offset < h.size ? h.size - spec->offset : 0;
        if (want == 0 || want > left)
                want = left;
        if (spec->cap > 0 && want > spec->cap) {
                want = spec->cap;
                h.truncated = 1;
        }
        if (pwrite(hdr, &h, sizeof(h), 0) != sizeof(h))
                _exit(EIO);
        r = copy_fd(fd, dst, want, &copied);
        if (r < 0)
                _exit(-r);
        _exit(0);
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
                name = SD_BUS_ERROR_ACCESS_DENIED;
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

static int on_helper_exit(sd_event_source *es, const siginfo_t *si, void *userdata) {
        FileOp *op = userdata;

        if (si->si_code != CLD_EXITED)
                reply_errno(op, EIO);
        else if (si->si_status != 0)
                reply_errno(op, si->si_status);
        else if (op->is_read)
                reply_read(op);
        else {
                file_op_audit(op, 0, NULL, NULL, op->size);
                (void) sd_bus_reply_method_return(op->request, NULL);
        }
        file_op_free(op);
        return 0;
}

/* A helper that takes this long is stuck (a hung file system, say): it dies, the caller hears why. */
#define FILE_OP_TIMEOUT_USEC (120 * USEC_PER_SEC)

static int on_helper_timeout(sd_event_source *es, uint64_t usec, void *userdata) {
        FileOp *op = userdata;
        (void) kill(op->pid, SIGKILL); /* its exit answers the call, with EIO */
        return 0;
}

static int file_op_start(Sandbox *s, FileOp *op, pid_t pid) {
        op->pid = pid;
        int r = sd_event_add_child(s->manager->event, &op->child_source, pid, WEXITED, on_helper_exit, op);
        if (r >= 0)
                r = sd_event_add_time_relative(s->manager->event, &op->timeout_source, CLOCK_MONOTONIC,
                                               FILE_OP_TIMEOUT_USEC, 0, on_helper_timeout, op);
        if (r < 0) {
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                file_op_free(op);
        }
        return r;
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
        pid_t pid = fork();
        if (pid < 0) {
                file_op_free(op);
                return -errno;
        }
        if (pid == 0)
                write_helper(s, spec, spec->path, src);
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
        pid_t pid = fork();
        if (pid < 0) {
                file_op_free(op);
                return -errno;
        }
        if (pid == 0)
                read_helper(s, spec, spec->path, dst, op->hdr_fd);
        if (op->to_fd)
                op->memfd = safe_close(op->memfd); /* the helper has its copy */
        return file_op_start(s, op, pid);
}
