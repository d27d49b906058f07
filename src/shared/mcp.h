/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The Model Context Protocol's JSON-RPC 2.0 side, without a transport: parsing messages, revisions,
 * initialize, ping, tools/list and the answers; the gateway's /mcp and sandboxctl mcp run the tools. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "mcp-tools.h"

/* JSON-RPC 2.0's error codes. */
#define JSONRPC_PARSE_ERROR      (-32700)
#define JSONRPC_INVALID_REQUEST  (-32600)
#define JSONRPC_METHOD_NOT_FOUND (-32601)
#define JSONRPC_INVALID_PARAMS   (-32602)
#define JSONRPC_INTERNAL_ERROR   (-32603)

/* One message of a body (or of a line on stdio). Everything points into the batch's root. */
typedef struct McpMessage {
        json_object *id;           /* a request's id (a string or an integer); NULL for a notification */
        const char *method;        /* NULL for a response of the client's (nothing to do) */
        json_object *params;       /* an object, or NULL */
        int error;                 /* 0, or the JSON-RPC error this message is answered with */
        const char *error_message; /* static, with error */
} McpMessage;

typedef struct McpBatch {
        json_object *root;
        McpMessage *messages;
        size_t n_messages;
        bool is_batch; /* the body was a JSON array (only revision 2025-03-26 has batches) */
} McpBatch;

/* Parses a body: one JSON-RPC message or a non-empty array of them. Strict JSON (valid UTF-8, nothing
 * after the value, no NUL bytes, nesting ≤ max_depth). Returns 0; -EBADMSG when the body is not JSON
 * (answer JSONRPC_PARSE_ERROR), -EINVAL when it is JSON but neither (JSONRPC_INVALID_REQUEST); both
 * with *ret_error, a static message; -ENOMEM. Each message that is malformed on its own (no "jsonrpc":
 * "2.0", a method that is not a string, an id of another type, params not an object) carries its error. */
int mcp_batch_parse(const char *data, size_t size, unsigned max_depth, McpBatch **ret,
                    const char **ret_error);
McpBatch *mcp_batch_free(McpBatch *b);

/* Answers: {"jsonrpc":"2.0","id":id (NULL: null),"result":result} (takes result) and the error's. */
json_object *jsonrpc_result(json_object *id, json_object *result);
json_object *jsonrpc_error(json_object *id, int code, const char *message);
/* A notification from the server, e.g. notifications/progress (takes params). */
json_object *jsonrpc_notification(const char *method, json_object *params);

typedef struct McpServer {
        McpTransport transport;
        McpVersion version; /* negotiated by initialize (stdio), or the request's header (HTTP) */
        bool initialized;   /* initialize was answered */
        const char *instructions;
} McpServer;

/* A tools/call to run: the tool, its arguments (an object, NULL for none) and the progress token the
 * client asked for (NULL for none); all borrowed from the message. */
typedef struct McpToolCall {
        const McpTool *tool;
        json_object *arguments;
        json_object *progress_token;
} McpToolCall;

/* What to do with a message. Returns 0 with *ret_answer the answer (NULL when there is none to send: a
 * notification or a response), or 1 for a tools/call the caller runs (*ret_call filled; answer it with
 * jsonrpc_result(id, mcp_tool_result…)). An unknown tool or malformed params of a known method are
 * JSON-RPC errors; -ENOMEM. Answers initialize (negotiating s->version), ping, tools/list. */
int mcp_dispatch(McpServer *s, const McpMessage *m, json_object **ret_answer, McpToolCall *ret_call);

/* The revision to answer initialize with, for the client's: its own if we speak it, else our newest. */
McpVersion mcp_negotiate(const char *client_version);
