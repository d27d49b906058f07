/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for auditd-journal: which MESSAGE_ID= each operation gets, and the one-line MESSAGE=. */
#include <string.h>

#include "audit-store.h"
#include "auditd-journal.h"
#include "test-util.h"

static void test_message_ids(void) {
        const char *ids[] = { AUDITD_MESSAGE_EXEC, AUDITD_MESSAGE_FILE, AUDITD_MESSAGE_TAKEOVER,
                              AUDITD_MESSAGE_SANDBOX, AUDITD_MESSAGE_ACCESS, AUDITD_MESSAGE_CHECKPOINT };

        /* 128-bit ids as journalctl MESSAGE_ID= takes them, all different */
        for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
                CHECK(strlen(ids[i]) == 32);
                CHECK(strspn(ids[i], "0123456789abcdef") == 32);
                for (size_t j = 0; j < i; j++)
                        CHECK(!streq(ids[i], ids[j]));
        }
        CHECK_STR(auditd_journal_message_id("exec"), AUDITD_MESSAGE_EXEC);
        CHECK_STR(auditd_journal_message_id("process.exit"), AUDITD_MESSAGE_EXEC);
        CHECK_STR(auditd_journal_message_id("str_replace"), AUDITD_MESSAGE_FILE);
        CHECK_STR(auditd_journal_message_id("grep"), AUDITD_MESSAGE_FILE);
        CHECK_STR(auditd_journal_message_id("takeover"), AUDITD_MESSAGE_TAKEOVER);
        CHECK_STR(auditd_journal_message_id("sandbox.create"), AUDITD_MESSAGE_SANDBOX);
        CHECK_STR(auditd_journal_message_id("sandbox.expire"), AUDITD_MESSAGE_SANDBOX);
        CHECK_STR(auditd_journal_message_id("sandbox.read"), AUDITD_MESSAGE_ACCESS);
        CHECK_STR(auditd_journal_message_id("api_key.create"), AUDITD_MESSAGE_ACCESS);
        CHECK_STR(auditd_journal_message_id("auth"), AUDITD_MESSAGE_ACCESS);
        /* every operation has one */
        for (int i = 0; i < _AUDIT_OPERATION_MAX; i++)
                CHECK(auditd_journal_message_id(audit_operation_to_string(i)));
}

static void test_message(void) {
        AuditEntry e = {
                .id = 42, .operation = "exec", .event = "finished", .session_id = "sb_abc",
                .account_id = "uid:0", .exit_code = 0,
        };
        char buf[512], small[16];

        auditd_journal_message(&e, buf, sizeof(buf));
        CHECK_STR(buf, "exec finished in sb_abc by uid:0 (exit 0), row 42");

        /* one line, whatever a caller put into the values */
        e.account_id = "evil\nFAKE=1\r\t";
        e.exit_code = -9;
        e.session_id = "";
        auditd_journal_message(&e, buf, sizeof(buf));
        CHECK_STR(buf, "exec finished by evil FAKE=1   (exit -9), row 42");
        CHECK(!strchr(buf, '\n'));

        auditd_journal_message(&e, small, sizeof(small));
        CHECK_STR(small, "exec finished b");
}

int main(void) {
        test_message_ids();
        test_message();
        return test_finish("test-auditd-journal");
}
