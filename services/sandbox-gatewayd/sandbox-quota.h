/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Live sandboxes per API key (MaxSandboxesPerKey=): sandboxd's list plus the creations in flight. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A creation through the gateway: begin, then check against sandboxd's list of the key's sandboxes
 * (ListSandboxes, asked after begin), then create, then end. The gateway is single-threaded; what the
 * list cannot know yet is what this module adds: other creations of the same key still in flight, and
 * those that ended after the list was asked for and that it does not show. A sandbox that sandboxd made
 * but whose reply the gateway has not read yet may be counted twice (in the list and in flight): the
 * count can only be too high for that moment, never too low. */

typedef struct SandboxQuota SandboxQuota;

int sandbox_quota_new(SandboxQuota **ret);
SandboxQuota *sandbox_quota_free(SandboxQuota *q);

/* A creation by account begins; *ret_ticket identifies it in the calls below. Returns 0 or -ENOMEM. */
int sandbox_quota_begin(SandboxQuota *q, const char *account, uint64_t *ret_ticket);

/* The list asked for after begin answered: owned are the ids of the account's sandboxes in it. Returns
 * 0 if one more fits in max, -EDQUOT if not; *ret_count (may be NULL) is what the account has: listed,
 * in flight (this one not included), or ended since and not listed. Call once per ticket. */
int sandbox_quota_check(SandboxQuota *q, const char *account, uint64_t ticket, const char *const *owned,
                        size_t n_owned, uint64_t max, uint64_t *ret_count);

/* The creation ended: checked says whether sandbox_quota_check() was called for it; id is the new
 * sandbox, or NULL if none was made (refused, failed, or never asked for). Every begin needs exactly
 * one end. */
void sandbox_quota_end(SandboxQuota *q, const char *account, bool checked, const char *id);
