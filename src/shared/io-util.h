/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Plain I/O loops over file descriptors. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Writes all of buf, retrying on EINTR and short writes. Returns 0 or a negative errno (-EIO if the fd
 * takes nothing). For blocking fds: -EAGAIN is returned as is. */
int loop_write(int fd, const void *buf, size_t n);

/* Reads a small file (a /proc one, say) with one read() into buf, NUL-terminated: at most size - 1
 * bytes. Returns the bytes read, or a negative errno (-EIO for an empty file). */
int read_small_file(const char *path, char *buf, size_t size);

/* Makes sure the blocks for [offset, offset + size) of a regular file exist, without changing its size
 * or content (fallocate(FALLOC_FL_KEEP_SIZE)), so that writing them cannot fail for want of space: the
 * check before a write that must not stop halfway. Returns 0, also where the file system cannot
 * preallocate (nothing is known then); -ENOSPC, -EDQUOT or -EFBIG if there is no room. */
int fd_reserve(int fd, uint64_t offset, uint64_t size);
