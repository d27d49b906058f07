/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the three daemons share around their own state: command line, signals, event loop, system bus. */
#include "daemon-util.h"

#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "log.h"

static void help(const DaemonOptions *o, const char *config, const char *config_dir) {
        static const char listen[] =
                "     --listen=ADDR:PORT Listen here instead of the socket from systemd or Listen=\n";

        printf("%s [OPTIONS...]\n\n%s\n"
               "  -h --help            Show this help\n"
               "     --version         Show the version\n"
               "%s"
               "     --config=PATH     Configuration file (default %s)\n"
               "     --config-dir=DIR  Drop-in directory (default %s)\n\n"
               "%s",
               o->name, o->summary, o->check_listen ? listen : "", config, config_dir, o->footer);
}

int daemon_parse_argv(DaemonOptions *o, int argc, char *argv[]) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                { "config", required_argument, NULL, 'c' },
                { "config-dir", required_argument, NULL, 'd' },
                { "listen", required_argument, NULL, 'l' }, /* cut off below unless o->check_listen */
                {},
        };
        struct option opts[ELEMENTSOF(options)];
        const char *config = o->config, *config_dir = o->config_dir; /* the defaults, for --help */
        int c;

        assert(o);
        assert(o->name && o->summary && o->footer);
        assert(o->config && o->config_dir);

        memcpy(opts, options, sizeof(options));
        if (!o->check_listen)
                opts[ELEMENTSOF(options) - 2] = (struct option) {};

        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help(o, config, config_dir);
                        return 0;
                case 'V':
                        printf("%s %s\n", o->name, PACKAGE_VERSION);
                        return 0;
                case 'c':
                        o->config = optarg;
                        break;
                case 'd':
                        o->config_dir = optarg;
                        break;
                case 'l':
                        if (o->check_listen(optarg) < 0) {
                                fprintf(stderr, "%s: --listen=%s: expected ADDR:PORT.\n", o->name, optarg);
                                return -EINVAL;
                        }
                        o->listen = optarg;
                        break;
                default: /* getopt said what */
                        return -EINVAL;
                }
        if (optind < argc) {
                fprintf(stderr, "%s: takes no arguments.\n", o->name);
                return -EINVAL;
        }
        return 1;
}

static int block_signals(const sigset_t *mask) {
        assert(mask);

        if (sigprocmask(SIG_BLOCK, mask, NULL) < 0)
                return -errno;
        if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
                return -errno;
        return 0;
}

static void stop_signals(sigset_t *mask) {
        sigemptyset(mask);
        sigaddset(mask, SIGTERM);
        sigaddset(mask, SIGINT);
}

int daemon_block_signals(int sig, ...) {
        sigset_t mask;
        va_list ap;

        stop_signals(&mask);
        va_start(ap, sig);
        for (; sig > 0; sig = va_arg(ap, int))
                sigaddset(&mask, sig);
        va_end(ap);
        return block_signals(&mask);
}

int daemon_state_dir(const char *fallback, char **ret) {
        const char *e = getenv("STATE_DIRECTORY");
        char *p;

        assert(fallback);
        assert(ret);

        p = e ? strndup(e, strcspn(e, ":")) : strdup(fallback);
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

int daemon_event_new(sd_event_signal_handler_t on_stop, void *userdata, sd_event **ret_event,
                     sd_event_source **ret_sigterm, sd_event_source **ret_sigint) {
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_(sd_event_source_unrefp) sd_event_source *sigterm = NULL, *sigint = NULL;
        int r;

        assert(on_stop);
        assert(ret_event);
        assert(ret_sigterm);
        assert(ret_sigint);

        r = sd_event_default(&event);
        if (r < 0)
                return r;
        (void) sd_event_set_watchdog(event, true);
        r = sd_event_add_signal(event, &sigterm, SIGTERM, on_stop, userdata);
        if (r < 0)
                return r;
        r = sd_event_add_signal(event, &sigint, SIGINT, on_stop, userdata);
        if (r < 0)
                return r;
        *ret_event = TAKE_PTR(event);
        *ret_sigterm = TAKE_PTR(sigterm);
        *ret_sigint = TAKE_PTR(sigint);
        return 0;
}

int daemon_bus_open(sd_event *event, bool shared, sd_bus **ret) {
        _cleanup_(sd_bus_unrefp) sd_bus *bus = NULL;
        int r;

        assert(event);
        assert(ret);

        r = shared ? sd_bus_default_system(&bus) : sd_bus_open_system(&bus);
        if (r < 0)
                return r;
        r = sd_bus_set_exit_on_disconnect(bus, true);
        if (r < 0)
                return r;
        r = sd_bus_attach_event(bus, event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(bus);
        return 0;
}

int daemon_run(sd_event *event, const char *status_format, ...) {
        _cleanup_free_ char *status = NULL;
        va_list ap;
        int r;

        assert(event);
        assert(status_format);

        va_start(ap, status_format);
        r = vasprintf(&status, status_format, ap);
        va_end(ap);
        if (r < 0)
                status = NULL;
        (void) sd_notifyf(false, "READY=1\nSTATUS=%s", status ?: "Running.");
        r = sd_event_loop(event);
        if (r > 0) {
                /* sd-bus ended the loop: the system bus went away. */
                log_msg(LOG_ERR, "Lost the connection to the system bus; exiting to be restarted.");
                return -ECONNRESET;
        }
        return r;
}

int daemon_start_failed(const DaemonOptions *o, int r, const char *error) {
        assert(o);

        fprintf(stderr, "%s: %s\n", o->name, error ?: strerror(-r));
        log_msg(LOG_ERR, "Failed to start: %s", error ?: strerror(-r));
        return EXIT_FAILURE;
}

int daemon_main(DaemonOptions *o, const DaemonOps *ops, int argc, char *argv[]) {
        _cleanup_free_ char *error = NULL;
        void *m = NULL;
        sigset_t mask;
        int r;

        assert(o);
        assert(ops);
        assert(ops->new && ops->startup && ops->run && ops->free);

        r = daemon_parse_argv(o, argc, argv);
        if (r <= 0)
                return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
        stop_signals(&mask);
        for (const int *s = o->signals; s && *s > 0; s++)
                sigaddset(&mask, *s);
        r = block_signals(&mask);
        if (r < 0)
                return daemon_start_failed(o, r, NULL);

        r = ops->new(o, &m, &error);
        if (r < 0)
                return daemon_start_failed(o, r, error);
        r = ops->startup(m);
        if (r >= 0)
                r = ops->run(m);
        ops->free(m);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
