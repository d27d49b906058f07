/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A sandbox's disk: an ext4 image of its type's DiskMax= on a loop device, holding its home, /tmp and /var/tmp.
 *
 * Why an image and not the host's file system: nothing else bounds what a sandbox writes. Directories
 * on the host share its free space and inodes with everything else; project quotas need a file system
 * mounted for them; a tmpfs would spend memory. An image file is sparse (the host gives it blocks only
 * as the sandbox writes them), its size is the hard limit, and the loop device goes by itself once the
 * last mount of it (the sandbox's mount namespace) is gone. mkfs.ext4 runs once per size, at start-up:
 * every sandbox gets a sparse copy of that template, well under a millisecond. */
#include "disk-image.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/loop.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"

int disk_template_make(const char *dir, uint64_t size, const char *mkfs, char **ret_path) {
        char path[4096], tmp[4096];
        pid_t pid;
        int status, r;

        if (size < DISK_SIZE_MIN || size > (uint64_t) INT64_MAX)
                return -ERANGE;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return -errno;
        snprintf(path, sizeof(path), "%s/ext4-%" PRIu64 ".img", dir, size);
        snprintf(tmp, sizeof(tmp), "%s/.ext4-%" PRIu64 ".img.new", dir, size);

        {
                _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0)
                        return -errno;
                if (ftruncate(fd, (off_t) size) < 0) {
                        r = -errno;
                        (void) unlink(tmp);
                        return r;
                }
        }

        /* No journal: a sandbox's processes do not outlive a crash of the kernel, so neither need its
         * files. No blocks kept for root, who never writes there, and none kept to grow the file system
         * (resize_inode: 2 MiB of a 4 GiB image's 2.2). Inode tables are left to be zeroed lazily, and
         * the mount says never to (noinit_itable): the copies stay sparse, 172 KiB of data for 4 GiB. */
        char *argv[] = { (char *) mkfs, (char *) "-q", (char *) "-F", (char *) "-m", (char *) "0",
                         (char *) "-O", (char *) "^has_journal,^resize_inode", (char *) "-E",
                         (char *) "lazy_itable_init=1,lazy_journal_init=1,nodiscard", (char *) "-L",
                         (char *) "sandbox", tmp, NULL };
        char *envp[] = { (char *) "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
        r = posix_spawn(&pid, mkfs, NULL, NULL, argv, envp);
        if (r != 0) {
                (void) unlink(tmp);
                return -r;
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR) {
                        r = -errno;
                        (void) unlink(tmp);
                        return r;
                }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                (void) unlink(tmp);
                return -ENOEXEC;
        }
        if (rename(tmp, path) < 0) {
                r = -errno;
                (void) unlink(tmp);
                return r;
        }
        if (ret_path) {
                *ret_path = strdup(path);
                if (!*ret_path)
                        return -ENOMEM;
        }
        return 0;
}

/* Copies [off, end) of in to the same place in out. */
static int copy_range(int in, int out, off_t off, off_t end) {
        char buf[16 * 1024]; /* only where copy_file_range() cannot: the template is mostly holes */
        bool plain = false;

        while (off < end) {
                size_t want = (size_t) MIN((uint64_t) (end - off), (uint64_t) 1 << 30);
                ssize_t n;
                if (!plain) {
                        off_t from = off, to = off;
                        n = copy_file_range(in, &from, out, &to, want, 0);
                        if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP || errno == ENOSYS)) {
                                plain = true; /* not between these two file systems: by hand */
                                continue;
                        }
                } else {
                        n = pread(in, buf, MIN(want, sizeof(buf)), off);
                        if (n > 0 && pwrite(out, buf, (size_t) n, off) != n)
                                return errno > 0 ? -errno : -EIO;
                }
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -EIO; /* the template shrank under us */
                off += n;
        }
        return 0;
}

int disk_image_copy(const char *template_path, int dfd, const char *name) {
        _cleanup_close_ int in = -EBADF, out = -EBADF;
        struct stat st;
        int r;

        in = open(template_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (in < 0)
                return -errno;
        if (fstat(in, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADF;
        out = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return -errno;

        /* Only what the template holds; its holes stay holes. */
        for (off_t data = 0;;) {
                data = lseek(in, data, SEEK_DATA);
                if (data < 0) {
                        if (errno == ENXIO)
                                break; /* no data after this */
                        r = -errno;
                        goto fail;
                }
                off_t hole = lseek(in, data, SEEK_HOLE);
                if (hole < 0) {
                        r = -errno;
                        goto fail;
                }
                r = copy_range(in, out, data, hole);
                if (r < 0)
                        goto fail;
                data = hole;
        }
        if (ftruncate(out, st.st_size) < 0) {
                r = -errno;
                goto fail;
        }
        return 0;
fail:
        (void) unlinkat(dfd, name, 0);
        return r;
}

#define FAIL(step)                                                                                          \
        do {                                                                                                \
                *ret_step = (step);                                                                         \
                return -errno;                                                                              \
        } while (0)

int disk_image_mount(int image, const char *mountpoint, const char **ret_step) {
        _cleanup_close_ int control = -EBADF, loop = -EBADF;
        char dev[64];

        control = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        if (control < 0)
                FAIL("open /dev/loop-control");

        /* Another process may take the free device between our asking and our configuring it: ask again. */
        for (unsigned attempt = 0;; attempt++) {
                int n = ioctl(control, LOOP_CTL_GET_FREE);
                if (n < 0)
                        FAIL("find a free loop device");
                snprintf(dev, sizeof(dev), "/dev/loop%i", n);
                loop = open(dev, O_RDWR | O_CLOEXEC);
                if (loop < 0)
                        FAIL("open the loop device");
                /* Autoclear: the kernel detaches the device once its last user is gone, that is once the
                 * sandbox's mount namespace (the only one that mounts it) is. Direct I/O, where the host's
                 * file system allows it: the image's pages are not cached twice. */
                struct loop_config config = {
                        .fd = (uint32_t) image,
                        .info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO,
                };
                if (ioctl(loop, LOOP_CONFIGURE, &config) >= 0)
                        break;
                if (errno == EINVAL) {
                        config.info.lo_flags &= ~LO_FLAGS_DIRECT_IO;
                        if (ioctl(loop, LOOP_CONFIGURE, &config) >= 0)
                                break;
                }
                if (errno != EBUSY || attempt >= 64)
                        FAIL("attach the disk image");
                loop = safe_close(loop);
        }

        /* nosuid, nodev as everything the sandbox may write; noinit_itable: ext4 would otherwise zero
         * the inode tables in the background, turning the image's holes into data. Until this mount
         * holds it, our descriptor is what keeps the device attached. */
        if (mount(dev, mountpoint, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, "noinit_itable") < 0)
                FAIL("mount the disk image");
        return 0;
}

#define REOWN_BUF_SIZE 8192

static int reown_at(int dfd, const char *name, uid_t from, uid_t to) {
        struct stat st;

        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW | (name[0] ? 0 : AT_EMPTY_PATH)) < 0)
                return -errno;
        if (st.st_uid != from && st.st_gid != (gid_t) from)
                return S_ISDIR(st.st_mode);
        if (fchownat(dfd, name, st.st_uid == from ? to : (uid_t) -1, st.st_gid == (gid_t) from ? (gid_t) to : (gid_t) -1,
                     AT_SYMLINK_NOFOLLOW | (name[0] ? 0 : AT_EMPTY_PATH)) < 0)
                return -errno;
        /* chown() clears the set-id bits: put a directory's setgid (inherited group) back. */
        if (S_ISDIR(st.st_mode) && (st.st_mode & S_ISGID) && fchmodat(dfd, name, st.st_mode & 07777, 0) < 0 &&
            name[0])
                return -errno;
        return S_ISDIR(st.st_mode);
}

int disk_image_reown(const char *dir, uid_t from, uid_t to) {
        int fds[DISK_REOWN_DEPTH_MAX];
        size_t pos[DISK_REOWN_DEPTH_MAX], len[DISK_REOWN_DEPTH_MAX];
        char *bufs;
        int depth = 0, r = 0;

        bufs = mmap(NULL, (size_t) DISK_REOWN_DEPTH_MAX * REOWN_BUF_SIZE, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (bufs == MAP_FAILED)
                return -errno;
        fds[0] = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fds[0] < 0) {
                r = -errno;
                goto out;
        }
        r = reown_at(fds[0], "", from, to);
        if (r < 0)
                goto out;
        pos[0] = len[0] = 0;
        while (depth >= 0) {
                char *buf = bufs + (size_t) depth * REOWN_BUF_SIZE;
                if (pos[depth] >= len[depth]) {
                        long n = syscall(SYS_getdents64, fds[depth], buf, REOWN_BUF_SIZE);
                        if (n < 0) {
                                r = -errno;
                                goto out;
                        }
                        if (n == 0) {
                                fds[depth] = safe_close(fds[depth]);
                                depth--;
                                continue;
                        }
                        pos[depth] = 0;
                        len[depth] = (size_t) n;
                }
                /* struct linux_dirent64: ino 8, off 8, reclen 2, type 1, then the name */
                char *e = buf + pos[depth];
                unsigned short reclen;
                memcpy(&reclen, e + 16, sizeof(reclen));
                pos[depth] += reclen;
                const char *name = e + 19;
                if (streq(name, ".") || streq(name, ".."))
                        continue;
                r = reown_at(fds[depth], name, from, to);
                if (r < 0)
                        goto out;
                if (r == 0)
                        continue;
                if (depth + 1 >= DISK_REOWN_DEPTH_MAX) {
                        r = -ELOOP;
                        goto out;
                }
                int fd = openat(fds[depth], name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0) {
                        r = -errno;
                        goto out;
                }
                depth++;
                fds[depth] = fd;
                pos[depth] = len[depth] = 0;
        }
        r = 0;
out:
        for (; depth >= 0; depth--)
                safe_close(fds[depth]);
        (void) munmap(bufs, (size_t) DISK_REOWN_DEPTH_MAX * REOWN_BUF_SIZE);
        return r;
}

int disk_image_populate(const char *dir, uid_t uid, gid_t gid) {
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (dfd < 0)
                return -errno;
        if (mkdirat(dfd, "home", 0700) < 0 || fchownat(dfd, "home", uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (mkdirat(dfd, "tmp", 0777) < 0 || fchmodat(dfd, "tmp", 01777, 0) < 0)
                return -errno;
        if (mkdirat(dfd, "var-tmp", 0777) < 0 || fchmodat(dfd, "var-tmp", 01777, 0) < 0)
                return -errno;
        return 0;
}
