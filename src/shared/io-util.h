/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Plain I/O loops over file descriptors. */
#pragma once

#include <stddef.h>

/* Writes all of buf, retrying on EINTR and short writes. Returns 0 or a negative errno (-EIO if the fd
 * takes nothing). For blocking fds: -EAGAIN is returned as is. */
int loop_write(int fd, const void *buf, size_t n);

/* Reads a small file (a /proc one, say) with one read() into buf, NUL-terminated: at most size - 1
 * bytes. Returns the bytes read, or a negative errno (-EIO for an empty file). */
int read_small_file(const char *path, char *buf, size_t size);
