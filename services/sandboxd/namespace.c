/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sandbox's namespaces: the mount tree it sees, its hostname, its loopback-only network. */
#include "namespace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "disk-image.h"
#include "macro.h"

const char *const namespace_hidden_paths[] = {
        "/root",
        "/run",
        "/var/lib/sandboxd",
        "/var/lib/sandbox-auditd",
        "/var/lib/sandbox-gatewayd",
        "/var/lib/private",
        "/var/log",
        "/var/cache/private",
        "/etc/sandboxd",
        "/sys/fs/cgroup",
        NULL,
};

#define FAIL(step)                                                                                          \
        do {                                                                                                \
                *ret_step = (step);                                                                         \
                return -errno;                                                                              \
        } while (0)

static int clone_tree(const char *path, bool read_only) {
        int fd = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (fd < 0)
                return -errno;
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (read_only ? MOUNT_ATTR_RDONLY : 0),
        };
        if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

static int attach_tree(int fd, const char *where) {
        int r = move_mount(fd, "", AT_FDCWD, where, MOVE_MOUNT_F_EMPTY_PATH);
        return r < 0 ? -errno : 0;
}

static int make_dev(void) {
        static const struct {
                const char *name;
                unsigned major, minor;
        } nodes[] = {
                { "null", 1, 3 }, { "zero", 1, 5 }, { "full", 1, 7 },
                { "random", 1, 8 }, { "urandom", 1, 9 }, { "tty", 5, 0 },
        };
        static const struct {
                const char *link, *target;
        } links[] = {
                { "/dev/fd", "/proc/self/fd" }, { "/dev/stdin", "/proc/self/fd/0" },
                { "/dev/stdout", "/proc/self/fd/1" }, { "/dev/stderr", "/proc/self/fd/2" },
                { "/dev/ptmx", "pts/ptmx" }, { "/dev/core", "/proc/kcore" },
        };
        char path[64];

        /* No MS_NODEV here: this tmpfs carries the few device nodes a sandbox may use. */
        if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64") < 0)
                return -errno;
        mode_t u = umask(0);
        for (size_t i = 0; i < ELEMENTSOF(nodes); i++) {
                snprintf(path, sizeof(path), "/dev/%s", nodes[i].name);
                if (mknod(path, S_IFCHR | 0666, makedev(nodes[i].major, nodes[i].minor)) < 0) {
                        umask(u);
                        return -errno;
                }
        }
        umask(u);
        for (size_t i = 0; i < ELEMENTSOF(links); i++)
                if (!streq(links[i].link, "/dev/core") && symlink(links[i].target, links[i].link) < 0)
                        return -errno;
        if (mkdir("/dev/pts", 0755) < 0 || mkdir("/dev/shm", 01777) < 0 || mkdir("/dev/mqueue", 01777) < 0)
                return -errno;
        /* A new devpts instance: the sandbox's PTYs are its own, the host's are not visible. */
        if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                  "newinstance,ptmxmode=0666,mode=0620") < 0)
                return -errno;
        if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=25%") < 0)
                return -errno;
        if (mount("mqueue", "/dev/mqueue", "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return -errno;
        return 0;
}

static int loopback_up(void) {
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr = { .ifr_name = "lo" };

        if (fd < 0)
                return -errno;
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                return -errno;
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                return -errno;
        return 0;
}

/* Issue 24: the rest of namespace_setup() for an image sandbox, once the writable pieces are cloned out of the
 * disk (whose root is mounted at disk, for the overlay's upper and work directories): the overlay root in
 * the workspace, /etc's top layer, /home, /tmp and /var/tmp on it; then the root pivoted onto it and the
 * host's detached; then /dev, /proc and the rest as for every sandbox. Every mount point in the image is a
 * real directory (image_tree_sanitize()) and the overlay's upper layer is empty, so no path here passes
 * through a symlink of the image. */
static int setup_image_root(const SandboxLayout *l, const char *disk, int home_fd, int tmp_fd, int vartmp_fd,
                            const char **ret_step) {
        char root[4096], path[8192 + 64];
        int r;

        snprintf(root, sizeof(root), "%s/" NAMESPACE_ROOT_NAME, l->workspace);
        snprintf(path, sizeof(path), "%s/upper", disk);
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
                FAIL("create the writable layer");
        snprintf(path, sizeof(path), "%s/work", disk);
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
                FAIL("create the overlay's work directory");
        /* The workspace's layer (etc/passwd, group, hosts, hostname, resolv.conf) above the image: one
         * overlay, since the kernel stacks file systems at most two deep and the host's root may be an
         * overlay already. Its options are given relative to the workspace, with the image bound at
         * lower/ first: they show in the sandbox's /proc/self/mountinfo, and the host's paths need not. */
        snprintf(path, sizeof(path), "%s/" NAMESPACE_LOWER_NAME, l->workspace);
        _cleanup_close_ int image_fd = clone_tree(l->image_tree, true);
        if (image_fd < 0) {
                errno = -image_fd;
                FAIL("clone the image's tree");
        }
        r = attach_tree(image_fd, path);
        if (r < 0) {
                errno = -r;
                FAIL("bind the image's tree");
        }
        if (chdir(l->workspace) < 0)
                FAIL("enter the workspace");
        if (mount("overlay", root, "overlay", MS_NOSUID | MS_NODEV,
                  "lowerdir=" NAMESPACE_LAYER_NAME ":" NAMESPACE_LOWER_NAME ",upperdir=" DISK_MOUNT_NAME
                  "/upper,workdir=" DISK_MOUNT_NAME "/work") < 0)
                FAIL("mount the image's overlay");
        /* The overlay holds its upper and work directories itself; the disk's root need not stay. */
        if (umount2(disk, MNT_DETACH) < 0)
                FAIL("unmount the disk image's root");

        snprintf(path, sizeof(path), "%s/home", root);
        if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") < 0)
                FAIL("mount /home");
        snprintf(path, sizeof(path), "%s%s", root, l->home);
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
                FAIL("create the home mount point");
        snprintf(path, sizeof(path), "%s/home", root);
        if (mount(NULL, path, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=0755") < 0)
                FAIL("make /home read-only");
        snprintf(path, sizeof(path), "%s%s", root, l->home);
        r = attach_tree(home_fd, path);
        if (r >= 0) {
                snprintf(path, sizeof(path), "%s/tmp", root);
                r = attach_tree(tmp_fd, path);
        }
        if (r >= 0) {
                snprintf(path, sizeof(path), "%s/var/tmp", root);
                r = attach_tree(vartmp_fd, path);
        }
        if (r < 0) {
                errno = -r;
                FAIL("mount the home, /tmp and /var/tmp");
        }

        /* /sys as every sandbox has it: read-only, its cgroup hierarchies covered. Only sysfs itself, none
         * of the file systems the host mounts below it. */
        snprintf(path, sizeof(path), "%s/sys", root);
        if (mkdir(path, 0555) < 0 && errno != EEXIST)
                FAIL("create /sys");
        _cleanup_close_ int sys_fd = clone_tree("/sys", true);
        if (sys_fd < 0) {
                errno = -sys_fd;
                FAIL("clone /sys");
        }
        r = attach_tree(sys_fd, path);
        if (r < 0) {
                errno = -r;
                FAIL("mount /sys");
        }
        snprintf(path, sizeof(path), "%s/sys/fs/cgroup", root);
        if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=1m") < 0)
                FAIL("hide /sys/fs/cgroup");

        /* pivot_root(".", "."): the old root ends up on top of the new one, and is detached at once
         * (pivot_root(2), NOTES). Nothing of the host's tree is reachable after this. */
        if (chdir(root) < 0)
                FAIL("enter the image's root");
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                FAIL("pivot the root onto the image");
        if (umount2(".", MNT_DETACH) < 0)
                FAIL("detach the host's root");
        if (chdir("/") < 0)
                FAIL("chdir /");
        return 0;
}

int namespace_setup(const SandboxLayout *l, const char **ret_step) {
        char path[4096];
        _cleanup_close_ int home_fd = -EBADF, tmp_fd = -EBADF, vartmp_fd = -EBADF, passwd_fd = -EBADF,
                            group_fd = -EBADF, resolv_fd = -EBADF;
        bool etc_overlay;
        int r;

        /* Nothing we mount may leak back to the host, and nothing the host mounts later appears here. */
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                FAIL("make mounts private");

        /* The sandbox's disk, if its type has one: home, /tmp and /var/tmp live in its image, mounted
         * here (in this namespace only) for as long as it takes to clone them out of it. */
        const char *writable = "";
        if (l->disk_image_fd >= 0) {
                snprintf(path, sizeof(path), "%s/" DISK_MOUNT_NAME, l->workspace);
                r = disk_image_mount(l->disk_image_fd, path, ret_step);
                if (r < 0)
                        return r;
                if (l->disk_from_uid != (uid_t) -1) {
                        /* A snapshot's: its directories are there, owned by the sandbox it was taken of. */
                        r = disk_image_reown(path, l->disk_from_uid, l->uid);
                        if (r < 0) {
                                errno = -r;
                                FAIL("give the snapshot's files to the sandbox's user");
                        }
                } else {
                        r = disk_image_populate(path, l->uid, l->gid);
                        if (r < 0) {
                                errno = -r;
                                FAIL("populate the disk image");
                        }
                }
                writable = DISK_MOUNT_NAME "/";
        }

        /* Take the writable pieces first: after the next step everything reachable is read-only,
         * and the workspace itself is hidden. */
#define TAKE(fd, dir, sub, ro)                                                                              \
        do {                                                                                                \
                snprintf(path, sizeof(path), "%s/%s%s", l->workspace, dir, sub);                            \
                fd = clone_tree(path, ro);                                                                  \
                if (fd < 0) {                                                                               \
                        errno = -fd;                                                                        \
                        FAIL("clone " sub);                                                                 \
                }                                                                                           \
        } while (0)
        TAKE(home_fd, writable, "home", false);
        TAKE(tmp_fd, writable, "tmp", false);
        TAKE(vartmp_fd, writable, "var-tmp", false);
        if (l->image_tree) {
                if (l->disk_image_fd < 0) {
                        errno = EINVAL;
                        FAIL("an image sandbox needs its disk");
                }
                snprintf(path, sizeof(path), "%s/" DISK_MOUNT_NAME, l->workspace);
                r = setup_image_root(l, path, home_fd, tmp_fd, vartmp_fd, ret_step);
                if (r < 0)
                        return r;
                goto devices;
        }
        if (l->disk_image_fd >= 0) {
                /* The clones hold the file system now; its root (lost+found and all) need not stay. */
                snprintf(path, sizeof(path), "%s/" DISK_MOUNT_NAME, l->workspace);
                if (umount2(path, MNT_DETACH) < 0)
                        FAIL("unmount the disk image's root");
        }

        struct mount_attr ro = {
                .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        };
        if (mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof(ro)) < 0)
                FAIL("make the host read-only");

        /* The sandbox's user and groups: a read-only overlay on /etc whose top layer holds our passwd and
         * group above the host's /etc. Not file bind mounts: the host replaces /etc/passwd by rename
         * whenever an account changes (useradd, sysusers, a package), and the kernel then detaches mounts
         * on the old file in every other namespace, so a long-lived sandbox would lose its user. Where
         * overlayfs is missing, bind the files after all. */
        snprintf(path, sizeof(path), "lowerdir=%s/etc:/etc", l->workspace);
        etc_overlay = mount("overlay", "/etc", "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, path) >= 0;
        if (!etc_overlay) {
                TAKE(passwd_fd, "", "etc/passwd", true);
                TAKE(group_fd, "", "etc/group", true);
                if (l->resolv_conf)
                        TAKE(resolv_fd, "", "etc/resolv.conf", true);
        }
#undef TAKE

        /* HidePaths=: a directory is covered like the built-in ones below; anything else by the
         * workspace's empty read-only file, bound over it. A path the host does not have is skipped; a
         * symlink is not followed (its target may be anywhere), so it stays visible: name the target. */
        for (const char *p = l->hide_paths; p && *p;) {
                const char *end = strchrnul(p, ' ');
                char hidden[256];
                struct stat st;

                snprintf(hidden, sizeof(hidden), "%.*s", (int) (end - p), p);
                p = *end ? end + 1 : end;
                if (lstat(hidden, &st) < 0 || S_ISLNK(st.st_mode))
                        continue;
                if (S_ISDIR(st.st_mode)) {
                        if (mount("tmpfs", hidden, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=1m") < 0)
                                FAIL("hide a directory of HidePaths=");
                        continue;
                }
                snprintf(path, sizeof(path), "%s/" NAMESPACE_EMPTY_FILE, l->workspace);
                _cleanup_close_ int fd = clone_tree(path, true);
                if (fd < 0) {
                        errno = -fd;
                        FAIL("hide a file of HidePaths=");
                }
                r = attach_tree(fd, hidden);
                if (r < 0) {
                        errno = -r;
                        FAIL("hide a file of HidePaths=");
                }
        }

        for (size_t i = 0; namespace_hidden_paths[i] || l->state_dir; i++) {
                const char *p = namespace_hidden_paths[i] ?: l->state_dir;
                struct stat st;
                if (stat(p, &st) >= 0 && S_ISDIR(st.st_mode) &&
                    mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          streq(p, "/root") ? "mode=0700,size=64k" : "mode=0755,size=1m") < 0)
                        FAIL("hide a host directory");
                if (!namespace_hidden_paths[i])
                        break; /* that was the state directory, last */
        }

        /* /home holds only this sandbox's home. */
        if (mount("tmpfs", "/home", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") < 0)
                FAIL("mount /home");
        if (mkdir(l->home, 0755) < 0 && errno != EEXIST)
                FAIL("create the home mount point");
        if (mount(NULL, "/home", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=0755") < 0)
                FAIL("make /home read-only");
        r = attach_tree(home_fd, l->home);
        if (r < 0) {
                errno = -r;
                FAIL("mount the home");
        }
        r = attach_tree(tmp_fd, "/tmp");
        if (r < 0) {
                errno = -r;
                FAIL("mount /tmp");
        }
        r = attach_tree(vartmp_fd, "/var/tmp");
        if (r < 0) {
                errno = -r;
                FAIL("mount /var/tmp");
        }
        if (!etc_overlay) {
                r = attach_tree(passwd_fd, "/etc/passwd");
                if (r < 0) {
                        errno = -r;
                        FAIL("mount /etc/passwd");
                }
                r = attach_tree(group_fd, "/etc/group");
                if (r < 0) {
                        errno = -r;
                        FAIL("mount /etc/group");
                }
                r = resolv_fd >= 0 ? attach_tree(resolv_fd, "/etc/resolv.conf") : 0;
                if (r < 0) {
                        errno = -r;
                        FAIL("mount /etc/resolv.conf");
                }
        }

devices:
        r = make_dev();
        if (r < 0) {
                errno = -r;
                FAIL("populate /dev");
        }

        /* We are PID 1 of the sandbox's PID namespace: this proc shows only the sandbox. */
        if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                FAIL("mount /proc");

        if (sethostname(l->hostname, strlen(l->hostname)) < 0)
                FAIL("set the hostname");
        if (l->private_network) {
                r = loopback_up();
                if (r < 0) {
                        errno = -r;
                        FAIL("bring up loopback");
                }
        }
        if (chdir("/") < 0)
                FAIL("chdir /");
        return 0;
}

static int write_file_at(int dfd, const char *name, const char *text, mode_t mode) {
        _cleanup_close_ int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
        size_t n = strlen(text);

        if (fd < 0)
                return -errno;
        if (write(fd, text, n) != (ssize_t) n)
                return errno > 0 ? -errno : -EIO;
        return 0;
}

static int fill_workspace(const char *workspace, const char *user, uid_t uid, gid_t gid, const char *home,
                          const char *disk_template) {
        _cleanup_close_ int dfd = -EBADF;
        char buf[1024];
        int r;

        dfd = open(workspace, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        if (disk_template) {
                /* The writable directories are made in the image, as it is mounted (namespace_setup()). */
                if (mkdirat(dfd, DISK_MOUNT_NAME, 0700) < 0)
                        return -errno;
                /* "": the image is put in place later, before the init opens it (a snapshot's, copied in a
                 * thread: sandbox.c) */
                r = isempty(disk_template) ? 0 : disk_image_copy(disk_template, dfd, DISK_IMAGE_NAME);
                if (r < 0)
                        return r;
        } else {
                r = disk_image_populate(workspace, uid, gid);
                if (r < 0)
                        return r;
        }

        r = write_file_at(dfd, NAMESPACE_EMPTY_FILE, "", 0444);
        if (r < 0)
                return r;
        if (mkdirat(dfd, "etc", 0755) < 0)
                return -errno;
        snprintf(buf, sizeof(buf),
                 "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                 "%s:x:%u:%u:sandbox user:%s:/bin/bash\n"
                 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
                 user, (unsigned) uid, (unsigned) gid, home);
        r = write_file_at(dfd, "etc/passwd", buf, 0644);
        if (r < 0)
                return r;
        snprintf(buf, sizeof(buf), "root:x:0:\ntty:x:5:\n%s:x:%u:\nnogroup:x:65534:\n", user, (unsigned) gid);
        return write_file_at(dfd, "etc/group", buf, 0644);
}

int namespace_workspace_add_image(const char *workspace, const char *hostname) {
        _cleanup_close_ int dfd = open(workspace, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        char buf[512];
        int r;

        if (dfd < 0)
                return -errno;
        if (mkdirat(dfd, NAMESPACE_ROOT_NAME, 0755) < 0 || mkdirat(dfd, NAMESPACE_LAYER_NAME, 0755) < 0 ||
            mkdirat(dfd, NAMESPACE_LOWER_NAME, 0755) < 0)
                return -errno;
        /* etc/ moves into the layer; etc stays its path for whoever writes there (resolv.conf). */
        if (renameat(dfd, "etc", dfd, NAMESPACE_LAYER_NAME "/etc") < 0 ||
            symlinkat(NAMESPACE_LAYER_NAME "/etc", dfd, "etc") < 0)
                return -errno;
        snprintf(buf, sizeof(buf), "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                 "127.0.1.1\t%s\n", hostname);
        r = write_file_at(dfd, "etc/hosts", buf, 0644);
        if (r < 0)
                return r;
        snprintf(buf, sizeof(buf), "%s\n", hostname);
        return write_file_at(dfd, "etc/hostname", buf, 0644);
}

int namespace_make_workspace(const char *workspace, const char *user, uid_t uid, gid_t gid, const char *home,
                             const char *disk_template) {
        if (mkdir(workspace, 0700) < 0)
                return -errno;
        int r = fill_workspace(workspace, user, uid, gid, home, disk_template);
        if (r < 0)
                (void) namespace_remove_workspace(workspace); /* ours, half made: nothing is left */
        return r;
}

static int remove_tree_at(int dfd, dev_t dev) {
        _cleanup_close_ int fd = dfd;
        DIR *d;
        struct dirent *de;
        int r = 0;

        d = fdopendir(fd);
        if (!d)
                return -errno;
        TAKE_FD(fd);
        while ((errno = 0, de = readdir(d))) {
                struct stat st;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno != ENOENT && r == 0)
                                r = -errno;
                        continue;
                }
                if (S_ISDIR(st.st_mode)) {
                        if (st.st_dev != dev)
                                continue; /* never cross into another file system */
                        int sub = openat(dirfd(d), de->d_name,
                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
                        if (sub < 0)
                                sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub < 0) {
                                if (r == 0)
                                        r = -errno;
                                continue;
                        }
                        int q = remove_tree_at(sub, dev);
                        if (q < 0 && r == 0)
                                r = q;
                        if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
                                r = -errno;
                } else if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT && r == 0)
                        r = -errno;
        }
        closedir(d);
        return r;
}

int namespace_remove_workspace(const char *workspace) {
        struct stat st;
        int fd, r;

        fd = open(workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        if (fstat(fd, &st) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        r = remove_tree_at(fd, st.st_dev);
        if (rmdir(workspace) < 0 && errno != ENOENT && r == 0)
                r = -errno;
        return r;
}
