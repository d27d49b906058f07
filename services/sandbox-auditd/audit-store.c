/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The audit log in SQLite: the row's rules (validation, capping), its storage, paged queries, retention.
 *
 * One module owns the handle and its prepared statements. WAL with synchronous=NORMAL: a commit
 * survives a crash of any process (kill -9); a power loss may lose the last commits before the most
 * recent checkpoint's sync, never the database's consistency.
 *
 * Column order matters: SQLite reads a row's columns front to back and must walk the overflow pages of
 * every large value before a later column, so the captured output (up to OutputMax per stream) comes
 * last and what GetLog shows of it (output_truncated) is computed once, at insert, into its own column:
 * a page of rows never touches the full blobs. */
#include "audit-store.h"

#include <inttypes.h>
#include <json-c/json.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "sqlite-util.h"
#include "utf8-util.h"

static const char *const audit_operation_table[_AUDIT_OPERATION_MAX] = {
        [AUDIT_OPERATION_EXEC] = "exec",
        [AUDIT_OPERATION_FILE_CREATE] = "file_create",
        [AUDIT_OPERATION_WRITE] = "write",
        [AUDIT_OPERATION_READ] = "read",
        [AUDIT_OPERATION_VIEW] = "view",
        [AUDIT_OPERATION_STR_REPLACE] = "str_replace",
        [AUDIT_OPERATION_INSERT] = "insert",
        [AUDIT_OPERATION_LS] = "ls",
        [AUDIT_OPERATION_GLOB] = "glob",
        [AUDIT_OPERATION_GREP] = "grep",
        [AUDIT_OPERATION_TAKEOVER] = "takeover",
        [AUDIT_OPERATION_SANDBOX_CREATE] = "sandbox.create",
        [AUDIT_OPERATION_SANDBOX_UPDATE] = "sandbox.update",
        [AUDIT_OPERATION_SANDBOX_DELETE] = "sandbox.delete",
        [AUDIT_OPERATION_SANDBOX_EXPIRE] = "sandbox.expire",
        [AUDIT_OPERATION_API_KEY_CREATE] = "api_key.create",
        [AUDIT_OPERATION_API_KEY_REVOKE] = "api_key.revoke",
        [AUDIT_OPERATION_SANDBOX_READ] = "sandbox.read",
        [AUDIT_OPERATION_LOG_READ] = "log.read",
        [AUDIT_OPERATION_API_KEY_LIST] = "api_key.list",
        [AUDIT_OPERATION_AUTH] = "auth",
        [AUDIT_OPERATION_NETWORK_DENIED] = "network.denied",
        [AUDIT_OPERATION_PROCESS_START] = "process.start",
        [AUDIT_OPERATION_PROCESS_SIGNAL] = "process.signal",
        [AUDIT_OPERATION_PROCESS_EXIT] = "process.exit",
        [AUDIT_OPERATION_IMAGE_IMPORT] = "image.import",
        [AUDIT_OPERATION_IMAGE_BUILD] = "image.build",
        [AUDIT_OPERATION_IMAGE_REMOVE] = "image.remove",
        [AUDIT_OPERATION_SANDBOX_PAUSE] = "sandbox.pause",
        [AUDIT_OPERATION_SANDBOX_RESUME] = "sandbox.resume",
        [AUDIT_OPERATION_SNAPSHOT_CREATE] = "snapshot.create",
        [AUDIT_OPERATION_SNAPSHOT_REMOVE] = "snapshot.remove",
        [AUDIT_OPERATION_SNAPSHOT_READ] = "snapshot.read",
        [AUDIT_OPERATION_MCP] = "mcp",
};
DEFINE_STRING_TABLE(audit_operation, AuditOperation, _AUDIT_OPERATION_MAX);

static const char *const audit_event_table[_AUDIT_EVENT_MAX] = {
        [AUDIT_EVENT_FINISHED] = "finished",   [AUDIT_EVENT_FAILED] = "failed",
        [AUDIT_EVENT_DENIED] = "denied",       [AUDIT_EVENT_BLOCKED] = "blocked",
        [AUDIT_EVENT_TIMED_OUT] = "timed_out", [AUDIT_EVENT_OOM_KILLED] = "oom_killed",
        [AUDIT_EVENT_CANCELLED] = "cancelled",
};
DEFINE_STRING_TABLE(audit_event, AuditEvent, _AUDIT_EVENT_MAX);

static const char *const audit_source_table[_AUDIT_SOURCE_MAX] = {
        [AUDIT_SOURCE_AGENT] = "agent",
        [AUDIT_SOURCE_HUMAN_TAKEOVER] = "human_takeover",
        [AUDIT_SOURCE_SYSTEM] = "system",
};
DEFINE_STRING_TABLE(audit_source, AuditSource, _AUDIT_SOURCE_MAX);

/* --- the row's rules ---------------------------------------------------------------------------- */

static struct json_object *json_object_put_null(struct json_object *o) {
        json_object_put(o);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct json_object *, json_object_put_null);

static int add_head(struct json_object *obj, const char *name, const void *data, size_t size) {
        _cleanup_free_ char *s = NULL;
        size_t len;

        /* A character the head's end splits is dropped rather than shown as U+FFFD. */
        if (utf8_sanitize(data, MIN(size, (size_t) AUDIT_OUTPUT_HEAD),
                          size > AUDIT_OUTPUT_HEAD ? UTF8_KEEP_TAIL : 0, &s, &len, NULL) < 0)
                return -ENOMEM;
        struct json_object *v = json_object_new_string_len(s, (int) len);
        if (!v || json_object_object_add(obj, name, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

static char *json_to_string(struct json_object *o) {
        const char *s =
                json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        return s ? strdup(s) : NULL;
}

char *audit_output_head_json(const void *out, size_t out_size, const void *err, size_t err_size) {
        _cleanup_(json_object_put_nullp) struct json_object *o = json_object_new_object();

        if (!o || add_head(o, "stdout", out, out_size) < 0 || add_head(o, "stderr", err, err_size) < 0)
                return NULL;
        return json_to_string(o);
}

/* A validator for RFC 8259 JSON text. json-c's parser, even with JSON_TOKENER_STRICT, takes
 * {'a':1}, NaN, Infinity, "1." and raw control characters in strings, which other consumers of the
 * log (JavaScript's JSON.parse, jq) refuse; detail must be JSON for all of them. */
#define JSON_DEPTH_MAX 64

static const char *json_ws(const char *p) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
                p++;
        return p;
}

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

static bool is_hex(char c) {
        return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Each returns the end of what it scanned, or NULL (with *ret_at where it failed). */
static const char *json_string(const char *p, const char **ret_at) {
        for (p++;; p++) {
                if ((unsigned char) *p < 0x20) /* also the terminating NUL */
                        break;
                if (*p == '"')
                        return p + 1;
                if (*p != '\\')
                        continue;
                p++;
                if (*p == 'u') {
                        for (int i = 1; i <= 4; i++)
                                if (!is_hex(p[i])) {
                                        *ret_at = p + i;
                                        return NULL;
                                }
                        p += 4;
                } else if (!*p || !strchr("\"\\/bfnrt", *p))
                        break;
        }
        *ret_at = p;
        return NULL;
}

static const char *json_number(const char *p, const char **ret_at) {
        if (*p == '-')
                p++;
        if (*p == '0')
                p++;
        else if (*p >= '1' && *p <= '9')
                while (is_digit(*p))
                        p++;
        else
                goto fail;
        if (*p == '.') {
                p++;
                if (!is_digit(*p))
                        goto fail;
                while (is_digit(*p))
                        p++;
        }
        if (*p == 'e' || *p == 'E') {
                p++;
                if (*p == '+' || *p == '-')
                        p++;
                if (!is_digit(*p))
                        goto fail;
                while (is_digit(*p))
                        p++;
        }
        return p;
fail:
        *ret_at = p;
        return NULL;
}

static const char *json_value(const char *p, unsigned depth, const char **ret_at) {
        p = json_ws(p);
        switch (*p) {
        case '"':
                return json_string(p, ret_at);
        case 't':
        case 'f':
        case 'n': {
                const char *word = *p == 't' ? "true" : *p == 'f' ? "false" : "null";
                size_t n = strlen(word);
                if (strncmp(p, word, n) == 0)
                        return p + n;
                break;
        }
        case '{':
        case '[': {
                char close = *p == '{' ? '}' : ']';
                bool object = *p == '{';

                if (depth >= JSON_DEPTH_MAX)
                        break;
                p = json_ws(p + 1);
                if (*p == close)
                        return p + 1;
                for (;;) {
                        if (object) {
                                p = json_ws(p);
                                if (*p != '"')
                                        break;
                                p = json_string(p, ret_at);
                                if (!p)
                                        return NULL;
                                p = json_ws(p);
                                if (*p != ':')
                                        break;
                                p++;
                        }
                        p = json_value(p, depth + 1, ret_at);
                        if (!p)
                                return NULL;
                        p = json_ws(p);
                        if (*p == close)
                                return p + 1;
                        if (*p != ',')
                                break;
                        p++;
                }
                break;
        }
        default:
                if (*p == '-' || is_digit(*p))
                        return json_number(p, ret_at);
                break;
        }
        *ret_at = p;
        return NULL;
}

/* Whether s is exactly one JSON value with optional whitespace around it; if not, *ret_offset is
 * where it goes wrong. */
static bool json_is_valid(const char *s, size_t *ret_offset) {
        const char *at = s;
        const char *end = json_value(s, 0, &at);

        if (end) {
                end = json_ws(end);
                if (*end == 0)
                        return true;
                at = end;
        }
        *ret_offset = (size_t) (at - s);
        return false;
}

/* {"truncated":true,"size":N,"head":"…"} no longer than max: head is the longest start of detail
 * (whole characters) that fits. */
static int detail_cap(const char *detail, size_t len, size_t max, char **ret) {
        size_t take = MIN(len, max);

        for (unsigned attempt = 0;; attempt++) {
                _cleanup_(json_object_put_nullp) struct json_object *o = json_object_new_object();
                if (!o)
                        return -ENOMEM;

                /* detail is valid UTF-8 (a D-Bus string): back up to the start of a character */
                while (take > 0 && take < len && ((uint8_t) detail[take] & 0xC0) == 0x80)
                        take--;
                if (json_object_object_add(o, "truncated", json_object_new_boolean(1)) < 0 ||
                    json_object_object_add(o, "size", json_object_new_int64((int64_t) len)) < 0 ||
                    json_object_object_add(o, "head", json_object_new_string_len(detail, (int) take)) < 0)
                        return -ENOMEM;
                _cleanup_free_ char *s = json_to_string(o);
                if (!s)
                        return -ENOMEM;
                size_t n = strlen(s);
                if (n <= max) {
                        *ret = TAKE_PTR(s);
                        return 0;
                }
                if (take == 0 || attempt > 64)
                        return -E2BIG; /* max is below the wrapper's own size */
                /* escapes make the head at least as long as the bytes taken: shrink by the excess */
                size_t excess = n - max;
                take = take > excess ? take - excess : 0;
        }
}

_printf_(2, 3) static int invalid(char **ret_error, const char *fmt, ...) {
        va_list ap;

        if (ret_error) {
                va_start(ap, fmt);
                if (vasprintf(ret_error, fmt, ap) < 0)
                        *ret_error = NULL;
                va_end(ap);
        }
        return -EINVAL;
}

static int check_length(const char *name, const char *v, size_t min, size_t max, char **ret_error) {
        size_t n = strlen(strempty(v));
        if (n < min || n > max)
                return invalid(ret_error, "%s must be %zu to %zu bytes long, not %zu.", name, min, max, n);
        return 0;
}

int audit_record_normalize(AuditRecord *r, uint64_t output_max, uint64_t detail_max, char **ret_error) {
        int k;

        if (!r->key)
                return invalid(ret_error, "key is required.");
        if ((k = check_length("key", r->key, 1, AUDIT_KEY_MAX, ret_error)) < 0 ||
            (k = check_length("session_id", r->session_id, 0, AUDIT_SESSION_ID_MAX, ret_error)) < 0 ||
            (k = check_length("account_id", r->account_id, 0, AUDIT_ACCOUNT_ID_MAX, ret_error)) < 0 ||
            (k = check_length("request_id", r->request_id, 0, AUDIT_REQUEST_ID_MAX, ret_error)) < 0)
                return k;
        if (!audit_operation_to_string(r->operation))
                return invalid(ret_error, "operation is required.");
        if (!audit_event_to_string(r->event))
                return invalid(ret_error, "event is required.");
        if (r->source == _AUDIT_SOURCE_INVALID)
                r->source = AUDIT_SOURCE_AGENT;
        else if (!audit_source_to_string(r->source))
                return invalid(ret_error, "Invalid source.");
        if (r->stdout_size > output_max || r->stderr_size > output_max)
                return invalid(ret_error,
                               "%s is %zu bytes; at most %" PRIu64 " are stored per stream (OutputMax=).",
                               r->stdout_size > output_max ? "stdout" : "stderr",
                               MAX(r->stdout_size, r->stderr_size), output_max);
        if (!r->detail)
                r->detail = "{}";
        size_t at;
        if (!json_is_valid(r->detail, &at))
                return invalid(ret_error, "detail is not valid JSON (at byte %zu).", at);

        char *capped = NULL, *heads = NULL;
        size_t len = strlen(r->detail);
        if (len > detail_max) {
                k = detail_cap(r->detail, len, detail_max, &capped);
                if (k < 0)
                        return k == -E2BIG ? invalid(ret_error, "DetailMax is too small.") : k;
        }
        heads = audit_output_head_json(r->stdout_data, r->stdout_size, r->stderr_data, r->stderr_size);
        if (!heads) {
                free(capped);
                return -ENOMEM;
        }
        free(r->detail_capped);
        free(r->output_truncated);
        r->detail_capped = capped;
        r->detail_truncated = capped != NULL;
        r->output_truncated = heads;
        r->session_id = strempty(r->session_id);
        r->account_id = strempty(r->account_id);
        r->request_id = strempty(r->request_id);
        r->normalized = true;
        return 0;
}

void audit_record_clear(AuditRecord *r) {
        if (!r)
                return;
        free(r->detail_capped);
        free(r->output_truncated);
        r->detail_capped = r->output_truncated = NULL;
        r->normalized = false;
}

const char *audit_record_detail(const AuditRecord *r) {
        return r->detail_capped ?: r->detail;
}

void audit_record_to_entry(const AuditRecord *r, uint64_t id, uint64_t recorded_at, AuditEntry *ret) {
        *ret = (AuditEntry) {
                .id = id,
                .key = r->key,
                .session_id = r->session_id,
                .account_id = r->account_id,
                .source = audit_source_to_string(r->source),
                .operation = audit_operation_to_string(r->operation),
                .event = audit_event_to_string(r->event),
                .detail = audit_record_detail(r),
                .detail_truncated = r->detail_truncated,
                .exit_code = r->exit_code,
                .output_truncated = r->output_truncated,
                .started_at = r->started_at ?: recorded_at,
                .duration_usec = r->duration_usec,
                .recorded_at = recorded_at,
                .request_id = r->request_id,
                .stdout_size = r->stdout_size,
                .stderr_size = r->stderr_size,
        };
}

/* --- storage ------------------------------------------------------------------------------------ */

enum {
        FILTER_SESSION,
        FILTER_ACCOUNT,
        FILTER_OPERATION,
        FILTER_SOURCE,
        FILTER_EVENT,
        FILTER_SINCE,
        FILTER_UNTIL,
        FILTER_AFTER_ID,
        FILTER_MAX_ID,
        _FILTER_MAX,
};

struct AuditStore {
        sqlite3 *db;
        sqlite3_stmt *lookup, *insert, *get, *get_output, *max_id, *count;
        sqlite3_stmt *begin, *commit, *rollback;
        sqlite3_stmt *queries[1u << _FILTER_MAX]; /* one per combination of filters, made when first used */

        /* the chain */
        sqlite3_stmt *insert_hash, *chain_top, *anchor_get, *anchor_set, *head, *hash_of;
        sqlite3_stmt *delete_entries, *delete_hashes, *count_upto, *verify_rows, *verify_next;
        bool chain_valid;  /* chain_hash and next_id hold for the current transaction */
        uint64_t next_id;  /* the id the next row gets (its hash covers it, so it is chosen here) */
        uint8_t chain_hash[AUDIT_HASH_SIZE]; /* what the next row chains from */
};

/* Append-only: each entry moves the schema one version up. */
static const char *const migrations[] = {
        "CREATE TABLE entries ("
        " id INTEGER PRIMARY KEY AUTOINCREMENT," /* AUTOINCREMENT: ids are never reused */
        " key TEXT NOT NULL UNIQUE,"
        " session_id TEXT NOT NULL,"
        " account_id TEXT NOT NULL,"
        " source TEXT NOT NULL,"
        " operation TEXT NOT NULL,"
        " event TEXT NOT NULL,"
        " exit_code INTEGER NOT NULL,"
        " started_at INTEGER NOT NULL,"
        " duration_usec INTEGER NOT NULL,"
        " request_id TEXT NOT NULL,"
        " recorded_at INTEGER NOT NULL,"
        " stdout_size INTEGER NOT NULL,"
        " stderr_size INTEGER NOT NULL,"
        " detail_truncated INTEGER NOT NULL,"
        " output_truncated TEXT NOT NULL,"
        " detail TEXT NOT NULL,"
        " stdout BLOB NOT NULL,"
        " stderr BLOB NOT NULL);"
        "CREATE INDEX entries_session ON entries (session_id, id);"
        "CREATE INDEX entries_account ON entries (account_id, id);"
        "CREATE INDEX entries_operation ON entries (operation, id);"
        "CREATE INDEX entries_event ON entries (event, id);"
        "CREATE INDEX entries_source ON entries (source, id);"
        "CREATE INDEX entries_started ON entries (started_at);",

        /* 2: the hash chain. The hashes live in a table of their own, not in a column appended to
         * entries: an appended column would sit behind the output blobs, and GetLog would walk their
         * overflow pages to read it. The anchor is the last row removed by retention (its id and hash);
         * rows stored before this migration have no hash, so the chain starts after them. */
        "CREATE TABLE entry_hashes ("
        " id INTEGER PRIMARY KEY," /* the row's id in entries */
        " hash BLOB NOT NULL);"
        "CREATE TABLE chain_anchor ("
        " one INTEGER PRIMARY KEY CHECK (one = 1),"
        " id INTEGER NOT NULL,"
        " hash BLOB);"
        "INSERT INTO chain_anchor (one, id, hash) VALUES (1,"
        " (SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'entries'), NULL);",
};

static bool table_exists(sqlite3 *db, const char *name) {
        sqlite3_stmt *st;
        bool found = false;

        if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", -1, &st,
                               NULL) != SQLITE_OK)
                return false;
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        found = sqlite3_step(st) == SQLITE_ROW;
        sqlite3_finalize(st);
        return found;
}

void audit_store_optimize(AuditStore *s) {
        /* re-analyses what grew or shrank a lot since it was last analysed, reading a bounded sample */
        if (s && s->db && !audit_store_in_transaction(s))
                (void) sqlite3_exec(s->db, "PRAGMA analysis_limit=1000; PRAGMA optimize", NULL, NULL, NULL);
}

AuditStore *audit_store_free(AuditStore *s) {
        if (!s)
                return NULL;
        audit_store_rollback(s);
        sqlite3_finalize(s->lookup);
        sqlite3_finalize(s->insert);
        sqlite3_finalize(s->get);
        sqlite3_finalize(s->get_output);
        sqlite3_finalize(s->max_id);
        sqlite3_finalize(s->count);
        sqlite3_finalize(s->insert_hash);
        sqlite3_finalize(s->chain_top);
        sqlite3_finalize(s->anchor_get);
        sqlite3_finalize(s->anchor_set);
        sqlite3_finalize(s->head);
        sqlite3_finalize(s->hash_of);
        sqlite3_finalize(s->delete_entries);
        sqlite3_finalize(s->delete_hashes);
        sqlite3_finalize(s->count_upto);
        sqlite3_finalize(s->verify_rows);
        sqlite3_finalize(s->verify_next);
        sqlite3_finalize(s->begin);
        sqlite3_finalize(s->commit);
        sqlite3_finalize(s->rollback);
        for (size_t i = 0; i < ELEMENTSOF(s->queries); i++)
                sqlite3_finalize(s->queries[i]);
        if (s->db)
                audit_store_optimize(s);
        sqlite3_close_v2(s->db);
        free(s);
        return NULL;
}

#define ENTRY_COLUMNS                                                                                       \
        "id, key, session_id, account_id, source, operation, event, detail, detail_truncated, exit_code,"   \
        " output_truncated, started_at, duration_usec, recorded_at, request_id, stdout_size, stderr_size,"  \
        " (SELECT hash FROM entry_hashes WHERE entry_hashes.id = entries.id)"

static int prepare(AuditStore *s, const char *sql, sqlite3_stmt **ret) {
        return sqlite_prepare_persistent(s->db, sql, ret);
}

int audit_store_open(const char *path, AuditStore **ret) {
        AuditStore *s;
        int r;

        s = calloc(1, sizeof(AuditStore));
        if (!s)
                return -ENOMEM;
        r = sqlite_open_wal(path, 2000, &s->db);
        if (r < 0)
                goto fail;
        /* secure_delete=FAST: Debian builds SQLite with secure deletion on, which would rewrite every
         * deleted output blob with zeros during retention; deleted rows are still cleared from b-tree
         * pages, freed overflow pages are overwritten when they are reused. cache_size: 32 MiB, so the
         * indexes' hot pages stay in memory. wal_autocheckpoint: a checkpoint (and its fsync) every
         * 10000 pages rather than 1000 makes ingest about half again as fast. journal_size_limit: the
         * WAL is cut back to 64 MiB after a checkpoint instead of keeping its largest size. */
        r = sqlite_errno(sqlite3_exec(s->db,
                                      "PRAGMA secure_delete=FAST; PRAGMA cache_size=-32768;"
                                      " PRAGMA wal_autocheckpoint=10000; PRAGMA journal_size_limit=67108864",
                                      NULL, NULL, NULL));
        if (r < 0)
                goto fail;
        /* -EPROTO: written by a newer sandbox-auditd */
        r = sqlite_migrate(s->db, migrations, ELEMENTSOF(migrations));
        if (r < 0)
                goto fail;
        /* Without statistics the planner cannot tell a session (few rows each) from an operation (many):
         * gather them once; audit_store_optimize() keeps them current. Failure only costs speed. */
        if (!table_exists(s->db, "sqlite_stat1"))
                (void) sqlite3_exec(s->db, "PRAGMA analysis_limit=1000; ANALYZE", NULL, NULL, NULL);

        if ((r = prepare(s, "SELECT id FROM entries WHERE key = ?", &s->lookup)) < 0 ||
            (r = prepare(s,
                         "INSERT INTO entries (key, session_id, account_id, source, operation, event,"
                         " exit_code, started_at, duration_usec, request_id, recorded_at, stdout_size,"
                         " stderr_size, detail_truncated, output_truncated, detail, stdout, stderr, id)"
                         " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(key) DO NOTHING",
                         &s->insert)) < 0 ||
            (r = prepare(s, "INSERT INTO entry_hashes (id, hash) VALUES (?, ?)", &s->insert_hash)) < 0 ||
            (r = prepare(s, "SELECT id, (SELECT hash FROM entry_hashes WHERE entry_hashes.id = entries.id)"
                            " FROM entries ORDER BY id DESC LIMIT 1",
                         &s->chain_top)) < 0 ||
            (r = prepare(s, "SELECT id, hash FROM chain_anchor WHERE one = 1", &s->anchor_get)) < 0 ||
            (r = prepare(s, "UPDATE chain_anchor SET id = ?, hash = ? WHERE one = 1 AND id < ?1",
                         &s->anchor_set)) < 0 ||
            (r = prepare(s, "SELECT id, started_at, recorded_at FROM entries ORDER BY id LIMIT ?",
                         &s->head)) < 0 ||
            (r = prepare(s, "SELECT hash FROM entry_hashes WHERE id = ?", &s->hash_of)) < 0 ||
            (r = prepare(s, "DELETE FROM entries WHERE id <= ?", &s->delete_entries)) < 0 ||
            (r = prepare(s, "DELETE FROM entry_hashes WHERE id <= ?", &s->delete_hashes)) < 0 ||
            (r = prepare(s, "SELECT count(*) FROM entries WHERE id <= ?", &s->count_upto)) < 0 ||
            (r = prepare(s, "SELECT " ENTRY_COLUMNS ", stdout, stderr FROM entries WHERE id > ? AND id <= ?"
                            " ORDER BY id LIMIT ?",
                         &s->verify_rows)) < 0 ||
            (r = prepare(s, "SELECT " ENTRY_COLUMNS ", stdout, stderr FROM entries WHERE id > ?"
                            " ORDER BY id LIMIT 1",
                         &s->verify_next)) < 0 ||
            (r = prepare(s, "SELECT " ENTRY_COLUMNS " FROM entries WHERE id = ?", &s->get)) < 0 ||
            (r = prepare(s, "SELECT stdout, stderr FROM entries WHERE id = ?", &s->get_output)) < 0 ||
            (r = prepare(s, "SELECT seq FROM sqlite_sequence WHERE name = 'entries'", &s->max_id)) < 0 ||
            (r = prepare(s, "SELECT count(*) FROM entries", &s->count)) < 0 ||
            (r = prepare(s, "BEGIN IMMEDIATE", &s->begin)) < 0 ||
            (r = prepare(s, "COMMIT", &s->commit)) < 0 || (r = prepare(s, "ROLLBACK", &s->rollback)) < 0)
                goto fail;

        *ret = s;
        return 0;
fail:
        audit_store_free(s);
        return r;
}

bool audit_store_in_transaction(AuditStore *s) {
        return s && s->db && !sqlite3_get_autocommit(s->db);
}

int audit_store_begin(AuditStore *s) {
        if (audit_store_in_transaction(s))
                return 0;
        /* the chain's end is read again once the write lock is ours: nobody can move it meanwhile */
        s->chain_valid = false;
        return sqlite_step_done(s->begin);
}

int audit_store_commit(AuditStore *s) {
        int r;

        if (!audit_store_in_transaction(s))
                return 0;
        r = sqlite_step_done(s->commit);
        if (r < 0)
                audit_store_rollback(s); /* a failed COMMIT may leave the transaction open */
        return r;
}

void audit_store_rollback(AuditStore *s) {
        /* SQLite rolls back by itself after some errors (SQLITE_FULL, SQLITE_IOERR, …) */
        if (audit_store_in_transaction(s))
                (void) sqlite_step_done(s->rollback);
        s->chain_valid = false;
}

static int lookup_key(AuditStore *s, const char *key, uint64_t *ret_id) {
        sqlite3_stmt *st = s->lookup;
        int rc, r = 0;

        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                *ret_id = (uint64_t) sqlite3_column_int64(st, 0);
                r = 1;
        } else if (rc != SQLITE_DONE)
                r = sqlite_errno(rc);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        return r;
}

static int read_hash(sqlite3_stmt *st, int col, uint8_t *ret, bool *ret_has) {
        const void *h = sqlite3_column_blob(st, col);

        if (h && sqlite3_column_bytes(st, col) == AUDIT_HASH_SIZE) {
                memcpy(ret, h, AUDIT_HASH_SIZE);
                *ret_has = true;
        } else
                *ret_has = false;
        return 0;
}

int audit_store_anchor(AuditStore *s, uint64_t *ret_id, uint8_t *ret_hash, bool *ret_has_hash) {
        sqlite3_stmt *st = s->anchor_get;
        int rc, r = 0;

        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                *ret_id = (uint64_t) sqlite3_column_int64(st, 0);
                read_hash(st, 1, ret_hash, ret_has_hash);
        } else if (rc == SQLITE_DONE) { /* the row was deleted by hand: the chain starts at the seed */
                *ret_id = 0;
                *ret_has_hash = false;
        } else
                r = sqlite_errno(rc);
        sqlite3_reset(st);
        return r;
}

/* Where the chain ends now: the newest row (or the anchor, if there is none after it), and the id the
 * next row gets. */
static int chain_load(AuditStore *s) {
        uint64_t anchor = 0, top = 0, seq = 0;
        bool has = false;
        int rc, r;

        r = audit_store_anchor(s, &anchor, s->chain_hash, &has);
        if (r < 0)
                return r;
        rc = sqlite3_step(s->chain_top);
        if (rc == SQLITE_ROW && (uint64_t) sqlite3_column_int64(s->chain_top, 0) > anchor) {
                top = (uint64_t) sqlite3_column_int64(s->chain_top, 0);
                read_hash(s->chain_top, 1, s->chain_hash, &has);
        } else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                r = sqlite_errno(rc);
        sqlite3_reset(s->chain_top);
        if (r < 0)
                return r;
        if (!has)
                memcpy(s->chain_hash, audit_chain_seed, AUDIT_HASH_SIZE);
        r = audit_store_max_id(s, &seq);
        if (r < 0)
                return r;
        /* ids handed out beyond the newest row (rows deleted at the end) leave a gap VerifyLog reports */
        s->next_id = MAX(MAX(seq, top), anchor) + 1;
        s->chain_valid = true;
        return 0;
}

int audit_store_insert(AuditStore *s, const AuditRecord *r, uint64_t recorded_at, uint64_t *ret_id) {
        return audit_store_insert_hashed(s, r, recorded_at, ret_id, NULL);
}

static int insert_row(AuditStore *s, const AuditRecord *r, uint64_t recorded_at, uint64_t *ret_id,
                      uint8_t *ret_hash);

int audit_store_insert_hashed(AuditStore *s, const AuditRecord *r, uint64_t recorded_at, uint64_t *ret_id,
                              uint8_t *ret_hash) {
        int k;

        if (!r->normalized)
                return -EINVAL;
        if (audit_store_in_transaction(s))
                return insert_row(s, r, recorded_at, ret_id, ret_hash);
        /* the row and its hash are committed together, or neither */
        k = audit_store_begin(s);
        if (k < 0)
                return k;
        k = insert_row(s, r, recorded_at, ret_id, ret_hash);
        if (k >= 0) {
                int c = audit_store_commit(s);
                if (c < 0)
                        k = c;
        } else
                audit_store_rollback(s);
        return k;
}

static int insert_row(AuditStore *s, const AuditRecord *r, uint64_t recorded_at, uint64_t *ret_id,
                      uint8_t *ret_hash) {
        sqlite3_stmt *st = s->insert;
        uint8_t hash[AUDIT_HASH_SIZE];
        uint64_t id = 0; /* set when lookup_key() finds it; -O2 cannot tell */
        AuditEntry e;
        int k;

        /* The common retry case costs one index lookup, writes nothing and allocates no id. */
        k = lookup_key(s, r->key, &id);
        if (k < 0)
                return k;
        if (k > 0) {
                *ret_id = id;
                return 0;
        }

        if (!s->chain_valid) {
                k = chain_load(s);
                if (k < 0)
                        return k;
        }
        audit_record_to_entry(r, s->next_id, recorded_at, &e);
        k = audit_chain_hash(s->chain_hash, &e, r->stdout_data, r->stdout_size, r->stderr_data,
                             r->stderr_size, hash);
        if (k < 0)
                return k;

        sqlite3_bind_text(st, 1, r->key, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, r->session_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, r->account_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, audit_source_to_string(r->source), -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, audit_operation_to_string(r->operation), -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 6, audit_event_to_string(r->event), -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 7, r->exit_code);
        sqlite3_bind_int64(st, 8, (sqlite3_int64) (r->started_at ?: recorded_at));
        sqlite3_bind_int64(st, 9, (sqlite3_int64) r->duration_usec);
        sqlite3_bind_text(st, 10, r->request_id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 11, (sqlite3_int64) recorded_at);
        sqlite3_bind_int64(st, 12, (sqlite3_int64) r->stdout_size);
        sqlite3_bind_int64(st, 13, (sqlite3_int64) r->stderr_size);
        sqlite3_bind_int(st, 14, r->detail_truncated);
        sqlite3_bind_text(st, 15, r->output_truncated, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 16, audit_record_detail(r), -1, SQLITE_STATIC);
        /* a NULL pointer would bind SQL NULL, not an empty blob */
        sqlite3_bind_blob64(st, 17, r->stdout_data ?: "", r->stdout_size, SQLITE_STATIC);
        sqlite3_bind_blob64(st, 18, r->stderr_data ?: "", r->stderr_size, SQLITE_STATIC);
        sqlite3_bind_int64(st, 19, (sqlite3_int64) e.id);
        k = sqlite_step_done(st);
        if (k < 0) {
                s->chain_valid = false;
                return k;
        }
        if (sqlite3_changes(s->db) > 0) {
                sqlite3_bind_int64(s->insert_hash, 1, (sqlite3_int64) e.id);
                sqlite3_bind_blob(s->insert_hash, 2, hash, AUDIT_HASH_SIZE, SQLITE_STATIC);
                k = sqlite_step_done(s->insert_hash);
                if (k < 0) {
                        /* the caller rolls the row back with the transaction */
                        s->chain_valid = false;
                        return k;
                }
                memcpy(s->chain_hash, hash, AUDIT_HASH_SIZE);
                s->next_id = e.id + 1;
                *ret_id = e.id;
                if (ret_hash)
                        memcpy(ret_hash, hash, AUDIT_HASH_SIZE);
                return 1;
        }
        /* another writer (a second connection) stored the key between our lookup and insert */
        k = lookup_key(s, r->key, &id);
        if (k < 0)
                return k;
        if (k == 0)
                return -EIO;
        *ret_id = id;
        return 0;
}

static void read_entry(sqlite3_stmt *st, AuditEntry *e) {
        *e = (AuditEntry) {
                .id = (uint64_t) sqlite3_column_int64(st, 0),
                .key = (const char *) sqlite3_column_text(st, 1),
                .session_id = (const char *) sqlite3_column_text(st, 2),
                .account_id = (const char *) sqlite3_column_text(st, 3),
                .source = (const char *) sqlite3_column_text(st, 4),
                .operation = (const char *) sqlite3_column_text(st, 5),
                .event = (const char *) sqlite3_column_text(st, 6),
                .detail = (const char *) sqlite3_column_text(st, 7),
                .detail_truncated = sqlite3_column_int(st, 8) != 0,
                .exit_code = sqlite3_column_int(st, 9),
                .output_truncated = (const char *) sqlite3_column_text(st, 10),
                .started_at = (uint64_t) sqlite3_column_int64(st, 11),
                .duration_usec = (uint64_t) sqlite3_column_int64(st, 12),
                .recorded_at = (uint64_t) sqlite3_column_int64(st, 13),
                .request_id = (const char *) sqlite3_column_text(st, 14),
                .stdout_size = (uint64_t) sqlite3_column_int64(st, 15),
                .stderr_size = (uint64_t) sqlite3_column_int64(st, 16),
        };
        if (sqlite3_column_bytes(st, 17) == AUDIT_HASH_SIZE)
                e->hash = sqlite3_column_blob(st, 17);
        /* NULL only on allocation failure inside SQLite; an empty string is the safe reading */
        e->key = strempty(e->key);
        e->session_id = strempty(e->session_id);
        e->account_id = strempty(e->account_id);
        e->source = strempty(e->source);
        e->operation = strempty(e->operation);
        e->event = strempty(e->event);
        e->detail = e->detail ?: "{}";
        e->output_truncated = e->output_truncated ?: "{}";
        e->request_id = strempty(e->request_id);
}

static const struct {
        const char *sql, *param;
} filter_sql[_FILTER_MAX] = {
        [FILTER_SESSION] = { " AND session_id = :session_id", ":session_id" },
        [FILTER_ACCOUNT] = { " AND account_id = :account_id", ":account_id" },
        [FILTER_OPERATION] = { " AND operation = :operation", ":operation" },
        [FILTER_SOURCE] = { " AND source = :source", ":source" },
        [FILTER_EVENT] = { " AND event = :event", ":event" },
        [FILTER_SINCE] = { " AND started_at >= :since", ":since" },
        [FILTER_UNTIL] = { " AND started_at < :until", ":until" },
        [FILTER_AFTER_ID] = { " AND id > :after_id", ":after_id" },
        [FILTER_MAX_ID] = { " AND id <= :max_id", ":max_id" },
};

static int query_statement(AuditStore *s, unsigned mask, sqlite3_stmt **ret) {
        char sql[1024];
        size_t n;
        int r;

        if (s->queries[mask]) {
                *ret = s->queries[mask];
                return 0;
        }
        /* Two steps: the ids of the page first, which an index on the filtered column answers on its own
         * (each holds the id), then just those rows. A page of a wide time range thus sorts ids from
         * the started_at index instead of whole rows. */
        n = (size_t) snprintf(sql, sizeof(sql), "SELECT " ENTRY_COLUMNS " FROM entries WHERE id IN"
                                                " (SELECT id FROM entries WHERE 1");
        for (unsigned i = 0; i < _FILTER_MAX; i++)
                if (mask & (1u << i))
                        n += (size_t) snprintf(sql + n, sizeof(sql) - n, "%s", filter_sql[i].sql);
        snprintf(sql + n, sizeof(sql) - n,
                 " ORDER BY id DESC LIMIT :limit OFFSET :offset) ORDER BY id DESC");
        r = prepare(s, sql, &s->queries[mask]);
        if (r < 0)
                return r;
        *ret = s->queries[mask];
        return 0;
}

static void bind_named_text(sqlite3_stmt *st, const char *param, const char *v) {
        sqlite3_bind_text(st, sqlite3_bind_parameter_index(st, param), v, -1, SQLITE_STATIC);
}

static void bind_named_u64(sqlite3_stmt *st, const char *param, uint64_t v) {
        /* SQLite integers are signed: clamp, so a huge bound still means "no bound" */
        sqlite3_bind_int64(st, sqlite3_bind_parameter_index(st, param),
                           (sqlite3_int64) MIN(v, (uint64_t) INT64_MAX));
}

int audit_store_query(AuditStore *s, const AuditFilter *f, uint64_t limit, uint64_t offset,
                      audit_entry_cb cb, void *userdata) {
        static const AuditFilter none = {};
        sqlite3_stmt *st;
        unsigned mask = 0;
        int rc, r = 0, n = 0;

        if (!f)
                f = &none;
        if (limit == 0)
                limit = AUDIT_LIMIT_DEFAULT;
        limit = MIN(limit, (uint64_t) AUDIT_LIMIT_MAX);
        offset = MIN(offset, AUDIT_OFFSET_MAX);

        const char *texts[] = { f->session_id, f->account_id, f->operation, f->source, f->event };
        const bool has[] = { f->has_since, f->has_until, f->has_after_id, f->has_max_id };
        const uint64_t nums[] = { f->since, f->until, f->after_id, f->max_id };
        for (unsigned i = 0; i < ELEMENTSOF(texts); i++)
                if (texts[i])
                        mask |= 1u << i;
        for (unsigned i = 0; i < ELEMENTSOF(has); i++)
                if (has[i])
                        mask |= 1u << (FILTER_SINCE + i);

        r = query_statement(s, mask, &st);
        if (r < 0)
                return r;
        for (unsigned i = 0; i < ELEMENTSOF(texts); i++)
                if (texts[i])
                        bind_named_text(st, filter_sql[i].param, texts[i]);
        for (unsigned i = 0; i < ELEMENTSOF(has); i++)
                if (has[i])
                        bind_named_u64(st, filter_sql[FILTER_SINCE + i].param, nums[i]);
        bind_named_u64(st, ":limit", limit);
        bind_named_u64(st, ":offset", offset);

        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                AuditEntry e;

                read_entry(st, &e);
                n++;
                r = cb(&e, userdata);
                if (r != 0)
                        break;
        }
        if (r == 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
                r = sqlite_errno(rc);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        return r < 0 ? r : n;
}

int audit_store_get(AuditStore *s, uint64_t id, audit_entry_cb cb, void *userdata) {
        sqlite3_stmt *st = s->get;
        int rc, r;

        sqlite3_bind_int64(st, 1, (sqlite3_int64) MIN(id, (uint64_t) INT64_MAX));
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                AuditEntry e;
                read_entry(st, &e);
                r = cb(&e, userdata);
        } else
                r = rc == SQLITE_DONE ? -ENOENT : sqlite_errno(rc);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        return r;
}

int audit_store_get_output(AuditStore *s, uint64_t id, audit_output_cb cb, void *userdata) {
        sqlite3_stmt *st = s->get_output;
        int rc, r;

        sqlite3_bind_int64(st, 1, (sqlite3_int64) MIN(id, (uint64_t) INT64_MAX));
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                /* the blob first, then its size: sqlite3_column_bytes() after sqlite3_column_blob() */
                const void *out = sqlite3_column_blob(st, 0);
                size_t out_size = (size_t) sqlite3_column_bytes(st, 0);
                const void *err = sqlite3_column_blob(st, 1);
                size_t err_size = (size_t) sqlite3_column_bytes(st, 1);
                r = cb(out, out_size, err, err_size, userdata);
        } else
                r = rc == SQLITE_DONE ? -ENOENT : sqlite_errno(rc);
        sqlite3_reset(st);
        return r;
}

static int single_u64(sqlite3_stmt *st, uint64_t *ret) {
        int rc = sqlite3_step(st), r = 0;

        if (rc == SQLITE_ROW)
                *ret = (uint64_t) sqlite3_column_int64(st, 0);
        else if (rc == SQLITE_DONE)
                *ret = 0;
        else
                r = sqlite_errno(rc);
        sqlite3_reset(st);
        return r;
}

int audit_store_max_id(AuditStore *s, uint64_t *ret) {
        /* sqlite_sequence, not max(id): the highest id ever handed out, even if its row is gone */
        return single_u64(s->max_id, ret);
}

int audit_store_count(AuditStore *s, uint64_t *ret) {
        return single_u64(s->count, ret);
}

/* The oldest rows, in id order, up to batch of them: those before the first row that is younger than
 * cutoff by both its started_at and its recorded_at (by age), or whose id is at most bound. Returns how
 * many, and the last one's id.
 *
 * Only a run at the head can go, or the chain would have a hole. started_at alone would let one row
 * with a started_at in the future (a caller's clock) hold back everything after it for ever;
 * recorded_at, the logger's own clock, grows with the ids, so the head always ages out. */
static int head_run(AuditStore *s, bool by_age, uint64_t bound, unsigned batch, uint64_t *ret_last) {
        sqlite3_stmt *st = s->head;
        int rc, n = 0;

        sqlite3_bind_int64(st, 1, batch);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                uint64_t id = (uint64_t) sqlite3_column_int64(st, 0);
                uint64_t started = (uint64_t) sqlite3_column_int64(st, 1);
                uint64_t recorded = (uint64_t) sqlite3_column_int64(st, 2);
                if (by_age ? started >= bound && recorded >= bound : id > bound)
                        break;
                *ret_last = id;
                n++;
        }
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                return sqlite_errno(rc);
        return n;
}

static int step_u64(sqlite3_stmt *st, uint64_t v) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64) MIN(v, (uint64_t) INT64_MAX));
        return sqlite_step_done(st);
}

/* Deletes the rows up to last (a run at the head of the log) and makes the last one the anchor. */
static int delete_head(AuditStore *s, uint64_t last) {
        uint8_t hash[AUDIT_HASH_SIZE];
        bool has = false;
        int rc, r;

        r = audit_store_begin(s);
        if (r < 0)
                return r;
        sqlite3_bind_int64(s->hash_of, 1, (sqlite3_int64) last);
        rc = sqlite3_step(s->hash_of);
        if (rc == SQLITE_ROW)
                read_hash(s->hash_of, 0, hash, &has);
        else if (rc != SQLITE_DONE)
                r = sqlite_errno(rc);
        sqlite3_reset(s->hash_of);
        sqlite3_clear_bindings(s->hash_of);
        if (r >= 0)
                r = step_u64(s->delete_entries, last);
        if (r >= 0)
                r = step_u64(s->delete_hashes, last);
        if (r >= 0) {
                /* never backwards: rows stored before the chain are below an anchor without a hash */
                sqlite3_bind_int64(s->anchor_set, 1, (sqlite3_int64) last);
                if (has)
                        sqlite3_bind_blob(s->anchor_set, 2, hash, AUDIT_HASH_SIZE, SQLITE_STATIC);
                else
                        sqlite3_bind_null(s->anchor_set, 2);
                r = sqlite_step_done(s->anchor_set);
        }
        if (r >= 0)
                r = audit_store_commit(s);
        else
                audit_store_rollback(s);
        return r;
}

static int delete_batch(AuditStore *s, bool by_age, uint64_t bound, unsigned batch) {
        uint64_t last = 0;
        int n, r;

        if (audit_store_in_transaction(s))
                return -EBUSY; /* the caller commits its rows first */
        n = head_run(s, by_age, bound, batch, &last);
        if (n <= 0)
                return n;
        r = delete_head(s, last);
        return r < 0 ? r : n;
}

int audit_store_delete_older(AuditStore *s, uint64_t cutoff_usec, unsigned batch) {
        return delete_batch(s, true, cutoff_usec, batch);
}

int audit_store_delete_excess(AuditStore *s, uint64_t max_rows, unsigned batch) {
        uint64_t top = 0;
        int r;

        if (max_rows == 0)
                return 0;
        r = audit_store_max_id(s, &top);
        if (r < 0)
                return r;
        if (top <= max_rows)
                return 0;
        return delete_batch(s, false, top - max_rows, batch);
}

/* --- verification ------------------------------------------------------------------------------- */

/* The expected hash of the row st is at (columns as verify_rows selects them) after prev. */
static int row_hash(sqlite3_stmt *st, const uint8_t *prev, AuditEntry *e, uint64_t *ret_bytes,
                    uint8_t ret[AUDIT_HASH_SIZE]) {
        const void *out, *err;
        size_t out_size, err_size;

        read_entry(st, e);
        out = sqlite3_column_blob(st, 18);
        out_size = (size_t) sqlite3_column_bytes(st, 18);
        err = sqlite3_column_blob(st, 19);
        err_size = (size_t) sqlite3_column_bytes(st, 19);
        if (ret_bytes)
                *ret_bytes = out_size + err_size + strlen(e->detail) + 256;
        return audit_chain_hash(prev, e, out, out_size, err, err_size, ret);
}

/* Whether the row after id follows from hash (the stored hash of row id). */
static int next_follows(AuditStore *s, uint64_t id, const uint8_t *hash, bool *ret_has_next) {
        sqlite3_stmt *st = s->verify_next;
        uint8_t expected[AUDIT_HASH_SIZE];
        AuditEntry e;
        int rc, r = 0;

        *ret_has_next = false;
        sqlite3_bind_int64(st, 1, (sqlite3_int64) id);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                *ret_has_next = true;
                r = row_hash(st, hash, &e, NULL, expected);
                if (r >= 0)
                        r = e.hash && memcmp(e.hash, expected, AUDIT_HASH_SIZE) == 0;
        } else if (rc != SQLITE_DONE)
                r = sqlite_errno(rc);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        return r;
}

static void verify_broken(AuditVerify *v, AuditChainBreak why, uint64_t id, const uint64_t next_id) {
        v->result = why;
        v->bad_id = id;
        switch (why) {
        case AUDIT_CHAIN_EDITED:
                snprintf(v->message, sizeof(v->message),
                         "Row %" PRIu64 " does not match its hash: it was changed after it was stored.", id);
                break;
        case AUDIT_CHAIN_MISSING:
                if (id - v->prev_id == 2)
                        snprintf(v->message, sizeof(v->message),
                                 "Row %" PRIu64 " is missing: row %" PRIu64
                                 " does not follow from row %" PRIu64 ".",
                                 v->prev_id + 1, id, v->prev_id);
                else
                        snprintf(v->message, sizeof(v->message),
                                 "Rows %" PRIu64 " to %" PRIu64 " are missing: row %" PRIu64
                                 " does not follow from row %" PRIu64 ".",
                                 v->prev_id + 1, id - 1, id, v->prev_id);
                break;
        case AUDIT_CHAIN_REORDERED:
                snprintf(v->message, sizeof(v->message),
                         "Row %" PRIu64 " does not follow from row %" PRIu64 ", nor row %" PRIu64
                         " from it: rows were reordered or rewritten from here.",
                         id, v->prev_id, next_id);
                break;
        case AUDIT_CHAIN_UNHASHED:
                snprintf(v->message, sizeof(v->message),
                         "Row %" PRIu64 " has no hash, but the chain starts after row %" PRIu64 ".", id,
                         v->anchor_id);
                break;
        case AUDIT_CHAIN_TRUNCATED:
                snprintf(v->message, sizeof(v->message),
                         "Rows %" PRIu64 " to %" PRIu64 " are missing at the end of the log.",
                         v->prev_id + 1, v->max_id);
                break;
        default:
                break;
        }
        v->done = true;
}

int audit_store_verify_step(AuditStore *s, AuditVerify *v, unsigned max_rows, uint64_t max_bytes) {
        sqlite3_stmt *st = s->verify_rows;
        uint64_t anchor = 0, bytes = 0;
        uint8_t anchor_hash[AUDIT_HASH_SIZE];
        bool has = false;
        unsigned n = 0;
        int rc = SQLITE_DONE, r;

        if (v->done)
                return 1;
        r = audit_store_anchor(s, &anchor, anchor_hash, &has);
        if (r < 0)
                return r;
        if (!v->started) {
                uint64_t seq = 0;

                r = audit_store_max_id(s, &seq);
                if (r < 0)
                        return r;
                if (v->max_id == 0 || v->max_id > seq)
                        v->max_id = seq;
                sqlite3_bind_int64(s->count_upto, 1, (sqlite3_int64) anchor);
                r = single_u64(s->count_upto, &v->unhashed);
                sqlite3_clear_bindings(s->count_upto);
                if (r < 0)
                        return r;
                v->started = true;
                v->prev_id = 0; /* below any anchor: taken up just below */
        }
        if (anchor > v->prev_id || (v->prev_id == 0 && v->rows == 0)) {
                /* the start, or retention removed rows the walk had not reached: go on from there */
                v->anchor_id = anchor;
                v->anchor_has_hash = has;
                memcpy(v->anchor_hash, has ? anchor_hash : audit_chain_seed, AUDIT_HASH_SIZE);
                v->prev_id = anchor;
                memcpy(v->prev_hash, v->anchor_hash, AUDIT_HASH_SIZE);
        }

        sqlite3_bind_int64(st, 1, (sqlite3_int64) v->prev_id);
        sqlite3_bind_int64(st, 2, (sqlite3_int64) MIN(v->max_id, (uint64_t) INT64_MAX));
        sqlite3_bind_int64(st, 3, MAX(max_rows, 1u));
        while (!v->done && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                uint8_t expected[AUDIT_HASH_SIZE];
                uint64_t b = 0;
                AuditEntry e;

                n++;
                r = row_hash(st, v->prev_hash, &e, &b, expected);
                if (r < 0)
                        break;
                bytes += b;
                if (e.hash && memcmp(e.hash, expected, AUDIT_HASH_SIZE) == 0) {
                        v->prev_id = e.id;
                        memcpy(v->prev_hash, e.hash, AUDIT_HASH_SIZE);
                        v->rows++;
                        if (bytes >= max_bytes)
                                break;
                        continue;
                }

                /* the first row that does not match: which kind of break is it? */
                bool has_next = false;
                int follows = 0;
                v->has_stored = e.hash != NULL;
                if (e.hash)
                        memcpy(v->stored, e.hash, AUDIT_HASH_SIZE);
                memcpy(v->expected, expected, AUDIT_HASH_SIZE);
                if (e.hash) {
                        follows = next_follows(s, e.id, v->stored, &has_next);
                        if (follows < 0) {
                                r = follows;
                                break;
                        }
                }
                AuditChainBreak why =
                        audit_chain_classify(v->prev_id, e.id, e.hash != NULL, has_next, follows > 0);
                verify_broken(v, why, e.id, e.id + 1);
        }
        if (r >= 0 && !v->done && rc != SQLITE_ROW && rc != SQLITE_DONE)
                r = sqlite_errno(rc);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        if (r < 0)
                return r;
        if (v->done)
                return 1;
        if (n < MAX(max_rows, 1u) && bytes < max_bytes) {
                /* the end: ids handed out beyond the last row mean rows were cut off the end */
                if (v->max_id > v->prev_id)
                        verify_broken(v, AUDIT_CHAIN_TRUNCATED, v->prev_id + 1, 0);
                v->done = true;
                return 1;
        }
        return 0;
}

int audit_store_set_size_limit(AuditStore *s, uint64_t max_bytes) {
        char sql[64];
        uint64_t pages = max_bytes / 4096; /* SQLite's default page size, which we keep */

        snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %" PRIu64,
                 max_bytes == 0 ? UINT64_C(1073741823) : MAX(pages, UINT64_C(1)));
        return sqlite_errno(sqlite3_exec(s->db, sql, NULL, NULL, NULL));
}
