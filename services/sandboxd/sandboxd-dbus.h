/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd on the bus: the Manager's and the sandboxes' vtables, errors and signals. */
#pragma once

#include <systemd/sd-bus.h>

typedef struct Manager Manager;
typedef struct Sandbox Sandbox;

#define SANDBOXD_BUS_NAME "org.sandboxd.sandbox1"
#define SANDBOXD_BUS_PATH "/org/sandboxd/sandbox1"
#define SANDBOXD_MANAGER_INTERFACE "org.sandboxd.sandbox1.Manager"
#define SANDBOXD_SANDBOX_INTERFACE "org.sandboxd.sandbox1.Sandbox"
#define SANDBOXD_SANDBOX_PATH_PREFIX "/org/sandboxd/sandbox1/sandbox"

#define SANDBOXD_ERROR_NO_SUCH_SANDBOX "org.sandboxd.sandbox1.NoSuchSandbox"
#define SANDBOXD_ERROR_LIMIT_EXCEEDED "org.sandboxd.sandbox1.LimitExceeded"
#define SANDBOXD_ERROR_NOT_RUNNING "org.sandboxd.sandbox1.NotRunning"
#define SANDBOXD_ERROR_NAME_EXISTS "org.sandboxd.sandbox1.NameExists"
#define SANDBOXD_ERROR_NO_SUCH_FILE "org.sandboxd.sandbox1.NoSuchFile"
#define SANDBOXD_ERROR_FILE_EXISTS "org.sandboxd.sandbox1.FileExists"
/* The sandbox's user may not do that to that file (not AccessDenied: that one says the caller may not call). */
#define SANDBOXD_ERROR_PERMISSION_DENIED "org.sandboxd.sandbox1.PermissionDenied"

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
