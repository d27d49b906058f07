/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* org.sandboxd.gateway1.Keys: CreateKey, ListKeys, RevokeKey for root on the system bus (sandboxctl api-key). */
#include "gatewayd-keys.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bus-fields.h"
#include "macro.h"
#include "sandboxd-bus.h"
#include "time-util.h"

/* Longer than any key could sensibly live, short enough that now + ttl never overflows. */
#define TTL_SECONDS_MAX (UINT64_C(100) * 366 * 24 * 3600)


typedef struct KeysContext {
        KeyStore *store;
        gateway_keys_changed_t on_change;
        void *userdata;
} KeysContext;

static int check_root(sd_bus_message *msg, sd_bus_error *error) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        uid_t uid;
        int r;

        /* From the bus's own record of the sender, not /proc: the policy allows only root as well, this
         * holds even if a policy file is edited. */
        r = sd_bus_query_sender_creds(msg, SD_BUS_CREDS_EUID, &creds);
        if (r < 0)
                return r;
        r = sd_bus_creds_get_euid(creds, &uid);
        if (r < 0)
                return r;
        if (uid != 0)
                return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED,
                                        "Only root may manage the gateway's API keys.");
        return 0;
}

static int key_json_string(const ApiKey *k, char **ret) {
        json_object *o = NULL;
        char *s;
        int r;

        r = api_key_to_json(k, &o);
        if (r < 0)
                return r;
        s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

void key_spec_strings_clear(KeySpecStrings *s) {
        strv_free(s->actions);
        strv_free(s->sandboxes);
}

static const BusField spec_fields[] = {
        { "name", "s" },     { "preset", "s" },     { "role", "s" },
        { "actions", "as" }, { "sandboxes", "as" }, { "ttl_seconds", "t" },
};

typedef struct SpecReader {
        KeySpec *spec;
        KeySpecStrings *strings;
} SpecReader;

static int read_spec_field(size_t f, const char *key, sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        SpecReader *sr = userdata;
        int r;

        if (streq(key, "ttl_seconds")) {
                uint64_t ttl;
                r = sd_bus_message_read(msg, "v", "t", &ttl);
                if (r < 0)
                        return r;
                if (ttl == 0 || ttl > TTL_SECONDS_MAX)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "'ttl_seconds' must be between 1 and %" PRIu64
                                                 " (leave it out for a key that never expires).",
                                                 TTL_SECONDS_MAX);
                sr->spec->ttl_usec = ttl * USEC_PER_SEC;
                return 0;
        }
        if (streq(spec_fields[f].signature, "as")) {
                char ***l = streq(key, "actions") ? &sr->strings->actions : &sr->strings->sandboxes;
                r = sd_bus_message_enter_container(msg, 'v', "as");
                if (r < 0)
                        return r;
                r = sd_bus_message_read_strv(msg, l);
                if (r < 0)
                        return r;
                if (!*l && !(*l = calloc(1, sizeof(char *)))) /* an empty array reads as NULL */
                        return -ENOMEM;
                return sd_bus_message_exit_container(msg);
        }
        const char *v;
        r = sd_bus_message_read(msg, "v", "s", &v);
        if (r < 0)
                return r;
        if (streq(key, "name"))
                sr->spec->name = v;
        else if (streq(key, "preset"))
                sr->spec->preset = v;
        else
                sr->spec->role = v;
        return 0;
}

int gateway_keys_parse_spec(sd_bus_message *msg, KeySpec *spec, KeySpecStrings *strings, sd_bus_error *error) {
        int r;

        r = bus_read_fields(msg, spec_fields, ELEMENTSOF(spec_fields), "Key spec",
                            " (expected name, preset, role, actions, sandboxes, ttl_seconds)", read_spec_field,
                            &(SpecReader) { .spec = spec, .strings = strings }, NULL, error);
        if (r < 0)
                return r;
        spec->actions = strings->actions;
        spec->sandboxes = strings->sandboxes;
        return 0;
}

/* A store failure as a bus error: KeyStoreUnavailable when the shared store cannot be reached. */
static int store_error(sd_bus_error *error, int r, const char *what) {
        if (r == -KEY_STORE_UNAVAILABLE)
                return sd_bus_error_setf(error, GATEWAY_ERROR_KEY_STORE_UNAVAILABLE,
                                         "%s: the key store (PostgreSQL) cannot be reached; nothing was done.", what);
        return sd_bus_error_set_errnof(error, r, "%s: %s", what, strerror(-r));
}

static int method_create_key(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(key_spec_strings_clear) KeySpecStrings strings = {};
        _cleanup_(api_key_freep) ApiKey *k = NULL;
        _cleanup_free_ char *secret = NULL, *why = NULL, *js = NULL;
        KeysContext *c = userdata;
        KeySpec spec = {};
        int r;

        r = check_root(msg, error);
        if (r < 0)
                return r;
        r = gateway_keys_parse_spec(msg, &spec, &strings, error);
        if (r < 0)
                return r;

        r = key_store_create(c->store, &spec, NULL, "root", now_usec(CLOCK_REALTIME), &secret, &k, &why);
        if (r == -EINVAL || r == -EPERM)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, why ?: "Invalid key spec.");
        if (r < 0)
                return store_error(error, r, "Could not store the key");
        r = key_json_string(k, &js);
        if (r < 0)
                return r;
        if (c->on_change)
                c->on_change("api_key.create", k, "uid:0", c->userdata);
        return sd_bus_reply_method_return(msg, "ss", secret, js);
}

static int method_list_keys(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        KeysContext *c = userdata;
        ApiKey **keys = NULL;
        json_object *o, *a;
        int r;

        r = check_root(msg, error);
        if (r < 0)
                return r;
        r = key_store_list(c->store, &keys);
        if (r < 0)
                return store_error(error, r, "Could not read the keys");

        o = json_object_new_object();
        a = o ? json_object_new_array() : NULL;
        if (!a) {
                r = -ENOMEM;
                goto finish;
        }
        json_object_object_add(o, "api_keys", a);
        for (ApiKey **i = keys; *i; i++) {
                json_object *k;
                r = api_key_to_json(*i, &k);
                if (r < 0)
                        goto finish;
                json_object_array_add(a, k);
        }
        r = sd_bus_reply_method_return(
                msg, "s", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
finish:
        json_object_put(o);
        api_key_array_free(keys);
        return r;
}

static int method_revoke_key(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(api_key_freep) ApiKey *k = NULL;
        KeysContext *c = userdata;
        const char *id;
        int r;

        r = check_root(msg, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(msg, "s", &id);
        if (r < 0)
                return r;
        if (!id[0])
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "Expected a key id (\"key_…\").");

        r = key_store_get(c->store, id, &k);
        if (r == -ENOENT)
                return sd_bus_error_setf(error, GATEWAY_ERROR_NO_SUCH_KEY, "No API key '%s'.", id);
        if (r < 0)
                return store_error(error, r, "Could not read the key");
        r = key_store_revoke(c->store, id, now_usec(CLOCK_REALTIME));
        if (r == -ENOENT)
                return sd_bus_error_setf(error, GATEWAY_ERROR_NO_SUCH_KEY, "No API key '%s'.", id);
        if (r < 0)
                return store_error(error, r, "Could not revoke the key");
        /* Revoking twice is harmless and records once. */
        if (c->on_change && k->revoked_at == 0) {
                k->revoked_at = now_usec(CLOCK_REALTIME);
                c->on_change("api_key.revoke", k, "uid:0", c->userdata);
        }
        return sd_bus_reply_method_return(msg, NULL);
}

static const sd_bus_vtable gateway_keys_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD_WITH_ARGS("CreateKey", SD_BUS_ARGS("a{sv}", spec), SD_BUS_RESULT("s", secret, "s", api_key_json),
                                method_create_key, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListKeys", SD_BUS_NO_ARGS, SD_BUS_RESULT("s", json), method_list_keys,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("RevokeKey", SD_BUS_ARGS("s", id), SD_BUS_NO_RESULT, method_revoke_key,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
};

int gateway_keys_bus_add(sd_bus *bus, KeyStore *store, gateway_keys_changed_t on_change, void *userdata,
                         sd_bus_slot **ret_slot) {
        _cleanup_(sd_bus_slot_unrefp) sd_bus_slot *slot = NULL;
        KeysContext *c;
        int r;

        if (!bus || !store)
                return -EINVAL;
        r = sd_bus_error_add_map(gateway_bus_errors);
        if (r < 0)
                return r;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        *c = (KeysContext) { .store = store, .on_change = on_change, .userdata = userdata };
        r = sd_bus_add_object_vtable(bus, &slot, GATEWAY_BUS_PATH, GATEWAY_KEYS_INTERFACE, gateway_keys_vtable, c);
        if (r < 0) {
                free(c);
                return r;
        }
        /* The context lives exactly as long as the slot. */
        (void) sd_bus_slot_set_destroy_callback(slot, free);
        if (ret_slot)
                *ret_slot = TAKE_PTR(slot);
        else
                (void) sd_bus_slot_set_floating(slot, 1);
        return 0;
}
