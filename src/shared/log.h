/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Structured logging to the journal, for the daemons' boundaries only (library code does not log). */
#pragma once

#include <errno.h>
#include <syslog.h>
#include <systemd/sd-journal.h>

/* MESSAGE plus SANDBOX_ID=, so `journalctl SANDBOX_ID=sb_…` shows one sandbox's story. */
#define log_sandbox(prio, id, fmt, ...)                                                                     \
        sd_journal_send("PRIORITY=%i", (prio), "SANDBOX_ID=%s", (id), "MESSAGE=" fmt, ##__VA_ARGS__, NULL)

#define log_msg(prio, fmt, ...) sd_journal_send("PRIORITY=%i", (prio), "MESSAGE=" fmt, ##__VA_ARGS__, NULL)

/* As systemd's log_*_errno(): logs with ERRNO=, %m in fmt says error (either sign), and the value is
 * -abs(error), so that "return log_msg_errno(LOG_ERR, r, "Could not …: %m");" fails with it. */
#define log_msg_errno(prio, error, fmt, ...)                                                                \
        ({                                                                                                  \
                int _e = (error) < 0 ? -(error) : (error);                                                  \
                errno = _e;                                                                                 \
                (void) sd_journal_send("PRIORITY=%i", (prio), "ERRNO=%i", _e, "MESSAGE=" fmt,              \
                                       ##__VA_ARGS__, NULL);                                                \
                -_e;                                                                                        \
        })
