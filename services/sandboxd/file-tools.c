/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The file tools' work (file_create, view, str_replace, …, grep) on a tree seen through a root fd. */
#include "file-tools.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "io-util.h"
#include "macro.h"
#include "utf8-util.h"

/* --- buffers --------------------------------------------------------------------------------------- */

int tool_buf_put(ToolBuf *b, const void *p, size_t n) {
        if (n == 0)
                return 0;
        if (b->size + n < b->size)
                return -ENOMEM;
        if (b->size + n > b->alloc) {
                size_t a = MAX(b->alloc * 2, b->size + n);
                a = MAX(a, (size_t) 4096);
                uint8_t *d = realloc(b->data, a);
                if (!d)
                        return -ENOMEM;
                b->data = d;
                b->alloc = a;
        }
        memcpy(b->data + b->size, p, n);
        b->size += n;
        return 0;
}

int tool_buf_put_u32(ToolBuf *b, uint32_t v) {
        return tool_buf_put(b, &v, sizeof(v));
}

int tool_buf_put_u64(ToolBuf *b, uint64_t v) {
        return tool_buf_put(b, &v, sizeof(v));
}

int tool_buf_put_bytes(ToolBuf *b, const void *p, size_t n) {
        if (n > UINT32_MAX)
                return -E2BIG;
        int r = tool_buf_put_u32(b, (uint32_t) n);
        return r < 0 ? r : tool_buf_put(b, p, n);
}

void tool_buf_free(ToolBuf *b) {
        free(b->data);
        *b = (ToolBuf){};
}

static int tool_read_raw(ToolReader *r, void *ret, size_t n) {
        if (r->left < n)
                return -EBADMSG;
        memcpy(ret, r->p, n);
        r->p += n;
        r->left -= n;
        return 0;
}

int tool_read_u32(ToolReader *r, uint32_t *ret) {
        return tool_read_raw(r, ret, sizeof(*ret));
}

int tool_read_u64(ToolReader *r, uint64_t *ret) {
        return tool_read_raw(r, ret, sizeof(*ret));
}

int tool_read_bytes(ToolReader *r, const void **ret, size_t *ret_size) {
        uint32_t n;
        int k = tool_read_u32(r, &n);
        if (k < 0)
                return k;
        if (r->left < n)
                return -EBADMSG;
        *ret = r->p;
        *ret_size = n;
        r->p += n;
        r->left -= n;
        return 0;
}

/* --- pure logic ------------------------------------------------------------------------------------ */

uint64_t tool_count_lines(const void *data, size_t size) {
        const char *p = data, *end = p + size;
        uint64_t n = 0;

        while (p < end) {
                const char *nl = memchr(p, '\n', end - p);
                n++;
                if (!nl)
                        break;
                p = nl + 1;
        }
        return n;
}

uint64_t tool_count_occurrences(const void *data, size_t size, const void *needle, size_t needle_size,
                                uint64_t max, size_t *ret_first) {
        const char *p = data, *end = p + size;
        uint64_t n = 0;

        if (needle_size == 0 || needle_size > size)
                return 0;
        while ((size_t) (end - p) >= needle_size) {
                const char *hit = memmem(p, end - p, needle, needle_size);
                if (!hit)
                        break;
                if (n == 0 && ret_first)
                        *ret_first = hit - (const char *) data;
                n++;
                if (max > 0 && n >= max)
                        break;
                p = hit + 1; /* overlapping: "aa" is twice in "aaa" */
        }
        return n;
}

uint64_t tool_line_of_offset(const void *data, size_t size, size_t offset) {
        const char *p = data;
        uint64_t line = 1;

        for (size_t i = 0; i < offset && i < size; i++)
                if (p[i] == '\n')
                        line++;
        return line;
}

int tool_number_lines(const void *data, size_t size, uint64_t start, uint64_t end, uint64_t cap,
                      ToolBuf *out, ToolResult *result) {
        const char *p = data, *e = p + size;
        uint64_t lines = tool_count_lines(data, size), line = 1;
        int r;

        result->n[0] = lines;
        result->n[1] = result->n[2] = 0;
        if (start == 0)
                start = 1;
        if (start > lines && !(start == 1 && lines == 0)) {
                result->status = TOOL_LINE_RANGE;
                return 0;
        }
        if (end == 0 || end > lines)
                end = lines;
        /* Skip to the first line shown. */
        while (line < start) {
                const char *nl = memchr(p, '\n', e - p);
                p = nl + 1;
                line++;
        }
        for (; line <= end && p < e; line++) {
                const char *nl = memchr(p, '\n', e - p);
                size_t len = nl ? (size_t) (nl - p) : (size_t) (e - p);
                char num[32];
                int k = snprintf(num, sizeof(num), "%6" PRIu64 "\t", line);

                if (cap > 0 && out->size + k + len + 1 > cap) {
                        result->flags |= TOOL_FLAG_TRUNCATED;
                        break;
                }
                r = tool_buf_put(out, num, k);
                if (r >= 0)
                        r = tool_buf_put(out, p, len);
                if (r >= 0)
                        r = tool_buf_put(out, "\n", 1);
                if (r < 0)
                        return r;
                if (result->n[1] == 0)
                        result->n[1] = line;
                result->n[2] = line;
                p = nl ? nl + 1 : e;
        }
        return 0;
}

int tool_insert_lines(const void *data, size_t size, uint64_t line, const void *text, size_t text_size,
                      ToolBuf *out) {
        const char *p = data, *e = p + size;
        uint64_t lines = tool_count_lines(data, size);
        size_t at = 0;
        bool nl_before = false;
        int r;

        if (line > lines)
                return -ERANGE;
        for (uint64_t i = 0; i < line; i++) {
                const char *nl = memchr(p + at, '\n', e - (p + at));
                if (!nl) {
                        /* the unterminated last line: what follows it needs a newline first */
                        at = size;
                        nl_before = true;
                        break;
                }
                at = nl - p + 1;
        }
        r = tool_buf_put(out, p, at);
        if (r >= 0 && nl_before)
                r = tool_buf_put(out, "\n", 1);
        if (r >= 0)
                r = tool_buf_put(out, text, text_size);
        if (r >= 0 && text_size > 0 && ((const char *) text)[text_size - 1] != '\n')
                r = tool_buf_put(out, "\n", 1);
        if (r >= 0)
                r = tool_buf_put(out, p + at, size - at);
        return r;
}

bool tool_is_binary(const void *data, size_t size) {
        return memchr(data, 0, MIN(size, (size_t) TOOLS_BINARY_PROBE)) != NULL;
}

static bool segment_match(const char *pat, size_t plen, const char *name, size_t nlen) {
        char p[PATH_MAX], n[NAME_MAX + 1];

        if (plen >= sizeof(p) || nlen >= sizeof(n))
                return false;
        memcpy(p, pat, plen);
        p[plen] = 0;
        memcpy(n, name, nlen);
        n[nlen] = 0;
        return fnmatch(p, n, FNM_PERIOD) == 0;
}

static bool is_globstar(const char *seg, const char *seg_end) {
        return seg_end - seg == 2 && seg[0] == '*' && seg[1] == '*';
}

/* Which (pattern segment, path segment) pairs are known not to match: without it, every "**" of a pattern
 * can double the work (alternating "**" and "*" segments took minutes on one path; found by tests/fuzz/fuzz-file-tools).
 * Within 64 x 64 the recursion depth stays below its limit, so a failure there does not depend on it. */
typedef struct GlobMemo {
        uint64_t failed[64]; /* bit s of failed[p]: pattern from segment p fails on path from segment s */
} GlobMemo;

/* Matches the remaining pattern segments (from segment pi) against the remaining path segments (from si).
 * dir: path names a directory, and the question is whether anything below it could match. */
static bool glob_match_rec(const char *pat, const char *path, bool dir, unsigned depth, unsigned pi,
                           unsigned si, GlobMemo *memo) {
        const char *pe = strchrnul(pat, '/');
        bool r;

        /* Nothing deeper than the walk goes matches, and beyond the memo the work would grow unbounded
         * again (a path of 200 empty segments did). */
        if (depth > 2 * TOOLS_WALK_DEPTH_MAX || pi >= 64 || si >= 64)
                return false;
        if (memo->failed[pi] & (UINT64_C(1) << si))
                return false;
        if (*path == 0) {
                if (dir)
                        return *pat != 0;
                if (*pat == 0)
                        return true;
                return is_globstar(pat, pe) &&
                       glob_match_rec(*pe ? pe + 1 : pe, path, dir, depth + 1, pi + 1, si, memo);
        }
        if (*pat == 0)
                return false;

        const char *se = strchrnul(path, '/');
        const char *next_pat = *pe ? pe + 1 : pe, *next_path = *se ? se + 1 : se;

        if (is_globstar(pat, pe)) {
                /* "**" followed by "**" matches what one does */
                while (*pe && is_globstar(pe + 1, strchrnul(pe + 1, '/'))) {
                        pat = pe + 1;
                        pe = strchrnul(pat, '/');
                        pi++;
                }
                next_pat = *pe ? pe + 1 : pe;
                /* "**" stands for no name at all, or for one more (not hidden) name and itself again */
                r = glob_match_rec(next_pat, path, dir, depth + 1, pi + 1, si, memo) ||
                    (path[0] != '.' && glob_match_rec(pat, next_path, dir, depth + 1, pi, si + 1, memo));
        } else
                r = segment_match(pat, pe - pat, path, se - path) &&
                    glob_match_rec(next_pat, next_path, dir, depth + 1, pi + 1, si + 1, memo);
        if (!r && pi < 64) /* folding "**" may have moved pi past the memo */
                memo->failed[pi] |= UINT64_C(1) << si;
        return r;
}

bool tool_glob_match(const char *pattern, const char *path) {
        GlobMemo memo = {};
        return glob_match_rec(pattern, path, false, 0, 0, 0, &memo);
}

bool tool_glob_match_dir(const char *pattern, const char *dir) {
        GlobMemo memo = {};
        return glob_match_rec(pattern, dir, true, 0, 0, 0, &memo);
}

static bool has_wildcard(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (strchr("*?[\\", s[i]))
                        return true;
        return false;
}

int tool_glob_split(const char *pattern, char **ret_base, const char **ret_rest) {
        const char *p = pattern, *last = NULL;
        size_t base_len = 0;

        while (*p == '/')
                p++;
        for (;;) {
                const char *e = strchr(p, '/');
                if (!e || has_wildcard(p, e - p))
                        break; /* the last segment always stays in rest */
                last = e;
                p = e + 1;
        }
        if (last)
                base_len = last - pattern;
        char *base = pattern[0] == '/' && base_len == 0 ? strdup("/") : strndup(pattern, base_len);
        if (!base)
                return -ENOMEM;
        *ret_base = base;
        *ret_rest = p;
        return 0;
}

char *tool_utf8_sanitize(const void *data, size_t size) {
        char *s;

        /* D-Bus strings hold no NUL either */
        return utf8_sanitize(data, size, UTF8_REPLACE_NUL, &s, NULL, NULL) < 0 ? NULL : s;
}

/* --- opening and reading --------------------------------------------------------------------------- */

static int openat2_raw(int dfd, const char *path, int flags, mode_t mode, uint64_t resolve) {
        struct open_how how = {
                .flags = (uint64_t) flags | O_CLOEXEC,
                .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
                .resolve = resolve,
        };
        long fd;

        /* With RESOLVE_IN_ROOT the kernel answers EAGAIN when any rename on the system raced a ".." of
         * the path: the lookup is safe to repeat, and a busy host makes it happen. */
        for (unsigned attempt = 0;; attempt++) {
                fd = syscall(SYS_openat2, dfd, path, &how, sizeof(how));
                if (fd >= 0 || errno != EAGAIN || attempt >= 64)
                        break;
        }
        return fd < 0 ? -errno : (int) fd;
}

static bool openat2_missing = false;

void tool_open_force_fallback(bool b) {
        openat2_missing = b;
}

#define SYMLINKS_MAX 40

/* What openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) does, one name at a time from userspace, for
 * where openat2 fails with ENOSYS: systemd's RestrictSUIDSGID= (on in sandboxd.service) makes it so,
 * because a seccomp filter cannot see the flags openat2 takes in memory. Every name is opened with
 * O_NOFOLLOW relative to the directory before it; a symlink is read and its target resolved the same
 * way, an absolute one from root_fd; ".." never goes above root_fd; symlinks in procfs (the magic
 * ones) are refused with ELOOP. A rename or a swap for a symlink in between can only make a later
 * open fail, never lead above root_fd. */
static int open_in_root_fallback(int root_fd, const char *path, int flags, mode_t mode) {
        _cleanup_free_ char *todo = strdup(path);
        struct stat root_st, st;
        unsigned links = 0;
        int cur, r;

        if (!todo)
                return -ENOMEM;
        if (fstat(root_fd, &root_st) < 0)
                return -errno;
        cur = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
        if (cur < 0)
                return -errno;
        char *p = todo;
        for (;;) {
                while (*p == '/')
                        p++;
                char *end = strchrnul(p, '/');
                bool last = true;
                for (const char *q = end; *q; q++)
                        if (*q != '/') {
                                last = false;
                                break;
                        }
                char saved = *end;
                *end = 0;
                const char *name = *p ? p : ".";

                if (streq(name, "..")) {
                        /* at root_fd, ".." is root_fd itself */
                        if (fstat(cur, &st) < 0) {
                                r = -errno;
                                break;
                        }
                        if (st.st_dev != root_st.st_dev || st.st_ino != root_st.st_ino) {
                                int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
                                if (up < 0) {
                                        r = -errno;
                                        break;
                                }
                                safe_close(cur);
                                cur = up;
                        }
                        name = ".";
                }
                if (!last && streq(name, ".")) {
                        *end = saved;
                        p = end;
                        continue;
                }

                /* O_CREAT | O_EXCL meets a symlink with EEXIST, like open(2) */
                bool follow = !last || !((flags & O_NOFOLLOW) || ((flags & O_CREAT) && (flags & O_EXCL)));
                if (follow && fstatat(cur, name, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISLNK(st.st_mode)) {
                        char target[PATH_MAX];
                        struct statfs sfs;

                        if (++links > SYMLINKS_MAX) {
                                r = -ELOOP;
                                break;
                        }
                        if (fstatfs(cur, &sfs) < 0) {
                                r = -errno;
                                break;
                        }
                        if (sfs.f_type == PROC_SUPER_MAGIC) {
                                r = -ELOOP; /* RESOLVE_NO_MAGICLINKS */
                                break;
                        }
                        ssize_t n = readlinkat(cur, name, target, sizeof(target) - 1);
                        if (n < 0) {
                                r = -errno;
                                break;
                        }
                        target[n] = 0;
                        *end = saved;
                        /* the target, then whatever came after the link */
                        char *next = NULL;
                        if (asprintf(&next, "%s/%s", target, end) < 0) {
                                r = -ENOMEM;
                                break;
                        }
                        free(todo);
                        todo = p = next;
                        if (target[0] == '/') {
                                safe_close(cur);
                                cur = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
                                if (cur < 0) {
                                        r = -errno;
                                        break;
                                }
                        }
                        continue;
                }
                if (last) {
                        /* O_NOFOLLOW: had it become a symlink since, this fails rather than follow it */
                        r = openat(cur, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
                        if (r < 0)
                                r = -errno;
                        break;
                }
                int next_fd = openat(cur, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (next_fd < 0) {
                        r = errno == ELOOP ? -ENOTDIR : -errno;
                        break;
                }
                safe_close(cur);
                cur = next_fd;
                *end = saved;
                p = end;
        }
        safe_close(cur);
        return r;
}

int tool_open(int root_fd, const char *path, int flags, mode_t mode) {
        if (!openat2_missing) {
                int fd = openat2_raw(root_fd, path, flags, mode, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
                if (fd != -ENOSYS)
                        return fd;
                openat2_missing = true;
        }
        return open_in_root_fallback(root_fd, path, flags, mode);
}

/* Removes the file at path, resolved like tool_open() up to its last name. */
static int tool_unlink(int root_fd, const char *path) {
        char dir[PATH_MAX];
        const char *slash = strrchr(path, '/');

        if (!slash || strlen(path) >= sizeof(dir))
                return -EINVAL;
        snprintf(dir, sizeof(dir), "%.*s", (int) (slash - path), path);
        _cleanup_close_ int dfd = tool_open(root_fd, dir[0] ? dir : "/", O_PATH | O_DIRECTORY, 0);
        if (dfd < 0)
                return dfd;
        return unlinkat(dfd, slash + 1, 0) < 0 ? -errno : 0;
}

/* One name of a directory, never following a symlink, never leaving it. */
static int open_child(int dfd, const char *name, int flags) {
        if (strchr(name, '/') || streq(name, "..") || streq(name, "."))
                return -EINVAL;
        int fd = openat(dfd, name, flags | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

int tool_fstat_regular(int fd, struct stat *ret) {
        if (fstat(fd, ret) < 0)
                return -errno;
        if (S_ISDIR(ret->st_mode))
                return -EISDIR;
        return S_ISREG(ret->st_mode) ? 0 : -EINVAL;
}

/* Reads all of a regular file's fd, up to cap bytes (-EFBIG beyond), into a NUL-terminated buffer. */
static int read_fd_all(int fd, uint64_t cap, char **ret_data, size_t *ret_size) {
        struct stat st;
        size_t size = 0, alloc;
        char *data;
        int r;

        r = tool_fstat_regular(fd, &st);
        if (r < 0)
                return r;
        if ((uint64_t) st.st_size > cap)
                return -EFBIG;
        alloc = (size_t) st.st_size + 1;
        data = malloc(alloc + 1);
        if (!data)
                return -ENOMEM;
        for (;;) {
                if (size == alloc) {
                        /* it grew while we read it */
                        if (alloc > cap) {
                                free(data);
                                return -EFBIG;
                        }
                        size_t a = MIN(alloc * 2, (size_t) cap + 1);
                        char *d = realloc(data, a + 1);
                        if (!d) {
                                free(data);
                                return -ENOMEM;
                        }
                        data = d;
                        alloc = a;
                }
                ssize_t n = pread(fd, data + size, alloc - size, (off_t) size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        free(data);
                        return r;
                }
                if (n == 0)
                        break;
                size += n;
        }
        if (size > cap) {
                free(data);
                return -EFBIG;
        }
        data[size] = 0;
        *ret_data = data;
        *ret_size = size;
        return 0;
}

int tool_read_file(int root_fd, const char *path, uint64_t cap, char **ret_data, size_t *ret_size) {
        _cleanup_close_ int fd = tool_open(root_fd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
        if (fd < 0)
                return fd;
        return read_fd_all(fd, cap, ret_data, ret_size);
}

static int write_all_at(int fd, const void *data, size_t size, off_t offset) {
        const char *p = data;

        while (size > 0) {
                ssize_t n = pwrite(fd, p, size, offset);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                size -= n;
                offset += n;
        }
        return 0;
}

/* Replaces the whole content of fd, in place: hard links, owner and mode stay what they were. The room
 * for the new content is made sure of first: a full disk refuses the edit, it does not cut the file. */
static int write_back(int fd, const void *data, size_t size) {
        int r = fd_reserve(fd, 0, size);
        if (r < 0)
                return r;
        r = write_all_at(fd, data, size, 0);
        if (r < 0)
                return r;
        if (ftruncate(fd, (off_t) size) < 0)
                return -errno;
        return 0;
}

static int mkdir_parents(int root_fd, const char *path) {
        char buf[PATH_MAX];
        int r;

        if (strlen(path) >= sizeof(buf))
                return -ENAMETOOLONG;
        snprintf(buf, sizeof(buf), "%s", path);
        for (char *p = strchr(buf + 1, '/'); p; p = strchr(p + 1, '/')) {
                *p = 0;
                int fd = tool_open(root_fd, buf, O_PATH | O_DIRECTORY, 0);
                if (fd >= 0)
                        safe_close(fd);
                else if (fd == -ENOENT) {
                        char *slash = strrchr(buf, '/');
                        const char *name = slash + 1;
                        *slash = 0;
                        _cleanup_close_ int parent =
                                tool_open(root_fd, slash == buf ? "/" : buf, O_PATH | O_DIRECTORY, 0);
                        *slash = '/';
                        if (parent < 0)
                                return parent;
                        if (mkdirat(parent, name, 0755) < 0 && errno != EEXIST)
                                return -errno;
                } else
                        return fd;
                *p = '/';
        }
        r = 0;
        return r;
}

int tool_file_create(int root_fd, const ToolCreateSpec *spec, ToolResult *result) {
        _cleanup_free_ char *from_fd = NULL;
        const void *data = spec->data;
        size_t size = spec->size;
        struct stat st;
        bool created = true;
        int r;

        /* All input first: a source above the cap changes nothing. */
        if (spec->data_fd >= 0) {
                ToolBuf b = {};
                char chunk[65536];
                for (;;) {
                        ssize_t n = read(spec->data_fd, chunk, sizeof(chunk));
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0) {
                                r = -errno;
                                tool_buf_free(&b);
                                return r;
                        }
                        if (n == 0)
                                break;
                        if (b.size + n > TOOLS_FILE_MAX) {
                                tool_buf_free(&b);
                                return -EFBIG;
                        }
                        r = tool_buf_put(&b, chunk, n);
                        if (r < 0) {
                                tool_buf_free(&b);
                                return r;
                        }
                }
                from_fd = (char *) b.data;
                data = b.data;
                size = b.size;
        }
        if (size > TOOLS_FILE_MAX)
                return -EFBIG;
        if (spec->create_dirs) {
                r = mkdir_parents(root_fd, spec->path);
                if (r < 0)
                        return r;
        }
        /* O_NONBLOCK: a FIFO planted at the path cannot make us wait for a reader. */
        _cleanup_close_ int fd = tool_open(root_fd, spec->path,
                                           O_WRONLY | O_CREAT | O_EXCL | O_NONBLOCK | O_NOCTTY, spec->mode);
        if (fd == -EEXIST && spec->overwrite) {
                created = false;
                fd = tool_open(root_fd, spec->path, O_WRONLY | O_NONBLOCK | O_NOCTTY, 0);
        }
        if (fd == -ENXIO)
                return -EINVAL; /* a FIFO without a reader */
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        if (created && fchmod(fd, spec->mode) < 0) /* exactly the mode asked for, whatever the umask */
                return -errno;
        r = write_back(fd, data, size);
        if (r < 0) {
                if (created) /* nothing changed: not even an empty file is left */
                        (void) tool_unlink(root_fd, spec->path);
                return r;
        }
        if (created)
                result->flags |= TOOL_FLAG_CREATED;
        result->n[0] = size;
        return 0;
}

/* --- walking --------------------------------------------------------------------------------------- */

typedef struct Walk Walk;

/* Called for every entry: returns 1 to descend into it (directories only), 0 to go on, <0 to stop. */
typedef int (*walk_fn)(Walk *w, int dfd, const char *name, const struct stat *st, unsigned depth);

struct Walk {
        walk_fn fn;
        void *userdata;
        char rel[PATH_MAX]; /* the entry's path relative to the walk's start */
        size_t rel_len;
        uint64_t unreadable;
};

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static void free_names(char **names, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
}

static int cmp_typed(const void *a, const void *b) {
        return strcmp(*(char *const *) a + 1, *(char *const *) b + 1);
}

/* The names in a directory, sorted; with types, each entry's first byte is its d_type (DT_UNKNOWN
 * where the file system does not say) and the name follows. */
static int list_names_full(int dfd, bool types, char ***ret, size_t *ret_n) {
        int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
        char **names = NULL;
        size_t n = 0, alloc = 0;
        struct dirent *de;
        DIR *d;

        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -errno;
        }
        rewinddir(d);
        while ((errno = 0, de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (n == alloc) {
                        size_t a = MAX(alloc * 2, (size_t) 32);
                        char **l = reallocarray(names, a, sizeof(char *));
                        if (!l)
                                goto oom;
                        names = l;
                        alloc = a;
                }
                size_t len = strlen(de->d_name);
                names[n] = malloc(len + 2);
                if (!names[n])
                        goto oom;
                names[n][0] = (char) de->d_type;
                memcpy(names[n] + types, de->d_name, len + 1);
                n++;
        }
        closedir(d);
        if (n > 0)
                qsort(names, n, sizeof(char *), types ? cmp_typed : cmp_str);
        *ret = names;
        *ret_n = n;
        return 0;
oom:
        closedir(d);
        free_names(names, n);
        return -ENOMEM;
}

static int list_names(int dfd, char ***ret, size_t *ret_n) {
        return list_names_full(dfd, false, ret, ret_n);
}

static int walk_dir(Walk *w, int dfd, unsigned depth) {
        char **names = NULL;
        size_t n = 0;
        int r;

        r = list_names_full(dfd, true, &names, &n);
        if (r < 0) {
                w->unreadable++;
                return r == -ENOMEM ? r : 0;
        }
        for (size_t i = 0; i < n; i++) {
                const char *name = names[i] + 1;
                size_t saved = w->rel_len, len = strlen(name);
                struct stat st = {};

                if (saved + 1 + len >= sizeof(w->rel))
                        continue;
                if (saved > 0)
                        w->rel[w->rel_len++] = '/';
                memcpy(w->rel + w->rel_len, name, len + 1);
                w->rel_len += len;

                /* The walk's callbacks look at the type only: the directory entry's, where the file
                 * system gives it (what is opened later is checked again on its fd). */
                r = 0;
                if (names[i][0] != DT_UNKNOWN)
                        st.st_mode = DTTOIF((unsigned char) names[i][0]);
                else if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        w->unreadable++;
                        r = -1;
                }
                if (r == 0)
                        r = w->fn(w, dfd, name, &st, depth);
                else
                        r = 0;
                if (r > 0 && S_ISDIR(st.st_mode) && depth + 1 < TOOLS_WALK_DEPTH_MAX) {
                        int sub = open_child(dfd, name, O_RDONLY | O_DIRECTORY);
                        if (sub < 0)
                                w->unreadable++;
                        else {
                                r = walk_dir(w, sub, depth + 1);
                                safe_close(sub);
                        }
                }
                w->rel_len = saved;
                w->rel[saved] = 0;
                if (r < 0)
                        break;
        }
        free_names(names, n);
        return r < 0 ? r : 0;
}

#define WALK_STOP (-ECANCELED) /* a callback's "enough" */

static int walk(Walk *w, int dfd) {
        w->rel[0] = 0;
        w->rel_len = 0;
        int r = walk_dir(w, dfd, 0);
        return r == WALK_STOP ? 0 : r;
}

static char type_char(mode_t m) {
        return S_ISREG(m)    ? 'f'
               : S_ISDIR(m)  ? 'd'
               : S_ISLNK(m)  ? 'l'
               : S_ISFIFO(m) ? 'p'
               : S_ISSOCK(m) ? 's'
               : S_ISCHR(m)  ? 'c'
               : S_ISBLK(m)  ? 'b'
                             : '?';
}

/* --- view ------------------------------------------------------------------------------------------ */

typedef struct ViewDir {
        ToolBuf *out;
        uint64_t cap, entries;
        ToolResult *result;
} ViewDir;

static int view_dir_entry(Walk *w, int dfd, const char *name, const struct stat *st, unsigned depth) {
        ViewDir *v = w->userdata;
        bool dir = S_ISDIR(st->st_mode);
        int r;

        if (name[0] == '.')
                return 0;
        if (v->cap > 0 && v->out->size + w->rel_len + 2 > v->cap) {
                v->result->flags |= TOOL_FLAG_TRUNCATED;
                return WALK_STOP;
        }
        r = tool_buf_put(v->out, w->rel, w->rel_len);
        if (r >= 0)
                r = tool_buf_put(v->out, dir ? "/\n" : "\n", dir ? 2 : 1);
        if (r < 0)
                return r;
        v->entries++;
        return dir && depth == 0; /* two levels */
}

int tool_view(int root_fd, const char *path, uint64_t start, uint64_t end, uint64_t cap, ToolBuf *out,
              ToolResult *result) {
        _cleanup_free_ char *data = NULL;
        size_t size = 0;
        int r;

        _cleanup_close_ int fd = tool_open(root_fd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
        if (fd < 0)
                return fd;
        r = read_fd_all(fd, TOOLS_FILE_MAX, &data, &size);
        if (r == -EISDIR) {
                ViewDir v = {.out = out, .cap = cap, .result = result};
                Walk w = {.fn = view_dir_entry, .userdata = &v};
                result->flags |= TOOL_FLAG_DIRECTORY;
                r = walk(&w, fd);
                result->n[0] = v.entries;
                return r;
        }
        if (r < 0)
                return r;
        if (tool_is_binary(data, size)) {
                result->status = TOOL_BINARY;
                return 0;
        }
        r = tool_number_lines(data, size, start, end, cap, out, result);
        result->n[3] = size;
        return r;
}

/* --- str_replace, insert --------------------------------------------------------------------------- */

/* Opens a regular file for reading and writing and reads it: returns the fd. */
static int open_rw(int root_fd, const char *path, char **ret_data, size_t *ret_size) {
        int fd = tool_open(root_fd, path, O_RDWR | O_NONBLOCK | O_NOCTTY, 0);
        if (fd == -ENXIO)
                return -EINVAL; /* a FIFO without a writer */
        if (fd < 0)
                return fd;
        int r = read_fd_all(fd, TOOLS_FILE_MAX, ret_data, ret_size);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        return fd;
}

int tool_str_replace(int root_fd, const char *path, const void *old, size_t old_size, const void *new,
                     size_t new_size, ToolResult *result) {
        _cleanup_free_ char *data = NULL;
        ToolBuf b = {};
        size_t size = 0, first = 0;
        int r;

        if (old_size == 0)
                return -EINVAL;
        _cleanup_close_ int fd = open_rw(root_fd, path, &data, &size);
        if (fd < 0)
                return fd;
        uint64_t n = tool_count_occurrences(data, size, old, old_size, 0, &first);
        result->n[0] = n;
        if (n != 1) {
                result->status = n == 0 ? TOOL_NO_MATCH : TOOL_AMBIGUOUS;
                return 0;
        }
        if (size - old_size + new_size > TOOLS_FILE_MAX)
                return -EFBIG;
        r = tool_buf_put(&b, data, first);
        if (r >= 0)
                r = tool_buf_put(&b, new, new_size);
        if (r >= 0)
                r = tool_buf_put(&b, data + first + old_size, size - first - old_size);
        if (r >= 0)
                r = write_back(fd, b.data ?: (uint8_t *) "", b.size);
        result->n[1] = tool_line_of_offset(data, size, first);
        result->n[2] = b.size;
        tool_buf_free(&b);
        return r;
}

int tool_insert(int root_fd, const char *path, uint64_t line, const void *text, size_t text_size,
                ToolResult *result) {
        _cleanup_free_ char *data = NULL;
        ToolBuf b = {};
        size_t size = 0;
        int r;

        _cleanup_close_ int fd = open_rw(root_fd, path, &data, &size);
        if (fd < 0)
                return fd;
        if (tool_is_binary(data, size)) {
                result->status = TOOL_BINARY;
                return 0;
        }
        if (size + text_size + 2 > TOOLS_FILE_MAX)
                return -EFBIG;
        r = tool_insert_lines(data, size, line, text, text_size, &b);
        if (r == -ERANGE) {
                result->status = TOOL_LINE_RANGE;
                result->n[0] = tool_count_lines(data, size);
                tool_buf_free(&b);
                return 0;
        }
        if (r >= 0)
                r = write_back(fd, b.data ?: (uint8_t *) "", b.size);
        result->n[0] = tool_count_lines(b.data, b.size);
        result->n[1] = b.size;
        tool_buf_free(&b);
        return r;
}

/* --- ls -------------------------------------------------------------------------------------------- */

static uint64_t mtime_usec(const struct stat *st) {
        if (st->st_mtim.tv_sec < 0)
                return 0;
        return (uint64_t) st->st_mtim.tv_sec * USEC_PER_SEC + (uint64_t) st->st_mtim.tv_nsec / 1000;
}

static int put_ls_record(ToolBuf *out, const char *name, const struct stat *st) {
        int r = tool_buf_put_bytes(out, name, strlen(name));
        if (r >= 0)
                r = tool_buf_put_u32(out, (uint32_t) type_char(st->st_mode));
        if (r >= 0)
                r = tool_buf_put_u32(out, st->st_mode & 07777);
        if (r >= 0)
                r = tool_buf_put_u64(out, (uint64_t) st->st_size);
        if (r >= 0)
                r = tool_buf_put_u64(out, mtime_usec(st));
        return r;
}

int tool_ls(int root_fd, const char *path, uint64_t max, uint64_t cap, ToolBuf *out, ToolResult *result) {
        char **names = NULL;
        size_t n = 0;
        struct stat st;
        int r;

        _cleanup_close_ int fd = tool_open(root_fd, path, O_RDONLY | O_DIRECTORY, 0);
        if (fd == -ENOTDIR) {
                /* Not a directory: the entry itself (a symlink as a symlink). */
                _cleanup_close_ int p = tool_open(root_fd, path, O_PATH | O_NOFOLLOW, 0);
                if (p < 0)
                        return p;
                if (fstat(p, &st) < 0)
                        return -errno;
                const char *slash = strrchr(path, '/');
                r = put_ls_record(out, slash ? slash + 1 : path, &st);
                result->n[0] = 1;
                return r;
        }
        if (fd < 0)
                return fd;
        r = list_names(fd, &names, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                if (fstatat(fd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* gone meanwhile */
                if ((max > 0 && result->n[0] >= max) ||
                    (cap > 0 && out->size + strlen(names[i]) + 32 > cap)) {
                        result->flags |= TOOL_FLAG_TRUNCATED;
                        break;
                }
                r = put_ls_record(out, names[i], &st);
                if (r < 0)
                        break;
                result->n[0]++;
        }
        free_names(names, n);
        return r < 0 ? r : 0;
}

/* --- glob ------------------------------------------------------------------------------------------ */

typedef struct GlobWalk {
        const char *pattern;
        uint64_t max;
        char **paths;
        size_t n, alloc;
        ToolResult *result;
} GlobWalk;

static int glob_entry(Walk *w, int dfd, const char *name, const struct stat *st, unsigned depth) {
        GlobWalk *g = w->userdata;

        if (tool_glob_match(g->pattern, w->rel)) {
                if (g->max > 0 && g->n >= g->max) {
                        g->result->flags |= TOOL_FLAG_TRUNCATED;
                        return WALK_STOP;
                }
                if (g->n == g->alloc) {
                        size_t a = MAX(g->alloc * 2, (size_t) 64);
                        char **l = reallocarray(g->paths, a, sizeof(char *));
                        if (!l)
                                return -ENOMEM;
                        g->paths = l;
                        g->alloc = a;
                }
                g->paths[g->n] = strdup(w->rel);
                if (!g->paths[g->n])
                        return -ENOMEM;
                g->n++;
        }
        return S_ISDIR(st->st_mode) && tool_glob_match_dir(g->pattern, w->rel);
}

static int put_joined(ToolBuf *out, const char *base, const char *rel) {
        size_t bl = strlen(base), rl = strlen(rel);
        bool slash = bl > 0 && base[bl - 1] != '/' && rl > 0;
        int r = tool_buf_put_u32(out, (uint32_t) (bl + slash + rl));
        if (r >= 0)
                r = tool_buf_put(out, base, bl);
        if (r >= 0 && slash)
                r = tool_buf_put(out, "/", 1);
        if (r >= 0)
                r = tool_buf_put(out, rel, rl);
        return r;
}

int tool_glob(int root_fd, const char *base, const char *pattern, uint64_t max, uint64_t cap, ToolBuf *out,
              ToolResult *result) {
        GlobWalk g = {.pattern = pattern, .max = max, .result = result};
        Walk w = {.fn = glob_entry, .userdata = &g};
        int r;

        _cleanup_close_ int fd = tool_open(root_fd, base, O_RDONLY | O_DIRECTORY, 0);
        if (fd < 0)
                return fd;
        r = walk(&w, fd);
        if (r >= 0 && g.n > 0)
                qsort(g.paths, g.n, sizeof(char *), cmp_str);
        for (size_t i = 0; r >= 0 && i < g.n; i++) {
                if (cap > 0 && out->size + strlen(base) + strlen(g.paths[i]) + 8 > cap) {
                        result->flags |= TOOL_FLAG_TRUNCATED;
                        break;
                }
                r = put_joined(out, base, g.paths[i]);
                if (r >= 0)
                        result->n[0]++;
        }
        free_names(g.paths, g.n);
        return r;
}

/* --- grep ------------------------------------------------------------------------------------------ */

/* A compiled grep pattern: per line, as grep matches, and, where it means the same, over a whole file. */
typedef struct GrepCode {
        pcre2_code *line;
        pcre2_code *buffer; /* multiline; NULL if the pattern may match a line alone but not in a file */
} GrepCode;

static bool grep_per_line_only = false;

void tool_grep_force_per_line(bool b) {
        grep_per_line_only = b;
}

/* Whether a line that matches the pattern on its own is sure to match it, at the same place, when it is
 * one line of a file searched in multiline mode. That holds unless the pattern can look beyond the
 * line's ends or at the subject's: lookaround, \A \Z \z \G, backtracking verbs. Conservative: any such
 * sequence anywhere (even where it would be literal) rules the prefilter out. */
static bool pattern_same_in_buffer(const char *pattern) {
        static const char *const unsafe[] = { "(?<", "(?=", "(?!", "(*", "\\A", "\\Z", "\\z", "\\G" };
        for (size_t i = 0; i < ELEMENTSOF(unsafe); i++)
                if (strstr(pattern, unsafe[i]))
                        return false;
        return true;
}

static pcre2_code *grep_compile_one(const char *pattern, uint32_t flags, char *err, size_t err_size) {
        int code = 0;
        PCRE2_SIZE offset = 0;
        pcre2_compile_context *cc = pcre2_compile_context_create(NULL);

        if (!cc) {
                snprintf(err, err_size, "out of memory");
                return NULL;
        }
        /* lines end at LF only, whatever default the library was built with */
        (void) pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
        pcre2_code *re = pcre2_compile((PCRE2_SPTR) pattern, PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | flags, &code, &offset, cc);
        pcre2_compile_context_free(cc);
        if (!re) {
                PCRE2_UCHAR msg[256];
                if (pcre2_get_error_message(code, msg, sizeof(msg)) < 0)
                        snprintf((char *) msg, sizeof(msg), "error %d", code);
                snprintf(err, err_size, "%s at offset %zu", (const char *) msg, (size_t) offset);
                return NULL;
        }
        (void) pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* without JIT it still works, slower */
        return re;
}

void *tool_grep_compile(const char *pattern, bool ignore_case, char *err, size_t err_size) {
        uint32_t flags = ignore_case ? PCRE2_CASELESS : 0;
        GrepCode *c = calloc(1, sizeof(GrepCode));

        if (!c) {
                snprintf(err, err_size, "out of memory");
                return NULL;
        }
        c->line = grep_compile_one(pattern, flags, err, err_size);
        if (!c->line) {
                free(c);
                return NULL;
        }
        if (pattern_same_in_buffer(pattern)) {
                char ignored[64];
                c->buffer = grep_compile_one(pattern, flags | PCRE2_MULTILINE, ignored, sizeof(ignored));
        }
        return c;
}

void tool_grep_free(void *code) {
        GrepCode *c = code;
        if (!c)
                return;
        pcre2_code_free(c->line);
        pcre2_code_free(c->buffer);
        free(c);
}

typedef struct GrepWalk {
        const ToolGrepSpec *spec;
        const char *base; /* the path searched, for the records' file names */
        pcre2_match_data *md;
        char *buf; /* the file being searched */
        size_t buf_size;
        ToolBuf *out;
        ToolResult *result;
} GrepWalk;

static uint64_t now_mono(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

/* Reads a regular file into the walk's buffer, which grows as needed and is kept for the next. */
static int grep_read(GrepWalk *g, int fd, size_t *ret_size) {
        struct stat st;
        size_t size = 0;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        if ((uint64_t) st.st_size > TOOLS_FILE_MAX)
                return -EFBIG;
        for (;;) {
                if (size == g->buf_size) {
                        if (g->buf_size > TOOLS_FILE_MAX)
                                return -EFBIG;
                        size_t a = MAX(g->buf_size * 2, MAX((size_t) st.st_size + 1, (size_t) 65536));
                        char *b = realloc(g->buf, a);
                        if (!b)
                                return -ENOMEM;
                        g->buf = b;
                        g->buf_size = a;
                }
                ssize_t n = read(fd, g->buf + size, g->buf_size - size);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                size += n;
        }
        if (size > TOOLS_FILE_MAX)
                return -EFBIG;
        *ret_size = size;
        return 0;
}

/* Searches one open file; file_rel is appended to base for the records (NULL: base is the file). */
static int grep_fd(GrepWalk *g, int fd, const char *file_rel) {
        ToolResult *res = g->result;
        size_t size = 0;
        int r;

        r = grep_read(g, fd, &size);
        if (r == -EFBIG) {
                res->n[3]++;
                return 0;
        }
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                res->n[4]++;
                return 0;
        }
        const char *data = g->buf;
        res->n[1]++;
        if (tool_is_binary(data, size)) {
                res->n[2]++;
                return 0;
        }
        /* Every line is matched on its own, as grep does. Where the pattern means the same over the
         * whole file (see pattern_same_in_buffer), one search of the file finds the next line that can
         * match, and the lines before it are skipped: any line that matches alone would have been
         * found at or before its own match. */
        const GrepCode *code = g->spec->code;
        bool prefilter = code->buffer && !grep_per_line_only;
        const char *p = data, *e = data + size;
        uint32_t line = 1;
        while (p < e) {
                if (prefilter) {
                        int m = pcre2_match(code->buffer, (PCRE2_SPTR) data, size, (PCRE2_SIZE) (p - data), 0,
                                            g->md, NULL);
                        if (m == PCRE2_ERROR_NOMATCH)
                                break;
                        if (m < 0)
                                prefilter = false; /* a limit hit: line by line from here */
                        else {
                                const char *start = data + pcre2_get_ovector_pointer(g->md)[0];
                                for (const char *nl; p < start && (nl = memchr(p, '\n', start - p));) {
                                        p = nl + 1;
                                        line++;
                                }
                        }
                }
                const char *nl = memchr(p, '\n', e - p);
                size_t len = nl ? (size_t) (nl - p) : (size_t) (e - p);
                int m = pcre2_match(code->line, (PCRE2_SPTR) p, len, 0, 0, g->md, NULL);
                if (m >= 0) {
                        size_t cut = MIN(len, (size_t) TOOLS_GREP_LINE_MAX);
                        size_t need = strlen(g->base) + (file_rel ? strlen(file_rel) + 1 : 0) + cut + 16;
                        if ((g->spec->max > 0 && res->n[0] >= g->spec->max) ||
                            (g->spec->cap > 0 && g->out->size + need > g->spec->cap)) {
                                res->flags |= TOOL_FLAG_TRUNCATED;
                                return WALK_STOP;
                        }
                        r = put_joined(g->out, g->base, file_rel ?: "");
                        if (r >= 0)
                                r = tool_buf_put_u32(g->out, line);
                        if (r >= 0)
                                r = tool_buf_put_bytes(g->out, p, cut);
                        if (r < 0)
                                return r;
                        res->n[0]++;
                }
                p = nl ? nl + 1 : e;
                line++;
        }
        return 0;
}

static int grep_entry(Walk *w, int dfd, const char *name, const struct stat *st, unsigned depth) {
        GrepWalk *g = w->userdata;

        if (S_ISDIR(st->st_mode))
                return 1;
        if (!S_ISREG(st->st_mode))
                return 0; /* symlinks are not followed, devices and FIFOs never read */
        if (g->spec->deadline > 0 && now_mono() > g->spec->deadline) {
                g->result->flags |= TOOL_FLAG_TIMED_OUT | TOOL_FLAG_TRUNCATED;
                return WALK_STOP;
        }
        if (g->spec->glob && !tool_glob_match(g->spec->glob, strchr(g->spec->glob, '/') ? w->rel : name))
                return 0;
        _cleanup_close_ int fd = open_child(dfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) {
                g->result->n[4]++;
                return 0;
        }
        return grep_fd(g, fd, w->rel);
}

int tool_grep(int root_fd, const ToolGrepSpec *spec, ToolBuf *out, ToolResult *result) {
        GrepWalk g = {.spec = spec, .base = spec->path, .out = out, .result = result};
        struct stat st;
        int r;

        _cleanup_close_ int fd = tool_open(root_fd, spec->path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return -errno;
        g.md = pcre2_match_data_create(1, NULL);
        if (!g.md)
                return -ENOMEM;
        if (S_ISDIR(st.st_mode)) {
                Walk w = {.fn = grep_entry, .userdata = &g};
                r = walk(&w, fd);
                result->n[4] += w.unreadable;
        } else if (S_ISREG(st.st_mode)) {
                r = grep_fd(&g, fd, NULL);
                if (r == WALK_STOP)
                        r = 0;
        } else
                r = -EINVAL;
        pcre2_match_data_free(g.md);
        free(g.buf);
        return r;
}
