/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-gatewayd: sandboxd over HTTP (REST, SSE) for SDKs and remote agents, with API keys. */
#include <getopt.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gatewayd-config.h"
#include "gatewayd-manager.h"
#include "log.h"
#include "macro.h"

static void help(void) {
        printf("sandbox-gatewayd [OPTIONS...]\n\n"
               "Serves sandboxd's sandboxes over HTTP (REST and Server-Sent Events) to holders of API keys,\n"
               "and manages those keys for root on the system bus (org.sandboxd.gateway1).\n\n"
               "  -h --help            Show this help\n"
               "     --version         Show the version\n"
               "     --listen=ADDR:PORT Listen here instead of the socket from systemd or Listen=\n"
               "     --config=PATH     Configuration file (default " GATEWAY_CONFIG_FILE ")\n"
               "     --config-dir=DIR  Drop-in directory (default " GATEWAY_CONFIG_DROPIN_DIR ")\n\n"
               "Normally started by systemd (sandbox-gatewayd.socket, 127.0.0.1:8790). API keys live in\n"
               "$STATE_DIRECTORY (default " GATEWAYD_STATE_DIR "). See sandbox-gatewayd(8) and docs/API.md.\n");
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                { "listen", required_argument, NULL, 'l' },
                { "config", required_argument, NULL, 'c' },
                { "config-dir", required_argument, NULL, 'd' },
                {},
        };
        const char *config = GATEWAY_CONFIG_FILE, *config_dir = GATEWAY_CONFIG_DROPIN_DIR, *listen = NULL;
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
                        printf("sandbox-gatewayd %s\n", PACKAGE_VERSION);
                        return EXIT_SUCCESS;
                case 'l': {
                        struct sockaddr_storage sa;
                        unsigned len;
                        if (gateway_parse_listen(optarg, &sa, &len) < 0) {
                                fprintf(stderr, "sandbox-gatewayd: --listen=%s: expected ADDR:PORT.\n", optarg);
                                return EXIT_FAILURE;
                        }
                        listen = optarg;
                        break;
                }
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
                fprintf(stderr, "sandbox-gatewayd: takes no arguments.\n");
                return EXIT_FAILURE;
        }

        /* sd-event wants these blocked. Writes to a client who went away must not kill us. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);

        r = manager_new(config, config_dir, listen, &m, &error);
        if (r < 0) {
                fprintf(stderr, "sandbox-gatewayd: %s\n", error ?: strerror(-r));
                log_msg(LOG_ERR, "Failed to start: %s", error ?: strerror(-r));
                return EXIT_FAILURE;
        }
        r = manager_startup(m);
        if (r >= 0)
                r = manager_run(m);
        manager_free(m);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
