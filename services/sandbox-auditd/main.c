/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-auditd: the audit log of sandboxd, in SQLite, queryable and live on the system bus. */
#include <stdlib.h>

#include "audit-config.h"
#include "auditd-manager.h"
#include "daemon-util.h"
#include "macro.h"

DEFINE_DAEMON_OPS(manager_ops, Manager, manager_new, manager_startup, manager_run, manager_free);

int main(int argc, char *argv[]) {
        DaemonOptions o = {
                .name = "sandbox-auditd",
                .summary = "Records what happens in sandboxd's sandboxes and answers queries about it "
                           "on the system\nbus (org.sandboxd.audit1).\n",
                .footer = "Normally started by systemd (sandbox-auditd.service) or D-Bus activation. The "
                          "database\nlives in $STATE_DIRECTORY (default " AUDITD_STATE_DIR "). See "
                          "docs/audit-api.md.\n",
                .config = AUDIT_CONFIG_FILE,
                .config_dir = AUDIT_CONFIG_DROPIN_DIR,
        };

        return daemon_main(&o, &manager_ops, argc, argv);
}
