/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the capacity agent's line for HAProxy's agent-check: room, none, unknown, rounding, bad
 * input. */
#include <errno.h>
#include <string.h>

#include "capacity-agent.h"
#include "test-util.h"

static void check_line(bool known, uint64_t live, uint64_t max, const char *expected) {
        char buf[64];
        int n = capacity_agent_line(known, live, max, buf, sizeof(buf));

        CHECK_INT(n, (int) strlen(expected));
        if (n > 0)
                CHECK_STR(buf, expected);
}

int main(void) {
        char small[4];

        check_line(true, 0, 4096, "up ready 100%\n");
        check_line(true, 1, 4, "up ready 75%\n");
        check_line(true, 3, 4, "up ready 25%\n");
        check_line(true, 4095, 4096, "up ready 1%\n"); /* any room at all keeps the host in the rotation */
        check_line(true, 4, 4, "drain\n");
        check_line(true, 9, 4, "drain\n"); /* more than allowed (MaxSandboxes= lowered): none */
        check_line(false, 0, 4, "down\n");
        check_line(false, 4, 4, "down\n");
        CHECK_INT(capacity_agent_line(true, 0, 0, small, sizeof(small)), -EINVAL);
        CHECK_INT(capacity_agent_line(true, 0, 4, small, sizeof(small)), -EINVAL); /* does not fit */
        CHECK_INT(capacity_agent_line(true, 0, 4, NULL, 0), -EINVAL);
        return test_finish("test-capacity-agent");
}
