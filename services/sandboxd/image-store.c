/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The image store (issue 24): read-only root trees under <state>/images/, each with its metadata.
 *
 * Plain directories and a JSON file per image rather than rows in sandboxd's SQLite store: the tree and
 * its metadata then appear together, by one rename of the job's directory, and a sandboxd killed in the
 * middle of a build leaves only a dot-directory that the next start removes (docs/images.md). */
#include "image-store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io-util.h"
#include "macro.h"
#include "namespace.h"
#include "sandbox-id.h"

bool image_name_is_valid(const char *name) {
        /* The rules of sandbox and type names (sandbox-id.h), which Image= is checked by too. */
        return name_is_valid(name) && !streq(name, IMAGE_HOST);
}

bool image_id_is_kept(uint32_t id) {
        return id < 1000 || id == 65534;
}

void image_info_done(ImageInfo *i) {
        if (!i)
                return;
        free(i->source);
        free(i->digest);
        i->source = i->digest = NULL;
}

char *image_info_to_json(const ImageInfo *i) {
        json_object *o = json_object_new_object();
        char *s;

        if (!o)
                return NULL;
        json_object_object_add(o, "name", json_object_new_string(i->name));
        json_object_object_add(o, "source", json_object_new_string(strempty(i->source)));
        json_object_object_add(o, "created_at", json_object_new_uint64(i->created_at));
        json_object_object_add(o, "size", json_object_new_uint64(i->size));
        json_object_object_add(o, "digest", json_object_new_string(strempty(i->digest)));
        json_object_object_add(o, "devices_dropped", json_object_new_uint64(i->devices_dropped));
        json_object_object_add(o, "setid_stripped", json_object_new_uint64(i->setid_stripped));
        json_object_object_add(o, "owners_reset", json_object_new_uint64(i->owners_reset));
        s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
        return s;
}

int image_info_save(const char *dir, const ImageInfo *i) {
        _cleanup_free_ char *text = image_info_to_json(i);
        char path[4096], tmp[4096];

        if (!text)
                return -ENOMEM;
        snprintf(path, sizeof(path), "%s/" IMAGE_META_NAME, dir);
        snprintf(tmp, sizeof(tmp), "%s/." IMAGE_META_NAME ".new", dir);
        _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        size_t n = strlen(text);
        if (write(fd, text, n) != (ssize_t) n || fsync(fd) < 0) {
                int r = errno > 0 ? -errno : -EIO;
                (void) unlink(tmp);
                return r;
        }
        if (rename(tmp, path) < 0) {
                int r = -errno;
                (void) unlink(tmp);
                return r;
        }
        return 0;
}

static uint64_t get_u64(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) ? json_object_get_uint64(v) : 0;
}

int image_info_load(const char *images_dir, const char *name, ImageInfo *ret) {
        char path[4096], buf[8192];
        json_object *o, *v;
        int r;

        if (!image_name_is_valid(name))
                return -ENOENT;
        snprintf(path, sizeof(path), "%s/%s/" IMAGE_META_NAME, images_dir, name);
        r = read_small_file(path, buf, sizeof(buf));
        if (r < 0)
                return r;
        o = json_tokener_parse(buf);
        if (!o || !json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                return -EBADMSG;
        }
        ImageInfo i = {};
        snprintf(i.name, sizeof(i.name), "%s", name);
        i.source = strdup(json_object_object_get_ex(o, "source", &v) ? strempty(json_object_get_string(v)) : "");
        i.digest = strdup(json_object_object_get_ex(o, "digest", &v) ? strempty(json_object_get_string(v)) : "");
        i.created_at = get_u64(o, "created_at");
        i.size = get_u64(o, "size");
        i.devices_dropped = get_u64(o, "devices_dropped");
        i.setid_stripped = get_u64(o, "setid_stripped");
        i.owners_reset = get_u64(o, "owners_reset");
        json_object_put(o);
        if (!i.source || !i.digest) {
                image_info_done(&i);
                return -ENOMEM;
        }
        *ret = i;
        return 0;
}

bool image_exists(const char *images_dir, const char *name) {
        char path[4096];
        struct stat st;

        if (!image_name_is_valid(name))
                return false;
        snprintf(path, sizeof(path), "%s/%s/" IMAGE_TREE_NAME, images_dir, name);
        return lstat(path, &st) >= 0 && S_ISDIR(st.st_mode);
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int image_store_list(const char *images_dir, char ***ret) {
        _cleanup_(closedirp) DIR *d = opendir(images_dir);
        _cleanup_strv_free_ char **l = NULL;
        size_t n = 0;
        struct dirent *de;

        if (!d && errno != ENOENT)
                return -errno;
        l = calloc(1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        while (d && (de = readdir(d))) {
                if (!image_exists(images_dir, de->d_name))
                        continue;
                char **nl = realloc(l, (n + 2) * sizeof(char *));
                if (!nl)
                        return -ENOMEM;
                l = nl;
                l[n] = strdup(de->d_name);
                l[n + 1] = NULL;
                if (!l[n])
                        return -ENOMEM;
                n++;
        }
        qsort(l, n, sizeof(char *), cmp_str);
        *ret = TAKE_PTR(l);
        return 0;
}

int image_store_startup(const char *images_dir) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r = 0;

        if (mkdir(images_dir, 0700) < 0 && errno != EEXIST)
                return -errno;
        d = opendir(images_dir);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                char path[4096];
                if (de->d_name[0] != '.' || streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                snprintf(path, sizeof(path), "%s/%s", images_dir, de->d_name);
                int q = namespace_remove_workspace(path);
                if (q < 0 && r == 0)
                        r = q;
        }
        return r;
}

int image_store_remove(const char *images_dir, const char *name) {
        char from[4096], to[4096];

        if (!image_exists(images_dir, name))
                return -ENOENT;
        snprintf(from, sizeof(from), "%s/%s", images_dir, name);
        snprintf(to, sizeof(to), "%s/.remove-%s", images_dir, name);
        (void) namespace_remove_workspace(to); /* an earlier removal's leftovers */
        if (rename(from, to) < 0)
                return -errno;
        return namespace_remove_workspace(to);
}

int image_store_commit(const char *images_dir, const char *job_dir, const char *name) {
        char to[4096];

        snprintf(to, sizeof(to), "%s/%s", images_dir, name);
        /* RENAME_NOREPLACE: an import of the same name that finished first keeps its image. */
        if (renameat2(AT_FDCWD, job_dir, AT_FDCWD, to, RENAME_NOREPLACE) < 0)
                return -errno;
        return 0;
}

/* --- import hygiene ------------------------------------------------------------------------------- */

static int sanitize_at(int dfd, ImageHygiene *h, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;

        if (depth > 256)
                return -ELOOP;
        d = fdopendir(dfd);
        if (!d) {
                safe_close(dfd);
                return -errno;
        }
        while ((errno = 0, de = readdir(d))) {
                struct stat st;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode)) {
                        if (unlinkat(dirfd(d), de->d_name, 0) < 0)
                                return -errno;
                        h->devices_dropped++;
                        continue;
                }
                if (!image_id_is_kept(st.st_uid) || !image_id_is_kept(st.st_gid)) {
                        uid_t u = image_id_is_kept(st.st_uid) ? st.st_uid : 0;
                        gid_t g = image_id_is_kept(st.st_gid) ? st.st_gid : 0;
                        if (fchownat(dirfd(d), de->d_name, u, g, AT_SYMLINK_NOFOLLOW) < 0)
                                return -errno;
                        h->owners_reset++;
                        /* chown clears setuid/setgid of a regular file by itself; look again */
                        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                return -errno;
                }
                if (S_ISREG(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID))) {
                        if (fchmodat(dirfd(d), de->d_name, st.st_mode & 07777 & ~(mode_t) (S_ISUID | S_ISGID), 0) < 0)
                                return -errno;
                        h->setid_stripped++;
                }
                h->size += (uint64_t) st.st_blocks * 512;
                if (S_ISDIR(st.st_mode)) {
                        int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub < 0)
                                return -errno;
                        int r = sanitize_at(sub, h, depth + 1);
                        if (r < 0)
                                return r;
                }
        }
        return errno > 0 ? -errno : 0;
}

int image_tree_sanitize(const char *tree, ImageHygiene *ret) {
        static const struct {
                const char *path;
                mode_t mode;
        } mountpoints[] = {
                { "proc", 0555 }, { "dev", 0755 }, { "tmp", 01777 }, { "var", 0755 }, { "var/tmp", 01777 },
                { "home", 0755 }, { "etc", 0755 }, { "run", 0755 }, { "sys", 0555 },
        };
        _cleanup_close_ int root = open(tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        ImageHygiene h = {};
        struct stat st;
        int r;

        if (root < 0)
                return -errno;
        /* The tree's root itself: root's, 0755, whatever the archive said. */
        if (fchown(root, 0, 0) < 0 || fchmod(root, 0755) < 0)
                return -errno;
        r = sanitize_at(fcntl(root, F_DUPFD_CLOEXEC, 3), &h, 0);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ELEMENTSOF(mountpoints); i++) {
                const char *p = mountpoints[i].path;
                if (fstatat(root, p, &st, AT_SYMLINK_NOFOLLOW) >= 0) {
                        if (S_ISDIR(st.st_mode))
                                continue;
                        /* A symlink or file where sandboxd mounts: it would lead the mount elsewhere. */
                        if (unlinkat(root, p, 0) < 0)
                                return -errno;
                } else if (errno != ENOENT)
                        return -errno;
                if (mkdirat(root, p, 0700) < 0 || fchmodat(root, p, mountpoints[i].mode, 0) < 0)
                        return -errno;
        }
        if (ret)
                *ret = h;
        return 0;
}
