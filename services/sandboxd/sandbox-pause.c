/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Pausing a sandbox (issue 26): its slice frozen and thawed as one, its TTL and its commands' timeouts held.
 *
 * Every process of a sandbox (its init, Execs, shells, background processes, file helpers, and the warm
 * scopes' placeholders) lives under its slice, sandbox.slice/sandbox-<id>.slice. Writing 1 to that slice's
 * cgroup.freeze in the cgroup2 hierarchy freezes them all at once, also those that join later, and the
 * kernel says when it is done in cgroup.events ("frozen 1"). systemd 252 refuses FreezeUnit on this
 * hybrid layout ("does not support freezing"), and the v1 freezer controller is not one systemd puts
 * slices in: see docs/architecture.md, "Pause and resume". */
#include "sandbox-pause.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io-util.h"
#include "log.h"
#include "sandbox-dbus.h"
#include "sandbox-exec.h"
#include "sandbox-files.h"
#include "sandbox-process.h"
#include "sandbox-shell.h"
#include "sandbox-store.h"
#include "sandbox.h"
#include "sandboxd-manager.h"
#include "time-util.h"

/* How long a PauseSandbox call waits for "frozen 1" at most: a process in an uninterruptible sleep (a
 * disk or network file system) freezes only once it leaves it; the call is answered then anyway, paused. */
#define FREEZE_WAIT_USEC (2 * USEC_PER_SEC)
#define FREEZE_POLL_USEC (500)

void sandbox_slice_cgroup_file(const Sandbox *s, const char *file, char *buf, size_t size) {
        /* The cgroup2 hierarchy: its own mount on a hybrid host, the root on a pure one. */
        const char *root = access("/sys/fs/cgroup/unified/cgroup.procs", F_OK) == 0
                                   ? "/sys/fs/cgroup/unified"
                                   : "/sys/fs/cgroup";
        snprintf(buf, size, "%s/sandbox.slice/%s/%s", root, s->slice, file);
}

static int set_frozen(Sandbox *s, bool frozen) {
        char path[512];
        _cleanup_close_ int fd = -EBADF;

        sandbox_slice_cgroup_file(s, "cgroup.freeze", path, sizeof(path));
        fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (write(fd, frozen ? "1" : "0", 1) != 1)
                return errno > 0 ? -errno : -EIO;
        return 0;
}

/* 1: the kernel reports the slice frozen, 0: not (yet), or a negative errno. */
static int is_frozen(Sandbox *s) {
        char path[512], buf[256];
        int r;

        sandbox_slice_cgroup_file(s, "cgroup.events", path, sizeof(path));
        r = read_small_file(path, buf, sizeof(buf));
        if (r < 0)
                return r;
        return strstr(buf, "frozen 1") != NULL;
}

/* A PauseSandbox call to answer, or a snapshot to go on, once the slice is frozen. */
typedef struct FreezeWaiter {
        sd_bus_message *request;
        sandbox_frozen_t cb;
        void *userdata;
} FreezeWaiter;

/* status for the snapshots' callbacks: 0 frozen, -ETIMEDOUT not within the bound, -ESRCH the sandbox goes. */
static void release_waiters(Sandbox *s, int status) {
        FreezeWaiter *w = s->freeze_waiters;
        size_t n = s->n_freeze_waiters;

        s->freeze_waiters = NULL;
        s->n_freeze_waiters = 0;
        s->freeze_check = sd_event_source_disable_unref(s->freeze_check);
        for (size_t i = 0; i < n; i++) {
                if (w[i].request) {
                        (void) sd_bus_reply_method_return(w[i].request, NULL);
                        sd_bus_message_unref(w[i].request);
                } else
                        w[i].cb(w[i].userdata, status);
        }
        free(w);
}

static void reply_pause_requests(Sandbox *s) {
        release_waiters(s, 0);
}

static int on_freeze_check(sd_event_source *es, uint64_t usec, void *userdata) {
        Sandbox *s = userdata;
        bool wanted = s->paused || s->freeze_holds > 0;
        int frozen = is_frozen(s);

        if (!wanted || frozen > 0 || usec >= s->freeze_deadline) {
                if (wanted && frozen <= 0)
                        log_sandbox(LOG_WARNING, s->id,
                                    "Sandbox %s is not frozen yet after %" PRIu64 " ms (a "
                                    "process in an uninterruptible sleep?); answering its pause anyway.",
                                    s->id, FREEZE_WAIT_USEC / USEC_PER_MSEC);
                /* a pause is answered anyway (the kernel finishes it); a snapshot must not go on */
                release_waiters(s, frozen > 0 ? 0 : -ETIMEDOUT);
                return 0;
        }
        (void) sd_event_source_set_time(es, usec + FREEZE_POLL_USEC);
        (void) sd_event_source_set_enabled(es, SD_EVENT_ONESHOT);
        return 0;
}

/* request is answered (or cb called) once the slice is frozen. */
static int wait_frozen_full(Sandbox *s, sd_bus_message *request, sandbox_frozen_t cb, void *userdata) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        int r;

        if (!request && !cb)
                return 0;
        int frozen = is_frozen(s);
        /* cgroup.events unreadable: a pause is answered now, a snapshot waits for the bound and fails */
        if (!s->freeze_check && (frozen > 0 || (request && frozen < 0))) {
                if (request)
                        return sd_bus_reply_method_return(request, NULL);
                cb(userdata, 0);
                return 0;
        }
        FreezeWaiter *n = realloc(s->freeze_waiters, (s->n_freeze_waiters + 1) * sizeof(*n));
        if (!n)
                return -ENOMEM;
        s->freeze_waiters = n;
        s->freeze_waiters[s->n_freeze_waiters++] = (FreezeWaiter){
                .request = request ? sd_bus_message_ref(request) : NULL,
                .cb = cb,
                .userdata = userdata,
        };
        if (s->freeze_check)
                return 0;
        s->freeze_deadline = now + FREEZE_WAIT_USEC;
        /* Polled: freezing takes the kernel well under a millisecond unless a process sleeps
         * uninterruptibly, and a poll of cgroup.events costs less than an inotify watch per pause. */
        r = sd_event_add_time(s->manager->event, &s->freeze_check, CLOCK_MONOTONIC, now + FREEZE_POLL_USEC,
                              0, on_freeze_check, s);
        if (r < 0)
                reply_pause_requests(s);
        return 0;
}

static int wait_frozen(Sandbox *s, sd_bus_message *request) {
        return wait_frozen_full(s, request, NULL, NULL);
}

int sandbox_freeze_hold(Sandbox *s, sandbox_frozen_t cb, void *userdata) {
        int r;

        if (!s->paused && s->freeze_holds == 0) {
                r = set_frozen(s, true);
                if (r < 0)
                        return r;
        }
        s->freeze_holds++;
        r = wait_frozen_full(s, NULL, cb, userdata);
        if (r < 0)
                sandbox_freeze_release(s);
        return r;
}

void sandbox_freeze_release(Sandbox *s) {
        if (s->freeze_holds == 0)
                return;
        if (--s->freeze_holds == 0 && !s->paused)
                (void) set_frozen(s, false);
}

static void pause_audit(Sandbox *s, const Caller *c, const char *operation, const char *reason, bool already,
                        uint64_t paused_usec, uint64_t started_at, uint64_t mono) {
        json_object *extra = json_object_new_object();

        if (extra) {
                json_object_object_add(extra, "reason", json_object_new_string(reason));
                if (already)
                        json_object_object_add(extra, "already", json_object_new_boolean(true));
                if (streq(operation, "sandbox.pause"))
                        json_object_object_add(extra, "ttl_left_usec", json_object_new_uint64(s->ttl_left));
                else if (!already)
                        json_object_object_add(extra, "paused_usec", json_object_new_uint64(paused_usec));
        }
        sandbox_audit_extra(s, c, operation, "finished", extra, started_at, mono);
}

static void emit_pause_changed(Sandbox *s) {
        sandbox_emit_changed(s, "State");
        sandbox_emit_changed(s, "Paused");
        sandbox_emit_changed(s, "PausedAt");
}

int sandbox_pause(Sandbox *s, const Caller *c, const char *reason, sd_bus_message *request) {
        uint64_t now = now_usec(CLOCK_REALTIME), mono = now_usec(CLOCK_MONOTONIC), ttl_left = 0;
        int r;

        if (s->paused) {
                pause_audit(s, c, "sandbox.pause", reason, true, 0, now, mono);
                return wait_frozen(s, request);
        }
        if (s->expires_at > 0)
                ttl_left = s->expires_at > now ? s->expires_at - now : 1;
        r = set_frozen(s, true);
        if (r < 0)
                return r;
        /* On the record before it counts: a sandboxd killed between the two thaws it at the next start,
         * as the store has it running (sandbox_adopt()). */
        r = sandbox_store_set_paused(s->manager->store, s->id, now, ttl_left, s->expires_at);
        if (r < 0) {
                (void) set_frozen(s, false);
                return r;
        }
        s->paused = true;
        s->paused_at = now;
        s->paused_mono = mono;
        s->ttl_left = ttl_left;
        (void) sandbox_arm_ttl(s); /* off while paused */
        s->idle_timer = sd_event_source_disable_unref(s->idle_timer);
        exec_hold_deadlines(s, true, 0);
        process_hold_deadlines(s, true, 0);
        log_sandbox(LOG_INFO, s->id, "Paused sandbox %s (%s, by %s).", s->id, reason, c->account_id);
        emit_pause_changed(s);
        pause_audit(s, c, "sandbox.pause", reason, false, 0, now, mono);
        return wait_frozen(s, request);
}

int sandbox_resume(Sandbox *s, const Caller *c, const char *reason) {
        uint64_t now = now_usec(CLOCK_REALTIME), mono = now_usec(CLOCK_MONOTONIC);
        int r;

        if (!s->paused) {
                pause_audit(s, c, "sandbox.resume", reason, true, 0, now, mono);
                return 0;
        }
        uint64_t expires = s->ttl_left > 0 ? now + s->ttl_left : 0;
        r = sandbox_store_set_paused(s->manager->store, s->id, 0, 0, expires);
        if (r < 0)
                return r;
        r = s->freeze_holds > 0 ? 0 : set_frozen(s, false); /* else the snapshot's end thaws it */
        if (r < 0) {
                (void) sandbox_store_set_paused(s->manager->store, s->id, s->paused_at, s->ttl_left,
                                                s->expires_at);
                return r;
        }
        uint64_t paused_usec = mono > s->paused_mono ? mono - s->paused_mono : 0;
        s->paused = false;
        s->paused_at = 0;
        s->ttl_left = 0;
        s->expires_at = expires;
        reply_pause_requests(s);
        (void) sandbox_arm_ttl(s);
        exec_hold_deadlines(s, false, paused_usec);
        process_hold_deadlines(s, false, paused_usec);
        sandbox_touch(s);
        sandbox_idle_arm(s);
        log_sandbox(LOG_INFO, s->id, "Resumed sandbox %s (%s, by %s) after %" PRIu64 " ms.", s->id, reason,
                    c->account_id, paused_usec / USEC_PER_MSEC);
        emit_pause_changed(s);
        sandbox_emit_changed(s, "ExpiresAt");
        pause_audit(s, c, "sandbox.resume", reason, false, paused_usec, now, mono);
        return 0;
}

int sandbox_pause_adopt(Sandbox *s, uint64_t paused_at, uint64_t ttl_left) {
        if (paused_at == 0) {
                /* The store says it runs: a sandboxd killed after the freeze but before the store had it
                 * (sandbox_pause()) left it frozen. The store is what counts. */
                if (is_frozen(s) > 0) {
                        log_sandbox(LOG_NOTICE, s->id,
                                    "Sandbox %s was left frozen by a pause that did not "
                                    "finish; thawing it.",
                                    s->id);
                        return set_frozen(s, false);
                }
                return 0;
        }
        s->paused = true;
        s->paused_at = paused_at;
        s->paused_mono = now_usec(CLOCK_MONOTONIC); /* its commands did not survive the restart anyway */
        s->ttl_left = ttl_left;
        (void) sandbox_arm_ttl(s);
        return set_frozen(s, true);
}

/* --- IdlePauseSec= -------------------------------------------------------------------------------- */

static bool sandbox_busy(Sandbox *s) {
        return s->freeze_holds > 0 || s->n_execs > 0 || s->n_exec_queued > 0 ||
               process_count_running(s) > 0 || shell_count_open(s->manager, s->id) > 0 ||
               sandbox_files_busy(s->id);
}

static int on_idle(sd_event_source *es, uint64_t usec, void *userdata) {
        Sandbox *s = userdata;
        const SandboxType *t = sandboxd_config_find_type(&s->manager->config, s->type);
        Caller system;
        int r;

        if (!t || t->idle_pause_usec == 0 || s->paused || s->state != SANDBOX_RUNNING) {
                s->idle_timer = sd_event_source_disable_unref(s->idle_timer);
                return 0;
        }
        if (sandbox_busy(s))
                /* Work in it: idle counts from when it ends (or from now, for a shell left open). */
                s->last_active_mono = usec;
        if (usec < s->last_active_mono + t->idle_pause_usec) {
                (void) sd_event_source_set_time(es, s->last_active_mono + t->idle_pause_usec);
                (void) sd_event_source_set_enabled(es, SD_EVENT_ONESHOT);
                return 0;
        }
        caller_system(&system);
        r = sandbox_pause(s, &system, "idle", NULL);
        if (r < 0)
                log_sandbox(LOG_WARNING, s->id, "Could not pause idle sandbox %s: %s", s->id, strerror(-r));
        return 0;
}

void sandbox_touch(Sandbox *s) {
        s->last_active_mono = now_usec(CLOCK_MONOTONIC);
}

void sandbox_idle_arm(Sandbox *s) {
        const SandboxType *t = sandboxd_config_find_type(&s->manager->config, s->type);

        if (s->pooled || s->paused || !t || t->idle_pause_usec == 0)
                return;
        if (s->last_active_mono == 0)
                sandbox_touch(s);
        uint64_t when = s->last_active_mono + t->idle_pause_usec;
        if (s->idle_timer) {
                (void) sd_event_source_set_time(s->idle_timer, when);
                (void) sd_event_source_set_enabled(s->idle_timer, SD_EVENT_ONESHOT);
                return;
        }
        /* The timer only looks: it moves itself on while the sandbox is in use (on_idle()). */
        (void) sd_event_add_time(s->manager->event, &s->idle_timer, CLOCK_MONOTONIC, when,
                                 USEC_PER_MSEC * 10, on_idle, s);
}

void sandbox_pause_free(Sandbox *s) {
        /* Deleted while a pause waited for the kernel: the pause happened, then the deletion; a snapshot
         * waiting learns the sandbox is gone. */
        release_waiters(s, -ESRCH);
        s->idle_timer = sd_event_source_disable_unref(s->idle_timer);
}
