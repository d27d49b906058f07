/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The gateway's route table: {method, path pattern, action, handler} rows and the matching of a request. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define ROUTE_PARAMS_MAX 4
#define ROUTE_PARAM_MAX 128

typedef struct Request Request;

/* Handles a matched, authorized request. Returns 0 once it has answered (req_reply…) or started what
 * will answer later (the connection is then suspended until it does); a negative errno makes a 500. */
typedef int (*route_handler_t)(Request *req);

typedef enum RouteFlags {
        ROUTE_PUBLIC = 1 << 0,          /* no API key needed */
        ROUTE_SANDBOX = 1 << 1,         /* param 0 is a sandbox id; the key's sandbox scope applies */
        ROUTE_ANY_KEY = 1 << 2,         /* any active key, whatever its actions (action -1): a key's own object;
                                         * /mcp, whose tool calls are each checked as their REST route */
        ROUTE_BODY_STREAM = 1 << 3,     /* with ?name= in the query, the body is an archive: the key is checked
                                         * and the handler runs once the headers are in, and the body goes
                                         * to Request.body_sink as it arrives (up to MaxImageBytes=), never
                                         * whole in memory */
} RouteFlags;

typedef struct Route {
        const char *method;    /* "GET", "POST", … */
        const char *pattern;   /* "/v1/sandboxes/{id}/exec": a {…} segment matches one non-empty segment;
                                * a last "{…*}" segment matches the non-empty rest ("/ui/{path*}") */
        int action;            /* GatewayAction, or -1 with ROUTE_PUBLIC or ROUTE_ANY_KEY */
        const char *operation; /* the audit operation a denied request of this route is recorded as */
        route_handler_t handler;
        unsigned flags;
        /* A route with credentials of its own (the takeover's ?token=) sets the request's key itself:
         * authenticate() returns 0, or answers and returns a negative errno. Its sandbox's name is then
         * made its id only for a key limited to some sandboxes (a token names the sandbox as its URL
         * did), and authorize() replaces the API key's check: true, or answered. NULL for the others.
         * authorize() may also come alone, with the API key: a check of the key stricter than its actions
         * (POST /v1/images asks for role admin too), which must check the route's action itself. */
        int (*authenticate)(Request *req);
        bool (*authorize)(Request *req);
} Route;

typedef struct RouteMatch {
        const Route *route;
        size_t n_params;
        char params[ROUTE_PARAMS_MAX][ROUTE_PARAM_MAX];
} RouteMatch;

/* Does path match pattern? Fills the {…} segments into ret (may be NULL). */
bool route_pattern_match(const char *pattern, const char *path, RouteMatch *ret);

/* Finds the route for method and path. Returns 0 and fills ret; -ENOENT if no pattern matches the path
 * (404); -EOPNOTSUPP if some do but not with this method (405). */
int route_find(const Route *table, size_t n, const char *method, const char *path, RouteMatch *ret);

/* The methods the path allows, comma-separated ("GET, DELETE"), for the Allow header of a 405. */
void route_allowed_methods(const Route *table, size_t n, const char *path, char *buf, size_t size);
