/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The server side of a WebSocket on an upgraded HTTP connection: wslay framing driven by sd-event.
 *
 * libmicrohttpd hands over the connection after its 101 response; wslay's event API does the framing
 * (it unmasks the client's frames, answers pings, and fails the connection with 1002 on frames that
 * break the protocol: unmasked, reserved bits, unknown opcodes, fragmented control frames; a frame its
 * framing layer refuses, such as a length not in its shortest form, gets a close without a code). We add
 * what it leaves to the application: a size limit checked as a frame starts (so an oversized frame is
 * refused before its payload is read, also with 1002), keepalive pings, a bound on the closing
 * handshake, and one io source whose events follow what wslay wants to read and write. */
#include "websocket.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "base64-util.h"
#include "macro.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

struct WebSocket {
        sd_event *event;
        int fd;
        wslay_event_context_ptr ctx;
        sd_event_source *io, *ping_timer, *close_timer, *defer, *finish;
        WebSocketConfig config;
        WebSocketCallbacks cb;
        void *userdata;
        uint8_t *extra;
        size_t extra_size, extra_pos;
        bool paused, closed;
        bool peer_gone;      /* reading failed: the peer hung up, or the connection broke */
        uint64_t last_heard; /* CLOCK_MONOTONIC µs of the last bytes from the peer */
        uint64_t msg_bytes;  /* of the data message being received, over its frames */
        bool close_pending;  /* websocket_close() waits for the queued messages */
        uint16_t close_code;
        char close_reason[124];
        size_t low_water;
        bool above_low_water;
        void (*on_drained)(WebSocket *ws, void *userdata);
};

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int websocket_accept_key(const char *key, char ret[static WS_ACCEPT_LEN + 1]) {
        uint8_t digest[20];
        char buf[24 + sizeof(WS_GUID)];
        _cleanup_free_ char *accept = NULL;
        int r;

        /* 16 bytes in base64: 22 characters, the last with its 4 low bits unused, then "==". */
        if (!key || strlen(key) != 24 || key[22] != '=' || key[23] != '=')
                return -EINVAL;
        for (size_t i = 0; i < 22; i++) {
                const char *p = key[i] ? strchr(b64, key[i]) : NULL;
                if (!p || (i == 21 && ((p - b64) & 15) != 0))
                        return -EINVAL;
        }
        memcpy(buf, key, 24);
        memcpy(buf + 24, WS_GUID, sizeof(WS_GUID));
        if (gnutls_hash_fast(GNUTLS_DIG_SHA1, buf, 24 + strlen(WS_GUID), digest) < 0)
                return -EIO;
        r = base64_encode_alloc(digest, sizeof(digest), &accept);
        if (r < 0)
                return r;
        assert(strlen(accept) == WS_ACCEPT_LEN);
        memcpy(ret, accept, WS_ACCEPT_LEN + 1);
        return 0;
}

/* --- wslay's I/O ------------------------------------------------------------------------------ */

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *userdata) {
        WebSocket *ws = userdata;

        if (ws->extra_pos < ws->extra_size) {
                size_t k = MIN(len, ws->extra_size - ws->extra_pos);
                memcpy(buf, ws->extra + ws->extra_pos, k);
                ws->extra_pos += k;
                return (ssize_t) k;
        }
        if (ws->paused) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        for (;;) {
                ssize_t n = recv(ws->fd, buf, len, MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        ws->peer_gone = errno != EAGAIN;
                        wslay_event_set_error(ctx, errno == EAGAIN ? WSLAY_ERR_WOULDBLOCK
                                                                   : WSLAY_ERR_CALLBACK_FAILURE);
                        return -1;
                }
                if (n == 0) {
                        /* The peer is gone without a close frame. */
                        ws->peer_gone = true;
                        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
                        return -1;
                }
                (void) sd_event_now(ws->event, CLOCK_MONOTONIC, &ws->last_heard);
                return n;
        }
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *userdata) {
        WebSocket *ws = userdata;

        for (;;) {
                ssize_t n = send(ws->fd, data, len,
                                 MSG_DONTWAIT | MSG_NOSIGNAL | (flags & WSLAY_MSG_MORE ? MSG_MORE : 0));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        wslay_event_set_error(ctx, errno == EAGAIN ? WSLAY_ERR_WOULDBLOCK
                                                                   : WSLAY_ERR_CALLBACK_FAILURE);
                        return -1;
                }
                return n;
        }
}

static void frame_start_cb(wslay_event_context_ptr ctx,
                           const struct wslay_event_on_frame_recv_start_arg *arg, void *userdata) {
        WebSocket *ws = userdata;

        /* Refused before its payload is read: a peer cannot make us buffer more than max_message. wslay's
         * own limit would answer 1009; a frame past ours breaks the protocol we speak: 1002. */
        if (!(arg->opcode & 0x8)) {
                if (arg->opcode != 0) /* not a continuation: a new message */
                        ws->msg_bytes = 0;
                ws->msg_bytes += arg->payload_length;
        }
        if (ws->config.max_message > 0 &&
            (arg->payload_length > ws->config.max_message || ws->msg_bytes > ws->config.max_message)) {
                static const char reason[] = "frame too large";
                (void) wslay_event_queue_close(ctx, WS_CLOSE_PROTOCOL_ERROR, (const uint8_t *) reason,
                                               sizeof(reason) - 1);
                wslay_event_shutdown_read(ctx);
        }
}

static void msg_cb(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                   void *userdata) {
        WebSocket *ws = userdata;

        if (!wslay_event_get_read_enabled(ctx) && arg->opcode != WSLAY_CONNECTION_CLOSE)
                return; /* we are failing the connection: nothing more of the peer's counts */
        if (arg->opcode == WSLAY_BINARY_FRAME && ws->cb.on_binary)
                ws->cb.on_binary(ws, arg->msg, arg->msg_length, ws->userdata);
        else if (arg->opcode == WSLAY_TEXT_FRAME && ws->cb.on_text)
                ws->cb.on_text(ws, (const char *) arg->msg, arg->msg_length, ws->userdata);
}

/* --- driving it ------------------------------------------------------------------------------- */

static void websocket_update(WebSocket *ws);

static int on_close_timeout(sd_event_source *es, uint64_t usec, void *userdata) {
        WebSocket *ws = userdata;
        wslay_event_shutdown_read(ws->ctx);
        wslay_event_shutdown_write(ws->ctx);
        websocket_update(ws);
        return 0;
}

static void websocket_finish(WebSocket *ws) {
        if (ws->closed)
                return;
        ws->closed = true;
        ws->io = sd_event_source_disable_unref(ws->io);
        ws->ping_timer = sd_event_source_disable_unref(ws->ping_timer);
        ws->close_timer = sd_event_source_disable_unref(ws->close_timer);
        uint16_t sent = wslay_event_get_close_sent(ws->ctx) ? wslay_event_get_status_code_sent(ws->ctx) : 0;
        uint16_t received =
                wslay_event_get_close_received(ws->ctx) ? wslay_event_get_status_code_received(ws->ctx) : 0;
        if (ws->cb.on_closed)
                ws->cb.on_closed(ws, sent, received, ws->userdata);
}

static int on_finish(sd_event_source *es, void *userdata) {
        WebSocket *ws = userdata;
        ws->finish = sd_event_source_disable_unref(ws->finish);
        websocket_finish(ws);
        return 0;
}

/* Is there anything left to do on this connection? */
static bool websocket_done(WebSocket *ws) {
        return !wslay_event_want_read(ws->ctx) && !wslay_event_want_write(ws->ctx);
}

static void queue_close_now(WebSocket *ws) {
        ws->close_pending = false;
        int r = wslay_event_queue_close(ws->ctx, ws->close_code, (const uint8_t *) ws->close_reason,
                                        strlen(ws->close_reason));
        if (r != 0 && r != WSLAY_ERR_NO_MORE_MSG) {
                wslay_event_shutdown_read(ws->ctx);
                wslay_event_shutdown_write(ws->ctx);
        }
        if (!ws->close_timer && ws->config.close_timeout_usec > 0)
                (void) sd_event_add_time_relative(ws->event, &ws->close_timer, CLOCK_MONOTONIC,
                                                  ws->config.close_timeout_usec, 0, on_close_timeout, ws);
}

static void websocket_update(WebSocket *ws) {
        if (ws->closed || !ws->io)
                return;
        /* wslay sends control frames ahead of queued data: our close waits until the data is out. */
        if (ws->close_pending && wslay_event_get_queued_msg_length(ws->ctx) == 0)
                queue_close_now(ws);
        if (websocket_done(ws)) {
                /* on_closed always comes from the event loop, never from inside one of our calls: the
                 * owner may free us there. */
                (void) sd_event_source_set_enabled(ws->io, SD_EVENT_OFF);
                if (!ws->finish && sd_event_add_defer(ws->event, &ws->finish, on_finish, ws) < 0)
                        websocket_finish(ws);
                return;
        }
        uint32_t events = 0;
        if (wslay_event_want_read(ws->ctx) && !ws->paused)
                events |= EPOLLIN | EPOLLRDHUP;
        if (wslay_event_want_write(ws->ctx))
                events |= EPOLLOUT;
        if (events == 0)
                (void) sd_event_source_set_enabled(ws->io, SD_EVENT_OFF); /* paused, nothing to send */
        else {
                (void) sd_event_source_set_io_events(ws->io, events);
                (void) sd_event_source_set_enabled(ws->io, SD_EVENT_ON);
        }
        if (wslay_event_get_queued_msg_length(ws->ctx) >= ws->low_water)
                ws->above_low_water = true;
}

/* After writing, from the event loop only (the owner's callback may queue more). */
static void check_drained(WebSocket *ws) {
        if (ws->closed || !ws->on_drained || !ws->above_low_water ||
            wslay_event_get_queued_msg_length(ws->ctx) >= ws->low_water)
                return;
        ws->above_low_water = false;
        ws->on_drained(ws, ws->userdata);
}

/* wslay_event_recv() failed. If the peer is still there, it broke the framing itself (a length not in
 * its shortest form, a 64-bit length with the top bit set, …): wslay has queued a close frame for that,
 * which is still to be sent before the connection ends, rather than dropping it unexplained. Returns 0
 * then, else r. */
static int recv_failed(WebSocket *ws, int r) {
        if (ws->peer_gone)
                return r;
        wslay_event_shutdown_read(ws->ctx);
        return 0;
}

static int on_io(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        WebSocket *ws = userdata;
        int r = 0;

        if (!ws->paused && (revents & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
                r = wslay_event_recv(ws->ctx);
        if (r < 0)
                r = recv_failed(ws, r);
        if (r == 0 && wslay_event_want_write(ws->ctx))
                r = wslay_event_send(ws->ctx);
        if (r < 0 || (revents & (EPOLLHUP | EPOLLERR))) {
                /* Broken: nothing more can be read or written. */
                wslay_event_shutdown_read(ws->ctx);
                wslay_event_shutdown_write(ws->ctx);
        }
        websocket_update(ws);
        check_drained(ws);
        return 0;
}

static int on_ping_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        WebSocket *ws = userdata;

        if (usec >= ws->last_heard + 3 * ws->config.ping_interval_usec) {
                /* Silent through three pings: gone, whatever TCP thinks. */
                (void) websocket_close(ws, WS_CLOSE_GOING_AWAY, "no answer to pings");
                return 0;
        }
        struct wslay_event_msg ping = {.opcode = WSLAY_PING, .msg = (const uint8_t *) "", .msg_length = 0};
        (void) wslay_event_queue_msg(ws->ctx, &ping);
        (void) sd_event_source_set_time(es, usec + ws->config.ping_interval_usec);
        (void) sd_event_source_set_enabled(es, SD_EVENT_ONESHOT);
        websocket_update(ws);
        return 0;
}

static int on_defer(sd_event_source *es, void *userdata) {
        WebSocket *ws = userdata;

        /* Bytes libmicrohttpd had read already: process them before waiting for the socket. */
        ws->defer = sd_event_source_disable_unref(ws->defer);
        int r = wslay_event_recv(ws->ctx);
        if (r < 0)
                r = recv_failed(ws, r);
        if (r < 0) {
                wslay_event_shutdown_read(ws->ctx);
                wslay_event_shutdown_write(ws->ctx);
        } else if (wslay_event_want_write(ws->ctx) && wslay_event_send(ws->ctx) < 0)
                wslay_event_shutdown_write(ws->ctx);
        websocket_update(ws);
        return 0;
}

int websocket_new(sd_event *event, int fd, const void *extra, size_t extra_size,
                  const WebSocketConfig *config, const WebSocketCallbacks *callbacks, void *userdata,
                  WebSocket **ret) {
        static const struct wslay_event_callbacks wcb = {
                .recv_callback = recv_cb,
                .send_callback = send_cb,
                .on_frame_recv_start_callback = frame_start_cb,
                .on_msg_recv_callback = msg_cb,
        };
        WebSocket *ws;
        int r;

        ws = calloc(1, sizeof(WebSocket));
        if (!ws)
                return -ENOMEM;
        ws->event = sd_event_ref(event);
        ws->fd = fd;
        ws->config = *config;
        ws->cb = *callbacks;
        ws->userdata = userdata;
        (void) sd_event_now(event, CLOCK_MONOTONIC, &ws->last_heard);
        if (extra_size > 0) {
                ws->extra = malloc(extra_size);
                if (!ws->extra) {
                        websocket_free(ws);
                        return -ENOMEM;
                }
                memcpy(ws->extra, extra, extra_size);
                ws->extra_size = extra_size;
        }
        if (wslay_event_context_server_init(&ws->ctx, &wcb, ws) != 0) {
                ws->ctx = NULL;
                websocket_free(ws);
                return -ENOMEM;
        }

        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
                r = -errno;
                websocket_free(ws);
                return r;
        }
        r = sd_event_add_io(event, &ws->io, fd, EPOLLIN | EPOLLRDHUP, on_io, ws);
        if (r >= 0 && extra_size > 0)
                r = sd_event_add_defer(event, &ws->defer, on_defer, ws);
        if (r >= 0 && config->ping_interval_usec > 0)
                r = sd_event_add_time_relative(event, &ws->ping_timer, CLOCK_MONOTONIC,
                                               config->ping_interval_usec, 0, on_ping_timer, ws);
        if (r < 0) {
                websocket_free(ws);
                return r;
        }
        *ret = ws;
        return 0;
}

WebSocket *websocket_free(WebSocket *ws) {
        if (!ws)
                return NULL;
        sd_event_source_disable_unref(ws->io);
        sd_event_source_disable_unref(ws->ping_timer);
        sd_event_source_disable_unref(ws->close_timer);
        sd_event_source_disable_unref(ws->defer);
        sd_event_source_disable_unref(ws->finish);
        if (ws->ctx)
                wslay_event_context_free(ws->ctx);
        sd_event_unref(ws->event);
        free(ws->extra);
        free(ws);
        return NULL;
}

static int queue(WebSocket *ws, uint8_t opcode, const void *data, size_t n) {
        struct wslay_event_msg msg = {.opcode = opcode, .msg = data, .msg_length = n};

        if (ws->closed || ws->close_pending)
                return -ENOTCONN;
        int r = wslay_event_queue_msg(ws->ctx, &msg);
        if (r == WSLAY_ERR_NO_MORE_MSG)
                return -ENOTCONN;
        if (r != 0)
                return r == WSLAY_ERR_NOMEM ? -ENOMEM : -EINVAL;
        websocket_update(ws);
        return 0;
}

int websocket_send_binary(WebSocket *ws, const void *data, size_t n) {
        return queue(ws, WSLAY_BINARY_FRAME, data, n);
}

int websocket_send_text(WebSocket *ws, const char *data, size_t n) {
        return queue(ws, WSLAY_TEXT_FRAME, data, n);
}

int websocket_close(WebSocket *ws, uint16_t code, const char *reason) {
        size_t n = reason ? MIN(strlen(reason), (size_t) 123) : 0;

        if (ws->closed || ws->close_pending || wslay_event_get_close_sent(ws->ctx) ||
            !wslay_event_get_write_enabled(ws->ctx))
                return 0;
        ws->close_pending = true;
        ws->close_code = code;
        memcpy(ws->close_reason, reason ?: "", n);
        ws->close_reason[n] = 0;
        websocket_update(ws);
        return 0;
}

size_t websocket_queued_bytes(WebSocket *ws) {
        return ws->ctx ? wslay_event_get_queued_msg_length(ws->ctx) : 0;
}

void websocket_pause_read(WebSocket *ws, bool paused) {
        if (ws->paused == paused)
                return;
        ws->paused = paused;
        websocket_update(ws);
}

void websocket_set_drain_callback(WebSocket *ws, size_t low_water,
                                  void (*on_drained)(WebSocket *ws, void *userdata)) {
        ws->low_water = low_water;
        ws->on_drained = on_drained;
}
