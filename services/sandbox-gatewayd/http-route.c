/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The gateway's route table: {method, path pattern, action, handler} rows and the matching of a request. */
#include "http-route.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"

bool route_pattern_match(const char *pattern, const char *path, RouteMatch *ret) {
        const char *p = pattern, *s = path;
        size_t n_params = 0;

        while (*p && *s) {
                if (*p == '{') {
                        const char *pe = strchr(p, '}');
                        /* "{name*}" as the pattern's last segment takes the rest of the path, slashes too */
                        bool rest = pe && pe > p + 1 && pe[-1] == '*' && pe[1] == 0;
                        size_t len = rest ? strlen(s) : strcspn(s, "/");
                        if (!pe || len == 0 || len >= ROUTE_PARAM_MAX || n_params >= ROUTE_PARAMS_MAX)
                                return false;
                        if (ret) {
                                memcpy(ret->params[n_params], s, len);
                                ret->params[n_params][len] = 0;
                        }
                        n_params++;
                        p = pe + 1;
                        s += len;
                        continue;
                }
                if (*p != *s)
                        return false;
                p++;
                s++;
        }
        if (*p || *s)
                return false;
        if (ret)
                ret->n_params = n_params;
        return true;
}

int route_find(const Route *table, size_t n, const char *method, const char *path, RouteMatch *ret) {
        bool path_known = false;

        for (size_t i = 0; i < n; i++) {
                RouteMatch m = {};
                if (!route_pattern_match(table[i].pattern, path, &m))
                        continue;
                path_known = true;
                if (!streq(table[i].method, method))
                        continue;
                m.route = &table[i];
                *ret = m;
                return 0;
        }
        return path_known ? -EOPNOTSUPP : -ENOENT;
}

void route_allowed_methods(const Route *table, size_t n, const char *path, char *buf, size_t size) {
        size_t used = 0;

        if (size == 0)
                return;
        buf[0] = 0;
        for (size_t i = 0; i < n; i++) {
                if (!route_pattern_match(table[i].pattern, path, NULL))
                        continue;
                int k = snprintf(buf + used, size - used, "%s%s", used > 0 ? ", " : "", table[i].method);
                if (k < 0 || (size_t) k >= size - used) {
                        buf[used] = 0; /* whole methods only */
                        return;
                }
                used += (size_t) k;
        }
}
