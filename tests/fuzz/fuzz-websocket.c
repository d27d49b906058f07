/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes the takeover WebSocket as a client drives it: the upgrade request's checks (Upgrade, Connection,
 * version, Sec-WebSocket-Key, Origin, ?cols=&rows=), then the client's byte stream through the real
 * server side (websocket.c on wslay, and the takeover bridge with its control-message parser), on
 * socketpairs in an sd-event loop, with a peer-to-peer bus whose ResizeShell checks what it is sent.
 *
 * Input: seven lines (Upgrade, Connection, Sec-WebSocket-Version, Sec-WebSocket-Key, Origin, then
 * "ALLOWED HOST" as TakeoverOrigins= and Host, then "COLS ROWS"; an empty field is an absent header),
 * a mode byte, then the client's stream. Mode bit 0: the stream is raw bytes; else frames the target
 * builds and masks, each "u8 FIN|RSV|opcode, u8 flags (bit 0: unmasked, bit 1: 64-bit length), u16 LE
 * length, payload", followed by a proper close frame. Bit 1: a small message limit (64 bytes). Bits 2-7:
 * how much of the stream libmicrohttpd "had read already" (passed as extra), in 1/64ths.
 *
 * Invariants: the session always ends (once the client's stream ends); a resize reaches ResizeShell
 * only with 1-1000 columns and rows, and only as many as the client sent valid ones; when the client's
 * last frame is a close, the session ends with a close handshake (a close sent or received), never by
 * just dropping the connection. */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "fuzz.h"
#include "gateway-takeover.h"
#include "macro.h"
#include "sandboxd-bus.h"
#include "websocket.h"

static sd_event *event;
static sd_bus *client, *server;
static unsigned resizes;

static int method_resize_shell(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        const char *unit;
        uint32_t cols, rows;

        FUZZ_ASSERT(sd_bus_message_read(m, "suu", &unit, &cols, &rows) >= 0);
        FUZZ_ASSERT(cols >= 1 && cols <= TAKEOVER_SIZE_MAX && rows >= 1 && rows <= TAKEOVER_SIZE_MAX);
        resizes++;
        return sd_bus_reply_method_return(m, NULL);
}

static const sd_bus_vtable vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("ResizeShell", "suu", "", method_resize_shell, 0),
        SD_BUS_VTABLE_END,
};

/* sandboxd, as far as the bridge sees it: a peer on a socketpair, on the same loop. */
static void setup(void) {
        sd_id128_t id;
        int fds[2];

        FUZZ_ASSERT(sd_event_new(&event) >= 0);
        FUZZ_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) >= 0);
        FUZZ_ASSERT(sd_id128_randomize(&id) >= 0);
        FUZZ_ASSERT(sd_bus_new(&server) >= 0 && sd_bus_set_fd(server, fds[0], fds[0]) >= 0);
        FUZZ_ASSERT(sd_bus_set_server(server, 1, id) >= 0);
        FUZZ_ASSERT(sd_bus_add_object_vtable(server, NULL, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                                             vtable, NULL) >= 0);
        FUZZ_ASSERT(sd_bus_start(server) >= 0 && sd_bus_attach_event(server, event, 0) >= 0);
        FUZZ_ASSERT(sd_bus_new(&client) >= 0 && sd_bus_set_fd(client, fds[1], fds[1]) >= 0);
        FUZZ_ASSERT(sd_bus_start(client) >= 0 && sd_bus_attach_event(client, event, 0) >= 0);
        for (unsigned i = 0; i < 10000 && sd_bus_is_ready(client) <= 0; i++)
                FUZZ_ASSERT(sd_event_run(event, 100000) >= 0);
        FUZZ_ASSERT(sd_bus_is_ready(client) > 0);
}

/* --- the upgrade request ------------------------------------------------------------------------ */

static void check_upgrade(char *line[7]) {
        const char *h[7];
        char accept[WS_ACCEPT_LEN + 1];
        unsigned cols, rows;
        int r;

        for (int i = 0; i < 7; i++)
                h[i] = line[i][0] ? line[i] : NULL;

        r = takeover_check_upgrade(h[0], h[1], h[2]);
        FUZZ_ASSERT(r == 0 || r == -EPROTO || r == -EPROTONOSUPPORT);
        if (r == 0)
                FUZZ_ASSERT(h[2] && streq(h[2], "13") && takeover_header_has_token(h[0], "websocket"));

        memset(accept, 'x', sizeof(accept));
        if (websocket_accept_key(h[3], accept) == 0)
                FUZZ_ASSERT(strlen(h[3]) == 24 && strnlen(accept, sizeof(accept)) == WS_ACCEPT_LEN);

        /* "ALLOWED HOST": the last word is the Host header, the rest TakeoverOrigins=. */
        char *host = strrchr(line[5], ' ');
        if (host)
                *host++ = 0;
        if (takeover_origin_allowed(h[4], line[5]) && h[4]) {
                /* allowed: listed exactly, or "*" is */
                const char *p = strstr(line[5], h[4]);
                FUZZ_ASSERT(p || strstr(line[5], "*"));
        }
        if (takeover_origin_is_host(h[4], host))
                FUZZ_ASSERT(strncmp(h[4], "http://", 7) == 0 || strncmp(h[4], "https://", 8) == 0);

        char *sp = strchr(line[6], ' ');
        if (sp)
                *sp++ = 0;
        if (takeover_parse_size(line[6][0] ? line[6] : NULL, sp && *sp ? sp : NULL, &cols, &rows) == 0)
                FUZZ_ASSERT(cols >= 1 && cols <= TAKEOVER_SIZE_MAX && rows >= 1 &&
                            rows <= TAKEOVER_SIZE_MAX);
}

/* --- the client's stream ------------------------------------------------------------------------ */

typedef struct Stream {
        uint8_t *data;
        size_t size, allocated;
        unsigned valid_resizes; /* whole text messages that parse as resizes */
        bool ends_with_close;
} Stream;

static void put(Stream *s, const void *p, size_t n) {
        if (n == 0)
                return;
        if (s->size + n > s->allocated) {
                s->allocated = (s->size + n) * 2 + 64;
                s->data = realloc(s->data, s->allocated);
                FUZZ_ASSERT(s->data);
        }
        memcpy(s->data + s->size, p, n);
        s->size += n;
}

static void put_frame(Stream *s, uint8_t b0, bool masked, bool long_len, const uint8_t *payload, size_t n,
                      const uint8_t key[4]) {
        uint8_t h[14];
        size_t k = 0;

        h[k++] = b0;
        if (n < 126 && !long_len)
                h[k++] = (masked ? 0x80 : 0) | (uint8_t) n;
        else if (n < 65536 && !long_len) {
                h[k++] = (masked ? 0x80 : 0) | 126;
                h[k++] = (uint8_t) (n >> 8);
                h[k++] = (uint8_t) n;
        } else {
                h[k++] = (masked ? 0x80 : 0) | 127;
                for (int i = 7; i >= 0; i--)
                        h[k++] = (uint8_t) ((uint64_t) n >> (8 * i));
        }
        if (masked) {
                memcpy(h + k, key, 4);
                k += 4;
        }
        put(s, h, k);
        for (size_t i = 0; i < n; i++) {
                uint8_t c = masked ? payload[i] ^ key[i % 4] : payload[i];
                put(s, &c, 1);
        }
}

/* Frames from their descriptions. Counts the text messages (whole, or in fragments) that are valid
 * resizes, before any close: no more than these may reach ResizeShell. */
static void build_frames(Stream *s, const uint8_t *data, size_t size) {
        static const uint8_t key[4] = {0x12, 0x34, 0x56, 0x78};
        Stream text = {};
        bool closed = false, in_text = false;

        while (size >= 4) {
                uint8_t b0 = data[0], flags = data[1], op = b0 & 0x0f;
                bool fin = b0 & 0x80;
                size_t n = (size_t) data[2] | (size_t) data[3] << 8;
                data += 4, size -= 4;
                n = MIN(n, size);
                put_frame(s, b0, !(flags & 1), flags & 2, data, n, key);
                if (op == 0x8)
                        closed = true;
                if (op == 0x1) {
                        text.size = 0;
                        in_text = true;
                } else if (op == 0x2)
                        in_text = false;
                if (in_text && (op == 0x0 || op == 0x1)) {
                        put(&text, data, n);
                        if (fin) {
                                unsigned c, r;
                                if (!closed && text.size > 0 &&
                                    takeover_parse_control((const char *) text.data, text.size, &c, &r) == 0)
                                        s->valid_resizes++;
                                in_text = false;
                        }
                }
                data += n, size -= n;
        }
        free(text.data);
        static const uint8_t bye[] = {0x03, 0xe8, 'b', 'y', 'e'}; /* 1000 "bye" */
        put_frame(s, 0x88, true, false, bye, sizeof(bye), key);
        s->ends_with_close = true;
}

typedef struct Session {
        bool done;
        int ws_peer, stream_peer;
        sd_event_source *ws_peer_source, *stream_peer_source;
} Session;

static void on_done(TakeoverBridge *b, void *userdata) {
        Session *s = userdata;
        s->done = true;
}

/* The client and the shell take whatever they are sent. */
static int on_peer(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        char buf[65536];
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                (void) sd_event_source_set_enabled(es, SD_EVENT_OFF);
        return 0;
}

static void run_session(const Stream *st, size_t extra, bool small) {
        WebSocketConfig config = {
                .max_message = small ? 64 : 65536,
                .close_timeout_usec = 5 * 1000 * 1000,
        };
        Session s = {};
        TakeoverBridge *b = NULL;
        int ws[2], sh[2];
        unsigned before = resizes;

        FUZZ_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, ws) >= 0);
        FUZZ_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sh) >= 0);
        /* What libmicrohttpd had not read yet waits in the socket; then the client stops sending. */
        for (size_t done = extra; done < st->size;) {
                ssize_t n = write(ws[1], st->data + done, st->size - done);
                FUZZ_ASSERT(n > 0);
                done += (size_t) n;
        }
        FUZZ_ASSERT(shutdown(ws[1], SHUT_WR) >= 0);
        s.ws_peer = ws[1];
        s.stream_peer = sh[1];
        FUZZ_ASSERT(sd_event_add_io(event, &s.ws_peer_source, ws[1], EPOLLIN, on_peer, &s) >= 0);
        FUZZ_ASSERT(sd_event_add_io(event, &s.stream_peer_source, sh[1], EPOLLIN, on_peer, &s) >= 0);

        FUZZ_ASSERT(takeover_bridge_new(event, client, ws[0], st->data, extra, sh[0],
                                        "sandbox-fuzz-shell-1.scope", &config, on_done, &s, &b) >= 0);
        /* Ends by itself: the client's stream is finite, the shell never ends. libFuzzer's -timeout catches
         * a session that does not. */
        while (!s.done)
                FUZZ_ASSERT(sd_event_run(event, UINT64_MAX) >= 0);

        uint16_t sent, received;
        int exit_code;
        takeover_bridge_result(b, &sent, &received, &exit_code);
        FUZZ_ASSERT(exit_code == -1);
        if (st->ends_with_close)
                FUZZ_ASSERT(sent != 0 || received != 0);
        takeover_bridge_free(b);

        /* Let the resizes the bridge sent arrive. */
        while (sd_event_run(event, 0) > 0)
                ;
        if (st->ends_with_close)
                FUZZ_ASSERT(resizes - before <= st->valid_resizes);

        sd_event_source_disable_unref(s.ws_peer_source);
        sd_event_source_disable_unref(s.stream_peer_source);
        close(ws[0]);
        close(ws[1]);
        close(sh[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *line[7] = {};
        Stream st = {};

        if (!event)
                setup();
        for (int i = 0; i < 7; i++) {
                line[i] = fuzz_take_line(&data, &size);
                if (!line[i])
                        goto finish;
        }
        check_upgrade(line);

        if (size < 1)
                goto finish;
        uint8_t mode = data[0];
        data++, size--;
        if (mode & 1)
                put(&st, data, size);
        else
                build_frames(&st, data, size);
        run_session(&st, st.size * (mode >> 2) / 63, mode & 2);
finish:
        for (int i = 0; i < 7; i++)
                free(line[i]);
        free(st.data);
        return 0;
}
