/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* GET /v1/log across hosts (ClusterLog=yes): pages of every host's audit rows from their copy in PostgreSQL.
 */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "macro.h"

typedef struct ClusterLog ClusterLog;

/* A connection to url (the gateway's KeyStore=); the table is made if need be. Errors as pg_conn_new(). */
int cluster_log_open(const char *url, ClusterLog **ret);
ClusterLog *cluster_log_free(ClusterLog *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(ClusterLog *, cluster_log_free);

typedef struct ClusterLogQuery {
        const char *account_id, *operation, *source, *event, *session_id; /* NULL: any */
        char **sessions; /* NULL: every sandbox; else only these (a scoped key's) */
        bool has_since, has_until;
        uint64_t since, until; /* since <= started_at < until */
        uint64_t limit, offset;
} ClusterLogQuery;

/* The page, newest first (by the time each host recorded the row): each row as GET /v1/log's, plus "host".
 * Returns 0 and the array, -PG_UNAVAILABLE, or another negative errno. */
int cluster_log_page(ClusterLog *c, const ClusterLogQuery *q, json_object **ret_entries);
