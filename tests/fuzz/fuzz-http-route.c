/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes the gateway's route matching on its real table: "METHOD\nPATH" → route_find, the Allow list, and
 * the numeric path parameters' parse_decimal, a follow's positions (offset=, Last-Event-ID). */
#include <errno.h>

#include "fuzz.h"
#include "gateway-static.h"
#include "http-route.h"
#include "http-server.h"
#include "ini-util.h"
#include "process-follow.h"

static bool ends_with(const char *s, const char *suffix) {
        size_t a = strlen(s), b = strlen(suffix);
        return a >= b && streq(s + a - b, suffix);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *method, *path, allow[128], tiny[6];
        RouteMatch m = {};
        int r;

        method = fuzz_take_line(&data, &size);
        path = fuzz_strndup(data, size);
        if (!method || !path)
                goto finish;

        r = route_find(gateway_routes, gateway_routes_count, method, path, &m);
        FUZZ_ASSERT(r == 0 || r == -ENOENT || r == -EOPNOTSUPP);
        if (r == 0) {
                FUZZ_ASSERT(m.route);
                FUZZ_ASSERT(m.n_params <= ROUTE_PARAMS_MAX);
                for (size_t i = 0; i < m.n_params; i++) {
                        size_t n = strnlen(m.params[i], ROUTE_PARAM_MAX);
                        uint64_t v;

                        /* A parameter is one whole, non-empty segment that fits; only a pattern's last
                         * "{…*}" takes the rest of the path, slashes too. */
                        FUZZ_ASSERT(n > 0 && n < ROUTE_PARAM_MAX);
                        FUZZ_ASSERT(!strchr(m.params[i], '/') ||
                                    (i == m.n_params - 1 && ends_with(m.route->pattern, "*}")));
                        (void) parse_decimal(m.params[i], &v);
                }
                /* The dashboard's file names: one the checks accept names no way out of its directory. */
                if (ends_with(m.route->pattern, "{path*}") && static_name_check(m.params[0]) == 0) {
                        const char *name = m.params[0];
                        FUZZ_ASSERT(name[0] != '/' && name[0] != '.');
                        FUZZ_ASSERT(!strstr(name, "/.") && !strstr(name, "//"));
                        FUZZ_ASSERT(static_content_type(name));
                }
        }

        /* Both a roomy buffer and one too small for any list: always NUL-terminated, never overrun. */
        route_allowed_methods(gateway_routes, gateway_routes_count, path, allow, sizeof(allow));
        FUZZ_ASSERT(memchr(allow, 0, sizeof(allow)));
        route_allowed_methods(gateway_routes, gateway_routes_count, path, tiny, sizeof(tiny));
        FUZZ_ASSERT(memchr(tiny, 0, sizeof(tiny)));
        if (r == -EOPNOTSUPP)
                FUZZ_ASSERT(allow[0] != 0);

        /* The query values the routes read as numbers (offset=, length=) go through parse_decimal too. */
        {
                uint64_t v;
                (void) parse_decimal(path, &v);
        }
        /* A follow's offset= and Last-Event-ID: what parses prints back as the same position. */
        {
                uint64_t pos[2] = { 1, 2 }, again[2];
                char buf[FOLLOW_POSITION_MAX];

                r = follow_position_parse(path, pos);
                FUZZ_ASSERT(r == 0 || r == -EINVAL || r == -ENOMEM);
                if (r == 0) {
                        follow_position_format(pos, buf);
                        FUZZ_ASSERT(follow_position_parse(buf, again) == 0);
                        FUZZ_ASSERT(again[0] == pos[0] && again[1] == pos[1]);
                } else
                        FUZZ_ASSERT(pos[0] == 1 && pos[1] == 2);
        }
finish:
        free(method);
        free(path);
        return 0;
}
