/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd on the bus: the Manager's method table, its dispatcher and vtable, and the error map (the
 * sandboxes' objects are sandbox-dbus.c's). */
#include "sandboxd-dbus.h"

#include <assert.h>
#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caller.h"
#include "daemon-util.h"
#include "egress-policy.h"
#include "image-dbus.h"
#include "image-store.h"
#include "log.h"
#include "macro.h"
#include "sandbox-dbus.h"
#include "sandbox-exec.h"
#include "sandbox-files.h"
#include "sandbox-options.h"
#include "sandbox-pause.h"
#include "sandbox-snapshot.h"
#include "sandbox-process.h"
#include "sandbox-shell.h"
#include "sandbox-id.h"
#include "sandbox-tools.h"
#include "sandbox.h"
#include "sandboxd-manager.h"
#include "time-util.h"

/* --- the method table ---------------------------------------------------------------------------- */

/* One call, as the dispatcher carries it from the caller check to the handler and the failure row. */
typedef struct Call {
        Manager *manager;
        sd_bus_message *msg;
        Caller caller;
        char session_id[SANDBOX_NAME_MAX + 1]; /* the id as given, then the sandbox's own */
        uint64_t started_at, mono;
} Call;

/* Each method's arguments after the id, from its read() to its run(). */
typedef union MethodArgs {
        CreateOptions create;
        struct {
                uint64_t ttl;
        } set_ttl;
        struct {
                const char *name; /* SnapshotSandbox; RemoveSnapshot: the snapshot's id or name */
        } snapshot;
        EgressPolicy network_policy;
        struct {
                char **argv;
                ExecOptions o;
        } exec;
        struct {
                const char *path;
                const void *data;
                size_t size;
                WriteFileOptions o;
        } write_file;
        struct {
                const char *path;
                ReadFileOptions o;
        } read_file;
        ShellOptions open_shell;
        struct {
                const char *unit;
                uint32_t cols, rows;
        } shell;
        ToolCall *tool;
        struct {
                const char *id;     /* the process's id: all but StartProcess */
                char **argv;        /* StartProcess */
                ExecOptions o;      /* StartProcess */
                int32_t signal;     /* SignalProcess */
                const char *stream; /* ReadProcessOutput */
                uint64_t offset;
                uint32_t max;
                const void *data;   /* WriteProcessStdin */
                size_t size;
                int close;
                int fd;             /* AttachProcessOutput */
        } process;
} MethodArgs;

typedef enum MethodSandbox {
        METHOD_NO_SANDBOX,      /* the call names none (its first argument is no sandbox id) */
        METHOD_ANY_SANDBOX,     /* the first argument names one, by id or name, in any state */
        METHOD_RUNNING_SANDBOX, /* the same, and it must be running */
        METHOD_ACTIVE_SANDBOX,  /* running and not paused (issue 26: AutoResume= resumes it first) */
} MethodSandbox;

/* A row of the Manager's method table: what the dispatcher does for the method before its handler
 * (docs/architecture.md, "Source layout"). read() takes the arguments after the id (the caller context among
 * them, so that a failure's row names whom the gateway speaks for), run() does the work with the sandbox
 * found; done() frees what read() took. A row with an operation is audited: a call that fails gets its
 * row here, spooled before the error goes out (with failure_detail()'s detail, if the row has one);
 * calls that succeed record theirs when the operation is done. */
typedef struct MethodRow {
        const char *member;
        const char *operation; /* the audit row's; NULL: not audited (reads) */
        MethodSandbox sandbox;
        ToolKind tool;         /* the file tools' rows: which */
        int (*read)(const struct MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error);
        int (*run)(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error);
        void (*done)(MethodArgs *a);
        char *(*failure_detail)(MethodArgs *a, const sd_bus_error *error);
} MethodRow;

static Sandbox *find_sandbox(Manager *m, const char *id) {
        Sandbox *s = hashmap_get(m->sandboxes, id);
        return s ?: hashmap_get(m->sandbox_names, id);
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

static int read_create_sandbox(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        return create_options_read(call->msg, &call->caller, &a->create, error);
}

static void done_create_sandbox(MethodArgs *a) {
        create_options_done(&a->create);
}

/* A sandbox from a snapshot runs on the image its disk holds the upper layer of (or on the host's tree, for a
 * host sandbox's snapshot): another lower layer under that upper one would show its files over a tree they
 * were never written on. So o->image becomes the snapshot's; an explicit other image, or without one an
 * explicit type whose Image= is another, is refused. (The snapshot's own type, taken when none is given, may
 * have changed its Image= since: the snapshot's image counts.) */
static int snapshot_choose_image(Manager *m, const Snapshot *snap, CreateOptions *o, sd_bus_error *error) {
        const char *want = snapshot_image_name(snap);

        if (o->image) {
                if (!streq(o->image, want))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "Snapshot %s (%s) holds the disk of a sandbox on image '%s'; a "
                                                 "sandbox made from it runs on that image, not on '%s'.",
                                                 snap->id, snap->name, want, o->image);
        } else if (o->type) {
                const SandboxType *t = sandboxd_config_find_type(&m->config, o->type);
                const char *type_image = t && t->image[0] ? t->image : "host";
                if (t && !streq(type_image, want))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "Snapshot %s (%s) holds the disk of a sandbox on image '%s', and "
                                                 "type %s has Image=%s; give option 'image' \"%s\" to make it "
                                                 "of that type on the snapshot's image.",
                                                 snap->id, snap->name, want, t->name, type_image, want);
        }
        o->image = want;
        return 0;
}

static int run_create_sandbox(Call *call, Sandbox *unused, MethodArgs *a, sd_bus_error *error) {
        Manager *m = call->manager;
        Caller *c = &call->caller;
        CreateOptions *o = &a->create;
        CreateChoice choice;
        int r;

        if (o->name && (hashmap_get(m->sandbox_names, o->name) || hashmap_get(m->sandboxes, o->name)))
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NAME_EXISTS, "A sandbox named '%s' exists already.",
                                         o->name);
        /* Issue 26: a snapshot's disk. Without a type, the snapshot's; with one, its disk must be as large. */
        Snapshot *snap = NULL;
        if (o->snapshot) {
                snap = snapshot_find(m, o->snapshot, false);
                if (!snap)
                        return sd_bus_error_setf(error, SANDBOXD_ERROR_NO_SUCH_SNAPSHOT, "No snapshot '%s'.",
                                                 o->snapshot);
                r = snapshot_choose_image(m, snap, o, error);
                if (r < 0)
                        return r;
                if (!o->type)
                        o->type = snap->type;
        }
        r = create_options_check(o, &m->config, &choice, error);
        if (r < 0)
                return r;
        const char *type = choice.type;
        char snap_image[4096];
        if (snap) {
                const SandboxType *st = sandboxd_config_find_type(&m->config, type);
                if (!st || st->disk_max != snap->disk_size)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "Snapshot %s is of a disk of %" PRIu64 " bytes (type %s); type %s "
                                                 "has DiskMax=%" PRIu64 ".",
                                                 snap->id, snap->disk_size, snap->type, type, st ? st->disk_max : 0);
                snapshot_image_path(m, snap, snap_image, sizeof(snap_image));
        }
        if (choice.network == SANDBOX_NETWORK_EGRESS) {
                r = manager_egress_check(m, error);
                if (r < 0)
                        return r;
        }
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

        if (choice.image && !image_exists(manager_images_dir(m), choice.image))
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NO_SUCH_IMAGE, "No image '%s'%s%s%s.", choice.image,
                                         snap ? " (the image of snapshot " : o->image ? "" : " (the type's Image=)",
                                         snap ? snap->id : "", snap ? ")" : "");

        SandboxCreateSpec spec = {
                .name = o->name,
                .type = type,
                .owner = c->account_id,
                .ttl_usec = choice.ttl_usec,
                .network = choice.network,
                .egress_policy = choice.policy,
                .caller = c,
                .image = choice.image,
                .snapshot_image = snap ? snap_image : NULL,
                .snapshot_uid = snap ? snap->source_uid : (uid_t) -1,
                .snapshot_id = snap ? snap->id : NULL,
        };
        r = sandbox_create(m, &spec, call->msg, NULL);
        if (r == -EUSERS)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED, "No free sandbox uid is left.");
        if (r == -E2BIG && t) {
                /* Refused by the admission check before anything was made: the same sum says why. */
                char why[512];
                if (manager_admit(m, t, why, sizeof(why)) < 0)
                        return sd_bus_error_set(error, SANDBOXD_ERROR_LIMIT_EXCEEDED, why);
        }
        if (r == -EADDRINUSE && choice.network == SANDBOX_NETWORK_EGRESS)
                /* Only its resolver binds anything while it is made (sandbox-egress-dns.c). */
                return sd_bus_error_set_errnof(error, r,
                                               "Could not create the sandbox: its DNS resolver could not bind port "
                                               "53 of its host-side address, where another DNS server of the host "
                                               "listens (on that address or on all of them): %s.",
                                               strerror(-r));
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not create the sandbox: %s", strerror(-r));
        return 1; /* answered when the sandbox runs */
}

static int run_get_sandbox(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        _cleanup_free_ char *path = sandbox_bus_path(s);
        if (!path)
                return -ENOMEM;
        return sd_bus_reply_method_return(call->msg, "o", path);
}

static int run_list_sandboxes(Call *call, Sandbox *unused, MethodArgs *a, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = call->manager;
        Sandbox *s = NULL;
        size_t state = 0;
        int r;

        r = sd_bus_message_new_method_return(call->msg, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(ssssso)");
        if (r < 0)
                return r;
        while (hashmap_iterate(m->sandboxes, &state, (void **) &s, NULL)) {
                _cleanup_free_ char *path = sandbox_bus_path(s);
                if (!path)
                        return -ENOMEM;
                r = sd_bus_message_append(reply, "(ssssso)", s->id, s->name, s->type, sandbox_state_name(s),
                                          s->owner, path);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int read_set_ttl(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        int r;

        r = sd_bus_message_read(call->msg, "t", &a->set_ttl.ttl);
        if (r < 0)
                return r;
        return context_options_read(call->msg, &call->caller, "SetTTL", error);
}

static int run_set_ttl(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        Manager *m = call->manager;
        uint64_t ttl = a->set_ttl.ttl, usec;
        char b[32];
        int r;

        if (ttl == 0 || seconds_to_usec(ttl, &usec) < 0 || usec > m->config.max_ttl_usec)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "ttl_seconds must be between 1 and %s.",
                                         format_seconds(m->config.max_ttl_usec, b));
        r = sandbox_set_ttl(s, usec);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not set the TTL: %s", strerror(-r));
        log_sandbox(LOG_INFO, s->id, "TTL of sandbox %s set to %" PRIu64 " s by %s.", s->id, ttl,
                    call->caller.account_id);
        sandbox_audit(s, &call->caller, "sandbox.update", "finished", NULL, NULL, now_usec(CLOCK_REALTIME),
                      now_usec(CLOCK_MONOTONIC));
        return sd_bus_reply_method_return(call->msg, NULL);
}

static int read_set_network_policy(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        int r;

        /* The context first, so that the row of a refused policy names whom the gateway speaks for; then
         * back to the policy. */
        r = sd_bus_message_skip(call->msg, "a{sv}");
        if (r < 0)
                return r;
        r = context_options_read(call->msg, &call->caller, "SetNetworkPolicy", error);
        if (r < 0)
                return r;
        r = sd_bus_message_rewind(call->msg, true);
        if (r < 0)
                return r;
        r = sd_bus_message_skip(call->msg, "s");
        if (r < 0)
                return r;
        return egress_policy_from_bus(call->msg, &a->network_policy, error);
}

static void done_set_network_policy(MethodArgs *a) {
        egress_policy_done(&a->network_policy);
}

static int run_set_network_policy(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        json_object *extra = NULL;
        int r, cut = 0;

        if (s->network != SANDBOX_NETWORK_EGRESS)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NOT_EGRESS,
                                         "Sandbox %s has network \"%s\": only an \"egress\" sandbox has a "
                                         "policy.",
                                         s->id, sandbox_network_to_string(s->network));
        extra = json_object_new_object();
        if (!extra)
                return -ENOMEM;
        json_object_object_add(extra, "egress_policy_before", egress_policy_to_json(s->egress.policy));
        r = sandbox_egress_change_policy(s, &a->network_policy, &cut);
        if (r == -ENOTCONN)
                r = sd_bus_error_setf(error, SD_BUS_ERROR_FAILED,
                                      "Sandbox %s's egress network is not in the firewall (see sandboxd's "
                                      "journal).",
                                      s->id);
        else if (r < 0)
                r = sd_bus_error_set_errnof(error, r, "Could not change the network policy: %s",
                                            strerror(-r));
        if (r < 0) {
                json_object_put(extra);
                return r;
        }
        if (cut >= 0)
                json_object_object_add(extra, "connections_cut", json_object_new_int(cut));
        else
                json_object_object_add(extra, "connections_cut_error",
                                       json_object_new_string(strerror(-cut)));
        log_sandbox(LOG_INFO, s->id, "Network policy of sandbox %s changed by %s (%d connections cut).",
                    s->id, call->caller.account_id, cut);
        sandbox_emit_changed(s, "EgressPolicy");
        sandbox_audit_extra(s, &call->caller, "sandbox.update", "finished", extra, call->started_at,
                            call->mono);
        return sd_bus_reply_method_return(call->msg, NULL);
}

static int read_delete_sandbox(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        return context_options_read(call->msg, &call->caller, "DeleteSandbox", error);
}

static int run_delete_sandbox(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        int r;

        r = sandbox_delete(s, call->msg, "sandbox.delete", &call->caller);
        if (r == -EBUSY)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NOT_RUNNING, "Sandbox %s is still being created.", s->id);
        if (r < 0)
                return r;
        return 1;
}

/* --- pause and resume (sandbox-pause.c) ----------------------------------------------------------- */

static int read_pause_resume(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        return context_options_read(call->msg, &call->caller, row->member, error);
}

static int run_pause_sandbox(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        int r;

        r = sandbox_pause(s, &call->caller, "request", call->msg);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not pause sandbox %s: %s", s->id, strerror(-r));
        return 1; /* answered once the kernel has frozen it */
}

static int run_resume_sandbox(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        int r;

        r = sandbox_resume(s, &call->caller, "request");
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not resume sandbox %s: %s", s->id, strerror(-r));
        return sd_bus_reply_method_return(call->msg, NULL);
}

/* --- snapshots (sandbox-snapshot.c) --------------------------------------------------------------- */

/* SnapshotSandbox's name and options (no options of its own yet: the caller context), RemoveSnapshot's
 * snapshot and context. */
static int read_snapshot_name(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        int r;

        r = sd_bus_message_read(call->msg, "s", &a->snapshot.name);
        if (r < 0)
                return r;
        return context_options_read(call->msg, &call->caller, row->member, error);
}

static int run_snapshot_sandbox(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        return snapshot_take(s, isempty(a->snapshot.name) ? NULL : a->snapshot.name, &call->caller, call->msg,
                             error);
}

static int run_list_snapshots(Call *call, Sandbox *unused, MethodArgs *a, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = sd_bus_message_new_method_return(call->msg, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(ssssstts)");
        if (r < 0)
                return r;
        for (Snapshot *snap = call->manager->snapshots; snap; snap = snap->next) {
                if (snap->pending)
                        continue;
                r = sd_bus_message_append(reply, "(ssssstts)", snap->id, snap->name, snap->source, snap->type,
                                          snap->owner, snap->created_at, snap->size, snapshot_image_name(snap));
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int run_remove_snapshot(Call *call, Sandbox *unused, MethodArgs *a, sd_bus_error *error) {
        Snapshot *snap = snapshot_find(call->manager, a->snapshot.name, false);
        int r;

        if (!snap)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NO_SUCH_SNAPSHOT, "No snapshot '%s'.", a->snapshot.name);
        snprintf(call->session_id, sizeof(call->session_id), "%s", snap->source);
        r = snapshot_remove(call->manager, snap, &call->caller, call->started_at, call->mono);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not remove snapshot %s: %s", a->snapshot.name,
                                               strerror(-r));
        return sd_bus_reply_method_return(call->msg, NULL);
}

/* A command's limits come from its sandbox's type, which a reload may have removed: Exec and
 * StartProcess then fail with this error rather than run with no limits. */
static const SandboxType *sandbox_type_or_error(Manager *m, Sandbox *s, sd_bus_error *error) {
        const SandboxType *t = sandboxd_config_find_type(&m->config, s->type);
        if (!t)
                (void) sd_bus_error_setf(error, SD_BUS_ERROR_FAILED,
                                         "Sandbox %s has type '%s', which the configuration no longer defines.",
                                         s->id, s->type);
        return t;
}

static int read_exec(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        int r;

        r = sd_bus_message_read_strv(call->msg, &a->exec.argv);
        if (r < 0)
                return r;
        return exec_options_read(call->msg, &call->caller, &a->exec.o, error);
}

static void done_exec(MethodArgs *a) {
        strv_free(a->exec.argv);
        exec_options_done(&a->exec.o);
}

static int run_exec(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        _cleanup_(exec_limits_done) ExecLimits l = {};
        Manager *m = call->manager;
        ExecOptions *o = &a->exec.o;
        int r;

        const SandboxType *t = sandbox_type_or_error(m, s, error);
        if (!t)
                return -ENOENT;
        r = exec_options_check(o, a->exec.argv, t, m->config.stdin_max, &l, error);
        if (r < 0)
                return r;

        ExecSpec spec = {
                .argv = a->exec.argv,
                .env = o->env,
                .cwd = l.cwd,
                .stdin_data = o->stdin_data,
                .stdin_size = o->stdin_size,
                .timeout_usec = l.timeout_usec,
                .memory_max = l.memory_max,
                .tasks_max = l.tasks_max,
                .stdout_fd = o->stdout_fd,
                .stderr_fd = o->stderr_fd,
                .cancel_fd = o->cancel_fd,
                .caller = &call->caller,
                .started_at = now_usec(CLOCK_REALTIME),
        };
        r = exec_start(s, &spec, call->msg);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not start the command: %s", strerror(-r));
        return 1;
}

static int read_write_file(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        int r;

        r = sd_bus_message_read(call->msg, "s", &a->write_file.path);
        if (r < 0)
                return r;
        r = sd_bus_message_read_array(call->msg, 'y', &a->write_file.data, &a->write_file.size);
        if (r < 0)
                return r;
        return write_file_options_read(call->msg, &call->caller, &a->write_file.o, error);
}

static int run_write_file(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        _cleanup_free_ char *path = NULL;
        WriteFileOptions *o = &a->write_file.o;
        int r;

        r = write_file_options_check(o, a->write_file.path, a->write_file.size, call->manager->config.file_max,
                                     &path, error);
        if (r < 0)
                return r;

        FileWriteSpec spec = {
                .path = path,
                .data = a->write_file.data,
                .size = a->write_file.size,
                .data_fd = o->fd,
                .mode = o->mode,
                .create_dirs = o->create_dirs,
                .append = o->append,
        };
        r = sandbox_write_file(s, &spec, &call->caller, call->msg);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not write %s: %s", path, strerror(-r));
        return 1;
}

static int read_read_file(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        int r;

        r = sd_bus_message_read(call->msg, "s", &a->read_file.path);
        if (r < 0)
                return r;
        return read_file_options_read(call->msg, &call->caller, &a->read_file.o, error);
}

static int run_read_file(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        _cleanup_free_ char *path = NULL;
        ReadFileOptions *o = &a->read_file.o;
        uint64_t file_max = call->manager->config.file_max;
        int r;

        r = read_file_options_check(o, a->read_file.path, file_max, &path, error);
        if (r < 0)
                return r;

        FileReadSpec spec = {
                .path = path,
                .offset = o->offset,
                .length = o->length,
                .cap = o->fd >= 0 ? 0 : file_max,
                .out_fd = o->fd,
        };
        r = sandbox_read_file(s, &spec, &call->caller, call->msg);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not read %s: %s", path, strerror(-r));
        return 1;
}

/* --- takeover shells (sandbox-shell.c) ------------------------------------------------------------ */

static int read_open_shell(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        return shell_options_read(call->msg, &call->caller, &a->open_shell, error);
}

static int run_open_shell(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        ShellOptions *o = &a->open_shell;
        int r;

        r = shell_options_check(o, error);
        if (r < 0)
                return r;

        ShellSpec spec = {
                .cols = o->cols,
                .rows = o->rows,
                .term = o->term,
                .caller = &call->caller,
                .started_at = now_usec(CLOCK_REALTIME),
                .opener = call->caller.uid,
        };
        r = shell_open(s, &spec, call->msg);
        if (r == -EUSERS)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                         "Sandbox %s has %d shells open already, the maximum.", s->id,
                                         SHELL_MAX_PER_SANDBOX);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not start the shell: %s", strerror(-r));
        return 1;
}

static int read_resize_shell(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        return sd_bus_message_read(call->msg, "suu", &a->shell.unit, &a->shell.cols, &a->shell.rows);
}

static int run_resize_shell(Call *call, Sandbox *unused, MethodArgs *a, sd_bus_error *error) {
        const char *unit = a->shell.unit;
        uint32_t cols = a->shell.cols, rows = a->shell.rows;
        int r;

        if (!shell_size_is_valid(cols, rows))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Terminal size %ux%u: cols must be 1-%d and rows 1-%d.", cols, rows,
                                         SHELL_COLS_MAX, SHELL_ROWS_MAX);
        r = shell_resize(call->manager, unit, call->caller.uid, cols, rows);
        if (r == -ENOENT)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NO_SUCH_SHELL, "No shell '%s' of yours.", unit);
        if (r == -ESRCH)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NOT_RUNNING, "Shell %s has ended.", unit);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not resize %s: %s", unit, strerror(-r));
        return sd_bus_reply_method_return(call->msg, NULL);
}

static int read_wait_shell(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        return sd_bus_message_read(call->msg, "s", &a->shell.unit);
}

static int run_wait_shell(Call *call, Sandbox *unused, MethodArgs *a, sd_bus_error *error) {
        int r;

        r = shell_wait(call->manager, a->shell.unit, call->caller.uid, call->msg);
        if (r == -ENOENT)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NO_SUCH_SHELL,
                                         "No shell '%s' of yours (results are kept for a minute after the end).",
                                         a->shell.unit);
        if (r < 0)
                return r;
        return 1;
}

/* --- background processes (sandbox-process.c) ----------------------------------------------------- */

static int read_start_process(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        int r;

        r = sd_bus_message_read_strv(call->msg, &a->process.argv);
        if (r < 0)
                return r;
        return process_options_read(call->msg, &call->caller, &a->process.o, error);
}

static void done_start_process(MethodArgs *a) {
        strv_free(a->process.argv);
        exec_options_done(&a->process.o);
}

static int run_start_process(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        _cleanup_(exec_limits_done) ExecLimits l = {};
        Manager *m = call->manager;
        ExecOptions *o = &a->process.o;
        int r;

        const SandboxType *t = sandbox_type_or_error(m, s, error);
        if (!t)
                return -ENOENT;
        /* Without a timeout_seconds, a process may run as long as the type lets any command run. */
        if (!o->have_timeout) {
                o->have_timeout = true;
                o->timeout_seconds = t->max_timeout_usec / USEC_PER_SEC;
        }
        r = exec_options_check(o, a->process.argv, t, 0, &l, error);
        if (r < 0)
                return r;

        ProcessSpec spec = {
                .argv = a->process.argv,
                .env = o->env,
                .cwd = l.cwd,
                .timeout_usec = l.timeout_usec,
                .memory_max = l.memory_max,
                .tasks_max = l.tasks_max,
                .caller = &call->caller,
                .started_at = call->started_at,
                .call_mono = call->mono,
        };
        r = process_start(s, &spec, call->msg);
        if (r == -EUSERS)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                         "Sandbox %s has %d processes running, the maximum.", s->id,
                                         PROCESS_MAX_PER_SANDBOX);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not start the process: %s", strerror(-r));
        return 1; /* answered once it runs */
}

static int run_list_processes(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = sd_bus_message_new_method_return(call->msg, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(ssiutasso)");
        if (r < 0)
                return r;
        /* Oldest first, as they were started: the list is newest first. */
        size_t n = 0;
        for (Process *p = s->processes; p; p = p->next)
                n++;
        for (size_t i = n; i > 0; i--) {
                Process *p = s->processes;
                for (size_t k = 1; k < i; k++)
                        p = p->next;
                if (p->state == PROCESS_STARTING)
                        continue;
                _cleanup_free_ char *path = process_bus_path(p);
                if (!path)
                        return -ENOMEM;
                r = sd_bus_message_open_container(reply, 'r', "ssiutasso");
                if (r >= 0)
                        r = sd_bus_message_append(reply, "ssiut", p->id, process_state_to_string(p->state),
                                                  p->state == PROCESS_RUNNING ? -1 : p->exit_code,
                                                  (uint32_t) p->ns_pid, p->started_at);
                if (r >= 0)
                        r = sd_bus_message_append_strv(reply, p->argv);
                if (r >= 0)
                        r = sd_bus_message_append(reply, "so", p->child.unit, path);
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int read_process_id(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        return sd_bus_message_read(call->msg, "s", &a->process.id);
}

static int call_process(Sandbox *s, const char *id, Process **ret, sd_bus_error *error) {
        Process *p = process_find(s, id);
        if (!p)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NO_SUCH_PROCESS, "Sandbox %s has no process '%s'.",
                                         s->id, id);
        *ret = p;
        return 0;
}

static int read_signal_process(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        int r;

        r = sd_bus_message_read(call->msg, "si", &a->process.id, &a->process.signal);
        if (r < 0)
                return r;
        return context_options_read(call->msg, &call->caller, "SignalProcess", error);
}

static char *signal_detail(MethodArgs *a, Process *p) {
        json_object *o = json_object_new_object();
        char *s;

        if (!o)
                return NULL;
        json_object_object_add(o, "process", json_object_new_string(a->process.id));
        json_object_object_add(o, "signal", json_object_new_int(a->process.signal));
        if (p)
                json_object_object_add(o, "unit", json_object_new_string(p->child.unit));
        s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
        return s;
}

static int run_signal_process(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        Process *p = NULL;
        int r;

        if (a->process.signal < 1 || a->process.signal > SIGRTMAX)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Signal %" PRIi32 " is not 1 to %d.",
                                         a->process.signal, SIGRTMAX);
        r = call_process(s, a->process.id, &p, error);
        if (r < 0)
                return r;
        r = process_signal(p, a->process.signal);
        if (r == -ESRCH)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NOT_RUNNING, "Process %s of sandbox %s is %s.", p->id,
                                         s->id, process_state_to_string(p->state));
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not signal process %s: %s", p->id, strerror(-r));
        _cleanup_free_ char *detail = signal_detail(a, p);
        manager_audit(call->manager, &call->caller,
                      &(AuditRow) { .session_id = s->id, .operation = "process.signal", .event = "finished",
                                    .detail = detail, .started_at = call->started_at,
                                    .duration_usec = now_usec(CLOCK_MONOTONIC) - call->mono });
        return sd_bus_reply_method_return(call->msg, NULL);
}

static char *signal_failure_detail(MethodArgs *a, const sd_bus_error *error) {
        _cleanup_free_ char *base = signal_detail(a, NULL);
        json_object *o = base ? json_tokener_parse(base) : NULL;
        char *s;

        if (!o)
                return NULL;
        json_object_object_add(o, "error", json_object_new_string(error->name));
        json_object_object_add(o, "message", json_object_new_string(strempty(error->message)));
        s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
        return s;
}

static int run_wait_process(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        Process *p = NULL;
        int r;

        r = call_process(s, a->process.id, &p, error);
        if (r < 0)
                return r;
        r = process_wait(p, call->msg);
        if (r < 0)
                return r;
        return 1;
}

static int read_read_process_output(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        return sd_bus_message_read(call->msg, "sstu", &a->process.id, &a->process.stream, &a->process.offset,
                                   &a->process.max);
}

static int run_read_process_output(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ char *buf = NULL;
        ProcessStream stream = process_stream_from_string(a->process.stream);
        uint64_t start;
        size_t n;
        Process *p = NULL;
        int r;

        if (stream < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Stream '%s' is not stdout or stderr.",
                                         a->process.stream);
        r = call_process(s, a->process.id, &p, error);
        if (r < 0)
                return r;
        OutputRing *ring = stream == PROCESS_STDOUT ? &p->out.ring : &p->err.ring;
        if (a->process.offset > ring->total)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Offset %" PRIu64 " is past the end of %s (%" PRIu64 " bytes so far).",
                                         a->process.offset, a->process.stream, ring->total);
        size_t max = a->process.max == 0 ? ring->cap : MIN((size_t) a->process.max, ring->cap);
        buf = malloc(MAX(max, (size_t) 1));
        if (!buf)
                return -ENOMEM;
        r = output_ring_read(ring, a->process.offset, buf, max, &start, &n);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_return(call->msg, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_append_array(reply, 'y', buf, n);
        if (r < 0)
                return r;
        r = sd_bus_message_append(reply, "ttb", start + n, output_ring_first_offset(ring),
                                  (int) (ring->ended && start + n == ring->total));
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int read_attach_process_output(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        return sd_bus_message_read(call->msg, "ssth", &a->process.id, &a->process.stream, &a->process.offset,
                                   &a->process.fd);
}

static int run_attach_process_output(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        ProcessStream stream = process_stream_from_string(a->process.stream);
        uint64_t start;
        Process *p = NULL;
        int r;

        if (stream < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Stream '%s' is not stdout or stderr.",
                                         a->process.stream);
        r = call_process(s, a->process.id, &p, error);
        if (r < 0)
                return r;
        r = process_attach_output(p, stream, a->process.offset, a->process.fd, &start);
        if (r == -ERANGE)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Offset %" PRIu64 " is past the end of %s (%" PRIu64 " bytes so far).",
                                         a->process.offset, a->process.stream,
                                         (stream == PROCESS_STDOUT ? &p->out : &p->err)->ring.total);
        if (r == -ENOTSOCK)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "The fd must be a pipe or a socket.");
        if (r == -EUSERS)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                         "Process %s has %d attached fds already, the maximum.", p->id,
                                         PROCESS_ATTACH_MAX);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not attach to process %s: %s", p->id, strerror(-r));
        return sd_bus_reply_method_return(call->msg, "t", start);
}

static int read_attach_process_stdin(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        return sd_bus_message_read(call->msg, "sh", &a->process.id, &a->process.fd);
}

static int run_attach_process_stdin(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        Process *p = NULL;
        int r;

        r = call_process(s, a->process.id, &p, error);
        if (r < 0)
                return r;
        r = process_attach_stdin(p, a->process.fd);
        if (r == -ESRCH)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NOT_RUNNING, "Process %s of sandbox %s is %s.", p->id,
                                         s->id, process_state_to_string(p->state));
        if (r == -EPIPE)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NOT_RUNNING, "The stdin of process %s is closed.",
                                         p->id);
        if (r == -EBUSY)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                         "Process %s has an fd attached to its stdin already.", p->id);
        if (r == -ENOTSOCK)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "The fd must be a pipe or a socket.");
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not attach to process %s: %s", p->id, strerror(-r));
        return sd_bus_reply_method_return(call->msg, NULL);
}

static int read_write_process_stdin(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        int r;

        r = sd_bus_message_read(call->msg, "s", &a->process.id);
        if (r < 0)
                return r;
        r = sd_bus_message_read_array(call->msg, 'y', &a->process.data, &a->process.size);
        if (r < 0)
                return r;
        return sd_bus_message_read(call->msg, "b", &a->process.close);
}

static int run_write_process_stdin(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        Process *p = NULL;
        int r;

        r = call_process(s, a->process.id, &p, error);
        if (r < 0)
                return r;
        r = process_write_stdin(p, a->process.data, a->process.size, a->process.close);
        if (r == -ESRCH)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NOT_RUNNING, "Process %s of sandbox %s is %s.", p->id,
                                         s->id, process_state_to_string(p->state));
        if (r == -EPIPE)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NOT_RUNNING, "The stdin of process %s is closed.",
                                         p->id);
        if (r == -E2BIG)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                         "Process %s has %zu bytes of stdin not read yet; at most %d may wait.",
                                         p->id, p->stdin_pending_len, PROCESS_STDIN_PENDING_MAX);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Could not write to process %s: %s", p->id, strerror(-r));
        return sd_bus_reply_method_return(call->msg, NULL);
}

/* --- the file tools (sandbox-tools.c) ------------------------------------------------------------- */

static int read_tool(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        a->tool = tool_call_new(call->manager, row->tool, call->msg);
        if (!a->tool)
                return -ENOMEM;
        return tool_call_read(a->tool, &call->caller, error);
}

static int run_tool(Call *call, Sandbox *s, MethodArgs *a, sd_bus_error *error) {
        int r;

        r = tool_call_start(a->tool, s, &call->caller, call->started_at, call->mono, error);
        if (r < 0)
                return r;
        a->tool = NULL; /* the helper's now: it answers, records and frees */
        return 1;
}

static void done_tool(MethodArgs *a) {
        tool_call_free(a->tool);
}

static char *tool_failure_detail(MethodArgs *a, const sd_bus_error *error) {
        return a->tool ? tool_call_detail(a->tool, error->name, error->message) : NULL;
}

#define TOOL_ROW(m, op, kind)                                                                               \
        { .member = m, .operation = op, .sandbox = METHOD_ACTIVE_SANDBOX, .tool = kind, .read = read_tool, \
          .run = run_tool, .done = done_tool, .failure_detail = tool_failure_detail }

static const MethodRow manager_methods[] = {
        { "CreateSandbox", "sandbox.create", METHOD_NO_SANDBOX, 0, read_create_sandbox, run_create_sandbox,
          done_create_sandbox },
        { "GetSandbox", NULL, METHOD_ANY_SANDBOX, 0, NULL, run_get_sandbox },
        { "ListSandboxes", NULL, METHOD_NO_SANDBOX, 0, NULL, run_list_sandboxes },
        { "SetTTL", "sandbox.update", METHOD_RUNNING_SANDBOX, 0, read_set_ttl, run_set_ttl },
        { "SetNetworkPolicy", "sandbox.update", METHOD_RUNNING_SANDBOX, 0, read_set_network_policy,
          run_set_network_policy, done_set_network_policy },
        { "DeleteSandbox", "sandbox.delete", METHOD_ANY_SANDBOX, 0, read_delete_sandbox, run_delete_sandbox },
        { "PauseSandbox", "sandbox.pause", METHOD_RUNNING_SANDBOX, 0, read_pause_resume, run_pause_sandbox },
        { "ResumeSandbox", "sandbox.resume", METHOD_RUNNING_SANDBOX, 0, read_pause_resume, run_resume_sandbox },
        { "SnapshotSandbox", "snapshot.create", METHOD_RUNNING_SANDBOX, 0, read_snapshot_name,
          run_snapshot_sandbox },
        { "ListSnapshots", NULL, METHOD_NO_SANDBOX, 0, NULL, run_list_snapshots },
        { "RemoveSnapshot", "snapshot.remove", METHOD_NO_SANDBOX, 0, read_snapshot_name, run_remove_snapshot },
        { "Exec", "exec", METHOD_ACTIVE_SANDBOX, 0, read_exec, run_exec, done_exec },
        { "WriteFile", "write", METHOD_ACTIVE_SANDBOX, 0, read_write_file, run_write_file },
        { "ReadFile", "read", METHOD_ACTIVE_SANDBOX, 0, read_read_file, run_read_file },
        { "OpenShell", "takeover", METHOD_ACTIVE_SANDBOX, 0, read_open_shell, run_open_shell },
        { "ResizeShell", NULL, METHOD_NO_SANDBOX, 0, read_resize_shell, run_resize_shell },
        { "WaitShell", NULL, METHOD_NO_SANDBOX, 0, read_wait_shell, run_wait_shell },
        { "StartProcess", "process.start", METHOD_ACTIVE_SANDBOX, 0, read_start_process, run_start_process,
          done_start_process },
        { "ListProcesses", NULL, METHOD_ANY_SANDBOX, 0, NULL, run_list_processes },
        { "SignalProcess", "process.signal", METHOD_RUNNING_SANDBOX, 0, read_signal_process, run_signal_process,
          NULL, signal_failure_detail },
        { "WaitProcess", NULL, METHOD_ANY_SANDBOX, 0, read_process_id, run_wait_process },
        { "ReadProcessOutput", NULL, METHOD_ANY_SANDBOX, 0, read_read_process_output, run_read_process_output },
        { "WriteProcessStdin", NULL, METHOD_RUNNING_SANDBOX, 0, read_write_process_stdin, run_write_process_stdin },
        { "AttachProcessOutput", NULL, METHOD_ANY_SANDBOX, 0, read_attach_process_output,
          run_attach_process_output },
        { "AttachProcessStdin", NULL, METHOD_RUNNING_SANDBOX, 0, read_attach_process_stdin,
          run_attach_process_stdin },
        TOOL_ROW("FileCreate", "file_create", TOOL_FILE_CREATE),
        TOOL_ROW("View", "view", TOOL_VIEW),
        TOOL_ROW("StrReplace", "str_replace", TOOL_STR_REPLACE),
        TOOL_ROW("Insert", "insert", TOOL_INSERT),
        TOOL_ROW("Ls", "ls", TOOL_LS),
        TOOL_ROW("Glob", "glob", TOOL_GLOB),
        TOOL_ROW("Grep", "grep", TOOL_GREP),
};

/* --- the dispatcher ------------------------------------------------------------------------------- */

int manager_caller_check(Manager *m, sd_bus_message *msg, Caller *ret, sd_bus_error *error) {
        uid_t uid;
        int r;

        assert(m);
        assert(msg);
        assert(ret);

        r = manager_sender_uid(m, msg, &uid);
        if (r < 0)
                return r;
        caller_from_uid(ret, uid, uid == 0 || uid == m->gateway_uid);
        if (!manager_uid_is_admin(m, uid))
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "Only root and members of sandbox-admin may use sandboxd.");
        return 0;
}

/* The sandbox the call's first argument names, as its row wants it. */
static int call_sandbox(const MethodRow *row, Call *call, const char *id, Sandbox **ret, sd_bus_error *error) {
        Sandbox *s = find_sandbox(call->manager, id);

        if (!s)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NO_SUCH_SANDBOX, "No sandbox '%s'.", id);
        if (row->sandbox != METHOD_ANY_SANDBOX && s->state != SANDBOX_RUNNING)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NOT_RUNNING, "Sandbox %s is %s.", s->id,
                                         sandbox_state_to_string(s->state));
        snprintf(call->session_id, sizeof(call->session_id), "%s", s->id);
        if (row->sandbox == METHOD_ACTIVE_SANDBOX && s->paused) {
                const SandboxType *t = sandboxd_config_find_type(&call->manager->config, s->type);
                if (!t || !t->auto_resume)
                        return sd_bus_error_setf(error, SANDBOXD_ERROR_SANDBOX_PAUSED,
                                                 "Sandbox %s is paused: resume it first (ResumeSandbox).", s->id);
                /* AutoResume=yes: the call resumes it, on the record as a resume of its own. */
                int r = sandbox_resume(s, &call->caller, row->operation ?: row->member);
                if (r < 0)
                        return sd_bus_error_set_errnof(error, r, "Could not resume sandbox %s: %s", s->id,
                                                       strerror(-r));
        }
        if (row->sandbox != METHOD_NO_SANDBOX)
                sandbox_touch(s);
        *ret = s;
        return 0;
}

static int call_run(const MethodRow *row, Call *call, MethodArgs *a, sd_bus_error *error) {
        const char *id = NULL;
        Sandbox *s = NULL;
        int r;

        r = manager_caller_check(call->manager, call->msg, &call->caller, error);
        if (r < 0)
                return r;
        if (row->sandbox != METHOD_NO_SANDBOX) {
                r = sd_bus_message_read(call->msg, "s", &id);
                if (r < 0)
                        return r;
                snprintf(call->session_id, sizeof(call->session_id), "%s", id);
        }
        if (row->read) {
                r = row->read(row, call, a, error);
                if (r < 0)
                        return r;
        }
        if (id) {
                r = call_sandbox(row, call, id, &s, error);
                if (r < 0)
                        return r;
        }
        return row->run(call, s, a, error);
}

/* Every Manager method comes here: the caller check, the sandbox, the handler, and the audit row of a call
 * that failed (docs/dbus-api.md, "Audit records"). */
static int method_dispatch(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        const char *member = sd_bus_message_get_member(msg);
        const MethodRow *row = NULL;
        MethodArgs a;
        int r;

        memset(&a, 0, sizeof(a));

        for (size_t i = 0; i < ELEMENTSOF(manager_methods) && !row; i++)
                if (streq(manager_methods[i].member, member))
                        row = &manager_methods[i];
        if (!row) /* the vtable and the table disagree: a bug */
                return sd_bus_error_setf(error, SD_BUS_ERROR_UNKNOWN_METHOD, "No method %s.", member);

        Call call = {
                .manager = userdata,
                .msg = msg,
                .started_at = now_usec(CLOCK_REALTIME),
                .mono = now_usec(CLOCK_MONOTONIC),
        };
        caller_unknown(&call.caller);
        r = call_run(row, &call, &a, error);
        if (r < 0 && row->operation) {
                sd_bus_error e = SD_BUS_ERROR_MAKE_CONST(SD_BUS_ERROR_FAILED, strerror(-r));
                const sd_bus_error *why = sd_bus_error_is_set(error) ? error : &e;
                _cleanup_free_ char *detail = row->failure_detail ? row->failure_detail(&a, why) : NULL;
                manager_audit_failed(call.manager, &call.caller, call.session_id, row->operation, why, detail,
                                     call.started_at, call.mono);
        }
        if (row->done)
                row->done(&a);
        return r;
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD_WITH_ARGS("CreateSandbox", SD_BUS_ARGS("a{sv}", options), SD_BUS_RESULT("s", id, "o", path),
                                method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetSandbox", SD_BUS_ARGS("s", id), SD_BUS_RESULT("o", path), method_dispatch,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListSandboxes", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(ssssso)", sandboxes),
                                method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("SetTTL", SD_BUS_ARGS("s", id, "t", ttl_seconds, "a{sv}", context), SD_BUS_NO_RESULT,
                                method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("SetNetworkPolicy", SD_BUS_ARGS("s", id, "a{sv}", policy, "a{sv}", context),
                                SD_BUS_NO_RESULT, method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("DeleteSandbox", SD_BUS_ARGS("s", id, "a{sv}", context), SD_BUS_NO_RESULT,
                                method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("PauseSandbox", SD_BUS_ARGS("s", id, "a{sv}", context), SD_BUS_NO_RESULT,
                                method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ResumeSandbox", SD_BUS_ARGS("s", id, "a{sv}", context), SD_BUS_NO_RESULT,
                                method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("SnapshotSandbox", SD_BUS_ARGS("s", id, "s", name, "a{sv}", options),
                                SD_BUS_RESULT("s", snapshot), method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListSnapshots", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(ssssstts)", snapshots),
                                method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("RemoveSnapshot", SD_BUS_ARGS("s", snapshot, "a{sv}", context), SD_BUS_NO_RESULT,
                                method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Exec", SD_BUS_ARGS("s", id, "as", argv, "a{sv}", options),
                                SD_BUS_RESULT("i", exit_code, "ay", stdout, "ay", stderr, "a{sv}", info),
                                method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("WriteFile", SD_BUS_ARGS("s", id, "s", path, "ay", data, "a{sv}", options),
                                SD_BUS_NO_RESULT, method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ReadFile", SD_BUS_ARGS("s", id, "s", path, "a{sv}", options),
                                SD_BUS_RESULT("ay", data, "a{sv}", info), method_dispatch,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("OpenShell", SD_BUS_ARGS("s", id, "a{sv}", options), SD_BUS_RESULT("h", stream, "s", unit),
                                method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ResizeShell", SD_BUS_ARGS("s", unit, "u", cols, "u", rows), SD_BUS_NO_RESULT,
                                method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("WaitShell", SD_BUS_ARGS("s", unit), SD_BUS_RESULT("i", exit_code, "a{sv}", info),
                                method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("StartProcess", SD_BUS_ARGS("s", id, "as", argv, "a{sv}", options),
                                SD_BUS_RESULT("s", process, "o", path), method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListProcesses", SD_BUS_ARGS("s", id), SD_BUS_RESULT("a(ssiutasso)", processes),
                                method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("SignalProcess",
                                SD_BUS_ARGS("s", id, "s", process, "i", signal, "a{sv}", context), SD_BUS_NO_RESULT,
                                method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("WaitProcess", SD_BUS_ARGS("s", id, "s", process),
                                SD_BUS_RESULT("i", exit_code, "a{sv}", info), method_dispatch,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ReadProcessOutput",
                                SD_BUS_ARGS("s", id, "s", process, "s", stream, "t", offset, "u", max),
                                SD_BUS_RESULT("ay", data, "t", next_offset, "t", first_offset, "b", ended),
                                method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("AttachProcessOutput",
                                SD_BUS_ARGS("s", id, "s", process, "s", stream, "t", offset, "h", fd),
                                SD_BUS_RESULT("t", start_offset), method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("AttachProcessStdin", SD_BUS_ARGS("s", id, "s", process, "h", fd),
                                SD_BUS_NO_RESULT, method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("WriteProcessStdin", SD_BUS_ARGS("s", id, "s", process, "ay", data, "b", close),
                                SD_BUS_NO_RESULT, method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("FileCreate", SD_BUS_ARGS("s", id, "s", path, "ay", content, "a{sv}", options),
                                SD_BUS_RESULT("a{sv}", info), method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("View", SD_BUS_ARGS("s", id, "s", path, "a{sv}", options),
                                SD_BUS_RESULT("ay", text, "a{sv}", info), method_dispatch,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("StrReplace",
                                SD_BUS_ARGS("s", id, "s", path, "ay", old, "ay", new, "a{sv}", options),
                                SD_BUS_RESULT("a{sv}", info), method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Insert", SD_BUS_ARGS("s", id, "s", path, "u", line, "ay", text, "a{sv}", options),
                                SD_BUS_RESULT("a{sv}", info), method_dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Ls", SD_BUS_ARGS("s", id, "s", path, "a{sv}", options),
                                SD_BUS_RESULT("a(aysutt)", entries, "a{sv}", info), method_dispatch,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Glob", SD_BUS_ARGS("s", id, "s", pattern, "a{sv}", options),
                                SD_BUS_RESULT("aay", paths, "a{sv}", info), method_dispatch,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Grep", SD_BUS_ARGS("s", id, "s", pattern, "a{sv}", options),
                                SD_BUS_RESULT("a(ayuay)", matches, "a{sv}", info), method_dispatch,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("SandboxNew", SD_BUS_ARGS("s", id, "o", path), 0),
        SD_BUS_SIGNAL_WITH_ARGS("SandboxRemoved", SD_BUS_ARGS("s", id, "o", path), 0),
        SD_BUS_VTABLE_END,
};

int manager_bus_setup(Manager *m) {
        int r;

        r = daemon_bus_open(m->event, true, &m->bus);
        if (r < 0)
                return r;
        r = sd_bus_add_object_vtable(m->bus, NULL, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, manager_vtable, m);
        if (r < 0)
                return r;
        r = sandbox_bus_register(m);
        if (r < 0)
                return r;
        r = process_bus_register(m);
        if (r < 0)
                return r;
        r = sd_bus_add_object_manager(m->bus, NULL, SANDBOXD_BUS_PATH);
        if (r < 0)
                return r;
        return sd_bus_error_add_map(sandboxd_bus_errors);
}
