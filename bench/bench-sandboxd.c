/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Benchmark: sandboxd's Exec, create+delete and memory, beside systemd-run --scope, in one run. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-bus.h>

#include "macro.h"
#include "sandboxd-bus.h"

/* Where sandboxd keeps each sandbox's workspace: only used to check that deletion removed it. */
#define WORKSPACE_DIR "/var/lib/sandboxd/sandboxes"

#define CALL_TIMEOUT_USEC (60 * USEC_PER_SEC)
/* A safety net: should this program die without cleaning up, its sandboxes expire on their own. */
#define SANDBOX_TTL_SECONDS UINT64_C(900)

/* The reference flow's limits, passed to both sides so that they run the same scope. */
#define REF_TASKS_MAX       UINT64_C(256)
#define REF_MEMORY_MAX      (UINT64_C(1) << 30)
#define REF_RUNTIME_MAX_SEC UINT64_C(20)

/* The targets. */
#define TARGET_EXEC_RATIO   5.0
#define TARGET_EXEC_P50_MS  2.0
#define TARGET_CYCLE_P50_MS 10.0
#define TARGET_RSS_MIB      16.0
#define TARGET_RSS_LIVE     1000

static volatile sig_atomic_t interrupted = 0;

static void on_signal(int sig) {
        interrupted = sig;
}

static uint64_t now_nsec(void) {
        struct timespec ts;
        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * UINT64_C(1000000000) + (uint64_t) ts.tv_nsec;
}

static double nsec_to_ms(uint64_t ns) {
        return (double) ns / 1e6;
}

/* --- samples and their statistics ----------------------------------------------------------------- */

typedef struct Samples {
        double *v; /* ms */
        size_t n, allocated;
} Samples;

static int samples_add(Samples *s, double ms) {
        if (s->n == s->allocated) {
                size_t na = MAX(s->allocated * 2, (size_t) 64);
                double *nv = realloc(s->v, na * sizeof(double));
                if (!nv)
                        return -ENOMEM;
                s->v = nv;
                s->allocated = na;
        }
        s->v[s->n++] = ms;
        return 0;
}

static void samples_done(Samples *s) {
        free(s->v);
        *s = (Samples){};
}

typedef struct Stats {
        size_t n;
        double p50, p90, p99, mean, min, max;
} Stats;

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted values: the smallest value with at least q of them at or below it. */
static double percentile(const double *sorted, size_t n, double q) {
        size_t rank = (size_t) ceil(q * (double) n);
        if (rank < 1)
                rank = 1;
        return sorted[MIN(rank, n) - 1];
}

static Stats samples_stats(const Samples *s) {
        Stats st = {.n = s->n};
        if (s->n == 0)
                return (Stats){.p50 = NAN, .p90 = NAN, .p99 = NAN, .mean = NAN, .min = NAN, .max = NAN};
        double *sorted = malloc(s->n * sizeof(double));
        if (!sorted)
                abort();
        memcpy(sorted, s->v, s->n * sizeof(double));
        qsort(sorted, s->n, sizeof(double), cmp_double);
        double sum = 0;
        for (size_t i = 0; i < s->n; i++)
                sum += sorted[i];
        st.p50 = percentile(sorted, s->n, 0.50);
        st.p90 = percentile(sorted, s->n, 0.90);
        st.p99 = percentile(sorted, s->n, 0.99);
        st.mean = sum / (double) s->n;
        st.min = sorted[0];
        st.max = sorted[s->n - 1];
        free(sorted);
        return st;
}

/* --- the sandboxes we made, so that every exit path deletes them ------------------------------------ */

typedef struct Made {
        char **ids;
        size_t n, allocated;
} Made;

static Made made = {};
static char name_prefix[64];
static unsigned name_counter = 0;

static int made_add(const char *id) {
        if (made.n == made.allocated) {
                size_t na = MAX(made.allocated * 2, (size_t) 64);
                char **ni = realloc(made.ids, na * sizeof(char *));
                if (!ni)
                        return -ENOMEM;
                made.ids = ni;
                made.allocated = na;
        }
        made.ids[made.n] = strdup(id);
        if (!made.ids[made.n])
                return -ENOMEM;
        made.n++;
        return 0;
}

static bool made_contains(const char *id) {
        for (size_t i = 0; i < made.n; i++)
                if (made.ids[i] && streq(made.ids[i], id))
                        return true;
        return false;
}

static void made_forget(const char *id) {
        for (size_t i = 0; i < made.n; i++)
                if (made.ids[i] && streq(made.ids[i], id)) {
                        free(made.ids[i]);
                        made.ids[i] = made.ids[--made.n];
                        return;
                }
}

/* --- bus calls -------------------------------------------------------------------------------------- */

static void print_bus_error(const char *what, const sd_bus_error *error, int r) {
        if (sd_bus_error_is_set(error))
                fprintf(stderr, "%s failed: %s: %s\n", what, error->name, strna(error->message));
        else
                fprintf(stderr, "%s failed: %s\n", what, strerror(-r));
}

static int call_create(sd_bus *bus, char ret_id[static 64], sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        const char *id, *path;
        char name[96];
        int r;

        /* A name of ours, so that clean-up finds sandboxes whose CreateSandbox reply we never saw. */
        snprintf(name, sizeof(name), "%s%u", name_prefix, name_counter++);
        r = sd_bus_message_new_method_call(bus, &m, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                           SANDBOXD_MANAGER_INTERFACE, "CreateSandbox");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "a{sv}", 3, "type", "s", "small", "name", "s", name, "ttl_seconds", "t",
                                  SANDBOX_TTL_SECONDS);
        if (r < 0)
                return r;
        r = sd_bus_call(bus, m, CALL_TIMEOUT_USEC, error, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "so", &id, &path);
        if (r < 0)
                return r;
        snprintf(ret_id, 64, "%s", id);
        r = made_add(id);
        if (r < 0)
                return r;
        return 0;
}

static int call_delete(sd_bus *bus, const char *id, sd_bus_error *error) {
        int r;

        r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                               "DeleteSandbox", error, NULL, "sa{sv}", id, 0);
        if (r >= 0 || sd_bus_error_has_name(error, SANDBOXD_ERROR_NO_SUCH_SANDBOX))
                made_forget(id);
        return r;
}

/* One Exec of /bin/true with the reference flow's limits; returns its exit code, and the command's
 * own run time as sandboxd measured it (from its scope's start to its exit). */
static int call_exec_true(sd_bus *bus, const char *id, int *ret_exit, uint64_t *ret_duration_usec,
                          sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        const void *out, *err;
        size_t n_out, n_err;
        uint64_t duration = 0;
        int32_t code;
        const char *key;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                           SANDBOXD_MANAGER_INTERFACE, "Exec");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "s", id);
        if (r < 0)
                return r;
        r = sd_bus_message_append_strv(m, (char *[]){(char *) "/bin/true", NULL});
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "a{sv}", 3, "timeout_seconds", "t", REF_RUNTIME_MAX_SEC, "memory_max",
                                  "t", REF_MEMORY_MAX, "tasks_max", "t", REF_TASKS_MAX);
        if (r < 0)
                return r;
        r = sd_bus_call(bus, m, CALL_TIMEOUT_USEC, error, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "i", &code);
        if (r < 0)
                return r;
        r = sd_bus_message_read_array(reply, 'y', &out, &n_out);
        if (r < 0)
                return r;
        r = sd_bus_message_read_array(reply, 'y', &err, &n_err);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                r = sd_bus_message_read(reply, "s", &key);
                if (r < 0)
                        return r;
                if (streq(key, "duration_usec"))
                        r = sd_bus_message_read(reply, "v", "t", &duration);
                else
                        r = sd_bus_message_skip(reply, "v");
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        *ret_exit = code;
        *ret_duration_usec = duration;
        return 0;
}

static int sandboxd_pid(sd_bus *bus, pid_t *ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        uint32_t pid;
        int r;

        r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                               "GetConnectionUnixProcessID", &error, &reply, "s", SANDBOXD_BUS_NAME);
        if (r < 0) {
                print_bus_error("GetConnectionUnixProcessID", &error, r);
                return r;
        }
        r = sd_bus_message_read(reply, "u", &pid);
        if (r < 0)
                return r;
        *ret = (pid_t) pid;
        return 0;
}

/* VmRSS of pid, in KiB. */
static int read_rss_kib(pid_t pid, uint64_t *ret) {
        _cleanup_fclose_ FILE *f = NULL;
        char path[64], line[256];

        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                unsigned long long kib;
                if (sscanf(line, "VmRSS: %llu kB", &kib) == 1) {
                        *ret = kib;
                        return 0;
                }
        }
        return -ENODATA;
}

/* Of the ids we made, how many does ListSandboxes still show? */
static int count_listed(sd_bus *bus, char **ids, size_t n_ids, size_t *ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *id, *name, *type, *state, *owner, *path;
        size_t n = 0;
        int r;

        r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                               "ListSandboxes", &error, &reply, "");
        if (r < 0) {
                print_bus_error("ListSandboxes", &error, r);
                return r;
        }
        r = sd_bus_message_enter_container(reply, 'a', "(ssssso)");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(reply, "(ssssso)", &id, &name, &type, &state, &owner, &path)) > 0)
                for (size_t i = 0; i < n_ids; i++)
                        if (streq(ids[i], id)) {
                                n++;
                                break;
                        }
        if (r < 0)
                return r;
        *ret = n;
        return 0;
}

/* Of the ids we made, how many still have a unit (sandbox-<id>.slice, its init or exec scopes)? */
static int count_units(sd_bus *bus, char **ids, size_t n_ids, size_t *ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        const char *unit;
        size_t n = 0;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                           "org.freedesktop.systemd1.Manager", "ListUnitsByPatterns");
        if (r < 0)
                return r;
        r = sd_bus_message_append_strv(m, (char *[]){NULL});
        if (r < 0)
                return r;
        r = sd_bus_message_append_strv(m, (char *[]){(char *) "sandbox-sb_*", NULL});
        if (r < 0)
                return r;
        r = sd_bus_call(bus, m, CALL_TIMEOUT_USEC, &error, &reply);
        if (r < 0) {
                print_bus_error("ListUnitsByPatterns", &error, r);
                return r;
        }
        r = sd_bus_message_enter_container(reply, 'a', "(ssssssouso)");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(reply, 'r', "ssssssouso")) > 0) {
                r = sd_bus_message_read(reply, "s", &unit);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < n_ids; i++) {
                        size_t l = strlen(ids[i]);
                        if (strncmp(unit, "sandbox-", 8) == 0 && strncmp(unit + 8, ids[i], l) == 0 &&
                            (unit[8 + l] == '.' || unit[8 + l] == '-')) {
                                n++;
                                break;
                        }
                }
                r = sd_bus_message_skip(reply, "sssssouso");
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        *ret = n;
        return 0;
}

/* Of the ids we made, how many workspaces are left on disk? */
static size_t count_workspaces(char **ids, size_t n_ids) {
        size_t n = 0;
        for (size_t i = 0; i < n_ids; i++) {
                char p[PATH_MAX];
                struct stat st;
                snprintf(p, sizeof(p), WORKSPACE_DIR "/%s", ids[i]);
                if (lstat(p, &st) == 0)
                        n++;
        }
        return n;
}

/* Deleting many sandboxes one after the other takes as long as the slowest deletion times their number,
 * so they are deleted with up to DELETE_WINDOW calls in flight (the system bus allows 128 pending
 * replies per connection). A sandbox still being created (NotRunning) is retried a little later. */
#define DELETE_WINDOW  64
#define DELETE_RETRIES 100

typedef struct DeleteCall DeleteCall;
typedef struct DeleteBatch {
        DeleteCall *calls;
        size_t n, next, in_flight, failed, retry;
        Samples *latency;
        int error;
} DeleteBatch;

struct DeleteCall {
        DeleteBatch *batch;
        char *id;
        uint64_t t0;
        unsigned attempts;
        enum { DELETE_PENDING, DELETE_RETRY, DELETE_DONE, DELETE_FAILED } state;
};

static int on_delete_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        DeleteCall *c = userdata;
        DeleteBatch *b = c->batch;
        uint64_t t1 = now_nsec();

        b->in_flight--;
        if (!sd_bus_message_is_method_error(reply, NULL) ||
            sd_bus_message_is_method_error(reply, SANDBOXD_ERROR_NO_SUCH_SANDBOX)) {
                c->state = DELETE_DONE;
                made_forget(c->id);
                if (b->latency && samples_add(b->latency, nsec_to_ms(t1 - c->t0)) < 0)
                        b->error = -ENOMEM;
        } else if (sd_bus_message_is_method_error(reply, SANDBOXD_ERROR_NOT_RUNNING) &&
                   c->attempts < DELETE_RETRIES) {
                c->state = DELETE_RETRY;
                b->retry++;
        } else {
                const sd_bus_error *e = sd_bus_message_get_error(reply);
                fprintf(stderr, "DeleteSandbox %s failed: %s: %s\n", c->id, e->name, strna(e->message));
                c->state = DELETE_FAILED;
                b->failed++;
        }
        return 0;
}

static int delete_send(sd_bus *bus, DeleteCall *c) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                           SANDBOXD_MANAGER_INTERFACE, "DeleteSandbox");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "sa{sv}", c->id, 0);
        if (r < 0)
                return r;
        c->t0 = now_nsec();
        c->attempts++;
        c->state = DELETE_PENDING;
        r = sd_bus_call_async(bus, NULL, m, on_delete_reply, c, CALL_TIMEOUT_USEC);
        if (r < 0)
                return r;
        c->batch->in_flight++;
        return 0;
}

/* Deletes ids (not a pointer into the made list, which this changes). Returns how many could not be
 * deleted; latency, if given, gets each successful call's time from sending to reply. */
static size_t delete_many(sd_bus *bus, char **ids, size_t n, Samples *latency) {
        DeleteBatch b = {.n = n, .latency = latency};
        int r;

        b.calls = calloc(n, sizeof(DeleteCall));
        if (!b.calls)
                return n;
        for (size_t i = 0; i < n; i++)
                b.calls[i] = (DeleteCall){.batch = &b, .id = ids[i]};

        for (;;) {
                while (b.in_flight < DELETE_WINDOW && b.next < n) {
                        DeleteCall *c = &b.calls[b.next++];
                        r = delete_send(bus, c);
                        if (r < 0) {
                                fprintf(stderr, "DeleteSandbox %s could not be sent: %s\n", c->id,
                                        strerror(-r));
                                c->state = DELETE_FAILED;
                                b.failed++;
                        }
                }
                if (b.in_flight == 0 && b.next == n) {
                        if (b.retry == 0)
                                break;
                        /* only sandboxes still being created are left: their CreateSandbox ends soon */
                        (void) usleep(50 * 1000);
                        for (size_t i = 0; i < n; i++)
                                if (b.calls[i].state == DELETE_RETRY && b.in_flight < DELETE_WINDOW) {
                                        b.retry--;
                                        if (delete_send(bus, &b.calls[i]) < 0) {
                                                b.calls[i].state = DELETE_FAILED;
                                                b.failed++;
                                        }
                                }
                        continue;
                }
                r = sd_bus_process(bus, NULL);
                if (r < 0) {
                        fprintf(stderr, "Lost the bus while deleting sandboxes: %s\n", strerror(-r));
                        break;
                }
                if (r > 0)
                        continue;
                r = sd_bus_wait(bus, UINT64_MAX);
                if (r < 0 && r != -EINTR) {
                        fprintf(stderr, "Lost the bus while deleting sandboxes: %s\n", strerror(-r));
                        break;
                }
        }
        size_t failed = 0;
        for (size_t i = 0; i < n; i++)
                if (b.calls[i].state != DELETE_DONE)
                        failed++;
        free(b.calls);
        return failed;
}

/* Best effort: delete everything we made, and any sandbox with our name prefix that we never learnt
 * the id of (say, a CreateSandbox interrupted by a signal). Returns how many could not be deleted. */
static size_t cleanup_all(sd_bus *bus) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        if (!bus)
                return made.n;
        r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                               "ListSandboxes", &error, &reply, "");
        if (r >= 0 && sd_bus_message_enter_container(reply, 'a', "(ssssso)") >= 0) {
                const char *id, *name, *type, *state, *owner, *path;
                while (sd_bus_message_read(reply, "(ssssso)", &id, &name, &type, &state, &owner, &path) > 0)
                        if (strncmp(name, name_prefix, strlen(name_prefix)) == 0 && !made_contains(id))
                                (void) made_add(id);
        }
        if (made.n == 0)
                return 0;
        fprintf(stderr, "clean-up: deleting %zu sandboxes left over...\n", made.n);
        size_t n = made.n;
        char **ids = calloc(n, sizeof(char *));
        if (!ids)
                return n;
        for (size_t i = 0; i < n; i++)
                ids[i] = strdup(made.ids[i]);
        size_t failed = 0;
        for (size_t i = 0; i < n; i++)
                if (!ids[i])
                        failed++;
        if (failed == 0)
                failed = delete_many(bus, ids, n, NULL);
        for (size_t i = 0; i < n; i++)
                free(ids[i]);
        free(ids);
        return failed;
}

/* --- systemd-run, the obvious alternative ------------------------------------------------------------- */

static int run_systemd_run(void) {
        static char *const argv[] = {
                (char *) "systemd-run",
                (char *) "--scope",
                (char *) "--quiet",
                (char *) "-p",
                (char *) "TasksMax=256",
                (char *) "-p",
                (char *) "MemoryMax=1G",
                (char *) "-p",
                (char *) "RuntimeMaxSec=20",
                (char *) "/bin/true",
                NULL,
        };
        int status;

        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                execvp(argv[0], argv);
                _exit(127);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (!WIFEXITED(status))
                return -EPROTO;
        return WEXITSTATUS(status);
}

/* --- the floor: one bare transient scope, from this process, over this connection -------------------- */

/* What any scope-per-command design pays systemd: fork a child that waits, StartTransientUnit a scope
 * holding it with the same limits, wait for the job's JobRemoved, let the child exec /bin/true, reap
 * it. No namespaces, no confinement, no output capture: the gap between this and Exec is sandboxd's
 * own work; the gap between this and systemd-run is systemd-run's process and connection set-up. */

typedef struct Floor {
        sd_bus_slot *match;
        char job[256];         /* the job we wait for, once StartTransientUnit answered */
        char removed_job[256]; /* the last JobRemoved for a job of ours that arrived */
        char result[32];
        unsigned counter;
} Floor;

static Floor floor_state = {};

static int on_job_removed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        Floor *f = userdata;
        const char *job, *unit, *result;
        uint32_t id;

        if (sd_bus_message_read(m, "uoss", &id, &job, &unit, &result) < 0)
                return 0;
        if (strncmp(unit, name_prefix, strlen(name_prefix)) != 0)
                return 0; /* someone else's, sandboxd's for instance */
        snprintf(f->removed_job, sizeof(f->removed_job), "%s", job);
        snprintf(f->result, sizeof(f->result), "%s", result);
        return 0;
}

static int floor_setup(sd_bus *bus) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        /* The match first, then Subscribe (systemd sends JobRemoved only to subscribers). */
        r = sd_bus_match_signal(bus, &floor_state.match, "org.freedesktop.systemd1",
                                "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                                "JobRemoved", on_job_removed, &floor_state);
        if (r < 0)
                return r;
        r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "Subscribe", &error, NULL, "");
        if (r < 0)
                print_bus_error("systemd Subscribe", &error, r);
        return r;
}

static void floor_teardown(sd_bus *bus) {
        (void) sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                  "org.freedesktop.systemd1.Manager", "Unsubscribe", NULL, NULL, "");
        floor_state.match = sd_bus_slot_unref(floor_state.match);
}

static int run_floor(sd_bus *bus, uint64_t *ret_reply_nsec, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_close_pair_ int go[2] = {-EBADF, -EBADF};
        const char *job;
        char unit[128];
        int r, status;

        snprintf(unit, sizeof(unit), "%sfloor-%u.scope", name_prefix, floor_state.counter++);
        if (pipe2(go, O_CLOEXEC) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                char c;
                go[1] = safe_close(go[1]);
                if (read(go[0], &c, 1) != 1)
                        _exit(126); /* the parent gave up */
                execv("/bin/true", (char *[]){(char *) "/bin/true", NULL});
                _exit(127);
        }
        go[0] = safe_close(go[0]);

        r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                           "org.freedesktop.systemd1.Manager", "StartTransientUnit");
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", unit, "fail");
        if (r >= 0)
                r = sd_bus_message_append(m, "a(sv)", 5, "PIDs", "au", 1, (uint32_t) pid, "TasksMax", "t",
                                          REF_TASKS_MAX, "MemoryMax", "t", REF_MEMORY_MAX, "RuntimeMaxUSec",
                                          "t", REF_RUNTIME_MAX_SEC * USEC_PER_SEC, "CollectMode", "s",
                                          "inactive-or-failed");
        if (r >= 0)
                r = sd_bus_message_append(m, "a(sa(sv))", 0);
        uint64_t t0 = now_nsec();
        if (r >= 0)
                r = sd_bus_call(bus, m, CALL_TIMEOUT_USEC, error, &reply);
        *ret_reply_nsec = now_nsec() - t0;
        if (r >= 0)
                r = sd_bus_message_read(reply, "o", &job);
        if (r >= 0) {
                snprintf(floor_state.job, sizeof(floor_state.job), "%s", job);
                /* JobRemoved may already sit in the read queue: sd_bus_call keeps what it is not waiting
                 * for, and sd_bus_process hands it to the match. */
                while (!streq(floor_state.removed_job, floor_state.job)) {
                        r = sd_bus_process(bus, NULL);
                        if (r < 0)
                                break;
                        if (r > 0)
                                continue;
                        r = sd_bus_wait(bus, CALL_TIMEOUT_USEC);
                        if (r < 0 && r != -EINTR)
                                break;
                        if (r == 0) {
                                r = -ETIMEDOUT;
                                break;
                        }
                }
                if (r >= 0 && !streq(floor_state.result, "done"))
                        r = -EPROTO;
        }
        if (r >= 0 && write(go[1], "g", 1) != 1)
                r = -errno;
        go[1] = safe_close(go[1]); /* on failure, this makes the child exit */
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (r < 0)
                return r;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return -EPROTO;
        return 0;
}

/* --- the phases --------------------------------------------------------------------------------------- */

typedef struct Config {
        unsigned iterations, warmup, cycles, live;
        unsigned pause_ms; /* between create+delete pairs in the paced run */
        bool json;
} Config;

typedef struct Results {
        Samples exec, exec_cmd, sdrun; /* Exec client wall; of which the command; systemd-run wall */
        Samples floor, floor_reply;    /* a bare transient scope from this client; until systemd answered */
        Samples create, delete, cycle; /* create+delete pairs, one every pause_ms: each half, the pair */
        Samples burst_create, burst_delete, burst_cycle; /* the same, back to back */
        Samples live_create, live_delete; /* creating and deleting the K live sandboxes */
        unsigned live_wanted, live_made;
        double live_fill_ms, live_drain_ms; /* wall time to create them all, and to delete them all */
        double units_gone_ms; /* after the last DeleteSandbox reply, until systemd had collected the units */
        uint64_t rss_before_kib, rss_live_kib, rss_after_kib;
        size_t left_listed, left_units, left_workspaces, cleanup_failed;
        bool exec_done, cycle_done, live_done;
        char live_error[512];
        double load_start;
} Results;

static int exec_round(sd_bus *bus, int what, const char *id, bool measured, Results *res) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r, code = -1;
        uint64_t dur = 0, t0 = now_nsec(), t1;

        switch (what) {
        case 0:
                r = call_exec_true(bus, id, &code, &dur, &error);
                t1 = now_nsec();
                if (r < 0) {
                        print_bus_error("Exec", &error, r);
                        return r;
                }
                if (code != 0) {
                        fprintf(stderr, "Exec /bin/true exited with %d\n", code);
                        return -EPROTO;
                }
                if (measured && (samples_add(&res->exec, nsec_to_ms(t1 - t0)) < 0 ||
                                 samples_add(&res->exec_cmd, (double) dur / 1e3) < 0))
                        return -ENOMEM;
                return 0;
        case 1:
                r = run_systemd_run();
                t1 = now_nsec();
                if (r != 0) {
                        fprintf(stderr, "systemd-run --scope /bin/true failed: %s\n",
                                r < 0      ? strerror(-r)
                                : r == 127 ? "could not be executed"
                                           : "non-zero exit");
                        return r < 0 ? r : -EPROTO;
                }
                if (measured && samples_add(&res->sdrun, nsec_to_ms(t1 - t0)) < 0)
                        return -ENOMEM;
                return 0;
        default:
                r = run_floor(bus, &dur, &error);
                t1 = now_nsec();
                if (r < 0) {
                        print_bus_error("StartTransientUnit (bare scope)", &error, r);
                        return r;
                }
                if (measured && (samples_add(&res->floor, nsec_to_ms(t1 - t0)) < 0 ||
                                 samples_add(&res->floor_reply, nsec_to_ms(dur)) < 0))
                        return -ENOMEM;
                return 0;
        }
}

static int phase_exec(sd_bus *bus, const Config *cfg, Results *res) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        char id[64];
        int r;

        fprintf(stderr, "exec: creating a small sandbox...\n");
        r = call_create(bus, id, &error);
        if (r < 0) {
                print_bus_error("CreateSandbox", &error, r);
                return r;
        }
        r = floor_setup(bus);
        if (r < 0)
                return r;
        fprintf(stderr,
                "exec: %u warm-up rounds, then %u rounds of: Exec /bin/true in %s, systemd-run --scope "
                "/bin/true, a bare scope; interleaved...\n",
                cfg->warmup, cfg->iterations, id);
        for (unsigned i = 0; i < cfg->warmup + cfg->iterations && !interrupted && r >= 0; i++)
                /* Rotate the order too, so that none always follows another's clean-up. */
                for (int k = 0; k < 3 && r >= 0; k++)
                        r = exec_round(bus, (int) ((i + k) % 3), id, i >= cfg->warmup, res);
        floor_teardown(bus);
        if (r < 0)
                return r;
        if (interrupted)
                return -EINTR;
        r = call_delete(bus, id, &error);
        if (r < 0) {
                print_bus_error("DeleteSandbox", &error, r);
                return r;
        }
        res->exec_done = true;
        return 0;
}

static int cycle_run(sd_bus *bus, unsigned cycles, unsigned pause_ms, Samples *create, Samples *delete,
                     Samples *cycle) {
        int r;

        for (unsigned i = 0; i < cycles && !interrupted; i++) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                char id[64];
                if (pause_ms > 0)
                        (void) usleep(pause_ms * 1000);
                uint64_t t0 = now_nsec();
                r = call_create(bus, id, &error);
                uint64_t t1 = now_nsec();
                if (r < 0) {
                        print_bus_error("CreateSandbox", &error, r);
                        return r;
                }
                r = call_delete(bus, id, &error);
                uint64_t t2 = now_nsec();
                if (r < 0) {
                        print_bus_error("DeleteSandbox", &error, r);
                        return r;
                }
                if (samples_add(create, nsec_to_ms(t1 - t0)) < 0 || samples_add(delete, nsec_to_ms(t2 - t1)) < 0 ||
                    samples_add(cycle, nsec_to_ms(t2 - t0)) < 0)
                        return -ENOMEM;
        }
        return interrupted ? -EINTR : 0;
}

/* Paced first (one pair every pause_ms: the rate sandboxd's pool of sandboxes made ahead keeps up
 * with), then back to back (the pool runs dry after PoolSize= pairs and creation waits for systemd). */
static int phase_cycle(sd_bus *bus, const Config *cfg, Results *res) {
        int r;

        fprintf(stderr, "create+delete: %u pairs, one every %u ms...\n", cfg->cycles, cfg->pause_ms);
        r = cycle_run(bus, cfg->cycles, cfg->pause_ms, &res->create, &res->delete, &res->cycle);
        if (r < 0)
                return r;
        fprintf(stderr, "create+delete: %u pairs back to back...\n", cfg->cycles);
        (void) usleep(1000 * 1000); /* let the pool refill */
        r = cycle_run(bus, cfg->cycles, 0, &res->burst_create, &res->burst_delete, &res->burst_cycle);
        if (r < 0)
                return r;
        res->cycle_done = true;
        return 0;
}

static int phase_live(sd_bus *bus, const Config *cfg, Results *res) {
        _cleanup_free_ char **ids = NULL;
        pid_t pid;
        int r, ret = 0;

        res->live_wanted = cfg->live;
        ids = calloc(cfg->live + 1, sizeof(char *));
        if (!ids)
                return -ENOMEM;
        r = sandboxd_pid(bus, &pid);
        if (r < 0)
                return r;
        r = read_rss_kib(pid, &res->rss_before_kib);
        if (r < 0) {
                fprintf(stderr, "Could not read VmRSS of sandboxd (pid %d): %s\n", (int) pid, strerror(-r));
                return r;
        }
        fprintf(stderr, "live: sandboxd is pid %d, VmRSS %" PRIu64 " KiB; creating %u sandboxes...\n",
                (int) pid, res->rss_before_kib, cfg->live);
        uint64_t fill_t0 = now_nsec();
        for (unsigned i = 0; i < cfg->live && !interrupted; i++) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                char id[64];
                uint64_t t0 = now_nsec();
                r = call_create(bus, id, &error);
                uint64_t t1 = now_nsec();
                if (r < 0) {
                        print_bus_error("CreateSandbox", &error, r);
                        snprintf(res->live_error, sizeof(res->live_error),
                                 "CreateSandbox #%u failed: %s: %s", i + 1,
                                 sd_bus_error_is_set(&error) ? error.name : "errno",
                                 sd_bus_error_is_set(&error) ? strna(error.message) : strerror(-r));
                        ret = r;
                        break;
                }
                ids[res->live_made++] = strdup(id);
                if (!ids[res->live_made - 1]) {
                        res->live_made--;
                        ret = -ENOMEM;
                        break;
                }
                if (samples_add(&res->live_create, nsec_to_ms(t1 - t0)) < 0) {
                        ret = -ENOMEM;
                        break;
                }
                if ((i + 1) % 250 == 0)
                        fprintf(stderr, "live: %u made\n", i + 1);
        }
        res->live_fill_ms = nsec_to_ms(now_nsec() - fill_t0);
        if (interrupted && ret == 0)
                ret = -EINTR;

        /* Measured with whatever number we reached, even after a failure: it is what the report says. */
        r = read_rss_kib(pid, &res->rss_live_kib);
        if (r < 0) {
                fprintf(stderr, "Could not read VmRSS of sandboxd (pid %d): %s\n", (int) pid, strerror(-r));
                ret = ret ?: r;
        }
        fprintf(stderr, "live: %u live sandboxes, sandboxd VmRSS %" PRIu64 " KiB; deleting them...\n",
                res->live_made, res->rss_live_kib);

        uint64_t drain_t0 = now_nsec();
        size_t failed = delete_many(bus, ids, res->live_made, &res->live_delete);
        res->live_drain_ms = nsec_to_ms(now_nsec() - drain_t0);
        if (failed > 0) {
                fprintf(stderr, "live: %zu of %u sandboxes could not be deleted\n", failed, res->live_made);
                ret = ret ?: -EIO;
        }

        /* Gone means: not listed, no unit left, no workspace left. */
        r = count_listed(bus, ids, res->live_made, &res->left_listed);
        if (r < 0)
                ret = ret ?: r;
        /* DeleteSandbox answers once every process of the sandbox is gone; systemd collects the empty
         * units in the background. They must be gone soon after, not at once: poll for up to 60 s. */
        uint64_t units_t0 = now_nsec();
        for (;;) {
                r = count_units(bus, ids, res->live_made, &res->left_units);
                if (r < 0) {
                        ret = ret ?: r;
                        break;
                }
                if (res->left_units == 0 || interrupted || now_nsec() - units_t0 > UINT64_C(60) * 1000000000)
                        break;
                (void) usleep(100 * 1000);
        }
        res->units_gone_ms = nsec_to_ms(now_nsec() - units_t0);
        res->left_workspaces = count_workspaces(ids, res->live_made);
        if (read_rss_kib(pid, &res->rss_after_kib) < 0)
                res->rss_after_kib = 0;
        if (res->left_listed + res->left_units + res->left_workspaces > 0) {
                fprintf(stderr, "live: after deletion %zu still listed, %zu units and %zu workspaces left\n",
                        res->left_listed, res->left_units, res->left_workspaces);
                ret = ret ?: -EBUSY;
        }
        for (unsigned i = 0; i < res->live_made; i++)
                free(ids[i]);
        if (ret == 0)
                res->live_done = true;
        return ret;
}

/* --- the report --------------------------------------------------------------------------------------- */

static const char *met(bool ok) {
        return ok ? "met" : "NOT MET";
}

static void print_row(const char *what, const Stats *s) {
        if (s->n == 0) {
                printf("  %-40s %8s\n", what, "-");
                return;
        }
        printf("  %-40s %8.2f %8.2f %8.2f %8.2f %8.2f %6zu\n", what, s->p50, s->p90, s->p99, s->mean, s->max,
               s->n);
}

static void print_json_stats(const char *name, const Stats *s, bool last) {
        if (s->n == 0)
                printf("\"%s\":null%s", name, last ? "" : ",");
        else
                printf("\"%s\":{\"n\":%zu,\"p50_ms\":%.4f,\"p90_ms\":%.4f,\"p99_ms\":%.4f,\"mean_ms\":%.4f,"
                       "\"min_ms\":%.4f,\"max_ms\":%.4f}%s",
                       name, s->n, s->p50, s->p90, s->p99, s->mean, s->min, s->max, last ? "" : ",");
}

static void json_number(const char *name, double v, bool ok) {
        if (ok && isfinite(v))
                printf("\"%s\":%.4f,", name, v);
        else
                printf("\"%s\":null,", name);
}

/* The 1-minute load average, so that a report shows whether something else ran beside it. */
static double loadavg(void) {
        double l[1];
        return getloadavg(l, 1) == 1 ? l[0] : NAN;
}

static const char *json_bool(bool v, bool measured) {
        return !measured ? "null" : v ? "true" : "false";
}

static void report(const Config *cfg, const Results *res) {
        /* Does creation slow down as sandboxes pile up? The first and the last hundred of the fill. */
        size_t nfl = MIN(res->live_create.n, (size_t) 100);
        Samples first = {.v = res->live_create.v, .n = nfl},
                last = {.v = res->live_create.v + res->live_create.n - nfl, .n = nfl};
        Stats lc_first = samples_stats(&first), lc_last = samples_stats(&last);
        Stats fl = samples_stats(&res->floor), flr = samples_stats(&res->floor_reply);
        Stats ex = samples_stats(&res->exec), cmd = samples_stats(&res->exec_cmd),
              sr = samples_stats(&res->sdrun), cr = samples_stats(&res->create),
              de = samples_stats(&res->delete), cy = samples_stats(&res->cycle),
              lc = samples_stats(&res->live_create), ld = samples_stats(&res->live_delete),
              bcr = samples_stats(&res->burst_create), bde = samples_stats(&res->burst_delete),
              bcy = samples_stats(&res->burst_cycle);
        bool have_exec = ex.n > 0 && sr.n > 0;
        double ratio50 = have_exec ? sr.p50 / ex.p50 : NAN, ratio99 = have_exec ? sr.p99 / ex.p99 : NAN;
        bool have_rss = res->live_made > 0 && res->rss_live_kib > 0;
        double rss_mib = (double) res->rss_live_kib / 1024.0;
        bool rss_counts = have_rss && res->live_made >= TARGET_RSS_LIVE;

        bool t_ratio = have_exec && ratio50 >= TARGET_EXEC_RATIO;
        bool t_p50 = ex.n > 0 && ex.p50 <= TARGET_EXEC_P50_MS;
        bool t_cycle = cy.n > 0 && cy.p50 <= TARGET_CYCLE_P50_MS;
        bool t_rss = rss_counts && rss_mib <= TARGET_RSS_MIB;

        if (cfg->json) {
                printf("{\"iterations\":%u,\"warmup\":%u,\"cycles\":%u,\"live_wanted\":%u,\"live_made\":%u,",
                       cfg->iterations, cfg->warmup, cfg->cycles, res->live_wanted, res->live_made);
                printf("\"ncpu\":%ld,", sysconf(_SC_NPROCESSORS_ONLN));
                json_number("loadavg_1min_start", res->load_start, true);
                json_number("loadavg_1min_end", loadavg(), true);
                print_json_stats("exec", &ex, false);
                print_json_stats("exec_command_duration", &cmd, false);
                print_json_stats("systemd_run", &sr, false);
                print_json_stats("bare_scope", &fl, false);
                print_json_stats("bare_scope_start_reply", &flr, false);
                json_number("ratio_p50", ratio50, have_exec);
                json_number("ratio_p99", ratio99, have_exec);
                print_json_stats("create", &cr, false);
                print_json_stats("delete", &de, false);
                print_json_stats("create_delete", &cy, false);
                printf("\"create_delete_pause_ms\":%u,", cfg->pause_ms);
                print_json_stats("burst_create", &bcr, false);
                print_json_stats("burst_delete", &bde, false);
                print_json_stats("burst_create_delete", &bcy, false);
                print_json_stats("live_create", &lc, false);
                print_json_stats("live_create_first100", &lc_first, false);
                print_json_stats("live_create_last100", &lc_last, false);
                print_json_stats("live_delete", &ld, false);
                json_number("live_fill_s", res->live_fill_ms / 1e3, res->live_made > 0);
                json_number("live_drain_s", res->live_drain_ms / 1e3, res->live_made > 0);
                json_number("live_units_gone_s", res->units_gone_ms / 1e3, res->live_made > 0);
                printf("\"delete_window\":%d,", DELETE_WINDOW);
                json_number("rss_before_mib", (double) res->rss_before_kib / 1024.0,
                            res->rss_before_kib > 0);
                json_number("rss_live_mib", rss_mib, have_rss);
                json_number("rss_after_mib", (double) res->rss_after_kib / 1024.0, res->rss_after_kib > 0);
                printf("\"left_after_delete\":{\"listed\":%zu,\"units\":%zu,\"workspaces\":%zu},",
                       res->left_listed, res->left_units, res->left_workspaces);
                printf("\"cleanup_failed\":%zu,", res->cleanup_failed);
                if (res->live_error[0]) {
                        printf("\"live_error\":\"");
                        for (const char *p = res->live_error; *p; p++)
                                if (*p == '"' || *p == '\\')
                                        printf("\\%c", *p);
                                else if ((unsigned char) *p < 0x20)
                                        printf("\\u%04x", (unsigned char) *p);
                                else
                                        putchar(*p);
                        printf("\",");
                } else
                        printf("\"live_error\":null,");
                printf("\"targets_met\":{\"exec_ratio_p50_ge_5\":%s,\"exec_p50_le_2ms\":%s,"
                       "\"create_delete_p50_le_10ms\":%s,\"rss_at_1000_le_16mib\":%s}}\n",
                       json_bool(t_ratio, have_exec), json_bool(t_p50, ex.n > 0),
                       json_bool(t_cycle, cy.n > 0), json_bool(t_rss, rss_counts));
                return;
        }

        printf("\nsandboxd benchmark (%ld CPUs, load average %.2f at the start and %.2f at the end; client "
               "wall "
               "time in ms, nearest-rank percentiles)\n\n",
               sysconf(_SC_NPROCESSORS_ONLN), res->load_start, loadavg());
        printf("  %-40s %8s %8s %8s %8s %8s %6s\n", "", "p50", "p90", "p99", "mean", "max", "n");
        print_row("Exec /bin/true (sandboxd)", &ex);
        print_row("  of which the command ran", &cmd);
        print_row("systemd-run --scope /bin/true", &sr);
        print_row("bare scope from this client (floor)", &fl);
        print_row("  of which StartTransientUnit's reply", &flr);
        char b[64];
        snprintf(b, sizeof(b), "CreateSandbox (a pair every %u ms)", cfg->pause_ms);
        print_row(b, &cr);
        print_row("DeleteSandbox", &de);
        print_row("CreateSandbox+DeleteSandbox", &cy);
        print_row("CreateSandbox (back to back)", &bcr);
        print_row("DeleteSandbox", &bde);
        print_row("CreateSandbox+DeleteSandbox", &bcy);
        snprintf(b, sizeof(b), "CreateSandbox, filling to %u", res->live_made);
        print_row(b, &lc);
        snprintf(b, sizeof(b), "DeleteSandbox, draining %u, %d at once", res->live_made, DELETE_WINDOW);
        print_row(b, &ld);
        printf("\n");
        if (res->live_made > 0)
                printf("  %u live sandboxes: created one by one in %.1f s (p50 %.2f ms for the first %zu, "
                       "%.2f ms "
                       "for the last %zu), deleted %d at a time in %.1f s\n",
                       res->live_made, res->live_fill_ms / 1e3, lc_first.p50, nfl, lc_last.p50, nfl,
                       DELETE_WINDOW, res->live_drain_ms / 1e3);
        if (have_exec)
                printf("  ratio systemd-run / sandboxd:  p50 %.1fx   p99 %.1fx\n", ratio50, ratio99);
        printf("  sandboxd VmRSS: %.1f MiB before, %.1f MiB with %u live sandboxes, %.1f MiB after deleting "
               "them\n",
               (double) res->rss_before_kib / 1024.0, rss_mib, res->live_made,
               (double) res->rss_after_kib / 1024.0);
        if (res->live_made > 0)
                printf("  after deletion: %zu listed, %zu workspaces left at once; %zu units left %.1f s later "
                       "(systemd collects them in the background)\n",
                       res->left_listed, res->left_workspaces, res->left_units, res->units_gone_ms / 1e3);
        if (res->live_error[0])
                printf("  live sandboxes: stopped at %u of %u: %s\n", res->live_made, res->live_wanted,
                       res->live_error);
        if (res->cleanup_failed > 0)
                printf("  clean-up: %zu sandboxes could not be deleted\n", res->cleanup_failed);

        printf("\n  targets (issue 3)                              measured     verdict\n");
        if (have_exec)
                printf("    Exec >= 5x faster than systemd-run (p50)    %8.1fx     %s\n", ratio50,
                       met(t_ratio));
        else
                printf("    Exec >= 5x faster than systemd-run (p50)    %9s     not measured\n", "-");
        if (ex.n > 0)
                printf("    Exec p50 <= 2 ms                            %8.2f ms   %s\n", ex.p50,
                       met(t_p50));
        else
                printf("    Exec p50 <= 2 ms                            %9s     not measured\n", "-");
        if (cy.n > 0)
                printf("    CreateSandbox+DeleteSandbox p50 <= 10 ms    %8.2f ms   %s (paced; back to back "
                       "%.2f ms)\n",
                       cy.p50, met(t_cycle), bcy.p50);
        else
                printf("    CreateSandbox+DeleteSandbox p50 <= 10 ms    %9s     not measured\n", "-");
        if (rss_counts)
                printf("    sandboxd RSS <= 16 MiB at 1000 live         %8.1f MiB  %s\n", rss_mib,
                       met(t_rss));
        else if (have_rss)
                printf("    sandboxd RSS <= 16 MiB at 1000 live         %8.1f MiB  not measured (only %u "
                       "live)\n",
                       rss_mib, res->live_made);
        else
                printf("    sandboxd RSS <= 16 MiB at 1000 live         %9s     not measured\n", "-");
}

/* --- main --------------------------------------------------------------------------------------------- */

static void help(void) {
        printf("bench-sandboxd [OPTIONS]\n\n"
               "Measures sandboxd over one persistent system-bus connection, beside systemd-run --scope.\n"
               "Needs a running sandboxd and the right to use it (root or sandbox-admin) and to run\n"
               "systemd-run --scope (root). Prints a report; exits 0 even if a target is missed, non-zero\n"
               "only if something failed to run.\n\n"
               "  -n --iterations=N   Exec and systemd-run rounds, alternating (default 300)\n"
               "  -w --warmup=N       unmeasured rounds first (default 10)\n"
               "  -c --cycles=M       CreateSandbox+DeleteSandbox pairs, paced and then back to back\n"
               "                      (default 50 each)\n"
               "  -p --pause=MS       pause before each paced pair (default 100)\n"
               "  -l --live=K         sandboxes alive at once for the RSS figure (default 1000; 0 skips)\n"
               "     --json           print the figures as one JSON object\n"
               "  -h --help           show this help\n");
}

static int parse_uint(const char *s, unsigned max, unsigned *ret) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (errno != 0 || end == s || *end || s[0] == '-' || v > max)
                return -EINVAL;
        *ret = (unsigned) v;
        return 0;
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                {"iterations", required_argument, NULL, 'n'},
                {"warmup", required_argument, NULL, 'w'},
                {"cycles", required_argument, NULL, 'c'},
                {"live", required_argument, NULL, 'l'},
                {"pause", required_argument, NULL, 'p'},
                {"json", no_argument, NULL, 'j'},
                {"help", no_argument, NULL, 'h'},
                {},
        };
        Config cfg = {.iterations = 300, .warmup = 10, .cycles = 50, .live = 1000, .pause_ms = 100};
        Results res = {};
        sd_bus *bus = NULL;
        int c, r, ret = 0;

        while ((c = getopt_long(argc, argv, "n:w:c:l:p:h", options, NULL)) >= 0) {
                unsigned *target = c == 'n'   ? &cfg.iterations
                                   : c == 'w' ? &cfg.warmup
                                   : c == 'c' ? &cfg.cycles
                                   : c == 'l' ? &cfg.live
                                   : c == 'p' ? &cfg.pause_ms
                                              : NULL;
                if (target) {
                        if (parse_uint(optarg, 1000000, target) < 0) {
                                fprintf(stderr, "Invalid number for -%c: '%s'\n", c, optarg);
                                return 2;
                        }
                } else if (c == 'j')
                        cfg.json = true;
                else if (c == 'h') {
                        help();
                        return 0;
                } else
                        return 2;
        }
        if (optind < argc) {
                fprintf(stderr, "Unexpected argument '%s'.\n", argv[optind]);
                return 2;
        }

        struct sigaction sa = {.sa_handler = on_signal};
        (void) sigaction(SIGINT, &sa, NULL);
        (void) sigaction(SIGTERM, &sa, NULL);
        (void) sigaction(SIGHUP, &sa, NULL);
        snprintf(name_prefix, sizeof(name_prefix), "bench-%d-", (int) getpid());

        res.load_start = loadavg();
        r = sd_bus_open_system(&bus);
        if (r < 0) {
                fprintf(stderr, "Could not connect to the system bus: %s\n", strerror(-r));
                return 1;
        }

        if (cfg.iterations > 0 && (r = phase_exec(bus, &cfg, &res)) < 0)
                ret = r;
        if (ret == 0 && cfg.cycles > 0 && (r = phase_cycle(bus, &cfg, &res)) < 0)
                ret = r;
        if (ret == 0 && cfg.live > 0 && (r = phase_live(bus, &cfg, &res)) < 0)
                ret = r;

        res.cleanup_failed = cleanup_all(bus);
        if (res.cleanup_failed > 0)
                ret = ret ?: -EBUSY;
        report(&cfg, &res);
        if (interrupted)
                fprintf(stderr, "Interrupted by signal %d.\n", (int) interrupted);

        for (size_t i = 0; i < made.n; i++)
                free(made.ids[i]);
        free(made.ids);
        Samples *all[] = {&res.exec,   &res.exec_cmd, &res.sdrun, &res.floor,       &res.floor_reply,
                          &res.create, &res.delete,   &res.cycle, &res.live_create, &res.live_delete,
                          &res.burst_create, &res.burst_delete, &res.burst_cycle};
        for (size_t i = 0; i < ELEMENTSOF(all); i++)
                samples_done(all[i]);
        sd_bus_flush_close_unref(bus);
        return ret < 0 ? 1 : 0;
}
