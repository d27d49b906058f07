/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The gateway's pure HTTP/JSON helpers: error bodies, request ids, strict JSON, UTF-8, base64, bus errors. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base64-util.h"
#include "utf8-util.h"

/* "req_" + 20 characters of [a-z2-7]. */
#define REQUEST_ID_MAX 32
int request_id_new(char ret[static REQUEST_ID_MAX]);

/* The reference API's error body, exactly:
 * {"event":"error","error":message,"code":code,"status":status,"requestId":request_id}. */
char *http_error_body(unsigned status, const char *code, const char *message, const char *request_id);

/* RFC 9112 §6.1–6.3: whether a request's body framing is unambiguous, from the values of every
 * Content-Length and Transfer-Encoding header it has, in order. Two Content-Length headers (equal or
 * not), one that is not a plain decimal number, Transfer-Encoding together with Content-Length, and any
 * Transfer-Encoding but one "chunked" (case and spaces aside) are how request smuggling starts: -EBADMSG
 * and *ret_reason (may be NULL; a static message). 0 otherwise. */
int http_check_framing(const char *const *content_length, size_t n_content_length,
                       const char *const *transfer_encoding, size_t n_transfer_encoding, const char **ret_reason);

/* The code a status has when nothing more specific is known ("not_found", "method_not_allowed", …). */
const char *http_status_code(unsigned status);

/* Parses a whole body as one JSON value: nesting deeper than max_depth, trailing garbage, or invalid
 * UTF-8 in strings are errors. An empty body (only whitespace) is an empty object when empty_ok.
 * Returns 0, or -EINVAL with *ret_error saying what (-ENOMEM). Valid JSON whose strings or field names
 * hold a NUL (\u0000) is -EILSEQ, *ret_error naming the field: our readers take C strings, which would
 * cut such a value short without a word. */
int json_parse_body(const char *body, size_t size, unsigned max_depth, bool empty_ok, json_object **ret,
                    char **ret_error);

/* What a request object may hold: each field once, of its type; anything else is an error. */
typedef enum JsonFieldType {
        JSON_FIELD_STRING,
        JSON_FIELD_UINT,     /* a non-negative integer (no fraction, no exponent overflow) */
        JSON_FIELD_BOOL,
        JSON_FIELD_STRV,     /* an array of strings */
        JSON_FIELD_STRMAP,   /* an object whose values are strings */
        JSON_FIELD_STRV_OR_STAR, /* "*" or an array of strings */
        JSON_FIELD_OBJECT,   /* an object, checked in turn against the field's own fields */
} JsonFieldType;

typedef struct JsonField {
        const char *name;
        JsonFieldType type;
        bool required;
        /* JSON_FIELD_OBJECT: what the object may hold */
        const struct JsonField *fields;
        size_t n_fields;
} JsonField;

/* Checks that o is an object whose members are all in fields with the right types and that every
 * required one is present; an object field's members likewise, named "outer.inner" in the errors.
 * Returns 0 or -EINVAL with *ret_error (e.g. "Unknown field 'x'.", "Unknown field 'egress_policy.x'.",
 * "Field 'ttl_seconds' must be a non-negative integer."). */
int json_check_fields(json_object *o, const JsonField *fields, size_t n_fields, char **ret_error);

/* Reads a checked JSON_FIELD_UINT member (0 if absent). */
uint64_t json_get_uint(json_object *o, const char *name);
const char *json_get_string(json_object *o, const char *name);
/* A NULL-terminated copy of a JSON_FIELD_STRV member (NULL if absent). */
int json_get_strv(json_object *o, const char *name, char ***ret);


/* Output bytes as a JSON string: UTF-8 (U+FFFD for invalid bytes) or, with base64, base64. */
json_object *json_bytes(const uint8_t *data, size_t size, bool base64);

/* s (NULL as "") as a D-Bus string: valid UTF-8, U+FFFD for invalid bytes, at most max_bytes long (cut
 * between characters). sd-bus refuses a string that is not valid UTF-8, and the whole message with it. */
int text_for_bus(const char *s, size_t max_bytes, char **ret);

/* The detail of an audit row sandbox-auditd refused as it was, to record it all the same with no session:
 * {"escaped":true,"refused":why,"session_id":…,"detail":the original detail's text (≤ max_bytes) as one
 * JSON string}. Valid JSON and valid UTF-8 whatever the inputs (NULL as ""). */
int audit_escaped_detail(const char *session_id, const char *detail, const char *why, size_t max_bytes,
                         char **ret);

/* µs since the epoch as an RFC 3339 µs UTC JSON string; 0 becomes null. */
json_object *json_time(uint64_t usec);

/* The HTTP answer to a D-Bus error of sandboxd or sandbox-auditd: status and code. */
void http_status_from_bus_error(const char *bus_error_name, unsigned *ret_status, const char **ret_code);

/* Plain JSON text (no slash escaping). The pointer belongs to o. */
const char *json_text(json_object *o, size_t *ret_len);
