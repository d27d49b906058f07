/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests the MCP JSON-RPC side without a transport: parsing, batches, revisions, initialize, tools/list. */
#include <json-c/json.h>

#include "macro.h"
#include "mcp.h"
#include "test-util.h"

static McpBatch *parse_ok(const char *s) {
        McpBatch *b = NULL;
        const char *error = NULL;

        CHECK_INT(mcp_batch_parse(s, strlen(s), 16, &b, &error), 0);
        CHECK(b && !error);
        return b;
}

static void parse_fails(const char *s, size_t size, int expected) {
        McpBatch *b = NULL;
        const char *error = NULL;

        CHECK_INT(mcp_batch_parse(s, size, 16, &b, &error), expected);
        CHECK(!b && error);
}

static void test_parse(void) {
        McpBatch *b;

        b = parse_ok("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"} \n");
        CHECK_INT(b->n_messages, 1);
        CHECK(!b->is_batch);
        CHECK_STR(b->messages[0].method, "ping");
        CHECK_INT(json_object_get_int(b->messages[0].id), 7);
        CHECK_INT(b->messages[0].error, 0);
        mcp_batch_free(b);

        /* a notification, a response of the client's, and broken messages, each with its error */
        b = parse_ok("[{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"},"
                     "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{}},"
                     "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"},"
                     "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"},"
                     "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":3},"
                     "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\"params\":[]},"
                     "{\"jsonrpc\":\"2.0\",\"id\":4},"
                     "5]");
        CHECK(b->is_batch);
        CHECK_INT(b->n_messages, 8);
        CHECK(b->messages[0].method && !b->messages[0].id && b->messages[0].error == 0);
        CHECK(!b->messages[1].method && b->messages[1].error == 0);
        CHECK_INT(b->messages[2].error, JSONRPC_INVALID_REQUEST);
        CHECK_INT(json_object_get_int(b->messages[2].id), 1);
        CHECK_INT(b->messages[3].error, JSONRPC_INVALID_REQUEST);
        CHECK_INT(b->messages[4].error, JSONRPC_INVALID_REQUEST);
        CHECK_INT(b->messages[5].error, JSONRPC_INVALID_REQUEST);
        CHECK_INT(b->messages[6].error, JSONRPC_INVALID_REQUEST);
        CHECK_INT(b->messages[7].error, JSONRPC_INVALID_REQUEST);
        mcp_batch_free(b);

        parse_fails("", 0, -EBADMSG);
        parse_fails("{", 1, -EBADMSG);
        parse_fails("{} {}", 5, -EBADMSG);
        parse_fails("{\"a\":1}\0", 8, -EBADMSG);
        parse_fails("{\"a\":\"\xff\"}", 9, -EBADMSG);
        parse_fails("[]", 2, -EINVAL);
        parse_fails("\"ping\"", 6, -EINVAL);

        /* nesting past the limit is not JSON we read */
        McpBatch *deep = NULL;
        const char *error = NULL;
        CHECK_INT(mcp_batch_parse("[[[[1]]]]", 9, 3, &deep, &error), -EBADMSG);
        CHECK(!deep);
}

static void test_versions(void) {
        for (McpVersion v = 0; v < _MCP_VERSION_MAX; v++)
                CHECK_INT(mcp_version_from_string(mcp_version_to_string(v)), v);
        CHECK_INT(mcp_version_from_string("2024-11-05"), _MCP_VERSION_INVALID);
        CHECK_INT(mcp_version_from_string(NULL), _MCP_VERSION_INVALID);
        CHECK(!mcp_version_to_string(_MCP_VERSION_MAX));
        CHECK_INT(mcp_negotiate("2025-06-18"), MCP_VERSION_2025_06_18);
        CHECK_INT(mcp_negotiate("2099-01-01"), MCP_VERSION_LATEST);
        CHECK(mcp_version_has_batches(MCP_VERSION_2025_03_26));
        CHECK(!mcp_version_has_batches(MCP_VERSION_2025_06_18));
        CHECK(!mcp_version_has_structured_output(MCP_VERSION_2025_03_26));
        CHECK(mcp_version_has_structured_output(MCP_VERSION_2025_11_25));
}

/* Dispatches the one message s holds: the answer, or NULL with *ret_call filled for a tools/call. */
static json_object *dispatch(McpServer *srv, const char *s, int expected, McpToolCall *ret_call,
                             McpBatch **keep) {
        McpBatch *b = parse_ok(s);
        json_object *answer = NULL;
        McpToolCall call = {};

        CHECK_INT(mcp_dispatch(srv, &b->messages[0], &answer, &call), expected);
        if (ret_call)
                *ret_call = call;
        if (keep)
                *keep = b;
        else
                mcp_batch_free(b);
        return answer;
}

static int error_code(json_object *answer) {
        json_object *e, *c;
        if (!json_object_object_get_ex(answer, "error", &e) || !json_object_object_get_ex(e, "code", &c))
                return 0;
        return json_object_get_int(c);
}

static void test_dispatch(void) {
        McpServer srv = {.transport = MCP_TRANSPORT_HTTP, .version = MCP_VERSION_2025_03_26};
        json_object *a, *r, *v;
        McpToolCall call;
        McpBatch *b;

        a = dispatch(&srv,
                     "{\"jsonrpc\":\"2.0\",\"id\":\"i\",\"method\":\"initialize\",\"params\":{"
                     "\"protocolVersion\":"
                     "\"2025-06-18\",\"capabilities\":{}}}",
                     0, NULL, NULL);
        CHECK(srv.initialized && srv.version == MCP_VERSION_2025_06_18);
        CHECK(json_object_object_get_ex(a, "result", &r));
        CHECK_STR(json_object_get_string(json_object_object_get(r, "protocolVersion")), "2025-06-18");
        CHECK_STR(json_object_get_string(json_object_object_get(a, "id")), "i");
        CHECK(json_object_object_get_ex(json_object_object_get(r, "capabilities"), "tools", NULL));
        json_object_put(a);

        a = dispatch(&srv, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}", 0, NULL,
                     NULL);
        CHECK_INT(error_code(a), JSONRPC_INVALID_PARAMS);
        json_object_put(a);

        a = dispatch(&srv, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", 0, NULL, NULL);
        CHECK(!a);
        a = dispatch(&srv, "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}", 0, NULL, NULL);
        CHECK(!a);
        a = dispatch(&srv, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"resources/list\"}", 0, NULL, NULL);
        CHECK_INT(error_code(a), JSONRPC_METHOD_NOT_FOUND);
        json_object_put(a);
        a = dispatch(&srv, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}", 0, NULL, NULL);
        CHECK(json_object_object_get_ex(a, "result", &r) && json_object_object_length(r) == 0);
        json_object_put(a);

        /* tools/list: every tool, with output schemas in 2025-06-18 */
        a = dispatch(&srv, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/list\"}", 0, NULL, NULL);
        CHECK(json_object_object_get_ex(json_object_object_get(a, "result"), "tools", &v));
        CHECK_INT(json_object_array_length(v), mcp_tools_count);
        CHECK(json_object_object_get_ex(json_object_array_get_idx(v, 0), "outputSchema", NULL));
        json_object_put(a);

        a = dispatch(&srv,
                     "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"exec\","
                     "\"arguments\":{\"sandbox\":\"sb_x\"},\"_meta\":{\"progressToken\":\"p\"}}}",
                     1, &call, &b);
        CHECK(!a);
        CHECK(call.tool == mcp_tool_find("exec"));
        CHECK_STR(json_object_get_string(call.progress_token), "p");
        CHECK_STR(json_object_get_string(json_object_object_get(call.arguments, "sandbox")), "sb_x");
        mcp_batch_free(b);

        a = dispatch(&srv,
                     "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}",
                     0, NULL, NULL);
        CHECK_INT(error_code(a), JSONRPC_INVALID_PARAMS);
        json_object_put(a);
        a = dispatch(&srv,
                     "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"ls\","
                     "\"arguments\":[]}}",
                     0, NULL, NULL);
        CHECK_INT(error_code(a), JSONRPC_INVALID_PARAMS);
        json_object_put(a);

        /* answers to broken messages name their id, or null */
        b = parse_ok("{\"jsonrpc\":\"2.0\",\"method\":5}");
        CHECK_INT(mcp_dispatch(&srv, &b->messages[0], &a, &call), 0);
        CHECK_INT(error_code(a), JSONRPC_INVALID_REQUEST);
        CHECK(json_object_object_get_ex(a, "id", &v) && !v);
        json_object_put(a);
        mcp_batch_free(b);
}

int main(void) {
        test_parse();
        test_versions();
        test_dispatch();
        return test_finish("test-mcp");
}
