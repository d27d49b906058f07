/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Method-call messages built without a bus daemon, sealed and read from the start as a daemon receives
 * them: for the unit tests of what our methods read out of an a{sv}. Call bus_setup() first. */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>

static sd_bus *bus;

/* A client bus on one end of a socketpair, left mid-handshake: enough to make messages on, fds
 * included, without a bus daemon. */
static void bus_setup(void) {
        static int fds[2];

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) < 0 ||
            sd_bus_new(&bus) < 0 || sd_bus_set_fd(bus, fds[0], fds[0]) < 0 || sd_bus_start(bus) < 0) {
                fprintf(stderr, "cannot make a bus to build messages on\n");
                exit(EXIT_FAILURE);
        }
}

static sd_bus_message *new_msg(void) {
        sd_bus_message *m = NULL;

        if (sd_bus_message_new_method_call(bus, &m, "org.sandboxd.sandbox1", "/org/sandboxd/sandbox1",
                                           "org.sandboxd.sandbox1.Manager", "Test") < 0)
                abort();
        return m;
}

/* As the daemon receives it: sealed and read from the start. */
static sd_bus_message *done(sd_bus_message *m) {
        static uint64_t cookie = 1;

        if (sd_bus_message_seal(m, cookie++, 0) < 0 || sd_bus_message_rewind(m, true) < 0)
                abort();
        return m;
}

#define MSG(...)                                                \
        ({                                                      \
                sd_bus_message *_m = new_msg();                 \
                if (sd_bus_message_append(_m, __VA_ARGS__) < 0) \
                        abort();                                \
                done(_m);                                       \
        })
