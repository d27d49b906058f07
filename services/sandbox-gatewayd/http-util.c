/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The gateway's pure HTTP/JSON helpers: error bodies, request ids, strict JSON, UTF-8, base64, bus errors. */
#include "http-util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "macro.h"
#include "sandboxd-bus.h"
#include "time-util.h"

_printf_(2, 3) static int set_error(char **ret_error, const char *fmt, ...) {
        va_list ap;
        char *s = NULL;

        if (ret_error) {
                va_start(ap, fmt);
                if (vasprintf(&s, fmt, ap) < 0)
                        s = NULL;
                va_end(ap);
                free(*ret_error);
                *ret_error = s;
        }
        return -EINVAL;
}

int request_id_new(char ret[static REQUEST_ID_MAX]) {
        static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
        uint8_t bytes[20];

        /* Not a secret: an id to find a request in the logs. getrandom() does not block once the pool
         * is initialised, which it is long before a gateway serves. */
        if (getrandom(bytes, sizeof(bytes), 0) != (ssize_t) sizeof(bytes))
                return -errno ?: -EIO;
        memcpy(ret, "req_", 4);
        for (size_t i = 0; i < sizeof(bytes); i++)
                ret[4 + i] = alphabet[bytes[i] & 31];
        ret[4 + sizeof(bytes)] = 0;
        return 0;
}

static bool is_ows(char c) {
        return c == ' ' || c == '\t';
}

int http_check_framing(const char *const *content_length, size_t n_content_length,
                       const char *const *transfer_encoding, size_t n_transfer_encoding, const char **ret_reason) {
        const char *why = NULL;

        /* A front end that reads the body one way and us another see different requests in the same
         * bytes: whatever could be read two ways is refused, not guessed at. */
        if (n_content_length > 0 && n_transfer_encoding > 0)
                why = "The request has both Transfer-Encoding and Content-Length.";
        else if (n_content_length > 1)
                why = "The request has more than one Content-Length header.";
        else if (n_transfer_encoding > 1)
                why = "The request has more than one Transfer-Encoding header.";
        else if (n_content_length == 1) {
                const char *v = content_length[0];
                if (!v || v[0] == 0 || strspn(v, "0123456789") != strlen(v))
                        why = "The Content-Length header is not one decimal number.";
        } else if (n_transfer_encoding == 1) {
                const char *v = transfer_encoding[0] ?: "";
                size_t b = 0, e = strlen(v);
                while (b < e && is_ows(v[b]))
                        b++;
                while (e > b && is_ows(v[e - 1]))
                        e--;
                if (e - b != strlen("chunked") || strncasecmp(v + b, "chunked", e - b) != 0)
                        why = "The only Transfer-Encoding taken is a single \"chunked\".";
        }
        if (!why)
                return 0;
        if (ret_reason)
                *ret_reason = why;
        return -EBADMSG;
}

const char *http_status_code(unsigned status) {
        switch (status) {
        case 400: return "invalid_request";
        case 401: return "unauthorized";
        case 403: return "forbidden";
        case 404: return "not_found";
        case 405: return "method_not_allowed";
        case 408: return "request_timeout";
        case 409: return "conflict";
        case 413: return "payload_too_large";
        case 415: return "unsupported_media_type";
        case 422: return "limit_exceeded";
        case 429: return "too_many_streams";
        case 502: return "upstream_error";
        case 503: return "unavailable";
        case 504: return "upstream_timeout";
        default: return status >= 500 ? "internal" : "error";
        }
}

char *http_error_body(unsigned status, const char *code, const char *message, const char *request_id) {
        _cleanup_free_ char *text = NULL;
        json_object *o;
        char *s;

        /* Messages quote what the client sent (a path, a field's name): json-c would copy its bytes as
         * they are, invalid UTF-8 too, so they are made valid text first. */
        message = message ?: "";
        if (utf8_sanitize((const uint8_t *) message, strlen(message), UTF8_REPLACE_NUL, &text, NULL, NULL) < 0)
                return NULL;
        o = json_object_new_object();
        if (!o)
                return NULL;
        json_object_object_add(o, "event", json_object_new_string("error"));
        json_object_object_add(o, "error", json_object_new_string(text));
        json_object_object_add(o, "code", json_object_new_string(code ?: http_status_code(status)));
        json_object_object_add(o, "status", json_object_new_int((int) status));
        json_object_object_add(o, "requestId", json_object_new_string(request_id ?: ""));
        s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
        return s;
}

/* Whether the JSON text has a \u0000 escape. Only for text that parsed strictly: a backslash can then
 * only be an escape inside a string, and an escaped backslash is skipped with the character it escapes. */
static bool json_text_has_nul_escape(const char *body, size_t size) {
        for (size_t i = 0; i + 1 < size; i++) {
                if (body[i] != '\\')
                        continue;
                if (body[i + 1] == 'u' && size - i >= 6 && memcmp(body + i + 2, "0000", 4) == 0)
                        return true;
                i++;
        }
        return false;
}

/* The first string value holding a NUL (json-c keeps it, but every reader of ours takes C strings and
 * would cut the value short), as its place in the body: "env.A", "argv[2]". */
static bool json_find_nul(json_object *o, char *path, size_t size, size_t used) {
        if (json_object_is_type(o, json_type_string))
                return (size_t) json_object_get_string_len(o) != strlen(json_object_get_string(o));
        if (json_object_is_type(o, json_type_array))
                for (size_t i = 0; i < json_object_array_length(o); i++) {
                        int k = snprintf(path + used, size - used, "[%zu]", i);
                        size_t n = k < 0 ? 0 : MIN((size_t) k, size - used - 1);
                        if (json_find_nul(json_object_array_get_idx(o, i), path, size, used + n))
                                return true;
                }
        if (json_object_is_type(o, json_type_object)) {
                json_object_object_foreach(o, key, v) {
                        int k = snprintf(path + used, size - used, "%s%s", used > 0 ? "." : "", key);
                        size_t n = k < 0 ? 0 : MIN((size_t) k, size - used - 1);
                        if (json_find_nul(v, path, size, used + n))
                                return true;
                }
        }
        path[used] = 0;
        return false;
}

const char *json_text(json_object *o, size_t *ret_len) {
        return json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE,
                                                 ret_len);
}

int json_parse_body(const char *body, size_t size, unsigned max_depth, bool empty_ok, json_object **ret,
                    char **ret_error) {
        struct json_tokener *tok;
        json_object *o;
        size_t i;

        for (i = 0; i < size && strchr(" \t\r\n", body[i]); i++)
                ;
        if (i == size) {
                if (!empty_ok)
                        return set_error(ret_error, "The request needs a JSON body.");
                o = json_object_new_object();
                if (!o)
                        return -ENOMEM;
                *ret = o;
                return 0;
        }
        if (memchr(body, 0, size))
                return set_error(ret_error, "The body is not valid JSON: it contains a NUL byte.");
        if (size > INT32_MAX)
                return set_error(ret_error, "The body is too large.");

        tok = json_tokener_new_ex((int) max_depth);
        if (!tok)
                return -ENOMEM;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        o = json_tokener_parse_ex(tok, body, (int) size);
        enum json_tokener_error jerr = json_tokener_get_error(tok);
        size_t used = json_tokener_get_parse_end(tok);
        json_tokener_free(tok);

        if (!o || jerr != json_tokener_success) {
                json_object_put(o);
                if (jerr == json_tokener_error_depth)
                        return set_error(ret_error, "The JSON body is nested deeper than %u levels.", max_depth);
                if (jerr == json_tokener_continue)
                        return set_error(ret_error, "The JSON body ends early.");
                return set_error(ret_error, "The body is not valid JSON: %s.", json_tokener_error_desc(jerr));
        }
        for (; used < size; used++)
                if (!strchr(" \t\r\n", body[used])) {
                        json_object_put(o);
                        return set_error(ret_error, "The body has data after its JSON value.");
                }
        if (json_text_has_nul_escape(body, size)) {
                char path[128] = "";
                bool in_value = json_find_nul(o, path, sizeof(path), 0);

                json_object_put(o);
                if (in_value) {
                        (void) set_error(ret_error,
                                         "Field '%s' holds a NUL character (\\u0000), which text cannot "
                                         "carry; bytes go base64-encoded (\"encoding\":\"base64\") where "
                                         "the route takes them.", path[0] ? path : "(the body)");
                        return -EILSEQ;
                }
                (void) set_error(ret_error, "A field name in the body holds a NUL character (\\u0000).");
                return -EILSEQ;
        }
        *ret = o;
        return 0;
}

static bool is_uint(json_object *v) {
        if (!json_object_is_type(v, json_type_int))
                return false;
        /* json-c keeps integers above INT64_MAX as uint64; negative ones as int64 */
        errno = 0;
        int64_t i = json_object_get_int64(v);
        if (i < 0)
                return false;
        return true;
}

static bool is_strv(json_object *v) {
        if (!json_object_is_type(v, json_type_array))
                return false;
        for (size_t i = 0; i < json_object_array_length(v); i++)
                if (!json_object_is_type(json_object_array_get_idx(v, i), json_type_string))
                        return false;
        return true;
}

/* prefix: the names of the objects o is in ("a.b."), or "" for the body itself. */
static int check_fields(json_object *o, const JsonField *fields, size_t n_fields, const char *prefix,
                        char **ret_error) {
        json_object_object_foreach(o, name, v) {
                _cleanup_free_ char *key = NULL;
                int k;

                if (asprintf(&key, "%s%s", prefix, name) < 0)
                        return -ENOMEM;
                const JsonField *f = NULL;
                for (size_t i = 0; i < n_fields; i++)
                        if (streq(fields[i].name, name)) {
                                f = &fields[i];
                                break;
                        }
                if (!f)
                        return set_error(ret_error, "Unknown field '%s'.", key);
                switch (f->type) {
                case JSON_FIELD_STRING:
                        if (!json_object_is_type(v, json_type_string))
                                return set_error(ret_error, "Field '%s' must be a string.", key);
                        break;
                case JSON_FIELD_UINT:
                        if (!is_uint(v))
                                return set_error(ret_error, "Field '%s' must be a non-negative integer.", key);
                        break;
                case JSON_FIELD_BOOL:
                        if (!json_object_is_type(v, json_type_boolean))
                                return set_error(ret_error, "Field '%s' must be true or false.", key);
                        break;
                case JSON_FIELD_STRV:
                        if (!is_strv(v))
                                return set_error(ret_error, "Field '%s' must be an array of strings.", key);
                        break;
                case JSON_FIELD_STRV_OR_STAR:
                        if (!is_strv(v) && !(json_object_is_type(v, json_type_string) &&
                                             streq(json_object_get_string(v), "*")))
                                return set_error(ret_error, "Field '%s' must be \"*\" or an array of strings.",
                                                 key);
                        break;
                case JSON_FIELD_STRMAP:
                        if (!json_object_is_type(v, json_type_object))
                                return set_error(ret_error, "Field '%s' must be an object of strings.", key);
                        json_object_object_foreach(v, k2, v2) {
                                (void) k2;
                                if (!json_object_is_type(v2, json_type_string))
                                        return set_error(ret_error, "Field '%s' must be an object of strings.",
                                                         key);
                        }
                        break;
                case JSON_FIELD_OBJECT: {
                        _cleanup_free_ char *inner = NULL;

                        if (!json_object_is_type(v, json_type_object))
                                return set_error(ret_error, "Field '%s' must be an object.", key);
                        if (asprintf(&inner, "%s.", key) < 0)
                                return -ENOMEM;
                        k = check_fields(v, f->fields, f->n_fields, inner, ret_error);
                        if (k < 0)
                                return k;
                        break;
                }
                }
        }
        for (size_t i = 0; i < n_fields; i++)
                if (fields[i].required && !json_object_object_get_ex(o, fields[i].name, NULL))
                        return set_error(ret_error, "Field '%s%s' is required.", prefix, fields[i].name);
        return 0;
}

int json_check_fields(json_object *o, const JsonField *fields, size_t n_fields, char **ret_error) {
        if (!json_object_is_type(o, json_type_object))
                return set_error(ret_error, "The JSON body must be an object.");
        return check_fields(o, fields, n_fields, "", ret_error);
}

uint64_t json_get_uint(json_object *o, const char *name) {
        json_object *v;

        if (!json_object_object_get_ex(o, name, &v) || !json_object_is_type(v, json_type_int))
                return 0;
        return json_object_get_uint64(v);
}

const char *json_get_string(json_object *o, const char *name) {
        json_object *v;

        if (!json_object_object_get_ex(o, name, &v) || !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

int json_get_strv(json_object *o, const char *name, char ***ret) {
        json_object *v;
        char **l;
        size_t n;

        if (!json_object_object_get_ex(o, name, &v) || !json_object_is_type(v, json_type_array)) {
                *ret = NULL;
                return 0;
        }
        n = json_object_array_length(v);
        l = calloc(n + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                l[i] = strdup(json_object_get_string(json_object_array_get_idx(v, i)) ?: "");
                if (!l[i]) {
                        strv_free(l);
                        return -ENOMEM;
                }
        }
        *ret = l;
        return 0;
}

json_object *json_bytes(const uint8_t *data, size_t size, bool base64) {
        _cleanup_free_ char *s = NULL;
        size_t len = 0;

        if (base64) {
                if (base64_encode_alloc(data, size, &s) < 0)
                        return NULL;
                len = strlen(s);
        } else if (utf8_sanitize(data, size, false, &s, &len, NULL) < 0)
                return NULL;
        return json_object_new_string_len(s, (int) len);
}

int text_for_bus(const char *s, size_t max_bytes, char **ret) {
        char *t;
        size_t len;
        int r;

        r = utf8_sanitize((const uint8_t *) strempty(s), strlen(strempty(s)), UTF8_REPLACE_NUL, &t, &len, NULL);
        if (r < 0)
                return r;
        if (len > max_bytes) {
                /* back to the start of the character the cap would split */
                len = max_bytes;
                while (len > 0 && ((uint8_t) t[len] & 0xC0) == 0x80)
                        len--;
                t[len] = 0;
        }
        *ret = t;
        return 0;
}

int audit_escaped_detail(const char *session_id, const char *detail, const char *why, size_t max_bytes,
                         char **ret) {
        _cleanup_free_ char *d = NULL, *w = NULL, *sid = NULL;
        json_object *o;
        char *s;
        int r;

        if ((r = text_for_bus(detail, max_bytes, &d)) < 0 || (r = text_for_bus(why, 512, &w)) < 0 ||
            (r = text_for_bus(session_id, 256, &sid)) < 0)
                return r;
        o = json_object_new_object();
        if (!o)
                return -ENOMEM;
        json_object_object_add(o, "escaped", json_object_new_boolean(true));
        json_object_object_add(o, "refused", json_object_new_string(w));
        json_object_object_add(o, "session_id", json_object_new_string(sid));
        json_object_object_add(o, "detail", json_object_new_string(d));
        s = strdup(json_text(o, NULL));
        json_object_put(o);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

json_object *json_time(uint64_t usec) {
        char buf[RFC3339_USEC_MAX];

        if (usec == 0 || usec == UINT64_MAX || format_rfc3339_usec(usec, buf) < 0)
                return NULL; /* json null */
        return json_object_new_string(buf);
}

void http_status_from_bus_error(const char *name, unsigned *ret_status, const char **ret_code) {
        static const struct {
                const char *name;
                unsigned status;
                const char *code;
        } map[] = {
                { SANDBOXD_ERROR_NO_SUCH_SANDBOX, 404, "not_found" },
                { SANDBOXD_ERROR_NO_SUCH_FILE, 404, "not_found" },
                { SANDBOXD_ERROR_NO_SUCH_PROCESS, 404, "not_found" },
                /* issue 24: POST /v1/sandboxes naming an image the store does not have */
                { "org.sandboxd.sandbox1.NoSuchImage", 404, "not_found" },
                { "org.sandboxd.sandbox1.ImageInUse", 409, "conflict" },
                { "org.sandboxd.sandbox1.ImageExists", 409, "conflict" },
                { "org.sandboxd.sandbox1.NoSuchJob", 404, "not_found" },
                { SANDBOXD_ERROR_FILE_EXISTS, 409, "conflict" },
                { SANDBOXD_ERROR_NAME_EXISTS, 409, "conflict" },
                { SANDBOXD_ERROR_NOT_RUNNING, 409, "conflict" },
                /* SetNetworkPolicy on a sandbox of network none or host: no policy to change */
                { SANDBOXD_ERROR_NOT_EGRESS, 409, "not_egress" },
                /* issue 26: Exec, files, tools, shells, processes on a paused sandbox (no AutoResume=) */
                { SANDBOXD_ERROR_SANDBOX_PAUSED, 409, "sandbox_paused" },
                { SANDBOXD_ERROR_NO_SUCH_SNAPSHOT, 404, "not_found" },
                { SANDBOXD_ERROR_NO_DISK, 409, "no_disk" },
                { SANDBOXD_ERROR_LIMIT_EXCEEDED, 422, "limit_exceeded" },
                { SANDBOXD_ERROR_NO_MATCH, 422, "no_match" },
                { SANDBOXD_ERROR_AMBIGUOUS_MATCH, 422, "ambiguous_match" },
                { SANDBOXD_ERROR_BINARY_FILE, 422, "binary_file" },
                { SANDBOXD_ERROR_PERMISSION_DENIED, 403, "forbidden" },
                { AUDITD_ERROR_NO_SUCH_ENTRY, 404, "not_found" },
                { AUDITD_ERROR_STORAGE_FULL, 503, "unavailable" },
                { "org.freedesktop.DBus.Error.InvalidArgs", 400, "invalid_request" },
                { "org.freedesktop.DBus.Error.AccessDenied", 403, "forbidden" },
                { "org.freedesktop.DBus.Error.NoReply", 504, "upstream_timeout" },
                { "org.freedesktop.DBus.Error.Timeout", 504, "upstream_timeout" },
                { "org.freedesktop.DBus.Error.TimedOut", 504, "upstream_timeout" },
                { "org.freedesktop.DBus.Error.ServiceUnknown", 503, "unavailable" },
                { "org.freedesktop.DBus.Error.NameHasNoOwner", 503, "unavailable" },
                { "org.freedesktop.DBus.Error.LimitsExceeded", 503, "unavailable" },
                { "org.freedesktop.DBus.Error.NoMemory", 503, "unavailable" },
                /* what this host cannot give now: network egress without an uplink (issue 23) */
                { "org.freedesktop.DBus.Error.NotSupported", 503, "unavailable" },
        };

        for (size_t i = 0; name && i < ELEMENTSOF(map); i++)
                if (streq(map[i].name, name)) {
                        *ret_status = map[i].status;
                        *ret_code = map[i].code;
                        return;
                }
        *ret_status = 502;
        *ret_code = "upstream_error";
}
