/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "sandboxctl log --export DIR": the audit log as a run-session export (audit.jsonl + run directories). */
#pragma once

#include <stdbool.h>
#include <systemd/sd-bus.h>

/* Appends to DIR what the log holds beyond the export's state (all rows, or session_id's); with follow,
 * keeps doing so until SIGINT or SIGTERM. Errors are printed ("sandboxctl: log: ..."); returns 0 or a
 * negative errno. */
int log_export(sd_bus *bus, const char *dir, const char *session_id, bool follow, bool quiet);
