/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The file tools on the bus (FileCreate, View, …, Grep), each call a job for the sandbox's file helper.
 *
 * As for WriteFile and ReadFile (sandbox-files.c), sandboxd never touches a sandbox's files itself:
 * sandboxd-file-helper, confined as the sandbox's user in its mount namespace, does the work of
 * file-tools.c through openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS). It writes a ToolResult and the
 * body into a memfd and answers with 0 or an errno; sandboxd, which never waits for it, builds the reply
 * from the memfd then, after spooling the call's audit row. */
#include "sandbox-tools.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit-row.h"
#include "caller.h"
#include "file-tools.h"
#include "sandbox-files.h"
#include "sandbox-options.h"
#include "sandbox.h"
#include "sandboxd-manager.h"
#include "time-util.h"


static const char *const tool_operation[_TOOL_KIND_MAX] = {
        [TOOL_FILE_CREATE] = "file_create",
        [TOOL_VIEW] = "view",
        [TOOL_STR_REPLACE] = "str_replace",
        [TOOL_INSERT] = "insert",
        [TOOL_LS] = "ls",
        [TOOL_GLOB] = "glob",
        [TOOL_GREP] = "grep",
};

#define TOOL_RESULTS_MAX         UINT32_C(1000000)
#define TOOL_GREP_DEADLINE_USEC  (60 * USEC_PER_SEC)  /* grep answers what it found by then */
#define TOOL_REPLY_MAX           (UINT64_C(24) << 20) /* well below the bus's 32 MiB per message */

static const uint32_t default_max_results[_TOOL_KIND_MAX] = {
        [TOOL_LS] = 10000,
        [TOOL_GLOB] = 10000,
        [TOOL_GREP] = 1000,
};

static const FileJobKind tool_job_kind[_TOOL_KIND_MAX] = {
        [TOOL_FILE_CREATE] = FILE_JOB_CREATE,
        [TOOL_VIEW] = FILE_JOB_VIEW,
        [TOOL_STR_REPLACE] = FILE_JOB_STR_REPLACE,
        [TOOL_INSERT] = FILE_JOB_INSERT,
        [TOOL_LS] = FILE_JOB_LS,
        [TOOL_GLOB] = FILE_JOB_GLOB,
        [TOOL_GREP] = FILE_JOB_GREP,
};

typedef struct ToolCall {
        Manager *manager;
        ToolKind kind;
        sd_bus_message *request;
        int result_fd; /* memfd: ToolResult, then the body */
        int fd;        /* the caller's: FileCreate's source, View's destination; or -1 */

        const char *arg;          /* the path, or Glob's and Grep's pattern: points into request */
        const char *path_opt;     /* Glob, Grep: the option "path" (into request) */
        const void *path_bytes;   /* the option "path_bytes" (into request) */
        size_t path_bytes_size;
        char *path;               /* absolute, as the sandbox sees it; Glob: the base directory */
        char *printable_path;     /* the same, valid UTF-8, for the audit row and messages */
        const void *data, *data2; /* point into request, which we hold */
        size_t size, size2;
        const char *pattern; /* Glob: what is left below path; Grep: the regex */
        char *pattern_arg;   /* as given */
        char *glob;
        uint32_t line, start_line, end_line, mode, max_results;
        bool overwrite, create_dirs, ignore_case;
        uint64_t cap;

        Caller caller;
        char session_id[SANDBOX_NAME_MAX + 1];
        uint64_t started_at, mono;
} ToolCall;

ToolCall *tool_call_free(ToolCall *tc) {
        if (!tc)
                return NULL;
        safe_close(tc->result_fd);
        safe_close(tc->fd);
        sd_bus_message_unref(tc->request);
        free(tc->path);
        free(tc->printable_path);
        free(tc->pattern_arg);
        free(tc->glob);
        free(tc);
        return NULL;
}

/* --- the audit row --------------------------------------------------------------------------------- */

/* The row's detail: what was asked, and what came of it (res) or the error. NULL on OOM. */
static char *tool_detail(ToolCall *tc, const char *error_name, const char *error_message, const ToolResult *res) {
        json_object *o = json_object_new_object();
        char *detail = NULL;

        if (o) {
                if (tc->printable_path)
                        json_object_object_add(o, "path", json_object_new_string(tc->printable_path));
                if (tc->pattern_arg)
                        json_object_object_add(o, "pattern", json_object_new_string(tc->pattern_arg));
                if (tc->glob)
                        json_object_object_add(o, "glob", json_object_new_string(tc->glob));
                if (tc->kind == TOOL_FILE_CREATE || tc->kind == TOOL_STR_REPLACE || tc->kind == TOOL_INSERT)
                        json_object_object_add(o, "bytes", json_object_new_uint64(tc->size + tc->size2));
                if (tc->kind == TOOL_INSERT)
                        json_object_object_add(o, "line", json_object_new_uint64(tc->line));
                if (tc->kind == TOOL_FILE_CREATE)
                        json_object_object_add(o, "overwrite", json_object_new_boolean(tc->overwrite));
                if (res && !error_name) {
                        if (tc->kind == TOOL_LS || tc->kind == TOOL_GLOB || tc->kind == TOOL_GREP)
                                json_object_object_add(o, "results", json_object_new_uint64(res->n[0]));
                        if (res->flags & TOOL_FLAG_TRUNCATED)
                                json_object_object_add(o, "truncated", json_object_new_boolean(true));
                }
                if (error_name) {
                        json_object_object_add(o, "error", json_object_new_string(error_name));
                        json_object_object_add(o, "message",
                                               json_object_new_string(strempty(error_message)));
                }
                detail = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
                json_object_put(o);
        }
        return detail;
}

char *tool_call_detail(ToolCall *tc, const char *error_name, const char *error_message) {
        return tool_detail(tc, error_name, error_message, NULL);
}

static void tool_audit(ToolCall *tc, const char *event, const char *error_name, const char *error_message,
                       const ToolResult *res) {
        _cleanup_free_ char *detail = tool_detail(tc, error_name, error_message, res);
        AuditRow row = {
                .session_id = tc->session_id,
                .operation = tool_operation[tc->kind],
                .event = event,
                .detail = detail,
                .exit_code = error_name ? -1 : 0,
                .started_at = tc->started_at,
                .duration_usec = now_usec(CLOCK_MONOTONIC) - tc->mono,
        };
        manager_audit(tc->manager, &tc->caller, &row);
}

/* Answers with an error, after its audit row. */
static void tool_fail(ToolCall *tc, const char *name, const char *message) {
        tool_audit(tc, streq(name, SANDBOXD_ERROR_PERMISSION_DENIED) ? "denied" : "failed", name, message, NULL);
        (void) sd_bus_reply_method_errorf(tc->request, name, "%s", message);
}

static void tool_fail_errno(ToolCall *tc, int error) {
        const char *p = strna(tc->printable_path), *name;
        char msg[PATH_MAX + 256];

        switch (error) {
        case ENOENT:
        case ENOTDIR:
                name = SANDBOXD_ERROR_NO_SUCH_FILE;
                snprintf(msg, sizeof(msg), "%s: %s: %s", tool_method[tc->kind], p, strerror(error));
                break;
        case EEXIST:
                name = SANDBOXD_ERROR_FILE_EXISTS;
                snprintf(msg, sizeof(msg), "%s exists already (pass overwrite to replace it).", p);
                break;
        case EACCES:
        case EPERM:
        case EROFS:
                name = SANDBOXD_ERROR_PERMISSION_DENIED;
                snprintf(msg, sizeof(msg), "%s: %s in the sandbox: %s", tool_method[tc->kind], p,
                         strerror(error));
                break;
        case EISDIR:
                name = SD_BUS_ERROR_INVALID_ARGS;
                snprintf(msg, sizeof(msg), "%s is a directory.", p);
                break;
        case EINVAL:
                name = SD_BUS_ERROR_INVALID_ARGS;
                snprintf(msg, sizeof(msg), "%s is not a regular file.", p);
                break;
        case ELOOP:
        case ENAMETOOLONG:
        case EXDEV:
                name = SD_BUS_ERROR_INVALID_ARGS;
                snprintf(msg, sizeof(msg), "%s: %s: %s", tool_method[tc->kind], p, strerror(error));
                break;
        case EFBIG:
                name = SANDBOXD_ERROR_LIMIT_EXCEEDED;
                snprintf(msg, sizeof(msg),
                         "%s: %s: the file or the result would be larger than %" PRIu64
                         " bytes, the limit of the file tools.",
                         tool_method[tc->kind], p, TOOLS_FILE_MAX);
                break;
        case ENOSPC:
        case EDQUOT:
                name = SANDBOXD_ERROR_LIMIT_EXCEEDED;
                snprintf(msg, sizeof(msg), "%s: %s: %s", tool_method[tc->kind], p, strerror(error));
                break;
        default:
                name = SD_BUS_ERROR_FAILED;
                snprintf(msg, sizeof(msg), "%s: %s: %s", tool_method[tc->kind], p, strerror(error));
        }
        tool_fail(tc, name, msg);
}

/* --- the reply ------------------------------------------------------------------------------------- */

static const char *type_name(uint32_t c) {
        switch (c) {
        case 'f':
                return "file";
        case 'd':
                return "directory";
        case 'l':
                return "symlink";
        case 'p':
                return "fifo";
        case 's':
                return "socket";
        case 'c':
                return "char-device";
        case 'b':
                return "block-device";
        default:
                return "unknown";
        }
}

static int append_info_counts(sd_bus_message *reply, const ToolResult *res) {
        return sd_bus_message_append(reply, "{sv}{sv}", "count", "t", res->n[0], "truncated", "b",
                                     (int) !!(res->flags & TOOL_FLAG_TRUNCATED));
}

static int build_body(ToolCall *tc, sd_bus_message *reply, const ToolResult *res, const uint8_t *body,
                      size_t size) {
        ToolReader rd = {.p = body, .left = size};
        const void *a, *b;
        size_t an, bn;
        uint32_t u1, u2;
        uint64_t t1, t2;
        int r;

        switch (tc->kind) {
        case TOOL_FILE_CREATE:
                return sd_bus_message_append(reply, "a{sv}", 2, "size", "t", res->n[0], "created", "b",
                                             (int) !!(res->flags & TOOL_FLAG_CREATED));
        case TOOL_STR_REPLACE:
                return sd_bus_message_append(reply, "a{sv}", 2, "line", "t", res->n[1], "size", "t",
                                             res->n[2]);
        case TOOL_INSERT:
                return sd_bus_message_append(reply, "a{sv}", 2, "lines", "t", res->n[0], "size", "t",
                                             res->n[1]);
        case TOOL_VIEW:
                r = sd_bus_message_append_array(reply, 'y', tc->fd >= 0 ? (const void *) "" : body,
                                                tc->fd >= 0 ? 0 : size);
                if (r < 0)
                        return r;
                if (res->flags & TOOL_FLAG_DIRECTORY)
                        return sd_bus_message_append(reply, "a{sv}", 4, "type", "s", "directory", "entries",
                                                     "t", res->n[0], "truncated", "b",
                                                     (int) !!(res->flags & TOOL_FLAG_TRUNCATED), "bytes",
                                                     "t", res->n[4]);
                return sd_bus_message_append(
                        reply, "a{sv}", 7, "type", "s", "file", "lines", "t", res->n[0], "start_line", "t",
                        res->n[1], "end_line", "t", res->n[2], "size", "t", res->n[3], "truncated", "b",
                        (int) !!(res->flags & TOOL_FLAG_TRUNCATED), "bytes", "t", res->n[4]);
        case TOOL_LS:
                r = sd_bus_message_open_container(reply, 'a', "(aysutt)");
                for (uint64_t i = 0; r >= 0 && i < res->n[0]; i++) {
                        r = tool_read_bytes(&rd, &a, &an);
                        if (r >= 0)
                                r = tool_read_u32(&rd, &u1);
                        if (r >= 0)
                                r = tool_read_u32(&rd, &u2);
                        if (r >= 0)
                                r = tool_read_u64(&rd, &t1);
                        if (r >= 0)
                                r = tool_read_u64(&rd, &t2);
                        if (r >= 0)
                                r = sd_bus_message_open_container(reply, 'r', "aysutt");
                        if (r >= 0)
                                r = sd_bus_message_append_array(reply, 'y', a, an);
                        if (r >= 0)
                                r = sd_bus_message_append(reply, "sutt", type_name(u1), u2, t1, t2);
                        if (r >= 0)
                                r = sd_bus_message_close_container(reply);
                }
                break;
        case TOOL_GLOB:
                r = sd_bus_message_open_container(reply, 'a', "ay");
                for (uint64_t i = 0; r >= 0 && i < res->n[0]; i++) {
                        r = tool_read_bytes(&rd, &a, &an);
                        if (r >= 0)
                                r = sd_bus_message_append_array(reply, 'y', a, an);
                }
                break;
        case TOOL_GREP:
                r = sd_bus_message_open_container(reply, 'a', "(ayuay)");
                for (uint64_t i = 0; r >= 0 && i < res->n[0]; i++) {
                        r = tool_read_bytes(&rd, &a, &an);
                        if (r >= 0)
                                r = tool_read_u32(&rd, &u1);
                        if (r >= 0)
                                r = tool_read_bytes(&rd, &b, &bn);
                        if (r >= 0)
                                r = sd_bus_message_open_container(reply, 'r', "ayuay");
                        if (r >= 0)
                                r = sd_bus_message_append_array(reply, 'y', a, an);
                        if (r >= 0)
                                r = sd_bus_message_append(reply, "u", u1);
                        if (r >= 0)
                                r = sd_bus_message_append_array(reply, 'y', b, bn);
                        if (r >= 0)
                                r = sd_bus_message_close_container(reply);
                }
                break;
        default:
                return -EINVAL;
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "{sv}");
        if (r >= 0)
                r = append_info_counts(reply, res);
        if (r >= 0 && tc->kind == TOOL_GREP)
                r = sd_bus_message_append(reply, "{sv}{sv}{sv}{sv}{sv}", "files_searched", "t", res->n[1],
                                          "binary_skipped", "t", res->n[2], "large_skipped", "t", res->n[3],
                                          "unreadable", "t", res->n[4], "timed_out", "b",
                                          (int) !!(res->flags & TOOL_FLAG_TIMED_OUT));
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r;
}

static void tool_reply(ToolCall *tc) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        char msg[PATH_MAX + 256];
        ToolResult res = {};
        struct stat st;
        uint8_t *map = NULL;
        size_t len = 0;
        int r;

        if (pread(tc->result_fd, &res, sizeof(res), 0) != sizeof(res) || fstat(tc->result_fd, &st) < 0)
                return tool_fail_errno(tc, EIO);
        const char *p = tc->printable_path;
        switch (res.status) {
        case TOOL_OK:
                break;
        case TOOL_NO_MATCH:
                snprintf(msg, sizeof(msg), "The text to replace does not occur in %s; nothing was changed.",
                         p);
                return tool_fail(tc, SANDBOXD_ERROR_NO_MATCH, msg);
        case TOOL_AMBIGUOUS:
                snprintf(msg, sizeof(msg),
                         "The text to replace occurs %" PRIu64 " times in %s; it must occur exactly once "
                         "(include more context). Nothing was changed.",
                         res.n[0], p);
                return tool_fail(tc, SANDBOXD_ERROR_AMBIGUOUS_MATCH, msg);
        case TOOL_BINARY:
                snprintf(msg, sizeof(msg), "%s is a binary file (it holds NUL bytes); use ReadFile.", p);
                return tool_fail(tc, SANDBOXD_ERROR_BINARY_FILE, msg);
        case TOOL_LINE_RANGE:
                snprintf(msg, sizeof(msg),
                         "Line %" PRIu32 " is beyond the end of %s, which has %" PRIu64 " lines.",
                         tc->kind == TOOL_INSERT ? tc->line : tc->start_line, p, res.n[0]);
                return tool_fail(tc, SD_BUS_ERROR_INVALID_ARGS, msg);
        case TOOL_BAD_PATTERN: {
                /* the helper's words (PCRE2's), at most what fits, as UTF-8 */
                char err[512] = "";
                ssize_t n = pread(tc->result_fd, err, sizeof(err) - 1, sizeof(res));
                _cleanup_free_ char *text = tool_utf8_sanitize(err, n > 0 ? (size_t) n : 0);
                snprintf(msg, sizeof(msg), "Grep: invalid regular expression: %s.", strna(text));
                return tool_fail(tc, SD_BUS_ERROR_INVALID_ARGS, msg);
        }
        default:
                return tool_fail_errno(tc, EIO);
        }
        if ((size_t) st.st_size > sizeof(res)) {
                len = (size_t) st.st_size - sizeof(res);
                map = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, tc->result_fd, 0);
                if (map == MAP_FAILED)
                        return tool_fail_errno(tc, errno);
        }
        r = sd_bus_message_new_method_return(tc->request, &reply);
        if (r >= 0)
                r = build_body(tc, reply, &res, map ? map + sizeof(res) : (const uint8_t *) "", len);
        if (map)
                munmap(map, (size_t) st.st_size);
        if (r < 0) {
                snprintf(msg, sizeof(msg), "%s: could not build the reply: %s", tool_method[tc->kind],
                         strerror(-r));
                return tool_fail(tc, SD_BUS_ERROR_FAILED, msg);
        }
        tool_audit(tc, "finished", NULL, NULL, &res);
        r = sd_bus_send(NULL, reply, NULL);
        if (r < 0)
                (void) sd_bus_reply_method_errno(tc->request, r, NULL);
}

static void on_tool_done(void *userdata, int status) {
        ToolCall *tc = userdata;

        if (status == ECANCELED) {
                char msg[128];
                snprintf(msg, sizeof(msg), "%s: sandbox %s was deleted during the call.", tool_method[tc->kind],
                         tc->session_id);
                tool_fail(tc, SANDBOXD_ERROR_NOT_RUNNING, msg);
        } else if (status != 0)
                tool_fail_errno(tc, status);
        else
                tool_reply(tc);
        tool_call_free(tc);
}

static int tool_start(Sandbox *s, ToolCall *tc) {
        int r;

        tc->result_fd = memfd_create("sandbox-tool", MFD_CLOEXEC);
        if (tc->result_fd < 0)
                return -errno;
        FileJob job = {
                .kind = tool_job_kind[tc->kind],
                .path = tc->path,
                .pattern = tc->kind == TOOL_GREP ? tc->pattern_arg : tc->pattern,
                .glob = tc->glob,
                .data = tc->data,
                .size = tc->size,
                .data2 = tc->data2,
                .size2 = tc->size2,
                .cap = tc->cap,
                .max_results = tc->max_results,
                .line = tc->line,
                .start_line = tc->start_line,
                .end_line = tc->end_line,
                .timeout_usec = tc->kind == TOOL_GREP ? TOOL_GREP_DEADLINE_USEC : 0,
                .mode = tc->mode,
                .create_dirs = tc->create_dirs,
                .overwrite = tc->overwrite,
                .ignore_case = tc->ignore_case,
        };
        r = sandbox_file_job(s, &job, tc->result_fd, tc->fd, on_tool_done, tc);
        if (r < 0)
                return r;
        tc->fd = safe_close(tc->fd); /* the helper has its copy */
        return 0;
}

/* --- parsing the call ------------------------------------------------------------------------------ */

/* The options into tc: path and path_bytes point into the message. */
static int read_options(ToolCall *tc, sd_bus_message *msg, Caller *c, sd_bus_error *error) {
        ToolOptions o;
        int r;

        r = tool_options_read(tc->kind, msg, c, &o, error);
        if (r < 0)
                return r;
        if (o.fd >= 0) {
                tc->fd = fcntl(o.fd, F_DUPFD_CLOEXEC, 3);
                if (tc->fd < 0)
                        return -errno;
        }
        if (o.glob) {
                tc->glob = strdup(o.glob);
                if (!tc->glob)
                        return -ENOMEM;
        }
        tc->path_opt = o.path;
        tc->path_bytes = o.path_bytes;
        tc->path_bytes_size = o.path_bytes_size;
        tc->overwrite = o.overwrite;
        tc->create_dirs = o.create_dirs;
        tc->ignore_case = o.ignore_case;
        tc->mode = o.mode;
        tc->start_line = o.start_line;
        tc->end_line = o.end_line;
        tc->max_results = o.max_results;
        return 0;
}

/* Sets tc->path (absolute) from the path argument or path_bytes. */
static int set_path(ToolCall *tc, const char *path, const void *bytes, size_t size, sd_bus_error *error) {
        const char *method = tool_method[tc->kind];
        _cleanup_free_ char *raw = NULL;
        int r;

        if (bytes) {
                if (!isempty(path))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "%s: pass the path or path_bytes, not both.", method);
                if (size == 0 || memchr(bytes, 0, size))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "%s: path_bytes must be non-empty and hold no NUL byte.",
                                                 method);
                raw = strndup(bytes, size);
                if (!raw)
                        return -ENOMEM;
                path = raw;
        }
        if (isempty(path))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "%s: the path is empty.", method);
        r = sandbox_resolve_path(path, &tc->path);
        if (r < 0) {
                _cleanup_free_ char *p = tool_utf8_sanitize(path, strlen(path));
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "%s: invalid path '%s'.", method,
                                         strna(p));
        }
        tc->printable_path = tool_utf8_sanitize(tc->path, strlen(tc->path));
        return tc->printable_path ? 0 : -ENOMEM;
}

ToolCall *tool_call_new(Manager *m, ToolKind kind, sd_bus_message *msg) {
        ToolCall *tc = calloc(1, sizeof(ToolCall));

        assert(m);
        assert(msg);
        if (!tc)
                return NULL;
        *tc = (ToolCall){
                .manager = m,
                .kind = kind,
                .request = sd_bus_message_ref(msg),
                .result_fd = -EBADF,
                .fd = -EBADF,
                .mode = 0644,
        };
        return tc;
}

/* Errors the call's own code did not name get the method's name in their message. */
static int tool_error(ToolCall *tc, int r, sd_bus_error *error) {
        if (r < 0 && !sd_bus_error_is_set(error))
                sd_bus_error_set_errnof(error, r, "%s: %s", tool_method[tc->kind], strerror(-r));
        return r;
}

int tool_call_read(ToolCall *tc, Caller *c, sd_bus_error *error) {
        sd_bus_message *msg = tc->request;
        int r;

        r = sd_bus_message_read(msg, "s", &tc->arg);
        if (r < 0)
                return tool_error(tc, r, error);
        switch (tc->kind) {
        case TOOL_FILE_CREATE:
                r = sd_bus_message_read_array(msg, 'y', &tc->data, &tc->size);
                break;
        case TOOL_STR_REPLACE:
                r = sd_bus_message_read_array(msg, 'y', &tc->data, &tc->size);
                if (r >= 0)
                        r = sd_bus_message_read_array(msg, 'y', &tc->data2, &tc->size2);
                break;
        case TOOL_INSERT:
                r = sd_bus_message_read(msg, "u", &tc->line);
                if (r >= 0)
                        r = sd_bus_message_read_array(msg, 'y', &tc->data, &tc->size);
                break;
        default:
                break;
        }
        if (r < 0)
                return tool_error(tc, r, error);
        return tool_error(tc, read_options(tc, msg, c, error), error);
}

static int tool_call_check(ToolCall *tc, sd_bus_error *error) {
        const char *method = tool_method[tc->kind], *arg = tc->arg, *path_opt = tc->path_opt;
        const void *path_bytes = tc->path_bytes;
        size_t path_bytes_size = tc->path_bytes_size;
        Manager *m = tc->manager;
        int r;

        tc->cap = MIN(m->config.file_max > 0 ? m->config.file_max : UINT64_C(1) << 20, TOOL_REPLY_MAX);
        if (tc->max_results == 0)
                tc->max_results = default_max_results[tc->kind];
        if (tc->max_results > TOOL_RESULTS_MAX)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "%s: max_results must be at most %" PRIu32 ".", method,
                                         TOOL_RESULTS_MAX);

        if (tc->kind == TOOL_GLOB || tc->kind == TOOL_GREP) {
                if (isempty(arg) || strlen(arg) > TOOL_PATTERN_MAX)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "%s: the pattern must be 1 to %d bytes.", method,
                                                 TOOL_PATTERN_MAX);
                tc->pattern_arg = strdup(arg);
                if (!tc->pattern_arg)
                        return -ENOMEM;
                if (!path_opt && !path_bytes)
                        path_opt = SANDBOXD_SANDBOX_HOME;
        } else
                path_opt = arg;

        if (tc->kind == TOOL_GLOB) {
                _cleanup_free_ char *base = NULL, *joined = NULL;
                const char *rest;
                if (arg[0] == '/' && (path_bytes || !streq(path_opt, SANDBOXD_SANDBOX_HOME)))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "Glob: an absolute pattern takes no 'path'.");
                r = tool_glob_split(arg, &base, &rest);
                if (r < 0)
                        return r;
                if (isempty(rest))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "Glob: the pattern '%s' names nothing.", arg);
                tc->pattern = tc->pattern_arg + (rest - arg);
                if (arg[0] == '/')
                        r = set_path(tc, base, NULL, 0, error);
                else {
                        r = set_path(tc, path_opt, path_bytes, path_bytes_size, error);
                        if (r >= 0 && !isempty(base)) {
                                if (asprintf(&joined, "%s/%s", tc->path, base) < 0)
                                        return -ENOMEM;
                                free(tc->path);
                                free(tc->printable_path);
                                tc->path = TAKE_PTR(joined);
                                tc->printable_path = tool_utf8_sanitize(tc->path, strlen(tc->path));
                                if (!tc->printable_path)
                                        return -ENOMEM;
                        }
                }
        } else
                r = set_path(tc, path_opt, path_bytes, path_bytes_size, error);
        if (r < 0)
                return r;

        switch (tc->kind) {
        case TOOL_FILE_CREATE:
                if (tc->mode > 0777)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "FileCreate: mode %o is not within 0000-0777.", tc->mode);
                if (tc->fd >= 0 && tc->size > 0)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "FileCreate: pass content or an fd, not both.");
                if (tc->size > m->config.file_max)
                        return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                                 "FileCreate: content is %zu bytes; at most %" PRIu64
                                                 " fit in one call (pass an fd).",
                                                 tc->size, m->config.file_max);
                break;
        case TOOL_VIEW:
                if (tc->end_line > 0 && tc->end_line < MAX(tc->start_line, 1u))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "View: end_line %" PRIu32 " is before start_line %" PRIu32
                                                 ".",
                                                 tc->end_line, tc->start_line);
                if (tc->fd >= 0)
                        tc->cap = TOOLS_FILE_MAX;
                break;
        case TOOL_STR_REPLACE:
                if (tc->size == 0)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "StrReplace: the text to replace is empty.");
                break;
        case TOOL_INSERT:
                if (tc->size == 0)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "Insert: the text is empty.");
                break;
        default:
                break;
        }

        return 0;
}

int tool_call_start(ToolCall *tc, Sandbox *s, const Caller *c, uint64_t started_at, uint64_t mono,
                    sd_bus_error *error) {
        int r;

        assert(s);
        assert(c);
        tc->caller = *c;
        snprintf(tc->session_id, sizeof(tc->session_id), "%s", s->id);
        tc->started_at = started_at;
        tc->mono = mono;
        r = tool_call_check(tc, error);
        if (r < 0)
                return tool_error(tc, r, error);
        r = tool_start(s, tc);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "%s: could not start the helper: %s",
                                               tool_method[tc->kind], strerror(-r));
        return 0;
}
