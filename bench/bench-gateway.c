/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Benchmark: the reference cycle through sandbox-gatewayd's REST API beside systemd-run and a shell, and exec throughput. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-bus.h>

#include "io-util.h"
#include "macro.h"
#include "sandboxd-bus.h"

/* The targets. */
#define TARGET_CYCLE_P50_MS  25.0
#define TARGET_EXECS_PER_SEC 500.0

/* The reference task and the limits both sides run it under (the small type's: TasksMax=256,
 * MemoryMax=1G; RuntimeMaxSec=20 through timeout_seconds). */
#define TASK_PY "print(sum(range(1000)))\n"
#define TASK_OUT "499500\n"

static volatile sig_atomic_t interrupted = 0;

static void on_signal(int sig) {
        interrupted = sig;
}

static uint64_t now_nsec(void) {
        struct timespec ts;
        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * UINT64_C(1000000000) + (uint64_t) ts.tv_nsec;
}

/* --- statistics ---------------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return (x > y) - (x < y);
}

/* Nearest rank: the smallest value with at least q of them at or below it. */
static double percentile(double *v, size_t n, double q) {
        if (n == 0)
                return NAN;
        qsort(v, n, sizeof(double), cmp_double);
        size_t rank = (size_t) ceil(q * (double) n);
        return v[rank > 0 ? rank - 1 : 0];
}

/* --- a minimal HTTP/1.1 keep-alive client ------------------------------------------------------ */

typedef struct Conn {
        int fd;
        struct sockaddr_in sa;
        char buf[65536];
        size_t have;
} Conn;

static int conn_open(Conn *c) {
        int one = 1;

        c->have = 0;
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c->fd < 0)
                return -errno;
        (void) setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(c->fd, (struct sockaddr *) &c->sa, sizeof(c->sa)) < 0) {
                int r = -errno;
                c->fd = safe_close(c->fd);
                return r;
        }
        return 0;
}

static int fill(Conn *c) {
        if (c->have == sizeof(c->buf))
                return -E2BIG;
        ssize_t k = read(c->fd, c->buf + c->have, sizeof(c->buf) - c->have);
        if (k < 0)
                return errno == EINTR ? 0 : -errno;
        if (k == 0)
                return -ECONNRESET;
        c->have += (size_t) k;
        return 0;
}

/* One request, one response (Content-Length bodies only, which is what the gateway sends for
 * non-streaming answers). The body is copied into ret_body (NUL-terminated) if given. */
static int http(Conn *c, const char *method, const char *path, const char *auth, const char *body,
                int *ret_status, char **ret_body) {
        char head[1024];
        size_t blen = body ? strlen(body) : 0;
        int r, n;

        if (c->fd < 0 && (r = conn_open(c)) < 0)
                return r;
        n = snprintf(head, sizeof(head),
                     "%s %s HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer %s\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                     method, path, auth, blen);
        r = loop_write(c->fd, head, (size_t) n);
        if (r >= 0 && blen)
                r = loop_write(c->fd, body, blen);
        if (r < 0)
                goto fail;

        char *end;
        for (;;) {
                end = memmem(c->buf, c->have, "\r\n\r\n", 4);
                if (end)
                        break;
                if ((r = fill(c)) < 0)
                        goto fail;
        }
        size_t hlen = (size_t) (end - c->buf) + 4;
        int status = 0;
        unsigned long long clen = 0;
        bool close_after = false;
        if (sscanf(c->buf, "HTTP/1.%*d %d", &status) != 1) {
                r = -EBADMSG;
                goto fail;
        }
        for (char *p = c->buf; p < end;) {
                char *eol = memmem(p, (size_t) (end - p) + 2, "\r\n", 2);
                if (!eol)
                        break;
                if (strncasecmp(p, "Content-Length:", 15) == 0)
                        clen = strtoull(p + 15, NULL, 10);
                else if (strncasecmp(p, "Connection:", 11) == 0 && strcasestr(p, "close") && strcasestr(p, "close") < eol)
                        close_after = true;
                else if (strncasecmp(p, "Transfer-Encoding:", 18) == 0) {
                        r = -EPROTONOSUPPORT;
                        goto fail;
                }
                p = eol + 2;
        }
        if (clen > sizeof(c->buf) - hlen) {
                r = -E2BIG;
                goto fail;
        }
        while (c->have < hlen + clen)
                if ((r = fill(c)) < 0)
                        goto fail;
        if (ret_body) {
                char *b = strndup(c->buf + hlen, clen);
                if (!b) {
                        r = -ENOMEM;
                        goto fail;
                }
                *ret_body = b;
        }
        memmove(c->buf, c->buf + hlen + clen, c->have - hlen - clen);
        c->have -= hlen + clen;
        if (close_after)
                c->fd = safe_close(c->fd);
        *ret_status = status;
        return 0;

fail:
        c->fd = safe_close(c->fd);
        return r;
}

/* The value of "key":"…" in a flat JSON text (ids only: no escapes to handle). */
static char *json_string_field(const char *js, const char *key) {
        char pat[64];
        snprintf(pat, sizeof(pat), "\"%s\":\"", key);
        const char *p = js ? strstr(js, pat) : NULL;
        if (!p)
                return NULL;
        p += strlen(pat);
        const char *e = strchr(p, '"');
        return e ? strndup(p, (size_t) (e - p)) : NULL;
}

/* --- the key ------------------------------------------------------------------------------------- */

static int mint_admin_key(sd_bus *bus, char **ret_secret, char **ret_id) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *secret, *js;
        int r;

        r = sd_bus_call_method(bus, GATEWAY_BUS_NAME, GATEWAY_BUS_PATH, GATEWAY_KEYS_INTERFACE, "CreateKey",
                               &error, &reply, "a{sv}", 3, "preset", "s", "admin", "ttl_seconds", "t",
                               UINT64_C(3600), "name", "s", "bench-gateway");
        if (r < 0) {
                fprintf(stderr, "bench-gateway: CreateKey: %s\n", error.message ?: strerror(-r));
                return r;
        }
        r = sd_bus_message_read(reply, "ss", &secret, &js);
        if (r < 0)
                return r;
        *ret_secret = strdup(secret);
        *ret_id = json_string_field(js, "id");
        return *ret_secret && *ret_id ? 0 : -ENOMEM;
}

/* --- the two cycles -------------------------------------------------------------------------- */

/* Each step's time (ms) of the last REST cycle: create, PUT, exec, delete. */
enum { STEP_CREATE, STEP_PUT, STEP_EXEC, STEP_DELETE, _STEP_MAX };
static const char *const step_names[_STEP_MAX] = { "POST /v1/sandboxes", "PUT .../files", "POST .../exec (python3)",
                                                   "DELETE /v1/sandboxes/{id}" };

static int rest_cycle(Conn *c, const char *key, double steps[static _STEP_MAX]) {
        _cleanup_free_ char *body = NULL, *id = NULL;
        char path[256];
        int status, r;
        uint64_t t0 = now_nsec(), t1, t2, t3;

        r = http(c, "POST", "/v1/sandboxes", key, "{\"type\":\"small\",\"ttl_seconds\":900}", &status, &body);
        if (r < 0 || status != 201)
                return fprintf(stderr, "bench-gateway: create: %s %d %s\n", strerror(-MIN(r, 0)), status, strna(body)),
                       -EIO;
        id = json_string_field(body, "id");
        if (!id)
                return -EBADMSG;
        free(body);
        body = NULL;
        t1 = now_nsec();

        snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=/tmp/task.py", id);
        r = http(c, "PUT", path, key, TASK_PY, &status, NULL);
        if (r < 0 || status >= 300)
                fprintf(stderr, "bench-gateway: PUT: %s %d\n", strerror(-MIN(r, 0)), status), r = -EIO;
        t2 = now_nsec();

        if (r >= 0) {
                snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
                r = http(c, "POST", path, key, "{\"argv\":[\"python3\",\"/tmp/task.py\"],\"timeout_seconds\":20}",
                         &status, &body);
                if (r < 0 || status != 200 || !strstr(body, "\"exit_code\":0") || !strstr(body, "499500"))
                        fprintf(stderr, "bench-gateway: exec: %s %d %s\n", strerror(-MIN(r, 0)), status, strna(body)),
                                r = -EIO;
        }
        t3 = now_nsec();

        int status2 = 0;
        snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
        int r2 = http(c, "DELETE", path, key, NULL, &status2, NULL);
        if (r2 < 0 || status2 >= 300) {
                fprintf(stderr, "bench-gateway: delete %s: %s %d\n", id, strerror(-MIN(r2, 0)), status2);
                return -EIO;
        }
        steps[STEP_CREATE] = (double) (t1 - t0) / 1e6;
        steps[STEP_PUT] = (double) (t2 - t1) / 1e6;
        steps[STEP_EXEC] = (double) (t3 - t2) / 1e6;
        steps[STEP_DELETE] = (double) (now_nsec() - t3) / 1e6;
        return r;
}

/* The same cycle as a person would script it: a directory, the file, systemd-run with the same limits,
 * removal. One shell per cycle, as one would run it. */
static int shell_cycle(unsigned n) {
        char script[1024];
        int pipefd[2];
        pid_t pid;

        snprintf(script, sizeof(script),
                 "set -e; d=/var/tmp/bench-gateway-%d-%u; mkdir \"$d\"; printf '%%s\\n' 'print(sum(range(1000)))' "
                 "> \"$d/task.py\"; systemd-run --quiet --scope -p TasksMax=256 -p MemoryMax=1G -p RuntimeMaxSec=20 "
                 "python3 \"$d/task.py\"; rm -rf \"$d\"",
                 (int) getpid(), n);
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                dup2(pipefd[1], STDOUT_FILENO);
                execl("/bin/sh", "sh", "-c", script, (char *) NULL);
                _exit(127);
        }
        close(pipefd[1]);
        char out[256];
        size_t have = 0;
        ssize_t k;
        while ((k = read(pipefd[0], out + have, sizeof(out) - 1 - have)) > 0)
                have += (size_t) k;
        close(pipefd[0]);
        out[have] = 0;
        int status;
        if (waitpid(pid, &status, 0) < 0)
                return -errno;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !streq(out, TASK_OUT)) {
                fprintf(stderr, "bench-gateway: shell cycle failed (status %d, output '%s')\n", status, out);
                return -EIO;
        }
        return 0;
}

/* --- throughput -------------------------------------------------------------------------------- */

/* One client of a throughput phase: what it calls (HTTP: sa, key, path; the bus: sandbox; systemd-run:
 * nothing), until when, and where it counts. */
typedef struct Worker {
        pthread_t thread;
        struct sockaddr_in sa;
        const char *key, *path;
        const char *sandbox;
        uint64_t deadline;
        atomic_uint_fast64_t *ok, *errors;
} Worker;

static void *worker_main(void *p) {
        Worker *w = p;
        Conn *c = calloc(1, sizeof(Conn));

        if (!c)
                return NULL;
        c->fd = -EBADF;
        c->sa = w->sa;
        while (now_nsec() < w->deadline && !interrupted) {
                _cleanup_free_ char *body = NULL;
                int status = 0;
                int r = http(c, "POST", w->path, w->key, "{\"argv\":[\"true\"]}", &status, &body);
                if (r >= 0 && status == 200 && strstr(body, "\"exit_code\":0"))
                        atomic_fetch_add(w->ok, 1);
                else {
                        if (atomic_fetch_add(w->errors, 1) < 5)
                                fprintf(stderr, "bench-gateway: exec: %s %d %s\n", strerror(-MIN(r, 0)), status,
                                        strna(body));
                }
        }
        safe_close(c->fd);
        free(c);
        return NULL;
}

/* The same load straight on sandboxd's bus interface, one connection per client: what the gateway adds. */
static void *bus_worker_main(void *p) {
        Worker *w = p;
        sd_bus *bus = NULL;

        if (sd_bus_open_system(&bus) < 0) {
                atomic_fetch_add(w->errors, 1);
                return NULL;
        }
        while (now_nsec() < w->deadline && !interrupted) {
                sd_bus_error error = SD_BUS_ERROR_NULL;
                sd_bus_message *reply = NULL;
                int exit_code = -1;
                int r = sd_bus_call_method(bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                           SANDBOXD_MANAGER_INTERFACE, "Exec", &error, &reply, "sasa{sv}",
                                           w->sandbox, 1, "true", 0);
                if (r >= 0)
                        r = sd_bus_message_read(reply, "i", &exit_code);
                if (r >= 0 && exit_code == 0)
                        atomic_fetch_add(w->ok, 1);
                else if (atomic_fetch_add(w->errors, 1) < 5)
                        fprintf(stderr, "bench-gateway: bus Exec: %s\n", error.message ?: strerror(-MIN(r, 0)));
                sd_bus_error_free(&error);
                sd_bus_message_unref(reply);
        }
        sd_bus_flush_close_unref(bus);
        return NULL;
}

/* The obvious alternative under the same load: each client runs `systemd-run --scope` with the same
 * limits and `true`, again and again, as a script or an agent framework without sandboxd would. */
extern char **environ;

static void *run_worker_main(void *p) {
        Worker *w = p;
        char *argv[] = { (char *) "systemd-run", (char *) "--quiet",        (char *) "--scope",
                         (char *) "-p",          (char *) "TasksMax=256",   (char *) "-p",
                         (char *) "MemoryMax=1G", (char *) "-p",            (char *) "RuntimeMaxSec=20",
                         (char *) "true",        NULL };

        while (now_nsec() < w->deadline && !interrupted) {
                pid_t pid;
                int status = 0;
                int r = posix_spawnp(&pid, "systemd-run", NULL, NULL, argv, environ);
                if (r == 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0)
                        atomic_fetch_add(w->ok, 1);
                else if (atomic_fetch_add(w->errors, 1) < 5)
                        fprintf(stderr, "bench-gateway: systemd-run: %s, status %d\n", strerror(r), status);
        }
        return NULL;
}

/* Runs one throughput phase: n clients of fn, each a copy of proto sending to sandbox i mod m (paths
 * for HTTP, ids for the bus), for seconds; returns how long it took, in seconds. */
static double run_phase(const Worker *proto, unsigned n, char **paths, char **ids, unsigned m, unsigned seconds,
                        void *(*fn)(void *)) {
        Worker *w = calloc(n, sizeof(Worker));
        uint64_t t0 = now_nsec();
        unsigned started = 0;

        for (unsigned i = 0; w && i < n; i++) {
                w[i] = *proto;
                w[i].path = paths[i % m];
                w[i].sandbox = ids[i % m];
                w[i].deadline = t0 + (uint64_t) seconds * UINT64_C(1000000000);
                if (pthread_create(&w[i].thread, NULL, fn, &w[i]) != 0)
                        break;
                started++;
        }
        for (unsigned i = 0; i < started; i++)
                pthread_join(w[i].thread, NULL);
        free(w);
        return (double) (now_nsec() - t0) / 1e9;
}

/* --- CPU per exec ----------------------------------------------------------------------------- */

/* The processes an Exec goes through, and the CPU time each spent (user + system, its own threads,
 * not its reaped children) between two snapshots. CPU time per exec stays put when the machine is
 * shared, where execs per second do not. */
enum { CPU_SANDBOXD, CPU_SYSTEMD, CPU_DBUS, CPU_AUDITD, CPU_GATEWAYD, CPU_BENCH, CPU_COMMANDS, _CPU_MAX };
static const char *const cpu_names[_CPU_MAX] = {
        "sandboxd", "systemd (PID 1)", "dbus-daemon", "sandbox-auditd", "sandbox-gatewayd",
        "bench-gateway (the clients)", "the commands (sandbox.slice)",
};

typedef struct CpuSnapshot {
        double ms[_CPU_MAX]; /* NAN: not known */
        double busy_ms, all_ms; /* the whole machine (/proc/stat), anyone's work */
} CpuSnapshot;

static pid_t cpu_pids[_CPU_MAX];

static double proc_cpu_ms(pid_t pid) {
        char path[64], buf[1024];
        unsigned long long utime, stime;

        if (pid <= 0)
                return NAN;
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NAN;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
                return NAN;
        buf[n] = 0;
        /* After the command name (which may hold anything), fields 3 on: utime and stime are 14 and 15. */
        const char *p = strrchr(buf, ')');
        if (!p ||
            sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
                return NAN;
        return (double) (utime + stime) * 1000.0 / (double) sysconf(_SC_CLK_TCK);
}

/* What the sandboxes' processes used: the commands themselves, from their fork in sandboxd to their
 * exit (cgroup v1 cpuacct on a hybrid host, cgroup2's cpu.stat otherwise). */
static double commands_cpu_ms(void) {
        unsigned long long v;
        char buf[256];
        FILE *f = fopen("/sys/fs/cgroup/cpuacct/sandbox.slice/cpuacct.usage", "re");

        if (f) {
                int k = fscanf(f, "%llu", &v);
                fclose(f);
                return k == 1 ? (double) v / 1e6 : NAN;
        }
        /* cgroup2 counts every cgroup's usage_usec with or without its cpu controller: the unified
         * hierarchy of a hybrid host, or the only one. */
        f = fopen("/sys/fs/cgroup/unified/sandbox.slice/cpu.stat", "re");
        if (!f)
                f = fopen("/sys/fs/cgroup/sandbox.slice/cpu.stat", "re");
        if (!f)
                return NAN;
        double ms = NAN;
        while (fgets(buf, sizeof(buf), f))
                if (sscanf(buf, "usage_usec %llu", &v) == 1)
                        ms = (double) v / 1e3;
        fclose(f);
        return ms;
}

static pid_t bus_name_pid(sd_bus *bus, const char *name) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        uint32_t pid = 0;

        if (sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                               "GetConnectionUnixProcessID", NULL, &reply, "s", name) < 0 ||
            sd_bus_message_read(reply, "u", &pid) < 0)
                return 0;
        return (pid_t) pid;
}

static void cpu_find_pids(sd_bus *bus) {
        char comm[64] = "";
        FILE *f;

        cpu_pids[CPU_SANDBOXD] = bus_name_pid(bus, SANDBOXD_BUS_NAME);
        cpu_pids[CPU_AUDITD] = bus_name_pid(bus, AUDITD_BUS_NAME);
        cpu_pids[CPU_GATEWAYD] = bus_name_pid(bus, GATEWAY_BUS_NAME);
        cpu_pids[CPU_DBUS] = bus_name_pid(bus, "org.freedesktop.DBus");
        if (cpu_pids[CPU_DBUS] <= 0 && (f = fopen("/run/dbus/pid", "re"))) {
                int pid;
                if (fscanf(f, "%d", &pid) == 1)
                        cpu_pids[CPU_DBUS] = pid;
                fclose(f);
        }
        /* PID 1 only where it is the systemd that makes the scopes (the harness's, or the host's). */
        if ((f = fopen("/proc/1/comm", "re"))) {
                if (fgets(comm, sizeof(comm), f) && strncmp(comm, "systemd", 7) == 0)
                        cpu_pids[CPU_SYSTEMD] = 1;
                fclose(f);
        }
        cpu_pids[CPU_BENCH] = getpid();
}

static void machine_cpu_ms(double *ret_busy, double *ret_all) {
        unsigned long long v[10] = {};
        FILE *f = fopen("/proc/stat", "re");

        *ret_busy = *ret_all = NAN;
        if (!f)
                return;
        /* user nice system idle iowait irq softirq steal (guest time is in user already) */
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
                   &v[5], &v[6], &v[7]) == 8) {
                double tick = 1000.0 / (double) sysconf(_SC_CLK_TCK);
                unsigned long long idle = v[3] + v[4], all = 0;
                for (size_t i = 0; i < 8; i++)
                        all += v[i];
                *ret_busy = (double) (all - idle) * tick;
                *ret_all = (double) all * tick;
        }
        fclose(f);
}

static void cpu_snapshot(CpuSnapshot *s) {
        for (size_t i = 0; i < _CPU_MAX; i++)
                s->ms[i] = i == CPU_COMMANDS ? commands_cpu_ms() : proc_cpu_ms(cpu_pids[i]);
        machine_cpu_ms(&s->busy_ms, &s->all_ms);
}

static void cpu_print(const char *what, const CpuSnapshot *a, const CpuSnapshot *b, uint64_t execs) {
        double total = 0;

        printf("  CPU ms per exec, %s (%" PRIu64 " execs):\n", what, execs);
        if (execs == 0)
                return;
        for (size_t i = 0; i < _CPU_MAX; i++) {
                double d = b->ms[i] - a->ms[i];
                if (isnan(d)) {
                        printf("    %-34s      n/a\n", cpu_names[i]);
                        continue;
                }
                printf("    %-34s %8.3f\n", cpu_names[i], d / (double) execs);
                total += d;
        }
        printf("    %-34s %8.3f\n", "all of these", total / (double) execs);
        double busy = b->busy_ms - a->busy_ms, all = b->all_ms - a->all_ms;
        if (!isnan(busy) && all > 0)
                printf("    %-34s %8.3f   (%.0f %% of %ld CPUs busy: anyone's work, the kernel's threads "
                       "too)\n", "the whole machine", busy / (double) execs, 100.0 * busy / all,
                       sysconf(_SC_NPROCESSORS_ONLN));
}

/* --- main ----------------------------------------------------------------------------------------- */

static void usage(FILE *f) {
        fputs("bench-gateway [--cycles N] [--clients N] [--sandboxes M] [--seconds S] [--port P]\n\n"
              "The reference cycle (create, PUT task.py, exec python3, delete) through sandbox-gatewayd's REST\n"
              "API beside the same cycle with a shell and systemd-run --scope, alternating, in one run; then\n"
              "exec throughput with N keep-alive clients spread over M sandboxes (default 1: all on one),\n"
              "through the gateway and straight on the bus, beside N clients each running systemd-run --scope.\n"
              "Needs root (a key over the bus, and systemd-run), sandboxd and sandbox-gatewayd running on\n"
              "127.0.0.1:PORT.\n",
              f);
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },       { "cycles", required_argument, NULL, 'n' },
                { "clients", required_argument, NULL, 'c' }, { "seconds", required_argument, NULL, 's' },
                { "port", required_argument, NULL, 'p' },   { "sandboxes", required_argument, NULL, 'm' },
                {},
        };
        unsigned cycles = 100, clients = 64, seconds = 10, port = 8790, warmup = 3, nsandboxes = 1;
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_free_ char *key = NULL, *key_id = NULL;
        int c, r, ret = EXIT_SUCCESS;

        while ((c = getopt_long(argc, argv, "hn:c:s:p:m:", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        usage(stdout);
                        return 0;
                case 'n':
                        cycles = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 'c':
                        clients = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 's':
                        seconds = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 'p':
                        port = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 'm':
                        nsandboxes = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                default:
                        usage(stderr);
                        return 2;
                }
        if (cycles == 0 || clients == 0 || clients > 4096 || nsandboxes == 0 ||
            nsandboxes > clients || seconds == 0 || port == 0 || port > 65535) {
                usage(stderr);
                return 2;
        }
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        signal(SIGPIPE, SIG_IGN);

        r = sd_bus_open_system(&bus);
        if (r < 0) {
                fprintf(stderr, "bench-gateway: system bus: %s\n", strerror(-r));
                return EXIT_FAILURE;
        }
        r = mint_admin_key(bus, &key, &key_id);
        if (r < 0)
                return EXIT_FAILURE;
        cpu_find_pids(bus);

        Conn *conn = calloc(1, sizeof(Conn));
        double *rest = calloc(cycles, sizeof(double)), *shell = calloc(cycles, sizeof(double));
        double *step_samples[_STEP_MAX];
        for (size_t i = 0; i < _STEP_MAX; i++)
                if (!(step_samples[i] = calloc(cycles, sizeof(double))))
                        return EXIT_FAILURE;
        if (!conn || !rest || !shell)
                return EXIT_FAILURE;
        conn->fd = -EBADF;
        conn->sa = (struct sockaddr_in) { .sin_family = AF_INET, .sin_port = htons((uint16_t) port),
                                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

        /* Alternate the two, so that whatever else the machine does falls on both alike. */
        fprintf(stderr, "bench-gateway: %u warm-up and %u measured cycles of each kind…\n", warmup, cycles);
        size_t nrest = 0, nshell = 0;
        for (unsigned i = 0; i < warmup + cycles && !interrupted; i++) {
                double steps[_STEP_MAX];
                uint64_t t0 = now_nsec();
                r = rest_cycle(conn, key, steps);
                uint64_t t1 = now_nsec();
                if (r < 0) {
                        ret = EXIT_FAILURE;
                        break;
                }
                r = shell_cycle(i);
                uint64_t t2 = now_nsec();
                if (r < 0) {
                        ret = EXIT_FAILURE;
                        break;
                }
                if (i >= warmup) {
                        for (size_t k = 0; k < _STEP_MAX; k++)
                                step_samples[k][nrest] = steps[k];
                        rest[nrest++] = (double) (t1 - t0) / 1e6;
                        shell[nshell++] = (double) (t2 - t1) / 1e6;
                }
        }

        /* Throughput: many keep-alive clients on one sandbox (or spread over several), `true` again and
         * again. */
        atomic_uint_fast64_t ok = 0, errors = 0, bus_ok = 0, bus_errors = 0, run_ok = 0, run_errors = 0;
        double elapsed = 0, bus_elapsed = 0, run_elapsed = 0;
        CpuSnapshot cpu0, cpu1, cpu2, cpu3;
        char **sb = calloc(nsandboxes, sizeof(char *)), **paths = calloc(nsandboxes, sizeof(char *));
        unsigned nsb = 0;
        if (!sb || !paths)
                return EXIT_FAILURE;
        for (; ret == EXIT_SUCCESS && !interrupted && nsb < nsandboxes; nsb++) {
                _cleanup_free_ char *sb_body = NULL;
                int status = 0;
                r = http(conn, "POST", "/v1/sandboxes", key, "{\"type\":\"small\",\"ttl_seconds\":900}", &status,
                         &sb_body);
                sb[nsb] = r >= 0 && status == 201 ? json_string_field(sb_body, "id") : NULL;
                if (!sb[nsb] || asprintf(&paths[nsb], "/v1/sandboxes/%s/exec", sb[nsb]) < 0) {
                        fprintf(stderr, "bench-gateway: could not create a throughput sandbox (%d)\n", status);
                        free(sb[nsb]);
                        ret = EXIT_FAILURE;
                        break;
                }
        }
        if (ret == EXIT_SUCCESS && !interrupted) {
                fprintf(stderr, "bench-gateway: %u clients on %u sandbox(es) exec `true` for %u s…\n", clients,
                        nsandboxes, seconds);
                cpu_snapshot(&cpu0);
                elapsed = run_phase(&(Worker) { .sa = conn->sa, .key = key, .ok = &ok, .errors = &errors }, clients,
                                    paths, sb, nsandboxes, seconds, worker_main);
                cpu_snapshot(&cpu1);
        }
        if (ret == EXIT_SUCCESS && !interrupted) {
                fprintf(stderr, "bench-gateway: %u bus clients call Exec `true` for %u s…\n", clients, seconds);
                bus_elapsed = run_phase(&(Worker) { .ok = &bus_ok, .errors = &bus_errors }, clients, paths, sb,
                                        nsandboxes, seconds, bus_worker_main);
                cpu_snapshot(&cpu2);
        }
        if (ret == EXIT_SUCCESS && !interrupted) {
                fprintf(stderr, "bench-gateway: %u clients run systemd-run --scope true for %u s…\n", clients, seconds);
                run_elapsed = run_phase(&(Worker) { .ok = &run_ok, .errors = &run_errors }, clients, paths, sb,
                                        nsandboxes, seconds, run_worker_main);
                cpu_snapshot(&cpu3);
        }
        for (unsigned i = 0; i < nsb; i++) {
                int status = 0;
                char del[128];
                snprintf(del, sizeof(del), "/v1/sandboxes/%s", sb[i]);
                if (http(conn, "DELETE", del, key, NULL, &status, NULL) < 0 || status >= 300)
                        ret = EXIT_FAILURE;
                free(sb[i]);
                free(paths[i]);
        }
        free(sb);
        free(paths);

        (void) sd_bus_call_method(bus, GATEWAY_BUS_NAME, GATEWAY_BUS_PATH, GATEWAY_KEYS_INTERFACE,
                                  "RevokeKey", NULL, NULL, "s", key_id);

        double r50 = percentile(rest, nrest, 0.5), r99 = percentile(rest, nrest, 0.99);
        double s50 = percentile(shell, nshell, 0.5), s99 = percentile(shell, nshell, 0.99);
        double rate = elapsed > 0 ? (double) ok / elapsed : NAN;
        printf("reference cycle (create, PUT task.py, exec python3, delete), %zu cycles each, alternating:\n", nrest);
        printf("  %-44s p50 %8.2f ms   p99 %8.2f ms\n", "REST through sandbox-gatewayd", r50, r99);
        for (size_t k = 0; k < _STEP_MAX; k++) {
                char label[64];
                snprintf(label, sizeof(label), "  of which %s", step_names[k]);
                printf("  %-44s p50 %8.2f ms   p99 %8.2f ms\n", label, percentile(step_samples[k], nrest, 0.5),
                       percentile(step_samples[k], nrest, 0.99));
                free(step_samples[k]);
        }
        printf("  %-44s p50 %8.2f ms   p99 %8.2f ms\n", "shell + systemd-run --scope", s50, s99);
        printf("  ratio (shell / REST)                         p50 %8.2f      p99 %8.2f\n", s50 / r50, s99 / r99);
        printf("exec throughput, %u keep-alive clients on %u sandbox(es), %.1f s: %.0f execs/s, %" PRIuFAST64
               " ok, %" PRIuFAST64 " errors\n",
               clients, nsandboxes, elapsed, rate, (uint_fast64_t) ok, (uint_fast64_t) errors);
        double bus_rate = bus_elapsed > 0 ? (double) bus_ok / bus_elapsed : NAN;
        printf("the same straight on sandboxd's bus, %u connections, %.1f s: %.0f execs/s, %" PRIuFAST64 " ok, %" PRIuFAST64
               " errors; gateway / bus: %.2f\n",
               clients, bus_elapsed, bus_rate, (uint_fast64_t) bus_ok, (uint_fast64_t) bus_errors, rate / bus_rate);
        double run_rate = run_elapsed > 0 ? (double) run_ok / run_elapsed : NAN;
        printf("the obvious alternative, %u clients each running systemd-run --scope true, %.1f s: %.0f runs/s, %"
               PRIuFAST64 " ok, %" PRIuFAST64 " errors\n",
               clients, run_elapsed, run_rate, (uint_fast64_t) run_ok, (uint_fast64_t) run_errors);
        printf("ratio sandboxd (through the gateway) / systemd-run: %.2f; straight on the bus / systemd-run: %.2f\n",
               rate / run_rate, bus_rate / run_rate);
        if (elapsed > 0)
                cpu_print("through the gateway", &cpu0, &cpu1, (uint64_t) ok + errors);
        if (bus_elapsed > 0)
                cpu_print("straight on the bus", &cpu1, &cpu2, (uint64_t) bus_ok + bus_errors);
        if (run_elapsed > 0)
                cpu_print("with systemd-run (its own processes are in none of the rows)", &cpu2, &cpu3,
                          (uint64_t) run_ok + run_errors);
        printf("targets: cycle p50 <= %.0f ms: %s; >= %.0f execs/s: %s; 0 errors: %s\n", TARGET_CYCLE_P50_MS,
               r50 <= TARGET_CYCLE_P50_MS ? "met" : "NOT MET", TARGET_EXECS_PER_SEC,
               rate >= TARGET_EXECS_PER_SEC ? "met" : "NOT MET", errors == 0 && ok > 0 ? "met" : "NOT MET");
        if (run_errors > 0)
                ret = EXIT_FAILURE;

        free(rest);
        free(shell);
        safe_close(conn->fd);
        free(conn);
        return interrupted ? 130 : ret;
}
