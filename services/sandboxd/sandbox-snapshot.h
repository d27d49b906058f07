/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Snapshots of sandboxes' disks (issue 26): taken frozen, kept as image files, the disk of new sandboxes. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

#include "caller.h"

typedef struct Manager Manager;
typedef struct Sandbox Sandbox;

#define SNAPSHOT_ID_PREFIX "sn_"

typedef struct Snapshot {
        struct Snapshot *next;
        char id[16];
        char *name, *source, *type, *owner;
        char *image; /* the image its source ran on (its disk holds that overlay's upper layer); NULL: host */
        uid_t source_uid;
        uint64_t size;      /* bytes its image takes on the host (0 while it is taken) */
        uint64_t disk_size; /* the image's length: its type's DiskMax= */
        uint64_t created_at;
        bool pending; /* being taken: its name is taken, but it is not listed and cannot be used */
} Snapshot;

/* "sn_" and 10 characters of [a-z2-7]. */
bool snapshot_id_is_valid(const char *s);

/* At start-up: the snapshots in the store whose image is there; images without a row (a snapshot cut short
 * by a kill -9 or a crash) and temporary files are removed, rows without an image dropped. */
int snapshot_startup(Manager *m);
void snapshot_free_all(Manager *m);

/* By id or name; pending ones only with include_pending. */
Snapshot *snapshot_find(Manager *m, const char *id_or_name, bool include_pending);

/* The image its source ran on as the bus names it: its name, or "host". */
const char *snapshot_image_name(const Snapshot *snap);

/* The first snapshot (pending ones too) whose disk holds a layer of image name, or NULL. */
Snapshot *snapshot_find_by_image(Manager *m, const char *name);

/* The image of a snapshot, in buf. */
void snapshot_image_path(Manager *m, const Snapshot *snap, char *buf, size_t size);

/* Takes a snapshot of s's disk: the sandbox frozen (unless it is paused already), its file system synced,
 * its image cloned (FICLONE) or copied sparse in a thread of its own, then thawed; request gets (s id) once
 * it is stored, or an error with nothing kept and the sandbox running as before. name NULL: the id.
 * Returns 1 (answered later) or fills error. */
int snapshot_take(Sandbox *s, const char *name, const Caller *c, sd_bus_message *request,
                  sd_bus_error *error);

/* Copies the image src to dst (FICLONE, else sparse) in a thread of its own, by way of a temporary name
 * beside dst; done(userdata, 0 or a positive errno) runs in the event loop afterwards. The returned job
 * may be told its caller is gone (image_copy_abandon()): dst is then removed once the copy ends. */
typedef struct ImageCopy ImageCopy;
typedef void (*image_copy_done_t)(void *userdata, int error);
int image_copy_start(Manager *m, const char *src, const char *dst, image_copy_done_t done, void *userdata,
                     ImageCopy **ret);
void image_copy_abandon(ImageCopy *c);

/* Removes a snapshot (sandboxes made from it have copies). */
int snapshot_remove(Manager *m, Snapshot *snap, const Caller *c, uint64_t started_at, uint64_t mono);
