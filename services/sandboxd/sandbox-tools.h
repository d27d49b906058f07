/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The file tools on the bus (FileCreate, View, …, Grep), each call a job for the sandbox's file helper. */
#pragma once

#include <stdint.h>
#include <systemd/sd-bus.h>

#include "caller.h"
#include "sandbox-options.h"
#include "sandboxd-bus.h"

typedef struct Manager Manager;
typedef struct Sandbox Sandbox;
typedef struct ToolCall ToolCall;

/* The rows of sandboxd-dbus.c's method table (documented in dbus/org.sandboxd.sandbox1.xml) call these in
 * turn, after the caller check and the sandbox id: tool_call_read() reads the arguments after the id (the
 * caller context into c), tool_call_start() checks them against the running sandbox and hands the job to its
 * file helper. From then on the call is the helper's: it answers, writes the audit row and frees tc (the
 * table's row must not free it). Before that, a failure's row takes its detail from tool_call_detail(). */
ToolCall *tool_call_new(Manager *m, ToolKind kind, sd_bus_message *msg);
ToolCall *tool_call_free(ToolCall *tc);
int tool_call_read(ToolCall *tc, Caller *c, sd_bus_error *error);
int tool_call_start(ToolCall *tc, Sandbox *s, const Caller *c, uint64_t started_at, uint64_t mono,
                    sd_bus_error *error);
/* The detail of a failed call's row: what was asked, the error. NULL on OOM. */
char *tool_call_detail(ToolCall *tc, const char *error_name, const char *error_message);
