/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests the one table of MCP tools: the schemas it makes, argument checks, and results from REST answers. */
#include <json-c/json.h>

#include "macro.h"
#include "mcp-tools.h"
#include "test-util.h"

static void test_table(void) {
        for (size_t i = 0; i < mcp_tools_count; i++) {
                const McpTool *t = &mcp_tools[i];
                json_object *d, *schema, *o;

                CHECK(mcp_tool_find(t->name) == t);
                CHECK(t->title && t->description && t->kind < _MCP_TOOL_KIND_MAX);
                CHECK((t->kind == MCP_TOOL_FILE) == !!t->operation);
                /* names as MCP allows them */
                CHECK(strspn(t->name, "abcdefghijklmnopqrstuvwxyz_") == strlen(t->name));
                /* the output schema is JSON of an object */
                o = json_tokener_parse(t->output_schema);
                CHECK(o && streq(json_object_get_string(json_object_object_get(o, "type")), "object"));
                json_object_put(o);

                for (McpVersion v = 0; v < _MCP_VERSION_MAX; v++) {
                        d = mcp_tool_describe(t, MCP_TRANSPORT_HTTP, v);
                        CHECK(d && json_object_object_get_ex(d, "inputSchema", &schema));
                        CHECK(json_object_object_get_ex(d, "outputSchema", NULL) ==
                              mcp_version_has_structured_output(v));
                        json_object *props = json_object_object_get(schema, "properties");
                        CHECK(json_object_object_get_ex(props, "sandbox", NULL) ==
                              (t->sandbox != MCP_SANDBOX_NONE));
                        json_object_put(d);
                }
                /* over stdio, the sandbox is never required */
                d = mcp_tool_describe(t, MCP_TRANSPORT_STDIO, MCP_VERSION_LATEST);
                json_object *req =
                        json_object_object_get(json_object_object_get(d, "inputSchema"), "required");
                for (size_t j = 0; req && j < json_object_array_length(req); j++)
                        CHECK(!streq(json_object_get_string(json_object_array_get_idx(req, j)), "sandbox"));
                json_object_put(d);
        }
        CHECK(!mcp_tool_find("nope"));
        CHECK(!mcp_tool_find(NULL));
}

static void check_args(const char *tool, McpTransport tr, const char *json, const char *expected_error) {
        json_object *o = json ? json_tokener_parse(json) : NULL;
        char *error = NULL;
        int k = mcp_tool_check_arguments(mcp_tool_find(tool), tr, o, &error);

        if (expected_error) {
                CHECK_INT(k, -EINVAL);
                CHECK_STR(error, expected_error);
        } else {
                CHECK_INT(k, 0);
                CHECK(!error);
        }
        free(error);
        json_object_put(o);
}

static void test_arguments(void) {
        check_args("exec", MCP_TRANSPORT_HTTP,
                   "{\"sandbox\":\"sb_a\",\"command\":\"true\",\"env\":{\"A\":\"1\"}}", NULL);
        check_args("exec", MCP_TRANSPORT_STDIO, "{\"command\":\"true\"}", NULL);
        check_args("exec", MCP_TRANSPORT_HTTP, "{\"command\":\"true\"}",
                   "Argument 'sandbox' is required: the id sandbox_create returned.");
        check_args("exec", MCP_TRANSPORT_HTTP, "{\"sandbox\":\"\"}",
                   "Argument 'sandbox' must be a non-empty string.");
        check_args("exec", MCP_TRANSPORT_HTTP, "{\"sandbox\":\"a\",\"timeout_seconds\":-1}",
                   "Argument 'timeout_seconds' must be a non-negative integer.");
        check_args("exec", MCP_TRANSPORT_HTTP, "{\"sandbox\":\"a\",\"timeout_seconds\":1.5}",
                   "Argument 'timeout_seconds' must be a non-negative integer.");
        check_args("exec", MCP_TRANSPORT_HTTP, "{\"sandbox\":\"a\",\"argv\":[\"a\",1]}",
                   "Argument 'argv' must be an array of strings without NUL characters.");
        check_args("exec", MCP_TRANSPORT_HTTP, "{\"sandbox\":\"a\",\"env\":{\"A\":2}}",
                   "Argument 'env' must be an object whose values are strings without NUL characters.");
        check_args("exec", MCP_TRANSPORT_HTTP, "{\"sandbox\":\"a\",\"command\":\"a\\u0000b\"}",
                   "Argument 'command' must be a string without NUL characters.");
        check_args("view", MCP_TRANSPORT_HTTP, "{\"sandbox\":\"a\"}", "Argument 'path' is required.");
        check_args("view", MCP_TRANSPORT_HTTP, "{\"sandbox\":\"a\",\"path\":\"p\",\"x\":1}",
                   "Unknown argument 'x' for tool view.");
        check_args("sandbox_list", MCP_TRANSPORT_HTTP, "{\"sandbox\":\"a\"}",
                   "Tool sandbox_list takes no argument 'sandbox'.");
        check_args("sandbox_list", MCP_TRANSPORT_HTTP, NULL, NULL);
        check_args("log_read", MCP_TRANSPORT_HTTP, "{}", NULL);
        check_args("grep", MCP_TRANSPORT_HTTP,
                   "{\"sandbox\":\"a\",\"pattern\":\"x\",\"ignore_case\":\"yes\"}",
                   "Argument 'ignore_case' must be true or false.");
        check_args("ls", MCP_TRANSPORT_HTTP, "[]", "The arguments must be an object.");
}

static void test_results(void) {
        json_object *args = json_tokener_parse("{\"sandbox\":\"sb_a\",\"path\":\"p\"}"), *body, *r, *c;
        char *note;

        body = mcp_tool_body(args);
        CHECK(!json_object_object_get_ex(body, "sandbox", NULL));
        CHECK_STR(json_object_get_string(json_object_object_get(body, "path")), "p");
        json_object_put(body);
        json_object_put(args);

        c = json_tokener_parse("{\"stdout_truncated\":false}");
        CHECK(!mcp_truncation_note(c));
        json_object_put(c);
        c = json_tokener_parse("{\"stdout_truncated\":true,\"truncated\":true,\"x\":1}");
        note = mcp_truncation_note(c);
        CHECK(note && strstr(note, "stdout_truncated, truncated"));
        free(note);
        json_object_put(c);

        r = mcp_tool_result(MCP_VERSION_2025_06_18,
                            json_tokener_parse("{\"exit_code\":0,\"stdout_truncated\":true}"));
        c = json_object_object_get(r, "content");
        CHECK_INT(json_object_array_length(c), 2);
        CHECK_STR(json_object_get_string(json_object_object_get(json_object_array_get_idx(c, 0), "text")),
                  "{\"exit_code\":0,\"stdout_truncated\":true}");
        CHECK(json_object_object_get_ex(r, "structuredContent", NULL));
        CHECK(!json_object_get_boolean(json_object_object_get(r, "isError")));
        json_object_put(r);

        r = mcp_tool_result(MCP_VERSION_2025_03_26, json_tokener_parse("{\"a\":\"/\"}"));
        CHECK(!json_object_object_get_ex(r, "structuredContent", NULL));
        CHECK_STR(json_object_get_string(json_object_object_get(
                          json_object_array_get_idx(json_object_object_get(r, "content"), 0), "text")),
                  "{\"a\":\"/\"}");
        json_object_put(r);

        r = mcp_tool_error("Sandbox x does not exist.");
        CHECK(json_object_get_boolean(json_object_object_get(r, "isError")));
        CHECK_STR(json_object_get_string(json_object_object_get(
                          json_object_array_get_idx(json_object_object_get(r, "content"), 0), "text")),
                  "Sandbox x does not exist.");
        json_object_put(r);
}

int main(void) {
        test_table();
        test_arguments();
        test_results();
        return test_finish("test-mcp-tools");
}
