/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What every fuzz target shares: the libFuzzer entry point, NUL-terminated copies and input-as-a-file. */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Called by libFuzzer, or by fuzz-main.c once per corpus file. Returns 0; a bug aborts (assert, ASan). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A failed check in a target is a bug found: abort so that libFuzzer saves the input as a crasher. */
#define FUZZ_ASSERT(expr)                                                                                   \
        do {                                                                                                \
                if (!(expr)) {                                                                              \
                        fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #expr);       \
                        abort();                                                                            \
                }                                                                                           \
        } while (0)

/* data[0..size) as a malloc'd C string of exactly size+1 bytes (so ASan sees any over-read). NULL on
 * ENOMEM, which a target treats as "nothing to do". */
static inline char *fuzz_strndup(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);

        if (!s)
                return NULL;
        if (size > 0)
                memcpy(s, data, size);
        s[size] = 0;
        return s;
}

/* Splits *data at its first '\n': returns the part before it as a C string and advances *data and *size
 * past it; without a '\n', returns everything. Embedded NULs simply end the C string early, as they do
 * for the real callers (D-Bus and libmicrohttpd hand us C strings). */
static inline char *fuzz_take_line(const uint8_t **data, size_t *size) {
        const uint8_t *nl = memchr(*data, '\n', *size);
        size_t n = nl ? (size_t) (nl - *data) : *size;
        char *s = fuzz_strndup(*data, n);

        *data += nl ? n + 1 : n;
        *size -= nl ? n + 1 : n;
        return s;
}

/* The input as a file, for the config loaders that take a path: a memfd, named through /proc/self/fd,
 * so that millions of runs touch no disk. Returns the fd (the caller closes it) and fills path. */
static inline int fuzz_memfd(const uint8_t *data, size_t size, char path[static 64]) {
        int fd = memfd_create("fuzz-input", MFD_CLOEXEC);

        if (fd < 0)
                return -1;
        for (size_t done = 0; done < size;) {
                ssize_t n = write(fd, data + done, size - done);
                if (n <= 0) {
                        close(fd);
                        return -1;
                }
                done += (size_t) n;
        }
        snprintf(path, 64, "/proc/self/fd/%d", fd);
        return fd;
}
