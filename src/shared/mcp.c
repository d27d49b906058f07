/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The Model Context Protocol's JSON-RPC 2.0 side, without a transport: parsing messages, revisions,
 * initialize, ping, tools/list and the answers; the gateway's /mcp and sandboxctl mcp run the tools. */
#include "mcp.h"

#include <stdlib.h>
#include <string.h>

#include "macro.h"

/* A batch larger than this is refused whole: each message may be a tool call. */
#define MCP_BATCH_MAX 64

McpBatch *mcp_batch_free(McpBatch *b) {
        if (!b)
                return NULL;
        json_object_put(b->root);
        free(b->messages);
        free(b);
        return NULL;
}

static void message_fail(McpMessage *m, int code, const char *message) {
        if (m->error == 0) {
                m->error = code;
                m->error_message = message;
        }
}

/* One message: a request, a notification, a response of the client's, or invalid (with its error). */
static void message_parse(json_object *o, McpMessage *m) {
        json_object *v, *id = NULL;

        *m = (McpMessage){};
        if (!json_object_is_type(o, json_type_object))
                return message_fail(m, JSONRPC_INVALID_REQUEST, "A JSON-RPC message must be an object.");
        /* the id first, so that an error can name it */
        if (json_object_object_get_ex(o, "id", &id)) {
                if (json_object_is_type(id, json_type_string) || json_object_is_type(id, json_type_int))
                        m->id = id;
                else
                        message_fail(m, JSONRPC_INVALID_REQUEST, "The id must be a string or an integer.");
        }
        if (!json_object_object_get_ex(o, "jsonrpc", &v) || !json_object_is_type(v, json_type_string) ||
            !streq(json_object_get_string(v), "2.0"))
                return message_fail(m, JSONRPC_INVALID_REQUEST,
                                    "The message must have \"jsonrpc\": \"2.0\".");
        if (!json_object_object_get_ex(o, "method", &v)) {
                if (m->id && (json_object_object_get_ex(o, "result", NULL) ||
                              json_object_object_get_ex(o, "error", NULL)))
                        return; /* a response: this server sends no requests, so nothing waits for it */
                return message_fail(m, JSONRPC_INVALID_REQUEST, "The message has no method.");
        }
        if (!json_object_is_type(v, json_type_string) ||
            strlen(json_object_get_string(v)) != (size_t) json_object_get_string_len(v))
                return message_fail(m, JSONRPC_INVALID_REQUEST, "The method must be a string.");
        m->method = json_object_get_string(v);
        if (json_object_object_get_ex(o, "params", &v)) {
                if (!json_object_is_type(v, json_type_object))
                        return message_fail(m, JSONRPC_INVALID_REQUEST, "The params must be an object.");
                m->params = v;
        }
}

int mcp_batch_parse(const char *data, size_t size, unsigned max_depth, McpBatch **ret,
                    const char **ret_error) {
        json_tokener *tok;
        json_object *root;
        McpBatch *b;
        size_t end;

        *ret_error = NULL;
        if (!data || size == 0 || memchr(data, 0, size)) {
                *ret_error = size == 0 ? "The body is empty." : "The body holds a NUL byte.";
                return -EBADMSG;
        }
        tok = json_tokener_new_ex((int) MAX(max_depth, 1u));
        if (!tok)
                return -ENOMEM;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        root = json_tokener_parse_ex(tok, data, (int) MIN(size, (size_t) INT32_MAX));
        end = json_tokener_get_parse_end(tok);
        if (!root || json_tokener_get_error(tok) != json_tokener_success) {
                json_tokener_free(tok);
                json_object_put(root);
                *ret_error = "The body is not valid JSON.";
                return -EBADMSG;
        }
        json_tokener_free(tok);
        for (; end < size; end++)
                if (!strchr(" \t\r\n", data[end])) {
                        json_object_put(root);
                        *ret_error = "The body has more after its JSON value.";
                        return -EBADMSG;
                }

        b = calloc(1, sizeof(McpBatch));
        if (!b) {
                json_object_put(root);
                return -ENOMEM;
        }
        b->root = root;
        if (json_object_is_type(root, json_type_array)) {
                size_t n = json_object_array_length(root);
                if (n == 0 || n > MCP_BATCH_MAX) {
                        mcp_batch_free(b);
                        *ret_error = n == 0 ? "The batch is empty." : "The batch has too many messages.";
                        return -EINVAL;
                }
                b->is_batch = true;
                b->messages = calloc(n, sizeof(McpMessage));
                if (!b->messages) {
                        mcp_batch_free(b);
                        return -ENOMEM;
                }
                b->n_messages = n;
                for (size_t i = 0; i < n; i++)
                        message_parse(json_object_array_get_idx(root, i), &b->messages[i]);
        } else if (json_object_is_type(root, json_type_object)) {
                b->messages = calloc(1, sizeof(McpMessage));
                if (!b->messages) {
                        mcp_batch_free(b);
                        return -ENOMEM;
                }
                b->n_messages = 1;
                message_parse(root, &b->messages[0]);
        } else {
                mcp_batch_free(b);
                *ret_error = "The body must be a JSON-RPC message (an object) or a batch of them.";
                return -EINVAL;
        }
        *ret = b;
        return 0;
}

static json_object *jsonrpc_new(json_object *id) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
        json_object_object_add(o, "id", id ? json_object_get(id) : NULL);
        return o;
}

json_object *jsonrpc_result(json_object *id, json_object *result) {
        json_object *o;

        if (!result)
                return NULL;
        o = jsonrpc_new(id);
        if (!o) {
                json_object_put(result);
                return NULL;
        }
        json_object_object_add(o, "result", result);
        return o;
}

json_object *jsonrpc_error(json_object *id, int code, const char *message) {
        json_object *o = jsonrpc_new(id), *e = json_object_new_object();

        if (!o || !e) {
                json_object_put(o);
                json_object_put(e);
                return NULL;
        }
        json_object_object_add(e, "code", json_object_new_int(code));
        json_object_object_add(e, "message", json_object_new_string(message ?: "Error."));
        json_object_object_add(o, "error", e);
        return o;
}

json_object *jsonrpc_notification(const char *method, json_object *params) {
        json_object *o = json_object_new_object();

        if (!o) {
                json_object_put(params);
                return NULL;
        }
        json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
        json_object_object_add(o, "method", json_object_new_string(method));
        if (params)
                json_object_object_add(o, "params", params);
        return o;
}

McpVersion mcp_negotiate(const char *client_version) {
        McpVersion v = mcp_version_from_string(client_version);
        return v >= 0 ? v : MCP_VERSION_LATEST;
}

static json_object *initialize_result(McpServer *s, McpVersion v) {
        json_object *o = json_object_new_object(), *caps = json_object_new_object(),
                    *tools = json_object_new_object(), *info = json_object_new_object();

        if (!o || !caps || !tools || !info) {
                json_object_put(o);
                json_object_put(caps);
                json_object_put(tools);
                json_object_put(info);
                return NULL;
        }
        json_object_object_add(o, "protocolVersion", json_object_new_string(mcp_version_to_string(v)));
        json_object_object_add(tools, "listChanged", json_object_new_boolean(false));
        json_object_object_add(caps, "tools", tools);
        json_object_object_add(o, "capabilities", caps);
        json_object_object_add(info, "name", json_object_new_string("sandboxd"));
        json_object_object_add(info, "title", json_object_new_string("sandboxd sandboxes"));
        json_object_object_add(info, "version", json_object_new_string(PACKAGE_VERSION));
        json_object_object_add(o, "serverInfo", info);
        if (s->instructions)
                json_object_object_add(o, "instructions", json_object_new_string(s->instructions));
        return o;
}

static json_object *tools_list(McpServer *s) {
        json_object *o = json_object_new_object(), *a = json_object_new_array();

        if (!o || !a) {
                json_object_put(o);
                json_object_put(a);
                return NULL;
        }
        for (size_t i = 0; i < mcp_tools_count; i++) {
                json_object *t = mcp_tool_describe(&mcp_tools[i], s->transport, s->version);
                if (!t || json_object_array_add(a, t) < 0) {
                        json_object_put(t);
                        json_object_put(a);
                        json_object_put(o);
                        return NULL;
                }
        }
        json_object_object_add(o, "tools", a);
        return o;
}

int mcp_dispatch(McpServer *s, const McpMessage *m, json_object **ret_answer, McpToolCall *ret_call) {
        json_object *answer = NULL, *v;

        *ret_answer = NULL;
        if (m->error) {
                answer = jsonrpc_error(m->id, m->error, m->error_message);
                goto done;
        }
        if (!m->method)
                return 0; /* a response of the client's */
        if (!m->id)
                /* notifications: initialized, cancelled (a call over HTTP is cancelled by closing its
                 * request), roots changed, …: none needs an answer, none changes what we do */
                return 0;

        if (streq(m->method, "initialize")) {
                const char *want = NULL;
                if (m->params && json_object_object_get_ex(m->params, "protocolVersion", &v) &&
                    json_object_is_type(v, json_type_string))
                        want = json_object_get_string(v);
                if (!want) {
                        answer = jsonrpc_error(m->id, JSONRPC_INVALID_PARAMS,
                                               "initialize needs params.protocolVersion, a string.");
                        goto done;
                }
                s->version = mcp_negotiate(want);
                s->initialized = true;
                answer = jsonrpc_result(m->id, initialize_result(s, s->version));
        } else if (streq(m->method, "ping"))
                answer = jsonrpc_result(m->id, json_object_new_object());
        else if (streq(m->method, "tools/list"))
                /* one page: the list is short */
                answer = jsonrpc_result(m->id, tools_list(s));
        else if (streq(m->method, "tools/call")) {
                json_object *args = NULL, *meta, *token = NULL;
                const McpTool *t = NULL;

                if (m->params && json_object_object_get_ex(m->params, "name", &v) &&
                    json_object_is_type(v, json_type_string))
                        t = mcp_tool_find(json_object_get_string(v));
                if (!t) {
                        answer =
                                jsonrpc_error(m->id, JSONRPC_INVALID_PARAMS,
                                              m->params && json_object_object_get_ex(m->params, "name", NULL)
                                                      ? "Unknown tool: tools/list names the tools."
                                                      : "tools/call needs params.name, a tool's name.");
                        goto done;
                }
                if (json_object_object_get_ex(m->params, "arguments", &args) && args &&
                    !json_object_is_type(args, json_type_object)) {
                        answer = jsonrpc_error(m->id, JSONRPC_INVALID_PARAMS,
                                               "tools/call's params.arguments must be an object.");
                        goto done;
                }
                if (json_object_object_get_ex(m->params, "_meta", &meta) &&
                    json_object_is_type(meta, json_type_object) &&
                    json_object_object_get_ex(meta, "progressToken", &token) &&
                    !json_object_is_type(token, json_type_string) &&
                    !json_object_is_type(token, json_type_int))
                        token = NULL;
                *ret_call = (McpToolCall){.tool = t, .arguments = args, .progress_token = token};
                return 1;
        } else
                answer = jsonrpc_error(m->id, JSONRPC_METHOD_NOT_FOUND, "Method not found.");
done:
        if (!answer)
                return -ENOMEM;
        *ret_answer = answer;
        return 0;
}
