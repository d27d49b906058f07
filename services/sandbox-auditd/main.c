/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-auditd: the audit log of sandboxd, in SQLite, queryable and live on the system bus. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit-config.h"
#include "auditd-manager.h"
#include "log.h"
#include "macro.h"

static void help(void) {
        printf("sandbox-auditd [OPTIONS...]\n\n"
               "Records what happens in sandboxd's sandboxes and answers queries about it on the system\n"
               "bus (org.sandboxd.audit1).\n\n"
               "  -h --help            Show this help\n"
               "     --version         Show the version\n"
               "     --config=PATH     Configuration file (default " AUDIT_CONFIG_FILE ")\n"
               "     --config-dir=DIR  Drop-in directory (default " AUDIT_CONFIG_DROPIN_DIR ")\n\n"
               "Normally started by systemd (sandbox-auditd.service) or D-Bus activation. The database\n"
               "lives in $STATE_DIRECTORY (default " AUDITD_STATE_DIR "). See docs/audit-api.md.\n");
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                { "config", required_argument, NULL, 'c' },
                { "config-dir", required_argument, NULL, 'd' },
                {},
        };
        const char *config = AUDIT_CONFIG_FILE, *config_dir = AUDIT_CONFIG_DROPIN_DIR;
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
                        printf("sandbox-auditd %s\n", PACKAGE_VERSION);
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
                fprintf(stderr, "sandbox-auditd: takes no arguments.\n");
                return EXIT_FAILURE;
        }

        /* sd-event wants these blocked. Writes to a caller who went away must not kill us. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);

        r = manager_new(config, config_dir, &m, &error);
        if (r < 0) {
                fprintf(stderr, "sandbox-auditd: %s\n", error ?: strerror(-r));
                log_msg(LOG_ERR, "Failed to start: %s", error ?: strerror(-r));
                return EXIT_FAILURE;
        }
        r = manager_startup(m);
        if (r >= 0)
                r = manager_run(m);
        manager_free(m);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
