/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for gateway-auth: string tables, presets, minting without escalation, bearer parsing, key JSON. */
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway-auth.h"
#include "macro.h"
#include "test-util.h"
#include "time-util.h"

#define BIT(a) GATEWAY_ACTION_BIT(GATEWAY_ACTION_##a)
#define NOW (UINT64_C(1790000000) * USEC_PER_SEC)

static void test_string_tables(void) {
        static const char *const actions[] = { "sandbox.create", "sandbox.read", "sandbox.update",
                                               "sandbox.delete", "sandbox.delete-own", "exec", "file.write",
                                               "file.read", "log.read", "takeover", "api-key.admin",
                                               "sandbox.pause", "snapshot.create", "snapshot.read",
                                               "snapshot.delete" };

        CHECK_INT(_GATEWAY_ACTION_MAX, ELEMENTSOF(actions));
        for (int a = 0; a < _GATEWAY_ACTION_MAX; a++) {
                const char *s = gateway_action_to_string(a);
                CHECK_STR(s, actions[a]);
                CHECK_INT(gateway_action_from_string(s), a);
        }
        CHECK(!gateway_action_to_string(_GATEWAY_ACTION_MAX));
        CHECK(!gateway_action_to_string(-1));
        CHECK_INT(gateway_action_from_string("Exec"), -EINVAL);
        CHECK_INT(gateway_action_from_string(""), -EINVAL);
        CHECK_INT(gateway_action_from_string(NULL), -EINVAL);

        for (int r = 0; r < _KEY_ROLE_MAX; r++)
                CHECK_INT(key_role_from_string(key_role_to_string(r)), r);
        CHECK_STR(key_role_to_string(KEY_ROLE_ADMIN), "admin");
        CHECK_STR(key_role_to_string(KEY_ROLE_MEMBER), "member");
        CHECK_INT(key_role_from_string("owner"), -EINVAL);
        CHECK(!key_role_to_string(_KEY_ROLE_MAX));
}

static void test_roles_and_presets(void) {
        KeyRole role;
        uint64_t actions;

        CHECK(key_role_actions(KEY_ROLE_ADMIN) == GATEWAY_ACTIONS_ALL);
        CHECK(key_role_actions(KEY_ROLE_MEMBER) == (GATEWAY_ACTIONS_ALL & ~(BIT(TAKEOVER) | BIT(API_KEY_ADMIN))));
        CHECK(key_role_actions(_KEY_ROLE_INVALID) == 0);

        CHECK_INT(key_preset_lookup("admin", &role, &actions), 0);
        CHECK_INT(role, KEY_ROLE_ADMIN);
        CHECK(actions == GATEWAY_ACTIONS_ALL);
        CHECK_INT(key_preset_lookup("member", &role, &actions), 0);
        CHECK_INT(role, KEY_ROLE_MEMBER);
        CHECK(actions == key_role_actions(KEY_ROLE_MEMBER));
        CHECK_INT(key_preset_lookup("runner", &role, &actions), 0);
        CHECK_INT(role, KEY_ROLE_MEMBER);
        CHECK(actions == (BIT(SANDBOX_CREATE) | BIT(SANDBOX_READ) | BIT(SANDBOX_UPDATE) | BIT(EXEC) |
                          BIT(FILE_WRITE) | BIT(SANDBOX_DELETE_OWN) | BIT(SANDBOX_PAUSE) |
                          BIT(SNAPSHOT_CREATE) | BIT(SNAPSHOT_READ)));
        CHECK_INT(key_preset_lookup("root", &role, &actions), -EINVAL);
        CHECK_INT(key_preset_lookup(NULL, &role, &actions), -EINVAL);
}

static int resolve(const KeySpec *spec, const ApiKey *creator, KeyRole *role, uint64_t *actions,
                   char ***sandboxes, uint64_t *expires_at, char **error) {
        free(*error);
        *error = NULL;
        strv_free(*sandboxes);
        *sandboxes = NULL;
        return key_spec_resolve(spec, creator, NOW, role, actions, sandboxes, expires_at, error);
}

static void test_resolve_local(void) {
        _cleanup_strv_free_ char **sandboxes = NULL;
        _cleanup_free_ char *error = NULL;
        KeyRole role = _KEY_ROLE_INVALID;
        uint64_t actions = 0, expires_at = 1;

        /* Empty spec: a member key with every member action, every sandbox, never expiring. */
        CHECK_INT(resolve(&(KeySpec) {}, NULL, &role, &actions, &sandboxes, &expires_at, &error), 0);
        CHECK_INT(role, KEY_ROLE_MEMBER);
        CHECK(actions == key_role_actions(KEY_ROLE_MEMBER));
        CHECK(!sandboxes);
        CHECK(expires_at == 0);

        CHECK_INT(resolve(&(KeySpec) { .preset = "admin", .ttl_usec = 2 * USEC_PER_HOUR }, NULL, &role, &actions,
                          &sandboxes, &expires_at, &error),
                  0);
        CHECK_INT(role, KEY_ROLE_ADMIN);
        CHECK(actions == GATEWAY_ACTIONS_ALL);
        CHECK(expires_at == NOW + 2 * USEC_PER_HOUR);

        /* role alone: that role's actions. */
        CHECK_INT(resolve(&(KeySpec) { .role = "admin" }, NULL, &role, &actions, &sandboxes, &expires_at, &error), 0);
        CHECK(actions == GATEWAY_ACTIONS_ALL);

        /* Explicit actions, exactly those. */
        char *acts[] = { "exec", "file.read", NULL };
        CHECK_INT(resolve(&(KeySpec) { .actions = acts }, NULL, &role, &actions, &sandboxes, &expires_at, &error), 0);
        CHECK(actions == (BIT(EXEC) | BIT(FILE_READ)));

        /* Sandboxes: "*" alone is every sandbox; duplicates fold. */
        char *star[] = { "*", NULL };
        CHECK_INT(resolve(&(KeySpec) { .sandboxes = star }, NULL, &role, &actions, &sandboxes, &expires_at, &error),
                  0);
        CHECK(!sandboxes);
        char *two[] = { "sb_abcdefgh23", "sb_abcdefgh23", "sb_zzzzzzzz77", NULL };
        CHECK_INT(resolve(&(KeySpec) { .sandboxes = two }, NULL, &role, &actions, &sandboxes, &expires_at, &error),
                  0);
        CHECK(sandboxes && streq(sandboxes[0], "sb_abcdefgh23") && streq(sandboxes[1], "sb_zzzzzzzz77") &&
              !sandboxes[2]);

        /* Bad input: each -EINVAL with a message. */
        CHECK_INT(resolve(&(KeySpec) { .preset = "root" }, NULL, &role, &actions, &sandboxes, &expires_at, &error),
                  -EINVAL);
        CHECK(error && strstr(error, "root"));
        CHECK_INT(resolve(&(KeySpec) { .role = "owner" }, NULL, &role, &actions, &sandboxes, &expires_at, &error),
                  -EINVAL);
        CHECK(error && strstr(error, "owner"));
        char *unknown[] = { "exec", "sudo", NULL };
        CHECK_INT(resolve(&(KeySpec) { .actions = unknown }, NULL, &role, &actions, &sandboxes, &expires_at, &error),
                  -EINVAL);
        CHECK(error && strstr(error, "sudo"));
        char *none[] = { NULL };
        CHECK_INT(resolve(&(KeySpec) { .actions = none }, NULL, &role, &actions, &sandboxes, &expires_at, &error),
                  -EINVAL);
        CHECK_INT(resolve(&(KeySpec) { .sandboxes = none }, NULL, &role, &actions, &sandboxes, &expires_at, &error),
                  -EINVAL);
        /* A member can never hold takeover or api-key.admin, not even when root asks. */
        char *takeover[] = { "exec", "takeover", NULL };
        CHECK_INT(resolve(&(KeySpec) { .role = "member", .actions = takeover }, NULL, &role, &actions, &sandboxes,
                          &expires_at, &error),
                  -EINVAL);
        CHECK(error && strstr(error, "takeover"));
        CHECK_INT(resolve(&(KeySpec) { .preset = "admin", .role = "member" }, NULL, &role, &actions, &sandboxes,
                          &expires_at, &error),
                  -EINVAL);
        char *bad_ids[] = { "sb_abcdefgh23", "sb_ABCDEFGH23", NULL };
        CHECK_INT(resolve(&(KeySpec) { .sandboxes = bad_ids }, NULL, &role, &actions, &sandboxes, &expires_at,
                          &error),
                  -EINVAL);
        CHECK(error && strstr(error, "sb_ABCDEFGH23"));
        char *star_and_id[] = { "*", "sb_abcdefgh23", NULL };
        CHECK_INT(resolve(&(KeySpec) { .sandboxes = star_and_id }, NULL, &role, &actions, &sandboxes, &expires_at,
                          &error),
                  -EINVAL);
        CHECK_INT(resolve(&(KeySpec) { .name = "tab\there" }, NULL, &role, &actions, &sandboxes, &expires_at, &error),
                  -EINVAL);
        CHECK_INT(resolve(&(KeySpec) { .name = "this name is far too long to be shown in any table of keys at all, "
                                               "really" },
                          NULL, &role, &actions, &sandboxes, &expires_at, &error),
                  -EINVAL);
        CHECK_INT(resolve(&(KeySpec) { .ttl_usec = UINT64_MAX }, NULL, &role, &actions, &sandboxes, &expires_at,
                          &error),
                  -EINVAL);
}

/* Names a terminal would act on or that read other than they are: C1 controls, bidi and other format
 * characters, invalid UTF-8 are refused; any other text, a backslash included, is a name. */
static void test_resolve_key_names(void) {
        static const char *const bad[] = {
                "esc\033[2J",           /* C0 */
                "del\x7f",
                "csi\xc2\x9b" "31m",   /* U+009B */
                "nel\xc2\x85",         /* U+0085 */
                "osc\xc2\x9d" "0;t",   /* U+009D */
                "ci\xe2\x80\xae" "nimda", /* U+202E RIGHT-TO-LEFT OVERRIDE */
                "a\xe2\x80\xaa" "b",   /* U+202A */
                "a\xe2\x81\xa6" "b",   /* U+2066 LEFT-TO-RIGHT ISOLATE */
                "a\xe2\x81\xa9" "b",   /* U+2069 */
                "a\xe2\x80\x8f" "b",   /* U+200F RIGHT-TO-LEFT MARK */
                "a\xd8\x9c" "b",       /* U+061C ARABIC LETTER MARK */
                "a\xe2\x80\x8b" "b",   /* U+200B ZERO WIDTH SPACE */
                "a\xc2\xad" "b",       /* U+00AD SOFT HYPHEN */
                "\xef\xbb\xbf" "key", /* U+FEFF */
                "a\xe2\x80\xa8" "b",   /* U+2028 LINE SEPARATOR */
                "a\xf3\xa0\x80\x81",  /* U+E0001 LANGUAGE TAG */
                "a\xff" "b",            /* not UTF-8 */
        };
        static const char *const good[] = {
                "ci", "deploy bot", "caf\xc3\xa9 \xf0\x9f\x9a\x80", "back\\slash",
                "\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d", /* Hebrew letters: right-to-left text, not a control */
        };
        _cleanup_strv_free_ char **sandboxes = NULL;
        _cleanup_free_ char *error = NULL;
        KeyRole role;
        uint64_t actions, expires_at;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int r = resolve(&(KeySpec) { .name = bad[i] }, NULL, &role, &actions, &sandboxes, &expires_at,
                                &error);
                if (r != -EINVAL)
                        fprintf(stderr, "key name #%zu accepted\n", i);
                CHECK_INT(r, -EINVAL);
                CHECK(error && strstr(error, "\"name\"") && strstr(error, "format characters"));
        }
        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                int r = resolve(&(KeySpec) { .name = good[i] }, NULL, &role, &actions, &sandboxes, &expires_at,
                                &error);
                if (r < 0)
                        fprintf(stderr, "key name #%zu refused: %s\n", i, strna(error));
                CHECK(r >= 0);
        }
}

static void test_resolve_escalation(void) {
        _cleanup_strv_free_ char **sandboxes = NULL;
        _cleanup_free_ char *error = NULL;
        KeyRole role;
        uint64_t actions, expires_at;
        char *scope[] = { "sb_abcdefgh23", "sb_bbbbbbbb22", NULL };
        ApiKey admin = { .id = "key_aaaaaaaaaaaaaaaaaaaa", .role = KEY_ROLE_ADMIN, .actions = GATEWAY_ACTIONS_ALL };
        ApiKey scoped = admin, expiring = admin, narrow = admin, runner = { .id = "key_bbbbbbbbbbbbbbbbbbbb" };
        scoped.sandboxes = scope;
        expiring.expires_at = NOW + USEC_PER_DAY;
        narrow.actions = BIT(API_KEY_ADMIN) | BIT(EXEC);
        CHECK_INT(key_preset_lookup("runner", &runner.role, &runner.actions), 0);

        /* The runner key: no api-key.admin, so the exact session_required message, whatever it asks. */
        CHECK_INT(resolve(&(KeySpec) { .preset = "admin" }, &runner, &role, &actions, &sandboxes, &expires_at, &error),
                  -EPERM);
        CHECK_STR(error, "Creating API keys needs a dashboard or CLI session, or an admin-scoped key.");
        CHECK_INT(resolve(&(KeySpec) { .preset = "runner" }, &runner, &role, &actions, &sandboxes, &expires_at,
                          &error),
                  -EPERM);
        /* A member key whose list says api-key.admin still cannot: the role bounds it. */
        ApiKey forged = runner;
        forged.actions |= BIT(API_KEY_ADMIN);
        CHECK_INT(resolve(&(KeySpec) { .preset = "runner" }, &forged, &role, &actions, &sandboxes, &expires_at,
                          &error),
                  -EPERM);

        /* The admin may mint anything. */
        CHECK_INT(resolve(&(KeySpec) { .preset = "admin", .ttl_usec = USEC_PER_HOUR }, &admin, &role, &actions,
                          &sandboxes, &expires_at, &error),
                  0);

        /* An action the creator lacks. */
        CHECK_INT(resolve(&(KeySpec) { .preset = "runner" }, &narrow, &role, &actions, &sandboxes, &expires_at,
                          &error),
                  -EPERM);
        CHECK(error && strstr(error, "sandbox.create"));
        char *exec_only[] = { "exec", NULL };
        CHECK_INT(resolve(&(KeySpec) { .actions = exec_only }, &narrow, &role, &actions, &sandboxes, &expires_at,
                          &error),
                  0);
        CHECK(actions == BIT(EXEC));
        /* A role above the creator's: impossible with api-key.admin, which needs admin, so check directly
         * that an admin role from a member creator would be refused first by the admin check. */
        CHECK_INT(resolve(&(KeySpec) { .role = "admin", .actions = exec_only }, &runner, &role, &actions, &sandboxes,
                          &expires_at, &error),
                  -EPERM);

        /* Sandbox scope: a scoped creator cannot mint "*" nor another sandbox, only a subset. */
        CHECK_INT(resolve(&(KeySpec) { .preset = "runner" }, &scoped, &role, &actions, &sandboxes, &expires_at,
                          &error),
                  -EPERM);
        char *other[] = { "sb_cccccccc33", NULL };
        CHECK_INT(resolve(&(KeySpec) { .preset = "runner", .sandboxes = other }, &scoped, &role, &actions,
                          &sandboxes, &expires_at, &error),
                  -EPERM);
        CHECK(error && strstr(error, "sb_cccccccc33"));
        char *subset[] = { "sb_bbbbbbbb22", NULL };
        CHECK_INT(resolve(&(KeySpec) { .preset = "runner", .sandboxes = subset }, &scoped, &role, &actions,
                          &sandboxes, &expires_at, &error),
                  0);

        /* Expiry: never-expiring or later than the creator's is refused; earlier is fine. */
        CHECK_INT(resolve(&(KeySpec) { .preset = "runner" }, &expiring, &role, &actions, &sandboxes, &expires_at,
                          &error),
                  -EPERM);
        CHECK_INT(resolve(&(KeySpec) { .preset = "runner", .ttl_usec = 2 * USEC_PER_DAY }, &expiring, &role,
                          &actions, &sandboxes, &expires_at, &error),
                  -EPERM);
        CHECK_INT(resolve(&(KeySpec) { .preset = "runner", .ttl_usec = USEC_PER_DAY }, &expiring, &role, &actions,
                          &sandboxes, &expires_at, &error),
                  0);
        CHECK(expires_at == NOW + USEC_PER_DAY);

        /* Bad input still says -EINVAL for an admin creator. */
        CHECK_INT(resolve(&(KeySpec) { .preset = "boss" }, &admin, &role, &actions, &sandboxes, &expires_at, &error),
                  -EINVAL);
}

static void test_state_and_allows(void) {
        char *scope[] = { "sb_abcdefgh23", NULL };
        ApiKey k = { .id = "key_aaaaaaaaaaaaaaaaaaaa", .role = KEY_ROLE_MEMBER,
                     .actions = BIT(EXEC) | BIT(SANDBOX_READ) | BIT(TAKEOVER), .sandboxes = scope };
        _cleanup_free_ char *account = NULL;

        CHECK_INT(api_key_state(&k, NOW), KEY_STATE_ACTIVE);
        k.expires_at = NOW;
        CHECK_INT(api_key_state(&k, NOW), KEY_STATE_EXPIRED);
        CHECK_INT(api_key_state(&k, NOW - 1), KEY_STATE_ACTIVE);
        k.revoked_at = NOW - 5;
        CHECK_INT(api_key_state(&k, NOW - 1), KEY_STATE_REVOKED);

        CHECK(api_key_allows(&k, GATEWAY_ACTION_EXEC, "sb_abcdefgh23"));
        CHECK(api_key_allows(&k, GATEWAY_ACTION_EXEC, NULL));
        CHECK(!api_key_allows(&k, GATEWAY_ACTION_EXEC, "sb_zzzzzzzz77"));
        CHECK(!api_key_allows(&k, GATEWAY_ACTION_FILE_WRITE, "sb_abcdefgh23"));
        /* takeover in a member's list grants nothing. */
        CHECK(!api_key_allows(&k, GATEWAY_ACTION_TAKEOVER, "sb_abcdefgh23"));
        CHECK(!api_key_allows(&k, _GATEWAY_ACTION_MAX, NULL));
        CHECK(!api_key_allows(NULL, GATEWAY_ACTION_EXEC, NULL));
        k.sandboxes = NULL;
        CHECK(api_key_allows(&k, GATEWAY_ACTION_EXEC, "sb_zzzzzzzz77"));

        CHECK_INT(api_key_account_id(&k, &account), 0);
        CHECK_STR(account, "key:key_aaaaaaaaaaaaaaaaaaaa");
}

static void test_covers(void) {
        char *one[] = { "sb_abcdefgh23", NULL }, *two[] = { "sb_abcdefgh23", "sb_zzzzzzzz77", NULL };
        ApiKey admin = { .id = "key_aaaaaaaaaaaaaaaaaaaa", .role = KEY_ROLE_ADMIN, .actions = GATEWAY_ACTIONS_ALL };
        ApiKey scoped = { .id = "key_bbbbbbbbbbbbbbbbbbbb", .role = KEY_ROLE_ADMIN,
                          .actions = BIT(API_KEY_ADMIN) | BIT(EXEC), .sandboxes = one };
        ApiKey runner = { .id = "key_cccccccccccccccccccc", .role = KEY_ROLE_MEMBER, .actions = BIT(EXEC),
                          .sandboxes = one };

        CHECK(api_key_covers(&admin, &scoped) && api_key_covers(&admin, &runner));
        CHECK(api_key_covers(&scoped, &scoped));
        CHECK(api_key_covers(&scoped, &runner));
        CHECK(!api_key_covers(&scoped, &admin));   /* every sandbox, every action */
        CHECK(!api_key_covers(&runner, &scoped));  /* a member never covers an admin key */
        runner.actions |= BIT(FILE_READ);
        CHECK(!api_key_covers(&scoped, &runner));  /* an action the scoped key lacks */
        runner.actions = BIT(EXEC);
        runner.sandboxes = two;
        CHECK(!api_key_covers(&scoped, &runner));  /* a sandbox outside its scope */
        runner.sandboxes = NULL;
        CHECK(!api_key_covers(&scoped, &runner));  /* "*" is wider than any list */
        CHECK(!api_key_covers(NULL, &runner) && !api_key_covers(&admin, NULL));
}

static void test_bearer(void) {
        const char *s = NULL;

        CHECK_INT(auth_parse_bearer("Bearer sbx_live_abc", &s), 0);
        CHECK_STR(s, "sbx_live_abc");
        CHECK_INT(auth_parse_bearer("bearer   sbx_live_abc", &s), 0);
        CHECK_STR(s, "sbx_live_abc");
        CHECK_INT(auth_parse_bearer("BEARER\tx", &s), 0);
        CHECK_STR(s, "x");
        s = NULL;
        CHECK_INT(auth_parse_bearer("Bearer", &s), -EINVAL);
        CHECK_INT(auth_parse_bearer("Bearer ", &s), -EINVAL);
        CHECK_INT(auth_parse_bearer("Bearersbx_live_abc", &s), -EINVAL);
        CHECK_INT(auth_parse_bearer("Basic dXNlcjpwYXNz", &s), -EINVAL);
        CHECK_INT(auth_parse_bearer("Bearer a b", &s), -EINVAL);
        CHECK_INT(auth_parse_bearer("Bearer abc\x01", &s), -EINVAL);
        CHECK_INT(auth_parse_bearer("", &s), -EINVAL);
        CHECK_INT(auth_parse_bearer(NULL, &s), -EINVAL);
        CHECK(!s);

        char good[128];
        snprintf(good, sizeof(good), "%s%s", API_KEY_SECRET_PREFIX,
                 "abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst");
        CHECK(strlen(good) == 9 + 52);
        CHECK(secret_is_well_formed(good, API_KEY_SECRET_PREFIX));
        CHECK(!secret_is_well_formed(good, TAKEOVER_TOKEN_PREFIX));
        good[20] = 'A';
        CHECK(!secret_is_well_formed(good, API_KEY_SECRET_PREFIX));
        good[20] = '1';
        CHECK(!secret_is_well_formed(good, API_KEY_SECRET_PREFIX));
        good[20] = 'a';
        strcat(good, "a");
        CHECK(!secret_is_well_formed(good, API_KEY_SECRET_PREFIX));
        good[strlen(good) - 2] = 0;
        CHECK(!secret_is_well_formed(good, API_KEY_SECRET_PREFIX));
        CHECK(!secret_is_well_formed("sbx_live_", API_KEY_SECRET_PREFIX));
        CHECK(!secret_is_well_formed(NULL, API_KEY_SECRET_PREFIX));
}

static void test_json(void) {
        char *scope[] = { "sb_abcdefgh23", "sb_zzzzzzzz77", NULL };
        ApiKey k = { .id = "key_aaaaaaaaaaaaaaaaaaaa", .name = "ci", .role = KEY_ROLE_MEMBER,
                     .actions = BIT(EXEC) | BIT(SANDBOX_CREATE) | BIT(SANDBOX_DELETE_OWN),
                     .created_at = UINT64_C(1793451801590139), .expires_at = UINT64_C(1793459001590139) };
        json_object *o = NULL;

        CHECK_INT(api_key_to_json(&k, &o), 0);
        CHECK_STR(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
                  "{\"id\":\"key_aaaaaaaaaaaaaaaaaaaa\",\"name\":\"ci\",\"role\":\"member\","
                  "\"expiresAt\":\"2026-10-31T15:03:21.590139Z\",\"createdAt\":\"2026-10-31T13:03:21.590139Z\","
                  "\"revokedAt\":null,\"scope\":{\"actions\":[\"sandbox.create\",\"sandbox.delete-own\",\"exec\"],"
                  "\"sandboxes\":\"*\"}}");
        json_object_put(o);

        k.sandboxes = scope;
        k.name = NULL;
        k.expires_at = 0;
        k.revoked_at = k.created_at + 1;
        CHECK_INT(api_key_to_json(&k, &o), 0);
        CHECK_STR(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
                  "{\"id\":\"key_aaaaaaaaaaaaaaaaaaaa\",\"name\":\"\",\"role\":\"member\",\"expiresAt\":null,"
                  "\"createdAt\":\"2026-10-31T13:03:21.590139Z\",\"revokedAt\":\"2026-10-31T13:03:21.590140Z\","
                  "\"scope\":{\"actions\":[\"sandbox.create\",\"sandbox.delete-own\",\"exec\"],"
                  "\"sandboxes\":[\"sb_abcdefgh23\",\"sb_zzzzzzzz77\"]}}");
        json_object_put(o);

        CHECK_INT(api_key_to_json(&(ApiKey) {}, &o), -EINVAL);
}

int main(void) {
        test_string_tables();
        test_roles_and_presets();
        test_resolve_local();
        test_resolve_key_names();
        test_resolve_escalation();
        test_state_and_allows();
        test_covers();
        test_bearer();
        test_json();

        return test_finish("test-gateway-auth");
}
