/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd: creates confined sandboxes as systemd units and runs commands in them. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "confine.h"
#include "daemon-util.h"
#include "log.h"
#include "macro.h"
#include "sandboxd-manager.h"

int main(int argc, char *argv[]) {
        static const char help[] =
                "sandboxd [OPTIONS...]\n\n"
                "Creates disposable, confined sandboxes as transient systemd units and runs commands\n"
                "in them, on behalf of callers on the system bus (org.sandboxd.sandbox1).\n\n"
                "  -h --help            Show this help\n"
                "     --version         Show the version\n"
                "     --config=PATH     Configuration file (default " SYSCONFDIR "/sandboxd/sandboxd.conf)\n"
                "     --config-dir=DIR  Drop-in directory (default " SYSCONFDIR "/sandboxd/sandboxd.conf.d)\n\n"
                "Normally started by systemd (sandboxd.service) or D-Bus activation. See sandboxd(8)\n"
                "and docs/dbus-api.md.\n";
        DaemonOptions o = {
                .name = "sandboxd",
                .help = help,
                .config = SYSCONFDIR "/sandboxd/sandboxd.conf",
                .config_dir = SYSCONFDIR "/sandboxd/sandboxd.conf.d",
        };
        _cleanup_free_ char *error = NULL;
        Manager *m = NULL;
        int r;

        r = daemon_parse_argv(&o, argc, argv);
        if (r <= 0)
                return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
        /* SIGCHLD: our children's exits come through sd-event too; SIGHUP is answered with a note. */
        r = daemon_block_signals(SIGCHLD, SIGHUP, 0);
        if (r < 0)
                return daemon_start_failed(&o, r, NULL);

        r = manager_new(o.config, o.config_dir, &m, &error);
        if (r < 0)
                return daemon_start_failed(&o, r, error);
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
