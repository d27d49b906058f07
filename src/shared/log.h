/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Structured logging to the journal, for the daemons' boundaries only (library code does not log). */
#pragma once

#include <syslog.h>
#include <systemd/sd-journal.h>

/* MESSAGE plus SANDBOX_ID=, so `journalctl SANDBOX_ID=sb_…` shows one sandbox's story. */
#define log_sandbox(prio, id, fmt, ...)                                                                     \
        sd_journal_send("PRIORITY=%i", (prio), "SANDBOX_ID=%s", (id), "MESSAGE=" fmt, ##__VA_ARGS__, NULL)

#define log_msg(prio, fmt, ...) sd_journal_send("PRIORITY=%i", (prio), "MESSAGE=" fmt, ##__VA_ARGS__, NULL)
