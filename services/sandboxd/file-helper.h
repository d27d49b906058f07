/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd-file-helper's jobs: their wire format, and their work in the helper on the sandbox's tree. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "file-tools.h"

/* sandboxd never opens a sandbox's files itself, and the process that does holds nothing of sandboxd's:
 * sandboxd forks, joins the sandbox's mount namespace, confines the child exactly like the sandbox's own
 * processes (its uid, no capabilities, its rlimits and seccomp filter) and execs sandboxd-file-helper,
 * a program of its own, so no copy of sandboxd's memory (other sandboxes' requests, audit rows) is
 * within reach of the code that parses the sandbox's files.
 *
 * The helper serves jobs on a SOCK_SEQPACKET socket (fd 3), one at a time, until sandboxd closes it,
 * the sandbox's init dies (its pidfd, fd 4, becomes readable) or FILE_HELPER_IDLE_MSEC pass without a
 * job. A job is one message: a FileJobMessage, then the job's encoding if it is at most
 * FILE_JOB_INLINE_MAX bytes (else it is in a memfd, the first fd), and up to two more fds (SCM_RIGHTS).
 * The answer is an int32: 0, or the errno the job failed with. */

#define FILE_HELPER_SOCKET_FD 3
#define FILE_HELPER_WATCH_FD  4
#define FILE_HELPER_IDLE_MSEC 30000

typedef enum FileJobKind {
        FILE_JOB_READ,        /* fds: the destination, a memfd for the FileHeader */
        FILE_JOB_WRITE,       /* fds: the source */
        FILE_JOB_CREATE,      /* the file tools; fds: a memfd for the ToolResult and body, and */
        FILE_JOB_VIEW,        /*   FileCreate's source or View's destination, if the caller gave one */
        FILE_JOB_STR_REPLACE,
        FILE_JOB_INSERT,
        FILE_JOB_LS,
        FILE_JOB_GLOB,
        FILE_JOB_GREP,
        _FILE_JOB_KIND_MAX,
} FileJobKind;

/* What a FILE_JOB_READ writes at offset 0 of its second fd before the data. */
typedef struct FileHeader {
        uint64_t size;
        uint32_t mode;
        uint32_t truncated;
} FileHeader;

/* A job. Strings are NUL-terminated, NULL when absent; after file_job_decode() every pointer points into
 * the decoded buffer. */
typedef struct FileJob {
        FileJobKind kind;
        const char *path;    /* absolute, as the sandbox sees it; Glob: the base directory */
        const char *pattern; /* Glob: the rest of the pattern; Grep: the regular expression */
        const char *glob;    /* Grep: which files */
        const void *data, *data2; /* FileCreate: content; StrReplace: old, new; Insert: text */
        size_t size, size2;
        uint64_t offset, length, cap; /* ReadFile; cap: every job's largest result */
        uint64_t max_results, line, start_line, end_line;
        uint64_t timeout_usec; /* Grep: answers what it found by then (0: no limit) */
        uint32_t mode;
        bool create_dirs, append, overwrite, ignore_case;
} FileJob;

/* The message on the socket, followed by the job's encoding unless that is in a memfd; the fds ride
 * along: the memfd if any, then the job's own (see FileJobKind). */
typedef struct FileJobMessage {
        uint32_t magic;
        uint32_t n_fds;  /* the job's own: 0 to 2 */
        uint32_t inline_size; /* bytes of encoding after this header; 0: in a memfd */
        uint32_t reserved;
} FileJobMessage;

#define FILE_JOB_INLINE_MAX (32 * 1024) /* a small job costs no memfd; well below a socket's buffer */

#define FILE_JOB_MAGIC UINT32_C(0x53424a31) /* "SBJ1" */

/* Appends the job's encoding to out. -EINVAL for a kind out of range or a path that is missing. */
int file_job_encode(const FileJob *job, ToolBuf *out);

/* Reads an encoding; *ret's pointers point into data. -EBADMSG if it is not a whole, valid job. */
int file_job_decode(const void *data, size_t size, FileJob *ret);

/* Does the job, in a process that sees the sandbox's tree at root (an O_PATH fd of "/"): 0 or a negative
 * errno. fd0 and fd1 as FileJobKind says; -1 where there is none. */
int file_job_run(const FileJob *job, int root, int fd0, int fd1);

/* The helper's loop on sock (watch: an fd whose readability ends it, or -1). Returns 0 when the peer
 * hung up, watch fired or idle_msec passed without a job; a negative errno if the peer broke the
 * protocol. */
int file_helper_serve(int sock, int watch, int idle_msec);
