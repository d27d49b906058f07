/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The syntax of our configuration files: [Section] and Key=Value lines, drop-ins, and error messages. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "macro.h"

/* Where a callback's line is. */
typedef struct IniPosition {
        const char *file;  /* the path as given or listed; valid until ini_parse_files() returns */
        size_t file_index; /* 1, 2, …: the files read so far, so a later file has a greater index */
        unsigned line;     /* 1-based */
} IniPosition;

/* The callbacks return 0, or a negative errno that stops the parse and becomes its result (normally
 * from ini_error(), which also leaves the message). */
typedef struct IniHandler {
        /* A "[name]" line; an assignment before any accepted section is an error of the file. */
        int (*section)(const IniPosition *at, const char *name, void *userdata);
        /* A "key=value" line after a section: both stripped of whitespace and value of its inline comment,
         * neither empty. */
        int (*assignment)(const IniPosition *at, const char *key, const char *value, void *userdata);
        /* Optional: once, after the last file, while the file names of the positions are still valid. */
        int (*finish)(void *userdata);
} IniHandler;

/* Reads main_path, then every "*.conf" in dropin_dir (not hidden ones) in lexical (strcmp) order. Either
 * may be NULL; a file or directory that does not exist is skipped, and so is a directory among the
 * drop-ins (as the main file it is an error).
 *
 * Format: '#' or ';' starts a comment at the start of a line, or after whitespace within a value;
 * whitespace around sections, keys and values is ignored; blank lines are skipped.
 *
 * Returns 0; -EINVAL for a bad line, with *ret_error = "file:line: what is wrong"; a negative errno if
 * a file or directory exists but cannot be read, with *ret_error = "path: reason"; -ENOMEM; or what a
 * callback returned. ret_error may be NULL; the caller frees the message. */
int ini_parse_files(const char *main_path, const char *dropin_dir, const IniHandler *handler, void *userdata,
                    char **ret_error);

/* Always returns -EINVAL (or -ENOMEM if the message itself cannot be built), so callers can "return
 * ini_error(...)". If ret_error is not NULL, sets *ret_error to "file:line: what", or "initial
 * configuration: what" if at or its file is NULL (a value that no file set, as the caller started
 * from). */
_printf_(3, 4) int ini_error(char **ret_error, const IniPosition *at, const char *fmt, ...);

/* ini_error() with "Invalid key=value: out of range (expected …)" if r is -ERANGE, else "…: not
 * understood (expected …)". */
int ini_bad_value(char **ret_error, const IniPosition *at, const char *key, const char *value, int r,
                  const char *expected);

/* Plain decimal, no sign, no suffix, no whitespace (strtoull() would accept "-1", " 1" and "0x10").
 * Returns 0, -EINVAL for anything else (also ""), -ERANGE above UINT64_MAX. */
int parse_decimal(const char *s, uint64_t *ret);
/* The words systemd accepts for booleans, in any case: 1 (yes, true, on, 1), 0 (no, false, off, 0) or -EINVAL. */
int parse_boolean(const char *v);
