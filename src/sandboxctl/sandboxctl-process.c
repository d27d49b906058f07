/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "sandboxctl ps|start|kill|attach": a sandbox's background processes (StartProcess and its handle). */
#include "sandboxctl-process.h"

#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "macro.h"
#include "sandboxctl-util.h"
#include "sandboxd-bus.h"
#include "time-util.h"

/* attach: how often a running process's output is asked for when there was nothing new */
#define ATTACH_POLL_USEC (100 * USEC_PER_MSEC)
#define ATTACH_CHUNK (256u * 1024)
#define CALL_TIMEOUT_USEC (60 * USEC_PER_SEC)

static const char *arg_verb = NULL;

static void usage(FILE *f) {
        fputs("sandboxctl ps ID [--json[=MODE]]\n"
              "sandboxctl start ID [--cwd=DIR] [--env=KEY=VALUE...] [--timeout=SECONDS] [--memory-max=BYTES]\n"
              "                 [--tasks-max=N] [--] CMD [ARGS...]\n"
              "sandboxctl kill ID PROCESS [--signal=SIGNAL]\n"
              "sandboxctl attach ID PROCESS [-q]\n\n"
              "A sandbox's background processes: commands confined as 'exec' runs them, in a scope of\n"
              "their own, that keep running after sandboxctl returns (at most 128 per sandbox).\n\n"
              "  ps       List the sandbox's processes: id, state, exit code, pid in the sandbox, start\n"
              "           time, command; ended ones stay listed until newer ones need their place\n"
              "  start    Start CMD in the background and print the process's id (p1, p2, ...)\n"
              "  kill     Send a signal (default SIGTERM) to a process's main process\n"
              "  attach   Print a process's output so far and follow it until it ends (stdout to\n"
              "           stdout, stderr to stderr); exits with its status as 'exec' does. Ctrl-C\n"
              "           detaches and leaves the process running\n\n"
              "Options:\n"
              "  -h --help              Show this help\n"
              "     --json[=MODE]       ps: JSON output, short (default for a bare --json) or pretty\n"
              "     --cwd=DIR           start: working directory inside the sandbox\n"
              "     --env=KEY=VALUE     start: set an environment variable (may be repeated)\n"
              "     --timeout=SECONDS   start: its runtime limit (default: the type's maximum)\n"
              "     --memory-max=BYTES  start: its memory limit (K, M, G, T suffixes)\n"
              "     --tasks-max=N       start: limit on its processes and threads\n"
              "     --signal=SIGNAL     kill: a number, or a name with or without SIG (TERM, KILL, ...)\n"
              "  -q --quiet             attach: say nothing about output that was dropped\n\n"
              "Exit status: 0 on success, 1 on failure, 2 on bad usage; attach: the process's.\n"
              "See docs/sandboxctl.md.\n",
              f);
}

static int fail(const sd_bus_error *e, int r) {
        _cleanup_free_ char *msg = make_printable(e && e->message ? e->message : strerror(-r));

        fprintf(stderr, "sandboxctl: %s: %s%s\n", arg_verb, strna(msg),
                e && sd_bus_error_has_names(e, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER)
                        ? " (is sandboxd running?)"
                        : "");
        return EXIT_FAILURE;
}

/* A signal by number or name ("TERM", "SIGTERM", "15"); 0 if unknown. */
static int parse_signal(const char *s) {
        uint64_t n;

        if (parse_uint64(s, &n) >= 0)
                return n >= 1 && n <= (uint64_t) SIGRTMAX ? (int) n : 0;
        if (strncmp(s, "SIG", 3) == 0)
                s += 3;
        for (int sig = 1; sig < SIGRTMIN; sig++) {
                const char *name = sigabbrev_np(sig);
                if (name && streq(name, s))
                        return sig;
        }
        return 0;
}

static int open_bus(sd_bus **ret) {
        int r = sd_bus_open_system(ret);
        if (r < 0) {
                fprintf(stderr, "sandboxctl: %s: Failed to connect to the system bus: %s\n", arg_verb,
                        strerror(-r));
                return EXIT_FAILURE;
        }
        return 0;
}

/* --- ps ------------------------------------------------------------------------------------------ */

static int do_ps(const char *id, int json_flags) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        json_object *list = NULL;
        int r;

        if (open_bus(&bus) != 0)
                return EXIT_FAILURE;
        r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                               "ListProcesses", &error, &reply, "s", id);
        if (r < 0)
                return fail(&error, r);
        if (json_flags >= 0 && !(list = json_object_new_array()))
                return fail(NULL, -ENOMEM);
        if (json_flags < 0)
                printf("%-8s %-9s %4s %7s %-28s %s\n", "ID", "STATE", "EXIT", "PID", "STARTED", "COMMAND");
        r = sd_bus_message_enter_container(reply, 'a', "(ssiutasso)");
        while (r >= 0) {
                const char *pid_id, *state, *unit, *path;
                int32_t code;
                uint32_t pid;
                uint64_t started;
                _cleanup_strv_free_ char **argv = NULL;

                r = sd_bus_message_enter_container(reply, 'r', "ssiutasso");
                if (r <= 0)
                        break;
                r = sd_bus_message_read(reply, "ssiut", &pid_id, &state, &code, &pid, &started);
                if (r >= 0)
                        r = sd_bus_message_read_strv(reply, &argv);
                if (r >= 0)
                        r = sd_bus_message_read(reply, "so", &unit, &path);
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        break;
                if (list) {
                        json_object *o = json_object_new_object(), *a = json_object_new_array();
                        for (char **i = argv; a && i && *i; i++)
                                json_object_array_add(a, json_object_new_string(*i));
                        json_object_object_add(o, "id", json_object_new_string(pid_id));
                        json_object_object_add(o, "state", json_object_new_string(state));
                        json_object_object_add(o, "exit_code", json_object_new_int(code));
                        json_object_object_add(o, "pid", json_object_new_int64(pid));
                        json_object_object_add(o, "started_at", json_object_new_uint64(started));
                        json_object_object_add(o, "argv", a);
                        json_object_object_add(o, "unit", json_object_new_string(unit));
                        json_object_array_add(list, o);
                        continue;
                }
                /* The command shell-quoted, so argument boundaries stay visible. */
                char ts[FORMAT_TIMESTAMP_MAX], exit_buf[16];
                _cleanup_free_ char *cmd = NULL;
                size_t len = 0;
                FILE *f = open_memstream(&cmd, &len);
                for (char **i = argv; f && i && *i; i++) {
                        _cleanup_free_ char *q = shell_quote(*i), *p = q ? make_printable(q) : NULL;
                        fprintf(f, "%s%s", i == argv ? "" : " ", strna(p));
                }
                if (f)
                        fclose(f);
                snprintf(exit_buf, sizeof(exit_buf), "%" PRIi32, code);
                printf("%-8s %-9s %4s %7" PRIu32 " %-28s %s\n", pid_id, state, code < 0 ? "-" : exit_buf, pid,
                       format_timestamp(started, ts) ?: "-", strna(cmd));
        }
        if (r < 0) {
                json_object_put(list);
                fprintf(stderr, "sandboxctl: ps: Failed to parse the reply: %s\n", strerror(-r));
                return EXIT_FAILURE;
        }
        if (list) {
                json_object *top = json_object_new_object();
                json_object_object_add(top, "processes", list);
                puts(json_object_to_json_string_ext(top, json_flags));
                json_object_put(top);
        }
        return 0;
}

/* --- start --------------------------------------------------------------------------------------- */

typedef struct StartArgs {
        const char *cwd;
        EnvVar *env;
        size_t n_env;
        uint64_t timeout, memory_max, tasks_max;
} StartArgs;

static int do_start(const char *id, char **argv, const StartArgs *a) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        const char *process, *path;
        int r;

        if (open_bus(&bus) != 0)
                return EXIT_FAILURE;
        r = sd_bus_message_new_method_call(bus, &m, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                           SANDBOXD_MANAGER_INTERFACE, "StartProcess");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", id);
        if (r >= 0)
                r = sd_bus_message_append_strv(m, argv);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0 && a->cwd)
                r = sd_bus_message_append(m, "{sv}", "cwd", "s", a->cwd);
        if (r >= 0 && a->timeout > 0)
                r = sd_bus_message_append(m, "{sv}", "timeout_seconds", "t", a->timeout);
        if (r >= 0 && a->memory_max > 0)
                r = sd_bus_message_append(m, "{sv}", "memory_max", "t", a->memory_max);
        if (r >= 0 && a->tasks_max > 0)
                r = sd_bus_message_append(m, "{sv}", "tasks_max", "t", a->tasks_max);
        if (r >= 0)
                r = bus_append_env(m, a->env, a->n_env);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return fail(NULL, r);
        r = sd_bus_call(bus, m, CALL_TIMEOUT_USEC, &error, &reply);
        if (r < 0)
                return fail(&error, r);
        r = sd_bus_message_read(reply, "so", &process, &path);
        if (r < 0)
                return fail(NULL, r);
        puts(process);
        return 0;
}

/* --- kill ---------------------------------------------------------------------------------------- */

static int do_kill(const char *id, const char *process, int sig) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        if (open_bus(&bus) != 0)
                return EXIT_FAILURE;
        r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                               "SignalProcess", &error, NULL, "ssia{sv}", id, process, (int32_t) sig, 0);
        if (r < 0)
                return fail(&error, r);
        return 0;
}

/* --- attach -------------------------------------------------------------------------------------- */

static volatile sig_atomic_t detach_requested = 0;

static void on_detach(int sig) {
        detach_requested = 1;
}

typedef struct Follow {
        const char *stream;
        int fd;
        uint64_t offset;
        bool ended;
} Follow;

/* Reads what there is of one stream from its offset; 1 if it gave anything, 0 if not, or an exit status. */
static int follow_step(sd_bus *bus, const char *id, const char *process, Follow *fl, bool quiet, int *ret_exit) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        const void *data;
        size_t n;
        uint64_t next, first;
        int ended, r;

        r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                               "ReadProcessOutput", &error, &reply, "ssstu", id, process, fl->stream, fl->offset,
                               (uint32_t) ATTACH_CHUNK);
        if (r < 0) {
                *ret_exit = fail(&error, r);
                return -1;
        }
        r = sd_bus_message_read_array(reply, 'y', &data, &n);
        if (r >= 0)
                r = sd_bus_message_read(reply, "ttb", &next, &first, &ended);
        if (r < 0) {
                *ret_exit = fail(NULL, r);
                return -1;
        }
        if (first > fl->offset && !quiet)
                fprintf(stderr, "sandboxctl: attach: %" PRIu64 " bytes of %s were dropped before this\n",
                        first - fl->offset, fl->stream);
        if (n > 0 && loop_write(fl->fd, data, n) < 0) {
                *ret_exit = EXIT_FAILURE;
                return -1;
        }
        fl->offset = next;
        fl->ended = ended;
        return n > 0;
}

static int do_attach(const char *id, const char *process, bool quiet) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        Follow fl[2] = { { "stdout", STDOUT_FILENO }, { "stderr", STDERR_FILENO } };
        int exit_status = 0, r;

        if (open_bus(&bus) != 0)
                return EXIT_FAILURE;
        struct sigaction sa = { .sa_handler = on_detach };
        (void) sigaction(SIGINT, &sa, NULL);
        (void) sigaction(SIGTERM, &sa, NULL);
        while (!(fl[0].ended && fl[1].ended)) {
                bool got = false;
                for (size_t i = 0; i < 2; i++) {
                        if (fl[i].ended)
                                continue;
                        r = follow_step(bus, id, process, &fl[i], quiet, &exit_status);
                        if (r < 0)
                                return exit_status;
                        got = got || r > 0;
                }
                if (detach_requested)
                        return 0; /* it keeps running */
                if (!got && !(fl[0].ended && fl[1].ended))
                        (void) usleep(ATTACH_POLL_USEC);
        }
        /* Both streams ended: so has the process; its status. */
        r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                               "WaitProcess", &error, &reply, "ss", id, process);
        if (r < 0)
                return fail(&error, r);
        int32_t code, sig = 0;
        int timed_out = 0;
        r = sd_bus_message_read(reply, "i", &code);
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        while (r > 0) {
                const char *key;
                r = sd_bus_message_enter_container(reply, 'e', "sv");
                if (r <= 0)
                        break;
                r = sd_bus_message_read(reply, "s", &key);
                if (r >= 0 && streq(key, "signal"))
                        r = sd_bus_message_read(reply, "v", "i", &sig);
                else if (r >= 0 && streq(key, "timed_out"))
                        r = sd_bus_message_read(reply, "v", "b", &timed_out);
                else if (r >= 0)
                        r = sd_bus_message_skip(reply, "v");
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                if (r >= 0)
                        r = 1;
        }
        if (r < 0)
                return fail(NULL, r);
        return exec_exit_status(code, sig, timed_out, false);
}

/* --- the verbs ------------------------------------------------------------------------------------ */

bool is_process_verb(const char *verb) {
        return streq(verb, "ps") || streq(verb, "start") || streq(verb, "kill") || streq(verb, "attach");
}

typedef struct Args {
        StartArgs start;
        int json_flags; /* -1: no JSON */
        int sig;
        bool quiet;
} Args;

/* Options up to the first non-option (argv[0] is skipped, as getopt does): 0, 1 for --help (done), or an
 * exit status. */
static int parse_options(int argc, char *argv[], Args *a) {
        enum {
                ARG_JSON = 0x100,
                ARG_CWD,
                ARG_ENV,
                ARG_TIMEOUT,
                ARG_MEMORY_MAX,
                ARG_TASKS_MAX,
                ARG_SIGNAL,
        };
        static const struct option options[] = {
                {"help", no_argument, NULL, 'h'},
                {"json", optional_argument, NULL, ARG_JSON},
                {"cwd", required_argument, NULL, ARG_CWD},
                {"env", required_argument, NULL, ARG_ENV},
                {"timeout", required_argument, NULL, ARG_TIMEOUT},
                {"memory-max", required_argument, NULL, ARG_MEMORY_MAX},
                {"tasks-max", required_argument, NULL, ARG_TASKS_MAX},
                {"signal", required_argument, NULL, ARG_SIGNAL},
                {"quiet", no_argument, NULL, 'q'},
                {},
        };
        StartArgs *sa = &a->start;
        int c, r;

        optind = 0;
        /* "+": options end at the first non-option, so that start's command keeps its own. */
        while ((c = getopt_long(argc, argv, "+hq", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        usage(stdout);
                        return 1;
                case 'q':
                        a->quiet = true;
                        break;
                case ARG_JSON:
                        if (!optarg || streq(optarg, "short"))
                                a->json_flags = JSON_C_TO_STRING_PLAIN;
                        else if (streq(optarg, "pretty"))
                                a->json_flags = JSON_C_TO_STRING_PRETTY;
                        else if (streq(optarg, "off"))
                                a->json_flags = -1;
                        else
                                return fail_usage(arg_verb, "--json takes short, pretty or off, not '%s'",
                                                  optarg);
                        break;
                case ARG_CWD:
                        sa->cwd = optarg;
                        break;
                case ARG_ENV:
                        r = env_list_add(&sa->env, &sa->n_env, optarg);
                        if (r == -ENOMEM)
                                return fail(NULL, r);
                        if (r < 0)
                                return fail_usage(arg_verb, "--env takes KEY=VALUE, not '%s'", optarg);
                        break;
                case ARG_TIMEOUT:
                        if (parse_seconds(optarg, &sa->timeout) < 0 || sa->timeout == 0)
                                return fail_usage(arg_verb, "invalid --timeout: %s", optarg);
                        break;
                case ARG_MEMORY_MAX:
                        if (parse_size(optarg, &sa->memory_max) < 0 || sa->memory_max == 0)
                                return fail_usage(arg_verb, "invalid --memory-max: %s", optarg);
                        break;
                case ARG_TASKS_MAX:
                        if (parse_uint64(optarg, &sa->tasks_max) < 0 || sa->tasks_max == 0)
                                return fail_usage(arg_verb, "invalid --tasks-max: %s", optarg);
                        break;
                case ARG_SIGNAL:
                        a->sig = parse_signal(optarg);
                        if (a->sig == 0)
                                return fail_usage(arg_verb, "unknown signal '%s'", optarg);
                        break;
                default:
                        return EXIT_USAGE;
                }
        return 0;
}

int verb_process(int argc, char *argv[]) {
        Args a = { .json_flags = -1, .sig = SIGTERM };
        int ret;

        arg_verb = argv[0];
        ret = parse_options(argc, argv, &a);
        if (ret != 0) {
                ret = ret == 1 ? 0 : ret; /* --help */
                goto out;
        }
        char **rest = argv + optind;
        size_t n = (size_t) (argc - optind);
        if (streq(arg_verb, "start")) {
                /* Like exec: the sandbox, then more options, then the command (after "--" if it looks
                 * like an option). rest[0], the id, stands where getopt expects the program's name. */
                if (n < 1) {
                        ret = fail_usage(
                                arg_verb,
                                "expected ID and CMD; usage: sandboxctl start ID [OPTIONS...] [--] CMD "
                                "[ARGS...]");
                        goto out;
                }
                ret = parse_options((int) n, rest, &a);
                if (ret != 0) {
                        ret = ret == 1 ? 0 : ret;
                        goto out;
                }
                char **cmd = rest + optind;
                if (!cmd[0]) {
                        ret = fail_usage(
                                arg_verb,
                                "no command; usage: sandboxctl start ID [OPTIONS...] [--] CMD [ARGS...]");
                        goto out;
                }
                ret = do_start(rest[0], cmd, &a.start);
        } else if (streq(arg_verb, "ps"))
                ret = n == 1 ? do_ps(rest[0], a.json_flags)
                             : fail_usage(arg_verb, "expected one sandbox ID");
        else if (streq(arg_verb, "kill"))
                ret = n == 2 ? do_kill(rest[0], rest[1], a.sig)
                             : fail_usage(arg_verb, "expected ID PROCESS");
        else
                ret = n == 2 ? do_attach(rest[0], rest[1], a.quiet)
                             : fail_usage(arg_verb, "expected ID PROCESS");
out:
        env_list_free(&a.start.env, &a.start.n_env);
        return ret;
}
