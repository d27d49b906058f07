/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests image-store.c on a scratch store: names, metadata, listing, commit and removal, the start-up clean-up,
 * and import hygiene on trees the test makes (owners only where it runs as root). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "image-store.h"
#include "macro.h"
#include "test-util.h"

static char dir[] = "/tmp/test-image-store.XXXXXX";

static void touch(const char *path, mode_t mode) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        CHECK(fd >= 0);
        if (fd >= 0) {
                CHECK(write(fd, "data", 4) == 4);
                CHECK(fchmod(fd, mode) == 0);
                close(fd);
        }
}

static void test_names(void) {
        CHECK(image_name_is_valid("py312"));
        CHECK(image_name_is_valid("node-20.1_x"));
        CHECK(!image_name_is_valid("host"));
        CHECK(!image_name_is_valid(""));
        CHECK(!image_name_is_valid(NULL));
        CHECK(!image_name_is_valid(".hidden"));
        CHECK(!image_name_is_valid("-x"));
        CHECK(!image_name_is_valid("a/b"));
        CHECK(!image_name_is_valid("../x"));
        CHECK(!image_name_is_valid("a b"));
        CHECK(image_name_is_valid("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")); /* 64 */
        CHECK(!image_name_is_valid("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
        CHECK(image_id_is_kept(0) && image_id_is_kept(42) && image_id_is_kept(999) && image_id_is_kept(65534));
        CHECK(!image_id_is_kept(1000) && !image_id_is_kept(65533) && !image_id_is_kept(1879048192));
}

static void test_store(void) {
        char images[200], job[256], path[512];
        _cleanup_strv_free_ char **l = NULL;
        ImageInfo i = { .created_at = 1234, .size = 5678, .devices_dropped = 1, .setid_stripped = 2,
                        .owners_reset = 3 };

        snprintf(images, sizeof(images), "%s/images", dir);
        CHECK_INT(image_store_startup(images), 0);
        struct stat st;
        CHECK(stat(images, &st) == 0 && (st.st_mode & 0777) == 0700);

        /* a job's directory with a tree and metadata, committed */
        snprintf(job, sizeof(job), "%s/.job_1", images);
        CHECK(mkdir(job, 0700) == 0);
        snprintf(path, sizeof(path), "%s/tree", job);
        CHECK(mkdir(path, 0755) == 0);
        snprintf(i.name, sizeof(i.name), "one");
        i.source = (char *) "tar";
        i.digest = (char *) "sha256:00";
        CHECK_INT(image_info_save(job, &i), 0);
        CHECK(!image_exists(images, "one"));
        CHECK_INT(image_store_commit(images, job, "one"), 0);
        CHECK(image_exists(images, "one"));

        ImageInfo back;
        CHECK_INT(image_info_load(images, "one", &back), 0);
        CHECK_STR(back.name, "one");
        CHECK_STR(back.source, "tar");
        CHECK_STR(back.digest, "sha256:00");
        CHECK_U64(back.created_at, 1234);
        CHECK_U64(back.size, 5678);
        CHECK_U64(back.devices_dropped + back.setid_stripped + back.owners_reset, 6);
        image_info_done(&back);
        CHECK_INT(image_info_load(images, "two", &back), -ENOENT);
        CHECK_INT(image_info_load(images, "../images/one", &back), -ENOENT);

        /* a second commit of the same name is refused; the first image stays */
        CHECK(mkdir(job, 0700) == 0);
        CHECK_INT(image_store_commit(images, job, "one") < 0, 1);

        /* dot-entries are never images, and start-up removes them */
        CHECK_INT(image_store_list(images, &l), 0);
        CHECK(l && l[0] && streq(l[0], "one") && !l[1]);
        CHECK_INT(image_store_startup(images), 0);
        CHECK(access(job, F_OK) < 0 && errno == ENOENT);

        CHECK_INT(image_store_remove(images, "one"), 0);
        CHECK(!image_exists(images, "one"));
        CHECK_INT(image_store_remove(images, "one"), -ENOENT);
        snprintf(path, sizeof(path), "%s/.remove-one", images);
        CHECK(access(path, F_OK) < 0);

        /* JSON */
        _cleanup_free_ char *js = image_info_to_json(&i);
        CHECK(js && strstr(js, "\"name\":\"one\"") && strstr(js, "\"owners_reset\":3"));
}

static void test_hygiene(void) {
        char tree[256], path[512];
        ImageHygiene h;
        struct stat st;

        snprintf(tree, sizeof(tree), "%s/tree", dir);
        CHECK(mkdir(tree, 0700) == 0);
        snprintf(path, sizeof(path), "%s/usr", tree);
        CHECK(mkdir(path, 0755) == 0);
        snprintf(path, sizeof(path), "%s/usr/suid", tree);
        touch(path, 04755);
        snprintf(path, sizeof(path), "%s/usr/sgid", tree);
        touch(path, 02711);
        snprintf(path, sizeof(path), "%s/usr/plain", tree);
        touch(path, 0644);
        snprintf(path, sizeof(path), "%s/proc", tree);
        CHECK(symlink("/", path) == 0);
        snprintf(path, sizeof(path), "%s/etc", tree);
        touch(path, 0644);
        snprintf(path, sizeof(path), "%s/link-out", tree);
        CHECK(symlink("/etc/shadow", path) == 0);
        bool root = geteuid() == 0;
        if (root) {
                snprintf(path, sizeof(path), "%s/usr/owned", tree);
                touch(path, 0600);
                CHECK(chown(path, 1000, 1000) == 0);
                snprintf(path, sizeof(path), "%s/dev-null", tree);
                CHECK(mknod(path, S_IFCHR | 0666, makedev(1, 3)) == 0);
        } else
                printf("SKIP: owners and device nodes: not root\n");

        CHECK_INT(image_tree_sanitize(tree, &h), 0);
        CHECK_U64(h.setid_stripped, root ? 2 : 2);
        snprintf(path, sizeof(path), "%s/usr/suid", tree);
        CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0755);
        snprintf(path, sizeof(path), "%s/usr/sgid", tree);
        CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0711);
        snprintf(path, sizeof(path), "%s/usr/plain", tree);
        CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0644);
        /* mount points are real directories now; links elsewhere are kept */
        static const char *const dirs[] = { "proc", "dev", "tmp", "var", "var/tmp", "home", "etc", "run", "sys" };
        for (size_t k = 0; k < ELEMENTSOF(dirs); k++) {
                snprintf(path, sizeof(path), "%s/%s", tree, dirs[k]);
                CHECK(lstat(path, &st) == 0 && S_ISDIR(st.st_mode));
        }
        snprintf(path, sizeof(path), "%s/tmp", tree);
        CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 01777);
        snprintf(path, sizeof(path), "%s/link-out", tree);
        CHECK(lstat(path, &st) == 0 && S_ISLNK(st.st_mode));
        CHECK(stat(tree, &st) == 0 && (st.st_mode & 07777) == 0755);
        CHECK(h.size > 0);
        if (root) {
                CHECK_U64(h.devices_dropped, 1);
                CHECK_U64(h.owners_reset, 1);
                snprintf(path, sizeof(path), "%s/usr/owned", tree);
                CHECK(stat(path, &st) == 0 && st.st_uid == 0 && st.st_gid == 0);
                snprintf(path, sizeof(path), "%s/dev-null", tree);
                CHECK(lstat(path, &st) < 0 && errno == ENOENT);
        }
}

int main(void) {
        test_mkdtemp(dir);
        test_names();
        test_store();
        if (geteuid() != 0)
                printf("SKIP: hygiene: the tree's root is made root's, which needs root\n");
        else
                test_hygiene();
        test_rm_rf(dir);
        return test_finish("test-image-store");
}
