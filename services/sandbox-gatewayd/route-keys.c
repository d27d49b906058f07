/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Routes of API keys: mint, list and revoke, never beyond the caller's own rights; each change audited. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gatewayd-routes.h"
#include "key-sessions.h"
#include "key-store.h"
#include "time-util.h"

#define SESSION_REQUIRED_MESSAGE "Creating API keys needs a dashboard or CLI session, or an admin-scoped key."
/* Longer than any key could sensibly live, short enough that now + ttl never overflows. */
#define KEY_TTL_SECONDS_MAX (UINT64_C(100) * 366 * 24 * 3600)

static const JsonField key_fields[] = {
        { "name", JSON_FIELD_STRING },
        { "preset", JSON_FIELD_STRING },
        { "role", JSON_FIELD_STRING },
        { "actions", JSON_FIELD_STRV },
        { "sandboxes", JSON_FIELD_STRV_OR_STAR },
        { "ttl_seconds", JSON_FIELD_UINT },
};

static void audit_key(Request *r, const char *operation, const ApiKey *k) {
        _cleanup_free_ char *detail = NULL;
        json_object *o = NULL;

        if (api_key_to_json(k, &o) >= 0) {
                detail = strdup(json_text(o, NULL));
                json_object_put(o);
        }
        manager_audit(r->manager, operation, "finished", NULL, r->account_id, r->request_id, detail);
}

int route_key_create(Request *r) {
        _cleanup_strv_free_ char **actions = NULL, **sandboxes = NULL;
        _cleanup_free_ char *secret = NULL, *error = NULL;
        _cleanup_(api_key_freep) ApiKey *k = NULL;
        json_object *body, *o, *ko = NULL;
        KeySpec spec = {};
        int e;

        e = req_parse_json(r, key_fields, ELEMENTSOF(key_fields), &body);
        if (e < 0)
                return 0;
        spec.name = json_get_string(body, "name");
        spec.preset = json_get_string(body, "preset");
        spec.role = json_get_string(body, "role");
        e = json_get_strv(body, "actions", &actions);
        if (e >= 0)
                e = json_get_strv(body, "sandboxes", &sandboxes); /* "*" leaves NULL: every sandbox */
        if (e < 0) {
                json_object_put(body);
                return e;
        }
        spec.actions = actions;
        spec.sandboxes = sandboxes;
        if (json_object_object_get_ex(body, "ttl_seconds", NULL)) {
                uint64_t ttl = json_get_uint(body, "ttl_seconds");
                if (ttl == 0 || ttl > KEY_TTL_SECONDS_MAX) {
                        json_object_put(body);
                        req_reply_error(r, 400, "invalid_request",
                                        "Field 'ttl_seconds' must be from 1 to %" PRIu64 " (absent: no expiry).",
                                        KEY_TTL_SECONDS_MAX);
                        return 0;
                }
                spec.ttl_usec = ttl * USEC_PER_SEC;
        }

        e = key_store_create(r->manager->keys, &spec, r->key, r->key->id, now_usec(CLOCK_REALTIME), &secret, &k,
                             &error);
        json_object_put(body);
        if (e == -EPERM) {
                /* The router already answered session_required to keys without api-key.admin: this key
                 * may mint keys, just not this one, and it is told why. */
                req_deny(r, 403, "forbidden", NULL, "%s", error ?: "The new key would exceed this key's rights.");
                return 0;
        }
        if (e == -EINVAL) {
                req_reply_error(r, 400, "invalid_request", "%s", error ?: "Invalid key specification.");
                return 0;
        }
        if (e < 0)
                return e;

        audit_key(r, "api_key.create", k);
        e = api_key_to_json(k, &ko);
        if (e < 0)
                return e;
        o = json_object_new_object();
        if (!o) {
                json_object_put(ko);
                return -ENOMEM;
        }
        json_object_object_add(o, "secret", json_object_new_string(secret));
        json_object_object_add(o, "apiKey", ko);
        req_reply_json(r, 201, o);
        return 0;
}

int route_key_list(Request *r) {
        ApiKey **keys = NULL;
        json_object *list, *o;
        int e;

        e = key_store_list(r->manager->keys, &keys);
        if (e < 0)
                return e;
        list = json_object_new_array();
        for (ApiKey **k = keys; list && *k; k++) {
                json_object *ko;
                if (!api_key_covers(r->key, *k))
                        continue; /* a narrower admin key sees only what it could have minted */
                e = api_key_to_json(*k, &ko);
                if (e < 0)
                        break;
                json_object_array_add(list, ko);
        }
        api_key_array_free(keys);
        if (!list || e < 0) {
                json_object_put(list);
                return e < 0 ? e : -ENOMEM;
        }
        o = json_object_new_object();
        json_object_object_add(o, "api_keys", list);
        req_reply_json(r, 200, o);
        return 0;
}

/* GET /v1/api-keys/self: any active key may read its own object; it tells the key nothing it does not
 * already hold, and lets a client show only what the key may do (the gateway still checks each request). */
int route_key_self(Request *r) {
        json_object *o;
        int e;

        e = api_key_to_json(r->key, &o);
        if (e < 0)
                return e;
        req_reply_json(r, 200, o);
        return 0;
}

int route_key_revoke(Request *r) {
        _cleanup_(api_key_freep) ApiKey *k = NULL;
        const char *id = req_param(r, 0);
        int e;

        e = key_store_get(r->manager->keys, id, &k);
        if (e == -ENOENT) {
                req_reply_error(r, 404, "not_found", "No API key '%s'.", id);
                return 0;
        }
        if (e < 0)
                return e;
        if (!api_key_covers(r->key, k)) {
                req_deny(r, 403, "forbidden", NULL,
                         "API key '%s' holds rights this key does not have: it cannot revoke it.", id);
                return 0;
        }
        e = key_store_revoke(r->manager->keys, id, now_usec(CLOCK_REALTIME));
        if (e == -ENOENT) {
                req_reply_error(r, 404, "not_found", "No API key '%s'.", id);
                return 0;
        }
        if (e < 0)
                return e;
        if (k->revoked_at == 0) {
                k->revoked_at = now_usec(CLOCK_REALTIME);
                audit_key(r, "api_key.revoke", k);
        }
        /* Its streams and takeovers end now; other gateway processes notice within a check interval. */
        key_sessions_check(r->manager);
        req_reply_empty(r, 204);
        return 0;
}
