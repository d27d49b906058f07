/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd-file-helper's jobs: their wire format, and their work in the helper on the sandbox's tree. */
#include "file-helper.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io-util.h"
#include "macro.h"
#include "time-util.h"

#define FILE_JOB_VERSION 1

enum {
        JOB_CREATE_DIRS = 1 << 0,
        JOB_APPEND = 1 << 1,
        JOB_OVERWRITE = 1 << 2,
        JOB_IGNORE_CASE = 1 << 3,
        _JOB_FLAGS_ALL = (1 << 4) - 1,
};

/* --- the encoding ---------------------------------------------------------------------------------- */

/* A string with its NUL, or nothing (length 0) for NULL. */
static int put_string(ToolBuf *b, const char *s) {
        return tool_buf_put_bytes(b, s, s ? strlen(s) + 1 : 0);
}

static int read_string(ToolReader *rd, const char **ret) {
        const void *p;
        size_t n;
        int r;

        r = tool_read_bytes(rd, &p, &n);
        if (r < 0)
                return r;
        if (n == 0) {
                *ret = NULL;
                return 0;
        }
        /* exactly one NUL, at the end */
        if (((const char *) p)[n - 1] != 0 || memchr(p, 0, n - 1))
                return -EBADMSG;
        *ret = p;
        return 0;
}

int file_job_encode(const FileJob *job, ToolBuf *out) {
        int r;

        if ((unsigned) job->kind >= _FILE_JOB_KIND_MAX || !job->path)
                return -EINVAL;
        uint32_t flags = (job->create_dirs ? JOB_CREATE_DIRS : 0) | (job->append ? JOB_APPEND : 0) |
                         (job->overwrite ? JOB_OVERWRITE : 0) | (job->ignore_case ? JOB_IGNORE_CASE : 0);
        r = tool_buf_put_u32(out, FILE_JOB_VERSION);
        if (r >= 0)
                r = tool_buf_put_u32(out, job->kind);
        if (r >= 0)
                r = put_string(out, job->path);
        if (r >= 0)
                r = put_string(out, job->pattern);
        if (r >= 0)
                r = put_string(out, job->glob);
        if (r >= 0)
                r = tool_buf_put_bytes(out, job->data, job->data ? job->size : 0);
        if (r >= 0)
                r = tool_buf_put_bytes(out, job->data2, job->data2 ? job->size2 : 0);
        const uint64_t u[] = { job->offset,     job->length,   job->cap,          job->max_results,
                               job->line,       job->start_line, job->end_line, job->timeout_usec };
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(u); i++)
                r = tool_buf_put_u64(out, u[i]);
        if (r >= 0)
                r = tool_buf_put_u32(out, job->mode);
        if (r >= 0)
                r = tool_buf_put_u32(out, flags);
        return r;
}

int file_job_decode(const void *data, size_t size, FileJob *ret) {
        ToolReader rd = { .p = data, .left = size };
        FileJob j = {};
        uint32_t version, kind, flags;
        int r;

        r = tool_read_u32(&rd, &version);
        if (r >= 0 && version != FILE_JOB_VERSION)
                r = -EBADMSG;
        if (r >= 0)
                r = tool_read_u32(&rd, &kind);
        if (r >= 0 && kind >= _FILE_JOB_KIND_MAX)
                r = -EBADMSG;
        if (r >= 0)
                r = read_string(&rd, &j.path);
        if (r >= 0 && !j.path)
                r = -EBADMSG;
        if (r >= 0)
                r = read_string(&rd, &j.pattern);
        if (r >= 0)
                r = read_string(&rd, &j.glob);
        if (r >= 0)
                r = tool_read_bytes(&rd, &j.data, &j.size);
        if (r >= 0)
                r = tool_read_bytes(&rd, &j.data2, &j.size2);
        uint64_t *u[] = { &j.offset,     &j.length,     &j.cap,      &j.max_results,
                          &j.line,       &j.start_line, &j.end_line, &j.timeout_usec };
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(u); i++)
                r = tool_read_u64(&rd, u[i]);
        if (r >= 0)
                r = tool_read_u32(&rd, &j.mode);
        if (r >= 0)
                r = tool_read_u32(&rd, &flags);
        if (r >= 0 && (rd.left != 0 || (flags & ~(uint32_t) _JOB_FLAGS_ALL)))
                r = -EBADMSG;
        if (r < 0)
                return -EBADMSG;
        j.kind = kind;
        j.create_dirs = flags & JOB_CREATE_DIRS;
        j.append = flags & JOB_APPEND;
        j.overwrite = flags & JOB_OVERWRITE;
        j.ignore_case = flags & JOB_IGNORE_CASE;
        if (j.size == 0)
                j.data = NULL;
        if (j.size2 == 0)
                j.data2 = NULL;
        *ret = j;
        return 0;
}

/* --- ReadFile and WriteFile ------------------------------------------------------------------------ */

static int mkdir_parents(const char *path) {
        char buf[PATH_MAX];

        if (strlen(path) >= sizeof(buf))
                return -ENAMETOOLONG;
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

/* Copies up to max bytes (0: all) from one fd to the other. */
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
                int r = loop_write(to, buf, n);
                if (r < 0)
                        return r;
                total += n;
        }
        if (ret_copied)
                *ret_copied = total;
        return 0;
}

static int do_write(const FileJob *job, int src) {
        int r;

        if (src < 0)
                return -EBADF;
        if (job->create_dirs) {
                r = mkdir_parents(job->path);
                if (r < 0)
                        return r;
        }
        /* O_NONBLOCK so that a FIFO planted at the path cannot make us wait for a reader; no O_TRUNC
         * before we know it is a regular file. O_EXCL first, to know whether the file is ours to remove
         * if the write fails. */
        int flags = O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (job->append ? O_APPEND : 0);
        bool created = true;
        _cleanup_close_ int fd = open(job->path, flags | O_CREAT | O_EXCL, job->mode);
        if (fd < 0 && errno == EEXIST) {
                created = false;
                fd = open(job->path, flags | O_CREAT, job->mode);
        }
        if (fd < 0)
                return errno == ENXIO ? -EINVAL : -errno; /* ENXIO: a FIFO without a reader */
        struct stat st, src_st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL; /* a FIFO or device would hang or surprise us */
        if (fcntl(fd, F_SETFL, job->append ? O_APPEND : 0) < 0)
                return -errno;

        /* Data of a known size (inline or in a memfd, not a caller's pipe): its room is made sure of
         * first, so a full disk (DiskMax=) refuses the write before anything changed, and the old
         * content is overwritten in place, then cut to the new size, rather than truncated first. */
        off_t pos = lseek(src, 0, SEEK_CUR);
        bool known = fstat(src, &src_st) >= 0 && S_ISREG(src_st.st_mode) && pos >= 0 && pos <= src_st.st_size;
        uint64_t size = known ? (uint64_t) (src_st.st_size - pos) : 0;
        if (known)
                r = fd_reserve(fd, job->append ? (uint64_t) st.st_size : 0, size);
        else
                r = job->append || ftruncate(fd, 0) >= 0 ? 0 : -errno;
        uint64_t copied = 0;
        if (r >= 0)
                r = copy_fd(src, fd, 0, &copied);
        if (r >= 0 && known && !job->append && ftruncate(fd, (off_t) copied) < 0)
                r = -errno;
        if (r >= 0 && close(TAKE_FD(fd)) < 0)
                r = -errno;
        if (r < 0 && created)
                (void) unlink(job->path);
        return r;
}

static int do_read(const FileJob *job, int dst, int hdr) {
        FileHeader h = {};
        struct stat st;

        if (dst < 0 || hdr < 0)
                return -EBADF;
        _cleanup_close_ int fd = open(job->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        int r = tool_fstat_regular(fd, &st);
        if (r < 0)
                return r;
        h.size = st.st_size;
        h.mode = st.st_mode & 07777;
        if (job->offset > 0 && lseek(fd, (off_t) job->offset, SEEK_SET) < 0)
                return -errno;
        uint64_t left = job->offset < h.size ? h.size - job->offset : 0;
        uint64_t want = job->length == 0 || job->length > left ? left : job->length;
        if (job->cap > 0 && want > job->cap) {
                want = job->cap;
                h.truncated = 1;
        }
        if (pwrite(hdr, &h, sizeof(h), 0) != sizeof(h))
                return -EIO;
        return copy_fd(fd, dst, want, NULL);
}

/* --- the file tools -------------------------------------------------------------------------------- */

static int run_tool(const FileJob *job, int root, int extra, ToolBuf *body, ToolResult *res) {
        switch (job->kind) {
        case FILE_JOB_CREATE: {
                ToolCreateSpec spec = {
                        .path = job->path,
                        .data = job->data,
                        .size = job->size,
                        .data_fd = extra,
                        .mode = job->mode,
                        .overwrite = job->overwrite,
                        .create_dirs = job->create_dirs,
                };
                return tool_file_create(root, &spec, res);
        }
        case FILE_JOB_VIEW:
                return tool_view(root, job->path, job->start_line, job->end_line, job->cap, body, res);
        case FILE_JOB_STR_REPLACE:
                return tool_str_replace(root, job->path, job->data, job->size, job->data2, job->size2, res);
        case FILE_JOB_INSERT:
                return tool_insert(root, job->path, job->line, job->data, job->size, res);
        case FILE_JOB_LS:
                return tool_ls(root, job->path, job->max_results, job->cap, body, res);
        case FILE_JOB_GLOB:
                if (!job->pattern)
                        return -EINVAL;
                return tool_glob(root, job->path, job->pattern, job->max_results, job->cap, body, res);
        case FILE_JOB_GREP: {
                char err[512];
                if (!job->pattern)
                        return -EINVAL;
                /* Compiled here, not in sandboxd: the caller's pattern meets PCRE2 (and its JIT) only in
                 * this process. What is wrong with it goes back as the body. */
                void *code = tool_grep_compile(job->pattern, job->ignore_case, err, sizeof(err));
                if (!code) {
                        res->status = TOOL_BAD_PATTERN;
                        return tool_buf_put(body, err, strlen(err));
                }
                ToolGrepSpec spec = {
                        .path = job->path,
                        .code = code,
                        .glob = job->glob,
                        .max = job->max_results,
                        .cap = job->cap,
                        .deadline = job->timeout_usec > 0 ? now_usec(CLOCK_MONOTONIC) + job->timeout_usec : 0,
                };
                int r = tool_grep(root, &spec, body, res);
                tool_grep_free(code);
                return r;
        }
        default:
                return -EINVAL;
        }
}

int file_job_run(const FileJob *job, int root, int fd0, int fd1) {
        ToolResult res = {};
        ToolBuf body = {};
        int r;

        switch (job->kind) {
        case FILE_JOB_READ:
                return do_read(job, fd0, fd1);
        case FILE_JOB_WRITE:
                return do_write(job, fd0);
        default:
                break;
        }
        if (fd0 < 0)
                return -EBADF;
        r = run_tool(job, root, fd1, &body, &res);
        if (r >= 0) {
                if (job->kind == FILE_JOB_VIEW)
                        res.n[4] = body.size;
                r = loop_write(fd0, &res, sizeof(res));
        }
        if (r >= 0 && body.size > 0)
                r = loop_write(job->kind == FILE_JOB_VIEW && fd1 >= 0 ? fd1 : fd0, body.data, body.size);
        tool_buf_free(&body);
        return r;
}

/* --- the loop -------------------------------------------------------------------------------------- */

/* Reads one job and does it; its status (0 or an errno) into *ret_status. 0 when the peer hung up. */
static int serve_one(int sock, int root, uint8_t *buf, int32_t *ret_status) {
        char control[CMSG_SPACE(sizeof(int) * 3)] = {};
        int fds[3] = { -EBADF, -EBADF, -EBADF };
        FileJobMessage msg;
        size_t n_fds = 0;
        int r;

        struct iovec iov[2] = { { .iov_base = &msg, .iov_len = sizeof(msg) },
                                { .iov_base = buf, .iov_len = FILE_JOB_INLINE_MAX } };
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = control,
                             .msg_controllen = sizeof(control) };
        ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0)
                return errno == EINTR || errno == EAGAIN ? -EAGAIN : -errno;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        n_fds = MIN((c->cmsg_len - CMSG_LEN(0)) / sizeof(int), ELEMENTSOF(fds));
                        memcpy(fds, CMSG_DATA(c), n_fds * sizeof(int));
                }
        /* whatever came, it is closed on the way out */
        _cleanup_close_ int f0 = fds[0], f1 = fds[1], f2 = fds[2];
        if (n == 0)
                return 0;
        if ((size_t) n < sizeof(msg) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || msg.magic != FILE_JOB_MAGIC ||
            msg.n_fds > 2 || (size_t) n != sizeof(msg) + msg.inline_size ||
            n_fds != msg.n_fds + (msg.inline_size == 0))
                return -EBADMSG;
        int job_fd = msg.inline_size == 0 ? fds[0] : -EBADF;
        int fd0 = fds[job_fd >= 0 ? 1 : 0], fd1 = fds[job_fd >= 0 ? 2 : 1];

        const void *data = buf;
        size_t size = msg.inline_size;
        void *map = NULL;
        if (job_fd >= 0) {
                struct stat st;
                if (fstat(job_fd, &st) < 0)
                        return -errno;
                if (st.st_size <= 0)
                        return -EBADMSG;
                size = (size_t) st.st_size;
                map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, job_fd, 0);
                if (map == MAP_FAILED)
                        return -errno;
                data = map;
        }
        FileJob job;
        r = file_job_decode(data, size, &job);
        if (r >= 0) {
                r = file_job_run(&job, root, fd0, fd1);
                *ret_status = r < 0 ? (-r > 4095 ? EIO : -r) : 0;
                r = 1;
        }
        if (map)
                munmap(map, size);
        return r;
}

int file_helper_serve(int sock, int watch, int idle_msec) {
        _cleanup_close_ int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return -errno;
        _cleanup_free_ uint8_t *buf = malloc(FILE_JOB_INLINE_MAX);
        if (!buf)
                return -ENOMEM;

        for (;;) {
                struct pollfd p[2] = { { .fd = sock, .events = POLLIN }, { .fd = watch, .events = POLLIN } };
                int r = poll(p, watch >= 0 ? 2 : 1, idle_msec);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -errno;
                /* idle too long, or the sandbox's init died */
                if (r == 0 || (watch >= 0 && p[1].revents != 0))
                        return 0;
                int32_t status = 0;
                r = serve_one(sock, root, buf, &status);
                if (r == -EAGAIN)
                        continue;
                if (r <= 0)
                        return r; /* hung up, or broke the protocol */
                if (send(sock, &status, sizeof(status), MSG_NOSIGNAL) != sizeof(status))
                        return 0; /* gone */
        }
}
