/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Many processes, each with a key store handle of its own, racing to redeem one takeover token. */
#pragma once

#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include "key-store.h"
#include "test-util.h"

/* Forks n children; each opens its own handle with open_child() (NULL: the child counts as failed), waits
 * until all are ready (a pipe closing), and redeems token for sandbox_id and route at now. The exactly-one
 * rule holds if *ret_wins is 1 and *ret_already is n - 1. */
static inline void key_store_token_race(unsigned n, KeyStore *(*open_child)(void), const char *token,
                                        const char *sandbox_id, const char *route, uint64_t now,
                                        int *ret_wins, int *ret_already) {
        pid_t pids[64];
        int pipefd[2], wins = 0, already = 0;

        CHECK(n <= ELEMENTSOF(pids));
        CHECK_INT(pipe(pipefd), 0);
        for (unsigned i = 0; i < n; i++) {
                pids[i] = fork();
                if (pids[i] == 0) {
                        KeyStore *s = open_child();
                        ApiKey *k = NULL;
                        char go;
                        int r = s ? 0 : -EIO;
                        close(pipefd[1]);
                        (void) !read(pipefd[0], &go, 1); /* all start together, when the pipe closes */
                        if (r >= 0)
                                r = key_store_token_redeem(s, token, sandbox_id, route, now, &k);
                        api_key_free(k);
                        key_store_free(s);
                        _exit(r == 0 ? 0 : r == -EALREADY ? 1 : 2);
                }
        }
        close(pipefd[0]);
        close(pipefd[1]);
        for (unsigned i = 0; i < n; i++) {
                int status = 0;
                CHECK_INT(waitpid(pids[i], &status, 0), pids[i]);
                CHECK(WIFEXITED(status));
                wins += WEXITSTATUS(status) == 0;
                already += WEXITSTATUS(status) == 1;
        }
        *ret_wins = wins;
        *ret_already = already;
}
