/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for websocket: the accept key, frames both ways, pings, and every way a connection ends. */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "macro.h"
#include "test-util.h"
#include "time-util.h"
#include "websocket.h"

typedef struct Seen {
        char binary[256], text[256];
        size_t n_binary, n_text;
        bool closed;
        uint16_t sent, received;
} Seen;

static void on_binary(WebSocket *ws, const uint8_t *data, size_t n, void *userdata) {
        Seen *s = userdata;
        memcpy(s->binary + s->n_binary, data, MIN(n, sizeof(s->binary) - s->n_binary));
        s->n_binary += MIN(n, sizeof(s->binary) - s->n_binary);
}

static void on_text(WebSocket *ws, const char *data, size_t n, void *userdata) {
        Seen *s = userdata;
        memcpy(s->text + s->n_text, data, MIN(n, sizeof(s->text) - s->n_text));
        s->n_text += MIN(n, sizeof(s->text) - s->n_text);
}

static void on_closed(WebSocket *ws, uint16_t sent, uint16_t received, void *userdata) {
        Seen *s = userdata;
        s->closed = true;
        s->sent = sent;
        s->received = received;
}

static const WebSocketCallbacks callbacks = {on_binary, on_text, on_closed};

/* A client frame: masked unless told otherwise. */
static size_t client_frame(uint8_t *out, uint8_t first, const void *payload, size_t n, bool masked) {
        static const uint8_t mask[4] = {0x12, 0x34, 0x56, 0x78};
        size_t o = 0;

        out[o++] = first;
        if (n < 126)
                out[o++] = (uint8_t) ((masked ? 0x80 : 0) | n);
        else {
                out[o++] = (uint8_t) ((masked ? 0x80 : 0) | 126);
                out[o++] = (uint8_t) (n >> 8);
                out[o++] = (uint8_t) n;
        }
        if (masked) {
                memcpy(out + o, mask, 4);
                o += 4;
        }
        for (size_t i = 0; i < n; i++)
                out[o + i] = ((const uint8_t *) payload)[i] ^ (masked ? mask[i % 4] : 0);
        return o + n;
}

static void client_send(int fd, uint8_t first, const void *payload, size_t n, bool masked) {
        uint8_t buf[8192];
        size_t k = client_frame(buf, first, payload, n, masked);
        CHECK(write(fd, buf, k) == (ssize_t) k);
}

/* Runs the loop until pred holds (the bound only stops a hang). */
static bool run_until(sd_event *e, bool (*pred)(void *), void *arg) {
        uint64_t end = now_usec(CLOCK_MONOTONIC) + 5 * USEC_PER_SEC;
        while (!pred(arg)) {
                if (now_usec(CLOCK_MONOTONIC) > end)
                        return false;
                (void) sd_event_run(e, 10 * USEC_PER_MSEC);
        }
        return true;
}

static bool is_closed(void *arg) {
        return ((Seen *) arg)->closed;
}

static int client_fd_for_pred;
static bool client_readable(void *arg) {
        struct pollfd p = {.fd = client_fd_for_pred, .events = POLLIN};
        return poll(&p, 1, 0) == 1;
}

/* Reads one server frame (servers never mask): opcode, payload. */
static int server_frame(sd_event *e, int fd, uint8_t *ret_opcode, uint8_t *payload, size_t *ret_n) {
        uint8_t h[4];
        client_fd_for_pred = fd;
        if (!run_until(e, client_readable, NULL))
                return -ETIMEDOUT;
        if (read(fd, h, 2) != 2)
                return -EIO;
        size_t n = h[1] & 0x7f;
        if (n == 126) {
                if (read(fd, h + 2, 2) != 2)
                        return -EIO;
                n = (size_t) h[2] << 8 | h[3];
        }
        size_t got = 0;
        while (got < n) {
                if (!run_until(e, client_readable, NULL))
                        return -ETIMEDOUT;
                ssize_t k = read(fd, payload + got, n - got);
                if (k <= 0)
                        return -EIO;
                got += k;
        }
        *ret_opcode = h[0] & 0x0f;
        *ret_n = n;
        return h[0] & 0x80 ? 0 : -EBADMSG; /* we never fragment */
}

static uint16_t close_code(const uint8_t *payload, size_t n) {
        return n >= 2 ? (uint16_t) (payload[0] << 8 | payload[1]) : 0;
}

typedef struct Pair {
        sd_event *e;
        int fds[2];
        WebSocket *ws;
        Seen seen;
} Pair;

static void pair_open(Pair *p, const void *extra, size_t extra_size, uint64_t ping) {
        WebSocketConfig config = {
                .max_message = 1024, .ping_interval_usec = ping, .close_timeout_usec = USEC_PER_SEC};
        *p = (Pair){};
        CHECK(sd_event_new(&p->e) >= 0);
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p->fds) == 0);
        CHECK(websocket_new(p->e, p->fds[0], extra, extra_size, &config, &callbacks, &p->seen, &p->ws) == 0);
}

static void pair_close(Pair *p) {
        websocket_free(p->ws);
        close(p->fds[0]);
        close(p->fds[1]);
        sd_event_unref(p->e);
}

static void test_accept_key(void) {
        char a[WS_ACCEPT_LEN + 1];
        /* RFC 6455 1.3's example */
        CHECK(websocket_accept_key("dGhlIHNhbXBsZSBub25jZQ==", a) == 0);
        CHECK_STR(a, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        CHECK(websocket_accept_key(NULL, a) == -EINVAL);
        CHECK(websocket_accept_key("", a) == -EINVAL);
        CHECK(websocket_accept_key("dGhlIHNhbXBsZSBub25jZQ=", a) == -EINVAL);
        CHECK(websocket_accept_key("dGhlIHNhbXBsZSBub25jZQ!=", a) == -EINVAL);
        CHECK(websocket_accept_key("dGhlIHNhbXBsZSBub25jZR==", a) ==
              -EINVAL); /* 16 bytes leave 4 bits zero */
        CHECK(websocket_accept_key("dGhlIHNhbXBsZSBub25jZQ===", a) == -EINVAL);
}

static bool got_binary_and_text(void *arg) {
        Seen *s = arg;
        return s->n_binary >= 9 && s->n_text >= 2;
}

static void test_messages(void) {
        Pair p;
        uint8_t first[64], payload[8192], op;
        size_t n;

        /* The first frame arrives with the HTTP request, the second on the socket. */
        size_t k = client_frame(first, 0x82, "from-mhd|", 9, true);
        pair_open(&p, first, k, 0);
        client_send(p.fds[1], 0x81, "{}", 2, true);
        CHECK(run_until(p.e, got_binary_and_text, &p.seen));
        CHECK(p.seen.n_binary == 9 && memcmp(p.seen.binary, "from-mhd|", 9) == 0);
        CHECK(p.seen.n_text == 2 && memcmp(p.seen.text, "{}", 2) == 0);

        /* server → client */
        char big[300];
        memset(big, 'b', sizeof(big));
        CHECK(websocket_send_binary(p.ws, big, sizeof(big)) == 0);
        CHECK(server_frame(p.e, p.fds[1], &op, payload, &n) == 0);
        CHECK(op == 0x2 && n == sizeof(big) && memcmp(payload, big, n) == 0);

        /* a ping is answered */
        client_send(p.fds[1], 0x89, "hb", 2, true);
        CHECK(server_frame(p.e, p.fds[1], &op, payload, &n) == 0);
        CHECK(op == 0xa && n == 2 && memcmp(payload, "hb", 2) == 0);

        /* our close, their answer: a clean end */
        CHECK(websocket_close(p.ws, WS_CLOSE_NORMAL, "shell exited") == 0);
        CHECK(server_frame(p.e, p.fds[1], &op, payload, &n) == 0);
        CHECK(op == 0x8 && close_code(payload, n) == 1000);
        CHECK(n == 2 + strlen("shell exited") && memcmp(payload + 2, "shell exited", n - 2) == 0);
        CHECK(websocket_send_binary(p.ws, "late", 4) == -ENOTCONN);
        uint8_t code[2] = {0x03, 0xe8};
        client_send(p.fds[1], 0x88, code, 2, true);
        CHECK(run_until(p.e, is_closed, &p.seen));
        CHECK_INT(p.seen.sent, 1000);
        CHECK_INT(p.seen.received, 1000);
        pair_close(&p);
}

/* A frame that breaks the protocol: the server closes with 1002 and the connection ends. */
static void check_protocol_error(uint8_t first, const void *data, size_t n, bool masked, bool twice) {
        Pair p;
        uint8_t payload[8192], op;
        size_t m;

        pair_open(&p, NULL, 0, 0);
        client_send(p.fds[1], first, data, n, masked);
        if (twice) /* the same again as its continuation, the final frame */
                client_send(p.fds[1], 0x80, data, n, masked);
        CHECK(server_frame(p.e, p.fds[1], &op, payload, &m) == 0);
        CHECK(op == 0x8);
        CHECK_INT(close_code(payload, m), 1002);
        CHECK(p.seen.n_binary == 0 && p.seen.n_text == 0); /* nothing of it was delivered */
        close(p.fds[1]);                                   /* the client gives up */
        p.fds[1] = -1;
        CHECK(run_until(p.e, is_closed, &p.seen));
        CHECK_INT(p.seen.sent, 1002);
        websocket_free(p.ws);
        close(p.fds[0]);
        sd_event_unref(p.e);
}

static void test_protocol_errors(void) {
        char big[2000];
        memset(big, 'x', sizeof(big));
        check_protocol_error(0x82, "unmasked", 8, false, false);
        check_protocol_error(0x82, big, sizeof(big), true, false); /* over max_message */
        check_protocol_error(0x02, big, 800, true, true);          /* two frames of one message, over it */
        check_protocol_error(0x83, "op3", 3, true, false);         /* a reserved opcode */
        check_protocol_error(0xc2, "rsv", 3, true, false);         /* RSV1 without an extension */
}

/* A frame wslay's framing refuses before any callback (a length not in its shortest form): the server
 * still says so with a close frame (wslay's, without a code) instead of just dropping the connection. */
static void test_framing_error(void) {
        static const uint8_t frame[] = {0x82, 0x80 | 126, 0x00,    0x05,    1,       2,      3,
                                        4,    'h' ^ 1,    'e' ^ 2, 'l' ^ 3, 'l' ^ 4, 'o' ^ 1};
        Pair p;
        uint8_t payload[256], op;
        size_t m;

        pair_open(&p, NULL, 0, 0);
        CHECK(write(p.fds[1], frame, sizeof(frame)) == (ssize_t) sizeof(frame));
        CHECK(server_frame(p.e, p.fds[1], &op, payload, &m) == 0);
        CHECK(op == 0x8);
        CHECK_INT(m, 0);
        CHECK(run_until(p.e, is_closed, &p.seen));
        CHECK_INT(p.seen.sent, 1005); /* "no status", as RFC 6455 7.1.5 reports an empty close */
        CHECK(p.seen.n_binary == 0);
        pair_close(&p);
}

static void test_peer_gone(void) {
        Pair p;

        pair_open(&p, NULL, 0, 0);
        close(p.fds[1]);
        p.fds[1] = -1;
        CHECK(run_until(p.e, is_closed, &p.seen));
        CHECK_INT(p.seen.sent, 0);
        CHECK_INT(p.seen.received, 0);
        websocket_free(p.ws);
        close(p.fds[0]);
        sd_event_unref(p.e);
}

static void test_pings(void) {
        Pair p;
        uint8_t payload[256], op;
        size_t n;

        pair_open(&p, NULL, 0, 20 * USEC_PER_MSEC);
        CHECK(server_frame(p.e, p.fds[1], &op, payload, &n) == 0);
        CHECK(op == 0x9);
        /* A client that never answers is taken as gone: 1001. */
        for (;;) {
                int r = server_frame(p.e, p.fds[1], &op, payload, &n);
                CHECK(r == 0);
                if (r < 0 || op == 0x8)
                        break;
        }
        CHECK_INT(close_code(payload, n), 1001);
        CHECK(run_until(p.e, is_closed, &p.seen)); /* after the close timeout */
        pair_close(&p);
}

int main(void) {
        test_accept_key();
        test_messages();
        test_protocol_errors();
        test_framing_error();
        test_peer_gone();
        test_pings();
        return test_finish("test-websocket");
}
