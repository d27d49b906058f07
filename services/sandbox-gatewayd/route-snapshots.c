/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Routes of snapshots (issue 26): take one of a sandbox, list them, one, remove one, as sandboxd calls. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway-auth.h"
#include "gatewayd-routes.h"
#include "time-util.h"

/* A snapshot is long at worst (a copy of the sandbox's disk, while it is frozen). */
#define SNAPSHOT_CALL_USEC (30 * USEC_PER_MINUTE)

/* One row of ListSnapshots as the API's object; NULL on ENOMEM. */
static json_object *snapshot_json(const char *id, const char *name, const char *source, const char *type,
                                  const char *owner, uint64_t created_at, uint64_t size, const char *image) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "id", json_object_new_string(id));
        json_object_object_add(o, "name", json_object_new_string(name));
        json_object_object_add(o, "source", json_object_new_string(source));
        json_object_object_add(o, "type", json_object_new_string(type));
        json_object_object_add(o, "image", json_object_new_string(image));
        json_object_object_add(o, "owner", json_object_new_string(owner));
        json_object_object_add(o, "created_at", json_time(created_at));
        json_object_object_add(o, "size", json_object_new_uint64(size));
        return o;
}

typedef struct SnapshotQuery {
        char *want;      /* one snapshot's id or name; NULL: all */
        unsigned status; /* of the answer */
        bool remove;     /* DELETE: found and allowed, then RemoveSnapshot */
} SnapshotQuery;

static void query_free(void *p) {
        SnapshotQuery *q = p;
        if (!q)
                return;
        free(q->want);
        free(q);
}

static int build_remove(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        SnapshotQuery *q = r->data;
        int k;

        k = sd_bus_message_append(m, "s", q->want);
        if (k < 0)
                return k;
        return req_append_context(r, m);
}

static void on_removed(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        req_reply_empty(r, 204);
}

/* The list, each snapshot only where the key may read its source sandbox; or the one asked for. */
static void on_list(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        SnapshotQuery *q = r->data;
        json_object *list, *one = NULL;
        int k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        list = json_object_new_array();
        if (!list)
                return req_reply_errno(r, -ENOMEM);
        k = sd_bus_message_enter_container(reply, 'a', "(ssssstts)");
        while (k >= 0) {
                const char *id, *name, *source, *type, *owner, *image;
                uint64_t created, size;

                k = sd_bus_message_read(reply, "(ssssstts)", &id, &name, &source, &type, &owner, &created,
                                        &size, &image);
                if (k <= 0)
                        break;
                if (!api_key_allows(r->key, GATEWAY_ACTION_SNAPSHOT_READ, source))
                        continue;
                if (q->want && !streq(q->want, id) && !streq(q->want, name))
                        continue;
                json_object *o = snapshot_json(id, name, source, type, owner, created, size, image);
                if (!o) {
                        k = -ENOMEM;
                        break;
                }
                if (q->want && !one)
                        one = json_object_get(o);
                json_object_array_add(list, o);
        }
        if (k < 0) {
                json_object_put(list);
                json_object_put(one);
                return req_reply_errno(r, k);
        }
        if (q->want) {
                json_object_put(list);
                if (!one)
                        return req_reply_error(r, 404, "not_found", "No snapshot '%s'.", q->want);
                if (q->remove) {
                        /* sandbox.delete's rule for a scoped key: its scope must hold the source */
                        const char *source = json_object_get_string(json_object_object_get(one, "source"));
                        bool allowed = api_key_allows(r->key, GATEWAY_ACTION_SNAPSHOT_DELETE, source);
                        /* by id from here: a name could be taken again meanwhile */
                        free(q->want);
                        q->want = strdup(json_object_get_string(json_object_object_get(one, "id")));
                        json_object_put(one);
                        if (!allowed)
                                return req_deny(r, 403, "forbidden", NULL,
                                                "This API key may not remove snapshots of that sandbox.");
                        if (!q->want)
                                return req_reply_errno(r, -ENOMEM);
                        k = req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                                     "RemoveSnapshot", build_remove, on_removed, 0);
                        if (k < 0)
                                req_reply_errno(r, k);
                        return;
                }
                return req_reply_json(r, q->status, one);
        }
        json_object *top = json_object_new_object();
        if (!top) {
                json_object_put(list);
                return req_reply_errno(r, -ENOMEM);
        }
        json_object_object_add(top, "snapshots", list);
        req_reply_json(r, 200, top);
}

static int query_start(Request *r, const char *want, unsigned status, bool remove) {
        SnapshotQuery *q = calloc(1, sizeof(SnapshotQuery));

        if (!q)
                return -ENOMEM;
        q->status = status;
        q->remove = remove;
        if (want && !(q->want = strdup(want))) {
                free(q);
                return -ENOMEM;
        }
        r->data = q;
        r->data_free = query_free;
        return req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "ListSnapshots",
                        NULL, on_list, 0);
}

int route_snapshot_list(Request *r) {
        return query_start(r, NULL, 200, false);
}

int route_snapshot_get(Request *r) {
        return query_start(r, req_param(r, 0), 200, false);
}

int route_snapshot_delete(Request *r) {
        return query_start(r, req_param(r, 0), 204, true);
}

/* --- POST /v1/sandboxes/{id}/snapshots: SnapshotSandbox, then the object ------------------------ */

static const JsonField take_fields[] = {
        {"name", JSON_FIELD_STRING},
};

typedef struct Take {
        SnapshotQuery query; /* first: the lookup after the call uses r->data as a SnapshotQuery */
        json_object *body;
} Take;

static void take_free(void *p) {
        Take *t = p;
        if (!t)
                return;
        free(t->query.want);
        json_object_put(t->body);
        free(t);
}

static int build_take(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        Take *t = r->data;
        int k;

        k = sd_bus_message_append(m, "ss", req_param(r, 0), strempty(json_get_string(t->body, "name")));
        if (k < 0)
                return k;
        return req_append_context(r, m);
}

static void on_taken(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        Take *t = r->data;
        const char *id;
        int k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        k = sd_bus_message_read(reply, "s", &id);
        if (k < 0)
                return req_reply_errno(r, k);
        t->query.want = strdup(id);
        if (!t->query.want)
                return req_reply_errno(r, -ENOMEM);
        k = req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "ListSnapshots",
                     NULL, on_list, 0);
        if (k < 0)
                req_reply_errno(r, k);
}

int route_snapshot_take(Request *r) {
        json_object *body;
        Take *t;
        int k;

        k = req_parse_json(r, take_fields, ELEMENTSOF(take_fields), &body);
        if (k < 0)
                return 0;
        t = calloc(1, sizeof(Take));
        if (!t) {
                json_object_put(body);
                return -ENOMEM;
        }
        t->body = body;
        t->query.status = 201;
        r->data = t;
        r->data_free = take_free;
        return req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                        "SnapshotSandbox", build_take, on_taken, SNAPSHOT_CALL_USEC);
}
