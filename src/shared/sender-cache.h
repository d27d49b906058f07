/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Bus callers' uids, asked of the bus once per connection: unique names are never reused on a bus. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

#include "macro.h"

typedef struct SenderCache SenderCache;

/* At most max names are remembered; past that the cache starts over (only if departures went unseen). */
int sender_cache_new(size_t max, SenderCache **ret);
SenderCache *sender_cache_free(SenderCache *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(SenderCache *, sender_cache_free);

/* The euid of msg's sender: remembered, or asked of the bus (a blocking round trip on dbus-daemon,
 * which attaches no credentials to messages) and then remembered under its unique name. */
int sender_cache_uid(SenderCache *c, sd_bus_message *msg, uid_t *ret);

bool sender_cache_get(SenderCache *c, const char *name, uid_t *ret);
/* Remembers only unique names (":1.42"); a failed allocation just remembers nothing. */
void sender_cache_put(SenderCache *c, const char *name, uid_t uid);
/* Forgets one name, or every name with NULL. */
void sender_cache_forget(SenderCache *c, const char *name);
size_t sender_cache_size(SenderCache *c);

/* Forgets each connection as it leaves the bus (NameOwnerChanged with no new owner). Install it before
 * requesting a name, so that no caller can be remembered unwatched. */
int sender_cache_watch(SenderCache *c, sd_bus *bus, sd_bus_slot **ret_slot);
