/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the logger's copy of its rows in PostgreSQL: in order, each once, across failures and
 * restarts. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit-ship.h"
#include "audit-store.h"
#include "test-pg.h"
#include "test-util.h"

static TestPg pg;
static char dir[] = "/tmp/test-audit-ship.XXXXXX";

static void add_rows(AuditStore *s, unsigned from, unsigned n) {
        CHECK_INT(audit_store_begin(s), 0);
        for (unsigned i = from; i < from + n; i++) {
                AuditRecord r = AUDIT_RECORD_INIT;
                char key[32], detail[64];
                uint64_t id = 0;

                snprintf(key, sizeof(key), "k-%u", i);
                snprintf(detail, sizeof(detail), "{\"n\":%u}", i);
                r.key = key;
                r.session_id = "sb_aaaaaaaaaa";
                r.account_id = "uid:0";
                r.request_id = i % 2 ? "req_odd" : NULL;
                r.operation = AUDIT_OPERATION_EXEC;
                r.event = AUDIT_EVENT_FINISHED;
                r.detail = detail;
                r.exit_code = (int32_t) i - 3;
                r.stdout_data = "out";
                r.stdout_size = 3;
                r.started_at = UINT64_C(1700000000000000) + i;
                CHECK_INT(audit_record_normalize(&r, 1 << 20, 4096, NULL), 0);
                CHECK_INT(audit_store_insert(s, &r, UINT64_C(1700000001000000) + i, &id), 1);
                audit_record_clear(&r);
        }
        CHECK_INT(audit_store_commit(s), 0);
}

static void expect_sql(const char *sql, const char *expected) {
        char out[512];
        CHECK_INT(test_pg_sql(&pg, sql, out, sizeof(out)), 0);
        CHECK_STR(out, expected);
}

static AuditShip *ship_new(const char *host) {
        AuditShip *s = NULL;
        CHECK_INT(audit_ship_new(pg.url, host, &s), 0);
        if (!s)
                exit(EXIT_FAILURE);
        return s;
}

int main(void) {
        _cleanup_(audit_ship_freep) AuditShip *a = NULL, *b = NULL;
        AuditShip *bad = NULL;
        AuditStore *store = NULL, *other = NULL;
        char path[256];

        CHECK_INT(audit_ship_new("mysql://x", "h", &bad), -EINVAL);
        CHECK_INT(audit_ship_new("postgresql:///x", "", &bad), -EINVAL);
        CHECK(!bad);
        if (!test_pg_available()) {
                printf("SKIP: no %s/initdb (Debian's postgresql-15)\n", TEST_PG_BIN);
                return test_finish("test-audit-ship") == EXIT_SUCCESS ? 77 : EXIT_FAILURE;
        }
        test_mkdtemp(dir);
        test_pg_init(&pg, "test-audit-ship");
        snprintf(path, sizeof(path), "%s/a.db", dir);
        CHECK_INT(audit_store_open(path, &store), 0);
        snprintf(path, sizeof(path), "%s/b.db", dir);
        CHECK_INT(audit_store_open(path, &other), 0);

        /* 25 rows in batches of 10: three steps, then up to date */
        add_rows(store, 0, 25);
        a = ship_new("host-a");
        CHECK_INT(audit_ship_step(a, store, 10), 10);
        expect_sql("SELECT count(*), min(id), max(id) FROM audit_rows", "10|1|10");
        CHECK_INT(audit_ship_step(a, store, 10), 10);
        CHECK_INT(audit_ship_step(a, store, 10), 5);
        CHECK_INT(audit_ship_step(a, store, 10), 0);
        expect_sql("SELECT count(*), count(DISTINCT id), max(id) FROM audit_rows WHERE host = 'host-a'",
                   "25|25|25");
        /* the row as stored, field by field */
        expect_sql("SELECT session_id, account_id, source, operation, event, detail, exit_code, started_at, "
                   "recorded_at, coalesce(request_id, '-') FROM audit_rows WHERE id = 8",
                   "sb_aaaaaaaaaa|uid:0|agent|exec|finished|{\"n\":7}|4|1700000000000007|1700000001000007|"
                   "req_odd");
        expect_sql("SELECT output_truncated FROM audit_rows WHERE id = 8",
                   "{\"stdout\":\"out\",\"stderr\":\"\"}");

        /* another host's rows beside them, its own ids */
        add_rows(other, 100, 3);
        b = ship_new("host-b");
        CHECK_INT(audit_ship_step(b, other, 10), 3);
        expect_sql(
                "SELECT string_agg(host || ':' || id, ',' ORDER BY host, id) FROM audit_rows WHERE id <= 3",
                "host-a:1,host-a:2,host-a:3,host-b:1,host-b:2,host-b:3");

        /* the server away: rows made meanwhile are copied when it is back, none twice */
        add_rows(store, 25, 7);
        CHECK_INT(test_pg_stop(&pg), 0);
        CHECK_INT(audit_ship_step(a, store, 10), -PG_UNAVAILABLE);
        add_rows(store, 32, 3);
        CHECK_INT(test_pg_start(&pg), 0);
        int r = -PG_UNAVAILABLE;
        for (int i = 0; i < 40 && r == -PG_UNAVAILABLE; i++) {
                r = audit_ship_step(a, store, 10);
                if (r == -PG_UNAVAILABLE)
                        usleep(50 * 1000);
        }
        CHECK_INT(r, 10);
        expect_sql("SELECT count(*), count(DISTINCT id), max(id) FROM audit_rows WHERE host = 'host-a'",
                   "35|35|35");

        /* a restarted logger (a new shipper, no memory) reads where to go on from PostgreSQL */
        a = audit_ship_free(a);
        a = ship_new("host-a");
        CHECK_INT(audit_ship_step(a, store, 10), 0);
        /* a batch sent again by a shipper that never heard it was committed (a lost acknowledgement, here a
         * second shipper of the same host whose cursor is behind): stored once */
        b = audit_ship_free(b);
        b = ship_new("host-a");
        CHECK_INT(audit_ship_step(b, store, 10), 0); /* b's cursor: 35 */
        add_rows(store, 35, 2);
        CHECK_INT(audit_ship_step(a, store, 10), 2);
        CHECK_INT(audit_ship_step(b, store, 10), 2); /* 36 and 37 again */
        expect_sql("SELECT count(*), count(DISTINCT id), min(id), max(id) FROM audit_rows WHERE host = "
                   "'host-a'",
                   "37|37|1|37");

        /* rows removed by retention before they were copied leave a gap that is passed over */
        add_rows(store, 37, 30);
        CHECK_INT(audit_store_delete_excess(store, 5, 1000) >= 0, 1);
        CHECK_INT(audit_ship_step(a, store, 10), 5);
        expect_sql("SELECT count(*), max(id) FROM audit_rows WHERE host = 'host-a'", "42|67");

        audit_store_free(store);
        audit_store_free(other);
        a = audit_ship_free(a);
        b = audit_ship_free(b);
        test_pg_done(&pg);
        test_rm_rf(dir);
        return test_finish("test-audit-ship");
}
