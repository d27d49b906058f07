/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests file-helper.c: the job encoding, each kind of job on a scratch tree, and the helper's loop. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "file-helper.h"
#include "macro.h"
#include "test-util.h"

static char scratch[] = "/tmp/test-file-helper.XXXXXX";

static void test_encoding(void) {
        const FileJob in = {
                .kind = FILE_JOB_GREP,
                .path = "/home/sandbox/src",
                .pattern = "needle.*",
                .glob = "*.c",
                .data = "old\0with nul",
                .size = 12,
                .data2 = "new",
                .size2 = 3,
                .offset = 1,
                .length = 2,
                .cap = 3,
                .max_results = 4,
                .line = 5,
                .start_line = 6,
                .end_line = 7,
                .timeout_usec = 8,
                .mode = 0640,
                .create_dirs = true,
                .ignore_case = true,
        };
        ToolBuf b = {};
        FileJob out;

        CHECK_INT(file_job_encode(&in, &b), 0);
        CHECK_INT(file_job_decode(b.data, b.size, &out), 0);
        CHECK_INT(out.kind, FILE_JOB_GREP);
        CHECK_STR(out.path, in.path);
        CHECK_STR(out.pattern, in.pattern);
        CHECK_STR(out.glob, in.glob);
        CHECK_U64(out.size, 12);
        CHECK(out.data && memcmp(out.data, in.data, 12) == 0);
        CHECK_U64(out.size2, 3);
        CHECK(out.data2 && memcmp(out.data2, "new", 3) == 0);
        CHECK_U64(out.offset, 1);
        CHECK_U64(out.length, 2);
        CHECK_U64(out.cap, 3);
        CHECK_U64(out.max_results, 4);
        CHECK_U64(out.line, 5);
        CHECK_U64(out.start_line, 6);
        CHECK_U64(out.end_line, 7);
        CHECK_U64(out.timeout_usec, 8);
        CHECK_INT(out.mode, 0640);
        CHECK(out.create_dirs && out.ignore_case && !out.append && !out.overwrite);

        /* Every shorter prefix, and one byte more, is refused. */
        for (size_t n = 0; n < b.size; n++)
                CHECK_INT(file_job_decode(b.data, n, &out), -EBADMSG);
        CHECK_INT(tool_buf_put(&b, "x", 1), 0);
        CHECK_INT(file_job_decode(b.data, b.size, &out), -EBADMSG);
        tool_buf_free(&b);

        /* Absent strings and data stay absent; the other flags come through. */
        const FileJob bare = { .kind = FILE_JOB_WRITE, .path = "/tmp/x", .append = true, .overwrite = true };
        CHECK_INT(file_job_encode(&bare, &b), 0);
        CHECK_INT(file_job_decode(b.data, b.size, &out), 0);
        CHECK(!out.pattern && !out.glob && !out.data && !out.data2 && out.size == 0);
        CHECK(out.append && out.overwrite && !out.create_dirs && !out.ignore_case);

        /* A version or kind we do not know, a path without its NUL or with one inside. */
        uint8_t *p = b.data;
        p[0] ^= 0xff;
        CHECK_INT(file_job_decode(b.data, b.size, &out), -EBADMSG);
        p[0] ^= 0xff;
        uint32_t kind = _FILE_JOB_KIND_MAX;
        memcpy(p + 4, &kind, 4);
        CHECK_INT(file_job_decode(b.data, b.size, &out), -EBADMSG);
        kind = FILE_JOB_WRITE;
        memcpy(p + 4, &kind, 4);
        CHECK_INT(file_job_decode(b.data, b.size, &out), 0);
        p[12 + 6] = 'y'; /* "/tmp/x\0" → "/tmp/xy": no NUL at the end */
        CHECK_INT(file_job_decode(b.data, b.size, &out), -EBADMSG);
        p[12 + 6] = 0;
        p[b.size - 1] |= 0x80; /* a flag we do not know (the flags are the last u32) */
        CHECK_INT(file_job_decode(b.data, b.size, &out), -EBADMSG);
        p[b.size - 1] &= 0x7f;
        CHECK_INT(file_job_decode(b.data, b.size, &out), 0);
        p[12 + 2] = 0; /* "/t\0p/x\0" */
        CHECK_INT(file_job_decode(b.data, b.size, &out), -EBADMSG);
        tool_buf_free(&b);

        /* A job needs a path and a kind in range. */
        CHECK_INT(file_job_encode(&(FileJob) { .kind = FILE_JOB_READ }, &b), -EINVAL);
        CHECK_INT(file_job_encode(&(FileJob) { .kind = _FILE_JOB_KIND_MAX, .path = "/x" }, &b), -EINVAL);
        tool_buf_free(&b);
}

static char *path_in(const char *name) {
        char *p;
        CHECK(asprintf(&p, "%s/%s", scratch, name) > 0);
        return p;
}

static char *fd_contents(int fd, off_t from) {
        struct stat st;
        CHECK(fstat(fd, &st) == 0);
        size_t n = st.st_size > from ? (size_t) (st.st_size - from) : 0;
        char *s = calloc(1, n + 1);
        CHECK(pread(fd, s, n, from) == (ssize_t) n);
        return s;
}

static int memfd_with(const char *s) {
        int fd = memfd_create("test", MFD_CLOEXEC);
        CHECK(fd >= 0);
        CHECK(write(fd, s, strlen(s)) == (ssize_t) strlen(s));
        CHECK(lseek(fd, 0, SEEK_SET) == 0);
        return fd;
}

static void test_read_write(int root) {
        _cleanup_free_ char *file = path_in("dir/a.txt");
        int src = memfd_with("hello\nworld\n");

        /* Without create_dirs the directory must exist; with it, it is made. */
        FileJob w = { .kind = FILE_JOB_WRITE, .path = file, .mode = 0600 };
        CHECK_INT(file_job_run(&w, root, src, -1), -ENOENT);
        w.create_dirs = true;
        CHECK_INT(file_job_run(&w, root, src, -1), 0);
        struct stat st;
        CHECK(stat(file, &st) == 0 && (st.st_mode & 0777) == 0600 && st.st_size == 12);
        close(src);

        /* Append. */
        src = memfd_with("more\n");
        w.append = true;
        CHECK_INT(file_job_run(&w, root, src, -1), 0);
        close(src);

        int dst = memfd_create("dst", MFD_CLOEXEC), hdr = memfd_create("hdr", MFD_CLOEXEC);
        FileJob r = { .kind = FILE_JOB_READ, .path = file, .offset = 6, .cap = 5 };
        CHECK_INT(file_job_run(&r, root, dst, hdr), 0);
        FileHeader h = {};
        CHECK(pread(hdr, &h, sizeof(h), 0) == sizeof(h));
        CHECK_U64(h.size, 17);
        CHECK_INT(h.mode, 0600);
        CHECK_INT(h.truncated, 1);
        _cleanup_free_ char *got = fd_contents(dst, 0);
        CHECK_STR(got, "world");
        close(dst);
        close(hdr);

        /* A directory, a FIFO: refused without blocking; no fds: EBADF. */
        _cleanup_free_ char *dir = path_in("dir"), *fifo = path_in("fifo");
        CHECK(mkfifo(fifo, 0600) == 0);
        dst = memfd_create("dst", MFD_CLOEXEC);
        hdr = memfd_create("hdr", MFD_CLOEXEC);
        r = (FileJob) { .kind = FILE_JOB_READ, .path = dir };
        CHECK_INT(file_job_run(&r, root, dst, hdr), -EISDIR);
        r.path = fifo;
        CHECK_INT(file_job_run(&r, root, dst, hdr), -EINVAL);
        w = (FileJob) { .kind = FILE_JOB_WRITE, .path = fifo, .mode = 0600 };
        src = memfd_with("x");
        CHECK_INT(file_job_run(&w, root, src, -1), -EINVAL);
        CHECK_INT(file_job_run(&w, root, -1, -1), -EBADF);
        CHECK_INT(file_job_run(&r, root, -1, hdr), -EBADF);
        close(src);
        close(dst);
        close(hdr);
}

/* The tools take paths as the sandbox sees them: here, inside the scratch root. */
static void test_tools(int root) {
        ToolResult res;
        int out = memfd_create("out", MFD_CLOEXEC);

        FileJob c = { .kind = FILE_JOB_CREATE, .path = "/t/notes.txt", .data = "alpha\nbeta\n", .size = 11,
                      .mode = 0644, .create_dirs = true };
        CHECK_INT(file_job_run(&c, root, out, -1), 0);
        CHECK(pread(out, &res, sizeof(res), 0) == sizeof(res));
        CHECK_INT(res.status, TOOL_OK);
        CHECK(res.flags & TOOL_FLAG_CREATED);
        CHECK_U64(res.n[0], 11);
        close(out);

        /* FileCreate from the caller's fd. */
        out = memfd_create("out", MFD_CLOEXEC);
        int src = memfd_with("from an fd\n");
        c = (FileJob) { .kind = FILE_JOB_CREATE, .path = "/t/fd.txt", .mode = 0644 };
        CHECK_INT(file_job_run(&c, root, out, src), 0);
        close(src);
        close(out);
        _cleanup_free_ char *fdfile = path_in("t/fd.txt");
        int fd = open(fdfile, O_RDONLY | O_CLOEXEC);
        _cleanup_free_ char *fdtext = fd_contents(fd, 0);
        CHECK_STR(fdtext, "from an fd\n");
        close(fd);

        out = memfd_create("out", MFD_CLOEXEC);
        FileJob s = { .kind = FILE_JOB_STR_REPLACE, .path = "/t/notes.txt", .data = "beta", .size = 4,
                      .data2 = "gamma", .size2 = 5 };
        CHECK_INT(file_job_run(&s, root, out, -1), 0);
        CHECK(pread(out, &res, sizeof(res), 0) == sizeof(res));
        CHECK_INT(res.status, TOOL_OK);
        CHECK_U64(res.n[1], 2);
        close(out);

        /* View: the ToolResult, then the body, in the result fd; or the body in the caller's fd. */
        out = memfd_create("out", MFD_CLOEXEC);
        FileJob v = { .kind = FILE_JOB_VIEW, .path = "/t/notes.txt", .cap = 1 << 20 };
        CHECK_INT(file_job_run(&v, root, out, -1), 0);
        CHECK(pread(out, &res, sizeof(res), 0) == sizeof(res));
        CHECK_U64(res.n[0], 2);
        CHECK_U64(res.n[4], 26);
        _cleanup_free_ char *body = fd_contents(out, sizeof(res));
        CHECK_STR(body, "     1\talpha\n     2\tgamma\n");
        close(out);
        out = memfd_create("out", MFD_CLOEXEC);
        int dest = memfd_create("dest", MFD_CLOEXEC);
        CHECK_INT(file_job_run(&v, root, out, dest), 0);
        _cleanup_free_ char *rest = fd_contents(out, sizeof(res)), *viewed = fd_contents(dest, 0);
        CHECK_STR(rest, "");
        CHECK_STR(viewed, "     1\talpha\n     2\tgamma\n");
        close(out);
        close(dest);

        /* Grep compiles the pattern here (sandboxd never does); a bad one is TOOL_BAD_PATTERN with
         * PCRE2's message as the body. */
        out = memfd_create("out", MFD_CLOEXEC);
        FileJob g = { .kind = FILE_JOB_GREP, .path = "/t", .pattern = "GAM+A", .ignore_case = true,
                      .max_results = 10, .cap = 1 << 20, .timeout_usec = 60000000 };
        CHECK_INT(file_job_run(&g, root, out, -1), 0);
        CHECK(pread(out, &res, sizeof(res), 0) == sizeof(res));
        CHECK_U64(res.n[0], 1);
        close(out);
        out = memfd_create("out", MFD_CLOEXEC);
        g.pattern = "(";
        CHECK_INT(file_job_run(&g, root, out, -1), 0);
        CHECK(pread(out, &res, sizeof(res), 0) == sizeof(res));
        CHECK_INT(res.status, TOOL_BAD_PATTERN);
        _cleanup_free_ char *why = fd_contents(out, sizeof(res));
        CHECK(strstr(why, "parenthesis"));
        close(out);
        out = memfd_create("out", MFD_CLOEXEC);
        g.pattern = NULL;
        CHECK_INT(file_job_run(&g, root, out, -1), -EINVAL);
        /* Nothing leaves the root. */
        FileJob l = { .kind = FILE_JOB_LS, .path = "/../../..", .max_results = 100, .cap = 1 << 20 };
        CHECK_INT(file_job_run(&l, root, out, -1), 0);
        CHECK(pread(out, &res, sizeof(res), 0) == sizeof(res));
        CHECK_U64(res.n[0], 3); /* dir, fifo, t: the scratch root's own entries */
        CHECK_INT(file_job_run(&l, root, -1, -1), -EBADF);
        close(out);
}

/* As sandboxd sends a job: inline, or (in_memfd) its encoding in a memfd. */
static int send_job_as(int sock, const FileJob *job, int fd0, int fd1, bool in_memfd) {
        ToolBuf b = {};
        int r = file_job_encode(job, &b);
        if (r < 0)
                return r;
        int fds[3], n_fds = 0, job_fd = -1;
        FileJobMessage msg = { .magic = FILE_JOB_MAGIC, .n_fds = fd1 >= 0 ? 2 : fd0 >= 0 ? 1 : 0,
                               .inline_size = in_memfd ? 0 : b.size };
        if (in_memfd) {
                job_fd = memfd_create("job", MFD_CLOEXEC);
                CHECK(write(job_fd, b.data, b.size) == (ssize_t) b.size);
                fds[n_fds++] = job_fd;
        }
        if (fd0 >= 0)
                fds[n_fds++] = fd0;
        if (fd1 >= 0)
                fds[n_fds++] = fd1;
        char control[CMSG_SPACE(sizeof(fds))] = {};
        struct iovec iov[2] = { { .iov_base = &msg, .iov_len = sizeof(msg) },
                                { .iov_base = b.data, .iov_len = msg.inline_size } };
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
        if (n_fds > 0) {
                mh.msg_control = control;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        }
        r = sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t) (sizeof(msg) + msg.inline_size) ? 0 : -errno;
        if (job_fd >= 0)
                close(job_fd);
        tool_buf_free(&b);
        return r;
}

static int send_job(int sock, const FileJob *job, int fd0, int fd1) {
        return send_job_as(sock, job, fd0, fd1, false);
}

static int32_t answer(int sock) {
        int32_t status = -1;
        CHECK(recv(sock, &status, sizeof(status), 0) == sizeof(status));
        return status;
}

/* Runs the loop in a child on one end of a socketpair; returns its pid. */
static pid_t serve_in_child(int *ret_sock, int watch, int idle_msec) {
        int sv[2];
        CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
        pid_t pid = fork();
        if (pid == 0) {
                close(sv[0]);
                int r = file_helper_serve(sv[1], watch, idle_msec);
                _exit(r == 0 ? 0 : r == -EBADMSG ? 3 : 4);
        }
        close(sv[1]);
        *ret_sock = sv[0];
        return pid;
}

static int exit_status(pid_t pid) {
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void test_serve(void) {
        _cleanup_free_ char *file = path_in("served.txt");
        int sock;

        /* Jobs one after another, each answered with its status; the loop ends when we hang up. */
        pid_t pid = serve_in_child(&sock, -1, 10000);
        int src = memfd_with("served\n");
        CHECK_INT(send_job(sock, &(FileJob) { .kind = FILE_JOB_WRITE, .path = file, .mode = 0644 }, src, -1), 0);
        CHECK_INT(answer(sock), 0);
        close(src);
        int dst = memfd_create("dst", MFD_CLOEXEC), hdr = memfd_create("hdr", MFD_CLOEXEC);
        CHECK_INT(send_job(sock, &(FileJob) { .kind = FILE_JOB_READ, .path = file }, dst, hdr), 0);
        CHECK_INT(answer(sock), 0);
        _cleanup_free_ char *got = fd_contents(dst, 0);
        CHECK_STR(got, "served\n");
        /* a job too large to go inline comes in a memfd: a FileCreate of 100 KiB */
        char *big = malloc(100 * 1024);
        memset(big, 'z', 100 * 1024);
        int res_fd = memfd_create("res", MFD_CLOEXEC);
        _cleanup_free_ char *bigfile = path_in("big.txt");
        FileJob bj = { .kind = FILE_JOB_CREATE, .path = bigfile, .data = big, .size = 100 * 1024, .mode = 0644 };
        CHECK_INT(send_job_as(sock, &bj, res_fd, -1, true), 0);
        CHECK_INT(answer(sock), 0);
        struct stat st;
        CHECK(stat(bigfile, &st) == 0 && st.st_size == 100 * 1024);
        CHECK_INT(send_job(sock, &(FileJob) { .kind = FILE_JOB_READ, .path = "/nonexistent/x" }, dst, hdr), 0);
        CHECK_INT(answer(sock), ENOENT);
        close(dst);
        close(hdr);
        close(sock);
        CHECK_INT(exit_status(pid), 0);

        /* The same job inline is more than the helper takes that way: it is refused, not cut short. */
        pid = serve_in_child(&sock, -1, 10000);
        CHECK_INT(send_job(sock, &bj, res_fd, -1), 0);
        CHECK_INT(exit_status(pid), 3);
        close(sock);
        free(big);
        close(res_fd);

        /* A message that is not a job ends it with -EBADMSG, answering nothing. */
        pid = serve_in_child(&sock, -1, 10000);
        CHECK(send(sock, "junk", 4, MSG_NOSIGNAL) == 4);
        CHECK_INT(exit_status(pid), 3);
        close(sock);

        /* A job without the fds its message promises, likewise; and one whose size is not what came. */
        pid = serve_in_child(&sock, -1, 10000);
        FileJobMessage msg = { .magic = FILE_JOB_MAGIC, .n_fds = 1 };
        CHECK(send(sock, &msg, sizeof(msg), MSG_NOSIGNAL) == sizeof(msg));
        CHECK_INT(exit_status(pid), 3);
        close(sock);
        pid = serve_in_child(&sock, -1, 10000);
        msg = (FileJobMessage) { .magic = FILE_JOB_MAGIC, .inline_size = 100 };
        CHECK(send(sock, &msg, sizeof(msg), MSG_NOSIGNAL) == sizeof(msg));
        CHECK_INT(exit_status(pid), 3);
        close(sock);

        /* Idle for too long: it goes. */
        pid = serve_in_child(&sock, -1, 50);
        CHECK_INT(exit_status(pid), 0);
        close(sock);

        /* The watched process (the sandbox's init, in sandboxd) dying: it goes, with no idle limit. */
        pid_t watched = fork();
        if (watched == 0) {
                pause();
                _exit(0);
        }
        int pidfd = (int) syscall(SYS_pidfd_open, watched, 0);
        CHECK(pidfd >= 0);
        pid = serve_in_child(&sock, pidfd, -1);
        CHECK(kill(watched, SIGKILL) == 0);
        CHECK_INT(exit_status(watched), 128 + SIGKILL);
        CHECK_INT(exit_status(pid), 0);
        close(pidfd);
        close(sock);
}

int main(void) {
        test_mkdtemp(scratch);
        int root = open(scratch, O_PATH | O_DIRECTORY | O_CLOEXEC);
        CHECK(root >= 0);

        test_encoding();
        test_read_write(root);
        test_tools(root);
        test_serve();

        close(root);
        test_rm_rf(scratch);
        return test_finish("test-file-helper");
}
