/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* WriteFile and ReadFile, and the helpers that do every file call, seeing the sandbox's mount tree as
 * the sandbox's user. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

#include "file-helper.h"

typedef struct Sandbox Sandbox;
typedef struct Caller Caller;

typedef struct FileWriteSpec {
        const char *path;        /* absolute, as the sandbox sees it */
        const void *data;
        size_t size;
        int data_fd;             /* or -1 */
        mode_t mode;
        bool create_dirs, append;
} FileWriteSpec;

typedef struct FileReadSpec {
        const char *path;
        uint64_t offset;
        uint64_t length;         /* 0: up to the cap */
        uint64_t cap;
        int out_fd;              /* or -1: the data goes into the reply */
} FileReadSpec;

/* Both answer request when done, after spooling the audit row (operations write and read). */
int sandbox_write_file(Sandbox *s, const FileWriteSpec *spec, const Caller *caller, sd_bus_message *request);
int sandbox_read_file(Sandbox *s, const FileReadSpec *spec, const Caller *caller, sd_bus_message *request);

/* Called with a job's status: 0, or the errno it failed with; EIO if the helper died before it answered,
 * ETIMEDOUT if it was killed for taking too long (120 s), ECANCELED if the sandbox was deleted first. */
typedef void (*file_job_done_t)(void *userdata, int status);

/* Hands job to one of the sandbox's file helpers: an idle one, or one started for it. fd0 and fd1 are
 * the job's fds (file-helper.h; -1: none), which the helper gets copies of. done is called exactly once,
 * later, unless this returns a negative errno. */
int sandbox_file_job(Sandbox *s, const FileJob *job, int fd0, int fd1, file_job_done_t done, void *userdata);

/* Starts a file helper for the sandbox when sandboxd is next idle, so that even its first file call
 * finds one rather than starting it. It goes after FILE_HELPER_IDLE_MSEC without a call, as always. */
void sandbox_files_prepare(Sandbox *s);

/* Kills and reaps the sandbox's helpers; the calls they were doing end with ECANCELED. Called when the
 * sandbox is deleted, before its uid is freed. */
void sandbox_files_forget(Sandbox *s);

/* Issue 26: whether a file call of sandbox id runs or waits (its helper busy, or a job queued). */
bool sandbox_files_busy(const char *id);

/* Makes a sandbox path absolute (relative ones are below the home); returns -EINVAL for bad ones. */
int sandbox_resolve_path(const char *path, char **ret);
