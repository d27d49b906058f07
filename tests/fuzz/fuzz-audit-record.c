/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes sandbox-auditd's row checks (audit_record_normalize): the key, ids and detail JSON a Record call
 * carries, the detail cap, and the output heads. Input: three bytes (operation, event, source), then
 * "KEY\nSESSION\nACCOUNT\nREQUEST\n", then the detail; the detail's bytes double as stdout. */
#include "audit-store.h"
#include "fuzz.h"

#define DETAIL_MAX 256
#define OUTPUT_MAX 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        AuditRecord r = AUDIT_RECORD_INIT;
        char *key = NULL, *session = NULL, *account = NULL, *request = NULL, *detail = NULL, *error = NULL;
        char *head;

        if (size < 3)
                return 0;
        /* Values just past the end are in reach too, to check that they are refused. */
        r.operation = (AuditOperation) (data[0] % (_AUDIT_OPERATION_MAX + 1));
        r.event = (AuditEvent) (data[1] % (_AUDIT_EVENT_MAX + 1));
        r.source = data[2] & 0x80 ? _AUDIT_SOURCE_INVALID : (AuditSource) (data[2] % _AUDIT_SOURCE_MAX);
        data += 3, size -= 3;

        key = fuzz_take_line(&data, &size);
        session = fuzz_take_line(&data, &size);
        account = fuzz_take_line(&data, &size);
        request = fuzz_take_line(&data, &size);
        detail = fuzz_strndup(data, size);
        if (!key || !session || !account || !request || !detail)
                goto finish;

        r.key = key;
        r.session_id = session[0] ? session : NULL;
        r.account_id = account;
        r.request_id = request;
        r.detail = detail[0] ? detail : NULL;
        r.stdout_data = data;
        r.stdout_size = size;
        r.stderr_data = detail;
        r.stderr_size = strlen(detail);

        if (audit_record_normalize(&r, OUTPUT_MAX, DETAIL_MAX, &error) >= 0) {
                const char *d = audit_record_detail(&r);

                FUZZ_ASSERT(d);
                /* A capped detail keeps within the cap; a kept one is the caller's, unchanged. */
                if (r.detail_truncated)
                        FUZZ_ASSERT(strlen(d) <= DETAIL_MAX);
                FUZZ_ASSERT(r.output_truncated);
        } else
                FUZZ_ASSERT(error);
        audit_record_clear(&r);

        head = audit_output_head_json(data, size, detail, strlen(detail));
        free(head);
finish:
        free(error);
        free(key);
        free(session);
        free(account);
        free(request);
        free(detail);
        return 0;
}
