/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for key-store: keys by hash only, their states, single-use bound tokens across handles, migrations. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <gnutls/crypto.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "key-store.h"
#include "macro.h"
#include "test-util.h"
#include "test-key-race.h"
#include "time-util.h"

static char tmpdir[] = "/tmp/test-key-store.XXXXXX";

#define NOW (UINT64_C(1790000000) * USEC_PER_SEC)
#define SB1 "sb_abcdefgh23"
#define SB2 "sb_zzzzzzzz77"
#define ROUTE "takeover"

static char *db_path(const char *name) {
        static char buf[512];
        snprintf(buf, sizeof(buf), "%s/%s", tmpdir, name);
        return buf;
}

static KeyStore *open_store(const char *name) {
        KeyStore *s = NULL;
        int r = key_store_open(db_path(name), &s);
        if (r < 0) {
                fprintf(stderr, "key_store_open(%s): %s\n", name, strerror(-r));
                exit(EXIT_FAILURE);
        }
        return s;
}

static ApiKey *mint(KeyStore *s, const char *preset, uint64_t ttl_usec, char **ret_secret) {
        _cleanup_free_ char *error = NULL;
        ApiKey *k = NULL;
        int r = key_store_create(s, &(KeySpec) { .preset = preset, .ttl_usec = ttl_usec }, NULL, "root", NOW,
                                 ret_secret, &k, &error);
        CHECK_INT(r, 0);
        if (r < 0) {
                fprintf(stderr, "key_store_create: %s\n", strna(error));
                exit(EXIT_FAILURE);
        }
        return k;
}

static size_t count_keys(KeyStore *s) {
        ApiKey **l = NULL;
        size_t n = 0;
        CHECK_INT(key_store_list(s, &l), 0);
        while (l && l[n])
                n++;
        api_key_array_free(l);
        return n;
}

/* Does needle occur in the file (which may not exist)? */
static bool file_contains(const char *path, const char *needle) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        _cleanup_free_ char *buf = NULL;
        size_t n = 0, size = 0;

        if (!f)
                return false;
        for (;;) {
                char *nb = realloc(buf, size + 65536);
                CHECK(nb);
                if (!nb)
                        return false;
                buf = nb;
                size_t k = fread(buf + n, 1, 65536, f);
                n += k;
                size += 65536;
                if (k == 0)
                        break;
        }
        return memmem(buf, n, needle, strlen(needle)) != NULL;
}

static bool db_files_contain(const char *name, const char *needle) {
        char p[600];
        bool found = false;

        for (size_t i = 0; i < 3; i++) {
                static const char *const suffixes[] = { "", "-wal", "-shm" };
                snprintf(p, sizeof(p), "%s%s", db_path(name), suffixes[i]);
                found = found || file_contains(p, needle);
        }
        return found;
}

static void test_keys(void) {
        _cleanup_(key_store_freep) KeyStore *s = open_store("keys.db");
        _cleanup_free_ char *secret = NULL, *secret2 = NULL, *error = NULL;
        _cleanup_(api_key_freep) ApiKey *k = NULL, *k2 = NULL, *got = NULL;
        struct stat st;

        CHECK_INT(stat(db_path("keys.db"), &st), 0);
        CHECK_INT(st.st_mode & 0777, 0600);

        k = mint(s, "runner", 2 * USEC_PER_HOUR, &secret);
        CHECK(secret_is_well_formed(secret, API_KEY_SECRET_PREFIX));
        CHECK(strlen(k->id) == 24 && strncmp(k->id, "key_", 4) == 0);
        for (const char *p = k->id + 4; *p; p++)
                CHECK((*p >= 'a' && *p <= 'z') || (*p >= '2' && *p <= '7'));
        CHECK_INT(k->role, KEY_ROLE_MEMBER);
        CHECK_STR(k->created_by, "root");
        CHECK(k->created_at == NOW && k->expires_at == NOW + 2 * USEC_PER_HOUR && k->revoked_at == 0);

        k2 = mint(s, "admin", 0, &secret2);
        CHECK(!streq(secret, secret2));
        CHECK(!streq(k->id, k2->id));

        /* Authenticate: the right key, with every field as stored. */
        CHECK_INT(key_store_authenticate(s, secret, NOW + 1, &got), 0);
        CHECK(got && streq(got->id, k->id) && got->actions == k->actions && got->role == k->role &&
              got->expires_at == k->expires_at && !got->sandboxes);
        got = api_key_free(got);
        CHECK_INT(key_store_authenticate(s, secret2, NOW + 100 * USEC_PER_DAY, &got), 0);
        CHECK(got && streq(got->id, k2->id) && got->role == KEY_ROLE_ADMIN);
        got = api_key_free(got);

        /* Malformed, unknown (well-formed but never issued), expired. */
        CHECK_INT(key_store_authenticate(s, "sbx_live_short", NOW, &got), -EINVAL);
        CHECK_INT(key_store_authenticate(s, "", NOW, &got), -EINVAL);
        CHECK_INT(key_store_authenticate(s, NULL, NOW, &got), -EINVAL);
        _cleanup_free_ char *unknown = strdup(secret);
        unknown[20] = unknown[20] == 'a' ? 'b' : 'a';
        CHECK_INT(key_store_authenticate(s, unknown, NOW, &got), -ENOKEY);
        CHECK_INT(key_store_authenticate(s, secret, NOW + 2 * USEC_PER_HOUR, &got), -EKEYEXPIRED);
        CHECK(!got);

        /* get, list. */
        CHECK_INT(key_store_get(s, k->id, &got), 0);
        CHECK(got && streq(got->id, k->id));
        got = api_key_free(got);
        CHECK_INT(key_store_get(s, "key_2222222222222222222a", &got), -ENOENT);
        CHECK_INT(key_store_get(s, "nonsense", &got), -ENOENT);
        CHECK_INT(count_keys(s), 2);

        /* Revoke: at once, twice is fine, unknown is -ENOENT. */
        CHECK_INT(key_store_revoke(s, k->id, NOW + 10), 0);
        CHECK_INT(key_store_authenticate(s, secret, NOW + 11, &got), -EKEYREVOKED);
        CHECK_INT(key_store_revoke(s, k->id, NOW + 20), 0);
        CHECK_INT(key_store_get(s, k->id, &got), 0);
        CHECK(got && got->revoked_at == NOW + 10);
        got = api_key_free(got);
        CHECK_INT(key_store_revoke(s, "key_2222222222222222222a", NOW), -ENOENT);
        CHECK_INT(key_store_authenticate(s, secret2, NOW + 11, &got), 0);
        got = api_key_free(got);

        /* A key minted by a key: escalation refused, nothing stored. */
        _cleanup_free_ char *s3 = NULL;
        _cleanup_(api_key_freep) ApiKey *runner = NULL, *k3 = NULL;
        _cleanup_free_ char *runner_secret = NULL;
        runner = mint(s, "runner", USEC_PER_HOUR, &runner_secret);
        size_t before = count_keys(s);
        CHECK_INT(key_store_create(s, &(KeySpec) { .preset = "admin" }, runner, runner->id, NOW, &s3, &k3, &error),
                  -EPERM);
        CHECK_STR(error, "Creating API keys needs a dashboard or CLI session, or an admin-scoped key.");
        CHECK(!s3 && !k3);
        free(error);
        error = NULL;
        CHECK_INT(key_store_create(s, &(KeySpec) { .preset = "runner" }, k2, k2->id, NOW, &s3, &k3, &error), 0);
        CHECK(k3 && streq(k3->created_by, k2->id));
        CHECK_INT(count_keys(s), before + 1);
        CHECK_INT(key_store_create(s, &(KeySpec) { .preset = "wizard" }, NULL, "root", NOW, &secret, &k, &error),
                  -EINVAL);
        CHECK_INT(count_keys(s), before + 1);

        /* The secrets' bytes are nowhere in the files, open or closed. */
        const char *secrets[] = { secret, secret2, runner_secret, s3 };
        for (size_t i = 0; i < ELEMENTSOF(secrets); i++) {
                CHECK(!db_files_contain("keys.db", secrets[i]));
                CHECK(!db_files_contain("keys.db", secrets[i] + strlen(API_KEY_SECRET_PREFIX)));
        }
        s = key_store_free(s);
        for (size_t i = 0; i < ELEMENTSOF(secrets); i++) {
                CHECK(!db_files_contain("keys.db", secrets[i] + strlen(API_KEY_SECRET_PREFIX)));
                /* … but a fresh handle still finds the keys by hash. */
        }
        s = open_store("keys.db");
        CHECK_INT(key_store_authenticate(s, runner_secret, NOW, &got), 0);
        CHECK(got && streq(got->id, runner->id));
        /* And the key's id is there: the check above would be vacuous if nothing had been written. */
        s = key_store_free(s);
        CHECK(db_files_contain("keys.db", runner->id));
}

static void test_tokens(void) {
        _cleanup_(key_store_freep) KeyStore *a = open_store("tokens.db"), *b = open_store("tokens.db");
        _cleanup_free_ char *secret = NULL, *t1 = NULL, *t2 = NULL, *t3 = NULL, *t4 = NULL;
        _cleanup_(api_key_freep) ApiKey *admin = NULL, *got = NULL;
        uint64_t expires_at = 0;

        admin = mint(a, "admin", 0, &secret);

        /* Once, even across two handles on the same file. */
        CHECK_INT(key_store_token_create(a, admin, SB1, ROUTE, NOW, 30 * USEC_PER_SEC, &t1, &expires_at), 0);
        CHECK(secret_is_well_formed(t1, TAKEOVER_TOKEN_PREFIX));
        CHECK(expires_at == NOW + 30 * USEC_PER_SEC);
        CHECK_INT(key_store_token_redeem(b, t1, SB1, ROUTE, NOW + 1, &got), 0);
        CHECK(got && streq(got->id, admin->id));
        got = api_key_free(got);
        CHECK_INT(key_store_token_redeem(a, t1, SB1, ROUTE, NOW + 2, &got), -EALREADY);
        CHECK_INT(key_store_token_redeem(b, t1, SB1, ROUTE, NOW + 2, &got), -EALREADY);
        CHECK(!got);

        /* Bound to the sandbox and the route: elsewhere it is unknown, and stays usable where it belongs. */
        CHECK_INT(key_store_token_create(a, admin, SB1, ROUTE, NOW, 30 * USEC_PER_SEC, &t2, NULL), 0);
        CHECK_INT(key_store_token_redeem(b, t2, SB2, ROUTE, NOW + 1, &got), -ENOKEY);
        CHECK_INT(key_store_token_redeem(b, t2, SB1, "exec", NOW + 1, &got), -ENOKEY);
        CHECK_INT(key_store_token_redeem(b, t2, SB1, ROUTE, NOW + 1, &got), 0);
        got = api_key_free(got);

        /* Expired: at its expiry time and after; not spent by the attempt. */
        CHECK_INT(key_store_token_create(a, admin, SB1, ROUTE, NOW, 30 * USEC_PER_SEC, &t3, NULL), 0);
        CHECK_INT(key_store_token_redeem(b, t3, SB1, ROUTE, NOW + 30 * USEC_PER_SEC, &got), -EKEYEXPIRED);
        CHECK_INT(key_store_token_redeem(b, t3, SB1, ROUTE, NOW + 31 * USEC_PER_SEC, &got), -EKEYEXPIRED);

        /* Malformed and unknown. */
        CHECK_INT(key_store_token_redeem(b, "sbx_tt_nope", SB1, ROUTE, NOW, &got), -EINVAL);
        CHECK_INT(key_store_token_redeem(b, secret, SB1, ROUTE, NOW, &got), -EINVAL); /* a key is no token */
        _cleanup_free_ char *unknown = strdup(t3);
        unknown[10] = unknown[10] == 'a' ? 'b' : 'a';
        CHECK_INT(key_store_token_redeem(b, unknown, SB1, ROUTE, NOW, &got), -ENOKEY);
        CHECK(!got);

        /* Bad arguments when minting. */
        CHECK_INT(key_store_token_create(a, admin, SB1, ROUTE, NOW, 0, &t4, NULL), -EINVAL);
        CHECK_INT(key_store_token_create(a, admin, "", ROUTE, NOW, USEC_PER_SEC, &t4, NULL), -EINVAL);
        CHECK_INT(key_store_token_create(a, admin, SB1, NULL, NOW, USEC_PER_SEC, &t4, NULL), -EINVAL);
        CHECK(!t4);

        /* Revoking the key kills its unspent tokens, through the other handle too. */
        CHECK_INT(key_store_token_create(a, admin, SB1, ROUTE, NOW, 30 * USEC_PER_SEC, &t4, NULL), 0);
        CHECK_INT(key_store_revoke(b, admin->id, NOW + 1), 0);
        CHECK_INT(key_store_token_redeem(a, t4, SB1, ROUTE, NOW + 2, &got), -EKEYREVOKED);
        CHECK(!got);

        /* Tokens, like secrets, are stored only hashed. */
        const char *tokens[] = { t1, t2, t3, t4 };
        for (size_t i = 0; i < ELEMENTSOF(tokens); i++)
                CHECK(!db_files_contain("tokens.db", tokens[i] + strlen(TAKEOVER_TOKEN_PREFIX)));
}

static KeyStore *open_race_store(void) {
        KeyStore *s = NULL;
        return key_store_open(db_path("race.db"), &s) >= 0 ? s : NULL;
}

/* Many processes, each with its own handle, race to redeem one token: exactly one wins. */
static void test_token_race(void) {
        enum { N = 8 };
        _cleanup_free_ char *secret = NULL, *token = NULL;
        _cleanup_(api_key_freep) ApiKey *admin = NULL;
        int wins = 0, already = 0;

        {
                _cleanup_(key_store_freep) KeyStore *s = open_store("race.db");
                admin = mint(s, "admin", 0, &secret);
                CHECK_INT(key_store_token_create(s, admin, SB1, ROUTE, NOW, 30 * USEC_PER_SEC, &token, NULL), 0);
        }
        key_store_token_race(N, open_race_store, token, SB1, ROUTE, NOW + 1, &wins, &already);
        CHECK_INT(wins, 1);
        CHECK_INT(already, N - 1);
}

/* Another process of the store, as a second gateway is: forked while this process has no store open (a
 * child must not inherit SQLite's state of open files), it waits for a line on the returned pipe, then
 * opens the store at name, looks the line up as a key id (if not empty) and closes the store. Exits 0 when
 * found (or nothing was asked), 1 when not known, 2 on another error. */
static pid_t other_process(const char *name, int *ret_fd) {
        int p[2];
        pid_t pid;

        CHECK_INT(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        if (pid == 0) {
                char id[128] = "";
                KeyStore *s = NULL;
                ApiKey *k = NULL;
                ssize_t n;
                int r;

                close(p[1]);
                n = read(p[0], id, sizeof(id) - 1);
                id[n > 0 ? n : 0] = 0;
                id[strcspn(id, "\n")] = 0;
                r = key_store_open(db_path(name), &s);
                if (r >= 0 && id[0])
                        r = key_store_get(s, id, &k);
                api_key_free(k);
                key_store_free(s);
                _exit(r >= 0 ? 0 : r == -ENOENT ? 1 : 2);
        }
        CHECK(pid > 0);
        close(p[0]);
        *ret_fd = p[1];
        return pid;
}

static int other_process_run(pid_t pid, int fd, const char *key_id) {
        int status = 0;

        /* a whole line: the other child holds this pipe's write end too, so no end of file comes */
        CHECK_INT(dprintf(fd, "%s\n", key_id), (int) strlen(key_id) + 1);
        close(fd);
        CHECK_INT(waitpid(pid, &status, 0), pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}

/* Several gateway processes share keys.db. Each must keep its SQLite locks for as long as its store is
 * open: a process that lost them (by closing another descriptor of the file, which drops all of its POSIX
 * locks on it) looks gone to the others, and the next one to close "last" checkpoints and removes the -wal
 * and -shm files it still writes to: keys it makes afterwards reach nobody else. */
static void test_shared_across_processes(void) {
        _cleanup_(key_store_freep) KeyStore *s = NULL;
        _cleanup_(api_key_freep) ApiKey *k = NULL;
        _cleanup_free_ char *secret = NULL;
        int closer_fd, reader_fd, status = 0;
        pid_t closer, reader, pid;
        struct stat st;

        closer = other_process("shared.db", &closer_fd);
        reader = other_process("shared.db", &reader_fd);
        s = open_store("shared.db");

        /* Another process sees this one's lock on the database file (F_GETLK answers about other
         * processes' locks only). */
        pid = fork();
        if (pid == 0) {
                struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
                int fd = open(db_path("shared.db"), O_RDWR | O_CLOEXEC);
                _exit(fd >= 0 && fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK ? 0 : 1);
        }
        CHECK(pid > 0);
        CHECK_INT(waitpid(pid, &status, 0), pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

        /* Another process opens and closes the store: the files this one uses stay. */
        CHECK_INT(other_process_run(closer, closer_fd, ""), 0);
        CHECK_INT(stat(db_path("shared.db-wal"), &st), 0);
        CHECK_INT(stat(db_path("shared.db-shm"), &st), 0);

        /* A key made here afterwards is known to a process that opens the store now. */
        k = mint(s, "admin", 0, &secret);
        CHECK_INT(other_process_run(reader, reader_fd, k->id), 0);
}

/* Version 1 of the schema, as the first release wrote it: only api_keys. */
static const char *const schema_v1 =
        "CREATE TABLE api_keys (id TEXT PRIMARY KEY NOT NULL, secret_hash BLOB NOT NULL UNIQUE, name TEXT NOT NULL,"
        " role TEXT NOT NULL, actions TEXT NOT NULL, sandboxes TEXT, created_by TEXT NOT NULL,"
        " created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL DEFAULT 0,"
        " revoked_at INTEGER NOT NULL DEFAULT 0); PRAGMA user_version = 1;";

static int user_version(const char *name) {
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        int v = -1;

        CHECK_INT(sqlite3_open(db_path(name), &db), SQLITE_OK);
        CHECK_INT(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL), SQLITE_OK);
        if (sqlite3_step(st) == SQLITE_ROW)
                v = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
        sqlite3_close(db);
        return v;
}

static void test_migrations(void) {
        const char *secret = "sbx_live_abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst";
        uint8_t hash[32];
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        KeyStore *s = NULL;
        ApiKey *k = NULL;
        char *token = NULL;

        /* An existing version-1 file with a key in it. */
        CHECK_INT(gnutls_hash_fast(GNUTLS_DIG_SHA256, secret, strlen(secret), hash), 0);
        CHECK_INT(sqlite3_open(db_path("v1.db"), &db), SQLITE_OK);
        CHECK_INT(sqlite3_exec(db, schema_v1, NULL, NULL, NULL), SQLITE_OK);
        CHECK_INT(sqlite3_prepare_v2(db,
                                     "INSERT INTO api_keys VALUES ('key_aaaaaaaaaaaaaaaaaaaa', ?1, 'old', 'member',"
                                     " 'exec,file.read,takeover,future.action', NULL, 'root', 1, 0, 0)",
                                     -1, &st, NULL),
                  SQLITE_OK);
        sqlite3_bind_blob(st, 1, hash, sizeof(hash), SQLITE_STATIC);
        CHECK_INT(sqlite3_step(st), SQLITE_DONE);
        sqlite3_finalize(st);
        sqlite3_close(db);

        CHECK_INT(key_store_open(db_path("v1.db"), &s), 0);
        CHECK_INT(user_version("v1.db"), 2);
        CHECK_INT(key_store_authenticate(s, secret, NOW, &k), 0);
        /* Stored names this version does not know, or that the role cannot hold, grant nothing. */
        CHECK(k && k->actions == (GATEWAY_ACTION_BIT(GATEWAY_ACTION_EXEC) | GATEWAY_ACTION_BIT(GATEWAY_ACTION_FILE_READ)));
        CHECK_INT(key_store_token_create(s, k, SB1, ROUTE, NOW, USEC_PER_SEC, &token, NULL), 0);
        free(token);
        api_key_free(k);
        key_store_free(s);

        /* Opening again changes nothing; a file from a later version is refused, untouched. */
        CHECK_INT(key_store_open(db_path("v1.db"), &s), 0);
        key_store_free(s);
        CHECK_INT(user_version("v1.db"), 2);
        CHECK_INT(sqlite3_open(db_path("future.db"), &db), SQLITE_OK);
        CHECK_INT(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);
        s = NULL;
        CHECK_INT(key_store_open(db_path("future.db"), &s), -EPROTO);
        CHECK(!s);
        CHECK_INT(user_version("future.db"), 99);

        CHECK_INT(key_store_open(db_path("no/such/dir.db"), &s), -ENOENT);
}

/* What an open stream's periodic check relies on (issue 21): another handle's commit, such as a
 * revocation by another gateway process, changes this handle's data_version; reads do not. */
static void test_data_version(void) {
        _cleanup_(key_store_freep) KeyStore *a = open_store("version.db"), *b = open_store("version.db");
        _cleanup_free_ char *secret = NULL;
        _cleanup_(api_key_freep) ApiKey *k = NULL, *got = NULL;
        uint64_t v0 = 0, v1 = 0, v2 = 0, v3 = 0;

        k = mint(a, "admin", 0, &secret);
        CHECK_INT(key_store_data_version(a, &v0), 0);
        CHECK_INT(key_store_get(b, k->id, &got), 0);
        got = api_key_free(got);
        CHECK_INT(key_store_data_version(a, &v1), 0);
        CHECK_U64(v1, v0); /* another handle's read is no change */

        CHECK_INT(key_store_revoke(b, k->id, NOW + 1), 0);
        CHECK_INT(key_store_data_version(a, &v2), 0);
        CHECK(v2 != v1);
        CHECK_INT(key_store_get(a, k->id, &got), 0);
        CHECK(got && got->revoked_at == NOW + 1);

        CHECK_INT(key_store_data_version(a, &v3), 0);
        CHECK_U64(v3, v2); /* nothing since */
        CHECK_INT(key_store_data_version(NULL, &v3), -EINVAL);
}

int main(void) {
        test_mkdtemp(tmpdir);

        test_keys();
        test_tokens();
        test_token_race();
        test_shared_across_processes();
        test_data_version();
        test_migrations();

        test_rm_rf(tmpdir);
        return test_finish("test-key-store");
}
