/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sandbox's namespaces: the mount tree it sees, its hostname, its loopback-only network. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Directories of the host that a sandbox must not see at all; each is covered by an empty tmpfs. */
#define NAMESPACE_EMPTY_FILE "empty" /* in the workspace: what a hidden file of HidePaths= shows */
extern const char *const namespace_hidden_paths[];

typedef struct SandboxLayout {
        const char *workspace;   /* host path of the sandbox's workspace: etc/{passwd,group}, and home/, tmp/,
                                  * var-tmp/ or the disk image */
        const char *state_dir;   /* sandboxd's state directory, hidden like the paths above */
        const char *home;        /* the home's path inside the sandbox, e.g. /home/sandbox */
        const char *hostname;
        bool private_network;
        bool resolv_conf;        /* the workspace has etc/resolv.conf (network egress) to show as /etc's */
        int disk_image_fd;       /* the sandbox's disk image, open read-write before the namespace was made;
                                  * or negative: home/, tmp/ and var-tmp/ are directories of the workspace
                                  * (no DiskMax=) */
        const char *hide_paths;  /* HidePaths=: more host paths to hide, separated by single spaces; or NULL */
        uid_t uid;               /* the sandbox's user and group, owners of the home in a disk image */
        gid_t gid;
        /* Issue 24: the image's tree on the host (<state>/images/<name>/tree), or NULL: the host's own tree.
         * With an image, the root is an overlay of it with upper and work directories on the disk image
         * (needed then), and nothing of the host's tree is reachable: the root is pivoted onto the overlay
         * and the old one detached. hide_paths and state_dir do not matter then. */
        const char *image_tree;
        uid_t disk_from_uid;     /* issue 26: the disk image is a snapshot's, whose files uid/gid disk_from_uid
                                  * owns (given to uid, gid); (uid_t) -1: a fresh image, populated */
} SandboxLayout;

/* Runs in a freshly forked child that is PID 1 of a new PID namespace (see sandbox.c) and has just
 * unshared mount, UTS, IPC and possibly network namespaces: builds the sandbox's view of the
 * system. Returns negative errno; on failure *ret_step names what failed (a static string). */
int namespace_setup(const SandboxLayout *l, const char **ret_step);

/* Creates the workspace on the host: the passwd/group files the sandbox sees, and either a sparse copy
 * of disk_template (DISK_IMAGE_NAME, plus the directory it is mounted on; with "" only the directory: the
 * image is put there later) or, with disk_template NULL,
 * the directories home (0700, owned by uid), tmp and var-tmp (1777). On failure, a workspace it made is
 * removed again; one that existed already (-EEXIST) is not touched. */
int namespace_make_workspace(const char *workspace, const char *user, uid_t uid, gid_t gid, const char *home,
                             const char *disk_template);

/* Issue 24: readies a workspace (made by namespace_make_workspace() with a disk) for an image sandbox:
 * the directory its root overlay is mounted on (NAMESPACE_ROOT_NAME), the overlay's top layer
 * (NAMESPACE_LAYER_NAME, holding etc/: the workspace's etc becomes a symlink to it), and etc/hosts and
 * etc/hostname for hostname, which the image's own /etc would otherwise answer for. */
#define NAMESPACE_ROOT_NAME "root"
#define NAMESPACE_LAYER_NAME "layer" /* the layer of etc/ files above the image */
#define NAMESPACE_LOWER_NAME "lower" /* where the image's tree is bound, in the sandbox's namespace only */
int namespace_workspace_add_image(const char *workspace, const char *hostname);

/* Removes a workspace without following any symlink planted in it and without crossing into other
 * file systems. */
int namespace_remove_workspace(const char *workspace);
