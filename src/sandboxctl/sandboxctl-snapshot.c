/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "sandboxctl snapshot ID|list|remove": snapshots of sandboxes' disks (SnapshotSandbox, ListSnapshots,
 * RemoveSnapshot; issue 26). "create --from-snapshot" is sandboxctl.c's. */
#include "sandboxctl-snapshot.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "macro.h"
#include "sandboxctl-util.h"
#include "sandboxd-bus.h"
#include "time-util.h"

/* A snapshot copies the sandbox's disk: longer than sd-bus's 25 s default on a slow disk. */
#define SNAPSHOT_TIMEOUT_USEC (30 * USEC_PER_MINUTE)

static void usage(FILE *f) {
        fputs("sandboxctl snapshot ID [--name=NAME]\n"
              "sandboxctl snapshot list [--json[=MODE]]\n"
              "sandboxctl snapshot remove SNAPSHOT...\n\n"
              "Snapshots of sandboxes' disks (their home, /tmp and /var/tmp): taken while the sandbox is\n"
              "frozen, kept by sandboxd, the disk of new sandboxes ('sandboxctl create --from-snapshot').\n"
              "A snapshot of an image sandbox holds its layer over the image: its forks run on that image.\n"
              "Processes are not part of a snapshot.\n\n"
              "  ID       Take a snapshot of sandbox ID and print its id (sn_...)\n"
              "  list     List the snapshots: id, name, source sandbox, type, image, size, creation time\n"
              "  remove   Remove snapshots by id or name (sandboxes made from them keep their disks)\n\n"
              "Options:\n"
              "  -h --help          Show this help\n"
              "     --name=NAME     The snapshot's name (default: its id)\n"
              "     --json[=MODE]   list: JSON output, short (default for a bare --json) or pretty\n\n"
              "Exit status: 0 on success, 1 on failure, 2 on bad usage. See docs/sandboxctl.md.\n",
              f);
}

static int fail(const sd_bus_error *e, int r) {
        _cleanup_free_ char *msg = make_printable(e && e->message ? e->message : strerror(-r));

        fprintf(stderr, "sandboxctl: snapshot: %s%s\n", strna(msg),
                e && sd_bus_error_has_names(e, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER)
                        ? " (is sandboxd running?)"
                        : "");
        return EXIT_FAILURE;
}

static int open_bus(sd_bus **ret) {
        int r = sd_bus_open_system(ret);
        if (r < 0) {
                fprintf(stderr, "sandboxctl: snapshot: Failed to connect to the system bus: %s\n",
                        strerror(-r));
                return EXIT_FAILURE;
        }
        return 0;
}

static int do_take(const char *id, const char *name) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        const char *snap;
        int r;

        if (open_bus(&bus) != 0)
                return EXIT_FAILURE;
        r = sd_bus_message_new_method_call(bus, &m, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                           SANDBOXD_MANAGER_INTERFACE, "SnapshotSandbox");
        if (r >= 0)
                r = sd_bus_message_append(m, "ssa{sv}", id, strempty(name), 0);
        if (r < 0)
                return fail(NULL, r);
        r = sd_bus_call(bus, m, SNAPSHOT_TIMEOUT_USEC, &error, &reply);
        if (r < 0)
                return fail(&error, r);
        r = sd_bus_message_read(reply, "s", &snap);
        if (r < 0)
                return fail(NULL, r);
        puts(snap);
        return EXIT_SUCCESS;
}

static int do_list(int json_flags) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        json_object *list = NULL;
        unsigned n = 0;
        int r;

        if (open_bus(&bus) != 0)
                return EXIT_FAILURE;
        r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                               "ListSnapshots", &error, &reply, NULL);
        if (r < 0)
                return fail(&error, r);
        if (json_flags >= 0 && !(list = json_object_new_array()))
                return fail(NULL, -ENOMEM);
        if (json_flags < 0)
                printf("%-13s %-24s %-13s %-8s %-16s %12s %s\n", "ID", "NAME", "SOURCE", "TYPE", "IMAGE",
                       "SIZE", "CREATED");
        r = sd_bus_message_enter_container(reply, 'a', "(ssssstts)");
        while (r >= 0) {
                const char *id, *name, *source, *type, *owner, *image;
                uint64_t created, size;
                char ts[FORMAT_TIMESTAMP_MAX];

                r = sd_bus_message_read(reply, "(ssssstts)", &id, &name, &source, &type, &owner, &created,
                                        &size, &image);
                if (r <= 0)
                        break;
                n++;
                if (list) {
                        json_object *o = json_object_new_object();
                        if (!o) {
                                r = -ENOMEM;
                                break;
                        }
                        json_object_object_add(o, "id", json_object_new_string(id));
                        json_object_object_add(o, "name", json_object_new_string(name));
                        json_object_object_add(o, "source", json_object_new_string(source));
                        json_object_object_add(o, "type", json_object_new_string(type));
                        json_object_object_add(o, "image", json_object_new_string(image));
                        json_object_object_add(o, "owner", json_object_new_string(owner));
                        json_object_object_add(o, "size", json_object_new_uint64(size));
                        json_object_object_add(o, "created_at", json_object_new_uint64(created));
                        json_object_array_add(list, o);
                        continue;
                }
                _cleanup_free_ char *pname = make_printable(name);
                _cleanup_free_ char *pimage = make_printable(image);
                printf("%-13s %-24s %-13s %-8s %-16s %12" PRIu64 " %s\n", id, strna(pname), source, type,
                       strna(pimage), size, strna(format_timestamp(created, ts)));
        }
        if (r < 0) {
                json_object_put(list);
                return fail(NULL, r);
        }
        if (list) {
                json_object *top = json_object_new_object();
                if (!top) {
                        json_object_put(list);
                        return fail(NULL, -ENOMEM);
                }
                json_object_object_add(top, "snapshots", list);
                puts(json_object_to_json_string_ext(top, json_flags));
                json_object_put(top);
        } else
                printf("\n%u snapshots listed.\n", n);
        return EXIT_SUCCESS;
}

static int do_remove(char **ids, size_t n) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int ret = EXIT_SUCCESS;

        if (open_bus(&bus) != 0)
                return EXIT_FAILURE;
        /* Like delete: every one is tried, each failure reported. */
        for (size_t i = 0; i < n; i++) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                int r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                           SANDBOXD_MANAGER_INTERFACE, "RemoveSnapshot", &error, NULL,
                                           "sa{sv}", ids[i], 0);
                if (r < 0)
                        ret = fail(&error, r);
        }
        return ret;
}

int verb_snapshot(int argc, char *argv[]) {
        enum { ARG_NAME = 0x100, ARG_JSON };
        static const struct option options[] = {
                {"help", no_argument, NULL, 'h'},
                {"name", required_argument, NULL, ARG_NAME},
                {"json", optional_argument, NULL, ARG_JSON},
                {},
        };
        const char *name = NULL;
        int json_flags = -1, c;

        optind = 0;
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        usage(stdout);
                        return EXIT_SUCCESS;
                case ARG_NAME:
                        if (isempty(optarg))
                                return fail_usage("snapshot", "--name: empty name");
                        name = optarg;
                        break;
                case ARG_JSON:
                        if (!optarg || streq(optarg, "short"))
                                json_flags = JSON_C_TO_STRING_PLAIN;
                        else if (streq(optarg, "pretty"))
                                json_flags = JSON_C_TO_STRING_PRETTY;
                        else
                                return fail_usage("snapshot", "--json: expected short or pretty, got '%s'", optarg);
                        break;
                default:
                        return EXIT_USAGE;
                }
        char **rest = argv + optind;
        size_t n = (size_t) (argc - optind);
        if (n == 0)
                return fail_usage("snapshot", "expected a sandbox ID, list or remove (see --help)");
        if (streq(rest[0], "list")) {
                if (n != 1 || name)
                        return fail_usage("snapshot", "list takes no arguments but --json");
                return do_list(json_flags);
        }
        if (streq(rest[0], "remove")) {
                if (n < 2 || name || json_flags >= 0)
                        return fail_usage("snapshot", "remove takes one or more snapshot ids or names");
                return do_remove(rest + 1, n - 1);
        }
        if (n != 1 || json_flags >= 0)
                return fail_usage("snapshot", "expected one sandbox ID");
        return do_take(rest[0], name);
}
