/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "sandboxctl mcp": the MCP tools of the gateway's /mcp over stdio, against the local bus, with one sandbox
 * per session. The protocol and the tool table are src/shared's mcp.c and mcp-tools.c. */
#include "sandboxctl-mcp.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "macro.h"
#include "mcp.h"
#include "sandboxctl-util.h"
#include "sandboxd-bus.h"
#include "utf8-util.h"

#define CALL_TIMEOUT_USEC (150 * USEC_PER_SEC)
/* An Exec without a timeout of its own runs as long as sandboxd lets it. */
#define EXEC_NO_TIMEOUT_USEC (24 * 3600 * USEC_PER_SEC)
/* A line on stdin is one JSON-RPC message or batch. */
#define LINE_MAX_BYTES (64u << 20)
#define JSON_DEPTH_MAX 32u

static const char *arg_sandbox = NULL;
static const char *arg_type = "small";
static bool arg_keep = false;

/* The session's sandbox: the one given, or one created at the first tool that needs it. */
static char *session_sandbox = NULL;
static bool session_created = false;

static void usage(FILE *f) {
        fputs("sandboxctl mcp [--sandbox=ID | --type=TYPE] [--keep]\n\n"
              "Speak the Model Context Protocol on stdin and stdout (one JSON-RPC message per line), for "
              "an\n"
              "agent started on this host: the tools of the gateway's /mcp (exec, read_file, write_file,\n"
              "view, str_replace, insert, file_create, ls, glob, grep, log_read, sandbox_create,\n"
              "sandbox_list, sandbox_delete), against sandboxd on the local bus. Tools act on this\n"
              "session's sandbox unless their 'sandbox' argument names another: the one --sandbox names,\n"
              "or one of --type created at the first tool call and deleted when stdin ends (or on SIGTERM\n"
              "or SIGINT) unless --keep. Needs root or the sandbox-admin group; every call is audited\n"
              "as the caller's own (uid:N, source agent).\n\n"
              "Options:\n"
              "  -h --help          Show this help\n"
              "     --sandbox=ID    Use this existing sandbox (never deleted by the session)\n"
              "     --type=TYPE     The type of the session's sandbox (default small)\n"
              "     --keep          Leave the session's sandbox when the session ends\n\n"
              "Nothing but MCP messages is written to stdout; errors go to stderr. See docs/mcp.md.\n",
              f);
}

/* --- bus helpers ------------------------------------------------------------------------------------ */

static json_object *bytes_json(const void *p, size_t n) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0, used = 0;

        if (utf8_sanitize(p, n, 0, &text, &len, &used) < 0)
                return NULL;
        return json_object_new_string_len(text ?: "", (int) len);
}

static const char *arg_string(json_object *args, const char *name) {
        json_object *v;
        return json_object_object_get_ex(args, name, &v) ? json_object_get_string(v) : NULL;
}

static bool arg_has(json_object *args, const char *name) {
        return json_object_object_get_ex(args, name, NULL);
}

static uint64_t arg_uint(json_object *args, const char *name) {
        json_object *v;
        return json_object_object_get_ex(args, name, &v) ? (uint64_t) json_object_get_int64(v) : 0;
}

static int arg_bool(json_object *args, const char *name) {
        json_object *v;
        return json_object_object_get_ex(args, name, &v) && json_object_get_boolean(v);
}

static int new_call(sd_bus *bus, const char *member, sd_bus_message **ret) {
        return sd_bus_message_new_method_call(bus, ret, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                              SANDBOXD_MANAGER_INTERFACE, member);
}

/* The a{sv} context of a mutating call: sandboxd takes account and source from the bus for us. */
static int append_context(sd_bus_message *m) {
        return sd_bus_message_append(m, "a{sv}", 1, "source", "s", "agent");
}

/* --- the session's sandbox --------------------------------------------------------------------------- */

static json_object *sandbox_object(sd_bus *bus, const char *id, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL, *props = NULL;
        const char *path;
        json_object *o;
        int r;

        r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                               "GetSandbox", error, &reply, "s", id);
        if (r < 0)
                return NULL;
        r = sd_bus_message_read(reply, "o", &path);
        if (r >= 0)
                r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, path, "org.freedesktop.DBus.Properties",
                                       "GetAll", error, &props, "s", SANDBOXD_SANDBOX_INTERFACE);
        if (r < 0)
                return NULL;
        o = json_object_new_object();
        if (!o || bus_read_dict(props, o) < 0) {
                json_object_put(o);
                return NULL;
        }
        /* the REST object's names for what the tools' schema requires */
        json_object *v;
        if (json_object_object_get_ex(o, "Id", &v))
                json_object_object_add(o, "id", json_object_get(v));
        if (json_object_object_get_ex(o, "State", &v))
                json_object_object_add(o, "state", json_object_get(v));
        return o;
}

static int session_sandbox_get(sd_bus *bus, const char **ret, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        const char *id;
        int r;

        if (!session_sandbox) {
                r = new_call(bus, "CreateSandbox", &m);
                if (r >= 0)
                        r = sd_bus_message_append(m, "a{sv}", 2, "type", "s", arg_type, "source", "s",
                                                  "agent");
                if (r >= 0)
                        r = sd_bus_call(bus, m, CALL_TIMEOUT_USEC, error, &reply);
                if (r >= 0)
                        r = sd_bus_message_read(reply, "so", &id, NULL);
                if (r < 0)
                        return r;
                session_sandbox = strdup(id);
                if (!session_sandbox)
                        return -ENOMEM;
                session_created = true;
                fprintf(stderr, "sandboxctl mcp: created sandbox %s for this session%s\n", id,
                        arg_keep ? " (kept at the end)" : "");
        }
        *ret = session_sandbox;
        return 0;
}

static void session_end(sd_bus *bus) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        if (!session_created || arg_keep || !bus)
                return;
        r = new_call(bus, "DeleteSandbox", &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "s", session_sandbox);
        if (r >= 0)
                r = append_context(m);
        if (r >= 0)
                r = sd_bus_call(bus, m, CALL_TIMEOUT_USEC, &error, NULL);
        if (r < 0)
                fprintf(stderr, "sandboxctl mcp: cannot delete sandbox %s: %s\n", session_sandbox,
                        error.message ?: strerror(-r));
        else
                fprintf(stderr, "sandboxctl mcp: deleted sandbox %s\n", session_sandbox);
}

/* --- the tools ----------------------------------------------------------------------------------------- */

static int build_exec(sd_bus_message *m, const char *id, json_object *args) {
        _cleanup_strv_free_ char **argv = NULL;
        json_object *a, *env;
        const char *s;
        int r;

        if ((s = arg_string(args, "command"))) {
                if (arg_has(args, "argv"))
                        return -EDOM;
                argv = calloc(4, sizeof(char *));
                if (!argv || !(argv[0] = strdup("/bin/sh")) || !(argv[1] = strdup("-c")) ||
                    !(argv[2] = strdup(s)))
                        return -ENOMEM;
        } else if (json_object_object_get_ex(args, "argv", &a) && json_object_array_length(a) > 0) {
                size_t n = json_object_array_length(a);
                argv = calloc(n + 1, sizeof(char *));
                if (!argv)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++)
                        if (!(argv[i] = strdup(json_object_get_string(json_object_array_get_idx(a, i)))))
                                return -ENOMEM;
        } else
                return -ENOMSG;

        r = sd_bus_message_append(m, "s", id);
        if (r >= 0)
                r = sd_bus_message_append_strv(m, argv);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0 && (s = arg_string(args, "cwd")))
                r = sd_bus_message_append(m, "{sv}", "cwd", "s", s);
        if (r >= 0 && json_object_object_get_ex(args, "env", &env)) {
                /* the object's own strings, borrowed for the call */
                _cleanup_free_ EnvVar *vars = calloc(MAX(json_object_object_length(env), 1), sizeof(EnvVar));
                size_t n = 0;
                if (!vars)
                        return -ENOMEM;
                json_object_object_foreach(env, key, val) vars[n++] =
                        (EnvVar){.key = key, .value = (char *) json_object_get_string(val)};
                r = bus_append_env(m, vars, n);
        }
        if (r >= 0 && (s = arg_string(args, "stdin"))) {
                r = sd_bus_message_open_container(m, 'e', "sv");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", "stdin");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'v', "ay");
                if (r >= 0)
                        r = sd_bus_message_append_array(m, 'y', s, strlen(s));
                for (int i = 0; i < 2 && r >= 0; i++)
                        r = sd_bus_message_close_container(m);
        }
        if (r >= 0 && arg_has(args, "timeout_seconds"))
                r = sd_bus_message_append(m, "{sv}", "timeout_seconds", "t",
                                          arg_uint(args, "timeout_seconds"));
        if (r >= 0)
                r = sd_bus_message_append(m, "{sv}", "source", "s", "agent");
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

/* Exec's reply as the REST result: exit_code, stdout, stderr, the flags, duration_ms. */
static int exec_result(sd_bus_message *reply, json_object **ret) {
        const void *out, *err;
        size_t out_size, err_size;
        json_object *info, *o, *v;
        int32_t code;
        int r;

        r = sd_bus_message_read(reply, "i", &code);
        if (r >= 0)
                r = sd_bus_message_read_array(reply, 'y', &out, &out_size);
        if (r >= 0)
                r = sd_bus_message_read_array(reply, 'y', &err, &err_size);
        if (r < 0)
                return r;
        info = json_object_new_object();
        o = json_object_new_object();
        if (!info || !o || bus_read_dict(reply, info) < 0) {
                json_object_put(info);
                json_object_put(o);
                return -ENOMEM;
        }
        json_object_object_add(o, "exit_code", json_object_new_int(code));
        json_object_object_add(o, "stdout", bytes_json(out, out_size));
        json_object_object_add(o, "stderr", bytes_json(err, err_size));
        static const char *const flags[] = {"stdout_truncated", "stderr_truncated"};
        for (size_t i = 0; i < ELEMENTSOF(flags); i++)
                json_object_object_add(
                        o, flags[i],
                        json_object_new_boolean(json_object_object_get_ex(info, flags[i], &v) &&
                                                json_object_get_boolean(v)));
        json_object_object_add(o, "duration_ms",
                               json_object_new_uint64(json_object_object_get_ex(info, "duration_usec", &v)
                                                              ? (uint64_t) json_object_get_int64(v) / 1000
                                                              : 0));
        static const char *const more[] = {"timed_out", "oom_killed"};
        for (size_t i = 0; i < ELEMENTSOF(more); i++)
                json_object_object_add(
                        o, more[i],
                        json_object_new_boolean(json_object_object_get_ex(info, more[i], &v) &&
                                                json_object_get_boolean(v)));
        json_object_put(info);
        *ret = o;
        return 0;
}

/* The file tools: sandboxd's method and how its call and reply look. */
static int build_file_tool(sd_bus_message *m, const McpTool *t, const char *id, json_object *args) {
        const char *op = t->operation, *path = arg_string(args, "path"), *s;
        int r;

        r = sd_bus_message_append(m, "s", id);
        if (r < 0)
                return r;
        if (streq(op, "file_create")) {
                s = arg_string(args, "file_text");
                r = sd_bus_message_append(m, "s", path);
                if (r >= 0)
                        r = sd_bus_message_append_array(m, 'y', s, strlen(s));
        } else if (streq(op, "str_replace")) {
                const char *a = arg_string(args, "old_str"), *b = arg_string(args, "new_str");
                r = sd_bus_message_append(m, "s", path);
                if (r >= 0)
                        r = sd_bus_message_append_array(m, 'y', a, strlen(a));
                if (r >= 0)
                        r = sd_bus_message_append_array(m, 'y', b, strlen(b));
        } else if (streq(op, "insert")) {
                s = arg_string(args, "new_str");
                r = sd_bus_message_append(m, "su", path,
                                          (uint32_t) MIN(arg_uint(args, "insert_line"), UINT32_MAX));
                if (r >= 0)
                        r = sd_bus_message_append_array(m, 'y', s, strlen(s));
        } else if (streq(op, "view") || streq(op, "ls"))
                r = sd_bus_message_append(m, "s", path);
        else
                r = sd_bus_message_append(m, "s", arg_string(args, "pattern"));
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0 && (streq(op, "glob") || streq(op, "grep")) && path)
                r = sd_bus_message_append(m, "{sv}", "path", "s", path);
        static const char *const bools[] = {"overwrite", "create_dirs", "ignore_case"};
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(bools); i++)
                if (arg_has(args, bools[i]))
                        r = sd_bus_message_append(m, "{sv}", bools[i], "b", arg_bool(args, bools[i]));
        static const char *const uints[] = {"start_line", "end_line", "max_results"};
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(uints); i++)
                if (arg_has(args, uints[i]))
                        r = sd_bus_message_append(m, "{sv}", uints[i], "u",
                                                  (uint32_t) MIN(arg_uint(args, uints[i]), UINT32_MAX));
        if (r >= 0 && (s = arg_string(args, "glob")))
                r = sd_bus_message_append(m, "{sv}", "glob", "s", s);
        if (r >= 0)
                r = sd_bus_message_append(m, "{sv}", "source", "s", "agent");
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

static int file_tool_result(const McpTool *t, sd_bus_message *reply, json_object **ret) {
        const char *op = t->operation;
        json_object *o = json_object_new_object(), *list = NULL;
        const void *a, *b;
        size_t an, bn;
        int r = 0;

        if (!o)
                return -ENOMEM;
        if (streq(op, "view")) {
                r = sd_bus_message_read_array(reply, 'y', &a, &an);
                if (r >= 0)
                        json_object_object_add(o, "text", bytes_json(a, an));
        } else if (streq(op, "ls")) {
                list = json_object_new_array();
                r = sd_bus_message_enter_container(reply, 'a', "(aysutt)");
                while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'r', "aysutt")) > 0) {
                        const char *type;
                        uint32_t mode;
                        uint64_t size, mtime;
                        char mbuf[8];
                        r = sd_bus_message_read_array(reply, 'y', &a, &an);
                        if (r >= 0)
                                r = sd_bus_message_read(reply, "sutt", &type, &mode, &size, &mtime);
                        if (r >= 0)
                                r = sd_bus_message_exit_container(reply);
                        if (r < 0)
                                break;
                        json_object *e = json_object_new_object();
                        snprintf(mbuf, sizeof(mbuf), "%04o", mode);
                        json_object_object_add(e, "name", bytes_json(a, an));
                        json_object_object_add(e, "type", json_object_new_string(type));
                        json_object_object_add(e, "mode", json_object_new_string(mbuf));
                        json_object_object_add(e, "size", json_object_new_uint64(size));
                        json_object_array_add(list, e);
                }
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                json_object_object_add(o, "entries", list);
        } else if (streq(op, "glob")) {
                list = json_object_new_array();
                r = sd_bus_message_enter_container(reply, 'a', "ay");
                while (r >= 0 && (r = sd_bus_message_read_array(reply, 'y', &a, &an)) > 0)
                        json_object_array_add(list, bytes_json(a, an));
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                json_object_object_add(o, "paths", list);
        } else if (streq(op, "grep")) {
                list = json_object_new_array();
                r = sd_bus_message_enter_container(reply, 'a', "(ayuay)");
                while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'r', "ayuay")) > 0) {
                        uint32_t line;
                        r = sd_bus_message_read_array(reply, 'y', &a, &an);
                        if (r >= 0)
                                r = sd_bus_message_read(reply, "u", &line);
                        if (r >= 0)
                                r = sd_bus_message_read_array(reply, 'y', &b, &bn);
                        if (r >= 0)
                                r = sd_bus_message_exit_container(reply);
                        if (r < 0)
                                break;
                        json_object *e = json_object_new_object();
                        json_object_object_add(e, "file", bytes_json(a, an));
                        json_object_object_add(e, "line", json_object_new_uint64(line));
                        json_object_object_add(e, "text", bytes_json(b, bn));
                        json_object_array_add(list, e);
                }
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                json_object_object_add(o, "matches", list);
        }
        if (r >= 0)
                r = bus_read_dict(reply, o);
        if (r < 0) {
                json_object_put(o);
                return r;
        }
        *ret = o;
        return 0;
}

static int log_rows(sd_bus_message *reply, json_object **ret) {
        json_object *rows = json_object_new_array();
        int r;

        if (!rows)
                return -ENOMEM;
        r = sd_bus_message_enter_container(reply, 'a', "a{sv}");
        while (r >= 0 && (r = sd_bus_message_at_end(reply, false)) == 0) {
                json_object *raw = json_object_new_object(), *row;
                r = raw ? bus_read_dict(reply, raw) : -ENOMEM;
                if (r < 0) {
                        json_object_put(raw);
                        break;
                }
                row = log_row_to_json(raw);
                json_object_put(raw);
                if (row)
                        json_object_array_add(rows, row);
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r < 0) {
                json_object_put(rows);
                return r;
        }
        *ret = rows;
        return 0;
}

/* Runs one tool call: its result (isError with sandboxd's message when the call failed). */
static json_object *run_tool(sd_bus *bus, McpVersion v, const McpTool *t, json_object *args) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_free_ char *why = NULL;
        json_object *o = NULL, *rows;
        const char *id = NULL;
        uint64_t timeout = CALL_TIMEOUT_USEC;
        int r;

        r = mcp_tool_check_arguments(t, MCP_TRANSPORT_STDIO, args, &why);
        if (r == -EINVAL)
                return mcp_tool_error(why);
        if (r < 0)
                return NULL;
        if (t->sandbox != MCP_SANDBOX_NONE) {
                id = arg_string(args, "sandbox");
                if (!id && session_sandbox_get(bus, &id, &error) < 0)
                        return mcp_tool_error(error.message ?: "Cannot create the session's sandbox.");
        }

        switch (t->kind) {
        case MCP_TOOL_SANDBOX_CREATE:
                r = new_call(bus, "CreateSandbox", &m);
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'a', "{sv}");
                static const char *const strs[] = {"name", "type", "network"};
                for (size_t i = 0; r >= 0 && i < ELEMENTSOF(strs); i++)
                        if (arg_string(args, strs[i]))
                                r = sd_bus_message_append(m, "{sv}", strs[i], "s",
                                                          arg_string(args, strs[i]));
                if (r >= 0 && arg_has(args, "ttl_seconds"))
                        r = sd_bus_message_append(m, "{sv}", "ttl_seconds", "t",
                                                  arg_uint(args, "ttl_seconds"));
                if (r >= 0)
                        r = sd_bus_message_append(m, "{sv}", "source", "s", "agent");
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                break;
        case MCP_TOOL_SANDBOX_LIST:
                r = new_call(bus, "ListSandboxes", &m);
                break;
        case MCP_TOOL_SANDBOX_DELETE:
                r = new_call(bus, "DeleteSandbox", &m);
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", id);
                if (r >= 0)
                        r = append_context(m);
                break;
        case MCP_TOOL_EXEC:
                r = new_call(bus, "Exec", &m);
                if (r >= 0)
                        r = build_exec(m, id, args);
                if (r == -EDOM)
                        return mcp_tool_error("Give either 'command' or 'argv', not both.");
                if (r == -ENOMSG)
                        return mcp_tool_error("Field 'command' or a non-empty 'argv' is required.");
                timeout = arg_has(args, "timeout_seconds")
                                  ? (arg_uint(args, "timeout_seconds") + 30) * USEC_PER_SEC
                                  : EXEC_NO_TIMEOUT_USEC;
                break;
        case MCP_TOOL_READ_FILE:
                r = new_call(bus, "ReadFile", &m);
                if (r >= 0)
                        r = sd_bus_message_append(m, "ss", id, arg_string(args, "path"));
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'a', "{sv}");
                if (r >= 0 && arg_has(args, "offset"))
                        r = sd_bus_message_append(m, "{sv}", "offset", "t", arg_uint(args, "offset"));
                if (r >= 0 && arg_has(args, "length"))
                        r = sd_bus_message_append(m, "{sv}", "length", "t", arg_uint(args, "length"));
                if (r >= 0)
                        r = sd_bus_message_append(m, "{sv}", "source", "s", "agent");
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                break;
        case MCP_TOOL_WRITE_FILE: {
                const char *content = arg_string(args, "content");
                uint32_t mode = 0644;
                if (arg_string(args, "mode") && parse_mode(arg_string(args, "mode"), &mode) < 0)
                        return mcp_tool_error("Argument 'mode' must be octal from 0 to 0777.");
                r = new_call(bus, "WriteFile", &m);
                if (r >= 0)
                        r = sd_bus_message_append(m, "ss", id, arg_string(args, "path"));
                if (r >= 0)
                        r = sd_bus_message_append_array(m, 'y', content, strlen(content));
                if (r >= 0)
                        r = sd_bus_message_append(m, "a{sv}", 4, "mode", "u", mode, "create_dirs", "b",
                                                  arg_bool(args, "create_dirs"), "append", "b",
                                                  arg_bool(args, "append"), "source", "s", "agent");
                break;
        }
        case MCP_TOOL_FILE: {
                static const char *const methods[][2] = {
                        {"file_create", "FileCreate"},
                        {"view", "View"},
                        {"str_replace", "StrReplace"},
                        {"insert", "Insert"},
                        {"ls", "Ls"},
                        {"glob", "Glob"},
                        {"grep", "Grep"},
                };
                const char *method = NULL;
                for (size_t i = 0; i < ELEMENTSOF(methods); i++)
                        if (streq(methods[i][0], t->operation))
                                method = methods[i][1];
                if (!method)
                        return mcp_tool_error("Unknown file tool.");
                r = new_call(bus, method, &m);
                if (r >= 0)
                        r = build_file_tool(m, t, id, args);
                break;
        }
        case MCP_TOOL_LOG_READ: {
                uint64_t limit = arg_has(args, "limit") ? arg_uint(args, "limit") : 100;
                if (limit == 0 || limit > 1000)
                        return mcp_tool_error("The argument 'limit' must be from 1 to 1000.");
                r = sd_bus_message_new_method_call(bus, &m, AUDITD_BUS_NAME, AUDITD_BUS_PATH,
                                                   AUDITD_LOG_INTERFACE, "GetLog");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'a', "{sv}");
                if (r >= 0)
                        r = sd_bus_message_append(m, "{sv}", "session_id", "s", id);
                static const char *const filters[] = {"operation", "event"};
                for (size_t i = 0; r >= 0 && i < ELEMENTSOF(filters); i++)
                        if (arg_string(args, filters[i]))
                                r = sd_bus_message_append(m, "{sv}", filters[i], "s",
                                                          arg_string(args, filters[i]));
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                if (r >= 0)
                        r = sd_bus_message_append(m, "tt", limit, arg_uint(args, "offset"));
                break;
        }
        default:
                return mcp_tool_error("Unknown tool.");
        }
        if (r < 0)
                return mcp_tool_error("Cannot build the bus call.");
        r = sd_bus_call(bus, m, timeout, &error, &reply);
        if (r < 0)
                return mcp_tool_error(error.message ?: strerror(-r));

        switch (t->kind) {
        case MCP_TOOL_SANDBOX_CREATE: {
                const char *new_id;
                r = sd_bus_message_read(reply, "so", &new_id, NULL);
                if (r >= 0) {
                        sd_bus_error_free(&error);
                        o = sandbox_object(bus, new_id, &error);
                        if (!o)
                                return mcp_tool_error(error.message ?: "Cannot read the new sandbox.");
                }
                break;
        }
        case MCP_TOOL_SANDBOX_LIST: {
                const char *sid, *name, *type, *state, *owner;
                json_object *list = json_object_new_array();
                r = sd_bus_message_enter_container(reply, 'a', "(ssssso)");
                while (r >= 0 && list &&
                       (r = sd_bus_message_read(reply, "(ssssso)", &sid, &name, &type, &state, &owner,
                                                NULL)) > 0) {
                        json_object *e = json_object_new_object();
                        json_object_object_add(e, "id", json_object_new_string(sid));
                        json_object_object_add(e, "name", json_object_new_string(name));
                        json_object_object_add(e, "type", json_object_new_string(type));
                        json_object_object_add(e, "state", json_object_new_string(state));
                        json_object_object_add(e, "owner", json_object_new_string(owner));
                        json_object_array_add(list, e);
                }
                o = json_object_new_object();
                json_object_object_add(o, "sandboxes", list);
                break;
        }
        case MCP_TOOL_SANDBOX_DELETE:
                o = json_object_new_object();
                json_object_object_add(o, "id", json_object_new_string(id));
                json_object_object_add(o, "deleted", json_object_new_boolean(true));
                if (session_sandbox && streq(id, session_sandbox))
                        session_created = false; /* nothing left to delete at the end */
                break;
        case MCP_TOOL_EXEC:
                r = exec_result(reply, &o);
                break;
        case MCP_TOOL_READ_FILE: {
                const void *data;
                size_t size;
                r = sd_bus_message_read_array(reply, 'y', &data, &size);
                if (r >= 0) {
                        o = json_object_new_object();
                        json_object_object_add(o, "path", json_object_new_string(arg_string(args, "path")));
                        json_object_object_add(o, "content", bytes_json(data, size));
                        json_object_object_add(o, "size", json_object_new_uint64(size));
                }
                break;
        }
        case MCP_TOOL_WRITE_FILE:
                o = json_object_new_object();
                json_object_object_add(o, "path", json_object_new_string(arg_string(args, "path")));
                json_object_object_add(o, "bytes",
                                       json_object_new_uint64(strlen(arg_string(args, "content"))));
                break;
        case MCP_TOOL_FILE:
                r = file_tool_result(t, reply, &o);
                break;
        case MCP_TOOL_LOG_READ:
                r = log_rows(reply, &rows);
                if (r >= 0) {
                        o = json_object_new_object();
                        json_object_object_add(o, "entries", rows);
                        json_object_object_add(o, "limit",
                                               json_object_new_uint64(arg_has(args, "limit")
                                                                              ? arg_uint(args, "limit")
                                                                              : 100));
                        json_object_object_add(o, "offset",
                                               json_object_new_uint64(arg_uint(args, "offset")));
                }
                break;
        default:
                break;
        }
        if (r < 0 || !o) {
                json_object_put(o);
                return mcp_tool_error("Cannot read sandboxd's answer.");
        }
        return mcp_tool_result(v, o);
}

/* --- the loop -------------------------------------------------------------------------------------------
 */

static int write_answer(json_object *o) {
        if (!o)
                return 0;
        /* one message per line: the JSON text has no raw newline */
        if (fputs(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
                  stdout) < 0 ||
            fputc('\n', stdout) < 0 || fflush(stdout) != 0)
                return -EIO;
        return 0;
}

static int handle_line(sd_bus *bus, McpServer *s, const char *line, size_t len) {
        McpBatch *b = NULL;
        const char *error = NULL;
        json_object *out = NULL;
        int r;

        r = mcp_batch_parse(line, len, JSON_DEPTH_MAX, &b, &error);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                out = jsonrpc_error(NULL, r == -EBADMSG ? JSONRPC_PARSE_ERROR : JSONRPC_INVALID_REQUEST,
                                    error);
                goto done;
        }
        if (b->is_batch && !mcp_version_has_batches(s->version)) {
                out = jsonrpc_error(NULL, JSONRPC_INVALID_REQUEST,
                                    "Batches are not part of this MCP revision (only of 2025-03-26).");
                goto done;
        }
        if (b->is_batch)
                out = json_object_new_array();
        for (size_t i = 0; i < b->n_messages; i++) {
                McpMessage *m = &b->messages[i];
                json_object *answer = NULL;
                McpToolCall call = {};

                if (b->is_batch && m->method && streq(m->method, "initialize"))
                        answer = jsonrpc_error(m->id, JSONRPC_INVALID_REQUEST,
                                               "initialize must not be part of a batch.");
                else {
                        r = mcp_dispatch(s, m, &answer, &call);
                        if (r < 0) {
                                json_object_put(out);
                                mcp_batch_free(b);
                                return r;
                        }
                        if (r > 0)
                                answer = jsonrpc_result(
                                        m->id, run_tool(bus, s->version, call.tool, call.arguments));
                        if (r > 0 && !answer)
                                answer = jsonrpc_error(m->id, JSONRPC_INTERNAL_ERROR, "Out of memory.");
                }
                if (!answer)
                        continue;
                if (b->is_batch)
                        json_object_array_add(out, answer);
                else
                        out = answer;
        }
        if (b->is_batch && json_object_array_length(out) == 0)
                out = (json_object_put(out), NULL);
done:
        mcp_batch_free(b);
        r = write_answer(out);
        json_object_put(out);
        return r;
}

static volatile sig_atomic_t stop_signal = 0;

static void on_stop_signal(int sig) {
        stop_signal = sig;
}

int verb_mcp(int argc, char *argv[]) {
        enum { ARG_SANDBOX = 0x100, ARG_TYPE, ARG_KEEP };
        static const struct option options[] = {
                {"help", no_argument, NULL, 'h'},
                {"sandbox", required_argument, NULL, ARG_SANDBOX},
                {"type", required_argument, NULL, ARG_TYPE},
                {"keep", no_argument, NULL, ARG_KEEP},
                {},
        };
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_free_ char *line = NULL;
        McpServer server = {
                .transport = MCP_TRANSPORT_STDIO,
                .version = MCP_VERSION_LATEST,
                .instructions =
                        "Tools of a sandboxd host. exec and the file tools act on this session's sandbox "
                        "unless 'sandbox' names another.",
        };
        bool type_given = false;
        size_t alloc = 0;
        int c, r;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        usage(stdout);
                        return EXIT_SUCCESS;
                case ARG_SANDBOX:
                        arg_sandbox = optarg;
                        break;
                case ARG_TYPE:
                        arg_type = optarg;
                        type_given = true;
                        break;
                case ARG_KEEP:
                        arg_keep = true;
                        break;
                default:
                        return EXIT_USAGE;
                }
        if (optind < argc) {
                fprintf(stderr, "sandboxctl: mcp: unexpected argument '%s'\n", argv[optind]);
                return EXIT_USAGE;
        }
        if (arg_sandbox && type_given) {
                fprintf(stderr, "sandboxctl: mcp: --sandbox and --type cannot be combined\n");
                return EXIT_USAGE;
        }

        r = sd_bus_open_system(&bus);
        if (r < 0) {
                fprintf(stderr, "sandboxctl: mcp: Failed to connect to the system bus: %s\n", strerror(-r));
                return EXIT_FAILURE;
        }
        if (arg_sandbox) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                json_object *o = sandbox_object(bus, arg_sandbox, &error);
                if (!o) {
                        fprintf(stderr, "sandboxctl: mcp: %s\n",
                                error.message ?: "Cannot find the sandbox.");
                        return EXIT_FAILURE;
                }
                json_object_put(o);
                session_sandbox = strdup(arg_sandbox);
                if (!session_sandbox)
                        return EXIT_FAILURE;
        }

        /* SIGTERM and SIGINT end the session as the end of stdin does: the sandbox is deleted. getline()
         * is interrupted (no SA_RESTART), and a call in flight finishes first. */
        struct sigaction sa = {.sa_handler = on_stop_signal};
        (void) sigaction(SIGTERM, &sa, NULL);
        (void) sigaction(SIGINT, &sa, NULL);
        (void) signal(SIGPIPE, SIG_IGN);

        r = 0;
        while (!stop_signal) {
                ssize_t n = getline(&line, &alloc, stdin);
                if (n < 0)
                        break;
                while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
                        line[--n] = 0;
                if (n == 0)
                        continue;
                if ((size_t) n > LINE_MAX_BYTES) {
                        json_object *e =
                                jsonrpc_error(NULL, JSONRPC_INVALID_REQUEST, "The message is too large.");
                        r = write_answer(e);
                        json_object_put(e);
                        if (r < 0)
                                break;
                        continue;
                }
                r = handle_line(bus, &server, line, (size_t) n);
                if (r < 0)
                        break;
        }
        session_end(bus);
        free(session_sandbox);
        if (r < 0) {
                fprintf(stderr, "sandboxctl: mcp: %s\n", strerror(-r));
                return EXIT_FAILURE;
        }
        return EXIT_SUCCESS;
}
