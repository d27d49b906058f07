/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for audit-chain: the canonical encoding against vectors from the documented Python check. */
#include <string.h>

#include "audit-chain.h"
#include "audit-store.h"
#include "test-util.h"

static AuditEntry vector_row(void) {
        return (AuditEntry) {
                .id = 1,
                .key = "k",
                .session_id = "sb_x",
                .account_id = "uid:0",
                .source = "agent",
                .operation = "exec",
                .event = "finished",
                .exit_code = -1,
                .started_at = UINT64_C(1700000000000000),
                .duration_usec = 12000,
                .request_id = "",
                .recorded_at = UINT64_C(1700000000100000),
                .stdout_size = 3,
                .stderr_size = 0,
                .detail_truncated = false,
                .output_truncated = "{\"stdout\":\"hi\\n\",\"stderr\":\"\"}",
                .detail = "{\"argv\":[\"echo\",\"hi\"]}",
        };
}

/* The vectors are what the script of docs/audit-api.md ("Checking the chain yourself") prints for
 * these rows: C and the documentation agree on every byte of the encoding. */
static void test_vectors(void) {
        AuditEntry e = vector_row();
        uint8_t h1[AUDIT_HASH_SIZE], h2[AUDIT_HASH_SIZE], h[AUDIT_HASH_SIZE];
        char hex[AUDIT_HASH_HEX_SIZE];

        CHECK(audit_chain_hash(NULL, &e, "hi\n", 3, NULL, 0, h1) == 0);
        CHECK_STR(audit_hash_to_hex(h1, hex), "6759dcc945c3938b0d11f993ec9b65be2a7e9e5c5900e4fc9aff0d554bd55b94");
        /* NULL prev is the seed, 32 zero bytes */
        CHECK(audit_chain_hash(audit_chain_seed, &e, "hi\n", 3, "", 0, h) == 0);
        CHECK(memcmp(h, h1, sizeof(h)) == 0);

        e.id = 2;
        e.key = "k2";
        e.exit_code = 0;
        e.stdout_size = 0;
        e.output_truncated = "{\"stdout\":\"\",\"stderr\":\"\"}";
        CHECK(audit_chain_hash(h1, &e, NULL, 0, NULL, 0, h2) == 0);
        CHECK_STR(audit_hash_to_hex(h2, hex), "9f3dd1c87c8e67832a7fbdde023e8e12249fac4e9cc7820c444f58568a5caa3c");

        /* every field counts: one byte anywhere changes the hash */
        e = vector_row();
        e.detail = "{\"argv\":[\"echo\",\"ho\"]}";
        CHECK(audit_chain_hash(NULL, &e, "hi\n", 3, NULL, 0, h) == 0);
        CHECK(memcmp(h, h1, sizeof(h)) != 0);
        e = vector_row();
        CHECK(audit_chain_hash(NULL, &e, "hI\n", 3, NULL, 0, h) == 0);
        CHECK(memcmp(h, h1, sizeof(h)) != 0);
        e.recorded_at++;
        CHECK(audit_chain_hash(NULL, &e, "hi\n", 3, NULL, 0, h) == 0);
        CHECK(memcmp(h, h1, sizeof(h)) != 0);
        /* lengths are encoded: moving a byte from one field to the next is a different row */
        e = vector_row();
        e.session_id = "sb_xu";
        e.account_id = "id:0";
        CHECK(audit_chain_hash(NULL, &e, "hi\n", 3, NULL, 0, h) == 0);
        CHECK(memcmp(h, h1, sizeof(h)) != 0);
        /* the id is part of the row: the same content elsewhere in the chain is another hash */
        e = vector_row();
        e.id = 7;
        CHECK(audit_chain_hash(NULL, &e, "hi\n", 3, NULL, 0, h) == 0);
        CHECK(memcmp(h, h1, sizeof(h)) != 0);

        CHECK_STR(audit_hash_to_hex(NULL, hex), "");
}

static void test_classify(void) {
        for (int i = 0; i < _AUDIT_CHAIN_BREAK_MAX; i++) {
                const char *s = audit_chain_break_to_string(i);
                CHECK(s);
                CHECK(audit_chain_break_from_string(s) == (AuditChainBreak) i);
        }
        CHECK(audit_chain_classify(4, 5, false, true, true) == AUDIT_CHAIN_UNHASHED);
        CHECK(audit_chain_classify(4, 6, true, true, true) == AUDIT_CHAIN_MISSING);
        CHECK(audit_chain_classify(4, 9, true, false, false) == AUDIT_CHAIN_MISSING);
        CHECK(audit_chain_classify(4, 5, true, true, true) == AUDIT_CHAIN_EDITED);
        CHECK(audit_chain_classify(4, 5, true, false, false) == AUDIT_CHAIN_EDITED);
        CHECK(audit_chain_classify(4, 5, true, true, false) == AUDIT_CHAIN_REORDERED);
}

int main(void) {
        test_vectors();
        test_classify();
        return test_finish("test-audit-chain");
}
