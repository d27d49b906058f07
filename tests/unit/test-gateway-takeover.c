/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for gateway-takeover: control messages, size and Origin checks, the WebSocket-to-stream bridge.
 *
 * Socketpairs stand in for the client and for sandboxd. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "gateway-takeover.h"
#include "macro.h"
#include "test-util.h"
#include "time-util.h"

static void test_control(void) {
        unsigned c = 0, r = 0;
#define OK(s, ec, er)                                                     \
        do {                                                              \
                CHECK(takeover_parse_control(s, strlen(s), &c, &r) == 0); \
                CHECK(c == (ec) && r == (er));                            \
        } while (0)
#define BAD(s) CHECK(takeover_parse_control(s, strlen(s), &c, &r) == -EINVAL)
        OK("{\"type\":\"resize\",\"cols\":120,\"rows\":40}", 120, 40);
        OK(" {\"rows\":1, \"cols\":1000, \"type\":\"resize\"} ", 1000, 1);
        BAD("");
        BAD("{}");
        BAD("[]");
        BAD("resize");
        BAD("{\"type\":\"resize\",\"cols\":120}");
        BAD("{\"type\":\"resize\",\"cols\":0,\"rows\":40}");
        BAD("{\"type\":\"resize\",\"cols\":1001,\"rows\":40}");
        BAD("{\"type\":\"resize\",\"cols\":-5,\"rows\":40}");
        BAD("{\"type\":\"resize\",\"cols\":\"80\",\"rows\":40}");
        BAD("{\"type\":\"resize\",\"cols\":80.5,\"rows\":40}");
        BAD("{\"type\":\"resize\",\"cols\":80,\"rows\":40,\"x\":1}");
        BAD("{\"type\":\"signal\",\"cols\":80,\"rows\":40}");
        BAD("{\"type\":\"resize\",\"cols\":80,\"rows\":40} {}");
        BAD("{\"type\":\"resize\",\"cols\":80,\"rows\":40");
        /* a length that stops inside the text */
        CHECK(takeover_parse_control("{\"type\":\"resize\",\"cols\":80,\"rows\":40}", 10, &c, &r) ==
              -EINVAL);
#undef OK
#undef BAD
}

static void test_size_and_origin(void) {
        unsigned c, r;
        CHECK(takeover_parse_size(NULL, NULL, &c, &r) == 0 && c == 80 && r == 24);
        CHECK(takeover_parse_size("132", "43", &c, &r) == 0 && c == 132 && r == 43);
        CHECK(takeover_parse_size("1000", "1", &c, &r) == 0);
        CHECK(takeover_parse_size("132", NULL, &c, &r) == -EINVAL);
        CHECK(takeover_parse_size("0", "24", &c, &r) == -EINVAL);
        CHECK(takeover_parse_size("1001", "24", &c, &r) == -EINVAL);
        CHECK(takeover_parse_size("+80", "24", &c, &r) == -EINVAL);
        CHECK(takeover_parse_size("80x", "24", &c, &r) == -EINVAL);
        CHECK(takeover_parse_size("", "24", &c, &r) == -EINVAL);
        CHECK(takeover_parse_size("99999999999", "24", &c, &r) == -EINVAL);

        const char *allowed = "https://a.example  https://console.example";
        CHECK(takeover_origin_allowed(NULL, NULL));
        CHECK(takeover_origin_allowed(NULL, allowed));
        CHECK(takeover_origin_allowed("https://console.example", allowed));
        CHECK(takeover_origin_allowed("https://a.example", allowed));
        CHECK(!takeover_origin_allowed("https://evil.example", allowed));
        CHECK(!takeover_origin_allowed("https://console.example.evil", allowed));
        CHECK(!takeover_origin_allowed("https://console", allowed));
        CHECK(!takeover_origin_allowed("", allowed));
        CHECK(!takeover_origin_allowed("https://console.example", NULL));
        CHECK(!takeover_origin_allowed("https://console.example", ""));
        CHECK(takeover_origin_allowed("https://anything", "*"));
        CHECK(takeover_origin_allowed("null", "https://a.example *"));

        CHECK(takeover_check_upgrade("websocket", "Upgrade", "13") == 0);
        CHECK(takeover_check_upgrade("h2c, WebSocket ", "keep-alive,\tupgrade", "13") == 0);
        CHECK(takeover_check_upgrade(NULL, "Upgrade", "13") == -EPROTO);
        CHECK(takeover_check_upgrade("websocket", NULL, "13") == -EPROTO);
        CHECK(takeover_check_upgrade("websockets", "Upgrade", "13") == -EPROTO);
        CHECK(takeover_check_upgrade("websocket", "Upgraded", "13") == -EPROTO);
        CHECK(takeover_check_upgrade("websocket", "Upgrade", NULL) == -EPROTONOSUPPORT);
        CHECK(takeover_check_upgrade("websocket", "Upgrade", "8") == -EPROTONOSUPPORT);
        CHECK(takeover_check_upgrade("websocket", "Upgrade", "13 ") == -EPROTONOSUPPORT);

        CHECK(takeover_origin_is_host("http://127.0.0.1:8790", "127.0.0.1:8790"));
        CHECK(takeover_origin_is_host("https://Gateway.example", "gateway.example"));
        CHECK(!takeover_origin_is_host("http://127.0.0.1:8791", "127.0.0.1:8790"));
        CHECK(!takeover_origin_is_host("http://evil.example/127.0.0.1:8790", "127.0.0.1:8790"));
        CHECK(!takeover_origin_is_host("ftp://127.0.0.1:8790", "127.0.0.1:8790"));
        CHECK(!takeover_origin_is_host("http://127.0.0.1:8790", NULL));
        CHECK(!takeover_origin_is_host(NULL, "127.0.0.1:8790"));
}

/* --- the bridge ---------------------------------------------------------------------------------- */

static size_t client_frame(uint8_t *out, uint8_t first, const void *payload, size_t n, bool masked) {
        static const uint8_t mask[4] = {0xa1, 0xb2, 0xc3, 0xd4};
        size_t o = 0;
        out[o++] = first;
        out[o++] = (uint8_t) ((masked ? 0x80 : 0) | n); /* short frames only */
        if (masked) {
                memcpy(out + o, mask, 4);
                o += 4;
        }
        for (size_t i = 0; i < n; i++)
                out[o + i] = ((const uint8_t *) payload)[i] ^ (masked ? mask[i % 4] : 0);
        return o + n;
}

static void client_send(int fd, uint8_t first, const void *payload, size_t n, bool masked) {
        uint8_t buf[256];
        size_t k = client_frame(buf, first, payload, n, masked);
        CHECK(write(fd, buf, k) == (ssize_t) k);
}

typedef struct Fixture {
        sd_event *e;
        int ws[2], stream[2];
        TakeoverBridge *b;
        bool done;
} Fixture;

static void on_done(TakeoverBridge *b, void *userdata) {
        ((Fixture *) userdata)->done = true;
}

static int poll_fd;
static bool readable(void *arg) {
        struct pollfd p = {.fd = poll_fd, .events = POLLIN};
        return poll(&p, 1, 0) == 1;
}
static bool is_done(void *arg) {
        return ((Fixture *) arg)->done;
}

static bool run_until(sd_event *e, bool (*pred)(void *), void *arg) {
        uint64_t end = now_usec(CLOCK_MONOTONIC) + 5 * USEC_PER_SEC;
        while (!pred(arg)) {
                if (now_usec(CLOCK_MONOTONIC) > end)
                        return false;
                (void) sd_event_run(e, 10 * USEC_PER_MSEC);
        }
        return true;
}

/* Reads a short unmasked server frame. */
static int server_frame(Fixture *f, uint8_t *ret_op, char *payload, size_t *ret_n) {
        uint8_t h[2];
        poll_fd = f->ws[1];
        if (!run_until(f->e, readable, NULL) || read(f->ws[1], h, 2) != 2)
                return -EIO;
        size_t n = h[1] & 0x7f;
        if (n >= 126)
                return -EBADMSG;
        size_t got = 0;
        while (got < n) {
                if (!run_until(f->e, readable, NULL))
                        return -EIO;
                ssize_t k = read(f->ws[1], payload + got, n - got);
                if (k <= 0)
                        return -EIO;
                got += k;
        }
        *ret_op = h[0] & 0xf;
        *ret_n = n;
        return 0;
}

/* What sandboxd's end of the stream received, until EOF or the data. */
static ssize_t stream_read(Fixture *f, char *buf, size_t n) {
        poll_fd = f->stream[1];
        if (!run_until(f->e, readable, NULL))
                return -ETIMEDOUT;
        return read(f->stream[1], buf, n);
}

static void fixture_open(Fixture *f) {
        WebSocketConfig config = {.max_message = 65536, .close_timeout_usec = USEC_PER_SEC};
        *f = (Fixture){};
        CHECK(sd_event_new(&f->e) >= 0);
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, f->ws) == 0);
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, f->stream) == 0);
        CHECK(takeover_bridge_new(f->e, NULL, f->ws[0], NULL, 0, f->stream[0], "sandbox-sb_x-shell-1.scope",
                                  &config, on_done, f, &f->b) == 0);
}

static void fixture_close(Fixture *f) {
        takeover_bridge_free(f->b);
        close(f->ws[0]);
        safe_close(f->ws[1]);
        safe_close(f->stream[1]);
        sd_event_unref(f->e);
}

static void test_bridge_shell_exits(void) {
        Fixture f;
        char buf[256];
        uint8_t op;
        size_t n;

        fixture_open(&f);
        client_send(f.ws[1], 0x82, "ls\r", 3, true);
        CHECK(stream_read(&f, buf, sizeof(buf)) == 3 && memcmp(buf, "ls\r", 3) == 0);
        /* a valid resize keeps the session going */
        const char *resize = "{\"type\":\"resize\",\"cols\":100,\"rows\":30}";
        client_send(f.ws[1], 0x81, resize, strlen(resize), true);
        CHECK(write(f.stream[1], "file1\r\n", 7) == 7);
        CHECK(server_frame(&f, &op, buf, &n) == 0);
        CHECK(op == 0x2 && n == 7 && memcmp(buf, "file1\r\n", 7) == 0);
        /* sandboxd closes the stream: the shell is over → a normal close after the last output */
        CHECK(write(f.stream[1], "logout\r\n", 8) == 8);
        f.stream[1] = safe_close(f.stream[1]);
        CHECK(server_frame(&f, &op, buf, &n) == 0);
        CHECK(op == 0x2 && n == 8);
        CHECK(server_frame(&f, &op, buf, &n) == 0);
        CHECK(op == 0x8 && n >= 2 && ((uint8_t) buf[0] << 8 | (uint8_t) buf[1]) == 1000);
        CHECK(n == 2 + strlen("shell ended") && memcmp(buf + 2, "shell ended", n - 2) == 0);
        uint8_t code[2] = {0x03, 0xe8};
        client_send(f.ws[1], 0x88, code, 2, true);
        CHECK(run_until(f.e, is_done, &f));
        uint16_t sent, received;
        int exit_code;
        takeover_bridge_result(f.b, &sent, &received, &exit_code);
        CHECK(sent == 1000 && received == 1000 && exit_code == -1);
        fixture_close(&f);
}

/* Anything that ends the WebSocket hangs the shell up: sandboxd's end reads EOF. */
static void check_hangup(const char *what, uint8_t first, const char *payload, bool masked, bool drop,
                         int expected_close) {
        Fixture f;
        char buf[256];
        uint8_t op;
        size_t n;

        fixture_open(&f);
        if (drop)
                f.ws[1] = safe_close(f.ws[1]);
        else
                client_send(f.ws[1], first, payload, strlen(payload), masked);
        if (expected_close > 0) {
                CHECK(server_frame(&f, &op, buf, &n) == 0);
                CHECK(op == 0x8 && n >= 2);
                if (n >= 2 && ((uint8_t) buf[0] << 8 | (uint8_t) buf[1]) != expected_close)
                        fprintf(stderr, "%s: close code %d\n", what,
                                (uint8_t) buf[0] << 8 | (uint8_t) buf[1]);
                CHECK(n >= 2 && ((uint8_t) buf[0] << 8 | (uint8_t) buf[1]) == expected_close);
                f.ws[1] = safe_close(f.ws[1]);
        }
        CHECK(stream_read(&f, buf, sizeof(buf)) == 0);
        CHECK(run_until(f.e, is_done, &f));
        fixture_close(&f);
}

static void test_bridge_hangups(void) {
        check_hangup("client gone", 0, NULL, true, true, 0);
        check_hangup("client close", 0x88, "\x03\xe8", true, false, 1000);
        check_hangup("unmasked", 0x82, "ls", false, false, 1002);
        check_hangup("bad opcode", 0x85, "ls", true, false, 1002);
        check_hangup("bad control", 0x81, "{\"type\":\"kill\"}", true, false, 1008);
}

/* A client that reads nothing holds the shell back: the bridge queues about 1 MiB, then stops reading
 * the stream, so what sandboxd may write stalls well short of what it has. Reading resumes it. */
static void test_bridge_backpressure(void) {
        static char chunk[65536];
        Fixture f;
        size_t written = 0, got = 0;
        unsigned idle = 0;

        fixture_open(&f);
        memset(chunk, 'x', sizeof(chunk));
        (void) fcntl(f.stream[1], F_SETFL, O_NONBLOCK);
        while (written < 64 * 1024 * 1024 && idle < 20) {
                ssize_t k = write(f.stream[1], chunk, sizeof(chunk));
                if (k > 0) {
                        written += (size_t) k;
                        idle = 0;
                } else
                        idle++;
                (void) sd_event_run(f.e, 5 * USEC_PER_MSEC);
        }
        CHECK(idle >= 20);                /* it stalled */
        CHECK(written < 8 * 1024 * 1024); /* after queues and socket buffers, not 64 MiB */

        /* The client reads: everything flows again (4 MiB more than had stalled). */
        size_t target = written + 4 * 1024 * 1024;
        (void) fcntl(f.ws[1], F_SETFL, O_NONBLOCK);
        for (unsigned rounds = 0; rounds < 1000000 && got < target; rounds++) {
                char buf[65536];
                ssize_t k = read(f.ws[1], buf, sizeof(buf));
                if (k > 0)
                        got += (size_t) k;
                if (written < target) {
                        k = write(f.stream[1], chunk, sizeof(chunk));
                        if (k > 0)
                                written += (size_t) k;
                }
                (void) sd_event_run(f.e, 0);
        }
        CHECK(got >= target); /* frames with their headers: at least the data */
        fixture_close(&f);
}

int main(void) {
        test_control();
        test_size_and_origin();
        test_bridge_shell_exits();
        test_bridge_hangups();
        test_bridge_backpressure();
        return test_finish("test-gateway-takeover");
}
