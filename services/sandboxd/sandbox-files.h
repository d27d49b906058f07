/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* WriteFile and ReadFile: done by a helper that sees the sandbox's mount tree as the sandbox's user. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

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

/* Starts the sandbox's file server when sandboxd is next idle, so that even its first WriteFile or
 * ReadFile finds one rather than forking a helper of its own (which the first call otherwise does).
 * It goes after FILE_SERVER_IDLE_MSEC without a call, as always. */
void sandbox_files_prepare(Sandbox *s);

/* Ends the sandbox's warm helper, if it has one (a helper made ahead for its next WriteFile or
 * ReadFile, running as its uid): called when the sandbox is deleted, before its uid is freed. */
void sandbox_files_forget(Sandbox *s);

/* Makes a sandbox path absolute (relative ones are below the home); returns -EINVAL for bad ones. */
int sandbox_resolve_path(const char *path, char **ret);
