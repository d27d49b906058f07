/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The audit log over HTTP: row JSON, log pages, row output, and the watch SSE stream over EntryAdded. */
#pragma once

#include <json-c/json.h>
#include <systemd/sd-bus.h>

#include "gatewayd-manager.h"

/* Reads one audit row (a{sv}) into its REST JSON (detail and output_truncated as JSON, started_at as
 * RFC 3339). ret_id may be NULL. */
int audit_row_to_json(sd_bus_message *m, json_object **ret, uint64_t *ret_id);

/* Subscribes to EntryAdded and starts the heartbeat. */
int watchers_setup(Manager *m);
void watchers_free_all(Manager *m);
