/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-gatewayd: sandboxd over HTTP (REST, SSE) for SDKs and remote agents, with API keys. */
#include <stdlib.h>

#include "daemon-util.h"
#include "gatewayd-config.h"
#include "gatewayd-manager.h"
#include "macro.h"

int main(int argc, char *argv[]) {
        static const char help[] =
                "sandbox-gatewayd [OPTIONS...]\n\n"
                "Serves sandboxd's sandboxes over HTTP (REST and Server-Sent Events) to holders of API keys,\n"
                "and manages those keys for root on the system bus (org.sandboxd.gateway1).\n\n"
                "  -h --help            Show this help\n"
                "     --version         Show the version\n"
                "     --listen=ADDR:PORT Listen here instead of the socket from systemd or Listen=\n"
                "     --config=PATH     Configuration file (default " GATEWAY_CONFIG_FILE ")\n"
                "     --config-dir=DIR  Drop-in directory (default " GATEWAY_CONFIG_DROPIN_DIR ")\n\n"
                "Normally started by systemd (sandbox-gatewayd.socket, 127.0.0.1:8790). API keys live in\n"
                "$STATE_DIRECTORY (default " GATEWAYD_STATE_DIR "). See sandbox-gatewayd(8) and docs/API.md.\n";
        DaemonOptions o = {
                .name = "sandbox-gatewayd",
                .help = help,
                .config = GATEWAY_CONFIG_FILE,
                .config_dir = GATEWAY_CONFIG_DROPIN_DIR,
                .check_listen = gateway_check_listen,
        };
        _cleanup_free_ char *error = NULL;
        Manager *m = NULL;
        int r;

        r = daemon_parse_argv(&o, argc, argv);
        if (r <= 0)
                return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
        r = daemon_block_signals(0);
        if (r < 0)
                return daemon_start_failed(&o, r, NULL);

        r = manager_new(o.config, o.config_dir, o.listen, &m, &error);
        if (r < 0)
                return daemon_start_failed(&o, r, error);
        r = manager_startup(m);
        if (r >= 0)
                r = manager_run(m);
        manager_free(m);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
