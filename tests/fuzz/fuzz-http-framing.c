/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes the gateway's body framing check (RFC 9112 §6) on a request's header lines, "Name: value" each. */
#include <errno.h>
#include <strings.h>

#include "fuzz.h"
#include "http-util.h"
#include "macro.h"

#define LINES_MAX 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *lines[LINES_MAX] = {};
        const char *cl[LINES_MAX], *te[LINES_MAX], *why = NULL;
        size_t n_lines = 0, n_cl = 0, n_te = 0;
        int r;

        /* As libmicrohttpd hands them over: the name before the colon, the value without leading spaces. */
        while (size > 0 && n_lines < LINES_MAX) {
                char *line = fuzz_take_line(&data, &size), *colon;
                if (!line)
                        goto finish;
                lines[n_lines++] = line;
                colon = strchr(line, ':');
                if (!colon)
                        continue;
                *colon = 0;
                const char *value = colon + 1 + strspn(colon + 1, " \t");
                if (strcasecmp(line, "Content-Length") == 0)
                        cl[n_cl++] = value;
                else if (strcasecmp(line, "Transfer-Encoding") == 0)
                        te[n_te++] = value;
        }

        r = http_check_framing(cl, n_cl, te, n_te, &why);
        FUZZ_ASSERT(r == 0 || r == -EBADMSG);
        if (r < 0)
                FUZZ_ASSERT(why && why[0]);
        else {
                /* What passes is framed one way only: by one plain number, or by a single "chunked". */
                FUZZ_ASSERT(n_cl + n_te <= 1);
                if (n_cl == 1)
                        FUZZ_ASSERT(cl[0][0] && strspn(cl[0], "0123456789") == strlen(cl[0]));
                if (n_te == 1)
                        FUZZ_ASSERT(strcasestr(te[0], "chunked") && !strchr(te[0], ','));
        }
finish:
        for (size_t i = 0; i < n_lines; i++)
                free(lines[i]);
        return 0;
}
