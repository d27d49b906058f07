/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The image store (issue 24): read-only root trees under <state>/images/, each with its metadata. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Layout: <state>/images/<name>/tree (the root file system) and <name>/image.json (its metadata). A job
 * works in <state>/images/.job-<id>/ and, once done, renames it to <name>: an image is there whole or not
 * at all. Removal renames <name> to .remove-<name> first. Entries starting with '.' are never images;
 * image_store_startup() removes them (what a killed sandboxd left half made). */
#define IMAGE_TREE_NAME "tree"
#define IMAGE_META_NAME "image.json"
#define IMAGE_NAME_MAX 64
#define IMAGE_HOST "host" /* Image=host: the host's own tree (not an image of the store) */

typedef struct ImageInfo {
        char name[IMAGE_NAME_MAX + 1];
        char *source;        /* what it was made from: "tar", "oci-archive:<tag>", "docker-archive",
                              * "mmdebstrap:<suite>/<variant>" */
        uint64_t created_at; /* µs since the epoch */
        uint64_t size;       /* bytes the tree takes on disk */
        char *digest;        /* "sha256:<hex>" of the stream it was imported from */
        /* What import hygiene changed (docs/images.md): */
        uint64_t devices_dropped, setid_stripped, owners_reset;
} ImageInfo;

/* 1-64 characters of A-Z a-z 0-9 . _ -, not starting with . or -, and not "host". */
bool image_name_is_valid(const char *name);

void image_info_done(ImageInfo *i);

/* Reads <images>/<name>/image.json. -ENOENT: no such image; -EBADMSG: unreadable metadata. */
int image_info_load(const char *images_dir, const char *name, ImageInfo *ret);
/* Writes dir/image.json (dir: a job's directory, before it is renamed). */
int image_info_save(const char *dir, const ImageInfo *i);
/* The metadata as JSON text (malloc'd), the shape image.json and the CLI's --json use. */
char *image_info_to_json(const ImageInfo *i);

/* The images' names, sorted (a NULL-terminated strv, malloc'd). */
int image_store_list(const char *images_dir, char ***ret);

/* Whether <images>/<name>/tree is there. */
bool image_exists(const char *images_dir, const char *name);

/* Creates images_dir (0700) and removes what a previous run left half made (entries starting with '.'). */
int image_store_startup(const char *images_dir);

/* Removes an image: renamed out of the way first (so it is gone from the list at once), then deleted.
 * -ENOENT: no such image. */
int image_store_remove(const char *images_dir, const char *name);

/* Moves a finished job's directory into place as <name>. -EEXIST: an image of that name exists. */
int image_store_commit(const char *images_dir, const char *job_dir, const char *name);

/* --- import hygiene -------------------------------------------------------------------------------
 *
 * Run on every tree before it becomes an image, by whatever made it (libarchive, umoci, mmdebstrap):
 * device nodes and sockets are removed; setuid and setgid bits of files are cleared; owners and groups
 * other than the system ids (0..999) and nobody (65534) become root's. Nothing is followed: symlinks are
 * looked at, never through. Then the mount points a sandbox needs (proc dev tmp var/tmp home etc run sys)
 * are made real directories, replacing whatever else had their name. */
typedef struct ImageHygiene {
        uint64_t devices_dropped, setid_stripped, owners_reset;
        uint64_t size; /* bytes taken on disk (st_blocks) */
} ImageHygiene;

int image_tree_sanitize(const char *tree, ImageHygiene *ret);

/* Whether an id of an image's file may be kept as it is: a system id (0..999) or nobody (65534). */
bool image_id_is_kept(uint32_t id);
