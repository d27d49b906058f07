/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* POST /mcp: the Model Context Protocol's Streamable HTTP transport. Each tool call runs its REST twin's
 * route as an inner request, so it is checked, capped and recorded exactly as that route is. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway-takeover.h"
#include "gatewayd-routes.h"
#include "log.h"
#include "mcp.h"
#include "sse.h"
#include "time-util.h"

/* Progress of a call the client asked it for: one notification at the start, then one a second. */
#define MCP_PROGRESS_INTERVAL_USEC USEC_PER_SEC

/* Room the MCP envelope adds around a tool's arguments (message, params, arguments). */
#define MCP_ENVELOPE_DEPTH 3u

typedef struct McpPost McpPost;

typedef struct McpCallState {
        McpPost *post;
        size_t index; /* the message's */
        McpToolCall call;
        Request *inner;
        sd_event_source *progress;
        uint64_t started; /* µs, monotonic */
        uint64_t n_progress;
} McpCallState;

struct McpPost {
        Request *req; /* weak: the post lives in req->data */
        McpBatch *batch;
        McpServer server;
        json_object **answers; /* per message; NULL: none */
        McpCallState *calls;   /* per message */
        size_t n_pending;
        bool stream; /* answered as an SSE stream (progress asked for, and accepted) */
};

static void call_state_done(McpCallState *c) {
        c->progress = sd_event_source_disable_unref(c->progress);
        if (c->inner) {
                req_inner_abandon(c->inner);
                c->inner = request_unref(c->inner);
        }
}

static void mcp_post_free(void *p) {
        McpPost *post = p;

        if (!post)
                return;
        /* calls and answers are made only once the batch is accepted: a refused one (a batch where the
         * revision has none) has neither */
        for (size_t i = 0; post->batch && i < post->batch->n_messages; i++) {
                if (post->calls)
                        call_state_done(&post->calls[i]);
                if (post->answers)
                        json_object_put(post->answers[i]);
        }
        free(post->calls);
        free(post->answers);
        mcp_batch_free(post->batch);
        free(post);
}

/* The client left: the tool calls still running are cancelled (an Exec ends as on its timeout). */
static void mcp_on_close(Request *r) {
        McpPost *post = r->data;

        for (size_t i = 0; post && post->calls && post->batch && i < post->batch->n_messages; i++)
                call_state_done(&post->calls[i]);
}

/* An HTTP-level refusal of the transport, with a JSON-RPC error body as MCP clients read it. */
static void reply_jsonrpc_error(Request *r, unsigned status, int code, const char *message) {
        req_reply_json(r, status, jsonrpc_error(NULL, code, message));
}

static void send_event(McpPost *post, json_object *o) {
        size_t len;
        const char *s;

        if (!o)
                return;
        s = json_text(o, &len);
        (void) sse_send_unbounded(post->req->sse, NULL, "message", s, len);
        json_object_put(o);
}

static void post_finish(McpPost *post) {
        Request *r = post->req;
        json_object *out = NULL;

        if (post->stream) {
                for (size_t i = 0; i < post->batch->n_messages; i++)
                        if (post->answers[i])
                                send_event(post, TAKE_PTR(post->answers[i]));
                sse_finish(r->sse);
                return;
        }
        if (post->batch->is_batch) {
                out = json_object_new_array();
                for (size_t i = 0; out && i < post->batch->n_messages; i++)
                        if (post->answers[i])
                                json_object_array_add(out, TAKE_PTR(post->answers[i]));
                if (out && json_object_array_length(out) == 0)
                        out = (json_object_put(out), NULL);
        } else
                out = TAKE_PTR(post->answers[0]);
        if (!out)
                /* only notifications and responses */
                return req_reply_empty(r, 202);
        req_reply_json(r, 200, out);
}

static void call_answer(McpCallState *c, json_object *result) {
        McpPost *post = c->post;
        json_object *id = post->batch->messages[c->index].id;

        post->answers[c->index] = result ? jsonrpc_result(id, result)
                                         : jsonrpc_error(id, JSONRPC_INTERNAL_ERROR, "Out of memory.");
        c->progress = sd_event_source_disable_unref(c->progress);
        if (--post->n_pending == 0)
                post_finish(post);
}

static void call_fail(McpCallState *c, const char *message) {
        call_answer(c, mcp_tool_error(message));
}

/* --- progress ------------------------------------------------------------------------------------ */

static void send_progress(McpCallState *c) {
        McpPost *post = c->post;
        json_object *p = json_object_new_object(), *timeout;
        uint64_t secs = (now_usec(CLOCK_MONOTONIC) - c->started) / USEC_PER_SEC;
        char msg[96];

        if (!p || !post->stream || sse_dropped(post->req->sse)) {
                json_object_put(p);
                return;
        }
        /* progress must grow with each notification: the count of them does, whatever the clock says */
        json_object_object_add(p, "progressToken", json_object_get(c->call.progress_token));
        json_object_object_add(p, "progress", json_object_new_uint64(c->n_progress));
        if (c->call.tool->kind == MCP_TOOL_EXEC && c->call.arguments &&
            json_object_object_get_ex(c->call.arguments, "timeout_seconds", &timeout))
                json_object_object_add(p, "total", json_object_new_int64(json_object_get_int64(timeout)));
        if (c->n_progress == 0)
                snprintf(msg, sizeof(msg), "%s started", c->call.tool->name);
        else
                snprintf(msg, sizeof(msg), "%s running for %" PRIu64 " s", c->call.tool->name, secs);
        json_object_object_add(p, "message", json_object_new_string(msg));
        c->n_progress++;
        send_event(post, jsonrpc_notification("notifications/progress", p));
}

static int on_progress_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        McpCallState *c = userdata;

        send_progress(c);
        /* a time source is off once it fired: on again for the next second */
        (void) sd_event_source_set_time_relative(s, MCP_PROGRESS_INTERVAL_USEC);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

/* --- a tool call as its REST twin ----------------------------------------------------------------- */

/* The REST route's answer, as the tool's result. */
static void on_inner_answer(Request *inner, unsigned status, const char *content_type, const void *data,
                            size_t size) {
        McpCallState *c = inner->answer_userdata;
        const McpTool *t = c->call.tool;
        json_object *body = NULL, *o, *v;

        if (content_type && streq(content_type, "application/json"))
                body = json_tokener_parse(size > 0 ? (const char *) data : "null");
        if (status >= 400) {
                const char *message = NULL;
                if (body && json_object_object_get_ex(body, "error", &v) &&
                    json_object_is_type(v, json_type_string))
                        message = json_object_get_string(v);
                call_fail(c, message ?: "The call failed.");
                json_object_put(body);
                return;
        }
        switch (t->kind) {
        case MCP_TOOL_SANDBOX_DELETE:
                o = json_object_new_object();
                json_object_object_add(o, "id", json_object_new_string(req_param(inner, 0)));
                json_object_object_add(o, "deleted", json_object_new_boolean(true));
                break;
        case MCP_TOOL_WRITE_FILE:
                o = json_object_new_object();
                json_object_object_add(o, "path", json_object_new_string(req_query(inner, "path")));
                json_object_object_add(o, "bytes", json_object_new_uint64(inner->body_size));
                break;
        case MCP_TOOL_READ_FILE:
                o = json_object_new_object();
                json_object_object_add(o, "path", json_object_new_string(req_query(inner, "path")));
                json_object_object_add(o, "content", json_bytes(data, size, false));
                json_object_object_add(o, "size", json_object_new_uint64(size));
                break;
        default:
                o = body ? json_object_get(body) : json_object_new_object();
        }
        json_object_put(body);
        call_answer(c, mcp_tool_result(c->post->server.version, o));
}

static int query_add(char ***q, size_t *n, const char *name, const char *value) {
        char **l = realloc(*q, (*n + 3) * sizeof(char *));

        if (!l)
                return -ENOMEM;
        *q = l;
        l[*n] = strdup(name);
        l[*n + 1] = strdup(value);
        l[*n + 2] = NULL;
        if (!l[*n] || !l[*n + 1])
                return -ENOMEM; /* the NULLs end the list where it is whole */
        *n += 2;
        return 0;
}

/* The arguments named in names, as the route's query parameters (integers in decimal, booleans as
 * true/false, strings as they are). */
static int query_from_arguments(Request *inner, json_object *args, const char *const *names) {
        size_t n = 0;
        int k;

        for (; *names; names++) {
                json_object *v;
                char buf[32];
                const char *s;
                if (!json_object_object_get_ex(args, *names, &v))
                        continue;
                if (json_object_is_type(v, json_type_int)) {
                        snprintf(buf, sizeof(buf), "%" PRId64, json_object_get_int64(v));
                        s = buf;
                } else if (json_object_is_type(v, json_type_boolean))
                        s = json_object_get_boolean(v) ? "true" : "false";
                else
                        s = json_object_get_string(v);
                k = query_add(&inner->query, &n, *names, s);
                if (k < 0)
                        return k;
        }
        return 0;
}

static int set_body(Request *inner, const char *data, size_t size) {
        inner->body = malloc(size + 1);
        if (!inner->body)
                return -ENOMEM;
        memcpy(inner->body, data, size);
        inner->body[size] = 0;
        inner->body_size = size;
        return 0;
}

static int set_json_body(Request *inner, json_object *args) {
        json_object *o = mcp_tool_body(args);
        size_t len;
        const char *s;
        int k;

        if (!o)
                return -ENOMEM;
        s = json_text(o, &len);
        k = set_body(inner, s, len);
        json_object_put(o);
        return k;
}

/* The REST twin's method and path for the call; the sandbox as the path's {id}. */
static int call_route(const McpTool *t, const char *sandbox, char **ret_method, char **ret_path) {
        const char *method = "POST";
        int k;

        switch (t->kind) {
        case MCP_TOOL_SANDBOX_CREATE:
                k = asprintf(ret_path, "/v1/sandboxes");
                break;
        case MCP_TOOL_SANDBOX_LIST:
                method = "GET";
                k = asprintf(ret_path, "/v1/sandboxes");
                break;
        case MCP_TOOL_SANDBOX_DELETE:
                method = "DELETE";
                k = asprintf(ret_path, "/v1/sandboxes/%s", sandbox);
                break;
        case MCP_TOOL_EXEC:
                k = asprintf(ret_path, "/v1/sandboxes/%s/exec", sandbox);
                break;
        case MCP_TOOL_READ_FILE:
                method = "GET";
                k = asprintf(ret_path, "/v1/sandboxes/%s/files", sandbox);
                break;
        case MCP_TOOL_WRITE_FILE:
                method = "PUT";
                k = asprintf(ret_path, "/v1/sandboxes/%s/files", sandbox);
                break;
        case MCP_TOOL_FILE:
                k = asprintf(ret_path, "/v1/sandboxes/%s/tools/%s", sandbox, t->operation);
                break;
        case MCP_TOOL_LOG_READ:
                method = "GET";
                k = sandbox ? asprintf(ret_path, "/v1/sandboxes/%s/log", sandbox)
                            : asprintf(ret_path, "/v1/log");
                break;
        default:
                return -EINVAL;
        }
        if (k < 0)
                return -ENOMEM;
        *ret_method = strdup(method);
        if (!*ret_method) {
                free(*ret_path);
                return -ENOMEM;
        }
        return 0;
}

static int call_start(McpCallState *c) {
        McpPost *post = c->post;
        const McpTool *t = c->call.tool;
        json_object *args = c->call.arguments, *v;
        _cleanup_free_ char *error = NULL, *method = NULL, *path = NULL;
        const char *sandbox = NULL;
        Request *inner;
        int k;

        k = mcp_tool_check_arguments(t, MCP_TRANSPORT_HTTP, args, &error);
        if (k == -EINVAL) {
                call_fail(c, error);
                return 0;
        }
        if (k < 0)
                return k;
        if (json_object_object_get_ex(args, "sandbox", &v)) {
                sandbox = json_object_get_string(v);
                /* it becomes a path segment */
                if (strchr(sandbox, '/') || strlen(sandbox) >= ROUTE_PARAM_MAX) {
                        call_fail(c, "Argument 'sandbox' is not a sandbox's id or name.");
                        return 0;
                }
        }
        k = call_route(t, sandbox, &method, &path);
        if (k < 0)
                return k;
        k = req_inner_new(post->req, method, path, &inner);
        if (k < 0)
                return k;
        c->inner = inner;
        inner->answer_to = on_inner_answer;
        inner->answer_userdata = c;

        switch (t->kind) {
        case MCP_TOOL_SANDBOX_CREATE:
        case MCP_TOOL_EXEC:
        case MCP_TOOL_FILE:
                k = set_json_body(inner, args);
                break;
        case MCP_TOOL_READ_FILE:
                k = query_from_arguments(inner, args,
                                         (const char *const[]){"path", "offset", "length", NULL});
                break;
        case MCP_TOOL_WRITE_FILE: {
                const char *content = json_object_get_string(json_object_object_get(args, "content"));
                k = query_from_arguments(
                        inner, args, (const char *const[]){"path", "mode", "create_dirs", "append", NULL});
                if (k >= 0)
                        k = set_body(inner, content, strlen(content));
                break;
        }
        case MCP_TOOL_LOG_READ:
                k = query_from_arguments(
                        inner, args, (const char *const[]){"limit", "offset", "operation", "event", NULL});
                break;
        default:
                k = 0;
        }
        if (k < 0)
                return k;

        if (post->stream && c->call.progress_token) {
                c->started = now_usec(CLOCK_MONOTONIC);
                send_progress(c);
                k = sd_event_add_time_relative(post->req->manager->event, &c->progress, CLOCK_MONOTONIC,
                                               MCP_PROGRESS_INTERVAL_USEC, USEC_PER_MSEC * 10,
                                               on_progress_timer, c);
                if (k < 0)
                        return k;
        }
        /* under a reference: the answer may come at once and finish the whole post */
        request_ref(inner);
        req_inner_dispatch(inner);
        request_unref(inner);
        return 0;
}

/* --- the transport's rules --------------------------------------------------------------------------- */

static bool accepts(const char *accept, const char *type) {
        return accept && (strstr(accept, type) || strstr(accept, "*/*"));
}

/* The Origin rule of MCP's Streamable HTTP (against DNS rebinding): a browser's Origin must be one the
 * takeover accepts (TakeoverOrigins=, or the gateway itself); clients that are no browser send none. */
static bool origin_ok(Request *r) {
        const char *origin = req_header(r, "Origin");

        if (!origin || takeover_origin_allowed(origin, r->manager->config.takeover_origins) ||
            takeover_origin_is_host(origin, req_header(r, MHD_HTTP_HEADER_HOST)))
                return true;
        req_deny(r, 403, "forbidden", NULL, "Origin %s may not use /mcp (TakeoverOrigins=).", origin);
        return false;
}

int route_mcp(Request *r) {
        const char *accept = req_header(r, MHD_HTTP_HEADER_ACCEPT), *ctype, *hversion, *error = NULL;
        McpPost *post;
        bool wants_progress = false;
        int k;

        if (!origin_ok(r))
                return 0;
        if (!accepts(accept, "application/json") || !accepts(accept, "text/event-stream")) {
                reply_jsonrpc_error(r, 406, JSONRPC_INVALID_REQUEST,
                                    "Not Acceptable: the Accept header must list application/json and "
                                    "text/event-stream.");
                return 0;
        }
        ctype = req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
        if (!ctype || strncasecmp(ctype, "application/json", 16) != 0 ||
            !(ctype[16] == 0 || ctype[16] == ';' || ctype[16] == ' ')) {
                reply_jsonrpc_error(r, 415, JSONRPC_INVALID_REQUEST,
                                    "Unsupported Media Type: the body must be application/json.");
                return 0;
        }

        post = calloc(1, sizeof(McpPost));
        if (!post)
                return -ENOMEM;
        post->req = r;
        r->data = post;
        r->data_free = mcp_post_free;
        r->on_close = mcp_on_close;
        post->server = (McpServer){
                .transport = MCP_TRANSPORT_HTTP,
                .version = MCP_VERSION_HTTP_DEFAULT,
                .instructions =
                        "Tools of a sandboxd host: create a sandbox (sandbox_create), pass its id as "
                        "'sandbox' to exec and the file tools, delete it when done.",
        };
        hversion = req_header(r, "MCP-Protocol-Version");
        if (hversion) {
                post->server.version = mcp_version_from_string(hversion);
                if (post->server.version < 0) {
                        _cleanup_free_ char *msg = NULL;
                        if (asprintf(&msg,
                                     "Bad Request: unsupported MCP-Protocol-Version %.32s (this server "
                                     "speaks "
                                     "2025-03-26, 2025-06-18 and 2025-11-25).",
                                     hversion) < 0)
                                return -ENOMEM;
                        reply_jsonrpc_error(r, 400, JSONRPC_INVALID_REQUEST, msg);
                        return 0;
                }
        }

        k = mcp_batch_parse(r->body, r->body_size,
                            (unsigned) r->manager->config.json_depth_max + MCP_ENVELOPE_DEPTH, &post->batch,
                            &error);
        if (k == -ENOMEM)
                return k;
        if (k < 0) {
                reply_jsonrpc_error(r, 400, k == -EBADMSG ? JSONRPC_PARSE_ERROR : JSONRPC_INVALID_REQUEST,
                                    error);
                return 0;
        }
        if (post->batch->is_batch && !mcp_version_has_batches(post->server.version)) {
                reply_jsonrpc_error(r, 400, JSONRPC_INVALID_REQUEST,
                                    "Batches are not part of this MCP revision (only of 2025-03-26).");
                return 0;
        }
        post->answers = calloc(post->batch->n_messages, sizeof(json_object *));
        post->calls = calloc(post->batch->n_messages, sizeof(McpCallState));
        if (!post->answers || !post->calls)
                return -ENOMEM;

        /* first what is answered at once, and which calls want progress */
        for (size_t i = 0; i < post->batch->n_messages; i++) {
                McpMessage *m = &post->batch->messages[i];
                McpCallState *c = &post->calls[i];

                if (post->batch->is_batch && m->method && streq(m->method, "initialize")) {
                        post->answers[i] = jsonrpc_error(m->id, JSONRPC_INVALID_REQUEST,
                                                         "initialize must not be part of a batch.");
                        continue;
                }
                k = mcp_dispatch(&post->server, m, &post->answers[i], &c->call);
                if (k < 0)
                        return k;
                if (k > 0) {
                        c->post = post;
                        c->index = i;
                        post->n_pending++;
                        if (c->call.progress_token)
                                wants_progress = true;
                }
        }
        if (post->n_pending == 0) {
                post_finish(post);
                return 0;
        }

        /* Progress notifications need an event stream; the stream counts as one of the key's. */
        if (wants_progress) {
                k = req_stream_acquire(r);
                if (k < 0)
                        return k == -EBUSY ? 0 : k; /* -EBUSY: answered 429 */
                k = req_start_sse(r, SIZE_MAX);
                if (k < 0)
                        return k;
                post->stream = true;
        }
        /* n_pending counts down as calls answer: hold one more until all have started */
        post->n_pending++;
        for (size_t i = 0; i < post->batch->n_messages; i++) {
                McpCallState *c = &post->calls[i];
                if (!c->post)
                        continue;
                k = call_start(c);
                if (k < 0) {
                        log_msg(LOG_ERR, "MCP call %s (%s) failed to start: %s", c->call.tool->name,
                                r->request_id, strerror(-k));
                        call_answer(c, NULL);
                }
        }
        if (--post->n_pending == 0)
                post_finish(post);
        return 0;
}
