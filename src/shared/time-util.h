/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Clocks, RFC 3339 timestamps, and the size/duration/percent syntax of config files and options. */
#pragma once

#include <stdint.h>
#include <time.h>

#define USEC_PER_MINUTE (UINT64_C(60) * USEC_PER_SEC)
#define USEC_PER_HOUR (UINT64_C(60) * USEC_PER_MINUTE)
#define USEC_PER_DAY (UINT64_C(24) * USEC_PER_HOUR)
#define USEC_PER_WEEK (UINT64_C(7) * USEC_PER_DAY)

/* "2026-10-31T13:03:21.590139Z" is 27 characters; the buffer leaves room to spare. */
#define RFC3339_USEC_MAX 32

/* The clock's current value in µs. An unknown clock id is a programming error and aborts. */
uint64_t now_usec(clockid_t clock);

/* Formats µs since the epoch as "YYYY-MM-DDTHH:MM:SS.uuuuuuZ" (UTC, always 6 fraction digits).
 * Returns 0, or -ERANGE past the year 9999 (RFC 3339 has 4-digit years only). */
int format_rfc3339_usec(uint64_t usec_since_epoch, char ret[static RFC3339_USEC_MAX]);

/* Parses "YYYY-MM-DDTHH:MM:SS[.f]Z" with 0..9 fraction digits (beyond 6 are truncated), 'T'/'t',
 * and 'Z'/'z' or a numeric offset "+HH:MM"/"-HH:MM" (applied, so the result is always UTC).
 * Returns 0, -EINVAL on bad syntax or out-of-range fields, -ERANGE for times before the epoch. */
int parse_rfc3339_usec(const char *s, uint64_t *ret);

/* "1024", "64K", "1M", "1G", "2T" (also P, E): 1024-based, upper-case suffix, no sign, no spaces.
 * Returns 0, -EINVAL for garbage, -ERANGE on overflow. */
int parse_size(const char *s, uint64_t *ret_bytes);

/* "20" (seconds), "20s", "500ms", "5min", "2h", "1d", "1w", "100us", also sequences like "1h 30min".
 * Returns 0, -EINVAL for garbage, -ERANGE on overflow. */
int parse_sec(const char *s, uint64_t *ret_usec);

/* "20%", "150%": 0..10000 with the '%' required (the unit is the point: "1" is ambiguous).
 * Returns 0, -EINVAL for garbage, -ERANGE above 10000. */
int parse_percent(const char *s, unsigned *ret);
