/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* API keys' rights: actions, roles, presets, scopes, and the checks every request and key mint goes through. */
#include "gateway-auth.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sandbox-id.h"
#include "time-util.h"
#include "utf8-util.h"

static const char *const gateway_action_table[_GATEWAY_ACTION_MAX] = {
        [GATEWAY_ACTION_SANDBOX_CREATE] = "sandbox.create",
        [GATEWAY_ACTION_SANDBOX_READ] = "sandbox.read",
        [GATEWAY_ACTION_SANDBOX_UPDATE] = "sandbox.update",
        [GATEWAY_ACTION_SANDBOX_DELETE] = "sandbox.delete",
        [GATEWAY_ACTION_SANDBOX_DELETE_OWN] = "sandbox.delete-own",
        [GATEWAY_ACTION_EXEC] = "exec",
        [GATEWAY_ACTION_FILE_WRITE] = "file.write",
        [GATEWAY_ACTION_FILE_READ] = "file.read",
        [GATEWAY_ACTION_LOG_READ] = "log.read",
        [GATEWAY_ACTION_TAKEOVER] = "takeover",
        [GATEWAY_ACTION_API_KEY_ADMIN] = "api-key.admin",
        [GATEWAY_ACTION_SANDBOX_PAUSE] = "sandbox.pause",
        [GATEWAY_ACTION_SNAPSHOT_CREATE] = "snapshot.create",
        [GATEWAY_ACTION_SNAPSHOT_READ] = "snapshot.read",
        [GATEWAY_ACTION_SNAPSHOT_DELETE] = "snapshot.delete",
};

DEFINE_STRING_TABLE(gateway_action, GatewayAction, _GATEWAY_ACTION_MAX)

static const char *const key_role_table[_KEY_ROLE_MAX] = {
        [KEY_ROLE_MEMBER] = "member",
        [KEY_ROLE_ADMIN] = "admin",
};

DEFINE_STRING_TABLE(key_role, KeyRole, _KEY_ROLE_MAX)

/* Who may hold what: takeover and minting keys are for admins only, whatever a key's action list says. */
#define MEMBER_ACTIONS (GATEWAY_ACTIONS_ALL & ~(GATEWAY_ACTION_BIT(GATEWAY_ACTION_TAKEOVER) |                  \
                                                GATEWAY_ACTION_BIT(GATEWAY_ACTION_API_KEY_ADMIN)))

uint64_t key_role_actions(KeyRole r) {
        switch (r) {
        case KEY_ROLE_ADMIN:
                return GATEWAY_ACTIONS_ALL;
        case KEY_ROLE_MEMBER:
                return MEMBER_ACTIONS;
        default:
                return 0;
        }
}

#define RUNNER_ACTIONS                                                                                      \
        (GATEWAY_ACTION_BIT(GATEWAY_ACTION_SANDBOX_CREATE) | GATEWAY_ACTION_BIT(GATEWAY_ACTION_SANDBOX_READ) | \
         GATEWAY_ACTION_BIT(GATEWAY_ACTION_SANDBOX_UPDATE) | GATEWAY_ACTION_BIT(GATEWAY_ACTION_EXEC) |         \
         GATEWAY_ACTION_BIT(GATEWAY_ACTION_FILE_WRITE) | GATEWAY_ACTION_BIT(GATEWAY_ACTION_SANDBOX_DELETE_OWN) | \
         GATEWAY_ACTION_BIT(GATEWAY_ACTION_SANDBOX_PAUSE) | GATEWAY_ACTION_BIT(GATEWAY_ACTION_SNAPSHOT_CREATE) | \
         GATEWAY_ACTION_BIT(GATEWAY_ACTION_SNAPSHOT_READ))

static const struct {
        const char *name;
        KeyRole role;
        uint64_t actions;
} presets[] = {
        { "admin", KEY_ROLE_ADMIN, GATEWAY_ACTIONS_ALL },
        { "member", KEY_ROLE_MEMBER, MEMBER_ACTIONS },
        { "runner", KEY_ROLE_MEMBER, RUNNER_ACTIONS },
};

int key_preset_lookup(const char *name, KeyRole *ret_role, uint64_t *ret_actions) {
        if (!name)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(presets); i++)
                if (streq(presets[i].name, name)) {
                        if (ret_role)
                                *ret_role = presets[i].role;
                        if (ret_actions)
                                *ret_actions = presets[i].actions;
                        return 0;
                }
        return -EINVAL;
}

ApiKey *api_key_free(ApiKey *k) {
        if (!k)
                return NULL;
        free(k->id);
        free(k->name);
        strv_free(k->sandboxes);
        free(k->created_by);
        free(k);
        return NULL;
}

static bool strv_contains(char *const *l, const char *s) {
        for (; l && *l; l++)
                if (streq(*l, s))
                        return true;
        return false;
}

static size_t strv_length(char *const *l) {
        size_t n = 0;
        while (l && l[n])
                n++;
        return n;
}

/* Key names are shown in tables and JSON: any UTF-8 text of at most 64 bytes without what a terminal acts
 * on or hides (C0 and C1 controls, DEL, bidi overrides and the other format characters, see
 * unichar_is_unprintable()), so a name reads the same wherever it is shown. */
#define KEY_NAME_MAX 64

static bool key_name_is_valid(const char *s) {
        size_t n = strlen(s);

        return n <= KEY_NAME_MAX && utf8_is_printable((const uint8_t *) s, n);
}

static int fail(char **ret_error, int r, const char *fmt, ...) _printf_(3, 4);
static int fail(char **ret_error, int r, const char *fmt, ...) {
        if (ret_error) {
                va_list ap;
                char *m = NULL;

                va_start(ap, fmt);
                if (vasprintf(&m, fmt, ap) < 0)
                        m = NULL;
                va_end(ap);
                free(*ret_error);
                *ret_error = m;
        }
        return r;
}

/* "a, b, c" of the actions in mask, for messages. */
static void actions_join(uint64_t mask, char *buf, size_t size) {
        size_t n = 0;

        buf[0] = 0;
        for (int a = 0; a < _GATEWAY_ACTION_MAX && n < size; a++)
                if (mask & GATEWAY_ACTION_BIT(a))
                        n += (size_t) snprintf(buf + n, size - n, "%s%s", n ? ", " : "",
                                               gateway_action_to_string(a));
}

/* The sandbox scope asked for: NULL or ["*"] = every sandbox, else valid, de-duplicated ids. */
static int resolve_sandboxes(char **in, char ***ret, char **ret_error) {
        _cleanup_strv_free_ char **out = NULL;
        size_t n = 0;

        if (!in || (strv_length(in) == 1 && streq(in[0], "*"))) {
                *ret = NULL;
                return 0;
        }
        if (!in[0])
                return fail(ret_error, -EINVAL,
                            "\"sandboxes\" must be \"*\" or list at least one sandbox id.");

        out = calloc(strv_length(in) + 1, sizeof(char *));
        if (!out)
                return -ENOMEM;
        for (char **i = in; *i; i++) {
                if (!sandbox_id_is_valid(*i))
                        return fail(ret_error, -EINVAL,
                                    "\"%s\" is not a sandbox id (\"sb_\" and 10 characters of a-z, 2-7; or \"*\" "
                                    "alone for every sandbox).",
                                    *i);
                if (strv_contains(out, *i))
                        continue;
                if (!(out[n++] = strdup(*i)))
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(out);
        return 0;
}

int key_spec_resolve(const KeySpec *spec, const ApiKey *creator, uint64_t now, KeyRole *ret_role,
                     uint64_t *ret_actions, char ***ret_sandboxes, uint64_t *ret_expires_at, char **ret_error) {
        _cleanup_strv_free_ char **sandboxes = NULL;
        KeyRole role = KEY_ROLE_MEMBER, preset_role = KEY_ROLE_MEMBER;
        uint64_t actions = 0, preset_actions = 0, expires_at = 0;
        bool have_preset = false;
        char list[512];
        int r;

        if (!spec)
                return -EINVAL;

        /* Who asks comes first: a key without api-key.admin learns nothing about what it asked for. */
        if (creator && !(creator->actions & key_role_actions(creator->role) &
                         GATEWAY_ACTION_BIT(GATEWAY_ACTION_API_KEY_ADMIN)))
                return fail(ret_error, -EPERM,
                            "Creating API keys needs a dashboard or CLI session, or an admin-scoped key.");

        if (spec->name && !key_name_is_valid(spec->name))
                return fail(ret_error, -EINVAL,
                            "\"name\" must be at most %d bytes of UTF-8 without control or format characters "
                            "(C0, DEL, C1, bidi controls such as U+202E, zero-width characters).",
                            KEY_NAME_MAX);

        if (spec->preset) {
                if (key_preset_lookup(spec->preset, &preset_role, &preset_actions) < 0)
                        return fail(ret_error, -EINVAL,
                                    "Unknown preset \"%s\" (expected one of: admin, member, runner).",
                                    spec->preset);
                have_preset = true;
                role = preset_role;
        }
        if (spec->role) {
                role = key_role_from_string(spec->role);
                if (role < 0)
                        return fail(ret_error, -EINVAL, "Unknown role \"%s\" (expected admin or member).",
                                    spec->role);
        }

        if (spec->actions) {
                if (!spec->actions[0])
                        return fail(ret_error, -EINVAL, "\"actions\" must name at least one action.");
                for (char **i = spec->actions; *i; i++) {
                        GatewayAction a = gateway_action_from_string(*i);
                        if (a < 0) {
                                actions_join(GATEWAY_ACTIONS_ALL, list, sizeof(list));
                                return fail(ret_error, -EINVAL, "Unknown action \"%s\" (expected any of: %s).",
                                            *i, list);
                        }
                        actions |= GATEWAY_ACTION_BIT(a);
                }
        } else if (have_preset)
                actions = preset_actions;
        else
                actions = key_role_actions(role);

        if (actions & ~key_role_actions(role)) {
                actions_join(actions & ~key_role_actions(role), list, sizeof(list));
                return fail(ret_error, -EINVAL, "Role %s cannot hold: %s.", key_role_to_string(role), list);
        }

        r = resolve_sandboxes(spec->sandboxes, &sandboxes, ret_error);
        if (r < 0)
                return r;

        if (spec->ttl_usec > 0) {
                if (spec->ttl_usec > UINT64_MAX - now)
                        return fail(ret_error, -EINVAL, "\"ttl_seconds\" is too large.");
                expires_at = now + spec->ttl_usec;
        }

        /* No key can mint a key with more rights than its own: role, each action, scope, expiry. */
        if (creator) {
                uint64_t creator_actions = creator->actions & key_role_actions(creator->role);

                if (role == KEY_ROLE_ADMIN && creator->role != KEY_ROLE_ADMIN)
                        return fail(ret_error, -EPERM, "A %s key cannot create an %s key.",
                                    key_role_to_string(creator->role), key_role_to_string(role));
                if (actions & ~creator_actions) {
                        actions_join(actions & ~creator_actions, list, sizeof(list));
                        return fail(ret_error, -EPERM,
                                    "The new key would hold actions this key does not have: %s.", list);
                }
                if (creator->sandboxes) {
                        if (!sandboxes)
                                return fail(ret_error, -EPERM,
                                            "This key is limited to some sandboxes: the new key must list "
                                            "sandboxes among them, not \"*\".");
                        for (char **i = sandboxes; *i; i++)
                                if (!strv_contains(creator->sandboxes, *i))
                                        return fail(ret_error, -EPERM,
                                                    "Sandbox %s is outside this key's scope.", *i);
                }
                if (creator->expires_at > 0 && (expires_at == 0 || expires_at > creator->expires_at)) {
                        char when[RFC3339_USEC_MAX] = "?";
                        (void) format_rfc3339_usec(creator->expires_at, when);
                        return fail(ret_error, -EPERM,
                                    "The new key must expire no later than this key (%s): give a shorter "
                                    "\"ttl_seconds\".",
                                    when);
                }
        }

        if (ret_role)
                *ret_role = role;
        if (ret_actions)
                *ret_actions = actions;
        if (ret_sandboxes)
                *ret_sandboxes = TAKE_PTR(sandboxes);
        if (ret_expires_at)
                *ret_expires_at = expires_at;
        return 0;
}

KeyState api_key_state(const ApiKey *k, uint64_t now) {
        if (k->revoked_at > 0)
                return KEY_STATE_REVOKED;
        if (k->expires_at > 0 && now >= k->expires_at)
                return KEY_STATE_EXPIRED;
        return KEY_STATE_ACTIVE;
}

bool api_key_allows(const ApiKey *k, GatewayAction a, const char *sandbox_id) {
        if (!k || a < 0 || a >= _GATEWAY_ACTION_MAX)
                return false;
        /* The role bounds the list even if a stored list somehow says more. */
        if (!(k->actions & key_role_actions(k->role) & GATEWAY_ACTION_BIT(a)))
                return false;
        if (sandbox_id && k->sandboxes && !strv_contains(k->sandboxes, sandbox_id))
                return false;
        return true;
}

bool api_key_covers(const ApiKey *k, const ApiKey *other) {
        if (!k || !other)
                return false;
        if (streq(k->id, other->id))
                return true;
        if (other->role == KEY_ROLE_ADMIN && k->role != KEY_ROLE_ADMIN)
                return false;
        /* The same bounds as minting, but for expiry: an older, shorter-lived key is no wider. */
        if (other->actions & key_role_actions(other->role) & ~(k->actions & key_role_actions(k->role)))
                return false;
        if (k->sandboxes) {
                if (!other->sandboxes)
                        return false;
                for (char **i = other->sandboxes; *i; i++)
                        if (!strv_contains(k->sandboxes, *i))
                                return false;
        }
        return true;
}

int api_key_account_id(const ApiKey *k, char **ret) {
        char *s;

        if (!k || !k->id)
                return -EINVAL;
        if (asprintf(&s, "key:%s", k->id) < 0)
                return -ENOMEM;
        *ret = s;
        return 0;
}

static json_object *time_or_null(uint64_t usec) {
        char buf[RFC3339_USEC_MAX];

        if (usec == 0 || format_rfc3339_usec(usec, buf) < 0)
                return NULL;
        return json_object_new_string(buf);
}

int api_key_to_json(const ApiKey *k, json_object **ret) {
        json_object *o, *scope, *actions, *sandboxes;

        if (!k || !k->id)
                return -EINVAL;

        o = json_object_new_object();
        scope = json_object_new_object();
        actions = json_object_new_array();
        if (!o || !scope || !actions)
                goto oom;

        for (int a = 0; a < _GATEWAY_ACTION_MAX; a++)
                if (k->actions & GATEWAY_ACTION_BIT(a))
                        json_object_array_add(actions, json_object_new_string(gateway_action_to_string(a)));
        if (k->sandboxes) {
                sandboxes = json_object_new_array();
                for (char **i = k->sandboxes; sandboxes && *i; i++)
                        json_object_array_add(sandboxes, json_object_new_string(*i));
        } else
                sandboxes = json_object_new_string("*");
        if (!sandboxes)
                goto oom;

        json_object_object_add(o, "id", json_object_new_string(k->id));
        json_object_object_add(o, "name", json_object_new_string(strempty(k->name)));
        json_object_object_add(o, "role", json_object_new_string(strna(key_role_to_string(k->role))));
        json_object_object_add(o, "expiresAt", time_or_null(k->expires_at));
        json_object_object_add(o, "createdAt", time_or_null(k->created_at));
        json_object_object_add(o, "revokedAt", time_or_null(k->revoked_at));
        json_object_object_add(scope, "actions", actions);
        json_object_object_add(scope, "sandboxes", sandboxes);
        json_object_object_add(o, "scope", scope);
        *ret = o;
        return 0;

oom:
        json_object_put(o);
        json_object_put(scope);
        json_object_put(actions);
        return -ENOMEM;
}

int auth_parse_bearer(const char *header, const char **ret_secret) {
        const char *p;

        if (!header || strncasecmp(header, "Bearer", 6) != 0)
                return -EINVAL;
        p = header + 6;
        if (*p != ' ' && *p != '\t')
                return -EINVAL;
        p += strspn(p, " \t");
        if (!*p)
                return -EINVAL;
        /* One token68, nothing after it: anything else is not a bearer credential we could have issued. */
        for (const unsigned char *c = (const unsigned char *) p; *c; c++)
                if (*c <= 0x20 || *c >= 0x7f)
                        return -EINVAL;
        *ret_secret = p;
        return 0;
}

/* 32 random bytes in base32 without padding: ceil(256 / 5) characters. */
#define SECRET_RANDOM_CHARS 52

bool secret_is_well_formed(const char *s, const char *prefix) {
        size_t n;

        if (!s || !prefix)
                return false;
        n = strlen(prefix);
        if (strncmp(s, prefix, n) != 0)
                return false;
        s += n;
        for (size_t i = 0; i < SECRET_RANDOM_CHARS; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '2' && s[i] <= '7')))
                        return false;
        return s[SECRET_RANDOM_CHARS] == 0;
}
