/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The gateway's free capacity for HAProxy's agent-check: one line on a TCP port of its own
 * (docs/scale-out.md).
 *
 * HAProxy's agent-check connects, reads one line and closes; "up ready 40%" sets the server's weight to 40 %
 * of its configured weight, "drain" gives it no new sessions, "down" marks it down. The line is answered
 * from a count kept fresh by a timer, so that a check never waits on the bus. */
#include "capacity-agent.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "sandboxd-bus.h"
#include "time-util.h"

struct CapacityAgent {
        sd_event *event;
        sd_bus *bus;
        int fd;
        sd_event_source *io, *timer;
        sd_bus_slot *call;
        uint64_t max_sandboxes, live, counted_at; /* counted_at: CLOCK_MONOTONIC µs, 0 never */
};

int capacity_agent_line(bool known, uint64_t live, uint64_t max, char *buf, size_t size) {
        int n;

        if (max == 0 || !buf)
                return -EINVAL;
        if (!known)
                n = snprintf(buf, size, "down\n");
        else if (live >= max)
                n = snprintf(buf, size, "drain\n");
        else
                /* at least 1 %: a host with any room at all stays in the rotation */
                n = snprintf(buf, size, "up ready %" PRIu64 "%%\n",
                             MAX((max - live) * 100 / max, UINT64_C(1)));
        return n < 0 || (size_t) n >= size ? -EINVAL : n;
}

CapacityAgent *capacity_agent_free(CapacityAgent *a) {
        if (!a)
                return NULL;
        sd_event_source_disable_unref(a->io);
        sd_event_source_disable_unref(a->timer);
        sd_bus_slot_unref(a->call);
        sd_bus_unref(a->bus);
        sd_event_unref(a->event);
        safe_close(a->fd);
        free(a);
        return NULL;
}

static int on_count(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        CapacityAgent *a = userdata;
        uint64_t n = 0;
        int r;

        a->call = sd_bus_slot_unref(a->call);
        if (sd_bus_message_is_method_error(reply, NULL))
                return 0; /* stays as it was; stale after CAPACITY_AGENT_STALE_USEC */
        r = sd_bus_message_enter_container(reply, 'a', "(ssssso)");
        while (r >= 0 && (r = sd_bus_message_skip(reply, "(ssssso)")) > 0)
                n++;
        if (r < 0)
                return 0;
        a->live = n;
        a->counted_at = now_usec(CLOCK_MONOTONIC);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        CapacityAgent *a = userdata;

        if (!a->call)
                (void) sd_bus_call_method_async(a->bus, &a->call, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                                SANDBOXD_MANAGER_INTERFACE, "ListSandboxes", on_count, a,
                                                NULL);
        (void) sd_event_source_set_time_relative(s, CAPACITY_AGENT_REFRESH_USEC);
        return sd_event_source_set_enabled(s, SD_EVENT_ON);
}

static int on_connection(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        CapacityAgent *a = userdata;
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        char line[64];
        int c, n;

        c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0)
                return 0; /* the client went away, or EAGAIN: nothing to do */
        n = capacity_agent_line(a->counted_at > 0 && now - a->counted_at <= CAPACITY_AGENT_STALE_USEC,
                                a->live, a->max_sandboxes, line, sizeof(line));
        /* A fresh socket's buffer takes a short line whole; a client that cannot take it gets nothing. */
        if (n > 0)
                (void) !send(c, line, (size_t) n, MSG_NOSIGNAL | MSG_DONTWAIT);
        safe_close(c);
        return 0;
}

int capacity_agent_new(sd_event *e, sd_bus *bus, int listen_fd, const struct sockaddr *sa, socklen_t sa_len,
                       uint64_t max_sandboxes, CapacityAgent **ret) {
        _cleanup_(capacity_agent_freep) CapacityAgent *a = NULL;
        int r;

        if (!e || !bus || max_sandboxes == 0 || (listen_fd < 0 && !sa) || !ret)
                return -EINVAL;
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->event = sd_event_ref(e);
        a->bus = sd_bus_ref(bus);
        a->max_sandboxes = max_sandboxes;
        a->fd = listen_fd;
        if (a->fd < 0) {
                a->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (a->fd < 0)
                        return -errno;
                if (setsockopt(a->fd, SOL_SOCKET, SO_REUSEADDR, &(int){1}, sizeof(int)) < 0 ||
                    bind(a->fd, sa, sa_len) < 0 || listen(a->fd, 64) < 0)
                        return -errno;
        }
        r = sd_event_add_io(e, &a->io, a->fd, EPOLLIN, on_connection, a);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(a->io, "capacity-agent");
        r = sd_event_add_time_relative(e, &a->timer, CLOCK_MONOTONIC, 0, 0, on_timer, a);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(a);
        return 0;
}
