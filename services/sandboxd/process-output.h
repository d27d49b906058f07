/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A background process's output stream: the last bytes it wrote, in a ring of fixed capacity, readable
 * by absolute byte offset (bytes since the process started), with what was dropped said by first_offset. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct OutputRing {
        char *buf;        /* grown up to cap as output comes, then reused in a circle */
        size_t size;      /* bytes allocated */
        size_t cap;       /* the most it keeps */
        size_t head;      /* where the oldest byte kept is, once the ring is full (size == cap) */
        size_t len;       /* bytes kept */
        uint64_t total;   /* bytes ever written: the offset after the newest */
        bool ended;       /* the writer closed its end: no more bytes come */
} OutputRing;

/* cap: at least 1 byte. */
void output_ring_init(OutputRing *r, size_t cap);
void output_ring_done(OutputRing *r);

/* Keeps data, dropping the oldest bytes beyond cap. 0, or -ENOMEM (then nothing of data is kept, but
 * total counts it: the offsets stay those of the stream). */
int output_ring_append(OutputRing *r, const void *data, size_t n);

/* The offset of the oldest byte kept (everything before it was dropped). */
uint64_t output_ring_first_offset(const OutputRing *r);

/* Copies up to max bytes from offset on into dst (which holds max bytes): from first_offset if offset
 * is older. Returns the bytes copied and the offset they start at in *ret_start; -ERANGE if offset is past
 * total (nothing written there yet). */
int output_ring_read(const OutputRing *r, uint64_t offset, void *dst, size_t max, uint64_t *ret_start,
                     size_t *ret_n);
