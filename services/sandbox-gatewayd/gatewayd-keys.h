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

/* CreateKey's spec, read from msg (at the a{sv}, left past it) into *spec: its strings point into msg, its
 * lists into *strings (freed by key_spec_strings_clear). Unknown or repeated fields, wrong types and a
 * TTL out of range are refused with InvalidArgs saying which; the rest is key_spec_resolve()'s. */
typedef struct KeySpecStrings {
        char **actions, **sandboxes;
} KeySpecStrings;

void key_spec_strings_clear(KeySpecStrings *s);
int gateway_keys_parse_spec(sd_bus_message *msg, KeySpec *spec, KeySpecStrings *strings, sd_bus_error *error);
