/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The dashboard's static files: which URL paths name which files, their types, and opening them safely.
 *
 * A name is checked by its characters before anything is opened (no "..", no hidden files, nothing but
 * [A-Za-z0-9._-] between slashes), and then opened one segment at a time, each with O_NOFOLLOW, from the
 * dashboard directory down: a symlink anywhere, even one planted inside the directory, ends the walk. The
 * gateway's unit has RestrictSUIDSGID=, which makes openat2() fail with ENOSYS, so the walk is done here
 * rather than with RESOLVE_BENEATH. */
#include "gateway-static.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"

static const struct {
        const char *suffix;
        const char *type;
} content_types[] = {
        { ".html", "text/html; charset=utf-8" },
        { ".js", "text/javascript; charset=utf-8" },
        { ".mjs", "text/javascript; charset=utf-8" },
        { ".css", "text/css; charset=utf-8" },
        { ".json", "application/json" },
        { ".svg", "image/svg+xml" },
        { ".png", "image/png" },
        { ".ico", "image/x-icon" },
        { ".woff2", "font/woff2" },
        { ".txt", "text/plain; charset=utf-8" },
};

const char *static_content_type(const char *name) {
        const char *slash, *dot;

        if (!name)
                return NULL;
        slash = strrchr(name, '/');
        dot = strrchr(slash ? slash + 1 : name, '.');
        if (!dot)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(content_types); i++)
                if (streq(dot, content_types[i].suffix))
                        return content_types[i].type;
        return NULL;
}

static bool name_char_ok(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
               c == '_' || c == '-';
}

int static_name_check(const char *name) {
        size_t depth = 0;

        if (!name || strlen(name) >= STATIC_NAME_MAX)
                return -EINVAL;
        for (const char *p = name;;) {
                size_t len = strcspn(p, "/");
                /* empty ("//", a leading or trailing '/') or hidden, which covers "." and ".." */
                if (len == 0 || p[0] == '.')
                        return -EINVAL;
                for (size_t i = 0; i < len; i++)
                        if (!name_char_ok(p[i]))
                                return -EINVAL;
                if (++depth > STATIC_DEPTH_MAX)
                        return -EINVAL;
                if (!p[len])
                        break;
                p += len + 1;
        }
        return static_content_type(name) ? 0 : -EINVAL;
}

int static_open(const char *dir, const char *name, int *ret_fd, struct stat *ret_st) {
        _cleanup_close_ int dfd = -EBADF;
        char seg[STATIC_NAME_MAX];
        struct stat st;
        int k;

        k = static_name_check(name);
        if (k < 0)
                return k;
        if (!dir || dir[0] != '/')
                return -EINVAL;
        /* The directory itself is the operator's choice (DashboardDirectory=) and may be a symlink. */
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return errno == EACCES ? -EACCES : -ENOENT;

        for (const char *p = name;;) {
                size_t len = strcspn(p, "/");
                bool last = !p[len];
                int fd;

                memcpy(seg, p, len);
                seg[len] = 0;
                fd = openat(dfd, seg,
                            O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | (last ? 0 : O_DIRECTORY));
                if (fd < 0)
                        return errno == EACCES ? -EACCES : -ENOENT;
                safe_close(dfd);
                dfd = fd;
                if (last)
                        break;
                p += len + 1;
        }
        if (fstat(dfd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -ENOENT;
        /* back to blocking reads: the HTTP server reads it as it sends */
        k = fcntl(dfd, F_GETFL);
        if (k >= 0)
                (void) fcntl(dfd, F_SETFL, k & ~O_NONBLOCK);
        *ret_st = st;
        *ret_fd = TAKE_FD(dfd);
        return 0;
}

void static_etag(const struct stat *st, char buf[static STATIC_ETAG_MAX]) {
        snprintf(buf, STATIC_ETAG_MAX, "\"%" PRIx64 "-%" PRIx64 "-%" PRIx64 "\"", (uint64_t) st->st_ino,
                 (uint64_t) st->st_size,
                 (uint64_t) st->st_mtim.tv_sec * UINT64_C(1000000000) + (uint64_t) st->st_mtim.tv_nsec);
}

bool static_etag_matches(const char *if_none_match, const char *etag) {
        size_t n = strlen(etag);

        if (!if_none_match)
                return false;
        for (const char *p = if_none_match; *p;) {
                p += strspn(p, " \t,");
                if (!*p)
                        break;
                if (*p == '*')
                        return true;
                /* a weak tag compares equal too (If-None-Match uses the weak comparison) */
                if (strncmp(p, "W/", 2) == 0)
                        p += 2;
                if (strncmp(p, etag, n) == 0 && (p[n] == 0 || p[n] == ',' || p[n] == ' ' || p[n] == '\t'))
                        return true;
                p += strcspn(p, ",");
        }
        return false;
}
