/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "sandboxctl log --export DIR": the audit log as a run-session export (audit.jsonl + run directories). */
#include "sandboxctl-export.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "audit-export.h"
#include "io-util.h"
#include "macro.h"
#include "sandboxctl-util.h"
#include "sandboxd-bus.h"

#define JSONL_NAME    "audit.jsonl"
#define STATE_NAME    ".audit-export.json"
#define STATE_VERSION 1
/* A GetLog page stops early at 16 MiB of rows; 200 of the largest rows (64 KiB of detail, 1 KiB of
 * output head per stream, each byte escaped) stay below that, so a page that is not full is complete. */
#define PAGE_ROWS    UINT64_C(200)
#define WINDOW_FIRST UINT64_C(4096)
#define WINDOW_MAX   (UINT64_C(1) << 40)
#define JSON_FLAGS   (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

typedef struct Export {
        sd_bus *bus;
        const char *dir, *session_id;
        int dir_fd, jsonl_fd;
        uint64_t last_id;    /* the highest row id the export covers */
        uint64_t jsonl_size; /* audit.jsonl's committed length */
        uint64_t n_rows, n_events;
        int error; /* what ended a --follow */
} Export;

static void json_object_putp_(json_object **j) {
        if (*j)
                json_object_put(*j);
}

_printf_(2, 3) static int fail(int r, const char *fmt, ...) {
        va_list ap;

        fputs("sandboxctl: log: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        return r;
}

static int fail_bus(const sd_bus_error *e, int r) {
        if (sd_bus_error_has_name(e, SD_BUS_ERROR_ACCESS_DENIED))
                return fail(r, "%s (reading the audit log needs root or the sandbox-admin group)",
                            e->message);
        if (sd_bus_error_is_set(e))
                return fail(r, "%s", e->message);
        return fail(r, "%s (is sandbox-auditd installed?)", strerror(-r));
}

/* Writes data to DIR/sub/name through a temporary file renamed over it: a reader (or a crash) sees the
 * old file or the new one, never half of one; symlinks are not followed. */
static int write_file_at(int dfd, const char *name, const void *data, size_t size, bool sync) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (asprintf(&tmp, ".%s.tmp", name) < 0)
                return -ENOMEM;
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        r = loop_write(fd, data, size);
        if (r >= 0 && sync && fsync(fd) < 0)
                r = -errno;
        if (r >= 0 && renameat(dfd, tmp, dfd, name) < 0)
                r = -errno;
        if (r < 0)
                (void) unlinkat(dfd, tmp, 0);
        return r;
}

static int write_json_at(int dfd, const char *name, json_object *o, bool sync) {
        size_t len;
        const char *s = json_object_to_json_string_length(o, JSON_FLAGS | JSON_C_TO_STRING_PRETTY, &len);
        _cleanup_free_ char *text = NULL;

        if (!s || asprintf(&text, "%s\n", s) < 0)
                return -ENOMEM;
        return write_file_at(dfd, name, text, len + 1, sync);
}

static int save_state(Export *e) {
        _cleanup_(json_object_putp_) json_object *o = json_object_new_object();
        int r;

        if (!o)
                return -ENOMEM;
        json_object_object_add(o, "version", json_object_new_int(STATE_VERSION));
        json_object_object_add(o, "lastRowId", json_object_new_uint64(e->last_id));
        json_object_object_add(o, "jsonlSize", json_object_new_uint64(e->jsonl_size));
        json_object_object_add(o, "sandbox", e->session_id ? json_object_new_string(e->session_id) : NULL);
        r = write_json_at(e->dir_fd, STATE_NAME, o, true);
        if (r >= 0 && fsync(e->dir_fd) < 0)
                r = -errno;
        return r;
}

/* Reads the state of an earlier export, and cuts audit.jsonl back to what that state covers. */
static int load_state(Export *e) {
        _cleanup_(json_object_putp_) json_object *o = NULL;
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *text = NULL;
        json_object *v;
        struct stat st;
        const char *sandbox = NULL;
        ssize_t n;

        if (fstat(e->jsonl_fd, &st) < 0)
                return fail(-errno, "Failed to stat %s/%s: %m", e->dir, JSONL_NAME);
        if (!S_ISREG(st.st_mode))
                return fail(-EINVAL, "%s/%s is not a regular file.", e->dir, JSONL_NAME);

        fd = openat(e->dir_fd, STATE_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno != ENOENT)
                return fail(-errno, "Failed to open %s/%s: %m", e->dir, STATE_NAME);
        if (fd < 0) {
                if (st.st_size > 0)
                        return fail(-EEXIST,
                                    "%s/%s is not empty but %s is missing, so what it covers is unknown: "
                                    "export into an empty directory, or move %s away.",
                                    e->dir, JSONL_NAME, STATE_NAME, JSONL_NAME);
                return 0;
        }

        text = calloc(1, 4097);
        if (!text)
                return -ENOMEM;
        n = read(fd, text, 4096);
        if (n < 0)
                return fail(-errno, "Failed to read %s/%s: %m", e->dir, STATE_NAME);
        o = json_tokener_parse(text);
        if (!o || !json_object_is_type(o, json_type_object) ||
            !json_object_object_get_ex(o, "version", &v) || json_object_get_int(v) != STATE_VERSION ||
            !json_object_object_get_ex(o, "lastRowId", &v) || !json_object_is_type(v, json_type_int))
                return fail(-EINVAL, "%s/%s is not an export state this sandboxctl knows.", e->dir,
                            STATE_NAME);
        e->last_id = json_object_get_uint64(v);
        if (!json_object_object_get_ex(o, "jsonlSize", &v) || !json_object_is_type(v, json_type_int))
                return fail(-EINVAL, "%s/%s is not an export state this sandboxctl knows.", e->dir,
                            STATE_NAME);
        e->jsonl_size = json_object_get_uint64(v);
        if (json_object_object_get_ex(o, "sandbox", &v) && v)
                sandbox = json_object_get_string(v);
        if (!streq_ptr(sandbox, e->session_id))
                return fail(-EINVAL, "%s holds an export of %s%s; export %s into another directory.", e->dir,
                            sandbox ? "sandbox " : "the whole log", strempty(sandbox),
                            e->session_id ? "one sandbox" : "the whole log");

        if ((uint64_t) st.st_size < e->jsonl_size)
                return fail(-EINVAL,
                            "%s/%s is shorter (%" PRIu64 " bytes) than the export wrote (%" PRIu64
                            "): it was changed by something else; export into an empty directory.",
                            e->dir, JSONL_NAME, (uint64_t) st.st_size, e->jsonl_size);
        /* Lines past the state were written by an export that stopped before it saved the state: they
         * are cut off and written again, from the log, exactly once. */
        if ((uint64_t) st.st_size > e->jsonl_size && ftruncate(e->jsonl_fd, (off_t) e->jsonl_size) < 0)
                return fail(-errno, "Failed to truncate %s/%s: %m", e->dir, JSONL_NAME);
        return 0;
}

static int open_run_dir(Export *e, const char *run_id) {
        int fd;

        if (mkdirat(e->dir_fd, run_id, 0755) < 0 && errno != EEXIST)
                return fail(-errno, "Failed to create %s/%s: %m", e->dir, run_id);
        fd = openat(e->dir_fd, run_id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return fail(-errno, "Failed to open %s/%s (it must be a directory, not a symlink): %m",
                            e->dir, run_id);
        return fd;
}

/* A run's stdout.txt and stderr.txt from the row's output, and metadata.json with outputAvailable. */
static int write_run_files(Export *e, int rfd, const char *run_id, uint64_t id, json_object *md) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const void *out = NULL, *err = NULL;
        size_t out_size = 0, err_size = 0;
        bool have_output = true;
        int r;

        r = sd_bus_call_method(e->bus, AUDITD_BUS_NAME, AUDITD_BUS_PATH, AUDITD_LOG_INTERFACE, "GetOutput",
                               &error, &reply, "t", id);
        if (r < 0 && sd_bus_error_has_name(&error, "org.sandboxd.audit1.NoSuchEntry"))
                have_output = false; /* removed by retention since GetLog: say so in metadata.json */
        else if (r < 0)
                return fail_bus(&error, r);
        else {
                r = sd_bus_message_read_array(reply, 'y', &out, &out_size);
                if (r >= 0)
                        r = sd_bus_message_read_array(reply, 'y', &err, &err_size);
                if (r < 0)
                        return fail(r, "Failed to parse GetOutput's reply: %s", strerror(-r));
        }
        json_object_object_add(md, "outputAvailable", json_object_new_boolean(have_output));

        r = write_file_at(rfd, "stdout.txt", out, out_size, false);
        if (r >= 0)
                r = write_file_at(rfd, "stderr.txt", err, err_size, false);
        if (r >= 0)
                r = write_json_at(rfd, "metadata.json", md, false);
        if (r < 0)
                return fail(r, "Failed to write %s/%s: %s", e->dir, run_id, strerror(-r));
        return 0;
}

static int write_run(Export *e, json_object *row, const char *run_id, uint64_t id) {
        _cleanup_(json_object_putp_) json_object *md = NULL;
        _cleanup_close_ int rfd = -EBADF;
        int r;

        r = audit_export_metadata(row, &md);
        if (r < 0)
                return fail(r, "Out of memory");
        rfd = open_run_dir(e, run_id);
        if (rfd < 0)
                return rfd;
        return write_run_files(e, rfd, run_id, id, md);
}

/* The metadata.json a run directory holds, or NULL if it has none yet. */
static int read_run_metadata(Export *e, const char *run_id, json_object **ret) {
        _cleanup_close_ int rfd = -EBADF, fd = -EBADF;
        _cleanup_free_ char *text = NULL;
        size_t size = 0, n = 0;
        json_object *o;

        *ret = NULL;
        rfd = openat(e->dir_fd, run_id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rfd < 0 && errno == ENOENT)
                return 0;
        if (rfd < 0)
                return fail(-errno, "Failed to open %s/%s (it must be a directory, not a symlink): %m",
                            e->dir, run_id);
        fd = openat(rfd, "metadata.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT)
                return 0;
        if (fd < 0)
                return fail(-errno, "Failed to open %s/%s/metadata.json: %m", e->dir, run_id);
        for (;;) {
                ssize_t k;

                if (n == size) {
                        char *p;

                        /* a process signalled a hundred thousand times still fits */
                        if (size >= 64 * 1024 * 1024)
                                return fail(-EFBIG, "%s/%s/metadata.json is too large.", e->dir, run_id);
                        size = size ? size * 2 : 16384;
                        p = realloc(text, size + 1);
                        if (!p)
                                return fail(-ENOMEM, "Out of memory");
                        text = p;
                }
                k = read(fd, text + n, size - n);
                if (k < 0)
                        return fail(-errno, "Failed to read %s/%s/metadata.json: %m", e->dir, run_id);
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        text[n] = '\0';
        o = json_tokener_parse(text);
        if (!o || !json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                return fail(-EINVAL, "%s/%s/metadata.json is not what an export wrote; export into an empty "
                            "directory.", e->dir, run_id);
        }
        *ret = o;
        return 0;
}

/* A background process's run directory after one of its rows: metadata.json while it runs (its start,
 * the signals sent), and stdout.txt/stderr.txt from its exit row when it ended. */
static int write_process_run(Export *e, json_object *events, const char *run_id, uint64_t id) {
        _cleanup_(json_object_putp_) json_object *old = NULL, *md = NULL;
        _cleanup_close_ int rfd = -EBADF;
        int r, what;

        r = read_run_metadata(e, run_id, &old);
        if (r < 0)
                return r;
        what = audit_export_process_metadata(old, events, &md);
        if (what < 0)
                return fail(what, "Row %" PRIu64 " cannot be exported: %s", id, strerror(-what));
        if (what == AUDIT_EXPORT_RUN_UNCHANGED)
                return 0;
        rfd = open_run_dir(e, run_id);
        if (rfd < 0)
                return rfd;
        if (what == AUDIT_EXPORT_RUN_ENDED)
                return write_run_files(e, rfd, run_id, id, md);
        r = write_json_at(rfd, "metadata.json", md, false);
        if (r < 0)
                return fail(r, "Failed to write %s/%s: %s", e->dir, run_id, strerror(-r));
        return 0;
}

/* Appends one page of rows (oldest first): run directories, then their lines, then the state. */
static int export_rows(Export *e, json_object *rows) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, n = json_object_array_length(rows);
        uint64_t events = 0;
        bool runs = false;
        FILE *f;
        int r;

        if (n == 0)
                return 0;
        f = open_memstream(&buf, &size);
        if (!f)
                return fail(-ENOMEM, "Out of memory");
        for (size_t i = 0; i < n; i++) {
                _cleanup_(json_object_putp_) json_object *ev = NULL;
                json_object *row = json_object_array_get_idx(rows, i);
                char run_id[AUDIT_EXPORT_RUN_ID_MAX];
                uint64_t id = json_object_get_uint64(json_object_object_get(row, "id"));

                r = audit_export_events(row, &ev);
                if (r < 0) {
                        fclose(f);
                        return fail(r, "Row %" PRIu64 " cannot be exported: %s", id, strerror(-r));
                }
                for (size_t j = 0; j < json_object_array_length(ev); j++) {
                        fputs(json_object_to_json_string_ext(json_object_array_get_idx(ev, j), JSON_FLAGS),
                              f);
                        fputc('\n', f);
                        events++;
                }
                AuditExportKind kind = audit_export_kind(row);
                if ((kind == AUDIT_EXPORT_COMMAND || kind == AUDIT_EXPORT_PROCESS) &&
                    audit_export_run_id(row, run_id) >= 0) {
                        r = kind == AUDIT_EXPORT_COMMAND ? write_run(e, row, run_id, id)
                                                         : write_process_run(e, ev, run_id, id);
                        if (r < 0) {
                                fclose(f);
                                return r;
                        }
                        runs = true;
                }
        }
        if (fclose(f) != 0)
                return fail(-ENOMEM, "Out of memory");

        /* the page's run files are on disk before the lines that mention them: one sync per page */
        if (runs && syncfs(e->dir_fd) < 0)
                return fail(-errno, "Failed to sync %s: %m", e->dir);

        r = loop_write(e->jsonl_fd, buf, size);
        if (r >= 0 && fdatasync(e->jsonl_fd) < 0)
                r = -errno;
        if (r < 0)
                return fail(r, "Failed to write %s/%s: %s", e->dir, JSONL_NAME, strerror(-r));
        e->jsonl_size += size;
        e->last_id =
                json_object_get_uint64(json_object_object_get(json_object_array_get_idx(rows, n - 1), "id"));
        r = save_state(e);
        if (r < 0)
                return fail(r, "Failed to write %s/%s: %s", e->dir, STATE_NAME, strerror(-r));
        e->n_rows += n;
        e->n_events += events;
        return 0;
}

/* One GetLog call: rows with after < id <= max, newest first, at most PAGE_ROWS of them. */
static int get_log(Export *e, uint64_t after, uint64_t max, uint64_t limit, json_object **ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_(json_object_putp_) json_object *rows = NULL;
        int r;

        r = sd_bus_message_new_method_call(e->bus, &m, AUDITD_BUS_NAME, AUDITD_BUS_PATH,
                                           AUDITD_LOG_INTERFACE, "GetLog");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0 && e->session_id)
                r = sd_bus_message_append(m, "{sv}", "session_id", "s", e->session_id);
        if (r >= 0 && after > 0)
                r = sd_bus_message_append(m, "{sv}", "after_id", "t", after);
        if (r >= 0 && max > 0)
                r = sd_bus_message_append(m, "{sv}", "max_id", "t", max);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_append(m, "tt", limit, UINT64_C(0));
        if (r < 0)
                return fail(r, "Failed to build the call: %s", strerror(-r));
        r = sd_bus_call(e->bus, m, 0, &error, &reply);
        if (r < 0)
                return fail_bus(&error, r);

        rows = json_object_new_array();
        if (!rows)
                return fail(-ENOMEM, "Out of memory");
        r = sd_bus_message_enter_container(reply, 'a', "a{sv}");
        while (r >= 0) {
                json_object *row;

                r = audit_export_read_row(reply, &row);
                if (r <= 0)
                        break;
                if (json_object_array_add(rows, row) < 0) {
                        json_object_put(row);
                        r = -ENOMEM;
                }
        }
        if (r < 0)
                return fail(r, "Failed to parse GetLog's reply: %s", strerror(-r));
        *ret = TAKE_PTR(rows);
        return 0;
}

static int row_id_cmp(const void *a, const void *b) {
        uint64_t x = json_object_get_uint64(json_object_object_get(*(json_object *const *) a, "id")),
                 y = json_object_get_uint64(json_object_object_get(*(json_object *const *) b, "id"));
        return x < y ? -1 : x > y;
}

/* Exports every row after e->last_id up to top (0: up to the newest now), oldest first, in id windows:
 * a window whose page is full is halved, one that is not is complete and the next one twice as wide.
 * Memory stays at one page whatever the size of the log. */
static int catch_up(Export *e, uint64_t top) {
        uint64_t window = WINDOW_FIRST;
        int r;

        if (top == 0) {
                _cleanup_(json_object_putp_) json_object *newest = NULL;

                r = get_log(e, 0, 0, 1, &newest);
                if (r < 0)
                        return r;
                if (json_object_array_length(newest) == 0)
                        return 0;
                top = json_object_get_uint64(
                        json_object_object_get(json_object_array_get_idx(newest, 0), "id"));
        }

        while (e->last_id < top) {
                _cleanup_(json_object_putp_) json_object *rows = NULL;
                uint64_t max = top - e->last_id > window ? e->last_id + window : top;

                r = get_log(e, e->last_id, max, PAGE_ROWS, &rows);
                if (r < 0)
                        return r;
                if (json_object_array_length(rows) >= PAGE_ROWS && max - e->last_id > PAGE_ROWS) {
                        window = MAX((max - e->last_id) / 2, PAGE_ROWS);
                        continue;
                }
                json_object_array_sort(rows, row_id_cmp);
                r = export_rows(e, rows);
                if (r < 0)
                        return r;
                if (e->last_id < max) {
                        /* nothing (more) in the window: the state moves past it only with the next row */
                        e->last_id = max;
                        if (json_object_array_length(rows) == 0 || max == top) {
                                r = save_state(e);
                                if (r < 0)
                                        return fail(r, "Failed to write %s/%s: %s", e->dir, STATE_NAME,
                                                    strerror(-r));
                        }
                }
                if (json_object_array_length(rows) < PAGE_ROWS / 2)
                        window = MIN(window * 2, WINDOW_MAX);
        }
        return 0;
}

static int on_entry_added(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        Export *e = userdata;
        const char *session_id;
        uint64_t id;
        int r;

        if (sd_bus_message_read(m, "ts", &id, &session_id) < 0)
                return 0; /* one malformed signal must not end the export */
        if (id <= e->last_id || (e->session_id && !streq(session_id, e->session_id)))
                return 0;
        /* From the log rather than the signal: whatever a missed signal would have said is caught up too. */
        r = catch_up(e, id);
        if (r < 0) {
                e->error = r;
                return sd_event_exit(sd_bus_get_event(sd_bus_message_get_bus(m)), r);
        }
        return 0;
}

int log_export(sd_bus *bus, const char *dir, const char *session_id, bool follow, bool quiet) {
        _cleanup_(sd_bus_slot_unrefp) sd_bus_slot *slot = NULL;
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_close_ int dir_fd = -EBADF, jsonl_fd = -EBADF;
        Export e = { .bus = bus, .dir = dir, .session_id = session_id, .dir_fd = -EBADF, .jsonl_fd = -EBADF };
        struct stat st;
        int r;

        if (isempty(dir))
                return fail(-EINVAL, "--export needs a directory.");
        dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd < 0 && errno == ENOTDIR)
                return fail(-ENOTDIR, "--export=%s: not a directory.", dir);
        if (dir_fd < 0 && errno == ENOENT)
                return fail(-ENOENT, "--export=%s: no such directory (create it first).", dir);
        if (dir_fd < 0)
                return fail(-errno, "--export=%s: %m", dir);
        /* two exports into one directory would interleave their lines */
        if (flock(dir_fd, LOCK_EX | LOCK_NB) < 0)
                return fail(-errno, "%s: %s", dir,
                            errno == EWOULDBLOCK ? "another export is writing to it" : strerror(errno));
        jsonl_fd = openat(dir_fd, JSONL_NAME, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (jsonl_fd < 0)
                return fail(-errno, "Failed to open %s/%s%s: %m", dir, JSONL_NAME,
                            errno == ELOOP ? " (a symlink is not followed)" : "");
        e.dir_fd = dir_fd;
        e.jsonl_fd = jsonl_fd;
        r = load_state(&e);
        if (r < 0)
                return r;
        if (fstat(jsonl_fd, &st) < 0 || lseek(jsonl_fd, 0, SEEK_END) < 0)
                return fail(-errno, "%s/%s: %m", dir, JSONL_NAME);

        if (follow) {
                /* Subscribe before catching up: a row stored in between arrives as a signal. */
                r = follow_log_entries(bus, on_entry_added, &e, &slot, &event);
                if (r < 0)
                        return fail(r, "Failed to follow the audit log (EntryAdded, event loop): %s",
                                    strerror(-r));
        }

        r = catch_up(&e, 0);
        if (r < 0)
                return r;
        if (!quiet)
                fprintf(stderr,
                        "Exported %" PRIu64 " rows as %" PRIu64 " events to %s (up to row %" PRIu64 ").\n",
                        e.n_rows, e.n_events, dir, e.last_id);
        if (!follow)
                return 0;

        r = sd_event_loop(event);
        if (e.error < 0)
                return e.error;
        if (r == 1)
                return fail(-ECONNRESET, "Lost the connection to the bus.");
        if (r < 0)
                return fail(r, "%s", strerror(-r));
        if (!quiet)
                fprintf(stderr,
                        "Exported %" PRIu64 " rows as %" PRIu64 " events to %s (up to row %" PRIu64 ").\n",
                        e.n_rows, e.n_events, dir, e.last_id);
        return 0;
}
