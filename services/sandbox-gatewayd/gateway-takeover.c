/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Takeover over WebSocket: the bridge between a client's WebSocket and a sandboxd shell stream.
 *
 * sandboxd's OpenShell stream carries the terminal's raw bytes both ways; the WebSocket carries them as
 * binary messages, and the client's text messages are JSON control messages (a resize, forwarded as
 * ResizeShell). Each direction is bounded: past 1 MiB queued for the client we stop reading the
 * shell (its output then stalls in sandboxd, which stops reading the PTY); past 256 KiB not yet taken
 * by the stream we stop reading the client. When the shell exits, sandboxd closes the stream: the
 * bridge asks WaitShell for the exit code and closes the WebSocket normally (1000, "exit N") after
 * the last output. When the client goes away, or breaks the protocol, the stream is closed, which is
 * how sandboxd learns to hang the shell up. */
#include "gateway-takeover.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "macro.h"
#include "sandboxd-bus.h"

#define TO_CLIENT_HIGH_WATER (1024 * 1024)
#define TO_CLIENT_LOW_WATER  (256 * 1024)
#define TO_STREAM_HIGH_WATER (256 * 1024)


struct TakeoverBridge {
        sd_event *event;
        sd_bus *bus;
        WebSocket *ws;
        int stream_fd;
        sd_event_source *stream_source;
        char *unit;
        char *to_stream;
        size_t to_stream_len;
        bool stream_eof, ws_closed, finished;
        sd_bus_slot *wait_slot;
        int exit_code;
        uint16_t code_sent, code_received;
        takeover_done_t done;
        void *userdata;
};

static int parse_dimension(json_object *o, unsigned *ret) {
        if (!o || !json_object_is_type(o, json_type_int))
                return -EINVAL;
        int64_t v = json_object_get_int64(o);
        if (v < 1 || v > TAKEOVER_SIZE_MAX)
                return -EINVAL;
        *ret = (unsigned) v;
        return 0;
}

int takeover_parse_control(const char *data, size_t n, unsigned *ret_cols, unsigned *ret_rows) {
        json_tokener *tok;
        json_object *o, *type = NULL, *cols = NULL, *rows = NULL;
        unsigned c, r;
        int ret = -EINVAL;

        if (n == 0 || n > 4096)
                return -EINVAL;
        tok = json_tokener_new_ex(4);
        if (!tok)
                return -ENOMEM;
        o = json_tokener_parse_ex(tok, data, (int) n);
        /* One whole value and nothing after it. */
        if (!o || json_tokener_get_error(tok) != json_tokener_success ||
            json_tokener_get_parse_end(tok) != n || !json_object_is_type(o, json_type_object))
                goto done;
        json_object_object_foreach(o, key, val) {
                if (streq(key, "type"))
                        type = val;
                else if (streq(key, "cols"))
                        cols = val;
                else if (streq(key, "rows"))
                        rows = val;
                else
                        goto done;
        }
        if (!type || !json_object_is_type(type, json_type_string) ||
            !streq(json_object_get_string(type), "resize"))
                goto done;
        if (parse_dimension(cols, &c) < 0 || parse_dimension(rows, &r) < 0)
                goto done;
        *ret_cols = c;
        *ret_rows = r;
        ret = 0;
done:
        json_object_put(o);
        json_tokener_free(tok);
        return ret;
}

static int parse_size_param(const char *s, unsigned *ret) {
        unsigned v = 0;

        if (isempty(s) || strlen(s) > 4)
                return -EINVAL;
        for (const char *p = s; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned) (*p - '0');
        }
        if (v < 1 || v > TAKEOVER_SIZE_MAX)
                return -EINVAL;
        *ret = v;
        return 0;
}

int takeover_parse_size(const char *cols, const char *rows, unsigned *ret_cols, unsigned *ret_rows) {
        unsigned c = 80, r = 24;

        if (!cols != !rows)
                return -EINVAL;
        if (cols && (parse_size_param(cols, &c) < 0 || parse_size_param(rows, &r) < 0))
                return -EINVAL;
        *ret_cols = c;
        *ret_rows = r;
        return 0;
}

bool takeover_origin_allowed(const char *origin, const char *allowed) {
        size_t n;

        if (!origin)
                return true;
        n = strlen(origin);
        for (const char *p = allowed; p && *p;) {
                size_t k = strcspn(p, " ");
                if ((k == 1 && *p == '*') || (k == n && n > 0 && strncmp(p, origin, n) == 0))
                        return true;
                p += k;
                p += strspn(p, " ");
        }
        return false;
}

bool takeover_origin_is_host(const char *origin, const char *host) {
        const char *rest;

        if (!origin || isempty(host))
                return false;
        if (strncmp(origin, "http://", 7) == 0)
                rest = origin + 7;
        else if (strncmp(origin, "https://", 8) == 0)
                rest = origin + 8;
        else
                return false;
        return strcasecmp(rest, host) == 0;
}

bool takeover_header_has_token(const char *value, const char *token) {
        size_t n = strlen(token);

        for (const char *p = value; p && *p;) {
                p += strspn(p, " \t,");
                size_t k = strcspn(p, ",");
                size_t e = k;
                while (e > 0 && (p[e - 1] == ' ' || p[e - 1] == '\t'))
                        e--;
                if (e == n && strncasecmp(p, token, n) == 0)
                        return true;
                p += k;
        }
        return false;
}

int takeover_check_upgrade(const char *upgrade, const char *connection, const char *version) {
        if (!takeover_header_has_token(upgrade, "websocket") || !takeover_header_has_token(connection, "upgrade"))
                return -EPROTO;
        if (!version || !streq(version, "13"))
                return -EPROTONOSUPPORT;
        return 0;
}

/* --- the bridge --------------------------------------------------------------------------------- */

static void bridge_update(TakeoverBridge *b) {
        if (!b->stream_source)
                return;
        uint32_t events = 0;
        if (!b->stream_eof && !b->ws_closed && websocket_queued_bytes(b->ws) < TO_CLIENT_HIGH_WATER)
                events |= EPOLLIN;
        if (b->to_stream_len > 0)
                events |= EPOLLOUT;
        if (events == 0)
                (void) sd_event_source_set_enabled(b->stream_source, SD_EVENT_OFF);
        else {
                (void) sd_event_source_set_io_events(b->stream_source, events);
                (void) sd_event_source_set_enabled(b->stream_source, SD_EVENT_ON);
        }
        if (b->ws && !b->ws_closed)
                websocket_pause_read(b->ws, b->to_stream_len >= TO_STREAM_HIGH_WATER);
}

/* Closing our end is the hang-up sandboxd acts on. */
static void bridge_close_stream(TakeoverBridge *b) {
        b->stream_source = sd_event_source_disable_unref(b->stream_source);
        b->stream_fd = safe_close(b->stream_fd);
        b->to_stream_len = 0;
}

static void bridge_maybe_done(TakeoverBridge *b) {
        if (b->finished || !b->ws_closed)
                return;
        b->finished = true;
        bridge_close_stream(b);
        b->wait_slot = sd_bus_slot_unref(b->wait_slot);
        if (b->done)
                b->done(b, b->userdata);
}

static void bridge_close_normally(TakeoverBridge *b) {
        char reason[64];

        if (b->exit_code >= 0)
                snprintf(reason, sizeof(reason), "exit %d", b->exit_code);
        else
                snprintf(reason, sizeof(reason), "shell ended");
        (void) websocket_close(b->ws, WS_CLOSE_NORMAL, reason);
}

static int on_shell_waited(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        TakeoverBridge *b = userdata;
        int32_t code;

        b->wait_slot = sd_bus_slot_unref(b->wait_slot);
        if (!sd_bus_message_is_method_error(reply, NULL) && sd_bus_message_read(reply, "i", &code) >= 0)
                b->exit_code = code;
        bridge_close_normally(b);
        return 0;
}

/* The shell is over (sandboxd closed the stream): how it ended, then a normal close. */
static void bridge_stream_ended(TakeoverBridge *b) {
        b->stream_eof = true;
        b->stream_source = sd_event_source_disable_unref(b->stream_source);
        if (b->ws_closed)
                return;
        if (b->bus && b->unit &&
            sd_bus_call_method_async(b->bus, &b->wait_slot, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                     SANDBOXD_MANAGER_INTERFACE, "WaitShell", on_shell_waited, b, "s",
                                     b->unit) >= 0)
                return;
        bridge_close_normally(b);
}

static int on_stream(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        TakeoverBridge *b = userdata;
        char buf[65536];

        if (revents & EPOLLOUT) {
                while (b->to_stream_len > 0) {
                        ssize_t k = send(fd, b->to_stream, b->to_stream_len, MSG_DONTWAIT | MSG_NOSIGNAL);
                        if (k < 0) {
                                if (errno == EINTR)
                                        continue;
                                if (errno != EAGAIN)
                                        b->to_stream_len = 0; /* the shell is gone; EOF follows */
                                break;
                        }
                        memmove(b->to_stream, b->to_stream + k, b->to_stream_len - k);
                        b->to_stream_len -= k;
                }
        }
        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (n < 0 && (errno == EINTR || errno == EAGAIN))
                        goto out;
                if (n <= 0) {
                        bridge_stream_ended(b);
                        return 0;
                }
                if (websocket_send_binary(b->ws, buf, (size_t) n) < 0) {
                        /* the client is going away: its close ends us */
                        bridge_close_stream(b);
                        return 0;
                }
        }
out:
        bridge_update(b);
        return 0;
}

static void on_ws_binary(WebSocket *ws, const uint8_t *data, size_t n, void *userdata) {
        TakeoverBridge *b = userdata;

        if (b->stream_fd < 0 || b->stream_eof)
                return; /* nobody to type to any more */
        if (n == 0)
                return; /* realloc(p, 0) would free the buffer and look like ENOMEM */
        char *nb = realloc(b->to_stream, b->to_stream_len + n);
        if (!nb) {
                (void) websocket_close(ws, WS_CLOSE_INTERNAL_ERROR, "out of memory");
                bridge_close_stream(b);
                return;
        }
        memcpy(nb + b->to_stream_len, data, n);
        b->to_stream = nb;
        b->to_stream_len += n;
        bridge_update(b);
}

static void on_ws_text(WebSocket *ws, const char *data, size_t n, void *userdata) {
        TakeoverBridge *b = userdata;
        unsigned cols, rows;

        if (takeover_parse_control(data, n, &cols, &rows) < 0) {
                /* Bad input ends the session clearly rather than being ignored. */
                (void) websocket_close(
                        ws, WS_CLOSE_POLICY_VIOLATION,
                        "bad control message: expected {\"type\":\"resize\",\"cols\":N,\"rows\":M}");
                bridge_close_stream(b);
                return;
        }
        if (b->bus && b->unit && b->stream_fd >= 0)
                (void) sd_bus_call_method_async(b->bus, NULL, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                                SANDBOXD_MANAGER_INTERFACE, "ResizeShell", NULL, NULL, "suu",
                                                b->unit, (uint32_t) cols, (uint32_t) rows);
}

static void on_ws_closed(WebSocket *ws, uint16_t sent, uint16_t received, void *userdata) {
        TakeoverBridge *b = userdata;

        b->ws_closed = true;
        b->code_sent = sent;
        b->code_received = received;
        bridge_maybe_done(b);
}

static void on_ws_drained(WebSocket *ws, void *userdata) {
        bridge_update(userdata);
}

int takeover_bridge_new(sd_event *event, sd_bus *bus, int ws_fd, const void *extra, size_t extra_size,
                        int stream_fd, const char *unit, const WebSocketConfig *config, takeover_done_t done,
                        void *userdata, TakeoverBridge **ret) {
        static const WebSocketCallbacks cb = {
                .on_binary = on_ws_binary,
                .on_text = on_ws_text,
                .on_closed = on_ws_closed,
        };
        TakeoverBridge *b;
        int r;

        b = calloc(1, sizeof(TakeoverBridge));
        if (!b) {
                safe_close(stream_fd);
                return -ENOMEM;
        }
        b->event = sd_event_ref(event);
        b->bus = bus ? sd_bus_ref(bus) : NULL;
        b->stream_fd = stream_fd;
        b->exit_code = -1;
        b->done = done;
        b->userdata = userdata;
        if (unit && !(b->unit = strdup(unit))) {
                takeover_bridge_free(b);
                return -ENOMEM;
        }
        (void) fcntl(stream_fd, F_SETFL, fcntl(stream_fd, F_GETFL) | O_NONBLOCK);
        r = websocket_new(event, ws_fd, extra, extra_size, config, &cb, b, &b->ws);
        if (r >= 0)
                r = sd_event_add_io(event, &b->stream_source, stream_fd, EPOLLIN, on_stream, b);
        if (r < 0) {
                takeover_bridge_free(b);
                return r;
        }
        websocket_set_drain_callback(b->ws, TO_CLIENT_LOW_WATER, on_ws_drained);
        *ret = b;
        return 0;
}

TakeoverBridge *takeover_bridge_free(TakeoverBridge *b) {
        if (!b)
                return NULL;
        bridge_close_stream(b);
        sd_bus_slot_unref(b->wait_slot);
        websocket_free(b->ws);
        sd_bus_unref(b->bus);
        sd_event_unref(b->event);
        free(b->to_stream);
        free(b->unit);
        free(b);
        return NULL;
}

void takeover_bridge_end(TakeoverBridge *b, uint16_t code, const char *reason) {
        if (!b || b->finished || b->ws_closed)
                return;
        (void) websocket_close(b->ws, code, reason);
        /* nothing typed from now on reaches the shell */
        bridge_close_stream(b);
}

void takeover_bridge_result(TakeoverBridge *b, uint16_t *ret_sent, uint16_t *ret_received,
                            int *ret_exit_code) {
        *ret_sent = b->code_sent;
        *ret_received = b->code_received;
        *ret_exit_code = b->exit_code;
}
