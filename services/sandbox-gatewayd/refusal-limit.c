/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* How many refusals (401/403) each client address gets answered and audited one by one. */
#include "refusal-limit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "macro.h"
#include "time-util.h"

/* A token bucket. One refusal costs USEC_PER_SEC tokens; per_sec refusals a second come back. */
typedef struct Bucket {
        uint64_t tokens_usec; /* burst * USEC_PER_SEC at most */
        uint64_t at;          /* when tokens_usec was last brought up to date */
} Bucket;

typedef struct Client {
        Bucket bucket;
        uint64_t throttled;   /* refusals over a budget, not yet in a summary */
        uint64_t first, last; /* when the first and the last of those came */
        char name[];
} Client;

struct RefusalLimit {
        uint64_t burst, per_sec, total_burst, total_per_sec;
        Bucket total;
        Hashmap *clients;
};

int refusal_limit_new(uint64_t burst, uint64_t per_sec, uint64_t total_burst, uint64_t total_per_sec,
                      RefusalLimit **ret) {
        uint64_t v[] = { burst, per_sec, total_burst, total_per_sec };
        for (size_t i = 0; i < ELEMENTSOF(v); i++)
                if (v[i] == 0 || v[i] > UINT32_MAX)
                        return -EINVAL;
        RefusalLimit *l = calloc(1, sizeof(RefusalLimit));
        if (!l)
                return -ENOMEM;
        l->burst = burst;
        l->per_sec = per_sec;
        l->total_burst = total_burst;
        l->total_per_sec = total_per_sec;
        l->total.tokens_usec = total_burst * USEC_PER_SEC;
        l->clients = hashmap_new();
        if (!l->clients) {
                free(l);
                return -ENOMEM;
        }
        *ret = l;
        return 0;
}

RefusalLimit *refusal_limit_free(RefusalLimit *l) {
        Client *c;

        if (!l)
                return NULL;
        HASHMAP_FOREACH(c, l->clients, i) {
                hashmap_remove(l->clients, c->name);
                free(c);
        }
        hashmap_free(l->clients);
        free(l);
        return NULL;
}

static void refill(Bucket *b, uint64_t burst, uint64_t per_sec, uint64_t now) {
        uint64_t full = burst * USEC_PER_SEC;

        if (now > b->at) {
                uint64_t elapsed = now - b->at;
                /* no overflow: elapsed is capped at the time the whole budget takes to come back */
                uint64_t add = MIN(elapsed, full / per_sec + 1) * per_sec;
                b->tokens_usec = MIN(full, b->tokens_usec + add);
        }
        b->at = MAX(b->at, now);
}

/* Seconds until the bucket has one refusal's worth, at least 1. */
static uint64_t wait_sec(const Bucket *b, uint64_t per_sec) {
        if (b->tokens_usec >= USEC_PER_SEC)
                return 0;
        uint64_t missing = USEC_PER_SEC - b->tokens_usec; /* in token units, per_sec a second */
        return MAX((missing / per_sec + USEC_PER_SEC - 1) / USEC_PER_SEC, UINT64_C(1));
}

static Client *client_get(RefusalLimit *l, const char *name, uint64_t now) {
        Client *c = hashmap_get(l->clients, name);
        if (c)
                return c;
        if (hashmap_size(l->clients) >= REFUSAL_CLIENTS_MAX) {
                c = hashmap_get(l->clients, REFUSAL_OTHERS);
                if (c)
                        return c;
                name = REFUSAL_OTHERS; /* one over the cap, so the shared budget always fits */
        }
        size_t n = strlen(name);
        c = calloc(1, sizeof(Client) + n + 1);
        if (!c)
                return NULL;
        memcpy(c->name, name, n + 1);
        c->bucket.tokens_usec = l->burst * USEC_PER_SEC;
        c->bucket.at = now;
        if (hashmap_put(l->clients, c->name, c) < 0) {
                free(c);
                return NULL;
        }
        return c;
}

RefusalVerdict refusal_limit_take(RefusalLimit *l, const char *client, uint64_t now,
                                  uint64_t *ret_retry_after_sec) {
        Client *c = client_get(l, client ?: "unknown", now);

        if (!c)
                return REFUSAL_ANSWER; /* out of memory: the refusal is answered and audited as always */
        refill(&c->bucket, l->burst, l->per_sec, now);
        refill(&l->total, l->total_burst, l->total_per_sec, now);
        bool client_ok = c->bucket.tokens_usec >= USEC_PER_SEC, total_ok = l->total.tokens_usec >= USEC_PER_SEC;
        if (client_ok && total_ok) {
                c->bucket.tokens_usec -= USEC_PER_SEC;
                l->total.tokens_usec -= USEC_PER_SEC;
                return REFUSAL_ANSWER;
        }
        if (c->throttled == 0)
                c->first = now;
        c->throttled++;
        c->last = now;
        if (ret_retry_after_sec)
                *ret_retry_after_sec = MAX(wait_sec(&c->bucket, l->per_sec), wait_sec(&l->total, l->total_per_sec));
        return client_ok ? REFUSAL_OVER_TOTAL : REFUSAL_OVER_CLIENT;
}

void refusal_limit_flush(RefusalLimit *l, uint64_t now, uint64_t quiet_usec, bool all, refusal_summary_t cb,
                         void *userdata) {
        Client *c;

        HASHMAP_FOREACH(c, l->clients, i) {
                if (c->throttled > 0 && (all || now >= c->last + quiet_usec)) {
                        if (cb)
                                cb(c->name, c->throttled, c->first, c->last, userdata);
                        c->throttled = 0;
                }
                refill(&c->bucket, l->burst, l->per_sec, now);
                if (c->throttled == 0 && c->bucket.tokens_usec >= l->burst * USEC_PER_SEC) {
                        hashmap_remove(l->clients, c->name);
                        free(c);
                }
        }
}

size_t refusal_limit_clients(RefusalLimit *l) {
        return hashmap_size(l->clients);
}
