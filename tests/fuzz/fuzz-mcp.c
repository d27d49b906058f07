/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes the MCP request parser (a body of one JSON-RPC message or a batch), its dispatch in every revision
 * and transport, and the argument checks of each tool a tools/call names. */
#include <json-c/json.h>

#include "fuzz.h"
#include "macro.h"
#include "mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *error = NULL;
        McpBatch *b = NULL;
        int r;

        r = mcp_batch_parse((const char *) data, size, 16, &b, &error);
        if (r < 0) {
                FUZZ_ASSERT(!b && (r == -ENOMEM || error));
                return 0;
        }
        FUZZ_ASSERT(b && b->n_messages > 0);
        for (size_t i = 0; i < b->n_messages; i++)
                for (McpVersion v = 0; v < _MCP_VERSION_MAX; v++)
                        for (McpTransport t = MCP_TRANSPORT_HTTP; t <= MCP_TRANSPORT_STDIO; t++) {
                                McpServer s = {.transport = t, .version = v};
                                json_object *answer = NULL;
                                McpToolCall call = {};
                                char *why = NULL;

                                r = mcp_dispatch(&s, &b->messages[i], &answer, &call);
                                FUZZ_ASSERT(r == 0 || r == 1 || r == -ENOMEM);
                                if (r == 1) {
                                        FUZZ_ASSERT(call.tool && !answer);
                                        int k = mcp_tool_check_arguments(call.tool, t, call.arguments, &why);
                                        FUZZ_ASSERT(k == 0 || k == -ENOMEM || (k == -EINVAL && why));
                                        if (k == 0) {
                                                json_object *body = mcp_tool_body(call.arguments);
                                                FUZZ_ASSERT(!body || !json_object_object_get_ex(
                                                                             body, "sandbox", NULL));
                                                json_object_put(body);
                                        }
                                        free(why);
                                }
                                /* an answer (if any) is a JSON-RPC 2.0 object that prints */
                                if (answer) {
                                        FUZZ_ASSERT(json_object_object_get_ex(answer, "jsonrpc", NULL));
                                        FUZZ_ASSERT(json_object_to_json_string(answer));
                                }
                                json_object_put(answer);
                        }
        mcp_batch_free(b);
        return 0;
}
