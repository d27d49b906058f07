/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests of the gateway's route matching: patterns, parameters, 404 against 405, the Allow list, the table */
#include <errno.h>
#include <string.h>

#include "gatewayd-routes.h"
#include "http-route.h"
#include "macro.h"
#include "test-util.h"

static int handler(Request *r) {
        return 0;
}

static const Route table[] = {
        { "POST", "/v1/sandboxes", 0, "sandbox.create", handler, 0 },
        { "GET", "/v1/sandboxes", 1, "sandbox.read", handler, 0 },
        { "GET", "/v1/sandboxes/{id}", 1, "sandbox.read", handler, ROUTE_SANDBOX },
        { "DELETE", "/v1/sandboxes/{id}", 3, "sandbox.delete", handler, ROUTE_SANDBOX },
        { "POST", "/v1/sandboxes/{id}/exec", 5, "exec", handler, ROUTE_SANDBOX },
        { "GET", "/v1/sandboxes/{id}/takeovers/{n}/recording", 9, "takeover", handler, ROUTE_SANDBOX },
        { "GET", "/v1/log/{row}/output", 8, "log.read", handler, 0 },
};

static void test_patterns(void) {
        RouteMatch m = {};

        CHECK(route_pattern_match("/v1/sandboxes", "/v1/sandboxes", &m) && m.n_params == 0);
        CHECK(!route_pattern_match("/v1/sandboxes", "/v1/sandboxes/", NULL));
        CHECK(!route_pattern_match("/v1/sandboxes", "/v1/sandboxe", NULL));
        CHECK(!route_pattern_match("/v1/sandboxes", "/v1/sandboxesx", NULL));
        CHECK(route_pattern_match("/v1/sandboxes/{id}", "/v1/sandboxes/sb_abc", &m));
        CHECK(m.n_params == 1 && streq(m.params[0], "sb_abc"));
        CHECK(!route_pattern_match("/v1/sandboxes/{id}", "/v1/sandboxes/", NULL));
        CHECK(!route_pattern_match("/v1/sandboxes/{id}", "/v1/sandboxes/a/b", NULL));
        CHECK(route_pattern_match("/v1/sandboxes/{id}/takeovers/{n}/recording", "/v1/sandboxes/sb_x/takeovers/7/recording",
                                  &m));
        CHECK(m.n_params == 2 && streq(m.params[0], "sb_x") && streq(m.params[1], "7"));
        CHECK(!route_pattern_match("/v1/sandboxes/{id}/exec", "/v1/sandboxes//exec", NULL));

        char longseg[300] = "/v1/sandboxes/";
        memset(longseg + strlen(longseg), 'a', 200);
        CHECK(!route_pattern_match("/v1/sandboxes/{id}", longseg, NULL));

        /* a last "{…*}" segment takes the rest of the path, slashes and all, but not nothing */
        CHECK(route_pattern_match("/ui/{path*}", "/ui/app.js", &m) && m.n_params == 1 && streq(m.params[0], "app.js"));
        CHECK(route_pattern_match("/ui/{path*}", "/ui/vendor/xterm/xterm.mjs", &m));
        CHECK_STR(m.params[0], "vendor/xterm/xterm.mjs");
        CHECK(route_pattern_match("/ui/{path*}", "/ui//x/", &m) && streq(m.params[0], "/x/"));
        CHECK(!route_pattern_match("/ui/{path*}", "/ui/", NULL));
        CHECK(!route_pattern_match("/ui/{path*}", "/ui", NULL));
        CHECK(!route_pattern_match("/ui/{path*}", "/uix/a", NULL));
        char longpath[300] = "/ui/";
        memset(longpath + strlen(longpath), 'a', 200);
        CHECK(!route_pattern_match("/ui/{path*}", longpath, NULL));
        /* '*' only counts at the end of the pattern: elsewhere the segment is an ordinary parameter */
        CHECK(route_pattern_match("/x/{a*}/y", "/x/b/y", &m) && streq(m.params[0], "b"));
        CHECK(!route_pattern_match("/x/{a*}/y", "/x/b/c/y", NULL));
}

static void test_find(void) {
        RouteMatch m = {};
        char allow[64];

        CHECK(route_find(table, ELEMENTSOF(table), "GET", "/v1/sandboxes", &m) == 0 && m.route == &table[1]);
        CHECK(route_find(table, ELEMENTSOF(table), "POST", "/v1/sandboxes", &m) == 0 && m.route == &table[0]);
        CHECK(route_find(table, ELEMENTSOF(table), "DELETE", "/v1/sandboxes/sb_q", &m) == 0 && m.route == &table[3]);
        CHECK(streq(m.params[0], "sb_q"));
        CHECK(route_find(table, ELEMENTSOF(table), "GET", "/v1/log/12/output", &m) == 0 && streq(m.params[0], "12"));
        CHECK_INT(route_find(table, ELEMENTSOF(table), "PUT", "/v1/sandboxes", &m), -EOPNOTSUPP);
        CHECK_INT(route_find(table, ELEMENTSOF(table), "GET", "/v1/sandboxes/sb_q/exec", &m), -EOPNOTSUPP);
        CHECK_INT(route_find(table, ELEMENTSOF(table), "GET", "/v1/nothing", &m), -ENOENT);
        CHECK_INT(route_find(table, ELEMENTSOF(table), "GET", "/", &m), -ENOENT);
        CHECK_INT(route_find(table, ELEMENTSOF(table), "get", "/v1/sandboxes", &m), -EOPNOTSUPP);

        route_allowed_methods(table, ELEMENTSOF(table), "/v1/sandboxes", allow, sizeof(allow));
        CHECK_STR(allow, "POST, GET");
        route_allowed_methods(table, ELEMENTSOF(table), "/v1/sandboxes/x", allow, sizeof(allow));
        CHECK_STR(allow, "GET, DELETE");
        route_allowed_methods(table, ELEMENTSOF(table), "/nothing", allow, sizeof(allow));
        CHECK_STR(allow, "");
        route_allowed_methods(table, ELEMENTSOF(table), "/v1/sandboxes", allow, 6);
        CHECK_STR(allow, "POST");
}

/* The gateway's own table: what dispatch() relies on. A route with credentials of its own checks them
 * itself too, and is not public; the takeover is the one. Every route with a sandbox in its path names it
 * first, so dispatch() can make a name its id. */
static void test_gateway_table(void) {
        size_t n_own = 0, n_any = 0;

        for (size_t i = 0; i < gateway_routes_count; i++) {
                const Route *r = &gateway_routes[i];

                CHECK(r->handler && r->operation);
                /* own credentials are checked by the route's own authorize(); an authorize() alone is a
                 * stricter check of the API key (POST /v1/images: role admin) */
                CHECK(!r->authenticate || r->authorize);
                if (r->authorize && !r->authenticate)
                        CHECK(r->action >= 0 && !(r->flags & ROUTE_PUBLIC));
                if (r->authenticate) {
                        n_own++;
                        CHECK(!(r->flags & ROUTE_PUBLIC));
                        CHECK(r->action >= 0);
                }
                if (r->flags & ROUTE_SANDBOX)
                        CHECK(strncmp(r->pattern, "/v1/sandboxes/{", 15) == 0);
                if (r->action < 0)
                        CHECK(r->flags & (ROUTE_PUBLIC | ROUTE_ANY_KEY));
                /* a route for any key is still a route for a key, and names no sandbox */
                if (r->flags & ROUTE_ANY_KEY) {
                        n_any++;
                        CHECK(r->action < 0 && !(r->flags & (ROUTE_PUBLIC | ROUTE_SANDBOX)));
                }
        }
        CHECK_INT(n_own, 1);
        CHECK_INT(n_any, 2); /* GET /v1/api-keys/self, POST /mcp */
}

int main(void) {
        test_patterns();
        test_find();
        test_gateway_table();
        return test_finish("test-http-route");
}
