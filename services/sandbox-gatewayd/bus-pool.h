/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A few system bus connections that asynchronous method calls are spread over, queueing past the bus's
 * limit of pending replies per connection instead of failing. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

/* dbus-daemon allows 128 pending replies per connection; we keep a little below it. */
#define BUS_POOL_PENDING_MAX 120
/* Of those, how many long calls (BUS_POOL_LONG) may never take: the room short calls always find. */
#define BUS_POOL_SHORT_RESERVE_DEFAULT 40

typedef enum BusPoolFlags {
        /* A call that may take minutes or hours (Exec): it waits in a queue of its own rather than take the
         * room kept for short calls, and short calls never wait behind it. */
        BUS_POOL_LONG = 1 << 0,
} BusPoolFlags;

typedef struct BusPool BusPool;

/* Appends the call's arguments to m. Returns 0 or a negative errno (the call then fails with it). */
typedef int (*bus_pool_build_t)(sd_bus_message *m, void *userdata);
/* The answer: reply is the method return or error message, or NULL if the call could not be made; then
 * error says why (it is also set for error replies). */
typedef void (*bus_pool_reply_t)(sd_bus_message *reply, const sd_bus_error *error, void *userdata);

int bus_pool_new(sd_event *event, unsigned n_connections, BusPool **ret);
/* The same with connections made by open (the tests' peer-to-peer buses); bus_pool_new uses
 * sd_bus_open_system. */
typedef int (*bus_pool_open_t)(sd_bus **ret, void *userdata);
int bus_pool_new_with(sd_event *event, unsigned n_connections, bus_pool_open_t open, void *userdata,
                      BusPool **ret);
BusPool *bus_pool_free(BusPool *p);

/* Calls destination's method on the least busy connection now, or as soon as one has room. build runs
 * when the message is made (possibly later, so what it reads must live until reply is called); reply is
 * called exactly once. timeout_usec 0 means the bus default (25 s). Returns 0 or -ENOMEM. */
int bus_pool_call(BusPool *p, const char *destination, const char *path, const char *interface,
                  const char *member, bus_pool_build_t build, bus_pool_reply_t reply, void *userdata,
                  uint64_t timeout_usec);

/* The same, with flags. */
int bus_pool_call_full(BusPool *p, const char *destination, const char *path, const char *interface,
                       const char *member, bus_pool_build_t build, bus_pool_reply_t reply, void *userdata,
                       uint64_t timeout_usec, BusPoolFlags flags);

/* Room kept for short calls on each connection (1 to BUS_POOL_PENDING_MAX - 1; default
 * BUS_POOL_SHORT_RESERVE_DEFAULT). Returns 0 or -EINVAL. */
int bus_pool_set_short_reserve(BusPool *p, unsigned reserve);

/* Drops the calls still waiting in a queue (not sent yet) made with this reply callback whose userdata
 * match says is one to drop; each gets its reply callback with an error (ECANCELED). Returns how many. */
size_t bus_pool_cancel_queued(BusPool *p, bus_pool_reply_t reply, bool (*match)(void *userdata, void *arg),
                              void *arg);

/* Calls waiting for a free connection right now (for status and tests). */
size_t bus_pool_queued(BusPool *p);
