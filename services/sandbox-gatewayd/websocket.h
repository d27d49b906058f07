/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The server side of a WebSocket on an upgraded HTTP connection: wslay framing driven by sd-event. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

typedef struct WebSocket WebSocket;

/* Close codes we send (RFC 6455 7.4.1). */
#define WS_CLOSE_NORMAL           1000
#define WS_CLOSE_GOING_AWAY       1001
#define WS_CLOSE_PROTOCOL_ERROR   1002
#define WS_CLOSE_UNSUPPORTED_DATA 1003
#define WS_CLOSE_POLICY_VIOLATION 1008
#define WS_CLOSE_INTERNAL_ERROR   1011

/* "Sec-WebSocket-Accept" for a "Sec-WebSocket-Key": base64(SHA-1(key + the RFC's GUID)), 28 characters.
 * -EINVAL unless key is the base64 of 16 bytes, as RFC 6455 4.2.1 requires. */
#define WS_ACCEPT_LEN 28
int websocket_accept_key(const char *key, char ret[static WS_ACCEPT_LEN + 1]);

typedef struct WebSocketCallbacks {
        /* A complete binary message. */
        void (*on_binary)(WebSocket *ws, const uint8_t *data, size_t n, void *userdata);
        /* A complete text message (UTF-8 is not checked here). */
        void (*on_text)(WebSocket *ws, const char *data, size_t n, void *userdata);
        /* The connection is over (closed both ways, broken, or timed out). code_sent is the close code we
         * sent (0: none), code_received the peer's (0: none). The owner frees the WebSocket here or later.
         */
        void (*on_closed)(WebSocket *ws, uint16_t code_sent, uint16_t code_received, void *userdata);
} WebSocketCallbacks;

typedef struct WebSocketConfig {
        size_t max_message;          /* larger frames or messages from the peer: close 1002 */
        uint64_t ping_interval_usec; /* 0: no pings; else a ping this often, and a peer silent for
                                      * three intervals is taken as gone */
        uint64_t close_timeout_usec; /* how long we wait for the peer's close after ours */
} WebSocketConfig;

/* Speaks WebSocket on fd (an upgraded connection; made non-blocking here, never closed here: it is
 * libmicrohttpd's to close). extra: bytes already read past the HTTP request, which are the start of
 * the WebSocket stream. */
int websocket_new(sd_event *event, int fd, const void *extra, size_t extra_size,
                  const WebSocketConfig *config, const WebSocketCallbacks *callbacks, void *userdata,
                  WebSocket **ret);

/* Does not call on_closed, and leaves the fd open. */
WebSocket *websocket_free(WebSocket *ws);

int websocket_send_binary(WebSocket *ws, const void *data, size_t n);
int websocket_send_text(WebSocket *ws, const char *data, size_t n);

/* Queues a close frame (reason at most 123 bytes, cut otherwise); on_closed follows once the peer
 * answered or close_timeout_usec passed. Further calls are no-ops. */
int websocket_close(WebSocket *ws, uint16_t code, const char *reason);

/* Bytes queued for the peer and not yet written: the owner stops feeding us above some mark. */
size_t websocket_queued_bytes(WebSocket *ws);

/* Stops (or resumes) reading the peer: backpressure from where its messages go. */
void websocket_pause_read(WebSocket *ws, bool paused);

/* Calls back when the queue has drained below low_water (after being above it). */
void websocket_set_drain_callback(WebSocket *ws, size_t low_water,
                                  void (*on_drained)(WebSocket *ws, void *userdata));
