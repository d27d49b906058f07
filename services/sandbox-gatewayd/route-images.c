/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Routes of sandboxd's image store (issue 24): GET and POST /v1/images, GET and DELETE /v1/images/{name}. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bus-fields.h"
#include "gatewayd-routes.h"
#include "log.h"
#include "sse.h"

#define IMAGES_INTERFACE "org.sandboxd.sandbox1.Images"

static void on_list(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        const char *name, *source, *digest;
        uint64_t created, size;
        json_object *list, *o;
        int k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        list = json_object_new_array();
        if (!list)
                return req_reply_errno(r, -ENOMEM);
        k = sd_bus_message_enter_container(reply, 'a', "(sstts)");
        while (k >= 0 && (k = sd_bus_message_read(reply, "(sstts)", &name, &source, &created, &size, &digest)) > 0) {
                o = json_object_new_object();
                if (!o) {
                        k = -ENOMEM;
                        break;
                }
                json_object_object_add(o, "name", json_object_new_string(name));
                json_object_object_add(o, "source", json_object_new_string(source));
                json_object_object_add(o, "created_at", json_time(created));
                json_object_object_add(o, "size", json_object_new_uint64(size));
                json_object_object_add(o, "digest", json_object_new_string(digest));
                json_object_array_add(list, o);
        }
        if (k < 0) {
                json_object_put(list);
                return req_reply_errno(r, k);
        }
        o = json_object_new_object();
        json_object_object_add(o, "images", list);
        req_reply_json(r, 200, o);
}

int route_image_list(Request *r) {
        return req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, IMAGES_INTERFACE, "ListImages", NULL, on_list, 0);
}

/* One entry of GetImage's a{sv}: strings and numbers as they are (created_at as a time), used_by filtered
 * to the sandboxes the key may read. */
static int image_field(const char *key, sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Request *r = userdata;
        json_object *o = r->data;
        const char *contents, *s;
        uint64_t t;
        int k;

        k = sd_bus_message_peek_type(reply, NULL, &contents);
        if (k < 0)
                return k;
        if (streq(contents, "s")) {
                k = sd_bus_message_read(reply, "v", "s", &s);
                if (k >= 0)
                        json_object_object_add(o, key, json_object_new_string(s));
                return k;
        }
        if (streq(contents, "t")) {
                k = sd_bus_message_read(reply, "v", "t", &t);
                if (k >= 0)
                        json_object_object_add(o, key, streq(key, "created_at") ? json_time(t)
                                                                                 : json_object_new_uint64(t));
                return k;
        }
        if (streq(contents, "as") && streq(key, "used_by")) {
                json_object *a = json_object_new_array();
                if (!a)
                        return -ENOMEM;
                json_object_object_add(o, key, a);
                k = sd_bus_message_enter_container(reply, 'v', "as");
                if (k >= 0)
                        k = sd_bus_message_enter_container(reply, 'a', "s");
                while (k >= 0 && (k = sd_bus_message_read(reply, "s", &s)) > 0)
                        if (api_key_allows(r->key, GATEWAY_ACTION_SANDBOX_READ, s))
                                json_object_array_add(a, json_object_new_string(s));
                if (k >= 0)
                        k = sd_bus_message_exit_container(reply);
                if (k >= 0)
                        k = sd_bus_message_exit_container(reply);
                return k;
        }
        return sd_bus_message_skip(reply, "v"); /* what a later sandboxd adds */
}

/* GetImage's reply as the REST image object. r->data is borrowed while the fields are read. */
static int image_json(Request *r, sd_bus_message *reply, json_object **ret) {
        void *data = r->data;
        json_object *o;
        int k;

        o = json_object_new_object();
        if (!o)
                return -ENOMEM;
        r->data = o;
        k = bus_foreach_sv(reply, image_field, r, NULL);
        r->data = data;
        if (k < 0) {
                json_object_put(o);
                return k;
        }
        *ret = o;
        return 0;
}

static void on_get(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        json_object *o;
        int k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        k = image_json(r, reply, &o);
        if (k < 0)
                return req_reply_errno(r, k);
        req_reply_json(r, 200, o);
}

static int build_name(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        return sd_bus_message_append(m, "s", req_param(r, 0));
}

int route_image_get(Request *r) {
        return req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, IMAGES_INTERFACE, "GetImage", build_name, on_get, 0);
}

/* DELETE /v1/images/{name}: RemoveImage, for admin keys only (an image is every account's). */
static int build_remove(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        int k = sd_bus_message_append(m, "s", req_param(r, 0));
        if (k < 0)
                return k;
        return req_append_context(r, m);
}

static void on_removed(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        req_reply_empty(r, 204);
}

int route_image_delete(Request *r) {
        if (r->key->role != KEY_ROLE_ADMIN) {
                req_deny(r, 403, "forbidden", NULL, "Removing an image needs an admin key.");
                return 0;
        }
        return req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, IMAGES_INTERFACE, "RemoveImage", build_remove,
                        on_removed, 0);
}

/* --- POST /v1/images: a build or an import as a job of sandboxd's, answered when it ends ------------- */

/* The job behind one POST. Its signals are matched by the image's name (JobProgress and JobFinished carry
 * it as arg1, and a name has one job at a time) before the call, so none is missed; those that come before
 * the call's answer tells the job's id are held (a JobFinished) or dropped (progress). */
typedef struct ImageJob {
        Request *req;
        char name[65];
        char *job;                  /* once ImportImage/BuildImage answered */
        json_object *body;          /* a build's JSON body */
        int pipe_r, pipe_w;         /* an import: the body goes into pipe_w, ImportImage reads pipe_r */
        sd_event_source *pipe_room; /* pipe_w was full: wakes the body when the job has read some */
        bool is_import, stream, finished;
        sd_bus_slot *match;
        sd_bus_message *early_finished;
} ImageJob;

static void image_job_free(void *p) {
        ImageJob *j = p;

        if (!j)
                return;
        sd_bus_slot_unref(j->match);
        sd_bus_message_unref(j->early_finished);
        sd_event_source_disable_unref(j->pipe_room);
        safe_close(j->pipe_r);
        safe_close(j->pipe_w);
        json_object_put(j->body);
        free(j->job);
        free(j);
}

/* The same rule as sandboxd's (it says so again), checked here first: the name goes into a match rule. */
static bool image_name_ok(const char *n) {
        size_t l = strlen(n);

        if (l == 0 || l > 64 || n[0] == '.' || n[0] == '-' || streq(n, "host"))
                return false;
        return strspn(n, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == l;
}

/* CancelJob answered: the body's pipe, held open until now (its end would have made the job fail on a
 * truncated archive rather than end cancelled), goes. */
static int on_cancelled(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        int fd = (int) (intptr_t) userdata - 1;

        if (sd_bus_message_is_method_error(reply, NULL))
                log_msg(LOG_DEBUG, "CancelJob: %s", sd_bus_message_get_error(reply)->message);
        safe_close(fd);
        return 0;
}

/* On the gateway's own connection, as the request may be gone by now. */
static void image_job_cancel(ImageJob *j) {
        Manager *m = j->req->manager;
        int k;

        if (!j->job || j->finished)
                return;
        j->finished = true; /* nothing more for this request */
        j->match = sd_bus_slot_unref(j->match);
        j->pipe_room = sd_event_source_disable_unref(j->pipe_room);
        k = sd_bus_call_method_async(m->signal_bus, NULL, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, IMAGES_INTERFACE,
                                     "CancelJob", on_cancelled, (void *) (intptr_t) (j->pipe_w + 1), "sa{sv}", j->job, 3,
                                     "account_id", "s", strempty(j->req->account_id), "request_id", "s",
                                     j->req->request_id, "source", "s", "agent");
        if (k < 0) {
                log_msg(LOG_WARNING, "Cannot cancel image job %s: %s", j->job, strerror(-k));
                return;
        }
        j->pipe_w = -EBADF; /* on_cancelled's now */
}

static void image_job_on_close(Request *r) {
        ImageJob *j = r->data;

        /* the client left before the end: a job whose id is not known yet is cancelled once it is */
        if (j && !j->finished && j->job)
                image_job_cancel(j);
}

/* The event stream's start, with the job's id as its first event: once the job has started and, for an
 * import, the whole archive is in (an answer begun earlier would end the reading of the body). 0, or a
 * negative errno (answered). */
static int image_job_stream_begin(ImageJob *j) {
        Request *r = j->req;
        json_object *o;
        size_t len;
        int k;

        if (!j->stream || r->sse || !j->job)
                return 0;
        k = req_start_sse(r, 1024);
        if (k < 0) {
                req_reply_errno(r, k);
                return k;
        }
        o = json_object_new_object();
        if (!o)
                return -ENOMEM;
        json_object_object_add(o, "job", json_object_new_string(j->job));
        json_object_object_add(o, "image", json_object_new_string(j->name));
        const char *s = json_text(o, &len);
        (void) sse_send_unbounded(r->sse, NULL, "job", s, len);
        json_object_put(o);
        return 0;
}

static void image_job_fail(ImageJob *j, unsigned status, const char *code, const char *message) {
        Request *r = j->req;

        /* a job that failed before the archive was all in: the rest is read and dropped */
        (void) image_job_stream_begin(j);
        if (j->stream && r->sse) {
                _cleanup_free_ char *body = http_error_body(status, code, message, r->request_id);
                if (body)
                        (void) sse_send_unbounded(r->sse, NULL, "error", body, strlen(body));
                sse_finish(r->sse);
                return;
        }
        req_reply_error(r, status, code, "%s", message);
}

static void on_made_image(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        ImageJob *j = r->data;
        json_object *o;
        int k;

        if (sd_bus_error_is_set(error)) {
                /* removed in the moment between: say what happened */
                unsigned status;
                const char *code;
                http_status_from_bus_error(error->name, &status, &code);
                return image_job_fail(j, status, code, error->message);
        }
        k = image_json(r, reply, &o);
        if (k < 0)
                return image_job_fail(j, 500, "internal", strerror(-k));
        if (j->stream && r->sse) {
                size_t len;
                const char *s = json_text(o, &len);
                (void) sse_send_unbounded(r->sse, NULL, "image", s, len);
                sse_finish(r->sse);
                json_object_put(o);
                return;
        }
        req_reply_json(r, 201, o);
}

static int build_image_name(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        ImageJob *j = r->data;
        return sd_bus_message_append(m, "s", j->name);
}

/* JobFinished of our job: the image object, or the error as the REST error body. */
static void image_job_finished(ImageJob *j, sd_bus_message *msg) {
        const char *job, *image, *result, *error_name, *message;
        Request *r = j->req;
        int k;

        k = sd_bus_message_read(msg, "sssss", &job, &image, &result, &error_name, &message);
        if (k < 0)
                return image_job_fail(j, 502, "upstream_error", "Cannot read the job's end.");
        j->finished = true;
        j->match = sd_bus_slot_unref(j->match);
        if (streq(result, "done")) {
                k = req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, IMAGES_INTERFACE, "GetImage",
                             build_image_name, on_made_image, 0);
                if (k < 0 && k != -EBUSY)
                        image_job_fail(j, 500, "internal", strerror(-k));
                return;
        }
        if (streq(result, "cancelled"))
                return image_job_fail(j, 409, "cancelled", message);
        /* failed: a refused or broken archive is the client's; a full store and a failed build are not */
        if (strstr(message, "No space left on device"))
                return image_job_fail(j, 507, "insufficient_storage", message);
        if (j->is_import)
                return image_job_fail(j, 400, "invalid_image", message);
        image_job_fail(j, 502, "build_failed", message);
}

static int on_job_signal(sd_bus_message *msg, void *userdata, sd_bus_error *ret_error) {
        ImageJob *j = userdata;
        Request *r = j->req;
        const char *job;

        if (j->finished || sd_bus_message_peek_type(msg, NULL, NULL) < 0)
                return 0;
        if (sd_bus_message_read(msg, "s", &job) < 0 || sd_bus_message_rewind(msg, true) < 0)
                return 0;
        if (sd_bus_message_is_signal(msg, IMAGES_INTERFACE, "JobFinished")) {
                if (!j->job) {
                        /* before the call's answer: kept until it says whether this is ours */
                        sd_bus_message_unref(j->early_finished);
                        j->early_finished = sd_bus_message_ref(msg);
                        return 0;
                }
                if (streq(job, j->job))
                        image_job_finished(j, msg);
                return 0;
        }
        if (sd_bus_message_is_signal(msg, IMAGES_INTERFACE, "JobProgress") && j->job && streq(job, j->job) &&
            j->stream && r->sse && !sse_dropped(r->sse)) {
                const char *image, *phase;
                uint64_t done, total;
                json_object *o;
                size_t len;

                if (sd_bus_message_read(msg, "ssstt", &job, &image, &phase, &done, &total) < 0)
                        return 0;
                o = json_object_new_object();
                if (!o)
                        return 0;
                json_object_object_add(o, "job", json_object_new_string(job));
                json_object_object_add(o, "phase", json_object_new_string(phase));
                json_object_object_add(o, "done", json_object_new_uint64(done));
                json_object_object_add(o, "total", json_object_new_uint64(total));
                const char *s = json_text(o, &len);
                /* progress may be dropped for a slow reader (the stream is bounded); the end is not */
                (void) sse_send(r->sse, NULL, "progress", s, len);
                json_object_put(o);
        }
        return 0;
}

static void on_job_started(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        ImageJob *j = r->data;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *early = NULL;
        const char *job;
        int k;

        early = TAKE_PTR(j->early_finished);
        j->pipe_r = safe_close(j->pipe_r); /* the call has its copy */
        if (sd_bus_error_is_set(error)) {
                j->finished = true;
                j->match = sd_bus_slot_unref(j->match);
                return req_reply_bus_error(r, error);
        }
        k = sd_bus_message_read(reply, "s", &job);
        if (k < 0)
                return req_reply_errno(r, k);
        j->job = strdup(job);
        if (!j->job)
                return req_reply_errno(r, -ENOMEM);
        if (r->closed) {
                /* the client left while the job was being started */
                image_job_cancel(j);
                return;
        }
        if ((!j->is_import || r->body_ended) && image_job_stream_begin(j) < 0)
                return;
        if (early) {
                const char *ejob;
                if (sd_bus_message_read(early, "s", &ejob) >= 0 && streq(ejob, j->job) &&
                    sd_bus_message_rewind(early, true) >= 0)
                        image_job_finished(j, early);
        }
}

/* The caller context as the last entries of an open a{sv} of options, which it closes. */
static int options_close_with_context(Request *r, sd_bus_message *m) {
        int k = sd_bus_message_append(m, "{sv}{sv}{sv}", "account_id", "s", strempty(r->account_id), "request_id",
                                      "s", r->request_id, "source", "s", "agent");
        if (k >= 0)
                k = sd_bus_message_close_container(m);
        return k;
}

static int build_import(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        ImageJob *j = r->data;
        const char *format = req_query(r, "format"), *tag = req_query(r, "tag");
        int k;

        k = sd_bus_message_append(m, "sh", j->name, j->pipe_r);
        if (k >= 0)
                k = sd_bus_message_open_container(m, 'a', "{sv}");
        if (k >= 0 && format)
                k = sd_bus_message_append(m, "{sv}", "format", "s", format);
        if (k >= 0 && tag)
                k = sd_bus_message_append(m, "{sv}", "tag", "s", tag);
        if (k >= 0)
                k = options_close_with_context(r, m);
        return k;
}

static int build_build(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        ImageJob *j = r->data;
        json_object *b = NULL, *pkgs = NULL;
        const char *v;
        int k;

        (void) json_object_object_get_ex(j->body, "build", &b);
        k = sd_bus_message_append(m, "s", j->name);
        if (k >= 0)
                k = sd_bus_message_open_container(m, 'a', "{sv}");
        if (k >= 0 && b && (v = json_get_string(b, "suite")))
                k = sd_bus_message_append(m, "{sv}", "suite", "s", v);
        if (k >= 0 && b && (v = json_get_string(b, "variant")))
                k = sd_bus_message_append(m, "{sv}", "variant", "s", v);
        if (k >= 0 && b && json_object_object_get_ex(b, "packages", &pkgs)) {
                k = sd_bus_message_open_container(m, 'e', "sv");
                if (k >= 0)
                        k = sd_bus_message_append(m, "s", "packages");
                if (k >= 0)
                        k = sd_bus_message_open_container(m, 'v', "as");
                if (k >= 0)
                        k = sd_bus_message_open_container(m, 'a', "s");
                for (size_t i = 0; k >= 0 && i < json_object_array_length(pkgs); i++)
                        k = sd_bus_message_append(m, "s",
                                                  json_object_get_string(json_object_array_get_idx(pkgs, i)));
                for (int i = 0; k >= 0 && i < 3; i++)
                        k = sd_bus_message_close_container(m);
        }
        if (k >= 0)
                k = options_close_with_context(r, m);
        return k;
}

static const JsonField build_fields[] = {
        { "suite", JSON_FIELD_STRING },
        { "variant", JSON_FIELD_STRING },
        { "packages", JSON_FIELD_STRV },
};

static const JsonField create_fields[] = {
        { "name", JSON_FIELD_STRING, true },
        { "build", JSON_FIELD_OBJECT, true, build_fields, ELEMENTSOF(build_fields) },
};

static bool wants_events(Request *r) {
        const char *accept = req_header(r, "Accept");
        return accept && strstr(accept, "text/event-stream");
}

bool route_image_create_authorize(Request *r) {
        /* refusals are recorded as what was asked for: sandboxd's operations */
        r->deny_operation = req_query(r, "name") ? "image.import" : "image.build";
        if (!api_key_allows(r->key, r->match.route->action, NULL)) {
                req_deny(r, 403, "forbidden", r->account_id, "This API key lacks the action '%s'.",
                         gateway_action_to_string(r->match.route->action));
                return false;
        }
        if (r->key->role != KEY_ROLE_ADMIN) {
                req_deny(r, 403, "forbidden", NULL, "Building or importing an image needs an admin key.");
                return false;
        }
        return true;
}

static int on_pipe_room(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ImageJob *j = userdata;

        j->pipe_room = sd_event_source_disable_unref(j->pipe_room);
        req_body_resume(j->req);
        return 0;
}

/* The archive into the job's pipe as it comes, as much as the pipe takes now: the client is paused (and
 * TCP holds it back) while the job has not read what came before. */
static size_t image_body_sink(Request *r, const char *data, size_t size) {
        ImageJob *j = r->data;
        size_t done = 0;

        if (!data) {
                /* the whole archive is in: the job sees its end, the events may begin */
                j->pipe_w = safe_close(j->pipe_w);
                if (!j->finished)
                        (void) image_job_stream_begin(j);
                return 0;
        }
        while (j->pipe_w >= 0 && done < size) {
                ssize_t n = write(j->pipe_w, data + done, size - done);
                if (n > 0) {
                        done += (size_t) n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN) {
                        if (!j->pipe_room && sd_event_add_io(r->manager->event, &j->pipe_room, j->pipe_w, EPOLLOUT,
                                                             on_pipe_room, j) < 0)
                                break;
                        return done;
                }
                /* the job stopped reading (it failed or was cancelled: its JobFinished says so); the rest
                 * of the body is read and dropped */
                j->pipe_w = safe_close(j->pipe_w);
        }
        return size;
}

int route_image_create(Request *r) {
        const char *name = req_query(r, "name");
        _cleanup_free_ char *match = NULL;
        json_object *body = NULL;
        ImageJob *j;
        int k;

        if (name) {
                const char *cl = req_header(r, "Content-Length");
                if (cl && streq(cl, "0")) {
                        req_reply_error(r, 400, "invalid_request",
                                        "An import's body is the archive (a tar, oci-archive or docker-archive); "
                                        "this one is empty.");
                        return 0;
                }
        } else {
                k = req_parse_json(r, create_fields, ELEMENTSOF(create_fields), &body);
                if (k < 0)
                        return 0;
                name = json_get_string(body, "name");
        }
        if (!image_name_ok(name)) {
                json_object_put(body);
                req_reply_error(r, 400, "invalid_request",
                                "Invalid image name '%s': 1-64 characters of A-Z a-z 0-9 . _ -, not starting with "
                                ". or -, and not \"host\".", name);
                return 0;
        }
        j = calloc(1, sizeof(ImageJob));
        if (!j) {
                json_object_put(body);
                return -ENOMEM;
        }
        j->req = r;
        j->body = body;
        j->pipe_r = j->pipe_w = -EBADF;
        j->is_import = !body;
        snprintf(j->name, sizeof(j->name), "%s", name);
        r->data = j;
        r->data_free = image_job_free;
        r->on_close = image_job_on_close;

        j->stream = wants_events(r);
        if (j->stream) {
                k = req_stream_acquire(r);
                if (k < 0)
                        return k == -EBUSY ? 0 : k; /* -EBUSY: answered 429 */
        }
        if (asprintf(&match,
                     "type='signal',sender='" SANDBOXD_BUS_NAME "',path='" SANDBOXD_BUS_PATH "',interface='"
                     IMAGES_INTERFACE "',arg1='%s'", j->name) < 0)
                return -ENOMEM;
        k = sd_bus_add_match(r->manager->signal_bus, &j->match, match, on_job_signal, j);
        if (k < 0)
                return k;
        if (j->is_import) {
                int fds[2];
                if (pipe2(fds, O_CLOEXEC) < 0)
                        return -errno;
                j->pipe_r = fds[0];
                j->pipe_w = fds[1];
                if (fcntl(j->pipe_w, F_SETFL, O_NONBLOCK) < 0)
                        return -errno;
                r->body_sink = image_body_sink;
        }
        k = req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, IMAGES_INTERFACE,
                     j->is_import ? "ImportImage" : "BuildImage", j->is_import ? build_import : build_build,
                     on_job_started, 0);
        return k == -EBUSY ? 0 : k; /* -EBUSY: answered 429 */
}
