/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes sandboxd_config_load() (and the INI parser under it): the input is the main config file. */
#include <errno.h>

#include "fuzz.h"
#include "sandboxd-config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        SandboxdConfig c;
        char path[64], *error = NULL;
        int fd, r;

        fd = fuzz_memfd(data, size, path);
        if (fd < 0)
                return 0;
        sandboxd_config_defaults(&c);
        r = sandboxd_config_load(&c, path, NULL, &error);
        /* A rejected file always says why. */
        if (r == -EINVAL)
                FUZZ_ASSERT(error && error[0]);
        sandboxd_config_done(&c);
        free(error);
        close(fd);
        return 0;
}
