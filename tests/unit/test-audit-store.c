/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for audit-store: the row's rules, idempotency, filters, stable paging, retention, migrations. */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit-store.h"
#include "macro.h"
#include "test-util.h"

static char tmpdir[] = "/tmp/test-audit-store.XXXXXX";

#define OUTPUT_MAX (UINT64_C(1) << 20)
#define DETAIL_MAX UINT64_C(4096)

static char *db_path(const char *name) {
        static char buf[512];
        snprintf(buf, sizeof(buf), "%s/%s", tmpdir, name);
        return buf;
}

static AuditStore *open_store(const char *name) {
        AuditStore *s = NULL;
        int r = audit_store_open(db_path(name), &s);
        if (r < 0) {
                fprintf(stderr, "audit_store_open(%s): %s\n", name, strerror(-r));
                exit(EXIT_FAILURE);
        }
        return s;
}

/* Stores one row; returns the id, or 0 (with the error in *ret_r) on failure. */
static uint64_t put(AuditStore *s, const char *key, const char *session, AuditOperation op,
                    uint64_t started_at, int *ret_r) {
        AuditRecord r = AUDIT_RECORD_INIT;
        uint64_t id = 0;
        int k;

        r.key = key;
        r.session_id = session;
        r.account_id = "acct";
        r.operation = op;
        r.event = AUDIT_EVENT_FINISHED;
        r.started_at = started_at;
        r.stdout_data = "out";
        r.stdout_size = 3;
        k = audit_record_normalize(&r, OUTPUT_MAX, DETAIL_MAX, NULL);
        if (k >= 0)
                k = audit_store_insert(s, &r, 1000, &id);
        audit_record_clear(&r);
        if (ret_r)
                *ret_r = k;
        return k < 0 ? 0 : id;
}

static void test_string_tables(void) {
        for (int i = 0; i < _AUDIT_OPERATION_MAX; i++) {
                const char *s = audit_operation_to_string(i);
                CHECK(s);
                CHECK(audit_operation_from_string(s) == (AuditOperation) i);
        }
        for (int i = 0; i < _AUDIT_EVENT_MAX; i++) {
                const char *s = audit_event_to_string(i);
                CHECK(s);
                CHECK(audit_event_from_string(s) == (AuditEvent) i);
        }
        for (int i = 0; i < _AUDIT_SOURCE_MAX; i++) {
                const char *s = audit_source_to_string(i);
                CHECK(s);
                CHECK(audit_source_from_string(s) == (AuditSource) i);
        }
        CHECK_U64(_AUDIT_OPERATION_MAX, 34);
        CHECK_STR(audit_operation_to_string(AUDIT_OPERATION_API_KEY_LIST), "api_key.list");
        CHECK_STR(audit_operation_to_string(AUDIT_OPERATION_AUTH), "auth");
        CHECK_STR(audit_operation_to_string(AUDIT_OPERATION_NETWORK_DENIED), "network.denied");
        CHECK_STR(audit_operation_to_string(AUDIT_OPERATION_PROCESS_START), "process.start");
        CHECK_STR(audit_operation_to_string(AUDIT_OPERATION_PROCESS_SIGNAL), "process.signal");
        CHECK_STR(audit_operation_to_string(AUDIT_OPERATION_PROCESS_EXIT), "process.exit");
        CHECK_STR(audit_operation_to_string(AUDIT_OPERATION_IMAGE_IMPORT), "image.import");
        CHECK_STR(audit_operation_to_string(AUDIT_OPERATION_IMAGE_BUILD), "image.build");
        CHECK_STR(audit_operation_to_string(AUDIT_OPERATION_IMAGE_REMOVE), "image.remove");
        CHECK_STR(audit_operation_to_string(AUDIT_OPERATION_SANDBOX_PAUSE), "sandbox.pause");
        CHECK_STR(audit_operation_to_string(AUDIT_OPERATION_SANDBOX_RESUME), "sandbox.resume");
        CHECK_STR(audit_operation_to_string(AUDIT_OPERATION_SNAPSHOT_CREATE), "snapshot.create");
        CHECK_STR(audit_operation_to_string(AUDIT_OPERATION_SNAPSHOT_REMOVE), "snapshot.remove");
        CHECK_STR(audit_operation_to_string(AUDIT_OPERATION_SNAPSHOT_READ), "snapshot.read");
        CHECK_STR(audit_operation_to_string(AUDIT_OPERATION_MCP), "mcp");
        CHECK_U64(_AUDIT_EVENT_MAX, 7);
        CHECK_STR(audit_operation_to_string(AUDIT_OPERATION_SANDBOX_EXPIRE), "sandbox.expire");
        CHECK_STR(audit_operation_to_string(AUDIT_OPERATION_API_KEY_REVOKE), "api_key.revoke");
        CHECK_STR(audit_event_to_string(AUDIT_EVENT_OOM_KILLED), "oom_killed");
        CHECK_STR(audit_event_to_string(AUDIT_EVENT_CANCELLED), "cancelled");
        CHECK_STR(audit_source_to_string(AUDIT_SOURCE_HUMAN_TAKEOVER), "human_takeover");
        CHECK(audit_operation_from_string("EXEC") < 0);
        CHECK(audit_operation_from_string("") < 0);
        CHECK(audit_operation_from_string(NULL) < 0);
        CHECK(audit_event_from_string("ok") < 0);
        CHECK(audit_source_from_string("root") < 0);
        CHECK(audit_operation_to_string(_AUDIT_OPERATION_MAX) == NULL);
        CHECK(audit_operation_to_string(_AUDIT_OPERATION_INVALID) == NULL);
}

/* normalize() on a record with one field changed: the result, and the message if it failed */
static int try_record(void (*change)(AuditRecord *r), char **ret_error) {
        AuditRecord r = AUDIT_RECORD_INIT;
        int k;

        r.key = "k";
        r.operation = AUDIT_OPERATION_EXEC;
        r.event = AUDIT_EVENT_FINISHED;
        change(&r);
        k = audit_record_normalize(&r, OUTPUT_MAX, DETAIL_MAX, ret_error);
        audit_record_clear(&r);
        return k;
}

static char long_string[2 * 1024 * 1024];
static void no_change(AuditRecord *r) {}
static void no_key(AuditRecord *r) { r->key = NULL; }
static void empty_key(AuditRecord *r) { r->key = ""; }
static void key_129(AuditRecord *r) { r->key = long_string + sizeof(long_string) - 1 - 129; }
static void key_128(AuditRecord *r) { r->key = long_string + sizeof(long_string) - 1 - 128; }
static void session_65(AuditRecord *r) { r->session_id = long_string + sizeof(long_string) - 1 - 65; }
static void session_64(AuditRecord *r) { r->session_id = long_string + sizeof(long_string) - 1 - 64; }
static void account_257(AuditRecord *r) { r->account_id = long_string + sizeof(long_string) - 1 - 257; }
static void request_129(AuditRecord *r) { r->request_id = long_string + sizeof(long_string) - 1 - 129; }
static void no_operation(AuditRecord *r) { r->operation = _AUDIT_OPERATION_INVALID; }
static void no_event(AuditRecord *r) { r->event = _AUDIT_EVENT_INVALID; }
static void bad_json(AuditRecord *r) { r->detail = "{\"a\":"; }
static void trailing_json(AuditRecord *r) { r->detail = "{} x"; }
static void two_json(AuditRecord *r) { r->detail = "{}{}"; }
static void empty_json(AuditRecord *r) { r->detail = ""; }
static void single_quotes(AuditRecord *r) { r->detail = "{'a':1}"; }
static void json_number(AuditRecord *r) { r->detail = "42"; }
static void json_null(AuditRecord *r) { r->detail = " null\n"; }
static void json_array(AuditRecord *r) { r->detail = "[1, \"two\", {\"x\": null}]"; }
static void stdout_too_big(AuditRecord *r) {
        r->stdout_data = long_string;
        r->stdout_size = OUTPUT_MAX + 1;
}
static void stderr_max(AuditRecord *r) {
        r->stderr_data = long_string;
        r->stderr_size = OUTPUT_MAX;
}

static void test_validation(void) {
        static const struct {
                void (*change)(AuditRecord *r);
                int expected;
                const char *message;
        } cases[] = {
                { no_change, 0, NULL },
                { no_key, -EINVAL, "key is required." },
                { empty_key, -EINVAL, "key must be 1 to 128 bytes long, not 0." },
                { key_129, -EINVAL, "key must be 1 to 128 bytes long, not 129." },
                { key_128, 0, NULL },
                { session_65, -EINVAL, "session_id must be 0 to 64 bytes long, not 65." },
                { session_64, 0, NULL },
                { account_257, -EINVAL, "account_id must be 0 to 256 bytes long, not 257." },
                { request_129, -EINVAL, "request_id must be 0 to 128 bytes long, not 129." },
                { no_operation, -EINVAL, "operation is required." },
                { no_event, -EINVAL, "event is required." },
                { bad_json, -EINVAL, "detail is not valid JSON (at byte 5)." },
                { trailing_json, -EINVAL, "detail is not valid JSON (at byte 3)." },
                { two_json, -EINVAL, "detail is not valid JSON (at byte 2)." },
                { empty_json, -EINVAL, "detail is not valid JSON (at byte 0)." },
                { single_quotes, -EINVAL, "detail is not valid JSON (at byte 1)." },
                { json_number, 0, NULL },
                { json_null, 0, NULL },
                { json_array, 0, NULL },
                { stdout_too_big, -EINVAL,
                  "stdout is 1048577 bytes; at most 1048576 are stored per stream (OutputMax=)." },
                { stderr_max, 0, NULL },
        };

        memset(long_string, 'x', sizeof(long_string) - 1);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *error = NULL;
                int k = try_record(cases[i].change, &error);
                if (k != cases[i].expected || !streq_ptr(error, cases[i].message)) {
                        fprintf(stderr, "validation case %zu: %d \"%s\", expected %d \"%s\"\n", i, k,
                                strna(error), cases[i].expected, strna(cases[i].message));
                        failures++;
                }
        }

        /* defaults */
        AuditRecord r = AUDIT_RECORD_INIT;
        r.key = "k";
        r.operation = AUDIT_OPERATION_LS;
        r.event = AUDIT_EVENT_DENIED;
        CHECK(audit_record_normalize(&r, OUTPUT_MAX, DETAIL_MAX, NULL) == 0);
        CHECK(r.source == AUDIT_SOURCE_AGENT);
        CHECK_STR(audit_record_detail(&r), "{}");
        CHECK(!r.detail_truncated);
        CHECK_STR(r.session_id, "");
        CHECK_STR(r.account_id, "");
        CHECK_STR(r.request_id, "");
        CHECK_STR(r.output_truncated, "{\"stdout\":\"\",\"stderr\":\"\"}");
        audit_record_clear(&r);
        CHECK(r.output_truncated == NULL && !r.normalized);
}

/* RFC 8259, including what json-c's strict mode lets through */
static void test_json(void) {
        static const struct {
                const char *text;
                bool valid;
        } cases[] = {
                { "{}", true },
                { "[]", true },
                { " \t\r\n{ \"a\" : [ 1 , -2.5e+3 , 0 , -0 , 0.25E-2 , true , false , null ] }\n", true },
                { "\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\uD83D\\uDE00 é\"", true },
                { "{\"a\":{\"b\":{\"c\":[[[]]]}}}", true },
                { "123", true },
                { "\"\"", true },
                { "{'a':1}", false },
                { "{a:1}", false },
                { "NaN", false },
                { "[Infinity]", false },
                { "-Infinity", false },
                { "1.", false },
                { ".5", false },
                { "+1", false },
                { "01", false },
                { "1e", false },
                { "1e+", false },
                { "-", false },
                { "\"tab\there\"", false },
                { "\"nl\nhere\"", false },
                { "\"\\x41\"", false },
                { "\"\\u12\"", false },
                { "\"unterminated", false },
                { "[1,]", false },
                { "{\"a\":1,}", false },
                { "[1 2]", false },
                { "{\"a\" 1}", false },
                { "{\"a\":}", false },
                { "{1:2}", false },
                { "/*c*/1", false },
                { "{}//", false },
                { "TRUE", false },
                { "nul", false },
                { "[", false },
                { "]", false },
                { "", false },
                { "   ", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                AuditRecord r = AUDIT_RECORD_INIT;
                _cleanup_free_ char *error = NULL;

                r.key = "k";
                r.operation = AUDIT_OPERATION_EXEC;
                r.event = AUDIT_EVENT_FINISHED;
                r.detail = cases[i].text;
                int k = audit_record_normalize(&r, OUTPUT_MAX, DETAIL_MAX, &error);
                if ((k == 0) != cases[i].valid) {
                        fprintf(stderr, "JSON case %zu '%s': %d %s\n", i, cases[i].text, k, strna(error));
                        failures++;
                }
                audit_record_clear(&r);
        }

        /* nesting: 64 levels are fine, 65 are not */
        char deep[200];
        for (int depth = 64; depth <= 65; depth++) {
                AuditRecord r = AUDIT_RECORD_INIT;
                memset(deep, '[', depth);
                memset(deep + depth, ']', depth);
                deep[2 * depth] = 0;
                r.key = "k";
                r.operation = AUDIT_OPERATION_EXEC;
                r.event = AUDIT_EVENT_FINISHED;
                r.detail = deep;
                CHECK((audit_record_normalize(&r, OUTPUT_MAX, DETAIL_MAX, NULL) == 0) == (depth == 64));
                audit_record_clear(&r);
        }
}

static struct json_object *parse(const char *s) {
        struct json_object *o = json_tokener_parse(s);
        if (!o)
                fprintf(stderr, "not JSON: %s\n", s);
        return o;
}

static const char *json_get_string(struct json_object *o, const char *key) {
        struct json_object *v;
        return json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : NULL;
}

static void test_detail_cap(void) {
        char detail[20000];
        AuditRecord r = AUDIT_RECORD_INIT;
        size_t n;

        /* exactly DetailMax: kept as is */
        n = (size_t) snprintf(detail, sizeof(detail), "{\"s\":\"");
        while (n < DETAIL_MAX - 2)
                detail[n++] = 'a';
        memcpy(detail + n, "\"}", 3);
        CHECK_U64(strlen(detail), DETAIL_MAX);
        r.key = "k";
        r.operation = AUDIT_OPERATION_EXEC;
        r.event = AUDIT_EVENT_FINISHED;
        r.detail = detail;
        CHECK(audit_record_normalize(&r, OUTPUT_MAX, DETAIL_MAX, NULL) == 0);
        CHECK(!r.detail_truncated);
        CHECK(audit_record_detail(&r) == detail);
        audit_record_clear(&r);

        /* 10 KiB of quotes, backslashes and multi-byte characters: capped, still JSON, within DetailMax */
        n = (size_t) snprintf(detail, sizeof(detail), "{\"s\":\"");
        while (n < 10000) {
                memcpy(detail + n, "\\\"é€\\n", 9);
                n += 9;
        }
        memcpy(detail + n, "\"}", 3);
        size_t len = strlen(detail);
        r.detail = detail;
        CHECK(audit_record_normalize(&r, OUTPUT_MAX, DETAIL_MAX, NULL) == 0);
        CHECK(r.detail_truncated);
        const char *stored = audit_record_detail(&r);
        CHECK(strlen(stored) <= DETAIL_MAX);
        CHECK(strlen(stored) > DETAIL_MAX / 2); /* the head is not needlessly short */
        struct json_object *o = parse(stored);
        CHECK(o);
        if (o) {
                struct json_object *v;
                CHECK(json_object_object_get_ex(o, "truncated", &v) && json_object_get_boolean(v));
                CHECK(json_object_object_get_ex(o, "size", &v) && (size_t) json_object_get_int64(v) == len);
                const char *head = json_get_string(o, "head");
                CHECK(head && strncmp(head, detail, strlen(head)) == 0);
                CHECK(head && strlen(head) > 0);
                json_object_put(o);
        }
        audit_record_clear(&r);
}

static void test_output_head(void) {
        _cleanup_free_ char *a = audit_output_head_json("hi\n", 3, "oops\xff\xfe!", 7);
        CHECK_STR(a, "{\"stdout\":\"hi\\n\",\"stderr\":\"oops\xEF\xBF\xBD\xEF\xBF\xBD!\"}");

        /* overlong, surrogate, beyond U+10FFFF, a stray continuation byte, NUL */
        _cleanup_free_ char *b =
                audit_output_head_json("\xC0\xAF|\xED\xA0\x80|\xF4\x90\x80\x80|\x80|\0|/", 17, "", 0);
        struct json_object *o = parse(b);
        const char *s = json_get_string(o, "stdout");
        int len = o ? json_object_get_string_len(json_object_object_get(o, "stdout")) : 0;
        const char expected[] = "\xEF\xBF\xBD\xEF\xBF\xBD|\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD|"
                                "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD|\xEF\xBF\xBD|\0|/";
        CHECK(s && len == (int) sizeof(expected) - 1 && memcmp(s, expected, sizeof(expected) - 1) == 0);
        CHECK(b && strstr(b, "\"/\"}") == NULL && strstr(b, "|/\"")); /* no escaped slash */
        json_object_put(o);

        /* long output: 1 KiB, and a character cut in two by the limit is dropped, not replaced */
        char big[3000];
        memset(big, 'a', sizeof(big));
        memcpy(big + 1023, "é", 2); /* bytes 1023 and 1024 */
        _cleanup_free_ char *c = audit_output_head_json(big, sizeof(big), big, 1024);
        o = parse(c);
        s = json_get_string(o, "stdout");
        CHECK(s && strlen(s) == 1023);
        s = json_get_string(o, "stderr");
        /* the stream itself ends there: an incomplete character of the data is replaced */
        CHECK(s && strlen(s) == 1026 && streq(s + 1023, "\xEF\xBF\xBD"));
        json_object_put(o);

        /* valid multi-byte characters stay */
        _cleanup_free_ char *d = audit_output_head_json("é€😀", 9, NULL, 0);
        CHECK_STR(d, "{\"stdout\":\"é€😀\",\"stderr\":\"\"}");
}

typedef struct Collected {
        uint64_t ids[4096];
        size_t n;
        char last_session[128];
        bool check_fields;
} Collected;

static int collect(const AuditEntry *e, void *userdata) {
        Collected *c = userdata;
        if (c->n < ELEMENTSOF(c->ids))
                c->ids[c->n++] = e->id;
        snprintf(c->last_session, sizeof(c->last_session), "%s", e->session_id);
        return 0;
}

static int stop_after_3(const AuditEntry *e, void *userdata) {
        static unsigned n = 0;
        return ++n % 3 == 0;
}

static int fail(const AuditEntry *e, void *userdata) {
        return -EUCLEAN;
}

static size_t query(AuditStore *s, const AuditFilter *f, uint64_t limit, uint64_t offset, Collected *c) {
        c->n = 0;
        int r = audit_store_query(s, f, limit, offset, collect, c);
        CHECK(r >= 0);
        CHECK_U64((uint64_t) r, c->n);
        /* newest first */
        for (size_t i = 1; i < c->n; i++)
                CHECK(c->ids[i - 1] > c->ids[i]);
        return c->n;
}

typedef struct Seen {
        AuditEntry e;
        char key[256], session[128], detail[8192], output[4096], source[32], op[32], event[32], account[300],
                request[200];
} Seen;

static int copy_entry(const AuditEntry *e, void *userdata) {
        Seen *s = userdata;
        s->e = *e;
        snprintf(s->key, sizeof(s->key), "%s", e->key);
        snprintf(s->session, sizeof(s->session), "%s", e->session_id);
        snprintf(s->detail, sizeof(s->detail), "%s", e->detail);
        snprintf(s->output, sizeof(s->output), "%s", e->output_truncated);
        snprintf(s->source, sizeof(s->source), "%s", e->source);
        snprintf(s->op, sizeof(s->op), "%s", e->operation);
        snprintf(s->event, sizeof(s->event), "%s", e->event);
        snprintf(s->account, sizeof(s->account), "%s", e->account_id);
        snprintf(s->request, sizeof(s->request), "%s", e->request_id);
        return 0;
}

typedef struct Output {
        char out[64], err[64];
        size_t out_size, err_size;
} Output;

static int copy_output(const void *out, size_t out_size, const void *err, size_t err_size, void *userdata) {
        Output *o = userdata;
        o->out_size = out_size;
        o->err_size = err_size;
        memcpy(o->out, out ?: "", MIN(out_size, sizeof(o->out)));
        memcpy(o->err, err ?: "", MIN(err_size, sizeof(o->err)));
        return 0;
}

static void test_insert_and_idempotency(void) {
        AuditStore *s = open_store("insert.db");
        AuditRecord r = AUDIT_RECORD_INIT;
        uint64_t id = 0, id2 = 0, n = 0;
        Seen seen;
        Output out = {};

        r.key = "exec-1";
        r.session_id = "sb_aaaaaaaaaa";
        r.account_id = "uid:0";
        r.request_id = "req_1";
        r.source = AUDIT_SOURCE_HUMAN_TAKEOVER;
        r.operation = AUDIT_OPERATION_EXEC;
        r.event = AUDIT_EVENT_TIMED_OUT;
        r.detail = "{\"argv\":[\"sleep\",\"30\"]}";
        r.exit_code = -9;
        r.stdout_data = "partial";
        r.stdout_size = 7;
        r.stderr_data = "e\0rr";
        r.stderr_size = 4;
        r.started_at = 1700000000000000;
        r.duration_usec = 1234567;

        CHECK(audit_store_insert(s, &r, 1, &id) == -EINVAL); /* not normalised */
        CHECK(audit_record_normalize(&r, OUTPUT_MAX, DETAIL_MAX, NULL) == 0);
        CHECK(audit_store_insert(s, &r, 1700000001000000, &id) == 1);
        CHECK_U64(id, 1);
        /* the same key again: nothing stored, the first id back */
        r.exit_code = 0;
        CHECK(audit_store_insert(s, &r, 1700000002000000, &id2) == 0);
        CHECK_U64(id2, 1);
        CHECK(audit_store_count(s, &n) == 0);
        CHECK_U64(n, 1);

        CHECK(audit_store_get(s, id, copy_entry, &seen) == 0);
        CHECK_STR(seen.key, "exec-1");
        CHECK_STR(seen.session, "sb_aaaaaaaaaa");
        CHECK_STR(seen.account, "uid:0");
        CHECK_STR(seen.request, "req_1");
        CHECK_STR(seen.source, "human_takeover");
        CHECK_STR(seen.op, "exec");
        CHECK_STR(seen.event, "timed_out");
        CHECK_STR(seen.detail, "{\"argv\":[\"sleep\",\"30\"]}");
        CHECK_STR(seen.output, "{\"stdout\":\"partial\",\"stderr\":\"e\\u0000rr\"}");
        CHECK(seen.e.exit_code == -9);
        CHECK(!seen.e.detail_truncated);
        CHECK_U64(seen.e.started_at, 1700000000000000);
        CHECK_U64(seen.e.duration_usec, 1234567);
        CHECK_U64(seen.e.recorded_at, 1700000001000000);
        CHECK_U64(seen.e.stdout_size, 7);
        CHECK_U64(seen.e.stderr_size, 4);

        /* what the signal carries is what a query returns */
        AuditEntry sig;
        audit_record_to_entry(&r, id, 1700000001000000, &sig);
        CHECK_STR(sig.output_truncated, seen.output);
        CHECK_STR(sig.detail, seen.detail);
        CHECK_STR(sig.source, seen.source);
        CHECK_U64(sig.started_at, seen.e.started_at);

        CHECK(audit_store_get_output(s, id, copy_output, &out) == 0);
        CHECK(out.out_size == 7 && memcmp(out.out, "partial", 7) == 0);
        CHECK(out.err_size == 4 && memcmp(out.err, "e\0rr", 4) == 0);
        CHECK(audit_store_get_output(s, 999, copy_output, &out) == -ENOENT);
        CHECK(audit_store_get(s, 999, copy_entry, &seen) == -ENOENT);
        audit_record_clear(&r);

        /* empty output is an empty blob; started_at 0 means "when recorded" */
        r = AUDIT_RECORD_INIT;
        r.key = "create-1";
        r.operation = AUDIT_OPERATION_SANDBOX_CREATE;
        r.event = AUDIT_EVENT_FINISHED;
        CHECK(audit_record_normalize(&r, OUTPUT_MAX, DETAIL_MAX, NULL) == 0);
        CHECK(audit_store_insert(s, &r, 42, &id) == 1);
        CHECK_U64(id, 2);
        audit_record_clear(&r);
        CHECK(audit_store_get(s, id, copy_entry, &seen) == 0);
        CHECK_U64(seen.e.started_at, 42);
        CHECK(audit_store_get_output(s, id, copy_output, &out) == 0);
        CHECK(out.out_size == 0 && out.err_size == 0);

        /* a batch in one transaction; a key repeated inside it is found too */
        CHECK(audit_store_begin(s) == 0);
        CHECK(audit_store_in_transaction(s));
        CHECK_U64(put(s, "batch-1", "b", AUDIT_OPERATION_LS, 1, NULL), 3);
        CHECK_U64(put(s, "batch-2", "b", AUDIT_OPERATION_LS, 1, NULL), 4);
        CHECK_U64(put(s, "batch-1", "b", AUDIT_OPERATION_LS, 1, NULL), 3);
        CHECK(audit_store_delete_older(s, 100, 10) == -EBUSY); /* retention waits for the commit */
        CHECK(audit_store_commit(s) == 0);
        CHECK(!audit_store_in_transaction(s));
        /* a rolled-back batch stores nothing and allocates no id */
        CHECK(audit_store_begin(s) == 0);
        CHECK_U64(put(s, "gone", "b", AUDIT_OPERATION_LS, 1, NULL), 5);
        audit_store_rollback(s);
        CHECK(audit_store_count(s, &n) == 0);
        CHECK_U64(n, 4);
        CHECK_U64(put(s, "batch-3", "b", AUDIT_OPERATION_LS, 1, NULL), 5);
        audit_store_free(s);

        /* ids survive a reopen and are never reused, even when the newest row is deleted */
        s = open_store("insert.db");
        CHECK_U64(put(s, "exec-1", "x", AUDIT_OPERATION_LS, 1, NULL), 1);
        /* by age, the oldest ids go first and the first younger row stops it: exec-1 (id 1) is young */
        CHECK(audit_store_delete_older(s, 2, 100) == 0);
        CHECK(audit_store_delete_older(s, UINT64_MAX, 100) == 5);
        CHECK(audit_store_max_id(s, &n) == 0);
        CHECK_U64(n, 5);
        CHECK_U64(put(s, "after-delete", "x", AUDIT_OPERATION_LS, 1000, NULL), 6);
        audit_store_free(s);
}

static void test_filters(void) {
        AuditStore *s = open_store("filters.db");
        Collected *c = calloc(1, sizeof(Collected));
        int k;

        CHECK(c);
        CHECK(audit_store_begin(s) == 0);
        for (unsigned i = 1; i <= 300; i++) {
                char key[32], session[32];
                snprintf(key, sizeof(key), "k%u", i);
                snprintf(session, sizeof(session), "sb_%u", i % 3);
                AuditRecord r = AUDIT_RECORD_INIT;
                r.key = key;
                r.session_id = session;
                r.account_id = i % 2 ? "odd" : "even";
                r.operation = i % 10 == 0 ? AUDIT_OPERATION_WRITE : AUDIT_OPERATION_EXEC;
                r.event = i % 7 == 0 ? AUDIT_EVENT_FAILED : AUDIT_EVENT_FINISHED;
                r.source = i % 50 == 0 ? AUDIT_SOURCE_SYSTEM : AUDIT_SOURCE_AGENT;
                r.started_at = 1000 + i;
                CHECK(audit_record_normalize(&r, OUTPUT_MAX, DETAIL_MAX, NULL) == 0);
                uint64_t id;
                k = audit_store_insert(s, &r, 5000, &id);
                CHECK(k == 1 && id == i);
                audit_record_clear(&r);
        }
        CHECK(audit_store_commit(s) == 0);

        CHECK_U64(query(s, NULL, 0, 0, c), 50); /* limit 0: 50 */
        CHECK_U64(c->ids[0], 300);
        CHECK_U64(c->ids[49], 251);
        CHECK_U64(query(s, NULL, 5000, 0, c), 300); /* capped at 1000; only 300 exist */
        CHECK_U64(query(s, NULL, 10, 295, c), 5);
        CHECK_U64(c->ids[4], 1);
        CHECK_U64(query(s, NULL, 10, UINT64_MAX, c), 0); /* offset capped, past the end */

        AuditFilter f = { .session_id = "sb_1" };
        CHECK_U64(query(s, &f, 1000, 0, c), 100);
        CHECK_U64(c->ids[0], 298);
        CHECK_STR(c->last_session, "sb_1");
        f = (AuditFilter) { .account_id = "even" };
        CHECK_U64(query(s, &f, 1000, 0, c), 150);
        f = (AuditFilter) { .operation = "write" };
        CHECK_U64(query(s, &f, 1000, 0, c), 30);
        f = (AuditFilter) { .event = "failed" };
        CHECK_U64(query(s, &f, 1000, 0, c), 42);
        f = (AuditFilter) { .source = "system" };
        CHECK_U64(query(s, &f, 1000, 0, c), 6);
        f = (AuditFilter) { .source = "human_takeover" };
        CHECK_U64(query(s, &f, 1000, 0, c), 0);
        f = (AuditFilter) { .has_since = true, .since = 1101, .has_until = true, .until = 1111 };
        CHECK_U64(query(s, &f, 1000, 0, c), 10); /* started_at 1101..1110: ids 101..110 */
        CHECK_U64(c->ids[0], 110);
        CHECK_U64(c->ids[9], 101);
        f = (AuditFilter) { .has_after_id = true, .after_id = 290 };
        CHECK_U64(query(s, &f, 1000, 0, c), 10);
        f = (AuditFilter) { .has_max_id = true, .max_id = 10 };
        CHECK_U64(query(s, &f, 1000, 0, c), 10);
        CHECK_U64(c->ids[0], 10);
        f = (AuditFilter) { .has_max_id = true, .max_id = UINT64_MAX, .has_until = true,
                            .until = UINT64_MAX };
        CHECK_U64(query(s, &f, 1000, 0, c), 300); /* huge bounds are no bounds */
        f = (AuditFilter) { .session_id = "sb_0", .operation = "write", .account_id = "even",
                            .event = "finished" };
        CHECK_U64(query(s, &f, 1000, 0, c), 9); /* multiples of 30 but not of 7: 30..300 but 210 */
        f = (AuditFilter) { .session_id = "nope" };
        CHECK_U64(query(s, &f, 1000, 0, c), 0);

        /* a callback that stops early, and one that fails */
        k = audit_store_query(s, NULL, 100, 0, stop_after_3, c);
        CHECK(k == 3);
        k = audit_store_query(s, NULL, 100, 0, fail, c);
        CHECK(k == -EUCLEAN);
        CHECK_U64(query(s, NULL, 3, 0, c), 3); /* the statement is usable afterwards */

        audit_store_free(s);
        free(c);
}

/* Pages of 7 with max_id fixed to the first page's top, while rows keep arriving: every row at or
 * below the top exactly once, in order. */
static void test_stable_paging(void) {
        AuditStore *s = open_store("paging.db");
        Collected *page = calloc(1, sizeof(Collected)), *all = calloc(1, sizeof(Collected));
        unsigned next = 1;
        char key[32];

        CHECK(page && all);
        for (; next <= 100; next++) {
                snprintf(key, sizeof(key), "p%u", next);
                put(s, key, next % 2 ? "sb_p" : "sb_q", AUDIT_OPERATION_EXEC, next, NULL);
        }

        AuditFilter f = { .session_id = "sb_p" };
        CHECK_U64(query(s, &f, 7, 0, page), 7);
        uint64_t top = page->ids[0];
        CHECK_U64(top, 99);
        f.has_max_id = true;
        f.max_id = top;
        for (uint64_t offset = 0;; offset += 7) {
                /* three new rows between pages, one of them in our session */
                for (int j = 0; j < 3; j++, next++) {
                        snprintf(key, sizeof(key), "p%u", next);
                        put(s, key, next % 2 ? "sb_p" : "sb_q", AUDIT_OPERATION_EXEC, next, NULL);
                }
                if (query(s, &f, 7, offset, page) == 0)
                        break;
                for (size_t i = 0; i < page->n; i++)
                        all->ids[all->n++] = page->ids[i];
        }
        CHECK_U64(all->n, 50);
        for (size_t i = 0; i < all->n; i++)
                CHECK_U64(all->ids[i], 99 - 2 * i);

        /* and the rows that arrived meanwhile: after_id = the old top */
        f = (AuditFilter) { .session_id = "sb_p", .has_after_id = true, .after_id = top };
        uint64_t newer = query(s, &f, 1000, 0, page);
        CHECK(newer > 0);
        CHECK(page->ids[page->n - 1] == 101);
        audit_store_free(s);
        free(page);
        free(all);
}

static void test_retention(void) {
        AuditStore *s = open_store("retention.db");
        uint64_t n = 0;
        char key[32];
        int k, total;

        CHECK(audit_store_begin(s) == 0);
        for (unsigned i = 1; i <= 2500; i++) {
                snprintf(key, sizeof(key), "r%u", i);
                /* the first 600 rows are old, and so is every fourth row after them (delivered late) */
                put(s, key, "sb", AUDIT_OPERATION_EXEC, i <= 600 || i % 4 == 0 ? 10 : 1000000 + i, NULL);
        }
        CHECK(audit_store_commit(s) == 0);

        /* by age, in batches, oldest ids first: the chain loses only its head, so the late old rows
         * stay until the rows before them go */
        total = 0;
        while ((k = audit_store_delete_older(s, 1000, 100)) > 0) {
                CHECK(k <= 100);
                total += k;
        }
        CHECK(k == 0);
        CHECK(total == 600);
        CHECK(audit_store_count(s, &n) == 0);
        CHECK_U64(n, 1900);
        uint64_t anchor = 0;
        uint8_t hash[AUDIT_HASH_SIZE];
        bool has = false;
        CHECK(audit_store_anchor(s, &anchor, hash, &has) == 0);
        CHECK_U64(anchor, 600);
        CHECK(has);

        /* by count: the newest 1000 ids stay */
        total = 0;
        while ((k = audit_store_delete_excess(s, 1000, 300)) > 0) {
                CHECK(k <= 300);
                total += k;
        }
        CHECK(k == 0);
        CHECK(total == 900);
        CHECK(audit_store_count(s, &n) == 0);
        CHECK_U64(n, 1000);
        CHECK(audit_store_anchor(s, &anchor, hash, &has) == 0);
        CHECK_U64(anchor, 1500);
        Collected *c = calloc(1, sizeof(Collected));
        AuditFilter f = { .has_max_id = true, .max_id = 1500 };
        CHECK_U64(query(s, &f, 1000, 0, c), 0);
        CHECK_U64(query(s, NULL, 1000, 0, c), 1000);
        CHECK_U64(c->ids[0], 2500);
        CHECK_U64(c->ids[999], 1501);
        /* what is left still verifies, from the anchor */
        AuditVerify v = AUDIT_VERIFY_INIT;
        while ((k = audit_store_verify_step(s, &v, 1000, UINT64_MAX)) == 0)
                ;
        CHECK(k == 1);
        CHECK(v.result == AUDIT_CHAIN_OK);
        CHECK_U64(v.rows, 1000);
        CHECK_U64(v.anchor_id, 1500);
        CHECK(audit_store_delete_excess(s, 0, 100) == 0); /* 0: no limit */
        CHECK(audit_store_delete_excess(s, 5000, 100) == 0);
        free(c);
        audit_store_free(s);
}

static int exec_int(const char *path, const char *sql) {
        sqlite3 *db;
        sqlite3_stmt *st;
        int v = -1;

        if (sqlite3_open(path, &db) != SQLITE_OK)
                return -1;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
                int rc = sqlite3_step(st);
                if (rc == SQLITE_ROW)
                        v = sqlite3_column_int(st, 0);
                else if (rc == SQLITE_DONE)
                        v = 0;
                sqlite3_finalize(st);
        }
        sqlite3_close(db);
        return v;
}

static void test_migrations(void) {
        AuditStore *s = open_store("migrate.db");
        int k;

        put(s, "m1", "sb", AUDIT_OPERATION_EXEC, 1, NULL);
        audit_store_free(s);
        CHECK(exec_int(db_path("migrate.db"), "PRAGMA user_version") == 2);
        CHECK(exec_int(db_path("migrate.db"), "PRAGMA journal_mode") == 0); /* "wal" reads as 0 */
        CHECK(exec_int(db_path("migrate.db"), "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND"
                                              " name LIKE 'entries_%'") == 6);
        /* a second open migrates nothing and keeps the rows */
        s = open_store("migrate.db");
        uint64_t n = 0;
        CHECK(audit_store_count(s, &n) == 0);
        CHECK_U64(n, 1);
        audit_store_free(s);

        /* a schema from the future is refused, and left alone */
        CHECK(exec_int(db_path("migrate.db"), "PRAGMA user_version = 99") == 0);
        s = NULL;
        k = audit_store_open(db_path("migrate.db"), &s);
        CHECK(k == -EPROTO && s == NULL);
        CHECK(exec_int(db_path("migrate.db"), "PRAGMA user_version") == 99);

        /* a directory that cannot hold the file */
        k = audit_store_open("/nonexistent/dir/audit.db", &s);
        CHECK(k < 0);
}

static int exec_sql(const char *path, const char *sql) {
        sqlite3 *db;
        int rc;

        if (sqlite3_open(path, &db) != SQLITE_OK)
                return -1;
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                fprintf(stderr, "%s: %s\n", sql, sqlite3_errmsg(db));
        sqlite3_close(db);
        return rc == SQLITE_OK ? 0 : -1;
}

static AuditVerify verify(AuditStore *s, unsigned step_rows) {
        AuditVerify v = AUDIT_VERIFY_INIT;
        int k, steps = 0;

        while ((k = audit_store_verify_step(s, &v, step_rows, UINT64_MAX)) == 0)
                steps++;
        CHECK(k == 1);
        CHECK(v.done);
        return v;
}

/* Each tampering on a fresh copy of a 10-row log, done directly in the database as an attacker with
 * the file would. */
static AuditVerify tampered(const char *name, const char *sql) {
        AuditStore *s = open_store(name);
        char key[32];

        for (unsigned i = 1; i <= 10; i++) {
                snprintf(key, sizeof(key), "t%u", i);
                put(s, key, "sb_t", AUDIT_OPERATION_EXEC, 1000 + i, NULL);
        }
        audit_store_free(s);
        if (sql)
                CHECK(exec_sql(db_path(name), sql) == 0);
        s = open_store(name);
        AuditVerify v = verify(s, 3);
        audit_store_free(s);
        return v;
}

static void test_chain(void) {
        AuditVerify v;

        v = tampered("chain-ok.db", NULL);
        CHECK(v.result == AUDIT_CHAIN_OK);
        CHECK_U64(v.rows, 10);
        CHECK_U64(v.prev_id, 10);
        CHECK_U64(v.unhashed, 0);

        v = tampered("chain-edit.db", "UPDATE entries SET exit_code = 3 WHERE id = 4");
        CHECK(v.result == AUDIT_CHAIN_EDITED);
        CHECK_U64(v.bad_id, 4);
        CHECK_U64(v.rows, 3);
        CHECK(strstr(v.message, "Row 4 does not match its hash"));
        v = tampered("chain-edit-out.db", "UPDATE entries SET stdout = X'6f7574' || X'21' WHERE id = 7");
        CHECK(v.result == AUDIT_CHAIN_EDITED);
        CHECK_U64(v.bad_id, 7);
        v = tampered("chain-edit-last.db", "UPDATE entries SET detail = '{\"a\":1}' WHERE id = 10");
        CHECK(v.result == AUDIT_CHAIN_EDITED);
        CHECK_U64(v.bad_id, 10);

        v = tampered("chain-delete.db", "DELETE FROM entries WHERE id = 5");
        CHECK(v.result == AUDIT_CHAIN_MISSING);
        CHECK_U64(v.bad_id, 6);
        CHECK(strstr(v.message, "Row 5 is missing"));
        v = tampered("chain-delete-first.db", "DELETE FROM entries WHERE id <= 2");
        CHECK(v.result == AUDIT_CHAIN_MISSING);
        CHECK_U64(v.bad_id, 3);
        v = tampered("chain-delete-last.db", "DELETE FROM entries WHERE id >= 9");
        CHECK(v.result == AUDIT_CHAIN_TRUNCATED);
        CHECK_U64(v.bad_id, 9);

        v = tampered("chain-swap.db", "UPDATE entries SET id = -1 WHERE id = 5; UPDATE entries SET id = 5 WHERE"
                                      " id = 6; UPDATE entries SET id = 6 WHERE id = -1;"
                                      " UPDATE entry_hashes SET id = -1 WHERE id = 5; UPDATE entry_hashes SET"
                                      " id = 5 WHERE id = 6; UPDATE entry_hashes SET id = 6 WHERE id = -1");
        CHECK(v.result == AUDIT_CHAIN_REORDERED);
        CHECK_U64(v.bad_id, 5);
        v = tampered("chain-unhashed.db", "DELETE FROM entry_hashes WHERE id = 8");
        CHECK(v.result == AUDIT_CHAIN_UNHASHED);
        CHECK_U64(v.bad_id, 8);

        /* a replaced hash: neither the row nor the next follows, "rewritten from here" */
        v = tampered("chain-rehash.db", "UPDATE entry_hashes SET hash = zeroblob(32) WHERE id = 3");
        CHECK(v.result == AUDIT_CHAIN_REORDERED);
        CHECK_U64(v.bad_id, 3);

        /* the walk stops at max_id, and new rows keep chaining after a reopen */
        AuditStore *s = open_store("chain-ok.db");
        AuditVerify w = AUDIT_VERIFY_INIT;
        w.max_id = 4;
        while (audit_store_verify_step(s, &w, 2, UINT64_MAX) == 0)
                ;
        CHECK(w.result == AUDIT_CHAIN_OK);
        CHECK_U64(w.rows, 4);
        CHECK_U64(put(s, "t11", "sb_t", AUDIT_OPERATION_EXEC, 5, NULL), 11);
        /* a rolled-back row leaves the chain where it was */
        CHECK(audit_store_begin(s) == 0);
        CHECK_U64(put(s, "t12", "sb_t", AUDIT_OPERATION_EXEC, 5, NULL), 12);
        audit_store_rollback(s);
        CHECK_U64(put(s, "t12", "sb_t", AUDIT_OPERATION_EXEC, 5, NULL), 12);
        v = verify(s, 1000);
        CHECK(v.result == AUDIT_CHAIN_OK);
        CHECK_U64(v.rows, 12);
        /* bytes bound a step too: one row per step */
        w = AUDIT_VERIFY_INIT;
        CHECK(audit_store_verify_step(s, &w, 1000, 1) == 0);
        CHECK_U64(w.rows, 1);
        audit_store_free(s);
}

/* A log written before the chain (schema 1): its rows stay unhashed, the chain starts after them. */
static void test_chain_migration(void) {
        const char *path = db_path("legacy.db");

        CHECK(exec_sql(path, "PRAGMA journal_mode=WAL; CREATE TABLE entries ("
                             " id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE,"
                             " session_id TEXT NOT NULL, account_id TEXT NOT NULL, source TEXT NOT NULL,"
                             " operation TEXT NOT NULL, event TEXT NOT NULL, exit_code INTEGER NOT NULL,"
                             " started_at INTEGER NOT NULL, duration_usec INTEGER NOT NULL,"
                             " request_id TEXT NOT NULL, recorded_at INTEGER NOT NULL,"
                             " stdout_size INTEGER NOT NULL, stderr_size INTEGER NOT NULL,"
                             " detail_truncated INTEGER NOT NULL, output_truncated TEXT NOT NULL,"
                             " detail TEXT NOT NULL, stdout BLOB NOT NULL, stderr BLOB NOT NULL);"
                             "CREATE INDEX entries_session ON entries (session_id, id);"
                             "CREATE INDEX entries_account ON entries (account_id, id);"
                             "CREATE INDEX entries_operation ON entries (operation, id);"
                             "CREATE INDEX entries_event ON entries (event, id);"
                             "CREATE INDEX entries_source ON entries (source, id);"
                             "CREATE INDEX entries_started ON entries (started_at);"
                             "INSERT INTO entries VALUES (NULL, 'old1', 's', 'a', 'agent', 'exec', 'finished', 0,"
                             " 1, 0, '', 1, 0, 0, 0, '{}', '{}', X'', X'');"
                             "INSERT INTO entries VALUES (NULL, 'old2', 's', 'a', 'agent', 'exec', 'finished', 0,"
                             " 2, 0, '', 2, 0, 0, 0, '{}', '{}', X'', X'');"
                             "PRAGMA user_version = 1") == 0);
        AuditStore *s = open_store("legacy.db");
        uint64_t anchor = 0;
        uint8_t hash[AUDIT_HASH_SIZE];
        bool has = true;
        CHECK(audit_store_anchor(s, &anchor, hash, &has) == 0);
        CHECK_U64(anchor, 2);
        CHECK(!has);
        CHECK_U64(put(s, "new1", "s", AUDIT_OPERATION_EXEC, 3, NULL), 3);
        CHECK_U64(put(s, "new2", "s", AUDIT_OPERATION_EXEC, 4, NULL), 4);
        AuditVerify v = verify(s, 1000);
        CHECK(v.result == AUDIT_CHAIN_OK);
        CHECK_U64(v.rows, 2);
        CHECK_U64(v.unhashed, 2);
        CHECK_U64(v.anchor_id, 2);
        CHECK(!v.anchor_has_hash);
        /* retention removing the unhashed rows keeps the anchor where the chain starts */
        CHECK(audit_store_delete_older(s, 2, 100) == 1);
        CHECK(audit_store_anchor(s, &anchor, hash, &has) == 0);
        CHECK_U64(anchor, 2);
        CHECK(audit_store_delete_older(s, 4, 100) == 2);
        CHECK(audit_store_anchor(s, &anchor, hash, &has) == 0);
        CHECK_U64(anchor, 3);
        CHECK(has);
        v = verify(s, 1000);
        CHECK(v.result == AUDIT_CHAIN_OK);
        CHECK_U64(v.rows, 1);
        CHECK_U64(v.unhashed, 0);
        /* everything removed: the next row chains from the last removed one */
        CHECK(audit_store_delete_older(s, 5, 100) == 1);
        CHECK_U64(put(s, "new3", "s", AUDIT_OPERATION_EXEC, 9, NULL), 5);
        v = verify(s, 1000);
        CHECK(v.result == AUDIT_CHAIN_OK);
        CHECK_U64(v.rows, 1);
        CHECK_U64(v.anchor_id, 4);
        audit_store_free(s);
}

/* A full disk, played by PRAGMA max_page_count: the insert fails with -ENOSPC, nothing is stored, and
 * once there is room again the same row goes in. */
static void test_full(void) {
        AuditStore *s = open_store("full.db");
        static char blob[512 * 1024];
        AuditRecord r = AUDIT_RECORD_INIT;
        uint64_t id = 0, n = 0;

        memset(blob, 'z', sizeof(blob));
        put(s, "small", "sb", AUDIT_OPERATION_EXEC, 1, NULL);
        CHECK(audit_store_set_size_limit(s, 64 * 1024) == 0);
        r.key = "big";
        r.operation = AUDIT_OPERATION_EXEC;
        r.event = AUDIT_EVENT_FINISHED;
        r.stdout_data = blob;
        r.stdout_size = sizeof(blob);
        CHECK(audit_record_normalize(&r, OUTPUT_MAX, DETAIL_MAX, NULL) == 0);
        CHECK(audit_store_insert(s, &r, 5, &id) == -ENOSPC);
        CHECK(audit_store_begin(s) == 0);
        CHECK(audit_store_insert(s, &r, 5, &id) == -ENOSPC);
        audit_store_rollback(s);
        CHECK(!audit_store_in_transaction(s));
        CHECK(audit_store_count(s, &n) == 0);
        CHECK_U64(n, 1);
        CHECK(audit_store_set_size_limit(s, 0) == 0);
        CHECK(audit_store_insert(s, &r, 5, &id) == 1);
        CHECK_U64(id, 2);
        audit_record_clear(&r);
        audit_store_free(s);
}

int main(void) {
        test_mkdtemp(tmpdir);

        test_string_tables();
        test_validation();
        test_json();
        test_detail_cap();
        test_output_head();
        test_insert_and_idempotency();
        test_filters();
        test_stable_paging();
        test_retention();
        test_migrations();
        test_chain();
        test_chain_migration();
        test_full();

        test_rm_rf(tmpdir);
        return test_finish("test-audit-store");
}
