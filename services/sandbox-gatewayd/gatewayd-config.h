/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-gatewayd's configuration: built-in defaults, sandbox-gatewayd.conf and its drop-ins. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#ifdef SYSCONFDIR
#define GATEWAY_CONFIG_DIR SYSCONFDIR "/sandboxd"
#else
#define GATEWAY_CONFIG_DIR "/etc/sandboxd"
#endif
#define GATEWAY_CONFIG_FILE GATEWAY_CONFIG_DIR "/sandbox-gatewayd.conf"
#define GATEWAY_CONFIG_DROPIN_DIR GATEWAY_CONFIG_DIR "/sandbox-gatewayd.conf.d"

#define GATEWAY_LISTEN_DEFAULT "127.0.0.1:8790"
#define GATEWAY_LISTEN_MAX 128
#define GATEWAY_ORIGINS_MAX 1024
#define GATEWAY_PATH_MAX 256
#define GATEWAY_KEY_STORE_MAX 1024

/* Where the dashboard's files are installed (meson's datadir, /usr/share). */
#ifdef DATADIR
#define GATEWAY_DASHBOARD_DIR_DEFAULT DATADIR "/sandboxd/dashboard"
#else
#define GATEWAY_DASHBOARD_DIR_DEFAULT "/usr/share/sandboxd/dashboard"
#endif

typedef struct GatewayConfig {
        char listen[GATEWAY_LISTEN_MAX]; /* ADDR:PORT, used when not socket-activated */
        uint64_t max_body_bytes;         /* request bodies above this get 413 */
        uint64_t max_image_bytes;        /* POST /v1/images?name=: an archive spooled to disk, above this 413 */
        uint64_t max_connections;        /* libmicrohttpd's connection limit */
        uint64_t connection_timeout_usec;/* an idle (stalled) client is closed after this */
        uint64_t max_connections_per_address; /* connections one client address may hold open */
        uint64_t header_timeout_usec;    /* a request's headers must be in by then (counted from the
                                          * connection's start, or the end of its previous answer) */
        uint64_t max_calls_per_member_key; /* bus calls in flight per key of role member; 429 beyond */
        uint64_t max_calls_per_admin_key;  /* ... and of role admin */
        uint64_t exec_burst_per_member_key; /* Execs a key of role member may start at once ... */
        uint64_t execs_per_sec_per_member_key; /* ... and then this many a second; 429 beyond */
        uint64_t exec_burst_per_admin_key;  /* the same for role admin */
        uint64_t execs_per_sec_per_admin_key;
        uint64_t bus_short_call_reserve; /* of each bus connection's room, what long calls (Exec) never take */
        uint64_t max_streams_per_key;    /* open SSE streams (watch, streamed exec) per key; 429 beyond */
        uint64_t watch_queue_max;        /* events queued for one watcher before it is dropped */
        uint64_t heartbeat_usec;         /* SSE comment lines this often */
        uint64_t takeover_token_ttl_usec;
        uint64_t bus_connections;        /* bus connections the requests are spread over */
        uint64_t json_depth_max;         /* nesting of request JSON */
        uint64_t refusal_burst;          /* refusals (401/403) a client address gets at once ... */
        uint64_t refusals_per_sec;       /* ... and then this many a second; beyond: 429 (refusal-limit.h) */
        uint64_t refusal_burst_total;    /* the same for all client addresses together */
        uint64_t refusals_per_sec_total;
        char takeover_origins[GATEWAY_ORIGINS_MAX]; /* space-separated Origins browsers may take over
                                                     * from; "*" any; empty: none */
        char dashboard_dir[GATEWAY_PATH_MAX];       /* the dashboard's files (GET /, /ui/…); "": off
                                                     * (DashboardDirectory=no) */
        uint64_t max_sandboxes_per_key;  /* live sandboxes a key may own (sandbox-quota.h); 429 beyond */
        char agent_listen[GATEWAY_LISTEN_MAX]; /* AgentListen=: ADDR:PORT of the capacity agent for HAProxy's
                                                * agent-check when systemd passes no "agent" socket; "": off */
        bool cluster_log;                /* ClusterLog=: GET /v1/log from every host's rows in PostgreSQL */
        char key_store[GATEWAY_KEY_STORE_MAX]; /* "": the SQLite file in the state directory (KeyStore=sqlite);
                                                * else a postgresql:// URI (docs/scale-out.md) */
} GatewayConfig;

/* Listen=127.0.0.1:8790, MaxBodyBytes=16M, MaxConnections=16384, ConnectionTimeoutSec=60,
 * MaxConnectionsPerAddress=1024, HeaderTimeoutSec=10, MaxCallsPerMemberKey=32, MaxCallsPerAdminKey=128,
 * ExecBurstPerMemberKey=50, ExecsPerSecPerMemberKey=5, ExecBurstPerAdminKey=1000, ExecsPerSecPerAdminKey=1000,
 * BusShortCallReserve=40, MaxStreamsPerKey=256, WatchQueueMax=1024, HeartbeatSec=15, TakeoverTokenTTLSec=30, BusConnections=4,
 * JSONDepthMax=32, RefusalBurst=600, RefusalsPerSec=10,
 * RefusalBurstTotal=6000, RefusalsPerSecTotal=100, DashboardDirectory=/usr/share/sandboxd/dashboard,
 * MaxSandboxesPerKey=64, KeyStore=sqlite, AgentListen=no, ClusterLog=no. */
void gateway_config_defaults(GatewayConfig *c);

/* Applies main_path, then every "*.conf" in dropin_dir in lexical order, on top of c; later assignments
 * win. Format: a "[Gateway]" section of Key=Value lines. Returns 0 and updates c; or, leaving c
 * untouched, -EINVAL with *ret_error = "file:line: what is wrong", another negative errno if a file
 * cannot be read, -ENOMEM. */
int gateway_config_load(GatewayConfig *c, const char *main_path, const char *dropin_dir, char **ret_error);

/* Splits "ADDR:PORT" ("127.0.0.1:8790", "[::1]:8790", "0.0.0.0:80") into a socket address.
 * Returns 0 or -EINVAL. */
struct sockaddr_storage;
int gateway_parse_listen(const char *s, struct sockaddr_storage *ret_sa, unsigned *ret_len);
/* Whether s is such an "ADDR:PORT": 0 or -EINVAL (for --listen=). */
int gateway_check_listen(const char *s);
