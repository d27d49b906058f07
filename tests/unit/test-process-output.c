/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for process-output: the ring of a background process's output, read by offset. */
#include <errno.h>
#include <string.h>

#include "macro.h"
#include "process-output.h"
#include "sandbox-process.h"
#include "test-util.h"

static void check_read(OutputRing *r, uint64_t offset, size_t max, const char *want, uint64_t want_start) {
        char buf[256];
        uint64_t start = 12345;
        size_t n = 999;

        CHECK_INT(output_ring_read(r, offset, buf, MIN(max, sizeof(buf)), &start, &n), 0);
        CHECK_U64(start, want_start);
        CHECK_U64(n, strlen(want));
        CHECK(memcmp(buf, want, MIN(n, strlen(want))) == 0);
}

/* Below its capacity it keeps everything, readable from any offset up to the end. */
static void test_small(void) {
        OutputRing r;

        output_ring_init(&r, 16);
        check_read(&r, 0, 10, "", 0);
        CHECK_INT(output_ring_append(&r, "hello ", 6), 0);
        CHECK_INT(output_ring_append(&r, "world", 5), 0);
        CHECK_U64(r.total, 11);
        CHECK_U64(output_ring_first_offset(&r), 0);
        check_read(&r, 0, 100, "hello world", 0);
        check_read(&r, 6, 100, "world", 6);
        check_read(&r, 6, 3, "wor", 6);
        check_read(&r, 11, 100, "", 11);
        /* past the end: nothing was written there yet */
        char buf[4];
        uint64_t start;
        size_t n;
        CHECK_INT(output_ring_read(&r, 12, buf, sizeof(buf), &start, &n), -ERANGE);
        output_ring_done(&r);
}

/* Beyond it the oldest bytes go; first_offset says how many, and reads from before it start there. */
static void test_wrap(void) {
        OutputRing r;

        output_ring_init(&r, 8);
        CHECK_INT(output_ring_append(&r, "abcdef", 6), 0);
        CHECK_INT(output_ring_append(&r, "ghij", 4), 0); /* drops ab */
        CHECK_U64(r.total, 10);
        CHECK_U64(output_ring_first_offset(&r), 2);
        check_read(&r, 0, 100, "cdefghij", 2);
        check_read(&r, 5, 100, "fghij", 5);
        check_read(&r, 7, 2, "hi", 7);
        CHECK_INT(output_ring_append(&r, "klm", 3), 0); /* drops cde */
        check_read(&r, 0, 100, "fghijklm", 5);
        check_read(&r, 12, 100, "m", 12);
        /* a write larger than the ring: only its tail stays, and the offsets still count all of it */
        CHECK_INT(output_ring_append(&r, "0123456789ABCDEF", 16), 0);
        CHECK_U64(r.total, 29);
        CHECK_U64(output_ring_first_offset(&r), 21);
        check_read(&r, 3, 100, "89ABCDEF", 21);
        check_read(&r, 25, 100, "CDEF", 25);
        output_ring_done(&r);
}

/* Byte by byte across many turns of the ring: what it keeps is always the last cap bytes. */
static void test_many_turns(void) {
        OutputRing r;
        char want[7], buf[7];

        output_ring_init(&r, 7);
        for (unsigned i = 0; i < 1000; i++) {
                char c = (char) ('a' + i % 26);
                CHECK_INT(output_ring_append(&r, &c, 1), 0);
        }
        for (unsigned i = 0; i < 7; i++)
                want[i] = (char) ('a' + (993 + i) % 26);
        uint64_t start;
        size_t n;
        CHECK_INT(output_ring_read(&r, 0, buf, sizeof(buf), &start, &n), 0);
        CHECK_U64(start, 993);
        CHECK_U64(n, 7);
        CHECK(memcmp(buf, want, 7) == 0);
        output_ring_done(&r);
}

/* The ring grows with the output, and what it had survives the growth wherever its head was. */
static void test_growth(void) {
        OutputRing r;
        static char big[10000], buf[10000];

        for (size_t i = 0; i < sizeof(big); i++)
                big[i] = (char) (i * 7);
        output_ring_init(&r, 6000);
        CHECK_INT(output_ring_append(&r, big, 100), 0);
        CHECK(r.size < 6000);
        CHECK_INT(output_ring_append(&r, big + 100, 9900), 0);
        CHECK_U64(r.size, 6000);
        uint64_t start;
        size_t n;
        CHECK_INT(output_ring_read(&r, 0, buf, sizeof(buf), &start, &n), 0);
        CHECK_U64(start, 4000);
        CHECK_U64(n, 6000);
        CHECK(memcmp(buf, big + 4000, 6000) == 0);
        output_ring_done(&r);
}

/* The state and stream names round-trip. */
static void test_tables(void) {
        for (ProcessState st = 0; st < _PROCESS_STATE_MAX; st++)
                CHECK_INT(process_state_from_string(process_state_to_string(st)), st);
        CHECK_STR(process_state_to_string(PROCESS_TIMED_OUT), "timed-out");
        CHECK_INT(process_state_from_string("lost"), -EINVAL);
        for (ProcessStream st = 0; st < _PROCESS_STREAM_MAX; st++)
                CHECK_INT(process_stream_from_string(process_stream_to_string(st)), st);
        CHECK_INT(process_stream_from_string("stdin"), -EINVAL);
}

int main(void) {
        test_tables();
        test_small();
        test_wrap();
        test_many_turns();
        test_growth();
        return test_finish("test-process-output");
}
