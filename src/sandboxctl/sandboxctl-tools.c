/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "sandboxctl file-create|view|str-replace|insert|ls|glob|grep": the file tools of org.sandboxd.sandbox1. */
#include "sandboxctl-tools.h"

#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "base64-util.h"
#include "macro.h"
#include "sandboxd-bus.h"
#include "sandboxctl-util.h"
#include "utf8-util.h"

#define CONTENT_INLINE_MAX (8u << 20)  /* above this, file-create sends its content through an fd */
#define CONTENT_MAX        (64u << 20) /* the tools' own limit */
#define CALL_TIMEOUT_USEC  (150 * USEC_PER_SEC)

typedef enum JsonMode {
        JSON_NONE,
        JSON_SHORT,
        JSON_PRETTY,
} JsonMode;

static const char *arg_verb = NULL;
static JsonMode arg_json = JSON_NONE;

static void usage(FILE *f) {
        fputs("sandboxctl file-create ID PATH [--overwrite] [--mode=MODE] [--mkdir] [--json] < CONTENT\n"
              "sandboxctl view ID PATH [--range=A:B]\n"
              "sandboxctl str-replace ID PATH OLD NEW [--json]\n"
              "sandboxctl insert ID PATH LINE TEXT [--json]\n"
              "sandboxctl ls ID [PATH] [--max-results=N] [--json]\n"
              "sandboxctl glob ID PATTERN [--path=DIR] [--max-results=N] [--json]\n"
              "sandboxctl grep ID PATTERN [PATH] [--glob=GLOB] [-i] [--max-results=N] [--json]\n\n"
              "The file tools: they act in the sandbox as its own user would, on paths as the sandbox sees\n"
              "them (absolute, or relative to its home /home/sandbox). Each call leaves one audit row.\n\n"
              "  file-create   Create a file from stdin; fails if it exists unless --overwrite\n"
              "  view          Print a file with line numbers (lines A to B with --range, B may be\n"
              "                empty for the end), or a directory's entries two levels deep\n"
              "  str-replace   Replace OLD with NEW; OLD must occur exactly once in the file\n"
              "  insert        Insert TEXT as lines after line LINE (0: at the top)\n"
              "  ls            List a directory: type, mode, size, modification time, name\n"
              "  glob          Paths matching PATTERN (* ? [...] within a name, ** across\n"
              "                directories), sorted; relative patterns start at --path or the home\n"
              "  grep          Lines matching the PCRE2 regular expression PATTERN, in PATH (a file or\n"
              "                a directory searched recursively; default the home), as FILE:LINE:TEXT\n\n"
              "Options:\n"
              "  -h --help              Show this help\n"
              "     --json[=MODE]       Structured output: short (default for a bare --json), pretty, off\n"
              "     --overwrite         file-create: replace an existing file\n"
              "     --mode=MODE         file-create: octal mode of a new file (default 0644)\n"
              "     --mkdir             file-create: create missing parent directories\n"
              "     --range=A:B         view: only lines A to B (1-based, inclusive)\n"
              "     --path=DIR          glob: the directory a relative pattern starts at\n"
              "     --glob=GLOB         grep: only files whose name (or, with a '/', relative path)\n"
              "                         matches GLOB\n"
              "  -i --ignore-case       grep: match without regard to case\n"
              "     --max-results=N     ls, glob, grep: at most N results (defaults 10000, 10000, 1000)\n\n"
              "Results cut short by a limit say so on stderr (and \"truncated\": true with --json).\n"
              "ls, glob and grep escape controls, format characters, bad UTF-8 and '\\' in names and\n"
              "lines (\\x1b, \\u202e, \\xff, \\\\); --json and view give the bytes as they are.\n"
              "Exit status: 0 on success, 1 on failure, 2 on bad usage. See docs/sandboxctl.md.\n",
              f);
}

static int fail(const char *what, const sd_bus_error *e, int r) {
        /* sandboxd's messages quote paths, which a sandbox may have named: escaped like the names are. */
        _cleanup_free_ char *msg = make_printable(e && e->message ? e->message : strerror(-r));

        fprintf(stderr, "sandboxctl: %s: %s%s%s\n", arg_verb, what ? what : "", what ? ": " : "",
                strna(msg));
        return EXIT_FAILURE;
}

/* --- JSON of bytes ---------------------------------------------------------------------------------- */

/* key: the bytes as a string if they are UTF-8; otherwise key_base64 holds them exactly. */
static void json_add_bytes(json_object *o, const char *key, const void *p, size_t n) {
        if (!memchr(p, 0, n) && utf8_is_valid(p, n)) {
                json_object_object_add(o, key, json_object_new_string_len(p, (int) n));
                return;
        }
        _cleanup_free_ char *b = NULL, *k = NULL;
        if (base64_encode_alloc(p, n, &b) >= 0 && asprintf(&k, "%s_base64", key) >= 0)
                json_object_object_add(o, k, json_object_new_string(b));
}

static void print_json(json_object *o) {
        puts(json_object_to_json_string_ext(
                o, (arg_json == JSON_PRETTY ? JSON_C_TO_STRING_PRETTY : JSON_C_TO_STRING_PLAIN) |
                           JSON_C_TO_STRING_NOSLASHESCAPE));
}

static bool info_truncated(json_object *info) {
        json_object *t;
        return json_object_object_get_ex(info, "truncated", &t) && json_object_get_boolean(t);
}

static int fwrite_all(const void *p, size_t n) {
        return n == 0 || fwrite(p, 1, n, stdout) == n ? 0 : -EIO;
}

/* Names and matched lines come from the sandbox: what a terminal would act on is escaped (the rule of
 * make_printable()); --json has the bytes as they are. A matched line keeps its TABs, which only indent. */
static int fwrite_printable(const void *p, size_t n, Utf8EscapeFlags flags) {
        _cleanup_free_ char *e = NULL;
        size_t len;
        int r;

        r = utf8_escape(p, n, flags, &e, &len);
        if (r < 0)
                return r;
        return fwrite_all(e, len);
}

/* --- the verbs -------------------------------------------------------------------------------------- */

typedef struct Options {
        bool overwrite, mkdir, ignore_case, have_mode;
        uint32_t mode, start, end, max_results;
        const char *path, *glob;
} Options;

static int new_call(sd_bus *bus, const char *method, sd_bus_message **ret) {
        return sd_bus_message_new_method_call(bus, ret, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                              SANDBOXD_MANAGER_INTERFACE, method);
}

static int append_u(sd_bus_message *m, const char *key, uint32_t v) {
        return sd_bus_message_append(m, "{sv}", key, "u", v);
}

static int call(sd_bus *bus, sd_bus_message *m, sd_bus_message **reply) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r = sd_bus_call(bus, m, CALL_TIMEOUT_USEC, &error, reply);
        if (r < 0) {
                fail(NULL, &error, r);
                return -EPROTO; /* printed */
        }
        return 0;
}

/* Calls m, whose reply is one a{sv} of info (the tools that change a file), and prints it with --json. */
static int call_print_info(sd_bus *bus, sd_bus_message *m) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        json_object *info;
        int r;

        r = call(bus, m, &reply);
        if (r < 0)
                return r;
        info = json_object_new_object();
        if (!info)
                return -ENOMEM;
        r = bus_read_dict(reply, info);
        if (r >= 0 && arg_json)
                print_json(info);
        json_object_put(info);
        return r;
}

static int verb_file_create(sd_bus *bus, char **args, const Options *o) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        _cleanup_free_ char *data = NULL;
        _cleanup_close_ int memfd = -EBADF;
        size_t size = 0;
        int r;

        r = read_full_fd(STDIN_FILENO, CONTENT_MAX, &data, &size);
        if (r == -EFBIG)
                return fail("stdin", NULL, -EFBIG), -EPROTO;
        if (r < 0)
                return fail("Failed to read stdin", NULL, r), -EPROTO;
        if (size > CONTENT_INLINE_MAX) {
                memfd = memfd_create("sandboxctl-file-create", MFD_CLOEXEC);
                if (memfd < 0 || loop_write(memfd, data, size) < 0 || lseek(memfd, 0, SEEK_SET) < 0)
                        return fail("Failed to fill a memfd", NULL, -errno), -EPROTO;
        }
        r = new_call(bus, "FileCreate", &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", args[1], args[2]);
        if (r >= 0)
                r = sd_bus_message_append_array(m, 'y', data ?: "", memfd >= 0 ? 0 : size);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0 && o->overwrite)
                r = sd_bus_message_append(m, "{sv}", "overwrite", "b", 1);
        if (r >= 0 && o->mkdir)
                r = sd_bus_message_append(m, "{sv}", "create_dirs", "b", 1);
        if (r >= 0 && o->have_mode)
                r = append_u(m, "mode", o->mode);
        if (r >= 0 && memfd >= 0)
                r = sd_bus_message_append(m, "{sv}", "fd", "h", memfd);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;
        return call_print_info(bus, m);
}

static int verb_view(sd_bus *bus, char **args, const Options *o) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        const void *text;
        size_t size;
        int r;

        r = new_call(bus, "View", &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", args[1], args[2]);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0 && o->start > 0)
                r = append_u(m, "start_line", o->start);
        if (r >= 0 && o->end > 0)
                r = append_u(m, "end_line", o->end);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;
        r = call(bus, m, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_read_array(reply, 'y', &text, &size);
        if (r < 0)
                return r;
        json_object *info = json_object_new_object();
        r = bus_read_dict(reply, info);
        if (r >= 0 && arg_json) {
                json_add_bytes(info, "text", text, size);
                print_json(info);
        } else if (r >= 0) {
                r = fwrite_all(text, size);
                if (info_truncated(info))
                        fprintf(stderr, "sandboxctl: view: output truncated at the size limit\n");
        }
        json_object_put(info);
        return r;
}

static int verb_str_replace_or_insert(sd_bus *bus, char **args, bool insert) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        uint64_t line = 0;
        int r;

        if (insert && (parse_uint64(args[3], &line) < 0 || line > UINT32_MAX))
                return fail_usage(arg_verb, "invalid line number '%s'", args[3]), -EINVAL;
        r = new_call(bus, insert ? "Insert" : "StrReplace", &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", args[1], args[2]);
        if (r >= 0 && insert)
                r = sd_bus_message_append(m, "u", (uint32_t) line);
        if (r >= 0)
                r = sd_bus_message_append_array(m, 'y', args[insert ? 4 : 3], strlen(args[insert ? 4 : 3]));
        if (r >= 0 && !insert)
                r = sd_bus_message_append_array(m, 'y', args[4], strlen(args[4]));
        if (r >= 0)
                r = sd_bus_message_append(m, "a{sv}", 0);
        if (r < 0)
                return r;
        return call_print_info(bus, m);
}

static int append_list_options(sd_bus_message *m, const Options *o, bool grep) {
        int r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0 && o->max_results > 0)
                r = append_u(m, "max_results", o->max_results);
        if (r >= 0 && o->path)
                r = sd_bus_message_append(m, "{sv}", "path", "s", o->path);
        if (r >= 0 && grep && o->glob)
                r = sd_bus_message_append(m, "{sv}", "glob", "s", o->glob);
        if (r >= 0 && grep && o->ignore_case)
                r = sd_bus_message_append(m, "{sv}", "ignore_case", "b", 1);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

static void note_truncated(json_object *info, const char *what) {
        if (info_truncated(info))
                fprintf(stderr, "sandboxctl: %s: more results than shown (raise --max-results)\n", what);
}

/* The end of a list reply (Ls, Glob, Grep): closes the array r was reading, reads the info a{sv}, then
 * prints both as JSON (the list under key) or says on stderr that the list was cut short. */
static int finish_list(sd_bus_message *reply, int r, json_object *info, json_object *list, const char *key,
                       const char *verb) {
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0)
                r = bus_read_dict(reply, info);
        if (r >= 0 && arg_json) {
                json_object_object_add(info, key, json_object_get(list));
                print_json(info);
        } else if (r >= 0)
                note_truncated(info, verb);
        return r;
}

static int verb_ls(sd_bus *bus, char **args, size_t n, const Options *o) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        json_object *list = json_object_new_array(), *info = json_object_new_object();
        int r;

        r = new_call(bus, "Ls", &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", args[1], n > 2 ? args[2] : ".");
        if (r >= 0)
                r = append_list_options(m, o, false);
        if (r >= 0)
                r = call(bus, m, &reply);
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, 'a', "(aysutt)");
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'r', "aysutt")) > 0) {
                const void *name;
                size_t len;
                const char *type;
                uint32_t mode;
                uint64_t size, mtime;
                char ts[FORMAT_TIMESTAMP_MAX];

                r = sd_bus_message_read_array(reply, 'y', &name, &len);
                if (r >= 0)
                        r = sd_bus_message_read(reply, "sutt", &type, &mode, &size, &mtime);
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        break;
                if (arg_json) {
                        json_object *e = json_object_new_object();
                        char mbuf[8];
                        json_add_bytes(e, "name", name, len);
                        json_object_object_add(e, "type", json_object_new_string(type));
                        snprintf(mbuf, sizeof(mbuf), "%04o", mode);
                        json_object_object_add(e, "mode", json_object_new_string(mbuf));
                        json_object_object_add(e, "size", json_object_new_uint64(size));
                        json_object_object_add(e, "mtime",
                                               json_object_new_string(format_timestamp(mtime, ts)));
                        json_object_array_add(list, e);
                } else {
                        printf("%-9s %04o %12" PRIu64 " %s ", type, mode, size, format_timestamp(mtime, ts));
                        r = fwrite_printable(name, len, 0);
                        putchar('\n');
                }
        }
        r = finish_list(reply, r, info, list, "entries", "ls");
        json_object_put(list);
        json_object_put(info);
        return r;
}

static int verb_glob(sd_bus *bus, char **args, const Options *o) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        json_object *list = json_object_new_array(), *info = json_object_new_object();
        const void *p;
        size_t len;
        int r;

        r = new_call(bus, "Glob", &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", args[1], args[2]);
        if (r >= 0)
                r = append_list_options(m, o, false);
        if (r >= 0)
                r = call(bus, m, &reply);
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, 'a', "ay");
        while (r >= 0 && (r = sd_bus_message_read_array(reply, 'y', &p, &len)) > 0) {
                if (arg_json) {
                        json_object *e = json_object_new_object();
                        json_add_bytes(e, "path", p, len);
                        json_object_array_add(list, e);
                } else {
                        r = fwrite_printable(p, len, 0);
                        putchar('\n');
                }
        }
        r = finish_list(reply, r, info, list, "paths", "glob");
        json_object_put(list);
        json_object_put(info);
        return r;
}

static int verb_grep(sd_bus *bus, char **args, size_t n, const Options *o) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        json_object *list = json_object_new_array(), *info = json_object_new_object();
        Options opts = *o;
        int r;

        if (n > 3)
                opts.path = args[3];
        r = new_call(bus, "Grep", &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", args[1], args[2]);
        if (r >= 0)
                r = append_list_options(m, &opts, true);
        if (r >= 0)
                r = call(bus, m, &reply);
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, 'a', "(ayuay)");
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'r', "ayuay")) > 0) {
                const void *file, *text;
                size_t flen, tlen;
                uint32_t line;

                r = sd_bus_message_read_array(reply, 'y', &file, &flen);
                if (r >= 0)
                        r = sd_bus_message_read(reply, "u", &line);
                if (r >= 0)
                        r = sd_bus_message_read_array(reply, 'y', &text, &tlen);
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        break;
                if (arg_json) {
                        json_object *e = json_object_new_object();
                        json_add_bytes(e, "file", file, flen);
                        json_object_object_add(e, "line", json_object_new_uint64(line));
                        json_add_bytes(e, "text", text, tlen);
                        json_object_array_add(list, e);
                } else {
                        r = fwrite_printable(file, flen, 0);
                        printf(":%" PRIu32 ":", line);
                        if (r >= 0)
                                r = fwrite_printable(text, tlen, UTF8_ESCAPE_KEEP_TAB);
                        putchar('\n');
                }
        }
        r = finish_list(reply, r, info, list, "matches", "grep");
        if (r >= 0 && !arg_json) {
                json_object *v;
                if (json_object_object_get_ex(info, "binary_skipped", &v) && json_object_get_uint64(v) > 0)
                        fprintf(stderr, "sandboxctl: grep: %" PRIu64 " binary file(s) skipped\n",
                                json_object_get_uint64(v));
                if (json_object_object_get_ex(info, "large_skipped", &v) && json_object_get_uint64(v) > 0)
                        fprintf(stderr, "sandboxctl: grep: %" PRIu64 " file(s) above 64 MiB skipped\n",
                                json_object_get_uint64(v));
        }
        json_object_put(list);
        json_object_put(info);
        return r;
}

static const struct {
        const char *name;
        size_t min, max; /* arguments, counting the verb */
        const char *usage;
} tool_verbs[] = {
        {"file-create", 3, 3, "file-create ID PATH [--overwrite] [--mode=MODE] [--mkdir] < CONTENT"},
        {"view", 3, 3, "view ID PATH [--range=A:B]"},
        {"str-replace", 5, 5, "str-replace ID PATH OLD NEW"},
        {"insert", 5, 5, "insert ID PATH LINE TEXT"},
        {"ls", 2, 3, "ls ID [PATH]"},
        {"glob", 3, 3, "glob ID PATTERN [--path=DIR]"},
        {"grep", 3, 4, "grep ID PATTERN [PATH] [--glob=GLOB] [-i]"},
};

bool is_tool_verb(const char *verb) {
        for (size_t i = 0; i < ELEMENTSOF(tool_verbs); i++)
                if (streq(tool_verbs[i].name, verb))
                        return true;
        return false;
}

static int parse_range(const char *s, uint32_t *start, uint32_t *end) {
        uint64_t a = 0, b = 0;
        _cleanup_free_ char *left = NULL;
        const char *colon = strchr(s, ':');

        if (!colon)
                return -EINVAL;
        left = strndup(s, colon - s);
        if (!left)
                return -ENOMEM;
        if (!isempty(left) && (parse_uint64(left, &a) < 0 || a == 0 || a > UINT32_MAX))
                return -EINVAL;
        if (!isempty(colon + 1) && (parse_uint64(colon + 1, &b) < 0 || b == 0 || b > UINT32_MAX))
                return -EINVAL;
        if (b > 0 && b < MAX(a, (uint64_t) 1))
                return -EINVAL;
        *start = (uint32_t) a;
        *end = (uint32_t) b;
        return 0;
}

int verb_tool(int argc, char *argv[]) {
        enum {
                ARG_JSON = 0x100,
                ARG_OVERWRITE,
                ARG_MODE,
                ARG_MKDIR,
                ARG_RANGE,
                ARG_PATH,
                ARG_GLOB,
                ARG_MAX
        };
        static const struct option options[] = {
                {"help", no_argument, NULL, 'h'},
                {"json", optional_argument, NULL, ARG_JSON},
                {"overwrite", no_argument, NULL, ARG_OVERWRITE},
                {"mode", required_argument, NULL, ARG_MODE},
                {"mkdir", no_argument, NULL, ARG_MKDIR},
                {"range", required_argument, NULL, ARG_RANGE},
                {"path", required_argument, NULL, ARG_PATH},
                {"glob", required_argument, NULL, ARG_GLOB},
                {"ignore-case", no_argument, NULL, 'i'},
                {"max-results", required_argument, NULL, ARG_MAX},
                {},
        };
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_free_ char **args = calloc((size_t) argc + 1, sizeof(char *));
        Options o = {};
        size_t n = 0, v;
        uint64_t u;
        int c, r;

        arg_verb = argv[0];
        if (!args)
                return EXIT_FAILURE;
        args[n++] = argv[0];
        optind = 1;
        /* "-" first: positional arguments in order, so OLD, NEW and TEXT may start with '-' after "--" */
        while ((c = getopt_long(argc, argv, "-hi", options, NULL)) >= 0)
                switch (c) {
                case 1:
                        args[n++] = optarg;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                case ARG_JSON:
                        if (!optarg || streq(optarg, "short"))
                                arg_json = JSON_SHORT;
                        else if (streq(optarg, "pretty"))
                                arg_json = JSON_PRETTY;
                        else if (streq(optarg, "off"))
                                arg_json = JSON_NONE;
                        else
                                return fail_usage(arg_verb,
                                                  "--json: expected short, pretty or off, got '%s'", optarg);
                        break;
                case ARG_OVERWRITE:
                        o.overwrite = true;
                        break;
                case ARG_MODE:
                        if (parse_mode(optarg, &o.mode) < 0)
                                return fail_usage(arg_verb, "--mode: invalid octal mode '%s'", optarg);
                        o.have_mode = true;
                        break;
                case ARG_MKDIR:
                        o.mkdir = true;
                        break;
                case ARG_RANGE:
                        if (parse_range(optarg, &o.start, &o.end) < 0)
                                return fail_usage(
                                        arg_verb,
                                        "--range: expected A:B with 1 <= A <= B (either may be empty), "
                                        "got '%s'",
                                        optarg);
                        break;
                case ARG_PATH:
                        o.path = optarg;
                        break;
                case ARG_GLOB:
                        o.glob = optarg;
                        break;
                case 'i':
                        o.ignore_case = true;
                        break;
                case ARG_MAX:
                        if (parse_uint64(optarg, &u) < 0 || u == 0 || u > 1000000)
                                return fail_usage(arg_verb, "--max-results: expected 1 to 1000000, got '%s'",
                                                  optarg);
                        o.max_results = (uint32_t) u;
                        break;
                default:
                        fprintf(stderr, "See sandboxctl %s --help.\n", arg_verb);
                        return EXIT_USAGE;
                }
        for (; optind < argc; optind++)
                args[n++] = argv[optind];

        for (v = 0; v < ELEMENTSOF(tool_verbs); v++)
                if (streq(tool_verbs[v].name, arg_verb))
                        break;
        if (v == ELEMENTSOF(tool_verbs))
                return fail_usage(arg_verb, "unknown command");
        if (n < tool_verbs[v].min || n > tool_verbs[v].max) {
                fprintf(stderr, "sandboxctl: %s: too %s arguments; usage: sandboxctl %s\n", arg_verb,
                        n < tool_verbs[v].min ? "few" : "many", tool_verbs[v].usage);
                return EXIT_USAGE;
        }

        r = sd_bus_open_system(&bus);
        if (r < 0)
                return fail("Failed to connect to the system bus", NULL, r);

        if (streq(arg_verb, "file-create"))
                r = verb_file_create(bus, args, &o);
        else if (streq(arg_verb, "view"))
                r = verb_view(bus, args, &o);
        else if (streq(arg_verb, "str-replace") || streq(arg_verb, "insert"))
                r = verb_str_replace_or_insert(bus, args, streq(arg_verb, "insert"));
        else if (streq(arg_verb, "ls"))
                r = verb_ls(bus, args, n, &o);
        else if (streq(arg_verb, "glob"))
                r = verb_glob(bus, args, &o);
        else
                r = verb_grep(bus, args, n, &o);
        if (r == -EINVAL)
                return EXIT_USAGE;
        if (r == -EPROTO)
                return EXIT_FAILURE; /* said why already */
        if (r < 0)
                return fail("Failed to talk to sandboxd", NULL, r);
        if (fflush(stdout) != 0)
                return fail("Failed to write output", NULL, -errno);
        return EXIT_SUCCESS;
}
