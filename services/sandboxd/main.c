/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd: creates confined sandboxes as systemd units and runs commands in them. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "confine.h"
#include "log.h"
#include "macro.h"
#include "sandboxd-manager.h"

static void help(void) {
        printf("sandboxd [OPTIONS...]\n\n"
               "Creates disposable, confined sandboxes as transient systemd units and runs commands\n"
               "in them, on behalf of callers on the system bus (org.sandboxd.sandbox1).\n\n"
               "  -h --help            Show this help\n"
               "     --version         Show the version\n"
               "     --config=PATH     Configuration file (default " SYSCONFDIR "/sandboxd/sandboxd.conf)\n"
               "     --config-dir=DIR  Drop-in directory (default " SYSCONFDIR "/sandboxd/sandboxd.conf.d)\n\n"
               "Normally started by systemd (sandboxd.service) or D-Bus activation. See sandboxd(8)\n"
               "and docs/dbus-api.md.\n");
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                { "config", required_argument, NULL, 'c' },
                { "config-dir", required_argument, NULL, 'd' },
                {},
        };
        const char *config = SYSCONFDIR "/sandboxd/sandboxd.conf", *config_dir = SYSCONFDIR "/sandboxd/sandboxd.conf.d";
        _cleanup_free_ char *error = NULL;
        Manager *m = NULL;
        sigset_t mask;
        int c, r;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return EXIT_SUCCESS;
                case 'V':
                        printf("sandboxd %s\n", PACKAGE_VERSION);
                        return EXIT_SUCCESS;
                case 'c':
                        config = optarg;
                        break;
                case 'd':
                        config_dir = optarg;
                        break;
                default:
                        return EXIT_FAILURE;
                }
        if (optind < argc) {
                fprintf(stderr, "sandboxd: takes no arguments.\n");
                return EXIT_FAILURE;
        }

        /* sd-event wants these blocked; children unblock them before exec. Writes to a caller who
         * went away must not kill us. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);

        r = manager_new(config, config_dir, &m, &error);
        if (r < 0) {
                fprintf(stderr, "sandboxd: %s\n", error ?: strerror(-r));
                log_msg(LOG_ERR, "Failed to start: %s", error ?: strerror(-r));
                return EXIT_FAILURE;
        }
        r = confine_seccomp_prepare();
        if (r < 0) {
                log_msg(LOG_ERR, "Could not compile the sandbox seccomp filter: %s", strerror(-r));
                goto finish;
        }
        r = confine_signals_prepare();
        if (r < 0) {
                log_msg(LOG_ERR, "Could not read the signal dispositions: %s", strerror(-r));
                goto finish;
        }
        r = manager_startup(m);
        if (r < 0) {
                log_msg(LOG_ERR, "Failed to start: %s", strerror(-r));
                goto finish;
        }
        r = manager_run(m);
finish:
        manager_free(m);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
