/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-gatewayd's state: the event loop, bus connections, the key store, the HTTP server, config. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "bus-pool.h"
#include "capacity-agent.h"
#include "cluster-log.h"
#include "daemon-util.h"
#include "gatewayd-config.h"
#include "hashmap.h"
#include "key-store.h"
#include "sandbox-quota.h"
#include "sandboxd-bus.h"
#include "sandboxd-config.h"

#define GATEWAYD_STATE_DIR "/var/lib/sandbox-gatewayd"
#define GATEWAYD_DB_FILE "keys.db"

/* Bus calls that are not Execs: well above anything sandboxd does, below "for ever". */
#define GATEWAY_CALL_TIMEOUT_USEC (UINT64_C(120) * USEC_PER_SEC)

typedef struct HttpServer HttpServer;
typedef struct KeySession KeySession;
typedef struct RefusalLimit RefusalLimit;
typedef struct Watcher Watcher;
typedef struct Follow Follow;

typedef struct Manager {
        sd_event *event;
        sd_bus *bus;      /* owns org.sandboxd.gateway1, serves Keys */
        /* receives EntryAdded: not the bus that owns our name, whose bus policy lets only root send to it */
        sd_bus *signal_bus;
        BusPool *pool;    /* requests' calls */
        GatewayConfig config;
        SandboxdConfig sandboxd;
        char *state_dir;
        KeyStore *keys;
        HttpServer *server;
        const char *listen_override; /* --listen */

        Hashmap *streams; /* key id → open SSE streams (uintptr_t) */
        Hashmap *calls;   /* key id → bus calls in flight for its requests */
        SandboxQuota *sandbox_quota;      /* sandboxes per key, creations in flight (MaxSandboxesPerKey=) */
        Watcher *watchers;
        Follow *follows;  /* GET …/output?follow=true streams (process-follow.c) */
        /* SSE streams and takeovers, each ended when its key is revoked or expires (key-sessions.c) */
        KeySession *key_sessions;
        sd_event_source *key_check;       /* runs while key_sessions is not empty */
        uint64_t key_data_version;        /* keys.db's data_version at the last check */
        bool key_data_version_known;
        sd_event_source *heartbeat;
        RefusalLimit *refusals;           /* each client address's budget of 401/403 answers */
        sd_event_source *refusal_timer;   /* writes the summary rows of the throttled */
        /* each key's budget of Exec starts, by role (the same token buckets as refusals, keyed by key id) */
        RefusalLimit *exec_starts_member, *exec_starts_admin;
        uint64_t audit_seq;               /* numbers this process's audit rows, for their keys */
        unsigned audit_pending;           /* Record calls not answered yet */
        bool exiting;                     /* stopping: the loop ends once audit_pending is 0 */
        sd_event_source *exit_timer;      /* ... or when this fires */
        sd_bus_slot *entry_match, *keys_slot;
        sd_event_source *sigterm, *sigint;
        CapacityAgent *capacity_agent;    /* AgentListen= or systemd's "agent" socket; NULL: off */
        ClusterLog *cluster_log;          /* ClusterLog=yes: GET /v1/log from PostgreSQL; NULL: off */
} Manager;

int manager_new(const DaemonOptions *o, Manager **ret, char **ret_error);
Manager *manager_free(Manager *m);
int manager_startup(Manager *m);
int manager_run(Manager *m);

/* Writes the summary rows of clients whose refusals went over their budget, and of keys whose Exec starts
 * did (all of them, or those quiet for a while). */
void manager_flush_refusals(Manager *m, bool all);

/* An Exec start for key k (ExecBurstPer{Member,Admin}Key=, ExecsPerSecPer{Member,Admin}Key=): 0 if it
 * may start one now (and it is spent); -EBUSY if its budget is empty, with *ret_retry_after_sec the
 * seconds until it has room (at least 1). Refused starts are counted for one summary row per key (operation
 * "exec", event "blocked") once the key has been refused none for a while (manager_flush_refusals()). */
int manager_exec_start_take(Manager *m, const ApiKey *k, uint64_t *ret_retry_after_sec);
/* The budget of key role role: burst, per second. */
void manager_exec_start_budget(Manager *m, KeyRole role, uint64_t *ret_burst, uint64_t *ret_per_sec);

/* Records a row with sandbox-auditd, fire and forget (a failure is logged). Any string may be NULL and
 * hold anything: each is made valid UTF-8 of a length sandbox-auditd takes, and a row it refuses all the
 * same is recorded again with what it held escaped in its detail. */
void manager_audit(Manager *m, const char *operation, const char *event, const char *session_id,
                   const char *account_id, const char *request_id, const char *detail_json);

/* The same for a row about a sandbox as a request's path named it (id, name, or anything at all): the
 * row has that sandbox's id as its session only if sandboxd says it exists, else no session (the path
 * is for the detail to say). Nobody writes rows into a sandbox's log by naming one that is not there.
 * source is "agent" or "human_takeover" (a constant: the row keeps the pointer). */
void manager_audit_sandbox(Manager *m, const char *operation, const char *event, const char *source,
                           const char *named, const char *account_id, const char *request_id,
                           const char *detail_json);

/* Open SSE streams per key: acquire returns -EBUSY at MaxStreamsPerKey=. */
int manager_stream_acquire(Manager *m, const char *key_id);
void manager_stream_release(Manager *m, const char *key_id);

/* Bus calls in flight per key: acquire returns -EBUSY at MaxCallsPerMemberKey=/MaxCallsPerAdminKey=. */
int manager_call_acquire(Manager *m, const ApiKey *k);
void manager_call_release(Manager *m, const char *key_id);
uint64_t manager_calls_max(Manager *m, KeyRole role);

/* The exec call timeout for a sandbox type and a requested timeout (0 = the type's default). */
uint64_t manager_exec_call_timeout(Manager *m, const char *type, uint64_t timeout_seconds);
