/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The file tools' work (file_create, view, str_replace, …, grep) on a tree seen through a root fd. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Everything here resolves paths with openat2(root_fd, path, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS),
 * and walks trees one name at a time without following symlinks, so nothing above root_fd is ever
 * reached, whatever links, ".." or concurrent renames the tree holds. In sandboxd it runs in a helper
 * that already sees the sandbox's mount tree as the sandbox's user (sandbox-tools.c); the unit test runs
 * it on a scratch directory. The functions return 0 or a negative errno; outcomes that are the caller's
 * mistake rather than a system error are reported in ToolResult.status. */

#define TOOLS_FILE_MAX       (UINT64_C(64) << 20) /* largest file any tool reads or writes */
#define TOOLS_GREP_LINE_MAX  4096                 /* a longer matching line is cut to this many bytes */
#define TOOLS_WALK_DEPTH_MAX 64
#define TOOLS_BINARY_PROBE   8192 /* a NUL byte in this many leading bytes: binary */

typedef enum ToolStatus {
        TOOL_OK = 0,
        TOOL_NO_MATCH,   /* str_replace: old does not occur */
        TOOL_AMBIGUOUS,  /* str_replace: old occurs n[0] times */
        TOOL_BINARY,     /* view, str_replace, insert: the file holds NUL bytes */
        TOOL_LINE_RANGE, /* view, insert: the line is beyond the file's n[0] lines */
        TOOL_BAD_PATTERN, /* grep: the pattern does not compile; the body is PCRE2's message */
        _TOOL_STATUS_MAX,
} ToolStatus;

enum {
        TOOL_FLAG_TRUNCATED = 1 << 0, /* a cap cut the result short */
        TOOL_FLAG_DIRECTORY = 1 << 1, /* view: the path is a directory, the body a listing */
        TOOL_FLAG_TIMED_OUT = 1 << 2, /* grep: the deadline cut the search short */
        TOOL_FLAG_CREATED = 1 << 3,   /* file_create: the file did not exist */
};

/* What a tool reports besides its body; the meaning of n[] is per tool (see each function). */
typedef struct ToolResult {
        int32_t status;
        uint32_t flags;
        uint64_t n[6];
} ToolResult;

/* A growable byte buffer for bodies. Once an allocation failed, every put fails with -ENOMEM. */
typedef struct ToolBuf {
        uint8_t *data;
        size_t size, alloc;
} ToolBuf;

int tool_buf_put(ToolBuf *b, const void *p, size_t n);
int tool_buf_put_u32(ToolBuf *b, uint32_t v);
int tool_buf_put_u64(ToolBuf *b, uint64_t v);
int tool_buf_put_bytes(ToolBuf *b, const void *p, size_t n); /* u32 length, then the bytes */
void tool_buf_free(ToolBuf *b);

/* Reads what tool_buf_put_* wrote. Each returns 0, or -EBADMSG if the buffer ends early. */
typedef struct ToolReader {
        const uint8_t *p;
        size_t left;
} ToolReader;

int tool_read_u32(ToolReader *r, uint32_t *ret);
int tool_read_u64(ToolReader *r, uint64_t *ret);
int tool_read_bytes(ToolReader *r, const void **ret, size_t *ret_size);

/* --- pure logic ---------------------------------------------------------------------------------- */

/* Lines in data: '\n' count, plus one for an unterminated last line. */
uint64_t tool_count_lines(const void *data, size_t size);

/* Where old occurs in data, overlapping occurrences counted ("aa" occurs twice in "aaa", so it is not
 * unique there); stops counting at max (0: no limit). *ret_first is the first offset, if any. */
uint64_t tool_count_occurrences(const void *data, size_t size, const void *needle, size_t needle_size,
                                uint64_t max, size_t *ret_first);

/* 1-based line of a byte offset. */
uint64_t tool_line_of_offset(const void *data, size_t size, size_t offset);

/* Appends lines start..end (1-based, inclusive; end 0: to the last) of data to out, each as
 * "%6u\t<line>\n", like cat -n. Stops before a line that would take out beyond cap bytes (0: no cap)
 * and sets TOOL_FLAG_TRUNCATED. result: n[0] lines in data, n[1] first shown, n[2] last shown (0 if
 * none). start beyond the last line (except start 1 of an empty file) → status TOOL_LINE_RANGE. */
int tool_number_lines(const void *data, size_t size, uint64_t start, uint64_t end, uint64_t cap,
                      ToolBuf *out, ToolResult *result);

/* data with text inserted after line (0: before the first), as whole lines: a '\n' is added to text
 * if it lacks one, and to data's unterminated last line if text goes after it. line beyond the last
 * → -ERANGE. */
int tool_insert_lines(const void *data, size_t size, uint64_t line, const void *text, size_t text_size,
                      ToolBuf *out);

/* Whether data looks binary: a NUL byte in its first TOOLS_BINARY_PROBE bytes. */
bool tool_is_binary(const void *data, size_t size);

/* Glob matching on '/'-separated paths: "*", "?" and "[…]" within one name (fnmatch, a leading dot
 * only matched by a literal dot), "**" as a whole segment for any number of names not starting with a
 * dot. tool_glob_match: the whole of path. tool_glob_match_dir: whether something below directory dir
 * could match (so a walk need not descend where nothing can). */
bool tool_glob_match(const char *pattern, const char *path);
bool tool_glob_match_dir(const char *pattern, const char *dir);

/* Splits pattern's leading segments without wildcards off: the pattern "src", "lib", "**" (joined by
 * slashes) gives base "src/lib" and rest "**". *ret_base is malloc'd ("" if none, "/" for an absolute
 * pattern without literal segments); *ret_rest points into pattern. */
int tool_glob_split(const char *pattern, char **ret_base, const char **ret_rest);

/* A NUL-terminated copy of data that is valid UTF-8: each byte of an invalid sequence becomes U+FFFD.
 * For audit details and error messages, which must be UTF-8; never for data going back to a caller. */
char *tool_utf8_sanitize(const void *data, size_t size);

/* --- operations on a tree -------------------------------------------------------------------------- */

/* openat2(root_fd, path, flags, mode, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS); returns the fd or -errno.
 * Where a seccomp filter makes openat2 fail with ENOSYS (systemd's RestrictSUIDSGID= does), the same
 * resolution is done from userspace, one name at a time with O_NOFOLLOW. */
int tool_open(int root_fd, const char *path, int flags, mode_t mode);

/* fstat() of a file to be read whole: 0 and *ret for a regular file; -EISDIR for a directory, -EINVAL
 * for anything else (a FIFO or device would hang or surprise the reader). */
int tool_fstat_regular(int fd, struct stat *ret);

/* For tests: always use that userspace resolution. */
void tool_open_force_fallback(bool b);

/* Reads the regular file at path (-EISDIR for a directory, -EINVAL for other non-regular files, a FIFO
 * never blocks) into *ret_data (NUL-terminated, malloc'd). Larger than cap → -EFBIG, as for every
 * tool below whose file, or result, would be larger than TOOLS_FILE_MAX. */
int tool_read_file(int root_fd, const char *path, uint64_t cap, char **ret_data, size_t *ret_size);

typedef struct ToolCreateSpec {
        const char *path;
        const void *data; /* or from data_fd */
        size_t size;
        int data_fd; /* -1: data */
        mode_t mode;
        bool overwrite, create_dirs;
} ToolCreateSpec;

/* file_create: -EEXIST if the file exists and !overwrite; result: n[0] bytes written, TOOL_FLAG_CREATED. */
int tool_file_create(int root_fd, const ToolCreateSpec *spec, ToolResult *result);

/* view: a file's lines numbered (as tool_number_lines) or, for a directory, its entries two levels deep,
 * hidden ones (a leading dot) left out, one relative path per line, directories ending in '/', sorted.
 * result: as tool_number_lines, plus n[3] the file's size; directories: TOOL_FLAG_DIRECTORY, n[0]
 * entries listed. Binary files → TOOL_BINARY. */
int tool_view(int root_fd, const char *path, uint64_t start, uint64_t end, uint64_t cap, ToolBuf *out,
              ToolResult *result);

/* str_replace: result n[0] occurrences (when not 1: status TOOL_NO_MATCH / TOOL_AMBIGUOUS and nothing
 * written), n[1] line of the replaced text, n[2] the new size. */
int tool_str_replace(int root_fd, const char *path, const void *old, size_t old_size, const void *new,
                     size_t new_size, ToolResult *result);

/* insert: result n[0] lines after the insertion, n[1] the new size; line beyond the last →
 * TOOL_LINE_RANGE with n[0] the file's lines. */
int tool_insert(int root_fd, const char *path, uint64_t line, const void *text, size_t text_size,
                ToolResult *result);

/* Records of ls: bytes name, u32 type ('f' file, 'd' directory, 'l' symlink, 'p' FIFO, 's' socket, 'c'
 * character device, 'b' block device, '?'), u32 mode (permission bits), u64 size, u64 mtime (µs since
 * the epoch). Sorted by name; a path that is not a directory gives its own entry. result: n[0] entries. */
int tool_ls(int root_fd, const char *path, uint64_t max, uint64_t cap, ToolBuf *out, ToolResult *result);

/* Records of glob: bytes path (absolute: base + "/" + the match). Sorted. result: n[0] paths. */
int tool_glob(int root_fd, const char *base, const char *pattern, uint64_t max, uint64_t cap, ToolBuf *out,
              ToolResult *result);

typedef struct ToolGrepSpec {
        const char *path;  /* a file or a directory to search (recursively) */
        const void *code;  /* from tool_grep_compile() */
        const char *glob;  /* only files whose name (or, with a '/', relative path) matches */
        uint64_t max;      /* matching lines */
        uint64_t cap;      /* bytes of records */
        uint64_t deadline; /* CLOCK_MONOTONIC µs, 0: none */
} ToolGrepSpec;

/* Records of grep: bytes file (absolute), u32 line, bytes text (without its newline, at most
 * TOOLS_GREP_LINE_MAX bytes). Files in sorted order, symlinks not followed, binary files and files above
 * TOOLS_FILE_MAX skipped and counted. result: n[0] matches, n[1] files searched, n[2] binary files
 * skipped, n[3] large files skipped, n[4] unreadable files and directories skipped. */
int tool_grep(int root_fd, const ToolGrepSpec *spec, ToolBuf *out, ToolResult *result);

/* Compiles a pattern for tool_grep (PCRE2, UTF mode, invalid UTF-8 in subjects tolerated; JIT if it
 * can). Returns the code (free with tool_grep_free) or NULL with a message in err (of err_size). */
void *tool_grep_compile(const char *pattern, bool ignore_case, char *err, size_t err_size);
void tool_grep_free(void *code);

/* For tests: match every line on its own, without searching the whole file first. */
void tool_grep_force_per_line(bool b);
