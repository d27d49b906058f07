/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests image-unpack.c without root: tarballs the test writes itself (ustar headers by hand, so that hostile
 * entries need no tool that would refuse to make them), unpacked into a scratch directory. */
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image-unpack.h"
#include "macro.h"
#include "test-util.h"

static char dir[] = "/tmp/test-image-unpack.XXXXXX";

/* One ustar member: name, type ('0' file, '1' hard link, '2' symlink, '3' char device, '5' directory),
 * link target, mode, data. */
static size_t put_entry(uint8_t *buf, const char *name, char type, const char *link, unsigned mode, const char *data) {
        uint8_t *h = buf;
        size_t size = data ? strlen(data) : 0;
        unsigned sum = 0;

        memset(h, 0, 512);
        snprintf((char *) h, 100, "%s", name);
        snprintf((char *) h + 100, 8, "%07o", mode);
        snprintf((char *) h + 108, 8, "%07o", 0);
        snprintf((char *) h + 116, 8, "%07o", 0);
        snprintf((char *) h + 124, 12, "%011o", (unsigned) (size & 07777777)); /* small test data */
        snprintf((char *) h + 136, 12, "%011o", 0);
        memset(h + 148, ' ', 8);
        h[156] = (uint8_t) type;
        if (link)
                snprintf((char *) h + 157, 100, "%s", link);
        memcpy(h + 257, "ustar\0" "00", 8);
        if (type == '3') {
                snprintf((char *) h + 329, 8, "%07o", 1);
                snprintf((char *) h + 337, 8, "%07o", 3);
        }
        for (size_t i = 0; i < 512; i++)
                sum += h[i];
        snprintf((char *) h + 148, 8, "%06o", sum);
        h[154] = 0;
        h[155] = ' ';
        size_t n = 512;
        if (size) {
                memset(buf + 512, 0, (size + 511) / 512 * 512);
                memcpy(buf + 512, data, size);
                n += (size + 511) / 512 * 512;
        }
        return n;
}

static size_t put_end(uint8_t *buf) {
        memset(buf, 0, 1024);
        return 1024;
}

/* Writes the archive to a file and unpacks it into <dir>/<sub>; returns image_unpack()'s result. */
static int unpack(const uint8_t *tar, size_t n, const char *sub, ImageUnpack *u, char **error) {
        char path[256], target[256];
        snprintf(path, sizeof(path), "%s/in.tar", dir);
        snprintf(target, sizeof(target), "%s/%s", dir, sub);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        CHECK(fd >= 0);
        CHECK(write(fd, tar, n) == (ssize_t) n);
        CHECK(lseek(fd, 0, SEEK_SET) == 0);
        CHECK(mkdir(target, 0755) == 0);
        *u = (ImageUnpack) {};
        int r = image_unpack(fd, target, u, error);
        close(fd);
        CHECK(chdir("/") == 0);
        return r;
}

static void test_paths(void) {
        CHECK_INT(image_entry_path_check("usr/bin/x"), 0);
        CHECK_INT(image_entry_path_check("./usr/bin/x"), 0);
        CHECK_INT(image_entry_path_check("a//b/"), 0);
        CHECK_INT(image_entry_path_check("..."), 0);
        CHECK_INT(image_entry_path_check("a..b"), 0);
        CHECK_INT(image_entry_path_check("../x"), -EPERM);
        CHECK_INT(image_entry_path_check("a/../../x"), -EPERM);
        CHECK_INT(image_entry_path_check("a/.."), -EPERM);
        CHECK_INT(image_entry_path_check("/etc/passwd"), -EPERM);
        CHECK_INT(image_entry_path_check(""), -EINVAL);
}

static void test_good_tree(void) {
        static uint8_t tar[16 * 1024];
        _cleanup_free_ char *error = NULL;
        char path[256], link[64];
        ImageUnpack u;
        struct stat st;
        size_t n = 0;

        n += put_entry(tar + n, "./usr/", '5', NULL, 0755, NULL);
        n += put_entry(tar + n, "./usr/bin/", '5', NULL, 0755, NULL);
        n += put_entry(tar + n, "./usr/bin/tool", '0', NULL, 04755, "#!/bin/sh\n");
        n += put_entry(tar + n, "./usr/bin/alias", '1', "./usr/bin/tool", 0755, NULL);
        n += put_entry(tar + n, "./bin", '2', "usr/bin", 0777, NULL);
        n += put_entry(tar + n, "./shadowlink", '2', "/etc/shadow", 0777, NULL);
        n += put_entry(tar + n, "./mem", '3', NULL, 0600, NULL);
        n += put_end(tar + n);
        CHECK_INT(unpack(tar, n, "good", &u, &error), 0);
        CHECK(!error);
        CHECK_U64(u.devices_dropped, 1);
        CHECK_U64(u.setid_stripped, 1);
        snprintf(path, sizeof(path), "%s/good/usr/bin/tool", dir);
        CHECK(stat(path, &st) == 0);
        CHECK_INT((int) (st.st_mode & 07777), 0755);
        CHECK_U64(st.st_nlink, 2); /* the hard link */
        snprintf(path, sizeof(path), "%s/good/bin", dir);
        ssize_t k = readlink(path, link, sizeof(link) - 1);
        CHECK(k == 7);
        link[MAX(k, 0)] = 0;
        CHECK_STR(link, "usr/bin");
        snprintf(path, sizeof(path), "%s/good/shadowlink", dir);
        CHECK(lstat(path, &st) == 0 && S_ISLNK(st.st_mode));
        snprintf(path, sizeof(path), "%s/good/mem", dir);
        CHECK(lstat(path, &st) < 0 && errno == ENOENT);

        /* the digest is the stream's sha256 */
        unsigned char sum[32];
        char want[IMAGE_DIGEST_SIZE] = "sha256:";
        CHECK(gnutls_hash_fast(GNUTLS_DIG_SHA256, tar, n, sum) == 0);
        for (size_t i = 0; i < 32; i++)
                snprintf(want + 7 + 2 * i, 3, "%02x", sum[i]);
        CHECK_STR(u.digest, want);
}

static void refused(const char *sub, const char *name, char type, const char *link, const char *data,
                    const char *outside) {
        static uint8_t tar[8192];
        _cleanup_free_ char *error = NULL;
        char path[256];
        ImageUnpack u;
        size_t n = 0;

        n += put_entry(tar + n, "./ok", '0', NULL, 0644, "fine\n");
        if (streq(sub, "through-link"))
                n += put_entry(tar + n, "./out", '2', NULL == link ? "/tmp" : link, 0777, NULL);
        n += put_entry(tar + n, name, type, streq(sub, "through-link") ? NULL : link, 0644, data);
        n += put_end(tar + n);
        CHECK_INT(unpack(tar, n, sub, &u, &error), -EPERM);
        CHECK(error && strstr(error, "refused"));
        if (error)
                printf("  %s: %s\n", sub, error);
        if (outside) {
                snprintf(path, sizeof(path), "%s/%s", dir, outside);
                CHECK(access(path, F_OK) < 0 && errno == ENOENT);
        }
}

static void test_refused(void) {
        char outdir[256], link[300];

        refused("dotdot", "../escaped", '0', NULL, "x", "escaped");
        refused("dotdot-inside", "./a/../../escaped2", '0', NULL, "x", "escaped2");
        refused("absolute", "/tmp/test-image-unpack-absolute", '0', NULL, "x", NULL);
        CHECK(access("/tmp/test-image-unpack-absolute", F_OK) < 0);
        refused("hardlink-out", "./pw", '1', "../../etc/passwd", NULL, NULL);
        refused("hardlink-abs", "./pw", '1', "/etc/passwd", NULL, NULL);
        /* a symlink to a directory outside, then a file through it */
        snprintf(outdir, sizeof(outdir), "%s/outside", dir);
        CHECK(mkdir(outdir, 0755) == 0);
        snprintf(link, sizeof(link), "%s", outdir);
        refused("through-link", "./out/escaped3", '0', link, "x", "outside/escaped3");
}

static void test_garbage(void) {
        static uint8_t junk[4096], tar[4096];
        _cleanup_free_ char *e1 = NULL, *e2 = NULL;
        ImageUnpack u;

        for (size_t i = 0; i < sizeof(junk); i++)
                junk[i] = (uint8_t) (i * 37 + 11);
        CHECK(unpack(junk, sizeof(junk), "junk", &u, &e1) < 0);
        CHECK(e1 != NULL);
        /* truncated in a file's data */
        size_t n = put_entry(tar, "./big", '0', NULL, 0644, "0123456789abcdef");
        CHECK(unpack(tar, n - 500, "truncated", &u, &e2) < 0);
        CHECK(e2 != NULL);
}

int main(void) {
        test_mkdtemp(dir);
        test_paths();
        test_good_tree();
        test_refused();
        test_garbage();
        test_rm_rf(dir);
        return test_finish("test-image-unpack");
}
