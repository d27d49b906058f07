/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The audit log's hash chain: each row's canonical encoding, SHA-256 over the previous hash and it. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

typedef struct AuditEntry AuditEntry;

#define AUDIT_HASH_SIZE 32
#define AUDIT_HASH_HEX_SIZE (2 * AUDIT_HASH_SIZE + 1)

/* What the first row of the chain chains from: 32 zero bytes. */
extern const uint8_t audit_chain_seed[AUDIT_HASH_SIZE];

/* hash = SHA-256(prev ‖ encoding(e, out, err)), the encoding as docs/audit-api.md ("The hash chain")
 * defines it: every stored field in a fixed order, integers as 8 bytes big-endian two's complement,
 * strings and blobs as their length (8 bytes big-endian) and their bytes. prev NULL: the seed.
 * Returns 0, or -ENOMEM/-EIO if gnutls fails. */
int audit_chain_hash(const uint8_t *prev, const AuditEntry *e, const void *out, size_t out_size,
                     const void *err, size_t err_size, uint8_t ret[AUDIT_HASH_SIZE]);

/* Lowercase hex, NUL-terminated; "" for NULL. */
char *audit_hash_to_hex(const uint8_t *h, char ret[AUDIT_HASH_HEX_SIZE]);

/* How a chain can be broken, as VerifyLog reports it. */
typedef enum AuditChainBreak {
        AUDIT_CHAIN_OK,
        AUDIT_CHAIN_EDITED,    /* the row's content does not match its hash (the next row follows from it) */
        AUDIT_CHAIN_MISSING,   /* ids are missing before the row: rows were deleted */
        AUDIT_CHAIN_REORDERED, /* neither the row nor the next follows: rows were moved or rewritten */
        AUDIT_CHAIN_UNHASHED,  /* a row after the chain's start has no hash */
        AUDIT_CHAIN_TRUNCATED, /* the newest rows are gone (ids were handed out beyond the last row) */
        _AUDIT_CHAIN_BREAK_MAX,
        _AUDIT_CHAIN_BREAK_INVALID = -EINVAL,
} AuditChainBreak;

DECLARE_STRING_TABLE(audit_chain_break, AuditChainBreak);

/* Which break a row that does not match its expected hash is. prev_id: the last verified row (or the
 * chain's anchor); has_hash: whether the row has one; next_follows: whether the next row's stored hash
 * follows from this row's stored hash (false if there is no next row: then an edit is assumed). */
AuditChainBreak audit_chain_classify(uint64_t prev_id, uint64_t id, bool has_hash, bool has_next,
                                     bool next_follows);
