/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for sandbox-quota: sandboxd's list plus creations in flight, never counting too few. */
#include <errno.h>

#include "macro.h"
#include "sandbox-quota.h"
#include "test-util.h"

static void test_sequential(void) {
        SandboxQuota *q = NULL;
        uint64_t t, n;

        CHECK_INT(sandbox_quota_new(&q), 0);
        /* nothing yet: one fits in 1 */
        CHECK_INT(sandbox_quota_begin(q, "key:a", &t), 0);
        CHECK_INT(sandbox_quota_check(q, "key:a", t, NULL, 0, 1, &n), 0);
        CHECK_U64(n, 0);
        sandbox_quota_end(q, "key:a", true, "sb_aaaaaaaaaa");

        /* the list now shows it: a second does not fit in 1, fits in 2 */
        const char *one[] = { "sb_aaaaaaaaaa" };
        CHECK_INT(sandbox_quota_begin(q, "key:a", &t), 0);
        CHECK_INT(sandbox_quota_check(q, "key:a", t, one, 1, 1, &n), -EDQUOT);
        CHECK_U64(n, 1);
        sandbox_quota_end(q, "key:a", true, NULL);
        CHECK_INT(sandbox_quota_begin(q, "key:a", &t), 0);
        CHECK_INT(sandbox_quota_check(q, "key:a", t, one, 1, 2, &n), 0);
        sandbox_quota_end(q, "key:a", true, NULL);

        /* another key is counted apart */
        CHECK_INT(sandbox_quota_begin(q, "key:b", &t), 0);
        CHECK_INT(sandbox_quota_check(q, "key:b", t, NULL, 0, 1, &n), 0);
        sandbox_quota_end(q, "key:b", true, NULL);
        sandbox_quota_free(q);
}

static void test_concurrent(void) {
        SandboxQuota *q = NULL;
        uint64_t ta, tb, tc, n;

        CHECK_INT(sandbox_quota_new(&q), 0);
        /* three at once with room for two: the first two lists are empty, each sees the others in flight */
        CHECK_INT(sandbox_quota_begin(q, "key:a", &ta), 0);
        CHECK_INT(sandbox_quota_begin(q, "key:a", &tb), 0);
        CHECK_INT(sandbox_quota_begin(q, "key:a", &tc), 0);
        CHECK_INT(sandbox_quota_check(q, "key:a", ta, NULL, 0, 2, &n), -EDQUOT);
        CHECK_U64(n, 2);
        sandbox_quota_end(q, "key:a", true, NULL);
        CHECK_INT(sandbox_quota_check(q, "key:a", tb, NULL, 0, 2, &n), 0);
        CHECK_U64(n, 1);
        /* b's sandbox is made before c's (older) list answers, which does not show it */
        sandbox_quota_end(q, "key:a", true, "sb_bbbbbbbbbb");
        CHECK_INT(sandbox_quota_check(q, "key:a", tc, NULL, 0, 2, &n), 0);
        CHECK_U64(n, 1);
        /* with room for one only, c would not fit: b ended after c's list was asked for */
        sandbox_quota_end(q, "key:a", true, "sb_cccccccccc");

        CHECK_INT(sandbox_quota_begin(q, "key:a", &ta), 0);
        CHECK_INT(sandbox_quota_begin(q, "key:a", &tb), 0);
        sandbox_quota_end(q, "key:a", false, "sb_dddddddddd"); /* (a's, say) */
        /* b's list answered after d ended, and shows d: d is not counted twice */
        const char *d[] = { "sb_dddddddddd" };
        CHECK_INT(sandbox_quota_check(q, "key:a", tb, d, 1, 2, &n), 0);
        CHECK_U64(n, 1);
        sandbox_quota_end(q, "key:a", true, NULL);

        /* a list that does not show it yet counts it all the same */
        CHECK_INT(sandbox_quota_begin(q, "key:a", &ta), 0);
        CHECK_INT(sandbox_quota_begin(q, "key:a", &tb), 0);
        sandbox_quota_end(q, "key:a", false, "sb_eeeeeeeeee"); /* (a's, made without a check here) */
        CHECK_INT(sandbox_quota_check(q, "key:a", tb, NULL, 0, 1, &n), -EDQUOT);
        CHECK_U64(n, 1);
        sandbox_quota_end(q, "key:a", true, NULL);

        /* a creation whose list failed and was never checked ends all the same */
        CHECK_INT(sandbox_quota_begin(q, "key:a", &ta), 0);
        sandbox_quota_end(q, "key:a", false, NULL);
        CHECK_INT(sandbox_quota_begin(q, "key:a", &ta), 0);
        CHECK_INT(sandbox_quota_check(q, "key:a", ta, NULL, 0, 1, &n), 0);
        CHECK_U64(n, 0);
        sandbox_quota_end(q, "key:a", true, NULL);
        /* an end for an account that has nothing in flight is ignored */
        sandbox_quota_end(q, "key:nobody", true, "sb_ffffffffff");
        sandbox_quota_free(q);
}

int main(void) {
        test_sequential();
        test_concurrent();
        return test_finish("test-sandbox-quota");
}
