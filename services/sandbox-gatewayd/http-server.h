/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libmicrohttpd inside sd-event: requests, suspension while bus calls run, JSON answers, dispatch. */
#pragma once

#include <json-c/json.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include "gateway-auth.h"
#include "gatewayd-manager.h"
#include "http-route.h"
#include "http-util.h"
#include "macro.h"

typedef struct SseStream SseStream;

struct Request {
        unsigned n_ref;
        Manager *manager;
        struct MHD_Connection *connection; /* NULL once the client is gone */
        RouteMatch match;
        int route_error;    /* 0, -ENOENT (404), -EOPNOTSUPP (405) */
        char method[16];
        char *path;
        char request_id[REQUEST_ID_MAX + 40];
        uint64_t started_at; /* µs, realtime */

        char *body;
        size_t body_size, body_alloc;
        bool body_too_large;
        /* ROUTE_BODY_STREAM: set by the handler, which runs before the body is read. Takes what it can of
         * each piece of the body and returns how much; less than all of it and the connection sleeps until
         * req_body_resume(), then offers the rest. Called with NULL, 0 at the body's end (not after a 413
         * or once the request is answered). body_size counts what it took. */
        size_t (*body_sink)(Request *r, const char *data, size_t size);
        bool body_ended;

        bool dispatched, suspended, queued, closed;
        /* While the request sleeps MHD does not look at its socket: this notices a client that leaves, and
         * client_gone says it did (the connection is then closed; an Exec sent is cancelled: cancel_fd). */
        sd_event_source *client_watch;
        bool client_gone;
        /* The write end of a pipe whose read end went with the bus call as its cancel_fd (Exec): closed
         * when the client leaves (on_client_gone, on_completed), which makes sandboxd end the command
         * and answer at once; and when the request is freed, harmless after the answer. Or -1. */
        int cancel_fd;
        struct MHD_Response *response; /* once queued, MHD's: only tells that there is an answer */
        unsigned status;

        ApiKey *key;       /* the authenticated key */
        char *account_id;  /* "key:<id>" */
        bool own_only;     /* DELETE with sandbox.delete-own only: the handler checks the owner */
        char named[ROUTE_PARAM_MAX]; /* {id} as the path had it, if it was a name dispatch() resolved */
        void (*resolve_then)(Request *r, const sd_bus_error *error); /* dispatch()'s req_resolve_sandbox() */

        const char *deny_operation;  /* a refusal's audit operation when not the route's (a constant) */
        void *data;                  /* the handler's state */
        void (*data_free)(void *);

        SseStream *sse;              /* its answer is an event stream (sse.c) */
        void (*on_close)(Request *r); /* the client went away (watchers detach here) */
        bool counts_stream;          /* holds one of the key's MaxStreamsPerKey= */
        KeySession *key_session;     /* a stream: ended when its key is revoked or expires */

        /* An inner request (req_inner_new()): a route run on behalf of another request (an MCP tool
         * call), with that request's key, account and request id, its query from query (name, value
         * pairs), and its answer handed to answer_to instead of a client. */
        Request *outer;
        char **query;
        void (*answer_to)(Request *r, unsigned status, const char *content_type, const void *data, size_t size);
        void *answer_userdata;
        bool inner_answered;
};

Request *request_ref(Request *r);
Request *request_unref(Request *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(Request *, request_unref);

/* A pipe for a call's cancel_fd option: *ret_read_fd goes into the call (the caller closes it once the
 * message holds its copy), the write end stays in r->cancel_fd. -EBUSY if the request has one already. */
int req_cancel_pipe(Request *r, int *ret_read_fd);

/* A body_sink that took less than it was offered can take more: the connection wakes and offers the rest. */
void req_body_resume(Request *r);

/* A request parameter: the path's {…} segments by index, the query by name (NULL if absent). */
const char *req_param(Request *r, size_t i);
const char *req_query(Request *r, const char *name);
const char *req_header(Request *r, const char *name);

/* Answers (once; later calls are ignored). The connection is resumed if it waits. */
void req_reply_json(Request *r, unsigned status, json_object *o); /* takes o */
void req_reply_empty(Request *r, unsigned status);
/* Any response of the caller's making (takes it), e.g. MHD_create_response_for_upgrade() with 101 for a
 * WebSocket: the daemon runs with MHD_ALLOW_UPGRADE, and the X-Request-Id header is added as always. */
void req_reply_response(Request *r, unsigned status, struct MHD_Response *resp);
void req_reply_data(Request *r, unsigned status, const char *content_type, const void *data, size_t size);
_printf_(4, 5) void req_reply_error(Request *r, unsigned status, const char *code, const char *fmt, ...);
/* A 401/403 refusal: answered, and recorded in the audit log as event "denied" (account NULL: the
 * request's key, or "anonymous"). */
_printf_(5, 6) void req_deny(Request *r, unsigned status, const char *code, const char *account, const char *fmt,
                             ...);
/* A credential check's failure (key_store_authenticate(), key_store_token_redeem()) answered 401 with the
 * reason, WHAT naming the credential ("The API key"), UNKNOWN_HINT appended to "is not known": -EACCES, or
 * 0 when the error is no credential's (the caller answers it). */
int req_deny_credentials(Request *r, int error, const char *what, const char *unknown_hint);
void req_reply_bus_error(Request *r, const sd_bus_error *e);
void req_reply_errno(Request *r, int error);
/* A key store failure: 503 key_store_unavailable when the shared store cannot be reached, else 500 with what. */
void req_reply_store_error(Request *r, int error, const char *what);
bool req_answered(Request *r);

/* The body as JSON, checked against fields; on failure the request is answered (400) and -EINVAL
 * returned. */
int req_parse_json(Request *r, const JsonField *fields, size_t n_fields, json_object **ret);

/* The caller context a{sv} for sandboxd/sandbox-auditd: account_id, request_id, source "agent". */
int req_append_context(Request *r, sd_bus_message *m);

/* Bus calls on behalf of the request (which is kept alive until reply has run). Each call counts against
 * the key's MaxCalls{Member,Admin}Key= until its reply is in, whether or not the client is still there:
 * at the limit the request is answered 429 "too_many_calls" and -EBUSY returned. */
typedef void (*req_reply_t)(Request *r, sd_bus_message *reply, const sd_bus_error *error);
int req_call(Request *r, const char *destination, const char *path, const char *interface,
             const char *member, bus_pool_build_t build, req_reply_t reply, uint64_t timeout_usec);
/* The same with bus pool flags: BUS_POOL_LONG for calls that may run for hours (Exec). */
int req_call_full(Request *r, const char *destination, const char *path, const char *interface,
                  const char *member, bus_pool_build_t build, req_reply_t reply, uint64_t timeout_usec,
                  BusPoolFlags flags);

/* An Exec start of the request's key (manager_exec_start_take()): 0, or, over the key's budget, the
 * request is answered 429 "too_many_execs" with Retry-After and -EBUSY returned. */
int req_exec_start_take(Request *r);

/* An inner request of outer's for method and path, with outer's key, account, request id and client: the
 * caller sets query, body (malloc'ed, NUL-terminated), answer_to and answer_userdata, then runs it with
 * req_inner_dispatch(), which does what a client's request of that route gets: the route's match (404,
 * 405), the key's actions and sandbox scope (a refusal recorded as the REST route's), a sandbox's name
 * made its id, and the handler. answer_to runs once, with the answer (status, content type, body). */
int req_inner_new(Request *outer, const char *method, const char *path, Request **ret);
void req_inner_dispatch(Request *r);
/* The outer request's client left: a command of the inner one is cancelled, its queued calls dropped,
 * and its answer no longer delivered. */
void req_inner_abandon(Request *r);

/* The HTTP server itself. */
/* Limits from m->config: MaxConnections=, MaxConnectionsPerAddress=, ConnectionTimeoutSec=, HeaderTimeoutSec=. */
int http_server_new(Manager *m, int listen_fd, const struct sockaddr *sa, HttpServer **ret);
HttpServer *http_server_free(HttpServer *s);
void http_server_kick(HttpServer *s);

/* The route table (gatewayd-routes.c). */
extern const Route gateway_routes[];
extern const size_t gateway_routes_count;
