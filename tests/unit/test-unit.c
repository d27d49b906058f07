/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for unit.c's name parser: sandboxd's own unit names are taken apart, nothing else is. */
#include <errno.h>
#include <string.h>

#include "test-util.h"
#include "unit.h"

static void check_parse(const char *name, int expected, const char *id, UnitKind kind) {
        char got[SANDBOX_ID_LEN + 1] = "untouched";
        UnitKind k = _UNIT_KIND_MAX;
        int r = unit_name_parse(name, got, &k);

        if (r != expected) {
                fprintf(stderr, "%s:%d: unit_name_parse(\"%s\") is %d, expected %d\n", __FILE__, __LINE__,
                        name ?: "(null)", r, expected);
                failures++;
                return;
        }
        if (expected < 0) {
                /* untouched on failure */
                CHECK_STR(got, "untouched");
                CHECK_INT(k, _UNIT_KIND_MAX);
                return;
        }
        CHECK_STR(got, id);
        CHECK_INT(k, kind);
}

int main(void) {
        check_parse("sandbox-sb_abcdefgh23.slice", 0, "sb_abcdefgh23", UNIT_KIND_SLICE);
        check_parse("sandbox-sb_abcdefgh23-init.scope", 0, "sb_abcdefgh23", UNIT_KIND_INIT);
        check_parse("sandbox-sb_abcdefgh23-exec-0.scope", 0, "sb_abcdefgh23", UNIT_KIND_EXEC);
        check_parse("sandbox-sb_abcdefgh23-exec-18446744073709551615.scope", 0, "sb_abcdefgh23", UNIT_KIND_EXEC);
        check_parse("sandbox-sb_abcdefgh23-shell-7.scope", 0, "sb_abcdefgh23", UNIT_KIND_SHELL);
        check_parse("sandbox-sb_abcdefgh23-process-12.scope", 0, "sb_abcdefgh23", UNIT_KIND_PROCESS);
        check_parse("sandbox-sb_abcdefgh23-process-.scope", -EINVAL, NULL, 0);
        check_parse("sandbox-sb_abcdefgh23-process-p3.scope", -EINVAL, NULL, 0);

        /* our services and the parent slice share the prefix */
        check_parse("sandbox.slice", -EINVAL, NULL, 0);
        check_parse("sandbox-auditd.service", -EINVAL, NULL, 0);
        check_parse("sandbox-gatewayd.socket", -EINVAL, NULL, 0);
        check_parse("sandbox-gatewayd.service", -EINVAL, NULL, 0);
        /* not an id: wrong length, wrong alphabet, wrong prefix */
        check_parse("sandbox-sb_abcdefgh2.slice", -EINVAL, NULL, 0);
        check_parse("sandbox-sb_abcdefgh234.slice", -EINVAL, NULL, 0);
        check_parse("sandbox-sb_ABCDEFGH23.slice", -EINVAL, NULL, 0);
        check_parse("sandbox-sb_abcdefgh01.slice", -EINVAL, NULL, 0);
        check_parse("sandbox-xx_abcdefgh23.slice", -EINVAL, NULL, 0);
        /* suffixes that are almost ours */
        check_parse("sandbox-sb_abcdefgh23", -EINVAL, NULL, 0);
        check_parse("sandbox-sb_abcdefgh23.service", -EINVAL, NULL, 0);
        check_parse("sandbox-sb_abcdefgh23-exec-.scope", -EINVAL, NULL, 0);
        check_parse("sandbox-sb_abcdefgh23-exec-1x.scope", -EINVAL, NULL, 0);
        check_parse("sandbox-sb_abcdefgh23-exec-1.slice", -EINVAL, NULL, 0);
        check_parse("sandbox-sb_abcdefgh23-exec--1.scope", -EINVAL, NULL, 0);
        check_parse("sandbox-sb_abcdefgh23-shell-1.scope.x", -EINVAL, NULL, 0);
        check_parse("sandbox-sb_abcdefgh23-init.slice", -EINVAL, NULL, 0);
        check_parse("sandbox-sb_abcdefgh23-warm-1.scope", -EINVAL, NULL, 0);
        check_parse("", -EINVAL, NULL, 0);
        check_parse(NULL, -EINVAL, NULL, 0);

        return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
