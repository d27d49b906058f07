/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Routes of sandboxd's image store (issue 24): GET /v1/images, GET and DELETE /v1/images/{name}. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bus-fields.h"
#include "gatewayd-routes.h"

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

static void on_get(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        json_object *o;
        int k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        o = json_object_new_object();
        if (!o)
                return req_reply_errno(r, -ENOMEM);
        r->data = o;
        k = bus_foreach_sv(reply, image_field, r, NULL);
        r->data = NULL;
        if (k < 0) {
                json_object_put(o);
                return req_reply_errno(r, k);
        }
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
