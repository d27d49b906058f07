/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Corpus replay without libFuzzer: runs LLVMFuzzerTestOneInput over every file of the directories (or the
 * files) given, so each fuzzer's corpus is an ordinary test of the gcc (and ASan+UBSan) build. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Reads path into a buffer of exactly its size, so that ASan catches a target reading past the input. */
static int replay_file(const char *path) {
        struct stat st;
        uint8_t *buf;
        size_t done = 0;
        int fd;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0) {
                fprintf(stderr, "%s: %s\n", path, strerror(errno));
                if (fd >= 0)
                        close(fd);
                return -errno;
        }
        buf = malloc(st.st_size > 0 ? (size_t) st.st_size : 1);
        if (!buf) {
                close(fd);
                return -ENOMEM;
        }
        while (done < (size_t) st.st_size) {
                ssize_t n = read(fd, buf + done, (size_t) st.st_size - done);
                if (n <= 0) {
                        fprintf(stderr, "%s: short read\n", path);
                        free(buf);
                        close(fd);
                        return -EIO;
                }
                done += (size_t) n;
        }
        close(fd);
        fprintf(stderr, "replaying %s (%zu bytes)\n", path, done);
        LLVMFuzzerTestOneInput(buf, done);
        free(buf);
        return 0;
}

static int replay_dir(const char *dir, unsigned *n_files) {
        struct dirent **names;
        int n, r = 0;

        n = scandir(dir, &names, NULL, alphasort);
        if (n < 0) {
                fprintf(stderr, "%s: %s\n", dir, strerror(errno));
                return -errno;
        }
        for (int i = 0; i < n; i++) {
                char path[4096];
                struct stat st;

                snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
                if (names[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                        if (replay_file(path) < 0)
                                r = -EIO;
                        (*n_files)++;
                }
                free(names[i]);
        }
        free(names);
        return r;
}

int main(int argc, char *argv[]) {
        unsigned n_files = 0;
        int r = 0;

        if (argc < 2) {
                fprintf(stderr, "usage: %s CORPUS-DIR|FILE...\n", argv[0]);
                return 2;
        }
        for (int i = 1; i < argc; i++) {
                struct stat st;

                if (stat(argv[i], &st) < 0) {
                        fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
                        r = -ENOENT;
                } else if (S_ISDIR(st.st_mode)) {
                        if (replay_dir(argv[i], &n_files) < 0)
                                r = -EIO;
                } else {
                        if (replay_file(argv[i]) < 0)
                                r = -EIO;
                        n_files++;
                }
        }
        /* An empty corpus would make the test pass without testing anything. */
        if (n_files == 0) {
                fprintf(stderr, "no corpus files found\n");
                return 1;
        }
        fprintf(stderr, "%u inputs replayed\n", n_files);
        return r < 0 ? 1 : 0;
}
