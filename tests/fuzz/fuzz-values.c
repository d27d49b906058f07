/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes the parsers of single values from outside: the gateway's query parameters (?limit=&offset=
 * &after_id= as parse_decimal, ?since=&until= as RFC 3339 times) and sandboxctl's arguments (TTLs and
 * timeouts like "2h" or "1d 30min", numbers, modes, KEY=VALUE, ID:PATH, --actions=A,B lists), plus the
 * config files' sizes and percentages. Input: one byte choosing the parser, then the value. Accepted
 * values must mean what they say (round trips, ranges, reassembly); nothing may crash. */
#include <errno.h>

#include "fuzz.h"
#include "ini-util.h"
#include "macro.h"
#include "sandbox-id.h"
#include "sandboxctl-util.h"
#include "time-util.h"
#include "utf8-util.h"

static void check_rfc3339(const char *s) {
        char buf[RFC3339_USEC_MAX];
        uint64_t v, again;

        if (parse_rfc3339_usec(s, &v) < 0)
                return;
        /* What we print of a time we accepted parses back to the same time. */
        if (format_rfc3339_usec(v, buf) < 0)
                return; /* past 9999 after an offset: not printable, and said so */
        FUZZ_ASSERT(parse_rfc3339_usec(buf, &again) == 0);
        FUZZ_ASSERT(again == v);
}

static void check_sec(const char *s) {
        uint64_t usec, sec;
        int r = parse_sec(s, &usec);

        FUZZ_ASSERT(r == 0 || r == -EINVAL || r == -ERANGE);
        if (r < 0)
                return;
        /* sandboxctl rounds up to whole seconds, never down to none. */
        FUZZ_ASSERT(parse_seconds(s, &sec) == 0);
        FUZZ_ASSERT(sec >= usec / USEC_PER_SEC && sec <= usec / USEC_PER_SEC + 1);
        FUZZ_ASSERT(usec == 0 || sec > 0);
}

static void check_decimal(const char *s) {
        uint64_t a, b;
        int ra = parse_decimal(s, &a), rb = parse_uint64(s, &b);

        /* The gateway's and sandboxctl's number parsers agree. */
        FUZZ_ASSERT(ra == rb);
        if (ra < 0)
                return;
        FUZZ_ASSERT(a == b);
        for (const char *p = s; *p; p++)
                FUZZ_ASSERT(*p >= '0' && *p <= '9');
        FUZZ_ASSERT(strtoull(s, NULL, 10) == a);
}

static void check_mode(const char *s) {
        uint32_t m;

        if (parse_mode(s, &m) < 0)
                return;
        FUZZ_ASSERT(m <= 07777);
        FUZZ_ASSERT(strtoul(s, NULL, 8) == m);
}

static void check_env(const char *s) {
        char *k = NULL, *v = NULL;

        if (parse_env_assignment(s, &k, &v) < 0)
                return;
        FUZZ_ASSERT(k[0] && !strchr(k, '='));
        FUZZ_ASSERT(strlen(k) + 1 + strlen(v) == strlen(s));
        FUZZ_ASSERT(strncmp(s, k, strlen(k)) == 0 && s[strlen(k)] == '=' && streq(s + strlen(k) + 1, v));
        free(k);
        free(v);
}

static void check_sandbox_path(const char *s) {
        char *id = NULL, *path = NULL;
        int r = split_sandbox_path(s, &id, &path);

        FUZZ_ASSERT(r >= -EINVAL && r <= 1);
        if (r != 1) {
                FUZZ_ASSERT(!id && !path);
                return;
        }
        FUZZ_ASSERT(path[0]);
        FUZZ_ASSERT(strlen(id) + 1 + strlen(path) == strlen(s));
        free(id);
        free(path);
}

static void check_commas(const char *s) {
        char **l = split_commas(s);
        size_t total = 0;

        if (!l)
                return;
        for (char **p = l; *p; p++) {
                FUZZ_ASSERT(**p && !strchr(*p, ','));
                FUZZ_ASSERT(strstr(s, *p));
                total += strlen(*p);
        }
        FUZZ_ASSERT(total <= strlen(s));
        strv_free(l);
}

static void check_size_percent(const char *s) {
        uint64_t b;
        unsigned pct;
        int r = parse_size(s, &b);

        FUZZ_ASSERT(r == 0 || r == -EINVAL || r == -ERANGE);
        r = parse_percent(s, &pct);
        FUZZ_ASSERT(r == 0 || r == -EINVAL || r == -ERANGE);
        if (r == 0)
                FUZZ_ASSERT(pct <= 10000);
}

static void check_printable(const char *s) {
        char *p = make_printable(s);

        if (!p)
                return;
        /* Nothing a terminal acts on or hides: no controls (C0, DEL, C1), no format characters. */
        FUZZ_ASSERT(utf8_is_printable((const uint8_t *) p, strlen(p)));
        free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static void (*const check[])(const char *) = {
                check_rfc3339,      check_sec,    check_decimal,      check_mode,      check_env,
                check_sandbox_path, check_commas, check_size_percent, check_printable,
        };
        char *s;

        if (size < 1)
                return 0;
        s = fuzz_strndup(data + 1, size - 1);
        if (!s)
                return 0;
        check[data[0] % ELEMENTSOF(check)](s);
        free(s);
        return 0;
}
