/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Plain I/O loops over file descriptors. */
#include "io-util.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int loop_write(int fd, const void *buf, size_t n) {
        const char *p = buf;

        while (n > 0) {
                ssize_t k = write(fd, p, n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return -EIO;
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

int read_small_file(const char *path, char *buf, size_t size) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, size - 1);
        int saved = errno;
        (void) close(fd);
        if (n <= 0)
                return n < 0 ? -saved : -EIO;
        buf[n] = 0;
        return (int) n;
}

int fd_reserve(int fd, uint64_t offset, uint64_t size) {
        if (size == 0)
                return 0;
        if (offset > (uint64_t) INT64_MAX || size > (uint64_t) INT64_MAX - offset)
                return -EFBIG;
        while (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t) offset, (off_t) size) < 0) {
                if (errno == EINTR)
                        continue;
                if (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)
                        return -errno;
                return 0; /* EOPNOTSUPP and the like: no way to tell ahead */
        }
        return 0;
}
