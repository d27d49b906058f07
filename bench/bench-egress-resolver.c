/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Benchmark: a name lookup through the egress resolver beside the same query sent straight to its upstream.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "egress-nft.h"
#include "egress-resolver.h"
#include "macro.h"

#define DNSMASQ "/usr/sbin/dnsmasq"
#define NAME    "bench.example.test."
/* --nft: the firewall table of one sandbox, in a network namespace of the benchmark's own. */
#define SANDBOX_ID "sb_benchaaaaa"

static uint64_t now_nsec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

typedef struct Stats {
        double p50, p90, p99, mean, max;
        size_t n;
} Stats;

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

/* Nearest-rank percentiles, as the other benchmarks. */
static Stats stats_of(double *v, size_t n) {
        Stats s = {.n = n};
        double sum = 0;

        if (n == 0)
                return s;
        qsort(v, n, sizeof(double), cmp_double);
        for (size_t i = 0; i < n; i++)
                sum += v[i];
        s.p50 = v[(size_t) ceil(0.50 * (double) n) - 1];
        s.p90 = v[(size_t) ceil(0.90 * (double) n) - 1];
        s.p99 = v[(size_t) ceil(0.99 * (double) n) - 1];
        s.mean = sum / (double) n;
        s.max = v[n - 1];
        return s;
}

/* ---- The resolver, on its own event loop in a thread (as on sandboxd's) ---- */

typedef struct Served {
        sd_event *event;
        EgressResolver *resolver;
        EgressPolicy policy;
        uint64_t allowed;
        int stop_fd;
} Served;

/* The second resolver's userdata is its Firewall; the policy is the same. */
static const EgressPolicy *nft_policy = NULL;
static const EgressPolicy *get_policy_nft(void *userdata) {
        return nft_policy;
}

static const EgressPolicy *get_policy(void *userdata) {
        return &((Served *) userdata)->policy;
}

/* sandboxd applies egress_nft_render_allow_address() here; the benchmark measures the resolver alone. */
static int allow_address(void *userdata, int family, const void *addr, uint64_t timeout_usec) {
        ((Served *) userdata)->allowed++;
        return 0;
}

typedef struct Firewall {
        EgressNft *nft;
        uint64_t applied;
} Firewall;

/* As sandboxd will: the answer's address joins the sandbox's set (one nft transaction) before it is sent. */
static int allow_address_nft(void *userdata, int family, const void *addr, uint64_t timeout_usec) {
        Firewall *fw = userdata;
        _cleanup_free_ char *text = NULL;
        int r = egress_nft_render_allow_address(SANDBOX_ID, family, addr, timeout_usec, &text);

        if (r < 0)
                return r;
        r = egress_nft_run(fw->nft, text, NULL);
        if (r < 0)
                return r;
        fw->applied++;
        return 0;
}

static int loopback_up(void) {
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr = {.ifr_name = "lo"};

        if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                return -errno;
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        return ioctl(fd, SIOCSIFFLAGS, &ifr) < 0 ? -errno : 0;
}

static int on_stop(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

static void *serve(void *userdata) {
        Served *sv = userdata;
        sd_event_source *stop = NULL;

        if (sd_event_add_io(sv->event, &stop, sv->stop_fd, EPOLLIN, on_stop, NULL) >= 0)
                (void) sd_event_loop(sv->event);
        sd_event_source_disable_unref(stop);
        return NULL;
}

/* ---- dnsmasq, the upstream ---- */

static pid_t start_dnsmasq(struct sockaddr_in *ret) {
        char port[32];
        socklen_t sl = sizeof(*ret);
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        pid_t pid;

        *ret = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (fd < 0 || bind(fd, (struct sockaddr *) ret, sizeof(*ret)) < 0 ||
            getsockname(fd, (struct sockaddr *) ret, &sl) < 0)
                return -1;
        close(fd);
        snprintf(port, sizeof(port), "--port=%u", ntohs(ret->sin_port));
        pid = fork();
        if (pid == 0) {
                (void) prctl(PR_SET_PDEATHSIG, SIGTERM);
                execl(DNSMASQ, "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", port,
                      "--listen-address=127.0.0.1", "--bind-interfaces", "--no-resolv", "--no-hosts",
                      "--pid-file=", "--local-ttl=300", "--log-facility=/dev/null", "--local=/example.test/",
                      "--host-record=bench.example.test,203.0.113.10", (char *) NULL);
                _exit(127);
        }
        return pid;
}

/* One lookup over UDP from fd (connected): the time to the answer in ms, or a negative value on failure. */
static double lookup(int fd, const uint8_t *msg, size_t n, uint8_t *buf) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        uint64_t t0 = now_nsec();
        ssize_t k;

        if (send(fd, msg, n, 0) != (ssize_t) n)
                return -1;
        if (poll(&pfd, 1, 5000) <= 0)
                return -1;
        k = recv(fd, buf, 65535, 0);
        if (k < LDNS_HEADER_SIZE || LDNS_ID_WIRE(buf) != LDNS_ID_WIRE(msg) || LDNS_RCODE_WIRE(buf) != 0 ||
            LDNS_ANCOUNT(buf) != 1)
                return -1;
        return (double) (now_nsec() - t0) / 1e6;
}

static int connected(const struct sockaddr_in *a) {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (const struct sockaddr *) a, sizeof(*a)) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

static void usage(void) {
        printf("bench-egress-resolver [-n N] [-w N] [--nft] [--json]\n\n"
               "A name lookup (A, UDP) through the egress resolver beside the same query sent straight to "
               "its\n"
               "upstream (dnsmasq on 127.0.0.1, started by the benchmark), alternating, one at a time.\n\n"
               "  -n, --iterations N   measured lookups of each kind (default 2000)\n"
               "  -w, --warmup N       unmeasured lookups of each kind first (default 100)\n"
               "      --nft            also through a second resolver whose answers are applied to a "
               "sandbox's\n"
               "                       nftables set first, as sandboxd does (root: the benchmark runs in a\n"
               "                       network namespace of its own, with sandboxd's table in it)\n"
               "      --json           the figures as one JSON object\n");
}

int main(int argc, char **argv) {
        static const struct option options[] = {
                {"iterations", required_argument, NULL, 'n'},
                {"warmup", required_argument, NULL, 'w'},
                {"json", no_argument, NULL, 'j'},
                {"nft", no_argument, NULL, 'f'},
                {"help", no_argument, NULL, 'h'},
                {},
        };
        unsigned iterations = 2000, warmup = 100;
        bool json = false, with_nft = false;
        Firewall fw = {};
        EgressResolver *resolver_nft = NULL;
        struct sockaddr_in at_nft = {};
        int fd_nft = -1;
        double *through_nft = NULL;
        Served sv = {};
        struct sockaddr_in up, at;
        struct sockaddr_storage ups;
        int stop[2] = {-1, -1}, fd_direct = -1, fd_resolver = -1, c, rc = EXIT_FAILURE;
        pid_t dnsmasq = -1;
        pthread_t thread;
        bool threaded = false;
        double *direct = NULL, *through = NULL;
        uint8_t *buf = malloc(65535), *wire = NULL;
        size_t wn;
        double load[3] = {};

        while ((c = getopt_long(argc, argv, "n:w:h", options, NULL)) >= 0)
                switch (c) {
                case 'n':
                        iterations = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 'w':
                        warmup = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 'j':
                        json = true;
                        break;
                case 'f':
                        with_nft = true;
                        break;
                case 'h':
                        usage();
                        return EXIT_SUCCESS;
                default:
                        usage();
                        return 2;
                }
        if (iterations == 0) {
                fprintf(stderr, "bench-egress-resolver: --iterations must be at least 1\n");
                return 2;
        }
        if (access(DNSMASQ, X_OK) < 0) {
                fprintf(stderr, "bench-egress-resolver: %s is missing (Debian: dnsmasq-base)\n", DNSMASQ);
                return EXIT_FAILURE;
        }
        direct = calloc(iterations, sizeof(double));
        through = calloc(iterations, sizeof(double));
        through_nft = calloc(iterations, sizeof(double));
        if (!buf || !direct || !through || !through_nft)
                goto finish;
        if (with_nft) {
                /* Our own network namespace: sandboxd's table there touches nothing of the host's. dnsmasq
                 * (started next) shares it. */
                if (unshare(CLONE_NEWNET) < 0 || loopback_up() < 0) {
                        fprintf(stderr,
                                "bench-egress-resolver: --nft needs root (a network namespace): %m\n");
                        goto finish;
                }
        }

        dnsmasq = start_dnsmasq(&up);
        if (dnsmasq < 0)
                goto finish;
        memcpy(&ups, &up, sizeof(up));
        if (egress_policy_add(&sv.policy, true, "bench.example.test", NULL) < 0 ||
            sd_event_new(&sv.event) < 0)
                goto finish;
        EgressResolverConfig config = {
                .listen = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000002)},
                .upstreams = &ups,
                .n_upstreams = 1,
                .get_policy = get_policy,
                .allow_address = allow_address,
                .userdata = &sv,
        };
        if (egress_resolver_new(sv.event, &config, &sv.resolver) < 0) {
                fprintf(stderr, "bench-egress-resolver: could not bind the resolver on 127.0.0.2\n");
                goto finish;
        }
        egress_resolver_local_address(sv.resolver, &at);
        if (with_nft) {
                char ifname[IFNAMSIZ], *table = NULL, *why = NULL;
                EgressNftSandbox sb = {.id = SANDBOX_ID, .ifname = ifname, .policy = &sv.policy};
                int k;

                (void) egress_ifname_from_id(SANDBOX_ID, ifname);
                (void) inet_pton(AF_INET, "10.98.0.1", &sb.host_address);
                (void) inet_pton(AF_INET, "10.98.0.2", &sb.address);
                k = egress_nft_new(&fw.nft);
                if (k >= 0)
                        k = egress_nft_render_table(NULL, &sb, 1, &table);
                if (k >= 0)
                        k = egress_nft_run(fw.nft, table, &why);
                free(table);
                if (k < 0) {
                        fprintf(stderr, "bench-egress-resolver: the nftables table: %s\n",
                                why ?: strerror(-k));
                        free(why);
                        goto finish;
                }
                EgressResolverConfig c2 = config;
                c2.listen.sin_addr.s_addr = htonl(0x7f000003);
                c2.allow_address = allow_address_nft;
                c2.get_policy = get_policy_nft;
                c2.userdata = &fw;
                if (egress_resolver_new(sv.event, &c2, &resolver_nft) < 0) {
                        fprintf(stderr, "bench-egress-resolver: could not bind the resolver on 127.0.0.3\n");
                        goto finish;
                }
                egress_resolver_local_address(resolver_nft, &at_nft);
                nft_policy = &sv.policy;
        }
        if (pipe2(stop, O_CLOEXEC) < 0)
                goto finish;
        sv.stop_fd = stop[0];
        if (pthread_create(&thread, NULL, serve, &sv) != 0)
                goto finish;
        threaded = true;

        ldns_pkt *q =
                ldns_pkt_query_new(ldns_dname_new_frm_str(NAME), LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, LDNS_RD);
        if (!q || ldns_pkt2wire(&wire, q, &wn) != LDNS_STATUS_OK)
                goto finish;
        ldns_pkt_free(q);
        fd_direct = connected(&up);
        fd_resolver = connected(&at);
        if (fd_direct < 0 || fd_resolver < 0)
                goto finish;
        if (with_nft && (fd_nft = connected(&at_nft)) < 0)
                goto finish;

        /* dnsmasq is up when it answers. */
        for (unsigned i = 0; i < 200 && lookup(fd_direct, wire, wn, buf) < 0; i++)
                (void) usleep(20000);

        (void) getloadavg(load, 1);
        unsigned kinds = with_nft ? 3 : 2;
        int fds[3] = {fd_direct, fd_resolver, fd_nft};
        static const char *const kind_names[3] = {"direct", "through the resolver",
                                                  "through the resolver + nft"};
        for (unsigned i = 0; i < warmup + iterations; i++) {
                double t[3];
                /* Interleaved; which goes first rotates every round. */
                wire[0] = (uint8_t) (i >> 8), wire[1] = (uint8_t) i;
                for (unsigned j = 0; j < kinds; j++) {
                        unsigned k = (i + j) % kinds;
                        t[k] = lookup(fds[k], wire, wn, buf);
                        if (t[k] < 0) {
                                fprintf(stderr, "bench-egress-resolver: lookup %u failed (%s)\n", i,
                                        kind_names[k]);
                                goto finish;
                        }
                }
                if (i >= warmup) {
                        direct[i - warmup] = t[0];
                        through[i - warmup] = t[1];
                        if (with_nft)
                                through_nft[i - warmup] = t[2];
                }
        }

        Stats sd = stats_of(direct, iterations), st = stats_of(through, iterations),
              sn = stats_of(through_nft, with_nft ? iterations : 0);
        double extra_nft = sn.p50 - sd.p50;
        double extra = st.p50 - sd.p50;
        if (json) {
                printf("{\"iterations\":%u,\"load\":%.2f,\"direct\":{\"p50\":%.4f,\"p90\":%.4f,\"p99\":%.4f,"
                       "\"mean\":%.4f,\"max\":%.4f},\"resolver\":{\"p50\":%.4f,\"p90\":%.4f,\"p99\":%.4f,"
                       "\"mean\":%.4f,\"max\":%.4f},\"ratio_p50\":%.3f,\"extra_p50_ms\":%.4f,\"addresses_"
                       "opened\":%" PRIu64 ",\"nft\":%s",
                       iterations, load[0], sd.p50, sd.p90, sd.p99, sd.mean, sd.max, st.p50, st.p90, st.p99,
                       st.mean, st.max, st.p50 / sd.p50, extra, sv.allowed, with_nft ? "{" : "null}\n");
                if (with_nft)
                        printf("\"p50\":%.4f,\"p90\":%.4f,\"p99\":%.4f,\"mean\":%.4f,\"max\":%.4f,\"ratio_"
                               "p50\":%.3f,"
                               "\"extra_p50_ms\":%.4f,\"applied\":%" PRIu64 "}}\n",
                               sn.p50, sn.p90, sn.p99, sn.mean, sn.max, sn.p50 / sd.p50, extra_nft,
                               fw.applied);
        } else {
                printf("egress resolver benchmark (load average %.2f at the start; client wall time in ms, "
                       "nearest-rank percentiles)\n\n",
                       load[0]);
                printf("                                            p50      p90      p99     mean      max "
                       "     n\n");
                printf("  A lookup, straight to dnsmasq        %8.3f %8.3f %8.3f %8.3f %8.3f %6zu\n", sd.p50,
                       sd.p90, sd.p99, sd.mean, sd.max, sd.n);
                printf("  A lookup, through the resolver       %8.3f %8.3f %8.3f %8.3f %8.3f %6zu\n", st.p50,
                       st.p90, st.p99, st.mean, st.max, st.n);
                if (with_nft)
                        printf("  A lookup, through the resolver + nft %8.3f %8.3f %8.3f %8.3f %8.3f %6zu\n",
                               sn.p50, sn.p90, sn.p99, sn.mean, sn.max, sn.n);
                printf("\n  ratio resolver / direct: p50 %.2fx   p99 %.2fx;  addresses opened: %" PRIu64
                       "\n",
                       st.p50 / sd.p50, st.p99 / sd.p99, sv.allowed);
                if (with_nft)
                        printf("  ratio resolver + nft / direct: p50 %.2fx   p99 %.2fx;  nft transactions: "
                               "%" PRIu64 "\n",
                               sn.p50 / sd.p50, sn.p99 / sd.p99, fw.applied);
                printf("\n  target (issue 23)                                  measured     verdict\n");
                printf("    lookup through the resolver <= +1 ms p50       %+8.3f ms  %s\n", extra,
                       extra <= 1.0 ? "met" : "NOT MET");
                if (with_nft)
                        printf("    the same, firewall update included             %+8.3f ms  %s\n",
                               extra_nft, extra_nft <= 1.0 ? "met" : "NOT MET");
        }
        rc = EXIT_SUCCESS;
finish:
        if (threaded) {
                (void) write(stop[1], "x", 1);
                pthread_join(thread, NULL);
        }
        egress_resolver_free(sv.resolver);
        egress_resolver_free(resolver_nft);
        egress_nft_free(fw.nft);
        sd_event_unref(sv.event);
        egress_policy_done(&sv.policy);
        if (dnsmasq > 0) {
                kill(dnsmasq, SIGTERM);
                (void) waitpid(dnsmasq, NULL, 0);
        }
        safe_close(fd_direct);
        safe_close(fd_resolver);
        safe_close(fd_nft);
        safe_close(stop[0]);
        safe_close(stop[1]);
        free(direct);
        free(through);
        free(through_nft);
        free(buf);
        free(wire);
        return rc;
}
