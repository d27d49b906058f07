/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for gatewayd-keys: the Keys vtable over a direct connection, its errors, and its own root check. */
#include <errno.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <systemd/sd-id128.h>
#include <unistd.h>

#include "gatewayd-keys.h"
#include "macro.h"
#include "test-util.h"

#define PATH "/org/sandboxd/gateway1"
#define IFACE "org.sandboxd.gateway1.Keys"

static char tmpdir[] = "/tmp/test-gatewayd-keys.XXXXXX";
static unsigned changes_seen = 0;

static void on_change(const char *operation, const ApiKey *k, const char *account_id, void *userdata) {
        /* The server runs in the parent: count what the client's calls changed. */
        CHECK(streq(operation, "api_key.create") || streq(operation, "api_key.revoke"));
        CHECK(k && k->id);
        CHECK_STR(account_id, "uid:0");
        changes_seen++;
}

/* --- the client side, in a child ---------------------------------------------------------------- */

static int call(sd_bus *bus, const char *method, sd_bus_error *error, sd_bus_message **reply, const char *types, ...) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        va_list ap;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, NULL, PATH, IFACE, method);
        if (r < 0)
                return r;
        if (types) {
                va_start(ap, types);
                r = sd_bus_message_appendv(m, types, ap);
                va_end(ap);
                if (r < 0)
                        return r;
        }
        return sd_bus_call(bus, m, 0, error, reply);
}

static void expect_error(int r, const sd_bus_error *e, const char *name, const char *needle) {
        CHECK(r < 0);
        CHECK_STR(e->name, name);
        if (needle && (!e->message || !strstr(e->message, needle))) {
                fprintf(stderr, "error message \"%s\" lacks \"%s\"\n", strna(e->message), needle);
                failures++;
        }
}

static void client_as_root(sd_bus *bus) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        const char *secret_in_reply = NULL, *js = NULL;
        _cleanup_free_ char *secret = NULL;
        int r;

        r = call(bus, "CreateKey", &e, &reply, "a{sv}", 3, "preset", "s", "runner", "ttl_seconds", "t", UINT64_C(7200),
                 "name", "s", "ci");
        CHECK_INT(r, 1);
        CHECK(sd_bus_message_read(reply, "ss", &secret_in_reply, &js) >= 0);
        CHECK(secret_is_well_formed(secret_in_reply, API_KEY_SECRET_PREFIX));
        secret = strdup(strempty(secret_in_reply));
        json_object *o = json_tokener_parse(js);
        CHECK(o);
        const char *id = json_object_get_string(json_object_object_get(o, "id"));
        CHECK_STR(json_object_get_string(json_object_object_get(o, "role")), "member");
        CHECK_STR(json_object_get_string(json_object_object_get(o, "name")), "ci");
        _cleanup_free_ char *key_id = strdup(strempty(id));
        json_object_put(o);
        reply = sd_bus_message_unref(reply);

        /* An empty actions array means exactly no actions: refused, not "the preset's". */
        r = call(bus, "CreateKey", &e, NULL, "a{sv}", 1, "actions", "as", 0);
        expect_error(r, &e, SD_BUS_ERROR_INVALID_ARGS, "at least one action");
        sd_bus_error_free(&e);
        r = call(bus, "CreateKey", &e, NULL, "a{sv}", 1, "colour", "s", "blue");
        expect_error(r, &e, SD_BUS_ERROR_INVALID_ARGS, "Unknown key spec field 'colour'");
        sd_bus_error_free(&e);
        r = call(bus, "CreateKey", &e, NULL, "a{sv}", 1, "ttl_seconds", "s", "1h");
        expect_error(r, &e, SD_BUS_ERROR_INVALID_ARGS, "must be of type 't', not 's'");
        sd_bus_error_free(&e);
        r = call(bus, "CreateKey", &e, NULL, "a{sv}", 2, "name", "s", "a", "name", "s", "b");
        expect_error(r, &e, SD_BUS_ERROR_INVALID_ARGS, "given twice");
        sd_bus_error_free(&e);
        r = call(bus, "CreateKey", &e, NULL, "a{sv}", 1, "ttl_seconds", "t", UINT64_C(0));
        expect_error(r, &e, SD_BUS_ERROR_INVALID_ARGS, "ttl_seconds");
        sd_bus_error_free(&e);
        r = call(bus, "CreateKey", &e, NULL, "a{sv}", 2, "role", "s", "member", "actions", "as", 1, "takeover");
        expect_error(r, &e, SD_BUS_ERROR_INVALID_ARGS, "cannot hold: takeover");
        sd_bus_error_free(&e);
        r = call(bus, "CreateKey", &e, NULL, "a{sv}", 1, "sandboxes", "as", 1, "sb_NOPE");
        expect_error(r, &e, SD_BUS_ERROR_INVALID_ARGS, "sb_NOPE");
        sd_bus_error_free(&e);

        /* List: one key, the one made, no secret anywhere. */
        r = call(bus, "ListKeys", &e, &reply, NULL);
        CHECK_INT(r, 1);
        CHECK(sd_bus_message_read(reply, "s", &js) >= 0);
        o = json_tokener_parse(js);
        json_object *a = json_object_object_get(o, "api_keys");
        CHECK_INT(json_object_array_length(a), 1);
        CHECK(!strstr(js, secret + strlen(API_KEY_SECRET_PREFIX)));
        json_object_put(o);
        reply = sd_bus_message_unref(reply);

        /* Revoke: twice is fine, unknown is NoSuchKey, empty is InvalidArgs. */
        CHECK_INT(call(bus, "RevokeKey", &e, NULL, "s", key_id), 1);
        CHECK_INT(call(bus, "RevokeKey", &e, NULL, "s", key_id), 1);
        r = call(bus, "RevokeKey", &e, NULL, "s", "key_aaaaaaaaaaaaaaaaaaaa");
        expect_error(r, &e, "org.sandboxd.gateway1.NoSuchKey", "key_aaaaaaaaaaaaaaaaaaaa");
        sd_bus_error_free(&e);
        r = call(bus, "RevokeKey", &e, NULL, "s", "");
        expect_error(r, &e, SD_BUS_ERROR_INVALID_ARGS, NULL);
        sd_bus_error_free(&e);
}

static void client_as_other(sd_bus *bus) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        int r;

        r = call(bus, "ListKeys", &e, NULL, NULL);
        expect_error(r, &e, SD_BUS_ERROR_ACCESS_DENIED, "Only root");
        sd_bus_error_free(&e);
        r = call(bus, "CreateKey", &e, NULL, "a{sv}", 1, "preset", "s", "admin");
        expect_error(r, &e, SD_BUS_ERROR_ACCESS_DENIED, "Only root");
        sd_bus_error_free(&e);
        r = call(bus, "RevokeKey", &e, NULL, "s", "key_aaaaaaaaaaaaaaaaaaaa");
        expect_error(r, &e, SD_BUS_ERROR_ACCESS_DENIED, "Only root");
        sd_bus_error_free(&e);
}

/* Becomes drop_to (unless 0), then connects to the server as a plain peer-to-peer client: the server
 * sees the credentials of the process that connected (SO_PEERCRED), so the drop must come first. */
static int run_client(const struct sockaddr_un *sa, socklen_t salen, uid_t drop_to) {
        sd_bus *bus = NULL;
        int fd, r;

        if (drop_to != 0 && (setresgid(drop_to, drop_to, drop_to) < 0 || setresuid(drop_to, drop_to, drop_to) < 0)) {
                perror("setresuid");
                return EXIT_FAILURE;
        }
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (const struct sockaddr *) sa, salen) < 0) {
                perror("connect");
                return EXIT_FAILURE;
        }
        r = sd_bus_new(&bus);
        if (r >= 0)
                r = sd_bus_set_fd(bus, fd, fd);
        if (r >= 0)
                r = sd_bus_start(bus);
        if (r < 0) {
                fprintf(stderr, "client: %s\n", strerror(-r));
                return EXIT_FAILURE;
        }
        if (geteuid() == 0)
                client_as_root(bus);
        else
                client_as_other(bus);
        sd_bus_flush_close_unref(bus);
        return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* --- the server side, in the parent ---------------------------------------------------------------- */

static int on_child_exit(sd_event_source *s, const siginfo_t *si, void *userdata) {
        int *status = userdata;
        *status = si->si_code == CLD_EXITED ? si->si_status : 128 + si->si_status;
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

/* Serves Keys on an abstract socket while a child connects and calls it. */
static void serve_one_client(KeyStore *store, uid_t drop_to, unsigned expected_changes) {
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        sd_bus *bus = NULL;
        sd_id128_t id;
        int lfd, cfd, status = -1;
        sigset_t mask;
        pid_t pid;

        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        CHECK(sigprocmask(SIG_BLOCK, &mask, NULL) == 0);
        /* abstract: no file whose permissions would stop the unprivileged child */
        int n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "test-gatewayd-keys-%d-%u", (int) getpid(),
                         expected_changes);
        socklen_t salen = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + (size_t) n);
        lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *) &sa, salen) == 0 && listen(lfd, 1) == 0);
        changes_seen = 0;

        pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
                close(lfd);
                _exit(run_client(&sa, salen, drop_to));
        }
        cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        CHECK(cfd >= 0);
        close(lfd);

        CHECK(sd_event_new(&event) >= 0);
        CHECK(sd_id128_randomize(&id) >= 0);
        CHECK(sd_bus_new(&bus) >= 0);
        CHECK(sd_bus_set_fd(bus, cfd, cfd) >= 0);
        CHECK(sd_bus_set_server(bus, 1, id) >= 0);
        /* Credentials travel with each message over a direct connection only when asked for. */
        CHECK(sd_bus_negotiate_creds(bus, 1, SD_BUS_CREDS_EUID | SD_BUS_CREDS_UID | SD_BUS_CREDS_PID) >= 0);
        CHECK(gateway_keys_bus_add(bus, store, on_change, NULL, NULL) >= 0);
        CHECK(sd_bus_start(bus) >= 0);
        CHECK(sd_bus_attach_event(bus, event, 0) >= 0);
        CHECK(sd_event_add_child(event, NULL, pid, WEXITED, on_child_exit, &status) >= 0);
        CHECK(sd_event_loop(event) >= 0);
        CHECK_INT(status, 0);
        CHECK_INT(changes_seen, expected_changes);
        sd_bus_flush_close_unref(bus);
}

int main(void) {
        _cleanup_(key_store_freep) KeyStore *store = NULL;
        char path[256];

        test_mkdtemp(tmpdir);
        snprintf(path, sizeof(path), "%s/keys.db", tmpdir);
        CHECK(key_store_open(path, &store) >= 0);

        if (geteuid() == 0) {
                /* one create and one revoke reach on_change; the second revoke and all refusals do not */
                serve_one_client(store, 0, 2);
                serve_one_client(store, 65534, 0);
        } else {
                printf("not root: only the refusal of a non-root caller is tested\n");
                serve_one_client(store, 0, 0);
        }

        test_rm_rf(tmpdir);
        return test_finish("test-gatewayd-keys");
}
