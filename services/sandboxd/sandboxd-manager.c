/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd's state: the bus, the event loop, the sandboxes, the uid pool and the systemd jobs we wait for. */
#include "sandboxd-manager.h"
#include "image-dbus.h"

#include <assert.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "audit-spool.h"
#include "confine.h"
#include "daemon-util.h"
#include "disk-image.h"
#include "log.h"
#include "namespace.h"
#include "offload.h"
#include "sandbox-id.h"
#include "time-util.h"
#include "macro.h"
#include "sandbox-store.h"
#include "sandbox-snapshot.h"
#include "sandbox.h"
#include "sandbox-egress-dns.h"
#include "sandbox-shell.h"
#include "sandboxd-dbus.h"
#include "unit.h"
#include "user-util.h"
#include "sender-cache.h"

static size_t uid_pool_size(const Manager *m) {
        return (size_t) (m->config.uid_max - m->config.uid_min) + 1;
}

static bool uid_bit(const Manager *m, size_t i) {
        return m->uid_used[i / 8] & (1u << (i % 8));
}

int manager_allocate_uid(Manager *m, uid_t *ret) {
        size_t n = uid_pool_size(m);

        /* Round robin, so a freed uid is reused as late as possible. */
        for (size_t k = 0; k < n; k++) {
                size_t i = ((size_t) (m->uid_next - m->config.uid_min) + k) % n;
                if (uid_bit(m, i))
                        continue;
                uid_t uid = m->config.uid_min + (uid_t) i;
                /* never a uid that some account of the host claims after all */
                if (getpwuid(uid) || getgrgid((gid_t) uid))
                        continue;
                m->uid_used[i / 8] |= 1u << (i % 8);
                m->uid_next = m->config.uid_min + (uid_t) ((i + 1) % n);
                *ret = uid;
                return 0;
        }
        return -EUSERS;
}

void manager_reserve_uid(Manager *m, uid_t uid) {
        if (uid < m->config.uid_min || uid > m->config.uid_max)
                return;
        size_t i = uid - m->config.uid_min;
        m->uid_used[i / 8] |= 1u << (i % 8);
        manager_uid_seen(m, uid);
}

void manager_uid_seen(Manager *m, uid_t uid) {
        /* The round robin goes on after the highest uid the last run used, so that a uid freed at
         * start-up (a sandbox that could not be adopted) is not the first one handed out again. */
        if (uid < m->config.uid_min || uid > m->config.uid_max || uid < m->uid_next)
                return;
        m->uid_next = uid == m->config.uid_max ? m->config.uid_min : uid + 1;
}

void manager_release_uid(Manager *m, uid_t uid) {
        if (uid < m->config.uid_min || uid > m->config.uid_max)
                return;
        size_t i = uid - m->config.uid_min;
        m->uid_used[i / 8] &= ~(1u << (i % 8));
}

void manager_clear_early_jobs(Manager *m) {
        void *v;
        size_t state = 0;

        while (hashmap_iterate(m->early_jobs, &state, &v, NULL)) {
                (void) hashmap_remove(m->early_jobs, (const char *) v);
                free(v);
        }
}

void manager_audit(Manager *m, const Caller *c, const AuditRow *row) {
        if (!m->config.audit || !m->audit)
                return;
        int r = audit_record(m->audit, c, row);
        if (r < 0)
                /* The journal is the record of last resort. */
                sd_journal_send("PRIORITY=%i", LOG_CRIT, "SANDBOX_ID=%s", strempty(row->session_id),
                                "AUDIT_OPERATION=%s", row->operation, "AUDIT_EVENT=%s", row->event,
                                "AUDIT_ACCOUNT=%s", c->account_id, "AUDIT_DETAIL=%s", row->detail ?: "{}",
                                "AUDIT_EXIT_CODE=%i", row->exit_code, "MESSAGE=Audit row of %s could not be spooled: %s",
                                row->operation, strerror(-r), NULL);
}

void manager_audit_failed(Manager *m, const Caller *c, const char *session_id, const char *operation,
                          const sd_bus_error *error, const char *detail, uint64_t started_at, uint64_t mono_start) {
        _cleanup_free_ char *own = NULL;

        assert(error);
        if (!detail)
                detail = own = audit_detail_error(error->name, error->message);
        AuditRow row = {
                .session_id = session_id,
                .operation = operation,
                .event = streq_ptr(error->name, SD_BUS_ERROR_ACCESS_DENIED) ||
                                 streq_ptr(error->name, SANDBOXD_ERROR_PERMISSION_DENIED)
                         ? "denied"
                         : "failed",
                .detail = detail,
                .exit_code = -1,
                .started_at = started_at,
                .duration_usec = now_usec(CLOCK_MONOTONIC) - mono_start,
        };
        manager_audit(m, c, &row);
}

void manager_audit_begin(Manager *m, const Caller *c, const AuditRow *row, char key[static AUDIT_KEY_SIZE]) {
        key[0] = 0;
        if (!m->config.audit || !m->audit)
                return;
        int r = audit_begin(m->audit, c, row, key);
        if (r < 0)
                /* Its row is still written when it ends; only a crash meanwhile would lose it. */
                log_msg(LOG_WARNING, "Could not note a running %s in the audit spool: %s", row->operation,
                        strerror(-r));
}

void manager_audit_finish(Manager *m, const Caller *c, const AuditRow *row, char key[static AUDIT_KEY_SIZE]) {
        if (isempty(key) || !m->config.audit || !m->audit) {
                manager_audit(m, c, row);
                return;
        }
        if (audit_finish(m->audit, c, row, key) < 0)
                /* Not spooled with its note: on its own then (the note becomes an "interrupted" row at the
                 * next start, beside this one). */
                manager_audit(m, c, row);
        key[0] = 0;
}

void manager_audit_cancel(Manager *m, char key[static AUDIT_KEY_SIZE]) {
        if (!isempty(key) && m->audit)
                audit_cancel(m->audit, key);
        key[0] = 0;
}

#define SENDER_CACHE_MAX 4096
#define ADMIN_CACHE_USEC (5 * USEC_PER_SEC)

int manager_sender_uid(Manager *m, sd_bus_message *msg, uid_t *ret) {
        return sender_cache_uid(m->senders, msg, ret);
}

bool manager_uid_is_admin(Manager *m, uid_t uid) {
        return uid == 0 || group_cache_test(&m->admins, uid);
}

/* --- all sandboxes together: sandbox.slice's limits and admission ([Sandboxes]) --------------------- */

/* Our own /proc shows processes only (ProcSubset=pid hides meminfo and sys/): the host's figures come
 * from a proc instance of our own, mounted nowhere, of which the mount fd is all there is. */
static int open_full_proc(void) {
        _cleanup_close_ int fs = fsopen("proc", FSOPEN_CLOEXEC);
        if (fs < 0)
                return -errno;
        if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        int mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                                       MOUNT_ATTR_NOEXEC);
        return mnt < 0 ? -errno : mnt;
}

static void resolve_totals(Manager *m) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        _cleanup_close_ int proc_fd = open_full_proc();
        char proc[64] = "/proc";
        int r;

        if (proc_fd >= 0)
                snprintf(proc, sizeof(proc), "/proc/self/fd/%d", proc_fd);
        else
                log_msg(LOG_DEBUG, "Could not mount a proc of our own (%s); reading /proc.",
                        strerror(-proc_fd));
        r = host_info_read(proc, cpus > 0 ? (unsigned) cpus : 1, &m->host);
        if (r < 0) {
                /* Without the host's figures "auto" cannot be derived; a guess would be worse than
                 * what the configuration can say explicitly. */
                log_msg(LOG_WARNING, "Could not read the host's memory and task limits from /proc (%s): "
                        "[Sandboxes] settings left at auto are not enforced.", strerror(-r));
                m->host = (HostInfo) { .mem_total = UINT64_MAX, .threads_max = UINT64_MAX,
                                       .pid_max = UINT64_MAX, .n_cpus = 1 };
        }
        sandbox_totals_resolve(&m->config.totals, &m->host, &m->totals);
        if (r < 0) {
                if (m->config.totals.memory_max == SANDBOX_TOTAL_AUTO)
                        m->totals.memory_max = SANDBOX_TOTAL_INFINITY;
                if (m->config.totals.tasks_max == SANDBOX_TOTAL_AUTO)
                        m->totals.tasks_max = SANDBOX_TOTAL_INFINITY;
        }
}

static char *format_total(uint64_t v, const char *unit, char buf[static 32]) {
        if (v == SANDBOX_TOTAL_INFINITY)
                snprintf(buf, 32, "infinity");
        else
                snprintf(buf, 32, "%" PRIu64 "%s", v, unit);
        return buf;
}

/* Sets sandbox.slice's MemoryMax=, TasksMax= and CPUQuota= at runtime (systemd keeps them in
 * /run/systemd/system.control/, above every drop-in in /etc, and forgets them at a reboot, when the
 * next sandboxd sets them again). Infinity is set too, so that an earlier run's limit goes. */
static void apply_slice_limits(Manager *m) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        const SandboxTotals *t = &m->totals;
        char a[32], b[32], c[32];
        uint64_t cpu = t->cpu_quota_percent == SANDBOX_TOTAL_INFINITY
                               ? UINT64_MAX
                               : t->cpu_quota_percent * USEC_PER_SEC / 100;
        int r;

        r = sd_bus_call_method(m->bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "SetUnitProperties", &error, NULL,
                               "sba(sv)", "sandbox.slice", 1, 3, "MemoryMax", "t", t->memory_max, "TasksMax",
                               "t", t->tasks_max, "CPUQuotaPerSecUSec", "t", cpu);
        if (r < 0)
                log_msg(LOG_ERR, "Could not set the limits of sandbox.slice: %s; sandboxes together are "
                        "bounded by CreateSandbox's admission check only.", error.message ?: strerror(-r));
        log_msg(LOG_INFO, "All sandboxes together: MemoryMax=%s TasksMax=%s CPUQuota=%s, Overcommit=%u%% "
                "(host: %" PRIu64 " MiB, threads-max %" PRIu64 ", pid_max %" PRIu64 ", %u CPUs).",
                format_total(t->memory_max == SANDBOX_TOTAL_INFINITY ? t->memory_max : t->memory_max >> 20, "M",
                             a),
                format_total(t->tasks_max, "", b), format_total(t->cpu_quota_percent, "%", c),
                t->overcommit_percent, m->host.mem_total >> 20, m->host.threads_max, m->host.pid_max,
                m->host.n_cpus);
}

static void promise_add(Manager *m, SandboxPromised *p, const char *type) {
        /* A sandbox whose type is no longer configured keeps the limits it was made with, which we do
         * not know: it counts as one of the default type. */
        const SandboxType *t = sandboxd_config_find_type(&m->config, type)
                                       ?: sandboxd_config_find_type(&m->config, NULL);
        if (!t)
                return;
        p->memory = p->memory > UINT64_MAX - t->memory_max ? UINT64_MAX : p->memory + t->memory_max;
        p->tasks = p->tasks > UINT64_MAX - t->tasks_max ? UINT64_MAX : p->tasks + t->tasks_max;
        p->n++;
}

int manager_admit(Manager *m, const SandboxType *t, char *buf, size_t size) {
        SandboxPromised p = {};
        size_t state = 0;
        Sandbox *s;

        while (hashmap_iterate(m->sandboxes, &state, (void **) &s, NULL))
                promise_add(m, &p, s->type);
        for (s = m->pool; s; s = s->pool_next)
                promise_add(m, &p, s->type);
        return sandbox_totals_admit(&m->totals, &p, t->memory_max, t->tasks_max, buf, size);
}

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        log_msg(LOG_NOTICE, "SIGHUP received: egress resolvers' servers read again from /etc/resolv.conf; restart "
                "sandboxd to apply a new configuration.");
        manager_egress_dns_reload(userdata);
        return 0;
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;
        (void) sd_notify(false, "STOPPING=1\nSTATUS=Shutting down; sandboxes keep running.");
        m->exiting = true;
        sandbox_pool_drain(m);
        unit_flush_stops(m);
        return sd_event_exit(m->event, 0);
}

int manager_new(const DaemonOptions *o, Manager **ret, char **ret_error) {
        Manager *m;
        int r;

        m = calloc(1, sizeof(Manager));
        if (!m)
                return -ENOMEM;
        m->host_pidns_fd = -EBADF;
        m->egress.proc_fd = -EBADF;
        sandboxd_config_defaults(&m->config);
        r = sandboxd_config_load(&m->config, o->config, o->config_dir, ret_error);
        if (r < 0)
                goto fail;

        r = daemon_state_dir(SANDBOXD_STATE_DIR, &m->state_dir);
        if (r < 0)
                goto fail;
        m->init_path = strdup(getenv("SANDBOXD_INIT_PATH") ?: LIBEXECDIR "/sandboxd/sandbox-init");
        m->file_helper_path = strdup(getenv("SANDBOXD_FILE_HELPER_PATH") ?:
                                             LIBEXECDIR "/sandboxd/sandboxd-file-helper");
        m->sandboxes = hashmap_new();
        m->sandbox_names = hashmap_new();
        m->jobs = hashmap_new();
        m->early_jobs = hashmap_new();
        r = sender_cache_new(SENDER_CACHE_MAX, &m->senders);
        if (r < 0)
                goto fail;
        m->uid_used = calloc(uid_pool_size(m) / 8 + 1, 1);
        if (!m->init_path || !m->file_helper_path || !m->sandboxes || !m->sandbox_names ||
            !m->jobs || !m->early_jobs ||
            !m->uid_used) {
                r = -ENOMEM;
                goto fail;
        }
        m->uid_next = m->config.uid_min;
        resolve_totals(m);

        group_cache_init(&m->admins, "sandbox-admin", ADMIN_CACHE_USEC, NULL);
        struct passwd *pw = getpwnam("sandbox-gateway");
        m->gateway_uid = pw ? pw->pw_uid : (uid_t) -1;

        m->host_pidns_fd = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
        if (m->host_pidns_fd < 0) {
                r = -errno;
                goto fail;
        }
        r = oom_detect_layout(&m->memory_layout, &m->memory_prefix);
        if (r < 0)
                goto fail;

        r = daemon_event_new(on_signal, m, &m->event, &m->sigterm, &m->sigint);
        if (r < 0)
                goto fail;
        /* Two workers at most: a clone3() waits mostly on the kernel's cgroup locks and for a CPU,
         * which more threads than CPUs would not make come sooner. */
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        r = offload_new(m->event, cpus > 1 ? 2 : 1, &m->offload);
        if (r < 0)
                goto fail;
        r = sd_event_add_signal(m->event, &m->sighup, SIGHUP, on_sighup, m);
        if (r < 0)
                goto fail;
        *ret = m;
        return 0;
fail:
        manager_free(m);
        return r;
}

Manager *manager_free(Manager *m) {
        Sandbox *s;
        size_t state = 0;

        if (!m)
                return NULL;
        /* Execs whose child a worker is cloning get it first (or its error), while all is still here. */
        m->offload = offload_free(m->offload);
        /* Shells do not: their relay is us. */
        shell_free_all(m);
        /* Sandboxes outlive us: only our bookkeeping goes. */
        while (m->sandboxes && hashmap_iterate(m->sandboxes, &state, (void **) &s, NULL))
                sandbox_free(s);
        while (m->pool)
                sandbox_free(m->pool);
        m->pool_timer = sd_event_source_disable_unref(m->pool_timer);
        image_jobs_free(m);
        snapshot_free_all(m);
        unit_flush_stops(m);
        if (m->jobs)
                manager_free_jobs(m);
        if (m->early_jobs)
                manager_clear_early_jobs(m);
        hashmap_free(m->sandboxes);
        hashmap_free(m->sandbox_names);
        hashmap_free(m->jobs);
        hashmap_free(m->early_jobs);
        sender_cache_free(m->senders);
        audit_spool_free(m->audit);
        sandbox_store_free(m->store);
        sd_event_source_disable_unref(m->sigterm);
        sd_event_source_disable_unref(m->sigint);
        sd_event_source_disable_unref(m->sighup);
        sd_bus_flush_close_unref(m->bus);
        sd_event_unref(m->event);
        safe_close(m->host_pidns_fd);
        free(m->uid_used);
        free(m->memory_prefix);
        for (size_t j = 0; j < m->n_disk_templates; j++)
                free(m->disk_templates[j].path);
        manager_egress_dns_done(m);
        manager_egress_done(m);
        sandboxd_config_done(&m->config);
        free(m->state_dir);
        free(m->init_path);
        free(m->file_helper_path);
        free(m);
        return NULL;
}

/* Workspaces without a row are left from a creation that never finished (sandboxd died in between):
 * their units are stopped and the directory goes. */
static void remove_strays(Manager *m) {
        char path[4096];
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;

        snprintf(path, sizeof(path), "%s/sandboxes", m->state_dir);
        d = opendir(path);
        if (!d)
                return;
        while ((de = readdir(d))) {
                if (!sandbox_id_is_valid(de->d_name) || hashmap_get(m->sandboxes, de->d_name))
                        continue;
                char unit[UNIT_NAME_MAX], ws[sizeof(path) + 16];
                /* %.13s: a valid id is that long, and the compiler cannot know it */
                snprintf(unit, sizeof(unit), "sandbox-%.13s.slice", de->d_name);
                (void) unit_stop_nowait(m, unit);
                snprintf(ws, sizeof(ws), "%.4000s/%.13s", path, de->d_name);
                int r = namespace_remove_workspace(ws);
                log_sandbox(LOG_NOTICE, de->d_name, "Removed the leftovers of sandbox %s, whose creation never finished%s%s.",
                            de->d_name, r < 0 ? ": " : "", r < 0 ? strerror(-r) : "");
        }
}

static bool sandbox_known(Manager *m, const char *id) {
        if (hashmap_get(m->sandboxes, id))
                return true;
        for (Sandbox *p = m->pool; p; p = p->pool_next)
                if (streq(p->id, id))
                        return true;
        return false;
}

static int adopt_one(const SandboxRecord *r, void *userdata) {
        Manager *m = userdata;
        /* A network this sandboxd does not know (a newer one's): its own namespace, like none. */
        SandboxNetwork network = r->network < 0 ? SANDBOX_NETWORK_NONE : r->network;
        int q = sandbox_adopt(m, r->id, r->name, r->type, r->owner, r->uid, network, r->created_at,
                              r->expires_at, r->init_pid, r->init_start, r->exec_next, r->egress_address,
                              r->egress_policy, r->paused_at, r->ttl_left);
        if (q < 0)
                log_sandbox(LOG_ERR, r->id, "Could not adopt sandbox %s: %s", r->id, strerror(-q));
        return 0;
}

/* The mkfs.ext4 that makes the disk templates: $SANDBOXD_MKFS_EXT4 (tests), else the system's. */
static const char *mkfs_ext4_path(void) {
        const char *p = getenv("SANDBOXD_MKFS_EXT4");

        if (p)
                return p;
        return access("/usr/sbin/mkfs.ext4", X_OK) >= 0 ? "/usr/sbin/mkfs.ext4" : "/sbin/mkfs.ext4";
}

/* One template per distinct DiskMax= of the types. Made afresh at every start (a few milliseconds
 * each), so a changed size or a newer mkfs takes effect; what an earlier run left goes first. A
 * template that cannot be made is logged once here, and sandboxes of its types fail to be created
 * (with the reason) rather than run without their quota. */
static void make_disk_templates(Manager *m) {
        char dir[4096];

        snprintf(dir, sizeof(dir), "%s/disk-templates", m->state_dir);
        (void) namespace_remove_workspace(dir);
        for (size_t i = 0; i < m->config.n_types; i++) {
                uint64_t size = m->config.types[i].disk_max;
                bool known = size == 0;
                for (size_t j = 0; j < m->n_disk_templates && !known; j++)
                        known = m->disk_templates[j].size == size;
                if (known)
                        continue;
                size_t j = m->n_disk_templates++;
                m->disk_templates[j].size = size;
                m->disk_templates[j].error = disk_template_make(dir, size, mkfs_ext4_path(),
                                                                &m->disk_templates[j].path);
                if (m->disk_templates[j].error < 0)
                        log_msg(LOG_ERR, "Could not make a %" PRIu64 "-byte disk image with %s: %s; sandboxes of "
                                "type %s (DiskMax=) cannot be created.", size, mkfs_ext4_path(),
                                m->disk_templates[j].error == -ENOEXEC ? "it failed" :
                                strerror(-m->disk_templates[j].error), m->config.types[i].name);
        }
}

const char *manager_disk_template(Manager *m, uint64_t size, int *ret_error) {
        for (size_t j = 0; j < m->n_disk_templates; j++)
                if (m->disk_templates[j].size == size) {
                        if (!m->disk_templates[j].path)
                                *ret_error = m->disk_templates[j].error;
                        return m->disk_templates[j].path;
                }
        *ret_error = -ENOENT;
        return NULL;
}

int manager_startup(Manager *m) {
        char path[4096];
        int r;

        /* Run as the sandboxes' users, so a helper that cannot be run fails every file call: say why
         * once, here, rather than only "Input/output error" to each caller. */
        if (access(m->file_helper_path, X_OK) < 0)
                log_msg(LOG_ERR, "%s cannot be run (%m): WriteFile, ReadFile and the file tools will fail.",
                        m->file_helper_path);

        /* Every sandboxed process gets exactly the documented RLIMIT_NOFILE, unless the host does not let
         * us raise a hard limit: then say so once, rather than each sandbox finding out. */
        uint64_t nofile = confine_nofile_effective(SANDBOX_NOFILE_HARD);
        if (nofile < SANDBOX_NOFILE_HARD)
                log_msg(LOG_WARNING, "Sandboxed processes get a hard RLIMIT_NOFILE of %" PRIu64 ", not %d: "
                        "sandboxd's own is that low and it may not raise it (no CAP_SYS_RESOURCE in its "
                        "capability bounding set; see LimitNOFILE= of sandboxd.service).",
                        nofile, SANDBOX_NOFILE_HARD);

        snprintf(path, sizeof(path), "%s/sandboxes", m->state_dir);
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
                return -errno;
        make_disk_templates(m);
        snprintf(path, sizeof(path), "%s/sandboxd.db", m->state_dir);
        r = sandbox_store_open(path, &m->store);
        if (r < 0) {
                log_msg(LOG_ERR, "Could not open %s: %s", path, strerror(-r));
                return r;
        }

        snprintf(path, sizeof(path), "%s/audit-spool.db", m->state_dir);
        r = audit_spool_open(m, path, &m->audit);
        if (r < 0) {
                log_msg(LOG_ERR, "Could not open the audit spool %s: %s", path, strerror(-r));
                return r;
        }

        r = manager_bus_setup(m);
        if (r < 0)
                return r;
        r = image_bus_setup(m);
        if (r < 0)
                return r;
        r = unit_watch_jobs(m);
        if (r < 0)
                return r;
        apply_slice_limits(m);

        /* Egress before adoption (the addresses in use come from the store), its table after. */
        manager_egress_init(m);
        manager_egress_dns_init(m);
        /* After the match: stopping sandboxes we cannot adopt needs JobRemoved. */
        r = sandbox_store_load(m->store, adopt_one, m);
        if (r < 0)
                return r;
        /* Issue 26: the snapshots, and what a kill -9 left of one being taken. */
        r = snapshot_startup(m);
        if (r < 0)
                return log_msg_errno(LOG_ERR, r, "Could not load the snapshots: %m");
        remove_strays(m);
        manager_egress_startup(m);
        r = sandbox_pool_startup(m);
        if (r < 0)
                return r;
        /* What the workspaces do not tell: units whose background stop was still queued when an earlier
         * sandboxd died (the sandbox's row and workspace were gone already), and shells without their
         * relay. Not fatal: without the list, the units stay as before. */
        (void) unit_reconcile(m, sandbox_known);

        /* Last, and synchronously: once the name is ours, callers find everything in place. */
        r = sd_bus_request_name(m->bus, SANDBOXD_BUS_NAME, 0);
        if (r < 0) {
                log_msg(LOG_ERR, "Could not acquire %s: %s", SANDBOXD_BUS_NAME, strerror(-r));
                return r;
        }
        return 0;
}

int manager_run(Manager *m) {
        return daemon_run(m->event, "Managing %zu sandboxes.", hashmap_size(m->sandboxes));
}
