/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for caller: what an unknown, a bus and the system's own caller record (docs/dbus-api.md). */
#include "caller.h"
#include "macro.h"
#include "test-util.h"

int main(void) {
        Caller c;

        caller_unknown(&c);
        CHECK_U64(c.uid, UINT32_MAX);
        CHECK(!c.trusted);
        CHECK_STR(c.account_id, "unknown");
        CHECK_STR(c.source, "agent");
        CHECK_STR(c.request_id, "");

        caller_from_uid(&c, 4242, false);
        CHECK_U64(c.uid, 4242);
        CHECK(!c.trusted);
        CHECK_STR(c.account_id, "uid:4242");
        CHECK_STR(c.source, "agent");
        CHECK_STR(c.request_id, "");

        /* a trusted caller starts as any other: its context, read later, may say who it speaks for */
        caller_from_uid(&c, 0, true);
        CHECK(c.trusted);
        CHECK_STR(c.account_id, "uid:0");

        caller_system(&c);
        CHECK_U64(c.uid, 0);
        CHECK(c.trusted);
        CHECK_STR(c.account_id, "system");
        CHECK_STR(c.source, "system");
        return test_finish("test-caller");
}
