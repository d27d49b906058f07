/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Takeover over WebSocket: the bridge between a client's WebSocket and a sandboxd shell stream. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "websocket.h"

typedef struct TakeoverBridge TakeoverBridge;

#define TAKEOVER_SIZE_MAX 1000 /* as sandboxd's ResizeShell */

/* A client's control message: {"type":"resize","cols":N,"rows":M}, N and M 1-1000. 0 and the size, or
 * -EINVAL (not JSON, not an object, unknown type, missing or bad field, unknown field). */
int takeover_parse_control(const char *data, size_t n, unsigned *ret_cols, unsigned *ret_rows);

/* ?cols=&rows= of the upgrade request: both absent (80x24), or both decimal 1-1000. -EINVAL otherwise. */
int takeover_parse_size(const char *cols, const char *rows, unsigned *ret_cols, unsigned *ret_rows);

/* Is a browser's Origin allowed? allowed: space-separated exact origins ("https://a.example"), or "*"
 * for any; NULL or empty: none. No Origin (not a browser) is always allowed: such clients cannot be
 * driven by someone else's page, and authenticate with the Authorization header or a token. */
bool takeover_origin_allowed(const char *origin, const char *allowed);

/* Is origin the gateway itself, "http://HOST" or "https://HOST" for the request's Host header? A page
 * served from the gateway's own address is not a cross-site attacker (and clients such as Python's
 * websocket-client send that Origin by default). */
bool takeover_origin_is_host(const char *origin, const char *host);

/* Does a comma-separated header value (NULL: none) hold this token, case-insensitively? */
bool takeover_header_has_token(const char *value, const char *token);

/* The upgrade request's headers (each NULL if absent): 0 for a WebSocket upgrade of version 13; -EPROTO if
 * Upgrade lacks "websocket" or Connection lacks "upgrade"; -EPROTONOSUPPORT for another version. */
int takeover_check_upgrade(const char *upgrade, const char *connection, const char *version);

/* Called once when the session is over: both sides closed. The owner frees the bridge (and tells
 * libmicrohttpd to close the connection). */
typedef void (*takeover_done_t)(TakeoverBridge *b, void *userdata);

/* Relays between the WebSocket on ws_fd (not closed here) and stream_fd (taken: closing it hangs the
 * shell up). bus may be NULL: then resizes are not forwarded and the exit code is not asked for. */
int takeover_bridge_new(sd_event *event, sd_bus *bus, int ws_fd, const void *extra, size_t extra_size,
                        int stream_fd, const char *unit, const WebSocketConfig *config, takeover_done_t done,
                        void *userdata, TakeoverBridge **ret);

TakeoverBridge *takeover_bridge_free(TakeoverBridge *b);

/* Ends the session from our side: a close frame with code and reason, and the shell's stream closed
 * (sandboxd hangs the shell up). done follows once the close handshake is over. */
void takeover_bridge_end(TakeoverBridge *b, uint16_t code, const char *reason);
/* How the session ended, for the owner's log: the close codes, and the shell's exit code (-1 unknown). */
void takeover_bridge_result(TakeoverBridge *b, uint16_t *ret_sent, uint16_t *ret_received,
                            int *ret_exit_code);
