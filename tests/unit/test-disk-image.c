/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests disk-image.c without root: the template from mkfs (a stand-in script, and the real mkfs.ext4
 * where installed), the sparse copy, and the directories of a disk's root. Attaching and mounting need
 * root and a loop device: tests/integration/test_sandboxd.py covers them. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk-image.h"
#include "macro.h"
#include "test-util.h"

static char dir[] = "/tmp/test-disk-image.XXXXXX";

static void write_script(const char *name, const char *body) {
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        FILE *f = fopen(path, "w");
        CHECK(f);
        if (!f)
                return;
        fputs(body, f);
        CHECK(fclose(f) == 0);
        CHECK(chmod(path, 0755) == 0);
}

static void test_template(void) {
        char mkfs[256], tdir[256], *path = NULL;
        struct stat st;

        snprintf(tdir, sizeof(tdir), "%s/templates", dir);
        /* A stand-in that writes a mark at the start of the file it is given (the last argument). */
        write_script("fake-mkfs",
                     "#!/bin/sh\nfor a; do last=$a; done\nprintf MARK | dd of=\"$last\" conv=notrunc status=none\n");
        snprintf(mkfs, sizeof(mkfs), "%s/fake-mkfs", dir);
        CHECK_INT(disk_template_make(tdir, 32 << 20, mkfs, &path), 0);
        CHECK(path && strstr(path, "/templates/ext4-33554432.img"));
        if (path) {
                CHECK(stat(path, &st) == 0 && st.st_size == 32 << 20 && (st.st_mode & 0777) == 0600);
                char buf[8] = {};
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                CHECK(fd >= 0 && read(fd, buf, 4) == 4 && memcmp(buf, "MARK", 4) == 0);
                close(fd);
        }
        free(path);
        path = NULL;
        /* made again: replaced, no temporary file left */
        CHECK_INT(disk_template_make(tdir, 32 << 20, mkfs, NULL), 0);
        char tmp[300];
        snprintf(tmp, sizeof(tmp), "%s/.ext4-33554432.img.new", tdir);
        CHECK(access(tmp, F_OK) < 0 && errno == ENOENT);

        /* mkfs fails, or is not there: an error and no template */
        write_script("failing-mkfs", "#!/bin/sh\nexit 1\n");
        snprintf(mkfs, sizeof(mkfs), "%s/failing-mkfs", dir);
        CHECK_INT(disk_template_make(tdir, 64 << 20, mkfs, &path), -ENOEXEC);
        CHECK(!path);
        snprintf(tmp, sizeof(tmp), "%s/ext4-67108864.img", tdir);
        CHECK(access(tmp, F_OK) < 0);
        snprintf(tmp, sizeof(tmp), "%s/.ext4-67108864.img.new", tdir);
        CHECK(access(tmp, F_OK) < 0);
        CHECK_INT(disk_template_make(tdir, 64 << 20, "/nonexistent/mkfs.ext4", NULL), -ENOENT);
        /* sizes mkfs cannot use */
        CHECK_INT(disk_template_make(tdir, DISK_SIZE_MIN - 1, mkfs, NULL), -ERANGE);
        CHECK_INT(disk_template_make(tdir, UINT64_MAX, mkfs, NULL), -ERANGE);

        /* The real one, where installed: an ext4 (magic 0xEF53 at byte 1080), nearly all holes. */
        const char *real = access("/usr/sbin/mkfs.ext4", X_OK) == 0 ? "/usr/sbin/mkfs.ext4" : "/sbin/mkfs.ext4";
        if (access(real, X_OK) == 0) {
                CHECK_INT(disk_template_make(tdir, 64 << 20, real, &path), 0);
                if (path) {
                        unsigned char magic[2] = {};
                        int fd = open(path, O_RDONLY | O_CLOEXEC);
                        CHECK(fd >= 0 && pread(fd, magic, 2, 1080) == 2);
                        CHECK(magic[0] == 0x53 && magic[1] == 0xEF);
                        CHECK(fstat(fd, &st) == 0 && st.st_size == 64 << 20);
                        CHECK((uint64_t) st.st_blocks * 512 < (8 << 20));
                        close(fd);
                }
                free(path);
        } else
                printf("SKIP: the real template: no mkfs.ext4 here (e2fsprogs)\n");
}

static void test_copy(void) {
        char src[256], name[64];
        struct stat a, b;

        /* data at the start, in the middle and at the end of a sparse 16 MiB file */
        snprintf(src, sizeof(src), "%s/sparse.img", dir);
        int fd = open(src, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        CHECK(fd >= 0);
        CHECK(ftruncate(fd, 16 << 20) == 0);
        CHECK(pwrite(fd, "first", 5, 0) == 5);
        CHECK(pwrite(fd, "middle", 6, 7 << 20) == 6);
        CHECK(pwrite(fd, "end", 3, (16 << 20) - 3) == 3);
        close(fd);

        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(dfd >= 0);
        CHECK_INT(disk_image_copy(src, dfd, "copy.img"), 0);
        CHECK(stat(src, &a) == 0 && fstatat(dfd, "copy.img", &b, 0) == 0);
        CHECK(b.st_size == a.st_size && (b.st_mode & 0777) == 0600);
        CHECK(b.st_blocks <= a.st_blocks + 64); /* the holes stay holes (a little slack for the fs) */
        fd = openat(dfd, "copy.img", O_RDONLY | O_CLOEXEC);
        char buf[8] = {};
        CHECK(pread(fd, buf, 5, 0) == 5 && memcmp(buf, "first", 5) == 0);
        CHECK(pread(fd, buf, 6, 7 << 20) == 6 && memcmp(buf, "middle", 6) == 0);
        CHECK(pread(fd, buf, 3, (16 << 20) - 3) == 3 && memcmp(buf, "end", 3) == 0);
        CHECK(pread(fd, buf, 4, 1 << 20) == 4 && memcmp(buf, "\0\0\0\0", 4) == 0);
        close(fd);

        /* an existing target is not overwritten; a missing or odd template makes nothing */
        CHECK_INT(disk_image_copy(src, dfd, "copy.img"), -EEXIST);
        CHECK_INT(disk_image_copy("/nonexistent.img", dfd, "other.img"), -ENOENT);
        CHECK_INT(disk_image_copy(dir, dfd, "other.img"), -EBADF);
        CHECK(faccessat(dfd, "other.img", F_OK, 0) < 0);
        /* an empty template: an empty copy */
        snprintf(src, sizeof(src), "%s/empty.img", dir);
        fd = open(src, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        close(fd);
        snprintf(name, sizeof(name), "empty-copy.img");
        CHECK_INT(disk_image_copy(src, dfd, name), 0);
        CHECK(fstatat(dfd, name, &b, 0) == 0 && b.st_size == 0);
        close(dfd);
}

static void test_populate(void) {
        char root[256], p[300];
        struct stat st;

        snprintf(root, sizeof(root), "%s/root", dir);
        CHECK(mkdir(root, 0700) == 0);
        CHECK_INT(disk_image_populate(root, getuid(), getgid()), 0);
        snprintf(p, sizeof(p), "%s/home", root);
        CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700 && st.st_uid == getuid());
        snprintf(p, sizeof(p), "%s/tmp", root);
        CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 01777);
        snprintf(p, sizeof(p), "%s/var-tmp", root);
        CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 01777);
        /* twice: the directories exist, which is an error (a fresh image has none) */
        CHECK_INT(disk_image_populate(root, getuid(), getgid()), -EEXIST);
        CHECK_INT(disk_image_populate("/nonexistent", getuid(), getgid()), -ENOENT);
}

/* Issue 26: a snapshot's files given to a fork's uid. Giving files away needs root: as anyone else only
 * the walk over one's own files (from == to) is checked. */
static void test_reown(void) {
        char root[256], p[400];
        struct stat st;
        uid_t from = geteuid() == 0 ? 70001 : getuid(), to = geteuid() == 0 ? 70002 : getuid();

        snprintf(root, sizeof(root), "%s/reown", dir);
        CHECK(mkdir(root, 0755) == 0);
        const char *dirs[] = { "home", "home/a", "home/a/b", "home/sg", "tmp" };
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
                CHECK(mkdir(p, 0755) == 0);
        }
        snprintf(p, sizeof(p), "%s/home/sg", root);
        CHECK(chmod(p, 02775) == 0);
        const char *files[] = { "home/f", "home/a/b/deep", "tmp/t" };
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                snprintf(p, sizeof(p), "%s/%s", root, files[i]);
                int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0640);
                CHECK(fd >= 0);
                close(fd);
        }
        snprintf(p, sizeof(p), "%s/home/link", root);
        CHECK(symlink("/etc/passwd", p) == 0);
        if (geteuid() != 0) {
                CHECK_INT(disk_image_reown(root, from, to), 0);
                printf("SKIP: reown: giving files to another uid needs root\n");
                return;
        }
        /* everything the source's, but one file of someone else's, which stays theirs */
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
                CHECK(lchown(p, from, from) == 0);
        }
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                snprintf(p, sizeof(p), "%s/%s", root, files[i]);
                CHECK(lchown(p, from, i == 2 ? 99 : from) == 0);
        }
        snprintf(p, sizeof(p), "%s/home/link", root);
        CHECK(lchown(p, from, from) == 0);
        snprintf(p, sizeof(p), "%s/home/other", root);
        int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
        CHECK(fd >= 0 && fchown(fd, 99, 99) == 0);
        close(fd);
        CHECK(lchown(root, from, from) == 0);
        snprintf(p, sizeof(p), "%s/home/sg", root);
        CHECK(chmod(p, 02775) == 0); /* chown cleared it */

        CHECK_INT(disk_image_reown(root, from, to), 0);

        CHECK(lstat(root, &st) == 0 && st.st_uid == to && st.st_gid == to);
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
                CHECK(lstat(p, &st) == 0 && st.st_uid == to && st.st_gid == to);
        }
        snprintf(p, sizeof(p), "%s/home/sg", root);
        CHECK(lstat(p, &st) == 0 && (st.st_mode & 07777) == 02775);
        snprintf(p, sizeof(p), "%s/home/a/b/deep", root);
        CHECK(lstat(p, &st) == 0 && st.st_uid == to && st.st_gid == to && (st.st_mode & 0777) == 0640);
        snprintf(p, sizeof(p), "%s/tmp/t", root); /* its group was someone else's: kept */
        CHECK(lstat(p, &st) == 0 && st.st_uid == to && st.st_gid == 99);
        snprintf(p, sizeof(p), "%s/home/other", root);
        CHECK(lstat(p, &st) == 0 && st.st_uid == 99 && st.st_gid == 99);
        /* the link itself, not what it points at */
        snprintf(p, sizeof(p), "%s/home/link", root);
        CHECK(lstat(p, &st) == 0 && S_ISLNK(st.st_mode) && st.st_uid == to);
        CHECK(stat("/etc/passwd", &st) == 0 && st.st_uid == 0);

        /* deeper than the walk goes: refused, not followed */
        char deep[sizeof(root) + 3 * (DISK_REOWN_DEPTH_MAX + 1)];
        int levels = 0;
        snprintf(deep, sizeof(deep), "%s", root);
        while (levels < DISK_REOWN_DEPTH_MAX + 1) {
                strcat(deep, "/d");
                if (mkdir(deep, 0755) < 0)
                        break;
                levels++;
        }
        CHECK_INT(levels, DISK_REOWN_DEPTH_MAX + 1);
        CHECK_INT(disk_image_reown(root, to, from), -ELOOP);
        CHECK_INT(disk_image_reown("/nonexistent", from, to), -ENOENT);
}

int main(void) {
        test_mkdtemp(dir);
        test_template();
        test_copy();
        test_populate();
        test_reown();
        test_rm_rf(dir);
        return test_finish("test-disk-image");
}
