/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* OOM-kill detection for a scope, on hybrid (v1 memory controller) and pure cgroup2 hosts.
 *
 * systemd 252 on a hybrid layout reports Result=success for a scope whose process the kernel
 * OOM-killed, and removes the scope's cgroup as soon as it is empty, so neither its result nor a late
 * read of memory.oom_control can be trusted. On v1 we register an eventfd for the scope's OOM
 * notifications (cgroup.event_control): the kernel signals it once per OOM and once more when the
 * cgroup goes away. On v2, memory.events counts oom_kill in the scope and, hierarchically, in its slice,
 * which outlives the scope. */
#include "oom.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "macro.h"

static int read_key(int fd, const char *key, uint64_t *ret) {
        char buf[1024];
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        size_t kl = strlen(key);

        if (n < 0)
                return -errno;
        buf[n] = 0;
        for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
                        *ret = strtoull(line + kl + 1, NULL, 10);
                        return 0;
                }
        }
        return -ENOENT;
}

static int prefix_of_pid1(const char *controller_field, char **ret) {
        _cleanup_fclose_ FILE *f = fopen("/proc/1/cgroup", "re");
        char line[4096];

        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                char *a = strchr(line, ':'), *b;
                if (!a || !(b = strchr(a + 1, ':')))
                        continue;
                *b = 0;
                if (!streq(a + 1, controller_field))
                        continue;
                char *path = b + 1;
                path[strcspn(path, "\n")] = 0;
                size_t l = strlen(path);
                /* systemd keeps itself in init.scope at the root of its tree */
                if (l >= 11 && streq(path + l - 11, "/init.scope"))
                        path[l - 11] = 0;
                if (streq(path, "/"))
                        path[0] = 0;
                *ret = strdup(path);
                return *ret ? 0 : -ENOMEM;
        }
        return -ENOENT;
}

int oom_detect_layout(CgroupMemoryLayout *ret_layout, char **ret_prefix) {
        if (access("/sys/fs/cgroup/memory/memory.oom_control", F_OK) == 0) {
                *ret_layout = CGROUP_MEMORY_V1;
                return prefix_of_pid1("memory", ret_prefix);
        }
        if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0) {
                *ret_layout = CGROUP_MEMORY_V2;
                return prefix_of_pid1("", ret_prefix);
        }
        *ret_layout = CGROUP_MEMORY_NONE;
        *ret_prefix = strdup("");
        return *ret_prefix ? 0 : -ENOMEM;
}

int oom_watch_start(OomWatch *w, CgroupMemoryLayout layout, const char *prefix, const char *parent_path,
                    const char *unit_path) {
        char path[4096], buf[64];

        if (layout == CGROUP_MEMORY_V1) {
                _cleanup_close_ int ctl = -EBADF;
                w->v1 = true;
                snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/%s/memory.oom_control", prefix, unit_path);
                w->control_fd = open(path, O_RDONLY | O_CLOEXEC);
                if (w->control_fd < 0)
                        return -errno;
                w->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                if (w->event_fd < 0)
                        return -errno;
                snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/%s/cgroup.event_control", prefix, unit_path);
                ctl = open(path, O_WRONLY | O_CLOEXEC);
                if (ctl < 0)
                        return -errno;
                int n = snprintf(buf, sizeof(buf), "%d %d", w->event_fd, w->control_fd);
                if (write(ctl, buf, n) != n)
                        return -errno;
                return 0;
        }
        if (layout == CGROUP_MEMORY_V2) {
                snprintf(path, sizeof(path), "/sys/fs/cgroup%s/%s/memory.events", prefix, unit_path);
                w->control_fd = open(path, O_RDONLY | O_CLOEXEC);
                snprintf(path, sizeof(path), "/sys/fs/cgroup%s/%s/memory.events", prefix, parent_path);
                w->parent_fd = open(path, O_RDONLY | O_CLOEXEC);
                if (w->parent_fd >= 0)
                        (void) read_key(w->parent_fd, "oom_kill", &w->parent_before);
                return w->control_fd >= 0 || w->parent_fd >= 0 ? 0 : -errno;
        }
        return -EOPNOTSUPP;
}

void oom_watch_poll(OomWatch *w) {
        uint64_t v, kills;

        if (w->event_fd < 0)
                return;
        if (read(w->event_fd, &v, sizeof(v)) == sizeof(v))
                w->events += v;
        /* While the cgroup exists its counter is the truth. */
        if (read_key(w->control_fd, "oom_kill", &kills) >= 0 && kills > 0)
                w->seen = true;
}

bool oom_watch_check(OomWatch *w, bool killed_by_sigkill) {
        uint64_t kills;

        if (w->seen)
                return true;
        if (w->v1) {
                oom_watch_poll(w);
                if (w->seen)
                        return true;
                if (read_key(w->control_fd, "oom_kill", &kills) >= 0)
                        return false; /* cgroup still there and it counted none */
                /* The cgroup is gone. Its removal signalled once; anything beyond was an OOM. One
                 * signal alone is either an OOM whose removal signal is still on its way or a plain
                 * removal: a SIGKILLed main process tells them apart. */
                if (w->events >= 2)
                        return true;
                return w->events == 1 && killed_by_sigkill;
        }
        if (w->control_fd >= 0 && read_key(w->control_fd, "oom_kill", &kills) >= 0)
                return kills > 0;
        if (w->parent_fd >= 0 && read_key(w->parent_fd, "oom_kill", &kills) >= 0)
                return kills > w->parent_before;
        return false;
}

void oom_watch_done(OomWatch *w) {
        w->event_fd = safe_close(w->event_fd);
        w->control_fd = safe_close(w->control_fd);
        w->parent_fd = safe_close(w->parent_fd);
}
