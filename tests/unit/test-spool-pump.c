/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for spool-pump: the audit spool's delivery rules (group commit, batch bounds, answers, the
 * refused row, resending, backoff) without a bus or a database. */
#include <errno.h>
#include <systemd/sd-bus.h>

#include "spool-pump.h"
#include "test-util.h"

static void test_may_send(void) {
        /* light traffic: a row goes at once while fewer than two calls are out */
        CHECK(spool_may_send(0, 1, 0));
        CHECK(spool_may_send(1, 5, 3));
        /* under load: new rows wait for an answer to go together… */
        CHECK(!spool_may_send(SPOOL_GROUP_COMMIT_IN_FLIGHT, 10, 5));
        CHECK(!spool_may_send(SPOOL_GROUP_COMMIT_IN_FLIGHT, SPOOL_BATCH_ROWS - 1, 0));
        /* …unless a full batch waits already */
        CHECK(spool_may_send(SPOOL_GROUP_COMMIT_IN_FLIGHT, SPOOL_BATCH_ROWS, 0));
        CHECK(spool_may_send(SPOOL_MAX_IN_FLIGHT - 1, 10 * SPOOL_BATCH_ROWS, 0));
        /* never more calls out than the slots */
        CHECK(!spool_may_send(SPOOL_MAX_IN_FLIGHT, 10 * SPOOL_BATCH_ROWS, 0));
}

static void test_call_bounds(void) {
        CHECK_U64(spool_call_rows(true, 10, 0), SPOOL_BATCH_ROWS);
        CHECK_U64(spool_call_rows(false, 10, 0), 1);
        /* looking for a refused row: one per call up to single_until, then batches again */
        CHECK_U64(spool_call_rows(true, 10, 20), 1);
        CHECK_U64(spool_call_rows(true, 20, 20), SPOOL_BATCH_ROWS);

        /* the first row always goes, however large; the others while the call stays under the bound */
        CHECK(spool_call_takes(0, 0, 4 * SPOOL_BATCH_BYTES));
        CHECK(spool_call_takes(1, 100, SPOOL_BATCH_BYTES - 100));
        CHECK(!spool_call_takes(1, 100, SPOOL_BATCH_BYTES - 99));
        CHECK(!spool_call_takes(1, 4 * SPOOL_BATCH_BYTES, 0));
        CHECK(!spool_call_takes(1, 100, UINT64_MAX)); /* no wrap-around */
}

static void test_answer(void) {
        CHECK_INT(spool_answer(NULL, true, 3, 3), SPOOL_ANSWER_TAKEN);
        CHECK_INT(spool_answer(NULL, false, 1, 1), SPOOL_ANSWER_TAKEN);
        /* fewer ids than rows, or none readable: not taken */
        CHECK_INT(spool_answer(NULL, true, 3, 2), SPOOL_ANSWER_FAILED);
        CHECK_INT(spool_answer(NULL, true, 3, -1), SPOOL_ANSWER_FAILED);
        /* a logger without RecordBatch; a Record that is unknown is just a failure */
        CHECK_INT(spool_answer(SD_BUS_ERROR_UNKNOWN_METHOD, true, 3, -1), SPOOL_ANSWER_NO_BATCH);
        CHECK_INT(spool_answer(SD_BUS_ERROR_UNKNOWN_METHOD, false, 1, -1), SPOOL_ANSWER_FAILED);
        CHECK_INT(spool_answer(SD_BUS_ERROR_INVALID_ARGS, true, 3, -1), SPOOL_ANSWER_REFUSED);
        CHECK_INT(spool_answer(SD_BUS_ERROR_INVALID_ARGS, false, 1, -1), SPOOL_ANSWER_REFUSED);
        CHECK_INT(spool_answer(SD_BUS_ERROR_NO_REPLY, true, 3, -1), SPOOL_ANSWER_FAILED);
        CHECK_INT(spool_answer(SD_BUS_ERROR_ACCESS_DENIED, true, 3, -1), SPOOL_ANSWER_FAILED);
}

static void test_refused_index(void) {
        unsigned idx = 99;

        /* a call of one row: that row, whatever the message */
        CHECK_INT(spool_refused_index("anything", 1, &idx), 0);
        CHECK_U64(idx, 0);
        CHECK_INT(spool_refused_index(NULL, 1, &idx), 0);

        CHECK_INT(spool_refused_index("Row 2: stdout is longer than 1024 bytes.", 5, &idx), 0);
        CHECK_U64(idx, 2);
        CHECK_INT(spool_refused_index("Row 0: bad", 5, &idx), 0);
        CHECK_U64(idx, 0);
        /* a message that names no row of this call: look for it one row per call */
        idx = 99;
        CHECK_INT(spool_refused_index("Row 5: beyond the call", 5, &idx), -ENOENT);
        CHECK_INT(spool_refused_index("Row 2 no colon", 5, &idx), -ENOENT);
        CHECK_INT(spool_refused_index("Row -1: negative", 5, &idx), -ENOENT);
        CHECK_INT(spool_refused_index("Row : empty", 5, &idx), -ENOENT);
        CHECK_INT(spool_refused_index("Row 99999999999999999999999: huge", 5, &idx), -ENOENT);
        CHECK_INT(spool_refused_index("Invalid row.", 5, &idx), -ENOENT);
        CHECK_INT(spool_refused_index(NULL, 5, &idx), -ENOENT);
        CHECK_U64(idx, 99); /* untouched on failure */
}

static void test_rewind(void) {
        /* the failed call's rows go again */
        CHECK_INT(spool_rewind(30, 21, NULL, 0), 20);
        /* and those of every call still out, from the oldest */
        int64_t busy[] = { 31, 11, 41 };
        CHECK_INT(spool_rewind(50, 21, busy, 3), 10);
        /* never forward: rows before last_sent that were not sent stay unsent */
        CHECK_INT(spool_rewind(5, 21, busy, 3), 5);
}

static void test_retry(void) {
        uint64_t t = spool_retry_next(0);
        CHECK_U64(t, SPOOL_RETRY_MIN_USEC);
        CHECK_U64(spool_retry_next(t), 2 * SPOOL_RETRY_MIN_USEC);
        for (int i = 0; i < 100; i++)
                t = spool_retry_next(t);
        CHECK_U64(t, SPOOL_RETRY_MAX_USEC);
        CHECK_U64(spool_retry_next(UINT64_MAX), SPOOL_RETRY_MAX_USEC);
}

int main(void) {
        test_may_send();
        test_call_bounds();
        test_answer();
        test_refused_index();
        test_rewind();
        test_retry();
        return test_finish("test-spool-pump");
}
