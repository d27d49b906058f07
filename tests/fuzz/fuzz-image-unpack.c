/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes image_unpack() (issue 24): any bytes as a (possibly compressed) tar stream, unpacked into a scratch
 * directory inside a sandbox directory of its own. Whatever the input, nothing may appear beside the
 * scratch directory, and a failure must come with a message. */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "image-unpack.h"
#include "macro.h"

static char base[] = "/tmp/fuzz-image-unpack.XXXXXX";
static bool ready;

static int remove_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
        (void) st, (void) flag, (void) ftw;
        (void) chmod(p, 0700); /* a read-only directory the input made */
        return remove(p);
}

static size_t entries(const char *path) {
        DIR *d = opendir(path);
        struct dirent *de;
        size_t n = 0;

        FUZZ_ASSERT(d);
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char scratch[sizeof(base) + 16], cwd[4096];
        ImageUnpack u = {};
        char *error = NULL;

        if (!ready) {
                FUZZ_ASSERT(mkdtemp(base));
                ready = true;
        }
        FUZZ_ASSERT(getcwd(cwd, sizeof(cwd)));
        snprintf(scratch, sizeof(scratch), "%s/tree", base);
        FUZZ_ASSERT(mkdir(scratch, 0755) == 0);
        int fd = memfd_create("fuzz-image-unpack", MFD_CLOEXEC);
        FUZZ_ASSERT(fd >= 0);
        FUZZ_ASSERT(write(fd, data, size) == (ssize_t) size);
        FUZZ_ASSERT(lseek(fd, 0, SEEK_SET) == 0);
        int r = image_unpack(fd, scratch, &u, &error);
        FUZZ_ASSERT(r >= 0 || error);
        close(fd);
        free(error);
        FUZZ_ASSERT(chdir(cwd) == 0);
        /* only the scratch directory, whatever the archive held */
        FUZZ_ASSERT(entries(base) == 1);
        (void) nftw(scratch, remove_one, 16, FTW_DEPTH | FTW_PHYS);
        return 0;
}
