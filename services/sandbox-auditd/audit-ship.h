/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-auditd's copy of its rows in PostgreSQL ([PostgreSQL] URL=): in id order, each row once
 * (docs/scale-out.md). */
#pragma once

#include <stdint.h>

#include "audit-store.h"
#include "pg-util.h"

typedef struct AuditShip AuditShip;

/* A shipper of this host's rows (host: its name in the table) to url. The table audit_rows is made if need
 * be. A server that cannot be reached now is no error (audit_ship_step() says so); -EINVAL bad URI or host.
 */
int audit_ship_new(const char *url, const char *host, AuditShip **ret);
AuditShip *audit_ship_free(AuditShip *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(AuditShip *, audit_ship_free);

/* Copies up to max_rows of store's rows that come after the newest one PostgreSQL holds for this host, in
 * one transaction, so PostgreSQL always holds a prefix of the host's ids: in order, and a batch retried
 * after a lost acknowledgement stores nothing twice (ON CONFLICT DO NOTHING on (host, id)). The cursor is
 * read back from PostgreSQL after every failure, never kept anywhere else. Returns the number of rows
 * copied (0: up to date), -PG_UNAVAILABLE, or another negative errno. */
int audit_ship_step(AuditShip *s, AuditStore *store, unsigned max_rows);

/* libpq's last message, for the caller's log line. */
const char *audit_ship_error(AuditShip *s);
