/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests of the gateway's bus pool on peer-to-peer buses: spreading, queueing past the pending limit, replies. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bus-pool.h"
#include "macro.h"
#include "test-util.h"

#define N_CALLS 300

typedef struct World {
        sd_event *event;
        sd_bus *servers[4];
        unsigned n_servers;
        unsigned served[4];
        unsigned replies, errors;
        int order_ok;
        unsigned next_expected;
} World;

static int method_echo(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        unsigned *served = userdata;
        uint32_t v;
        int r;

        r = sd_bus_message_read(m, "u", &v);
        if (r < 0)
                return r;
        (*served)++;
        if (v == UINT32_MAX)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "No.");
        return sd_bus_reply_method_return(m, "u", v);
}

/* Calls that take as long as the test likes: kept here, answered by answer_held(). */
#define N_HELD_MAX 256
static sd_bus_message *held[N_HELD_MAX];
static unsigned n_held;

static int method_hold(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        if (n_held >= N_HELD_MAX)
                return -E2BIG;
        held[n_held++] = sd_bus_message_ref(m);
        return 1;
}

static void answer_held(void) {
        for (unsigned i = 0; i < n_held; i++) {
                CHECK(sd_bus_reply_method_return(held[i], NULL) >= 0);
                held[i] = sd_bus_message_unref(held[i]);
        }
        n_held = 0;
}

static const sd_bus_vtable vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("Echo", "u", "u", method_echo, 0),
        SD_BUS_METHOD("Hold", "", "", method_hold, 0),
        SD_BUS_VTABLE_END,
};

/* Each pool connection is one end of a socketpair; the other end is a server on the same loop. */
static int open_pair(sd_bus **ret, void *userdata) {
        World *w = userdata;
        sd_bus *client = NULL, *server = NULL;
        sd_id128_t id;
        int fds[2], r;

        if (w->n_servers >= ELEMENTSOF(w->servers))
                return -E2BIG;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) < 0)
                return -errno;
        (void) sd_id128_randomize(&id);
        r = sd_bus_new(&server);
        if (r >= 0)
                r = sd_bus_set_fd(server, fds[0], fds[0]);
        if (r >= 0)
                r = sd_bus_set_server(server, 1, id);
        if (r >= 0)
                r = sd_bus_add_object_vtable(server, NULL, "/test", "org.test.Echo", vtable,
                                             &w->served[w->n_servers]);
        if (r >= 0)
                r = sd_bus_start(server);
        if (r >= 0)
                r = sd_bus_attach_event(server, w->event, 0);
        if (r >= 0)
                r = sd_bus_new(&client);
        if (r >= 0)
                r = sd_bus_set_fd(client, fds[1], fds[1]);
        if (r >= 0)
                r = sd_bus_start(client);
        if (r < 0) {
                sd_bus_unref(server);
                sd_bus_unref(client);
                return r;
        }
        /* Both ends in one thread: drive the handshake here, so no call waits for it blocking. */
        for (unsigned i = 0; i < 5000 && sd_bus_is_ready(client) <= 0; i++) {
                (void) sd_bus_process(server, NULL);
                (void) sd_bus_process(client, NULL);
                if (sd_bus_is_ready(client) <= 0)
                        (void) usleep(1000);
        }
        if (sd_bus_is_ready(client) <= 0) {
                sd_bus_unref(server);
                sd_bus_unref(client);
                return -ETIMEDOUT;
        }
        w->servers[w->n_servers++] = server;
        *ret = client;
        return 0;
}

static int build(sd_bus_message *m, void *userdata) {
        return sd_bus_message_append(m, "u", (uint32_t) (uintptr_t) userdata);
}

static World *world;

static void on_reply(sd_bus_message *reply, const sd_bus_error *error, void *userdata) {
        uint32_t v = (uint32_t) (uintptr_t) userdata;

        if (sd_bus_error_is_set(error)) {
                world->errors++;
                if (v != UINT32_MAX)
                        fprintf(stderr, "call %u failed: %s\n", v, error->message);
        } else {
                uint32_t got = 0;
                CHECK(sd_bus_message_read(reply, "u", &got) >= 0 && got == v);
                world->replies++;
        }
        if (v != UINT32_MAX) {
                /* queued calls go out in the order they were made */
                if (v != world->next_expected && world->n_servers == 1)
                        world->order_ok = 0;
                world->next_expected = v + 1;
        }
        if (world->replies + world->errors == N_CALLS + 1)
                (void) sd_event_exit(world->event, 0);
}

static void test_pool(unsigned n_connections) {
        World w = { .order_ok = 1 };
        BusPool *p = NULL;

        world = &w;
        CHECK(sd_event_new(&w.event) >= 0);
        CHECK(bus_pool_new_with(w.event, n_connections, open_pair, &w, &p) >= 0);
        if (!p)
                return;
        for (unsigned i = 0; i < N_CALLS; i++)
                CHECK(bus_pool_call(p, "org.test", "/test", "org.test.Echo", "Echo", build, on_reply,
                                    (void *) (uintptr_t) i, 0) >= 0);
        /* beyond the limit of pending replies per connection, calls wait */
        CHECK_U64(bus_pool_queued(p),
                  N_CALLS > n_connections * BUS_POOL_PENDING_MAX ? N_CALLS - n_connections * BUS_POOL_PENDING_MAX : 0);
        /* an error reply is an answer like any other */
        CHECK(bus_pool_call(p, "org.test", "/test", "org.test.Echo", "Echo", build, on_reply,
                            (void *) (uintptr_t) UINT32_MAX, 0) >= 0);
        CHECK(sd_event_loop(w.event) >= 0);
        CHECK_U64(w.replies, N_CALLS);
        CHECK_U64(w.errors, 1);
        CHECK_U64(bus_pool_queued(p), 0);
        CHECK(w.order_ok);
        /* spread over the connections */
        unsigned total = 0;
        for (unsigned i = 0; i < w.n_servers; i++) {
                CHECK(w.served[i] > 0);
                total += w.served[i];
        }
        CHECK_U64(total, N_CALLS + 1);
        bus_pool_free(p);
        for (unsigned i = 0; i < w.n_servers; i++)
                sd_bus_flush_close_unref(w.servers[i]);
        sd_event_unref(w.event);
}

static void on_cancelled(sd_bus_message *reply, const sd_bus_error *error, void *userdata) {
        int *n = userdata;
        CHECK(!reply && sd_bus_error_is_set(error));
        (*n)++;
}

static void test_free_answers_queued(void) {
        World w = { .order_ok = 1 };
        BusPool *p = NULL;
        int cancelled = 0;

        CHECK(sd_event_new(&w.event) >= 0);
        CHECK(bus_pool_new_with(w.event, 1, open_pair, &w, &p) >= 0);
        if (!p)
                return;
        for (unsigned i = 0; i < BUS_POOL_PENDING_MAX + 5; i++)
                CHECK(bus_pool_call(p, "org.test", "/test", "org.test.Echo", "Echo", build, on_cancelled, &cancelled,
                                    0) >= 0);
        /* the 5 queued calls are answered (with an error) when the pool goes; no leak, no crash */
        bus_pool_free(p);
        CHECK_INT(cancelled, 5);
        for (unsigned i = 0; i < w.n_servers; i++)
                sd_bus_flush_close_unref(w.servers[i]);
        sd_event_unref(w.event);
}

typedef struct LaneState {
        sd_event *event;
        unsigned long_replies, short_replies;
} LaneState;

static void on_long_reply(sd_bus_message *reply, const sd_bus_error *error, void *userdata) {
        LaneState *st = userdata;

        CHECK(reply && !sd_bus_error_is_set(error));
        st->long_replies++;
}

static void on_short_reply(sd_bus_message *reply, const sd_bus_error *error, void *userdata) {
        LaneState *st = userdata;

        CHECK(reply && !sd_bus_error_is_set(error));
        st->short_replies++;
}

/* More long calls than a connection has room for, none answered: a short call still goes out at once, and
 * the long calls past the room they may take wait (in order) until earlier ones end. */
static void test_long_calls_leave_room(void) {
        World w = { .order_ok = 1 };
        LaneState st = {};
        BusPool *p = NULL;
        const unsigned n_long = BUS_POOL_PENDING_MAX + 10;

        CHECK(sd_event_new(&w.event) >= 0);
        st.event = w.event;
        CHECK(bus_pool_new_with(w.event, 1, open_pair, &w, &p) >= 0);
        if (!p)
                return;
        CHECK_INT(bus_pool_set_short_reserve(p, 0), -EINVAL);
        CHECK_INT(bus_pool_set_short_reserve(p, BUS_POOL_PENDING_MAX), -EINVAL);
        for (unsigned i = 0; i < n_long; i++)
                CHECK(bus_pool_call_full(p, "org.test", "/test", "org.test.Echo", "Hold", NULL, on_long_reply, &st,
                                         0, BUS_POOL_LONG) >= 0);
        CHECK_U64(bus_pool_queued(p), n_long - (BUS_POOL_PENDING_MAX - BUS_POOL_SHORT_RESERVE_DEFAULT));
        CHECK(bus_pool_call(p, "org.test", "/test", "org.test.Echo", "Echo", build, on_short_reply, &st, 0) >= 0);
        /* 10 s at most (each round waits 0.1 s at most) */
        for (unsigned i = 0; i < 100 && st.short_replies == 0; i++)
                CHECK(sd_event_run(w.event, 100000) >= 0);
        CHECK_U64(st.short_replies, 1);
        CHECK_U64(n_held, BUS_POOL_PENDING_MAX - BUS_POOL_SHORT_RESERVE_DEFAULT);
        /* the long calls end; the waiting ones go out and end too */
        for (unsigned i = 0; i < 1000 && st.long_replies < n_long; i++) {
                answer_held();
                CHECK(sd_event_run(w.event, 10000) >= 0);
        }
        CHECK_U64(st.long_replies, n_long);
        CHECK_U64(bus_pool_queued(p), 0);
        bus_pool_free(p);
        for (unsigned i = 0; i < w.n_servers; i++)
                sd_bus_flush_close_unref(w.servers[i]);
        sd_event_unref(w.event);
}

typedef struct Tagged {
        unsigned tag;
        int answered; /* 1: a reply, -1: an error */
} Tagged;

static void on_tagged(sd_bus_message *reply, const sd_bus_error *error, void *userdata) {
        Tagged *t = userdata;
        t->answered = reply && !sd_bus_error_is_set(error) ? 1 : -1;
}

static void on_other(sd_bus_message *reply, const sd_bus_error *error, void *userdata) {
        on_tagged(reply, error, userdata);
}

static bool is_odd(void *userdata, void *arg) {
        return ((Tagged *) userdata)->tag % 2 == 1;
}

/* Calls still waiting are dropped (answered with an error at once); those sent, those made with another
 * callback and those not matched are not. */
static void test_cancel_queued(void) {
        World w = { .order_ok = 1 };
        const unsigned n_sent = BUS_POOL_PENDING_MAX - BUS_POOL_SHORT_RESERVE_DEFAULT, n = n_sent + 6;
        Tagged tags[BUS_POOL_PENDING_MAX] = {};
        BusPool *p = NULL;

        CHECK(sd_event_new(&w.event) >= 0);
        CHECK(bus_pool_new_with(w.event, 1, open_pair, &w, &p) >= 0);
        if (!p)
                return;
        for (unsigned i = 0; i < n; i++) {
                tags[i].tag = i;
                /* the last waiting one has another callback */
                CHECK(bus_pool_call_full(p, "org.test", "/test", "org.test.Echo", "Hold", NULL,
                                         i == n - 1 ? on_other : on_tagged, &tags[i], 0, BUS_POOL_LONG) >= 0);
        }
        CHECK_U64(bus_pool_queued(p), 6);
        /* waiting: 80 … 85; odd: 81, 83 and 85, which has another callback */
        CHECK_U64(n_sent, 80);
        CHECK_U64(bus_pool_cancel_queued(p, on_tagged, is_odd, NULL), 2);
        CHECK_U64(bus_pool_queued(p), 4);
        for (unsigned i = 0; i < n; i++)
                CHECK_INT(tags[i].answered, i >= n_sent && i % 2 == 1 && i != n - 1 ? -1 : 0);
        /* the rest go out and are answered as usual */
        for (unsigned i = 0, done = 0; i < 1000 && done < n - 2; i++) {
                answer_held();
                CHECK(sd_event_run(w.event, 10000) >= 0);
                done = 0;
                for (unsigned j = 0; j < n; j++)
                        done += tags[j].answered == 1;
        }
        for (unsigned i = 0; i < n; i++)
                CHECK_INT(tags[i].answered, i >= n_sent && i % 2 == 1 && i != n - 1 ? -1 : 1);
        bus_pool_free(p);
        for (unsigned i = 0; i < w.n_servers; i++)
                sd_bus_flush_close_unref(w.servers[i]);
        sd_event_unref(w.event);
}

int main(void) {
        test_long_calls_leave_room();
        test_cancel_queued();
        test_pool(1);
        test_pool(3);
        test_free_answers_queued();
        return test_finish("test-bus-pool");
}
