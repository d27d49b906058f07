/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-gatewayd's configuration: built-in defaults, sandbox-gatewayd.conf and its drop-ins. */
#include "gatewayd-config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "bus-pool.h"
#include "ini-util.h"
#include "key-store.h"
#include "macro.h"
#include "time-util.h"

void gateway_config_defaults(GatewayConfig *c) {
        *c = (GatewayConfig) {
                .listen = GATEWAY_LISTEN_DEFAULT,
                .max_body_bytes = UINT64_C(16) << 20,
                .max_image_bytes = UINT64_C(8) << 30,
                .max_connections = 16384,
                .connection_timeout_usec = 60 * USEC_PER_SEC,
                .max_connections_per_address = 1024,
                .header_timeout_usec = 10 * USEC_PER_SEC,
                .max_calls_per_member_key = 32,
                .max_calls_per_admin_key = 128,
                .exec_burst_per_member_key = 50,
                .execs_per_sec_per_member_key = 5,
                .exec_burst_per_admin_key = 1000,
                .execs_per_sec_per_admin_key = 1000,
                .bus_short_call_reserve = 40,
                .max_streams_per_key = 256,
                .watch_queue_max = 1024,
                .heartbeat_usec = 15 * USEC_PER_SEC,
                .takeover_token_ttl_usec = 30 * USEC_PER_SEC,
                .bus_connections = 4,
                .json_depth_max = 32,
                .refusal_burst = 600,
                .refusals_per_sec = 10,
                .refusal_burst_total = 6000,
                .refusals_per_sec_total = 100,
                .dashboard_dir = GATEWAY_DASHBOARD_DIR_DEFAULT,
                .max_sandboxes_per_key = 64,
        };
}

int gateway_parse_listen(const char *s, struct sockaddr_storage *ret_sa, unsigned *ret_len) {
        char host[INET6_ADDRSTRLEN + 2];
        const char *colon, *port_s;
        uint64_t port;
        size_t n;

        if (!s)
                return -EINVAL;
        if (s[0] == '[') {
                const char *end = strchr(s, ']');
                if (!end || end[1] != ':')
                        return -EINVAL;
                n = (size_t) (end - s - 1);
                if (n == 0 || n >= sizeof(host))
                        return -EINVAL;
                memcpy(host, s + 1, n);
                host[n] = 0;
                port_s = end + 2;
        } else {
                colon = strrchr(s, ':');
                if (!colon)
                        return -EINVAL;
                n = (size_t) (colon - s);
                if (n == 0 || n >= sizeof(host))
                        return -EINVAL;
                memcpy(host, s, n);
                host[n] = 0;
                port_s = colon + 1;
        }
        if (parse_decimal(port_s, &port) < 0 || port == 0 || port > 65535)
                return -EINVAL;

        struct sockaddr_storage sa = {};
        if (s[0] != '[') {
                struct sockaddr_in *in = (struct sockaddr_in *) &sa;
                if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
                        return -EINVAL;
                in->sin_family = AF_INET;
                in->sin_port = htons((uint16_t) port);
                *ret_len = sizeof(struct sockaddr_in);
        } else {
                struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &sa;
                if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
                        return -EINVAL;
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons((uint16_t) port);
                *ret_len = sizeof(struct sockaddr_in6);
        }
        *ret_sa = sa;
        return 0;
}

int gateway_check_listen(const char *s) {
        struct sockaddr_storage sa;
        unsigned len;

        return gateway_parse_listen(s, &sa, &len);
}

typedef struct Loader {
        GatewayConfig c;
        char **error;
} Loader;

typedef enum ValueKind { KIND_COUNT, KIND_SIZE, KIND_SEC } ValueKind;

static const struct {
        const char *key;
        ValueKind kind;
        size_t offset;
        uint64_t min, max;
        const char *expected;
} settings[] = {
        { "MaxBodyBytes", KIND_SIZE, offsetof(GatewayConfig, max_body_bytes), 1024, UINT64_C(30) << 20,
          "a size from 1K to 30M, such as 16M" },
        { "MaxImageBytes", KIND_SIZE, offsetof(GatewayConfig, max_image_bytes), 1024, UINT64_C(1) << 40,
          "a size from 1K to 1T, such as 8G" },
        { "MaxConnections", KIND_COUNT, offsetof(GatewayConfig, max_connections), 16, 1000000,
          "a number from 16 to 1000000" },
        { "ConnectionTimeoutSec", KIND_SEC, offsetof(GatewayConfig, connection_timeout_usec), USEC_PER_SEC,
          UINT64_C(86400) * USEC_PER_SEC, "a time from 1s to 1d, such as 60s" },
        { "MaxConnectionsPerAddress", KIND_COUNT, offsetof(GatewayConfig, max_connections_per_address), 1,
          1000000, "a number from 1 to 1000000" },
        { "HeaderTimeoutSec", KIND_SEC, offsetof(GatewayConfig, header_timeout_usec), USEC_PER_SEC,
          UINT64_C(3600) * USEC_PER_SEC, "a time from 1s to 1h, such as 10s" },
        { "MaxCallsPerMemberKey", KIND_COUNT, offsetof(GatewayConfig, max_calls_per_member_key), 1, 100000,
          "a number from 1 to 100000" },
        { "MaxCallsPerAdminKey", KIND_COUNT, offsetof(GatewayConfig, max_calls_per_admin_key), 1, 100000,
          "a number from 1 to 100000" },
        { "ExecBurstPerMemberKey", KIND_COUNT, offsetof(GatewayConfig, exec_burst_per_member_key), 1, 1000000,
          "a number from 1 to 1000000" },
        { "ExecsPerSecPerMemberKey", KIND_COUNT, offsetof(GatewayConfig, execs_per_sec_per_member_key), 1,
          1000000, "a number from 1 to 1000000" },
        { "ExecBurstPerAdminKey", KIND_COUNT, offsetof(GatewayConfig, exec_burst_per_admin_key), 1, 1000000,
          "a number from 1 to 1000000" },
        { "ExecsPerSecPerAdminKey", KIND_COUNT, offsetof(GatewayConfig, execs_per_sec_per_admin_key), 1,
          1000000, "a number from 1 to 1000000" },
        { "BusShortCallReserve", KIND_COUNT, offsetof(GatewayConfig, bus_short_call_reserve), 1,
          BUS_POOL_PENDING_MAX - 1, "a number from 1 to 119" },
        { "MaxStreamsPerKey", KIND_COUNT, offsetof(GatewayConfig, max_streams_per_key), 1, 100000,
          "a number from 1 to 100000" },
        { "WatchQueueMax", KIND_COUNT, offsetof(GatewayConfig, watch_queue_max), 1, 1000000,
          "a number from 1 to 1000000" },
        { "HeartbeatSec", KIND_SEC, offsetof(GatewayConfig, heartbeat_usec), USEC_PER_SEC,
          UINT64_C(3600) * USEC_PER_SEC, "a time from 1s to 1h, such as 15s" },
        { "TakeoverTokenTTLSec", KIND_SEC, offsetof(GatewayConfig, takeover_token_ttl_usec), USEC_PER_SEC,
          UINT64_C(3600) * USEC_PER_SEC, "a time from 1s to 1h, such as 30s" },
        { "BusConnections", KIND_COUNT, offsetof(GatewayConfig, bus_connections), 1, 64,
          "a number from 1 to 64" },
        { "JSONDepthMax", KIND_COUNT, offsetof(GatewayConfig, json_depth_max), 2, 64,
          "a number from 2 to 64" },
        { "RefusalBurst", KIND_COUNT, offsetof(GatewayConfig, refusal_burst), 1, 1000000,
          "a number from 1 to 1000000" },
        { "RefusalsPerSec", KIND_COUNT, offsetof(GatewayConfig, refusals_per_sec), 1, 1000000,
          "a number from 1 to 1000000" },
        { "RefusalBurstTotal", KIND_COUNT, offsetof(GatewayConfig, refusal_burst_total), 1, 1000000,
          "a number from 1 to 1000000" },
        { "RefusalsPerSecTotal", KIND_COUNT, offsetof(GatewayConfig, refusals_per_sec_total), 1, 1000000,
          "a number from 1 to 1000000" },
        { "MaxSandboxesPerKey", KIND_COUNT, offsetof(GatewayConfig, max_sandboxes_per_key), 1, 1000000,
          "a number from 1 to 1000000" },
};

/* Does the path end in a "." or ".." segment? */
static bool endswith_dots(const char *s) {
        size_t n = strlen(s);
        return (n >= 2 && streq(s + n - 2, "/.")) || (n >= 3 && streq(s + n - 3, "/.."));
}

static int gateway_assignment(const IniPosition *at, const char *key, const char *value, void *userdata) {
        Loader *l = userdata;
        uint64_t v;
        int r;

        if (streq(key, "Listen")) {
                struct sockaddr_storage sa;
                unsigned len;
                if (strlen(value) >= sizeof(l->c.listen) || gateway_parse_listen(value, &sa, &len) < 0)
                        return ini_bad_value(l->error, at, key, value, -EINVAL,
                                             "ADDR:PORT, such as 127.0.0.1:8790 or [::1]:8790");
                snprintf(l->c.listen, sizeof(l->c.listen), "%s", value);
                return 0;
        }
        if (streq(key, "TakeoverOrigins")) {
                /* Origins as browsers send them: scheme://host[:port], no path; or "*". */
                bool ok = strlen(value) < sizeof(l->c.takeover_origins);
                for (const char *p = value; ok && *p; p++)
                        ok = (unsigned char) *p > ' ' || *p == ' ';
                if (!ok)
                        return ini_bad_value(l->error, at, key, value, -EINVAL,
                                             "space-separated origins such as https://console.example, or *");
                snprintf(l->c.takeover_origins, sizeof(l->c.takeover_origins), "%s", value);
                return 0;
        }
        if (streq(key, "DashboardDirectory")) {
                /* An absolute path without "." or ".." segments; "no" turns the dashboard off (stored as
                 * ""). */
                if (streq(value, "no")) {
                        l->c.dashboard_dir[0] = 0;
                        return 0;
                }
                bool ok = strlen(value) < sizeof(l->c.dashboard_dir) && value[0] == '/';
                for (const char *p = value; ok && *p; p++)
                        ok = (unsigned char) *p > ' ' && *p != 0x7f;
                ok = ok && !strstr(value, "/./") && !strstr(value, "/../") && !endswith_dots(value);
                if (!ok)
                        return ini_bad_value(l->error, at, key, value, -EINVAL,
                                             "an absolute directory such as /usr/share/sandboxd/dashboard, or no");
                snprintf(l->c.dashboard_dir, sizeof(l->c.dashboard_dir), "%s", value);
                return 0;
        }
        if (streq(key, "ClusterLog")) {
                r = parse_boolean(value);
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, -EINVAL, "yes or no");
                l->c.cluster_log = r;
                return 0;
        }
        if (streq(key, "AgentListen")) {
                struct sockaddr_storage sa;
                unsigned len;
                if (streq(value, "no")) {
                        l->c.agent_listen[0] = 0;
                        return 0;
                }
                if (strlen(value) >= sizeof(l->c.agent_listen) || gateway_parse_listen(value, &sa, &len) < 0)
                        return ini_bad_value(l->error, at, key, value, -EINVAL,
                                             "ADDR:PORT, such as 127.0.0.1:8792, or no");
                snprintf(l->c.agent_listen, sizeof(l->c.agent_listen), "%s", value);
                return 0;
        }
        if (streq(key, "KeyStore")) {
                /* "sqlite" (the default: keys.db in the state directory) or a libpq URI */
                _cleanup_free_ char *why = NULL;
                if (streq(value, "sqlite")) {
                        l->c.key_store[0] = 0;
                        return 0;
                }
                if (strlen(value) >= sizeof(l->c.key_store) || key_store_check_url(value, &why) < 0) {
                        _cleanup_free_ char *expected = NULL;
                        if (asprintf(&expected, "sqlite, or a PostgreSQL URI such as postgresql://user@host/db%s%s",
                                     why ? ": " : "", strempty(why)) < 0)
                                return -ENOMEM;
                        return ini_bad_value(l->error, at, key, value, -EINVAL, expected);
                }
                snprintf(l->c.key_store, sizeof(l->c.key_store), "%s", value);
                return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(settings); i++) {
                if (!streq(key, settings[i].key))
                        continue;
                switch (settings[i].kind) {
                case KIND_COUNT:
                        r = parse_decimal(value, &v);
                        break;
                case KIND_SIZE:
                        r = parse_size(value, &v);
                        break;
                default:
                        r = parse_sec(value, &v);
                        break;
                }
                if (r >= 0 && (v < settings[i].min || v > settings[i].max))
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r, settings[i].expected);
                *(uint64_t *) ((char *) &l->c + settings[i].offset) = v;
                return 0;
        }
        return ini_error(l->error, at, "Unknown key %s= in section [Gateway]", key);
}

static int gateway_section(const IniPosition *at, const char *name, void *userdata) {
        Loader *l = userdata;

        if (!streq(name, "Gateway"))
                return ini_error(l->error, at, "Unknown section [%s] (expected [Gateway])", name);
        return 0;
}

int gateway_config_load(GatewayConfig *c, const char *main_path, const char *dropin_dir, char **ret_error) {
        static const IniHandler handler = { .section = gateway_section, .assignment = gateway_assignment };
        Loader l = { .error = ret_error };
        int r;

        if (!c)
                return -EINVAL;
        l.c = *c;
        r = ini_parse_files(main_path, dropin_dir, &handler, &l, ret_error);
        if (r < 0)
                return r;
        *c = l.c;
        return 0;
}
