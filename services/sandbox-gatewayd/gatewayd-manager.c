/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-gatewayd's state: the event loop, bus connections, the key store, the HTTP server, config. */
#include "gatewayd-manager.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>

#include "audit-row.h"
#include "audit-watch.h"
#include "daemon-util.h"
#include "gatewayd-keys.h"
#include "http-server.h"
#include "key-sessions.h"
#include "log.h"
#include "macro.h"
#include "refusal-limit.h"
#include "sandbox-id.h"
#include "time-util.h"

/* --- audit -------------------------------------------------------------------------------------- */

/* sandbox-auditd's limits on a row's strings (audit-store.h): a longer one gets the row refused. */
#define AUDIT_KEY_MAX_ 128
#define AUDIT_ACCOUNT_ID_MAX_ 256
#define AUDIT_REQUEST_ID_MAX_ 128
/* What of a refused row's detail its escaped copy keeps. */
#define AUDIT_ESCAPED_DETAIL_MAX 2048U

typedef struct AuditCall {
        Manager *manager;
        char *key, *operation, *event, *session_id, *account_id, *request_id, *detail;
        char *named; /* the sandbox as a request's path named it, until it is known to exist */
        const char *source; /* "agent" or "human_takeover": a constant, not owned */
        uint64_t started_at;
        bool escaped;
} AuditCall;

static void audit_call_free(AuditCall *c) {
        free(c->key);
        free(c->operation);
        free(c->event);
        free(c->session_id);
        free(c->account_id);
        free(c->request_id);
        free(c->detail);
        free(c->named);
        free(c);
}

/* Every string was made valid text of a length sandbox-auditd takes when the call was made: nothing
 * here can fail on what a client sent. */
static int audit_build(sd_bus_message *m, void *userdata) {
        AuditCall *c = userdata;
        AuditRow row = {
                .key = c->key,
                .session_id = c->session_id,
                .account_id = c->account_id,
                .source = c->source,
                .operation = c->operation,
                .event = c->event,
                .detail = c->detail,
                .started_at = c->started_at,
                .request_id = c->request_id[0] ? c->request_id : NULL,
        };

        return audit_row_append(m, &row);
}

static void audit_done(AuditCall *c) {
        Manager *m = c->manager;

        audit_call_free(c);
        m->audit_pending--;
        if (m->exiting && m->audit_pending == 0)
                (void) sd_event_exit(m->event, 0);
}

static void audit_send(AuditCall *c);

/* sandbox-auditd refused the row as it was: it is recorded anyway, with no session, and what it held
 * escaped in its detail as one JSON string, with the reason it was refused. */
static int audit_escape(AuditCall *c, const char *why) {
        char *detail = NULL;
        int r;

        r = audit_escaped_detail(c->session_id, c->detail, why, AUDIT_ESCAPED_DETAIL_MAX, &detail);
        if (r < 0)
                return r;
        free(c->detail);
        c->detail = detail;
        free(c->session_id);
        c->session_id = NULL;
        c->escaped = true;
        return 0;
}

static void audit_reply(sd_bus_message *reply, const sd_bus_error *error, void *userdata) {
        AuditCall *c = userdata;

        if (sd_bus_error_is_set(error)) {
                if (!c->escaped && sd_bus_error_has_name(error, SD_BUS_ERROR_INVALID_ARGS) &&
                    audit_escape(c, error->message) >= 0) {
                        log_msg(LOG_WARNING,
                                "sandbox-auditd refused the row %s/%s of request %s (%s): recording it escaped.",
                                c->operation, c->event, c->request_id, strna(error->message));
                        audit_send(c);
                        return;
                }
                log_msg(LOG_WARNING, "Could not record %s/%s of request %s: %s", c->operation, c->event,
                        c->request_id, strna(error->message));
        }
        audit_done(c);
}

static void audit_send(AuditCall *c) {
        int r;

        r = bus_pool_call(c->manager->pool, AUDITD_BUS_NAME, AUDITD_BUS_PATH, AUDITD_LOG_INTERFACE, "Record",
                          audit_build, audit_reply, c, GATEWAY_CALL_TIMEOUT_USEC);
        if (r < 0) {
                log_msg(LOG_WARNING, "Could not record %s/%s: %s", c->operation, c->event, strerror(-r));
                audit_done(c);
        }
}

static AuditCall *audit_call_new(Manager *m, const char *operation, const char *event, const char *account_id,
                                 const char *request_id, const char *detail_json) {
        AuditCall *c;
        char rid[49];

        c = calloc(1, sizeof(AuditCall));
        if (!c)
                return NULL;
        c->manager = m;
        c->source = "agent";
        c->started_at = now_usec(CLOCK_REALTIME);
        if (text_for_bus(request_id, AUDIT_REQUEST_ID_MAX_, &c->request_id) < 0 ||
            text_for_bus(account_id, AUDIT_ACCOUNT_ID_MAX_, &c->account_id) < 0 ||
            text_for_bus(operation, 64, &c->operation) < 0 || text_for_bus(event, 64, &c->event) < 0 ||
            (detail_json && text_for_bus(detail_json, SIZE_MAX, &c->detail) < 0))
                goto fail;
        /* The idempotency key: one row per request and outcome, kept for the row's retries. The sequence
         * number tells apart rows without a request id made in the same microsecond: the summaries of
         * several throttled clients, written in one go, were taken for one row and all but one lost. The
         * request id is cut so that the key stays within sandbox-auditd's limit. */
        snprintf(rid, sizeof(rid), "%s", c->request_id);
        if (asprintf(&c->key, "gateway:%s:%s:%s:%" PRIu64 ":%" PRIu64, rid, c->operation, c->event,
                     c->started_at, ++m->audit_seq) < 0) {
                c->key = NULL;
                goto fail;
        }
        if (strlen(c->key) > AUDIT_KEY_MAX_)
                c->key[AUDIT_KEY_MAX_] = 0; /* ASCII but for the request id, which fits */
        m->audit_pending++;
        return c;
fail:
        log_msg(LOG_WARNING, "Could not record %s/%s: out of memory", operation, event);
        audit_call_free(c);
        return NULL;
}

void manager_audit(Manager *m, const char *operation, const char *event, const char *session_id,
                   const char *account_id, const char *request_id, const char *detail_json) {
        AuditCall *c;

        c = audit_call_new(m, operation, event, account_id, request_id, detail_json);
        if (!c)
                return;
        if (session_id && !(c->session_id = strdup(session_id))) {
                log_msg(LOG_WARNING, "Could not record %s/%s: out of memory", operation, event);
                return audit_done(c);
        }
        audit_send(c);
}

/* The row goes to a sandbox's log only once sandboxd says the sandbox exists, under its id. */
static void on_audit_sandbox_id(sd_bus_message *reply, const sd_bus_error *error, void *userdata) {
        AuditCall *c = userdata;
        const char *id;

        if (!sd_bus_error_is_set(error) && sd_bus_message_read(reply, "v", "s", &id) >= 0 &&
            sandbox_id_is_valid(id))
                c->session_id = strdup(id); /* NULL: no session, as for any other failure */
        audit_send(c);
}

static int build_named(sd_bus_message *m, void *userdata) {
        AuditCall *c = userdata;
        return sd_bus_message_append(m, "s", c->named);
}

static int build_get_id(sd_bus_message *m, void *userdata) {
        return sd_bus_message_append(m, "ss", SANDBOXD_SANDBOX_INTERFACE, "Id");
}

static void on_audit_sandbox(sd_bus_message *reply, const sd_bus_error *error, void *userdata) {
        AuditCall *c = userdata;
        const char *path;

        if (sd_bus_error_is_set(error) || sd_bus_message_read(reply, "o", &path) < 0)
                return audit_send(c);
        if (sandbox_id_is_valid(c->named)) {
                c->session_id = TAKE_PTR(c->named);
                return audit_send(c);
        }
        if (bus_pool_call(c->manager->pool, SANDBOXD_BUS_NAME, path, "org.freedesktop.DBus.Properties",
                          "Get", build_get_id, on_audit_sandbox_id, c, GATEWAY_CALL_TIMEOUT_USEC) < 0)
                audit_send(c);
}

void manager_audit_sandbox(Manager *m, const char *operation, const char *event, const char *source,
                           const char *named, const char *account_id, const char *request_id,
                           const char *detail_json) {
        AuditCall *c;

        assert(source && (streq(source, "agent") || streq(source, "human_takeover")));

        c = audit_call_new(m, operation, event, account_id, request_id, detail_json);
        if (!c)
                return;
        c->source = source;
        /* Anything else names no sandbox there can be: no need to ask. */
        if (!named || !(sandbox_id_is_valid(named) || name_is_valid(named)))
                return audit_send(c);
        c->named = strdup(named);
        if (!c->named || bus_pool_call(m->pool, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                       SANDBOXD_MANAGER_INTERFACE, "GetSandbox", build_named,
                                       on_audit_sandbox, c, GATEWAY_CALL_TIMEOUT_USEC) < 0)
                audit_send(c);
}

static void on_keys_changed(const char *operation, const ApiKey *k, const char *account_id, void *userdata) {
        Manager *m = userdata;
        _cleanup_free_ char *detail = NULL;
        json_object *o = NULL;

        if (api_key_to_json(k, &o) >= 0) {
                detail = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
                json_object_put(o);
        }
        manager_audit(m, operation, "finished", NULL, account_id, NULL, detail);
        /* Streams of the key end now, not at the next check. */
        if (streq(operation, "api_key.revoke"))
                key_sessions_check(m);
}

/* --- streams per key ---------------------------------------------------------------------------- */

/* The map stores key pointers without copying: each entry owns its key string. */
typedef struct StreamCount {
        uint64_t n;
        char key[];
} StreamCount;

static int count_acquire(Hashmap *h, const char *key_id, uint64_t max) {
        StreamCount *c = hashmap_get(h, key_id);
        int r;

        if (c) {
                if (c->n >= max)
                        return -EBUSY;
                c->n++;
                return 0;
        }
        if (max == 0)
                return -EBUSY;
        c = malloc(sizeof(StreamCount) + strlen(key_id) + 1);
        if (!c)
                return -ENOMEM;
        c->n = 1;
        strcpy(c->key, key_id);
        r = hashmap_put(h, c->key, c);
        if (r < 0) {
                free(c);
                return r;
        }
        return 0;
}

static void count_release(Hashmap *h, const char *key_id) {
        StreamCount *c = hashmap_get(h, key_id);

        if (!c)
                return;
        if (--c->n == 0) {
                (void) hashmap_remove(h, key_id);
                free(c);
        }
}

static void count_free_all(Hashmap *h) {
        size_t state = 0;
        void *v;

        if (!h)
                return;
        while (hashmap_iterate(h, &state, &v, NULL))
                free(v);
        hashmap_free(h);
}

int manager_stream_acquire(Manager *m, const char *key_id) {
        return count_acquire(m->streams, key_id, m->config.max_streams_per_key);
}

void manager_stream_release(Manager *m, const char *key_id) {
        count_release(m->streams, key_id);
}

uint64_t manager_calls_max(Manager *m, KeyRole role) {
        return role == KEY_ROLE_ADMIN ? m->config.max_calls_per_admin_key : m->config.max_calls_per_member_key;
}

int manager_call_acquire(Manager *m, const ApiKey *k) {
        return count_acquire(m->calls, k->id, manager_calls_max(m, k->role));
}

void manager_call_release(Manager *m, const char *key_id) {
        count_release(m->calls, key_id);
}

uint64_t manager_exec_call_timeout(Manager *m, const char *type, uint64_t timeout_seconds) {
        uint64_t usec = 0;

        /* sandboxd ends the command at its timeout (the type's default when none is given, capped by the
         * type's maximum); the call must outlive that by enough for the reply. Without the type, the
         * longest any type allows. */
        for (size_t i = 0; i < m->sandboxd.n_types; i++) {
                const SandboxType *t = &m->sandboxd.types[i];
                uint64_t u;
                if (type && !streq(t->name, type))
                        continue;
                if (timeout_seconds > 0)
                        u = timeout_seconds > t->max_timeout_usec / USEC_PER_SEC ? t->max_timeout_usec
                                                                                 : timeout_seconds * USEC_PER_SEC;
                else
                        u = t->default_timeout_usec;
                usec = MAX(usec, u);
        }
        if (usec == 0)
                usec = UINT64_C(24) * 3600 * USEC_PER_SEC;
        return usec + 60 * USEC_PER_SEC;
}

/* --- life cycle --------------------------------------------------------------------------------- */

static int on_exit_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        log_msg(LOG_WARNING, "Stopping with %u audit rows not confirmed by sandbox-auditd.", m->audit_pending);
        return sd_event_exit(m->event, 0);
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;

        if (m->exiting)
                return sd_event_exit(m->event, 0); /* asked twice: go now */
        (void) sd_notify(false, "STOPPING=1\nSTATUS=Shutting down.");
        /* The throttled get their row while the bus is there. And the loop goes on until sandbox-auditd
         * has answered every row sent: it checks who sent each, which it cannot once the sender's
         * connection is gone, so a row sent just before the exit was refused and lost. At most 5 s. */
        manager_flush_refusals(m, true);
        m->exiting = true;
        if (m->audit_pending == 0)
                return sd_event_exit(m->event, 0);
        if (sd_event_add_time_relative(m->event, &m->exit_timer, CLOCK_MONOTONIC, 5 * USEC_PER_SEC, USEC_PER_MSEC,
                                       on_exit_timer, m) < 0)
                return sd_event_exit(m->event, 0);
        return 0;
}

int manager_new(const DaemonOptions *o, Manager **ret, char **ret_error) {
        Manager *m;
        int r;

        m = calloc(1, sizeof(Manager));
        if (!m)
                return -ENOMEM;
        gateway_config_defaults(&m->config);
        r = gateway_config_load(&m->config, o->config, o->config_dir, ret_error);
        if (r < 0)
                goto fail;
        /* sandboxd's types: the limits a sandbox object shows and how long an Exec may take */
        sandboxd_config_defaults(&m->sandboxd);
        (void) sandboxd_config_load(&m->sandboxd, SANDBOXD_CONFIG_FILE, SANDBOXD_CONFIG_DROPIN_DIR, NULL);
        m->listen_override = o->listen;

        r = daemon_state_dir(GATEWAYD_STATE_DIR, &m->state_dir);
        if (r < 0)
                goto fail;
        m->streams = hashmap_new();
        m->calls = hashmap_new();
        if (!m->streams || !m->calls) {
                r = -ENOMEM;
                goto fail;
        }
        r = sandbox_quota_new(&m->sandbox_quota);
        if (r < 0)
                goto fail;

        r = daemon_event_new(on_signal, m, &m->event, &m->sigterm, &m->sigint);
        if (r < 0)
                goto fail;
        *ret = m;
        return 0;
fail:
        manager_free(m);
        return r;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        http_server_free(m->server);
        capacity_agent_free(m->capacity_agent);
        cluster_log_free(m->cluster_log);
        watchers_free_all(m);
        key_sessions_free_all(m);
        sd_event_source_disable_unref(m->heartbeat);
        sd_event_source_disable_unref(m->refusal_timer);
        refusal_limit_free(m->refusals);
        refusal_limit_free(m->exec_starts_member);
        refusal_limit_free(m->exec_starts_admin);
        sandbox_quota_free(m->sandbox_quota);
        sd_event_source_disable_unref(m->exit_timer);
        sd_event_source_disable_unref(m->sigterm);
        sd_event_source_disable_unref(m->sigint);
        sd_bus_slot_unref(m->entry_match);
        sd_bus_slot_unref(m->keys_slot);
        bus_pool_free(m->pool);
        sd_bus_flush_close_unref(m->bus);
        sd_bus_flush_close_unref(m->signal_bus);
        key_store_free(m->keys);
        count_free_all(m->streams);
        count_free_all(m->calls);
        sd_event_unref(m->event);
        sandboxd_config_done(&m->sandboxd);
        free(m->state_dir);
        free(m);
        return NULL;
}

static void raise_nofile(Manager *m) {
        struct rlimit rl;

        /* Every connection is a descriptor: take what the unit allows (LimitNOFILE=). */
        if (getrlimit(RLIMIT_NOFILE, &rl) >= 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
        if (getrlimit(RLIMIT_NOFILE, &rl) >= 0 && rl.rlim_cur != RLIM_INFINITY &&
            m->config.max_connections + 256 > rl.rlim_cur) {
                uint64_t n = rl.rlim_cur > 512 ? rl.rlim_cur - 256 : 256;
                log_msg(LOG_NOTICE, "MaxConnections=%" PRIu64 " lowered to %" PRIu64 " (NOFILE limit %" PRIu64 ").",
                        m->config.max_connections, n, (uint64_t) rl.rlim_cur);
                m->config.max_connections = n;
        }
}

/* --- refusals over a client's budget (refusal-limit.h) ------------------------------------------ */

#define REFUSAL_FLUSH_USEC (10 * USEC_PER_SEC) /* a client quiet this long gets its summary row */

static void refusal_summary(const char *client, uint64_t throttled, uint64_t first, uint64_t last,
                            void *userdata) {
        Manager *m = userdata;
        uint64_t mono = now_usec(CLOCK_MONOTONIC), real = now_usec(CLOCK_REALTIME);
        char from[RFC3339_USEC_MAX] = "", to[RFC3339_USEC_MAX] = "", account[128];
        _cleanup_free_ char *detail = NULL;

        (void) format_rfc3339_usec(real - (mono - first), from);
        (void) format_rfc3339_usec(real - (mono - last), to);
        json_object *o = json_object_new_object();
        if (o) {
                json_object_object_add(o, "client", json_object_new_string(client));
                json_object_object_add(o, "refused", json_object_new_uint64(throttled));
                json_object_object_add(o, "first", json_object_new_string(from));
                json_object_object_add(o, "last", json_object_new_string(to));
                json_object_object_add(o, "status", json_object_new_int(429));
                json_object_object_add(o, "burst", json_object_new_uint64(m->config.refusal_burst));
                json_object_object_add(o, "per_sec", json_object_new_uint64(m->config.refusals_per_sec));
                json_object_object_add(o, "burst_total", json_object_new_uint64(m->config.refusal_burst_total));
                json_object_object_add(o, "per_sec_total",
                                       json_object_new_uint64(m->config.refusals_per_sec_total));
                detail = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
                json_object_put(o);
        }
        snprintf(account, sizeof(account), "client:%s", client);
        log_msg(LOG_NOTICE, "Refused %" PRIu64 " requests from %s over its budget of refusals (429).", throttled,
                client);
        manager_audit(m, "auth", "blocked", NULL, account, NULL, detail);
}

/* --- Exec starts per key ------------------------------------------------------------------------ */

typedef struct ExecSummaryContext {
        Manager *manager;
        KeyRole role;
} ExecSummaryContext;

static void exec_start_summary(const char *key_id, uint64_t throttled, uint64_t first, uint64_t last,
                               void *userdata) {
        ExecSummaryContext *c = userdata;
        Manager *m = c->manager;
        uint64_t mono = now_usec(CLOCK_MONOTONIC), real = now_usec(CLOCK_REALTIME), burst, per_sec;
        char from[RFC3339_USEC_MAX] = "", to[RFC3339_USEC_MAX] = "", account[128];
        _cleanup_free_ char *detail = NULL;

        manager_exec_start_budget(m, c->role, &burst, &per_sec);
        (void) format_rfc3339_usec(real - (mono - first), from);
        (void) format_rfc3339_usec(real - (mono - last), to);
        json_object *o = json_object_new_object();
        if (o) {
                json_object_object_add(o, "refused", json_object_new_uint64(throttled));
                json_object_object_add(o, "first", json_object_new_string(from));
                json_object_object_add(o, "last", json_object_new_string(to));
                json_object_object_add(o, "status", json_object_new_int(429));
                json_object_object_add(o, "code", json_object_new_string("too_many_execs"));
                json_object_object_add(o, "role", json_object_new_string(key_role_to_string(c->role)));
                json_object_object_add(o, "burst", json_object_new_uint64(burst));
                json_object_object_add(o, "per_sec", json_object_new_uint64(per_sec));
                detail = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
                json_object_put(o);
        }
        snprintf(account, sizeof(account), "key:%s", key_id);
        log_msg(LOG_NOTICE, "Refused %" PRIu64 " Execs of API key %s over its budget of Exec starts (429).",
                throttled, key_id);
        manager_audit(m, "exec", "blocked", NULL, account, NULL, detail);
}

void manager_exec_start_budget(Manager *m, KeyRole role, uint64_t *ret_burst, uint64_t *ret_per_sec) {
        bool admin = role == KEY_ROLE_ADMIN;

        *ret_burst = admin ? m->config.exec_burst_per_admin_key : m->config.exec_burst_per_member_key;
        *ret_per_sec = admin ? m->config.execs_per_sec_per_admin_key : m->config.execs_per_sec_per_member_key;
}

int manager_exec_start_take(Manager *m, const ApiKey *k, uint64_t *ret_retry_after_sec) {
        RefusalLimit *l = k->role == KEY_ROLE_ADMIN ? m->exec_starts_admin : m->exec_starts_member;

        if (!l)
                return 0;
        /* one bucket per key id; the limit's shared budget is made too large to matter */
        if (refusal_limit_take(l, k->id, now_usec(CLOCK_MONOTONIC), ret_retry_after_sec) == REFUSAL_ANSWER)
                return 0;
        return -EBUSY;
}

static int exec_starts_setup(Manager *m) {
        uint64_t burst, per_sec;
        int r;

        manager_exec_start_budget(m, KEY_ROLE_MEMBER, &burst, &per_sec);
        r = refusal_limit_new(burst, per_sec, UINT32_MAX, UINT32_MAX, &m->exec_starts_member);
        if (r < 0)
                return r;
        manager_exec_start_budget(m, KEY_ROLE_ADMIN, &burst, &per_sec);
        return refusal_limit_new(burst, per_sec, UINT32_MAX, UINT32_MAX, &m->exec_starts_admin);
}

void manager_flush_refusals(Manager *m, bool all) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        if (m->refusals)
                refusal_limit_flush(m->refusals, now, REFUSAL_FLUSH_USEC, all, refusal_summary, m);
        if (m->exec_starts_member)
                refusal_limit_flush(m->exec_starts_member, now, REFUSAL_FLUSH_USEC, all, exec_start_summary,
                                    &(ExecSummaryContext) { m, KEY_ROLE_MEMBER });
        if (m->exec_starts_admin)
                refusal_limit_flush(m->exec_starts_admin, now, REFUSAL_FLUSH_USEC, all, exec_start_summary,
                                    &(ExecSummaryContext) { m, KEY_ROLE_ADMIN });
}

static int on_refusal_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        manager_flush_refusals(userdata, false);
        (void) sd_event_source_set_time_relative(s, REFUSAL_FLUSH_USEC);
        return sd_event_source_set_enabled(s, SD_EVENT_ON);
}

static int refusals_setup(Manager *m) {
        int r = refusal_limit_new(m->config.refusal_burst, m->config.refusals_per_sec, m->config.refusal_burst_total,
                                  m->config.refusals_per_sec_total, &m->refusals);
        if (r < 0)
                return r;
        return sd_event_add_time_relative(m->event, &m->refusal_timer, CLOCK_MONOTONIC, REFUSAL_FLUSH_USEC,
                                          USEC_PER_SEC, on_refusal_timer, m);
}

static int capacity_agent_setup(Manager *m, int agent_fd) {
        struct sockaddr_storage sa;
        unsigned len = 0;
        int r;

        /* A standalone gateway (--listen=) shares the configuration of the unit's: it leaves AgentListen= to it. */
        if (agent_fd < 0 && (!m->config.agent_listen[0] || m->listen_override))
                return 0;
        if (agent_fd < 0 && gateway_parse_listen(m->config.agent_listen, &sa, &len) < 0)
                return -EINVAL; /* checked when the configuration was read */
        r = capacity_agent_new(m->event, m->bus, agent_fd, agent_fd < 0 ? (struct sockaddr *) &sa : NULL, len,
                               m->sandboxd.max_sandboxes, &m->capacity_agent);
        if (r < 0)
                return log_msg_errno(LOG_ERR, r, "Could not start the capacity agent on %s: %m",
                                     agent_fd < 0 ? m->config.agent_listen : "systemd's socket");
        return 0;
}

int manager_startup(Manager *m) {
        char path[4096];
        int r, n_fds, fd = -EBADF;

        raise_nofile(m);

        if (m->config.key_store[0]) {
                /* PostgreSQL, shared with other hosts' gateways (docs/scale-out.md). Down now is not fatal:
                 * requests answer 503 key_store_unavailable until it is back. */
                r = key_store_open_postgresql(m->config.key_store, &m->keys);
                if (r < 0)
                        return log_msg_errno(LOG_ERR, r, "Could not open the key store in PostgreSQL: %m");
                if (m->config.cluster_log) {
                        r = cluster_log_open(m->config.key_store, &m->cluster_log);
                        if (r < 0)
                                return log_msg_errno(LOG_ERR, r, "Could not read the audit log's copy in PostgreSQL: %m");
                }
        } else if (m->config.cluster_log) {
                log_msg(LOG_ERR, "ClusterLog=yes reads the rows of every host from PostgreSQL: it needs KeyStore=postgresql://….");
                return -EINVAL;
        } else {
                snprintf(path, sizeof(path), "%s/" GATEWAYD_DB_FILE, m->state_dir);
                r = key_store_open(path, &m->keys);
                if (r < 0)
                        return log_msg_errno(LOG_ERR, r, "Could not open the key store %s: %m", path);
        }

        /* The listening socket stays with systemd while a lost bus restarts us. The pool's connections do
         * the same (bus-pool.c). */
        r = daemon_bus_open(m->event, false, &m->bus);
        if (r >= 0)
                r = daemon_bus_open(m->event, false, &m->signal_bus);
        if (r < 0)
                return log_msg_errno(LOG_ERR, r, "Could not connect to the system bus: %m");
        r = bus_pool_new(m->event, (unsigned) m->config.bus_connections, &m->pool);
        if (r >= 0)
                r = bus_pool_set_short_reserve(m->pool, (unsigned) m->config.bus_short_call_reserve);
        if (r < 0)
                return log_msg_errno(LOG_ERR, r, "Could not connect to the system bus: %m");
        r = gateway_keys_bus_add(m->bus, m->keys, on_keys_changed, m, &m->keys_slot);
        if (r < 0)
                return r;
        r = refusals_setup(m);
        if (r >= 0)
                r = exec_starts_setup(m);
        if (r < 0)
                return r;
        r = watchers_setup(m);
        if (r < 0)
                return log_msg_errno(LOG_ERR, r, "Could not subscribe to the audit log's EntryAdded: %m");

        /* The HTTP socket, and the capacity agent's (FileDescriptorName=agent, sandbox-gatewayd-agent.socket)
         * if systemd passes one. */
        _cleanup_strv_free_ char **names = NULL;
        int agent_fd = -EBADF;
        n_fds = m->listen_override ? 0 : sd_listen_fds_with_names(true, &names);
        for (int i = 0; i < n_fds; i++) {
                if (names && streq_ptr(names[i], "agent") && agent_fd < 0)
                        agent_fd = SD_LISTEN_FDS_START + i;
                else if (fd < 0)
                        fd = SD_LISTEN_FDS_START + i;
                else {
                        log_msg(LOG_ERR, "Expected one listening socket for HTTP from systemd, got more.");
                        return -EINVAL;
                }
        }
        r = capacity_agent_setup(m, agent_fd);
        if (r < 0)
                return r;
        if (fd >= 0) {
                r = http_server_new(m, fd, NULL, &m->server);
        } else {
                struct sockaddr_storage sa;
                unsigned len;
                const char *listen = m->listen_override ?: m->config.listen;
                if (gateway_parse_listen(listen, &sa, &len) < 0) {
                        log_msg(LOG_ERR, "Cannot listen on '%s': expected ADDR:PORT.", listen);
                        return -EINVAL;
                }
                r = http_server_new(m, -EBADF, (struct sockaddr *) &sa, &m->server);
                if (r < 0)
                        log_msg(LOG_ERR, "Cannot listen on %s.", listen);
        }
        if (r < 0)
                return log_msg_errno(LOG_ERR, r, "Could not start the HTTP server: %m");

        /* Last: once the name is ours, sandboxctl api-key finds everything in place. A second gateway
         * process (standalone) still serves HTTP without it. */
        r = sd_bus_request_name(m->bus, GATEWAY_BUS_NAME, 0);
        if (r < 0)
                log_msg(LOG_WARNING, "Could not acquire %s: %s (the Keys interface is not served)",
                        GATEWAY_BUS_NAME, strerror(-r));
        return 0;
}

int manager_run(Manager *m) {
        return daemon_run(m->event, "Serving HTTP%s.", m->listen_override ? " (standalone)" : "");
}
