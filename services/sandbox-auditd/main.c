/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-auditd: the audit log of sandboxd, in SQLite, queryable and live on the system bus. */
#include <stdlib.h>

#include "audit-config.h"
#include "auditd-manager.h"
#include "daemon-util.h"
#include "macro.h"

DEFINE_DAEMON_OPS(manager_ops, Manager, manager_new, manager_startup, manager_run, manager_free);

int main(int argc, char *argv[]) {
        static const char help[] =
                "sandbox-auditd [OPTIONS...]\n\n"
                "Records what happens in sandboxd's sandboxes and answers queries about it on the system\n"
                "bus (org.sandboxd.audit1).\n\n"
                DAEMON_HELP_OPTIONS
                DAEMON_HELP_CONFIG(AUDIT_CONFIG_FILE, AUDIT_CONFIG_DROPIN_DIR)
                "Normally started by systemd (sandbox-auditd.service) or D-Bus activation. The database\n"
                "lives in $STATE_DIRECTORY (default " AUDITD_STATE_DIR "). See docs/audit-api.md.\n";
        DaemonOptions o = {
                .name = "sandbox-auditd",
                .help = help,
                .config = AUDIT_CONFIG_FILE,
                .config_dir = AUDIT_CONFIG_DROPIN_DIR,
        };

        return daemon_main(&o, &manager_ops, argc, argv);
}
