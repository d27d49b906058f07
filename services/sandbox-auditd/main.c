/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-auditd: the audit log of sandboxd, in SQLite, queryable and live on the system bus. */
#include <stdlib.h>

#include "audit-config.h"
#include "auditd-manager.h"
#include "daemon-util.h"
#include "macro.h"

int main(int argc, char *argv[]) {
        static const char help[] =
                "sandbox-auditd [OPTIONS...]\n\n"
                "Records what happens in sandboxd's sandboxes and answers queries about it on the system\n"
                "bus (org.sandboxd.audit1).\n\n"
                "  -h --help            Show this help\n"
                "     --version         Show the version\n"
                "     --config=PATH     Configuration file (default " AUDIT_CONFIG_FILE ")\n"
                "     --config-dir=DIR  Drop-in directory (default " AUDIT_CONFIG_DROPIN_DIR ")\n\n"
                "Normally started by systemd (sandbox-auditd.service) or D-Bus activation. The database\n"
                "lives in $STATE_DIRECTORY (default " AUDITD_STATE_DIR "). See docs/audit-api.md.\n";
        DaemonOptions o = {
                .name = "sandbox-auditd",
                .help = help,
                .config = AUDIT_CONFIG_FILE,
                .config_dir = AUDIT_CONFIG_DROPIN_DIR,
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

        r = manager_new(o.config, o.config_dir, &m, &error);
        if (r < 0)
                return daemon_start_failed(&o, r, error);
        r = manager_startup(m);
        if (r >= 0)
                r = manager_run(m);
        manager_free(m);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
