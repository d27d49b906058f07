/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A sandbox: its slice, its init (which holds its namespaces), its workspace, uid and TTL.
 *
 * Creation: sandboxd forks a child that is PID 1 of a new PID namespace and waits. One
 * StartTransientUnit call creates the sandbox's slice (its aggregate limits) and a scope in it
 * holding that child. Once the scope is up, the child unshares the other namespaces, builds the
 * sandbox's mount tree, drops to the sandbox's user and becomes sandbox-init, which lives as long as
 * the sandbox and so keeps its namespaces for every Exec to join. */
#include "sandbox.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup-join.h"
#include "confine.h"
#include "io-util.h"
#include "log.h"
#include "disk-image.h"
#include "image-dbus.h"
#include "image-store.h"
#include "namespace.h"
#include "offload.h"
#include "sandbox-egress.h"
#include "sandbox-exec.h"
#include "sandbox-pause.h"
#include "sandbox-process.h"
#include "sandbox-snapshot.h"
#include "sandbox-files.h"
#include "sandbox-tools.h"
#include "sandbox-store.h"
#include "sandbox-dbus.h"
#include "sandboxd-dbus.h"
#include "sandboxd-manager.h"
#include "time-util.h"
#include "warm-scope.h"

static const char *const sandbox_state_table[_SANDBOX_STATE_MAX] = {
        [SANDBOX_STARTING] = "starting",
        [SANDBOX_RUNNING] = "running",
        [SANDBOX_STOPPING] = "stopping",
        [SANDBOX_FAILED] = "failed",
};

DEFINE_STRING_TABLE(sandbox_state, SandboxState, _SANDBOX_STATE_MAX);

#define EXEC_NUMBER_BLOCK 1024
#define POOL_RETRY_USEC (5 * USEC_PER_SEC)

int proc_starttime(pid_t pid, uint64_t *ret) {
        char path[64], buf[2048];

        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        int r = read_small_file(path, buf, sizeof(buf));
        if (r < 0)
                return r;
        char *p = strrchr(buf, ')');
        if (!p)
                return -EIO;
        /* after "(comm) " come fields 3…; starttime is field 22 */
        p += 2;
        for (int field = 3; field < 22; field++) {
                p = strchr(p, ' ');
                if (!p)
                        return -EIO;
                p++;
        }
        *ret = strtoull(p, NULL, 10);
        return 0;
}

char *sandbox_bus_path(const Sandbox *s) {
        char *p = NULL;
        if (sd_bus_path_encode(SANDBOXD_SANDBOX_PATH_PREFIX, s->id, &p) < 0)
                return NULL;
        return p;
}

/* --- letting go of the disk off the event loop ------------------------------------------------------ */

/* The last reference to a sandbox's disk is where the kernel unmounts its ext4 and lets go of the loop
 * device: a millisecond of work. Left to the mount namespace, that is in sandbox-init's exit, and every
 * deletion waits for it. So sandboxd holds the file system too, through an O_PATH fd of the home, and
 * closes that fd, once the sandbox is gone, in a worker thread (offload.c), after the reply. */
typedef struct DiskUnpin {
        OffloadJob job;
        int fd;
} DiskUnpin;

static void disk_unpin_run(OffloadJob *job) {
        DiskUnpin *u = container_of(job, DiskUnpin, job);
        u->fd = safe_close(u->fd); /* the unmount runs here, as the close returns */
}

static void disk_unpin_done(OffloadJob *job) {
        free(container_of(job, DiskUnpin, job));
}

static void disk_pin(Sandbox *s) {
        char path[128];

        if (s->disk_pin_fd >= 0 || s->init_pid <= 0)
                return;
        /* Through the init's root: the home as the sandbox's mount namespace has it. Not fatal: without
         * the pin, the deletion just waits for the unmount. */
        snprintf(path, sizeof(path), "/proc/%i/root" SANDBOXD_SANDBOX_HOME, (int) s->init_pid);
        s->disk_pin_fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static void disk_unpin(Sandbox *s) {
        Manager *m = s->manager;
        DiskUnpin *u;

        if (s->disk_pin_fd < 0)
                return;
        if (!m->offload || !(u = calloc(1, sizeof(DiskUnpin)))) {
                s->disk_pin_fd = safe_close(s->disk_pin_fd);
                return;
        }
        *u = (DiskUnpin) {
                .job = { .run = disk_unpin_run, .done = disk_unpin_done },
                .fd = TAKE_FD(s->disk_pin_fd),
        };
        offload_submit(m->offload, &u->job);
}

Sandbox *sandbox_free(Sandbox *s) {
        if (!s)
                return NULL;
        if (s->manager) {
                if (hashmap_get(s->manager->sandboxes, s->id) == s)
                        (void) hashmap_remove(s->manager->sandboxes, s->id);
                if (s->name && hashmap_get(s->manager->sandbox_names, s->name) == s)
                        (void) hashmap_remove(s->manager->sandbox_names, s->name);
                for (Sandbox **p = &s->manager->pool; *p; p = &(*p)->pool_next)
                        if (*p == s) {
                                *p = s->pool_next;
                                break;
                        }
        }
        sandbox_pause_free(s);
        exec_detach_all(s);
        process_detach_all(s);
        warm_scope_free_all(s);
        job_wait_cancel(s->job);
        scope_child_release(&s->child);
        s->init_source = sd_event_source_disable_unref(s->init_source);
        s->ttl_timer = sd_event_source_disable_unref(s->ttl_timer);
        s->init_pidfd = safe_close(s->init_pidfd);
        disk_unpin(s);
        sandbox_egress_free(s);
        sd_bus_message_unref(s->create_request);
        for (size_t i = 0; i < s->n_delete_requests; i++)
                sd_bus_message_unref(s->delete_requests[i]);
        free(s->delete_requests);
        free(s->name);
        free(s->type);
        free(s->owner);
        free(s->image);
        free(s->slice);
        free(s->workspace);
        free(s->from_snapshot);
        image_copy_abandon(s->disk_copy);
        free(s);
        return NULL;
}

static const ScopeChildOps init_child_ops;

static int sandbox_alloc(Manager *m, const char *id, const char *name, const char *type, const char *owner,
                         bool pooled, Sandbox **ret) {
        Sandbox *s;
        char buf[512];
        int r;

        s = calloc(1, sizeof(Sandbox));
        if (!s)
                return -ENOMEM;
        s->manager = m;
        scope_child_setup(&s->child, m, &init_child_ops, s);
        s->init_pidfd = s->disk_pin_fd = s->egress.netns_fd = -EBADF;
        s->disk_from_uid = (uid_t) -1;
        snprintf(s->id, sizeof(s->id), "%s", id);
        s->name = strdup(name);
        s->type = strdup(type);
        s->owner = strdup(owner);
        snprintf(buf, sizeof(buf), "sandbox-%s.slice", id);
        s->slice = strdup(buf);
        snprintf(buf, sizeof(buf), "%s/%s/%s", m->state_dir, pooled ? "pool" : "sandboxes", id);
        s->workspace = strdup(buf);
        if (!s->name || !s->type || !s->owner || !s->slice || !s->workspace) {
                sandbox_free(s);
                return -ENOMEM;
        }
        if (pooled) {
                /* In no table: nothing on the bus can find it until it is claimed. */
                s->pooled = true;
                s->pool_next = m->pool;
                m->pool = s;
                *ret = s;
                return 0;
        }
        r = hashmap_put(m->sandboxes, s->id, s);
        if (r < 0) {
                sandbox_free(s);
                return r;
        }
        r = hashmap_put(m->sandbox_names, s->name, s);
        if (r < 0) {
                sandbox_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

uint64_t sandbox_next_unit_number(Sandbox *s) {
        uint64_t n = s->exec_next++;

        if (s->exec_next >= s->exec_reserved) {
                /* Promise a new block before handing out its first number. */
                s->exec_reserved = s->exec_next + EXEC_NUMBER_BLOCK;
                (void) sandbox_store_set_exec_next(s->manager->store, s->id, s->exec_reserved);
        }
        return n;
}

static void audit_row(Sandbox *s, const Caller *c, const char *operation, const char *event,
                      const char *error_name, const char *error_message, json_object *extra,
                      uint64_t started_at, uint64_t mono_start) {
        json_object *o = json_object_new_object();
        _cleanup_free_ char *detail = NULL;

        if (o) {
                json_object_object_add(o, "name", json_object_new_string(s->name));
                json_object_object_add(o, "type", json_object_new_string(s->type));
                json_object_object_add(o, "network",
                                       json_object_new_string(sandbox_network_to_string(s->network)));
                if (s->network == SANDBOX_NETWORK_EGRESS && s->egress.policy) {
                        char address[INET_ADDRSTRLEN] = "";
                        if (s->egress.have_slot)
                                (void) inet_ntop(AF_INET, &s->egress.address, address, sizeof(address));
                        json_object_object_add(o, "egress_policy", egress_policy_to_json(s->egress.policy));
                        json_object_object_add(o, "egress_address", json_object_new_string(address));
                }
                if (s->image)
                        json_object_object_add(o, "image", json_object_new_string(s->image));
                json_object_object_add(o, "uid", json_object_new_uint64(s->uid));
                json_object_object_add(o, "owner", json_object_new_string(s->owner));
                json_object_object_add(o, "expires_at", json_object_new_uint64(s->expires_at));
                if (error_name) {
                        json_object_object_add(o, "error", json_object_new_string(error_name));
                        json_object_object_add(o, "message", json_object_new_string(strempty(error_message)));
                }
                if (extra) {
                        json_object_object_foreach(extra, key, value)
                                json_object_object_add(o, key, json_object_get(value));
                }
                detail = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
                json_object_put(o);
        }
        json_object_put(extra);
        AuditRow row = {
                .session_id = s->id,
                .operation = operation,
                .event = event,
                .detail = detail,
                .exit_code = error_name ? -1 : 0,
                .started_at = started_at,
                .duration_usec = now_usec(CLOCK_MONOTONIC) - mono_start,
        };
        manager_audit(s->manager, c, &row);
}

void sandbox_audit(Sandbox *s, const Caller *c, const char *operation, const char *event, const char *error_name,
                   const char *error_message, uint64_t started_at, uint64_t mono_start) {
        audit_row(s, c, operation, event, error_name, error_message, NULL, started_at, mono_start);
}

void sandbox_audit_extra(Sandbox *s, const Caller *c, const char *operation, const char *event,
                         json_object *extra, uint64_t started_at, uint64_t mono_start) {
        audit_row(s, c, operation, event, NULL, NULL, extra, started_at, mono_start);
}

/* --- TTL ------------------------------------------------------------------------------------------ */

static int on_ttl(sd_event_source *es, uint64_t usec, void *userdata) {
        Sandbox *s = userdata;

        log_sandbox(LOG_INFO, s->id, "Sandbox %s expired.", s->id);
        (void) sandbox_delete(s, NULL, "sandbox.expire", NULL);
        return 0;
}

const char *sandbox_state_name(const Sandbox *s) {
        if (s->state == SANDBOX_RUNNING && s->paused)
                return "paused";
        return sandbox_state_to_string(s->state);
}

int sandbox_arm_ttl(Sandbox *s) {
        if (s->expires_at == 0 || s->paused) {
                s->ttl_timer = sd_event_source_disable_unref(s->ttl_timer);
                return 0;
        }
        if (s->ttl_timer) {
                int r = sd_event_source_set_time(s->ttl_timer, s->expires_at);
                if (r < 0)
                        return r;
                return sd_event_source_set_enabled(s->ttl_timer, SD_EVENT_ONESHOT);
        }
        return sd_event_add_time(s->manager->event, &s->ttl_timer, CLOCK_REALTIME, s->expires_at, USEC_PER_MSEC,
                                 on_ttl, s);
}

int sandbox_set_ttl(Sandbox *s, uint64_t ttl_usec) {
        uint64_t expires = now_usec(CLOCK_REALTIME) + ttl_usec;
        int r;

        if (s->paused) {
                /* Running time: the new TTL is what it has left when it resumes (sandbox-pause.c). */
                r = sandbox_store_set_paused(s->manager->store, s->id, s->paused_at, ttl_usec, expires);
                if (r < 0)
                        return r;
                s->ttl_left = ttl_usec;
                s->expires_at = expires;
                sandbox_emit_changed(s, "ExpiresAt");
                return 0;
        }
        r = sandbox_store_set_expiry(s->manager->store, s->id, expires);
        if (r < 0)
                return r;
        s->expires_at = expires;
        r = sandbox_arm_ttl(s);
        sandbox_emit_changed(s, "ExpiresAt");
        return r;
}

/* --- init's life ---------------------------------------------------------------------------------- */

static void sandbox_finish_delete(Sandbox *s);

static void sandbox_init_died(Sandbox *s) {
        s->init_source = sd_event_source_disable_unref(s->init_source);
        s->child.child_source = sd_event_source_disable_unref(s->child.child_source);
        s->init_pidfd = safe_close(s->init_pidfd);
        if (s->state == SANDBOX_RUNNING && s->pooled) {
                /* Nobody owns it yet: it goes, and the pool makes another. */
                log_sandbox(LOG_WARNING, s->id, "Init of pooled sandbox %s died; removing it.", s->id);
                s->state = SANDBOX_FAILED;
                (void) sandbox_delete(s, NULL, "sandbox.delete", NULL);
                return;
        }
        if (s->state == SANDBOX_RUNNING) {
                log_sandbox(LOG_WARNING, s->id, "Init of sandbox %s died; the sandbox is marked failed.", s->id);
                s->state = SANDBOX_FAILED;
                sandbox_emit_changed(s, "State");
        }
        if (s->state == SANDBOX_STOPPING && s->killing_init) {
                /* Its PID namespace died with it: every process of the sandbox is gone now. Its units
                 * are stopped in the background; the caller need not wait for systemd. */
                s->killing_init = false;
                (void) unit_stop_nowait(s->manager, s->slice);
                sandbox_finish_delete(s); /* frees s */
        }
}

static int on_init_pidfd(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        Sandbox *s = userdata;
        siginfo_t si = {};

        /* Reap it if it is ours (it is not after a restart of sandboxd). */
        (void) waitid(P_PIDFD, fd, &si, WEXITED | WNOHANG);
        sandbox_init_died(s);
        return 0;
}

/* --- creation --------------------------------------------------------------------------------------- */

#define WORKSPACE_IMAGE_FILE "image" /* the image's name, in an image sandbox's workspace */

static int write_workspace_image(const char *workspace, const char *image) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/" WORKSPACE_IMAGE_FILE, workspace);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        size_t n = strlen(image);
        if (fd < 0)
                return -errno;
        if (write(fd, image, n) != (ssize_t) n)
                return errno > 0 ? -errno : -EIO;
        return 0;
}

static char *read_workspace_image(const char *workspace) {
        char path[4096], buf[SANDBOX_NAME_MAX + 2];
        snprintf(path, sizeof(path), "%s/" WORKSPACE_IMAGE_FILE, workspace);
        if (read_small_file(path, buf, sizeof(buf)) <= 0 || !name_is_valid(buf))
                return NULL;
        return strdup(buf);
}

static _noreturn_ void init_fail(int fd, const char *step, int error) {
        scope_child_fail(fd, SCOPE_CHILD_STAGE_SETUP, step, error, EXIT_FAILURE);
}

static _noreturn_ void init_child(Sandbox *s, int go_fd, int err_fd) {
        Manager *m = s->manager;
        const char *step = NULL;
        int r;

        if (confine_reset_signals() < 0)
                init_fail(err_fd, "reset signals", errno);
        if (scope_child_wait_go(go_fd) < 0)
                _exit(EXIT_FAILURE); /* sandboxd gave up on us */
        /* Before the new mount namespace: see disk_image_mount(). */
        _cleanup_close_ int image = -EBADF;
        if (s->disk_max > 0) {
                char path[4096];
                snprintf(path, sizeof(path), "%s/" DISK_IMAGE_NAME, s->workspace);
                image = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
                if (image < 0)
                        init_fail(err_fd, "open the disk image", errno);
        }
        /* sandbox-init as the host has it, for after the root changed (an image sandbox's root has no
         * /usr/libexec of ours): run from this descriptor. */
        int init_exe = open(m->init_path, O_PATH | O_CLOEXEC);
        if (init_exe < 0)
                init_fail(err_fd, "open sandbox-init", errno);
        char image_tree[4096];
        if (s->image)
                snprintf(image_tree, sizeof(image_tree), "%s/%s/" IMAGE_TREE_NAME, manager_images_dir(m), s->image);
        /* Network egress: the namespace sandboxd made with its link (sandbox-egress.c); none: a new one
         * with loopback only; host: the host's. */
        if (s->egress.netns_fd >= 0 && setns(s->egress.netns_fd, CLONE_NEWNET) < 0)
                init_fail(err_fd, "join the sandbox's network namespace", errno);
        if (unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC |
                    (s->network == SANDBOX_NETWORK_NONE ? CLONE_NEWNET : 0)) < 0)
                init_fail(err_fd, "create namespaces", errno);

        SandboxLayout layout = {
                .workspace = s->workspace,
                .state_dir = m->state_dir,
                .home = SANDBOXD_SANDBOX_HOME,
                .hostname = s->id,
                .private_network = s->network != SANDBOX_NETWORK_HOST,
                .resolv_conf = s->network == SANDBOX_NETWORK_EGRESS,
                .disk_image_fd = image,
                .hide_paths = m->config.hide_paths,
                .uid = s->uid,
                .gid = (gid_t) s->uid,
                .image_tree = s->image ? image_tree : NULL,
                .disk_from_uid = s->disk_from_uid,
        };
        r = namespace_setup(&layout, &step);
        if (r < 0)
                init_fail(err_fd, step, -r);
        if (setsid() < 0)
                init_fail(err_fd, "setsid", errno);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
                init_fail(err_fd, "open /dev/null", errno);
        int keep[] = { err_fd, init_exe };
        r = confine_sandbox_process(keep, ELEMENTSOF(keep), s->uid, &step);
        if (r < 0)
                init_fail(err_fd, step, -r);

        char *argv[] = { (char *) "sandbox-init", s->id, NULL };
        char *envp[] = { NULL };
        execveat(init_exe, "", argv, envp, AT_EMPTY_PATH);
        init_fail(err_fd, "execute sandbox-init", errno);
}

typedef struct InitChildArgs {
        Sandbox *sandbox;
        int go_fd, err_fd;             /* the child's ends */
        int parent_go, parent_err;     /* ours, which the child must not hold (EOF on go is its way out) */
} InitChildArgs;

static void init_child_run(void *userdata) {
        InitChildArgs *a = userdata;

        safe_close(a->parent_go);
        safe_close(a->parent_err);
        init_child(a->sandbox, a->go_fd, a->err_fd);
}

static void sandbox_create_failed(Sandbox *s, const char *step, int error) {
        Manager *m = s->manager;

        char message[512];

        bool pooled = s->pooled;

        log_sandbox(LOG_ERR, s->id, "Creating %ssandbox %s failed: %s: %s", pooled ? "pooled " : "", s->id, step,
                    strerror(error));
        snprintf(message, sizeof(message), "Could not create the sandbox: %s: %s", step, strerror(error));
        if (!pooled)
                sandbox_audit(s, &s->create_caller, "sandbox.create", "failed", SD_BUS_ERROR_FAILED, message,
                              s->create_started, s->create_mono);
        if (s->create_request) {
                (void) sd_bus_reply_method_errorf(s->create_request, SD_BUS_ERROR_FAILED, "%s", message);
                s->create_request = sd_bus_message_unref(s->create_request);
        }
        if (s->child.pid > 0)
                (void) kill(s->child.pid, SIGKILL);
        /* The slice came with the scope; stopping it takes whatever is left. */
        (void) unit_stop_nowait(m, s->slice);
        (void) namespace_remove_workspace(s->workspace);
        sandbox_egress_teardown(s);
        manager_release_uid(m, s->uid);
        sandbox_free(s);
        if (pooled)
                sandbox_pool_schedule(m, POOL_RETRY_USEC); /* not in a tight loop if it keeps failing */
}

static int sandbox_persist(Sandbox *s) {
        _cleanup_free_ char *policy = NULL;
        char address[INET_ADDRSTRLEN] = "";

        if (s->network == SANDBOX_NETWORK_EGRESS && s->egress.policy) {
                policy = egress_policy_to_json_string(s->egress.policy);
                if (!policy)
                        return -ENOMEM;
                (void) inet_ntop(AF_INET, &s->egress.address, address, sizeof(address));
        }
        SandboxRecord rec = {
                .egress_address = address,
                .egress_policy = strempty(policy),
                .id = s->id,
                .name = s->name,
                .type = s->type,
                .owner = s->owner,
                .uid = s->uid,
                .network = s->network,
                .created_at = s->created_at,
                .expires_at = s->expires_at,
                .init_pid = s->init_pid,
                .init_start = s->init_start,
                .exec_next = s->exec_reserved,
        };
        return sandbox_store_insert(s->manager->store, &rec);
}

static void sandbox_started(Sandbox *s) {
        int r;

        s->init_pid = s->child.pid;
        /* EOF on the report pipe means exec, or death: tell them apart without reaping. */
        siginfo_t si = {};
        if (waitid(P_PID, s->init_pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == s->init_pid)
                return sandbox_create_failed(s, "start sandbox-init", ECHILD);
        r = proc_starttime(s->init_pid, &s->init_start);
        if (r < 0)
                return sandbox_create_failed(s, "read the init's start time", -r);
        s->init_pidfd = pidfd_open(s->init_pid, 0);
        if (s->init_pidfd < 0)
                return sandbox_create_failed(s, "open a pidfd for the init", errno);
        /* Its init holds the network namespace now; Execs and shells join the init's. */
        s->egress.netns_fd = safe_close(s->egress.netns_fd);
        if (s->disk_max > 0)
                disk_pin(s);
        if (s->pooled) {
                /* Stored, timed and announced when claimed. */
                s->state = SANDBOX_RUNNING;
                log_sandbox(LOG_DEBUG, s->id, "Pooled sandbox %s (type %s) is ready.", s->id, s->type);
                return;
        }
        r = sandbox_persist(s);
        if (r < 0)
                return sandbox_create_failed(s, "store the sandbox", -r);
        r = sandbox_arm_ttl(s);
        if (r < 0) {
                (void) sandbox_store_delete(s->manager->store, s->id);
                return sandbox_create_failed(s, "arm the TTL timer", -r);
        }
        s->state = SANDBOX_RUNNING;
        sandbox_idle_arm(s);
        log_sandbox(LOG_INFO, s->id, "Created sandbox %s (%s, type %s, uid %u, network %s) for %s%s%s.", s->id,
                    s->name, s->type, (unsigned) s->uid, sandbox_network_to_string(s->network), s->owner,
                    s->from_snapshot ? " from snapshot " : "", strempty(s->from_snapshot));
        json_object *extra = NULL;
        if (s->from_snapshot && (extra = json_object_new_object()))
                json_object_object_add(extra, "snapshot", json_object_new_string(s->from_snapshot));
        sandbox_audit_extra(s, &s->create_caller, "sandbox.create", "finished", extra, s->create_started,
                            s->create_mono);
        if (s->create_request) {
                (void) sandbox_reply_created(s, s->create_request);
                s->create_request = sd_bus_message_unref(s->create_request);
        }
        sandbox_emit_new(s);
}

/* f NULL: close-on-exec closed the report pipe, sandbox-init runs. */
static void init_child_report(ScopeChild *c, const ScopeChildFailure *f) {
        Sandbox *s = c->userdata;

        if (!f)
                sandbox_started(s);
        else
                sandbox_create_failed(s, f->step ?: "set up the sandbox", f->error);
}

static void init_child_done(ScopeChild *c) {
        Sandbox *s = c->userdata;

        if (s->state == SANDBOX_STARTING) {
                /* Died before reporting: the report source will see EOF or the failure. If it was EOF
                 * without exec (killed), say so. */
                if (c->report_source)
                        return;
                sandbox_create_failed(s, "start sandbox-init", ECHILD);
                return;
        }
        sandbox_init_died(s);
}

static int append_slice(sd_bus_message *msg, void *userdata) {
        Sandbox *s = userdata;
        const SandboxType *t = sandboxd_config_find_type(&s->manager->config, s->type);
        char desc[128];
        int r;

        snprintf(desc, sizeof(desc), "sandbox %s (%s)", s->id, s->name);
        r = sd_bus_message_open_container(msg, 'r', "sa(sv)");
        if (r < 0)
                return r;
        r = sd_bus_message_append(msg, "s", s->slice);
        if (r < 0)
                return r;
        r = sd_bus_message_append(msg, "a(sv)", 5,
                                  "Description", "s", desc,
                                  "CPUQuotaPerSecUSec", "t", (uint64_t) t->cpu_quota_percent * USEC_PER_SEC / 100,
                                  "MemoryMax", "t", t->memory_max,
                                  "TasksMax", "t", t->tasks_max,
                                  "CollectMode", "s", "inactive-or-failed");
        if (r < 0)
                return r;
        return sd_bus_message_close_container(msg);
}

static void init_child_scope_failed(ScopeChild *c, int error, const sd_bus_error *bus_error) {
        Sandbox *s = c->userdata;

        if (bus_error && sd_bus_error_is_set(bus_error))
                log_sandbox(LOG_ERR, s->id, "StartTransientUnit for %s failed: %s", s->id, bus_error->message);
        sandbox_create_failed(s, "start the sandbox's units", error);
}

/* Its scope and slice are up: the init may set up the sandbox and exec sandbox-init. */
static void init_child_go(ScopeChild *c) {
        Sandbox *s = c->userdata;

        if (s->disk_copy) {
                /* its disk, a snapshot's copy, is not in place yet: on_disk_copied() lets it go */
                s->go_deferred = true;
                return;
        }
        int r = scope_child_go(c);
        if (r < 0)
                sandbox_create_failed(s, "start sandbox-init", -r);
}

static void on_disk_copied(void *userdata, int error) {
        Sandbox *s = userdata;

        s->disk_copy = NULL;
        if (error != 0)
                return sandbox_create_failed(s, "copy the snapshot's disk image", error);
        if (s->go_deferred) {
                s->go_deferred = false;
                init_child_go(&s->child);
        }
}

/* The init waits for go before anything else; its report pipe is watched from the start, and its
 * exit for the sandbox's life. */
static const ScopeChildOps init_child_ops = {
        .report = init_child_report,
        .go = init_child_go,
        .scope_failed = init_child_scope_failed,
        .done = init_child_done,
        .ready_at_spawn = true,
        .keep_scope = true,
};

/* --- the pool ------------------------------------------------------------------------------------

 * Creating a sandbox takes systemd two units and the sandbox a mount namespace: tens of milliseconds
 * on a busy host. So sandboxd keeps PoolSize= sandboxes per type made ahead (network "none", the
 * default), in no table and under <state>/pool/ rather than sandboxes/, so nothing sees them. A
 * CreateSandbox that one fits claims it: the workspace moves to sandboxes/ (the sandbox's own mounts
 * follow the directory, not its path), it gets its name, owner and TTL, is stored and announced; the
 * pool is refilled in the background. Pooled sandboxes are not stored: a new sandboxd removes what
 * an old one left in pool/ (sandbox_pool_startup()). */

static Sandbox *pool_find(Manager *m, const char *id) {
        for (Sandbox *p = m->pool; p; p = p->pool_next)
                if (streq(p->id, id))
                        return p;
        return NULL;
}

/* 1: claimed (the request is answered, or will be); 0: none fits, create one; negative: failed, nothing
 * changed. */
static int pool_claim(Manager *m, const SandboxCreateSpec *spec, sd_bus_message *request, Sandbox **ret) {
        _cleanup_free_ char *workspace = NULL, *name = NULL, *owner = NULL;
        char buf[4096];
        Sandbox *s = NULL;
        int r;

        for (Sandbox *p = m->pool; p && !s; p = p->pool_next)
                if (p->state == SANDBOX_RUNNING && p->init_pidfd >= 0 && streq(p->type, spec->type) &&
                    p->network == spec->network && streq_ptr(p->image, spec->image))
                        s = p;
        if (!s)
                return 0;

        /* An egress sandbox gets the policy asked for before it is handed out (the type's, unless the
         * request gave its own): re-rendered only if it differs. */
        if (s->network == SANDBOX_NETWORK_EGRESS && spec->egress_policy) {
                _cleanup_free_ char *want = egress_policy_to_json_string(spec->egress_policy),
                                    *have = egress_policy_to_json_string(s->egress.policy);
                if (!want || !have)
                        return -ENOMEM;
                if (!streq(want, have)) {
                        r = sandbox_egress_set_policy(s, spec->egress_policy);
                        if (r < 0) {
                                log_sandbox(LOG_WARNING, s->id, "Could not give pooled sandbox %s its policy: "
                                            "%s; removing it.", s->id, strerror(-r));
                                (void) sandbox_delete(s, NULL, "sandbox.delete", NULL);
                                return 0;
                        }
                }
        }

        snprintf(buf, sizeof(buf), "%s/sandboxes/%s", m->state_dir, s->id);
        workspace = strdup(buf);
        name = strdup(spec->name ?: s->id);
        owner = strdup(spec->owner);
        if (!workspace || !name || !owner)
                return -ENOMEM;
        if (rename(s->workspace, workspace) < 0) {
                log_sandbox(LOG_WARNING, s->id, "Could not move pooled sandbox %s into place: %m; removing it.",
                            s->id);
                (void) sandbox_delete(s, NULL, "sandbox.delete", NULL);
                return 0;
        }

        /* From here on it is an ordinary sandbox: out of the pool, into the tables. */
        for (Sandbox **p = &m->pool; *p; p = &(*p)->pool_next)
                if (*p == s) {
                        *p = s->pool_next;
                        break;
                }
        s->pool_next = NULL;
        s->pooled = false;
        free(s->workspace);
        s->workspace = TAKE_PTR(workspace);
        free(s->name);
        s->name = TAKE_PTR(name);
        free(s->owner);
        s->owner = TAKE_PTR(owner);
        s->created_at = now_usec(CLOCK_REALTIME);
        s->expires_at = spec->ttl_usec > 0 ? s->created_at + spec->ttl_usec : 0;
        s->create_started = s->created_at;
        s->create_mono = now_usec(CLOCK_MONOTONIC);
        if (spec->caller)
                s->create_caller = *spec->caller;
        else
                caller_system(&s->create_caller);
        s->create_request = sd_bus_message_ref(request);
        r = hashmap_put(m->sandboxes, s->id, s);
        if (r >= 0)
                r = hashmap_put(m->sandbox_names, s->name, s);
        if (r < 0) {
                sandbox_create_failed(s, "register the sandbox", -r);
                return 1;
        }
        r = sandbox_persist(s);
        if (r < 0) {
                sandbox_create_failed(s, "store the sandbox", -r);
                return 1;
        }
        r = sandbox_arm_ttl(s);
        if (r < 0) {
                (void) sandbox_store_delete(m->store, s->id);
                sandbox_create_failed(s, "arm the TTL timer", -r);
                return 1;
        }
        sandbox_idle_arm(s);

        log_sandbox(LOG_INFO, s->id, "Created sandbox %s (%s, type %s, uid %u, network %s) for %s, from the pool.",
                    s->id, s->name, s->type, (unsigned) s->uid, sandbox_network_to_string(s->network), s->owner);
        sandbox_audit(s, &s->create_caller, "sandbox.create", "finished", NULL, NULL, s->create_started,
                      s->create_mono);
        if (s->create_request) {
                (void) sandbox_reply_created(s, s->create_request);
                s->create_request = sd_bus_message_unref(s->create_request);
        }
        sandbox_emit_new(s);
        /* Its file helper starts once the reply is out, so that the first WriteFile (the reference
         * flow's next step) does not wait for one to start. Only at a claim from the pool: the price
         * is a helper for a sandbox that never uses a file call, bounded here by the pool. */
        sandbox_files_prepare(s);
        /* The slice was described with the id alone; give it the name (nobody waits for this). */
        snprintf(buf, sizeof(buf), "sandbox %s (%s)", s->id, s->name);
        (void) sd_bus_call_method_async(m->bus, NULL, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                        "org.freedesktop.systemd1.Manager", "SetUnitProperties", NULL, NULL,
                                        "sba(sv)", s->slice, 1, 1, "Description", "s", buf);
        sandbox_pool_schedule(m, 0);
        if (ret)
                *ret = s;
        return 1;
}

int sandbox_create(Manager *m, const SandboxCreateSpec *spec, sd_bus_message *request, Sandbox **ret) {
        _cleanup_close_pair_ int go[2] = { -EBADF, -EBADF }, rep[2] = { -EBADF, -EBADF };
        char id[SANDBOX_ID_LEN + 1];
        Sandbox *s;
        uid_t uid;
        int r;

        if (!spec->pooled && !spec->snapshot_image) {
                r = pool_claim(m, spec, request, ret);
                if (r != 0)
                        return r < 0 ? r : 0;
        }

        /* A new one, pooled or not: it must fit in what [Sandboxes] allows all of them together. */
        const SandboxType *admit_type = sandboxd_config_find_type(&m->config, spec->type);
        if (admit_type) {
                char msg[512];
                r = manager_admit(m, admit_type, msg, sizeof(msg));
                if (r < 0)
                        return r;
        }

        do {
                r = sandbox_id_generate_tagged(m->config.host_tag, id);
                if (r < 0)
                        return r;
        } while (hashmap_get(m->sandboxes, id) || pool_find(m, id));

        r = manager_allocate_uid(m, &uid);
        if (r < 0)
                return r;
        r = sandbox_alloc(m, id, spec->name ?: id, spec->type, spec->owner, spec->pooled, &s);
        if (r < 0) {
                manager_release_uid(m, uid);
                return r;
        }
        s->uid = uid;
        s->network = spec->network;
        if (spec->image && !(s->image = strdup(spec->image))) {
                r = -ENOMEM;
                manager_release_uid(m, uid);
                sandbox_free(s);
                return r;
        }
        s->state = SANDBOX_STARTING;
        s->created_at = now_usec(CLOCK_REALTIME);
        s->expires_at = spec->ttl_usec > 0 ? s->created_at + spec->ttl_usec : 0;
        s->exec_next = 1;
        s->exec_reserved = 1 + EXEC_NUMBER_BLOCK;
        s->create_started = s->created_at;
        s->create_mono = now_usec(CLOCK_MONOTONIC);
        if (spec->caller)
                s->create_caller = *spec->caller;
        else
                caller_system(&s->create_caller);

        const SandboxType *t = sandboxd_config_find_type(&m->config, spec->type);
        const char *disk_template = NULL;
        s->disk_max = t ? t->disk_max : 0;
        if (spec->snapshot_image) {
                /* Its disk is a copy of the snapshot's (the caller checked its size is the type's), made in a
                 * thread while systemd makes its units: "" leaves the image out of the workspace for now. */
                disk_template = "";
                s->disk_from_uid = spec->snapshot_uid;
                s->from_snapshot = spec->snapshot_id ? strdup(spec->snapshot_id) : NULL;
        } else if (s->disk_max > 0) {
                disk_template = manager_disk_template(m, s->disk_max, &r);
                if (!disk_template)
                        goto fail_workspace;
        }
        r = namespace_make_workspace(s->workspace, SANDBOXD_SANDBOX_USER, uid, (gid_t) uid, SANDBOXD_SANDBOX_HOME,
                                     disk_template);
        if (r < 0)
                goto fail_workspace;
        if (s->image) {
                /* Its image's name in the workspace too: a restarted sandboxd reads it back (adoption). */
                r = disk_template ? namespace_workspace_add_image(s->workspace, s->id) : -EINVAL;
                if (r >= 0)
                        r = write_workspace_image(s->workspace, s->image);
                if (r < 0)
                        goto fail;
        }
        if (spec->snapshot_image) {
                char image[4096];
                snprintf(image, sizeof(image), "%s/" DISK_IMAGE_NAME, s->workspace);
                r = image_copy_start(m, spec->snapshot_image, image, on_disk_copied, s, &s->disk_copy);
                if (r < 0)
                        goto fail;
        }
        if (spec->network == SANDBOX_NETWORK_EGRESS) {
                const char *step = NULL;
                r = sandbox_egress_setup(s, spec->egress_policy, &step);
                if (r < 0) {
                        log_sandbox(LOG_ERR, s->id, "Creating %ssandbox %s failed: %s: %s",
                                    spec->pooled ? "pooled " : "", s->id, strna(step), strerror(-r));
                        goto fail;
                }
        }

        if (pipe2(go, O_CLOEXEC) < 0 || pipe2(rep, O_CLOEXEC) < 0) {
                r = -errno;
                goto fail;
        }

        /* Our next child is PID 1 of a new PID namespace; we stay in ours. */
        InitChildArgs a = {
                .sandbox = s,
                .go_fd = go[0],
                .err_fd = rep[1],
                .parent_go = go[1],
                .parent_err = rep[0],
        };
        pid_t pid = scope_child_spawn(&(ScopeChildSpawn) {
                .pidns_fd = -EBADF,
                .host_pidns_fd = m->host_pidns_fd,
                .cgroup2_fd = -EBADF,
                .child = init_child_run,
                .arg = &a,
        });
        if (pid < 0) {
                r = -errno;
                goto fail;
        }
        go[0] = safe_close(go[0]);
        rep[1] = safe_close(rep[1]);

        r = scope_child_attach(&s->child, pid, TAKE_FD(go[1]), TAKE_FD(rep[0]));
        if (r < 0)
                goto fail_kill;

        char desc[128];
        snprintf(s->child.unit, sizeof(s->child.unit), "sandbox-%s-init.scope", s->id);
        snprintf(desc, sizeof(desc), "sandbox %s init", s->id);
        /* SIGKILL: PID 1 of a PID namespace ignores every other signal it has no handler for, also
         * from outside, and sandbox-init has nothing to clean up. */
        r = scope_child_start_scope(&s->child,
                                    &(ScopeProps) {
                                            .description = desc,
                                            .slice = s->slice,
                                            .pid = pid,
                                            .kill_signal = SIGKILL,
                                    },
                                    append_slice, s);
        if (r < 0)
                goto fail_kill;

        s->create_request = sd_bus_message_ref(request);
        if (ret)
                *ret = s;
        return 0;

fail_kill:
        /* We no longer care about the result: reaped here. */
        (void) kill(pid, SIGKILL);
        s->child.child_source = sd_event_source_disable_unref(s->child.child_source);
        (void) waitpid(pid, NULL, 0);
fail:
        sandbox_egress_teardown(s);
        (void) namespace_remove_workspace(s->workspace);
fail_workspace:
        manager_release_uid(m, uid);
        sandbox_free(s);
        return r;
}

/* --- deletion --------------------------------------------------------------------------------------- */

static void sandbox_finish_delete(Sandbox *s) {
        Manager *m = s->manager;
        int r;

        if (s->init_pidfd >= 0)
                (void) pidfd_send_signal(s->init_pidfd, SIGKILL, NULL, 0);
        sandbox_files_forget(s);
        sandbox_egress_teardown(s);
        r = namespace_remove_workspace(s->workspace);
        if (r < 0)
                log_sandbox(LOG_WARNING, s->id, "Could not remove all of %s: %s", s->workspace, strerror(-r));
        if (s->pooled) {
                /* Never stored, claimed or announced: nothing to record. */
                manager_release_uid(m, s->uid);
                log_sandbox(LOG_INFO, s->id, "Removed pooled sandbox %s.", s->id);
                sandbox_free(s);
                sandbox_pool_schedule(m, POOL_RETRY_USEC);
                return;
        }
        r = sandbox_store_delete(m->store, s->id);
        if (r < 0)
                log_sandbox(LOG_ERR, s->id, "Could not remove sandbox %s from the store: %s", s->id, strerror(-r));
        manager_release_uid(m, s->uid);
        log_sandbox(LOG_INFO, s->id, "Removed sandbox %s (%s).", s->id, s->delete_operation);
        /* Room for the pool, if it waited for some. */
        sandbox_pool_schedule(m, 0);
        sandbox_audit(s, &s->delete_caller, s->delete_operation, "finished", NULL, NULL, s->delete_started,
                      s->delete_mono);
        sandbox_emit_removed(s);
        for (size_t i = 0; i < s->n_delete_requests; i++)
                (void) sd_bus_reply_method_return(s->delete_requests[i], NULL);
        sandbox_free(s);
}

static void on_slice_stopped(Manager *m, const char *result, const sd_bus_error *error, void *userdata) {
        Sandbox *s = userdata;

        s->job = NULL;
        /* Whatever the result (the slice may be gone already, say after a restart of systemd), the
         * sandbox goes: init is killed directly too. */
        sandbox_finish_delete(s);
}

int sandbox_delete(Sandbox *s, sd_bus_message *request, const char *operation, const Caller *caller) {
        int r;

        if (s->state == SANDBOX_STARTING)
                return -EBUSY;
        if (request) {
                sd_bus_message **n = realloc(s->delete_requests, (s->n_delete_requests + 1) * sizeof(*n));
                if (!n)
                        return -ENOMEM;
                s->delete_requests = n;
                s->delete_requests[s->n_delete_requests++] = sd_bus_message_ref(request);
        }
        if (s->state == SANDBOX_STOPPING)
                return 0;
        s->state = SANDBOX_STOPPING;
        sandbox_emit_changed(s, "State");
        s->delete_operation = operation;
        s->delete_started = now_usec(CLOCK_REALTIME);
        s->delete_mono = now_usec(CLOCK_MONOTONIC);
        if (caller)
                s->delete_caller = *caller;
        else
                caller_system(&s->delete_caller);
        s->ttl_timer = sd_event_source_disable_unref(s->ttl_timer);

        /* The quick way: SIGKILL to the sandbox's PID 1 ends its PID namespace and so every process
         * in it; we answer when the init is gone (sandbox_init_died()). Without a live init, ask
         * systemd to stop the slice and wait for that. */
        if (s->init_pidfd >= 0 && (s->init_source || s->child.child_source) &&
            pidfd_send_signal(s->init_pidfd, SIGKILL, NULL, 0) >= 0) {
                s->killing_init = true;
                return 0;
        }
        r = unit_stop(s->manager, s->slice, on_slice_stopped, s, &s->job);
        if (r < 0)
                sandbox_finish_delete(s);
        return 0;
}

/* --- adoption --------------------------------------------------------------------------------------- */

static bool init_is_ours(const char *id, pid_t pid, uint64_t start) {
        _cleanup_free_ char *cgroups = NULL;
        char needle[128];
        uint64_t st;

        if (pid <= 1 || proc_starttime(pid, &st) < 0 || st != start || cgroup_read(pid, &cgroups) < 0)
                return false;
        snprintf(needle, sizeof(needle), "/sandbox-%s-init.scope", id);
        return strstr(cgroups, needle) != NULL;
}

int sandbox_adopt(Manager *m, const char *id, const char *name, const char *type, const char *owner, uid_t uid,
                  SandboxNetwork network, uint64_t created_at, uint64_t expires_at, pid_t init_pid,
                  uint64_t init_start, uint64_t exec_next, const char *egress_address,
                  const char *egress_policy, uint64_t paused_at, uint64_t ttl_left) {
        Sandbox *s;
        int r;

        r = sandbox_alloc(m, id, name, type, owner, false, &s);
        if (r < 0)
                return r;
        s->uid = uid;
        manager_reserve_uid(m, uid);
        s->network = network;
        s->created_at = created_at;
        s->expires_at = expires_at;
        s->init_pid = init_pid;
        s->init_start = init_start;
        s->exec_next = exec_next;
        s->exec_reserved = exec_next;
        s->state = SANDBOX_RUNNING;
        s->image = read_workspace_image(s->workspace); /* NULL: the host's tree */
        if (network == SANDBOX_NETWORK_EGRESS) {
                r = sandbox_egress_adopt(s, egress_address, egress_policy);
                if (r < 0)
                        /* Its link is removed as no one's at start: it reaches nothing. */
                        log_sandbox(LOG_ERR, id, "Sandbox %s's egress network (address %s) could not be adopted: "
                                    "%s; it has no network now.", id, strna(egress_address), strerror(-r));
        }

        if (!init_is_ours(id, init_pid, init_start) || (s->init_pidfd = pidfd_open(init_pid, 0)) < 0 ||
            !init_is_ours(id, init_pid, init_start)) {
                log_sandbox(LOG_WARNING, id, "Sandbox %s lost its init while sandboxd was away; removing it.", id);
                s->state = SANDBOX_FAILED;
                return sandbox_delete(s, NULL, "sandbox.delete", NULL);
        }
        r = sd_event_add_io(m->event, &s->init_source, s->init_pidfd, EPOLLIN, on_init_pidfd, s);
        if (r < 0) {
                sandbox_free(s);
                return r;
        }
        char image[4096];
        snprintf(image, sizeof(image), "%s/" DISK_IMAGE_NAME, s->workspace);
        if (access(image, F_OK) >= 0)
                disk_pin(s);
        if (paused_at > 0) {
                /* Paused: its TTL does not run, and its slice stays frozen (or is frozen again). */
                r = sandbox_pause_adopt(s, paused_at, ttl_left);
                if (r < 0)
                        log_sandbox(LOG_ERR, id, "Sandbox %s was paused but its slice could not be frozen again: %s",
                                    id, strerror(-r));
                log_sandbox(LOG_INFO, id, "Adopted paused sandbox %s (init %d).", id, (int) init_pid);
                return 0;
        }
        (void) sandbox_pause_adopt(s, 0, 0);
        if (expires_at > 0 && expires_at <= now_usec(CLOCK_REALTIME)) {
                log_sandbox(LOG_INFO, id, "Sandbox %s expired while sandboxd was away.", id);
                return sandbox_delete(s, NULL, "sandbox.expire", NULL);
        }
        r = sandbox_arm_ttl(s);
        if (r < 0)
                return r;
        sandbox_idle_arm(s);
        log_sandbox(LOG_INFO, id, "Adopted sandbox %s (init %d).", id, (int) init_pid);
        return 0;
}

/* --- filling the pool ------------------------------------------------------------------------------ */

static void pool_fill(Manager *m) {
        int r;

        if (m->exiting)
                return;
        for (size_t i = 0; i < m->config.n_types; i++) {
                const SandboxType *t = &m->config.types[i];
                unsigned have = 0;

                for (Sandbox *p = m->pool; p; p = p->pool_next)
                        if (streq(p->type, t->name) &&
                            (p->state == SANDBOX_STARTING || p->state == SANDBOX_RUNNING))
                                have++;
                /* A type's pooled sandboxes have its network (host is never pooled: none instead) and
                 * its policy; egress ones only where egress works. */
                static const EgressPolicy empty_policy = EGRESS_POLICY_INIT;
                SandboxNetwork network = t->network == SANDBOX_NETWORK_HOST ? SANDBOX_NETWORK_NONE : t->network;
                if (network == SANDBOX_NETWORK_EGRESS && m->egress.error < 0)
                        continue;
                /* Image=: pooled once the store has it (ImportImage or BuildImage calls us then). */
                const char *image = t->image[0] ? t->image : NULL;
                if (image && !image_exists(manager_images_dir(m), image))
                        continue;
                for (; have < t->pool_size; have++) {
                        SandboxCreateSpec spec = {
                                .type = t->name,
                                .owner = "",
                                .network = network,
                                .egress_policy = network == SANDBOX_NETWORK_EGRESS ? (t->egress ?: &empty_policy)
                                                                                   : NULL,
                                .image = image,
                                .pooled = true,
                        };
                        r = sandbox_create(m, &spec, NULL, NULL);
                        if (r >= 0)
                                m->pool_full_logged = false;
                        if (r == -E2BIG) {
                                /* Full: the pool waits for room, which a deletion makes (it calls us
                                 * again); it never takes what callers could not. */
                                if (!m->pool_full_logged)
                                        log_msg(LOG_INFO, "The pool of type %s waits: all sandboxes "
                                                "together have what [Sandboxes] allows.", t->name);
                                m->pool_full_logged = true;
                                return;
                        }
                        if (r < 0) {
                                log_msg(LOG_WARNING, "Could not make a sandbox of type %s for the pool: %s",
                                        t->name, strerror(-r));
                                sandbox_pool_schedule(m, POOL_RETRY_USEC);
                                return;
                        }
                }
        }
}

static int on_pool_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        pool_fill(userdata);
        return 0;
}

void sandbox_pool_schedule(Manager *m, uint64_t delay_usec) {
        uint64_t when = now_usec(CLOCK_MONOTONIC) + delay_usec, cur;
        int enabled, r;

        if (m->exiting)
                return;
        if (m->pool_timer) {
                if (sd_event_source_get_enabled(m->pool_timer, &enabled) >= 0 && enabled != SD_EVENT_OFF &&
                    sd_event_source_get_time(m->pool_timer, &cur) >= 0 && cur <= when)
                        return; /* due sooner anyway */
                (void) sd_event_source_set_time(m->pool_timer, when);
                (void) sd_event_source_set_enabled(m->pool_timer, SD_EVENT_ONESHOT);
                return;
        }
        r = sd_event_add_time(m->event, &m->pool_timer, CLOCK_MONOTONIC, when, 0, on_pool_timer, m);
        if (r >= 0)
                /* After every pending bus call: callers first, the pool when there is time. */
                (void) sd_event_source_set_priority(m->pool_timer, SD_EVENT_PRIORITY_IDLE);
}

int sandbox_pool_startup(Manager *m) {
        char path[4096];
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;

        snprintf(path, sizeof(path), "%s/pool", m->state_dir);
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
                return -errno;
        d = opendir(path);
        if (!d)
                return -errno;
        /* What an earlier sandboxd made ahead and nobody claimed: never stored, so never adopted. Its
         * slice goes (the init scope stops with SIGKILL) and so does its workspace. */
        while ((de = readdir(d))) {
                char unit[UNIT_NAME_MAX], ws[sizeof(path) + 16];

                if (!sandbox_id_is_valid(de->d_name))
                        continue;
                /* %.13s: a valid id is that long, and the compiler cannot know it */
                snprintf(unit, sizeof(unit), "sandbox-%.13s.slice", de->d_name);
                (void) unit_stop_nowait(m, unit);
                snprintf(ws, sizeof(ws), "%.4000s/%.13s", path, de->d_name);
                /* Its init may still be dying: its uid (the home's owner) is not the next one out. */
                char home[sizeof(ws) + 8];
                struct stat st;
                snprintf(home, sizeof(home), "%s/home", ws);
                if (lstat(home, &st) >= 0)
                        manager_uid_seen(m, st.st_uid);
                int r = namespace_remove_workspace(ws);
                log_sandbox(LOG_INFO, de->d_name, "Removed pooled sandbox %s left by an earlier sandboxd%s%s.",
                            de->d_name, r < 0 ? ": " : "", r < 0 ? strerror(-r) : "");
        }
        sandbox_pool_schedule(m, 0);
        return 0;
}

void sandbox_pool_drain(Manager *m) {
        /* Sandboxes outlive sandboxd, but nobody could ever claim these: end them now (the next start
         * removes their workspaces). */
        for (Sandbox *p = m->pool; p; p = p->pool_next) {
                if (p->init_pidfd >= 0)
                        (void) pidfd_send_signal(p->init_pidfd, SIGKILL, NULL, 0);
                else if (p->child.pid > 0)
                        (void) kill(p->child.pid, SIGKILL);
                (void) unit_stop_nowait(m, p->slice);
        }
}
