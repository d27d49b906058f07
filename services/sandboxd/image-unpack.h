/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unpacking a tar stream into a directory for the image store, with libarchive, refusing what could
 * reach outside it. */
#pragma once

#include <stdint.h>

#define IMAGE_DIGEST_SIZE (7 + 64 + 1) /* "sha256:" + hex + NUL */

typedef struct ImageUnpack {
        /* called now and then: bytes of the stream read so far, and its size (0: not known) */
        void (*progress)(uint64_t done, uint64_t total, void *userdata);
        void *userdata;
        uint64_t entries;          /* out: entries written */
        uint64_t devices_dropped;  /* out: device nodes and sockets not written */
        uint64_t setid_stripped;   /* out: files whose setuid or setgid bit was not written */
        char digest[IMAGE_DIGEST_SIZE]; /* out: sha256 of the stream as read */
} ImageUnpack;

/* Whether an archive entry's path (or a hard link's target) may be unpacked: relative, and without a
 * ".." component. "./" prefixes and empty components are fine. */
int image_entry_path_check(const char *path);

/* Reads a tar stream (any compression libarchive knows) from fd and writes its entries below dir (an
 * existing directory; the calling process chdir()s into it). Refused, failing the whole unpack (-EPERM):
 * absolute paths, ".." components, hard links to such targets, entries whose path passes through a
 * symlink. Not written (counted in devices_dropped): character and block devices, sockets; nor
 * (setid_stripped) the setuid and setgid bits of files. Owners and the other mode bits are kept
 * (image_tree_sanitize() neutralises owners afterwards); extended attributes (file
 * capabilities among them) and ACLs are not written. Returns 0, or a negative errno with a message in
 * *ret_error (malloc'd). */
int image_unpack(int fd, const char *dir, ImageUnpack *u, char **ret_error);
