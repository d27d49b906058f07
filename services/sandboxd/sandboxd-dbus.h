/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd on the bus: the Manager's methods, its vtable and the error map. */
#pragma once

#include <systemd/sd-bus.h>

#include "sandboxd-bus.h"

typedef struct Manager Manager;
typedef struct Sandbox Sandbox;

int manager_bus_setup(Manager *m);

/* Replies to a CreateSandbox call now that the sandbox runs. */
int sandbox_reply_created(Sandbox *s, sd_bus_message *request);

/* The check every call makes (of the Manager's methods and the sandboxes' properties): the sender is root
 * or in sandbox-admin. *ret is the sender as a Caller (so far as it is known) either way. */
typedef struct Caller Caller;
int manager_caller_check(Manager *m, sd_bus_message *msg, Caller *ret, sd_bus_error *error);
