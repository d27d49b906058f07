/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Routes of sandboxes: create, list, get, update (TTL), delete (also delete-own), as sandboxd calls. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus-fields.h"
#include "gatewayd-routes.h"
#include "sandbox-id.h"
#include "time-util.h"

/* The sandbox object's properties as GetAll gives them; the others are skipped. */
typedef struct SandboxProps {
        const char *id, *name, *type, *state, *network, *owner, *egress_address, *image;
        uint64_t created_at, expires_at;
        int paused;                 /* issue 26: Paused, PausedAt */
        uint64_t paused_at;
        json_object *egress_policy; /* {"default","allow","deny"}, built from EgressPolicy */
        uint64_t egress_counters[4]; /* EgressCounters: allowed packets, bytes, denied packets, bytes */
} SandboxProps;

/* An "as" in a variant, appended to the JSON array a. */
static int read_strv_variant(sd_bus_message *reply, json_object *a) {
        const char *s;
        int k;

        k = sd_bus_message_enter_container(reply, 'v', "as");
        if (k < 0)
                return k;
        k = sd_bus_message_enter_container(reply, 'a', "s");
        if (k < 0)
                return k;
        while ((k = sd_bus_message_read(reply, "s", &s)) > 0)
                if (json_object_array_add(a, json_object_new_string(s)) < 0)
                        return -ENOMEM;
        if (k < 0)
                return k;
        k = sd_bus_message_exit_container(reply);
        if (k < 0)
                return k;
        return sd_bus_message_exit_container(reply);
}

/* One entry of EgressPolicy: default s, allow as, deny as (what sandboxd may add later is skipped). */
static int egress_policy_prop(const char *key, sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        json_object *policy = userdata;
        const char *s;
        int k;

        if (streq(key, "default")) {
                k = sd_bus_message_read(reply, "v", "s", &s);
                if (k < 0)
                        return k;
                json_object_object_add(policy, "default", json_object_new_string(s));
                return 0;
        }
        if (streq(key, "allow") || streq(key, "deny"))
                return read_strv_variant(reply, json_object_object_get(policy, key));
        return sd_bus_message_skip(reply, "v");
}

static int read_egress_policy(sd_bus_message *reply, json_object **ret) {
        json_object *policy;
        int k;

        policy = json_object_new_object();
        if (!policy)
                return -ENOMEM;
        json_object_object_add(policy, "default", json_object_new_string("deny"));
        json_object_object_add(policy, "allow", json_object_new_array());
        json_object_object_add(policy, "deny", json_object_new_array());
        k = sd_bus_message_enter_container(reply, 'v', "a{sv}");
        if (k >= 0)
                k = bus_foreach_sv(reply, egress_policy_prop, policy, NULL);
        if (k >= 0)
                k = sd_bus_message_exit_container(reply);
        if (k < 0) {
                json_object_put(policy);
                return k;
        }
        json_object_put(*ret);
        *ret = policy;
        return 0;
}

static int sandbox_prop(const char *key, sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        SandboxProps *p = userdata;
        const char **sp = NULL;
        uint64_t *tp = NULL;

        if (streq(key, "Id"))
                sp = &p->id;
        else if (streq(key, "Name"))
                sp = &p->name;
        else if (streq(key, "Type"))
                sp = &p->type;
        else if (streq(key, "State"))
                sp = &p->state;
        else if (streq(key, "Network"))
                sp = &p->network;
        else if (streq(key, "Owner"))
                sp = &p->owner;
        else if (streq(key, "Image"))
                sp = &p->image;
        else if (streq(key, "EgressAddress"))
                sp = &p->egress_address;
        else if (streq(key, "CreatedAt"))
                tp = &p->created_at;
        else if (streq(key, "ExpiresAt"))
                tp = &p->expires_at;
        else if (streq(key, "PausedAt"))
                tp = &p->paused_at;
        else if (streq(key, "Paused"))
                return sd_bus_message_read(reply, "v", "b", &p->paused);
        else if (streq(key, "EgressPolicy"))
                return read_egress_policy(reply, &p->egress_policy);
        else if (streq(key, "EgressCounters"))
                return sd_bus_message_read(reply, "v", "(tttt)", &p->egress_counters[0],
                                           &p->egress_counters[1], &p->egress_counters[2],
                                           &p->egress_counters[3]);
        if (sp)
                return sd_bus_message_read(reply, "v", "s", sp);
        if (tp)
                return sd_bus_message_read(reply, "v", "t", tp);
        return sd_bus_message_skip(reply, "v");
}

/* "egress": the address and the firewall's counters, or null for the other networks. */
static json_object *egress_json(const SandboxProps *p) {
        json_object *e, *c;

        e = json_object_new_object();
        c = json_object_new_object();
        if (!e || !c) {
                json_object_put(e);
                json_object_put(c);
                return NULL;
        }
        json_object_object_add(c, "allowed_packets", json_object_new_uint64(p->egress_counters[0]));
        json_object_object_add(c, "allowed_bytes", json_object_new_uint64(p->egress_counters[1]));
        json_object_object_add(c, "denied_packets", json_object_new_uint64(p->egress_counters[2]));
        json_object_object_add(c, "denied_bytes", json_object_new_uint64(p->egress_counters[3]));
        json_object_object_add(e, "address", json_object_new_string(p->egress_address));
        json_object_object_add(e, "counters", c);
        return e;
}

int sandbox_json_from_properties(Manager *m, sd_bus_message *reply, json_object **ret) {
        SandboxProps p = { .id = "", .name = "", .type = "", .state = "", .network = "", .owner = "",
                           .egress_address = "", .image = "host" };
        json_object *o, *limits;
        bool egress;
        int r;

        r = bus_foreach_sv(reply, sandbox_prop, &p, NULL);
        if (r < 0) {
                json_object_put(p.egress_policy);
                return r;
        }

        o = json_object_new_object();
        if (!o) {
                json_object_put(p.egress_policy);
                return -ENOMEM;
        }
        json_object_object_add(o, "id", json_object_new_string(p.id));
        json_object_object_add(o, "name", json_object_new_string(p.name));
        json_object_object_add(o, "type", json_object_new_string(p.type));
        json_object_object_add(o, "state", json_object_new_string(p.state));
        json_object_object_add(o, "network", json_object_new_string(p.network));
        json_object_object_add(o, "image", json_object_new_string(p.image)); /* issue 24 */
        /* The policy and the counters mean something for network egress only: null for the others. */
        egress = streq(p.network, "egress");
        json_object_object_add(o, "egress_policy", egress ? TAKE_PTR(p.egress_policy) : NULL);
        json_object_object_add(o, "egress", egress ? egress_json(&p) : NULL);
        json_object_put(p.egress_policy);
        json_object_object_add(o, "owner", json_object_new_string(p.owner));
        json_object_object_add(o, "created_at", json_time(p.created_at));
        json_object_object_add(o, "expires_at", json_time(p.expires_at));
        json_object_object_add(o, "paused", json_object_new_boolean(p.paused));
        json_object_object_add(o, "paused_at", p.paused_at > 0 ? json_time(p.paused_at) : NULL);
        const SandboxType *t = sandboxd_config_find_type(&m->sandboxd, p.type);
        if (t) {
                limits = json_object_new_object();
                json_object_object_add(limits, "cpu_quota_percent", json_object_new_int64(t->cpu_quota_percent));
                json_object_object_add(limits, "memory_max", json_object_new_uint64(t->memory_max));
                json_object_object_add(limits, "tasks_max", json_object_new_uint64(t->tasks_max));
                json_object_object_add(limits, "disk_max",
                                       t->disk_max > 0 ? json_object_new_uint64(t->disk_max) : NULL);
                json_object_object_add(limits, "timeout_seconds_default",
                                       json_object_new_uint64(t->default_timeout_usec / USEC_PER_SEC));
                json_object_object_add(limits, "timeout_seconds_max",
                                       json_object_new_uint64(t->max_timeout_usec / USEC_PER_SEC));
                json_object_object_add(o, "limits", limits);
        } else
                json_object_object_add(o, "limits", NULL);
        *ret = o;
        return 0;
}

/* --- fetching one sandbox: GetSandbox → Properties.GetAll → the object ------------------------- */

typedef struct Fetch {
        unsigned status;  /* of the answer */
        char *path;
        void (*then)(Request *r, json_object *sandbox); /* instead of answering, if set */
} Fetch;

static void fetch_free(void *p) {
        Fetch *f = p;
        if (!f)
                return;
        free(f->path);
        free(f);
}

static int build_getall(sd_bus_message *m, void *userdata) {
        return sd_bus_message_append(m, "s", SANDBOXD_SANDBOX_INTERFACE);
}

static void on_getall(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        Fetch *f = r->data;
        json_object *o = NULL;
        int k;

        if (sd_bus_error_is_set(error)) {
                /* the object went away between the two calls: it is gone */
                if (streq_ptr(error->name, "org.freedesktop.DBus.Error.UnknownObject") ||
                    streq_ptr(error->name, "org.freedesktop.DBus.Error.UnknownInterface"))
                        return req_reply_error(r, 404, "not_found", "Sandbox %s does not exist.", req_param(r, 0));
                return req_reply_bus_error(r, error);
        }
        k = sandbox_json_from_properties(r->manager, reply, &o);
        if (k < 0)
                return req_reply_errno(r, k);
        if (f->then)
                return f->then(r, o);
        req_reply_json(r, f->status, o);
}

static int fetch_by_path(Request *r, const char *path) {
        Fetch *f = r->data;
        int k;

        free(f->path);
        f->path = strdup(path);
        if (!f->path)
                return -ENOMEM;
        k = req_call(r, SANDBOXD_BUS_NAME, f->path, "org.freedesktop.DBus.Properties", "GetAll",
                     build_getall, on_getall, 0);
        return k;
}

static void on_get_sandbox(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        const char *path;
        int k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        k = sd_bus_message_read(reply, "o", &path);
        if (k >= 0)
                k = fetch_by_path(r, path);
        if (k < 0)
                req_reply_errno(r, k);
}

static int build_id(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        return sd_bus_message_append(m, "s", req_param(r, 0));
}

static int fetch_start(Request *r, unsigned status, void (*then)(Request *r, json_object *sandbox)) {
        Fetch *f;

        f = calloc(1, sizeof(Fetch));
        if (!f)
                return -ENOMEM;
        f->status = status;
        f->then = then;
        r->data = f;
        r->data_free = fetch_free;
        return req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "GetSandbox",
                        build_id, on_get_sandbox, 0);
}

int route_sandbox_get(Request *r) {
        return fetch_start(r, 200, NULL);
}

/* --- an egress policy: JSON in, CreateSandbox's egress_policy a{sv} out ------------------------- */

/* The types only: sandboxd checks the values (default, each entry, the limits) and its InvalidArgs
 * message, which names the entry and what is wrong with it, becomes the 400's. */
static const JsonField egress_policy_fields[] = {
        { "default", JSON_FIELD_STRING },
        { "allow", JSON_FIELD_STRV },
        { "deny", JSON_FIELD_STRV },
};

#define EGRESS_POLICY_FIELD(req)                                                                            \
        { "egress_policy", JSON_FIELD_OBJECT, .required = (req), .fields = egress_policy_fields,          \
          .n_fields = ELEMENTSOF(egress_policy_fields) }

static int append_strv_entry(sd_bus_message *m, json_object *policy, const char *key) {
        json_object *a;
        int k;

        if (!json_object_object_get_ex(policy, key, &a))
                return 0;
        k = sd_bus_message_open_container(m, 'e', "sv");
        if (k >= 0)
                k = sd_bus_message_append(m, "s", key);
        if (k >= 0)
                k = sd_bus_message_open_container(m, 'v', "as");
        if (k >= 0)
                k = sd_bus_message_open_container(m, 'a', "s");
        for (size_t i = 0; k >= 0 && i < json_object_array_length(a); i++)
                k = sd_bus_message_append(m, "s", json_object_get_string(json_object_array_get_idx(a, i)));
        if (k >= 0)
                k = sd_bus_message_close_container(m);
        if (k >= 0)
                k = sd_bus_message_close_container(m);
        if (k >= 0)
                k = sd_bus_message_close_container(m);
        return k;
}

/* The checked JSON object (egress_policy_fields) as an a{sv} of only the keys it has, as sandboxd
 * takes it: what is left out is sandboxd's default. */
static int append_egress_policy(sd_bus_message *m, json_object *policy) {
        const char *d;
        int k;

        k = sd_bus_message_open_container(m, 'a', "{sv}");
        if (k >= 0 && (d = json_get_string(policy, "default")))
                k = sd_bus_message_append(m, "{sv}", "default", "s", d);
        if (k >= 0)
                k = append_strv_entry(m, policy, "allow");
        if (k >= 0)
                k = append_strv_entry(m, policy, "deny");
        if (k < 0)
                return k;
        return sd_bus_message_close_container(m);
}

/* --- create ------------------------------------------------------------------------------------- */

static const JsonField create_fields[] = {
        { "name", JSON_FIELD_STRING },
        { "type", JSON_FIELD_STRING },
        { "ttl_seconds", JSON_FIELD_UINT },
        { "network", JSON_FIELD_STRING },
        { "image", JSON_FIELD_STRING },
        EGRESS_POLICY_FIELD(false),
        { "snapshot", JSON_FIELD_STRING }, /* issue 26: its disk a copy of this snapshot's */
};

typedef struct Create {
        Fetch fetch; /* first: the fetch after the create uses r->data as a Fetch */
        json_object *body;
        Manager *manager;
        char *account;        /* the key's, counted against MaxSandboxesPerKey= while this is in flight */
        uint64_t ticket;
        bool checked, ended;
} Create;

static void create_end(Create *c, const char *id) {
        if (!c->account || c->ended)
                return;
        sandbox_quota_end(c->manager->sandbox_quota, c->account, c->checked, id);
        c->ended = true;
}

static void create_free(void *p) {
        Create *c = p;
        if (!c)
                return;
        create_end(c, NULL);
        free(c->account);
        free(c->fetch.path);
        json_object_put(c->body);
        free(c);
}

static int build_create(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        Create *c = r->data;
        json_object *policy;
        const char *s;
        int k;

        k = sd_bus_message_open_container(m, 'a', "{sv}");
        if (k < 0)
                return k;
        if ((s = json_get_string(c->body, "name")))
                k = sd_bus_message_append(m, "{sv}", "name", "s", s);
        if (k >= 0 && (s = json_get_string(c->body, "type")))
                k = sd_bus_message_append(m, "{sv}", "type", "s", s);
        if (k >= 0 && (s = json_get_string(c->body, "network")))
                k = sd_bus_message_append(m, "{sv}", "network", "s", s);
        if (k >= 0 && (s = json_get_string(c->body, "image")))
                k = sd_bus_message_append(m, "{sv}", "image", "s", s);
        if (k >= 0 && (s = json_get_string(c->body, "snapshot")))
                k = sd_bus_message_append(m, "{sv}", "snapshot", "s", s);
        if (k >= 0 && json_object_object_get_ex(c->body, "ttl_seconds", NULL))
                k = sd_bus_message_append(m, "{sv}", "ttl_seconds", "t", json_get_uint(c->body, "ttl_seconds"));
        if (k >= 0 && json_object_object_get_ex(c->body, "egress_policy", &policy)) {
                k = sd_bus_message_open_container(m, 'e', "sv");
                if (k >= 0)
                        k = sd_bus_message_append(m, "s", "egress_policy");
                if (k >= 0)
                        k = sd_bus_message_open_container(m, 'v', "a{sv}");
                if (k >= 0)
                        k = append_egress_policy(m, policy);
                if (k >= 0)
                        k = sd_bus_message_close_container(m);
                if (k >= 0)
                        k = sd_bus_message_close_container(m);
        }
        if (k >= 0)
                k = sd_bus_message_append(m, "{sv}{sv}{sv}", "account_id", "s", r->account_id, "request_id", "s",
                                          r->request_id, "source", "s", "agent");
        if (k < 0)
                return k;
        return sd_bus_message_close_container(m);
}

static void on_created(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        const char *id, *path;
        int k;

        if (sd_bus_error_is_set(error)) {
                create_end(r->data, NULL);
                return req_reply_bus_error(r, error);
        }
        k = sd_bus_message_read(reply, "so", &id, &path);
        create_end(r->data, k >= 0 ? id : NULL);
        if (k >= 0)
                k = fetch_by_path(r, path);
        if (k < 0)
                req_reply_errno(r, k);
}

/* ListSandboxes answered: the key's sandboxes, counted with its creations in flight, must leave room
 * for this one (MaxSandboxesPerKey=). */
static void on_quota_list(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        Create *c = r->data;
        const char **owned = NULL;
        size_t n_owned = 0, allocated = 0;
        uint64_t max = r->manager->config.max_sandboxes_per_key, count = 0;
        int k;

        if (sd_bus_error_is_set(error)) {
                create_end(c, NULL);
                return req_reply_bus_error(r, error);
        }
        k = sd_bus_message_enter_container(reply, 'a', "(ssssso)");
        while (k >= 0) {
                const char *id, *owner;
                k = sd_bus_message_read(reply, "(ssssso)", &id, NULL, NULL, NULL, &owner, NULL);
                if (k <= 0)
                        break;
                if (!streq(owner, c->account))
                        continue;
                if (n_owned == allocated) {
                        size_t a = allocated ? allocated * 2 : 16;
                        const char **n = reallocarray(owned, a, sizeof(char *));
                        if (!n) {
                                k = -ENOMEM;
                                break;
                        }
                        owned = n;
                        allocated = a;
                }
                owned[n_owned++] = id;
        }
        if (k < 0) {
                free(owned);
                create_end(c, NULL);
                return req_reply_errno(r, k);
        }
        k = sandbox_quota_check(r->manager->sandbox_quota, c->account, c->ticket, owned, n_owned, max,
                                &count);
        free(owned);
        c->checked = true;
        if (k == -EDQUOT) {
                create_end(c, NULL);
                return req_reply_error(r, 429, "too_many_sandboxes",
                                       "This API key has %" PRIu64 " sandboxes (or is creating them); "
                                       "at most %" PRIu64 " are allowed (MaxSandboxesPerKey=).",
                                       count, max);
        }
        k = req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "CreateSandbox",
                     build_create, on_created, 0);
        if (k < 0) {
                create_end(c, NULL);
                req_reply_errno(r, k);
        }
}

int route_sandbox_create(Request *r) {
        Create *c;
        json_object *body;
        int k;

        k = req_parse_json(r, create_fields, ELEMENTSOF(create_fields), &body);
        if (k < 0)
                return 0;
        if (json_object_object_get_ex(body, "ttl_seconds", NULL) && json_get_uint(body, "ttl_seconds") == 0) {
                json_object_put(body);
                req_reply_error(r, 400, "invalid_request", "Field 'ttl_seconds' must be at least 1.");
                return 0;
        }
        /* Issue 26: a snapshot's files are its source sandbox's: only a key that may read every sandbox's
         * snapshots may start a sandbox from one. */
        if (json_get_string(body, "snapshot") &&
            (!api_key_allows(r->key, GATEWAY_ACTION_SNAPSHOT_READ, NULL) || (r->key && r->key->sandboxes))) {
                json_object_put(body);
                req_deny(r, 403, "forbidden", NULL,
                         "Creating a sandbox from a snapshot needs snapshot.read on every sandbox (a key not "
                         "scoped to some).");
                return 0;
        }
        c = calloc(1, sizeof(Create));
        if (!c) {
                json_object_put(body);
                return -ENOMEM;
        }
        c->fetch.status = 201;
        c->body = body;
        c->manager = r->manager;
        r->data = c;
        r->data_free = create_free;
        c->account = strdup(r->account_id);
        if (!c->account)
                return -ENOMEM;
        k = sandbox_quota_begin(r->manager->sandbox_quota, c->account, &c->ticket);
        if (k < 0) {
                free(c->account);
                c->account = NULL; /* never begun: nothing to end */
                return k;
        }
        /* Asked after the begin, so that what ends from now on and is not in the list is counted. */
        k = req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "ListSandboxes",
                     NULL, on_quota_list, 0);
        if (k < 0)
                create_end(c, NULL);
        return k;
}

/* --- list: one GetManagedObjects ---------------------------------------------------------------- */

static void on_managed_objects(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        json_object *list, *o;
        int k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        list = json_object_new_array();
        if (!list)
                return req_reply_errno(r, -ENOMEM);

        k = sd_bus_message_enter_container(reply, 'a', "{oa{sa{sv}}}");
        while (k >= 0 && (k = sd_bus_message_enter_container(reply, 'e', "oa{sa{sv}}")) > 0) {
                const char *path;
                k = sd_bus_message_read(reply, "o", &path);
                if (k < 0)
                        break;
                k = sd_bus_message_enter_container(reply, 'a', "{sa{sv}}");
                while (k >= 0 && (k = sd_bus_message_enter_container(reply, 'e', "sa{sv}")) > 0) {
                        const char *iface;
                        k = sd_bus_message_read(reply, "s", &iface);
                        if (k < 0)
                                break;
                        if (streq(iface, SANDBOXD_SANDBOX_INTERFACE)) {
                                k = sandbox_json_from_properties(r->manager, reply, &o);
                                if (k < 0)
                                        break;
                                json_object *id = json_object_object_get(o, "id");
                                if (api_key_allows(r->key, GATEWAY_ACTION_SANDBOX_READ, json_object_get_string(id)))
                                        json_object_array_add(list, o);
                                else
                                        json_object_put(o);
                        } else
                                k = sd_bus_message_skip(reply, "a{sv}");
                        if (k >= 0)
                                k = sd_bus_message_exit_container(reply);
                }
                if (k >= 0)
                        k = sd_bus_message_exit_container(reply);
                if (k >= 0)
                        k = sd_bus_message_exit_container(reply);
        }
        if (k < 0) {
                json_object_put(list);
                return req_reply_errno(r, k);
        }
        o = json_object_new_object();
        json_object_object_add(o, "sandboxes", list);
        req_reply_json(r, 200, o);
}

int route_sandbox_list(Request *r) {
        return req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, "org.freedesktop.DBus.ObjectManager",
                        "GetManagedObjects", NULL, on_managed_objects, 0);
}

/* --- update: SetTTL, then the object ------------------------------------------------------------ */

static const JsonField update_fields[] = {
        { "ttl_seconds", JSON_FIELD_UINT, .required = true },
};

static int build_set_ttl(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        Fetch *f = r->data;
        int k;

        k = sd_bus_message_append(m, "st", req_param(r, 0), (uint64_t) f->status);
        if (k < 0)
                return k;
        return req_append_context(r, m);
}

static void on_ttl_set(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        Fetch *f = r->data;
        int k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        f->status = 200;
        k = req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "GetSandbox",
                     build_id, on_get_sandbox, 0);
        if (k < 0)
                req_reply_errno(r, k);
}

int route_sandbox_update(Request *r) {
        json_object *body;
        uint64_t ttl;
        Fetch *f;
        int k;

        k = req_parse_json(r, update_fields, ELEMENTSOF(update_fields), &body);
        if (k < 0)
                return 0;
        ttl = json_get_uint(body, "ttl_seconds");
        json_object_put(body);
        if (ttl == 0 || ttl > UINT32_MAX) {
                req_reply_error(r, 400, "invalid_request", "Field 'ttl_seconds' must be at least 1.");
                return 0;
        }
        f = calloc(1, sizeof(Fetch));
        if (!f)
                return -ENOMEM;
        f->status = (unsigned) ttl; /* carried to build_set_ttl, then the answer's status */
        r->data = f;
        r->data_free = fetch_free;
        return req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "SetTTL",
                        build_set_ttl, on_ttl_set, 0);
}

/* --- the network policy: SetNetworkPolicy, then the object --------------------------------------- */

static const JsonField network_fields[] = {
        EGRESS_POLICY_FIELD(true),
};

typedef struct SetPolicy {
        Fetch fetch; /* first: the fetch after the call uses r->data as a Fetch */
        json_object *body;
} SetPolicy;

static void set_policy_free(void *p) {
        SetPolicy *sp = p;
        if (!sp)
                return;
        free(sp->fetch.path);
        json_object_put(sp->body);
        free(sp);
}

static int build_set_network_policy(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        SetPolicy *sp = r->data;
        int k;

        k = sd_bus_message_append(m, "s", req_param(r, 0));
        if (k >= 0)
                k = append_egress_policy(m, json_object_object_get(sp->body, "egress_policy"));
        if (k < 0)
                return k;
        return req_append_context(r, m);
}

static void on_network_policy_set(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        int k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        k = req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "GetSandbox",
                     build_id, on_get_sandbox, 0);
        if (k < 0)
                req_reply_errno(r, k);
}

int route_sandbox_network(Request *r) {
        json_object *body;
        SetPolicy *sp;
        int k;

        k = req_parse_json(r, network_fields, ELEMENTSOF(network_fields), &body);
        if (k < 0)
                return 0;
        sp = calloc(1, sizeof(SetPolicy));
        if (!sp) {
                json_object_put(body);
                return -ENOMEM;
        }
        sp->fetch.status = 200;
        sp->body = body;
        r->data = sp;
        r->data_free = set_policy_free;
        return req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                        "SetNetworkPolicy", build_set_network_policy, on_network_policy_set, 0);
}

/* --- delete ------------------------------------------------------------------------------------- */

static int build_delete(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        int k;

        k = sd_bus_message_append(m, "s", req_param(r, 0));
        if (k < 0)
                return k;
        return req_append_context(r, m);
}

static void on_deleted(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        req_reply_empty(r, 204);
}

static void delete_if_own(Request *r, json_object *sandbox) {
        const char *owner = json_object_get_string(json_object_object_get(sandbox, "owner"));
        int k;

        if (!streq_ptr(owner, r->account_id)) {
                json_object_put(sandbox);
                return req_deny(r, 403, "forbidden", NULL,
                                "This API key may delete only the sandboxes it created (sandbox.delete-own).");
        }
        json_object_put(sandbox);
        k = req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "DeleteSandbox",
                     build_delete, on_deleted, 0);
        if (k < 0)
                req_reply_errno(r, k);
}

int route_sandbox_delete(Request *r) {
        if (r->own_only)
                return fetch_start(r, 204, delete_if_own);
        return req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "DeleteSandbox",
                        build_delete, on_deleted, 0);
}

/* --- pause and resume (issue 26): the call, then the object ------------------------------------- */

static int pause_resume(Request *r, const char *method) {
        Fetch *f = calloc(1, sizeof(Fetch));
        if (!f)
                return -ENOMEM;
        r->data = f;
        r->data_free = fetch_free;
        /* on_ttl_set(): after the call, the object with status 200 (f->status is set there) */
        return req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, method, build_delete,
                        on_ttl_set, 0);
}

int route_sandbox_pause(Request *r) {
        return pause_resume(r, "PauseSandbox");
}

int route_sandbox_resume(Request *r) {
        return pause_resume(r, "ResumeSandbox");
}

/* --- a sandbox's name in the path, where the id is needed --------------------------------------- */

static void resolved(Request *r, const sd_bus_error *error) {
        void (*then)(Request *r, const sd_bus_error *error) = r->resolve_then;

        assert(then);

        r->resolve_then = NULL;
        if (r->closed)
                return;
        free(r->data);
        r->data = NULL;
        r->data_free = NULL;
        then(r, error);
}

static void on_id(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        const char *id;
        int k;

        if (sd_bus_error_is_set(error))
                return resolved(r, error);
        k = sd_bus_message_read(reply, "v", "s", &id);
        if (k < 0)
                return req_reply_errno(r, k);
        if (!sandbox_id_is_valid(id))
                return req_reply_error(r, 502, "upstream_error", "sandboxd gave the id '%s'.", id);
        snprintf(r->match.params[0], sizeof(r->match.params[0]), "%s", id);
        resolved(r, NULL);
}

static int build_get_id(sd_bus_message *m, void *userdata) {
        return sd_bus_message_append(m, "ss", SANDBOXD_SANDBOX_INTERFACE, "Id");
}

static void on_path(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        const char *path;
        int k;

        if (sd_bus_error_is_set(error))
                return resolved(r, error);
        k = sd_bus_message_read(reply, "o", &path);
        if (k >= 0) {
                free(r->data);
                r->data = strdup(path);
                r->data_free = free;
                k = r->data ? 0 : -ENOMEM;
        }
        if (k >= 0)
                k = req_call(r, SANDBOXD_BUS_NAME, r->data, "org.freedesktop.DBus.Properties", "Get",
                             build_get_id, on_id, 0);
        if (k < 0)
                req_reply_errno(r, k);
}

int req_resolve_sandbox(Request *r, void (*then)(Request *r, const sd_bus_error *error)) {
        int k;

        assert(r);
        assert(then);

        if (sandbox_id_is_valid(req_param(r, 0)))
                return 0;
        if (!name_is_valid(req_param(r, 0))) {
                /* not a name sandboxd could have given: no need to ask (nor to send it invalid UTF-8) */
                _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
                (void) sd_bus_error_setf(&e, SANDBOXD_ERROR_NO_SUCH_SANDBOX, "Sandbox %s does not exist.",
                                         req_param(r, 0));
                then(r, &e);
                return 1;
        }
        r->resolve_then = then;
        k = req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "GetSandbox",
                     build_id, on_path, 0);
        if (k < 0)
                r->resolve_then = NULL;
        return k < 0 ? k : 1;
}
