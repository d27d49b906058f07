/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd: creates confined sandboxes as systemd units and runs commands in them. */
#include <signal.h>
#include <stdlib.h>

#include "confine.h"
#include "daemon-util.h"
#include "log.h"
#include "macro.h"
#include "sandboxd-manager.h"

/* Before the manager starts: what each sandboxed process's confinement needs, prepared once here. */
static int startup(Manager *m) {
        int r;

        r = confine_seccomp_prepare();
        if (r < 0)
                return log_msg_errno(LOG_ERR, r, "Could not compile the sandbox seccomp filter: %m");
        r = confine_signals_prepare();
        if (r < 0)
                return log_msg_errno(LOG_ERR, r, "Could not read the signal dispositions: %m");
        r = manager_startup(m);
        if (r < 0)
                return log_msg_errno(LOG_ERR, r, "Failed to start: %m");
        return r;
}

DEFINE_DAEMON_OPS(manager_ops, Manager, manager_new, startup, manager_run, manager_free);

int main(int argc, char *argv[]) {
        DaemonOptions o = {
                .name = "sandboxd",
                .summary = "Creates disposable, confined sandboxes as transient systemd units and runs "
                           "commands\nin them, on behalf of callers on the system bus "
                           "(org.sandboxd.sandbox1).\n",
                .footer = "Normally started by systemd (sandboxd.service) or D-Bus activation. See "
                          "sandboxd(8)\nand docs/dbus-api.md.\n",
                .config = SANDBOXD_CONFIG_FILE,
                .config_dir = SANDBOXD_CONFIG_DROPIN_DIR,
                /* SIGCHLD: our children's exits come through sd-event too; SIGHUP is answered with a note */
                .signals = (const int[]) { SIGCHLD, SIGHUP, 0 },
        };

        return daemon_main(&o, &manager_ops, argc, argv);
}
