/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes the gateway's strict JSON body parsing (with its depth limit), the request field checks, and the
 * making of client bytes into valid text for error bodies and audit rows. */
#include <json-c/json.h>

#include "fuzz.h"
#include "http-util.h"
#include "macro.h"

/* One field of every type, as the routes' tables have them (the object's as the egress policy's). */
static const JsonField policy_fields[] = {
        { "default", JSON_FIELD_STRING, false },
        { "allow", JSON_FIELD_STRV, false },
};
static const JsonField fields[] = {
        { "command", JSON_FIELD_STRING, false },
        { "timeout", JSON_FIELD_UINT, false },
        { "stream", JSON_FIELD_BOOL, false },
        { "argv", JSON_FIELD_STRV, false },
        { "env", JSON_FIELD_STRMAP, false },
        { "sandboxes", JSON_FIELD_STRV_OR_STAR, false },
        { "egress_policy", JSON_FIELD_OBJECT, false, policy_fields, ELEMENTSOF(policy_fields) },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        json_object *o = NULL;
        char *error = NULL, **strv = NULL;
        size_t len;
        int r;

        /* Whatever a client sent, quoted in an error body or put in an audit row (as bytes up to a NUL, as
         * libmicrohttpd hands over a path), comes out valid UTF-8: sd-bus would refuse it otherwise. */
        {
                char *raw = fuzz_strndup(data, size), *t = NULL;
                if (raw) {
                        t = http_error_body(404, NULL, raw, "req_1");
                        FUZZ_ASSERT(!t || utf8_is_valid((const uint8_t *) t, strlen(t)));
                        free(t);
                        if (text_for_bus(raw, 64, &t) >= 0) {
                                FUZZ_ASSERT(strlen(t) <= 64 && utf8_is_valid((const uint8_t *) t, strlen(t)));
                                free(t);
                        }
                        if (audit_escaped_detail(raw, raw, raw, 256, &t) >= 0) {
                                FUZZ_ASSERT(utf8_is_valid((const uint8_t *) t, strlen(t)));
                                json_object *e = json_tokener_parse(t);
                                FUZZ_ASSERT(e);
                                json_object_put(e);
                                free(t);
                        }
                        free(raw);
                }
        }

        /* The gateway's default JsonDepthMax is small; 8 lets the fuzzer reach the limit cheaply. */
        r = json_parse_body((const char *) data, size, 8, true, &o, &error);
        if (r < 0) {
                FUZZ_ASSERT(error && !o);
                free(error);
                return 0;
        }
        FUZZ_ASSERT(o && !error);

        /* What was accepted prints, as one C string of the length json_text() says. */
        const char *text = json_text(o, &len);
        FUZZ_ASSERT(text && strlen(text) == len);

        r = json_check_fields(o, fields, ELEMENTSOF(fields), &error);
        if (r < 0)
                FUZZ_ASSERT(error);
        else {
                (void) json_get_uint(o, "timeout");
                (void) json_get_string(o, "command");
                if (json_get_strv(o, "argv", &strv) >= 0 && strv) {
                        for (char **s = strv; *s; s++)
                                free(*s);
                        free(strv);
                }
        }
        free(error);
        json_object_put(o);
        return 0;
}
