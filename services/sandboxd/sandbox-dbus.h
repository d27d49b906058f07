/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sandboxes on the bus: their objects (org.sandboxd.sandbox1.Sandbox), properties and signals. */
#pragma once

#include "sandboxd-bus.h"

typedef struct Manager Manager;
typedef struct Sandbox Sandbox;

/* The sandboxes' objects under SANDBOXD_SANDBOX_PATH_PREFIX, on m's bus: their vtable, the lookup (with the
 * caller check of every property read) and the enumerator. */
int sandbox_bus_register(Manager *m);

/* The Manager's signals SandboxNew and SandboxRemoved for s. */
void sandbox_emit_new(Sandbox *s);
void sandbox_emit_removed(Sandbox *s);
/* PropertiesChanged for State or ExpiresAt of the sandbox's object (nothing for a pooled one). */
void sandbox_emit_changed(Sandbox *s, const char *property);
