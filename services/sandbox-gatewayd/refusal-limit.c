/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* How many refusals (401/403) each client address gets answered and audited one by one. */
#include "refusal-limit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "macro.h"
#include "time-util.h"

typedef struct Client {
        uint64_t tokens_usec; /* the budget, in microseconds' worth of refill: burst * USEC_PER_SEC at most */
        uint64_t at;          /* when tokens_usec was last brought up to date */
        uint64_t throttled;   /* refusals over the budget, not yet in a summary */
        uint64_t first, last; /* when the first and the last of those came */
        char name[];
} Client;

struct RefusalLimit {
        uint64_t burst, per_sec;
        Hashmap *clients;
};

int refusal_limit_new(uint64_t burst, uint64_t per_sec, RefusalLimit **ret) {
        if (burst == 0 || per_sec == 0 || burst > UINT32_MAX || per_sec > UINT32_MAX)
                return -EINVAL;
        RefusalLimit *l = calloc(1, sizeof(RefusalLimit));
        if (!l)
                return -ENOMEM;
        l->burst = burst;
        l->per_sec = per_sec;
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

/* One refusal costs USEC_PER_SEC tokens; per_sec refusals a second come back. */
static void refill(const RefusalLimit *l, Client *c, uint64_t now) {
        uint64_t full = l->burst * USEC_PER_SEC;

        if (now > c->at) {
                uint64_t elapsed = now - c->at;
                /* no overflow: elapsed is capped at the time the whole budget takes to come back */
                uint64_t add = MIN(elapsed, full / l->per_sec + 1) * l->per_sec;
                c->tokens_usec = MIN(full, c->tokens_usec + add);
        }
        c->at = MAX(c->at, now);
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
        c->tokens_usec = l->burst * USEC_PER_SEC;
        c->at = now;
        if (hashmap_put(l->clients, c->name, c) < 0) {
                free(c);
                return NULL;
        }
        return c;
}

bool refusal_limit_take(RefusalLimit *l, const char *client, uint64_t now, uint64_t *ret_retry_after_sec) {
        Client *c = client_get(l, client ?: "unknown", now);

        if (!c)
                return true; /* out of memory: the refusal is answered and audited as always */
        refill(l, c, now);
        if (c->tokens_usec >= USEC_PER_SEC) {
                c->tokens_usec -= USEC_PER_SEC;
                return true;
        }
        if (c->throttled == 0)
                c->first = now;
        c->throttled++;
        c->last = now;
        if (ret_retry_after_sec) {
                uint64_t missing = USEC_PER_SEC - c->tokens_usec; /* in token units, per_sec a second */
                *ret_retry_after_sec = MAX((missing / l->per_sec + USEC_PER_SEC - 1) / USEC_PER_SEC, UINT64_C(1));
        }
        return false;
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
                refill(l, c, now);
                if (c->throttled == 0 && c->tokens_usec >= l->burst * USEC_PER_SEC) {
                        hashmap_remove(l->clients, c->name);
                        free(c);
                }
        }
}

size_t refusal_limit_clients(RefusalLimit *l) {
        return hashmap_size(l->clients);
}
