/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The audit spool's delivery rules, without a bus or a database: when a call may go, which rows it takes,
 * what an answer means, where to resend from and how long to wait (audit-spool.c applies them). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

#define SPOOL_MAX_IN_FLIGHT 8
#define SPOOL_GROUP_COMMIT_IN_FLIGHT 2 /* calls out before new rows wait to go together */
/* Rows per RecordBatch (the logger's group commit takes 256), and bytes of output and detail per call
 * beyond its first row: the system bus refuses messages over 32 MiB. */
#define SPOOL_BATCH_ROWS 256
#define SPOOL_BATCH_BYTES (UINT64_C(8) << 20)
#define SPOOL_RETRY_MIN_USEC (100 * USEC_PER_MSEC)
#define SPOOL_RETRY_MAX_USEC (10 * USEC_PER_SEC)

/* Whether one more call may go, with n_in_flight out and rows up to last_sent handed to the bus of those
 * up to last_spooled. Under load (GROUP_COMMIT_IN_FLIGHT out) new rows wait to go together, unless a full
 * batch waits already. */
bool spool_may_send(unsigned n_in_flight, int64_t last_spooled, int64_t last_sent);

/* At most how many rows the next call takes: one without RecordBatch, or while a row the logger refused is
 * looked for (rows up to single_until); else SPOOL_BATCH_ROWS. */
unsigned spool_call_rows(bool batch, int64_t last_sent, int64_t single_until);

/* Whether a row of size bytes (detail and output) still goes into a call holding n rows of bytes: the
 * first always does. */
bool spool_call_takes(unsigned n, uint64_t bytes, uint64_t size);

typedef enum SpoolAnswer {
        SPOOL_ANSWER_TAKEN,    /* one id per row: the rows may go */
        SPOOL_ANSWER_NO_BATCH, /* a logger without RecordBatch: the same rows again, one Record each */
        SPOOL_ANSWER_REFUSED,  /* InvalidArgs: one of the rows is refused (spool_refused_index()) */
        SPOOL_ANSWER_FAILED,   /* anything else: stop, resend later from the oldest row not taken */
} SpoolAnswer;

/* What the answer to a call of n rows means: error_name NULL for a method return holding ids ids
 * (negative: not readable). */
SpoolAnswer spool_answer(const char *error_name, bool batch, unsigned n, int64_t ids);

/* Which of a refused call's n rows the logger refused: RecordBatch says "Row <i>: …". Returns 0 with
 * *ret_index, or -ENOENT if the message names none (then the rows go one per call until it does). */
int spool_refused_index(const char *message, unsigned n, unsigned *ret_index);

/* Where to resend from after the call whose first row is first failed: the row before the oldest of it
 * and the calls still out (busy_first, n_busy of them), unless last_sent is older still. */
int64_t spool_rewind(int64_t last_sent, int64_t first, const int64_t *busy_first, size_t n_busy);

/* The wait before the next try: SPOOL_RETRY_MIN_USEC at first, then twice the last, up to the maximum. */
uint64_t spool_retry_next(uint64_t retry_usec);
