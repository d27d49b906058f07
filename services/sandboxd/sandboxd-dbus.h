/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd on the bus: the Manager's and the sandboxes' vtables, errors and signals. */
#pragma once

#include <systemd/sd-bus.h>

#include "sandboxd-bus.h"

typedef struct Manager Manager;
typedef struct Sandbox Sandbox;

int manager_bus_setup(Manager *m);

void sandbox_emit_new(Sandbox *s);
void sandbox_emit_removed(Sandbox *s);
/* PropertiesChanged for State or ExpiresAt of the sandbox's object (nothing for a pooled one). */
void sandbox_emit_changed(Sandbox *s, const char *property);

/* Replies to a CreateSandbox call now that the sandbox runs. */
int sandbox_reply_created(Sandbox *s, sd_bus_message *request);

/* The check every call makes (of the Manager's methods and the sandboxes' properties): the sender is root
 * or in sandbox-admin. *ret is the sender as a Caller (so far as it is known) either way. */
typedef struct Caller Caller;
int manager_caller_check(Manager *m, sd_bus_message *msg, Caller *ret, sd_bus_error *error);
