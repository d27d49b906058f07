/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Live sandboxes per API key (MaxSandboxesPerKey=): sandboxd's list plus the creations in flight. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "macro.h"
#include "sandbox-id.h"
#include "sandbox-quota.h"

typedef struct Recent {
        char id[SANDBOX_ID_LEN + 1];
        uint64_t ended;      /* the sequence number at its end */
} Recent;

typedef struct Account {
        char *name;
        uint64_t in_flight;  /* begun, not ended */
        uint64_t unchecked;  /* begun, not checked: their lists may be older than what ended since */
        Recent *recent;      /* ended with a sandbox while some were unchecked */
        size_t n_recent;
} Account;

struct SandboxQuota {
        Hashmap *accounts;   /* name → Account, while it has creations in flight */
        uint64_t seq;        /* numbers begins and ends, in order */
};

static Account *account_free(Account *a) {
        if (!a)
                return NULL;
        free(a->name);
        free(a->recent);
        free(a);
        return NULL;
}

int sandbox_quota_new(SandboxQuota **ret) {
        SandboxQuota *q = calloc(1, sizeof(SandboxQuota));
        if (!q)
                return -ENOMEM;
        q->accounts = hashmap_new();
        if (!q->accounts) {
                free(q);
                return -ENOMEM;
        }
        *ret = q;
        return 0;
}

SandboxQuota *sandbox_quota_free(SandboxQuota *q) {
        Account *a;
        size_t state = 0;

        if (!q)
                return NULL;
        while (hashmap_iterate(q->accounts, &state, (void **) &a, NULL))
                account_free(a);
        hashmap_free(q->accounts);
        free(q);
        return NULL;
}

int sandbox_quota_begin(SandboxQuota *q, const char *account, uint64_t *ret_ticket) {
        Account *a = hashmap_get(q->accounts, account);
        int r;

        if (!a) {
                a = calloc(1, sizeof(Account));
                if (!a)
                        return -ENOMEM;
                a->name = strdup(account);
                if (!a->name) {
                        account_free(a);
                        return -ENOMEM;
                }
                r = hashmap_put(q->accounts, a->name, a);
                if (r < 0) {
                        account_free(a);
                        return r;
                }
        }
        a->in_flight++;
        a->unchecked++;
        *ret_ticket = ++q->seq;
        return 0;
}

static bool listed(const char *id, const char *const *owned, size_t n_owned) {
        for (size_t i = 0; i < n_owned; i++)
                if (owned[i] && streq(owned[i], id))
                        return true;
        return false;
}

int sandbox_quota_check(SandboxQuota *q, const char *account, uint64_t ticket, const char *const *owned,
                        size_t n_owned, uint64_t max, uint64_t *ret_count) {
        Account *a = hashmap_get(q->accounts, account);
        uint64_t count = n_owned;

        if (a) {
                /* the others in flight, and what ended after our list was asked for (later than our
                 * begin) without being in it; what ended before, sandboxd had made before it listed */
                count += a->in_flight - 1;
                for (size_t i = 0; i < a->n_recent; i++)
                        if (a->recent[i].ended > ticket && !listed(a->recent[i].id, owned, n_owned))
                                count++;
                if (a->unchecked > 0)
                        a->unchecked--;
                if (a->unchecked == 0) {
                        /* no list is older than these any more */
                        free(a->recent);
                        a->recent = NULL;
                        a->n_recent = 0;
                }
        }
        if (ret_count)
                *ret_count = count;
        return count >= max ? -EDQUOT : 0;
}

void sandbox_quota_end(SandboxQuota *q, const char *account, bool checked, const char *id) {
        Account *a = hashmap_get(q->accounts, account);

        q->seq++;
        if (!a)
                return;
        if (a->in_flight > 0)
                a->in_flight--;
        if (!checked && a->unchecked > 0)
                a->unchecked--;
        if (id && a->unchecked > 0 && strlen(id) <= SANDBOX_ID_LEN) {
                Recent *n = realloc(a->recent, (a->n_recent + 1) * sizeof(Recent));
                if (n) {
                        /* without memory the count may be one too low for a moment: sandboxd's
                         * MaxSandboxes= and [Sandboxes] still hold */
                        a->recent = n;
                        strcpy(a->recent[a->n_recent].id, id);
                        a->recent[a->n_recent++].ended = q->seq;
                }
        }
        if (a->in_flight == 0) {
                hashmap_remove(q->accounts, a->name);
                account_free(a);
        }
}
