/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The a{sv} options of sandboxd's Manager methods: read from the call into typed structs, and checked. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include "caller.h"
#include "sandboxd-config.h"

#define ARGV_MAX_ITEMS   4096
#define ARGV_MAX_BYTES   (256 * 1024)
#define ENV_MAX_ITEMS    1024
#define TOOL_PATTERN_MAX 4096

/* Every *_read() below expects msg at the options' a{sv} and leaves it past it. It returns 0 with *ret
 * filled, or a negative errno with error set to what was wrong (InvalidArgs naming the key, or
 * LimitExceeded), except for -ENOMEM. Strings and arrays in *ret point into msg (valid while it lives)
 * unless said otherwise. Every reader takes the caller-context keys too ("account_id", "request_id",
 * "source"): they are checked, and stored into *c only if c->trusted (root and the gateway speak for
 * someone else, nobody else does). A key that is not the method's is refused. Each *_check() makes the
 * remaining checks that need the configuration, in the order the method makes them. */

/* A context key, if key is one: 1 if consumed (msg past its variant), 0 if not a context key, <0 on error.
 */
int options_context_entry(Caller *c, const char *key, sd_bus_message *msg, sd_bus_error *error);

/* An a{sv} of context keys only (SetTTL, DeleteSandbox). method names the call in messages. */
int context_options_read(sd_bus_message *msg, Caller *c, const char *method, sd_bus_error *error);

/* --- CreateSandbox ----------------------------------------------------------------------------- */

typedef struct CreateOptions {
        const char *name;    /* NULL: none; else valid, and not shaped like a sandbox id */
        const char *type;    /* NULL: the configured default */
        SandboxNetwork network; /* with have_network; else the type's Network= */
        bool have_network;
        EgressPolicy egress_policy; /* with have_egress_policy (owned: create_options_done()); else the
                                     * type's */
        bool have_egress_policy;
        uint64_t ttl_seconds;
        bool have_ttl;
        const char *image;   /* issue 24: NULL: the type's Image=; "host": the host's tree */
        const char *snapshot; /* issue 26: its disk a copy of this snapshot's (id or name); NULL: a fresh one */
} CreateOptions;

/* On success *ret owns a policy: create_options_done(). */
int create_options_read(sd_bus_message *msg, Caller *c, CreateOptions *ret, sd_bus_error *error);
void create_options_done(CreateOptions *o);

typedef struct CreateChoice {
        const char *type;             /* the type's name */
        uint64_t ttl_usec;
        SandboxNetwork network;       /* the option's, or the type's */
        const EgressPolicy *policy;   /* network egress: the option's, the type's, or an empty (default deny)
                                       * one; NULL for other networks. Borrowed from o or config */
        const char *image;            /* issue 24: the option's or the type's image; NULL: the host's tree */
} CreateChoice;

/* The type is a configured one, the TTL within the maximum, network "host" allowed by the configuration
 * (AllowHostNetwork=), an egress_policy only with network "egress". */
int create_options_check(const CreateOptions *o, const SandboxdConfig *config, CreateChoice *ret,
                         sd_bus_error *error);

/* --- Exec -------------------------------------------------------------------------------------- */

typedef struct ExecOptions {
        const char *cwd; /* as given; NULL: the home */
        char **env;      /* owned: "NAME=value", each NAME [A-Za-z_][A-Za-z0-9_]*, at most ENV_MAX_ITEMS */
        const void *stdin_data;
        size_t stdin_size;
        uint64_t timeout_seconds;
        bool have_timeout;
        uint64_t memory_max, tasks_max; /* 0: the type's */
        int stdout_fd, stderr_fd;       /* the message's, or -1 */
        int cancel_fd;                  /* the message's (a pipe or a socket), or -1 */
} ExecOptions;

void exec_options_done(ExecOptions *o);
int exec_options_read(sd_bus_message *msg, Caller *c, ExecOptions *ret, sd_bus_error *error);

typedef struct ExecLimits {
        char *cwd; /* owned, absolute; NULL: the home */
        uint64_t timeout_usec, memory_max, tasks_max;
} ExecLimits;

void exec_limits_done(ExecLimits *l);
/* argv (non-empty, within ARGV_MAX_*), stdin (within stdin_max), cwd, and the limits within type t's. */
int exec_options_check(const ExecOptions *o, char **argv, const SandboxType *t, uint64_t stdin_max,
                       ExecLimits *ret, sd_bus_error *error);

/* --- StartProcess (issue 25) -------------------------------------------------------------------- */

/* Exec's options that a background process takes: cwd, env, timeout_seconds (its runtime limit),
 * memory_max, tasks_max and the context; not stdin, stdout_fd, stderr_fd or cancel_fd (WriteProcessStdin
 * and ReadProcessOutput are its stdin and output). Checked with exec_options_check(). */
int process_options_read(sd_bus_message *msg, Caller *c, ExecOptions *ret, sd_bus_error *error);

/* --- WriteFile, ReadFile ----------------------------------------------------------------------- */

typedef struct WriteFileOptions {
        uint32_t mode; /* 0644 unless given */
        int create_dirs, append;
        int fd; /* the message's, or -1 */
} WriteFileOptions;

int write_file_options_read(sd_bus_message *msg, Caller *c, WriteFileOptions *ret, sd_bus_error *error);
/* The path (resolved into *ret_path, owned), the mode, and size bytes of data within file_max. */
int write_file_options_check(const WriteFileOptions *o, const char *path, size_t size, uint64_t file_max,
                             char **ret_path, sd_bus_error *error);

typedef struct ReadFileOptions {
        uint64_t offset, length;
        int fd; /* the message's, or -1 */
} ReadFileOptions;

int read_file_options_read(sd_bus_message *msg, Caller *c, ReadFileOptions *ret, sd_bus_error *error);
int read_file_options_check(const ReadFileOptions *o, const char *path, uint64_t file_max, char **ret_path,
                            sd_bus_error *error);

/* --- OpenShell --------------------------------------------------------------------------------- */

/* Terminal sizes outside these are refused: a winsize holds 16 bits, and no real terminal is wider. */
#define SHELL_COLS_MAX     1000
#define SHELL_ROWS_MAX     1000
#define SHELL_COLS_DEFAULT 80
#define SHELL_ROWS_DEFAULT 24
#define SHELL_TERM_MAX     64
/* Open shells per sandbox: each holds fds in sandboxd and a session in the sandbox. */
#define SHELL_MAX_PER_SANDBOX 16

bool shell_size_is_valid(unsigned cols, unsigned rows);

/* A TERM value we pass on: 1-64 characters of A-Z a-z 0-9 . _ + -. */
bool shell_term_is_valid(const char *term);

typedef struct ShellOptions {
        uint32_t cols, rows; /* 80x24 unless given */
        const char *term;    /* NULL: the default */
} ShellOptions;

int shell_options_read(sd_bus_message *msg, Caller *c, ShellOptions *ret, sd_bus_error *error);
int shell_options_check(const ShellOptions *o, sd_bus_error *error);

/* --- the file tools ---------------------------------------------------------------------------- */

typedef enum ToolKind {
        TOOL_FILE_CREATE,
        TOOL_VIEW,
        TOOL_STR_REPLACE,
        TOOL_INSERT,
        TOOL_LS,
        TOOL_GLOB,
        TOOL_GREP,
        _TOOL_KIND_MAX,
} ToolKind;

extern const char *const tool_method[_TOOL_KIND_MAX];

typedef struct ToolOptions {
        const char *path;       /* Glob, Grep: where to look */
        const char *glob;       /* Grep: which files; 1 to TOOL_PATTERN_MAX bytes */
        const void *path_bytes; /* the path as bytes, for names that are not UTF-8 */
        size_t path_bytes_size;
        int fd; /* FileCreate's source, View's destination: the message's, or -1 */
        bool overwrite, create_dirs, ignore_case;
        uint32_t mode; /* 0644 unless given */
        uint32_t start_line, end_line, max_results;
} ToolOptions;

/* Only the options tool kind takes (see dbus/org.sandboxd.sandbox1.xml). */
int tool_options_read(ToolKind kind, sd_bus_message *msg, Caller *c, ToolOptions *ret, sd_bus_error *error);
