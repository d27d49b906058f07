/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd's own state in SQLite: the sandboxes that must survive a restart. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandboxd-config.h"

typedef struct SandboxStore SandboxStore;

typedef struct SandboxRecord {
        const char *id, *name, *type, *owner;
        uid_t uid;
        SandboxNetwork network;
        uint64_t created_at, expires_at;
        pid_t init_pid;
        uint64_t init_start;
        uint64_t exec_next;
        /* network egress: its IPv4 address and policy (JSON, canonical entries); "" otherwise */
        const char *egress_address, *egress_policy;
        /* issue 26: when it was paused (µs since the epoch; 0: running) and the TTL it had left then */
        uint64_t paused_at, ttl_left;
} SandboxRecord;

int sandbox_store_open(const char *path, SandboxStore **ret);
SandboxStore *sandbox_store_free(SandboxStore *s);

int sandbox_store_insert(SandboxStore *s, const SandboxRecord *r);
int sandbox_store_delete(SandboxStore *s, const char *id);
int sandbox_store_set_expiry(SandboxStore *s, const char *id, uint64_t expires_at);
int sandbox_store_set_exec_next(SandboxStore *s, const char *id, uint64_t exec_next);
/* An egress sandbox's policy, replaced (SetNetworkPolicy): JSON as in SandboxRecord. */
int sandbox_store_set_egress_policy(SandboxStore *s, const char *id, const char *policy_json);

/* Paused (paused_at > 0, with the TTL left then) or running again (0, 0, and the new expiry). */
int sandbox_store_set_paused(SandboxStore *s, const char *id, uint64_t paused_at, uint64_t ttl_left,
                             uint64_t expires_at);

/* Issue 26: a snapshot of a sandbox's disk. size: bytes its image takes on the host; disk_size: the
 * image's length (its type's DiskMax=); source_uid: the owner of its files, given to the new sandbox's uid
 * in a sandbox made from it. image: the image its source ran on, whose writable layer the disk holds
 * ("" or NULL: the host's tree). */
typedef struct SnapshotRecord {
        const char *id, *name, *source, *type, *owner, *image;
        uid_t source_uid;
        uint64_t size, disk_size, created_at;
} SnapshotRecord;

int sandbox_store_snapshot_insert(SandboxStore *s, const SnapshotRecord *r);
int sandbox_store_snapshot_delete(SandboxStore *s, const char *id);
typedef int (*snapshot_store_cb)(const SnapshotRecord *r, void *userdata);
int sandbox_store_snapshot_load(SandboxStore *s, snapshot_store_cb cb, void *userdata);

typedef int (*sandbox_store_cb)(const SandboxRecord *r, void *userdata);
int sandbox_store_load(SandboxStore *s, sandbox_store_cb cb, void *userdata);
