/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes the run-session export's mapping: a row as JSON (its strings are what sandboxes and callers chose)
 * → its events and metadata. Every event has a run id made of digits (or, for a background process, of a
 * valid sandbox id and process id), a known name, and the row's id; metadata exists exactly for command
 * rows, and a process row's run metadata is the same when the row is applied twice; nothing may crash. */
#include <errno.h>
#include <json-c/json.h>

#include "audit-export.h"
#include "fuzz.h"
#include "macro.h"

static bool digits(const char *s, size_t min, size_t max) {
        size_t n = strspn(s, "0123456789");
        return n >= min && n <= max && !s[n];
}

static bool run_id_is_safe(const char *s) {
        if (strncmp(s, "run-", 4) != 0)
                return false;
        s += 4;
        if (strncmp(s, "sb_", 3) != 0)
                return digits(s, 1, 20);
        /* "sb_" + 10 of [a-z2-7] + "-p" + 1 to 10 digits */
        if (strspn(s + 3, "abcdefghijklmnopqrstuvwxyz234567") != 10 || strncmp(s + 13, "-p", 2) != 0)
                return false;
        return digits(s + 15, 1, 10);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        json_tokener *tok = json_tokener_new_ex(64);
        json_object *row = NULL, *events = NULL, *md = NULL;
        AuditExportKind kind;
        int r;

        if (!tok)
                return 0;
        row = json_tokener_parse_ex(tok, (const char *) data, (int) MIN(size, (size_t) INT32_MAX));
        json_tokener_free(tok);
        if (!row || !json_object_is_type(row, json_type_object))
                goto finish;

        kind = audit_export_kind(row);
        r = audit_export_events(row, &events);
        FUZZ_ASSERT(r == 0 || r == -EINVAL || r == -ENOMEM);
        if (r == 0) {
                size_t n = json_object_array_length(events);

                FUZZ_ASSERT(kind == AUDIT_EXPORT_NONE ? n == 0 : n >= 1 && n <= 2);
                for (size_t i = 0; i < n; i++) {
                        json_object *e = json_object_array_get_idx(events, i), *v;
                        const char *name;

                        FUZZ_ASSERT(json_object_object_get_ex(e, "runId", &v));
                        FUZZ_ASSERT(run_id_is_safe(json_object_get_string(v)));
                        FUZZ_ASSERT(json_object_object_get_ex(e, "event", &v));
                        name = json_object_get_string(v);
                        const char *prefix = kind == AUDIT_EXPORT_FILE ? "sandbox.file." : "sandbox.command.";

                        FUZZ_ASSERT(strncmp(name, prefix, strlen(prefix)) == 0);
                        /* every line is one line */
                        FUZZ_ASSERT(!strchr(json_object_to_json_string_ext(e, JSON_C_TO_STRING_PLAIN), '\n'));
                }
        }
        r = audit_export_metadata(row, &md);
        FUZZ_ASSERT(kind == AUDIT_EXPORT_COMMAND ? (r == 0 || r == -EINVAL || r == -ENOMEM) : r == -EINVAL);

        if (kind == AUDIT_EXPORT_PROCESS && events) {
                json_object *once = NULL, *twice = NULL;
                int w1, w2;

                w1 = audit_export_process_metadata(NULL, events, &once);
                FUZZ_ASSERT(w1 >= 0 || w1 == -ENOMEM);
                if (w1 > 0) {
                        w2 = audit_export_process_metadata(once, events, &twice);
                        FUZZ_ASSERT(w2 == w1 || w2 == -ENOMEM);
                        if (w2 > 0)
                                FUZZ_ASSERT(streq(json_object_to_json_string(once),
                                                  json_object_to_json_string(twice)));
                        json_object_put(twice);
                }
                json_object_put(once);
        }

finish:
        json_object_put(md);
        json_object_put(events);
        json_object_put(row);
        return 0;
}
