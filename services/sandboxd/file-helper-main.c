/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd-file-helper: does a sandbox's file calls for sandboxd, confined as the sandbox's user. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "file-helper.h"

int main(int argc, char *argv[]) {
        if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
                printf("%s\n\nDoes a sandbox's file calls (ReadFile, WriteFile, View, Grep, ...) for sandboxd,\n"
                       "inside the sandbox's mount namespace as its user. sandboxd starts it with its\n"
                       "socket on fd %d and the sandbox init's pidfd on fd %d; it is not run by hand.\n",
                       argv[0], FILE_HELPER_SOCKET_FD, FILE_HELPER_WATCH_FD);
                return 0;
        }
        if (argc > 1 || fcntl(FILE_HELPER_SOCKET_FD, F_GETFD) < 0) {
                fprintf(stderr, "%s: started by sandboxd only (no socket on fd %d)\n", argv[0],
                        FILE_HELPER_SOCKET_FD);
                return 2;
        }
        int watch = fcntl(FILE_HELPER_WATCH_FD, F_GETFD) < 0 ? -1 : FILE_HELPER_WATCH_FD;
        /* _exit: nothing to flush, and no sanitizer's exit-time checks in a confined process */
        _exit(file_helper_serve(FILE_HELPER_SOCKET_FD, watch, FILE_HELPER_IDLE_MSEC) < 0 ? 1 : 0);
}
