/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for sandboxd-bus: every name keeps its value and is valid, every error name maps to its errno. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "macro.h"
#include "sandboxd-bus.h"
#include "test-util.h"

/* The contract as docs/dbus-api.md and dbus/org.sandboxd.*.xml spell it, typed here on purpose: a
 * constant that changes value fails this test. */
static const struct {
        const char *constant, *expected;
} names[] = {
        { SANDBOXD_BUS_NAME, "org.sandboxd.sandbox1" },
        { AUDITD_BUS_NAME, "org.sandboxd.audit1" },
        { GATEWAY_BUS_NAME, "org.sandboxd.gateway1" },
}, paths[] = {
        { SANDBOXD_BUS_PATH, "/org/sandboxd/sandbox1" },
        { SANDBOXD_SANDBOX_PATH_PREFIX, "/org/sandboxd/sandbox1/sandbox" },
        { AUDITD_BUS_PATH, "/org/sandboxd/audit1" },
        { GATEWAY_BUS_PATH, "/org/sandboxd/gateway1" },
}, interfaces[] = {
        { SANDBOXD_MANAGER_INTERFACE, "org.sandboxd.sandbox1.Manager" },
        { SANDBOXD_SANDBOX_INTERFACE, "org.sandboxd.sandbox1.Sandbox" },
        { SANDBOXD_PROCESS_INTERFACE, "org.sandboxd.sandbox1.Process" },
        { AUDITD_LOG_INTERFACE, "org.sandboxd.audit1.Log" },
        { GATEWAY_KEYS_INTERFACE, "org.sandboxd.gateway1.Keys" },
};

/* Each error name, its errno in its service's map (0: in no map), and that map. */
static const struct {
        const char *constant, *expected;
        int error;
        const sd_bus_error_map *map;
} errors[] = {
        { SANDBOXD_ERROR_NO_SUCH_SANDBOX, "org.sandboxd.sandbox1.NoSuchSandbox", ENXIO, sandboxd_bus_errors },
        { SANDBOXD_ERROR_LIMIT_EXCEEDED, "org.sandboxd.sandbox1.LimitExceeded", E2BIG, sandboxd_bus_errors },
        { SANDBOXD_ERROR_NOT_RUNNING, "org.sandboxd.sandbox1.NotRunning", ESRCH, sandboxd_bus_errors },
        { SANDBOXD_ERROR_NAME_EXISTS, "org.sandboxd.sandbox1.NameExists", EEXIST, sandboxd_bus_errors },
        { SANDBOXD_ERROR_NO_SUCH_FILE, "org.sandboxd.sandbox1.NoSuchFile", ENOENT, sandboxd_bus_errors },
        { SANDBOXD_ERROR_FILE_EXISTS, "org.sandboxd.sandbox1.FileExists", EEXIST, sandboxd_bus_errors },
        { SANDBOXD_ERROR_PERMISSION_DENIED, "org.sandboxd.sandbox1.PermissionDenied", EACCES,
          sandboxd_bus_errors },
        { SANDBOXD_ERROR_NO_MATCH, "org.sandboxd.sandbox1.NoMatch", ENODATA, sandboxd_bus_errors },
        { SANDBOXD_ERROR_AMBIGUOUS_MATCH, "org.sandboxd.sandbox1.AmbiguousMatch", ENOTUNIQ,
          sandboxd_bus_errors },
        { SANDBOXD_ERROR_BINARY_FILE, "org.sandboxd.sandbox1.BinaryFile", EMEDIUMTYPE, sandboxd_bus_errors },
        { SANDBOXD_ERROR_NO_SUCH_SHELL, "org.sandboxd.sandbox1.NoSuchShell", 0, NULL },
        { SANDBOXD_ERROR_NO_SUCH_PROCESS, "org.sandboxd.sandbox1.NoSuchProcess", 0, NULL },
        { SANDBOXD_ERROR_INTERRUPTED, "org.sandboxd.sandbox1.Interrupted", 0, NULL },
        { AUDITD_ERROR_NO_SUCH_ENTRY, "org.sandboxd.audit1.NoSuchEntry", ENXIO, auditd_bus_errors },
        { AUDITD_ERROR_STORAGE_FULL, "org.sandboxd.audit1.StorageFull", ENOSPC, auditd_bus_errors },
        { GATEWAY_ERROR_NO_SUCH_KEY, "org.sandboxd.gateway1.NoSuchKey", ENOKEY, gateway_bus_errors },
        { GATEWAY_ERROR_KEY_STORE_UNAVAILABLE, "org.sandboxd.gateway1.KeyStoreUnavailable", ENOTCONN,
          gateway_bus_errors },
};

static size_t map_size(const sd_bus_error_map *map) {
        size_t n = 0;
        while (map[n].name)
                n++;
        return n;
}

/* The map's errno for name, or 0 if the map does not have it. */
static int map_lookup(const sd_bus_error_map *map, const char *name) {
        for (size_t i = 0; map[i].name; i++)
                if (streq(map[i].name, name))
                        return map[i].code;
        return 0;
}

int main(void) {
        static const sd_bus_error_map *const maps[] = { sandboxd_bus_errors, auditd_bus_errors,
                                                        gateway_bus_errors };
        size_t mapped = 0;

        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                CHECK_STR(names[i].constant, names[i].expected);
                CHECK(sd_bus_service_name_is_valid(names[i].constant) > 0);
        }
        for (size_t i = 0; i < ELEMENTSOF(paths); i++) {
                CHECK_STR(paths[i].constant, paths[i].expected);
                CHECK(sd_bus_object_path_is_valid(paths[i].constant) > 0);
        }
        for (size_t i = 0; i < ELEMENTSOF(interfaces); i++) {
                CHECK_STR(interfaces[i].constant, interfaces[i].expected);
                CHECK(sd_bus_interface_name_is_valid(interfaces[i].constant) > 0);
        }

        for (size_t i = 0; i < ELEMENTSOF(maps); i++)
                CHECK(sd_bus_error_add_map(maps[i]) >= 0);
        for (size_t i = 0; i < ELEMENTSOF(errors); i++) {
                _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;

                CHECK_STR(errors[i].constant, errors[i].expected);
                /* error names have the syntax of interface names */
                CHECK(sd_bus_interface_name_is_valid(errors[i].constant) > 0);
                /* name → errno, as sd-bus does it for a reply once the maps are added */
                CHECK_INT(sd_bus_error_set(&e, errors[i].constant, "test"), -(errors[i].error ?: EIO));
                CHECK_INT(sd_bus_error_get_errno(&e), errors[i].error ?: EIO);
                /* and back: the errno is the name's in its own service's map, and in no other map */
                for (size_t j = 0; j < ELEMENTSOF(maps); j++)
                        CHECK_INT(map_lookup(maps[j], errors[i].constant),
                                  maps[j] == errors[i].map ? errors[i].error : 0);
                if (errors[i].map)
                        mapped++;
        }
        /* every map entry is one of the names above */
        CHECK_U64(map_size(sandboxd_bus_errors) + map_size(auditd_bus_errors) + map_size(gateway_bus_errors),
                  mapped);
        return test_finish("test-sandboxd-bus");
}
