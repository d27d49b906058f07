/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests of the gateway's HTTP/JSON helpers: request ids, error bodies, strict JSON, UTF-8, times. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http-util.h"
#include "macro.h"
#include "test-util.h"

static void test_request_id(void) {
        char a[REQUEST_ID_MAX], b[REQUEST_ID_MAX];

        CHECK(request_id_new(a) == 0);
        CHECK(request_id_new(b) == 0);
        CHECK_INT(strlen(a), 24);
        CHECK(strncmp(a, "req_", 4) == 0);
        CHECK(strspn(a + 4, "abcdefghijklmnopqrstuvwxyz234567") == 20);
        CHECK(strcmp(a, b) != 0);
}

static void test_error_body(void) {
        char *s = http_error_body(403, "session_required",
                                  "Creating API keys needs a dashboard or CLI session, or an admin-scoped key.",
                                  "req_abc");
        CHECK_STR(s, "{\"event\":\"error\",\"error\":\"Creating API keys needs a dashboard or CLI session, or an "
                     "admin-scoped key.\",\"code\":\"session_required\",\"status\":403,\"requestId\":\"req_abc\"}");
        free(s);
        /* quotes and slashes in messages stay valid JSON, slashes unescaped */
        s = http_error_body(404, NULL, "No route GET /v1/\"x\".", "req_1");
        CHECK_STR(s, "{\"event\":\"error\",\"error\":\"No route GET /v1/\\\"x\\\".\",\"code\":\"not_found\","
                     "\"status\":404,\"requestId\":\"req_1\"}");
        free(s);
        /* what a client sent, quoted in a message, is made valid UTF-8: the body always is */
        s = http_error_body(404, NULL, "No route GET /v1/rt\xff\xfe\x80.", "req_2");
        CHECK_STR(s, "{\"event\":\"error\",\"error\":\"No route GET /v1/rt\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd.\","
                     "\"code\":\"not_found\",\"status\":404,\"requestId\":\"req_2\"}");
        CHECK(s && utf8_is_valid((const uint8_t *) s, strlen(s)));
        free(s);
        CHECK_STR(http_status_code(405), "method_not_allowed");
        CHECK_STR(http_status_code(413), "payload_too_large");
        CHECK_STR(http_status_code(429), "too_many_streams");
        CHECK_STR(http_status_code(500), "internal");
}

static int parse(const char *s, unsigned depth, bool empty_ok) {
        json_object *o = NULL;
        char *error = NULL;
        int r = json_parse_body(s, strlen(s), depth, empty_ok, &o, &error);
        CHECK((r == 0) == (o != NULL));
        CHECK((r < 0) == (error != NULL));
        json_object_put(o);
        free(error);
        return r;
}

static void test_json_parse(void) {
        char deep[200];

        CHECK_INT(parse("{\"a\":1}", 32, false), 0);
        CHECK_INT(parse("  {\"a\":[1,2,{\"b\":null}]}\n", 32, false), 0);
        CHECK_INT(parse("", 32, true), 0);
        CHECK_INT(parse("  \n", 32, false), -EINVAL);
        CHECK_INT(parse("{", 32, false), -EINVAL);
        CHECK_INT(parse("{} {}", 32, false), -EINVAL);
        CHECK_INT(parse("{\"a\":1} x", 32, false), -EINVAL);
        CHECK_INT(parse("{\"a\":\"\xff\"}", 32, false), -EINVAL);
        CHECK_INT(parse("[1,]", 32, false), -EINVAL);
        memset(deep, '[', 40);
        memset(deep + 40, ']', 40);
        deep[80] = 0;
        CHECK_INT(parse(deep, 32, false), -EINVAL);
        CHECK_INT(parse(deep, 64, false), 0);
        /* NUL inside the body */
        json_object *o = NULL;
        CHECK_INT(json_parse_body("{}\0{}", 5, 32, false, &o, NULL), -EINVAL);
}

static void test_json_nul(void) {
        json_object *o = NULL;
        char *e = NULL;

        /* json-c keeps a \u0000, every reader of ours would cut the string there: refused, naming where */
        const char *s = "{\"path\":\"/tmp/x\",\"content\":\"abc\\u0000def\"}";
        CHECK_INT(json_parse_body(s, strlen(s), 32, false, &o, &e), -EILSEQ);
        CHECK(!o);
        CHECK(e && strstr(e, "Field 'content' holds a NUL character"));
        free(e), e = NULL;
        s = "{\"argv\":[\"echo\",\"A\\u0000; echo INJECTED\"]}";
        CHECK_INT(json_parse_body(s, strlen(s), 32, false, &o, &e), -EILSEQ);
        CHECK(e && strstr(e, "Field 'argv[1]' "));
        free(e), e = NULL;
        s = "{\"env\":{\"A\":\"x\\u0000y\"}}";
        CHECK_INT(json_parse_body(s, strlen(s), 32, false, &o, &e), -EILSEQ);
        CHECK(e && strstr(e, "Field 'env.A' "));
        free(e), e = NULL;
        s = "{\"env\":{\"A\\u0000B\":\"x\"}}";
        CHECK_INT(json_parse_body(s, strlen(s), 32, false, &o, &e), -EILSEQ);
        CHECK_STR(e, "A field name in the body holds a NUL character (\\u0000).");
        free(e), e = NULL;
        /* an escaped backslash before "u0000" is text, as are other escapes */
        s = "{\"command\":\"printf '\\\\u0000 \\u0001'\"}";
        CHECK_INT(json_parse_body(s, strlen(s), 32, false, &o, &e), 0);
        CHECK(o && !e);
        CHECK_STR(json_get_string(o, "command"), "printf '\\u0000 \x01'");
        json_object_put(o);
}

static void test_text_for_bus(void) {
        char *t = NULL;

        /* what sd-bus would refuse, and the row with it: invalid bytes become U+FFFD */
        CHECK_INT(text_for_bus("/v1/sandboxes/sb_\xff\xfe\xc0x/log", 256, &t), 0);
        CHECK_STR(t, "/v1/sandboxes/sb_\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdx/log");
        free(t);
        CHECK_INT(text_for_bus(NULL, 10, &t), 0);
        CHECK_STR(t, "");
        free(t);
        /* capped between characters: "aé" is 3 bytes, a cap of 2 keeps "a" */
        CHECK_INT(text_for_bus("a\xc3\xa9", 2, &t), 0);
        CHECK_STR(t, "a");
        free(t);
        CHECK_INT(text_for_bus("a\xc3\xa9", 3, &t), 0);
        CHECK_STR(t, "a\xc3\xa9");
        free(t);
        CHECK_INT(text_for_bus("\xff", 2, &t), 0); /* U+FFFD does not fit: nothing of it */
        CHECK_STR(t, "");
        free(t);
}

static void test_audit_escaped_detail(void) {
        char *t = NULL;

        CHECK_INT(audit_escaped_detail("sb_\xff", "{\"path\":\"/v1/\xc0\"}", "session_id is too long.", 2048, &t), 0);
        CHECK_STR(t, "{\"escaped\":true,\"refused\":\"session_id is too long.\",\"session_id\":\"sb_\xef\xbf\xbd\","
                     "\"detail\":\"{\\\"path\\\":\\\"/v1/\xef\xbf\xbd\\\"}\"}");
        json_object *o = json_tokener_parse(t);
        CHECK(o && json_object_is_type(o, json_type_object));
        json_object_put(o);
        free(t);
        /* the detail's text is capped; NULLs are empty */
        CHECK_INT(audit_escaped_detail(NULL, "0123456789", NULL, 4, &t), 0);
        CHECK_STR(t, "{\"escaped\":true,\"refused\":\"\",\"session_id\":\"\",\"detail\":\"0123\"}");
        free(t);
}

static void test_framing(void) {
        const char *one[] = { "12" }, *two_same[] = { "5", "5" }, *two[] = { "5", "60" }, *list[] = { "5, 5" },
                   *neg[] = { "-1" }, *empty[] = { "" }, *chunked[] = { "chunked" }, *chunked_ws[] = { " Chunked\t" },
                   *chunked_twice[] = { "chunked", "chunked" }, *chunked_identity[] = { "chunked, identity" },
                   *identity[] = { "identity" }, *gzip_chunked[] = { "gzip, chunked" };
        const char *why = NULL;

        CHECK_INT(http_check_framing(NULL, 0, NULL, 0, &why), 0);
        CHECK_INT(http_check_framing(one, 1, NULL, 0, &why), 0);
        CHECK_INT(http_check_framing(NULL, 0, chunked, 1, &why), 0);
        CHECK_INT(http_check_framing(NULL, 0, chunked_ws, 1, &why), 0);
        CHECK(!why);
        CHECK_INT(http_check_framing(two, 2, NULL, 0, &why), -EBADMSG);
        CHECK_STR(why, "The request has more than one Content-Length header.");
        CHECK_INT(http_check_framing(two_same, 2, NULL, 0, NULL), -EBADMSG);
        CHECK_INT(http_check_framing(list, 1, NULL, 0, NULL), -EBADMSG);
        CHECK_INT(http_check_framing(neg, 1, NULL, 0, NULL), -EBADMSG);
        CHECK_INT(http_check_framing(empty, 1, NULL, 0, NULL), -EBADMSG);
        CHECK_INT(http_check_framing(one, 1, chunked, 1, &why), -EBADMSG);
        CHECK_STR(why, "The request has both Transfer-Encoding and Content-Length.");
        CHECK_INT(http_check_framing(NULL, 0, chunked_twice, 2, NULL), -EBADMSG);
        CHECK_INT(http_check_framing(NULL, 0, chunked_identity, 1, &why), -EBADMSG);
        CHECK_STR(why, "The only Transfer-Encoding taken is a single \"chunked\".");
        CHECK_INT(http_check_framing(NULL, 0, identity, 1, NULL), -EBADMSG);
        CHECK_INT(http_check_framing(NULL, 0, gzip_chunked, 1, NULL), -EBADMSG);
}

static int check(const char *json, char **ret_error) {
        static const JsonField inner[] = {
                { "d", JSON_FIELD_STRING, .required = true },
                { "l", JSON_FIELD_STRV },
        };
        static const JsonField fields[] = {
                { "s", JSON_FIELD_STRING, .required = true },
                { "u", JSON_FIELD_UINT },
                { "b", JSON_FIELD_BOOL },
                { "l", JSON_FIELD_STRV },
                { "m", JSON_FIELD_STRMAP },
                { "x", JSON_FIELD_STRV_OR_STAR },
                { "o", JSON_FIELD_OBJECT, .fields = inner, .n_fields = ELEMENTSOF(inner) },
        };
        json_object *o = json_tokener_parse(json);
        int r = json_check_fields(o, fields, ELEMENTSOF(fields), ret_error);
        json_object_put(o);
        return r;
}

static void test_json_fields(void) {
        char *e = NULL;

        CHECK_INT(check("{\"s\":\"a\",\"u\":5,\"b\":true,\"l\":[\"x\"],\"m\":{\"k\":\"v\"},\"x\":\"*\"}", NULL), 0);
        CHECK_INT(check("{\"s\":\"a\",\"x\":[\"sb_1\"],\"u\":18446744073709551615}", NULL), 0);
        CHECK_INT(check("{\"s\":\"a\",\"zz\":1}", &e), -EINVAL);
        CHECK_STR(e, "Unknown field 'zz'.");
        CHECK_INT(check("{\"u\":1}", &e), -EINVAL);
        CHECK_STR(e, "Field 's' is required.");
        CHECK_INT(check("{\"s\":1}", &e), -EINVAL);
        CHECK_STR(e, "Field 's' must be a string.");
        CHECK_INT(check("{\"s\":\"a\",\"u\":-1}", &e), -EINVAL);
        CHECK_STR(e, "Field 'u' must be a non-negative integer.");
        CHECK_INT(check("{\"s\":\"a\",\"u\":1.5}", NULL), -EINVAL);
        CHECK_INT(check("{\"s\":\"a\",\"u\":\"1\"}", NULL), -EINVAL);
        CHECK_INT(check("{\"s\":\"a\",\"b\":1}", NULL), -EINVAL);
        CHECK_INT(check("{\"s\":\"a\",\"l\":[\"x\",2]}", NULL), -EINVAL);
        CHECK_INT(check("{\"s\":\"a\",\"m\":{\"k\":1}}", NULL), -EINVAL);
        CHECK_INT(check("{\"s\":\"a\",\"x\":\"all\"}", NULL), -EINVAL);
        CHECK_INT(check("[1]", &e), -EINVAL);
        CHECK_STR(e, "The JSON body must be an object.");
        /* an object field: its own fields, named with the outer one's */
        CHECK_INT(check("{\"s\":\"a\",\"o\":{\"d\":\"x\",\"l\":[\"y\"]}}", NULL), 0);
        CHECK_INT(check("{\"s\":\"a\",\"o\":[]}", &e), -EINVAL);
        CHECK_STR(e, "Field 'o' must be an object.");
        CHECK_INT(check("{\"s\":\"a\",\"o\":null}", &e), -EINVAL);
        CHECK_STR(e, "Field 'o' must be an object.");
        CHECK_INT(check("{\"s\":\"a\",\"o\":{\"d\":\"x\",\"zz\":1}}", &e), -EINVAL);
        CHECK_STR(e, "Unknown field 'o.zz'.");
        CHECK_INT(check("{\"s\":\"a\",\"o\":{\"d\":\"x\",\"l\":\"y\"}}", &e), -EINVAL);
        CHECK_STR(e, "Field 'o.l' must be an array of strings.");
        CHECK_INT(check("{\"s\":\"a\",\"o\":{}}", &e), -EINVAL);
        CHECK_STR(e, "Field 'o.d' is required.");
        free(e);

        json_object *o = json_tokener_parse("{\"u\":42,\"s\":\"x\",\"l\":[\"a\",\"b\"]}");
        char **l = NULL;
        CHECK_U64(json_get_uint(o, "u"), 42);
        CHECK_U64(json_get_uint(o, "none"), 0);
        CHECK_STR(json_get_string(o, "s"), "x");
        CHECK(json_get_string(o, "u") == NULL);
        CHECK(json_get_strv(o, "l", &l) == 0 && l && streq(l[0], "a") && streq(l[1], "b") && !l[2]);
        strv_free(l);
        CHECK(json_get_strv(o, "none", &l) == 0 && !l);
        json_object_put(o);
}

static void test_utf8(void) {
        char *s = NULL;
        size_t len, used;

        CHECK(utf8_sanitize((const uint8_t *) "h\xc3\xa9llo \xce\xbb \xf0\x9f\x98\x80", 15, 0, &s, &len, &used) == 0);
        CHECK_STR(s, "h\xc3\xa9llo \xce\xbb \xf0\x9f\x98\x80");
        CHECK_U64(used, 15);
        free(s);
        /* invalid bytes, overlong forms and surrogates each become U+FFFD */
        CHECK(utf8_sanitize((const uint8_t *) "a\xff" "b\xc0\xaf" "c\xed\xa0\x80", 9, 0, &s, &len, NULL) == 0);
        CHECK_STR(s, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
        free(s);
        /* a sequence cut at the end: kept for the next chunk, or replaced at the very end */
        CHECK(utf8_sanitize((const uint8_t *) "ab\xe2\x82", 4, UTF8_KEEP_TAIL, &s, &len, &used) == 0);
        CHECK_STR(s, "ab");
        CHECK_U64(used, 2);
        free(s);
        CHECK(utf8_sanitize((const uint8_t *) "ab\xe2\x82", 4, 0, &s, &len, &used) == 0);
        CHECK_STR(s, "ab\xef\xbf\xbd\xef\xbf\xbd");
        CHECK_U64(used, 4);
        free(s);
        /* an invalid byte at the end is not "incomplete" */
        CHECK(utf8_sanitize((const uint8_t *) "a\x80", 2, UTF8_KEEP_TAIL, &s, &len, &used) == 0);
        CHECK_STR(s, "a\xef\xbf\xbd");
        CHECK_U64(used, 2);
        free(s);

        json_object *j = json_bytes((const uint8_t *) "x\xffy", 3, false);
        CHECK_STR(json_object_get_string(j), "x\xef\xbf\xbdy");
        json_object_put(j);
        j = json_bytes((const uint8_t *) "x\xffy", 3, true);
        CHECK_STR(json_object_get_string(j), "eP95");
        json_object_put(j);
}

static void test_time(void) {
        json_object *t = json_time(UINT64_C(1793451801590139));
        CHECK_STR(json_object_get_string(t), "2026-10-31T13:03:21.590139Z");
        json_object_put(t);
        CHECK(json_time(0) == NULL);
}

static void test_bus_errors(void) {
        const char *code;
        unsigned status;

        http_status_from_bus_error("org.sandboxd.sandbox1.NoSuchSandbox", &status, &code);
        CHECK(status == 404 && streq(code, "not_found"));
        http_status_from_bus_error("org.sandboxd.sandbox1.NoSuchProcess", &status, &code);
        CHECK(status == 404 && streq(code, "not_found"));
        http_status_from_bus_error("org.freedesktop.DBus.Error.InvalidArgs", &status, &code);
        CHECK(status == 400 && streq(code, "invalid_request"));
        http_status_from_bus_error("org.sandboxd.sandbox1.LimitExceeded", &status, &code);
        CHECK(status == 422 && streq(code, "limit_exceeded"));
        http_status_from_bus_error("org.sandboxd.sandbox1.NotRunning", &status, &code);
        CHECK(status == 409 && streq(code, "conflict"));
        http_status_from_bus_error("org.freedesktop.DBus.Error.NoReply", &status, &code);
        CHECK(status == 504 && streq(code, "upstream_timeout"));
        http_status_from_bus_error("org.freedesktop.DBus.Error.ServiceUnknown", &status, &code);
        CHECK(status == 503 && streq(code, "unavailable"));
        http_status_from_bus_error("org.freedesktop.DBus.Error.NotSupported", &status, &code);
        CHECK(status == 503 && streq(code, "unavailable"));
        http_status_from_bus_error("com.example.Whatever", &status, &code);
        CHECK(status == 502 && streq(code, "upstream_error"));
        http_status_from_bus_error(NULL, &status, &code);
        CHECK(status == 502);
}

int main(void) {
        test_request_id();
        test_error_body();
        test_json_parse();
        test_json_nul();
        test_framing();
        test_text_for_bus();
        test_audit_escaped_detail();
        test_json_fields();
        test_utf8();
        test_time();
        test_bus_errors();
        return test_finish("test-http-util");
}
