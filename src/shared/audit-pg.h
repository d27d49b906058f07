/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The audit log's copy in PostgreSQL (docs/scale-out.md): its table, written by sandbox-auditd's shipper and
 * read by the gateway's GET /v1/log with ClusterLog=yes. */
#pragma once

/* pg_advisory_xact_lock's key while creating the table: "sbx29l" as a number. */
#define AUDIT_PG_SCHEMA_LOCK "7568728330"

/* Idempotent, one transaction; every writer and reader runs it on connecting. */
#define AUDIT_PG_SCHEMA_SQL                                                                                 \
        "BEGIN;"                                                                                            \
        "SELECT pg_advisory_xact_lock(" AUDIT_PG_SCHEMA_LOCK ");"                                           \
        "CREATE TABLE IF NOT EXISTS audit_rows ("                                                           \
        "        host text NOT NULL,"                                                                       \
        "        id bigint NOT NULL,"                                                                       \
        "        session_id text NOT NULL,"                                                                 \
        "        account_id text NOT NULL,"                                                                 \
        "        source text NOT NULL,"                                                                     \
        "        operation text NOT NULL,"                                                                  \
        "        event text NOT NULL,"                                                                      \
        "        detail text NOT NULL,"                                                                     \
        "        detail_truncated boolean NOT NULL DEFAULT false,"                                          \
        "        exit_code integer NOT NULL,"                                                               \
        "        output_truncated text,"                                                                    \
        "        started_at bigint NOT NULL,"                                                               \
        "        duration_usec bigint NOT NULL,"                                                            \
        "        recorded_at bigint NOT NULL,"                                                              \
        "        request_id text,"                                                                          \
        "        PRIMARY KEY (host, id));"                                                                  \
        "CREATE INDEX IF NOT EXISTS audit_rows_by_recorded ON audit_rows(recorded_at);"                     \
        "COMMIT;"
