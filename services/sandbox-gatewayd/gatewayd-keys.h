/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* org.sandboxd.gateway1.Keys: CreateKey, ListKeys, RevokeKey for root on the system bus (sandboxctl api-key). */
#pragma once

#include <systemd/sd-bus.h>

#include "key-store.h"

/* Registers the Keys interface on /org/sandboxd/gateway1 of bus. Callers other than uid 0 get
 * org.freedesktop.DBus.Error.AccessDenied (the bus policy says so too). The store must outlive the slot.
 * CreateKey(a{sv} spec: name s, preset s, role s, actions as, sandboxes as, ttl_seconds t)
 *   → (s secret, s api_key_json); ListKeys() → (s {"api_keys":[…]}); RevokeKey(s id).
 * Each successful CreateKey/RevokeKey calls on_change (may be NULL) so the gateway can audit it. */
typedef void (*gateway_keys_changed_t)(const char *operation, const ApiKey *k, const char *account_id,
                                       void *userdata);
int gateway_keys_bus_add(sd_bus *bus, KeyStore *store, gateway_keys_changed_t on_change, void *userdata,
                         sd_bus_slot **ret_slot);
