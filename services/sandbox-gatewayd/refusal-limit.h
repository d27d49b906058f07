/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* How many refusals (401/403) each client address gets answered and audited one by one. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every 401 or 403 the gateway answers is a row in the audit log. Without a bound, a client without
 * any key could write rows as fast as it can send requests. So each client address has a budget of
 * refusals (a token bucket: `burst` at most, refilled at `per_sec` a second), and all of them together
 * one more (`total_burst`, `total_per_sec`), so that a client with many addresses does not get many
 * budgets' worth of rows. A refusal within both is answered and audited as always; beyond either the
 * request is answered 429 and only counted for its client, and once the client has had no refusal over
 * a budget for a while, one summary row records how many there were, from when to when. A client with
 * a valid key is never affected: only refusals spend the budgets.
 *
 * The gateway meters each API key's Exec starts with the same buckets (gatewayd-manager.c), keyed by the
 * key's id, with a shared budget too large to matter (UINT32_MAX): there a "refusal" is an Exec start. */

#define REFUSAL_CLIENTS_MAX 65536 /* addresses tracked; the rest share one budget */
#define REFUSAL_OTHERS "others"   /* the shared budget's name */

typedef struct RefusalLimit RefusalLimit;

/* Each at least 1 and at most UINT32_MAX. */
int refusal_limit_new(uint64_t burst, uint64_t per_sec, uint64_t total_burst, uint64_t total_per_sec,
                      RefusalLimit **ret);
RefusalLimit *refusal_limit_free(RefusalLimit *l);

typedef enum RefusalVerdict {
        REFUSAL_ANSWER,       /* within both budgets: answer and audit it as usual */
        REFUSAL_OVER_CLIENT,  /* over the client's own budget */
        REFUSAL_OVER_TOTAL,   /* within the client's, over all clients' together */
} RefusalVerdict;

/* A refusal for client (an address, as text) at now (CLOCK_MONOTONIC µs). Over a budget, it is counted
 * for the client's summary, spends nothing, and *ret_retry_after_sec says when both budgets have room
 * again. */
RefusalVerdict refusal_limit_take(RefusalLimit *l, const char *client, uint64_t now,
                                  uint64_t *ret_retry_after_sec);

typedef void (*refusal_summary_t)(const char *client, uint64_t throttled, uint64_t first, uint64_t last,
                                  void *userdata);

/* For each client with throttled refusals counted and none for quiet_usec (every such client if all),
 * calls cb with their count and the times of the first and last (CLOCK_MONOTONIC µs) and resets it.
 * Forgets clients whose budget has filled up again and who have nothing counted. */
void refusal_limit_flush(RefusalLimit *l, uint64_t now, uint64_t quiet_usec, bool all, refusal_summary_t cb,
                         void *userdata);

/* Clients tracked (for tests). */
size_t refusal_limit_clients(RefusalLimit *l);
