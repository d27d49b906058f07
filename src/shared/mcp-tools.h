/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one table of MCP tools, shared by the gateway's /mcp and sandboxctl mcp: names, descriptions,
 * input schemas (made from the argument table), output schemas, argument checks and tool results. */
#pragma once

#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

/* The MCP revisions spoken, oldest first. */
typedef enum McpVersion {
        MCP_VERSION_2025_03_26,
        MCP_VERSION_2025_06_18,
        MCP_VERSION_2025_11_25,
        _MCP_VERSION_MAX,
        _MCP_VERSION_INVALID = -EINVAL,
} McpVersion;

#define MCP_VERSION_LATEST MCP_VERSION_2025_11_25
/* Streamable HTTP: the revision assumed for a request without an MCP-Protocol-Version header. */
#define MCP_VERSION_HTTP_DEFAULT MCP_VERSION_2025_03_26

const char *mcp_version_to_string(McpVersion v);
McpVersion mcp_version_from_string(const char *s);
/* JSON-RPC batches: only 2025-03-26. Output schemas and structured results: from 2025-06-18. */
bool mcp_version_has_batches(McpVersion v);
bool mcp_version_has_structured_output(McpVersion v);

typedef enum McpTransport {
        MCP_TRANSPORT_HTTP,  /* the gateway: every tool on a sandbox names it */
        MCP_TRANSPORT_STDIO, /* sandboxctl mcp: "sandbox" defaults to the session's */
} McpTransport;

typedef enum McpArgType {
        MCP_ARG_STRING,
        MCP_ARG_UINT, /* a non-negative integer */
        MCP_ARG_BOOL,
        MCP_ARG_STRV,   /* an array of strings */
        MCP_ARG_STRMAP, /* an object of strings */
} McpArgType;

typedef struct McpArg {
        const char *name;
        McpArgType type;
        bool required;
        const char *description;
} McpArg;

/* What a tool maps onto: its REST twin (and sandboxd's method behind it). */
typedef enum McpToolKind {
        MCP_TOOL_SANDBOX_CREATE, /* POST /v1/sandboxes */
        MCP_TOOL_SANDBOX_LIST,   /* GET /v1/sandboxes */
        MCP_TOOL_SANDBOX_DELETE, /* DELETE /v1/sandboxes/{id} */
        MCP_TOOL_EXEC,           /* POST …/exec */
        MCP_TOOL_READ_FILE,      /* GET …/files?path= */
        MCP_TOOL_WRITE_FILE,     /* PUT …/files?path= */
        MCP_TOOL_FILE,           /* POST …/tools/<operation> */
        MCP_TOOL_LOG_READ,       /* GET …/log, or GET /v1/log without a sandbox */
        _MCP_TOOL_KIND_MAX,
} McpToolKind;

typedef enum McpSandboxArg {
        MCP_SANDBOX_NONE,     /* the tool takes no sandbox */
        MCP_SANDBOX_REQUIRED, /* over HTTP; over stdio it defaults to the session's */
        MCP_SANDBOX_OPTIONAL, /* log_read: without it, the whole log (HTTP); the session's (stdio) */
} McpSandboxArg;

#define MCP_TOOL_ARGS_MAX 10

typedef struct McpTool {
        const char *name;
        const char *title;
        const char *description;
        McpToolKind kind;
        const char *operation; /* MCP_TOOL_FILE: the REST tool (view, str_replace, …) */
        McpSandboxArg sandbox;
        bool read_only, destructive;
        McpArg args[MCP_TOOL_ARGS_MAX];
        const char *output_schema; /* JSON Schema text of structuredContent */
} McpTool;

extern const McpTool mcp_tools[];
extern const size_t mcp_tools_count;

const McpTool *mcp_tool_find(const char *name);

/* The tool as tools/list lists it for the transport and revision: name, title, description,
 * inputSchema, annotations, and outputSchema where the revision has it. NULL on ENOMEM. */
json_object *mcp_tool_describe(const McpTool *t, McpTransport transport, McpVersion v);

/* Checks arguments (an object or NULL) against the tool's table: known names only, each of its type,
 * the required ones present, strings without NUL. Returns 0 or -EINVAL with *ret_error saying what,
 * e.g. "Argument 'path' must be a string." (-ENOMEM). */
int mcp_tool_check_arguments(const McpTool *t, McpTransport transport, json_object *arguments,
                             char **ret_error);

/* The arguments but "sandbox", as a new object: the REST twin's JSON body. NULL on ENOMEM. */
json_object *mcp_tool_body(json_object *arguments);

/* A note for the model when the REST result says output was cut at a cap (a true "…truncated" field,
 * as exec's stdout_truncated or a file tool's truncated), or NULL. */
char *mcp_truncation_note(json_object *result);

/* A tool's result from its REST answer (takes structured): its JSON as text, the truncation note as a
 * second text, and structuredContent where the revision has it. NULL on ENOMEM. */
json_object *mcp_tool_result(McpVersion v, json_object *structured);
/* A failed call: isError with the REST error's message as the text. */
json_object *mcp_tool_error(const char *message);
