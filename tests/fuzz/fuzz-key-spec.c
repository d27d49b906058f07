/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes the gateway's CreateKey: the spec a{sv} as gateway_keys_parse_spec reads it from a message made
 * from the input (fuzz-bus.h), then key_spec_resolve on what it accepted, as root mints keys over the bus.
 * What is accepted must be a key within its role; what is refused must say why. */
#include "fuzz-bus.h"
#include "gateway-auth.h"
#include "gatewayd-keys.h"
#include "time-util.h"
#include "utf8-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(key_spec_strings_clear) KeySpecStrings strings = {};
        sd_bus_error e = SD_BUS_ERROR_NULL;
        FuzzInput in = {data, size};
        KeySpec spec = {};
        sd_bus_message *m;
        KeyRole role;
        uint64_t actions, expires_at, now = UINT64_C(1800000000) * USEC_PER_SEC;
        char **sandboxes = NULL, *why = NULL;
        int r;

        m = fuzz_options_message(&in);
        if (!m)
                return 0;

        r = gateway_keys_parse_spec(m, &spec, &strings, &e);
        if (r < 0) {
                FUZZ_ASSERT_REFUSED(r, &e);
                goto finish;
        }
        FUZZ_ASSERT(spec.ttl_usec == 0 || spec.ttl_usec >= USEC_PER_SEC);
        r = key_spec_resolve(&spec, NULL, now, &role, &actions, &sandboxes, &expires_at, &why);
        if (r < 0) {
                FUZZ_ASSERT(r == -ENOMEM || ((r == -EINVAL || r == -EPERM) && why));
                goto finish;
        }
        /* A key never holds more than its role allows, and expires when it was asked to. */
        FUZZ_ASSERT((actions & ~key_role_actions(role)) == 0);
        FUZZ_ASSERT(spec.ttl_usec == 0 ? expires_at == 0 : expires_at == now + spec.ttl_usec);
        /* A name is shown on terminals: nothing in it that one acts on or hides. */
        if (spec.name)
                FUZZ_ASSERT(utf8_is_printable((const uint8_t *) spec.name, strlen(spec.name)));
finish:
        strv_free(sandboxes);
        free(why);
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        return 0;
}
