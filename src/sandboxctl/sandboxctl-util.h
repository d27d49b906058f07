/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl's pure helpers: argument syntax, output formatting and plain fd I/O (no bus, testable). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Enough for "Wed 2026-12-02 15:39:31 CEST" with room for long zone names. */
#define FORMAT_TIMESTAMP_MAX 64

/* Decimal, no sign, no blanks, no suffix. Returns 0, -EINVAL for garbage, -ERANGE on overflow. */
int parse_uint64(const char *s, uint64_t *ret);

/* A duration in whole seconds: "30", "30s", "5min", "1h 30min" (anything parse_sec() takes), rounded up
 * to the next second. Returns 0, -EINVAL, or -ERANGE. */
int parse_seconds(const char *s, uint64_t *ret_sec);

/* An octal file mode "0644", "755", up to 07777. Returns 0, -EINVAL, or -ERANGE. */
int parse_mode(const char *s, uint32_t *ret);

/* "KEY=VALUE" with a non-empty KEY free of '=' and NUL-free by construction; VALUE may be empty.
 * Returns 0 and fresh copies, -EINVAL for bad syntax, -ENOMEM. */
int parse_env_assignment(const char *s, char **ret_key, char **ret_value);

/* cp's "ID:PATH" syntax: returns 1 and fresh copies if the part before the first ':' is a valid sandbox
 * id and PATH is non-empty, 0 if s is a local path (outputs untouched), -EINVAL for "ID:" with an empty
 * PATH, -ENOMEM. */
int split_sandbox_path(const char *s, char **ret_id, char **ret_path);

/* The last path component of s ("a/b/" → "b"), as a fresh string; NULL for "", "/" or ENOMEM. */
char *path_basename(const char *s);

/* Local time like systemctl, "Wed 2026-12-02 15:39:31 UTC". Returns buf, or NULL if the time cannot be
 * represented (the caller prints "n/a"). */
char *format_timestamp(uint64_t usec, char buf[static FORMAT_TIMESTAMP_MAX]);

/* A copy of s that is safe to print on a terminal: C0 controls, DEL and C1 controls (U+0080..U+009F)
 * become '?', so a sandbox name cannot carry escape sequences. NULL on ENOMEM. */
char *make_printable(const char *s);

/* Reads fd to EOF into a NUL-terminated buffer (the NUL is not counted). Fails with -EFBIG beyond max
 * bytes. Returns 0 or a negative errno; outputs untouched on failure. */
int read_full_fd(int fd, size_t max, char **ret, size_t *ret_size);

/* Writes all of buf, retrying on EINTR and short writes. Returns 0 or a negative errno. */
int loop_write(int fd, const void *buf, size_t n);

/* Exit status of "sandboxctl exec" from the Exec reply: 124 if timed out, 128+signal if killed by a
 * signal, 137 for an OOM kill without a signal, else the command's exit code (out-of-range codes map
 * to 125, since a real one never is). */
int exec_exit_status(int32_t exit_code, int32_t signal, bool timed_out, bool oom_killed);
