/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The errno maps of our bus error names (the names themselves are in sandboxd-bus.h). */
#include "sandboxd-bus.h"

#include <errno.h>

const sd_bus_error_map sandboxd_bus_errors[] = {
        SD_BUS_ERROR_MAP(SANDBOXD_ERROR_NO_SUCH_SANDBOX, ENXIO),
        SD_BUS_ERROR_MAP(SANDBOXD_ERROR_LIMIT_EXCEEDED, E2BIG),
        SD_BUS_ERROR_MAP(SANDBOXD_ERROR_NOT_RUNNING, ESRCH),
        SD_BUS_ERROR_MAP(SANDBOXD_ERROR_NAME_EXISTS, EEXIST),
        SD_BUS_ERROR_MAP(SANDBOXD_ERROR_NO_SUCH_FILE, ENOENT),
        SD_BUS_ERROR_MAP(SANDBOXD_ERROR_FILE_EXISTS, EEXIST),
        SD_BUS_ERROR_MAP(SANDBOXD_ERROR_PERMISSION_DENIED, EACCES),
        SD_BUS_ERROR_MAP(SANDBOXD_ERROR_NO_MATCH, ENODATA),
        SD_BUS_ERROR_MAP(SANDBOXD_ERROR_AMBIGUOUS_MATCH, ENOTUNIQ),
        SD_BUS_ERROR_MAP(SANDBOXD_ERROR_BINARY_FILE, EMEDIUMTYPE),
        SD_BUS_ERROR_MAP_END,
};

const sd_bus_error_map auditd_bus_errors[] = {
        SD_BUS_ERROR_MAP(AUDITD_ERROR_NO_SUCH_ENTRY, ENXIO),
        SD_BUS_ERROR_MAP(AUDITD_ERROR_STORAGE_FULL, ENOSPC),
        SD_BUS_ERROR_MAP_END,
};

const sd_bus_error_map gateway_bus_errors[] = {
        SD_BUS_ERROR_MAP(GATEWAY_ERROR_NO_SUCH_KEY, ENOKEY),
        SD_BUS_ERROR_MAP_END,
};
