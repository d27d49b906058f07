/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl: the local command line client of sandboxd, after machinectl and loginctl. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "audit-checkpoints.h"
#include "macro.h"
#include "sandbox-id.h"
#include "sandboxd-bus.h"
#include "sandboxctl-api-key.h"
#include "sandboxctl-image.h"
#include "sandboxctl-export.h"
#include "sandboxctl-shell.h"
#include "sandboxctl-mcp.h"
#include "sandboxctl-process.h"
#include "sandboxctl-snapshot.h"
#include "sandboxctl-tools.h"
#include "sandboxctl-util.h"
#include "time-util.h"

#define EXIT_EXEC_FAILED 125
#define EXIT_CHAIN_BROKEN 3 /* log --verify: the audit log's hash chain does not verify */

/* Without --timeout the server's own cap decides when the command dies; wait longer than any cap it may
 * plausibly have, rather than give up on a command that is still legitimately running. */
#define EXEC_DEFAULT_CALL_TIMEOUT_USEC (25 * USEC_PER_HOUR)
/* With --timeout, leave the server time to kill the scope, collect it and reply. */
#define EXEC_CALL_SLACK_USEC (30 * USEC_PER_SEC)
/* After the reply, how long relayed output may keep draining before we stop waiting for EOF. */
#define EXEC_DRAIN_USEC (2 * USEC_PER_SEC)
/* stdin for exec travels inside the call, next to argv and env, under the bus's 32 MiB message cap. */
#define EXEC_STDIN_MAX ((size_t) 16 * 1024 * 1024)
/* Largest WriteFile payload sent inline; larger uploads go through a memfd, or in appended chunks when
 * the bus cannot carry fds (ssh). */
#define WRITE_INLINE_MAX ((size_t) 8 * 1024 * 1024)
/* Uploads are held in memory once; refuse anything sillier than this. */
#define UPLOAD_MAX ((size_t) 4 * 1024 * 1024 * 1024)
/* A WriteFile reading gigabytes from an fd takes longer than sd-bus's default 25 s. */
#define FILE_FD_CALL_TIMEOUT_USEC (10 * USEC_PER_MINUTE)
/* GetLog caps a page at 1000 rows (dbus/org.sandboxd.audit1.xml); larger --limit values take several. */
#define LOG_PAGE_MAX      UINT64_C(1000)
#define LOG_DEFAULT_LIMIT UINT64_C(50)

typedef enum JsonMode {
        JSON_OFF,
        JSON_SHORT,
        JSON_PRETTY,
} JsonMode;

static bool arg_legend = true;
static bool arg_quiet = false;
static const char *arg_host = NULL;
static JsonMode arg_json = JSON_OFF;
/* create */
static const char *arg_name = NULL;
static const char *arg_type = NULL;
static const char *arg_network = NULL;
static const char *arg_image = NULL; /* issue 24: create --image= */
static const char *arg_from_snapshot = NULL; /* create --from-snapshot (issue 26) */
/* create, network: an egress policy of the sandbox's own */
static const char **arg_allow = NULL, **arg_deny = NULL;
static size_t arg_n_allow = 0, arg_n_deny = 0;
static const char *arg_egress_default = NULL;
static bool arg_ttl_set = false;
static uint64_t arg_ttl = 0;
/* exec */
static const char *arg_cwd = NULL;
static EnvVar *arg_env = NULL;
static size_t arg_n_env = 0;
static uint64_t arg_timeout = 0; /* seconds, 0 = not given */
static uint64_t arg_memory_max = 0;
static uint64_t arg_tasks_max = 0;
static const char *arg_stdin_file = NULL;
static bool arg_stdin = false;
static bool arg_capture = false;
/* write, cp */
static bool arg_mode_set = false;
static uint32_t arg_mode = 0;
static bool arg_mkdir = false;
static bool arg_append = false;
/* log */
static bool arg_follow = false;
static uint64_t arg_limit = LOG_DEFAULT_LIMIT;
static uint64_t arg_output = 0; /* row id, 0 = not given */
static bool arg_verify = false;
static const char *arg_export = NULL; /* --export=DIR */
static LogFilter arg_filter = {};

static void json_object_putp(json_object **j) {
        if (*j)
                json_object_put(*j);
}
#define _cleanup_json_ _cleanup_(json_object_putp)

static bool arg_policy_given(void) {
        return arg_n_allow > 0 || arg_n_deny > 0 || arg_egress_default;
}

static int add_policy_entry(const char ***list, size_t *n, const char *entry) {
        const char **l = reallocarray(*list, *n + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        l[(*n)++] = entry;
        *list = l;
        return 0;
}

/* The policy a{sv} of CreateSandbox's egress_policy and of SetNetworkPolicy, from --allow, --deny and
 * --egress-default. The entries are sandboxd's to check: its error says which one is wrong and why. */
static int append_policy(sd_bus_message *m) {
        int r;

        r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        if (arg_egress_default &&
            (r = sd_bus_message_append(m, "{sv}", "default", "s", arg_egress_default)) < 0)
                return r;
        for (int allow = 1; allow >= 0; allow--) {
                const char **l = allow ? arg_allow : arg_deny;
                size_t n = allow ? arg_n_allow : arg_n_deny;
                if (n == 0)
                        continue;
                if ((r = sd_bus_message_open_container(m, 'e', "sv")) < 0 ||
                    (r = sd_bus_message_append(m, "s", allow ? "allow" : "deny")) < 0 ||
                    (r = sd_bus_message_open_container(m, 'v', "as")) < 0 ||
                    (r = sd_bus_message_open_container(m, 'a', "s")) < 0)
                        return r;
                for (size_t i = 0; i < n; i++)
                        if ((r = sd_bus_message_append(m, "s", l[i])) < 0)
                                return r;
                for (int k = 0; k < 3; k++) /* as, v, e */
                        if ((r = sd_bus_message_close_container(m)) < 0)
                                return r;
        }
        return sd_bus_message_close_container(m);
}

static void env_free_all(void) {
        free(arg_allow);
        arg_allow = NULL;
        arg_n_allow = 0;
        free(arg_deny);
        arg_deny = NULL;
        arg_n_deny = 0;
        env_list_free(&arg_env, &arg_n_env);
}

/* "sandboxctl: VERB: message", returning r (a negative errno) for "return log_error(...)". */
_printf_(3, 4) static int log_error(int r, const char *verb, const char *fmt, ...) {
        va_list ap;

        fprintf(stderr, "sandboxctl: %s: ", verb);
        /* For "%m": the caller passes -errno, which fprintf() may have clobbered meanwhile. */
        errno = r < 0 ? -r : EIO;
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        return r < 0 ? r : -EIO;
}

/* A failed call: the D-Bus error's own message (the daemon says what went wrong), else the errno.
 * missing_hint follows the message when the service is not on the bus, denied_hint when the bus or
 * the service refused the caller. */
static int log_bus_error_full(const char *verb, const sd_bus_error *error, int r, const char *missing_hint,
                              const char *denied_hint) {
        _cleanup_free_ char *msg = NULL;
        const char *hint = "";

        if (sd_bus_error_is_set(error)) {
                msg = make_printable(!isempty(error->message) ? error->message : error->name);
                if (sd_bus_error_has_names(error, SD_BUS_ERROR_SERVICE_UNKNOWN,
                                           SD_BUS_ERROR_NAME_HAS_NO_OWNER))
                        hint = strempty(missing_hint);
                else if (sd_bus_error_has_name(error, SD_BUS_ERROR_ACCESS_DENIED))
                        hint = strempty(denied_hint);
        } else
                msg = strdup(strerror(r < 0 ? -r : EIO));

        fprintf(stderr, "sandboxctl: %s: %s%s\n", verb, strna(msg), hint);
        return r < 0 ? r : -EIO;
}

static int log_bus_error(const char *verb, const sd_bus_error *error, int r) {
        return log_bus_error_full(verb, error, r, " (is sandboxd running?)", NULL);
}

static int log_audit_bus_error(const char *verb, const sd_bus_error *error, int r) {
        return log_bus_error_full(verb, error, r, " (is sandbox-auditd installed?)",
                                  " (reading the audit log needs root or the sandbox-admin group)");
}

static int acquire_bus(const char *verb, sd_bus **ret) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r;

        if (arg_host)
                r = sd_bus_open_system_remote(&bus, arg_host);
        else
                r = sd_bus_open_system(&bus);
        if (r < 0)
                return log_error(r, verb, "Failed to connect to the system bus%s%s: %s",
                                 arg_host ? " on " : "", strempty(arg_host), strerror(-r));

        *ret = TAKE_PTR(bus);
        return 0;
}

/* Streaming needs fd passing, which ssh transports (-H) lack. */
static bool bus_can_send_fds(sd_bus *bus) {
        return sd_bus_can_send(bus, SD_BUS_TYPE_UNIX_FD) > 0;
}

static int append_dict_string(sd_bus_message *m, const char *key, const char *value) {
        return sd_bus_message_append(m, "{sv}", key, "s", value);
}

static int append_dict_uint64(sd_bus_message *m, const char *key, uint64_t value) {
        return sd_bus_message_append(m, "{sv}", key, "t", value);
}

/* A typed slot for read_dict(): 's' → char ** (strdup), 'u' → uint32_t *, 't' → uint64_t *,
 * 'i' → int32_t *, 'b' → bool *. Keys we do not know, or with a type we do not expect, are skipped, so
 * the daemon may add keys without breaking older clients. */
typedef struct DictField {
        const char *key;
        char type;
        void *ptr;
} DictField;

static int read_dict(sd_bus_message *m, const DictField *fields, size_t n_fields) {
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;

        for (;;) {
                const DictField *f = NULL;
                const char *key, *contents;

                r = sd_bus_message_enter_container(m, 'e', "sv");
                if (r < 0)
                        return r;
                if (r == 0)
                        break;

                r = sd_bus_message_read(m, "s", &key);
                if (r < 0)
                        return r;

                for (size_t i = 0; i < n_fields; i++)
                        if (streq(fields[i].key, key)) {
                                f = fields + i;
                                break;
                        }

                r = sd_bus_message_peek_type(m, NULL, &contents);
                if (r < 0)
                        return r;

                if (!f || strlen(contents) != 1 || contents[0] != f->type) {
                        r = sd_bus_message_skip(m, "v");
                        if (r < 0)
                                return r;
                } else {
                        char sig[2] = { f->type, 0 };

                        r = sd_bus_message_enter_container(m, 'v', sig);
                        if (r < 0)
                                return r;

                        switch (f->type) {
                        case 's': {
                                const char *s;
                                char *copy;

                                r = sd_bus_message_read_basic(m, 's', &s);
                                if (r < 0)
                                        return r;
                                copy = strdup(s);
                                if (!copy)
                                        return -ENOMEM;
                                free(*(char **) f->ptr);
                                *(char **) f->ptr = copy;
                                break;
                        }
                        case 'b': {
                                int b;

                                r = sd_bus_message_read_basic(m, 'b', &b);
                                if (r < 0)
                                        return r;
                                *(bool *) f->ptr = b;
                                break;
                        }
                        default:
                                r = sd_bus_message_read_basic(m, f->type, f->ptr);
                                if (r < 0)
                                        return r;
                        }

                        r = sd_bus_message_exit_container(m);
                        if (r < 0)
                                return r;
                }

                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }

        return sd_bus_message_exit_container(m);
}

static int print_json(json_object *j) {
        int flags = JSON_C_TO_STRING_NOSLASHESCAPE |
                    (arg_json == JSON_PRETTY ? JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED
                                             : JSON_C_TO_STRING_PLAIN);
        const char *s = json_object_to_json_string_ext(j, flags);

        if (!s)
                return -ENOMEM;
        puts(s);
        return 0;
}

static json_object *json_timestamp(uint64_t usec) {
        char buf[RFC3339_USEC_MAX];

        if (usec == 0 || format_rfc3339_usec(usec, buf) < 0)
                return NULL; /* JSON null */
        return json_object_new_string(buf);
}

/* --- list --------------------------------------------------------------------------------------- */

typedef struct ListRow {
        char *cols[5]; /* id, name, type, state, owner; printable copies */
} ListRow;

static void list_rows_free(ListRow *rows, size_t n) {
        for (size_t i = 0; i < n; i++)
                for (size_t c = 0; c < ELEMENTSOF(rows[i].cols); c++)
                        free(rows[i].cols[c]);
        free(rows);
}

static int verb_list(char **args, size_t n_args) {
        static const char *const headers[5] = { "ID", "NAME", "TYPE", "STATE", "OWNER" };
        static const char *const json_keys[5] = { "id", "name", "type", "state", "owner" };
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_json_ json_object *jarray = NULL;
        ListRow *rows = NULL;
        size_t n_rows = 0;
        int r;

        r = acquire_bus("list", &bus);
        if (r < 0)
                return r;

        r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                               "ListSandboxes", &error, &reply, NULL);
        if (r < 0)
                return log_bus_error("list", &error, r);

        r = sd_bus_message_enter_container(reply, 'a', "(ssssso)");
        if (r < 0)
                goto parse_error;

        if (arg_json != JSON_OFF) {
                jarray = json_object_new_array();
                if (!jarray)
                        return log_error(-ENOMEM, "list", "Out of memory");
        }

        for (;;) {
                const char *v[5], *path;

                r = sd_bus_message_read(reply, "(ssssso)", &v[0], &v[1], &v[2], &v[3], &v[4], &path);
                if (r < 0)
                        goto parse_error;
                if (r == 0)
                        break;

                if (jarray) {
                        json_object *o = json_object_new_object();
                        if (!o || json_object_array_add(jarray, o) < 0) {
                                json_object_put(o);
                                r = -ENOMEM;
                                goto fail;
                        }
                        for (size_t c = 0; c < 5; c++)
                                json_object_object_add(o, json_keys[c], json_object_new_string(v[c]));
                        continue;
                }

                ListRow *nr = reallocarray(rows, n_rows + 1, sizeof(ListRow));
                if (!nr) {
                        r = -ENOMEM;
                        goto fail;
                }
                rows = nr;
                memset(&rows[n_rows], 0, sizeof(ListRow));
                n_rows++;
                for (size_t c = 0; c < 5; c++) {
                        /* "-" for an empty cell, as systemd's tables do, so columns stay countable. */
                        rows[n_rows - 1].cols[c] = make_printable(isempty(v[c]) ? "-" : v[c]);
                        if (!rows[n_rows - 1].cols[c]) {
                                r = -ENOMEM;
                                goto fail;
                        }
                }
        }

        r = sd_bus_message_exit_container(reply);
        if (r < 0)
                goto parse_error;

        if (jarray) {
                _cleanup_json_ json_object *top = json_object_new_object();
                if (!top)
                        return log_error(-ENOMEM, "list", "Out of memory");
                json_object_object_add(top, "sandboxes", TAKE_PTR(jarray));
                return print_json(top);
        }

        size_t width[5];
        for (size_t c = 0; c < 5; c++) {
                width[c] = strlen(headers[c]);
                for (size_t i = 0; i < n_rows; i++)
                        width[c] = MAX(width[c], strlen(rows[i].cols[c]));
        }

        if (arg_legend)
                for (size_t c = 0; c < 5; c++)
                        printf("%-*s%s", c < 4 ? (int) width[c] : 0, headers[c], c < 4 ? " " : "\n");

        for (size_t i = 0; i < n_rows; i++)
                for (size_t c = 0; c < 5; c++)
                        printf("%-*s%s", c < 4 ? (int) width[c] : 0, rows[i].cols[c], c < 4 ? " " : "\n");

        if (arg_legend)
                printf("\n%zu sandboxes listed.\n", n_rows);

        list_rows_free(rows, n_rows);
        return 0;

parse_error:
        list_rows_free(rows, n_rows);
        return log_error(r, "list", "Failed to parse reply: %s", strerror(-r));
fail:
        list_rows_free(rows, n_rows);
        return log_error(r, "list", "%s", strerror(-r));
}

/* --- status ------------------------------------------------------------------------------------- */

typedef struct SandboxInfo {
        char *id, *name, *type, *state, *unit, *network, *owner, *image;
        uint32_t uid;
        uint64_t created_at, expires_at;
} SandboxInfo;

static void sandbox_info_done(SandboxInfo *i) {
        free(i->id);
        free(i->name);
        free(i->type);
        free(i->state);
        free(i->unit);
        free(i->network);
        free(i->owner);
        free(i->image);
}

static int get_sandbox_info(sd_bus *bus, const char *id, sd_bus_error *error, SandboxInfo *info) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL, *props = NULL;
        const char *path;
        int r;

        r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                               "GetSandbox", error, &reply, "s", id);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "o", &path);
        if (r < 0)
                return r;

        r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, path, "org.freedesktop.DBus.Properties", "GetAll",
                               error, &props, "s", SANDBOXD_SANDBOX_INTERFACE);
        if (r < 0)
                return r;

        const DictField fields[] = {
                { "Id", 's', &info->id },
                { "Name", 's', &info->name },
                { "Type", 's', &info->type },
                { "State", 's', &info->state },
                { "Uid", 'u', &info->uid },
                { "Unit", 's', &info->unit },
                { "Network", 's', &info->network },
                { "Image", 's', &info->image },
                { "Owner", 's', &info->owner },
                { "CreatedAt", 't', &info->created_at },
                { "ExpiresAt", 't', &info->expires_at },
        };
        return read_dict(props, fields, ELEMENTSOF(fields));
}

static int print_sandbox_json(const char *id, const SandboxInfo *i) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o)
                return -ENOMEM;

        json_object_object_add(o, "id", json_object_new_string(i->id ?: id));
        json_object_object_add(o, "name", json_object_new_string(strempty(i->name)));
        json_object_object_add(o, "type", json_object_new_string(strempty(i->type)));
        json_object_object_add(o, "state", json_object_new_string(strempty(i->state)));
        json_object_object_add(o, "uid", json_object_new_int64(i->uid));
        json_object_object_add(o, "unit", json_object_new_string(strempty(i->unit)));
        json_object_object_add(o, "network", json_object_new_string(strempty(i->network)));
        json_object_object_add(o, "image", json_object_new_string(i->image ?: "host"));
        json_object_object_add(o, "owner", json_object_new_string(strempty(i->owner)));
        json_object_object_add(o, "created_at", json_timestamp(i->created_at));
        json_object_object_add(o, "expires_at", json_timestamp(i->expires_at));
        return print_json(o);
}

static void print_field(const char *key, const char *value) {
        _cleanup_free_ char *p = make_printable(value);

        printf("%9s:%s%s\n", key, isempty(p) ? "" : " ", strempty(p));
}

static void print_sandbox_text(const char *id, const SandboxInfo *i) {
        char buf[FORMAT_TIMESTAMP_MAX], uid[16];

        print_field("Id", i->id ?: id);
        print_field("Name", i->name);
        print_field("Type", i->type);
        print_field("State", i->state);
        snprintf(uid, sizeof(uid), "%" PRIu32, i->uid);
        print_field("Uid", uid);
        print_field("Unit", i->unit);
        print_field("Network", i->network);
        print_field("Image", i->image ?: "host");
        print_field("Owner", i->owner);
        print_field("CreatedAt", i->created_at == 0 ? "n/a" : strna(format_timestamp(i->created_at, buf)));
        print_field("ExpiresAt", i->expires_at == 0 ? "never" : strna(format_timestamp(i->expires_at, buf)));
}

static int verb_status(char **args, size_t n_args) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r, ret = 0;

        r = acquire_bus("status", &bus);
        if (r < 0)
                return r;

        for (size_t k = 1; k < n_args; k++) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                SandboxInfo info = {};

                r = get_sandbox_info(bus, args[k], &error, &info);
                if (r < 0) {
                        if (sd_bus_error_is_set(&error))
                                ret = log_bus_error("status", &error, r);
                        else
                                ret = log_error(r, "status", "%s: Failed to parse properties: %s", args[k],
                                                strerror(-r));
                        sandbox_info_done(&info);
                        continue;
                }

                if (arg_json != JSON_OFF) {
                        r = print_sandbox_json(args[k], &info);
                        if (r < 0)
                                ret = log_error(r, "status", "%s", strerror(-r));
                } else {
                        if (k > 1)
                                putchar('\n');
                        print_sandbox_text(args[k], &info);
                }
                sandbox_info_done(&info);
        }

        return ret;
}

/* --- create, delete, set-ttl --------------------------------------------------------------------- */

static int verb_create(char **args, size_t n_args) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        const char *id, *path;
        int r;

        r = acquire_bus("create", &bus);
        if (r < 0)
                return r;

        r = sd_bus_message_new_method_call(bus, &m, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                           SANDBOXD_MANAGER_INTERFACE, "CreateSandbox");
        if (r < 0)
                goto build_error;
        r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r < 0)
                goto build_error;
        if (arg_name && (r = append_dict_string(m, "name", arg_name)) < 0)
                goto build_error;
        if (arg_type && (r = append_dict_string(m, "type", arg_type)) < 0)
                goto build_error;
        if (arg_image && (r = append_dict_string(m, "image", arg_image)) < 0)
                goto build_error;
        if (arg_ttl_set && (r = append_dict_uint64(m, "ttl_seconds", arg_ttl)) < 0)
                goto build_error;
        if (arg_from_snapshot && (r = append_dict_string(m, "snapshot", arg_from_snapshot)) < 0)
                goto build_error;
        /* --allow, --deny and --egress-default imply --network=egress (parse_argv() refused another). */
        if ((arg_network || arg_policy_given()) &&
            (r = append_dict_string(m, "network", arg_network ?: "egress")) < 0)
                goto build_error;
        if (arg_policy_given()) {
                if ((r = sd_bus_message_open_container(m, 'e', "sv")) < 0 ||
                    (r = sd_bus_message_append(m, "s", "egress_policy")) < 0 ||
                    (r = sd_bus_message_open_container(m, 'v', "a{sv}")) < 0 || (r = append_policy(m)) < 0 ||
                    (r = sd_bus_message_close_container(m)) < 0 ||
                    (r = sd_bus_message_close_container(m)) < 0)
                        goto build_error;
        }
        r = sd_bus_message_close_container(m);
        if (r < 0)
                goto build_error;

        r = sd_bus_call(bus, m, 0, &error, &reply);
        if (r < 0)
                return log_bus_error("create", &error, r);

        r = sd_bus_message_read(reply, "so", &id, &path);
        if (r < 0)
                return log_error(r, "create", "Failed to parse reply: %s", strerror(-r));

        puts(id);
        return 0;

build_error:
        return log_error(r, "create", "Failed to build the call: %s", strerror(-r));
}

static int verb_delete(char **args, size_t n_args) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r, ret = 0;

        r = acquire_bus("delete", &bus);
        if (r < 0)
                return r;

        /* Like "machinectl terminate": try every id, report each failure, fail if any did. */
        for (size_t k = 1; k < n_args; k++) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;

                r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                                       "DeleteSandbox", &error, NULL, "sa{sv}", args[k], 0);
                if (r < 0)
                        ret = log_bus_error("delete", &error, r);
        }

        return ret;
}

/* Issue 26: pause and resume, each id in turn like delete. */
static int verb_pause_resume(char **args, size_t n_args) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        const char *verb = args[0], *method = streq(args[0], "pause") ? "PauseSandbox" : "ResumeSandbox";
        int r, ret = 0;

        r = acquire_bus(verb, &bus);
        if (r < 0)
                return r;
        for (size_t k = 1; k < n_args; k++) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;

                r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, method,
                                       &error, NULL, "sa{sv}", args[k], 0);
                if (r < 0)
                        ret = log_bus_error(verb, &error, r);
        }
        return ret;
}

static int verb_set_ttl(char **args, size_t n_args) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        uint64_t ttl;
        int r;

        r = parse_seconds(args[2], &ttl);
        if (r < 0)
                return fail_usage(NULL, "set-ttl: invalid number of seconds: %s", args[2]);

        r = acquire_bus("set-ttl", &bus);
        if (r < 0)
                return r;

        r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                               "SetTTL", &error, NULL, "sta{sv}", args[1], ttl, 0);
        if (r < 0)
                return log_bus_error("set-ttl", &error, r);

        return 0;
}

/* --- network ------------------------------------------------------------------------------------- */

static int network_set(sd_bus *bus, const char *id) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                           SANDBOXD_MANAGER_INTERFACE, "SetNetworkPolicy");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", id);
        if (r >= 0)
                r = append_policy(m);
        if (r >= 0)
                r = sd_bus_message_append(m, "a{sv}", 0);
        if (r < 0)
                return log_error(r, "network", "Failed to build the call: %s", strerror(-r));
        r = sd_bus_call(bus, m, 0, &error, NULL);
        if (r < 0)
                return log_bus_error("network", &error, r);
        return 0;
}

static int get_sandbox_string(sd_bus *bus, const char *path, const char *property, sd_bus_error *error,
                              char **ret) {
        return sd_bus_get_property_string(bus, SANDBOXD_BUS_NAME, path, SANDBOXD_SANDBOX_INTERFACE, property,
                                          error, ret);
}

static int network_show(sd_bus *bus, const char *id) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL, *policy = NULL, *counters = NULL;
        _cleanup_(egress_policy_donep) EgressPolicy p = EGRESS_POLICY_INIT;
        _cleanup_free_ char *network = NULL, *address = NULL, *sid = NULL;
        uint64_t c[4];
        const char *path;
        int r;

        r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                               "GetSandbox", &error, &reply, "s", id);
        if (r < 0)
                return log_bus_error("network", &error, r);
        r = sd_bus_message_read(reply, "o", &path);
        if (r < 0)
                return log_error(r, "network", "Failed to parse reply: %s", strerror(-r));
        if ((r = get_sandbox_string(bus, path, "Id", &error, &sid)) < 0 ||
            (r = get_sandbox_string(bus, path, "Network", &error, &network)) < 0 ||
            (r = get_sandbox_string(bus, path, "EgressAddress", &error, &address)) < 0 ||
            (r = sd_bus_get_property(bus, SANDBOXD_BUS_NAME, path, SANDBOXD_SANDBOX_INTERFACE, "EgressPolicy",
                                     &error, &policy, "a{sv}")) < 0 ||
            (r = sd_bus_get_property(bus, SANDBOXD_BUS_NAME, path, SANDBOXD_SANDBOX_INTERFACE,
                                     "EgressCounters", &error, &counters, "(tttt)")) < 0)
                return log_bus_error("network", &error, r);
        /* The policy's own reader: what sandboxd sends is what it would accept. */
        r = egress_policy_from_bus(policy, &p, &error);
        if (r >= 0)
                r = sd_bus_message_read(counters, "(tttt)", &c[0], &c[1], &c[2], &c[3]);
        if (r < 0)
                return log_error(r, "network", "Failed to parse properties: %s",
                                 sd_bus_error_is_set(&error) ? error.message : strerror(-r));
        bool egress = streq(network, "egress");

        if (arg_json != JSON_OFF) {
                _cleanup_json_ json_object *o = json_object_new_object(), *cs = json_object_new_object();
                if (!o || !cs)
                        return log_error(-ENOMEM, "network", "Out of memory");
                json_object_object_add(o, "id", json_object_new_string(sid));
                json_object_object_add(o, "network", json_object_new_string(network));
                json_object_object_add(o, "address", egress ? json_object_new_string(address) : NULL);
                json_object_object_add(o, "policy", egress ? egress_policy_json(&p) : NULL);
                json_object_object_add(cs, "allowed_packets", json_object_new_uint64(c[0]));
                json_object_object_add(cs, "allowed_bytes", json_object_new_uint64(c[1]));
                json_object_object_add(cs, "denied_packets", json_object_new_uint64(c[2]));
                json_object_object_add(cs, "denied_bytes", json_object_new_uint64(c[3]));
                json_object_object_add(o, "counters", egress ? json_object_get(cs) : NULL);
                r = print_json(o);
                return r < 0 ? log_error(r, "network", "%s", strerror(-r)) : 0;
        }

        print_field("Id", sid);
        print_field("Network", network);
        if (!egress)
                return 0;
        _cleanup_free_ char *allow = egress_entries_join(p.allow, p.n_allow),
                            *deny = egress_entries_join(p.deny, p.n_deny), *allowed = NULL, *denied = NULL;
        if (!allow || !deny ||
            asprintf(&allowed, "%" PRIu64 " packets, %" PRIu64 " bytes", c[0], c[1]) < 0 ||
            asprintf(&denied, "%" PRIu64 " packets, %" PRIu64 " bytes", c[2], c[3]) < 0)
                return log_error(-ENOMEM, "network", "Out of memory");
        print_field("Address", address);
        print_field("Default", egress_default_to_string(p.default_action));
        print_field("Allow", allow);
        print_field("Deny", deny);
        print_field("Allowed", allowed);
        print_field("Denied", denied);
        return 0;
}

static int verb_network(char **args, size_t n_args) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r;

        r = acquire_bus("network", &bus);
        if (r < 0)
                return r;
        return arg_policy_given() ? network_set(bus, args[1]) : network_show(bus, args[1]);
}

/* --- exec ---------------------------------------------------------------------------------------- */

/* Output of the command arriving on a pipe of ours, copied to our own stdout or stderr. */
typedef struct Relay {
        int read_fd;
        int out_fd;
        bool out_broken; /* our side is gone: keep draining so the daemon never blocks, drop the data */
        sd_event_source *source;
} Relay;

typedef struct ExecCall {
        sd_event *event;
        Relay relays[2];
        sd_bus_message *reply;
        sd_bus_error error;
        bool replied;
        sd_event_source *drain_timer;
} ExecCall;

static void exec_call_done(ExecCall *c) {
        for (size_t i = 0; i < ELEMENTSOF(c->relays); i++) {
                sd_event_source_disable_unref(c->relays[i].source);
                safe_close(c->relays[i].read_fd);
        }
        sd_event_source_disable_unref(c->drain_timer);
        sd_bus_message_unref(c->reply);
        sd_bus_error_free(&c->error);
        sd_event_unref(c->event);
}

static void exec_call_check_done(ExecCall *c) {
        if (!c->replied)
                return;
        for (size_t i = 0; i < ELEMENTSOF(c->relays); i++)
                if (c->relays[i].read_fd >= 0)
                        return;
        (void) sd_event_exit(c->event, 0);
}

static int on_relay_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ExecCall *c = userdata;
        Relay *relay = NULL;
        char buf[65536];

        for (size_t i = 0; i < ELEMENTSOF(c->relays); i++)
                if (c->relays[i].source == s)
                        relay = c->relays + i;
        if (!relay)
                return 0;

        ssize_t k = read(fd, buf, sizeof(buf));
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (k <= 0) {
                /* EOF (or a broken pipe): the daemon closed its end, all output is through. */
                relay->source = sd_event_source_disable_unref(relay->source);
                relay->read_fd = safe_close(relay->read_fd);
                exec_call_check_done(c);
                return 0;
        }

        if (!relay->out_broken && loop_write(relay->out_fd, buf, (size_t) k) < 0)
                relay->out_broken = true;
        return 0;
}

static int on_drain_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        ExecCall *c = userdata;

        /* The daemon replied but still holds a copy of a pipe's write end: do not wait forever. */
        return sd_event_exit(c->event, 0);
}

static int on_exec_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        ExecCall *c = userdata;
        int r;

        c->reply = sd_bus_message_ref(m);
        c->replied = true;
        if (sd_bus_message_is_method_error(m, NULL))
                (void) sd_bus_error_copy(&c->error, sd_bus_message_get_error(m));

        r = sd_event_add_time_relative(c->event, &c->drain_timer, CLOCK_MONOTONIC, EXEC_DRAIN_USEC, 0,
                                       on_drain_timeout, c);
        if (r < 0)
                return sd_event_exit(c->event, r);

        exec_call_check_done(c);
        return 0;
}

static int append_exec_options(sd_bus_message *m, const char *stdin_data, size_t stdin_size, bool have_stdin,
                               const int out_fds[2], int cancel_fd) {
        int r;

        r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r < 0)
                return r;

        if (arg_cwd && (r = append_dict_string(m, "cwd", arg_cwd)) < 0)
                return r;

        r = bus_append_env(m, arg_env, arg_n_env);
        if (r < 0)
                return r;

        if (have_stdin) {
                r = sd_bus_message_open_container(m, 'e', "sv");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", "stdin");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'v', "ay");
                if (r >= 0)
                        r = sd_bus_message_append_array(m, 'y', stdin_data, stdin_size);
                for (unsigned i = 0; r >= 0 && i < 2; i++)
                        r = sd_bus_message_close_container(m);
                if (r < 0)
                        return r;
        }

        if (arg_timeout > 0 && (r = append_dict_uint64(m, "timeout_seconds", arg_timeout)) < 0)
                return r;
        if (arg_memory_max > 0 && (r = append_dict_uint64(m, "memory_max", arg_memory_max)) < 0)
                return r;
        if (arg_tasks_max > 0 && (r = append_dict_uint64(m, "tasks_max", arg_tasks_max)) < 0)
                return r;

        if (out_fds) {
                /* sd-bus dups the fds into the message; the caller closes its own copies. */
                r = sd_bus_message_append(m, "{sv}", "stdout_fd", "h", out_fds[0]);
                if (r < 0)
                        return r;
                r = sd_bus_message_append(m, "{sv}", "stderr_fd", "h", out_fds[1]);
                if (r < 0)
                        return r;
        }
        if (cancel_fd >= 0) {
                r = sd_bus_message_append(m, "{sv}", "cancel_fd", "h", cancel_fd);
                if (r < 0)
                        return r;
        }

        return sd_bus_message_close_container(m);
}

static int verb_exec(char **args, size_t n_args) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_free_ char *stdin_data = NULL;
        _cleanup_close_pair_ int pipe_w[2] = { -EBADF, -EBADF };
        _cleanup_close_pair_ int cancel[2] = { -EBADF, -EBADF };
        ExecCall call = { .relays = { { .read_fd = -EBADF }, { .read_fd = -EBADF } } };
        size_t stdin_size = 0;
        bool capture;
        int r, ret;

        if (arg_stdin_file || arg_stdin) {
                _cleanup_close_ int fd = -EBADF;

                if (arg_stdin_file) {
                        fd = open(arg_stdin_file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                        if (fd < 0)
                                return log_error(-errno, "exec", "Failed to open %s: %m", arg_stdin_file);
                }
                r = read_full_fd(fd >= 0 ? fd : STDIN_FILENO, EXEC_STDIN_MAX, &stdin_data, &stdin_size);
                if (r == -EFBIG)
                        return log_error(r, "exec", "stdin is larger than %zu MiB; use 'sandboxctl write' "
                                         "or 'cp' for the data and run the command on the file",
                                         EXEC_STDIN_MAX / 1024 / 1024);
                if (r < 0)
                        return log_error(r, "exec", "Failed to read %s: %s", arg_stdin_file ?: "stdin",
                                         strerror(-r));
        }

        r = acquire_bus("exec", &bus);
        if (r < 0)
                return r;

        bool fds = bus_can_send_fds(bus);
        capture = arg_capture || !fds;

        r = sd_event_default(&call.event);
        if (r < 0)
                goto fail;
        r = sd_bus_attach_event(bus, call.event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                goto fail;

        int out_fds[2] = { STDOUT_FILENO, STDERR_FILENO };
        if (!capture)
                for (size_t i = 0; i < 2; i++) {
                        int p[2];

                        /* A terminal fd lets whoever holds it read keystrokes and (TIOCSTI) inject them;
                         * the command's output reaches a terminal through a pipe of ours instead. Pipes
                         * and files are handed over as they are. */
                        if (!isatty(out_fds[i]))
                                continue;

                        if (pipe2(p, O_CLOEXEC) < 0) {
                                r = -errno;
                                goto fail;
                        }
                        /* Only our end is non-blocking: the daemon's end stays as it expects it. */
                        if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) {
                                r = -errno;
                                safe_close(p[0]);
                                safe_close(p[1]);
                                goto fail;
                        }
                        call.relays[i].read_fd = p[0];
                        call.relays[i].out_fd = out_fds[i];
                        pipe_w[i] = p[1];
                        out_fds[i] = p[1];

                        r = sd_event_add_io(call.event, &call.relays[i].source, p[0], EPOLLIN, on_relay_io,
                                            &call);
                        if (r < 0)
                                goto fail;
                }

        /* The write end stays open as long as we live: Ctrl-C, or sandboxctl killed, hangs it up and
         * sandboxd cancels the command. Without fd passing there is none, and the command runs on. */
        if (fds && pipe2(cancel, O_CLOEXEC) < 0) {
                r = -errno;
                goto fail;
        }

        r = sd_bus_message_new_method_call(bus, &m, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                           SANDBOXD_MANAGER_INTERFACE, "Exec");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", args[1]);
        if (r >= 0)
                r = sd_bus_message_append_strv(m, args + 2);
        if (r >= 0)
                r = append_exec_options(m, stdin_data, stdin_size, arg_stdin_file || arg_stdin,
                                        capture ? NULL : out_fds, cancel[0]);
        if (r < 0) {
                log_error(r, "exec", "Failed to build the call: %s", strerror(-r));
                goto finish;
        }

        uint64_t timeout = arg_timeout > 0 ? arg_timeout * USEC_PER_SEC + EXEC_CALL_SLACK_USEC
                                           : EXEC_DEFAULT_CALL_TIMEOUT_USEC;
        r = sd_bus_call_async(bus, NULL, m, on_exec_reply, &call, timeout);
        if (r < 0)
                goto fail;

        /* The daemon sees EOF on a relay only once every write end is closed: drop ours and the
         * message's copies now that the call is queued. */
        m = sd_bus_message_unref(m);
        pipe_w[0] = safe_close(pipe_w[0]);
        pipe_w[1] = safe_close(pipe_w[1]);
        cancel[0] = safe_close(cancel[0]);
        free(stdin_data);
        stdin_data = NULL;

        r = sd_event_loop(call.event);
        if (r < 0)
                goto fail;
        if (!call.replied) {
                r = -ECONNRESET;
                goto fail;
        }

        if (sd_bus_error_is_set(&call.error)) {
                r = log_bus_error("exec", &call.error, -(sd_bus_error_get_errno(&call.error) ?: EIO));
                goto finish;
        }

        int32_t exit_code, sig = 0;
        const void *out = NULL, *err = NULL;
        size_t out_size = 0, err_size = 0;
        bool stdout_truncated = false, stderr_truncated = false, timed_out = false, oom_killed = false;

        r = sd_bus_message_read(call.reply, "i", &exit_code);
        if (r >= 0)
                r = sd_bus_message_read_array(call.reply, 'y', &out, &out_size);
        if (r >= 0)
                r = sd_bus_message_read_array(call.reply, 'y', &err, &err_size);
        if (r >= 0) {
                const DictField fields[] = {
                        { "stdout_truncated", 'b', &stdout_truncated },
                        { "stderr_truncated", 'b', &stderr_truncated },
                        { "timed_out", 'b', &timed_out },
                        { "oom_killed", 'b', &oom_killed },
                        { "signal", 'i', &sig },
                };
                r = read_dict(call.reply, fields, ELEMENTSOF(fields));
        }
        if (r < 0) {
                log_error(r, "exec", "Failed to parse reply: %s", strerror(-r));
                goto finish;
        }

        /* In streaming mode these are empty; write them anyway in case the daemon chose to capture. */
        fflush(stdout);
        if (out_size > 0)
                (void) loop_write(STDOUT_FILENO, out, out_size);
        if (err_size > 0)
                (void) loop_write(STDERR_FILENO, err, err_size);

        if (!arg_quiet) {
                if (stdout_truncated)
                        fputs("sandboxctl: note: the command's stdout was truncated by sandboxd\n", stderr);
                if (stderr_truncated)
                        fputs("sandboxctl: note: the command's stderr was truncated by sandboxd\n", stderr);
                if (oom_killed && !timed_out)
                        fputs("sandboxctl: command was killed: out of memory\n", stderr);
        }
        if (timed_out)
                fputs("sandboxctl: command timed out\n", stderr);

        ret = exec_exit_status(exit_code, sig, timed_out, oom_killed);
        exec_call_done(&call);
        return ret;

fail:
        log_error(r, "exec", "%s", strerror(-r));
finish:
        exec_call_done(&call);
        return r < 0 ? r : -EIO;
}

/* --- write, cat, cp ------------------------------------------------------------------------------ */

static int write_file_call(sd_bus *bus, const char *verb, const char *id, const char *path, const void *data,
                           size_t size, bool append, int fd) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                           SANDBOXD_MANAGER_INTERFACE, "WriteFile");
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", id, path);
        if (r >= 0)
                r = sd_bus_message_append_array(m, 'y', data, size);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0 && arg_mode_set)
                r = sd_bus_message_append(m, "{sv}", "mode", "u", arg_mode);
        if (r >= 0 && arg_mkdir)
                r = sd_bus_message_append(m, "{sv}", "create_dirs", "b", 1);
        if (r >= 0 && append)
                r = sd_bus_message_append(m, "{sv}", "append", "b", 1);
        if (r >= 0 && fd >= 0)
                r = sd_bus_message_append(m, "{sv}", "fd", "h", fd);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return log_error(r, verb, "Failed to build the call: %s", strerror(-r));

        r = sd_bus_call(bus, m, fd >= 0 ? FILE_FD_CALL_TIMEOUT_USEC : 0, &error, NULL);
        if (r < 0)
                return log_bus_error(verb, &error, r);

        return 0;
}

static int write_file(sd_bus *bus, const char *verb, const char *id, const char *path, const char *data,
                      size_t size) {
        int r;

        if (size <= WRITE_INLINE_MAX)
                return write_file_call(bus, verb, id, path, data, size, arg_append, -EBADF);

        if (bus_can_send_fds(bus)) {
                /* One call, one audit row: the daemon reads the data from a sealed memfd. */
                _cleanup_close_ int fd = memfd_create("sandboxctl-upload", MFD_CLOEXEC | MFD_ALLOW_SEALING);
                if (fd < 0)
                        return log_error(-errno, verb, "Failed to create memfd: %m");
                r = loop_write(fd, data, size);
                if (r < 0)
                        return log_error(r, verb, "Failed to fill memfd: %s", strerror(-r));
                if (lseek(fd, 0, SEEK_SET) < 0)
                        return log_error(-errno, verb, "Failed to rewind memfd: %m");
                (void) fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);

                return write_file_call(bus, verb, id, path, NULL, 0, arg_append, fd);
        }

        /* No fd passing (ssh): replace with the first chunk, append the rest. */
        for (size_t off = 0; off < size; off += WRITE_INLINE_MAX) {
                r = write_file_call(bus, verb, id, path, data + off, MIN(WRITE_INLINE_MAX, size - off),
                                    arg_append || off > 0, -EBADF);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Receives ReadFile's data page by page; called once even for an empty file. */
typedef int (*ReadSink)(const void *data, size_t size, uint32_t mode, void *userdata);

static int read_file(sd_bus *bus, const char *verb, const char *id, const char *path, ReadSink sink,
                     void *userdata) {
        uint64_t offset = 0;
        int r;

        /* sandboxd caps what one reply carries and says so with "truncated": page on with "offset". */
        for (;;) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
                const void *data = NULL;
                size_t size = 0;
                uint64_t file_size = 0;
                uint32_t mode = 0;
                bool truncated = false;

                r = sd_bus_message_new_method_call(bus, &m, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                                   SANDBOXD_MANAGER_INTERFACE, "ReadFile");
                if (r >= 0)
                        r = sd_bus_message_append(m, "ss", id, path);
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'a', "{sv}");
                if (r >= 0 && offset > 0)
                        r = append_dict_uint64(m, "offset", offset);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                if (r < 0)
                        return log_error(r, verb, "Failed to build the call: %s", strerror(-r));

                r = sd_bus_call(bus, m, 0, &error, &reply);
                if (r < 0)
                        return log_bus_error(verb, &error, r);

                r = sd_bus_message_read_array(reply, 'y', &data, &size);
                if (r >= 0) {
                        const DictField fields[] = {
                                { "size", 't', &file_size },
                                { "mode", 'u', &mode },
                                { "truncated", 'b', &truncated },
                        };
                        r = read_dict(reply, fields, ELEMENTSOF(fields));
                }
                if (r < 0)
                        return log_error(r, verb, "Failed to parse reply: %s", strerror(-r));

                r = sink(data, size, mode, userdata);
                if (r < 0)
                        return r;

                offset += size;
                if (!truncated || size == 0 || (file_size > 0 && offset >= file_size))
                        return 0;
        }
}

typedef struct FileSink {
        const char *verb;
        const char *path; /* NULL: stdout */
        int fd;
} FileSink;

static int file_sink(const void *data, size_t size, uint32_t mode, void *userdata) {
        FileSink *s = userdata;
        int r;

        if (s->fd < 0) {
                /* Opened only once the first page arrived, so a failed read never clobbers the file. */
                mode_t m = arg_mode_set ? arg_mode : mode != 0 ? (mode & 0777) : 0666;

                s->fd = open(s->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, m);
                if (s->fd < 0)
                        return log_error(-errno, s->verb, "Failed to open %s: %m", s->path);
        }

        r = loop_write(s->fd, data, size);
        if (r < 0)
                return log_error(r, s->verb, "Failed to write %s: %s", s->path ?: "stdout", strerror(-r));
        return 0;
}

static int read_upload(const char *verb, const char *local, char **ret_data, size_t *ret_size,
                       uint32_t *ret_mode) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        if (streq(local, "-"))
                *ret_mode = 0;
        else {
                fd = open(local, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (fd < 0)
                        return log_error(-errno, verb, "Failed to open %s: %m", local);
                if (fstat(fd, &st) < 0)
                        return log_error(-errno, verb, "Failed to stat %s: %m", local);
                if (S_ISDIR(st.st_mode))
                        return log_error(-EISDIR, verb, "%s is a directory; only files can be copied",
                                         local);
                *ret_mode = st.st_mode & 0777;
        }

        r = read_full_fd(fd >= 0 ? fd : STDIN_FILENO, UPLOAD_MAX, ret_data, ret_size);
        if (r < 0)
                return log_error(r, verb, "Failed to read %s: %s", streq(local, "-") ? "stdin" : local,
                                 strerror(-r));
        return 0;
}

static int verb_write(char **args, size_t n_args) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_free_ char *data = NULL;
        size_t size;
        uint32_t mode;
        int r;

        r = read_upload("write", "-", &data, &size, &mode);
        if (r < 0)
                return r;

        r = acquire_bus("write", &bus);
        if (r < 0)
                return r;

        return write_file(bus, "write", args[1], args[2], data, size);
}

static int verb_cat(char **args, size_t n_args) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        FileSink sink = { .verb = "cat", .fd = STDOUT_FILENO };
        int r;

        r = acquire_bus("cat", &bus);
        if (r < 0)
                return r;

        fflush(stdout);
        return read_file(bus, "cat", args[1], args[2], file_sink, &sink);
}

/* "DIR/" + the basename of other, when target names a directory. */
static int path_join_basename(const char *verb, const char *dir, const char *other, char **ret) {
        _cleanup_free_ char *base = path_basename(other);
        char *joined;

        if (!base || streq(base, "-"))
                return fail_usage(NULL, "%s: cannot derive a file name from '%s'; name the target file",
                                  verb, other);

        if (asprintf(&joined, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", base) < 0)
                return log_error(-ENOMEM, verb, "Out of memory");
        *ret = joined;
        return 0;
}

static int verb_cp(char **args, size_t n_args) {
        _cleanup_free_ char *src_id = NULL, *src_path = NULL, *dst_id = NULL, *dst_path = NULL;
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r, src_remote, dst_remote;

        src_remote = split_sandbox_path(args[1], &src_id, &src_path);
        dst_remote = split_sandbox_path(args[2], &dst_id, &dst_path);
        if (src_remote == -EINVAL || dst_remote == -EINVAL)
                return fail_usage(NULL, "cp: 'ID:' needs a path after the colon");
        if (src_remote < 0 || dst_remote < 0)
                return log_error(-ENOMEM, "cp", "Out of memory");
        if (src_remote && dst_remote)
                return fail_usage(NULL,
                                  "cp: copying from one sandbox to another is not supported; go through a "
                                  "local file");
        if (!src_remote && !dst_remote)
                return fail_usage(NULL, "cp: one of SRC and DST must be ID:PATH (ID being a sandbox id like "
                                        "sb_abcdefghij)");

        if (dst_remote) {
                _cleanup_free_ char *data = NULL, *target = NULL;
                size_t size;
                uint32_t mode;

                if (dst_path[strlen(dst_path) - 1] == '/') {
                        r = path_join_basename("cp", dst_path, args[1], &target);
                        if (r != 0)
                                return r;
                }

                r = read_upload("cp", args[1], &data, &size, &mode);
                if (r < 0)
                        return r;
                /* Like cp(1), a new file gets the source's permission bits unless --mode says otherwise. */
                if (!arg_mode_set && mode != 0) {
                        arg_mode_set = true;
                        arg_mode = mode;
                }

                r = acquire_bus("cp", &bus);
                if (r < 0)
                        return r;

                return write_file(bus, "cp", dst_id, target ?: dst_path, data, size);
        }

        _cleanup_free_ char *target = NULL;
        FileSink sink = { .verb = "cp", .fd = -EBADF };
        struct stat st;

        if (streq(args[2], "-"))
                sink.fd = STDOUT_FILENO;
        else if (args[2][strlen(args[2]) - 1] == '/' || (stat(args[2], &st) >= 0 && S_ISDIR(st.st_mode))) {
                r = path_join_basename("cp", args[2], src_path, &target);
                if (r != 0)
                        return r;
        }
        sink.path = target ?: args[2];

        r = acquire_bus("cp", &bus);
        if (r < 0)
                return r;

        fflush(stdout);
        r = read_file(bus, "cp", src_id, src_path, file_sink, &sink);
        if (sink.fd > STDERR_FILENO) {
                if (close(sink.fd) < 0 && r >= 0)
                        r = log_error(-errno, "cp", "Failed to write %s: %m", sink.path);
        }
        return r;
}

/* --- log ---------------------------------------------------------------------------------------- */

/* One a{sv} entry's value as JSON: basic types become strings, numbers and booleans (returns 1); anything
 * else (arrays, structs, fds) is skipped (returns 0, *ret NULL), so the logger may grow without breaking
 * us. */
static int read_variant_json(sd_bus_message *m, json_object **ret) {
        const char *contents;
        union {
                const char *s;
                int b;
                uint8_t y;
                int16_t n;
                uint16_t q;
                int32_t i;
                uint32_t u;
                int64_t x;
                uint64_t t;
                double d;
        } v;
        json_object *j;
        int r;

        r = sd_bus_message_peek_type(m, NULL, &contents);
        if (r < 0)
                return r;
        if (strlen(contents) != 1 || !strchr("sogbynqiuxtd", contents[0])) {
                r = sd_bus_message_skip(m, "v");
                if (r < 0)
                        return r;
                *ret = NULL;
                return 0;
        }

        r = sd_bus_message_enter_container(m, 'v', contents);
        if (r < 0)
                return r;
        r = sd_bus_message_read_basic(m, contents[0], &v);
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(m);
        if (r < 0)
                return r;

        switch (contents[0]) {
        case 's':
        case 'o':
        case 'g':
                j = json_object_new_string(v.s);
                break;
        case 'b':
                j = json_object_new_boolean(v.b);
                break;
        case 'y':
                j = json_object_new_int64(v.y);
                break;
        case 'n':
                j = json_object_new_int64(v.n);
                break;
        case 'q':
                j = json_object_new_int64(v.q);
                break;
        case 'i':
                j = json_object_new_int64(v.i);
                break;
        case 'u':
                j = json_object_new_int64(v.u);
                break;
        case 'x':
                j = json_object_new_int64(v.x);
                break;
        case 't':
                j = json_object_new_uint64(v.t);
                break;
        default:
                j = json_object_new_double(v.d);
        }
        if (!j)
                return -ENOMEM;

        *ret = j;
        return 1;
}

/* Reads one a{sv} row into a JSON object (log_row_to_json() form). Returns 1, or 0 at the end of the
 * enclosing array. */
static int read_log_row(sd_bus_message *m, json_object **ret) {
        _cleanup_json_ json_object *raw = NULL;
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r <= 0)
                return r;

        raw = json_object_new_object();
        if (!raw)
                return -ENOMEM;

        for (;;) {
                json_object *v = NULL;
                const char *key;

                r = sd_bus_message_enter_container(m, 'e', "sv");
                if (r < 0)
                        return r;
                if (r == 0)
                        break;

                r = sd_bus_message_read(m, "s", &key);
                if (r < 0)
                        return r;
                r = read_variant_json(m, &v);
                if (r < 0)
                        return r;
                if (v && json_object_object_add(raw, key, v) < 0) {
                        json_object_put(v);
                        return -ENOMEM;
                }

                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }

        r = sd_bus_message_exit_container(m);
        if (r < 0)
                return r;

        *ret = log_row_to_json(raw);
        return *ret ? 1 : -ENOMEM;
}

static int append_log_filter(sd_bus_message *m, const LogFilter *f, uint64_t max_id) {
        int r;

        r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        if (f->session_id && (r = append_dict_string(m, "session_id", f->session_id)) < 0)
                return r;
        if (f->account_id && (r = append_dict_string(m, "account_id", f->account_id)) < 0)
                return r;
        if (f->operation && (r = append_dict_string(m, "operation", f->operation)) < 0)
                return r;
        if (f->source && (r = append_dict_string(m, "source", f->source)) < 0)
                return r;
        if (f->event && (r = append_dict_string(m, "event", f->event)) < 0)
                return r;
        if (f->since > 0 && (r = append_dict_uint64(m, "since", f->since)) < 0)
                return r;
        if (f->until > 0 && (r = append_dict_uint64(m, "until", f->until)) < 0)
                return r;
        if (max_id > 0 && (r = append_dict_uint64(m, "max_id", max_id)) < 0)
                return r;
        return sd_bus_message_close_container(m);
}

/* The newest `limit` rows matching the filter, newest first, appended to rows. Pages beyond the logger's
 * cap continue below the lowest id seen (max_id), so rows arriving meanwhile neither shift nor repeat
 * them. */
static int fetch_log(sd_bus *bus, const LogFilter *f, uint64_t limit, json_object *rows) {
        uint64_t collected = 0, lowest = 0;
        int r;

        while (collected < limit) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
                uint64_t want = MIN(limit - collected, LOG_PAGE_MAX), got = 0, fresh = 0;

                r = sd_bus_message_new_method_call(bus, &m, AUDITD_BUS_NAME, AUDITD_BUS_PATH,
                                                   AUDITD_LOG_INTERFACE, "GetLog");
                if (r >= 0)
                        r = append_log_filter(m, f, lowest > 0 ? lowest - 1 : 0);
                if (r >= 0)
                        r = sd_bus_message_append(m, "tt", want, UINT64_C(0));
                if (r < 0)
                        return log_error(r, "log", "Failed to build the call: %s", strerror(-r));

                r = sd_bus_call(bus, m, 0, &error, &reply);
                if (r < 0)
                        return log_audit_bus_error("log", &error, r);

                r = sd_bus_message_enter_container(reply, 'a', "a{sv}");
                if (r < 0)
                        goto parse_error;
                for (;;) {
                        json_object *row = NULL;
                        uint64_t id;

                        r = read_log_row(reply, &row);
                        if (r < 0)
                                goto parse_error;
                        if (r == 0)
                                break;
                        got++;

                        /* A logger that ignored max_id would hand us the same page again. */
                        id = log_row_id(row);
                        if (lowest > 0 && id >= lowest) {
                                json_object_put(row);
                                continue;
                        }
                        if (json_object_array_add(rows, row) < 0) {
                                json_object_put(row);
                                return log_error(-ENOMEM, "log", "Out of memory");
                        }
                        fresh++;
                        collected++;
                        if (id > 0 && (lowest == 0 || id < lowest))
                                lowest = id;
                }
                r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        goto parse_error;

                if (got < want || fresh == 0 || lowest <= 1)
                        break;
        }

        return 0;

parse_error:
        return log_error(r, "log", "Failed to parse reply: %s", strerror(-r));
}

/* A sandbox name cannot be resolved by the logger, which stores ids: ask sandboxd. A sandbox that is gone
 * (or a sandboxd that is not there) leaves the argument as it is: refused calls are logged under the
 * reference the caller gave. */
static int resolve_session_id(sd_bus *bus, const char *arg, char **ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ char *id = NULL;
        const char *path;

        if (!sandbox_id_is_valid(arg) &&
            sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                               "GetSandbox", &error, &reply, "s", arg) >= 0 &&
            sd_bus_message_read(reply, "o", &path) >= 0) {
                sd_bus_error_free(&error);
                if (sd_bus_get_property_string(bus, SANDBOXD_BUS_NAME, path, SANDBOXD_SANDBOX_INTERFACE,
                                               "Id", &error, &id) < 0)
                        id = NULL;
        }

        if (isempty(id)) {
                free(id);
                id = strdup(arg);
                if (!id)
                        return -ENOMEM;
        }

        *ret = TAKE_PTR(id);
        return 0;
}

typedef struct LogPrinter {
        size_t width[_LOG_COLUMN_MAX];
        uint64_t last_id; /* the highest id printed, so a row is never printed twice */
        const LogFilter *filter;
} LogPrinter;

/* Column widths for the page's rows; when following, at least what typical later rows need, so they
 * mostly line up with the header. */
static int log_printer_measure(LogPrinter *p, json_object *rows, bool follow) {
        static const size_t follow_min[_LOG_COLUMN_MAX] = {
                [LOG_COLUMN_TIME] = 19,   [LOG_COLUMN_ID] = 6,     [LOG_COLUMN_SANDBOX] = SANDBOX_ID_LEN,
                [LOG_COLUMN_ACCOUNT] = 8, [LOG_COLUMN_SOURCE] = 6, [LOG_COLUMN_OPERATION] = 14,
                [LOG_COLUMN_EVENT] = 10,  [LOG_COLUMN_EXIT] = 4,   [LOG_COLUMN_DURATION] = 8,
        };
        size_t n = json_object_array_length(rows);

        for (size_t c = 0; c < _LOG_COLUMN_MAX; c++)
                p->width[c] = MAX(strlen(log_column_header[c]), follow ? follow_min[c] : 0);

        for (size_t i = 0; i < n; i++) {
                char *cells[_LOG_COLUMN_MAX];
                int r;

                r = log_row_cells(json_object_array_get_idx(rows, i), cells);
                if (r < 0)
                        return r;
                for (size_t c = 0; c < _LOG_COLUMN_MAX; c++)
                        p->width[c] = MAX(p->width[c], strlen(cells[c]));
                log_cells_free(cells);
        }
        return 0;
}

static void log_printer_line(const LogPrinter *p, const char *const cells[_LOG_COLUMN_MAX]) {
        /* The last column is not padded: no trailing blanks. */
        for (size_t c = 0; c < _LOG_COLUMN_MAX; c++) {
                bool last = c == _LOG_COLUMN_MAX - 1;
                int w = last ? 0 : (int) p->width[c];

                if (last && isempty(cells[c]))
                        break; /* and no separator either */
                printf(log_column_right[c] ? "%s%*s" : "%s%-*s", c > 0 ? " " : "", w, cells[c]);
        }
        putchar('\n');
}

static int log_print_row(LogPrinter *p, json_object *row) {
        uint64_t id = log_row_id(row);
        int r;

        if (arg_json != JSON_OFF) {
                r = print_json(row);
                if (r < 0)
                        return r;
        } else {
                char *cells[_LOG_COLUMN_MAX];

                r = log_row_cells(row, cells);
                if (r < 0)
                        return r;
                log_printer_line(p, (const char *const *) cells);
                log_cells_free(cells);
        }

        p->last_id = MAX(p->last_id, id);
        return 0;
}

static int on_entry_added(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        LogPrinter *p = userdata;
        _cleanup_json_ json_object *row = NULL;
        const char *session_id;
        uint64_t id;
        int r;

        r = sd_bus_message_read(m, "ts", &id, &session_id);
        if (r >= 0)
                r = read_log_row(m, &row);
        if (r <= 0) {
                /* One malformed signal must not end the watch. */
                log_error(r < 0 ? r : -EBADMSG, "log", "Ignoring a malformed EntryAdded signal: %s",
                          strerror(r < 0 ? -r : EBADMSG));
                return 0;
        }

        /* Already printed from the initial page (the match was added before GetLog). */
        if (id <= p->last_id)
                return 0;

        /* The signal's arguments are authoritative for what they carry. */
        if (log_row_id(row) != id)
                json_object_object_add(row, "id", json_object_new_uint64(id));
        if (!json_object_object_get_ex(row, "session_id", NULL))
                json_object_object_add(row, "session_id", json_object_new_string(session_id));

        if (!log_row_matches(row, p->filter))
                return 0;

        r = log_print_row(p, row);
        if (r < 0)
                return sd_event_exit(sd_bus_get_event(sd_bus_message_get_bus(m)), r);
        if (fflush(stdout) != 0)
                return sd_event_exit(sd_bus_get_event(sd_bus_message_get_bus(m)), -errno);
        return 0;
}

/* Returned by the event loop when sd-bus saw the connection close (sd_bus_set_exit_on_disconnect()). */
#define LOG_EXIT_DISCONNECTED 1

static int log_output(sd_bus *bus) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const void *out = NULL, *err = NULL;
        size_t out_size = 0, err_size = 0;
        int r;

        r = sd_bus_call_method(bus, AUDITD_BUS_NAME, AUDITD_BUS_PATH, AUDITD_LOG_INTERFACE, "GetOutput",
                               &error, &reply, "t", arg_output);
        if (r < 0)
                return log_audit_bus_error("log", &error, r);

        r = sd_bus_message_read_array(reply, 'y', &out, &out_size);
        if (r >= 0)
                r = sd_bus_message_read_array(reply, 'y', &err, &err_size);
        if (r < 0)
                return log_error(r, "log", "Failed to parse reply: %s", strerror(-r));

        fflush(stdout);
        r = loop_write(STDOUT_FILENO, out, out_size);
        if (r < 0)
                return log_error(r, "log", "Failed to write stdout: %s", strerror(-r));
        r = loop_write(STDERR_FILENO, err, err_size);
        if (r < 0)
                return log_error(r, "log", "Failed to write stderr: %s", strerror(-r));
        return 0;
}

/* log --verify: VerifyLog walks the hash chain, then the journal's checkpoints are compared with the rows
 * they name (a chain rewritten whole still disagrees with them); prints the outcome, EXIT_CHAIN_BROKEN if
 * either finds the log changed. */
static int log_verify(sd_bus *bus) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = NULL, *reply = NULL;
        _cleanup_json_ json_object *o = json_object_new_object();
        const char *key, *type;
        int r;

        if (!o)
                return log_error(-ENOMEM, "log", "Out of memory");
        r = sd_bus_message_new_method_call(bus, &call, AUDITD_BUS_NAME, AUDITD_BUS_PATH,
                                           AUDITD_LOG_INTERFACE, "VerifyLog");
        if (r >= 0)
                r = sd_bus_message_append(call, "a{sv}", 0);
        if (r < 0)
                return log_error(r, "log", "Failed to build the call: %s", strerror(-r));
        /* the walk reads every row: a large log takes minutes, not the bus's default 25 s */
        r = sd_bus_call(bus, call, UINT64_C(24) * 3600 * 1000000, &error, &reply);
        if (r < 0)
                return log_audit_bus_error("log", &error, r);

        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                json_object *v = NULL;
                const char *str;
                uint64_t u;
                int b;

                r = sd_bus_message_read(reply, "s", &key);
                if (r >= 0)
                        r = sd_bus_message_peek_type(reply, NULL, &type);
                if (r < 0)
                        break;
                if (streq(type, "b") && (r = sd_bus_message_read(reply, "v", "b", &b)) >= 0)
                        v = json_object_new_boolean(b);
                else if (streq(type, "t") && (r = sd_bus_message_read(reply, "v", "t", &u)) >= 0)
                        v = json_object_new_uint64(u);
                else if (streq(type, "s") && (r = sd_bus_message_read(reply, "v", "s", &str)) >= 0)
                        v = json_object_new_string(str);
                else if (r >= 0)
                        r = sd_bus_message_skip(reply, "v");
                if (r >= 0 && v && json_object_object_add(o, key, v) < 0)
                        r = -ENOMEM;
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r < 0)
                return log_error(r, "log", "Failed to parse reply: %s", strerror(-r));

        json_object *verified = json_object_object_get(o, "verified");
        bool ok = verified && json_object_get_boolean(verified);

        /* The checkpoints: only where the chain holds (else it has said where it breaks already). */
        _cleanup_free_ char *journal_note = NULL;
        struct passwd *pw = getpwnam("sandbox-audit");
        AuditCheckpointCheck cc = {};
        if (ok && pw) {
                _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
                char when[RFC3339_USEC_MAX] = "";
                uint64_t anchor = json_object_get_uint64(json_object_object_get(o, "anchor_id"));

                r = audit_checkpoints_check(bus, pw->pw_uid, anchor, &cc, &e);
                if (r < 0)
                        r = asprintf(&journal_note, "Journal: checkpoints not compared: %s",
                                     e.message ?: strerror(-r));
                else if (cc.broken) {
                        (void) format_rfc3339_usec(cc.bad.realtime_usec, when);
                        ok = false;
                        if (cc.row_missing)
                                r = asprintf(&journal_note,
                                             "The journal's checkpoint of row %" PRIu64 " (%s) names a row "
                                             "that is not in the log: rows were removed and the chain "
                                             "rewritten.",
                                             cc.bad.row, when);
                        else
                                r = asprintf(&journal_note,
                                             "The journal's checkpoint of row %" PRIu64 " (%s) has hash "
                                             "%s, the log has %s: the chain was rewritten after it.",
                                             cc.bad.row, when, cc.bad.hash, cc.log_hash);
                        if (r >= 0) {
                                json_object_object_add(o, "verified", json_object_new_boolean(false));
                                json_object_object_add(o, "reason", json_object_new_string("checkpoint"));
                                json_object_object_add(o, "message", json_object_new_string(journal_note));
                                json_object_object_add(o, "bad_id", json_object_new_uint64(cc.bad.row));
                        }
                } else if (cc.agreed > 0)
                        r = asprintf(&journal_note,
                                     "Journal: %u checkpoints agree with the log (the newest at row %" PRIu64
                                     ")%s.",
                                     cc.agreed, cc.newest_row,
                                     cc.removed > 0 ? ", older ones name rows retention removed" : "");
                else
                        r = asprintf(&journal_note,
                                     "Journal: no checkpoint to compare (none yet, or reading the system "
                                     "journal needs root or the systemd-journal group).");
                if (r < 0)
                        return log_error(-ENOMEM, "log", "Out of memory");
                json_object_object_add(o, "journal_checkpoints", json_object_new_uint64(cc.agreed));
        }

        if (arg_json != JSON_OFF)
                r = print_json(o);
        else {
                const char *last_hash = json_object_get_string(json_object_object_get(o, "last_hash"));
                printf("%s %s\n", ok ? "Verified:" : "BROKEN:",
                       strna(json_object_get_string(json_object_object_get(o, "message"))));
                if (!isempty(last_hash))
                        printf("Last verified row %s: %s\n",
                               strna(json_object_get_string(json_object_object_get(o, "last_id"))),
                               last_hash);
                if (journal_note && !cc.broken)
                        printf("%s\n", journal_note);
        }
        if (r < 0)
                return log_error(r, "log", "Out of memory");
        return ok ? 0 : EXIT_CHAIN_BROKEN;
}

static int verb_log(char **args, size_t n_args) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_slot_unrefp) sd_bus_slot *slot = NULL;
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_json_ json_object *rows = NULL;
        _cleanup_free_ char *session_id = NULL;
        LogFilter filter = arg_filter;
        LogPrinter printer = { .filter = &filter };
        size_t n;
        int r;

        if (arg_output > 0 &&
            (n_args > 1 || arg_follow || arg_filter.operation || arg_filter.event || arg_filter.account_id ||
             arg_filter.source || arg_filter.since || arg_filter.until))
                return fail_usage(NULL,
                                  "log: --output=ROW shows one row's output; it takes no SANDBOX, --follow "
                                  "or filters");

        if (arg_verify &&
            (arg_output > 0 || n_args > 1 || arg_follow || arg_export || arg_filter.operation ||
             arg_filter.event || arg_filter.account_id || arg_filter.source || arg_filter.since ||
             arg_filter.until))
                return fail_usage(NULL, "log: --verify checks the whole log; it takes no SANDBOX, --output, "
                                        "--export, --follow or filters");
        if (arg_export &&
            (arg_output > 0 || arg_filter.operation || arg_filter.event || arg_filter.account_id ||
             arg_filter.source || arg_filter.since || arg_filter.until || arg_json != JSON_OFF))
                return fail_usage(NULL,
                                  "log: --export=DIR takes only SANDBOX and --follow (it exports every row "
                                  "of the log, or of SANDBOX, as JSON lines)");

        r = acquire_bus("log", &bus);
        if (r < 0)
                return r;

        if (arg_verify)
                return log_verify(bus);
        if (arg_output > 0)
                return log_output(bus);

        if (arg_export) {
                if (n_args > 1) {
                        r = resolve_session_id(bus, args[1], &session_id);
                        if (r < 0)
                                return log_error(r, "log", "Out of memory");
                }
                return log_export(bus, arg_export, session_id, arg_follow, arg_quiet);
        }

        if (n_args > 1) {
                r = resolve_session_id(bus, args[1], &session_id);
                if (r < 0)
                        return log_error(r, "log", "Out of memory");
                filter.session_id = session_id;
        }

        if (arg_follow) {
                /* Subscribe before asking for the page: a row stored in between then arrives as a signal
                 * and is not lost; one in both is printed once, by id. */
                r = follow_log_entries(bus, on_entry_added, &printer, &slot, &event);
                if (r < 0)
                        return log_error(r, "log",
                                         "Failed to follow the audit log (EntryAdded, event loop): %s",
                                         strerror(-r));
        }

        rows = json_object_new_array();
        if (!rows)
                return log_error(-ENOMEM, "log", "Out of memory");

        if (arg_limit > 0) {
                r = fetch_log(bus, &filter, arg_limit, rows);
                if (r < 0)
                        return r;
        } else {
                /* No rows asked for, but say now (not by silence) if the log cannot be read. */
                r = fetch_log(bus, &filter, 1, rows);
                if (r < 0)
                        return r;
                json_object_put(rows);
                rows = json_object_new_array();
                if (!rows)
                        return log_error(-ENOMEM, "log", "Out of memory");
        }

        n = json_object_array_length(rows);
        if (arg_json == JSON_OFF) {
                r = log_printer_measure(&printer, rows, arg_follow);
                if (r < 0)
                        return log_error(r, "log", "Out of memory");
                if (arg_legend && (arg_limit > 0 || arg_follow))
                        log_printer_line(&printer, log_column_header);
        }

        /* Newest at the bottom, like journalctl. */
        for (size_t i = n; i > 0; i--) {
                r = log_print_row(&printer, json_object_array_get_idx(rows, i - 1));
                if (r < 0)
                        return log_error(r, "log", "Out of memory");
        }

        if (n == 0 && arg_limit > 0 && !arg_follow && arg_legend && arg_json == JSON_OFF)
                puts("-- No entries --");

        if (!arg_follow)
                return 0;

        if (fflush(stdout) != 0)
                return log_error(-errno, "log", "Failed to write output: %m");

        r = sd_event_loop(event);
        if (r == LOG_EXIT_DISCONNECTED)
                return log_error(-ECONNRESET, "log", "Lost the connection to the bus");
        if (r < 0)
                return log_error(r, "log", "%s", strerror(-r));
        return 0;
}

/* --- command line -------------------------------------------------------------------------------- */

static int help(void) {
        printf("sandboxctl [OPTIONS...] COMMAND ...\n"
               "\n"
               "Create, inspect and use sandboxd's disposable sandboxes.\n"
               "\n"
               "Sandbox Commands:\n"
               "  list                        List sandboxes (the default command)\n"
               "  status ID...                Show the properties of one or more sandboxes\n"
               "  create [--name=NAME] [--type=TYPE] [--ttl=SECONDS] [--network=none|egress|host]\n"
               "         [--allow=ENTRY...] [--deny=ENTRY...] [--egress-default=deny|allow]\n"
               "         [--image=NAME|host]  Create a sandbox and print its id (--image: its root is\n"
               "                              that image of sandboxctl image list, not the host's)\n"
               "         [--from-snapshot=SNAPSHOT]   (--from-snapshot: its disk a copy of that\n"
               "                              snapshot's, a fork)\n"
               "  snapshot ID|list|remove     Snapshots of sandboxes' disks (see snapshot --help)\n"
               "  delete ID...                Delete one or more sandboxes\n"
               "  set-ttl ID SECONDS          Let a sandbox expire SECONDS from now\n"
               "  pause ID...                 Freeze every process of sandboxes; their TTL stops\n"
               "  resume ID...                Let paused sandboxes run again\n"
               "  network ID                  Show a sandbox's network: address, egress policy and\n"
               "                              counters\n"
               "  network ID [--allow=ENTRY...] [--deny=ENTRY...] [--egress-default=deny|allow]\n"
               "                              Replace a running egress sandbox's policy with exactly\n"
               "                              these (entries not given again are removed); open\n"
               "                              connections it no longer allows are cut\n"
               "\n"
               "Command and File Commands:\n"
               "  exec ID [EXEC OPTIONS...] [--] CMD [ARGS...]\n"
               "                              Run a command in a sandbox; options for sandboxctl\n"
               "                              must come before CMD. Ctrl-C cancels the command\n"
               "  write ID PATH               Write stdin to a file in a sandbox\n"
               "  cat ID PATH                 Write a sandbox's file to stdout\n"
               "  cp SRC DST                  Copy a file into (LOCAL ID:PATH) or out of\n"
               "                              (ID:PATH LOCAL) a sandbox; LOCAL may be '-'\n"
               "  shell [-q] [--term=TERM] ID Open an interactive login shell in a sandbox (recorded;\n"
               "                              see sandboxctl shell --help)\n"
               "\n"
               "Background Process Commands (sandboxctl COMMAND --help for their options):\n"
               "  start ID [OPTIONS...] [--] CMD [ARGS...]\n"
               "                              Start a command in the background; print its id\n"
               "  ps ID                       List a sandbox's background processes\n"
               "  kill ID PROCESS             Signal one (--signal=SIGNAL, default TERM)\n"
               "  attach ID PROCESS           Print its output so far and follow it to its end\n"
               "\n"
               "File Tool Commands (sandboxctl COMMAND --help for their options):\n"
               "  file-create ID PATH         Create a file from stdin (--overwrite, --mkdir, --mode)\n"
               "  view ID PATH                Print a file with line numbers (--range=A:B), or a\n"
               "                              directory two levels deep\n"
               "  str-replace ID PATH OLD NEW Replace OLD, which must occur exactly once, with NEW\n"
               "  insert ID PATH LINE TEXT    Insert TEXT as lines after line LINE (0: at the top)\n"
               "  ls ID [PATH]                List a directory: type, mode, size, mtime, name\n"
               "  glob ID PATTERN             Sorted paths matching PATTERN (*, ?, [...], **)\n"
               "  grep ID PATTERN [PATH]      Lines matching a PCRE2 regex, as FILE:LINE:TEXT\n"
               "\n"
               "Agent Commands:\n"
               "  mcp [--sandbox=ID|--type=TYPE] [--keep]\n"
               "                              Serve the MCP tools (exec, files, file tools, log) on\n"
               "                              stdin/stdout for an agent; one sandbox per session,\n"
               "                              deleted at the end unless --keep (sandboxctl mcp --help)\n"
               "\n"
               "Audit Log Commands:\n"
               "  log [SANDBOX]               Show the audit log, of one sandbox (id or name) or of\n"
               "                              all; newest last\n"
               "  log --output=ROW            Write a row's captured stdout and stderr (for a\n"
               "                              takeover row: the session's asciicast v2 recording)\n"
               "  log --verify                Check the log's hash chain and the journal's\n"
               "                              checkpoints of it (exit status 3 if a row was\n"
               "                              edited, removed or moved, or the chain rewritten)\n"
               "  log --export=DIR [--follow] [SANDBOX]\n"
               "                              Append the log (or SANDBOX's) to DIR/audit.jsonl as\n"
               "                              run-session events, each run's output and metadata\n"
               "                              in DIR/run-ROW/; resumes where the last export ended\n"
               "\n"
               "Options:\n"
               "  -h --help                   Show this help\n"
               "     --version                Show package version\n"
               "     --no-legend              Do not show the headers and footers\n"
               "     --no-pager               Accepted for compatibility; sandboxctl never pages\n"
               "     --json[=MODE]            Output list, status, network and log as JSON: short\n"
               "                              (the default for a bare --json), pretty, off\n"
               "  -H --host=[USER@]HOST       Operate on a remote host, over ssh\n"
               "  -q --quiet                  Suppress informational messages\n"
               "\n"
               "Create Options:\n"
               "     --name=NAME              Name of the new sandbox\n"
               "     --type=TYPE              Size preset: small, medium, large\n"
               "     --ttl=SECONDS            Expire after this long (\"3600\", \"90min\", \"2h\")\n"
               "     --network=MODE           none (no network), egress (the type's egress policy) or host\n"
               "                              (the host's network, if sandboxd.conf allows it)\n"
               "\n"
               "Egress Policy Options (create, network):\n"
               "     --allow=ENTRY            Allow a name (pypi.org), a wildcard (*.pythonhosted.org)\n"
               "                              or a CIDR (203.0.113.0/24); may be repeated\n"
               "     --deny=ENTRY             Deny one; may be repeated; a deny beats an allow\n"
               "     --egress-default=deny|allow\n"
               "                              What neither list names (default: deny)\n"
               "                              With create they give the sandbox this policy instead of\n"
               "                              its type's, and imply --network=egress (another\n"
               "                              --network is refused)\n"
               "\n"
               "Exec Options:\n"
               "     --cwd=DIR                Working directory inside the sandbox\n"
               "     --env=KEY=VALUE          Set an environment variable (may be repeated)\n"
               "     --timeout=SECONDS        Kill the command after this long (exit status 124)\n"
               "     --memory-max=BYTES       Memory limit for the command (K, M, G, T suffixes)\n"
               "     --tasks-max=N            Limit on the command's processes and threads\n"
               "     --stdin-file=FILE        Feed FILE to the command's stdin\n"
               "  -i --stdin                  Feed sandboxctl's own stdin to the command's stdin\n"
               "     --capture                Print the output when the command is done, instead of\n"
               "                              streaming it\n"
               "\n"
               "File Options (write, cp):\n"
               "     --mode=MODE              Octal mode of a created file (cp: the source's mode)\n"
               "     --mkdir                  Create missing parent directories\n"
               "     --append                 Append to the file instead of replacing it\n"
               "\n"
               "Log Options:\n"
               "  -f --follow                 After the last rows, print new ones as they arrive\n"
               "  -n --limit=N                Show the newest N rows (default 50; 0: none)\n"
               "     --operation=OP           Only rows of this operation (exec, write, ...)\n"
               "     --event=EVENT            Only rows with this event (finished, failed, ...)\n"
               "     --account=ACCOUNT        Only rows of this account id\n"
               "     --source=SOURCE          Only rows from this source (agent, human_takeover,\n"
               "                              system)\n"
               "     --since=TIME             Only rows started at or after TIME (RFC 3339)\n"
               "     --until=TIME             Only rows started before TIME (RFC 3339)\n"
               "     --output=ROW             Write row ROW's captured output, stdout to stdout\n"
               "                              and stderr to stderr\n"
               "     --export=DIR             Append the log (or SANDBOX's) to DIR/audit.jsonl, one\n"
               "                              event a line, and each run's stdout.txt, stderr.txt\n"
               "                              and metadata.json to DIR/run-ROW/ (docs/audit-api.md);\n"
               "                              a second export adds only new rows; --follow keeps\n"
               "                              it current until SIGINT or SIGTERM\n"
               "\n"
               "Names, paths, log rows and messages that a sandbox or client chose are printed\n"
               "with controls, format characters (U+202E, ...), bad UTF-8 and '\\' escaped\n"
               "(\\x1b, \\u202e, \\xff, \\\\); --json keeps them raw. exec, cat and view print\n"
               "the program's output and the file's text as they are.\n"
               "\n"
               "Exit status: 0 on success, 1 on failure, 2 on bad usage. exec exits with the\n"
               "command's own status, 124 if it timed out, 128+N if a signal N killed it (137 on\n"
               "an out-of-memory kill), and 125 if sandboxctl or sandboxd could not run it.\n"
               "\n"
               "See docs/sandboxctl.md for details.\n");
        return 0;
}

enum {
        ARG_VERSION = 0x100,
        ARG_NO_LEGEND,
        ARG_NO_PAGER,
        ARG_JSON,
        ARG_NAME,
        ARG_TYPE,
        ARG_TTL,
        ARG_NETWORK,
        ARG_IMAGE,
        ARG_ALLOW,
        ARG_DENY,
        ARG_EGRESS_DEFAULT,
        ARG_FROM_SNAPSHOT,
        ARG_CWD,
        ARG_ENV,
        ARG_TIMEOUT,
        ARG_MEMORY_MAX,
        ARG_TASKS_MAX,
        ARG_STDIN_FILE,
        ARG_CAPTURE,
        ARG_MODE,
        ARG_MKDIR,
        ARG_APPEND,
        ARG_OPERATION,
        ARG_EVENT,
        ARG_ACCOUNT,
        ARG_SOURCE,
        ARG_SINCE,
        ARG_UNTIL,
        ARG_OUTPUT,
        ARG_VERIFY,
        ARG_EXPORT,
};

static int add_env(const char *assignment) {
        int r = env_list_add(&arg_env, &arg_n_env, assignment);

        if (r == -ENOMEM)
                return log_error(r, "exec", "Out of memory");
        if (r < 0)
                return fail_usage(NULL, "--env: expected KEY=VALUE, got '%s'", assignment);
        return 0;
}

static int set_filter_string(const char **dst, const char *option, const char *value) {
        if (isempty(value))
                return fail_usage(NULL, "--%s: empty value", option);
        *dst = value;
        return 0;
}

/* Returns 1 to go on with args (the verb and its arguments, in order), 0 after --help/--version,
 * EXIT_USAGE (printed) for bad usage, or a negative errno. */
static int parse_argv(int argc, char *argv[], char ***ret_args, size_t *ret_n_args) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "no-legend", no_argument, NULL, ARG_NO_LEGEND },
                { "no-pager", no_argument, NULL, ARG_NO_PAGER },
                { "json", optional_argument, NULL, ARG_JSON },
                { "host", required_argument, NULL, 'H' },
                { "quiet", no_argument, NULL, 'q' },
                { "name", required_argument, NULL, ARG_NAME },
                { "type", required_argument, NULL, ARG_TYPE },
                { "ttl", required_argument, NULL, ARG_TTL },
                { "network", required_argument, NULL, ARG_NETWORK },
                { "image", required_argument, NULL, ARG_IMAGE },
                { "allow", required_argument, NULL, ARG_ALLOW },
                { "deny", required_argument, NULL, ARG_DENY },
                { "egress-default", required_argument, NULL, ARG_EGRESS_DEFAULT },
                { "from-snapshot", required_argument, NULL, ARG_FROM_SNAPSHOT },
                { "cwd", required_argument, NULL, ARG_CWD },
                { "env", required_argument, NULL, ARG_ENV },
                { "timeout", required_argument, NULL, ARG_TIMEOUT },
                { "memory-max", required_argument, NULL, ARG_MEMORY_MAX },
                { "tasks-max", required_argument, NULL, ARG_TASKS_MAX },
                { "stdin-file", required_argument, NULL, ARG_STDIN_FILE },
                { "stdin", no_argument, NULL, 'i' },
                { "capture", no_argument, NULL, ARG_CAPTURE },
                { "mode", required_argument, NULL, ARG_MODE },
                { "mkdir", no_argument, NULL, ARG_MKDIR },
                { "append", no_argument, NULL, ARG_APPEND },
                { "follow", no_argument, NULL, 'f' },
                { "limit", required_argument, NULL, 'n' },
                { "operation", required_argument, NULL, ARG_OPERATION },
                { "event", required_argument, NULL, ARG_EVENT },
                { "account", required_argument, NULL, ARG_ACCOUNT },
                { "source", required_argument, NULL, ARG_SOURCE },
                { "since", required_argument, NULL, ARG_SINCE },
                { "until", required_argument, NULL, ARG_UNTIL },
                { "output", required_argument, NULL, ARG_OUTPUT },
                { "verify", no_argument, NULL, ARG_VERIFY },
                { "export", required_argument, NULL, ARG_EXPORT },
                {}
        };
        _cleanup_free_ char **args = NULL;
        size_t n_args = 0;
        int c, r;

        args = calloc((size_t) argc + 1, sizeof(char *));
        if (!args)
                return -ENOMEM;

        /* getopt_long() prefixes its messages with argv[0]; make them read like all of ours. */
        argv[0] = (char *) "sandboxctl";

        /* The leading '-' makes getopt_long() return positional arguments in order (as 1) instead of
         * permuting them. That lets "exec" stop at its command, like machinectl's "shell": everything
         * from CMD on belongs to the command, even without "--". */
        while ((c = getopt_long(argc, argv, "-hH:qifn:", options, NULL)) >= 0) {
                switch (c) {

                case 1:
                        if (n_args >= 2 && streq(args[0], "exec")) {
                                optind--;
                                goto done;
                        }
                        args[n_args++] = optarg;
                        break;

                case 'h':
                        return help();

                case ARG_VERSION:
                        puts("sandboxctl " PACKAGE_VERSION);
                        return 0;

                case ARG_NO_LEGEND:
                        arg_legend = false;
                        break;

                case ARG_NO_PAGER:
                        break;

                case ARG_JSON:
                        /* A bare --json means short. "--json MODE", which worked while MODE was required,
                         * still does: take the next word if it is a mode. */
                        if (!optarg && optind < argc &&
                            (streq(argv[optind], "short") || streq(argv[optind], "pretty") ||
                             streq(argv[optind], "off") || streq(argv[optind], "help")))
                                optarg = argv[optind++];
                        if (!optarg)
                                arg_json = JSON_SHORT;
                        else if (streq(optarg, "short"))
                                arg_json = JSON_SHORT;
                        else if (streq(optarg, "pretty"))
                                arg_json = JSON_PRETTY;
                        else if (streq(optarg, "off"))
                                arg_json = JSON_OFF;
                        else if (streq(optarg, "help")) {
                                puts("short\npretty\noff");
                                return 0;
                        } else
                                return fail_usage(NULL, "--json: expected short, pretty or off, got '%s'",
                                                  optarg);
                        break;

                case 'H':
                        arg_host = optarg;
                        break;

                case 'q':
                        arg_quiet = true;
                        break;

                case ARG_NAME:
                        if (!name_is_valid(optarg))
                                return fail_usage(NULL,
                                                  "--name: invalid name '%s' (1..%d characters of "
                                                  "A-Z a-z 0-9 . _ -, not starting with . or -)",
                                                  optarg, SANDBOX_NAME_MAX);
                        arg_name = optarg;
                        break;

                case ARG_TYPE:
                        if (!name_is_valid(optarg))
                                return fail_usage(NULL, "--type: invalid type '%s'", optarg);
                        arg_type = optarg;
                        break;

                case ARG_TTL:
                        if (parse_seconds(optarg, &arg_ttl) < 0)
                                return fail_usage(NULL, "--ttl: invalid number of seconds '%s'", optarg);
                        arg_ttl_set = true;
                        break;

                case ARG_FROM_SNAPSHOT:
                        if (isempty(optarg))
                                return fail_usage(NULL, "--from-snapshot: empty snapshot id or name");
                        arg_from_snapshot = optarg;
                        break;

                case ARG_NETWORK:
                        if (!streq(optarg, "host") && !streq(optarg, "none") && !streq(optarg, "egress"))
                                return fail_usage(NULL, "--network: expected none, egress or host, got '%s'",
                                                  optarg);
                        arg_network = optarg;
                        break;

                case ARG_IMAGE:
                        arg_image = optarg;
                        break;

                case ARG_ALLOW:
                case ARG_DENY:
                        if (isempty(optarg))
                                return fail_usage(NULL, "--%s: empty entry",
                                                  c == ARG_ALLOW ? "allow" : "deny");
                        r = c == ARG_ALLOW ? add_policy_entry(&arg_allow, &arg_n_allow, optarg)
                                           : add_policy_entry(&arg_deny, &arg_n_deny, optarg);
                        if (r < 0)
                                return r;
                        break;

                case ARG_EGRESS_DEFAULT:
                        if (!streq(optarg, "deny") && !streq(optarg, "allow"))
                                return fail_usage(NULL, "--egress-default: expected deny or allow, got '%s'",
                                                  optarg);
                        arg_egress_default = optarg;
                        break;

                case ARG_CWD:
                        if (isempty(optarg))
                                return fail_usage(NULL, "--cwd: empty directory");
                        arg_cwd = optarg;
                        break;

                case ARG_ENV:
                        r = add_env(optarg);
                        if (r != 0)
                                return r;
                        break;

                case ARG_TIMEOUT:
                        r = parse_seconds(optarg, &arg_timeout);
                        if (r < 0 || arg_timeout == 0 ||
                            arg_timeout > (UINT64_MAX - EXEC_CALL_SLACK_USEC) / USEC_PER_SEC)
                                return fail_usage(NULL, "--timeout: invalid number of seconds '%s'", optarg);
                        break;

                case ARG_MEMORY_MAX:
                        r = parse_size(optarg, &arg_memory_max);
                        if (r < 0 || arg_memory_max == 0)
                                return fail_usage(NULL,
                                                  "--memory-max: invalid size '%s' (bytes, or with a K, M, "
                                                  "G, T suffix)",
                                                  optarg);
                        break;

                case ARG_TASKS_MAX:
                        r = parse_uint64(optarg, &arg_tasks_max);
                        if (r < 0 || arg_tasks_max == 0)
                                return fail_usage(NULL, "--tasks-max: invalid number '%s'", optarg);
                        break;

                case ARG_STDIN_FILE:
                        arg_stdin_file = optarg;
                        break;

                case 'i':
                        arg_stdin = true;
                        break;

                case ARG_CAPTURE:
                        arg_capture = true;
                        break;

                case ARG_MODE:
                        if (parse_mode(optarg, &arg_mode) < 0)
                                return fail_usage(NULL, "--mode: invalid octal mode '%s'", optarg);
                        arg_mode_set = true;
                        break;

                case ARG_MKDIR:
                        arg_mkdir = true;
                        break;

                case ARG_APPEND:
                        arg_append = true;
                        break;

                case 'f':
                        arg_follow = true;
                        break;

                case 'n':
                        if (parse_uint64(optarg, &arg_limit) < 0)
                                return fail_usage(NULL, "--limit: invalid number of rows '%s'", optarg);
                        break;

                case ARG_OPERATION:
                        r = set_filter_string(&arg_filter.operation, "operation", optarg);
                        if (r != 0)
                                return r;
                        break;

                case ARG_EVENT:
                        r = set_filter_string(&arg_filter.event, "event", optarg);
                        if (r != 0)
                                return r;
                        break;

                case ARG_ACCOUNT:
                        r = set_filter_string(&arg_filter.account_id, "account", optarg);
                        if (r != 0)
                                return r;
                        break;

                case ARG_SOURCE:
                        r = set_filter_string(&arg_filter.source, "source", optarg);
                        if (r != 0)
                                return r;
                        break;

                case ARG_SINCE:
                case ARG_UNTIL: {
                        uint64_t *t = c == ARG_SINCE ? &arg_filter.since : &arg_filter.until;

                        if (parse_rfc3339_usec(optarg, t) < 0 || *t == 0)
                                return fail_usage(
                                        NULL,
                                        "--%s: expected an RFC 3339 time like "
                                        "2026-12-02T15:39:31Z or 2026-12-02T16:39:31.5+01:00, got '%s'",
                                        c == ARG_SINCE ? "since" : "until", optarg);
                        break;
                }

                case ARG_OUTPUT:
                        if (parse_uint64(optarg, &arg_output) < 0 || arg_output == 0)
                                return fail_usage(NULL, "--output: invalid row id '%s'", optarg);
                        break;

                case ARG_VERIFY:
                        arg_verify = true;
                        break;

                case ARG_EXPORT:
                        if (isempty(optarg))
                                return fail_usage(NULL, "--export: needs a directory");
                        arg_export = optarg;
                        break;

                case '?':
                        /* getopt_long() has said what was wrong. */
                        return EXIT_USAGE;

                default:
                        return fail_usage(NULL, "unhandled option %d", c);
                }
        }

done:
        /* After "--", or from an exec's CMD on: all positional. */
        for (; optind < argc; optind++)
                args[n_args++] = argv[optind];

        if (arg_stdin && arg_stdin_file)
                return fail_usage(NULL, "--stdin and --stdin-file cannot be combined");
        if (arg_filter.since > 0 && arg_filter.until > 0 && arg_filter.since >= arg_filter.until)
                return fail_usage(NULL, "--since must be earlier than --until");
        if (arg_policy_given() && arg_network && !streq(arg_network, "egress"))
                return fail_usage(NULL,
                                  "--allow, --deny and --egress-default are an egress policy: they need "
                                  "--network=egress (which they imply), not --network=%s",
                                  arg_network);

        *ret_args = TAKE_PTR(args);
        *ret_n_args = n_args;
        return 1;
}

typedef struct Verb {
        const char *name;
        size_t min_args, max_args; /* counting the verb itself */
        int failure_status;
        const char *usage;
        int (*dispatch)(char **args, size_t n_args);
} Verb;

static const Verb verbs[] = {
        { "list", 1, 1, EXIT_FAILURE, "list", verb_list },
        { "status", 2, SIZE_MAX, EXIT_FAILURE, "status ID...", verb_status },
        { "create", 1, 1, EXIT_FAILURE,
          "create [--name=NAME] [--type=TYPE] [--ttl=SECONDS] [--network=MODE] [--image=NAME] [--allow=ENTRY...] "
          "[--deny=ENTRY...] [--egress-default=deny|allow] [--from-snapshot=SNAPSHOT]", verb_create },
        { "delete", 2, SIZE_MAX, EXIT_FAILURE, "delete ID...", verb_delete },
        { "set-ttl", 3, 3, EXIT_FAILURE, "set-ttl ID SECONDS", verb_set_ttl },
        { "pause", 2, SIZE_MAX, EXIT_FAILURE, "pause ID...", verb_pause_resume },
        { "resume", 2, SIZE_MAX, EXIT_FAILURE, "resume ID...", verb_pause_resume },
        { "network", 2, 2, EXIT_FAILURE,
          "network ID [--allow=ENTRY...] [--deny=ENTRY...] [--egress-default=deny|allow]", verb_network },
        { "exec", 3, SIZE_MAX, EXIT_EXEC_FAILED, "exec ID [OPTIONS...] [--] CMD [ARGS...]", verb_exec },
        { "write", 3, 3, EXIT_FAILURE, "write ID PATH < DATA", verb_write },
        { "cat", 3, 3, EXIT_FAILURE, "cat ID PATH", verb_cat },
        { "cp", 3, 3, EXIT_FAILURE, "cp ID:PATH LOCAL | cp LOCAL ID:PATH", verb_cp },
        { "log", 1, 2, EXIT_FAILURE,
          "log [SANDBOX] [--follow] [--json] [--limit=N] [--operation=OP] | log --output=ROW | log --verify | "
          "log --export=DIR [--follow] [SANDBOX]", verb_log },
};

int main(int argc, char *argv[]) {
        static char *default_args[] = { (char *) "list", NULL };
        _cleanup_free_ char **args = NULL;
        const Verb *verb = NULL;
        size_t n_args = 0;
        int r;

        /* "image" has options of its own (sandboxctl-image.c) */
        if (argc >= 2 && streq(argv[1], "image"))
                return verb_image(argc - 1, argv + 1);
        /* "api-key" has options of its own (sandboxctl-api-key.c) */
        if (argc >= 2 && streq(argv[1], "api-key"))
                return verb_api_key(argc - 1, argv + 1);
        /* so does "shell" (sandboxctl-shell.c) */
        if (argc >= 2 && streq(argv[1], "shell"))
                return verb_shell(argc - 1, argv + 1);
        /* so do the file tools (sandboxctl-tools.c) */
        if (argc >= 2 && is_tool_verb(argv[1]))
                return verb_tool(argc - 1, argv + 1);
        /* and "mcp", the MCP server on stdio (sandboxctl-mcp.c) */
        if (argc >= 2 && streq(argv[1], "mcp"))
                return verb_mcp(argc - 1, argv + 1);
        /* and the background processes' verbs (sandboxctl-process.c) */
        if (argc >= 2 && is_process_verb(argv[1]))
                return verb_process(argc - 1, argv + 1);
        /* and the snapshots' (sandboxctl-snapshot.c) */
        if (argc >= 2 && streq(argv[1], "snapshot"))
                return verb_snapshot(argc - 1, argv + 1);

        r = parse_argv(argc, argv, &args, &n_args);
        if (r < 0) {
                fprintf(stderr, "sandboxctl: %s\n", strerror(-r));
                env_free_all();
                return EXIT_FAILURE;
        }
        if (r != 1) {
                env_free_all();
                return r == 0 ? EXIT_SUCCESS : EXIT_USAGE;
        }

        char **a = n_args > 0 ? args : default_args;
        size_t n = n_args > 0 ? n_args : 1;

        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (streq(verbs[i].name, a[0])) {
                        verb = verbs + i;
                        break;
                }

        if (!verb)
                r = fail_usage(NULL, "unknown command '%s' (see sandboxctl --help)", a[0]);
        else if (n < verb->min_args || n > verb->max_args)
                r = fail_usage(NULL, "%s: too %s arguments; usage: sandboxctl %s", verb->name,
                               n < verb->min_args ? "few" : "many", verb->usage);
        else {
                r = verb->dispatch(a, n);
                if (fflush(stdout) != 0 && r >= 0)
                        r = log_error(-errno, verb->name, "Failed to write output: %m");
                if (r < 0)
                        r = verb->failure_status;
        }

        env_free_all();
        return r;
}
