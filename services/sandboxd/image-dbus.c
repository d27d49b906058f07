/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The image store on the bus (issue 24): org.sandboxd.sandbox1.Images on /org/sandboxd/sandbox1, and its jobs.
 *
 * A job (ImportImage, BuildImage) is sandboxd-image-helper in a transient service of its own
 * (sandbox-image-<job>.service), working in a dot-directory of the store: not in sandboxd's service, whose
 * sandboxing (ProtectSystem=strict, RestrictSUIDSGID=, DevicePolicy=closed) mmdebstrap and umoci cannot work
 * in, and stopped by systemd as a whole, whatever it started. Its standard input is the caller's stream,
 * its standard output a pipe to sandboxd: its lines are the job's progress, sent on as JobProgress
 * signals, and its end (EOF) is the job's.
 * When it is done, sandboxd writes the metadata and renames the directory into place, so an image is
 * there whole or not at all; a failed or cancelled job's directory is removed, and a sandboxd that was
 * killed meanwhile removes it at its next start (image_store_startup()). Every call is audited: the
 * jobs' rows when they end (image.import, image.build), removal's at once (image.remove). */
#include "image-dbus.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bus-fields.h"
#include "caller.h"
#include "hashmap.h"
#include "image-store.h"
#include "log.h"
#include "macro.h"
#include "namespace.h"
#include "sandbox-options.h"
#include "sandbox-snapshot.h"
#include "sandbox.h"
#include "sandboxd-bus.h"
#include "sandboxd-dbus.h"
#include "sandboxd-manager.h"
#include "time-util.h"
#include "unit.h"

#define IMAGE_JOBS_MAX 8
#define IMAGE_PACKAGES_MAX 256

typedef struct ImageState {
        char *dir;
        ImageJob *jobs;
        unsigned n_jobs;
        uint64_t next_id;
} ImageState;

struct ImageJob {
        Manager *manager;
        char id[32];
        char name[IMAGE_NAME_MAX + 1];
        char *source;
        const char *operation;   /* image.import, image.build */
        char *dir;               /* the job's directory in the store */
        char unit[UNIT_NAME_MAX];
        char **argv;             /* the helper's, for ExecStart= */
        int input_fd;            /* its standard input (owned), until the unit is asked for */
        int output_fd;           /* the pipe's write end (owned), likewise */
        bool private_network;    /* imports: no network at all */
        JobWait *start;          /* StartTransientUnit's job */
        bool running;            /* the unit is (or is being) started: stop it to end the job */
        sd_event_source *out_source;
        char line[1024];
        size_t n_line;
        char *done;              /* the helper's "done …" line */
        char *error;             /* its "error …" line's message */
        bool cancelled;
        Caller caller;
        uint64_t started_at, mono;
        ImageJob *next;
};

static const sd_bus_error_map image_bus_errors[] = {
        SD_BUS_ERROR_MAP(SANDBOXD_ERROR_NO_SUCH_IMAGE, ENOENT),
        SD_BUS_ERROR_MAP(SANDBOXD_ERROR_IMAGE_EXISTS, EEXIST),
        SD_BUS_ERROR_MAP(SANDBOXD_ERROR_IMAGE_IN_USE, EBUSY),
        SD_BUS_ERROR_MAP(SANDBOXD_ERROR_NO_SUCH_JOB, ESRCH),
        SD_BUS_ERROR_MAP_END,
};

static ImageState *state(Manager *m) {
        return m->images;
}

const char *manager_images_dir(Manager *m) {
        return m->images ? m->images->dir : NULL;
}

bool image_in_use(Manager *m, const char *name) {
        size_t i = 0;
        Sandbox *s;

        while (hashmap_iterate(m->sandboxes, &i, (void **) &s, NULL))
                if (streq_ptr(s->image, name))
                        return true;
        for (Sandbox *p = m->pool; p; p = p->pool_next)
                if (streq_ptr(p->image, name))
                        return true;
        return false;
}

static ImageJob *job_find_name(Manager *m, const char *name) {
        for (ImageJob *j = state(m)->jobs; j; j = j->next)
                if (streq(j->name, name))
                        return j;
        return NULL;
}

static ImageJob *job_free(ImageJob *j) {
        if (!j)
                return NULL;
        ImageState *st = state(j->manager);
        for (ImageJob **p = &st->jobs; *p; p = &(*p)->next)
                if (*p == j) {
                        *p = j->next;
                        st->n_jobs--;
                        break;
                }
        job_wait_cancel(j->start);
        j->out_source = sd_event_source_disable_unref(j->out_source);
        j->input_fd = safe_close(j->input_fd);
        j->output_fd = safe_close(j->output_fd);
        strv_free(j->argv);
        free(j->source);
        free(j->dir);
        free(j->done);
        free(j->error);
        free(j);
        return NULL;
}

void image_jobs_free(Manager *m) {
        ImageState *st = m->images;

        if (!st)
                return;
        /* The jobs' services stop too: nobody would take their result (the next start removes their
         * directories). */
        while (st->jobs) {
                if (st->jobs->running)
                        (void) unit_stop_nowait(m, st->jobs->unit);
                job_free(st->jobs);
        }
        free(st->dir);
        free(st);
        m->images = NULL;
}

static void job_audit(ImageJob *j, const char *event, const char *error_name, const char *message,
                      const ImageInfo *info) {
        json_object *o = json_object_new_object();
        _cleanup_free_ char *detail = NULL;

        if (o) {
                json_object_object_add(o, "image", json_object_new_string(j->name));
                json_object_object_add(o, "job", json_object_new_string(j->id));
                json_object_object_add(o, "source", json_object_new_string(strempty(j->source)));
                if (info) {
                        json_object_object_add(o, "digest", json_object_new_string(strempty(info->digest)));
                        json_object_object_add(o, "size", json_object_new_uint64(info->size));
                        json_object_object_add(o, "devices_dropped", json_object_new_uint64(info->devices_dropped));
                        json_object_object_add(o, "setid_stripped", json_object_new_uint64(info->setid_stripped));
                        json_object_object_add(o, "owners_reset", json_object_new_uint64(info->owners_reset));
                }
                if (error_name) {
                        json_object_object_add(o, "error", json_object_new_string(error_name));
                        json_object_object_add(o, "message", json_object_new_string(strempty(message)));
                }
                detail = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
                json_object_put(o);
        }
        AuditRow row = {
                .operation = j->operation,
                .event = event,
                .detail = detail,
                .exit_code = error_name ? -1 : 0,
                .started_at = j->started_at,
                .duration_usec = now_usec(CLOCK_MONOTONIC) - j->mono,
        };
        manager_audit(j->manager, &j->caller, &row);
}

static void job_emit_finished(ImageJob *j, const char *result, const char *error_name, const char *message) {
        (void) sd_bus_emit_signal(j->manager->bus, SANDBOXD_BUS_PATH, SANDBOXD_IMAGES_INTERFACE, "JobFinished",
                                  "sssss", j->id, j->name, result, strempty(error_name), strempty(message));
}

/* The helper has ended (its output's EOF) or could not start (start_error): the image goes into place, or
 * the job's directory goes. */
static void job_end(ImageJob *j, const char *start_error) {
        Manager *m = j->manager;
        ImageInfo info = { .created_at = now_usec(CLOCK_REALTIME) };
        unsigned long long size, devices, setid, owners;
        char digest[128], message[1200];
        const char *error_name = NULL;
        int r;

        snprintf(info.name, sizeof(info.name), "%s", j->name);
        if (j->running)
                (void) unit_stop_nowait(m, j->unit); /* whatever is left of it (normally nothing) */
        j->running = false;
        if (j->cancelled) {
                error_name = SANDBOXD_ERROR_INTERRUPTED;
                snprintf(message, sizeof(message), "The job was cancelled.");
        } else if (start_error) {
                error_name = SD_BUS_ERROR_FAILED;
                snprintf(message, sizeof(message), "Could not start the job's service: %s", start_error);
        } else if (!j->done ||
                   sscanf(j->done, "done %llu %127s %llu %llu %llu", &size, digest, &devices, &setid, &owners) != 5) {
                error_name = SD_BUS_ERROR_FAILED;
                snprintf(message, sizeof(message), "%s %s: %s", streq(j->operation, "image.build") ? "Building"
                                                                                                     : "Importing",
                         j->name, j->error ?: "the helper failed");
        } else {
                info.size = size;
                info.devices_dropped = devices;
                info.setid_stripped = setid;
                info.owners_reset = owners;
                info.source = j->source;
                info.digest = digest;
                r = image_info_save(j->dir, &info);
                if (r >= 0)
                        r = image_store_commit(state(m)->dir, j->dir, j->name);
                info.source = info.digest = NULL;
                if (r == -EEXIST || r == -ENOTEMPTY) {
                        error_name = SANDBOXD_ERROR_IMAGE_EXISTS;
                        snprintf(message, sizeof(message), "An image named '%s' appeared meanwhile.", j->name);
                } else if (r < 0) {
                        error_name = SD_BUS_ERROR_FAILED;
                        snprintf(message, sizeof(message), "Storing image %s: %s", j->name, strerror(-r));
                } else {
                        info.source = j->source;
                        info.digest = digest;
                }
        }
        if (error_name) {
                r = namespace_remove_workspace(j->dir);
                if (r < 0)
                        log_msg(LOG_WARNING, "Could not remove %s: %s", j->dir, strerror(-r));
                log_msg(LOG_WARNING, "Image job %s (%s) failed: %s", j->id, j->name, message);
                job_audit(j, "failed", error_name, message, NULL);
                job_emit_finished(j, j->cancelled ? "cancelled" : "failed", error_name, message);
        } else {
                log_msg(LOG_INFO, "Image %s is ready (%s, %llu bytes, %s).", j->name, j->source, size, digest);
                job_audit(j, "finished", NULL, NULL, &info);
                job_emit_finished(j, "done", NULL, NULL);
                sandbox_pool_schedule(m, 0); /* a type's Image= may be there now */
        }
        job_free(j);
}

static int on_job_output(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        ImageJob *j = userdata;
        char buf[4096];
        ssize_t n;

        n = read(fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0) {
                /* EOF: the helper (and all it started) is done, one way or another. */
                j->out_source = sd_event_source_disable_unref(j->out_source);
                job_end(j, NULL);
                return 0;
        }
        for (ssize_t i = 0; i < n; i++) {
                if (buf[i] != '\n') {
                        if (j->n_line < sizeof(j->line) - 1)
                                j->line[j->n_line++] = buf[i];
                        continue;
                }
                j->line[j->n_line] = 0;
                j->n_line = 0;
                char phase[128];
                unsigned long long done, total;
                if (sscanf(j->line, "progress %127s %llu %llu", phase, &done, &total) == 3)
                        (void) sd_bus_emit_signal(j->manager->bus, SANDBOXD_BUS_PATH, SANDBOXD_IMAGES_INTERFACE,
                                                  "JobProgress", "ssstt", j->id, j->name, phase,
                                                  (uint64_t) done, (uint64_t) total);
                else if (strncmp(j->line, "done ", 5) == 0) {
                        free(j->done);
                        j->done = strdup(j->line);
                } else if (strncmp(j->line, "error ", 6) == 0) {
                        free(j->error);
                        j->error = strdup(j->line + 6);
                }
        }
        return 0;
}

static const char *helper_path(void) {
        return getenv("SANDBOXD_IMAGE_HELPER_PATH") ?: LIBEXECDIR "/sandboxd/sandboxd-image-helper";
}

static int append_job_props(sd_bus_message *msg, void *userdata) {
        ImageJob *j = userdata;
        char desc[256];
        int r;

        snprintf(desc, sizeof(desc), "sandboxd image job %s (%s %s)", j->id, j->operation, j->name);
        r = sd_bus_message_append(msg, "(sv)(sv)(sv)(sv)(sv)(sv)(sv)", "Description", "s", desc, "Type", "s", "exec",
                                  "CollectMode", "s", "inactive-or-failed", "KillMode", "s", "control-group",
                                  "TimeoutStopUSec", "t", 5 * USEC_PER_SEC, "StandardError", "s", "journal",
                                  "PrivateNetwork", "b", j->private_network);
        if (r < 0)
                return r;
        r = sd_bus_message_append(msg, "(sv)", "Environment", "as", 2, "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                                  "LC_ALL=C.UTF-8");
        if (r < 0)
                return r;
        r = sd_bus_message_append(msg, "(sv)(sv)", "StandardInputFileDescriptor", "h", j->input_fd,
                                  "StandardOutputFileDescriptor", "h", j->output_fd);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(msg, 'r', "sv");
        if (r >= 0)
                r = sd_bus_message_append(msg, "s", "ExecStart");
        if (r >= 0)
                r = sd_bus_message_open_container(msg, 'v', "a(sasb)");
        if (r >= 0)
                r = sd_bus_message_open_container(msg, 'a', "(sasb)");
        if (r >= 0)
                r = sd_bus_message_open_container(msg, 'r', "sasb");
        if (r >= 0)
                r = sd_bus_message_append(msg, "s", helper_path());
        if (r >= 0)
                r = sd_bus_message_append_strv(msg, j->argv);
        if (r >= 0)
                r = sd_bus_message_append(msg, "b", false);
        for (int i = 0; r >= 0 && i < 4; i++)
                r = sd_bus_message_close_container(msg);
        return r;
}

static void on_job_started(Manager *m, const char *result, const sd_bus_error *error, void *userdata) {
        ImageJob *j = userdata;

        j->start = NULL;
        if (result && streq(result, "done"))
                return; /* it runs; its output's EOF ends the job */
        /* It never ran: nothing writes to the pipe, whose EOF would not come while we hold nothing of it
         * either; end the job here. */
        j->running = false;
        j->out_source = sd_event_source_disable_unref(j->out_source);
        job_end(j, error && sd_bus_error_is_set(error) ? error->message : result ?: "unknown error");
}

/* Starts the helper with argv (its last argument is filled in: the job's directory) in a transient service,
 * with stdin from input_fd (or /dev/null). */
static int job_start(Manager *m, const Caller *c, const char *operation, const char *name, const char *source,
                     char **argv, size_t dir_index, int input_fd, ImageJob **ret) {
        ImageState *st = state(m);
        int out[2] = { -EBADF, -EBADF };
        char dir[4096];
        ImageJob *j;
        int r;

        j = calloc(1, sizeof(ImageJob));
        if (!j)
                return -ENOMEM;
        j->manager = m;
        j->input_fd = j->output_fd = -EBADF;
        snprintf(j->id, sizeof(j->id), "job_%llu", (unsigned long long) ++st->next_id);
        snprintf(j->unit, sizeof(j->unit), "sandbox-image-%s.service", j->id);
        snprintf(j->name, sizeof(j->name), "%s", name);
        j->operation = operation;
        j->private_network = !streq(operation, "image.build");
        j->caller = *c;
        j->started_at = now_usec(CLOCK_REALTIME);
        j->mono = now_usec(CLOCK_MONOTONIC);
        snprintf(dir, sizeof(dir), "%s/.%s", st->dir, j->id);
        j->source = strdup(source);
        j->dir = strdup(dir);
        j->next = st->jobs;
        st->jobs = j;
        st->n_jobs++;
        if (!j->source || !j->dir) {
                job_free(j);
                return -ENOMEM;
        }
        argv[dir_index] = j->dir;
        j->argv = strv_copy(argv);
        if (!j->argv) {
                job_free(j);
                return -ENOMEM;
        }

        (void) namespace_remove_workspace(dir);
        if (mkdir(dir, 0700) < 0) {
                r = -errno;
                job_free(j);
                return r;
        }
        j->input_fd = input_fd >= 0 ? fcntl(input_fd, F_DUPFD_CLOEXEC, 3) : open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (j->input_fd < 0 || pipe2(out, O_CLOEXEC | O_NONBLOCK) < 0) {
                r = -errno;
                goto fail;
        }
        j->output_fd = out[1];
        /* Blocking for the helper: it writes its lines whole. */
        if (fcntl(j->output_fd, F_SETFL, 0) < 0) {
                r = -errno;
                safe_close(out[0]);
                goto fail;
        }
        r = sd_event_add_io(m->event, &j->out_source, out[0], EPOLLIN, on_job_output, j);
        if (r < 0) {
                safe_close(out[0]);
                goto fail;
        }
        (void) sd_event_source_set_io_fd_own(j->out_source, true);
        r = unit_start_transient(m, j->unit, append_job_props, NULL, j, on_job_started, j, &j->start);
        if (r < 0)
                goto fail;
        j->running = true;
        /* The message holds copies of both: systemd's are the only ones now, so EOF comes when the helper
         * (and everything it started) is gone. */
        j->input_fd = safe_close(j->input_fd);
        j->output_fd = safe_close(j->output_fd);
        log_msg(LOG_INFO, "Image job %s started: %s %s (%s), in %s.", j->id, operation, name, source, j->unit);
        *ret = j;
        return 0;

fail:
        (void) namespace_remove_workspace(dir);
        job_free(j);
        return r;
}

/* --- methods ---------------------------------------------------------------------------------------- */

static int caller_check(Manager *m, sd_bus_message *msg, Caller *c, sd_bus_error *error) {
        caller_unknown(c);
        return manager_caller_check(m, msg, c, error);
}

/* The failed call's row, for the audited methods, then the error. */
static int fail_audited(Manager *m, const Caller *c, const char *operation, const char *name, uint64_t started,
                        uint64_t mono, int r, sd_bus_error *error) {
        sd_bus_error e = SD_BUS_ERROR_MAKE_CONST(SD_BUS_ERROR_FAILED, strerror(-r));
        const sd_bus_error *why = sd_bus_error_is_set(error) ? error : &e;
        json_object *o = json_object_new_object();
        _cleanup_free_ char *detail = NULL;

        if (o) {
                json_object_object_add(o, "image", json_object_new_string(strempty(name)));
                json_object_object_add(o, "error", json_object_new_string(why->name));
                json_object_object_add(o, "message", json_object_new_string(strempty(why->message)));
                detail = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
                json_object_put(o);
        }
        manager_audit_failed(m, c, "", operation, why, detail, started, mono);
        return r;
}

/* One {sv} entry of an a{sv}: key and the strings of ids (borrowed, NULL-terminated) as "as". */
static int append_id_list(sd_bus_message *reply, const char *key, char **ids) {
        int r;

        r = sd_bus_message_open_container(reply, 'e', "sv");
        if (r >= 0)
                r = sd_bus_message_append(reply, "s", key);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'v', "as");
        if (r >= 0)
                r = sd_bus_message_append_strv(reply, ids);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r;
}

static int append_info(sd_bus_message *reply, const ImageInfo *i, Manager *m) {
        int r;

        r = sd_bus_message_open_container(reply, 'a', "{sv}");
        if (r < 0)
                return r;
        r = sd_bus_message_append(reply, "{sv}{sv}{sv}{sv}{sv}{sv}{sv}{sv}", "name", "s", i->name, "source", "s",
                                  strempty(i->source), "created_at", "t", i->created_at, "size", "t", i->size,
                                  "digest", "s", strempty(i->digest), "devices_dropped", "t", i->devices_dropped,
                                  "setid_stripped", "t", i->setid_stripped, "owners_reset", "t", i->owners_reset);
        if (r < 0)
                return r;
        /* who uses it: sandboxes by id (pooled ones are not named); and the snapshots whose disks hold a layer
         * of it (a sandbox made from one runs on it) */
        size_t n = 0, it = 0;
        Sandbox *s;
        _cleanup_free_ char **users = calloc(hashmap_size(m->sandboxes) + 1, sizeof(char *));
        for (Snapshot *snap = m->snapshots; snap; snap = snap->next)
                n++;
        _cleanup_free_ char **snapshots = calloc(n + 1, sizeof(char *));
        if (!users || !snapshots)
                return -ENOMEM;
        n = 0;
        while (hashmap_iterate(m->sandboxes, &it, (void **) &s, NULL))
                if (streq_ptr(s->image, i->name))
                        users[n++] = s->id;
        n = 0;
        for (Snapshot *snap = m->snapshots; snap; snap = snap->next)
                if (!snap->pending && streq_ptr(snap->image, i->name))
                        snapshots[n++] = snap->id;
        r = append_id_list(reply, "used_by", users);
        if (r >= 0)
                r = append_id_list(reply, "snapshots", snapshots);
        if (r < 0)
                return r;
        return sd_bus_message_close_container(reply);
}

static int method_list_images(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_strv_free_ char **names = NULL;
        Manager *m = userdata;
        Caller c;
        int r;

        r = caller_check(m, msg, &c, error);
        if (r < 0)
                return r;
        r = image_store_list(state(m)->dir, &names);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_return(msg, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(sstts)");
        if (r < 0)
                return r;
        for (char **n = names; *n; n++) {
                ImageInfo i;
                if (image_info_load(state(m)->dir, *n, &i) < 0)
                        continue;
                r = sd_bus_message_append(reply, "(sstts)", i.name, i.source, i.created_at, i.size, i.digest);
                image_info_done(&i);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_get_image(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        const char *name;
        ImageInfo i;
        Caller c;
        int r;

        r = caller_check(m, msg, &c, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(msg, "s", &name);
        if (r < 0)
                return r;
        r = image_info_load(state(m)->dir, name, &i);
        if (r == -ENOENT)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_NO_SUCH_IMAGE, "No image '%s'.", name);
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED, "Image %s's metadata: %s", name, strerror(-r));
        r = sd_bus_message_new_method_return(msg, &reply);
        if (r >= 0)
                r = append_info(reply, &i, m);
        image_info_done(&i);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* The name is free for a new image: valid, no image and no job has it. */
static int check_new_name(Manager *m, const char *name, sd_bus_error *error) {
        if (!image_name_is_valid(name))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Invalid image name '%s': 1-64 characters of A-Z a-z 0-9 . _ -, not "
                                         "starting with . or -, and not \"host\".",
                                         name);
        if (image_exists(state(m)->dir, name) || job_find_name(m, name))
                return sd_bus_error_setf(error, SANDBOXD_ERROR_IMAGE_EXISTS,
                                         "An image named '%s' exists already (or is being made).", name);
        if (state(m)->n_jobs >= IMAGE_JOBS_MAX)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                         "%u image jobs run already, the most there may be.", IMAGE_JOBS_MAX);
        return 0;
}

typedef struct ImportOptions {
        Caller *caller;
        const char *format, *tag;
} ImportOptions;

static int import_entry(const char *key, sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        ImportOptions *o = userdata;
        int r;

        r = options_context_entry(o->caller, key, msg, error);
        if (r != 0)
                return r;
        if (streq(key, "format"))
                r = sd_bus_message_read(msg, "v", "s", &o->format);
        else if (streq(key, "tag"))
                r = sd_bus_message_read(msg, "v", "s", &o->tag);
        else
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Unknown option '%s' of ImportImage.",
                                         key);
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Option '%s' must be a string.", key);
        return 0;
}

static bool tag_is_valid(const char *t) {
        size_t n = strlen(t);
        if (n == 0 || n > 128)
                return false;
        for (const char *p = t; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                      *p == '.' || *p == '_' || *p == '-'))
                        return false;
        return true;
}

static int method_import_image(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        uint64_t started = now_usec(CLOCK_REALTIME), mono = now_usec(CLOCK_MONOTONIC);
        const char *name = NULL;
        int fd = -EBADF;
        ImageJob *j;
        Caller c;
        int r;

        r = caller_check(m, msg, &c, error);
        if (r < 0)
                return fail_audited(m, &c, "image.import", NULL, started, mono, r, error);
        ImportOptions o = { .caller = &c, .format = "tar", .tag = "latest" };
        r = sd_bus_message_read(msg, "sh", &name, &fd);
        if (r >= 0)
                r = bus_foreach_sv(msg, import_entry, &o, error);
        if (r < 0)
                return fail_audited(m, &c, "image.import", name, started, mono, r, error);
        r = check_new_name(m, name, error);
        if (r < 0)
                return fail_audited(m, &c, "image.import", name, started, mono, r, error);
        if (!streq(o.format, "tar") && !streq(o.format, "oci-archive") && !streq(o.format, "docker-archive")) {
                r = sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                      "Option 'format' must be \"tar\", \"oci-archive\" or \"docker-archive\", "
                                      "not '%s'.", o.format);
                return fail_audited(m, &c, "image.import", name, started, mono, r, error);
        }
        if (!tag_is_valid(o.tag)) {
                r = sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                      "Option 'tag' must be 1-128 characters of A-Z a-z 0-9 . _ -.");
                return fail_audited(m, &c, "image.import", name, started, mono, r, error);
        }
        /* Read as the caller could: the descriptor is theirs, opened with their rights. */
        int acc = fcntl(fd, F_GETFL);
        if (acc < 0 || (acc & O_ACCMODE) == O_WRONLY || (acc & O_PATH)) {
                r = sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                      "The descriptor must be open for reading (a file or a pipe).");
                return fail_audited(m, &c, "image.import", name, started, mono, r, error);
        }
        char source[160];
        if (streq(o.format, "oci-archive"))
                snprintf(source, sizeof(source), "oci-archive:%s", o.tag);
        else
                snprintf(source, sizeof(source), "%s", o.format);
        char *argv[] = { (char *) "sandboxd-image-helper", (char *) "import", (char *) o.format, (char *) o.tag,
                         NULL, NULL };
        r = job_start(m, &c, "image.import", name, source, argv, 4, fd, &j);
        if (r < 0)
                return fail_audited(m, &c, "image.import", name, started, mono, r, error);
        return sd_bus_reply_method_return(msg, "s", j->id);
}

static bool word_is_valid(const char *w, size_t max, bool plus) {
        size_t n = strlen(w);
        if (n == 0 || n > max || w[0] == '-')
                return false;
        for (const char *p = w; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '-' ||
                      (plus && (*p == '+' || *p == ':' || *p == '=' || *p == '~'))))
                        return false;
        return true;
}

typedef struct BuildOptions {
        Caller *caller;
        const char *suite, *variant;
        char packages[8192];
        size_t n_packages;
        bool bad_package;
} BuildOptions;

static int build_entry(const char *key, sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        BuildOptions *o = userdata;
        int r;

        r = options_context_entry(o->caller, key, msg, error);
        if (r != 0)
                return r;
        if (streq(key, "suite") || streq(key, "variant")) {
                r = sd_bus_message_read(msg, "v", "s", streq(key, "suite") ? &o->suite : &o->variant);
                if (r < 0)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Option '%s' must be a string.",
                                                 key);
                return 0;
        }
        if (!streq(key, "packages"))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Unknown option '%s' of BuildImage.", key);
        r = sd_bus_message_enter_container(msg, 'v', "as");
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Option 'packages' must be an array of "
                                                                           "strings.");
        char **l = NULL;
        r = sd_bus_message_read_strv(msg, &l);
        if (r < 0)
                return r;
        _cleanup_strv_free_ char **pk = l;
        o->packages[0] = 0;
        o->n_packages = 0;
        for (char **p = pk; *p; p++) {
                if (!word_is_valid(*p, 128, true) || ++o->n_packages > IMAGE_PACKAGES_MAX ||
                    strlen(o->packages) + strlen(*p) + 2 > sizeof(o->packages))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "Option 'packages': '%s' is no package name (or there are too "
                                                 "many, at most %d).", *p, IMAGE_PACKAGES_MAX);
                if (o->packages[0])
                        strcat(o->packages, ",");
                strcat(o->packages, *p);
        }
        return sd_bus_message_exit_container(msg);
}

static int method_build_image(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        uint64_t started = now_usec(CLOCK_REALTIME), mono = now_usec(CLOCK_MONOTONIC);
        const char *name = NULL;
        ImageJob *j;
        Caller c;
        int r;

        r = caller_check(m, msg, &c, error);
        if (r < 0)
                return fail_audited(m, &c, "image.build", NULL, started, mono, r, error);
        BuildOptions *o = calloc(1, sizeof(BuildOptions));
        if (!o)
                return -ENOMEM;
        _cleanup_free_ BuildOptions *free_o = o;
        o->caller = &c;
        o->suite = "bookworm";
        o->variant = "apt";
        r = sd_bus_message_read(msg, "s", &name);
        if (r >= 0)
                r = bus_foreach_sv(msg, build_entry, o, error);
        if (r < 0)
                return fail_audited(m, &c, "image.build", name, started, mono, r, error);
        r = check_new_name(m, name, error);
        if (r < 0)
                return fail_audited(m, &c, "image.build", name, started, mono, r, error);
        if (!word_is_valid(o->suite, 64, false)) {
                r = sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Invalid suite '%s'.", o->suite);
                return fail_audited(m, &c, "image.build", name, started, mono, r, error);
        }
        static const char *const variants[] = { "extract", "custom", "essential", "apt", "required", "minbase",
                                                "buildd", "important", "debootstrap", "standard" };
        bool known = false;
        for (size_t i = 0; i < ELEMENTSOF(variants); i++)
                known = known || streq(o->variant, variants[i]);
        if (!known) {
                r = sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                      "Option 'variant' must be one of mmdebstrap's (essential, apt, minbase, "
                                      "required, important, standard, buildd, …), not '%s'.", o->variant);
                return fail_audited(m, &c, "image.build", name, started, mono, r, error);
        }
        char source[256];
        snprintf(source, sizeof(source), "mmdebstrap:%s/%s%s%.200s", o->suite, o->variant,
                 o->packages[0] ? "+" : "", o->packages);
        char *argv[] = { (char *) "sandboxd-image-helper", (char *) "build", (char *) o->suite,
                         (char *) o->variant, o->packages, NULL, NULL };
        r = job_start(m, &c, "image.build", name, source, argv, 5, -EBADF, &j);
        if (r < 0)
                return fail_audited(m, &c, "image.build", name, started, mono, r, error);
        return sd_bus_reply_method_return(msg, "s", j->id);
}

static int method_cancel_job(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
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
        r = context_options_read(msg, &c, "CancelJob", error);
        if (r < 0)
                return r;
        for (ImageJob *j = state(m)->jobs; j; j = j->next)
                if (streq(j->id, id)) {
                        /* The whole unit: umoci, skopeo, mmdebstrap and what they started. Its row and
                         * JobFinished come with the end of its output. */
                        j->cancelled = true;
                        j->caller = c;
                        if (j->running)
                                (void) unit_stop_nowait(m, j->unit);
                        return sd_bus_reply_method_return(msg, NULL);
                }
        return sd_bus_error_setf(error, SANDBOXD_ERROR_NO_SUCH_JOB, "No image job '%s' (it may have ended).", id);
}

static int method_list_jobs(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        Caller c;
        int r;

        r = caller_check(m, msg, &c, error);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_return(msg, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(ssst)");
        for (ImageJob *j = state(m)->jobs; r >= 0 && j; j = j->next)
                r = sd_bus_message_append(reply, "(ssst)", j->id, j->name, j->operation, j->started_at);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_remove_image(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        uint64_t started = now_usec(CLOCK_REALTIME), mono = now_usec(CLOCK_MONOTONIC);
        const char *name = NULL;
        Caller c;
        int r;

        r = caller_check(m, msg, &c, error);
        if (r < 0)
                return fail_audited(m, &c, "image.remove", NULL, started, mono, r, error);
        r = sd_bus_message_read(msg, "s", &name);
        if (r >= 0)
                r = context_options_read(msg, &c, "RemoveImage", error);
        if (r < 0)
                return fail_audited(m, &c, "image.remove", name, started, mono, r, error);
        if (!image_exists(state(m)->dir, name)) {
                r = sd_bus_error_setf(error, SANDBOXD_ERROR_NO_SUCH_IMAGE, "No image '%s'.", name);
                return fail_audited(m, &c, "image.remove", name, started, mono, r, error);
        }
        /* Refused, not deferred: the caller learns now, and nothing changes behind anyone's back. A
         * type whose Image= it is keeps pooled sandboxes of it, so such an image stays while configured. */
        if (image_in_use(m, name)) {
                r = sd_bus_error_setf(error, SANDBOXD_ERROR_IMAGE_IN_USE,
                                      "Image %s is in use by a sandbox (or a pooled sandbox of a type with "
                                      "Image=%s); delete those first.", name, name);
                return fail_audited(m, &c, "image.remove", name, started, mono, r, error);
        }
        /* A snapshot of a sandbox on it holds the upper layer of an overlay on it: a sandbox made from the
         * snapshot needs the image, so the image stays while such a snapshot does (a pending one too: its
         * source runs on the image anyway). */
        Snapshot *snap = snapshot_find_by_image(m, name);
        if (snap) {
                r = sd_bus_error_setf(error, SANDBOXD_ERROR_IMAGE_IN_USE,
                                      "Image %s is needed by snapshot %s (%s), taken of a sandbox on it: a "
                                      "sandbox made from it runs on this image. Remove the snapshot first.",
                                      name, snap->id, snap->name);
                return fail_audited(m, &c, "image.remove", name, started, mono, r, error);
        }
        r = image_store_remove(state(m)->dir, name);
        if (r < 0) {
                r = sd_bus_error_setf(error, SD_BUS_ERROR_FAILED, "Removing image %s: %s", name, strerror(-r));
                return fail_audited(m, &c, "image.remove", name, started, mono, r, error);
        }
        json_object *o = json_object_new_object();
        _cleanup_free_ char *detail = NULL;
        if (o) {
                json_object_object_add(o, "image", json_object_new_string(name));
                detail = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
                json_object_put(o);
        }
        AuditRow row = {
                .operation = "image.remove",
                .event = "finished",
                .detail = detail,
                .started_at = started,
                .duration_usec = now_usec(CLOCK_MONOTONIC) - mono,
        };
        manager_audit(m, &c, &row);
        log_msg(LOG_INFO, "Removed image %s.", name);
        return sd_bus_reply_method_return(msg, NULL);
}

static const sd_bus_vtable images_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD_WITH_ARGS("ListImages", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(sstts)", images), method_list_images,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetImage", SD_BUS_ARGS("s", name), SD_BUS_RESULT("a{sv}", image), method_get_image,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ImportImage", SD_BUS_ARGS("s", name, "h", fd, "a{sv}", options),
                                SD_BUS_RESULT("s", job), method_import_image, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("BuildImage", SD_BUS_ARGS("s", name, "a{sv}", options), SD_BUS_RESULT("s", job),
                                method_build_image, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("RemoveImage", SD_BUS_ARGS("s", name, "a{sv}", context), SD_BUS_NO_RESULT,
                                method_remove_image, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListJobs", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(ssst)", jobs), method_list_jobs,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("CancelJob", SD_BUS_ARGS("s", job, "a{sv}", context), SD_BUS_NO_RESULT,
                                method_cancel_job, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("JobProgress",
                                SD_BUS_ARGS("s", job, "s", image, "s", phase, "t", done, "t", total), 0),
        SD_BUS_SIGNAL_WITH_ARGS("JobFinished",
                                SD_BUS_ARGS("s", job, "s", image, "s", result, "s", error_name, "s", message), 0),
        SD_BUS_VTABLE_END,
};

int image_bus_setup(Manager *m) {
        ImageState *st;
        char path[4096];
        int r;

        st = calloc(1, sizeof(ImageState));
        if (!st)
                return -ENOMEM;
        snprintf(path, sizeof(path), "%s/images", m->state_dir);
        st->dir = strdup(path);
        if (!st->dir) {
                free(st);
                return -ENOMEM;
        }
        m->images = st;
        /* Job ids (and so their units' names) never repeat, across restarts too. */
        st->next_id = now_usec(CLOCK_REALTIME) / USEC_PER_MSEC;
        /* What an earlier sandboxd's jobs left: their services stop, their directories go. */
        _cleanup_(closedirp) DIR *d = opendir(st->dir);
        struct dirent *de;
        while (d && (de = readdir(d))) {
                char unit[UNIT_NAME_MAX];
                if (strncmp(de->d_name, ".job_", 5) != 0 || strlen(de->d_name) > 64)
                        continue;
                snprintf(unit, sizeof(unit), "sandbox-image-%s.service", de->d_name + 1);
                (void) unit_stop_nowait(m, unit);
        }
        r = image_store_startup(st->dir);
        if (r < 0)
                log_msg(LOG_WARNING, "Could not clear what an earlier run left in %s: %s", st->dir, strerror(-r));
        r = sd_bus_add_object_vtable(m->bus, NULL, SANDBOXD_BUS_PATH, SANDBOXD_IMAGES_INTERFACE, images_vtable, m);
        if (r < 0)
                return r;
        return sd_bus_error_add_map(image_bus_errors);
}
