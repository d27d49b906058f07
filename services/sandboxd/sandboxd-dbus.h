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

/* For Manager methods in other modules (sandbox-tools.c): the caller check and the running sandbox by id
 * or name (their options are read by sandbox-options.c). */
typedef struct Caller Caller;
int sandboxd_caller_check(Manager *m, sd_bus_message *msg, Caller *ret, sd_bus_error *error);
int sandboxd_get_running(Manager *m, const char *id, Sandbox **ret, sd_bus_error *error);
