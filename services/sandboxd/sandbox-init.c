/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-init: PID 1 of a sandbox's PID namespace; it only reaps orphans, for the sandbox's life. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char *argv[]) {
        sigset_t set;

        /* The sandbox's processes run as our uid: without this they could ptrace us. */
        (void) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

        /* Only SIGCHLD is blocked (and waited for). Every other signal keeps its default action,
         * which for PID 1 of a PID namespace means ignored, from inside the sandbox and from outside
         * alike; only SIGKILL from outside ends us, which is what the init scope's KillSignal= is. */
        sigemptyset(&set);
        sigaddset(&set, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
                return EXIT_FAILURE;

        for (;;) {
                siginfo_t si;
                if (sigwaitinfo(&set, &si) < 0 && errno != EINTR)
                        return EXIT_FAILURE;
                while (waitpid(-1, NULL, WNOHANG) > 0)
                        ;
        }
}
