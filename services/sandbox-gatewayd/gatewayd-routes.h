/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The handlers of the gateway's routes, one group per area; the table is in gatewayd-routes.c. */
#pragma once

#include <systemd/sd-bus.h>

#include "http-server.h"

/* sandboxes */
int route_sandbox_create(Request *r);
int route_sandbox_list(Request *r);
int route_sandbox_get(Request *r);
int route_sandbox_update(Request *r);
int route_sandbox_delete(Request *r);
int route_sandbox_pause(Request *r);
int route_sandbox_resume(Request *r);
int route_snapshot_take(Request *r);
int route_snapshot_list(Request *r);
int route_snapshot_get(Request *r);
int route_snapshot_delete(Request *r);
/* PUT /v1/sandboxes/{id}/network: {"egress_policy": {...}} → SetNetworkPolicy, then the object. */
int route_sandbox_network(Request *r);
/* For dispatch(), once per request: if the path's {id} is a sandbox's name, looks its id up, puts it in
 * place and calls then(): with NULL once {id} is the sandbox's id, or with the bus error
 * (org.sandboxd.sandbox1.NoSuchSandbox for a name there is not, or cannot be). Returns 0 if the path has
 * an id already (then() is not called), 1 if then() was or will be called, or a negative errno. */
int req_resolve_sandbox(Request *r, void (*then)(Request *r, const sd_bus_error *error));
/* Reads a sandbox's properties (a{sv}, the Sandbox interface's GetAll) into the REST sandbox object. */
int sandbox_json_from_properties(Manager *m, sd_bus_message *reply, json_object **ret);

/* images (route-images.c, issue 24): the store, read-only; param 0 of the second is the image's name */
int route_image_list(Request *r);
int route_image_get(Request *r);
/* RemoveImage; the handler asks for role admin too */
int route_image_delete(Request *r);
/* POST /v1/images: BuildImage (a JSON body) or, with ?name=, ImportImage of the spooled body; answered
 * when the job ends (JSON, or SSE progress events with Accept: text/event-stream). Admin keys only: the
 * route's authorize(), run when the headers are in for a spooled body. */
int route_image_create(Request *r);
bool route_image_create_authorize(Request *r);
/* exec */
int route_exec(Request *r);
/* Into an open a{sv} of Exec's or StartProcess's options: the body's "cwd" and "env" (types checked
 * by the route's field table). Returns 0 or a negative errno from sd-bus. */
int exec_append_cwd_env(sd_bus_message *m, json_object *body);

/* background processes (route-processes.c); param 1 is the process's id */
int route_process_start(Request *r);
int route_process_list(Request *r);
int route_process_get(Request *r);
/* the JSON read, or with follow=true the SSE stream (process-follow.c) */
int route_process_output(Request *r);
/* One (ssiutasso) row of ListProcesses as the REST process object: 1, or 0 at the array's end (the message
 * is left after the row), or a negative errno. */
int process_json(Request *r, sd_bus_message *m, json_object **ret);
int route_process_stdin(Request *r);
int route_process_signal(Request *r);
/* SIGTERM, then SIGKILL if it still runs 5 s later (also when the client has left); answers once it has
 * ended */
int route_process_delete(Request *r);

/* files */
int route_file_put(Request *r);
int route_file_get(Request *r);

/* the file tools (one handler; the route's operation names the tool) */
int route_tool(Request *r);

/* audit log and watch (route-log.c) */
int route_log_sandbox(Request *r);
int route_log_all(Request *r);
int route_log_output(Request *r);
int route_log_export(Request *r);
int route_watch(Request *r);

/* the dashboard's static files (route-static.c) */
int route_dashboard_index(Request *r);
int route_dashboard_file(Request *r);

/* takeover (route-takeover.c) */
/* A key without the takeover action is told this by every takeover route (the token, the WebSocket, a
 * recording), whichever check refused it: one sentence for one rule. */
#define TAKEOVER_FORBIDDEN_MESSAGE \
        "This API key lacks the action 'takeover': only admin keys may take over a sandbox."
int route_takeover_token(Request *r);
int route_takeover(Request *r);
int route_takeover_authenticate(Request *r);
bool route_takeover_authorize(Request *r);
int route_takeover_recording(Request *r);

/* MCP over Streamable HTTP (route-mcp.c) */
int route_mcp(Request *r);

/* API keys */
int route_key_create(Request *r);
int route_key_list(Request *r);
int route_key_self(Request *r);
int route_key_revoke(Request *r);
