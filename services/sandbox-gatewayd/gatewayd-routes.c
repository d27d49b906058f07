/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The gateway's route table: method, path pattern, action, the audit operation of a refusal, handler. */
#include "gatewayd-routes.h"

#include "gateway-auth.h"

/* One row per route; a new route is one more row (and its handler). Patterns match whole segments. */
const Route gateway_routes[] = {
        { "POST", "/v1/sandboxes", GATEWAY_ACTION_SANDBOX_CREATE, "sandbox.create", route_sandbox_create, 0 },
        { "GET", "/v1/sandboxes", GATEWAY_ACTION_SANDBOX_READ, "sandbox.read", route_sandbox_list, 0 },
        { "GET", "/v1/sandboxes/{id}", GATEWAY_ACTION_SANDBOX_READ, "sandbox.read", route_sandbox_get,
          ROUTE_SANDBOX },
        { "PATCH", "/v1/sandboxes/{id}", GATEWAY_ACTION_SANDBOX_UPDATE, "sandbox.update", route_sandbox_update,
          ROUTE_SANDBOX },
        { "DELETE", "/v1/sandboxes/{id}", GATEWAY_ACTION_SANDBOX_DELETE, "sandbox.delete", route_sandbox_delete,
          ROUTE_SANDBOX },
        { "PUT", "/v1/sandboxes/{id}/network", GATEWAY_ACTION_SANDBOX_UPDATE, "sandbox.update",
          route_sandbox_network, ROUTE_SANDBOX },
        { "POST", "/v1/sandboxes/{id}/pause", GATEWAY_ACTION_SANDBOX_PAUSE, "sandbox.pause", route_sandbox_pause,
          ROUTE_SANDBOX },
        { "POST", "/v1/sandboxes/{id}/resume", GATEWAY_ACTION_SANDBOX_PAUSE, "sandbox.resume",
          route_sandbox_resume, ROUTE_SANDBOX },
        { "POST", "/v1/sandboxes/{id}/snapshots", GATEWAY_ACTION_SNAPSHOT_CREATE, "snapshot.create",
          route_snapshot_take, ROUTE_SANDBOX },
        /* a snapshot's source sandbox is what a scoped key's scope is checked against (route-snapshots.c) */
        { "GET", "/v1/snapshots", GATEWAY_ACTION_SNAPSHOT_READ, "snapshot.read", route_snapshot_list, 0 },
        { "GET", "/v1/snapshots/{id}", GATEWAY_ACTION_SNAPSHOT_READ, "snapshot.read", route_snapshot_get, 0 },
        { "DELETE", "/v1/snapshots/{id}", GATEWAY_ACTION_SNAPSHOT_DELETE, "snapshot.remove", route_snapshot_delete,
          0 },
        { "POST", "/v1/sandboxes/{id}/exec", GATEWAY_ACTION_EXEC, "exec", route_exec, ROUTE_SANDBOX },
        /* background processes: what starts or acts on one is exec, reading is as a sandbox's */
        { "POST", "/v1/sandboxes/{id}/processes", GATEWAY_ACTION_EXEC, "process.start", route_process_start,
          ROUTE_SANDBOX },
        { "GET", "/v1/sandboxes/{id}/processes", GATEWAY_ACTION_SANDBOX_READ, "sandbox.read", route_process_list,
          ROUTE_SANDBOX },
        { "GET", "/v1/sandboxes/{id}/processes/{p}", GATEWAY_ACTION_SANDBOX_READ, "sandbox.read",
          route_process_get, ROUTE_SANDBOX },
        { "DELETE", "/v1/sandboxes/{id}/processes/{p}", GATEWAY_ACTION_EXEC, "process.signal",
          route_process_delete, ROUTE_SANDBOX },
        { "GET", "/v1/sandboxes/{id}/processes/{p}/output", GATEWAY_ACTION_SANDBOX_READ, "sandbox.read",
          route_process_output, ROUTE_SANDBOX },
        /* sandboxd records no row per stdin write; a refused one is recorded as its action */
        { "POST", "/v1/sandboxes/{id}/processes/{p}/stdin", GATEWAY_ACTION_EXEC, "exec",
          route_process_stdin, ROUTE_SANDBOX },
        { "POST", "/v1/sandboxes/{id}/processes/{p}/signal", GATEWAY_ACTION_EXEC, "process.signal",
          route_process_signal, ROUTE_SANDBOX },
        { "PUT", "/v1/sandboxes/{id}/files", GATEWAY_ACTION_FILE_WRITE, "write", route_file_put, ROUTE_SANDBOX },
        { "GET", "/v1/sandboxes/{id}/files", GATEWAY_ACTION_FILE_READ, "read", route_file_get, ROUTE_SANDBOX },
        { "POST", "/v1/sandboxes/{id}/tools/file_create", GATEWAY_ACTION_FILE_WRITE, "file_create", route_tool,
          ROUTE_SANDBOX },
        { "POST", "/v1/sandboxes/{id}/tools/str_replace", GATEWAY_ACTION_FILE_WRITE, "str_replace", route_tool,
          ROUTE_SANDBOX },
        { "POST", "/v1/sandboxes/{id}/tools/insert", GATEWAY_ACTION_FILE_WRITE, "insert", route_tool,
          ROUTE_SANDBOX },
        { "POST", "/v1/sandboxes/{id}/tools/view", GATEWAY_ACTION_FILE_READ, "view", route_tool, ROUTE_SANDBOX },
        { "POST", "/v1/sandboxes/{id}/tools/ls", GATEWAY_ACTION_FILE_READ, "ls", route_tool, ROUTE_SANDBOX },
        { "POST", "/v1/sandboxes/{id}/tools/glob", GATEWAY_ACTION_FILE_READ, "glob", route_tool, ROUTE_SANDBOX },
        { "POST", "/v1/sandboxes/{id}/tools/grep", GATEWAY_ACTION_FILE_READ, "grep", route_tool, ROUTE_SANDBOX },
        { "GET", "/v1/sandboxes/{id}/log", GATEWAY_ACTION_LOG_READ, "log.read", route_log_sandbox, ROUTE_SANDBOX },
        { "GET", "/v1/sandboxes/{id}/watch", GATEWAY_ACTION_LOG_READ, "log.read", route_watch, ROUTE_SANDBOX },
        /* Issue 24: the images sandboxes may be made of, for whoever may read sandboxes. */
        { "GET", "/v1/images", GATEWAY_ACTION_SANDBOX_READ, "sandbox.read", route_image_list, 0 },
        { "GET", "/v1/images/{name}", GATEWAY_ACTION_SANDBOX_READ, "sandbox.read", route_image_get, 0 },
        /* build or import: admin keys only (authorize), an import's archive streamed into the job */
        { "POST", "/v1/images", GATEWAY_ACTION_SANDBOX_CREATE, "image.build", route_image_create,
          ROUTE_BODY_STREAM, NULL, route_image_create_authorize },
        /* the handler asks for role admin too */
        { "DELETE", "/v1/images/{name}", GATEWAY_ACTION_SANDBOX_DELETE, "image.remove", route_image_delete, 0 },
        { "GET", "/v1/log", GATEWAY_ACTION_LOG_READ, "log.read", route_log_all, 0 },
        { "GET", "/v1/log/{row}/output", GATEWAY_ACTION_LOG_READ, "log.read", route_log_output, 0 },
        /* the handler asks for role admin too */
        { "GET", "/v1/log/export", GATEWAY_ACTION_LOG_READ, "log.read", route_log_export, 0 },
        { "POST", "/v1/api-keys", GATEWAY_ACTION_API_KEY_ADMIN, "api_key.create", route_key_create, 0 },
        { "GET", "/v1/api-keys", GATEWAY_ACTION_API_KEY_ADMIN, "api_key.list", route_key_list, 0 },
        /* the calling key's own object: what it may do, so a client (the dashboard) can offer only that */
        { "GET", "/v1/api-keys/self", -1, "api_key.list", route_key_self, ROUTE_ANY_KEY },
        { "DELETE", "/v1/api-keys/{id}", GATEWAY_ACTION_API_KEY_ADMIN, "api_key.revoke", route_key_revoke, 0 },
        { "POST", "/v1/sandboxes/{id}/takeover-token", GATEWAY_ACTION_TAKEOVER, "takeover", route_takeover_token,
          ROUTE_SANDBOX },
        /* The route authenticates itself, by the Authorization header or ?token=. */
        { "GET", "/v1/sandboxes/{id}/takeover", GATEWAY_ACTION_TAKEOVER, "takeover", route_takeover,
          ROUTE_SANDBOX, route_takeover_authenticate, route_takeover_authorize },
        { "GET", "/v1/sandboxes/{id}/takeovers/{n}/recording", GATEWAY_ACTION_TAKEOVER, "takeover",
          route_takeover_recording, ROUTE_SANDBOX },
        /* MCP's Streamable HTTP (route-mcp.c): each tool call is its REST twin's route, checked as that
         * route is; no GET stream and no sessions, so GET and DELETE get 405 */
        { "POST", "/mcp", -1, "mcp", route_mcp, ROUTE_ANY_KEY },
        /* The dashboard: static files, no key (the page holds none; it asks for one). */
        { "GET", "/", -1, "read", route_dashboard_index, ROUTE_PUBLIC },
        { "HEAD", "/", -1, "read", route_dashboard_index, ROUTE_PUBLIC },
        { "GET", "/ui/{path*}", -1, "read", route_dashboard_file, ROUTE_PUBLIC },
        { "HEAD", "/ui/{path*}", -1, "read", route_dashboard_file, ROUTE_PUBLIC },
};

const size_t gateway_routes_count = ELEMENTSOF(gateway_routes);
