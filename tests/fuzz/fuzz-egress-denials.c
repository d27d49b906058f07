/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes egress-denials: packets the firewall logged (a sandbox's bytes) into denials, and those into rows. */
#include <errno.h>
#include <string.h>

#include "egress-denials.h"
#include "fuzz.h"
#include "macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(egress_denials_freep) EgressDenials *d = NULL;
        EgressDenialRow rows[2], row;
        EgressDenial e;
        int r;

        r = egress_denial_from_packet(data, size, "dropped by the firewall", &e);
        FUZZ_ASSERT(r == 0 || r == -EBADMSG);
        if (r < 0)
                return 0;
        FUZZ_ASSERT(e.kind == EGRESS_DENIAL_ADDRESS && e.target[0] && e.protocol[0]);
        FUZZ_ASSERT(strlen(e.reason) < sizeof(e.reason));
        /* The same denial many times in one second: one row each up to the limit, then one summary. */
        if (egress_denials_new(1, &d) < 0)
                return 0;
        for (int i = 0; i < 3; i++) {
                int n = egress_denials_add(d, 5 * USEC_PER_SEC + (uint64_t) i, &e, rows);
                FUZZ_ASSERT(n == (i == 0 ? 1 : 0));
                for (int j = 0; j < n; j++) {
                        _cleanup_free_ char *json = NULL;
                        FUZZ_ASSERT(egress_denial_row_to_json(&rows[j], &json) == 0 || !json);
                }
        }
        FUZZ_ASSERT(egress_denials_flush(d, 6 * USEC_PER_SEC, &row) == 1);
        FUZZ_ASSERT(row.summary && row.count == 2 && row.n_examples == 1);
        _cleanup_free_ char *json = NULL;
        FUZZ_ASSERT(egress_denial_row_to_json(&row, &json) == 0 || !json);
        return 0;
}
