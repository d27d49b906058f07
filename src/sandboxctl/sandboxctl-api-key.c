/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "sandboxctl api-key create|list|revoke": API keys of sandbox-gatewayd, over org.sandboxd.gateway1. */
#include "sandboxctl-api-key.h"

#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "macro.h"
#include "sandboxd-bus.h"
#include "sandboxctl-util.h"
#include "time-util.h"

typedef enum JsonMode {
        JSON_NONE,
        JSON_SHORT,
        JSON_PRETTY,
} JsonMode;

static void usage(FILE *f) {
        fputs("sandboxctl api-key create [--preset=admin|member|runner] [--role=ROLE] [--actions=A,B,…]\n"
              "                          [--sandboxes=ID,…] [--ttl=TIME] [--name=NAME] [--json[=short|pretty]]\n"
              "sandboxctl api-key list [--json[=short|pretty]]\n"
              "sandboxctl api-key revoke ID\n\n"
              "Manages sandbox-gatewayd's API keys (root only). TIME is like 30min, 2h, 1d; without --ttl a\n"
              "key never expires. create prints the secret once; with --json {\"secret\":…,\"apiKey\":{…}}.\n"
              "NAME: at most 64 bytes, no control or format characters (such as U+202E). list escapes\n"
              "what a terminal would act on (\\x1b, \\u202e); --json keeps it raw.\n",
              f);
}

static int bus_failed(const char *what, const sd_bus_error *e, int r) {
        /* The gateway's message may quote what a client sent (a key name): escaped like any such text. */
        _cleanup_free_ char *msg = make_printable(e && e->message ? e->message : strerror(-r));

        fprintf(stderr, "sandboxctl: api-key: %s: %s\n", what, strna(msg));
        if (e && e->name && (streq(e->name, SD_BUS_ERROR_ACCESS_DENIED) || streq(e->name, SD_BUS_ERROR_SERVICE_UNKNOWN)))
                fprintf(stderr, "(API keys are managed by root, with sandbox-gatewayd installed.)\n");
        return EXIT_FAILURE;
}

/* A string field of a key object, made printable; "-" when missing or empty. NULL on ENOMEM. */
static char *key_field(json_object *k, const char *field) {
        const char *v = json_object_get_string(json_object_object_get(k, field));

        return make_printable(isempty(v) ? "-" : v);
}

static int print_json(const char *js, JsonMode mode) {
        json_object *o = json_tokener_parse(js);
        if (!o) {
                puts(js);
                return 0;
        }
        puts(json_object_to_json_string_ext(o, (mode == JSON_PRETTY ? JSON_C_TO_STRING_PRETTY : JSON_C_TO_STRING_PLAIN) |
                                                        JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
        return 0;
}

static int append_strv(sd_bus_message *m, const char *key, char **l) {
        int r = sd_bus_message_open_container(m, 'e', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", key);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "as");
        if (r >= 0)
                r = sd_bus_message_append_strv(m, l);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

int verb_api_key(int argc, char *argv[]) {
        enum { ARG_PRESET = 0x100, ARG_ROLE, ARG_ACTIONS, ARG_SANDBOXES, ARG_TTL, ARG_NAME, ARG_JSON };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "preset", required_argument, NULL, ARG_PRESET },
                { "role", required_argument, NULL, ARG_ROLE },
                { "actions", required_argument, NULL, ARG_ACTIONS },
                { "sandboxes", required_argument, NULL, ARG_SANDBOXES },
                { "ttl", required_argument, NULL, ARG_TTL },
                { "name", required_argument, NULL, ARG_NAME },
                { "json", optional_argument, NULL, ARG_JSON },
                {},
        };
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_strv_free_ char **actions = NULL, **sandboxes = NULL;
        const char *preset = NULL, *role = NULL, *name = NULL;
        uint64_t ttl_usec = 0;
        JsonMode json = JSON_NONE;
        int c, r;

        optind = 0;
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        usage(stdout);
                        return 0;
                case ARG_PRESET:
                        preset = optarg;
                        break;
                case ARG_ROLE:
                        role = optarg;
                        break;
                case ARG_ACTIONS:
                        strv_free(actions);
                        if (!(actions = split_commas(optarg)))
                                return EXIT_FAILURE;
                        break;
                case ARG_SANDBOXES:
                        strv_free(sandboxes);
                        if (!(sandboxes = split_commas(optarg)))
                                return EXIT_FAILURE;
                        break;
                case ARG_TTL:
                        if (parse_sec(optarg, &ttl_usec) < 0 || ttl_usec < USEC_PER_SEC)
                                return fail_usage("api-key",
                                                  "--ttl: expected a time such as 30min, 2h or 1d");
                        break;
                case ARG_NAME:
                        name = optarg;
                        break;
                case ARG_JSON:
                        if (!optarg || streq(optarg, "short"))
                                json = JSON_SHORT;
                        else if (streq(optarg, "pretty"))
                                json = JSON_PRETTY;
                        else if (streq(optarg, "off"))
                                json = JSON_NONE;
                        else
                                return fail_usage("api-key", "--json: expected short, pretty or off");
                        break;
                default:
                        usage(stderr);
                        return EXIT_USAGE;
                }
        /* GNU getopt permutes: options may come before or after the sub-verb and its id */
        if (optind >= argc)
                return fail_usage("api-key",
                                  "expected create, list or revoke (see sandboxctl api-key --help)");
        const char *verb = argv[optind];
        int rest = argc - optind;
        if (rest > 1 && !streq(verb, "revoke"))
                return fail_usage("api-key", "unexpected argument");

        r = sd_bus_open_system(&bus);
        if (r < 0) {
                fprintf(stderr, "sandboxctl: api-key: cannot connect to the system bus: %s\n", strerror(-r));
                return EXIT_FAILURE;
        }

        if (streq(verb, "create")) {
                r = sd_bus_message_new_method_call(bus, &m, GATEWAY_BUS_NAME, GATEWAY_BUS_PATH,
                                                   GATEWAY_KEYS_INTERFACE, "CreateKey");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'a', "{sv}");
                if (r >= 0 && preset)
                        r = sd_bus_message_append(m, "{sv}", "preset", "s", preset);
                if (r >= 0 && role)
                        r = sd_bus_message_append(m, "{sv}", "role", "s", role);
                if (r >= 0 && name)
                        r = sd_bus_message_append(m, "{sv}", "name", "s", name);
                if (r >= 0 && ttl_usec)
                        r = sd_bus_message_append(m, "{sv}", "ttl_seconds", "t", (ttl_usec + USEC_PER_SEC - 1) / USEC_PER_SEC);
                if (r >= 0 && actions)
                        r = append_strv(m, "actions", actions);
                if (r >= 0 && sandboxes)
                        r = append_strv(m, "sandboxes", sandboxes);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                if (r < 0)
                        return bus_failed("create", NULL, r);
                r = sd_bus_call(bus, m, 0, &error, &reply);
                if (r < 0)
                        return bus_failed("create", &error, r);
                const char *secret, *key;
                r = sd_bus_message_read(reply, "ss", &secret, &key);
                if (r < 0)
                        return bus_failed("create", NULL, r);
                if (json != JSON_NONE) {
                        json_object *o = json_object_new_object();
                        json_object_object_add(o, "secret", json_object_new_string(secret));
                        json_object_object_add(o, "apiKey", json_tokener_parse(key));
                        puts(json_object_to_json_string_ext(o, (json == JSON_PRETTY ? JSON_C_TO_STRING_PRETTY
                                                                                    : JSON_C_TO_STRING_PLAIN) |
                                                                       JSON_C_TO_STRING_NOSLASHESCAPE));
                        json_object_put(o);
                } else {
                        json_object *o = json_tokener_parse(key);
                        _cleanup_free_ char *id = key_field(o, "id"), *kr = key_field(o, "role");
                        printf("%s\n", secret);
                        fprintf(stderr, "Created API key %s (role %s). The secret above is shown only once.\n",
                                strna(id), strna(kr));
                        json_object_put(o);
                }
                return 0;
        }

        if (streq(verb, "list")) {
                r = sd_bus_call_method(bus, GATEWAY_BUS_NAME, GATEWAY_BUS_PATH, GATEWAY_KEYS_INTERFACE,
                                       "ListKeys", &error, &reply, NULL);
                if (r < 0)
                        return bus_failed("list", &error, r);
                const char *js;
                r = sd_bus_message_read(reply, "s", &js);
                if (r < 0)
                        return bus_failed("list", NULL, r);
                if (json != JSON_NONE)
                        return print_json(js, json);
                json_object *o = json_tokener_parse(js), *a = json_object_object_get(o, "api_keys");
                printf("%-24s %-16s %-7s %-27s %s\n", "ID", "NAME", "ROLE", "EXPIRES", "STATE");
                for (size_t i = 0; i < json_object_array_length(a); i++) {
                        json_object *k = json_object_array_get_idx(a, i);
                        const char *revoked = json_object_get_string(json_object_object_get(k, "revokedAt"));
                        /* Every cell a client chose (the name above all) escaped, as for any terminal output. */
                        _cleanup_free_ char *id = key_field(k, "id"), *kn = key_field(k, "name"),
                                            *kr = key_field(k, "role"), *expires = key_field(k, "expiresAt");
                        if (!id || !kn || !kr || !expires) {
                                json_object_put(o);
                                return bus_failed("list", NULL, -ENOMEM);
                        }
                        printf("%-24s %-16s %-7s %-27s %s\n", id, kn, kr, streq(expires, "-") ? "never" : expires,
                               revoked ? "revoked" : "active");
                }
                json_object_put(o);
                return 0;
        }

        if (streq(verb, "revoke")) {
                if (rest != 2)
                        return fail_usage("api-key", "revoke takes exactly one key id");
                r = sd_bus_call_method(bus, GATEWAY_BUS_NAME, GATEWAY_BUS_PATH, GATEWAY_KEYS_INTERFACE,
                                       "RevokeKey", &error, NULL, "s", argv[optind + 1]);
                if (r < 0)
                        return bus_failed("revoke", &error, r);
                return 0;
        }
        return fail_usage("api-key", "expected create, list or revoke");
}
