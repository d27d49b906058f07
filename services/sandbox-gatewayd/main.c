/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-gatewayd: sandboxd over HTTP (REST, SSE) for SDKs and remote agents, with API keys. */
#include <stdlib.h>

#include "daemon-util.h"
#include "gatewayd-config.h"
#include "gatewayd-manager.h"
#include "macro.h"

DEFINE_DAEMON_OPS(manager_ops, Manager, manager_new, manager_startup, manager_run, manager_free);

int main(int argc, char *argv[]) {
        DaemonOptions o = {
                .name = "sandbox-gatewayd",
                .summary = "Serves sandboxd's sandboxes over HTTP (REST and Server-Sent Events) to "
                           "holders of API keys,\nand manages those keys for root on the system bus "
                           "(org.sandboxd.gateway1).\n",
                .footer = "Normally started by systemd (sandbox-gatewayd.socket, 127.0.0.1:8790). API keys "
                          "live in\n$STATE_DIRECTORY (default " GATEWAYD_STATE_DIR "). See "
                          "sandbox-gatewayd(8) and docs/API.md.\n",
                .config = GATEWAY_CONFIG_FILE,
                .config_dir = GATEWAY_CONFIG_DROPIN_DIR,
                .check_listen = gateway_check_listen,
        };

        return daemon_main(&o, &manager_ops, argc, argv);
}
