/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one table of MCP tools, shared by the gateway's /mcp and sandboxctl mcp: names, descriptions,
 * input schemas (made from the argument table), output schemas, argument checks and tool results. */
#include "mcp-tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

static const char *const version_table[_MCP_VERSION_MAX] = {
        [MCP_VERSION_2025_03_26] = "2025-03-26",
        [MCP_VERSION_2025_06_18] = "2025-06-18",
        [MCP_VERSION_2025_11_25] = "2025-11-25",
};

const char *mcp_version_to_string(McpVersion v) {
        return v >= 0 && v < _MCP_VERSION_MAX ? version_table[v] : NULL;
}

McpVersion mcp_version_from_string(const char *s) {
        if (!s)
                return _MCP_VERSION_INVALID;
        for (McpVersion v = 0; v < _MCP_VERSION_MAX; v++)
                if (streq(version_table[v], s))
                        return v;
        return _MCP_VERSION_INVALID;
}

bool mcp_version_has_batches(McpVersion v) {
        return v == MCP_VERSION_2025_03_26;
}

bool mcp_version_has_structured_output(McpVersion v) {
        return v >= MCP_VERSION_2025_06_18;
}

#define SANDBOX_SCHEMA                                                                                      \
        "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},\"name\":{\"type\":[\"string\"," \
        "\"null\"]},\"type\":{\"type\":\"string\"},\"state\":{\"type\":\"string\"},\"network\":{\"type\":"  \
        "\"string\"},\"owner\":{\"type\":[\"string\",\"null\"]},\"created_at\":{\"type\":[\"string\","      \
        "\"null\"]},\"expires_at\":{\"type\":[\"string\",\"null\"]},\"limits\":{\"type\":\"object\"}},"     \
        "\"required\":[\"id\",\"state\"]"

#define PATH_ARG(req) \
        { "path", MCP_ARG_STRING, req, "A path as the sandbox sees it: absolute, or relative to its home." }

/* Every tool here is a thin mapping onto a REST route of the gateway (docs/API.md), with that route's
 * fields, checks, caps and audit row; sandboxctl mcp makes the same bus calls the route makes. */
const McpTool mcp_tools[] = {
        {
                .name = "sandbox_create",
                .title = "Create a sandbox",
                .description =
                        "Create a sandbox (a small isolated Linux machine) and return it; pass its id as "
                        "'sandbox' to the other tools.",
                .kind = MCP_TOOL_SANDBOX_CREATE,
                .args =
                        {
                                {"name", MCP_ARG_STRING, false, "A name, unique among running sandboxes."},
                                {"type", MCP_ARG_STRING, false,
                                 "small, medium or large (the host's presets)."},
                                {"ttl_seconds", MCP_ARG_UINT, false,
                                 "Seconds until it expires and is removed."},
                                {"network", MCP_ARG_STRING, false,
                                 "\"none\" or \"host\", as the host allows."},
                        },
                .output_schema = SANDBOX_SCHEMA "}",
        },
        {
                .name = "sandbox_list",
                .title = "List sandboxes",
                .description = "List the sandboxes this key may see.",
                .kind = MCP_TOOL_SANDBOX_LIST,
                .read_only = true,
                .output_schema = "{\"type\":\"object\",\"properties\":{\"sandboxes\":{\"type\":\"array\","
                                 "\"items\":" SANDBOX_SCHEMA "}}},\"required\":[\"sandboxes\"]}",
        },
        {
                .name = "sandbox_delete",
                .title = "Delete a sandbox",
                .description = "Delete a sandbox: its processes are stopped and its files removed.",
                .kind = MCP_TOOL_SANDBOX_DELETE,
                .sandbox = MCP_SANDBOX_REQUIRED,
                .destructive = true,
                .output_schema = "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},"
                                 "\"deleted\":{\"type\":\"boolean\"}},\"required\":[\"id\",\"deleted\"]}",
        },
        {
                .name = "exec",
                .title = "Run a command",
                .description =
                        "Run a command in the sandbox and return its exit code and output (each stream "
                        "capped; a note says when output was cut). Give 'command' (run by /bin/sh -c) "
                        "or 'argv'.",
                .kind = MCP_TOOL_EXEC,
                .sandbox = MCP_SANDBOX_REQUIRED,
                .destructive = true,
                .args =
                        {
                                {"command", MCP_ARG_STRING, false, "A shell command line."},
                                {"argv", MCP_ARG_STRV, false,
                                 "The program and its arguments, without a shell."},
                                {"cwd", MCP_ARG_STRING, false, "The working directory (default: the home)."},
                                {"env", MCP_ARG_STRMAP, false, "Environment variables to add."},
                                {"stdin", MCP_ARG_STRING, false, "Text fed to standard input."},
                                {"timeout_seconds", MCP_ARG_UINT, false,
                                 "Kill the command after this many seconds."},
                        },
                .output_schema =
                        "{\"type\":\"object\",\"properties\":{\"exit_code\":{\"type\":\"integer\"},"
                        "\"stdout\":{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"},"
                        "\"stdout_truncated\":{\"type\":\"boolean\"},\"stderr_truncated\":{\"type\":"
                        "\"boolean\"},\"duration_ms\":{\"type\":\"integer\"},\"timed_out\":{\"type\":"
                        "\"boolean\"},\"oom_killed\":{\"type\":\"boolean\"}},\"required\":[\"exit_code\","
                        "\"stdout\",\"stderr\"]}",
        },
        {
                .name = "read_file",
                .title = "Read a file",
                .description = "Read a file's bytes (as UTF-8 text; invalid bytes become U+FFFD).",
                .kind = MCP_TOOL_READ_FILE,
                .sandbox = MCP_SANDBOX_REQUIRED,
                .read_only = true,
                .args =
                        {
                                PATH_ARG(true),
                                {"offset", MCP_ARG_UINT, false, "The first byte to read."},
                                {"length", MCP_ARG_UINT, false, "How many bytes at most."},
                        },
                .output_schema = "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
                                 "\"content\":{\"type\":\"string\"},\"size\":{\"type\":\"integer\"}},"
                                 "\"required\":[\"path\",\"content\",\"size\"]}",
        },
        {
                .name = "write_file",
                .title = "Write a file",
                .description = "Write text to a file, replacing it (or appending).",
                .kind = MCP_TOOL_WRITE_FILE,
                .sandbox = MCP_SANDBOX_REQUIRED,
                .destructive = true,
                .args =
                        {
                                PATH_ARG(true),
                                {"content", MCP_ARG_STRING, true, "The file's new text."},
                                {"mode", MCP_ARG_STRING, false,
                                 "Octal permissions, e.g. \"0755\" (default 0644)."},
                                {"create_dirs", MCP_ARG_BOOL, false, "Create missing parent directories."},
                                {"append", MCP_ARG_BOOL, false, "Append instead of replacing."},
                        },
                .output_schema = "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
                                 "\"bytes\":{\"type\":\"integer\"}},\"required\":[\"path\",\"bytes\"]}",
        },
        {
                .name = "file_create",
                .title = "Create a file",
                .description = "Create a file with the given text; fails if it exists unless 'overwrite'.",
                .kind = MCP_TOOL_FILE,
                .operation = "file_create",
                .sandbox = MCP_SANDBOX_REQUIRED,
                .args =
                        {
                                PATH_ARG(true),
                                {"file_text", MCP_ARG_STRING, true, "The file's text."},
                                {"overwrite", MCP_ARG_BOOL, false, "Replace an existing file."},
                                {"create_dirs", MCP_ARG_BOOL, false, "Create missing parent directories."},
                        },
                .output_schema = "{\"type\":\"object\"}",
        },
        {
                .name = "view",
                .title = "View a file",
                .description =
                        "Show a file's lines, numbered, or a directory's entries (capped; a note says "
                        "when cut).",
                .kind = MCP_TOOL_FILE,
                .operation = "view",
                .sandbox = MCP_SANDBOX_REQUIRED,
                .read_only = true,
                .args =
                        {
                                PATH_ARG(true),
                                {"start_line", MCP_ARG_UINT, false, "The first line to show (from 1)."},
                                {"end_line", MCP_ARG_UINT, false, "The last line to show."},
                        },
                .output_schema = "{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}},"
                                 "\"required\":[\"text\"]}",
        },
        {
                .name = "str_replace",
                .title = "Replace text in a file",
                .description =
                        "Replace the one occurrence of 'old_str' in a file with 'new_str'; fails if it "
                        "occurs zero or several times.",
                .kind = MCP_TOOL_FILE,
                .operation = "str_replace",
                .sandbox = MCP_SANDBOX_REQUIRED,
                .args =
                        {
                                PATH_ARG(true),
                                {"old_str", MCP_ARG_STRING, true, "The text to replace, exactly."},
                                {"new_str", MCP_ARG_STRING, true, "Its replacement."},
                        },
                .output_schema = "{\"type\":\"object\"}",
        },
        {
                .name = "insert",
                .title = "Insert lines into a file",
                .description = "Insert text after line 'insert_line' (0: at the top).",
                .kind = MCP_TOOL_FILE,
                .operation = "insert",
                .sandbox = MCP_SANDBOX_REQUIRED,
                .args =
                        {
                                PATH_ARG(true),
                                {"insert_line", MCP_ARG_UINT, true, "The line after which to insert."},
                                {"new_str", MCP_ARG_STRING, true, "The text to insert."},
                        },
                .output_schema = "{\"type\":\"object\"}",
        },
        {
                .name = "ls",
                .title = "List a directory",
                .description = "List a directory's entries with type, mode, size and mtime.",
                .kind = MCP_TOOL_FILE,
                .operation = "ls",
                .sandbox = MCP_SANDBOX_REQUIRED,
                .read_only = true,
                .args =
                        {
                                PATH_ARG(true),
                                {"max_results", MCP_ARG_UINT, false, "At most this many entries."},
                        },
                .output_schema = "{\"type\":\"object\",\"properties\":{\"entries\":{\"type\":\"array\"}},"
                                 "\"required\":[\"entries\"]}",
        },
        {
                .name = "glob",
                .title = "Find files by pattern",
                .description = "Find paths matching a glob pattern (** for any depth).",
                .kind = MCP_TOOL_FILE,
                .operation = "glob",
                .sandbox = MCP_SANDBOX_REQUIRED,
                .read_only = true,
                .args =
                        {
                                {"pattern", MCP_ARG_STRING, true, "A glob pattern, e.g. \"**/*.py\"."},
                                PATH_ARG(false),
                                {"max_results", MCP_ARG_UINT, false, "At most this many paths."},
                        },
                .output_schema = "{\"type\":\"object\",\"properties\":{\"paths\":{\"type\":\"array\","
                                 "\"items\":{\"type\":\"string\"}}},\"required\":[\"paths\"]}",
        },
        {
                .name = "grep",
                .title = "Search file contents",
                .description = "Find lines matching a regular expression under a path.",
                .kind = MCP_TOOL_FILE,
                .operation = "grep",
                .sandbox = MCP_SANDBOX_REQUIRED,
                .read_only = true,
                .args =
                        {
                                {"pattern", MCP_ARG_STRING, true, "An extended regular expression."},
                                PATH_ARG(false),
                                {"glob", MCP_ARG_STRING, false,
                                 "Only files whose names match this pattern."},
                                {"ignore_case", MCP_ARG_BOOL, false, "Match case-insensitively."},
                                {"max_results", MCP_ARG_UINT, false, "At most this many matches."},
                        },
                .output_schema = "{\"type\":\"object\",\"properties\":{\"matches\":{\"type\":\"array\"}},"
                                 "\"required\":[\"matches\"]}",
        },
        {
                .name = "log_read",
                .title = "Read the audit log",
                .description =
                        "Read the audit log, newest first: a sandbox's rows, or all this key may read.",
                .kind = MCP_TOOL_LOG_READ,
                .sandbox = MCP_SANDBOX_OPTIONAL,
                .read_only = true,
                .args =
                        {
                                {"limit", MCP_ARG_UINT, false, "Rows per page (1-1000, default 100)."},
                                {"offset", MCP_ARG_UINT, false, "Rows to skip."},
                                {"operation", MCP_ARG_STRING, false,
                                 "Only rows of this operation (exec, write, …)."},
                                {"event", MCP_ARG_STRING, false,
                                 "Only rows of this event (finished, denied, …)."},
                        },
                .output_schema = "{\"type\":\"object\",\"properties\":{\"entries\":{\"type\":\"array\"},"
                                 "\"limit\":{\"type\":\"integer\"},\"offset\":{\"type\":\"integer\"}},"
                                 "\"required\":[\"entries\"]}",
        },
};

const size_t mcp_tools_count = ELEMENTSOF(mcp_tools);

const McpTool *mcp_tool_find(const char *name) {
        if (!name)
                return NULL;
        for (size_t i = 0; i < mcp_tools_count; i++)
                if (streq(mcp_tools[i].name, name))
                        return &mcp_tools[i];
        return NULL;
}

static size_t tool_n_args(const McpTool *t) {
        size_t n = 0;
        while (n < MCP_TOOL_ARGS_MAX && t->args[n].name)
                n++;
        return n;
}

static json_object *arg_schema(McpArgType type, const char *description) {
        json_object *o = json_object_new_object(), *items;

        if (!o)
                return NULL;
        switch (type) {
        case MCP_ARG_STRING:
                json_object_object_add(o, "type", json_object_new_string("string"));
                break;
        case MCP_ARG_UINT:
                json_object_object_add(o, "type", json_object_new_string("integer"));
                json_object_object_add(o, "minimum", json_object_new_int(0));
                break;
        case MCP_ARG_BOOL:
                json_object_object_add(o, "type", json_object_new_string("boolean"));
                break;
        case MCP_ARG_STRV:
                json_object_object_add(o, "type", json_object_new_string("array"));
                items = json_object_new_object();
                json_object_object_add(items, "type", json_object_new_string("string"));
                json_object_object_add(o, "items", items);
                break;
        case MCP_ARG_STRMAP:
                json_object_object_add(o, "type", json_object_new_string("object"));
                items = json_object_new_object();
                json_object_object_add(items, "type", json_object_new_string("string"));
                json_object_object_add(o, "additionalProperties", items);
                break;
        }
        if (description)
                json_object_object_add(o, "description", json_object_new_string(description));
        return o;
}

static bool sandbox_required(const McpTool *t, McpTransport transport) {
        return t->sandbox == MCP_SANDBOX_REQUIRED && transport == MCP_TRANSPORT_HTTP;
}

json_object *mcp_tool_describe(const McpTool *t, McpTransport transport, McpVersion v) {
        json_object *o, *schema, *props, *required, *ann;

        o = json_object_new_object();
        schema = json_object_new_object();
        props = json_object_new_object();
        required = json_object_new_array();
        ann = json_object_new_object();
        if (!o || !schema || !props || !required || !ann) {
                json_object_put(o);
                json_object_put(schema);
                json_object_put(props);
                json_object_put(required);
                json_object_put(ann);
                return NULL;
        }
        json_object_object_add(o, "name", json_object_new_string(t->name));
        json_object_object_add(o, "title", json_object_new_string(t->title));
        json_object_object_add(o, "description", json_object_new_string(t->description));

        if (t->sandbox != MCP_SANDBOX_NONE) {
                const char *what = transport == MCP_TRANSPORT_STDIO
                                           ? "The sandbox's id or name (default: this session's sandbox)."
                                   : t->sandbox == MCP_SANDBOX_OPTIONAL
                                           ? "The sandbox's id or name (default: every sandbox of this key)."
                                           : "The sandbox's id or name, as sandbox_create returned it.";
                json_object_object_add(props, "sandbox", arg_schema(MCP_ARG_STRING, what));
                if (sandbox_required(t, transport))
                        json_object_array_add(required, json_object_new_string("sandbox"));
        }
        for (size_t i = 0; i < tool_n_args(t); i++) {
                json_object_object_add(props, t->args[i].name,
                                       arg_schema(t->args[i].type, t->args[i].description));
                if (t->args[i].required)
                        json_object_array_add(required, json_object_new_string(t->args[i].name));
        }
        json_object_object_add(schema, "type", json_object_new_string("object"));
        json_object_object_add(schema, "properties", props);
        if (json_object_array_length(required) > 0)
                json_object_object_add(schema, "required", required);
        else
                json_object_put(required);
        json_object_object_add(schema, "additionalProperties", json_object_new_boolean(false));
        json_object_object_add(o, "inputSchema", schema);

        if (mcp_version_has_structured_output(v) && t->output_schema)
                json_object_object_add(o, "outputSchema", json_tokener_parse(t->output_schema));

        json_object_object_add(ann, "title", json_object_new_string(t->title));
        json_object_object_add(ann, "readOnlyHint", json_object_new_boolean(t->read_only));
        if (!t->read_only)
                json_object_object_add(ann, "destructiveHint", json_object_new_boolean(t->destructive));
        json_object_object_add(ann, "openWorldHint", json_object_new_boolean(false));
        json_object_object_add(o, "annotations", ann);
        return o;
}

static const char *arg_type_error(McpArgType type) {
        switch (type) {
        case MCP_ARG_STRING:
                return "a string";
        case MCP_ARG_UINT:
                return "a non-negative integer";
        case MCP_ARG_BOOL:
                return "true or false";
        case MCP_ARG_STRV:
                return "an array of strings";
        case MCP_ARG_STRMAP:
                return "an object whose values are strings";
        }
        return "valid";
}

/* A string our C readers take whole: no NUL inside. */
static bool string_ok(json_object *v) {
        return json_object_is_type(v, json_type_string) &&
               strlen(json_object_get_string(v)) == (size_t) json_object_get_string_len(v);
}

static bool arg_ok(McpArgType type, json_object *v) {
        switch (type) {
        case MCP_ARG_STRING:
                return string_ok(v);
        case MCP_ARG_UINT:
                return json_object_is_type(v, json_type_int) && json_object_get_int64(v) >= 0;
        case MCP_ARG_BOOL:
                return json_object_is_type(v, json_type_boolean);
        case MCP_ARG_STRV:
                if (!json_object_is_type(v, json_type_array))
                        return false;
                for (size_t i = 0; i < json_object_array_length(v); i++)
                        if (!string_ok(json_object_array_get_idx(v, i)))
                                return false;
                return true;
        case MCP_ARG_STRMAP:
                if (!json_object_is_type(v, json_type_object))
                        return false;
                json_object_object_foreach(v, key, val) {
                        if (!string_ok(val))
                                return false;
                        (void) key;
                }
                return true;
        }
        return false;
}

int mcp_tool_check_arguments(const McpTool *t, McpTransport transport, json_object *arguments,
                             char **ret_error) {
        size_t n = tool_n_args(t);
        int k = 0;

        if (arguments && !json_object_is_type(arguments, json_type_object))
                k = asprintf(ret_error, "The arguments must be an object.");
        else if (arguments) {
                json_object_object_foreach(arguments, key, val) {
                        const McpArg *a = NULL;
                        if (strlen(key) == 0 || streq(key, "sandbox")) {
                                if (t->sandbox == MCP_SANDBOX_NONE || !string_ok(val) ||
                                    json_object_get_string_len(val) == 0) {
                                        k = t->sandbox == MCP_SANDBOX_NONE
                                                    ? asprintf(ret_error,
                                                               "Tool %s takes no argument 'sandbox'.",
                                                               t->name)
                                                    : asprintf(ret_error, "Argument 'sandbox' must be a "
                                                                          "non-empty string.");
                                        goto fail;
                                }
                                continue;
                        }
                        for (size_t i = 0; i < n; i++)
                                if (streq(t->args[i].name, key))
                                        a = &t->args[i];
                        if (!a) {
                                k = asprintf(ret_error, "Unknown argument '%.64s' for tool %s.", key,
                                             t->name);
                                goto fail;
                        }
                        if (!arg_ok(a->type, val)) {
                                k = asprintf(ret_error, "Argument '%s' must be %s%s.", a->name,
                                             arg_type_error(a->type),
                                             a->type == MCP_ARG_STRING || a->type == MCP_ARG_STRV ||
                                                             a->type == MCP_ARG_STRMAP
                                                     ? " without NUL characters"
                                                     : "");
                                goto fail;
                        }
                }
        }
        if (k == 0) {
                if (sandbox_required(t, transport) &&
                    !json_object_object_get_ex(arguments, "sandbox", NULL)) {
                        k = asprintf(ret_error,
                                     "Argument 'sandbox' is required: the id sandbox_create returned.");
                        goto fail;
                }
                for (size_t i = 0; i < n; i++)
                        if (t->args[i].required &&
                            !json_object_object_get_ex(arguments, t->args[i].name, NULL)) {
                                k = asprintf(ret_error, "Argument '%s' is required.", t->args[i].name);
                                goto fail;
                        }
                return 0;
        }
fail:
        return k < 0 ? -ENOMEM : -EINVAL;
}

json_object *mcp_tool_body(json_object *arguments) {
        json_object *o = json_object_new_object();

        if (!o || !arguments)
                return o;
        json_object_object_foreach(arguments, key, val) {
                if (streq(key, "sandbox"))
                        continue;
                if (json_object_object_add(o, key, json_object_get(val)) < 0) {
                        json_object_put(o);
                        return NULL;
                }
        }
        return o;
}

char *mcp_truncation_note(json_object *result) {
        char buf[512] = "";
        size_t used = 0;
        char *s;

        if (!json_object_is_type(result, json_type_object))
                return NULL;
        json_object_object_foreach(result, key, val) {
                size_t len = strlen(key);
                if (len < 9 || !streq(key + len - 9, "truncated") ||
                    !json_object_is_type(val, json_type_boolean) || !json_object_get_boolean(val))
                        continue;
                int k = snprintf(buf + used, sizeof(buf) - used, "%s%.64s", used ? ", " : "", key);
                if (k < 0 || (size_t) k >= sizeof(buf) - used)
                        break;
                used += (size_t) k;
        }
        if (used == 0)
                return NULL;
        if (asprintf(&s,
                     "Note: the output was cut at the service's cap (%s): what is shown is its beginning. "
                     "Narrow the request (a line range, a smaller max_results, or output to a file read in "
                     "parts) "
                     "to see the rest.",
                     buf) < 0)
                return NULL;
        return s;
}

static json_object *text_content(const char *text) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "type", json_object_new_string("text"));
        json_object_object_add(o, "text", json_object_new_string(text));
        return o;
}

json_object *mcp_tool_result(McpVersion v, json_object *structured) {
        _cleanup_free_ char *note = NULL;
        json_object *o, *content;

        o = json_object_new_object();
        content = json_object_new_array();
        if (!o || !content || !structured) {
                json_object_put(o);
                json_object_put(content);
                json_object_put(structured);
                return NULL;
        }
        json_object_array_add(content,
                              text_content(json_object_to_json_string_ext(
                                      structured, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)));
        note = mcp_truncation_note(structured);
        if (note)
                json_object_array_add(content, text_content(note));
        json_object_object_add(o, "content", content);
        if (mcp_version_has_structured_output(v))
                json_object_object_add(o, "structuredContent", structured);
        else
                json_object_put(structured);
        json_object_object_add(o, "isError", json_object_new_boolean(false));
        return o;
}

json_object *mcp_tool_error(const char *message) {
        json_object *o = json_object_new_object(), *content = json_object_new_array();

        if (!o || !content) {
                json_object_put(o);
                json_object_put(content);
                return NULL;
        }
        json_object_array_add(content, text_content(message ?: "The tool failed."));
        json_object_object_add(o, "content", content);
        json_object_object_add(o, "isError", json_object_new_boolean(true));
        return o;
}
