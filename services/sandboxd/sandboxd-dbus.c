/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd on the bus: the Manager's and the sandboxes' vtables, errors and signals. */
#include "sandboxd-dbus.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit-spool.h"
#include "caller.h"
#include "daemon-util.h"
#include "log.h"
#include "macro.h"
#include "sandbox-exec.h"
#include "sandbox-files.h"
#include "sandbox-options.h"
#include "sandbox-shell.h"
#include "sandbox-id.h"
#include "sandbox-tools.h"
#include "sandbox.h"
#include "sandboxd-manager.h"
#include "time-util.h"

/* --- caller ------------------------------------------------------------------------------------- */

static int caller_check(Manager *m, sd_bus_message *msg, Caller *ret, sd_bus_error *error) {
        uid_t uid;
        int r;

        r = manager_sender_uid(m, msg, &uid);
        if (r < 0)
                return r;
        caller_from_uid(ret, uid, uid == 0 || uid == m->gateway_uid);
        if (!manager_uid_is_admin(m, uid))
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "Only root and members of sandbox-admin may use sandboxd.");
        return 0;
}

/* What the audit row of a failed call needs to know. */
typedef struct CallInfo {
        const char *operation;
        char session_id[SANDBOX_NAME_MAX + 1];
} CallInfo;

static void call_info_set_session(CallInfo *ci, const char *id) {
        snprintf(ci->session_id, sizeof(ci->session_id), "%s", id);
}

/* How every call on one sandbox opens: the caller may use sandboxd at all, and the sandbox it names
 * (the first argument) goes into the audit row of a failure. The other arguments follow it. */
static int call_begin(Manager *m, sd_bus_message *msg, Caller *c, CallInfo *ci, const char **ret_id,
                      sd_bus_error *error) {
        int r;

        r = caller_check(m, msg, c, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(msg, "s", ret_id);
        if (r < 0)
                return r;
        call_info_set_session(ci, *ret_id);
        return 0;
}

typedef int (*audited_method_t)(sd_bus_message *msg, Manager *m, Caller *c, CallInfo *ci, sd_bus_error *error);

/* Every mutating method goes through here: a call that fails (bad input, denied, …) still gets its
 * audit row, spooled before the error goes out. Calls that succeed record their row themselves, when
 * the operation is done. */
static int audited(sd_bus_message *msg, void *userdata, sd_bus_error *error, const char *operation,
                   audited_method_t handler) {
        Manager *m = userdata;
        CallInfo ci = { .operation = operation };
        uint64_t started = now_usec(CLOCK_REALTIME), mono = now_usec(CLOCK_MONOTONIC);
        Caller c;
        int r;

        caller_unknown(&c);
        r = handler(msg, m, &c, &ci, error);
        if (r >= 0)
                return r;

        const char *name = sd_bus_error_is_set(error) ? error->name : NULL;
        const char *message = sd_bus_error_is_set(error) ? error->message : strerror(-r);
        _cleanup_free_ char *detail = audit_detail_error(name ?: SD_BUS_ERROR_FAILED, message);
        AuditRow row = {
                .session_id = ci.session_id,
                .operation = operation,
                .event = streq_ptr(name, SD_BUS_ERROR_ACCESS_DENIED) ||
                                 streq_ptr(name, SANDBOXD_ERROR_PERMISSION_DENIED)
                         ? "denied"
                         : "failed",
                .detail = detail,
                .exit_code = -1,
                .started_at = started,
                .duration_usec = now_usec(CLOCK_MONOTONIC) - mono,
        };
        manager_audit(m, &c, &row);
        return r;
}

#define AUDITED(fn, op)                                                                                             static int vt_##fn(sd_bus_message *msg, void *userdata, sd_bus_error *error) {                                      return audited(msg, userdata, error, op, method_##fn);                                              }

static Sandbox *find_sandbox(Manager *m, const char *id) {
        Sandbox *s = hashmap_get(m->sandboxes, id);
        return s ?: hashmap_get(m->sandbox_names, id);
}

static int no_such_sandbox(sd_bus_error *error, const char *id) {
        return sd_bus_error_setf(error, SANDBOXD_ERROR_NO_SUCH_SANDBOX, "No sandbox '%s'.", id);
}

static int get_running(Manager *m, const char *id, Sandbox **ret, sd_bus_error *error) {
        Sandbox *s = find_sandbox(m, id);
        if (!s)
                return no_such_sandbox(error, id);
        if (s->state != SANDBOX_RUNNING)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NOT_RUNNING, "Sandbox %s is %s.", s->id,
                                         sandbox_state_to_string(s->state));
        *ret = s;
        return 0;
}

static int seconds_to_usec(uint64_t sec, uint64_t *ret) {
        if (sec > UINT64_MAX / USEC_PER_SEC)
                return -ERANGE;
        *ret = sec * USEC_PER_SEC;
        return 0;
}

static char *format_seconds(uint64_t usec, char buf[static 32]) {
        snprintf(buf, 32, "%" PRIu64, usec / USEC_PER_SEC);
        return buf;
}

/* --- Manager methods ------------------------------------------------------------------------------ */

int sandbox_reply_created(Sandbox *s, sd_bus_message *request) {
        _cleanup_free_ char *path = sandbox_bus_path(s);
        if (!path)
                return sd_bus_reply_method_errno(request, -ENOMEM, NULL);
        return sd_bus_reply_method_return(request, "so", s->id, path);
}

static int method_create_sandbox(sd_bus_message *msg, Manager *m, Caller *c, CallInfo *ci, sd_bus_error *error) {
        CreateOptions o;
        const char *type;
        uint64_t ttl_usec;
        int r;

        r = caller_check(m, msg, c, error);
        if (r < 0)
                return r;
        r = create_options_read(msg, c, &o, error);
        if (r < 0)
                return r;
        if (o.name && (hashmap_get(m->sandbox_names, o.name) || hashmap_get(m->sandboxes, o.name)))
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NAME_EXISTS, "A sandbox named '%s' exists already.",
                                         o.name);
        r = create_options_check(&o, &m->config, &type, &ttl_usec, error);
        if (r < 0)
                return r;
        if (hashmap_size(m->sandboxes) >= m->config.max_sandboxes)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                         "There are %zu sandboxes already, the configured maximum.",
                                         hashmap_size(m->sandboxes));
        /* Per owner, exactly: sandboxes being created are in the table already. */
        uint64_t per_account = m->config.totals.max_per_account;
        if (per_account != SANDBOX_TOTAL_INFINITY) {
                uint64_t n = 0;
                size_t state = 0;
                Sandbox *s;
                while (hashmap_iterate(m->sandboxes, &state, (void **) &s, NULL))
                        if (streq_ptr(s->owner, c->account_id))
                                n++;
                if (n >= per_account)
                        return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                                 "Account %s has %" PRIu64 " sandboxes already, at most %" PRIu64
                                                 " are allowed (MaxSandboxesPerAccount=).",
                                                 c->account_id, n, per_account);
        }
        const SandboxType *t = sandboxd_config_find_type(&m->config, type);
        if (t && t->disk_max > 0 && !manager_disk_template(m, t->disk_max, &r))
                return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED,
                                         "Could not create the sandbox: the disk image of type %s (DiskMax=%" PRIu64
                                         ") could not be made at start-up (%s); see sandboxd's journal.",
                                         t->name, t->disk_max, r == -ENOEXEC ? "mkfs.ext4 failed" : strerror(-r));

        SandboxCreateSpec spec = {
                .name = o.name,
                .type = type,
                .owner = c->account_id,
                .ttl_usec = ttl_usec,
                .private_network = streq(o.network, "none"),
                .caller = c,
        };
        r = sandbox_create(m, &spec, msg, NULL);
        if (r == -EUSERS)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED, "No free sandbox uid is left.");
        if (r == -E2BIG && t) {
                /* Refused by the admission check before anything was made: the same sum says why. */
                char why[512];
                if (manager_admit(m, t, why, sizeof(why)) < 0)
                        return sd_bus_error_set(error, SANDBOXD_ERROR_LIMIT_EXCEEDED, why);
        }
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not create the sandbox: %s", strerror(-r));
        return 1; /* answered when the sandbox runs */
}

static int method_get_sandbox(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const char *id;
        Caller c;
        int r;

        r = caller_check(m, msg, &c, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(msg, "s", &id);
        if (r < 0)
                return r;
        Sandbox *s = find_sandbox(m, id);
        if (!s)
                return no_such_sandbox(error, id);
        _cleanup_free_ char *path = sandbox_bus_path(s);
        if (!path)
                return -ENOMEM;
        return sd_bus_reply_method_return(msg, "o", path);
}

static int method_list_sandboxes(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        Sandbox *s = NULL;
        size_t state = 0;
        Caller c;
        int r;

        r = caller_check(m, msg, &c, error);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_return(msg, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(ssssso)");
        if (r < 0)
                return r;
        while (hashmap_iterate(m->sandboxes, &state, (void **) &s, NULL)) {
                _cleanup_free_ char *path = sandbox_bus_path(s);
                if (!path)
                        return -ENOMEM;
                r = sd_bus_message_append(reply, "(ssssso)", s->id, s->name, s->type,
                                          sandbox_state_to_string(s->state), s->owner, path);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_set_ttl(sd_bus_message *msg, Manager *m, Caller *c, CallInfo *ci, sd_bus_error *error) {
        const char *id;
        uint64_t ttl, usec;
        Sandbox *s = NULL;
        char b[32];
        int r;

        r = call_begin(m, msg, c, ci, &id, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(msg, "t", &ttl);
        if (r < 0)
                return r;
        r = context_options_read(msg, c, "SetTTL", error);
        if (r < 0)
                return r;
        r = get_running(m, id, &s, error);
        if (r < 0)
                return r;
        if (ttl == 0 || seconds_to_usec(ttl, &usec) < 0 || usec > m->config.max_ttl_usec)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "ttl_seconds must be between 1 and %s.",
                                         format_seconds(m->config.max_ttl_usec, b));
        r = sandbox_set_ttl(s, usec);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not set the TTL: %s", strerror(-r));
        log_sandbox(LOG_INFO, s->id, "TTL of sandbox %s set to %" PRIu64 " s by %s.", s->id, ttl, c->account_id);
        sandbox_audit(s, c, "sandbox.update", "finished", NULL, NULL, now_usec(CLOCK_REALTIME),
                      now_usec(CLOCK_MONOTONIC));
        return sd_bus_reply_method_return(msg, NULL);
}

static int method_delete_sandbox(sd_bus_message *msg, Manager *m, Caller *c, CallInfo *ci, sd_bus_error *error) {
        const char *id;
        int r;

        r = call_begin(m, msg, c, ci, &id, error);
        if (r < 0)
                return r;
        r = context_options_read(msg, c, "DeleteSandbox", error);
        if (r < 0)
                return r;
        Sandbox *s = find_sandbox(m, id);
        if (!s)
                return no_such_sandbox(error, id);
        r = sandbox_delete(s, msg, "sandbox.delete", c);
        if (r == -EBUSY)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NOT_RUNNING, "Sandbox %s is still being created.", s->id);
        if (r < 0)
                return r;
        return 1;
}

static int method_exec(sd_bus_message *msg, Manager *m, Caller *c, CallInfo *ci, sd_bus_error *error) {
        _cleanup_strv_free_ char **argv = NULL;
        _cleanup_(exec_options_done) ExecOptions o = {};
        _cleanup_(exec_limits_done) ExecLimits l = {};
        const char *id;
        Sandbox *s = NULL;
        int r;

        r = call_begin(m, msg, c, ci, &id, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read_strv(msg, &argv);
        if (r < 0)
                return r;
        r = exec_options_read(msg, c, &o, error);
        if (r < 0)
                return r;

        r = get_running(m, id, &s, error);
        if (r < 0)
                return r;
        const SandboxType *t = sandboxd_config_find_type(&m->config, s->type);
        if (!t)
                return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED,
                                         "Sandbox %s has type '%s', which the configuration no longer defines.",
                                         s->id, s->type);
        r = exec_options_check(&o, argv, t, m->config.stdin_max, &l, error);
        if (r < 0)
                return r;

        ExecSpec spec = {
                .argv = argv,
                .env = o.env,
                .cwd = l.cwd,
                .stdin_data = o.stdin_data,
                .stdin_size = o.stdin_size,
                .timeout_usec = l.timeout_usec,
                .memory_max = l.memory_max,
                .tasks_max = l.tasks_max,
                .stdout_fd = o.stdout_fd,
                .stderr_fd = o.stderr_fd,
                .cancel_fd = o.cancel_fd,
                .caller = c,
                .started_at = now_usec(CLOCK_REALTIME),
        };
        r = exec_start(s, &spec, msg);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not start the command: %s", strerror(-r));
        return 1;
}

static int method_write_file(sd_bus_message *msg, Manager *m, Caller *c, CallInfo *ci, sd_bus_error *error) {
        _cleanup_free_ char *path = NULL;
        const char *id, *path_arg;
        const void *data;
        size_t size;
        WriteFileOptions o;
        Sandbox *s = NULL;
        int r;

        r = call_begin(m, msg, c, ci, &id, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(msg, "s", &path_arg);
        if (r < 0)
                return r;
        r = sd_bus_message_read_array(msg, 'y', &data, &size);
        if (r < 0)
                return r;
        r = write_file_options_read(msg, c, &o, error);
        if (r < 0)
                return r;

        r = get_running(m, id, &s, error);
        if (r < 0)
                return r;
        r = write_file_options_check(&o, path_arg, size, m->config.file_max, &path, error);
        if (r < 0)
                return r;

        FileWriteSpec spec = {
                .path = path,
                .data = data,
                .size = size,
                .data_fd = o.fd,
                .mode = o.mode,
                .create_dirs = o.create_dirs,
                .append = o.append,
        };
        r = sandbox_write_file(s, &spec, c, msg);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not write %s: %s", path, strerror(-r));
        return 1;
}

static int method_read_file(sd_bus_message *msg, Manager *m, Caller *c, CallInfo *ci, sd_bus_error *error) {
        _cleanup_free_ char *path = NULL;
        const char *id, *path_arg;
        ReadFileOptions o;
        Sandbox *s = NULL;
        int r;

        r = call_begin(m, msg, c, ci, &id, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(msg, "s", &path_arg);
        if (r < 0)
                return r;
        r = read_file_options_read(msg, c, &o, error);
        if (r < 0)
                return r;

        r = get_running(m, id, &s, error);
        if (r < 0)
                return r;
        r = read_file_options_check(&o, path_arg, m->config.file_max, &path, error);
        if (r < 0)
                return r;

        FileReadSpec spec = {
                .path = path,
                .offset = o.offset,
                .length = o.length,
                .cap = o.fd >= 0 ? 0 : m->config.file_max,
                .out_fd = o.fd,
        };
        r = sandbox_read_file(s, &spec, c, msg);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not read %s: %s", path, strerror(-r));
        return 1;
}

/* --- takeover shells (sandbox-shell.c) ------------------------------------------------------------ */

static int method_open_shell(sd_bus_message *msg, Manager *m, Caller *c, CallInfo *ci, sd_bus_error *error) {
        const char *id;
        ShellOptions o;
        Sandbox *s = NULL;
        int r;

        r = call_begin(m, msg, c, ci, &id, error);
        if (r < 0)
                return r;
        r = shell_options_read(msg, c, &o, error);
        if (r < 0)
                return r;

        r = get_running(m, id, &s, error);
        if (r < 0)
                return r;
        r = shell_options_check(&o, error);
        if (r < 0)
                return r;

        ShellSpec spec = {
                .cols = o.cols,
                .rows = o.rows,
                .term = o.term,
                .caller = c,
                .started_at = now_usec(CLOCK_REALTIME),
                .opener = c->uid,
        };
        r = shell_open(s, &spec, msg);
        if (r == -EUSERS)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                         "Sandbox %s has %d shells open already, the maximum.", s->id,
                                         SHELL_MAX_PER_SANDBOX);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not start the shell: %s", strerror(-r));
        return 1;
}

static int method_resize_shell(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const char *unit;
        uint32_t cols, rows;
        Caller c;
        int r;

        r = caller_check(m, msg, &c, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(msg, "suu", &unit, &cols, &rows);
        if (r < 0)
                return r;
        if (!shell_size_is_valid(cols, rows))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Terminal size %ux%u: cols must be 1-%d and rows 1-%d.", cols, rows,
                                         SHELL_COLS_MAX, SHELL_ROWS_MAX);
        r = shell_resize(m, unit, c.uid, cols, rows);
        if (r == -ENOENT)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NO_SUCH_SHELL, "No shell '%s' of yours.", unit);
        if (r == -ESRCH)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NOT_RUNNING, "Shell %s has ended.", unit);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not resize %s: %s", unit, strerror(-r));
        return sd_bus_reply_method_return(msg, NULL);
}

static int method_wait_shell(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const char *unit;
        Caller c;
        int r;

        r = caller_check(m, msg, &c, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(msg, "s", &unit);
        if (r < 0)
                return r;
        r = shell_wait(m, unit, c.uid, msg);
        if (r == -ENOENT)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NO_SUCH_SHELL,
                                         "No shell '%s' of yours (results are kept for a minute after the end).",
                                         unit);
        if (r < 0)
                return r;
        return 1;
}

AUDITED(create_sandbox, "sandbox.create")
AUDITED(set_ttl, "sandbox.update")
AUDITED(delete_sandbox, "sandbox.delete")
AUDITED(exec, "exec")
AUDITED(write_file, "write")
AUDITED(read_file, "read")
AUDITED(open_shell, "takeover")

/* The checks every Manager method makes, for the methods that live in other modules (sandbox-tools.c). */
int sandboxd_caller_check(Manager *m, sd_bus_message *msg, Caller *ret, sd_bus_error *error) {
        return caller_check(m, msg, ret, error);
}

int sandboxd_get_running(Manager *m, const char *id, Sandbox **ret, sd_bus_error *error) {
        return get_running(m, id, ret, error);
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD_WITH_ARGS("CreateSandbox", SD_BUS_ARGS("a{sv}", options), SD_BUS_RESULT("s", id, "o", path),
                                vt_create_sandbox, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetSandbox", SD_BUS_ARGS("s", id), SD_BUS_RESULT("o", path), method_get_sandbox,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListSandboxes", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(ssssso)", sandboxes),
                                method_list_sandboxes, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("SetTTL", SD_BUS_ARGS("s", id, "t", ttl_seconds, "a{sv}", context), SD_BUS_NO_RESULT,
                                vt_set_ttl, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("DeleteSandbox", SD_BUS_ARGS("s", id, "a{sv}", context), SD_BUS_NO_RESULT,
                                vt_delete_sandbox, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Exec", SD_BUS_ARGS("s", id, "as", argv, "a{sv}", options),
                                SD_BUS_RESULT("i", exit_code, "ay", stdout, "ay", stderr, "a{sv}", info),
                                vt_exec, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("WriteFile", SD_BUS_ARGS("s", id, "s", path, "ay", data, "a{sv}", options),
                                SD_BUS_NO_RESULT, vt_write_file, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ReadFile", SD_BUS_ARGS("s", id, "s", path, "a{sv}", options),
                                SD_BUS_RESULT("ay", data, "a{sv}", info), vt_read_file,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("OpenShell", SD_BUS_ARGS("s", id, "a{sv}", options), SD_BUS_RESULT("h", stream, "s", unit),
                                vt_open_shell, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ResizeShell", SD_BUS_ARGS("s", unit, "u", cols, "u", rows), SD_BUS_NO_RESULT,
                                method_resize_shell, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("WaitShell", SD_BUS_ARGS("s", unit), SD_BUS_RESULT("i", exit_code, "a{sv}", info),
                                method_wait_shell, SD_BUS_VTABLE_UNPRIVILEGED),
        SANDBOX_TOOLS_METHODS,
        SD_BUS_SIGNAL_WITH_ARGS("SandboxNew", SD_BUS_ARGS("s", id, "o", path), 0),
        SD_BUS_SIGNAL_WITH_ARGS("SandboxRemoved", SD_BUS_ARGS("s", id, "o", path), 0),
        SD_BUS_VTABLE_END,
};

/* --- per-sandbox objects -------------------------------------------------------------------------- */

static int sandbox_object_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
                               sd_bus_error *error) {
        Manager *m = userdata;
        _cleanup_free_ char *id = NULL;
        int r;

        r = sd_bus_path_decode(path, SANDBOXD_SANDBOX_PATH_PREFIX, &id);
        if (r <= 0)
                return r;
        Sandbox *s = hashmap_get(m->sandboxes, id);
        if (!s)
                return 0;
        /* Property reads are checked here, like method calls: the bus policy is not the only guard. */
        sd_bus_message *msg = sd_bus_get_current_message(bus);
        if (msg) {
                Caller c;
                r = caller_check(m, msg, &c, error);
                if (r < 0)
                        return r;
        }
        *found = s;
        return 1;
}

static int sandbox_node_enumerator(sd_bus *bus, const char *path, void *userdata, char ***nodes,
                                   sd_bus_error *error) {
        Manager *m = userdata;
        size_t n = 0, state = 0;
        Sandbox *s = NULL;
        char **l = calloc(hashmap_size(m->sandboxes) + 1, sizeof(char *));

        if (!l)
                return -ENOMEM;
        while (hashmap_iterate(m->sandboxes, &state, (void **) &s, NULL)) {
                l[n] = sandbox_bus_path(s);
                if (!l[n]) {
                        strv_free(l);
                        return -ENOMEM;
                }
                n++;
        }
        *nodes = l;
        return 1;
}

static int property_state(sd_bus *bus, const char *path, const char *interface, const char *property,
                          sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Sandbox *s = userdata;
        return sd_bus_message_append(reply, "s", sandbox_state_to_string(s->state));
}

static int property_network(sd_bus *bus, const char *path, const char *interface, const char *property,
                            sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Sandbox *s = userdata;
        return sd_bus_message_append(reply, "s", s->private_network ? "none" : "host");
}

static int property_string_ptr(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        char **p = userdata;
        return sd_bus_message_append(reply, "s", strempty(*p));
}

static int property_id(sd_bus *bus, const char *path, const char *interface, const char *property,
                       sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "s", (const char *) userdata);
}

static const sd_bus_vtable sandbox_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Id", "s", property_id, offsetof(Sandbox, id), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Name", "s", property_string_ptr, offsetof(Sandbox, name), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Type", "s", property_string_ptr, offsetof(Sandbox, type), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("State", "s", property_state, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Uid", "u", NULL, offsetof(Sandbox, uid), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Unit", "s", property_string_ptr, offsetof(Sandbox, slice), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Network", "s", property_network, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Owner", "s", property_string_ptr, offsetof(Sandbox, owner), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("CreatedAt", "t", NULL, offsetof(Sandbox, created_at), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("ExpiresAt", "t", NULL, offsetof(Sandbox, expires_at), SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_VTABLE_END,
};

/* --- signals ------------------------------------------------------------------------------------ */

void sandbox_emit_new(Sandbox *s) {
        _cleanup_free_ char *path = sandbox_bus_path(s);
        if (path)
                (void) sd_bus_emit_signal(s->manager->bus, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "SandboxNew",
                                          "so", s->id, path);
}

void sandbox_emit_removed(Sandbox *s) {
        _cleanup_free_ char *path = sandbox_bus_path(s);
        if (path)
                (void) sd_bus_emit_signal(s->manager->bus, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                                          "SandboxRemoved", "so", s->id, path);
}

void sandbox_emit_changed(Sandbox *s, const char *property) {
        _cleanup_free_ char *path = NULL;

        /* A pooled sandbox is not on the bus yet. */
        if (s->pooled || !hashmap_get(s->manager->sandboxes, s->id))
                return;
        path = sandbox_bus_path(s);
        if (path)
                (void) sd_bus_emit_properties_changed(s->manager->bus, path, SANDBOXD_SANDBOX_INTERFACE, property,
                                                      NULL);
}

int manager_bus_setup(Manager *m) {
        int r;

        r = daemon_bus_open(m->event, true, &m->bus);
        if (r < 0)
                return r;
        r = sd_bus_add_object_vtable(m->bus, NULL, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, manager_vtable, m);
        if (r < 0)
                return r;
        r = sd_bus_add_fallback_vtable(m->bus, NULL, SANDBOXD_SANDBOX_PATH_PREFIX, SANDBOXD_SANDBOX_INTERFACE,
                                       sandbox_vtable, sandbox_object_find, m);
        if (r < 0)
                return r;
        r = sd_bus_add_node_enumerator(m->bus, NULL, SANDBOXD_SANDBOX_PATH_PREFIX, sandbox_node_enumerator, m);
        if (r < 0)
                return r;
        r = sd_bus_add_object_manager(m->bus, NULL, SANDBOXD_BUS_PATH);
        if (r < 0)
                return r;
        return sd_bus_error_add_map(sandboxd_bus_errors);
}
