/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests refusal-limit.c: each client's budget of refusals, its refill, the summaries, the cap; and the
 * same buckets as the gateway meters each API key's Exec starts with. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "refusal-limit.h"
#include "test-util.h"
#include "time-util.h"

typedef struct Summary {
        char client[64];
        uint64_t throttled, first, last;
        unsigned calls;
} Summary;

static void on_summary(const char *client, uint64_t throttled, uint64_t first, uint64_t last, void *userdata) {
        Summary *s = userdata;
        snprintf(s->client, sizeof(s->client), "%s", client);
        s->throttled = throttled;
        s->first = first;
        s->last = last;
        s->calls++;
}

/* Within both budgets: answered and audited as usual. */
#define ANSWERED(...) (refusal_limit_take(__VA_ARGS__) == REFUSAL_ANSWER)

static void test_budget(void) {
        RefusalLimit *l = NULL;
        uint64_t t = 1000 * USEC_PER_SEC, retry = 0;

        CHECK_INT(refusal_limit_new(0, 1, 1, 1, &l), -EINVAL);
        CHECK_INT(refusal_limit_new(1, 0, 1, 1, &l), -EINVAL);
        CHECK_INT(refusal_limit_new(1, 1, 0, 1, &l), -EINVAL);
        CHECK_INT(refusal_limit_new(1, 1, 1, 0, &l), -EINVAL);
        CHECK_INT(refusal_limit_new(UINT64_C(1) << 32, 1, 1, 1, &l), -EINVAL);
        CHECK_INT(refusal_limit_new(3, 2, UINT32_MAX, UINT32_MAX, &l), 0);

        /* three at once, then none: each over the budget says when there is room again */
        for (int i = 0; i < 3; i++)
                CHECK(ANSWERED(l, "192.0.2.1", t, &retry));
        CHECK(!ANSWERED(l, "192.0.2.1", t, &retry));
        CHECK_U64(retry, 1); /* two a second: room in half a second, rounded up */
        /* another client has its own budget */
        CHECK(ANSWERED(l, "192.0.2.2", t, NULL));
        /* half a second later one more, not two */
        CHECK(ANSWERED(l, "192.0.2.1", t + USEC_PER_SEC / 2, NULL));
        CHECK(!ANSWERED(l, "192.0.2.1", t + USEC_PER_SEC / 2, NULL));
        /* a long wait fills the budget to its top, not beyond */
        t += 3600 * USEC_PER_SEC;
        for (int i = 0; i < 3; i++)
                CHECK(ANSWERED(l, "192.0.2.1", t, NULL));
        CHECK(!ANSWERED(l, "192.0.2.1", t, NULL));
        /* time going backwards (never on CLOCK_MONOTONIC) adds nothing */
        CHECK(!ANSWERED(l, "192.0.2.1", t - USEC_PER_SEC, NULL));
        refusal_limit_free(l);
}

static void test_summaries(void) {
        RefusalLimit *l = NULL;
        uint64_t t = 50 * USEC_PER_SEC;
        Summary s = {};

        CHECK_INT(refusal_limit_new(2, 1, UINT32_MAX, UINT32_MAX, &l), 0);
        CHECK(ANSWERED(l, "a", t, NULL));
        CHECK(ANSWERED(l, "a", t, NULL));
        for (int i = 0; i < 5; i++)
                CHECK(!ANSWERED(l, "a", t + i, NULL));
        CHECK(ANSWERED(l, "b", t, NULL));

        /* not quiet long enough: no summary yet */
        refusal_limit_flush(l, t + 5, 10 * USEC_PER_SEC, false, on_summary, &s);
        CHECK_INT(s.calls, 0);
        /* quiet: one summary of all five, from the first to the last */
        refusal_limit_flush(l, t + 10 * USEC_PER_SEC + 4, 10 * USEC_PER_SEC, false, on_summary, &s);
        CHECK_INT(s.calls, 1);
        CHECK_STR(s.client, "a");
        CHECK_U64(s.throttled, 5);
        CHECK_U64(s.first, t);
        CHECK_U64(s.last, t + 4);
        /* and only once; both budgets are full again after 10 s, so both clients are forgotten */
        refusal_limit_flush(l, t + 20 * USEC_PER_SEC, 10 * USEC_PER_SEC, false, on_summary, &s);
        CHECK_INT(s.calls, 1);
        CHECK_U64(refusal_limit_clients(l), 0);

        /* all: a summary even for a client that is not quiet */
        CHECK(ANSWERED(l, "c", t, NULL));
        CHECK(ANSWERED(l, "c", t, NULL));
        CHECK(!ANSWERED(l, "c", t, NULL));
        refusal_limit_flush(l, t, 10 * USEC_PER_SEC, true, on_summary, &s);
        CHECK_INT(s.calls, 2);
        CHECK_STR(s.client, "c");
        CHECK_U64(s.throttled, 1);
        refusal_limit_free(l);
}

static void test_total(void) {
        RefusalLimit *l = NULL;
        uint64_t t = 7 * USEC_PER_SEC, retry = 0;
        Summary s = {};

        /* Each address 3 at once, all of them together 5, then 1 a second. */
        CHECK_INT(refusal_limit_new(3, 1, 5, 1, &l), 0);
        for (int i = 0; i < 3; i++)
                CHECK(ANSWERED(l, "198.51.100.1", t, NULL));
        CHECK_INT(refusal_limit_take(l, "198.51.100.1", t, &retry), REFUSAL_OVER_CLIENT);
        CHECK(ANSWERED(l, "198.51.100.2", t, NULL));
        CHECK(ANSWERED(l, "198.51.100.2", t, NULL));
        /* the second address is within its own budget, but all together have had their five */
        CHECK_INT(refusal_limit_take(l, "198.51.100.2", t, &retry), REFUSAL_OVER_TOTAL);
        CHECK_U64(retry, 1);
        CHECK_INT(refusal_limit_take(l, "198.51.100.3", t, NULL), REFUSAL_OVER_TOTAL);
        /* over both: the client's own comes first */
        CHECK_INT(refusal_limit_take(l, "198.51.100.1", t, &retry), REFUSAL_OVER_CLIENT);
        CHECK_U64(retry, 1);
        /* a throttled refusal spends nothing: a second later there is room for exactly one more */
        CHECK(ANSWERED(l, "198.51.100.3", t + USEC_PER_SEC, NULL));
        CHECK_INT(refusal_limit_take(l, "198.51.100.2", t + USEC_PER_SEC, NULL), REFUSAL_OVER_TOTAL);
        CHECK_INT(refusal_limit_take(l, "198.51.100.1", t + USEC_PER_SEC, NULL), REFUSAL_OVER_TOTAL);
        /* each throttled client gets its own summary */
        refusal_limit_flush(l, t + USEC_PER_SEC, 0, true, on_summary, &s);
        CHECK_INT(s.calls, 3);
        refusal_limit_free(l);
}

static void test_cap(void) {
        RefusalLimit *l = NULL;
        char name[32];

        /* Past REFUSAL_CLIENTS_MAX addresses, new ones share one budget, so memory stays bounded. */
        CHECK_INT(refusal_limit_new(1, 1, UINT32_MAX, UINT32_MAX, &l), 0);
        for (unsigned i = 0; i < REFUSAL_CLIENTS_MAX; i++) {
                snprintf(name, sizeof(name), "10.%u.%u.%u", i >> 16, (i >> 8) & 255, i & 255);
                CHECK(ANSWERED(l, name, 0, NULL));
        }
        CHECK_U64(refusal_limit_clients(l), REFUSAL_CLIENTS_MAX);
        CHECK(ANSWERED(l, "203.0.113.1", 0, NULL));   /* the shared budget's one */
        CHECK(!ANSWERED(l, "203.0.113.2", 0, NULL));  /* shared: spent */
        CHECK_U64(refusal_limit_clients(l), REFUSAL_CLIENTS_MAX + 1);
        Summary s = {};
        refusal_limit_flush(l, 0, 0, true, on_summary, &s);
        CHECK_STR(s.client, REFUSAL_OTHERS);
        refusal_limit_free(l);
}

static void test_exec_starts(void) {
        RefusalLimit *l = NULL;
        uint64_t t = 100 * USEC_PER_SEC, retry = 0, started = 0, refused = 0;
        Summary s = {};

        /* As the gateway has it for keys of role member by default: 50 at once, then 5 a second, each key
         * on its own; no shared budget (made too large to matter). */
        CHECK_INT(refusal_limit_new(50, 5, UINT32_MAX, UINT32_MAX, &l), 0);
        /* a key that tries 30 a second for 30 s starts the 50 and then 5 a second: 200 in all */
        for (uint64_t i = 0; i < 30 * 30; i++) {
                if (ANSWERED(l, "key_bad", t + i * USEC_PER_SEC / 30, &retry))
                        started++;
                else {
                        refused++;
                        CHECK_U64(retry, 1);
                }
        }
        CHECK(started >= 50 + 5 * 29 && started <= 50 + 5 * 30);
        CHECK_U64(started + refused, 900);
        /* another key has all of its own */
        for (int i = 0; i < 50; i++)
                CHECK(ANSWERED(l, "key_good", t + 35 * USEC_PER_SEC, NULL));
        CHECK(!ANSWERED(l, "key_good", t + 35 * USEC_PER_SEC, NULL));
        /* a key refused none for ten seconds gets its summary, with the exact count; the other one later */
        refusal_limit_flush(l, t + 41 * USEC_PER_SEC, 10 * USEC_PER_SEC, false, on_summary, &s);
        CHECK_INT(s.calls, 1);
        CHECK_STR(s.client, "key_bad");
        CHECK_U64(s.throttled, refused);
        refusal_limit_flush(l, t + 41 * USEC_PER_SEC, 10 * USEC_PER_SEC, true, on_summary, &s);
        CHECK_INT(s.calls, 2);
        CHECK_STR(s.client, "key_good");
        CHECK_U64(s.throttled, 1);
        /* and the bucket refills: 10 s at 5 a second is the whole burst again */
        for (int i = 0; i < 50; i++)
                CHECK(ANSWERED(l, "key_bad", t + 41 * USEC_PER_SEC, NULL));
        CHECK(!ANSWERED(l, "key_bad", t + 41 * USEC_PER_SEC, NULL));
        refusal_limit_free(l);
}

int main(void) {
        test_budget();
        test_exec_starts();
        test_summaries();
        test_total();
        test_cap();
        return test_finish("test-refusal-limit");
}
