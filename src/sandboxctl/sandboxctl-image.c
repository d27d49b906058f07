/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "sandboxctl image build|import|list|show|remove|jobs|cancel": sandboxd's image store (issue 24).
 *
 * import hands sandboxd a descriptor opened here, with the caller's own rights: a file (a rootfs tarball, an
 * OCI archive, a docker-archive), standard input, or a pipe that tar(1) fills from an OCI image layout
 * directory. build and import follow the job's progress signals until it ends; Ctrl-C cancels the job. */
#include "sandboxctl-image.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "macro.h"
#include "sandboxd-bus.h"
#include "sandboxctl-util.h"

#define IMAGES_INTERFACE "org.sandboxd.sandbox1.Images"

static void usage(FILE *f) {
        fputs("sandboxctl image list [--json]\n"
              "sandboxctl image show NAME [--json]\n"
              "sandboxctl image import NAME PATH|- [--format=tar|oci-archive|docker-archive] [--tag=TAG] [--no-wait]\n"
              "sandboxctl image build NAME [--suite=SUITE] [--variant=VARIANT] [--packages=A,B,…] [--no-wait]\n"
              "sandboxctl image remove NAME\n"
              "sandboxctl image jobs\n"
              "sandboxctl image cancel JOB\n\n"
              "Manages sandboxd's images: read-only root trees that sandboxes run on (create --image=NAME,\n"
              "or a type's Image=). import reads PATH with your rights: a rootfs tarball (any compression),\n"
              "an OCI image archive or a docker-archive; a directory holding an OCI image layout is sent as\n"
              "an oci-archive. build runs mmdebstrap (default: bookworm, variant apt) from the archive the\n"
              "host's apt uses. Both show the job's progress until it ends; Ctrl-C cancels it.\n",
              f);
}

static int bus_failed(const char *what, const sd_bus_error *e, int r) {
        _cleanup_free_ char *msg = make_printable(e && e->message ? e->message : strerror(-r));
        fprintf(stderr, "sandboxctl: image: %s: %s\n", what, strna(msg));
        return EXIT_FAILURE;
}

static char *format_size(uint64_t n, char buf[static 32]) {
        if (n >= (UINT64_C(1) << 30))
                snprintf(buf, 32, "%.1fG", (double) n / (1 << 30));
        else if (n >= (UINT64_C(1) << 20))
                snprintf(buf, 32, "%.1fM", (double) n / (1 << 20));
        else
                snprintf(buf, 32, "%" PRIu64 "K", n >> 10);
        return buf;
}

/* --- following a job ------------------------------------------------------------------------------- */

typedef struct Follow {
        const char *job;
        bool done;
        bool ok;
} Follow;

static int on_progress(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Follow *f = userdata;
        const char *job, *image, *phase;
        uint64_t done, total;
        char a[32], b[32];

        if (sd_bus_message_read(m, "ssstt", &job, &image, &phase, &done, &total) < 0 || !f->job || !streq(job, f->job))
                return 0;
        _cleanup_free_ char *p = make_printable(phase);
        if (total > 0)
                fprintf(stderr, "%s: %s %s of %s (%" PRIu64 "%%)\n", image, strna(p), format_size(done, a),
                        format_size(total, b), done * 100 / total);
        else if (done > 0)
                fprintf(stderr, "%s: %s %s\n", image, strna(p), format_size(done, a));
        else
                fprintf(stderr, "%s: %s\n", image, strna(p));
        return 0;
}

static int on_finished(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Follow *f = userdata;
        const char *job, *image, *result, *name, *message;

        if (sd_bus_message_read(m, "sssss", &job, &image, &result, &name, &message) < 0 || !f->job ||
            !streq(job, f->job))
                return 0;
        f->done = true;
        f->ok = streq(result, "done");
        _cleanup_free_ char *msg = make_printable(message);
        if (f->ok)
                fprintf(stderr, "%s: done\n", image);
        else
                fprintf(stderr, "sandboxctl: image: %s %s: %s\n", image, result, strna(msg));
        return 0;
}

/* Sends the call (which starts a job), then follows the job until it ends; SIGINT or SIGTERM cancel it. */
static int run_job(sd_bus *bus, sd_bus_message *m, const char *what, bool wait, pid_t tar_pid) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_slot_unrefp) sd_bus_slot *s1 = NULL, *s2 = NULL;
        Follow f = {};
        const char *job;
        sigset_t mask;
        int r;

        /* The matches before the call: a quick job may end before its reply is read. */
        r = sd_bus_match_signal(bus, &s1, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, IMAGES_INTERFACE, "JobProgress",
                                on_progress, &f);
        if (r >= 0)
                r = sd_bus_match_signal(bus, &s2, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, IMAGES_INTERFACE,
                                        "JobFinished", on_finished, &f);
        if (r < 0)
                return bus_failed(what, NULL, r);
        r = sd_bus_call(bus, m, 0, &error, &reply);
        if (r < 0)
                return bus_failed(what, &error, r);
        r = sd_bus_message_read(reply, "s", &job);
        if (r < 0)
                return bus_failed(what, NULL, r);
        _cleanup_free_ char *id = strdup(job);
        if (!id)
                return EXIT_FAILURE;
        puts(id);
        fflush(stdout);
        if (!wait)
                return 0;
        f.job = id;

        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        _cleanup_close_ int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        bool cancelled = false;
        while (!f.done) {
                r = sd_bus_process(bus, NULL);
                if (r < 0)
                        return bus_failed(what, NULL, r);
                if (r > 0)
                        continue;
                struct pollfd p[2] = { { .fd = sd_bus_get_fd(bus), .events = (short) sd_bus_get_events(bus) },
                                       { .fd = sfd, .events = POLLIN } };
                if (poll(p, 2, -1) < 0 && errno != EINTR)
                        return bus_failed(what, NULL, -errno);
                if (p[1].revents && !cancelled) {
                        struct signalfd_siginfo si;
                        (void) read(sfd, &si, sizeof(si));
                        fprintf(stderr, "sandboxctl: image: cancelling %s…\n", id);
                        sd_bus_error_free(&error);
                        r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, IMAGES_INTERFACE,
                                               "CancelJob", &error, NULL, "sa{sv}", id, 0);
                        if (r < 0)
                                return bus_failed("cancel", &error, r);
                        cancelled = true;
                }
        }
        if (tar_pid > 0) {
                int status;
                (void) waitpid(tar_pid, &status, 0);
        }
        return f.ok ? 0 : EXIT_FAILURE;
}

/* A pipe whose write end tar(1) fills with the directory's contents; the read end is returned. */
static int tar_directory(const char *dir, pid_t *ret_pid) {
        int p[2];
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0) {
                int r = -errno;
                close(p[0]);
                close(p[1]);
                return r;
        }
        if (pid == 0) {
                if (dup2(p[1], STDOUT_FILENO) < 0)
                        _exit(EXIT_FAILURE);
                execlp("tar", "tar", "-C", dir, "-cf", "-", ".", (char *) NULL);
                _exit(127);
        }
        close(p[1]);
        *ret_pid = pid;
        return p[0];
}

static int append_options(sd_bus_message *m, const char *const *kv, char **packages) {
        int r = sd_bus_message_open_container(m, 'a', "{sv}");
        for (size_t i = 0; r >= 0 && kv[i]; i += 2)
                if (kv[i + 1])
                        r = sd_bus_message_append(m, "{sv}", kv[i], "s", kv[i + 1]);
        if (r >= 0 && packages) {
                r = sd_bus_message_open_container(m, 'e', "sv");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", "packages");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'v', "as");
                if (r >= 0)
                        r = sd_bus_message_append_strv(m, packages);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

static int show_image(sd_bus *bus, const char *name, bool json) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        json_object *o = json_object_new_object(), *used = json_object_new_array();
        int r;

        r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, IMAGES_INTERFACE, "GetImage", &error,
                               &reply, "s", name);
        if (r < 0) {
                json_object_put(o);
                json_object_put(used);
                return bus_failed("show", &error, r);
        }
        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                const char *key, *contents;
                r = sd_bus_message_read(reply, "s", &key);
                if (r >= 0)
                        r = sd_bus_message_peek_type(reply, NULL, &contents);
                if (r < 0)
                        break;
                if (streq(contents, "s")) {
                        const char *v;
                        r = sd_bus_message_read(reply, "v", "s", &v);
                        json_object_object_add(o, key, json_object_new_string(v));
                } else if (streq(contents, "t")) {
                        uint64_t v;
                        r = sd_bus_message_read(reply, "v", "t", &v);
                        json_object_object_add(o, key, json_object_new_uint64(v));
                } else if (streq(contents, "as")) {
                        char **l = NULL;
                        r = sd_bus_message_enter_container(reply, 'v', "as");
                        if (r >= 0)
                                r = sd_bus_message_read_strv(reply, &l);
                        for (char **p = l; p && *p; p++)
                                json_object_array_add(used, json_object_new_string(*p));
                        strv_free(l);
                        if (r >= 0)
                                r = sd_bus_message_exit_container(reply);
                } else
                        r = sd_bus_message_skip(reply, "v");
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
        }
        if (r < 0) {
                json_object_put(o);
                json_object_put(used);
                return bus_failed("show", NULL, r);
        }
        json_object_object_add(o, "used_by", used);
        if (json)
                puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        else {
                char ts[FORMAT_TIMESTAMP_MAX], sz[32];
                _cleanup_free_ char *source = make_printable(json_object_get_string(json_object_object_get(o, "source")));
                printf("       Name: %s\n     Source: %s\n    Created: %s\n       Size: %s\n     Digest: %s\n",
                       name, strna(source),
                       format_timestamp(json_object_get_uint64(json_object_object_get(o, "created_at")), ts),
                       format_size(json_object_get_uint64(json_object_object_get(o, "size")), sz),
                       json_object_get_string(json_object_object_get(o, "digest")));
                printf("    Hygiene: %" PRIu64 " device nodes dropped, %" PRIu64 " setuid/setgid bits cleared, %"
                       PRIu64 " owners made root\n",
                       json_object_get_uint64(json_object_object_get(o, "devices_dropped")),
                       json_object_get_uint64(json_object_object_get(o, "setid_stripped")),
                       json_object_get_uint64(json_object_object_get(o, "owners_reset")));
                printf("    Used by: ");
                size_t n = json_object_array_length(used);
                for (size_t i = 0; i < n; i++)
                        printf("%s%s", i ? " " : "", json_object_get_string(json_object_array_get_idx(used, i)));
                printf("%s\n", n ? "" : "-");
        }
        json_object_put(o);
        return 0;
}

static int list_images(sd_bus *bus, bool json) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        json_object *arr = json_object_new_array();
        const char *name, *source, *digest;
        uint64_t created, size;
        int r;

        r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, IMAGES_INTERFACE, "ListImages", &error,
                               &reply, NULL);
        if (r < 0) {
                json_object_put(arr);
                return bus_failed("list", &error, r);
        }
        if (!json)
                printf("%-24s %-32s %-8s %-20s %s\n", "NAME", "SOURCE", "SIZE", "CREATED", "DIGEST");
        r = sd_bus_message_enter_container(reply, 'a', "(sstts)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(sstts)", &name, &source, &created, &size, &digest)) > 0) {
                if (json) {
                        json_object *o = json_object_new_object();
                        json_object_object_add(o, "name", json_object_new_string(name));
                        json_object_object_add(o, "source", json_object_new_string(source));
                        json_object_object_add(o, "created_at", json_object_new_uint64(created));
                        json_object_object_add(o, "size", json_object_new_uint64(size));
                        json_object_object_add(o, "digest", json_object_new_string(digest));
                        json_object_array_add(arr, o);
                } else {
                        char ts[FORMAT_TIMESTAMP_MAX], sz[32];
                        _cleanup_free_ char *src = make_printable(source);
                        printf("%-24s %-32.32s %-8s %-20s %.19s…\n", name, strna(src), format_size(size, sz),
                               format_timestamp(created, ts), digest);
                }
        }
        if (r < 0) {
                json_object_put(arr);
                return bus_failed("list", NULL, r);
        }
        if (json)
                puts(json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(arr);
        return 0;
}

int verb_image(int argc, char *argv[]) {
        enum { ARG_FORMAT = 0x100, ARG_TAG, ARG_SUITE, ARG_VARIANT, ARG_PACKAGES, ARG_NO_WAIT, ARG_JSON };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "format", required_argument, NULL, ARG_FORMAT },
                { "tag", required_argument, NULL, ARG_TAG },
                { "suite", required_argument, NULL, ARG_SUITE },
                { "variant", required_argument, NULL, ARG_VARIANT },
                { "packages", required_argument, NULL, ARG_PACKAGES },
                { "no-wait", no_argument, NULL, ARG_NO_WAIT },
                { "json", no_argument, NULL, ARG_JSON },
                {},
        };
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_strv_free_ char **packages = NULL;
        const char *format = NULL, *tag = NULL, *suite = NULL, *variant = NULL;
        bool wait = true, json = false;
        int c, r;

        optind = 0;
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        usage(stdout);
                        return 0;
                case ARG_FORMAT:
                        format = optarg;
                        break;
                case ARG_TAG:
                        tag = optarg;
                        break;
                case ARG_SUITE:
                        suite = optarg;
                        break;
                case ARG_VARIANT:
                        variant = optarg;
                        break;
                case ARG_PACKAGES:
                        strv_free(packages);
                        if (!(packages = split_commas(optarg)))
                                return EXIT_FAILURE;
                        break;
                case ARG_NO_WAIT:
                        wait = false;
                        break;
                case ARG_JSON:
                        json = true;
                        break;
                default:
                        usage(stderr);
                        return EXIT_USAGE;
                }
        if (optind >= argc)
                return fail_usage("image", "expected build, import, list, show, remove, jobs or cancel (see sandboxctl image "
                                  "--help)");
        const char *verb = argv[optind];
        char **args = argv + optind + 1;
        int n = argc - optind - 1;
        static const struct {
                const char *verb;
                int n;
        } arity[] = { { "list", 0 }, { "jobs", 0 }, { "show", 1 }, { "remove", 1 }, { "cancel", 1 }, { "build", 1 },
                      { "import", 2 } };
        bool known = false;
        for (size_t i = 0; i < ELEMENTSOF(arity); i++)
                if (streq(verb, arity[i].verb)) {
                        known = true;
                        if (n != arity[i].n)
                                return fail_usage("image", "%s", arity[i].n == 0   ? "unexpected argument"
                                                  : arity[i].n == 1 ? "expected one argument"
                                                                    : "expected NAME and PATH");
                }
        if (!known)
                return fail_usage("image", "expected build, import, list, show, remove, jobs or cancel");

        r = sd_bus_open_system(&bus);
        if (r < 0) {
                fprintf(stderr, "sandboxctl: image: cannot connect to the system bus: %s\n", strerror(-r));
                return EXIT_FAILURE;
        }

        if (streq(verb, "list"))
                return list_images(bus, json);
        if (streq(verb, "show"))
                return show_image(bus, args[0], json);
        if (streq(verb, "remove") || streq(verb, "cancel")) {
                r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, IMAGES_INTERFACE,
                                       streq(verb, "remove") ? "RemoveImage" : "CancelJob", &error, NULL, "sa{sv}",
                                       args[0], 0);
                return r < 0 ? bus_failed(verb, &error, r) : 0;
        }
        if (streq(verb, "jobs")) {
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
                const char *id, *name, *op;
                uint64_t started;
                r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, IMAGES_INTERFACE, "ListJobs",
                                       &error, &reply, NULL);
                if (r < 0)
                        return bus_failed("jobs", &error, r);
                printf("%-12s %-24s %-14s %s\n", "JOB", "IMAGE", "OPERATION", "STARTED");
                r = sd_bus_message_enter_container(reply, 'a', "(ssst)");
                while (r >= 0 && (r = sd_bus_message_read(reply, "(ssst)", &id, &name, &op, &started)) > 0) {
                        char ts[FORMAT_TIMESTAMP_MAX];
                        printf("%-12s %-24s %-14s %s\n", id, name, op, format_timestamp(started, ts));
                }
                return r < 0 ? bus_failed("jobs", NULL, r) : 0;
        }
        if (streq(verb, "build")) {
                r = sd_bus_message_new_method_call(bus, &m, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, IMAGES_INTERFACE,
                                                   "BuildImage");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", args[0]);
                if (r >= 0)
                        r = append_options(m, (const char *const[]) { "suite", suite, "variant", variant, NULL },
                                           packages);
                if (r < 0)
                        return bus_failed("build", NULL, r);
                return run_job(bus, m, "build", wait, 0);
        }

        /* import */
        const char *path = args[1];
        pid_t tar_pid = 0;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        if (streq(path, "-"))
                fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
        else if (stat(path, &st) >= 0 && S_ISDIR(st.st_mode)) {
                char layout[4096];
                snprintf(layout, sizeof(layout), "%s/oci-layout", path);
                if (access(layout, F_OK) < 0)
                        return fail_usage("image", "a directory is imported only as an OCI image layout (it has no oci-layout "
                                          "file); tar a root file system first");
                if (format && !streq(format, "oci-archive"))
                        return fail_usage("image", "an OCI image layout directory goes as --format=oci-archive");
                format = "oci-archive";
                fd = tar_directory(path, &tar_pid);
        } else
                fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                fprintf(stderr, "sandboxctl: image: import: %s: %s\n", path, strerror(fd == -EBADF ? errno : -fd));
                return EXIT_FAILURE;
        }
        r = sd_bus_message_new_method_call(bus, &m, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, IMAGES_INTERFACE,
                                           "ImportImage");
        if (r >= 0)
                r = sd_bus_message_append(m, "sh", args[0], fd);
        if (r >= 0)
                r = append_options(m, (const char *const[]) { "format", format, "tag", tag, NULL }, NULL);
        if (r < 0)
                return bus_failed("import", NULL, r);
        fd = safe_close(fd); /* sandboxd's helper holds its copy: tar sees EPIPE if the job ends early */
        return run_job(bus, m, "import", wait, tar_pid);
}
