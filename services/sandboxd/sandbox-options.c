/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The a{sv} options of sandboxd's Manager methods: read from the call into typed structs, and checked.
 *
 * These are what any member of sandbox-admin (and, through the gateway, any API key) sends, so they are
 * read here once, with one set of checks, instead of a loop per handler; tests/fuzz/fuzz-bus-options.c
 * runs every reader over messages made from fuzz input. */
#include "sandbox-options.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bus-fields.h"
#include "macro.h"
#include "sandbox-files.h"
#include "sandbox-id.h"
#include "sandboxd-bus.h"
#include "time-util.h"

#define CONTEXT_FIELD_MAX CALLER_FIELD_MAX

const char *const tool_method[_TOOL_KIND_MAX] = {
        [TOOL_FILE_CREATE] = "FileCreate",
        [TOOL_VIEW] = "View",
        [TOOL_STR_REPLACE] = "StrReplace",
        [TOOL_INSERT] = "Insert",
        [TOOL_LS] = "Ls",
        [TOOL_GLOB] = "Glob",
        [TOOL_GREP] = "Grep",
};

static int unknown_option(sd_bus_error *error, const char *method, const char *key) {
        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "%s: unknown option '%s'.", method, key);
}

static int bad_type(sd_bus_error *error, const char *key, const char *sig) {
        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Option '%s' must be of type '%s'.", key,
                                 sig);
}

/* A reader's failure as the caller sees it: what sd-bus refused (the options are not an a{sv}, or one of
 * its entries is cut short) is bad input too, and says so, rather than a bare errno. */
static int finish(int r, const char *method, sd_bus_error *error) {
        if (r >= 0 || r == -ENOMEM || sd_bus_error_is_set(error))
                return r;
        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                 "%s: the options are not a valid a{sv}: %s.", method, strerror(-r));
}

static int seconds_to_usec(uint64_t sec, uint64_t *ret) {
        if (sec > UINT64_MAX / USEC_PER_SEC)
                return -ERANGE;
        *ret = sec * USEC_PER_SEC;
        return 0;
}

int options_context_entry(Caller *c, const char *key, sd_bus_message *msg, sd_bus_error *error) {
        const char *v;
        int r;

        if (!streq(key, "account_id") && !streq(key, "request_id") && !streq(key, "source"))
                return 0;
        r = sd_bus_message_read(msg, "v", "s", &v);
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Context field '%s' must be a string.", key);
        if (strlen(v) > CONTEXT_FIELD_MAX)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Context field '%s' is longer than %d bytes.", key,
                                         CONTEXT_FIELD_MAX);
        if (streq(key, "source") && !streq(v, "agent") && !streq(v, "human_takeover"))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Context field 'source' must be \"agent\" or \"human_takeover\".");
        /* Only root and the gateway speak for someone else. */
        if (!c->trusted)
                return 1;
        if (streq(key, "account_id") && !isempty(v))
                snprintf(c->account_id, sizeof(c->account_id), "%s", v);
        else if (streq(key, "request_id"))
                snprintf(c->request_id, sizeof(c->request_id), "%s", v);
        else if (streq(key, "source"))
                snprintf(c->source, sizeof(c->source), "%.31s", v);
        return 1;
}

/* The loop every reader shares: each entry's key goes to the context, else to entry(), which reads the
 * variant (or refuses the key). */
typedef int (*entry_t)(const char *key, sd_bus_message *msg, void *userdata, sd_bus_error *error);

typedef struct OptionsReader {
        Caller *caller;
        const char *method;
        entry_t entry;
        void *userdata;
} OptionsReader;

static int options_entry(const char *key, sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        OptionsReader *rd = userdata;
        int r;

        r = options_context_entry(rd->caller, key, msg, error);
        if (r != 0)
                return r;
        return rd->entry ? rd->entry(key, msg, rd->userdata, error) : unknown_option(error, rd->method, key);
}

static int read_options(sd_bus_message *msg, Caller *c, const char *method, entry_t entry, void *userdata,
                        sd_bus_error *error) {
        return bus_foreach_sv(msg, options_entry,
                              &(OptionsReader) { .caller = c, .method = method, .entry = entry, .userdata = userdata },
                              error);
}

int context_options_read(sd_bus_message *msg, Caller *c, const char *method, sd_bus_error *error) {
        return finish(read_options(msg, c, method, NULL, NULL, error), method, error);
}

/* --- CreateSandbox ----------------------------------------------------------------------------- */

static int create_entry(const char *key, sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        CreateOptions *o = userdata;
        const char *network;
        int r;

        if (streq(key, "name"))
                r = sd_bus_message_read(msg, "v", "s", &o->name);
        else if (streq(key, "type"))
                r = sd_bus_message_read(msg, "v", "s", &o->type);
        else if (streq(key, "snapshot"))
                r = sd_bus_message_read(msg, "v", "s", &o->snapshot);
        else if (streq(key, "network")) {
                r = sd_bus_message_read(msg, "v", "s", &network);
                if (r >= 0) {
                        SandboxNetwork n = sandbox_network_from_string(network);
                        if (n < 0)
                                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                         "Option 'network' must be \"none\", \"egress\" or "
                                                         "\"host\", not '%s'.",
                                                         network);
                        o->network = n;
                        o->have_network = true;
                }
        } else if (streq(key, "egress_policy")) {
                EgressPolicy p;

                r = sd_bus_message_enter_container(msg, 'v', "a{sv}");
                if (r < 0)
                        return bad_type(error, key, "a{sv}");
                r = egress_policy_from_bus(msg, &p, error);
                if (r < 0)
                        return r;
                egress_policy_done(&o->egress_policy); /* a repeated key: the last one counts */
                o->egress_policy = p;
                o->have_egress_policy = true;
                r = sd_bus_message_exit_container(msg);
        } else if (streq(key, "ttl_seconds")) {
                r = sd_bus_message_read(msg, "v", "t", &o->ttl_seconds);
                o->have_ttl = true;
        } else if (streq(key, "image")) {
                r = sd_bus_message_read(msg, "v", "s", &o->image);
                if (r >= 0 && !streq(o->image, "host") && !name_is_valid(o->image))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "Option 'image' must be \"host\" or an image's name, not '%s'.",
                                                 o->image);
        } else
                return unknown_option(error, "CreateSandbox", key);
        if (r < 0)
                return bad_type(error, key, streq(key, "ttl_seconds") ? "t" : "s");
        return 0;
}

void create_options_done(CreateOptions *o) {
        if (!o)
                return;
        egress_policy_done(&o->egress_policy);
        o->have_egress_policy = false;
}

int create_options_read(sd_bus_message *msg, Caller *c, CreateOptions *ret, sd_bus_error *error) {
        _cleanup_(create_options_done) CreateOptions o = {.egress_policy = EGRESS_POLICY_INIT};
        int r;

        r = read_options(msg, c, "CreateSandbox", create_entry, &o, error);
        if (r < 0)
                return finish(r, "CreateSandbox", error);
        if (o.name && !name_is_valid(o.name))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Invalid sandbox name '%s': 1-64 characters of A-Z a-z 0-9 . _ -, "
                                         "not starting with . or -.",
                                         o.name);
        if (o.name && sandbox_id_is_valid(o.name))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "A sandbox name may not look like a sandbox id: '%s'.", o.name);
        *ret = o;
        o = (CreateOptions) {.egress_policy = EGRESS_POLICY_INIT};
        return 0;
}

int create_options_check(const CreateOptions *o, const SandboxdConfig *config, CreateChoice *ret,
                         sd_bus_error *error) {
        static const EgressPolicy empty_policy = EGRESS_POLICY_INIT;
        const char *type = o->type ?: config->default_type;
        uint64_t ttl_usec = config->default_ttl_usec;
        const SandboxType *t;

        t = sandboxd_config_find_type(config, type);
        if (!t)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Unknown sandbox type '%s'.",
                                         type);
        if (o->have_ttl && (o->ttl_seconds == 0 || seconds_to_usec(o->ttl_seconds, &ttl_usec) < 0 ||
                            ttl_usec > config->max_ttl_usec))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "ttl_seconds must be between 1 and %" PRIu64 ".",
                                         config->max_ttl_usec / USEC_PER_SEC);

        SandboxNetwork network = o->have_network ? o->network : t->network;
        if (network == SANDBOX_NETWORK_HOST && !config->network.allow_host_network)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS,
                                        "Option 'network' \"host\" (the host's own network, unconfined) is "
                                        "not allowed here: sandboxd.conf's [Network] AllowHostNetwork=yes "
                                        "would allow it; use \"egress\" or \"none\".");
        if (o->have_egress_policy && network != SANDBOX_NETWORK_EGRESS)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Option 'egress_policy' needs network \"egress\", not \"%s\".",
                                         sandbox_network_to_string(network));

        const EgressPolicy *policy = NULL;
        if (network == SANDBOX_NETWORK_EGRESS)
                policy = o->have_egress_policy ? &o->egress_policy : t->egress ?: &empty_policy;

        /* Issue 24: the image, whose writable layer needs the type's disk. Whether the store has it is
         * the caller's to check. */
        const char *image = o->image ? (streq(o->image, "host") ? NULL : o->image) : (t->image[0] ? t->image : NULL);
        if (image && t->disk_max == 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Type %s has no disk (DiskMax=infinity): an image sandbox's writable "
                                         "layer lives on its disk.", t->name);

        *ret = (CreateChoice) {
                .type = t->name,
                .ttl_usec = ttl_usec,
                .network = network,
                .policy = policy,
                .image = image,
        };
        return 0;
}

/* --- Exec -------------------------------------------------------------------------------------- */

static bool env_name_is_valid(const char *k) {
        if (isempty(k) || (k[0] >= '0' && k[0] <= '9'))
                return false;
        for (const char *p = k; *p; p++)
                if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                      *p == '_'))
                        return false;
        return true;
}

static int read_env(sd_bus_message *msg, char ***ret, sd_bus_error *error) {
        _cleanup_strv_free_ char **env = NULL;
        const char *k, *v;
        size_t n = 0;
        int r;

        r = sd_bus_message_enter_container(msg, 'v', "a{ss}");
        if (r < 0)
                return bad_type(error, "env", "a{ss}");
        r = sd_bus_message_enter_container(msg, 'a', "{ss}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(msg, "{ss}", &k, &v)) > 0) {
                if (!env_name_is_valid(k))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "Invalid environment variable name '%s'.", k);
                if (n >= ENV_MAX_ITEMS)
                        return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                                 "More than %d environment variables.", ENV_MAX_ITEMS);
                char **ne = realloc(env, (n + 2) * sizeof(char *));
                if (!ne)
                        return -ENOMEM;
                env = ne;
                if (asprintf(&env[n], "%s=%s", k, v) < 0) {
                        env[n] = NULL;
                        return -ENOMEM;
                }
                env[++n] = NULL;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(msg);
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(msg);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(env);
        return 0;
}

static int exec_entry(const char *key, sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        ExecOptions *o = userdata;
        int r;

        if (streq(key, "cwd")) {
                if (sd_bus_message_read(msg, "v", "s", &o->cwd) < 0)
                        return bad_type(error, key, "s");
        } else if (streq(key, "env")) {
                char **env = NULL;
                r = read_env(msg, &env, error);
                if (r < 0)
                        return r;
                strv_free(o->env); /* the last one given counts */
                o->env = env;
        } else if (streq(key, "stdin")) {
                if (sd_bus_message_enter_container(msg, 'v', "ay") < 0)
                        return bad_type(error, key, "ay");
                r = sd_bus_message_read_array(msg, 'y', &o->stdin_data, &o->stdin_size);
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(msg);
                if (r < 0)
                        return r;
        } else if (streq(key, "timeout_seconds")) {
                if (sd_bus_message_read(msg, "v", "t", &o->timeout_seconds) < 0)
                        return bad_type(error, key, "t");
                o->have_timeout = true;
        } else if (streq(key, "memory_max")) {
                if (sd_bus_message_read(msg, "v", "t", &o->memory_max) < 0)
                        return bad_type(error, key, "t");
        } else if (streq(key, "tasks_max")) {
                if (sd_bus_message_read(msg, "v", "t", &o->tasks_max) < 0)
                        return bad_type(error, key, "t");
        } else if (streq(key, "stdout_fd")) {
                if (sd_bus_message_read(msg, "v", "h", &o->stdout_fd) < 0)
                        return bad_type(error, key, "h");
        } else if (streq(key, "stderr_fd")) {
                if (sd_bus_message_read(msg, "v", "h", &o->stderr_fd) < 0)
                        return bad_type(error, key, "h");
        } else if (streq(key, "cancel_fd")) {
                if (sd_bus_message_read(msg, "v", "h", &o->cancel_fd) < 0)
                        return bad_type(error, key, "h");
        } else
                return unknown_option(error, "Exec", key);
        return 0;
}

void exec_options_done(ExecOptions *o) {
        strv_free(o->env);
        o->env = NULL;
}

int exec_options_read(sd_bus_message *msg, Caller *c, ExecOptions *ret, sd_bus_error *error) {
        ExecOptions o = {.stdout_fd = -1, .stderr_fd = -1, .cancel_fd = -1};
        struct stat st;
        int r;

        r = read_options(msg, c, "Exec", exec_entry, &o, error);
        if (r < 0) {
                exec_options_done(&o);
                return finish(r, "Exec", error);
        }
        /* Its hang-up is what cancels the command: only pipes and sockets report one (epoll refuses
         * regular files, and a device may never hang up). */
        if (o.cancel_fd >= 0 &&
            (fstat(o.cancel_fd, &st) < 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))) {
                exec_options_done(&o);
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Option 'cancel_fd' must be a pipe or a socket.");
        }
        *ret = o;
        return 0;
}

static int process_entry(const char *key, sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        if (!streq(key, "cwd") && !streq(key, "env") && !streq(key, "timeout_seconds") && !streq(key, "memory_max") &&
            !streq(key, "tasks_max"))
                return unknown_option(error, "StartProcess", key);
        return exec_entry(key, msg, userdata, error);
}

int process_options_read(sd_bus_message *msg, Caller *c, ExecOptions *ret, sd_bus_error *error) {
        ExecOptions o = {.stdout_fd = -1, .stderr_fd = -1, .cancel_fd = -1};
        int r;

        r = read_options(msg, c, "StartProcess", process_entry, &o, error);
        if (r < 0) {
                exec_options_done(&o);
                return finish(r, "StartProcess", error);
        }
        *ret = o;
        return 0;
}

void exec_limits_done(ExecLimits *l) {
        free(l->cwd);
        l->cwd = NULL;
}

static int check_limit(sd_bus_error *error, const char *what, uint64_t v, uint64_t max, const char *type) {
        if (v <= max)
                return 0;
        return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                 "%s %" PRIu64 " exceeds the maximum of type '%s' (%" PRIu64 ").", what, v,
                                 type, max);
}

int exec_options_check(const ExecOptions *o, char **argv, const SandboxType *t, uint64_t stdin_max,
                       ExecLimits *ret, sd_bus_error *error) {
        _cleanup_free_ char *cwd = NULL;
        uint64_t timeout_usec, memory_max = o->memory_max, tasks_max = o->tasks_max;
        size_t n = 0, bytes = 0;
        int r;

        for (char **a = argv; a && *a; a++, n++)
                bytes += strlen(*a) + 1;
        if (n == 0 || isempty(argv[0]))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "argv must not be empty.");
        if (n > ARGV_MAX_ITEMS || bytes > ARGV_MAX_BYTES)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                         "argv is too long (%zu items, %zu bytes; at most %d and %d).", n,
                                         bytes, ARGV_MAX_ITEMS, ARGV_MAX_BYTES);
        if (o->stdin_size > stdin_max)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                         "stdin is %zu bytes; at most %" PRIu64 " are accepted.",
                                         o->stdin_size, stdin_max);
        if (o->cwd) {
                r = sandbox_resolve_path(o->cwd, &cwd);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Invalid cwd '%s'.",
                                                 o->cwd);
        }

        if (!o->have_timeout)
                timeout_usec = t->default_timeout_usec;
        else if (o->timeout_seconds == 0 || seconds_to_usec(o->timeout_seconds, &timeout_usec) < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "timeout_seconds must be between 1 and %" PRIu64 ".",
                                         t->max_timeout_usec / USEC_PER_SEC);
        r = check_limit(error, "timeout_seconds", timeout_usec / USEC_PER_SEC,
                        t->max_timeout_usec / USEC_PER_SEC, t->name);
        if (r < 0)
                return r;
        if (memory_max == 0)
                memory_max = t->memory_max;
        else if (memory_max < 1024 * 1024)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "memory_max must be at least 1 MiB.");
        r = check_limit(error, "memory_max", memory_max, t->memory_max, t->name);
        if (r < 0)
                return r;
        if (tasks_max == 0)
                tasks_max = t->tasks_max;
        r = check_limit(error, "tasks_max", tasks_max, t->tasks_max, t->name);
        if (r < 0)
                return r;

        *ret = (ExecLimits){
                .cwd = TAKE_PTR(cwd),
                .timeout_usec = timeout_usec,
                .memory_max = memory_max,
                .tasks_max = tasks_max,
        };
        return 0;
}

/* --- WriteFile, ReadFile ----------------------------------------------------------------------- */

static int write_file_entry(const char *key, sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        WriteFileOptions *o = userdata;

        if (streq(key, "mode")) {
                if (sd_bus_message_read(msg, "v", "u", &o->mode) < 0)
                        return bad_type(error, key, "u");
        } else if (streq(key, "create_dirs")) {
                if (sd_bus_message_read(msg, "v", "b", &o->create_dirs) < 0)
                        return bad_type(error, key, "b");
        } else if (streq(key, "append")) {
                if (sd_bus_message_read(msg, "v", "b", &o->append) < 0)
                        return bad_type(error, key, "b");
        } else if (streq(key, "fd")) {
                if (sd_bus_message_read(msg, "v", "h", &o->fd) < 0)
                        return bad_type(error, key, "h");
        } else
                return unknown_option(error, "WriteFile", key);
        return 0;
}

int write_file_options_read(sd_bus_message *msg, Caller *c, WriteFileOptions *ret, sd_bus_error *error) {
        WriteFileOptions o = {.mode = 0644, .fd = -1};
        int r;

        r = read_options(msg, c, "WriteFile", write_file_entry, &o, error);
        if (r < 0)
                return finish(r, "WriteFile", error);
        *ret = o;
        return 0;
}

static int resolve(const char *path, char **ret, sd_bus_error *error) {
        int r = sandbox_resolve_path(path, ret);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Invalid path '%s'.", path);
        return 0;
}

int write_file_options_check(const WriteFileOptions *o, const char *path, size_t size, uint64_t file_max,
                             char **ret_path, sd_bus_error *error) {
        _cleanup_free_ char *p = NULL;
        int r;

        r = resolve(path, &p, error);
        if (r < 0)
                return r;
        if (o->mode > 0777)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "mode %o is not within 0000-0777.", o->mode);
        if (size > file_max)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                         "data is %zu bytes; at most %" PRIu64
                                         " fit in one call (pass an fd).",
                                         size, file_max);
        if (o->fd >= 0 && size > 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Pass data or an fd, not both.");
        *ret_path = TAKE_PTR(p);
        return 0;
}

static int read_file_entry(const char *key, sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        ReadFileOptions *o = userdata;

        if (streq(key, "offset")) {
                if (sd_bus_message_read(msg, "v", "t", &o->offset) < 0)
                        return bad_type(error, key, "t");
        } else if (streq(key, "length")) {
                if (sd_bus_message_read(msg, "v", "t", &o->length) < 0)
                        return bad_type(error, key, "t");
        } else if (streq(key, "fd")) {
                if (sd_bus_message_read(msg, "v", "h", &o->fd) < 0)
                        return bad_type(error, key, "h");
        } else
                return unknown_option(error, "ReadFile", key);
        return 0;
}

int read_file_options_read(sd_bus_message *msg, Caller *c, ReadFileOptions *ret, sd_bus_error *error) {
        ReadFileOptions o = {.fd = -1};
        int r;

        r = read_options(msg, c, "ReadFile", read_file_entry, &o, error);
        if (r < 0)
                return finish(r, "ReadFile", error);
        *ret = o;
        return 0;
}

int read_file_options_check(const ReadFileOptions *o, const char *path, uint64_t file_max, char **ret_path,
                            sd_bus_error *error) {
        _cleanup_free_ char *p = NULL;
        int r;

        r = resolve(path, &p, error);
        if (r < 0)
                return r;
        if (o->fd < 0 && o->length > file_max)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                         "length %" PRIu64 " exceeds the %" PRIu64
                                         " bytes one reply may carry (pass an fd).",
                                         o->length, file_max);
        if (o->offset > (uint64_t) INT64_MAX)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "offset is out of range.");
        *ret_path = TAKE_PTR(p);
        return 0;
}

/* --- OpenShell --------------------------------------------------------------------------------- */

bool shell_size_is_valid(unsigned cols, unsigned rows) {
        return cols >= 1 && cols <= SHELL_COLS_MAX && rows >= 1 && rows <= SHELL_ROWS_MAX;
}

bool shell_term_is_valid(const char *term) {
        size_t n = term ? strlen(term) : 0;

        if (n == 0 || n > SHELL_TERM_MAX)
                return false;
        for (const char *p = term; *p; p++)
                if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                      *p == '.' || *p == '_' || *p == '+' || *p == '-'))
                        return false;
        return true;
}

static int shell_entry(const char *key, sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        ShellOptions *o = userdata;

        if (streq(key, "cols")) {
                if (sd_bus_message_read(msg, "v", "u", &o->cols) < 0)
                        return bad_type(error, key, "u");
        } else if (streq(key, "rows")) {
                if (sd_bus_message_read(msg, "v", "u", &o->rows) < 0)
                        return bad_type(error, key, "u");
        } else if (streq(key, "term")) {
                if (sd_bus_message_read(msg, "v", "s", &o->term) < 0)
                        return bad_type(error, key, "s");
        } else
                return unknown_option(error, "OpenShell", key);
        return 0;
}

int shell_options_read(sd_bus_message *msg, Caller *c, ShellOptions *ret, sd_bus_error *error) {
        ShellOptions o = {.cols = SHELL_COLS_DEFAULT, .rows = SHELL_ROWS_DEFAULT};
        int r;

        r = read_options(msg, c, "OpenShell", shell_entry, &o, error);
        if (r < 0)
                return finish(r, "OpenShell", error);
        *ret = o;
        return 0;
}

int shell_options_check(const ShellOptions *o, sd_bus_error *error) {
        if (!shell_size_is_valid(o->cols, o->rows))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Terminal size %ux%u: cols must be 1-%d and rows 1-%d.", o->cols,
                                         o->rows, SHELL_COLS_MAX, SHELL_ROWS_MAX);
        if (o->term && !shell_term_is_valid(o->term))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Invalid term: 1-%d characters of A-Z a-z 0-9 . _ + -.",
                                         SHELL_TERM_MAX);
        return 0;
}

/* --- the file tools ---------------------------------------------------------------------------- */

/* Which options each tool takes, besides the caller context. */
static bool tool_option_allowed(ToolKind k, const char *key) {
        if (streq(key, "path_bytes"))
                return true;
        if (streq(key, "overwrite") || streq(key, "mode") || streq(key, "create_dirs"))
                return k == TOOL_FILE_CREATE;
        if (streq(key, "fd"))
                return k == TOOL_FILE_CREATE || k == TOOL_VIEW;
        if (streq(key, "start_line") || streq(key, "end_line"))
                return k == TOOL_VIEW;
        if (streq(key, "max_results"))
                return k == TOOL_LS || k == TOOL_GLOB || k == TOOL_GREP;
        if (streq(key, "path"))
                return k == TOOL_GLOB || k == TOOL_GREP;
        if (streq(key, "glob") || streq(key, "ignore_case"))
                return k == TOOL_GREP;
        return false;
}

static int tool_bad_type(sd_bus_error *error, const char *method, const char *key, const char *sig) {
        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "%s: option '%s' must be of type '%s'.",
                                 method, key, sig);
}

typedef struct ToolOptionsReader {
        ToolKind kind;
        ToolOptions *o;
} ToolOptionsReader;

static int tool_entry(const char *key, sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        ToolOptionsReader *t = userdata;
        ToolOptions *o = t->o;
        const char *method = tool_method[t->kind];
        int b;

        if (!tool_option_allowed(t->kind, key))
                return unknown_option(error, method, key);
        if (streq(key, "path_bytes")) {
                if (sd_bus_message_enter_container(msg, 'v', "ay") <= 0 ||
                    sd_bus_message_read_array(msg, 'y', &o->path_bytes, &o->path_bytes_size) < 0 ||
                    sd_bus_message_exit_container(msg) < 0)
                        return tool_bad_type(error, method, key, "ay");
        } else if (streq(key, "path") || streq(key, "glob")) {
                if (sd_bus_message_read(msg, "v", "s", streq(key, "path") ? &o->path : &o->glob) < 0)
                        return tool_bad_type(error, method, key, "s");
        } else if (streq(key, "fd")) {
                if (sd_bus_message_read(msg, "v", "h", &o->fd) < 0)
                        return tool_bad_type(error, method, key, "h");
        } else if (streq(key, "overwrite") || streq(key, "create_dirs") || streq(key, "ignore_case")) {
                if (sd_bus_message_read(msg, "v", "b", &b) < 0)
                        return tool_bad_type(error, method, key, "b");
                *(streq(key, "overwrite")     ? &o->overwrite
                  : streq(key, "create_dirs") ? &o->create_dirs
                                              : &o->ignore_case) = b;
        } else {
                uint32_t *u = streq(key, "mode")         ? &o->mode
                              : streq(key, "start_line") ? &o->start_line
                              : streq(key, "end_line")   ? &o->end_line
                                                         : &o->max_results;
                if (sd_bus_message_read(msg, "v", "u", u) < 0)
                        return tool_bad_type(error, method, key, "u");
        }
        return 0;
}

int tool_options_read(ToolKind kind, sd_bus_message *msg, Caller *c, ToolOptions *ret, sd_bus_error *error) {
        ToolOptions o = {.fd = -1, .mode = 0644};
        ToolOptionsReader t = {.kind = kind, .o = &o};
        int r;

        assert(kind >= 0 && kind < _TOOL_KIND_MAX);
        r = read_options(msg, c, tool_method[kind], tool_entry, &t, error);
        if (r < 0)
                return finish(r, tool_method[kind], error);
        if (o.glob && (isempty(o.glob) || strlen(o.glob) > TOOL_PATTERN_MAX))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Grep: 'glob' must be 1 to %d bytes.", TOOL_PATTERN_MAX);
        *ret = o;
        return 0;
}
