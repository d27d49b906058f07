/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The audit log's hash chain: each row's canonical encoding, SHA-256 over the previous hash and it.
 *
 * The encoding is the contract of docs/audit-api.md ("The hash chain"): anybody re-checks the chain
 * with a few lines of Python. Changing it breaks every stored chain: don't. */
#include "audit-chain.h"
#include "audit-store.h"

#include <errno.h>
#include <gnutls/crypto.h>
#include <string.h>

#include "macro.h"

const uint8_t audit_chain_seed[AUDIT_HASH_SIZE] = {};

static const char *const audit_chain_break_table[_AUDIT_CHAIN_BREAK_MAX] = {
        [AUDIT_CHAIN_OK] = "ok",
        [AUDIT_CHAIN_EDITED] = "edited",
        [AUDIT_CHAIN_MISSING] = "missing",
        [AUDIT_CHAIN_REORDERED] = "reordered",
        [AUDIT_CHAIN_UNHASHED] = "unhashed",
        [AUDIT_CHAIN_TRUNCATED] = "truncated",
};
DEFINE_STRING_TABLE(audit_chain_break, AuditChainBreak, _AUDIT_CHAIN_BREAK_MAX);

static int put_i64(gnutls_hash_hd_t h, int64_t v) {
        uint8_t b[8];
        uint64_t u = (uint64_t) v;

        for (int i = 7; i >= 0; i--, u >>= 8)
                b[i] = (uint8_t) (u & 0xff);
        return gnutls_hash(h, b, sizeof(b));
}

static int put_bytes(gnutls_hash_hd_t h, const void *p, size_t n) {
        int r = put_i64(h, (int64_t) n);
        if (r < 0 || n == 0)
                return r;
        return gnutls_hash(h, p, n);
}

static int put_str(gnutls_hash_hd_t h, const char *s) {
        s = s ?: "";
        return put_bytes(h, s, strlen(s));
}

int audit_chain_hash(const uint8_t *prev, const AuditEntry *e, const void *out, size_t out_size,
                     const void *err, size_t err_size, uint8_t ret[AUDIT_HASH_SIZE]) {
        gnutls_hash_hd_t h;
        int r;

        if (gnutls_hash_init(&h, GNUTLS_DIG_SHA256) < 0)
                return -ENOMEM;
        /* the order of docs/audit-api.md, which is the order of the table's columns */
        r = gnutls_hash(h, prev ?: audit_chain_seed, AUDIT_HASH_SIZE);
        if (r >= 0)
                r = put_i64(h, (int64_t) e->id);
        if (r >= 0)
                r = put_str(h, e->key);
        if (r >= 0)
                r = put_str(h, e->session_id);
        if (r >= 0)
                r = put_str(h, e->account_id);
        if (r >= 0)
                r = put_str(h, e->source);
        if (r >= 0)
                r = put_str(h, e->operation);
        if (r >= 0)
                r = put_str(h, e->event);
        if (r >= 0)
                r = put_i64(h, e->exit_code);
        if (r >= 0)
                r = put_i64(h, (int64_t) e->started_at);
        if (r >= 0)
                r = put_i64(h, (int64_t) e->duration_usec);
        if (r >= 0)
                r = put_str(h, e->request_id);
        if (r >= 0)
                r = put_i64(h, (int64_t) e->recorded_at);
        if (r >= 0)
                r = put_i64(h, (int64_t) e->stdout_size);
        if (r >= 0)
                r = put_i64(h, (int64_t) e->stderr_size);
        if (r >= 0)
                r = put_i64(h, e->detail_truncated ? 1 : 0);
        if (r >= 0)
                r = put_str(h, e->output_truncated);
        if (r >= 0)
                r = put_str(h, e->detail);
        if (r >= 0)
                r = put_bytes(h, out, out_size);
        if (r >= 0)
                r = put_bytes(h, err, err_size);
        gnutls_hash_deinit(h, r >= 0 ? ret : NULL);
        return r < 0 ? -EIO : 0;
}

char *audit_hash_to_hex(const uint8_t *h, char ret[AUDIT_HASH_HEX_SIZE]) {
        static const char hex[] = "0123456789abcdef";

        ret[0] = 0;
        if (!h)
                return ret;
        for (size_t i = 0; i < AUDIT_HASH_SIZE; i++) {
                ret[2 * i] = hex[h[i] >> 4];
                ret[2 * i + 1] = hex[h[i] & 15];
        }
        ret[2 * AUDIT_HASH_SIZE] = 0;
        return ret;
}

AuditChainBreak audit_chain_classify(uint64_t prev_id, uint64_t id, bool has_hash, bool has_next,
                                     bool next_follows) {
        if (!has_hash)
                return AUDIT_CHAIN_UNHASHED;
        if (id != prev_id + 1)
                return AUDIT_CHAIN_MISSING;
        /* the row's stored hash is the one the rest of the chain was built on: its content changed */
        if (!has_next || next_follows)
                return AUDIT_CHAIN_EDITED;
        return AUDIT_CHAIN_REORDERED;
}
