/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes sandboxd's readers of the Manager methods' options (sandbox-options.c): every one of them over
 * one message made from the input (fuzz-bus.h: an argv "as", then an options "a{sv}"), as a trusted and
 * as an untrusted caller, then the checks against the built-in configuration. What is accepted must be
 * fully valid; what is refused must say why. */
#include "egress-policy.h"
#include "fuzz-bus.h"
#include "sandbox-id.h"
#include "sandbox-options.h"
#include "sandbox-shell.h"
#include "sandboxd-bus.h"
#include "time-util.h"

static SandboxdConfig config;

static bool caller_is_sane(const Caller *c, const Caller *before) {
        if (!memchr(c->account_id, 0, sizeof(c->account_id)) ||
            !memchr(c->request_id, 0, sizeof(c->request_id)) || !memchr(c->source, 0, sizeof(c->source)))
                return false;
        if (!streq(c->source, "agent") && !streq(c->source, "human_takeover"))
                return false;
        /* An untrusted caller's context is its own, whatever it sends. */
        return c->trusted || (streq(c->account_id, before->account_id) &&
                              streq(c->request_id, before->request_id) && streq(c->source, before->source));
}

static void check_create(sd_bus_message *m, Caller *c) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(create_options_done) CreateOptions o = {};
        CreateChoice ch;
        int r;

        r = create_options_read(m, c, &o, &e);
        if (r < 0) {
                FUZZ_ASSERT_REFUSED(r, &e);
                sd_bus_error_free(&e);
                return;
        }
        FUZZ_ASSERT(!o.name || (name_is_valid(o.name) && !sandbox_id_is_valid(o.name)));
        FUZZ_ASSERT(!o.have_network || (o.network >= 0 && o.network < _SANDBOX_NETWORK_MAX));
        r = create_options_check(&o, &config, &ch, &e);
        if (r < 0) {
                FUZZ_ASSERT_REFUSED(r, &e);
                sd_bus_error_free(&e);
                return;
        }
        FUZZ_ASSERT(sandboxd_config_find_type(&config, ch.type));
        FUZZ_ASSERT(ch.ttl_usec > 0 && ch.ttl_usec <= config.max_ttl_usec);
        /* the shipped default: no host network; a policy exactly with egress */
        FUZZ_ASSERT(ch.network != SANDBOX_NETWORK_HOST);
        FUZZ_ASSERT(!!ch.policy == (ch.network == SANDBOX_NETWORK_EGRESS));
}

static void check_exec(sd_bus_message *m, Caller *c) {
        _cleanup_strv_free_ char **argv = NULL;
        const SandboxType *t = sandboxd_config_find_type(&config, "small");
        sd_bus_error e = SD_BUS_ERROR_NULL;
        ExecOptions o;
        ExecLimits l;
        size_t n = 0;
        int r;

        if (sd_bus_message_read_strv(m, &argv) < 0)
                return;
        r = exec_options_read(m, c, &o, &e);
        if (r < 0) {
                FUZZ_ASSERT_REFUSED(r, &e);
                sd_bus_error_free(&e);
                return;
        }
        for (char **p = o.env; p && *p; p++, n++) {
                const char *eq = strchr(*p, '=');
                FUZZ_ASSERT(eq && eq > *p && !(**p >= '0' && **p <= '9'));
                for (const char *k = *p; k < eq; k++)
                        FUZZ_ASSERT((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') ||
                                    (*k >= '0' && *k <= '9') || *k == '_');
        }
        FUZZ_ASSERT(n <= ENV_MAX_ITEMS);
        FUZZ_ASSERT(o.stdin_size == 0 || o.stdin_data);
        r = exec_options_check(&o, argv, t, config.stdin_max, &l, &e);
        if (r < 0) {
                FUZZ_ASSERT_REFUSED(r, &e);
                sd_bus_error_free(&e);
        } else {
                FUZZ_ASSERT(argv && argv[0] && argv[0][0]);
                FUZZ_ASSERT(o.stdin_size <= config.stdin_max);
                FUZZ_ASSERT(!l.cwd || l.cwd[0] == '/');
                FUZZ_ASSERT(l.timeout_usec > 0 && l.timeout_usec <= t->max_timeout_usec);
                FUZZ_ASSERT(l.memory_max >= 1024 * 1024 && l.memory_max <= t->memory_max);
                FUZZ_ASSERT(l.tasks_max > 0 && l.tasks_max <= t->tasks_max);
                exec_limits_done(&l);
        }
        exec_options_done(&o);
}

/* StartProcess (issue 25): Exec's options without stdin and the fds; accepted, they pass Exec's checks as
 * a call with the type's maximal timeout would. */
static void check_process(sd_bus_message *m, Caller *c) {
        _cleanup_strv_free_ char **argv = NULL;
        const SandboxType *t = sandboxd_config_find_type(&config, "small");
        sd_bus_error e = SD_BUS_ERROR_NULL;
        ExecOptions o;
        ExecLimits l;
        int r;

        if (sd_bus_message_read_strv(m, &argv) < 0)
                return;
        r = process_options_read(m, c, &o, &e);
        if (r < 0) {
                FUZZ_ASSERT_REFUSED(r, &e);
                sd_bus_error_free(&e);
                return;
        }
        FUZZ_ASSERT(o.stdin_size == 0 && o.stdout_fd == -1 && o.stderr_fd == -1 && o.cancel_fd == -1);
        r = exec_options_check(&o, argv, t, 0, &l, &e);
        if (r < 0) {
                FUZZ_ASSERT_REFUSED(r, &e);
                sd_bus_error_free(&e);
        } else {
                FUZZ_ASSERT(argv && argv[0] && argv[0][0]);
                FUZZ_ASSERT(l.timeout_usec > 0 && l.timeout_usec <= t->max_timeout_usec);
                exec_limits_done(&l);
        }
        exec_options_done(&o);
}

static void check_files(sd_bus_message *m, Caller *c, bool write, const char *path) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        char *resolved = NULL;
        int r;

        if (write) {
                WriteFileOptions o;
                r = write_file_options_read(m, c, &o, &e);
                if (r >= 0) {
                        r = write_file_options_check(&o, path, 0, config.file_max, &resolved, &e);
                        if (r >= 0)
                                FUZZ_ASSERT(o.mode <= 0777);
                }
        } else {
                ReadFileOptions o;
                r = read_file_options_read(m, c, &o, &e);
                if (r >= 0) {
                        r = read_file_options_check(&o, path, config.file_max, &resolved, &e);
                        if (r >= 0)
                                FUZZ_ASSERT(o.offset <= (uint64_t) INT64_MAX &&
                                            (o.fd >= 0 || o.length <= config.file_max));
                }
        }
        if (r < 0)
                FUZZ_ASSERT_REFUSED(r, &e);
        else
                FUZZ_ASSERT(resolved && resolved[0] == '/');
        free(resolved);
        sd_bus_error_free(&e);
}

static void check_shell(sd_bus_message *m, Caller *c) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        ShellOptions o;
        int r;

        r = shell_options_read(m, c, &o, &e);
        if (r >= 0)
                r = shell_options_check(&o, &e);
        if (r < 0)
                FUZZ_ASSERT_REFUSED(r, &e);
        else {
                FUZZ_ASSERT(o.cols >= 1 && o.cols <= SHELL_COLS_MAX && o.rows >= 1 &&
                            o.rows <= SHELL_ROWS_MAX);
                FUZZ_ASSERT(!o.term || shell_term_is_valid(o.term));
        }
        sd_bus_error_free(&e);
}

static void check_tool(sd_bus_message *m, Caller *c, ToolKind kind) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        ToolOptions o;
        int r;

        r = tool_options_read(kind, m, c, &o, &e);
        if (r < 0) {
                FUZZ_ASSERT_REFUSED(r, &e);
                sd_bus_error_free(&e);
                return;
        }
        /* Only the tool's own options get through. */
        if (kind != TOOL_FILE_CREATE)
                FUZZ_ASSERT(!o.overwrite && !o.create_dirs && o.mode == 0644);
        if (kind != TOOL_FILE_CREATE && kind != TOOL_VIEW)
                FUZZ_ASSERT(o.fd == -1);
        if (kind != TOOL_VIEW)
                FUZZ_ASSERT(o.start_line == 0 && o.end_line == 0);
        if (kind != TOOL_GREP)
                FUZZ_ASSERT(!o.glob && !o.ignore_case);
        else
                FUZZ_ASSERT(!o.glob || (o.glob[0] && strlen(o.glob) <= TOOL_PATTERN_MAX));
        if (kind != TOOL_GLOB && kind != TOOL_GREP)
                FUZZ_ASSERT(!o.path);
        FUZZ_ASSERT(o.path_bytes_size == 0 || o.path_bytes);
}

/* Runs one reader over the options, positioned past the argv; as a trusted caller, then an untrusted one. */
/* SetNetworkPolicy's policy a{sv} (egress_policy_from_bus(), CreateSandbox's egress_policy too): accepted,
 * it is whole and within the limits, and reads back through its own a{sv} form to the same policy. */
static void check_network_policy(sd_bus_message *m, Caller *c) {
        _cleanup_(egress_policy_donep) EgressPolicy p = EGRESS_POLICY_INIT, again = EGRESS_POLICY_INIT;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *copy = NULL;
        int r;

        r = egress_policy_from_bus(m, &p, &e);
        if (r < 0) {
                FUZZ_ASSERT_REFUSED(r, &e);
                sd_bus_error_free(&e);
                return;
        }
        FUZZ_ASSERT(p.default_action == EGRESS_DEFAULT_DENY || p.default_action == EGRESS_DEFAULT_ALLOW);
        FUZZ_ASSERT(p.n_allow + p.n_deny <= EGRESS_POLICY_ENTRIES_MAX);
        FUZZ_ASSERT(sd_bus_message_new_method_call(sd_bus_message_get_bus(m), &copy, "org.example", "/",
                                                   "org.example", "M") >= 0);
        FUZZ_ASSERT(egress_policy_append_bus(copy, &p) >= 0);
        FUZZ_ASSERT(fuzz_bus_seal(copy) >= 0);
        FUZZ_ASSERT(egress_policy_from_bus(copy, &again, &e) >= 0);
        FUZZ_ASSERT(again.default_action == p.default_action && again.n_allow == p.n_allow &&
                    again.n_deny == p.n_deny);
        for (size_t i = 0; i < p.n_allow; i++)
                FUZZ_ASSERT(memcmp(&p.allow[i], &again.allow[i], sizeof(EgressEntry)) == 0);
        for (size_t i = 0; i < p.n_deny; i++)
                FUZZ_ASSERT(memcmp(&p.deny[i], &again.deny[i], sizeof(EgressEntry)) == 0);
        sd_bus_message_unref(copy);
}

#define OVER_OPTIONS(m, skip_argv, call)                                                \
        for (int _trusted = 1; _trusted >= 0; _trusted--) {                             \
                Caller _c = {.uid = _trusted ? 0 : 1000, .trusted = _trusted}, _before; \
                snprintf(_c.account_id, sizeof(_c.account_id), "uid:%u", _c.uid);       \
                snprintf(_c.source, sizeof(_c.source), "agent");                        \
                _before = _c;                                                           \
                FUZZ_ASSERT(sd_bus_message_rewind(m, true) >= 0);                       \
                if (skip_argv)                                                          \
                        FUZZ_ASSERT(sd_bus_message_skip(m, "as") >= 0);                 \
                Caller *c = &_c;                                                        \
                call;                                                                   \
                FUZZ_ASSERT(caller_is_sane(&_c, &_before));                             \
        }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        FuzzInput in = {data, size};
        sd_bus_message *m;
        char path[128];
        int r;

        if (!config.n_types)
                sandboxd_config_defaults(&config);
        m = fuzz_bus_message();
        if (!m)
                return 0;
        /* The path argument of WriteFile and ReadFile comes first, then the argv, then the options. */
        snprintf(path, sizeof(path), "%s", FUZZ_STR(&in, path));
        r = fuzz_append_strv(m, &in);
        if (r >= 0)
                r = fuzz_append_options(m, &in, 0);
        if (r >= 0)
                r = fuzz_bus_seal(m);
        if (r < 0) {
                /* Our builder makes only what the bus would carry: a refusal is a bug in it. */
                fprintf(stderr, "building the message: %s\n", strerror(-r));
                FUZZ_ASSERT(r == -ENOMEM);
                sd_bus_message_unref(m);
                return 0;
        }

        OVER_OPTIONS(m, true, {
                sd_bus_error e = SD_BUS_ERROR_NULL;
                r = context_options_read(m, c, "SetTTL", &e);
                if (r < 0)
                        FUZZ_ASSERT_REFUSED(r, &e);
                sd_bus_error_free(&e);
        });
        OVER_OPTIONS(m, true, check_create(m, c));
        OVER_OPTIONS(m, true, check_network_policy(m, c));
        OVER_OPTIONS(m, false, check_exec(m, c));
        OVER_OPTIONS(m, false, check_process(m, c));
        OVER_OPTIONS(m, true, check_files(m, c, true, path));
        OVER_OPTIONS(m, true, check_files(m, c, false, path));
        OVER_OPTIONS(m, true, check_shell(m, c));
        for (ToolKind k = 0; k < _TOOL_KIND_MAX; k++)
                OVER_OPTIONS(m, true, check_tool(m, c, k));

        sd_bus_message_unref(m);
        return 0;
}
