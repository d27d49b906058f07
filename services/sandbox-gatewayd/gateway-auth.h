/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* API keys' rights: actions, roles, presets, scopes, and the checks every request and key mint goes through. */
#pragma once

#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "macro.h"

/* The actions of DESIGN.md's route table. The string forms are the wire names ("sandbox.create", …). */
typedef enum GatewayAction {
        GATEWAY_ACTION_SANDBOX_CREATE,
        GATEWAY_ACTION_SANDBOX_READ,
        GATEWAY_ACTION_SANDBOX_UPDATE,
        GATEWAY_ACTION_SANDBOX_DELETE,
        GATEWAY_ACTION_SANDBOX_DELETE_OWN,
        GATEWAY_ACTION_EXEC,
        GATEWAY_ACTION_FILE_WRITE,
        GATEWAY_ACTION_FILE_READ,
        GATEWAY_ACTION_LOG_READ,
        GATEWAY_ACTION_TAKEOVER,
        GATEWAY_ACTION_API_KEY_ADMIN,
        GATEWAY_ACTION_SANDBOX_PAUSE, /* issue 26: pause and resume */
        GATEWAY_ACTION_SNAPSHOT_CREATE, /* issue 26: snapshots */
        GATEWAY_ACTION_SNAPSHOT_READ,
        GATEWAY_ACTION_SNAPSHOT_DELETE,
        _GATEWAY_ACTION_MAX,
        _GATEWAY_ACTION_INVALID = -EINVAL,
} GatewayAction;

#define GATEWAY_ACTION_BIT(a) (UINT64_C(1) << (a))
#define GATEWAY_ACTIONS_ALL ((UINT64_C(1) << _GATEWAY_ACTION_MAX) - 1)

const char *gateway_action_to_string(GatewayAction a);
GatewayAction gateway_action_from_string(const char *s);

typedef enum KeyRole {
        KEY_ROLE_MEMBER,
        KEY_ROLE_ADMIN,
        _KEY_ROLE_MAX,
        _KEY_ROLE_INVALID = -EINVAL,
} KeyRole;

const char *key_role_to_string(KeyRole r);
KeyRole key_role_from_string(const char *s);
/* The actions a role may ever hold: admin all, member all but takeover and api-key.admin. */
uint64_t key_role_actions(KeyRole r);

/* Presets: "admin" (role admin, every action), "member" (role member, every member action), "runner"
 * (role member: sandbox.create, sandbox.read, sandbox.update, exec, file.write, sandbox.delete-own). */
int key_preset_lookup(const char *name, KeyRole *ret_role, uint64_t *ret_actions);

/* An API key as stored (never its secret). Times in µs since the epoch, 0 = none/never. */
typedef struct ApiKey {
        char *id;         /* "key_" + 20 chars of [a-z2-7] */
        char *name;       /* may be "" */
        KeyRole role;
        uint64_t actions; /* GATEWAY_ACTION_BIT()s, always a subset of key_role_actions(role) */
        char **sandboxes; /* NULL = every sandbox ("*"), else a NULL-terminated list of ids */
        char *created_by; /* "root", "uid:N" or the minting key's id */
        uint64_t created_at, expires_at, revoked_at;
} ApiKey;

ApiKey *api_key_free(ApiKey *k);
DEFINE_TRIVIAL_CLEANUP_FUNC(ApiKey *, api_key_free);

/* What a caller asks for when minting a key (CreateKey's a{sv} or POST /v1/api-keys' JSON, parsed). */
typedef struct KeySpec {
        const char *name;       /* NULL = "" */
        const char *preset;     /* NULL = none; role and actions default from it */
        const char *role;       /* NULL = from preset, else "member" */
        char **actions;         /* NULL = from preset or role; else exactly these */
        char **sandboxes;       /* NULL = "*" */
        uint64_t ttl_usec;      /* 0 = never expires */
} KeySpec;

/* Resolves a spec into role, actions and scope, and checks them against the minting key (NULL = root
 * or a local sandbox-admin over the bus, who may mint anything). Returns 0, or:
 *   -EINVAL  unknown preset/role/action, actions outside the role, bad sandbox id (ret_error says what)
 *   -EPERM   the creator lacks api-key.admin, or the new key would exceed the creator's rights: a role,
 *            action or sandbox the creator lacks, or an expiry later than the creator's own. */
int key_spec_resolve(const KeySpec *spec, const ApiKey *creator, uint64_t now, KeyRole *ret_role,
                     uint64_t *ret_actions, char ***ret_sandboxes, uint64_t *ret_expires_at, char **ret_error);

typedef enum KeyState {
        KEY_STATE_ACTIVE,
        KEY_STATE_EXPIRED,
        KEY_STATE_REVOKED,
} KeyState;
KeyState api_key_state(const ApiKey *k, uint64_t now);

/* May this key do this action (on this sandbox, NULL for routes without one)? Does not look at expiry or
 * revocation (api_key_state does). sandbox.delete-own is decided by the caller, who knows the owner. */
bool api_key_allows(const ApiKey *k, GatewayAction a, const char *sandbox_id);

/* Does k hold every right other holds (role, actions, sandboxes)? A key covers itself. The gateway lets a
 * key list and revoke only the keys it covers, as it could only have minted those. */
bool api_key_covers(const ApiKey *k, const ApiKey *other);

/* The owner string the gateway puts in the caller context's account_id, "key:<id>". */
int api_key_account_id(const ApiKey *k, char **ret);

/* The reference API's key object: {"id","name","role","expiresAt","createdAt","revokedAt",
 * "scope":{"actions":[…],"sandboxes":"*"|[…]}} with RFC 3339 µs UTC times or null. */
int api_key_to_json(const ApiKey *k, json_object **ret);

/* "Bearer <secret>" → the secret (pointing into header), or -EINVAL for anything else. */
int auth_parse_bearer(const char *header, const char **ret_secret);

/* Secrets: "sbx_live_" + base32 (a-z2-7) of 32 random bytes; tokens "sbx_tt_" + the same. */
#define API_KEY_SECRET_PREFIX "sbx_live_"
#define TAKEOVER_TOKEN_PREFIX "sbx_tt_"
bool secret_is_well_formed(const char *s, const char *prefix);
