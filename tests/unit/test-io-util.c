/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests io-util.c: loop_write() through a pipe, read_small_file() on /proc and on scratch files,
 * fd_reserve() on a scratch file. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io-util.h"
#include "test-util.h"

int main(void) {
        signal(SIGPIPE, SIG_IGN);
        char buf[64], path[] = "/tmp/test-io-util.XXXXXX";
        int p[2];

        CHECK(pipe(p) == 0);
        CHECK_INT(loop_write(p[1], "hello", 5), 0);
        CHECK(read(p[0], buf, sizeof(buf)) == 5 && memcmp(buf, "hello", 5) == 0);
        close(p[0]);
        CHECK_INT(loop_write(p[1], "x", 1), -EPIPE); /* nobody reads: EPIPE (SIGPIPE ignored below) */
        close(p[1]);

        /* a /proc file, NUL-terminated, and one longer than the buffer: cut to size - 1 */
        CHECK(read_small_file("/proc/self/stat", buf, sizeof(buf)) == (int) strlen(buf) && strlen(buf) > 0);
        CHECK_INT(read_small_file("/proc/self/stat", buf, 8), 7);
        CHECK_INT((int) strlen(buf), 7);
        CHECK_INT(read_small_file("/nonexistent/file", buf, sizeof(buf)), -ENOENT);
        test_mkdtemp(path);
        char file[128];
        snprintf(file, sizeof(file), "%s/empty", path);
        FILE *f = fopen(file, "w");
        CHECK(f && fclose(f) == 0);
        CHECK_INT(read_small_file(file, buf, sizeof(buf)), -EIO);

        /* fd_reserve(): room, but neither size nor content changes; no room: the reason, nothing changed */
        int fd = open(file, O_RDWR | O_CLOEXEC);
        struct stat st;
        CHECK(fd >= 0);
        CHECK(write(fd, "abc", 3) == 3);
        CHECK_INT(fd_reserve(fd, 0, 1 << 20), 0);
        CHECK(fstat(fd, &st) == 0 && st.st_size == 3);
        CHECK(pread(fd, buf, sizeof(buf), 0) == 3 && memcmp(buf, "abc", 3) == 0);
        CHECK_INT(fd_reserve(fd, 0, 0), 0);
        int r = fd_reserve(fd, 0, UINT64_C(1) << 62);
        CHECK(r == -ENOSPC || r == -EFBIG || r == -EDQUOT);
        CHECK_INT(fd_reserve(fd, UINT64_MAX - 1, 2), -EFBIG);
        CHECK(fstat(fd, &st) == 0 && st.st_size == 3);
        close(fd);
        test_rm_rf(path);
        return test_finish("test-io-util");
}
