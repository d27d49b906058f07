/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the key store in PostgreSQL: a real server in a scratch directory, two handles as two
 * gateways. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "key-store.h"
#include "macro.h"
#include "test-key-race.h"
#include "test-pg.h"
#include "test-util.h"
#include "time-util.h"

#define NOW   (UINT64_C(1790000000) * USEC_PER_SEC)
#define SB1   "sb_abcdefgh23"
#define ROUTE "takeover"

static TestPg pg;
static const char *url = pg.url;

static KeyStore *open_store(void) {
        KeyStore *s = NULL;
        int r = key_store_open_postgresql(url, &s);
        if (r < 0) {
                fprintf(stderr, "key_store_open_postgresql(%s): %s\n", url, strerror(-r));
                exit(EXIT_FAILURE);
        }
        return s;
}

static ApiKey *mint(KeyStore *s, const char *preset, char **ret_secret) {
        ApiKey *k = NULL;
        CHECK_INT(key_store_create(s, &(KeySpec){.name = "t", .preset = preset}, NULL, "root", NOW,
                                   ret_secret, &k, NULL),
                  0);
        return k;
}

static void test_url(void) {
        _cleanup_free_ char *why = NULL;
        KeyStore *s = NULL;

        CHECK_INT(key_store_check_url("postgresql://u@h/db", NULL), 0);
        CHECK_INT(key_store_check_url("postgres:///db?host=/run/postgresql", NULL), 0);
        CHECK_INT(key_store_check_url("mysql://u@h/db", &why), -EINVAL);
        CHECK(why && strstr(why, "postgresql://"));
        free(TAKE_PTR(why));
        CHECK_INT(key_store_check_url("postgresql://u@h/db?nosuchoption=1", &why), -EINVAL);
        CHECK(why && strstr(why, "nosuchoption") && !strchr(why, '\n'));
        CHECK_INT(key_store_check_url(NULL, NULL), -EINVAL);
        CHECK_INT(key_store_open_postgresql("sqlite", &s), -EINVAL);
        CHECK(!s);
}

/* Keys and tokens made through one handle are seen through the other, as by two gateways. */
static void test_shared(KeyStore *a, KeyStore *b) {
        _cleanup_free_ char *secret = NULL, *token = NULL;
        _cleanup_(api_key_freep) ApiKey *k = NULL, *seen = NULL, *by_id = NULL, *redeemed = NULL;
        ApiKey **all = NULL;
        uint64_t expires_at = 0;
        size_t n = 0;

        k = mint(a, "admin", &secret);
        CHECK(k && k->role == KEY_ROLE_ADMIN);
        CHECK_INT(key_store_authenticate(b, secret, NOW, &seen), 0);
        CHECK_STR(seen->id, k->id);
        CHECK_U64(seen->actions, k->actions);
        CHECK(!seen->sandboxes);
        CHECK_INT(key_store_get(b, k->id, &by_id), 0);
        CHECK_U64(by_id->created_at, NOW);
        CHECK_INT(key_store_get(b, "key_aaaaaaaaaaaaaaaaaaaa", &redeemed), -ENOENT);
        {
                _cleanup_free_ char *other = strdup(secret);
                other[strlen(other) - 1] = other[strlen(other) - 1] == 'a' ? 'b' : 'a';
                CHECK_INT(key_store_authenticate(b, other, NOW, &redeemed), -ENOKEY);
        }
        CHECK_INT(key_store_list(b, &all), 0);
        for (ApiKey **i = all; *i; i++)
                n += streq((*i)->id, k->id);
        CHECK_INT(n, 1);
        api_key_array_free(all);

        CHECK_INT(key_store_token_create(a, k, SB1, ROUTE, NOW, 30 * USEC_PER_SEC, &token, &expires_at), 0);
        CHECK_U64(expires_at, NOW + 30 * USEC_PER_SEC);
        CHECK_INT(key_store_token_redeem(b, token, "sb_zzzzzzzz77", ROUTE, NOW + 1, &redeemed), -ENOKEY);
        CHECK_INT(key_store_token_redeem(b, token, SB1, ROUTE, NOW + 1, &redeemed), 0);
        CHECK_STR(redeemed->id, k->id);
        api_key_free(TAKE_PTR(redeemed));
        CHECK_INT(key_store_token_redeem(a, token, SB1, ROUTE, NOW + 2, &redeemed), -EALREADY);
        free(TAKE_PTR(token));
        CHECK_INT(key_store_token_create(a, k, SB1, ROUTE, NOW, 30 * USEC_PER_SEC, &token, NULL), 0);
        CHECK_INT(key_store_token_redeem(b, token, SB1, ROUTE, NOW + 31 * USEC_PER_SEC, &redeemed),
                  -EKEYEXPIRED);
}

/* A revocation through one handle: the key refused through the other, its tokens spent, the count moved. */
static void test_revoke(KeyStore *a, KeyStore *b) {
        _cleanup_free_ char *secret = NULL, *token = NULL;
        _cleanup_(api_key_freep) ApiKey *k = NULL, *seen = NULL;
        uint64_t before = 0, after = 0, again = 0;

        k = mint(a, "admin", &secret);
        CHECK_INT(key_store_token_create(a, k, SB1, ROUTE, NOW, 30 * USEC_PER_SEC, &token, NULL), 0);
        CHECK_INT(key_store_data_version(b, &before), 0);
        CHECK_INT(key_store_revoke(a, k->id, NOW + 5), 0);
        CHECK_INT(key_store_data_version(b, &after), 0);
        CHECK_U64(after, before + 1);
        CHECK_INT(key_store_authenticate(b, secret, NOW + 6, &seen), -EKEYREVOKED);
        CHECK_INT(key_store_token_redeem(b, token, SB1, ROUTE, NOW + 6, &seen), -EKEYREVOKED);
        /* twice is harmless and keeps the first time */
        CHECK_INT(key_store_revoke(b, k->id, NOW + 9), 0);
        CHECK_INT(key_store_get(a, k->id, &seen), 0);
        CHECK_U64(seen->revoked_at, NOW + 5);
        CHECK_INT(key_store_data_version(a, &again), 0);
        CHECK_U64(again, after);
        CHECK_INT(key_store_revoke(a, "key_aaaaaaaaaaaaaaaaaaaa", NOW), -ENOENT);
        CHECK_INT(key_store_revoke(a, "nonsense", NOW), -ENOENT);
}

static KeyStore *open_race_store(void) {
        KeyStore *s = NULL;
        return key_store_open_postgresql(url, &s) >= 0 ? s : NULL;
}

/* 20 processes, each with a handle of its own (as 20 gateways), race to redeem one token: exactly one wins.
 */
static void test_token_race(KeyStore *a) {
        enum { N = 20 };
        _cleanup_free_ char *secret = NULL, *token = NULL;
        _cleanup_(api_key_freep) ApiKey *k = mint(a, "admin", &secret);
        int wins = 0, already = 0;

        CHECK_INT(key_store_token_create(a, k, SB1, ROUTE, NOW, 30 * USEC_PER_SEC, &token, NULL), 0);
        key_store_token_race(N, open_race_store, token, SB1, ROUTE, NOW + 1, &wins, &already);
        CHECK_INT(wins, 1);
        CHECK_INT(already, N - 1);
}

/* The server stopped: every operation says so (-KEY_STORE_UNAVAILABLE), then, once it is back, works again
 * with everything made before still there. */
static void test_down(KeyStore *a) {
        _cleanup_free_ char *secret = NULL, *secret2 = NULL, *token = NULL;
        _cleanup_(api_key_freep) ApiKey *k = mint(a, "member", &secret), *seen = NULL, *k2 = NULL;
        ApiKey **all = NULL;
        uint64_t v;
        int r = 0;

        CHECK_INT(test_pg_stop(&pg), 0);
        CHECK_INT(key_store_authenticate(a, secret, NOW, &seen), -KEY_STORE_UNAVAILABLE);
        CHECK_INT(
                key_store_create(a, &(KeySpec){.preset = "member"}, NULL, "root", NOW, &secret2, &k2, NULL),
                -KEY_STORE_UNAVAILABLE);
        CHECK_INT(key_store_list(a, &all), -KEY_STORE_UNAVAILABLE);
        CHECK_INT(key_store_revoke(a, k->id, NOW), -KEY_STORE_UNAVAILABLE);
        CHECK_INT(key_store_data_version(a, &v), -KEY_STORE_UNAVAILABLE);
        CHECK_INT(key_store_token_create(a, k, SB1, ROUTE, NOW, USEC_PER_SEC, &token, NULL),
                  -KEY_STORE_UNAVAILABLE);
        CHECK(!seen && !k2 && !all && !token);

        CHECK_INT(test_pg_start(&pg), 0);
        /* reconnects are at most once a second: within two, it works */
        for (int i = 0; i < 40; i++) {
                r = key_store_authenticate(a, secret, NOW, &seen);
                if (r != -KEY_STORE_UNAVAILABLE)
                        break;
                usleep(50 * 1000);
        }
        CHECK_INT(r, 0);
        CHECK(seen && streq(seen->id, k->id) && seen->revoked_at == 0);
}

int main(void) {
        test_url();
        if (!test_pg_available()) {
                printf("SKIP: no %s/initdb (Debian's postgresql-15): the store itself is not tested\n",
                       TEST_PG_BIN);
                return test_finish("test-key-store-pg") == EXIT_SUCCESS ? 77 : EXIT_FAILURE;
        }
        test_pg_init(&pg, "test-key-store-pg");
        {
                _cleanup_(key_store_freep) KeyStore *a = open_store(), *b = open_store();
                test_shared(a, b);
                test_revoke(a, b);
                test_token_race(a);
                test_down(a);
        }
        test_pg_done(&pg);
        return test_finish("test-key-store-pg");
}
