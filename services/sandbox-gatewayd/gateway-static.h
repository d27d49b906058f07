/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The dashboard's static files: which URL paths name which files, their types, and opening them safely. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* Longest file name (relative to the dashboard directory) a URL may name. */
#define STATIC_NAME_MAX 128
/* Depth of directories under the dashboard directory. */
#define STATIC_DEPTH_MAX 8

/* Checks a name relative to the dashboard directory, as taken from the URL ("app.js",
 * "vendor/xterm/xterm.mjs"): segments of [A-Za-z0-9._-], none empty or starting with '.' (so no "..",
 * no hidden files), at most STATIC_DEPTH_MAX of them, shorter than STATIC_NAME_MAX, and an extension
 * static_content_type() knows. Returns 0 or -EINVAL. */
int static_name_check(const char *name);

/* The Content-Type of a file name by its extension ("text/javascript; charset=utf-8"), or NULL for a
 * type the dashboard does not serve. */
const char *static_content_type(const char *name);

/* Opens name (already checked) under the directory dir, one segment at a time with O_NOFOLLOW: no
 * symbolic link is followed, so nothing outside dir is reachable. Only regular files: a directory or
 * anything else is -ENOENT, as is a missing file or a symlink on the way (ELOOP, ENOTDIR). Returns an fd
 * and its stat, or a negative errno (-EACCES if the gateway may not read it). */
int static_open(const char *dir, const char *name, int *ret_fd, struct stat *ret_st);

/* The strong validator of a file as served: inode, size and modification time, quoted ("\"…\"").
 * buf must hold STATIC_ETAG_MAX bytes. */
#define STATIC_ETAG_MAX 64
void static_etag(const struct stat *st, char buf[static STATIC_ETAG_MAX]);

/* Does an If-None-Match header value (a list of entity tags, or "*") match etag? */
bool static_etag_matches(const char *if_none_match, const char *etag);
