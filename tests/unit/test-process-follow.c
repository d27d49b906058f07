/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests of the follow stream's positions: event ids and Last-Event-ID, "<stdout>:<stderr>" or one offset. */
#include <errno.h>
#include <stdint.h>

#include "process-follow.h"
#include "test-util.h"

static void test_parse(void) {
        uint64_t p[2] = { 7, 7 };

        CHECK_INT(follow_position_parse("12:34", p), 0);
        CHECK_U64(p[0], 12);
        CHECK_U64(p[1], 34);
        /* one number: that offset in each stream */
        CHECK_INT(follow_position_parse("5", p), 0);
        CHECK_U64(p[0], 5);
        CHECK_U64(p[1], 5);
        CHECK_INT(follow_position_parse("0:18446744073709551615", p), 0);
        CHECK_U64(p[1], UINT64_MAX);

        /* refused, and the position left as it was */
        p[0] = p[1] = 9;
        static const char *const bad[] = { "", ":", "1:", ":2", "1:2:3", "-1", "1:-2", "x", "1 :2", "1:2 ",
                                           "18446744073709551616", "0x10", "1,2" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                CHECK_INT(follow_position_parse(bad[i], p), -EINVAL);
                CHECK_U64(p[0], 9);
                CHECK_U64(p[1], 9);
        }
        CHECK_INT(follow_position_parse(NULL, p), -EINVAL);
}

static void test_round_trip(void) {
        static const uint64_t cases[][2] = { { 0, 0 }, { 1, 0 }, { 0, 1 }, { 1048576, 77 },
                                             { UINT64_MAX, UINT64_MAX } };
        char buf[FOLLOW_POSITION_MAX];
        uint64_t p[2];

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                follow_position_format(cases[i], buf);
                CHECK_INT(follow_position_parse(buf, p), 0);
                CHECK_U64(p[0], cases[i][0]);
                CHECK_U64(p[1], cases[i][1]);
        }
        follow_position_format(cases[3], buf);
        CHECK_STR(buf, "1048576:77");
}

int main(void) {
        test_parse();
        test_round_trip();
        return test_finish("test-process-follow");
}
