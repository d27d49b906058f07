/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Children of sandboxd born into another process's cgroups: what they need, opened ahead. */
#include "cgroup-join.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "io-util.h"
#include "macro.h"

int cgroup_read(pid_t pid, char **ret) {
        char path[64], buf[4096];

        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int) pid);
        int r = read_small_file(path, buf, sizeof(buf));
        if (r < 0)
                return r;
        *ret = strdup(buf);
        return *ret ? 0 : -ENOMEM;
}

/* The hierarchy's mount point for a line's controllers; whether systemd needs a process there. */
static int cgroup_dir(const char *controllers, char *buf, size_t n) {
        if (isempty(controllers)) {
                /* the cgroup2 line: its own mount on a hybrid host, the root on a pure one */
                snprintf(buf, n, access("/sys/fs/cgroup/unified", F_OK) == 0 ? "/sys/fs/cgroup/unified"
                                                                              : "/sys/fs/cgroup");
                return 1;
        }
        snprintf(buf, n, "/sys/fs/cgroup/%s",
                 strncmp(controllers, "name=", 5) == 0 ? controllers + 5 : controllers);
        /* the hierarchies systemd tracks and limits with; any other may legitimately be missing */
        return strstr(controllers, "name=systemd") || strstr(controllers, "memory") || strstr(controllers, "pids");
}

static char *self_cgroups = NULL; /* sandboxd's own /proc/self/cgroup, read once, never freed */

static bool cgroup_line_is_ours(const char *line) {
        size_t n = strlen(line);

        for (const char *p = self_cgroups; p && *p;) {
                const char *end = strchrnul(p, '\n');
                if ((size_t) (end - p) == n && strncmp(p, line, n) == 0)
                        return true;
                p = *end ? end + 1 : end;
        }
        return false;
}

int cgroup_join_open(const char *cgroups, int *fds, size_t n_max, size_t *ret_n, int *ret_cgroup2_fd) {
        _cleanup_free_ char *copy = strdup(cgroups);
        _cleanup_close_ int cgroup2_fd = -EBADF;
        char *save = NULL;
        size_t n = 0;
        int r = 0;

        if (!copy)
                return -ENOMEM;
        /* Our own cgroups, once: sandboxd never moves. A child we fork starts there. */
        if (!self_cgroups && cgroup_read(getpid(), &self_cgroups) < 0)
                self_cgroups = NULL;
        for (char *line = strtok_r(copy, "\n", &save); line && r >= 0; line = strtok_r(NULL, "\n", &save)) {
                char *a = strchr(line, ':'), *b;
                if (!a || !(b = strchr(a + 1, ':')))
                        continue;
                /* Where the cgroup is sandboxd's own (typically the root of the hierarchies systemd does
                 * not manage), the child is there already: every migration is work the kernel
                 * serializes, so skip it. */
                if (cgroup_line_is_ours(line))
                        continue;
                *b = 0;
                char dir[256], path[4096 + 16];
                bool v2 = isempty(a + 1);
                int essential = cgroup_dir(a + 1, dir, sizeof(dir));
                snprintf(path, sizeof(path), "%s%s%s", dir, streq(b + 1, "/") ? "" : b + 1, v2 ? "" : "/tasks");
                if (v2) {
                        safe_close(cgroup2_fd);
                        cgroup2_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        if (cgroup2_fd < 0)
                                r = -errno;
                        continue;
                }
                if (n >= n_max) {
                        r = -E2BIG;
                        continue;
                }
                int fd = open(path, O_WRONLY | O_CLOEXEC);
                if (fd >= 0)
                        fds[n++] = fd;
                else if (essential)
                        r = -errno;
        }
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
                        safe_close(fds[i]);
                return r;
        }
        *ret_n = n;
        *ret_cgroup2_fd = TAKE_FD(cgroup2_fd);
        return 0;
}

pid_t cgroup_fork_into(int cgroup2_fd, bool *ret_born_in) {
        *ret_born_in = false;
        if (cgroup2_fd >= 0) {
                struct clone_args_v2 args = {
                        .flags = CLONE_INTO_CGROUP,
                        .exit_signal = SIGCHLD,
                        .cgroup = (uint64_t) cgroup2_fd,
                };
                long pid = syscall(SYS_clone3, &args, sizeof(args));
                if (pid >= 0) {
                        *ret_born_in = true;
                        return (pid_t) pid;
                }
                if (!CLONE3_UNSUPPORTED(errno))
                        return -1;
        }
        return fork();
}
