/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A background process's output stream kept in a ring (see process-output.h). */
#include "process-output.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

void output_ring_init(OutputRing *r, size_t cap) {
        *r = (OutputRing) { .cap = MAX(cap, (size_t) 1) };
}

void output_ring_done(OutputRing *r) {
        free(r->buf);
        r->buf = NULL;
        r->size = r->len = r->head = 0;
}

/* The byte i places after the oldest kept one. */
static size_t ring_pos(const OutputRing *r, size_t i) {
        return (r->head + i) % r->size;
}

int output_ring_append(OutputRing *r, const void *data, size_t n) {
        const char *p = data;

        r->total += n;
        /* Only the last cap bytes of data can survive it. */
        if (n > r->cap) {
                p += n - r->cap;
                n = r->cap;
        }
        /* Grow while not full, so that a process that writes little costs little. */
        if (r->size < r->cap && r->len + n > r->size) {
                size_t want = MIN(r->cap, MAX(r->len + n, MIN(r->cap, MAX(r->size * 2, (size_t) 4096))));
                char *nb = malloc(want);
                if (!nb)
                        return -ENOMEM;
                /* Unrolled into the new buffer, oldest first. */
                for (size_t i = 0; i < r->len; i++)
                        nb[i] = r->buf[ring_pos(r, i)];
                free(r->buf);
                r->buf = nb;
                r->size = want;
                r->head = 0;
        }
        while (n > 0) {
                if (r->len < r->size) {
                        /* room: after the newest byte */
                        size_t at = ring_pos(r, r->len);
                        size_t k = MIN(n, MIN(r->size - r->len, r->size - at));
                        memcpy(r->buf + at, p, k);
                        r->len += k;
                        p += k;
                        n -= k;
                        continue;
                }
                /* full: overwrite the oldest bytes (the ring is full only at cap) */
                size_t k = MIN(n, r->size - r->head);
                memcpy(r->buf + r->head, p, k);
                r->head = (r->head + k) % r->size;
                p += k;
                n -= k;
        }
        return 0;
}

uint64_t output_ring_first_offset(const OutputRing *r) {
        return r->total - r->len;
}

int output_ring_read(const OutputRing *r, uint64_t offset, void *dst, size_t max, uint64_t *ret_start,
                     size_t *ret_n) {
        uint64_t first = output_ring_first_offset(r);
        char *d = dst;

        if (offset > r->total)
                return -ERANGE;
        if (offset < first)
                offset = first;
        size_t skip = (size_t) (offset - first);
        size_t n = MIN(max, r->len - skip);
        for (size_t done = 0; done < n;) {
                size_t at = ring_pos(r, skip + done);
                size_t k = MIN(n - done, r->size - at);
                memcpy(d + done, r->buf + at, k);
                done += k;
        }
        *ret_start = offset;
        *ret_n = n;
        return 0;
}
