/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests of sandbox-gatewayd's configuration: defaults, files and drop-ins, bad values, Listen= addresses. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "gatewayd-config.h"
#include "macro.h"
#include "test-util.h"
#include "time-util.h"

static char dir[] = "/tmp/test-gatewayd-config.XXXXXX";

static const char *write_file(const char *name, const char *text) {
        static char paths[4][512];
        static unsigned n;
        char *path = paths[n++ % 4];
        FILE *f;

        snprintf(path, sizeof(paths[0]), "%s/%s", dir, name);
        f = fopen(path, "we");
        if (!f)
                abort();
        fputs(text, f);
        fclose(f);
        return path;
}

static void test_defaults(void) {
        GatewayConfig c;

        gateway_config_defaults(&c);
        CHECK_STR(c.listen, "127.0.0.1:8790");
        CHECK_U64(c.max_body_bytes, UINT64_C(16) << 20);
        CHECK_U64(c.max_streams_per_key, 256);
        CHECK_U64(c.max_sandboxes_per_key, 64);
        CHECK_U64(c.watch_queue_max, 1024);
        CHECK_U64(c.heartbeat_usec, 15 * USEC_PER_SEC);
        CHECK_U64(c.takeover_token_ttl_usec, 30 * USEC_PER_SEC);
        CHECK_U64(c.json_depth_max, 32);
        CHECK_U64(c.refusal_burst, 600);
        CHECK_U64(c.refusal_burst_total, 6000);
        CHECK_U64(c.refusals_per_sec_total, 100);
        CHECK_U64(c.refusals_per_sec, 10);
        CHECK_U64(c.max_connections_per_address, 1024);
        CHECK_U64(c.header_timeout_usec, 10 * USEC_PER_SEC);
        CHECK_U64(c.max_calls_per_member_key, 32);
        CHECK_U64(c.max_calls_per_admin_key, 128);
        CHECK_U64(c.exec_burst_per_member_key, 50);
        CHECK_U64(c.execs_per_sec_per_member_key, 5);
        CHECK_U64(c.exec_burst_per_admin_key, 1000);
        CHECK_U64(c.execs_per_sec_per_admin_key, 1000);
        CHECK_U64(c.bus_short_call_reserve, 40);
        CHECK_STR(c.key_store, ""); /* SQLite */
        CHECK_STR(c.dashboard_dir, GATEWAY_DASHBOARD_DIR_DEFAULT);
        CHECK(c.dashboard_dir[0] == '/' && strstr(c.dashboard_dir, "/sandboxd/dashboard"));
        /* missing files are fine */
        CHECK(gateway_config_load(&c, "/nonexistent/x.conf", "/nonexistent/x.conf.d", NULL) == 0);
}

static void test_load(void) {
        char dropins[600], *error = NULL;
        GatewayConfig c;
        const char *main_path;

        gateway_config_defaults(&c);
        main_path = write_file("main.conf", "[Gateway]\nListen=0.0.0.0:9000\nMaxBodyBytes=1M\nMaxStreamsPerKey=3\n"
                                            "ConnectionTimeoutSec=2min\nHeartbeatSec=5s\nWatchQueueMax=10\n");
        snprintf(dropins, sizeof(dropins), "%s/d", dir);
        CHECK(mkdir(dropins, 0755) == 0);
        write_file("d/10-a.conf", "[Gateway]\nMaxStreamsPerKey=7\nTakeoverTokenTTLSec=45\n"
                                  "DashboardDirectory=/srv/console\nRefusalBurst=5\nRefusalsPerSec=2\n"
                                  "RefusalBurstTotal=50\nRefusalsPerSecTotal=20\n"
                                  "MaxConnectionsPerAddress=8\nHeaderTimeoutSec=2s\nMaxCallsPerMemberKey=3\n"
                                  "MaxCallsPerAdminKey=9\nBusShortCallReserve=100\nMaxSandboxesPerKey=5\n"
                                  "ExecBurstPerMemberKey=4\nExecsPerSecPerMemberKey=1\nExecBurstPerAdminKey=40\n"
                                  "ExecsPerSecPerAdminKey=10\n");
        CHECK(gateway_config_load(&c, main_path, dropins, &error) == 0);
        CHECK_STR(c.listen, "0.0.0.0:9000");
        CHECK_U64(c.max_body_bytes, UINT64_C(1) << 20);
        CHECK_U64(c.max_streams_per_key, 7);
        CHECK_U64(c.max_sandboxes_per_key, 5);
        CHECK_U64(c.connection_timeout_usec, 120 * USEC_PER_SEC);
        CHECK_U64(c.heartbeat_usec, 5 * USEC_PER_SEC);
        CHECK_U64(c.watch_queue_max, 10);
        CHECK_U64(c.takeover_token_ttl_usec, 45 * USEC_PER_SEC);
        CHECK_STR(c.dashboard_dir, "/srv/console");
        CHECK_U64(c.refusal_burst, 5);
        CHECK_U64(c.refusal_burst_total, 50);
        CHECK_U64(c.refusals_per_sec_total, 20);
        CHECK_U64(c.refusals_per_sec, 2);
        CHECK_U64(c.max_connections_per_address, 8);
        CHECK_U64(c.header_timeout_usec, 2 * USEC_PER_SEC);
        CHECK_U64(c.max_calls_per_member_key, 3);
        CHECK_U64(c.max_calls_per_admin_key, 9);
        CHECK_U64(c.bus_short_call_reserve, 100);
        CHECK_U64(c.exec_burst_per_member_key, 4);
        CHECK_U64(c.execs_per_sec_per_member_key, 1);
        CHECK_U64(c.exec_burst_per_admin_key, 40);
        CHECK_U64(c.execs_per_sec_per_admin_key, 10);

        /* "no" turns the dashboard off */
        write_file("d/20-b.conf", "[Gateway]\nDashboardDirectory=no\n");
        CHECK(gateway_config_load(&c, main_path, dropins, &error) == 0);
        CHECK_STR(c.dashboard_dir, "");
        CHECK_STR(c.key_store, "");

        /* the shared key store, and back to SQLite by a later drop-in */
        write_file("d/30-pg.conf", "[Gateway]\nKeyStore=postgresql://gw@db.example/sandboxd?connect_timeout=1\n");
        CHECK(gateway_config_load(&c, main_path, dropins, &error) == 0);
        CHECK_STR(c.key_store, "postgresql://gw@db.example/sandboxd?connect_timeout=1");
        write_file("d/40-sqlite.conf", "[Gateway]\nKeyStore=sqlite\nClusterLog=yes\nAgentListen=10.0.0.1:8792\n");
        CHECK(gateway_config_load(&c, main_path, dropins, &error) == 0);
        CHECK_STR(c.key_store, "");
        CHECK(c.cluster_log);
        CHECK_STR(c.agent_listen, "10.0.0.1:8792");
        write_file("d/50-off.conf", "[Gateway]\nClusterLog=no\nAgentListen=no\n");
        CHECK(gateway_config_load(&c, main_path, dropins, &error) == 0);
        CHECK(!c.cluster_log);
        CHECK_STR(c.agent_listen, "");
}

static void expect_error(const char *text, const char *message) {
        char *error = NULL;
        GatewayConfig c, before;

        gateway_config_defaults(&c);
        before = c;
        CHECK_INT(gateway_config_load(&c, write_file("bad.conf", text), NULL, &error), -EINVAL);
        CHECK(error && strstr(error, message));
        if (error && !strstr(error, message))
                fprintf(stderr, "  got: %s\n", error);
        CHECK(memcmp(&c, &before, sizeof(c)) == 0); /* untouched */
        free(error);
}

static void test_bad(void) {
        expect_error("[Gateway]\nMaxBodyBytes=lots\n", "bad.conf:2: Invalid MaxBodyBytes=lots");
        expect_error("[Gateway]\nMaxBodyBytes=1G\n", "out of range");
        expect_error("[Gateway]\nMaxStreamsPerKey=0\n", "out of range");
        expect_error("[Gateway]\nMaxSandboxesPerKey=0\n", "out of range");
        expect_error("[Gateway]\nMaxSandboxesPerKey=1000001\n", "out of range");
        expect_error("[Gateway]\nRefusalsPerSec=0\n", "out of range");
        expect_error("[Gateway]\nMaxConnectionsPerAddress=0\n", "out of range");
        expect_error("[Gateway]\nHeaderTimeoutSec=0\n", "out of range");
        expect_error("[Gateway]\nMaxCallsPerMemberKey=0\n", "out of range");
        expect_error("[Gateway]\nBusShortCallReserve=120\n", "out of range");
        expect_error("[Gateway]\nExecBurstPerMemberKey=0\n", "out of range");
        expect_error("[Gateway]\nExecsPerSecPerMemberKey=0\n", "out of range");
        expect_error("[Gateway]\nExecBurstPerAdminKey=1000001\n", "out of range");
        expect_error("[Gateway]\nExecsPerSecPerAdminKey=1.5\n", "Invalid ExecsPerSecPerAdminKey=1.5");
        expect_error("[Gateway]\nListen=localhost\n", "Invalid Listen=localhost");
        expect_error("[Gateway]\nListen=1.2.3.4:99999\n", "Invalid Listen=");
        expect_error("[Gateway]\nColour=blue\n", "Unknown key Colour=");
        expect_error("[Gateway]\nDashboardDirectory=share/dashboard\n", "Invalid DashboardDirectory=");
        expect_error("[Gateway]\nDashboardDirectory=/usr/../etc\n", "Invalid DashboardDirectory=");
        expect_error("[Gateway]\nDashboardDirectory=/usr/share/..\n", "Invalid DashboardDirectory=");
        expect_error("[Gateway]\nDashboardDirectory=/a b\n", "Invalid DashboardDirectory=");
        expect_error("[Gateway]\nDashboardDirectory=yes\n", "Invalid DashboardDirectory=");
        expect_error("[Server]\nListen=1.2.3.4:1\n", "Unknown section [Server]");
        expect_error("[Gateway]\nKeyStore=mysql://db/x\n", "Invalid KeyStore=mysql://db/x");
        expect_error("[Gateway]\nKeyStore=\n", "Empty value for KeyStore=");
        expect_error("[Gateway]\nKeyStore=postgresql://db/x?colour=blue\n", "colour");
        expect_error("[Gateway]\nClusterLog=maybe\n", "Invalid ClusterLog=maybe");
        expect_error("[Gateway]\nAgentListen=8792\n", "Invalid AgentListen=8792");
}

static void test_listen(void) {
        struct sockaddr_storage sa;
        unsigned len;

        CHECK(gateway_parse_listen("127.0.0.1:8790", &sa, &len) == 0);
        CHECK(sa.ss_family == AF_INET && len == sizeof(struct sockaddr_in));
        CHECK(ntohs(((struct sockaddr_in *) &sa)->sin_port) == 8790);
        CHECK(gateway_parse_listen("[::1]:80", &sa, &len) == 0);
        CHECK(sa.ss_family == AF_INET6 && ntohs(((struct sockaddr_in6 *) &sa)->sin6_port) == 80);
        CHECK_INT(gateway_parse_listen("::1:80", &sa, &len), -EINVAL);
        CHECK_INT(gateway_parse_listen("127.0.0.1", &sa, &len), -EINVAL);
        CHECK_INT(gateway_parse_listen("127.0.0.1:0", &sa, &len), -EINVAL);
        CHECK_INT(gateway_parse_listen("127.0.0.1:-1", &sa, &len), -EINVAL);
        CHECK_INT(gateway_parse_listen(":80", &sa, &len), -EINVAL);
        CHECK_INT(gateway_parse_listen("[::1]80", &sa, &len), -EINVAL);
        CHECK_INT(gateway_parse_listen(NULL, &sa, &len), -EINVAL);
}

int main(void) {
        test_mkdtemp(dir);
        test_defaults();
        test_load();
        test_bad();
        test_listen();
        test_rm_rf(dir);
        return test_finish("test-gatewayd-config");
}
