/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Who asked, as the audit log records it (docs/dbus-api.md, "Caller context"). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define CALLER_FIELD_MAX 256

typedef struct Caller {
        uint32_t uid;  /* UINT32_MAX: not known yet */
        int trusted;   /* root or the gateway: its context is believed */
        char account_id[CALLER_FIELD_MAX + 1];
        char request_id[CALLER_FIELD_MAX + 1];
        char source[32];
} Caller;

/* A call refused before its sender's uid was known: account "unknown", source "agent". */
void caller_unknown(Caller *ret);
/* A bus caller: account "uid:<n>", source "agent", until a trusted caller's context says otherwise. */
void caller_from_uid(Caller *ret, uid_t uid, bool trusted);
/* The system's own operations (TTL expiry, clean-up at start-up). */
void caller_system(Caller *ret);
