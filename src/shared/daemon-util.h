/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the three daemons share around their own state: command line, signals, event loop, system bus. */
#pragma once

/* Owns the part of sandboxd's, sandbox-auditd's and sandbox-gatewayd's start-up and run that is the same
 * for all three (docs/architecture.md, "Source layout"): the common options (--help, --version,
 * --config=, --config-dir=), the state directory, the signal mask, the default event loop with the
 * watchdog and SIGTERM/SIGINT, the system bus connection, READY=1 and the loop's end. Each daemon keeps
 * its options' defaults, its help text, what it does on SIGTERM and what it puts on the bus. It runs at
 * the daemons' boundary (main and the managers' life cycle), so unlike the rest of libsandbox-shared it
 * logs as they do. */

#include <stdbool.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "macro.h"

typedef struct DaemonOptions {
        const char *name;       /* the program's name, in --help, --version and errors */
        /* --help is "NAME [OPTIONS...]", summary, the options with the defaults given here, then footer */
        const char *summary;
        const char *footer;
        const char *config;     /* --config=PATH: the default on entry, the value given on return */
        const char *config_dir; /* --config-dir=DIR: likewise */
        /* With check_listen set, --listen=ADDR:PORT is an option too: a value check_listen() refuses
         * (negative errno) is a usage error. NULL unless given. */
        int (*check_listen)(const char *value);
        const char *listen;
        /* Signals that daemon_main() blocks besides SIGTERM and SIGINT (0 ends the list), or NULL. */
        const int *signals;
} DaemonOptions;

/* A daemon's Manager, to daemon_main(). new() makes it from the options (*ret_error may say why not, for
 * daemon_start_failed()); startup() logs its own failures; run() returns the loop's end; free() takes
 * what new() made, or NULL. */
typedef struct DaemonOps {
        int (*new)(const DaemonOptions *o, void **ret, char **ret_error);
        int (*startup)(void *m);
        int (*run)(void *m);
        void (*free)(void *m);
} DaemonOps;

/* A DaemonOps called name for a daemon's own Manager functions: new_fn(const DaemonOptions *, Type **,
 * char **ret_error), startup_fn(Type *), run_fn(Type *), free_fn(Type *). */
#define DEFINE_DAEMON_OPS(name, Type, new_fn, startup_fn, run_fn, free_fn)                          \
        static int name##_new(const DaemonOptions *o, void **ret, char **ret_error) {              \
                Type *m = NULL;                                                                    \
                int r = new_fn(o, &m, ret_error);                                                  \
                if (r >= 0)                                                                        \
                        *ret = m;                                                                  \
                return r;                                                                          \
        }                                                                                          \
        static int name##_startup(void *m) {                                                       \
                return startup_fn((Type *) m);                                                     \
        }                                                                                          \
        static int name##_run(void *m) {                                                           \
                return run_fn((Type *) m);                                                         \
        }                                                                                          \
        static void name##_free(void *m) {                                                         \
                (void) free_fn((Type *) m);                                                        \
        }                                                                                          \
        static const DaemonOps name = {                                                            \
                .new = name##_new,                                                                 \
                .startup = name##_startup,                                                         \
                .run = name##_run,                                                                 \
                .free = name##_free,                                                               \
        }

/* The whole of a daemon's main(): parses the command line into o, blocks the signals, makes the manager,
 * starts and runs it, frees it. Returns main()'s exit code: EXIT_SUCCESS after --help, --version or a
 * loop that ended well, else EXIT_FAILURE (bad usage, or new(), startup() or run() failed). */
int daemon_main(DaemonOptions *o, const DaemonOps *ops, int argc, char *argv[]);

/* Parses the command line into o (its strings point into argv). Returns 1 to go on, 0 when --help or
 * --version has been answered, -EINVAL for bad usage (said on stderr). */
int daemon_parse_argv(DaemonOptions *o, int argc, char *argv[]);

/* Blocks SIGTERM, SIGINT and the further signals listed (0 ends the list) so that sd-event's signal
 * sources get them, and ignores SIGPIPE: a write to a peer who went away must not kill us. Children
 * unblock them before exec. */
int daemon_block_signals(int sig, ...);

/* The daemon's state directory: the first of $STATE_DIRECTORY (StateDirectory= may list several), or
 * fallback without it. */
int daemon_state_dir(const char *fallback, char **ret);

/* The default event loop with systemd's watchdog on (if WatchdogSec= asks for it) and on_stop for
 * SIGTERM and SIGINT; the caller owns the three references it gets. */
int daemon_event_new(sd_event_signal_handler_t on_stop, void *userdata, sd_event **ret_event,
                     sd_event_source **ret_sigterm, sd_event_source **ret_sigint);

/* A system bus connection attached to event: the thread's default one (shared) or a new one. A
 * dbus-daemon that goes away (restarted, say) takes our names and every caller with it, so the loop
 * then ends with a failure and Restart=on-failure brings the daemon back on the new bus. */
int daemon_bus_open(sd_event *event, bool shared, sd_bus **ret);

/* Tells systemd READY=1 with the status, and runs the loop. Returns the loop's exit code, or
 * -ECONNRESET (logged) if sd-bus ended it because the system bus went away. */
_printf_(2, 3) int daemon_run(sd_event *event, const char *status_format, ...);

/* Says why the daemon could not start, on stderr and in the journal; returns EXIT_FAILURE for main().
 * error (from the config parser) if any, else strerror(-r). */
int daemon_start_failed(const DaemonOptions *o, int r, const char *error);
