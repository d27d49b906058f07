/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The audit log in SQLite: the row's rules (validation, capping), its storage, paged queries, retention. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "audit-chain.h"
#include "macro.h"

typedef struct AuditStore AuditStore;

typedef enum AuditOperation {
        AUDIT_OPERATION_EXEC,
        AUDIT_OPERATION_FILE_CREATE,
        AUDIT_OPERATION_WRITE,
        AUDIT_OPERATION_READ,
        AUDIT_OPERATION_VIEW,
        AUDIT_OPERATION_STR_REPLACE,
        AUDIT_OPERATION_INSERT,
        AUDIT_OPERATION_LS,
        AUDIT_OPERATION_GLOB,
        AUDIT_OPERATION_GREP,
        AUDIT_OPERATION_TAKEOVER,
        AUDIT_OPERATION_SANDBOX_CREATE,
        AUDIT_OPERATION_SANDBOX_UPDATE,
        AUDIT_OPERATION_SANDBOX_DELETE,
        AUDIT_OPERATION_SANDBOX_EXPIRE,
        AUDIT_OPERATION_API_KEY_CREATE,
        AUDIT_OPERATION_API_KEY_REVOKE,
        /* what the gateway records when it refuses a read (event "denied") */
        AUDIT_OPERATION_SANDBOX_READ,
        AUDIT_OPERATION_LOG_READ,
        AUDIT_OPERATION_API_KEY_LIST,
        AUDIT_OPERATION_AUTH, /* the gateway: a client's refusals over its budget, summed up */
        AUDIT_OPERATION_NETWORK_DENIED, /* sandboxd: an egress sandbox's refused name or dropped address */
        AUDIT_OPERATION_PROCESS_START,  /* sandboxd: a background process (issue 25) started, or failed to */
        AUDIT_OPERATION_PROCESS_SIGNAL, /* sandboxd: a signal sent to one */
        AUDIT_OPERATION_PROCESS_EXIT,   /* sandboxd: its end, with the last of its output */
        AUDIT_OPERATION_IMAGE_IMPORT,   /* sandboxd: an image import job's end (issue 24) */
        AUDIT_OPERATION_IMAGE_BUILD,    /* sandboxd: an image build job's end */
        AUDIT_OPERATION_IMAGE_REMOVE,   /* sandboxd: an image removed, or refused */
        AUDIT_OPERATION_SANDBOX_PAUSE,  /* sandboxd: a sandbox frozen (issue 26), asked for or idle */
        AUDIT_OPERATION_SANDBOX_RESUME, /* sandboxd: thawed, asked for or by a call (AutoResume=) */
        AUDIT_OPERATION_SNAPSHOT_CREATE, /* sandboxd: a snapshot of a sandbox's disk taken (issue 26) */
        AUDIT_OPERATION_SNAPSHOT_REMOVE, /* sandboxd: one removed */
        AUDIT_OPERATION_SNAPSHOT_READ,   /* the gateway: a refused read of snapshots */
        AUDIT_OPERATION_MCP,             /* the gateway: a refused POST /mcp (no key, a bad Origin; issue 28) */
        _AUDIT_OPERATION_MAX,
        _AUDIT_OPERATION_INVALID = -EINVAL,
} AuditOperation;

typedef enum AuditEvent {
        AUDIT_EVENT_FINISHED,
        AUDIT_EVENT_FAILED,
        AUDIT_EVENT_DENIED,
        AUDIT_EVENT_BLOCKED,
        AUDIT_EVENT_TIMED_OUT,
        AUDIT_EVENT_OOM_KILLED,
        AUDIT_EVENT_CANCELLED, /* an Exec whose caller hung up its cancel_fd */
        _AUDIT_EVENT_MAX,
        _AUDIT_EVENT_INVALID = -EINVAL,
} AuditEvent;

typedef enum AuditSource {
        AUDIT_SOURCE_AGENT,
        AUDIT_SOURCE_HUMAN_TAKEOVER,
        AUDIT_SOURCE_SYSTEM,
        _AUDIT_SOURCE_MAX,
        _AUDIT_SOURCE_INVALID = -EINVAL,
} AuditSource;

DECLARE_STRING_TABLE(audit_operation, AuditOperation);
DECLARE_STRING_TABLE(audit_event, AuditEvent);
DECLARE_STRING_TABLE(audit_source, AuditSource);

/* Field limits, in bytes. */
#define AUDIT_KEY_MAX 128
#define AUDIT_SESSION_ID_MAX 64
#define AUDIT_ACCOUNT_ID_MAX 256
#define AUDIT_REQUEST_ID_MAX 128
/* Bytes of each stream in a row's output_truncated. */
#define AUDIT_OUTPUT_HEAD 1024

/* GetLog's page limits: a limit of 0 means the default, larger ones are capped, and so is the offset. */
#define AUDIT_LIMIT_DEFAULT 50
#define AUDIT_LIMIT_MAX 1000
#define AUDIT_OFFSET_MAX UINT64_C(10000000)

/* A row as Record receives it. The pointers are borrowed (normally from the bus message) and must stay
 * valid while the record is used. Unset: NULL strings, _INVALID enums, 0 numbers. */
typedef struct AuditRecord {
        const char *key;
        const char *session_id, *account_id, *request_id; /* NULL: "" */
        AuditSource source;                               /* _INVALID: agent */
        AuditOperation operation;                         /* required */
        AuditEvent event;                                 /* required */
        const char *detail;                               /* JSON; NULL: "{}" */
        int32_t exit_code;
        const void *stdout_data, *stderr_data;
        size_t stdout_size, stderr_size;
        uint64_t started_at; /* µs since the epoch; 0: when recorded */
        uint64_t duration_usec;

        /* Set by audit_record_normalize(), freed by audit_record_clear(). */
        bool normalized;
        char *detail_capped;    /* the capped form of an oversized detail, or NULL */
        bool detail_truncated;
        char *output_truncated; /* JSON {"stdout": first 1 KiB, "stderr": first 1 KiB} */
} AuditRecord;

#define AUDIT_RECORD_INIT                                                                                   \
        ((AuditRecord) {                                                                                    \
                .source = _AUDIT_SOURCE_INVALID,                                                            \
                .operation = _AUDIT_OPERATION_INVALID,                                                      \
                .event = _AUDIT_EVENT_INVALID,                                                              \
        })

/* Checks r against the row's rules: key 1..128 bytes; session_id ≤ 64, account_id ≤ 256, request_id ≤
 * 128 bytes; operation and event given; detail valid (strict) JSON; each stream ≤ output_max. Then fills
 * the defaults, caps a detail longer than detail_max as {"truncated":true,"size":N,"head":"…"} (no
 * longer than detail_max) and builds output_truncated. Returns 0; -EINVAL with *ret_error saying what
 * is wrong (the caller frees it; ret_error may be NULL); -ENOMEM. */
int audit_record_normalize(AuditRecord *r, uint64_t output_max, uint64_t detail_max, char **ret_error);
void audit_record_clear(AuditRecord *r);

/* The detail JSON that is stored for r (after normalisation). */
const char *audit_record_detail(const AuditRecord *r);

/* {"stdout": …, "stderr": …}: the first AUDIT_OUTPUT_HEAD bytes of each stream as a UTF-8 string,
 * invalid bytes replaced by U+FFFD (a character cut in two by the limit is dropped). NULL on ENOMEM. */
char *audit_output_head_json(const void *out, size_t out_size, const void *err, size_t err_size);

/* A stored row. The strings point into the store's buffers and are valid during the callback only. */
typedef struct AuditEntry {
        uint64_t id;
        const char *key, *session_id, *account_id, *source, *operation, *event;
        const char *detail;
        bool detail_truncated;
        int32_t exit_code;
        const char *output_truncated;
        uint64_t started_at, duration_usec, recorded_at;
        const char *request_id;
        uint64_t stdout_size, stderr_size;
        const uint8_t *hash; /* AUDIT_HASH_SIZE bytes; NULL for rows stored before the chain */
} AuditEntry;

/* The entry a normalised record becomes once stored with this id at recorded_at. Points into r. */
void audit_record_to_entry(const AuditRecord *r, uint64_t id, uint64_t recorded_at, AuditEntry *ret);

/* Filters of a query; NULL or has_* false: any. since <= started_at < until, after_id < id <= max_id. */
typedef struct AuditFilter {
        const char *session_id, *account_id, *operation, *source, *event;
        bool has_since, has_until, has_after_id, has_max_id;
        uint64_t since, until, after_id, max_id;
} AuditFilter;

/* The callback returns < 0 to abort with that error, 0 to go on, > 0 to stop after this entry. */
typedef int (*audit_entry_cb)(const AuditEntry *e, void *userdata);
typedef int (*audit_output_cb)(const void *out, size_t out_size, const void *err, size_t err_size,
                               void *userdata);

/* Opens (creating if need be) the database at path: WAL, synchronous=NORMAL, schema migrated. Returns
 * 0; -EPROTO if a newer version wrote the schema; another negative errno. */
int audit_store_open(const char *path, AuditStore **ret);
/* Rolls back an open transaction. Accepts NULL; returns NULL. */
AuditStore *audit_store_free(AuditStore *s);

/* Explicit transactions, so that many rows share one commit. Without one each insert commits alone. */
int audit_store_begin(AuditStore *s);
int audit_store_commit(AuditStore *s);
void audit_store_rollback(AuditStore *s);
bool audit_store_in_transaction(AuditStore *s);

/* Stores a normalised record unless its key is stored already. Returns 1 and the new id, or 0 and the
 * id the key was first stored with; -ENOSPC if the disk (or the size limit) is full, -EIO, -EBUSY,
 * -EINVAL for a record that was not normalised, -ENOMEM. Nothing is stored on failure. */
int audit_store_insert(AuditStore *s, const AuditRecord *r, uint64_t recorded_at, uint64_t *ret_id);
/* The same, and the new row's chain hash in ret_hash (if not NULL; set only when 1 is returned). The
 * hash is computed in the same transaction as the row is stored: SHA-256 over the previous row's hash
 * and the row's canonical encoding (audit-chain.h). Without an open transaction the row and its hash
 * are committed together. */
int audit_store_insert_hashed(AuditStore *s, const AuditRecord *r, uint64_t recorded_at, uint64_t *ret_id,
                              uint8_t *ret_hash);

/* Newest first (by id). limit 0 means AUDIT_LIMIT_DEFAULT; limit and offset are capped at
 * AUDIT_LIMIT_MAX and AUDIT_OFFSET_MAX. Returns the number of entries passed to cb, or a negative
 * errno. */
int audit_store_query(AuditStore *s, const AuditFilter *f, uint64_t limit, uint64_t offset,
                      audit_entry_cb cb, void *userdata);
/* One entry: returns cb's result (≥ 0), -ENOENT if there is no such id, or a negative errno. */
int audit_store_get(AuditStore *s, uint64_t id, audit_entry_cb cb, void *userdata);
/* An entry's captured output, as stored; same returns as audit_store_get(). */
int audit_store_get_output(AuditStore *s, uint64_t id, audit_output_cb cb, void *userdata);

/* The highest id ever stored (0 if none), and the number of rows. */
int audit_store_max_id(AuditStore *s, uint64_t *ret);
int audit_store_count(AuditStore *s, uint64_t *ret);

/* Retention, one batch at a time (each in its own transaction), always the oldest ids first so that
 * the chain stays verifiable: deletes up to batch rows, in id order, as long as their started_at or
 * their recorded_at is before cutoff_usec (stopping at the first row younger by both), or whose id is
 * at or below (the highest id − max_rows). The id and hash of the last row removed become the chain's
 * anchor, in the same transaction. Return the number deleted (0: nothing left to do) or a negative errno. */
int audit_store_delete_older(AuditStore *s, uint64_t cutoff_usec, unsigned batch);
int audit_store_delete_excess(AuditStore *s, uint64_t max_rows, unsigned batch);

/* Refreshes the query planner's statistics if the log changed a lot since they were made (bounded
 * work; nothing while a transaction is open). Done at open and free; call it now and then. */
void audit_store_optimize(AuditStore *s);

/* Caps the database file at about max_bytes (0: no cap), as a full disk would; the file never
 * shrinks below its current size. */
int audit_store_set_size_limit(AuditStore *s, uint64_t max_bytes);

/* The chain's anchor: the id and hash of the last row removed by retention (or, for a log stored
 * before the chain existed, the last id then: those rows and that anchor have no hash). The first row
 * after it chains from its hash, or from the seed if it has none. ret_hash: AUDIT_HASH_SIZE bytes, left
 * untouched and *ret_has_hash false if it has none. */
int audit_store_anchor(AuditStore *s, uint64_t *ret_id, uint8_t *ret_hash, bool *ret_has_hash);

/* A walk over the chain (VerifyLog), in steps of bounded work. Initialise with AUDIT_VERIFY_INIT,
 * optionally set max_id (0: up to the highest id handed out when the walk starts). */
typedef struct AuditVerify {
        uint64_t max_id;
        bool started, done;
        uint64_t anchor_id;
        bool anchor_has_hash;
        uint8_t anchor_hash[AUDIT_HASH_SIZE];
        uint64_t prev_id; /* the last row verified (or the anchor) and its hash */
        uint8_t prev_hash[AUDIT_HASH_SIZE];
        uint64_t rows;     /* rows verified */
        uint64_t unhashed; /* rows stored before the chain began (at or below the anchor) */

        /* the outcome, once done */
        AuditChainBreak result;
        uint64_t bad_id;
        bool has_stored;
        uint8_t stored[AUDIT_HASH_SIZE], expected[AUDIT_HASH_SIZE];
        char message[256];
} AuditVerify;

#define AUDIT_VERIFY_INIT ((AuditVerify) { .result = AUDIT_CHAIN_OK })

/* Verifies up to max_rows rows or about max_bytes of row data (whichever comes first) from where the
 * walk is. Returns 1 once the walk is done (v->result says how it ended), 0 if there is more to do, or
 * a negative errno. Rows removed by retention while the walk pauses are skipped: it goes on from the
 * new anchor. */
int audit_store_verify_step(AuditStore *s, AuditVerify *v, unsigned max_rows, uint64_t max_bytes);
