/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Clocks, RFC 3339 timestamps, and the size/duration/percent syntax of config files and options. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "time-util.h"

uint64_t now_usec(clockid_t clock) {
        struct timespec ts;

        if (clock_gettime(clock, &ts) < 0)
                abort();

        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / NSEC_PER_USEC;
}

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil). Done by hand
 * rather than with timegm() so parsing never depends on time_t range or on the process's TZ. */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
        y -= m <= 2;
        int64_t era = (y >= 0 ? y : y - 399) / 400;
        unsigned yoe = (unsigned) (y - era * 400);
        unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
        unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        return era * 146097 + (int64_t) doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *ret_y, unsigned *ret_m, unsigned *ret_d) {
        z += 719468;
        int64_t era = (z >= 0 ? z : z - 146096) / 146097;
        unsigned doe = (unsigned) (z - era * 146097);
        unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
        unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        unsigned mp = (5 * doy + 2) / 153;
        unsigned m = mp < 10 ? mp + 3 : mp - 9;

        *ret_y = (int64_t) yoe + era * 400 + (m <= 2);
        *ret_m = m;
        *ret_d = doy - (153 * mp + 2) / 5 + 1;
}

int format_rfc3339_usec(uint64_t usec_since_epoch, char ret[static RFC3339_USEC_MAX]) {
        uint64_t sec = usec_since_epoch / USEC_PER_SEC;
        unsigned usec = (unsigned) (usec_since_epoch % USEC_PER_SEC);
        int64_t y;
        unsigned mo, d;

        civil_from_days((int64_t) (sec / 86400), &y, &mo, &d);
        if (y > 9999)
                return -ERANGE;

        unsigned s = (unsigned) (sec % 86400);
        char buf[RFC3339_USEC_MAX];
        int n = snprintf(buf, sizeof(buf), "%04u-%02u-%02uT%02u:%02u:%02u.%06uZ", (unsigned) y, mo, d,
                         s / 3600, s / 60 % 60, s % 60, usec);
        if (n < 0 || (size_t) n >= sizeof(buf))
                return -ERANGE;

        memcpy(ret, buf, (size_t) n + 1);
        return 0;
}

/* Exactly n digits at *p; advances *p. */
static int parse_fixed_digits(const char **p, unsigned n, unsigned *ret) {
        unsigned v = 0;

        for (unsigned i = 0; i < n; i++) {
                if (!is_digit((*p)[i]))
                        return -EINVAL;
                v = v * 10 + (unsigned) ((*p)[i] - '0');
        }
        *p += n;
        *ret = v;
        return 0;
}

static int expect_char(const char **p, char c) {
        if (**p != c)
                return -EINVAL;
        (*p)++;
        return 0;
}

static bool is_leap_year(unsigned y) {
        return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int parse_rfc3339_usec(const char *s, uint64_t *ret) {
        static const unsigned days_in_month[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
        unsigned year, month, day, hour, minute, second, usec = 0;
        int64_t offset_sec = 0;
        const char *p = s;

        if (!s)
                return -EINVAL;

        if (parse_fixed_digits(&p, 4, &year) < 0 || expect_char(&p, '-') < 0 ||
            parse_fixed_digits(&p, 2, &month) < 0 || expect_char(&p, '-') < 0 ||
            parse_fixed_digits(&p, 2, &day) < 0)
                return -EINVAL;
        if (*p != 'T' && *p != 't')
                return -EINVAL;
        p++;
        if (parse_fixed_digits(&p, 2, &hour) < 0 || expect_char(&p, ':') < 0 ||
            parse_fixed_digits(&p, 2, &minute) < 0 || expect_char(&p, ':') < 0 ||
            parse_fixed_digits(&p, 2, &second) < 0)
                return -EINVAL;

        if (*p == '.') {
                unsigned n = 0;

                p++;
                for (; is_digit(*p); p++, n++) {
                        /* Beyond nanoseconds is not a timestamp anyone means: refuse rather than guess. */
                        if (n >= 9)
                                return -EINVAL;
                        if (n < 6)
                                usec = usec * 10 + (unsigned) (*p - '0');
                }
                if (n == 0)
                        return -EINVAL;
                for (; n < 6; n++)
                        usec *= 10;
        }

        if (*p == 'Z' || *p == 'z')
                p++;
        else if (*p == '+' || *p == '-') {
                int sign = *p == '-' ? -1 : 1;
                unsigned oh, om;

                p++;
                if (parse_fixed_digits(&p, 2, &oh) < 0 || expect_char(&p, ':') < 0 ||
                    parse_fixed_digits(&p, 2, &om) < 0)
                        return -EINVAL;
                if (oh > 23 || om > 59)
                        return -EINVAL;
                offset_sec = sign * (int64_t) (oh * 3600 + om * 60);
        } else
                return -EINVAL;

        if (*p != 0)
                return -EINVAL;

        if (month < 1 || month > 12 || day < 1)
                return -EINVAL;
        if (day > days_in_month[month - 1] + (month == 2 && is_leap_year(year)))
                return -EINVAL;
        /* Second 60 is a leap second; POSIX time has none, so it lands on the next second like timegm(). */
        if (hour > 23 || minute > 59 || second > 60)
                return -EINVAL;

        int64_t t = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
        t -= offset_sec;
        if (t < 0)
                return -ERANGE;

        *ret = (uint64_t) t * USEC_PER_SEC + usec;
        return 0;
}

/* Leading decimal digits, with overflow detection; at least one required. Advances *p. */
static int parse_uint64_prefix(const char **p, uint64_t *ret) {
        const char *q = *p;
        uint64_t v = 0;

        if (!is_digit(*q))
                return -EINVAL;
        for (; is_digit(*q); q++) {
                unsigned digit = (unsigned) (*q - '0');

                if (v > (UINT64_MAX - digit) / 10)
                        return -ERANGE;
                v = v * 10 + digit;
        }
        *p = q;
        *ret = v;
        return 0;
}

static int multiply_checked(uint64_t a, uint64_t b, uint64_t *ret) {
        if (b != 0 && a > UINT64_MAX / b)
                return -ERANGE;
        *ret = a * b;
        return 0;
}

int parse_size(const char *s, uint64_t *ret_bytes) {
        static const char suffixes[] = "KMGTPE";
        uint64_t v, factor = 1;
        const char *p = s;
        int r;

        if (!s)
                return -EINVAL;

        r = parse_uint64_prefix(&p, &v);
        if (r < 0)
                return r;

        if (*p != 0) {
                const char *x = strchr(suffixes, *p);

                if (!x || p[1] != 0)
                        return -EINVAL;
                factor = UINT64_C(1) << (10 * (x - suffixes + 1));
        }

        r = multiply_checked(v, factor, &v);
        if (r < 0)
                return r;

        *ret_bytes = v;
        return 0;
}

int parse_sec(const char *s, uint64_t *ret_usec) {
        /* Longer spellings first, so "ms" and "min" are not taken for "m" followed by garbage. */
        static const struct {
                const char *suffix;
                uint64_t usec;
        } units[] = {
                { "seconds", USEC_PER_SEC },   { "second", USEC_PER_SEC },   { "minutes", USEC_PER_MINUTE },
                { "minute", USEC_PER_MINUTE }, { "hours", USEC_PER_HOUR },   { "hour", USEC_PER_HOUR },
                { "days", USEC_PER_DAY },      { "day", USEC_PER_DAY },      { "weeks", USEC_PER_WEEK },
                { "week", USEC_PER_WEEK },     { "msec", USEC_PER_MSEC },    { "usec", 1 },
                { "sec", USEC_PER_SEC },       { "min", USEC_PER_MINUTE },   { "hr", USEC_PER_HOUR },
                { "ms", USEC_PER_MSEC },       { "us", 1 },                  { "s", USEC_PER_SEC },
                { "m", USEC_PER_MINUTE },      { "h", USEC_PER_HOUR },       { "d", USEC_PER_DAY },
                { "w", USEC_PER_WEEK },
        };
        uint64_t total = 0;
        const char *p = s;
        int r;

        if (!s)
                return -EINVAL;

        for (;;) {
                uint64_t v, factor = USEC_PER_SEC, part;

                r = parse_uint64_prefix(&p, &v);
                if (r < 0)
                        return r;

                /* "5 min" as well as "5min", as systemd.time(7) allows. */
                const char *u = p;
                while (*u == ' ')
                        u++;

                for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                        size_t l = strlen(units[i].suffix);

                        /* A unit must end at a space, the end, or the next number ("1h30min"). */
                        if (strncmp(u, units[i].suffix, l) == 0 &&
                            (u[l] == 0 || u[l] == ' ' || is_digit(u[l]))) {
                                factor = units[i].usec;
                                p = u + l;
                                break;
                        }
                }

                r = multiply_checked(v, factor, &part);
                if (r < 0)
                        return r;
                if (part > UINT64_MAX - total)
                        return -ERANGE;
                total += part;

                if (*p == 0)
                        break;
                while (*p == ' ')
                        p++;
                /* Only another number may follow; this also refuses trailing blanks and unknown units. */
                if (!is_digit(*p))
                        return -EINVAL;
        }

        *ret_usec = total;
        return 0;
}

int parse_percent(const char *s, unsigned *ret) {
        const char *p = s;
        uint64_t v;
        int r;

        if (!s)
                return -EINVAL;

        r = parse_uint64_prefix(&p, &v);
        if (r == -ERANGE)
                return r;
        if (r < 0 || !streq(p, "%"))
                return -EINVAL;
        if (v > 10000)
                return -ERANGE;

        *ret = (unsigned) v;
        return 0;
}
