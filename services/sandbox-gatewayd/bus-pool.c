/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A few system bus connections that asynchronous method calls are spread over, queueing past the bus's
 * limit of pending replies per connection instead of failing. */
#include "bus-pool.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

typedef struct PoolBus {
        BusPool *pool;
        sd_bus *bus;
        unsigned pending;
        unsigned pending_long; /* of pending, the long calls */
} PoolBus;

typedef struct PoolCall {
        BusPool *pool;
        PoolBus *pb;
        char *destination, *path, *interface, *member; /* one allocation, see pool_call_new */
        bus_pool_build_t build;
        bus_pool_reply_t reply;
        void *userdata;
        uint64_t timeout_usec;
        bool is_long;
        sd_bus_slot *slot;
        struct PoolCall *next;
} PoolCall;

struct BusPool {
        sd_event *event;
        PoolBus *buses;
        unsigned n_buses;
        /* Two queues, so that a short call never waits behind long ones: [0] short, [1] long. */
        PoolCall *queue[2], *queue_tail[2];
        size_t n_queued;
        unsigned long_max; /* long calls pending per connection at most */
        sd_event_source *drain;
};

static void pool_call_free(PoolCall *c) {
        if (!c)
                return;
        sd_bus_slot_unref(c->slot);
        free(c);
}

static PoolBus *pool_pick(BusPool *p, bool is_long) {
        PoolBus *best = NULL;

        for (unsigned i = 0; i < p->n_buses; i++)
                if (p->buses[i].pending < BUS_POOL_PENDING_MAX &&
                    (!is_long || p->buses[i].pending_long < p->long_max) &&
                    (!best || p->buses[i].pending < best->pending))
                        best = &p->buses[i];
        return best;
}

static void fail_call(PoolCall *c, int r) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;

        sd_bus_error_set_errno(&error, r);
        c->reply(NULL, &error, c->userdata);
        pool_call_free(c);
}

static void pool_kick(BusPool *p) {
        if (p->queue[0] || p->queue[1])
                (void) sd_event_source_set_enabled(p->drain, SD_EVENT_ONESHOT);
}

static int on_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        PoolCall *c = userdata;
        BusPool *p = c->pool;

        c->pb->pending--;
        if (c->is_long)
                c->pb->pending_long--;
        c->reply(m, sd_bus_message_get_error(m), c->userdata);
        pool_call_free(c);
        pool_kick(p);
        return 0;
}

static int pool_send(PoolBus *pb, PoolCall *c) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(pb->bus, &m, c->destination, c->path, c->interface, c->member);
        if (r < 0)
                return r;
        if (c->build) {
                r = c->build(m, c->userdata);
                if (r < 0)
                        return r;
        }
        r = sd_bus_call_async(pb->bus, &c->slot, m, on_reply, c, c->timeout_usec);
        if (r < 0)
                return r;
        c->pb = pb;
        pb->pending++;
        if (c->is_long)
                pb->pending_long++;
        return 0;
}

static int on_drain(sd_event_source *s, void *userdata) {
        BusPool *p = userdata;
        PoolBus *pb;
        PoolCall *c;
        int r;

        /* short calls first: they are what the room kept from long calls is for */
        for (unsigned q = 0; q < 2; q++)
                while (p->queue[q] && (pb = pool_pick(p, q == 1))) {
                        c = p->queue[q];
                        p->queue[q] = c->next;
                        if (!p->queue[q])
                                p->queue_tail[q] = NULL;
                        p->n_queued--;
                        c->next = NULL;
                        r = pool_send(pb, c);
                        if (r < 0)
                                fail_call(c, r);
                }
        return 0;
}

static int open_system(sd_bus **ret, void *userdata) {
        return sd_bus_open_system(ret);
}

int bus_pool_new(sd_event *event, unsigned n_connections, BusPool **ret) {
        return bus_pool_new_with(event, n_connections, open_system, NULL, ret);
}

int bus_pool_new_with(sd_event *event, unsigned n_connections, bus_pool_open_t open, void *userdata,
                      BusPool **ret) {
        BusPool *p;
        int r;

        if (n_connections == 0)
                return -EINVAL;
        p = calloc(1, sizeof(BusPool));
        if (!p)
                return -ENOMEM;
        p->event = sd_event_ref(event);
        p->long_max = BUS_POOL_PENDING_MAX - BUS_POOL_SHORT_RESERVE_DEFAULT;
        p->buses = calloc(n_connections, sizeof(PoolBus));
        if (!p->buses) {
                bus_pool_free(p);
                return -ENOMEM;
        }
        for (unsigned i = 0; i < n_connections; i++) {
                p->buses[i].pool = p;
                r = open(&p->buses[i].bus, userdata);
                if (r < 0)
                        goto fail;
                p->n_buses++;
                /* A connection that drops never comes back: the daemon exits and is restarted. */
                r = sd_bus_set_exit_on_disconnect(p->buses[i].bus, true);
                if (r < 0)
                        goto fail;
                r = sd_bus_attach_event(p->buses[i].bus, event, SD_EVENT_PRIORITY_NORMAL);
                if (r < 0)
                        goto fail;
        }
        r = sd_event_add_defer(event, &p->drain, on_drain, p);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_enabled(p->drain, SD_EVENT_OFF);
        *ret = p;
        return 0;
fail:
        bus_pool_free(p);
        return r;
}

BusPool *bus_pool_free(BusPool *p) {
        PoolCall *c;

        if (!p)
                return NULL;
        for (unsigned q = 0; q < 2; q++)
                while ((c = p->queue[q])) {
                        p->queue[q] = c->next;
                        fail_call(c, -ECANCELED);
                }
        sd_event_source_disable_unref(p->drain);
        for (unsigned i = 0; i < p->n_buses; i++)
                sd_bus_flush_close_unref(p->buses[i].bus);
        free(p->buses);
        sd_event_unref(p->event);
        free(p);
        return NULL;
}

size_t bus_pool_cancel_queued(BusPool *p, bus_pool_reply_t reply, bool (*match)(void *userdata, void *arg),
                              void *arg) {
        PoolCall *dropped = NULL, **tail = &dropped;
        size_t n = 0;

        /* unlink first, answer after: a reply callback may queue new calls */
        for (unsigned q = 0; q < 2; q++) {
                PoolCall **pp = &p->queue[q], *prev = NULL;
                while (*pp) {
                        PoolCall *c = *pp;
                        if (c->reply != reply || !match(c->userdata, arg)) {
                                prev = c;
                                pp = &c->next;
                                continue;
                        }
                        *pp = c->next;
                        if (p->queue_tail[q] == c)
                                p->queue_tail[q] = prev;
                        p->n_queued--;
                        c->next = NULL;
                        *tail = c;
                        tail = &c->next;
                        n++;
                }
        }
        while (dropped) {
                PoolCall *c = dropped;
                dropped = c->next;
                fail_call(c, -ECANCELED);
        }
        return n;
}

size_t bus_pool_queued(BusPool *p) {
        return p->n_queued;
}

int bus_pool_set_short_reserve(BusPool *p, unsigned reserve) {
        if (reserve == 0 || reserve >= BUS_POOL_PENDING_MAX)
                return -EINVAL;
        p->long_max = BUS_POOL_PENDING_MAX - reserve;
        return 0;
}

int bus_pool_call_full(BusPool *p, const char *destination, const char *path, const char *interface,
                       const char *member, bus_pool_build_t build, bus_pool_reply_t reply, void *userdata,
                       uint64_t timeout_usec, BusPoolFlags flags) {
        size_t ld = strlen(destination) + 1, lp = strlen(path) + 1, li = strlen(interface) + 1,
               lm = strlen(member) + 1;
        PoolCall *c;
        PoolBus *pb;
        unsigned q;
        int r;

        /* The names are copied because a queued call is made after the caller's stack is gone. */
        c = calloc(1, sizeof(PoolCall) + ld + lp + li + lm);
        if (!c)
                return -ENOMEM;
        c->destination = memcpy((char *) (c + 1), destination, ld);
        c->path = memcpy(c->destination + ld, path, lp);
        c->interface = memcpy(c->path + lp, interface, li);
        c->member = memcpy(c->interface + li, member, lm);
        c->pool = p;
        c->build = build;
        c->reply = reply;
        c->userdata = userdata;
        c->timeout_usec = timeout_usec;
        c->is_long = flags & BUS_POOL_LONG;

        /* Calls queued earlier (of the same kind) go first. */
        q = c->is_long;
        pb = p->queue[q] ? NULL : pool_pick(p, c->is_long);
        if (pb) {
                r = pool_send(pb, c);
                if (r < 0) {
                        pool_call_free(c);
                        return r;
                }
                return 0;
        }
        if (p->queue_tail[q])
                p->queue_tail[q]->next = c;
        else
                p->queue[q] = c;
        p->queue_tail[q] = c;
        p->n_queued++;
        return 0;
}

int bus_pool_call(BusPool *p, const char *destination, const char *path, const char *interface,
                  const char *member, bus_pool_build_t build, bus_pool_reply_t reply, void *userdata,
                  uint64_t timeout_usec) {
        return bus_pool_call_full(p, destination, path, interface, member, build, reply, userdata, timeout_usec,
                                  0);
}
