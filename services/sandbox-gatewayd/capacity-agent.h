/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The gateway's free capacity for HAProxy's agent-check: one line on a TCP port of its own
 * (docs/scale-out.md). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "macro.h"

/* How often sandboxd's sandboxes are counted, and how long a count stays good when sandboxd does not answer.
 */
#define CAPACITY_AGENT_REFRESH_USEC (1 * USEC_PER_SEC)
#define CAPACITY_AGENT_STALE_USEC   (3 * USEC_PER_SEC)

typedef struct CapacityAgent CapacityAgent;

/* The agent's answer into buf: "up ready N%\n" with N the free share of max (1 … 100), "drain\n" when
 * live ≥ max (HAProxy sends no new sandboxes, the host's own keep working), "down\n" when sandboxd's count
 * is unknown or stale. Returns the length, or -EINVAL (max 0, size too small). */
int capacity_agent_line(bool known, uint64_t live, uint64_t max, char *buf, size_t size);

/* Serves the line on listen_fd (>= 0, e.g. from systemd) or, if it is negative, on a new socket bound to sa;
 * counts sandboxd's sandboxes over bus every CAPACITY_AGENT_REFRESH_USEC. */
int capacity_agent_new(sd_event *e, sd_bus *bus, int listen_fd, const struct sockaddr *sa, socklen_t sa_len,
                       uint64_t max_sandboxes, CapacityAgent **ret);
CapacityAgent *capacity_agent_free(CapacityAgent *a);
DEFINE_TRIVIAL_CLEANUP_FUNC(CapacityAgent *, capacity_agent_free);
