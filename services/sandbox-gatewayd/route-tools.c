/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* POST …/tools/{file_create,view,str_replace,insert,ls,glob,grep}: sandboxd's file tools with JSON bodies.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gatewayd-routes.h"

/* Every tool's body: its own fields, plus "encoding" ("utf-8", the default, or "base64"), which applies
 * to the bytes both ways: content, old, new, text in the request; text, names, paths and lines in the
 * answer (as UTF-8 with U+FFFD for invalid bytes, or base64). */
typedef enum ToolRoute {
        TOOL_FILE_CREATE,
        TOOL_VIEW,
        TOOL_STR_REPLACE,
        TOOL_INSERT,
        TOOL_LS,
        TOOL_GLOB,
        TOOL_GREP,
        _TOOL_ROUTE_MAX,
} ToolRoute;

static const struct {
        const char *operation; /* the route's audit operation, and its last path segment */
        const char *method;    /* sandboxd's */
        JsonField fields[10];
        size_t n_fields;
} tools[_TOOL_ROUTE_MAX] = {
        [TOOL_FILE_CREATE] = {"file_create",
                              "FileCreate",
                              {{"path", JSON_FIELD_STRING, true},
                               {"content", JSON_FIELD_STRING},
                               {"file_text", JSON_FIELD_STRING},
                               {"overwrite", JSON_FIELD_BOOL},
                               {"mode", JSON_FIELD_UINT},
                               {"create_dirs", JSON_FIELD_BOOL},
                               {"encoding", JSON_FIELD_STRING}},
                              7},
        [TOOL_VIEW] = {"view",
                       "View",
                       {{"path", JSON_FIELD_STRING, true},
                        {"start_line", JSON_FIELD_UINT},
                        {"end_line", JSON_FIELD_UINT},
                        {"encoding", JSON_FIELD_STRING}},
                       4},
        [TOOL_STR_REPLACE] = {"str_replace",
                              "StrReplace",
                              {{"path", JSON_FIELD_STRING, true},
                               {"old", JSON_FIELD_STRING},
                               {"new", JSON_FIELD_STRING},
                               {"old_str", JSON_FIELD_STRING},
                               {"new_str", JSON_FIELD_STRING},
                               {"encoding", JSON_FIELD_STRING}},
                              6},
        [TOOL_INSERT] = {"insert",
                         "Insert",
                         {{"path", JSON_FIELD_STRING, true},
                          {"line", JSON_FIELD_UINT},
                          {"text", JSON_FIELD_STRING},
                          {"insert_line", JSON_FIELD_UINT},
                          {"new_str", JSON_FIELD_STRING},
                          {"encoding", JSON_FIELD_STRING}},
                         6},
        [TOOL_LS] = {"ls",
                     "Ls",
                     {{"path", JSON_FIELD_STRING, true},
                      {"max_results", JSON_FIELD_UINT},
                      {"encoding", JSON_FIELD_STRING}},
                     3},
        [TOOL_GLOB] = {"glob",
                       "Glob",
                       {{"pattern", JSON_FIELD_STRING, true},
                        {"path", JSON_FIELD_STRING},
                        {"max_results", JSON_FIELD_UINT},
                        {"encoding", JSON_FIELD_STRING}},
                       4},
        [TOOL_GREP] = {"grep",
                       "Grep",
                       {{"pattern", JSON_FIELD_STRING, true},
                        {"path", JSON_FIELD_STRING},
                        {"glob", JSON_FIELD_STRING},
                        {"ignore_case", JSON_FIELD_BOOL},
                        {"max_results", JSON_FIELD_UINT},
                        {"encoding", JSON_FIELD_STRING}},
                       6},
};

typedef struct ToolCall {
        ToolRoute tool;
        json_object *body;
        bool base64;
        uint8_t *bytes[2]; /* content / old, new / text, decoded */
        size_t sizes[2];
} ToolCall;

static void tool_call_free(void *p) {
        ToolCall *t = p;
        if (!t)
                return;
        json_object_put(t->body);
        free(t->bytes[0]);
        free(t->bytes[1]);
        free(t);
}

/* A request's byte field: base64-decoded, or the UTF-8 string's bytes. */
static int body_bytes(ToolCall *t, const char *name, uint8_t **ret, size_t *ret_size) {
        const char *s = json_get_string(t->body, name);
        if (!s)
                s = "";
        if (t->base64)
                return base64_decode_alloc(s, ret, ret_size);
        *ret = (uint8_t *) strdup(s);
        if (!*ret)
                return -ENOMEM;
        *ret_size = strlen(s);
        return 0;
}

static bool body_has(ToolCall *t, const char *name) {
        return json_object_object_get_ex(t->body, name, NULL);
}

static int build_tool(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        ToolCall *t = r->data;
        json_object *o = t->body;
        const char *path = json_get_string(o, "path");
        int k;

        k = sd_bus_message_append(m, "s", req_param(r, 0));
        if (k < 0)
                return k;
        switch (t->tool) {
        case TOOL_FILE_CREATE:
        case TOOL_STR_REPLACE:
                k = sd_bus_message_append(m, "s", path);
                if (k >= 0)
                        k = sd_bus_message_append_array(m, 'y', t->bytes[0], t->sizes[0]);
                if (k >= 0 && t->tool == TOOL_STR_REPLACE)
                        k = sd_bus_message_append_array(m, 'y', t->bytes[1], t->sizes[1]);
                break;
        case TOOL_INSERT:
                k = sd_bus_message_append(
                        m, "su", path,
                        (uint32_t) MIN(json_get_uint(o, body_has(t, "line") ? "line" : "insert_line"),
                                       (uint64_t) UINT32_MAX));
                if (k >= 0)
                        k = sd_bus_message_append_array(m, 'y', t->bytes[0], t->sizes[0]);
                break;
        case TOOL_VIEW:
        case TOOL_LS:
                k = sd_bus_message_append(m, "s", path);
                break;
        case TOOL_GLOB:
        case TOOL_GREP:
                k = sd_bus_message_append(m, "s", json_get_string(o, "pattern"));
                break;
        default:
                return -EINVAL;
        }
        if (k >= 0)
                k = sd_bus_message_open_container(m, 'a', "{sv}");
        if (k >= 0 && (t->tool == TOOL_GLOB || t->tool == TOOL_GREP) && path)
                k = sd_bus_message_append(m, "{sv}", "path", "s", path);
        static const char *const bools[] = {"overwrite", "create_dirs", "ignore_case"};
        for (size_t i = 0; k >= 0 && i < ELEMENTSOF(bools); i++)
                if (body_has(t, bools[i]))
                        k = sd_bus_message_append(
                                m, "{sv}", bools[i], "b",
                                json_object_get_boolean(json_object_object_get(o, bools[i])));
        static const char *const uints[] = {"mode", "start_line", "end_line", "max_results"};
        for (size_t i = 0; k >= 0 && i < ELEMENTSOF(uints); i++)
                if (body_has(t, uints[i]))
                        k = sd_bus_message_append(
                                m, "{sv}", uints[i], "u",
                                (uint32_t) MIN(json_get_uint(o, uints[i]), (uint64_t) UINT32_MAX));
        if (k >= 0 && t->tool == TOOL_GREP && json_get_string(o, "glob"))
                k = sd_bus_message_append(m, "{sv}", "glob", "s", json_get_string(o, "glob"));
        if (k >= 0)
                k = sd_bus_message_append(m, "{sv}{sv}{sv}", "account_id", "s", r->account_id, "request_id",
                                          "s", r->request_id, "source", "s", "agent");
        if (k >= 0)
                k = sd_bus_message_close_container(m);
        return k;
}

/* Reads an info a{sv} (t, u, b, s values) into o. */
static int read_info(sd_bus_message *reply, json_object *o) {
        const char *key, *contents;
        int k;

        k = sd_bus_message_enter_container(reply, 'a', "{sv}");
        while (k >= 0 && (k = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                k = sd_bus_message_read(reply, "s", &key);
                if (k >= 0)
                        k = sd_bus_message_peek_type(reply, NULL, &contents);
                if (k >= 0)
                        k = sd_bus_message_enter_container(reply, 'v', contents);
                if (k < 0)
                        break;
                if (streq(contents, "t")) {
                        uint64_t v;
                        k = sd_bus_message_read(reply, "t", &v);
                        json_object_object_add(o, key, json_object_new_uint64(v));
                } else if (streq(contents, "b")) {
                        int v;
                        k = sd_bus_message_read(reply, "b", &v);
                        json_object_object_add(o, key, json_object_new_boolean(v));
                } else if (streq(contents, "s")) {
                        const char *v;
                        k = sd_bus_message_read(reply, "s", &v);
                        json_object_object_add(o, key, json_object_new_string(v));
                } else
                        k = sd_bus_message_skip(reply, contents);
                if (k >= 0)
                        k = sd_bus_message_exit_container(reply);
                if (k >= 0)
                        k = sd_bus_message_exit_container(reply);
        }
        if (k >= 0)
                k = sd_bus_message_exit_container(reply);
        return k;
}

static int read_list(ToolCall *t, sd_bus_message *reply, json_object *list) {
        const void *a, *b;
        size_t an, bn;
        int k;

        switch (t->tool) {
        case TOOL_LS:
                k = sd_bus_message_enter_container(reply, 'a', "(aysutt)");
                while (k >= 0 && (k = sd_bus_message_enter_container(reply, 'r', "aysutt")) > 0) {
                        const char *type;
                        uint32_t mode;
                        uint64_t size, mtime;
                        char mbuf[8];
                        k = sd_bus_message_read_array(reply, 'y', &a, &an);
                        if (k >= 0)
                                k = sd_bus_message_read(reply, "sutt", &type, &mode, &size, &mtime);
                        if (k >= 0)
                                k = sd_bus_message_exit_container(reply);
                        if (k < 0)
                                break;
                        json_object *e = json_object_new_object();
                        snprintf(mbuf, sizeof(mbuf), "%04o", mode);
                        json_object_object_add(e, "name", json_bytes(a, an, t->base64));
                        json_object_object_add(e, "type", json_object_new_string(type));
                        json_object_object_add(e, "mode", json_object_new_string(mbuf));
                        json_object_object_add(e, "size", json_object_new_uint64(size));
                        json_object_object_add(e, "mtime", json_time(mtime));
                        json_object_array_add(list, e);
                }
                break;
        case TOOL_GLOB:
                k = sd_bus_message_enter_container(reply, 'a', "ay");
                while (k >= 0 && (k = sd_bus_message_read_array(reply, 'y', &a, &an)) > 0)
                        json_object_array_add(list, json_bytes(a, an, t->base64));
                break;
        case TOOL_GREP:
                k = sd_bus_message_enter_container(reply, 'a', "(ayuay)");
                while (k >= 0 && (k = sd_bus_message_enter_container(reply, 'r', "ayuay")) > 0) {
                        uint32_t line;
                        k = sd_bus_message_read_array(reply, 'y', &a, &an);
                        if (k >= 0)
                                k = sd_bus_message_read(reply, "u", &line);
                        if (k >= 0)
                                k = sd_bus_message_read_array(reply, 'y', &b, &bn);
                        if (k >= 0)
                                k = sd_bus_message_exit_container(reply);
                        if (k < 0)
                                break;
                        json_object *e = json_object_new_object();
                        json_object_object_add(e, "file", json_bytes(a, an, t->base64));
                        json_object_object_add(e, "line", json_object_new_uint64(line));
                        json_object_object_add(e, "text", json_bytes(b, bn, t->base64));
                        json_object_array_add(list, e);
                }
                break;
        default:
                return -EINVAL;
        }
        if (k >= 0)
                k = sd_bus_message_exit_container(reply);
        return k;
}

static void on_tool_reply(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        ToolCall *t = r->data;
        json_object *o;
        int k = 0;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        o = json_object_new_object();
        if (!o)
                return req_reply_errno(r, -ENOMEM);
        if (t->tool == TOOL_VIEW) {
                const void *text;
                size_t n;
                k = sd_bus_message_read_array(reply, 'y', &text, &n);
                if (k >= 0)
                        json_object_object_add(o, "text", json_bytes(text, n, t->base64));
        } else if (t->tool == TOOL_LS || t->tool == TOOL_GLOB || t->tool == TOOL_GREP) {
                json_object *list = json_object_new_array();
                k = list ? read_list(t, reply, list) : -ENOMEM;
                json_object_object_add(o,
                                       t->tool == TOOL_LS     ? "entries"
                                       : t->tool == TOOL_GLOB ? "paths"
                                                              : "matches",
                                       list);
        }
        if (k >= 0)
                k = read_info(reply, o);
        if (k < 0) {
                json_object_put(o);
                return req_reply_errno(r, k);
        }
        req_reply_json(r, t->tool == TOOL_FILE_CREATE ? 201 : 200, o);
}

int route_tool(Request *r) {
        const char *op = r->match.route->operation, *enc;
        ToolCall *t;
        int k;

        t = calloc(1, sizeof(ToolCall));
        if (!t)
                return -ENOMEM;
        r->data = t;
        r->data_free = tool_call_free;
        for (t->tool = 0; t->tool < _TOOL_ROUTE_MAX; t->tool++)
                if (streq(tools[t->tool].operation, op))
                        break;
        if (t->tool == _TOOL_ROUTE_MAX)
                return -EINVAL;
        k = req_parse_json(r, tools[t->tool].fields, tools[t->tool].n_fields, &t->body);
        if (k == -EINVAL)
                return 0; /* answered */
        if (k < 0)
                return k;
        enc = json_get_string(t->body, "encoding");
        if (enc && !streq(enc, "base64") && !streq(enc, "utf-8")) {
                req_reply_error(r, 400, "invalid_request",
                                "Field 'encoding' must be \"utf-8\" or \"base64\".");
                return 0;
        }
        t->base64 = enc && streq(enc, "base64");
        /* Each byte field under its name here or the text editor tool's (file_text, old_str, …). */
        static const char *const byte_fields[_TOOL_ROUTE_MAX][2][2] = {
                [TOOL_FILE_CREATE] = {{"content", "file_text"}},
                [TOOL_STR_REPLACE] = {{"old", "old_str"}, {"new", "new_str"}},
                [TOOL_INSERT] = {{"text", "new_str"}},
        };
        for (size_t i = 0; i < 2 && byte_fields[t->tool][i][0]; i++) {
                const char *const *names = byte_fields[t->tool][i];
                bool a = body_has(t, names[0]), b = body_has(t, names[1]);
                if (a == b) {
                        req_reply_error(r, 400, "invalid_request",
                                        "Pass exactly one of the fields '%s' and '%s'.", names[0], names[1]);
                        return 0;
                }
                k = body_bytes(t, a ? names[0] : names[1], &t->bytes[i], &t->sizes[i]);
                if (k == -EINVAL) {
                        req_reply_error(r, 400, "invalid_request", "Field '%s' is not valid base64.",
                                        a ? names[0] : names[1]);
                        return 0;
                }
                if (k < 0)
                        return k;
        }
        if (t->tool == TOOL_INSERT && body_has(t, "line") == body_has(t, "insert_line")) {
                req_reply_error(r, 400, "invalid_request",
                                "Pass exactly one of the fields 'line' and 'insert_line'.");
                return 0;
        }
        return req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                        tools[t->tool].method, build_tool, on_tool_reply, 0);
}
