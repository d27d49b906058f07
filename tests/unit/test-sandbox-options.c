/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests sandbox-options: each Manager method's a{sv} options, accepted into their struct or refused with
 * a message naming what is wrong, on messages built as a client would send them. */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "macro.h"
#include "sandbox-options.h"
#include "sandboxd-bus.h"
#include "test-bus-msg.h"
#include "test-util.h"


/* Refused with the error want, and a message containing what. */
#define CHECK_REFUSED(r, e, want, what)                                            \
        do {                                                                       \
                CHECK((r) < 0);                                                    \
                CHECK_STR((e)->name, want);                                        \
                CHECK((e)->message &&strstr((e)->message, what));                  \
                if (!((e)->message && strstr((e)->message, what)))                 \
                        fprintf(stderr, "    message: %s\n", strna((e)->message)); \
        } while (0)

static Caller trusted(void) {
        Caller c = {.uid = 0, .trusted = 1};
        snprintf(c.account_id, sizeof(c.account_id), "uid:0");
        snprintf(c.source, sizeof(c.source), "agent");
        return c;
}

static void test_context(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        Caller c = trusted();
        sd_bus_message *m;
        int r;

        m = MSG("a{sv}", 3, "account_id", "s", "key_abc", "request_id", "s", "req_1", "source", "s",
                "human_takeover");
        CHECK_INT(context_options_read(m, &c, "SetTTL", &e), 0);
        CHECK_STR(c.account_id, "key_abc");
        CHECK_STR(c.request_id, "req_1");
        CHECK_STR(c.source, "human_takeover");
        sd_bus_message_unref(m);

        /* Someone else's context is checked, then ignored. */
        Caller u = {.uid = 1000};
        snprintf(u.account_id, sizeof(u.account_id), "uid:1000");
        m = MSG("a{sv}", 1, "account_id", "s", "key_abc");
        CHECK_INT(context_options_read(m, &u, "SetTTL", &e), 0);
        CHECK_STR(u.account_id, "uid:1000");
        sd_bus_message_unref(m);

        m = MSG("a{sv}", 1, "source", "s", "robot");
        r = context_options_read(m, &c, "SetTTL", &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "'source' must be");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);

        m = MSG("a{sv}", 1, "request_id", "u", 7);
        r = context_options_read(m, &c, "SetTTL", &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "'request_id' must be a string");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);

        char longer[CALLER_FIELD_MAX + 2];
        memset(longer, 'a', sizeof(longer) - 1);
        longer[sizeof(longer) - 1] = 0;
        m = MSG("a{sv}", 1, "account_id", "s", longer);
        r = context_options_read(m, &c, "DeleteSandbox", &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "longer than");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);

        m = MSG("a{sv}", 1, "ttl_seconds", "t", (uint64_t) 5);
        r = context_options_read(m, &c, "DeleteSandbox", &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "DeleteSandbox: unknown option 'ttl_seconds'");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);

        /* Not an a{sv} at all: bad input too, said so, not a bare errno. */
        m = MSG("a{ss}", 1, "a", "b");
        r = context_options_read(m, &c, "DeleteSandbox", &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "not a valid a{sv}");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
}

static void test_create(const SandboxdConfig *config) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        Caller c = trusted();
        CreateOptions o;
        CreateChoice ch;
        sd_bus_message *m;
        char buf[EGRESS_ENTRY_TEXT_MAX];
        int r;

        m = MSG("a{sv}", 0);
        CHECK_INT(create_options_read(m, &c, &o, &e), 0);
        CHECK(!o.name && !o.type && !o.have_ttl && !o.have_network && !o.have_egress_policy);
        CHECK_INT(create_options_check(&o, config, &ch, &e), 0);
        CHECK_STR(ch.type, config->default_type);
        CHECK_U64(ch.ttl_usec, config->default_ttl_usec);
        CHECK_INT(ch.network, SANDBOX_NETWORK_NONE); /* the type's */
        CHECK(!ch.policy);
        create_options_done(&o);
        sd_bus_message_unref(m);

        m = MSG("a{sv}", 5, "name", "s", "build-1", "type", "s", "medium", "network", "s", "none",
                "ttl_seconds", "t", (uint64_t) 60, "request_id", "s", "req_9");
        CHECK_INT(create_options_read(m, &c, &o, &e), 0);
        CHECK_STR(o.name, "build-1");
        CHECK(o.have_network && o.network == SANDBOX_NETWORK_NONE);
        CHECK(o.have_ttl && o.ttl_seconds == 60);
        CHECK_STR(c.request_id, "req_9");
        CHECK_INT(create_options_check(&o, config, &ch, &e), 0);
        CHECK_STR(ch.type, "medium");
        CHECK_U64(ch.ttl_usec, 60 * USEC_PER_SEC);
        create_options_done(&o);
        sd_bus_message_unref(m);

        /* egress: with no policy the type's, here none: an empty default-deny one */
        m = MSG("a{sv}", 1, "network", "s", "egress");
        CHECK_INT(create_options_read(m, &c, &o, &e), 0);
        CHECK_INT(create_options_check(&o, config, &ch, &e), 0);
        CHECK_INT(ch.network, SANDBOX_NETWORK_EGRESS);
        CHECK(ch.policy && ch.policy->default_action == EGRESS_DEFAULT_DENY && ch.policy->n_allow == 0 &&
              ch.policy->n_deny == 0);
        create_options_done(&o);
        sd_bus_message_unref(m);

        /* egress with a policy of its own, canonical entries */
        m = MSG("a{sv}", 2, "network", "s", "egress", "egress_policy", "a{sv}", 2, "default", "s", "allow", "deny",
                "as", 2, "PyPI.org.", "10.0.0.0/8");
        CHECK_INT(create_options_read(m, &c, &o, &e), 0);
        CHECK(o.have_egress_policy);
        CHECK_INT(create_options_check(&o, config, &ch, &e), 0);
        CHECK(ch.policy == &o.egress_policy);
        CHECK(ch.policy->default_action == EGRESS_DEFAULT_ALLOW && ch.policy->n_deny == 2);
        if (ch.policy->n_deny == 2)
                CHECK_STR(egress_entry_to_string(&ch.policy->deny[0], buf), "pypi.org");
        create_options_done(&o);
        create_options_done(&o); /* twice is fine */
        sd_bus_message_unref(m);

        /* host: refused unless the configuration allows it, naming the setting */
        m = MSG("a{sv}", 1, "network", "s", "host");
        CHECK_INT(create_options_read(m, &c, &o, &e), 0);
        r = create_options_check(&o, config, &ch, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "AllowHostNetwork=yes");
        sd_bus_error_free(&e);
        SandboxdConfig open = *config;
        open.network.allow_host_network = true;
        CHECK_INT(create_options_check(&o, &open, &ch, &e), 0);
        CHECK_INT(ch.network, SANDBOX_NETWORK_HOST);
        CHECK(!ch.policy);
        create_options_done(&o);
        sd_bus_message_unref(m);

        /* an egress_policy without network egress, given or by the type */
        m = MSG("a{sv}", 1, "egress_policy", "a{sv}", 1, "allow", "as", 1, "pypi.org");
        CHECK_INT(create_options_read(m, &c, &o, &e), 0);
        r = create_options_check(&o, config, &ch, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "'egress_policy' needs network \"egress\", not \"none\"");
        sd_bus_error_free(&e);
        create_options_done(&o);
        sd_bus_message_unref(m);

        /* a type whose Network= is egress, with a policy: both are the defaults */
        SandboxdConfig typed = *config;
        EgressPolicy tp = EGRESS_POLICY_INIT;
        CHECK_INT(egress_policy_add(&tp, true, "203.0.113.0/24", NULL), 0);
        for (size_t i = 0; i < typed.n_types; i++)
                if (streq(typed.types[i].name, "medium")) {
                        typed.types[i].network = SANDBOX_NETWORK_EGRESS;
                        typed.types[i].egress = &tp;
                }
        m = MSG("a{sv}", 1, "type", "s", "medium");
        CHECK_INT(create_options_read(m, &c, &o, &e), 0);
        CHECK_INT(create_options_check(&o, &typed, &ch, &e), 0);
        CHECK(ch.network == SANDBOX_NETWORK_EGRESS && ch.policy == &tp);
        create_options_done(&o);
        sd_bus_message_unref(m);
        m = MSG("a{sv}", 2, "type", "s", "medium", "network", "s", "none");
        CHECK_INT(create_options_read(m, &c, &o, &e), 0);
        CHECK_INT(create_options_check(&o, &typed, &ch, &e), 0);
        CHECK(ch.network == SANDBOX_NETWORK_NONE && !ch.policy);
        create_options_done(&o);
        sd_bus_message_unref(m);
        egress_policy_done(&tp);

        static const struct {
                const char *key, *value, *what;
        } bad[] = {
                {"name", "-x", "Invalid sandbox name"},
                {"name", "sb_abcdefghij", "may not look like a sandbox id"},
                {"network", "bridge", "'network' must be \"none\", \"egress\" or \"host\", not 'bridge'"},
                {"egress_policy", "deny", "Option 'egress_policy' must be of type 'a{sv}'"},
                {"colour", "red", "CreateSandbox: unknown option 'colour'"},
                {"ttl_seconds", "5", "Option 'ttl_seconds' must be of type 't'"},
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                m = MSG("a{sv}", 1, bad[i].key, "s", bad[i].value);
                r = create_options_read(m, &c, &o, &e);
                CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, bad[i].what);
                sd_bus_error_free(&e);
                sd_bus_message_unref(m);
        }
        /* bad policies: the policy's own messages, nothing kept */
        m = MSG("a{sv}", 2, "network", "s", "egress", "egress_policy", "a{sv}", 1, "allow", "as", 1, "10.0.0.1/8");
        r = create_options_read(m, &c, &o, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "host bits");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        m = MSG("a{sv}", 2, "egress_policy", "a{sv}", 1, "allow", "as", 1, "pypi.org", "egress_policy", "a{sv}", 1,
                "ports", "as", 0);
        r = create_options_read(m, &c, &o, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "Unknown egress policy key 'ports'");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);

        /* What needs the configuration. */
        CreateOptions t = {.type = "huge"};
        r = create_options_check(&t, config, &ch, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "Unknown sandbox type 'huge'");
        sd_bus_error_free(&e);
        uint64_t ttls[] = {0, config->max_ttl_usec / USEC_PER_SEC + 1, UINT64_MAX};
        for (size_t i = 0; i < ELEMENTSOF(ttls); i++) {
                t = (CreateOptions){.ttl_seconds = ttls[i], .have_ttl = true};
                r = create_options_check(&t, config, &ch, &e);
                CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "ttl_seconds must be between 1 and");
                sd_bus_error_free(&e);
        }

        /* Issue 24: image, the type's Image= by default, "host" over it, and the disk it needs. */
        CHECK_INT(create_options_check(&(CreateOptions) {}, config, &ch, &e), 0);
        CHECK(!ch.image);
        m = MSG("a{sv}", 1, "image", "s", "py312");
        CHECK_INT(create_options_read(m, &c, &o, &e), 0);
        CHECK_STR(o.image, "py312");
        CHECK_INT(create_options_check(&o, config, &ch, &e), 0);
        CHECK_STR(ch.image, "py312");
        create_options_done(&o);
        sd_bus_message_unref(m);
        m = MSG("a{sv}", 1, "image", "s", "a/b");
        r = create_options_read(m, &c, &o, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "Option 'image' must be \"host\" or an image's name");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        SandboxdConfig with_image = *config;
        SandboxType *small = (SandboxType *) sandboxd_config_find_type(&with_image, "small");
        CHECK(small != NULL);
        if (small) {
                strcpy(small->image, "node20");
                CHECK_INT(create_options_check(&(CreateOptions) {.type = "small"}, &with_image, &ch, &e), 0);
                CHECK_STR(ch.image, "node20");
                CHECK_INT(create_options_check(&(CreateOptions) {.type = "small", .image = "host"}, &with_image, &ch,
                                               &e), 0);
                CHECK(!ch.image);
                small->disk_max = 0;
                r = create_options_check(&(CreateOptions) {.type = "small"}, &with_image, &ch, &e);
                CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "has no disk (DiskMax=infinity)");
                sd_bus_error_free(&e);
                CHECK_INT(create_options_check(&(CreateOptions) {.type = "small", .image = "host"}, &with_image, &ch,
                                               &e), 0);
        }
}

static void test_exec(const SandboxdConfig *config) {
        const SandboxType *small = sandboxd_config_find_type(config, "small");
        sd_bus_error e = SD_BUS_ERROR_NULL;
        Caller c = trusted();
        ExecOptions o;
        ExecLimits l;
        sd_bus_message *m;
        char *argv[] = {(char *) "/bin/true", NULL}, *empty[] = {NULL}, *blank[] = {(char *) "", NULL};
        int r;

        m = MSG("a{sv}", 0);
        CHECK_INT(exec_options_read(m, &c, &o, &e), 0);
        CHECK(!o.cwd && !o.env && !o.stdin_data && o.stdin_size == 0 && !o.have_timeout);
        CHECK(o.stdout_fd == -1 && o.stderr_fd == -1);
        CHECK_INT(exec_options_check(&o, argv, small, config->stdin_max, &l, &e), 0);
        CHECK(!l.cwd);
        CHECK_U64(l.timeout_usec, small->default_timeout_usec);
        CHECK_U64(l.memory_max, small->memory_max);
        CHECK_U64(l.tasks_max, small->tasks_max);
        exec_limits_done(&l);
        exec_options_done(&o);
        sd_bus_message_unref(m);

        /* Every option; a second env replaces the first. */
        m = new_msg();
        CHECK(sd_bus_message_append(m, "a{sv}", 6, "cwd", "s", "work", "env", "a{ss}", 1, "A", "1", "env",
                                    "a{ss}", 2, "PATH", "/bin", "_x9", "a=b", "timeout_seconds", "t",
                                    (uint64_t) 5, "memory_max", "t", (uint64_t) (64 << 20), "tasks_max", "t",
                                    (uint64_t) 10) >= 0);
        done(m);
        CHECK_INT(exec_options_read(m, &c, &o, &e), 0);
        CHECK_STR(o.cwd, "work");
        CHECK(o.env && o.env[0] && o.env[1] && !o.env[2]);
        CHECK_STR(o.env[0], "PATH=/bin");
        CHECK_STR(o.env[1], "_x9=a=b");
        CHECK_INT(exec_options_check(&o, argv, small, config->stdin_max, &l, &e), 0);
        CHECK_STR(l.cwd, "/home/sandbox/work");
        CHECK_U64(l.timeout_usec, 5 * USEC_PER_SEC);
        CHECK_U64(l.memory_max, 64 << 20);
        CHECK_U64(l.tasks_max, 10);
        exec_limits_done(&l);
        exec_options_done(&o);
        sd_bus_message_unref(m);

        /* stdin and the streaming fds. */
        m = new_msg();
        CHECK(sd_bus_message_open_container(m, 'a', "{sv}") >= 0);
        CHECK(sd_bus_message_open_container(m, 'e', "sv") >= 0);
        CHECK(sd_bus_message_append(m, "s", "stdin") >= 0);
        CHECK(sd_bus_message_open_container(m, 'v', "ay") >= 0);
        CHECK(sd_bus_message_append_array(m, 'y', "abc", 3) >= 0);
        CHECK(sd_bus_message_close_container(m) >= 0);
        CHECK(sd_bus_message_close_container(m) >= 0);
        CHECK(sd_bus_message_append(m, "{sv}", "stdout_fd", "h", STDERR_FILENO) >= 0);
        CHECK(sd_bus_message_close_container(m) >= 0);
        done(m);
        CHECK_INT(exec_options_read(m, &c, &o, &e), 0);
        CHECK(o.stdin_size == 3 && memcmp(o.stdin_data, "abc", 3) == 0);
        CHECK(o.stdout_fd >= 0 && o.stderr_fd == -1);
        r = exec_options_check(&o, argv, small, 2, &l, &e);
        CHECK_REFUSED(r, &e, SANDBOXD_ERROR_LIMIT_EXCEEDED, "stdin is 3 bytes; at most 2");
        sd_bus_error_free(&e);
        exec_options_done(&o);
        sd_bus_message_unref(m);

        /* cancel_fd: a pipe (or a socket) reports a hang-up; a file or a device is refused. */
        int p[2];
        CHECK(pipe2(p, O_CLOEXEC) == 0);
        m = new_msg();
        CHECK(sd_bus_message_append(m, "a{sv}", 1, "cancel_fd", "h", p[0]) >= 0);
        done(m);
        CHECK_INT(exec_options_read(m, &c, &o, &e), 0);
        CHECK(o.cancel_fd >= 0 && o.cancel_fd != p[0] && o.stdout_fd == -1);
        exec_options_done(&o);
        sd_bus_message_unref(m);
        close(p[0]);
        close(p[1]);
        int nonpipe[] = {open("/dev/null", O_RDONLY | O_CLOEXEC), memfd_create("cancel", MFD_CLOEXEC)};
        for (size_t i = 0; i < ELEMENTSOF(nonpipe); i++) {
                CHECK(nonpipe[i] >= 0);
                m = new_msg();
                CHECK(sd_bus_message_append(m, "a{sv}", 1, "cancel_fd", "h", nonpipe[i]) >= 0);
                done(m);
                r = exec_options_read(m, &c, &o, &e);
                CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "Option 'cancel_fd' must be a pipe or a socket");
                sd_bus_error_free(&e);
                sd_bus_message_unref(m);
                close(nonpipe[i]);
        }

        static const struct {
                const char *name, *what;
        } bad_env[] = {
                {"", "Invalid environment variable name ''"},
                {"1A", "Invalid environment variable name '1A'"},
                {"A-B", "Invalid environment variable name 'A-B'"},
        };
        for (size_t i = 0; i < ELEMENTSOF(bad_env); i++) {
                m = MSG("a{sv}", 1, "env", "a{ss}", 1, bad_env[i].name, "x");
                r = exec_options_read(m, &c, &o, &e);
                CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, bad_env[i].what);
                sd_bus_error_free(&e);
                sd_bus_message_unref(m);
        }
        m = MSG("a{sv}", 1, "env", "as", 1, "A=1");
        r = exec_options_read(m, &c, &o, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "Option 'env' must be of type 'a{ss}'");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);

        /* One variable too many. */
        m = new_msg();
        CHECK(sd_bus_message_open_container(m, 'a', "{sv}") >= 0);
        CHECK(sd_bus_message_open_container(m, 'e', "sv") >= 0);
        CHECK(sd_bus_message_append(m, "s", "env") >= 0);
        CHECK(sd_bus_message_open_container(m, 'v', "a{ss}") >= 0);
        CHECK(sd_bus_message_open_container(m, 'a', "{ss}") >= 0);
        for (int i = 0; i <= ENV_MAX_ITEMS; i++) {
                char k[16];
                snprintf(k, sizeof(k), "V%d", i);
                CHECK(sd_bus_message_append(m, "{ss}", k, "") >= 0);
        }
        for (int i = 0; i < 4; i++)
                CHECK(sd_bus_message_close_container(m) >= 0);
        done(m);
        r = exec_options_read(m, &c, &o, &e);
        CHECK_REFUSED(r, &e, SANDBOXD_ERROR_LIMIT_EXCEEDED, "More than 1024 environment variables");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);

        static const struct {
                const char *key, *sig;
        } wrong[] = {{"cwd", "s"},       {"timeout_seconds", "t"}, {"memory_max", "t"}, {"tasks_max", "t"},
                     {"stdout_fd", "h"}, {"stderr_fd", "h"},       {"stdin", "ay"},
                     {"cancel_fd", "h"}};
        for (size_t i = 0; i < ELEMENTSOF(wrong); i++) {
                char what[64];
                m = MSG("a{sv}", 1, wrong[i].key, "b", 1);
                r = exec_options_read(m, &c, &o, &e);
                snprintf(what, sizeof(what), "Option '%s' must be of type '%s'", wrong[i].key, wrong[i].sig);
                CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, what);
                sd_bus_error_free(&e);
                sd_bus_message_unref(m);
        }

        /* The checks against the type. */
        ExecOptions x = {.stdout_fd = -1, .stderr_fd = -1};
        r = exec_options_check(&x, empty, small, config->stdin_max, &l, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "argv must not be empty");
        sd_bus_error_free(&e);
        r = exec_options_check(&x, blank, small, config->stdin_max, &l, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "argv must not be empty");
        sd_bus_error_free(&e);
        char **many = calloc(ARGV_MAX_ITEMS + 2, sizeof(char *));
        for (int i = 0; i <= ARGV_MAX_ITEMS; i++)
                many[i] = (char *) "x";
        r = exec_options_check(&x, many, small, config->stdin_max, &l, &e);
        CHECK_REFUSED(r, &e, SANDBOXD_ERROR_LIMIT_EXCEEDED, "argv is too long (4097 items");
        sd_bus_error_free(&e);
        free(many);

        x = (ExecOptions){.cwd = "../../etc", .stdout_fd = -1, .stderr_fd = -1};
        r = exec_options_check(&x, argv, small, config->stdin_max, &l, &e);
        if (r >= 0) { /* resolved within the sandbox's root: fine too, as long as it is absolute */
                CHECK(l.cwd && l.cwd[0] == '/');
                exec_limits_done(&l);
        } else
                CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "Invalid cwd");
        sd_bus_error_free(&e);

        static const struct {
                ExecOptions o;
                const char *name, *what;
        } limits[] = {
                {{.timeout_seconds = 0, .have_timeout = true},
                 SD_BUS_ERROR_INVALID_ARGS,
                 "timeout_seconds must be between 1 and"},
                {{.timeout_seconds = UINT64_MAX, .have_timeout = true},
                 SD_BUS_ERROR_INVALID_ARGS,
                 "timeout_seconds must be between 1 and"},
                {{.timeout_seconds = 3601, .have_timeout = true},
                 SANDBOXD_ERROR_LIMIT_EXCEEDED,
                 "timeout_seconds 3601 exceeds the maximum of type 'small'"},
                {{.memory_max = 1024}, SD_BUS_ERROR_INVALID_ARGS, "memory_max must be at least 1 MiB"},
                {{.memory_max = UINT64_MAX},
                 SANDBOXD_ERROR_LIMIT_EXCEEDED,
                 "memory_max 18446744073709551615 exceeds"},
                {{.tasks_max = 257},
                 SANDBOXD_ERROR_LIMIT_EXCEEDED,
                 "tasks_max 257 exceeds the maximum of type 'small' (256)"},
        };
        for (size_t i = 0; i < ELEMENTSOF(limits); i++) {
                r = exec_options_check(&limits[i].o, argv, small, config->stdin_max, &l, &e);
                CHECK_REFUSED(r, &e, limits[i].name, limits[i].what);
                sd_bus_error_free(&e);
        }
}

static void test_files(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        Caller c = trusted();
        WriteFileOptions w;
        ReadFileOptions rd;
        sd_bus_message *m;
        char *path = NULL;
        int r;

        m = MSG("a{sv}", 0);
        CHECK_INT(write_file_options_read(m, &c, &w, &e), 0);
        CHECK(w.mode == 0644 && !w.create_dirs && !w.append && w.fd == -1);
        sd_bus_message_unref(m);

        m = MSG("a{sv}", 4, "mode", "u", 0755, "create_dirs", "b", 1, "append", "b", 1, "fd", "h",
                STDERR_FILENO);
        CHECK_INT(write_file_options_read(m, &c, &w, &e), 0);
        CHECK(w.mode == 0755 && w.create_dirs && w.append && w.fd >= 0);
        CHECK_INT(write_file_options_check(&w, "/tmp/x", 0, 100, &path, &e), 0);
        CHECK_STR(path, "/tmp/x");
        free(path);
        path = NULL;
        r = write_file_options_check(&w, "/tmp/x", 1, 100, &path, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "Pass data or an fd, not both");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);

        m = MSG("a{sv}", 1, "mode", "t", (uint64_t) 0644);
        r = write_file_options_read(m, &c, &w, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "Option 'mode' must be of type 'u'");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        m = MSG("a{sv}", 1, "offset", "t", (uint64_t) 1);
        r = write_file_options_read(m, &c, &w, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "WriteFile: unknown option 'offset'");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);

        WriteFileOptions wm = {.mode = 01777, .fd = -1};
        r = write_file_options_check(&wm, "a", 0, 100, &path, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "mode 1777 is not within 0000-0777");
        sd_bus_error_free(&e);
        wm.mode = 0600;
        r = write_file_options_check(&wm, "a", 101, 100, &path, &e);
        CHECK_REFUSED(r, &e, SANDBOXD_ERROR_LIMIT_EXCEEDED, "data is 101 bytes; at most 100");
        sd_bus_error_free(&e);
        r = write_file_options_check(&wm, "", 0, 100, &path, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "Invalid path ''");
        sd_bus_error_free(&e);
        CHECK(!path);

        m = MSG("a{sv}", 2, "offset", "t", (uint64_t) 10, "length", "t", (uint64_t) 20);
        CHECK_INT(read_file_options_read(m, &c, &rd, &e), 0);
        CHECK(rd.offset == 10 && rd.length == 20 && rd.fd == -1);
        CHECK_INT(read_file_options_check(&rd, "f", 100, &path, &e), 0);
        CHECK_STR(path, "/home/sandbox/f");
        free(path);
        path = NULL;
        sd_bus_message_unref(m);

        ReadFileOptions rl = {.length = 101, .fd = -1};
        r = read_file_options_check(&rl, "f", 100, &path, &e);
        CHECK_REFUSED(r, &e, SANDBOXD_ERROR_LIMIT_EXCEEDED, "length 101 exceeds the 100 bytes");
        sd_bus_error_free(&e);
        rl.fd = 5; /* into an fd: any length */
        CHECK_INT(read_file_options_check(&rl, "f", 100, &path, &e), 0);
        free(path);
        path = NULL;
        rl = (ReadFileOptions){.offset = (uint64_t) INT64_MAX + 1, .fd = -1};
        r = read_file_options_check(&rl, "f", 100, &path, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "offset is out of range");
        sd_bus_error_free(&e);
        m = MSG("a{sv}", 1, "mode", "u", 0644);
        r = read_file_options_read(m, &c, &rd, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "ReadFile: unknown option 'mode'");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
}

static void test_shell(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        Caller c = trusted();
        ShellOptions o;
        sd_bus_message *m;
        int r;

        m = MSG("a{sv}", 0);
        CHECK_INT(shell_options_read(m, &c, &o, &e), 0);
        CHECK(o.cols == 80 && o.rows == 24 && !o.term);
        CHECK_INT(shell_options_check(&o, &e), 0);
        sd_bus_message_unref(m);

        m = MSG("a{sv}", 3, "cols", "u", 132, "rows", "u", 50, "term", "s", "xterm-256color");
        CHECK_INT(shell_options_read(m, &c, &o, &e), 0);
        CHECK(o.cols == 132 && o.rows == 50);
        CHECK_STR(o.term, "xterm-256color");
        CHECK_INT(shell_options_check(&o, &e), 0);
        sd_bus_message_unref(m);

        m = MSG("a{sv}", 1, "cols", "i", 100);
        r = shell_options_read(m, &c, &o, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "Option 'cols' must be of type 'u'");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);

        ShellOptions bad[] = {{0, 24, NULL}, {80, 0, NULL}, {1001, 24, NULL}, {80, 1001, NULL}};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                r = shell_options_check(&bad[i], &e);
                CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "Terminal size");
                sd_bus_error_free(&e);
        }
        ShellOptions t = {80, 24, "x;rm"};
        r = shell_options_check(&t, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "Invalid term");
        sd_bus_error_free(&e);
}

static void test_tools(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        Caller c = trusted();
        ToolOptions o;
        sd_bus_message *m;
        int r;

        m = MSG("a{sv}", 0);
        CHECK_INT(tool_options_read(TOOL_VIEW, m, &c, &o, &e), 0);
        CHECK(o.fd == -1 && o.mode == 0644 && !o.path && !o.glob && !o.path_bytes && o.max_results == 0);
        sd_bus_message_unref(m);

        m = MSG("a{sv}", 4, "path", "s", "src", "glob", "s", "*.c", "ignore_case", "b", 1, "max_results",
                "u", 5);
        CHECK_INT(tool_options_read(TOOL_GREP, m, &c, &o, &e), 0);
        CHECK_STR(o.path, "src");
        CHECK_STR(o.glob, "*.c");
        CHECK(o.ignore_case && o.max_results == 5);
        sd_bus_message_unref(m);

        m = MSG("a{sv}", 3, "overwrite", "b", 1, "mode", "u", 0600, "create_dirs", "b", 1);
        CHECK_INT(tool_options_read(TOOL_FILE_CREATE, m, &c, &o, &e), 0);
        CHECK(o.overwrite && o.create_dirs && o.mode == 0600);
        sd_bus_message_unref(m);

        m = MSG("a{sv}", 2, "start_line", "u", 3, "end_line", "u", 9);
        CHECK_INT(tool_options_read(TOOL_VIEW, m, &c, &o, &e), 0);
        CHECK(o.start_line == 3 && o.end_line == 9);
        sd_bus_message_unref(m);

        m = new_msg();
        CHECK(sd_bus_message_open_container(m, 'a', "{sv}") >= 0);
        CHECK(sd_bus_message_open_container(m, 'e', "sv") >= 0);
        CHECK(sd_bus_message_append(m, "s", "path_bytes") >= 0);
        CHECK(sd_bus_message_open_container(m, 'v', "ay") >= 0);
        CHECK(sd_bus_message_append_array(m, 'y', "a\xff", 2) >= 0);
        for (int i = 0; i < 3; i++)
                CHECK(sd_bus_message_close_container(m) >= 0);
        done(m);
        CHECK_INT(tool_options_read(TOOL_LS, m, &c, &o, &e), 0);
        CHECK(o.path_bytes_size == 2 && memcmp(o.path_bytes, "a\xff", 2) == 0);
        sd_bus_message_unref(m);

        /* Options of other tools are unknown here. */
        static const struct {
                ToolKind kind;
                const char *key, *what;
        } other[] = {
                {TOOL_VIEW, "overwrite", "View: unknown option 'overwrite'"},
                {TOOL_LS, "fd", "Ls: unknown option 'fd'"},
                {TOOL_GLOB, "glob", "Glob: unknown option 'glob'"},
                {TOOL_INSERT, "max_results", "Insert: unknown option 'max_results'"},
                {TOOL_STR_REPLACE, "path", "StrReplace: unknown option 'path'"},
        };
        for (size_t i = 0; i < ELEMENTSOF(other); i++) {
                m = MSG("a{sv}", 1, other[i].key, "b", 1);
                r = tool_options_read(other[i].kind, m, &c, &o, &e);
                CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, other[i].what);
                sd_bus_error_free(&e);
                sd_bus_message_unref(m);
        }
        m = MSG("a{sv}", 1, "glob", "s", "");
        r = tool_options_read(TOOL_GREP, m, &c, &o, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "'glob' must be 1 to 4096 bytes");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        m = MSG("a{sv}", 1, "max_results", "t", (uint64_t) 5);
        r = tool_options_read(TOOL_GLOB, m, &c, &o, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "Glob: option 'max_results' must be of type 'u'");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        m = MSG("a{sv}", 1, "path_bytes", "s", "x");
        r = tool_options_read(TOOL_VIEW, m, &c, &o, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "View: option 'path_bytes' must be of type 'ay'");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
}

/* Issue 25: StartProcess takes Exec's options except the ones about stdin and output. */
static void test_process(const SandboxdConfig *config) {
        const SandboxType *small = sandboxd_config_find_type(config, "small");
        sd_bus_error e = SD_BUS_ERROR_NULL;
        Caller c = trusted();
        ExecOptions o;
        ExecLimits l;
        sd_bus_message *m;
        char *argv[] = {(char *) "sleep", (char *) "100", NULL};
        int r;

        m = new_msg();
        CHECK(sd_bus_message_append(m, "a{sv}", 6, "cwd", "s", "/tmp", "env", "a{ss}", 1, "A", "1",
                                    "timeout_seconds", "t", (uint64_t) 30, "memory_max", "t", (uint64_t) (64 << 20),
                                    "tasks_max", "t", (uint64_t) 10, "request_id", "s", "req_1") >= 0);
        done(m);
        CHECK_INT(process_options_read(m, &c, &o, &e), 0);
        CHECK_STR(o.cwd, "/tmp");
        CHECK(o.env && o.env[0] && !o.env[1]);
        CHECK_STR(c.request_id, "req_1");
        CHECK_INT(exec_options_check(&o, argv, small, 0, &l, &e), 0);
        CHECK_U64(l.timeout_usec, 30 * USEC_PER_SEC);
        CHECK_U64(l.tasks_max, 10);
        exec_limits_done(&l);
        exec_options_done(&o);
        sd_bus_message_unref(m);

        const char *refused[] = {"stdin", "stdout_fd", "stderr_fd", "cancel_fd", "cols"};
        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                m = new_msg();
                CHECK(sd_bus_message_append(m, "a{sv}", 1, refused[i], "s", "x") >= 0);
                done(m);
                r = process_options_read(m, &c, &o, &e);
                CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "StartProcess: unknown option");
                sd_bus_error_free(&e);
                sd_bus_message_unref(m);
        }

        m = new_msg();
        CHECK(sd_bus_message_append(m, "a{sv}", 1, "timeout_seconds", "s", "soon") >= 0);
        done(m);
        r = process_options_read(m, &c, &o, &e);
        CHECK_REFUSED(r, &e, SD_BUS_ERROR_INVALID_ARGS, "Option 'timeout_seconds' must be of type 't'");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
}

int main(void) {
        SandboxdConfig config;

        sandboxd_config_defaults(&config);
        bus_setup();
        test_context();
        test_create(&config);
        test_exec(&config);
        test_process(&config);
        test_files();
        test_shell();
        test_tools();
        sd_bus_unref(bus);
        return test_finish("test-sandbox-options");
}
