/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A sandbox's disk: an ext4 image of its type's DiskMax= on a loop device, holding its home, /tmp and /var/tmp. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

/* The image's name in a sandbox's workspace, and the directory its file system is mounted on there (in
 * the sandbox's mount namespace only). */
#define DISK_IMAGE_NAME "disk.img"
#define DISK_MOUNT_NAME "disk"

/* The smallest DiskMax= that mkfs.ext4 makes a usable file system of. */
#define DISK_SIZE_MIN (UINT64_C(16) << 20)

/* Makes the template image for one size, <dir>/ext4-<size>.img, with mkfs (the path of mkfs.ext4): an
 * empty ext4 without a journal (a sandbox does not outlive a crash of the kernel anyway), no blocks
 * reserved for root. An earlier one is replaced. Returns 0 and the path, or a negative errno (-ENOEXEC:
 * mkfs failed). */
int disk_template_make(const char *dir, uint64_t size, const char *mkfs, char **ret_path);

/* Copies the image at template_path to dfd/name (0600), sparse: only the blocks the template holds
 * take space, the rest is a hole until the sandbox writes there. */
int disk_image_copy(const char *template_path, int dfd, const char *name);

/* In a sandbox's first process, in its own mount namespace: attaches the image open (read-write) as
 * image to a free loop device (detached again by the kernel once nothing mounts it) and mounts its file
 * system on mountpoint, nosuid and nodev. Open the image before the mount namespace is made: the loop
 * device keeps it open for writing, and a mount with a writer could not be made read-only later.
 * Returns negative errno; *ret_step says which step failed. */
int disk_image_mount(int image, const char *mountpoint, const char **ret_step);

/* Issue 26: in an image copied from a snapshot, gives everything owned by uid (or group) from to uid (and
 * group) to, under dir (the mounted image's root, dir itself included), not following symlinks. Only
 * system calls and an mmap'd buffer: it runs in a child forked from a threaded sandboxd. Directories
 * deeper than DISK_REOWN_DEPTH_MAX fail it with -ELOOP. */
#define DISK_REOWN_DEPTH_MAX 128
int disk_image_reown(const char *dir, uid_t from, uid_t to);

/* Creates home/ (0700, owned by uid:gid), tmp/ and var-tmp/ (1777) in dir, the image's root. */
int disk_image_populate(const char *dir, uid_t uid, gid_t gid);
