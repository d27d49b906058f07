/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Plain I/O loops over file descriptors. */
#include "io-util.h"

#include <errno.h>
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
