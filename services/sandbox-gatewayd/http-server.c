/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libmicrohttpd inside sd-event: requests, suspension while bus calls run, JSON answers, dispatch. */
#include "http-server.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gatewayd-routes.h"
#include "ini-util.h"
#include "key-sessions.h"
#include "log.h"
#include "refusal-limit.h"
#include "sandbox-id.h"
#include "sse.h"
#include "time-util.h"

struct HttpServer {
        Manager *manager;
        struct MHD_Daemon *daemon;
        sd_event_source *io, *timer, *kick;
};

/* --- requests ----------------------------------------------------------------------------------- */

Request *request_ref(Request *r) {
        if (r)
                r->n_ref++;
        return r;
}

Request *request_unref(Request *r) {
        if (!r || --r->n_ref > 0)
                return NULL;
        if (r->counts_stream && r->key)
                manager_stream_release(r->manager, r->key->id);
        sd_event_source_disable_unref(r->client_watch);
        safe_close(r->cancel_fd);
        key_session_free(r->key_session);
        if (r->data_free)
                r->data_free(r->data);
        if (r->response && !r->queued)
                MHD_destroy_response(r->response);
        sse_free(r->sse);
        if (r->outer)
                request_unref(r->outer); /* whose key this was */
        else
                api_key_free(r->key);
        strv_free(r->query);
        free(r->account_id);
        free(r->body);
        free(r->path);
        free(r);
        return NULL;
}

const char *req_param(Request *r, size_t i) {
        return i < r->match.n_params ? r->match.params[i] : NULL;
}

const char *req_query(Request *r, const char *name) {
        if (r->outer) {
                for (char **q = r->query; q && q[0] && q[1]; q += 2)
                        if (streq(q[0], name))
                                return q[1];
                return NULL;
        }
        return r->connection ? MHD_lookup_connection_value(r->connection, MHD_GET_ARGUMENT_KIND, name) : NULL;
}

const char *req_header(Request *r, const char *name) {
        return r->connection ? MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, name) : NULL;
}

bool req_answered(Request *r) {
        return r->response != NULL || r->inner_answered;
}

static void req_unwatch_client(Request *r) {
        r->client_watch = sd_event_source_disable_unref(r->client_watch);
}

int req_cancel_pipe(Request *r, int *ret_read_fd) {
        int fds[2];

        if (r->cancel_fd >= 0)
                return -EBUSY; /* one call per request carries one */
        if (pipe2(fds, O_CLOEXEC) < 0)
                return -errno;
        r->cancel_fd = fds[1];
        *ret_read_fd = fds[0];
        return 0;
}

static void req_wake(Request *r) {
        req_unwatch_client(r);
        if (r->suspended && r->connection) {
                r->suspended = false;
                MHD_resume_connection(r->connection);
                http_server_kick(r->manager->server);
        }
}

static void req_set_response(Request *r, unsigned status, struct MHD_Response *resp) {
        if (!resp) {
                /* out of memory: nothing better to do than to let the connection go */
                log_msg(LOG_ERR, "Cannot make a response for %s: out of memory.", r->request_id);
                resp = MHD_create_response_from_buffer(0, (void *) "", MHD_RESPMEM_PERSISTENT);
                status = 500;
                if (!resp)
                        return;
        }
        (void) MHD_add_response_header(resp, "X-Request-Id", r->request_id);
        /* API answers are never cached; the dashboard's files say their own policy */
        if (!MHD_get_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL))
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        r->response = resp;
        r->status = status;
        req_wake(r);
}

void req_reply_response(Request *r, unsigned status, struct MHD_Response *resp) {
        if (r->outer) {
                /* no connection to hand over */
                if (resp)
                        MHD_destroy_response(resp);
                return req_reply_error(r, 500, "internal", "This route cannot answer an inner request.");
        }
        if (r->response) {
                if (resp)
                        MHD_destroy_response(resp);
                return;
        }
        req_set_response(r, status, resp);
}

void req_reply_data(Request *r, unsigned status, const char *content_type, const void *data, size_t size) {
        struct MHD_Response *resp;

        if (r->outer) {
                /* an inner request's answer goes to its caller, or nowhere once abandoned */
                if (r->inner_answered || !r->answer_to)
                        return;
                r->inner_answered = true;
                r->status = status;
                r->answer_to(r, status, content_type, data, size);
                return;
        }
        if (r->response)
                return;
        resp = MHD_create_response_from_buffer(size, (void *) data, MHD_RESPMEM_MUST_COPY);
        if (resp && content_type)
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        req_set_response(r, status, resp);
}

void req_reply_json(Request *r, unsigned status, json_object *o) {
        const char *s;
        size_t len;

        if (!o) {
                json_object_put(o);
                req_reply_error(r, 500, "internal", "Out of memory.");
                return;
        }
        s = json_text(o, &len);
        req_reply_data(r, status, "application/json", s, len);
        json_object_put(o);
}

void req_reply_empty(Request *r, unsigned status) {
        req_reply_data(r, status, NULL, "", 0);
}

static void req_reply_error_message(Request *r, unsigned status, const char *code, const char *message) {
        _cleanup_free_ char *body = NULL;

        if (req_answered(r))
                return;
        body = http_error_body(status, code, message, r->request_id);
        if (!body) {
                req_set_response(r, 500, NULL);
                return;
        }
        req_reply_data(r, status, "application/json", body, strlen(body));
}

void req_reply_error(Request *r, unsigned status, const char *code, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        req_reply_error_message(r, status, code, msg ?: "Out of memory.");
}

void req_reply_bus_error(Request *r, const sd_bus_error *e) {
        const char *code;
        unsigned status;

        http_status_from_bus_error(e ? e->name : NULL, &status, &code);
        if (e && e->name && streq(e->name, "org.freedesktop.DBus.Error.AccessDenied"))
                /* the gateway's own rights on the bus: not the client's fault */
                status = 502, code = "upstream_error";
        if (status >= 500)
                log_msg(LOG_WARNING, "Request %s %s (%s): %s: %s", r->method, strna(r->path), r->request_id,
                        e ? strna(e->name) : "n/a", e ? strna(e->message) : "n/a");
        req_reply_error_message(r, status, code, e && e->message ? e->message : "The bus call failed.");
}

void req_reply_errno(Request *r, int error) {
        if (error == -KEY_STORE_UNAVAILABLE)
                req_reply_error(r, 503, "key_store_unavailable",
                                "The key store (PostgreSQL) cannot be reached; nothing was done. Try again.");
        else if (error == -ENOMEM)
                req_reply_error(r, 500, "internal", "Out of memory.");
        else
                req_reply_error(r, 500, "internal", "Internal error: %s.", strerror(error < 0 ? -error : error));
}

void req_reply_store_error(Request *r, int error, const char *what) {
        if (error == -KEY_STORE_UNAVAILABLE)
                req_reply_errno(r, error);
        else
                req_reply_error(r, 500, "internal", "%s", what);
}

int req_parse_json(Request *r, const JsonField *fields, size_t n_fields, json_object **ret) {
        _cleanup_free_ char *error = NULL;
        json_object *o = NULL;
        int k;

        k = json_parse_body(r->body ?: "", r->body_size, (unsigned) r->manager->config.json_depth_max, true, &o,
                            &error);
        if (k == -ENOMEM) {
                req_reply_errno(r, k);
                return k;
        }
        if (k < 0) {
                req_reply_error(r, 400, k == -EILSEQ ? "invalid_request" : "invalid_json", "%s",
                                error ?: "The body is not valid JSON.");
                return -EINVAL;
        }
        k = json_check_fields(o, fields, n_fields, &error);
        if (k < 0) {
                json_object_put(o);
                req_reply_error(r, 400, "invalid_request", "%s", error ?: "Invalid request.");
                return -EINVAL;
        }
        *ret = o;
        return 0;
}

int req_append_context(Request *r, sd_bus_message *m) {
        return sd_bus_message_append(m, "a{sv}", 3, "account_id", "s", strempty(r->account_id), "request_id",
                                     "s", r->request_id, "source", "s", "agent");
}

typedef struct ReqCall {
        Request *req;
        bus_pool_build_t build;
        req_reply_t reply;
        bool counted; /* holds one of the key's calls in flight */
} ReqCall;

static int req_call_build(sd_bus_message *m, void *userdata) {
        ReqCall *c = userdata;
        return c->build ? c->build(m, c->req) : 0;
}

static void req_call_reply(sd_bus_message *reply, const sd_bus_error *error, void *userdata) {
        ReqCall *c = userdata;
        Request *r = c->req;

        /* before the reply handler, which may make the request's next call */
        if (c->counted)
                manager_call_release(r->manager, r->key->id);
        c->reply(r, reply, error);
        request_unref(r);
        free(c);
}

/* One of the key's calls in flight, or a 429. */
static int req_call_acquire(Request *r) {
        int k;

        if (!r->key)
                return 0;
        k = manager_call_acquire(r->manager, r->key);
        if (k == -EBUSY) {
                req_reply_error(r, 429, "too_many_calls",
                                "This API key has %" PRIu64 " calls in flight already (MaxCalls%sKey=).",
                                manager_calls_max(r->manager, r->key->role),
                                r->key->role == KEY_ROLE_ADMIN ? "PerAdmin" : "PerMember");
                if (r->response)
                        (void) MHD_add_response_header(r->response, MHD_HTTP_HEADER_RETRY_AFTER, "1");
        }
        return k < 0 ? k : 1;
}

int req_exec_start_take(Request *r) {
        uint64_t burst, per_sec, retry_after = 1;
        char value[32];

        if (!r->key || manager_exec_start_take(r->manager, r->key, &retry_after) >= 0)
                return 0;
        manager_exec_start_budget(r->manager, r->key->role, &burst, &per_sec);
        req_reply_error(r, 429, "too_many_execs",
                        "This API key may start %" PRIu64 " Execs at once and %" PRIu64 " a second after that "
                        "(ExecBurstPer%sKey=, ExecsPerSecPer%sKey=); try again in %" PRIu64 " s.", burst, per_sec,
                        r->key->role == KEY_ROLE_ADMIN ? "Admin" : "Member",
                        r->key->role == KEY_ROLE_ADMIN ? "Admin" : "Member", retry_after);
        snprintf(value, sizeof(value), "%" PRIu64, retry_after);
        if (r->response)
                (void) MHD_add_response_header(r->response, MHD_HTTP_HEADER_RETRY_AFTER, value);
        return -EBUSY;
}

int req_call_full(Request *r, const char *destination, const char *path, const char *interface,
                  const char *member, bus_pool_build_t build, req_reply_t reply, uint64_t timeout_usec,
                  BusPoolFlags flags) {
        ReqCall *c;
        int k;

        if (r->closed)
                /* nobody will read the answer */
                return -ECANCELED;
        c = malloc(sizeof(ReqCall));
        if (!c)
                return -ENOMEM;
        k = req_call_acquire(r);
        if (k < 0) {
                free(c);
                return k;
        }
        *c = (ReqCall) { .req = request_ref(r), .build = build, .reply = reply, .counted = k > 0 };
        k = bus_pool_call_full(r->manager->pool, destination, path, interface, member, req_call_build,
                               req_call_reply, c, timeout_usec ?: GATEWAY_CALL_TIMEOUT_USEC, flags);
        if (k < 0) {
                if (c->counted)
                        manager_call_release(r->manager, r->key->id);
                request_unref(r);
                free(c);
        }
        return k;
}

static bool req_call_is_for(void *userdata, void *arg) {
        ReqCall *c = userdata;
        return c->req == arg;
}

/* The request's calls that still wait for room on the bus: never sent, as nobody will read their answers
 * (an Exec among them never runs). */
static void req_cancel_queued_calls(Request *r) {
        size_t n = bus_pool_cancel_queued(r->manager->pool, req_call_reply, req_call_is_for, r);
        if (n > 0)
                log_msg(LOG_DEBUG, "Request %s %s (%s): the client left; %zu waiting bus call(s) dropped.",
                        r->method, strna(r->path), r->request_id, n);
}

int req_call(Request *r, const char *destination, const char *path, const char *interface, const char *member,
             bus_pool_build_t build, req_reply_t reply, uint64_t timeout_usec) {
        return req_call_full(r, destination, path, interface, member, build, reply, timeout_usec, 0);
}

/* --- clients that leave, slow clients ------------------------------------------------------------ */

/* A client that closes its connection (or its sending side) while its request waits for a bus call will
 * not read the answer: its connection is closed at once, and calls still waiting for room on the bus are
 * dropped (on_completed). An Exec already sent is cancelled: the request's cancel_fd is closed, sandboxd
 * ends the command as its timeout would and answers at once (audit event "cancelled"), and that answer
 * frees the bus slot and the key's call in flight the usual way. */
static int on_client_gone(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Request *r = userdata;

        req_unwatch_client(r);
        r->cancel_fd = safe_close(r->cancel_fd);
        if (!r->suspended || !r->connection)
                return 0;
        log_msg(LOG_DEBUG, "Request %s %s (%s): the client left before the answer.", r->method, strna(r->path),
                r->request_id);
        r->client_gone = true;
        r->suspended = false;
        MHD_resume_connection(r->connection);
        http_server_kick(r->manager->server);
        return 0;
}

static void req_watch_client(Request *r) {
        const union MHD_ConnectionInfo *info;

        if (r->client_watch || !r->connection)
                return;
        info = MHD_get_connection_info(r->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (info)
                (void) sd_event_add_io(r->manager->event, &r->client_watch, info->connect_fd, EPOLLRDHUP,
                                       on_client_gone, r);
}

/* Each connection has HeaderTimeoutSec= to deliver a request's headers, from when it opens or its previous
 * answer is done: MHD's own timeout only ends connections that send nothing at all, not those that trickle
 * a byte at a time. */
typedef struct ConnState {
        HttpServer *server;
        int fd;
        sd_event_source *deadline;
} ConnState;

static int on_header_deadline(sd_event_source *src, uint64_t usec, void *userdata) {
        ConnState *cs = userdata;

        cs->deadline = sd_event_source_disable_unref(cs->deadline);
        log_msg(LOG_DEBUG, "A client took longer than HeaderTimeoutSec= to send a request's headers; closing.");
        /* MHD has no call to close one connection: it notices the shut socket and closes it itself */
        (void) shutdown(cs->fd, SHUT_RDWR);
        http_server_kick(cs->server);
        return 0;
}

static ConnState *conn_state(struct MHD_Connection *conn) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return info ? info->socket_context : NULL;
}

static void conn_deadline_stop(struct MHD_Connection *conn) {
        ConnState *cs = conn_state(conn);

        if (cs)
                cs->deadline = sd_event_source_disable_unref(cs->deadline);
}

static void conn_deadline_arm(struct MHD_Connection *conn) {
        ConnState *cs = conn_state(conn);

        if (!cs || cs->deadline)
                return;
        (void) sd_event_add_time_relative(cs->server->manager->event, &cs->deadline, CLOCK_MONOTONIC,
                                          cs->server->manager->config.header_timeout_usec, USEC_PER_MSEC * 10,
                                          on_header_deadline, cs);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
        HttpServer *s = cls;
        ConnState *cs = *socket_context;

        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
                const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn,
                                                                               MHD_CONNECTION_INFO_CONNECTION_FD);
                cs = calloc(1, sizeof(ConnState));
                if (!cs || !info) {
                        free(cs);
                        return;
                }
                *cs = (ConnState) { .server = s, .fd = info->connect_fd };
                *socket_context = cs;
                conn_deadline_arm(conn);
                return;
        }
        if (cs) {
                sd_event_source_disable_unref(cs->deadline);
                free(cs);
                *socket_context = NULL;
        }
}

/* --- dispatch ----------------------------------------------------------------------------------- */

static bool request_id_acceptable(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
                      strchr("._-", s[i])))
                        return false;
        return true;
}

/* Whose refusals count together: the client's IPv4 address, or its IPv6 /64 (one host can have a whole
 * /64); "unknown" if the connection says nothing. */
static void req_client(Request *r, char *buf, size_t size) {
        if (r->outer)
                return req_client(r->outer, buf, size);
        const union MHD_ConnectionInfo *ci =
                r->connection ? MHD_get_connection_info(r->connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS) : NULL;
        const struct sockaddr *sa = ci ? ci->client_addr : NULL;

        snprintf(buf, size, "unknown");
        if (!sa)
                return;
        if (sa->sa_family == AF_INET)
                (void) inet_ntop(AF_INET, &((const struct sockaddr_in *) sa)->sin_addr, buf, size);
        else if (sa->sa_family == AF_INET6) {
                struct in6_addr a = ((const struct sockaddr_in6 *) sa)->sin6_addr;
                if (IN6_IS_ADDR_V4MAPPED(&a)) {
                        (void) inet_ntop(AF_INET, &a.s6_addr[12], buf, size);
                        return;
                }
                memset(&a.s6_addr[8], 0, 8);
                char text[INET6_ADDRSTRLEN];
                if (inet_ntop(AF_INET6, &a, text, sizeof(text)))
                        snprintf(buf, size, "%s/64", text);
        }
}

void req_deny(Request *r, unsigned status, const char *code, const char *account, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL, *detail = NULL;
        const Route *route = r->match.route;
        char client[INET6_ADDRSTRLEN + 8];
        uint64_t retry_after = 0;
        json_object *d;
        va_list ap;

        /* Over the client's budget of refusals, or all clients' together: 429, counted for a summary row
         * instead of a row each. */
        req_client(r, client, sizeof(client));
        RefusalVerdict v = r->manager->refusals ? refusal_limit_take(r->manager->refusals, client,
                                                                     now_usec(CLOCK_MONOTONIC), &retry_after)
                                                : REFUSAL_ANSWER;
        if (v != REFUSAL_ANSWER) {
                char value[32];
                if (v == REFUSAL_OVER_TOTAL)
                        req_reply_error(r, 429, "too_many_refusals",
                                        "Too many refused requests to this gateway, from all clients; try again "
                                        "in %" PRIu64 " s.", retry_after);
                else
                        req_reply_error(r, 429, "too_many_refusals",
                                        "Too many refused requests from %s; try again in %" PRIu64 " s.", client,
                                        retry_after);
                snprintf(value, sizeof(value), "%" PRIu64, retry_after);
                if (r->response)
                        (void) MHD_add_response_header(r->response, MHD_HTTP_HEADER_RETRY_AFTER, value);
                return;
        }

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        if (!account)
                account = r->account_id ?: "anonymous";
        req_reply_error_message(r, status, code, msg ?: "Denied.");

        d = json_object_new_object();
        if (d) {
                json_object_object_add(d, "method", json_object_new_string(r->method));
                json_object_object_add(d, "path", json_object_new_string(strempty(r->path)));
                json_object_object_add(d, "status", json_object_new_int((int) status));
                json_object_object_add(d, "code", json_object_new_string(code));
                json_object_object_add(d, "reason", json_object_new_string(msg ?: ""));
                detail = strdup(json_text(d, NULL));
                json_object_put(d);
        }
        /* The sandbox the path names is the client's word: the row is that sandbox's only if it exists. A
         * refused takeover (the token, the WebSocket, a recording) was a person's attempt at a terminal:
         * its row says so as sandboxd's row of a takeover that happens does. */
        manager_audit_sandbox(r->manager,
                              r->deny_operation ?: (route && route->operation ? route->operation : "read"), "denied",
                              route && route->action == GATEWAY_ACTION_TAKEOVER ? "human_takeover" : "agent",
                              route && (route->flags & ROUTE_SANDBOX) ? req_param(r, 0) : NULL, account,
                              r->request_id, detail);
}

#define SESSION_REQUIRED_MESSAGE "Creating API keys needs a dashboard or CLI session, or an admin-scoped key."

/* Whether the key may do the route's action on the sandbox of the path (an id by now); answers if not. */
static bool req_authorize(Request *r) {
        const Route *route = r->match.route;
        const char *sandbox = (route->flags & ROUTE_SANDBOX) ? req_param(r, 0) : NULL;

        if (route->action == GATEWAY_ACTION_API_KEY_ADMIN) {
                if (!api_key_allows(r->key, GATEWAY_ACTION_API_KEY_ADMIN, NULL)) {
                        req_deny(r, 403, "session_required", r->account_id, SESSION_REQUIRED_MESSAGE);
                        return false;
                }
        } else if (route->action == GATEWAY_ACTION_SANDBOX_DELETE &&
                   !api_key_allows(r->key, GATEWAY_ACTION_SANDBOX_DELETE, sandbox) &&
                   api_key_allows(r->key, GATEWAY_ACTION_SANDBOX_DELETE_OWN, sandbox)) {
                /* the handler compares the sandbox's owner with this key */
                r->own_only = true;
        } else if (route->action >= 0 && !api_key_allows(r->key, route->action, sandbox)) {
                if (sandbox && api_key_allows(r->key, route->action, NULL) && r->key->sandboxes)
                        req_deny(r, 403, "forbidden", r->account_id,
                                 "Sandbox %s is outside this API key's scope.", r->named[0] ? r->named : sandbox);
                else if (route->action == GATEWAY_ACTION_TAKEOVER)
                        req_deny(r, 403, "forbidden", r->account_id, "%s", TAKEOVER_FORBIDDEN_MESSAGE);
                else
                        req_deny(r, 403, "forbidden", r->account_id, "This API key lacks the action '%s'.",
                                 gateway_action_to_string(route->action));
                return false;
        }
        return true;
}

/* The key's check: the route's own, or the API key's actions and scope. */
static bool req_check_key(Request *r) {
        return r->match.route->authorize ? r->match.route->authorize(r) : req_authorize(r);
}

static void dispatch_run(Request *r) {
        int k;

        if (r->key && !req_check_key(r))
                return;
        k = r->match.route->handler(r);
        if (k < 0 && !req_answered(r)) {
                log_msg(LOG_ERR, "Request %s %s (%s) failed: %s", r->method, r->path, r->request_id,
                        strerror(-k));
                req_reply_errno(r, k);
        }
}

/* The name in the path was looked up. A key limited to some sandboxes is told only that the sandbox is
 * not one of its own, whether or not it exists; a key for all learns that there is none. */
static void on_sandbox_resolved(Request *r, const sd_bus_error *error) {
        const Route *route = r->match.route;

        if (!error)
                return dispatch_run(r);
        if (!sd_bus_error_has_name(error, SANDBOXD_ERROR_NO_SUCH_SANDBOX))
                return req_reply_bus_error(r, error);
        if (r->key->sandboxes) {
                bool may = api_key_allows(r->key, route->action, NULL) ||
                           (route->action == GATEWAY_ACTION_SANDBOX_DELETE &&
                            api_key_allows(r->key, GATEWAY_ACTION_SANDBOX_DELETE_OWN, NULL));
                if (may)
                        return req_deny(r, 403, "forbidden", r->account_id,
                                        "Sandbox %s is outside this API key's scope.", r->named);
        }
        /* the key's actions decide first, as for a sandbox that exists */
        if (!req_check_key(r))
                return;
        req_reply_error(r, 404, "not_found", "Sandbox %s does not exist.", r->named);
}

/* The Authorization header's API key into r->key and r->account_id. 0, or answered (negative errno). */
static int req_authenticate(Request *r) {
        const char *hdr, *secret;
        int k;

        hdr = req_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
        if (!hdr) {
                req_deny(r, 401, "unauthorized", "anonymous",
                         "Missing the Authorization: Bearer <API key> header.");
                return -EACCES;
        }
        if (auth_parse_bearer(hdr, &secret) < 0) {
                req_deny(r, 401, "unauthorized", "anonymous",
                         "The Authorization header must be \"Bearer <API key>\".");
                return -EACCES;
        }
        k = key_store_authenticate(r->manager->keys, secret, now_usec(CLOCK_REALTIME), &r->key);
        if (k < 0) {
                if (req_deny_credentials(r, k, "The API key", "") < 0)
                        return -EACCES;
                log_msg(LOG_ERR, "Cannot look up an API key: %s", strerror(-k));
                req_reply_store_error(r, k, "Cannot check the API key.");
                return k;
        }
        return api_key_account_id(r->key, &r->account_id);
}

int req_deny_credentials(Request *r, int error, const char *what, const char *unknown_hint) {
        assert(r);
        assert(what);
        assert(unknown_hint);

        switch (error) {
        case -EINVAL:
                req_deny(r, 401, "unauthorized", "anonymous", "%s is malformed.", what);
                return -EACCES;
        case -ENOKEY:
                req_deny(r, 401, "unauthorized", "anonymous", "%s is not known%s.", what, unknown_hint);
                return -EACCES;
        case -EKEYEXPIRED:
                req_deny(r, 401, "unauthorized", "anonymous", "%s has expired.", what);
                return -EACCES;
        case -EALREADY:
                req_deny(r, 401, "unauthorized", "anonymous", "The takeover token has been used already.");
                return -EACCES;
        case -EKEYREVOKED:
                req_deny(r, 401, "unauthorized", "anonymous", "The API key has been revoked.");
                return -EACCES;
        default:
                return 0;
        }
}

static void dispatch(Request *r) {
        Manager *m = r->manager;
        const Route *route = r->match.route;
        int k;

        if (r->route_error == -ENOENT)
                return req_reply_error(r, 404, "not_found", "No route %s %s.", r->method, r->path);
        if (r->route_error == -EOPNOTSUPP) {
                char allow[128];
                route_allowed_methods(gateway_routes, gateway_routes_count, r->path, allow, sizeof(allow));
                req_reply_error(r, 405, "method_not_allowed", "%s does not take %s (allowed: %s).", r->path,
                                r->method, allow);
                if (r->response)
                        (void) MHD_add_response_header(r->response, MHD_HTTP_HEADER_ALLOW, allow);
                return;
        }
        if (r->body_too_large)
                return req_reply_error(r, 413, "payload_too_large", "The body is larger than %" PRIu64 " bytes.",
                                       m->config.max_body_bytes);

        /* an inner request has its outer request's key already, a streamed body's its own (req_stream_start) */
        if (!r->outer && !r->key && (route->authenticate || !(route->flags & ROUTE_PUBLIC))) {
                k = route->authenticate ? route->authenticate(r) : req_authenticate(r);
                if (k < 0) {
                        if (!req_answered(r))
                                req_reply_errno(r, k);
                        return;
                }
        }

        /* A sandbox's name is made its id first, once: the scope lists ids, and the handler must act on
         * the sandbox the scope was checked for, not on whatever has the name by then. */
        if (r->key && (route->flags & ROUTE_SANDBOX) && !sandbox_id_is_valid(req_param(r, 0)) &&
            (!route->authenticate || r->key->sandboxes)) {
                snprintf(r->named, sizeof(r->named), "%s", req_param(r, 0));
                k = req_resolve_sandbox(r, on_sandbox_resolved);
                if (k < 0)
                        return req_reply_errno(r, k);
                if (k > 0)
                        return;
        }
        dispatch_run(r);
}

/* --- inner requests ----------------------------------------------------------------------------- */

int req_inner_new(Request *outer, const char *method, const char *path, Request **ret) {
        Request *r;

        if (!outer->key)
                return -EPERM;
        r = calloc(1, sizeof(Request));
        if (!r)
                return -ENOMEM;
        r->n_ref = 1;
        r->cancel_fd = -EBADF;
        r->manager = outer->manager;
        r->outer = request_ref(outer);
        r->key = outer->key;
        r->started_at = now_usec(CLOCK_REALTIME);
        snprintf(r->method, sizeof(r->method), "%s", method);
        snprintf(r->request_id, sizeof(r->request_id), "%s", outer->request_id);
        r->path = strdup(path);
        r->account_id = outer->account_id ? strdup(outer->account_id) : NULL;
        if (!r->path || (outer->account_id && !r->account_id)) {
                request_unref(r);
                return -ENOMEM;
        }
        r->route_error = route_find(gateway_routes, gateway_routes_count, method, path, &r->match);
        *ret = r;
        return 0;
}

void req_inner_dispatch(Request *r) {
        assert(r->outer);
        if (r->dispatched)
                return;
        r->dispatched = true;
        dispatch(r);
}

void req_inner_abandon(Request *r) {
        if (!r || !r->outer)
                return;
        r->cancel_fd = safe_close(r->cancel_fd);
        r->closed = true;
        r->answer_to = NULL;
        r->inner_answered = true;
        request_ref(r);
        req_cancel_queued_calls(r);
        request_unref(r);
}

/* --- body framing ------------------------------------------------------------------------------ */

typedef struct FramingHeaders {
        const char *content_length[2], *transfer_encoding[2];
        size_t n_content_length, n_transfer_encoding;
} FramingHeaders;

static enum MHD_Result collect_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        FramingHeaders *h = cls;

        if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
                if (h->n_content_length < ELEMENTSOF(h->content_length))
                        h->content_length[h->n_content_length] = value;
                h->n_content_length++;
        } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
                if (h->n_transfer_encoding < ELEMENTSOF(h->transfer_encoding))
                        h->transfer_encoding[h->n_transfer_encoding] = value;
                h->n_transfer_encoding++;
        }
        return MHD_YES;
}

/* libmicrohttpd 0.9.75 reads a body framed two ways its own way (the first of two Content-Length
 * headers; chunked over Content-Length; no body at all for "chunked, identity"), and what it did not
 * read as the body it reads as the next request on the connection. So a request framed in any way but
 * one gets a 400 before its body is read, and the connection is closed after it: the bytes that follow
 * cannot be trusted to start a request. Returns whether it refused. */
static bool req_refuse_ambiguous_framing(Request *r) {
        FramingHeaders h = {};
        const char *why = NULL;

        (void) MHD_get_connection_values(r->connection, MHD_HEADER_KIND, collect_framing, &h);
        if (http_check_framing(h.content_length, h.n_content_length, h.transfer_encoding,
                               h.n_transfer_encoding, &why) >= 0)
                return false;
        r->dispatched = true;
        req_reply_error(r, 400, "invalid_request", "%s", why);
        if (r->response)
                (void) MHD_add_response_header(r->response, MHD_HTTP_HEADER_CONNECTION, "close");
        return true;
}

/* --- NULs in the query -------------------------------------------------------------------------- */

static enum MHD_Result find_nul_argument(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                         const char *value, size_t value_size) {
        const char **ret = cls;

        if (strlen(key) != key_size || (value && strlen(value) != value_size)) {
                *ret = key;
                return MHD_NO;
        }
        return MHD_YES;
}

/* libmicrohttpd decodes %00 in a query into a NUL, and every reader of ours takes C strings: PUT
 * …/files?path=/tmp/a%00b would write /tmp/a. Refused as a \u0000 in a JSON body is. Returns whether
 * it refused. */
static bool req_refuse_nul_in_query(Request *r) {
        const char *key = NULL;

        (void) MHD_get_connection_values_n(r->connection, MHD_GET_ARGUMENT_KIND, find_nul_argument, &key);
        if (!key)
                return false;
        r->dispatched = true;
        req_reply_error(r, 400, "invalid_request", "Query parameter '%s' holds a NUL character (%%00).", key);
        /* answered before any body is read: what follows the headers is not read as a request either */
        if (r->response)
                (void) MHD_add_response_header(r->response, MHD_HTTP_HEADER_CONNECTION, "close");
        return true;
}

/* --- bodies streamed to the handler (ROUTE_BODY_STREAM) ------------------------------------------- */

static bool req_streams_body(Request *r) {
        return r->route_error == 0 && (r->match.route->flags & ROUTE_BODY_STREAM) && req_query(r, "name");
}

/* Once the headers are in: the key is checked now, so that nobody without the right to the route can make
 * it read a body, and the handler runs, which sets body_sink. Returns whether it answered. */
static bool req_stream_start(Request *r) {
        int k;

        r->dispatched = true;
        if (req_authenticate(r) < 0 || !req_check_key(r))
                return true;
        k = r->match.route->handler(r);
        if (k < 0 && !req_answered(r))
                req_reply_errno(r, k);
        if (!req_answered(r) && !r->body_sink)
                req_reply_errno(r, -EPROTO);
        return req_answered(r);
}

void req_body_resume(Request *r) {
        req_wake(r);
}

/* A piece of a streamed body: the sink takes what it can; the rest waits until it has room. */
static enum MHD_Result req_stream_body(Request *r, const char *data, size_t *size) {
        uint64_t max = r->manager->config.max_image_bytes;
        size_t taken;

        if (req_answered(r) || r->body_too_large) {
                *size = 0;
                return MHD_YES;
        }
        if (r->body_size + *size > max) {
                *size = 0;
                r->body_too_large = true;
                /* the handler's on_close() ends what it started once the answer is out */
                req_reply_error(r, 413, "payload_too_large", "The body is larger than %" PRIu64 " bytes.", max);
                return MHD_YES;
        }
        taken = r->body_sink(r, data, *size);
        r->body_size += taken;
        *size -= taken;
        if (*size > 0 && !req_answered(r)) {
                r->suspended = true;
                MHD_suspend_connection(r->connection);
                req_watch_client(r);
        }
        return MHD_YES;
}

/* Hands the response to MHD, which keeps it as long as it needs it: an SSE response refers to its
 * request, so holding it here too would keep both alive for ever. r->response stays set (answered). */
static enum MHD_Result queue(Request *r) {
        enum MHD_Result ret;

        ret = MHD_queue_response(r->connection, r->status, r->response);
        MHD_destroy_response(r->response);
        r->queued = true;
        return ret;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_data_size,
                                 void **con_cls) {
        HttpServer *s = cls;
        Manager *m = s->manager;
        Request *r = *con_cls;

        if (r && r->client_gone)
                /* woken by on_client_gone(): close the connection */
                return MHD_NO;
        if (!r) {
                const char *rid, *cl;

                /* the headers are in */
                conn_deadline_stop(conn);

                r = calloc(1, sizeof(Request));
                if (!r)
                        return MHD_NO;
                r->n_ref = 1;
                r->cancel_fd = -EBADF;
                r->manager = m;
                r->connection = conn;
                r->started_at = now_usec(CLOCK_REALTIME);
                snprintf(r->method, sizeof(r->method), "%s", method);
                r->path = strdup(url);
                rid = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
                if (rid && request_id_acceptable(rid))
                        snprintf(r->request_id, sizeof(r->request_id), "%s", rid);
                else if (request_id_new(r->request_id) < 0)
                        snprintf(r->request_id, sizeof(r->request_id), "req_%016" PRIx64, r->started_at);
                *con_cls = r;
                if (!r->path)
                        return MHD_NO;
                r->route_error = route_find(gateway_routes, gateway_routes_count, method, url, &r->match);
                if (req_refuse_ambiguous_framing(r))
                        return queue(r);
                if (req_refuse_nul_in_query(r))
                        return queue(r);

                /* A body announced too large is refused before it is sent. */
                cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
                if (cl && r->route_error == 0) {
                        uint64_t len, max = req_streams_body(r) ? m->config.max_image_bytes : m->config.max_body_bytes;
                        if (parse_decimal(cl, &len) >= 0 && len > max) {
                                r->body_too_large = true;
                                r->dispatched = true;
                                req_reply_error(r, 413, "payload_too_large",
                                                "The body is larger than %" PRIu64 " bytes.", max);
                                return queue(r);
                        }
                }
                if (req_streams_body(r) && req_stream_start(r)) {
                        uint64_t len;
                        /* Refused before the body (a key that may not import): a body announced no larger
                         * than MaxBodyBytes= is read and dropped first, so that a client still sending it
                         * reads the answer, not a connection reset under its upload. */
                        if (cl && parse_decimal(cl, &len) >= 0 && len > 0 && len <= m->config.max_body_bytes)
                                return MHD_YES;
                        return queue(r);
                }
                return MHD_YES;
        }

        if (*upload_data_size > 0 && r->body_sink)
                return req_stream_body(r, upload_data, upload_data_size);
        if (r->body_sink && !r->body_ended && !req_answered(r) && !r->body_too_large) {
                r->body_ended = true;
                r->body_sink(r, NULL, 0);
        }
        if (*upload_data_size > 0) {
                size_t n = *upload_data_size;
                *upload_data_size = 0;
                if (r->body_too_large || r->dispatched)
                        return MHD_YES;
                if (r->body_size + n > m->config.max_body_bytes) {
                        r->body_too_large = true;
                        free(r->body);
                        r->body = NULL;
                        r->body_size = r->body_alloc = 0;
                        return MHD_YES;
                }
                if (r->body_size + n + 1 > r->body_alloc) {
                        size_t a = MAX(r->body_alloc * 2, r->body_size + n + 1);
                        a = MIN(a, m->config.max_body_bytes + 1);
                        char *b = realloc(r->body, a);
                        if (!b)
                                return MHD_NO;
                        r->body = b;
                        r->body_alloc = a;
                }
                memcpy(r->body + r->body_size, upload_data, n);
                r->body_size += n;
                r->body[r->body_size] = 0;
                return MHD_YES;
        }

        if (!r->dispatched) {
                r->dispatched = true;
                dispatch(r);
        }
        if (r->response && !r->queued)
                return queue(r);
        if (!r->response) {
                /* waits for a bus call: sleep until req_wake(), or until the client leaves */
                r->suspended = true;
                MHD_suspend_connection(conn);
                req_watch_client(r);
        }
        return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
        Request *r = *con_cls;

        if (!r)
                return;
        /* the connection may carry another request: its headers get their own deadline */
        if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && r->status != MHD_HTTP_SWITCHING_PROTOCOLS)
                conn_deadline_arm(conn);
        *con_cls = NULL;
        req_unwatch_client(r);
        /* the client is gone (or has its answer): a command still running for it is cancelled */
        r->cancel_fd = safe_close(r->cancel_fd);
        r->connection = NULL;
        r->closed = true;
        r->suspended = false;
        sse_detach(r->sse);
        if (r->on_close)
                r->on_close(r);
        /* under a reference: the dropped calls' replies unref it */
        request_ref(r);
        req_cancel_queued_calls(r);
        request_unref(r);
        request_unref(r);
}

/* --- the server in sd-event --------------------------------------------------------------------- */

static void server_run(HttpServer *s) {
        MHD_UNSIGNED_LONG_LONG timeout;

        (void) MHD_run(s->daemon);
        if (MHD_get_timeout(s->daemon, &timeout) == MHD_YES) {
                /* 0: MHD has connections ready to go on (a resumed one is not back in its epoll set
                 * yet); run again right after the other events rather than in a timer's slack */
                if (timeout == 0) {
                        (void) sd_event_source_set_enabled(s->timer, SD_EVENT_OFF);
                        http_server_kick(s);
                        return;
                }
                (void) sd_event_source_set_time_relative(s->timer, (uint64_t) timeout * USEC_PER_MSEC);
                (void) sd_event_source_set_enabled(s->timer, SD_EVENT_ONESHOT);
        } else
                (void) sd_event_source_set_enabled(s->timer, SD_EVENT_OFF);
}

static int on_io(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        server_run(userdata);
        return 0;
}

static int on_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        server_run(userdata);
        return 0;
}

static int on_kick(sd_event_source *src, void *userdata) {
        server_run(userdata);
        return 0;
}

void http_server_kick(HttpServer *s) {
        if (s && s->kick)
                (void) sd_event_source_set_enabled(s->kick, SD_EVENT_ONESHOT);
}

int http_server_new(Manager *m, int listen_fd, const struct sockaddr *sa, HttpServer **ret) {
        unsigned max_connections = (unsigned) m->config.max_connections,
                 per_address = (unsigned) m->config.max_connections_per_address,
                 timeout_sec = (unsigned) (m->config.connection_timeout_usec / USEC_PER_SEC);
        const union MHD_DaemonInfo *info;
        unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE;
        HttpServer *s;
        int r;

        s = calloc(1, sizeof(HttpServer));
        if (!s)
                return -ENOMEM;
        s->manager = m;

        if (listen_fd >= 0) {
                int fl = fcntl(listen_fd, F_GETFL);
                if (fl >= 0)
                        (void) fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK);
                s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_access, s, MHD_OPTION_LISTEN_SOCKET, listen_fd,
                                             MHD_OPTION_CONNECTION_LIMIT, max_connections,
                                             MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_address,
                                             MHD_OPTION_CONNECTION_TIMEOUT, timeout_sec,
                                             MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                                             MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
        } else {
                if (sa->sa_family == AF_INET6)
                        flags |= MHD_USE_IPv6;
                s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_access, s, MHD_OPTION_SOCK_ADDR, sa,
                                             MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, MHD_OPTION_CONNECTION_LIMIT,
                                             max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_address,
                                             MHD_OPTION_CONNECTION_TIMEOUT, timeout_sec,
                                             MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                                             MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
        }
        if (!s->daemon) {
                http_server_free(s);
                return -EADDRNOTAVAIL;
        }
        info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info) {
                http_server_free(s);
                return -EOPNOTSUPP;
        }
        r = sd_event_add_io(m->event, &s->io, info->epoll_fd, EPOLLIN, on_io, s);
        if (r >= 0)
                /* accuracy 1 µs: sd-event's default slack of 250 ms would be added to MHD's timeouts */
                r = sd_event_add_time_relative(m->event, &s->timer, CLOCK_MONOTONIC, 0, 1, on_timer, s);
        if (r >= 0)
                r = sd_event_add_defer(m->event, &s->kick, on_kick, s);
        if (r < 0) {
                http_server_free(s);
                return r;
        }
        (void) sd_event_source_set_enabled(s->timer, SD_EVENT_OFF);
        (void) sd_event_source_set_enabled(s->kick, SD_EVENT_OFF);
        /* after the bus, so that replies that wake connections are handled first */
        (void) sd_event_source_set_priority(s->kick, SD_EVENT_PRIORITY_NORMAL + 5);
        *ret = s;
        return 0;
}

HttpServer *http_server_free(HttpServer *s) {
        if (!s)
                return NULL;
        sd_event_source_disable_unref(s->io);
        sd_event_source_disable_unref(s->timer);
        sd_event_source_disable_unref(s->kick);
        if (s->daemon)
                MHD_stop_daemon(s->daemon);
        free(s);
        return NULL;
}
