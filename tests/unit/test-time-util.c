/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for time-util: clocks, RFC 3339 round trips, and size/duration/percent parsing. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "time-util.h"
#include "test-util.h"


/* Runs parser(s, &v) and compares both the return value and (on success) the result; on failure the
 * output must be left alone, which the sentinel checks. */
#define CHECK_PARSE(parser, type, s, expected_r, expected_v)                                                \
        do {                                                                                                \
                type _v = (type) 0xdeadbeef;                                                                \
                int _r = parser((s), &_v);                                                                  \
                if (_r != (expected_r) || (_r == 0 && _v != (type) (expected_v)) ||                         \
                    (_r != 0 && _v != (type) 0xdeadbeef)) {                                                 \
                        fprintf(stderr, "%s:%d: %s(\"%s\") = %d, %" PRIu64 "; expected %d, %" PRIu64 "\n",  \
                                __FILE__, __LINE__, #parser, strna(s), _r, (uint64_t) _v, (expected_r),     \
                                (uint64_t) (expected_v));                                                   \
                        failures++;                                                                         \
                }                                                                                           \
        } while (0)

#define CHECK_FORMAT(usec, expected)                                                                        \
        do {                                                                                                \
                char _buf[RFC3339_USEC_MAX] = "untouched";                                                  \
                int _r = format_rfc3339_usec((usec), _buf);                                                 \
                if (_r != 0 || !streq(_buf, (expected))) {                                                  \
                        fprintf(stderr, "%s:%d: format_rfc3339_usec(%" PRIu64 ") = %d \"%s\"; expected "    \
                                "\"%s\"\n", __FILE__, __LINE__, (uint64_t) (usec), _r, _buf, (expected));   \
                        failures++;                                                                         \
                }                                                                                           \
        } while (0)

static void test_now(void) {
        uint64_t a = now_usec(CLOCK_MONOTONIC), b = now_usec(CLOCK_MONOTONIC);
        CHECK(a > 0);
        CHECK(b >= a);

        /* Against time(): 2020-01-01 is a floor no real clock is below. */
        uint64_t r = now_usec(CLOCK_REALTIME);
        CHECK(r > UINT64_C(1577836800) * USEC_PER_SEC);
        uint64_t t = (uint64_t) time(NULL);
        CHECK(r / USEC_PER_SEC + 2 >= t && r / USEC_PER_SEC <= t + 2);
}

static void test_format(void) {
        CHECK_FORMAT(0, "1970-01-01T00:00:00.000000Z");
        CHECK_FORMAT(1, "1970-01-01T00:00:00.000001Z");
        CHECK_FORMAT(UINT64_C(1793451801590139), "2026-10-31T13:03:21.590139Z");
        CHECK_FORMAT(UINT64_C(951782400) * USEC_PER_SEC, "2000-02-29T00:00:00.000000Z");
        CHECK_FORMAT(UINT64_C(253402300799999999), "9999-12-31T23:59:59.999999Z");

        char buf[RFC3339_USEC_MAX] = "untouched";
        CHECK(format_rfc3339_usec(UINT64_C(253402300800000000), buf) == -ERANGE);
        CHECK(format_rfc3339_usec(UINT64_MAX, buf) == -ERANGE);
        CHECK(streq(buf, "untouched"));

        /* Cross-check with gmtime_r() over a spread of times, so the calendar arithmetic is not only
         * tested against values worked out by hand. */
        for (uint64_t s = 0; s < UINT64_C(253402300800); s += UINT64_C(86399) * 367 + 12345) {
                struct tm tm;
                time_t tt = (time_t) s;
                char expected[64], got[RFC3339_USEC_MAX];

                CHECK(gmtime_r(&tt, &tm));
                strftime(expected, sizeof(expected), "%Y-%m-%dT%H:%M:%S.123456Z", &tm);
                CHECK(format_rfc3339_usec(s * USEC_PER_SEC + 123456, got) == 0);
                if (!streq(got, expected)) {
                        fprintf(stderr, "%s:%d: %" PRIu64 " formats as %s, gmtime says %s\n", __FILE__,
                                __LINE__, s, got, expected);
                        failures++;
                        break;
                }

                uint64_t back;
                CHECK(parse_rfc3339_usec(got, &back) == 0 && back == s * USEC_PER_SEC + 123456);
        }
}

static void test_parse_rfc3339(void) {
        const uint64_t T = UINT64_C(1793451801) * USEC_PER_SEC;

        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31T13:03:21.590139Z", 0, T + 590139);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31T13:03:21Z", 0, T);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31T13:03:21.5Z", 0, T + 500000);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31T13:03:21.059Z", 0, T + 59000);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31T13:03:21.590139999Z", 0, T + 590139);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31T13:03:21.590139+00:00", 0, T + 590139);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31t13:03:21z", 0, T);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31T15:33:21+02:30", 0, T);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31T08:03:21-05:00", 0, T);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "1970-01-01T00:00:00Z", 0, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2000-02-29T00:00:00Z", 0, 951782400 * USEC_PER_SEC);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2016-12-31T23:59:60Z", 0, 1483228800 * USEC_PER_SEC);

        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "1969-12-31T23:59:59Z", -ERANGE, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "1970-01-01T00:00:00+00:01", -ERANGE, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, NULL, -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "", -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31T13:03:21", -EINVAL, 0);     /* no zone */
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31 13:03:21Z", -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31T13:03:21.Z", -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31T13:03:21.1234567890Z", -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31T13:03:21Z ", -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, " 2026-10-31T13:03:21Z", -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-1-31T13:03:21Z", -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-13-01T00:00:00Z", -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-00-01T00:00:00Z", -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-04-31T00:00:00Z", -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-02-29T00:00:00Z", -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "1900-02-29T00:00:00Z", -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-00T00:00:00Z", -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31T24:00:00Z", -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31T23:60:00Z", -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31T23:00:61Z", -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31T13:03:21+0000", -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "2026-10-31T13:03:21+24:00", -EINVAL, 0);
        CHECK_PARSE(parse_rfc3339_usec, uint64_t, "+026-10-31T13:03:21Z", -EINVAL, 0);
}

static void test_parse_size(void) {
        CHECK_PARSE(parse_size, uint64_t, "0", 0, 0);
        CHECK_PARSE(parse_size, uint64_t, "1024", 0, 1024);
        CHECK_PARSE(parse_size, uint64_t, "64K", 0, 65536);
        CHECK_PARSE(parse_size, uint64_t, "1M", 0, UINT64_C(1) << 20);
        CHECK_PARSE(parse_size, uint64_t, "1G", 0, UINT64_C(1) << 30);
        CHECK_PARSE(parse_size, uint64_t, "2T", 0, UINT64_C(2) << 40);
        CHECK_PARSE(parse_size, uint64_t, "3P", 0, UINT64_C(3) << 50);
        CHECK_PARSE(parse_size, uint64_t, "15E", 0, UINT64_C(15) << 60);
        CHECK_PARSE(parse_size, uint64_t, "18446744073709551615", 0, UINT64_MAX);

        CHECK_PARSE(parse_size, uint64_t, "18446744073709551616", -ERANGE, 0);
        CHECK_PARSE(parse_size, uint64_t, "16E", -ERANGE, 0);
        CHECK_PARSE(parse_size, uint64_t, "17179869184G", -ERANGE, 0);
        CHECK_PARSE(parse_size, uint64_t, "99999999999999999999999K", -ERANGE, 0);

        CHECK_PARSE(parse_size, uint64_t, NULL, -EINVAL, 0);
        CHECK_PARSE(parse_size, uint64_t, "", -EINVAL, 0);
        CHECK_PARSE(parse_size, uint64_t, "K", -EINVAL, 0);
        CHECK_PARSE(parse_size, uint64_t, "-1", -EINVAL, 0);
        CHECK_PARSE(parse_size, uint64_t, "+1", -EINVAL, 0);
        CHECK_PARSE(parse_size, uint64_t, " 1", -EINVAL, 0);
        CHECK_PARSE(parse_size, uint64_t, "1 ", -EINVAL, 0);
        CHECK_PARSE(parse_size, uint64_t, "1k", -EINVAL, 0);
        CHECK_PARSE(parse_size, uint64_t, "1KB", -EINVAL, 0);
        CHECK_PARSE(parse_size, uint64_t, "1X", -EINVAL, 0);
        CHECK_PARSE(parse_size, uint64_t, "1.5G", -EINVAL, 0);
        CHECK_PARSE(parse_size, uint64_t, "0x10", -EINVAL, 0);
}

static void test_parse_sec(void) {
        CHECK_PARSE(parse_sec, uint64_t, "0", 0, 0);
        CHECK_PARSE(parse_sec, uint64_t, "20", 0, 20 * USEC_PER_SEC);
        CHECK_PARSE(parse_sec, uint64_t, "20s", 0, 20 * USEC_PER_SEC);
        CHECK_PARSE(parse_sec, uint64_t, "20sec", 0, 20 * USEC_PER_SEC);
        CHECK_PARSE(parse_sec, uint64_t, "5min", 0, 5 * USEC_PER_MINUTE);
        CHECK_PARSE(parse_sec, uint64_t, "5m", 0, 5 * USEC_PER_MINUTE);
        CHECK_PARSE(parse_sec, uint64_t, "2h", 0, 2 * USEC_PER_HOUR);
        CHECK_PARSE(parse_sec, uint64_t, "1d", 0, USEC_PER_DAY);
        CHECK_PARSE(parse_sec, uint64_t, "7d", 0, 7 * USEC_PER_DAY);
        CHECK_PARSE(parse_sec, uint64_t, "1w", 0, USEC_PER_WEEK);
        CHECK_PARSE(parse_sec, uint64_t, "500ms", 0, 500 * USEC_PER_MSEC);
        CHECK_PARSE(parse_sec, uint64_t, "250us", 0, 250);
        CHECK_PARSE(parse_sec, uint64_t, "3 hours", 0, 3 * USEC_PER_HOUR);
        CHECK_PARSE(parse_sec, uint64_t, "1h30min", 0, 90 * USEC_PER_MINUTE);
        CHECK_PARSE(parse_sec, uint64_t, "1h 30min 5s", 0, 90 * USEC_PER_MINUTE + 5 * USEC_PER_SEC);

        CHECK_PARSE(parse_sec, uint64_t, "18446744073709s", 0, UINT64_C(18446744073709) * USEC_PER_SEC);
        CHECK_PARSE(parse_sec, uint64_t, "18446744073710s", -ERANGE, 0);
        CHECK_PARSE(parse_sec, uint64_t, "18446744073709551616us", -ERANGE, 0);
        CHECK_PARSE(parse_sec, uint64_t, "18446744073709551615us 1us", -ERANGE, 0);

        CHECK_PARSE(parse_sec, uint64_t, NULL, -EINVAL, 0);
        CHECK_PARSE(parse_sec, uint64_t, "", -EINVAL, 0);
        CHECK_PARSE(parse_sec, uint64_t, "s", -EINVAL, 0);
        CHECK_PARSE(parse_sec, uint64_t, "-5s", -EINVAL, 0);
        CHECK_PARSE(parse_sec, uint64_t, "5x", -EINVAL, 0);
        CHECK_PARSE(parse_sec, uint64_t, "5 ", -EINVAL, 0);
        CHECK_PARSE(parse_sec, uint64_t, " 5", -EINVAL, 0);
        CHECK_PARSE(parse_sec, uint64_t, "5mins", -EINVAL, 0);
        CHECK_PARSE(parse_sec, uint64_t, "5ss", -EINVAL, 0);
        CHECK_PARSE(parse_sec, uint64_t, "1.5h", -EINVAL, 0);
        CHECK_PARSE(parse_sec, uint64_t, "1h,30min", -EINVAL, 0);
}

static void test_parse_percent(void) {
        CHECK_PARSE(parse_percent, unsigned, "0%", 0, 0);
        CHECK_PARSE(parse_percent, unsigned, "20%", 0, 20);
        CHECK_PARSE(parse_percent, unsigned, "150%", 0, 150);
        CHECK_PARSE(parse_percent, unsigned, "10000%", 0, 10000);

        CHECK_PARSE(parse_percent, unsigned, "10001%", -ERANGE, 0);
        CHECK_PARSE(parse_percent, unsigned, "99999999999999999999999%", -ERANGE, 0);

        CHECK_PARSE(parse_percent, unsigned, NULL, -EINVAL, 0);
        CHECK_PARSE(parse_percent, unsigned, "", -EINVAL, 0);
        CHECK_PARSE(parse_percent, unsigned, "%", -EINVAL, 0);
        CHECK_PARSE(parse_percent, unsigned, "20", -EINVAL, 0);
        CHECK_PARSE(parse_percent, unsigned, "20 %", -EINVAL, 0);
        CHECK_PARSE(parse_percent, unsigned, "20%%", -EINVAL, 0);
        CHECK_PARSE(parse_percent, unsigned, "-20%", -EINVAL, 0);
        CHECK_PARSE(parse_percent, unsigned, "2.5%", -EINVAL, 0);
}

int main(void) {
        test_now();
        test_format();
        test_parse_rfc3339();
        test_parse_size();
        test_parse_sec();
        test_parse_percent();

        return test_finish("test-time-util");
}
