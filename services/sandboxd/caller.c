/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Who asked, as the audit log records it (docs/dbus-api.md, "Caller context"). */
#include "caller.h"

#include <assert.h>
#include <stdio.h>

void caller_unknown(Caller *ret) {
        assert(ret);
        *ret = (Caller) { .uid = UINT32_MAX };
        snprintf(ret->account_id, sizeof(ret->account_id), "unknown");
        snprintf(ret->source, sizeof(ret->source), "agent");
}

void caller_from_uid(Caller *ret, uid_t uid, bool trusted) {
        assert(ret);
        *ret = (Caller) { .uid = uid, .trusted = trusted };
        snprintf(ret->account_id, sizeof(ret->account_id), "uid:%u", (unsigned) uid);
        snprintf(ret->source, sizeof(ret->source), "agent");
}

void caller_system(Caller *ret) {
        assert(ret);
        *ret = (Caller) { .uid = 0, .trusted = 1 };
        snprintf(ret->account_id, sizeof(ret->account_id), "system");
        snprintf(ret->source, sizeof(ret->source), "system");
}
