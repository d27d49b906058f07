/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Takeover routes: single-use tokens, the WebSocket shell (sandboxd's OpenShell), and session recordings.
 *
 * GET …/takeover checks everything before it answers 101: the credentials (the Authorization header,
 * or a token from POST …/takeover-token, redeemed atomically in the key store so it works once across
 * every gateway process), the takeover action (admin keys only), the browser's Origin, the upgrade
 * headers and the size. Only then does it ask sandboxd for a shell, and only a shell that exists is
 * answered with 101: a refused caller never gets so much as a briefly live PTY or scope. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "gateway-takeover.h"
#include "gatewayd-routes.h"
#include "ini-util.h"
#include "key-sessions.h"
#include "log.h"
#include "time-util.h"
#include "websocket.h"

#define TAKEOVER_ROUTE              "takeover"
#define TAKEOVER_MAX_MESSAGE        (1024 * 1024)
#define TAKEOVER_CLOSE_TIMEOUT_USEC (5 * USEC_PER_SEC)
#define TERM_FOR_BROWSERS           "xterm-256color"

/* --- POST …/takeover-token ---------------------------------------------------------------------- */

static int build_get_sandbox(sd_bus_message *m, void *userdata) {
        return sd_bus_message_append(m, "s", req_param(userdata, 0));
}

static void on_sandbox_for_token(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        _cleanup_free_ char *token = NULL;
        uint64_t expires_at;
        json_object *o;
        int k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        /* bound to the sandbox as the URL named it (dispatch() made a name its id): the takeover names it so */
        k = key_store_token_create(r->manager->keys, r->key, r->named[0] ? r->named : req_param(r, 0), TAKEOVER_ROUTE,
                                   now_usec(CLOCK_REALTIME), r->manager->config.takeover_token_ttl_usec,
                                   &token, &expires_at);
        if (k < 0) {
                log_msg(LOG_ERR, "Cannot store a takeover token: %s", strerror(-k));
                return req_reply_store_error(r, k, "Cannot store the token.");
        }
        o = json_object_new_object();
        if (o) {
                json_object_object_add(o, "token", json_object_new_string(token));
                json_object_object_add(o, "expires_at", json_time(expires_at));
        }
        req_reply_json(r, 201, o);
}

int route_takeover_token(Request *r) {
        json_object *body = NULL;

        /* No fields: an empty body or {}. */
        if (req_parse_json(r, NULL, 0, &body) < 0)
                return 0;
        json_object_put(body);
        /* Only for a sandbox that exists (as named here: the takeover must name it the same way). */
        return req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "GetSandbox",
                        build_get_sandbox, on_sandbox_for_token, 0);
}

/* --- GET …/takeover ----------------------------------------------------------------------------- */

typedef struct Takeover {
        unsigned n_ref;
        Manager *manager;
        int stream_fd;
        char *unit;
        char *account_id;
        char request_id[REQUEST_ID_MAX + 40];
        char sandbox[ROUTE_PARAM_MAX];
        unsigned cols, rows;
        char accept[WS_ACCEPT_LEN + 1];
        bool upgraded;
        struct MHD_UpgradeResponseHandle *urh;
        TakeoverBridge *bridge;
        uint64_t started;
        KeySession *key_session; /* the key's revocation or expiry ends the session */
        int key_ended;           /* why it did (-EKEYREVOKED, -EKEYEXPIRED), or 0 */
} Takeover;

static Takeover *takeover_ref(Takeover *t) {
        t->n_ref++;
        return t;
}

static void takeover_unref(Takeover *t) {
        if (!t || --t->n_ref > 0)
                return;
        key_session_free(t->key_session);
        takeover_bridge_free(t->bridge);
        safe_close(t->stream_fd);
        free(t->unit);
        free(t->account_id);
        free(t);
}

/* The request is over. If it never became a WebSocket (the client left before the 101 went out), the
 * shell sandboxd opened for it is hung up now. */
static void takeover_request_done(void *p) {
        Takeover *t = p;

        if (!t->upgraded)
                t->stream_fd = safe_close(t->stream_fd);
        takeover_unref(t);
}

static void on_bridge_done(TakeoverBridge *b, void *userdata) {
        Takeover *t = userdata;
        uint16_t sent, received;
        int exit_code;

        takeover_bridge_result(b, &sent, &received, &exit_code);
        log_msg(LOG_INFO,
                "Takeover %s of sandbox %s by %s (%s) ended after %" PRIu64
                " s: close %u sent, %u received, "
                "exit code %d.",
                strna(t->unit), t->sandbox, strna(t->account_id), t->request_id,
                (now_usec(CLOCK_MONOTONIC) - t->started) / USEC_PER_SEC, sent, received, exit_code);
        t->bridge = takeover_bridge_free(t->bridge);
        (void) MHD_upgrade_action(t->urh, MHD_UPGRADE_ACTION_CLOSE);
        http_server_kick(t->manager->server);
        takeover_unref(t);
}

/* The key was revoked or expired: a running session gets close 1008, one not yet upgraded a 401. */
static void on_takeover_key_ended(void *userdata, int why) {
        Takeover *t = userdata;

        t->key_ended = why;
        if (t->bridge)
                takeover_bridge_end(t->bridge, WS_CLOSE_POLICY_VIOLATION, key_session_end_reason(why));
        /* else: on_shell_opened() or on_upgrade() see key_ended */
}

static void on_upgrade(void *cls, struct MHD_Connection *connection, void *req_cls, const char *extra_in,
                       size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh) {
        Takeover *t = cls;
        Manager *m = t->manager;
        WebSocketConfig config = {
                .max_message = TAKEOVER_MAX_MESSAGE,
                .ping_interval_usec = m->config.heartbeat_usec,
                .close_timeout_usec = TAKEOVER_CLOSE_TIMEOUT_USEC,
        };
        int k = -EPIPE;

        t->upgraded = true;
        t->urh = urh;
        t->started = now_usec(CLOCK_MONOTONIC);
        if (t->stream_fd >= 0)
                k = takeover_bridge_new(m->event, m->bus, sock, extra_in, extra_in_size,
                                        TAKE_FD(t->stream_fd), t->unit, &config, on_bridge_done, t,
                                        &t->bridge);
        if (k < 0) {
                log_msg(LOG_ERR, "Cannot start takeover %s (%s): %s", strna(t->unit), t->request_id,
                        strerror(-k));
                (void) MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
                http_server_kick(m->server);
                takeover_unref(t);
                return;
        }
        log_msg(LOG_INFO, "Takeover %s of sandbox %s by %s (%s) started, %ux%u.", t->unit, t->sandbox,
                strna(t->account_id), t->request_id, t->cols, t->rows);
        if (t->key_ended) /* between the 101 and now */
                takeover_bridge_end(t->bridge, WS_CLOSE_POLICY_VIOLATION,
                                    key_session_end_reason(t->key_ended));
}

static int build_open_shell(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        Takeover *t = r->data;

        return sd_bus_message_append(m, "sa{sv}", req_param(r, 0), 6, "cols", "u", (uint32_t) t->cols,
                                     "rows", "u", (uint32_t) t->rows, "term", "s", TERM_FOR_BROWSERS,
                                     "account_id", "s", strempty(r->account_id), "request_id", "s",
                                     r->request_id, "source", "s", "human_takeover");
}

static void on_shell_opened(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        Takeover *t = r->data;
        struct MHD_Response *resp;
        const char *unit;
        int fd, k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        k = sd_bus_message_read(reply, "hs", &fd, &unit);
        if (k >= 0 && (t->stream_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
                k = -errno;
        if (k >= 0 && !(t->unit = strdup(unit)))
                k = -ENOMEM;
        if (k < 0)
                return req_reply_errno(r, k); /* the request's end closes the stream: hung up */
        if (t->key_ended)
                return req_reply_error(r, 401, "unauthorized", "%s", key_session_end_message(t->key_ended));
        if (!r->connection)
                return; /* the client is gone: takeover_request_done() hangs the shell up */

        resp = MHD_create_response_for_upgrade(on_upgrade, takeover_ref(t));
        if (!resp) {
                takeover_unref(t);
                return req_reply_errno(r, -ENOMEM);
        }
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
        (void) MHD_add_response_header(resp, "Sec-WebSocket-Accept", t->accept);
        req_reply_response(r, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
}

/* The credentials: the Authorization header (SDKs), else ?token= (browsers). 0, or answered. */
int route_takeover_authenticate(Request *r) {
        Manager *m = r->manager;
        const char *hdr = req_header(r, MHD_HTTP_HEADER_AUTHORIZATION), *token = req_query(r, "token");
        const char *secret, *what = "The API key";
        uint64_t now = now_usec(CLOCK_REALTIME);
        int k;

        if (hdr) {
                if (auth_parse_bearer(hdr, &secret) < 0) {
                        req_deny(r, 401, "unauthorized", "anonymous",
                                 "The Authorization header must be \"Bearer <API key>\".");
                        return -EACCES;
                }
                k = key_store_authenticate(m->keys, secret, now, &r->key);
        } else if (token) {
                what = "The takeover token";
                k = key_store_token_redeem(m->keys, token, req_param(r, 0), TAKEOVER_ROUTE, now, &r->key);
        } else {
                req_deny(r, 401, "unauthorized", "anonymous",
                         "Missing the Authorization: Bearer <API key> header or a ?token= from POST "
                         "/v1/sandboxes/{id}/takeover-token.");
                return -EACCES;
        }
        if (k < 0) {
                const char *hint = token && !hdr ? " (or was made for another sandbox)" : "";

                if (req_deny_credentials(r, k, what, hint) < 0)
                        return -EACCES;
                log_msg(LOG_ERR, "Cannot check takeover credentials: %s", strerror(-k));
                req_reply_store_error(r, k, "Cannot check the credentials.");
                return k;
        }
        k = api_key_account_id(r->key, &r->account_id);
        if (k < 0) {
                req_reply_errno(r, k);
                return k;
        }
        return 0;
}

/* The key's role and scope, for the sandbox as an id (dispatch() resolved a scoped key's name first); a
 * name that is none of a scoped key's sandboxes is "outside scope" whether or not it exists. true, or
 * answered. */
bool route_takeover_authorize(Request *r) {
        if (!api_key_allows(r->key, GATEWAY_ACTION_TAKEOVER, req_param(r, 0))) {
                if (api_key_allows(r->key, GATEWAY_ACTION_TAKEOVER, NULL) && r->key->sandboxes)
                        req_deny(r, 403, "forbidden", NULL, "Sandbox %s is outside this API key's scope.",
                                 req_param(r, 0));
                else
                        req_deny(r, 403, "forbidden", NULL, "%s", TAKEOVER_FORBIDDEN_MESSAGE);
                return false;
        }
        return true;
}

int route_takeover(Request *r) {
        const char *origin, *upgrade, *connection, *version, *key;
        Takeover *t;
        int k;

        origin = req_header(r, "Origin");
        if (!takeover_origin_allowed(origin, r->manager->config.takeover_origins) &&
            !takeover_origin_is_host(origin, req_header(r, MHD_HTTP_HEADER_HOST))) {
                req_deny(r, 403, "forbidden", NULL, "Origin %s may not open a takeover (TakeoverOrigins=).",
                         origin);
                return 0;
        }

        upgrade = req_header(r, MHD_HTTP_HEADER_UPGRADE);
        connection = req_header(r, MHD_HTTP_HEADER_CONNECTION);
        version = req_header(r, "Sec-WebSocket-Version");
        key = req_header(r, "Sec-WebSocket-Key");
        k = takeover_check_upgrade(upgrade, connection, version);
        if (k == -EPROTO) {
                req_reply_error(
                        r, 426, "upgrade_required",
                        "This route is a WebSocket: send Connection: Upgrade and Upgrade: websocket.");
                if (r->response)
                        (void) MHD_add_response_header(r->response, MHD_HTTP_HEADER_UPGRADE, "websocket");
                return 0;
        }
        if (k < 0) {
                req_reply_error(r, 426, "upgrade_required", "Only WebSocket version 13 is spoken here.");
                if (r->response)
                        (void) MHD_add_response_header(r->response, "Sec-WebSocket-Version", "13");
                return 0;
        }

        t = calloc(1, sizeof(Takeover));
        if (!t)
                return -ENOMEM;
        t->n_ref = 1;
        t->manager = r->manager;
        t->stream_fd = -EBADF;
        r->data = t;
        r->data_free = takeover_request_done;
        snprintf(t->request_id, sizeof(t->request_id), "%s", r->request_id);
        snprintf(t->sandbox, sizeof(t->sandbox), "%s", req_param(r, 0));
        if (r->account_id && !(t->account_id = strdup(r->account_id)))
                return -ENOMEM;
        k = key_session_add(r->manager, r->key, on_takeover_key_ended, t, &t->key_session);
        if (k < 0)
                return k;

        if (websocket_accept_key(key, t->accept) < 0) {
                req_reply_error(r, 400, "invalid_request", "Sec-WebSocket-Key must be 16 bytes in base64.");
                return 0;
        }
        k = takeover_parse_size(req_query(r, "cols"), req_query(r, "rows"), &t->cols, &t->rows);
        if (k < 0) {
                req_reply_error(r, 400, "invalid_request",
                                "cols and rows go together, each a whole number from 1 to %d.",
                                TAKEOVER_SIZE_MAX);
                return 0;
        }
        return req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "OpenShell",
                        build_open_shell, on_shell_opened, 0);
}

/* --- GET …/takeovers/{n}/recording -------------------------------------------------------------- */

static int build_get_output(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        return sd_bus_message_append(m, "t", *(uint64_t *) r->data);
}

static void on_recording(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        const void *out = NULL;
        size_t size = 0;
        int k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        k = sd_bus_message_read_array(reply, 'y', &out, &size);
        if (k < 0)
                return req_reply_errno(r, k);
        if (size == 0)
                return req_reply_error(r, 404, "not_found", "Takeover %s of sandbox %s has no recording.",
                                       req_param(r, 1), req_param(r, 0));
        req_reply_data(r, 200, "application/x-asciicast", out, size);
}

static int build_find_row(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        uint64_t id = *(uint64_t *) r->data;

        return sd_bus_message_append(m, "a{sv}tt", 3, "session_id", "s", req_param(r, 0), "operation", "s",
                                     "takeover", "after_id", "t", id - 1, (uint64_t) 1000, (uint64_t) 0);
}

/* The row must be a takeover of this sandbox: a key scoped to it reads no other sandbox's output. */
static void on_row_found(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        uint64_t want = *(uint64_t *) r->data;
        bool found = false;
        int k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        k = sd_bus_message_enter_container(reply, 'a', "a{sv}");
        while (k > 0 && !found && (k = sd_bus_message_enter_container(reply, 'a', "{sv}")) > 0) {
                const char *name;
                while ((k = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                        uint64_t id;
                        if ((k = sd_bus_message_read(reply, "s", &name)) < 0)
                                break;
                        if (streq(name, "id"))
                                k = sd_bus_message_read(reply, "v", "t", &id);
                        else
                                k = sd_bus_message_skip(reply, "v");
                        if (k < 0)
                                break;
                        if (streq(name, "id") && id == want)
                                found = true;
                        if ((k = sd_bus_message_exit_container(reply)) < 0)
                                break;
                }
                if (k < 0 || (k = sd_bus_message_exit_container(reply)) < 0)
                        break;
                k = 1;
        }
        if (k < 0)
                return req_reply_errno(r, k);
        if (!found)
                return req_reply_error(r, 404, "not_found", "No takeover %" PRIu64 " of sandbox %s.", want,
                                       req_param(r, 0));
        k = req_call(r, AUDITD_BUS_NAME, AUDITD_BUS_PATH, AUDITD_LOG_INTERFACE, "GetOutput",
                     build_get_output, on_recording, 0);
        if (k < 0)
                req_reply_errno(r, k);
}

int route_takeover_recording(Request *r) {
        uint64_t *id = malloc(sizeof(uint64_t));

        if (!id)
                return -ENOMEM;
        r->data = id;
        r->data_free = free;
        if (parse_decimal(req_param(r, 1), id) < 0 || *id == 0) {
                req_reply_error(r, 404, "not_found", "No takeover '%s' (the id of its audit row).",
                                req_param(r, 1));
                return 0;
        }
        return req_call(r, AUDITD_BUS_NAME, AUDITD_BUS_PATH, AUDITD_LOG_INTERFACE, "GetLog", build_find_row,
                        on_row_found, 0);
}
