/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl's pure helpers: argument syntax, output formatting and plain fd I/O (no bus, testable). */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include <systemd/sd-event.h>

#include "egress-policy.h"
#include "io-util.h" /* loop_write(), which sandboxctl uses everywhere */
#include "macro.h"

/* sandboxctl's exit status for bad usage: an unknown option, a missing or malformed argument. */
#define EXIT_USAGE 2

/* "sandboxctl: VERB: message" (just "sandboxctl: message" when verb is NULL) on stderr; returns
 * EXIT_USAGE, for "return fail_usage(...)". */
_printf_(2, 3) int fail_usage(const char *verb, const char *fmt, ...);

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

/* --env=KEY=VALUE options (exec, start), in the order given. */
typedef struct EnvVar {
        char *key;
        char *value;
} EnvVar;

/* Adds "KEY=VALUE" (as parse_env_assignment() takes it) to *list; a KEY given again replaces its value,
 * as in a shell. Returns 0, -EINVAL for bad syntax (the list unchanged), or -ENOMEM. */
int env_list_add(EnvVar **list, size_t *n, const char *assignment);
void env_list_free(EnvVar **list, size_t *n);

/* Appends the entry {"env": a{ss}} to the a{sv} of options open in m (Exec's and StartProcess's);
 * nothing if n is 0. Returns 0 or a negative errno. */
int bus_append_env(sd_bus_message *m, const EnvVar *env, size_t n);

/* A comma-separated list ("--actions=exec,file.read") as a NULL-terminated list, empty items dropped.
 * NULL on ENOMEM. */
char **split_commas(const char *s);

/* cp's "ID:PATH" syntax: returns 1 and fresh copies if the part before the first ':' is a valid sandbox
 * id and PATH is non-empty, 0 if s is a local path (outputs untouched), -EINVAL for "ID:" with an empty
 * PATH, -ENOMEM. */
int split_sandbox_path(const char *s, char **ret_id, char **ret_path);

/* The last path component of s ("a/b/" → "b"), as a fresh string; NULL for "", "/" or ENOMEM. */
char *path_basename(const char *s);

/* Local time like systemctl, "Wed 2026-12-02 15:39:31 UTC". Returns buf, or NULL if the time cannot be
 * represented (the caller prints "n/a"). */
char *format_timestamp(uint64_t usec, char buf[static FORMAT_TIMESTAMP_MAX]);

/* A copy of s that is safe to print on a terminal, by the one rule of utf8_escape(): C0 and C1 controls,
 * DEL, format characters (bidi overrides and the like), invalid UTF-8 and the backslash itself become
 * escapes such as \x1b, \u202e, \xff and \\, so nothing a sandbox or a client chose can drive the
 * terminal or hide what is shown, and the text still reads back exactly. s may be NULL (""). NULL on
 * ENOMEM. */
char *make_printable(const char *s);

/* Reads fd to EOF into a NUL-terminated buffer (the NUL is not counted). Fails with -EFBIG beyond max
 * bytes. Returns 0 or a negative errno; outputs untouched on failure. */
int read_full_fd(int fd, size_t max, char **ret, size_t *ret_size);


/* Exit status of "sandboxctl exec" from the Exec reply: 124 if timed out, 128+signal if killed by a
 * signal, 137 for an OOM kill without a signal, else the command's exit code (out-of-range codes map
 * to 125, since a real one never is). */
int exec_exit_status(int32_t exit_code, int32_t signal, bool timed_out, bool oom_killed);

/* --- log ----------------------------------------------------------------------------------------- */

/* "log --follow" and "log --export --follow": subscribes on_entry to the logger's EntryAdded (do it before
 * catching up with GetLog: a row stored in between then arrives as a signal, and is not lost), and makes
 * the default event loop for the bus, which SIGINT and SIGTERM (blocked, for the loop) end with 0 and
 * the bus's disconnection ends too. Returns 0, or a negative errno with the outputs untouched. */
int follow_log_entries(sd_bus *bus, sd_bus_message_handler_t on_entry, void *userdata,
                       sd_bus_slot **ret_slot, sd_event **ret_event);

/* "Dec 02 16:03:09.590". */
#define FORMAT_LOG_TIME_MAX 32

/* The columns of "sandboxctl log"'s table, in order. */
typedef enum LogColumn {
        LOG_COLUMN_TIME,
        LOG_COLUMN_ID,
        LOG_COLUMN_SANDBOX,
        LOG_COLUMN_ACCOUNT,
        LOG_COLUMN_SOURCE,
        LOG_COLUMN_OPERATION,
        LOG_COLUMN_EVENT,
        LOG_COLUMN_EXIT,
        LOG_COLUMN_DURATION,
        LOG_COLUMN_DETAIL,
        _LOG_COLUMN_MAX,
} LogColumn;

extern const char *const log_column_header[_LOG_COLUMN_MAX];
/* Numbers are right-aligned. */
extern const bool log_column_right[_LOG_COLUMN_MAX];

/* The longest detail summary a table row shows, in bytes; longer ones end in "…". */
#define LOG_SUMMARY_MAX 160

/* What "sandboxctl log" selects; NULL / 0 means any. The same keys GetLog's filter takes, so that rows
 * arriving with EntryAdded can be filtered the way the logger filters a page. */
typedef struct LogFilter {
        const char *session_id, *account_id, *operation, *source, *event;
        uint64_t since, until; /* started_at, µs: since <= started_at < until, as the logger does */
} LogFilter;

/* Local time like journalctl's short output, with milliseconds: "Dec 02 16:03:09.590". Returns buf, or
 * NULL if the time cannot be represented. */
char *format_log_time(uint64_t usec, char buf[static FORMAT_LOG_TIME_MAX]);

/* One argument quoted for a POSIX shell where needed ("echo" stays, "a b" becomes 'a b', "" becomes
 * ''), so a logged argv reads back unambiguously. NULL on ENOMEM. */
char *shell_quote(const char *s);

/* A one-line summary of a row's detail: an exec's argv, shell-quoted and joined; a file operation's
 * path; a sandbox operation's name; else the compact JSON. A failure's message is added in
 * parentheses. detail is the parsed object (or a string, when it did not parse; or NULL). Printable
 * (see make_printable()), and at most max bytes, cut at a character boundary and ending in "…" when
 * cut. NULL on ENOMEM. */
char *log_detail_summary(json_object *detail, size_t max);

/* A row as GetLog or EntryAdded carry it (each a{sv} entry turned into the JSON value of its type)
 * in the form "sandboxctl log --json" prints: the known keys first in a fixed order, the rest after;
 * detail and output_truncated parsed into JSON values when they parse; started_at as RFC 3339 UTC with
 * µs (null for 0) plus started_at_usec, the number. Returns a new object, or NULL on ENOMEM. */
json_object *log_row_to_json(json_object *raw);

/* Whether a row (as log_row_to_json() makes it) passes the filter. */
bool log_row_matches(json_object *row, const LogFilter *filter);

/* The row's id, or 0 if it has none. */
uint64_t log_row_id(json_object *row);

/* The table cells of a row (as log_row_to_json() makes it): printable fresh strings, "-" for an empty
 * or missing value. EXIT is shown for exec rows, and for others only when non-zero (a failure's -1 or
 * -errno). Returns 0, or -ENOMEM with ret_cells untouched. */
int log_row_cells(json_object *row, char *ret_cells[static _LOG_COLUMN_MAX]);

void log_cells_free(char *cells[static _LOG_COLUMN_MAX]);

/* "sandboxctl network": a policy's list as one line, canonical entries separated by spaces, "-" if empty.
 * NULL on ENOMEM. */
char *egress_entries_join(const EgressEntry *l, size_t n);
/* The policy as JSON, as the REST API and the audit rows show it: {"default": "deny"|"allow", "allow": [...],
 * "deny": [...]}, canonical entries. NULL on ENOMEM. */
json_object *egress_policy_json(const EgressPolicy *p);

/* Reads an a{sv} of a reply (a tool's info, a row, properties) into o: t, u and i values as integers, b
 * as booleans, s and o as strings; values of other types are skipped. Returns 0 or a negative errno
 * from sd-bus. */
int bus_read_dict(sd_bus_message *m, json_object *o);
