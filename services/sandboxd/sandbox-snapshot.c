/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Snapshots of sandboxes' disks (issue 26): taken frozen, kept as image files, the disk of new sandboxes.
 *
 * A sandbox's home, /tmp and /var/tmp are one ext4 image (disk-image.c). A snapshot is a copy of that file,
 * taken while every process of the sandbox is frozen (sandbox-pause.c) after syncfs() of its file system,
 * so the copy is what a crash at that instant would leave on the disk: every write() that returned is in
 * it, none that had not begun; a file renamed into place is there whole or not at all. The copy is a
 * reflink (FICLONE) where the host's file system shares blocks (btrfs, XFS), else a sparse copy of the
 * image's data only (copy_file_range). It runs in a thread of its own, so sandboxd answers other calls
 * meanwhile; only the sandbox waits, frozen.
 *
 * On the host: <state>/snapshots/<id>.img, written as .tmp-<id>.img and renamed once whole and synced; the
 * store's row comes last. At start-up a temporary file, or an image without a row, is what a kill -9 cut
 * short, and goes: no half snapshot is ever listed. Processes are not part of a snapshot: a sandbox made
 * from one starts with its disk and a fresh init (no criu). */
#include "sandbox-snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk-image.h"
#include "log.h"
#include "macro.h"
#include "sandbox-id.h"
#include "sandbox-pause.h"
#include "sandbox-store.h"
#include "sandbox.h"
#include "sandboxd-bus.h"
#include "sandboxd-manager.h"
#include "time-util.h"

#define SNAPSHOT_TMP_PREFIX ".tmp-"

bool snapshot_id_is_valid(const char *s) {
        if (!s || strncmp(s, SNAPSHOT_ID_PREFIX, 3) != 0 || strlen(s) != SANDBOX_ID_LEN)
                return false;
        for (const char *p = s + 3; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '2' && *p <= '7')))
                        return false;
        return true;
}

static void snapshots_dir(Manager *m, char *buf, size_t size) {
        snprintf(buf, size, "%s/snapshots", m->state_dir);
}

void snapshot_image_path(Manager *m, const Snapshot *snap, char *buf, size_t size) {
        snprintf(buf, size, "%s/snapshots/%s.img", m->state_dir, snap->id);
}

static Snapshot *snapshot_free(Snapshot *snap) {
        if (!snap)
                return NULL;
        free(snap->name);
        free(snap->source);
        free(snap->type);
        free(snap->owner);
        free(snap->image);
        free(snap);
        return NULL;
}

static void snapshot_unlink_from_list(Manager *m, Snapshot *snap) {
        for (Snapshot **p = &m->snapshots; *p; p = &(*p)->next)
                if (*p == snap) {
                        *p = snap->next;
                        return;
                }
}

static Snapshot *snapshot_new(Manager *m, const char *id, const char *name, const char *source,
                              const char *type, const char *owner, const char *image) {
        Snapshot *snap = calloc(1, sizeof(Snapshot));

        if (!snap)
                return NULL;
        snprintf(snap->id, sizeof(snap->id), "%s", id);
        snap->name = strdup(name);
        snap->source = strdup(source);
        snap->type = strdup(type);
        snap->owner = strdup(owner);
        snap->image = isempty(image) ? NULL : strdup(image);
        if (!snap->name || !snap->source || !snap->type || !snap->owner || (!isempty(image) && !snap->image))
                return snapshot_free(snap);
        /* oldest first */
        Snapshot **tail = &m->snapshots;
        while (*tail)
                tail = &(*tail)->next;
        *tail = snap;
        return snap;
}

void snapshot_free_all(Manager *m) {
        while (m->snapshots) {
                Snapshot *snap = m->snapshots;
                m->snapshots = snap->next;
                snapshot_free(snap);
        }
}

const char *snapshot_image_name(const Snapshot *snap) {
        return snap->image ?: "host";
}

Snapshot *snapshot_find(Manager *m, const char *id_or_name, bool include_pending) {
        for (Snapshot *snap = m->snapshots; snap; snap = snap->next)
                if ((include_pending || !snap->pending) &&
                    (streq(snap->id, id_or_name) || streq(snap->name, id_or_name)))
                        return snap;
        return NULL;
}

Snapshot *snapshot_find_by_image(Manager *m, const char *name) {
        for (Snapshot *snap = m->snapshots; snap; snap = snap->next)
                if (streq_ptr(snap->image, name))
                        return snap;
        return NULL;
}

static uint64_t snapshots_size(Manager *m) {
        uint64_t sum = 0;
        for (Snapshot *snap = m->snapshots; snap; snap = snap->next)
                sum += snap->size;
        return sum;
}

/* --- start-up -------------------------------------------------------------------------------------- */

static int load_one(const SnapshotRecord *r, void *userdata) {
        Manager *m = userdata;
        char path[4096];
        struct stat st;

        Snapshot *snap = snapshot_new(m, r->id, r->name, r->source, r->type, r->owner, r->image);
        if (!snap)
                return -ENOMEM;
        snap->source_uid = r->source_uid;
        snap->size = r->size;
        snap->disk_size = r->disk_size;
        snap->created_at = r->created_at;
        snapshot_image_path(m, snap, path, sizeof(path));
        if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
                log_msg(LOG_WARNING, "Snapshot %s (%s) has no image at %s; forgetting it.", snap->id,
                        snap->name, path);
                (void) sandbox_store_snapshot_delete(m->store, snap->id);
                snapshot_unlink_from_list(m, snap);
                snapshot_free(snap);
        }
        return 0;
}

int snapshot_startup(Manager *m) {
        _cleanup_(closedirp) DIR *d = NULL;
        char dir[4096];
        struct dirent *de;
        int r;

        snapshots_dir(m, dir, sizeof(dir));
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return -errno;
        r = sandbox_store_snapshot_load(m->store, load_one, m);
        if (r < 0)
                return r;
        d = opendir(dir);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                char id[32];
                if (de->d_name[0] == '.' && !streq(de->d_name, ".") && !streq(de->d_name, "..")) {
                        /* a snapshot cut short while it was copied */
                        if (unlinkat(dirfd(d), de->d_name, 0) >= 0)
                                log_msg(LOG_NOTICE,
                                        "Removed %s/%s, a snapshot an earlier sandboxd did not finish.", dir,
                                        de->d_name);
                        continue;
                }
                size_t n = strlen(de->d_name);
                if (n < 5 || !streq(de->d_name + n - 4, ".img") || n - 4 >= sizeof(id))
                        continue;
                memcpy(id, de->d_name, n - 4);
                id[n - 4] = 0;
                if (!snapshot_id_is_valid(id) || snapshot_find(m, id, true))
                        continue;
                /* whole on disk, but its row never written: not a snapshot anyone was told of */
                if (unlinkat(dirfd(d), de->d_name, 0) >= 0)
                        log_msg(LOG_NOTICE, "Removed %s/%s, a snapshot an earlier sandboxd did not record.",
                                dir, de->d_name);
        }
        return 0;
}

/* --- taking one ------------------------------------------------------------------------------------ */

typedef struct SnapshotJob {
        Manager *manager;
        Snapshot *snap; /* pending, in the list */
        char sandbox_id[SANDBOX_ID_LEN + 1];
        sd_bus_message *request;
        Caller caller;
        uint64_t started_at, mono, frozen_mono;
        bool held; /* the sandbox's slice is held frozen for us */
        /* for the thread: */
        char image[4096], sync_dir[256], tmp[4200], final[4200], dir[4000];
        int error;
        const char *step;
        uint64_t size;
        bool reflinked;
        pthread_t thread;
        bool thread_started;
        int efd;
        sd_event_source *source;
} SnapshotJob;

static SnapshotJob *snapshot_job_free(SnapshotJob *j) {
        if (!j)
                return NULL;
        j->source = sd_event_source_disable_unref(j->source);
        safe_close(j->efd);
        sd_bus_message_unref(j->request);
        free(j);
        return NULL;
}

/* Copies in's data to out at the same offsets; holes stay holes. copy_file_range() where the two file
 * systems allow it (on one it may share blocks), else read and write. */
static int copy_sparse(int in, int out, off_t size) {
        static _Thread_local char buf[256 * 1024];
        bool plain = false;

        for (off_t data = 0;;) {
                data = lseek(in, data, SEEK_DATA);
                if (data < 0)
                        return errno == ENXIO ? 0 : -errno;
                off_t hole = lseek(in, data, SEEK_HOLE);
                if (hole < 0)
                        return -errno;
                for (off_t off = data; off < hole;) {
                        off_t from = off, to = off;
                        ssize_t n;
                        if (!plain) {
                                n = copy_file_range(in, &from, out, &to,
                                                    (size_t) MIN(hole - off, (off_t) 1 << 30), 0);
                                if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP ||
                                              errno == ENOSYS)) {
                                        plain = true;
                                        continue;
                                }
                        } else {
                                n = pread(in, buf, (size_t) MIN(hole - off, (off_t) sizeof(buf)), off);
                                /* a short write is what a file system nearly full gives: the rest, or its
                                 * error */
                                for (ssize_t done = 0, w; n > 0 && done < n; done += w) {
                                        w = pwrite(out, buf + done, (size_t) (n - done), off + done);
                                        if (w < 0)
                                                return -errno;
                                        if (w == 0)
                                                return -ENOSPC;
                                }
                        }
                        if (n < 0)
                                return -errno;
                        if (n == 0)
                                return -EIO;
                        off += n;
                }
                data = hole;
                if (data >= size)
                        return 0;
        }
}

static void *snapshot_thread(void *userdata) {
        SnapshotJob *j = userdata;
        _cleanup_close_ int sync_fd = -EBADF, in = -EBADF, out = -EBADF, dfd = -EBADF;
        struct stat st;
        uint64_t one = 1;

        /* Everything the sandbox wrote before it froze, down to the image file. */
        j->step = "sync the sandbox's file system";
        sync_fd = open(j->sync_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sync_fd < 0 || syncfs(sync_fd) < 0)
                goto fail;
        j->step = "open the sandbox's disk image";
        in = open(j->image, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (in < 0 || fstat(in, &st) < 0)
                goto fail;
        j->step = "create the snapshot's image";
        out = open(j->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                goto fail;
        j->step = "copy the disk image";
        if (ioctl(out, FICLONE, in) >= 0)
                j->reflinked = true;
        else {
                int r = copy_sparse(in, out, st.st_size);
                if (r < 0) {
                        errno = -r;
                        goto fail_unlink;
                }
                if (ftruncate(out, st.st_size) < 0)
                        goto fail_unlink;
        }
        j->step = "sync the snapshot's image";
        if (fsync(out) < 0 || fstat(out, &st) < 0)
                goto fail_unlink;
        j->size = (uint64_t) st.st_blocks * 512;
        j->step = "put the snapshot's image in place";
        if (rename(j->tmp, j->final) < 0)
                goto fail_unlink;
        dfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0)
                (void) fsync(dfd);
        j->error = 0;
        (void) !write(j->efd, &one, sizeof(one));
        return NULL;

fail_unlink:
        j->error = errno;
        (void) unlink(j->tmp);
        (void) !write(j->efd, &one, sizeof(one));
        return NULL;
fail:
        j->error = errno;
        (void) !write(j->efd, &one, sizeof(one));
        return NULL;
}

static char *snapshot_detail(const Snapshot *snap, const SnapshotJob *j, const char *error_name,
                             const char *message) {
        json_object *o = json_object_new_object();
        char *s;

        if (!o)
                return NULL;
        json_object_object_add(o, "snapshot", json_object_new_string(snap->id));
        json_object_object_add(o, "name", json_object_new_string(snap->name));
        json_object_object_add(o, "source", json_object_new_string(snap->source));
        json_object_object_add(o, "type", json_object_new_string(snap->type));
        json_object_object_add(o, "image", json_object_new_string(snapshot_image_name(snap)));
        json_object_object_add(o, "size", json_object_new_uint64(snap->size));
        json_object_object_add(o, "disk_size", json_object_new_uint64(snap->disk_size));
        if (j) {
                json_object_object_add(o, "reflink", json_object_new_boolean(j->reflinked));
                if (j->frozen_mono)
                        json_object_object_add(
                                o, "frozen_usec",
                                json_object_new_uint64(now_usec(CLOCK_MONOTONIC) - j->frozen_mono));
        }
        if (error_name) {
                json_object_object_add(o, "error", json_object_new_string(error_name));
                json_object_object_add(o, "message", json_object_new_string(strempty(message)));
        }
        s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
        return s;
}

static void snapshot_job_audit(SnapshotJob *j, const char *event, const char *error_name,
                               const char *message) {
        _cleanup_free_ char *detail = snapshot_detail(j->snap, j, error_name, message);
        manager_audit(j->manager, &j->caller,
                      &(AuditRow){.session_id = j->sandbox_id,
                                  .operation = "snapshot.create",
                                  .event = event,
                                  .detail = detail,
                                  .exit_code = error_name ? -1 : 0,
                                  .started_at = j->started_at,
                                  .duration_usec = now_usec(CLOCK_MONOTONIC) - j->mono});
}

/* The end: thawed (unless paused meanwhile), then stored and answered, or undone and answered. */
static void snapshot_job_finish(SnapshotJob *j, int error, const char *step) {
        Manager *m = j->manager;
        Snapshot *snap = j->snap;
        Sandbox *s = hashmap_get(m->sandboxes, j->sandbox_id);
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        int r;

        if (j->held && s)
                sandbox_freeze_release(s);
        j->held = false;
        uint64_t max = m->config.snapshot_store_max, used = snapshots_size(m);
        if (error == 0 && max > 0 && used + j->size > max) {
                /* the estimate before was low (data the sandbox had not flushed yet) */
                (void) unlink(j->final);
                snap->size = j->size;
                (void) sd_bus_error_setf(&e, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                         "The snapshots take %" PRIu64 " bytes and this one took %" PRIu64
                                         "; SnapshotStoreMax= allows %" PRIu64 ". Nothing was kept.",
                                         used, j->size, max);
                error = E2BIG;
        }
        if (error == 0) {
                snap->size = j->size;
                snap->created_at = now_usec(CLOCK_REALTIME);
                SnapshotRecord rec = {
                        .id = snap->id,
                        .name = snap->name,
                        .source = snap->source,
                        .type = snap->type,
                        .owner = snap->owner,
                        .source_uid = snap->source_uid,
                        .size = snap->size,
                        .disk_size = snap->disk_size,
                        .created_at = snap->created_at,
                        .image = snap->image,
                };
                r = sandbox_store_snapshot_insert(m->store, &rec);
                if (r < 0) {
                        (void) unlink(j->final);
                        error = -r;
                        step = "store the snapshot";
                }
        }
        if (error != 0) {
                if (sd_bus_error_is_set(&e))
                        ; /* said above */
                else if (error == ENOSPC || error == EDQUOT)
                        (void) sd_bus_error_setf(
                                &e, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                "Could not snapshot sandbox %s: no space left on the file system "
                                "of %s; nothing was kept and the sandbox runs on as before.",
                                j->sandbox_id, j->dir);
                else
                        (void) sd_bus_error_setf(&e, SD_BUS_ERROR_FAILED,
                                                 "Could not snapshot sandbox %s: %s: %s; nothing was kept.",
                                                 j->sandbox_id, step, strerror(error));
                log_sandbox(LOG_WARNING, j->sandbox_id, "%s", e.message);
                snapshot_job_audit(j, "failed", e.name, e.message);
                if (j->request)
                        (void) sd_bus_reply_method_error(j->request, &e);
                snapshot_unlink_from_list(m, snap);
                snapshot_free(snap);
                snapshot_job_free(j);
                return;
        }
        snap->pending = false;
        log_sandbox(LOG_INFO, j->sandbox_id,
                    "Snapshot %s (%s) of sandbox %s taken: %" PRIu64 " bytes%s, frozen %" PRIu64 " ms.",
                    snap->id, snap->name, j->sandbox_id, snap->size, j->reflinked ? " (reflink)" : "",
                    (now_usec(CLOCK_MONOTONIC) - j->frozen_mono) / USEC_PER_MSEC);
        snapshot_job_audit(j, "finished", NULL, NULL);
        if (j->request)
                (void) sd_bus_reply_method_return(j->request, "s", snap->id);
        snapshot_job_free(j);
}

static int on_thread_done(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        SnapshotJob *j = userdata;

        (void) pthread_join(j->thread, NULL);
        j->thread_started = false;
        snapshot_job_finish(j, j->error, j->step);
        return 0;
}

static void on_frozen(void *userdata, int status) {
        SnapshotJob *j = userdata;
        Manager *m = j->manager;
        int r;

        if (status == -ESRCH) {
                j->held = false; /* the sandbox, and its hold, are gone */
                return snapshot_job_finish(j, ENXIO, "keep the sandbox (it was deleted meanwhile)");
        }
        if (status < 0)
                /* a copy of a disk still being written would not be what a crash leaves */
                return snapshot_job_finish(j, -status, "freeze the sandbox (a process did not stop)");
        j->frozen_mono = now_usec(CLOCK_MONOTONIC);
        j->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (j->efd < 0)
                return snapshot_job_finish(j, errno, "make an eventfd");
        r = sd_event_add_io(m->event, &j->source, j->efd, EPOLLIN, on_thread_done, j);
        if (r < 0)
                return snapshot_job_finish(j, -r, "watch the copy");
        r = pthread_create(&j->thread, NULL, snapshot_thread, j);
        if (r != 0)
                return snapshot_job_finish(j, r, "start the copy");
        j->thread_started = true;
}

static int snapshot_id_generate(Manager *m, char ret[static SANDBOX_ID_LEN + 1]) {
        int r;

        do {
                r = sandbox_id_generate(ret);
                if (r < 0)
                        return r;
                memcpy(ret, SNAPSHOT_ID_PREFIX, 3);
        } while (snapshot_find(m, ret, true));
        return 0;
}

int snapshot_take(Sandbox *s, const char *name, const Caller *c, sd_bus_message *request,
                  sd_bus_error *error) {
        Manager *m = s->manager;
        char id[SANDBOX_ID_LEN + 1], image[4096];
        struct stat st;
        int r;

        if (name && (!name_is_valid(name) || snapshot_id_is_valid(name) || sandbox_id_is_valid(name)))
                return sd_bus_error_setf(
                        error, SD_BUS_ERROR_INVALID_ARGS,
                        "Snapshot name '%s' is not valid: 1-64 characters of [A-Za-z0-9._-], not "
                        "starting with '.' or '-', and not shaped like an id.",
                        name);
        if (name && snapshot_find(m, name, true))
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NAME_EXISTS,
                                         "A snapshot named '%s' exists already.", name);
        snprintf(image, sizeof(image), "%s/" DISK_IMAGE_NAME, s->workspace);
        if (stat(image, &st) < 0 || !S_ISREG(st.st_mode))
                return sd_bus_error_setf(
                        error, SANDBOXD_ERROR_NO_DISK,
                        "Sandbox %s has no disk image (its type has DiskMax=infinity): there is "
                        "nothing to snapshot.",
                        s->id);
        uint64_t estimate = (uint64_t) st.st_blocks * 512, used = snapshots_size(m);
        if (m->config.snapshot_store_max > 0 && used + estimate > m->config.snapshot_store_max)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                         "The snapshots take %" PRIu64
                                         " bytes and this one would take about %" PRIu64
                                         " more; SnapshotStoreMax= allows %" PRIu64 ".",
                                         used, estimate, m->config.snapshot_store_max);
        r = snapshot_id_generate(m, id);
        if (r < 0)
                return r;

        SnapshotJob *j = calloc(1, sizeof(SnapshotJob));
        if (!j)
                return -ENOMEM;
        j->efd = -EBADF;
        j->manager = m;
        snprintf(j->sandbox_id, sizeof(j->sandbox_id), "%s", s->id);
        j->request = sd_bus_message_ref(request);
        j->caller = *c;
        j->started_at = now_usec(CLOCK_REALTIME);
        j->mono = now_usec(CLOCK_MONOTONIC);
        snprintf(j->image, sizeof(j->image), "%s", image);
        /* The sandbox's file system, as its init's mount namespace has it. */
        snprintf(j->sync_dir, sizeof(j->sync_dir), "/proc/%i/root" SANDBOXD_SANDBOX_HOME, (int) s->init_pid);
        snapshots_dir(m, j->dir, sizeof(j->dir));
        snprintf(j->tmp, sizeof(j->tmp), "%.3900s/" SNAPSHOT_TMP_PREFIX "%.13s.img", j->dir, id);
        snprintf(j->final, sizeof(j->final), "%.3900s/%.13s.img", j->dir, id);
        j->snap = snapshot_new(m, id, name ?: id, s->id, s->type, c->account_id, s->image);
        if (!j->snap) {
                snapshot_job_free(j);
                return -ENOMEM;
        }
        j->snap->pending = true;
        j->snap->source_uid = s->uid;
        j->snap->disk_size = (uint64_t) st.st_size;
        j->held = true;
        r = sandbox_freeze_hold(s, on_frozen, j);
        if (r < 0) {
                snapshot_unlink_from_list(m, j->snap);
                snapshot_free(j->snap);
                snapshot_job_free(j);
                return sd_bus_error_set_errnof(error, r, "Could not freeze sandbox %s for the snapshot: %s",
                                               s->id, strerror(-r));
        }
        return 1;
}

/* --- a sandbox's disk from a snapshot, copied off the event loop ----------------------------------- */

struct ImageCopy {
        int in; /* the source, opened before the call returns: a removal after it is safe */
        char dst[4096], tmp[4200];
        image_copy_done_t done;
        void *userdata; /* NULL once abandoned */
        int error;
        pthread_t thread;
        int efd;
        sd_event_source *source;
};

static void *image_copy_thread(void *userdata) {
        ImageCopy *c = userdata;
        _cleanup_close_ int in = TAKE_FD(c->in), out = -EBADF;
        struct stat st;
        uint64_t one = 1;
        int r = 0;

        if (fstat(in, &st) < 0)
                r = -errno;
        if (r == 0) {
                out = open(c->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (out < 0)
                        r = -errno;
        }
        if (r == 0 && ioctl(out, FICLONE, in) < 0) {
                r = copy_sparse(in, out, st.st_size);
                if (r == 0 && ftruncate(out, st.st_size) < 0)
                        r = -errno;
        }
        if (r == 0 && rename(c->tmp, c->dst) < 0)
                r = -errno;
        if (r < 0 && out >= 0)
                (void) unlink(c->tmp);
        c->error = -r;
        (void) !write(c->efd, &one, sizeof(one));
        return NULL;
}

static int on_image_copied(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        ImageCopy *c = userdata;

        (void) pthread_join(c->thread, NULL);
        if (c->userdata)
                c->done(c->userdata, c->error);
        else if (c->error == 0)
                (void) unlink(c->dst); /* its sandbox went meanwhile */
        c->source = sd_event_source_disable_unref(c->source);
        safe_close(c->efd);
        free(c);
        return 0;
}

int image_copy_start(Manager *m, const char *src, const char *dst, image_copy_done_t done, void *userdata,
                     ImageCopy **ret) {
        ImageCopy *c = calloc(1, sizeof(ImageCopy));
        int r;

        if (!c)
                return -ENOMEM;
        c->in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (c->in < 0) {
                free(c);
                return -errno;
        }
        snprintf(c->dst, sizeof(c->dst), "%s", dst);
        snprintf(c->tmp, sizeof(c->tmp), "%.4090s.new", dst);
        c->done = done;
        c->userdata = userdata;
        c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (c->efd < 0) {
                r = -errno;
                safe_close(c->in);
                free(c);
                return r;
        }
        r = sd_event_add_io(m->event, &c->source, c->efd, EPOLLIN, on_image_copied, c);
        if (r >= 0)
                r = -pthread_create(&c->thread, NULL, image_copy_thread, c);
        if (r < 0) {
                c->source = sd_event_source_disable_unref(c->source);
                safe_close(c->efd);
                safe_close(c->in);
                free(c);
                return r;
        }
        *ret = c;
        return 0;
}

void image_copy_abandon(ImageCopy *c) {
        if (c)
                c->userdata = NULL;
}

int snapshot_remove(Manager *m, Snapshot *snap, const Caller *c, uint64_t started_at, uint64_t mono) {
        char path[4096];
        int r;

        r = sandbox_store_snapshot_delete(m->store, snap->id);
        if (r < 0)
                return r;
        snapshot_image_path(m, snap, path, sizeof(path));
        /* A sandbox being made from it has its copy already (namespace_make_workspace()). */
        if (unlink(path) < 0 && errno != ENOENT)
                log_msg(LOG_WARNING, "Could not remove %s: %m", path);
        _cleanup_free_ char *detail = snapshot_detail(snap, NULL, NULL, NULL);
        manager_audit(m, c,
                      &(AuditRow){.session_id = snap->source,
                                  .operation = "snapshot.remove",
                                  .event = "finished",
                                  .detail = detail,
                                  .started_at = started_at,
                                  .duration_usec = now_usec(CLOCK_MONOTONIC) - mono});
        log_msg(LOG_INFO, "Removed snapshot %s (%s) for %s.", snap->id, snap->name, c->account_id);
        snapshot_unlink_from_list(m, snap);
        snapshot_free(snap);
        return 0;
}
