/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unpacking a tar stream into a directory for the image store, with libarchive, refusing what could
 * reach outside it.
 *
 * libarchive's own guards do the work on disk (ARCHIVE_EXTRACT_SECURE_*: no "..", no absolute paths, no
 * writing through a symlink); each entry is looked at first as well, so that a hostile archive fails as a
 * whole with a message naming the entry, rather than leaving a tree with holes. */
#include "image-unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdarg.h>
#include <gnutls/crypto.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"

int image_entry_path_check(const char *path) {
        if (isempty(path))
                return -EINVAL;
        if (path[0] == '/')
                return -EPERM;
        for (const char *p = path; *p;) {
                size_t n = strcspn(p, "/");
                if (n == 2 && p[0] == '.' && p[1] == '.')
                        return -EPERM;
                p += n;
                while (*p == '/')
                        p++;
        }
        return 0;
}

typedef struct Reader {
        int fd;
        gnutls_hash_hd_t hash;
        uint64_t done, total, reported;
        ImageUnpack *u;
        char buf[64 * 1024];
} Reader;

static la_ssize_t reader_read(struct archive *a, void *userdata, const void **ret) {
        Reader *rd = userdata;
        ssize_t n;

        do
                n = read(rd->fd, rd->buf, sizeof(rd->buf));
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                archive_set_error(a, errno, "read: %s", strerror(errno));
                return -1;
        }
        if (n > 0)
                (void) gnutls_hash(rd->hash, rd->buf, (size_t) n);
        rd->done += (uint64_t) n;
        if (rd->u->progress && (rd->done - rd->reported >= (4u << 20) || n == 0)) {
                rd->reported = rd->done;
                rd->u->progress(rd->done, rd->total, rd->u->userdata);
        }
        *ret = rd->buf;
        return n;
}

static int fail(char **ret_error, int r, const char *fmt, ...) _printf_(3, 4);
static int fail(char **ret_error, int r, const char *fmt, ...) {
        va_list ap;
        char *m = NULL;

        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        if (ret_error) {
                free(*ret_error);
                *ret_error = m;
        } else
                free(m);
        return r;
}

int image_unpack(int fd, const char *dir, ImageUnpack *u, char **ret_error) {
        struct archive *in = NULL, *out = NULL;
        struct archive_entry *e;
        Reader *rd;
        struct stat st;
        unsigned char sum[32];
        int r;

        rd = calloc(1, sizeof(Reader));
        if (!rd)
                return -ENOMEM;
        rd->fd = fd;
        rd->u = u;
        if (fstat(fd, &st) >= 0 && S_ISREG(st.st_mode))
                rd->total = (uint64_t) st.st_size;
        if (gnutls_hash_init(&rd->hash, GNUTLS_DIG_SHA256) < 0) {
                free(rd);
                return -ENOMEM;
        }
        if (chdir(dir) < 0) {
                r = fail(ret_error, -errno, "cannot enter %s: %s", dir, strerror(errno));
                goto finish;
        }

        in = archive_read_new();
        out = archive_write_disk_new();
        if (!in || !out) {
                r = -ENOMEM;
                goto finish;
        }
        archive_read_support_filter_all(in);
        archive_read_support_format_tar(in);
        archive_read_support_format_gnutar(in);
        /* Owners and modes as the archive says (sanitised after), timestamps kept; no xattrs, no ACLs,
         * no file flags: file capabilities (security.capability) do not come along. */
        archive_write_disk_set_options(out, ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME |
                                                    ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                                    ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                                    ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
        archive_write_disk_set_standard_lookup(out);
        if (archive_read_open(in, rd, NULL, reader_read, NULL) != ARCHIVE_OK) {
                r = fail(ret_error, -EBADMSG, "not an archive: %s", archive_error_string(in));
                goto finish;
        }
        for (;;) {
                r = archive_read_next_header(in, &e);
                if (r == ARCHIVE_EOF)
                        break;
                if (r < ARCHIVE_WARN) {
                        r = fail(ret_error, -EBADMSG, "bad archive: %s", archive_error_string(in));
                        goto finish;
                }
                const char *path = archive_entry_pathname(e), *link = archive_entry_hardlink(e);
                if (!path || image_entry_path_check(path) < 0) {
                        r = fail(ret_error, -EPERM, "refused: entry '%s' is absolute or has '..' in its path",
                                 strna(path));
                        goto finish;
                }
                if (link && image_entry_path_check(link) < 0) {
                        r = fail(ret_error, -EPERM, "refused: hard link '%s' points outside the tree ('%s')", path,
                                 link);
                        goto finish;
                }
                mode_t type = archive_entry_filetype(e);
                if (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK) {
                        u->devices_dropped++;
                        continue;
                }
                mode_t mode = archive_entry_perm(e);
                if (type == AE_IFREG && (mode & (S_ISUID | S_ISGID))) {
                        archive_entry_set_perm(e, mode & ~(mode_t) (S_ISUID | S_ISGID));
                        u->setid_stripped++;
                }
                archive_entry_xattr_clear(e);
                archive_entry_acl_clear(e);
                archive_entry_set_fflags(e, 0, 0);
                r = archive_write_header(out, e);
                if (r < ARCHIVE_WARN) {
                        r = fail(ret_error, -EPERM, "refused: entry '%s': %s", path, archive_error_string(out));
                        goto finish;
                }
                if (archive_entry_size(e) > 0) {
                        const void *buf;
                        size_t size;
                        la_int64_t off;
                        while ((r = archive_read_data_block(in, &buf, &size, &off)) == ARCHIVE_OK)
                                if (archive_write_data_block(out, buf, size, off) < ARCHIVE_WARN) {
                                        int err = archive_errno(out);
                                        r = fail(ret_error, err == ENOSPC ? -ENOSPC : -EIO, "writing '%s': %s",
                                                 path, archive_error_string(out));
                                        goto finish;
                                }
                        if (r != ARCHIVE_EOF) {
                                r = fail(ret_error, -EBADMSG, "reading '%s': %s", path, archive_error_string(in));
                                goto finish;
                        }
                }
                if (archive_write_finish_entry(out) < ARCHIVE_WARN) {
                        int err = archive_errno(out);
                        r = fail(ret_error, err == ENOSPC ? -ENOSPC : -EIO, "writing '%s': %s", path,
                                 archive_error_string(out));
                        goto finish;
                }
                u->entries++;
        }
        /* Directories' modes and times are set last, by close. */
        if (archive_write_close(out) != ARCHIVE_OK) {
                r = fail(ret_error, -EIO, "finishing the tree: %s", archive_error_string(out));
                goto finish;
        }
        /* Drain what follows the archive's end so that the digest covers the whole stream. */
        const void *ignored;
        while (reader_read(in, rd, &ignored) > 0)
                ;
        r = 0;
finish:
        if (in)
                archive_read_free(in);
        if (out)
                archive_write_free(out);
        gnutls_hash_deinit(rd->hash, sum);
        if (r >= 0) {
                memcpy(u->digest, "sha256:", 7);
                for (size_t i = 0; i < sizeof(sum); i++)
                        snprintf(u->digest + 7 + 2 * i, 3, "%02x", sum[i]);
        }
        free(rd);
        return r;
}
