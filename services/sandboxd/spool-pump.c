/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The audit spool's delivery rules, without a bus or a database: when a call may go, which rows it takes,
 * what an answer means, where to resend from and how long to wait (audit-spool.c applies them). */
#include "spool-pump.h"

#include <assert.h>
#include <errno.h>
#include <string.h>
#include <systemd/sd-bus.h>

bool spool_may_send(unsigned n_in_flight, int64_t last_spooled, int64_t last_sent) {
        if (n_in_flight >= SPOOL_MAX_IN_FLIGHT)
                return false;
        /* With less traffic a row goes at once, so it is in the log by the time its caller, who got the
         * reply after it was spooled, can ask for it (SDKs read their own writes). */
        return n_in_flight < SPOOL_GROUP_COMMIT_IN_FLIGHT || last_spooled - last_sent >= SPOOL_BATCH_ROWS;
}

unsigned spool_call_rows(bool batch, int64_t last_sent, int64_t single_until) {
        return batch && last_sent >= single_until ? SPOOL_BATCH_ROWS : 1;
}

bool spool_call_takes(unsigned n, uint64_t bytes, uint64_t size) {
        return n == 0 || (bytes <= SPOOL_BATCH_BYTES && size <= SPOOL_BATCH_BYTES - bytes);
}

SpoolAnswer spool_answer(const char *error_name, bool batch, unsigned n, int64_t ids) {
        if (error_name && batch && streq(error_name, SD_BUS_ERROR_UNKNOWN_METHOD))
                return SPOOL_ANSWER_NO_BATCH;
        if (error_name && streq(error_name, SD_BUS_ERROR_INVALID_ARGS))
                return SPOOL_ANSWER_REFUSED;
        if (error_name || ids < 0 || (uint64_t) ids != n)
                return SPOOL_ANSWER_FAILED;
        return SPOOL_ANSWER_TAKEN;
}

int spool_refused_index(const char *message, unsigned n, unsigned *ret_index) {
        unsigned long idx;
        char *end;

        assert(ret_index);
        if (n <= 1) {
                *ret_index = 0;
                return 0;
        }
        message = strempty(message);
        if (strncmp(message, "Row ", 4) != 0 || message[4] < '0' || message[4] > '9')
                return -ENOENT;
        errno = 0;
        idx = strtoul(message + 4, &end, 10);
        if (errno != 0 || *end != ':' || idx >= n)
                return -ENOENT;
        *ret_index = (unsigned) idx;
        return 0;
}

int64_t spool_rewind(int64_t last_sent, int64_t first, const int64_t *busy_first, size_t n_busy) {
        int64_t oldest = first;

        for (size_t i = 0; i < n_busy; i++)
                if (busy_first[i] < oldest)
                        oldest = busy_first[i];
        return oldest - 1 < last_sent ? oldest - 1 : last_sent;
}

uint64_t spool_retry_next(uint64_t retry_usec) {
        if (retry_usec == 0)
                return SPOOL_RETRY_MIN_USEC;
        return retry_usec >= SPOOL_RETRY_MAX_USEC / 2 ? SPOOL_RETRY_MAX_USEC : retry_usec * 2;
}
