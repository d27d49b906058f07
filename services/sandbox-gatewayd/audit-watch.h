/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The audit log live: EntryAdded, each row's REST JSON, the watch streams it feeds, catch-up, heartbeat. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include "gatewayd-manager.h"

typedef struct Request Request;

/* Reads one audit row (a{sv}) into its REST JSON (detail and output_truncated as JSON, started_at as
 * RFC 3339). ret_id may be NULL. */
int audit_row_to_json(sd_bus_message *m, json_object **ret, uint64_t *ret_id);

/* Subscribes to EntryAdded and starts the heartbeat. */
int watchers_setup(Manager *m);
void watchers_free_all(Manager *m);

/* Makes the request (its key's stream acquired) a watch of session_id's rows: starts its SSE answer and
 * sends each row sandbox-auditd announces from now on; with catch_up (Last-Event-ID), first every row after
 * last_id, each once and in order. The watcher goes with the client. Returns 0 or a negative errno. */
int watcher_start(Request *r, const char *session_id, bool catch_up, uint64_t last_id);
