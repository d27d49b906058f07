/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests egress-nft: the rendered scripts, then (as root, in network namespaces of its own) the table
 * applied, listed back by nft, and traffic between veth'd namespaces it makes: allowed, denied, counted. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "egress-nft.h"
#include "macro.h"
#include "test-util.h"

#define SB_A "sb_aaaaaaaaaa"
#define SB_B "sb_bbbbbbbbbb"
#define IF_A "sbx-aaaaaaaaaa"
#define IF_B "sbx-bbbbbbbbbb"

static const char *nft_binary = NULL;

static EgressNftSandbox sandbox(const char *id, const char *ifname, const char *host, const char *addr,
                                const EgressPolicy *p) {
        EgressNftSandbox s = {.id = id, .ifname = ifname, .policy = p};

        if (inet_pton(AF_INET, host, &s.host_address) != 1 || inet_pton(AF_INET, addr, &s.address) != 1)
                abort();
        return s;
}

static void test_render(void) {
        _cleanup_(egress_policy_donep) EgressPolicy p = EGRESS_POLICY_INIT;
        _cleanup_free_ char *t = NULL, *one = NULL, *rm = NULL, *add = NULL;
        char ifname[IFNAMSIZ];
        EgressCidr pool;

        CHECK_INT(egress_ifname_from_id(SB_A, ifname), 0);
        CHECK_STR(ifname, IF_A);
        CHECK_INT(egress_ifname_from_id("sb_x", ifname), -EINVAL);
        CHECK_INT(egress_ifname_from_id("eth0", ifname), -EINVAL);

        CHECK_INT(egress_cidr_parse("10.213.0.0/16", &pool, NULL), 0);
        CHECK_INT(egress_policy_add(&p, true, "203.0.113.0/24", NULL), 0);
        CHECK_INT(egress_policy_add(&p, true, "pypi.org", NULL), 0);
        CHECK_INT(egress_policy_add(&p, true, "2001:db8::/32", NULL), 0);
        CHECK_INT(egress_policy_add(&p, false, "203.0.113.128/25", NULL), 0);
        EgressNftSandbox s = sandbox(SB_A, IF_A, "10.213.0.1", "10.213.0.2", &p);

        CHECK_INT(egress_nft_render_table(&pool, &s, 1, &t), 0);
        CHECK(t &&
              strstr(t, "add table inet sandboxd\ndelete table inet sandboxd\nadd table inet sandboxd\n"));
        CHECK(t && strstr(t, "add element inet sandboxd pool4 { 10.213.0.0/16 }"));
        CHECK(t && strstr(t, "169.254.0.0/16"));
        CHECK(t && strstr(t, "add element inet sandboxd " SB_A "_allow4 { 203.0.113.0/24 }"));
        CHECK(t && strstr(t, "add element inet sandboxd " SB_A "_deny4 { 203.0.113.128/25 }"));
        CHECK(t && !strstr(t, "2001:db8")); /* IPv6 is dropped whole in this step */
        CHECK(t && strstr(t, "ip saddr != 10.213.0.2 counter name \"" SB_A "_denied\" drop"));
        CHECK(t &&
              strstr(t, "add rule inet sandboxd host_" SB_A " ip daddr 10.213.0.1 meta l4proto { tcp, udp } "
                        "th dport 53 accept"));
        CHECK(t &&
              strstr(t, "add element inet sandboxd host_dispatch { \"" IF_A "\" : jump host_" SB_A " }"));
        /* Default deny: the chain ends in one drop, no accept-all. */
        CHECK(t && !strstr(t, "out_" SB_A " counter name \"" SB_A "_allowed\" accept"));
        CHECK(t && strstr(t, "out_" SB_A " counter name \"" SB_A "_denied\" drop"));

        p.default_action = EGRESS_DEFAULT_ALLOW;
        CHECK_INT(egress_nft_render_sandbox(&s, &one), 0);
        CHECK(one && strstr(one, "out_" SB_A " counter name \"" SB_A "_allowed\" accept"));
        CHECK(one && !strstr(one, "delete table"));
        CHECK(one && !strstr(one, "flush set inet sandboxd " SB_A "_dyn4")); /* the resolver's kept */
        /* SetNetworkPolicy: the resolver's set emptied, in the same script (one transaction). */
        _cleanup_free_ char *flushed = NULL;
        EgressNftSandbox fl = s;
        fl.flush_dynamic = true;
        CHECK_INT(egress_nft_render_sandbox(&fl, &flushed), 0);
        CHECK(flushed && strstr(flushed, "add set inet sandboxd " SB_A "_dyn4 { type ipv4_addr; flags timeout; }\n"
                                         "flush set inet sandboxd " SB_A "_dyn4\n"));
        CHECK(one && strstr(one, "flush set inet sandboxd " SB_A "_allow4"));

        /* EgressRateMax=: a limit before the first accept; none without it */
        CHECK(one && !strstr(one, "limit rate"));
        _cleanup_free_ char *limited = NULL;
        EgressNftSandbox r = s;
        r.rate_max = 65536;
        CHECK_INT(egress_nft_render_sandbox(&r, &limited), 0);
        CHECK(limited && strstr(limited, "add rule inet sandboxd out_" SB_A " limit rate over 65536 bytes/second "
                                         "counter name \"" SB_A "_denied\" drop\nadd rule inet sandboxd out_" SB_A
                                         " ct state established,related"));

        /* With an NFLOG group: the policy's denials go through deny_<id>, logged a few a second with the id
         * as the prefix; the ones no agent dialled (spoofed, over the rate) are not logged. */
        _cleanup_free_ char *logged = NULL;
        EgressNftSandbox lg = s;
        lg.nflog_group = 2323;
        p.default_action = EGRESS_DEFAULT_DENY;
        CHECK_INT(egress_nft_render_sandbox(&lg, &logged), 0);
        CHECK(logged && strstr(logged, "add rule inet sandboxd deny_" SB_A " limit rate 50/second burst 50 packets "
                                       "log prefix \"" SB_A "\" group 2323\nadd rule inet sandboxd deny_" SB_A
                                       " counter name \"" SB_A "_denied\" drop\n"));
        CHECK(logged && strstr(logged, "out_" SB_A " ip daddr @" SB_A "_deny4 goto deny_" SB_A "\n"));
        CHECK(logged && strstr(logged, "out_" SB_A " ip daddr @fixed4 goto deny_" SB_A "\n"));
        CHECK(logged && strstr(logged, "out_" SB_A " ip daddr @pool4 goto deny_" SB_A "\n"));
        CHECK(logged && strstr(logged, "add rule inet sandboxd out_" SB_A " goto deny_" SB_A "\n"));
        CHECK(logged && strstr(logged, "add rule inet sandboxd host_" SB_A " goto deny_" SB_A "\n"));
        CHECK(logged && strstr(logged, "ip saddr != 10.213.0.2 counter name \"" SB_A "_denied\" drop"));
        /* the chain is there without a group too (nothing logged), so that removing does not depend on it */
        CHECK(one && strstr(one, "add chain inet sandboxd deny_" SB_A "\n") && !strstr(one, " log "));

        CHECK_INT(egress_nft_render_remove(&s, &rm), 0);
        CHECK(rm && strstr(rm, "delete chain inet sandboxd out_" SB_A));
        /* after the chains that jump to it */
        CHECK(rm && strstr(rm, "delete chain inet sandboxd host_" SB_A "\ndelete chain inet sandboxd deny_" SB_A));

        uint8_t a4[4] = {198, 51, 100, 2}, a6[16] = {0x20, 0x01, 0x0d, 0xb8};
        CHECK_INT(egress_nft_render_allow_address(SB_A, AF_INET, a4, 1500 * USEC_PER_MSEC, &add), 0);
        CHECK(add && strstr(add, "add element inet sandboxd " SB_A "_dyn4 { 198.51.100.2 timeout 2s }"));
        CHECK_INT(egress_nft_render_allow_address(SB_A, AF_INET6, a6, USEC_PER_SEC, &add), -EAFNOSUPPORT);
        CHECK_INT(egress_nft_render_allow_address("nope", AF_INET, a4, USEC_PER_SEC, &add), -EINVAL);

        /* Bad input renders nothing: what reaches nft is only ids and names we checked. */
        char *none = NULL;
        EgressNftSandbox bad = s;
        bad.ifname = "eth0";
        CHECK_INT(egress_nft_render_table(&pool, &bad, 1, &none), -EINVAL);
        bad.ifname = "sbx-a\"; flush ruleset";
        CHECK_INT(egress_nft_render_sandbox(&bad, &none), -EINVAL);
        bad.ifname = "sbx-aaaaaaaaaaaaa"; /* 17 characters: past IFNAMSIZ */
        CHECK_INT(egress_nft_render_sandbox(&bad, &none), -EINVAL);
        bad = s;
        bad.id = "sb_AAAAAAAAAA";
        CHECK_INT(egress_nft_render_sandbox(&bad, &none), -EINVAL);
        bad = s;
        bad.policy = NULL;
        CHECK_INT(egress_nft_render_sandbox(&bad, &none), -EINVAL);
        EgressCidr pool6;
        CHECK_INT(egress_cidr_parse("fd00::/8", &pool6, NULL), 0);
        CHECK_INT(egress_nft_render_table(&pool6, &s, 1, &none), -EINVAL);
        CHECK(!none);
}

/* --- As root, in namespaces of our own ------------------------------------------------------------ */

/* Runs argv (split at spaces) in the network namespace of pid (0: ours); returns its exit status. */
static int run_in(pid_t pid, const char *cmd) {
        pid_t child = fork();
        int status;

        if (child < 0)
                return -errno;
        if (child == 0) {
                char *copy = strdup(cmd), *argv[32], *save = NULL;
                size_t n = 0;

                if (pid > 0) {
                        char path[64];
                        snprintf(path, sizeof(path), "/proc/%d/ns/net", (int) pid);
                        int fd = open(path, O_RDONLY | O_CLOEXEC);
                        if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
                                _exit(126);
                }
                for (char *w = strtok_r(copy, " ", &save); w && n < ELEMENTSOF(argv) - 1;
                     w = strtok_r(NULL, " ", &save))
                        argv[n++] = w;
                argv[n] = NULL;
                int null = open("/dev/null", O_WRONLY);
                dup2(null, STDOUT_FILENO);
                execvp(argv[0], argv);
                _exit(127);
        }
        if (waitpid(child, &status, 0) < 0)
                return -errno;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define RUN(pid, cmd)                                                                              \
        do {                                                                                       \
                int _r = run_in((pid), (cmd));                                                     \
                if (_r != 0)                                                                       \
                        fprintf(stderr, "%s:%d: '%s' exited %d\n", __FILE__, __LINE__, (cmd), _r); \
                CHECK_INT(_r, 0);                                                                  \
        } while (0)

static int listen_on(uint16_t port) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fd, 64) < 0)
                return -errno;
        return fd;
}

/* A process in a network namespace of its own, listening on TCP port 8080 on all its addresses (the kernel
 * completes handshakes into the backlog: nobody need accept), until its pipe closes. */
static pid_t spawn_netns(int *ret_hold) {
        int ready[2], hold[2];
        pid_t pid;
        char c;

        if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(hold, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                if (unshare(CLONE_NEWNET) < 0 || listen_on(8080) < 0)
                        _exit(1);
                (void) write(ready[1], "x", 1);
                (void) read(hold[0], &c, 1);
                _exit(0);
        }
        close(ready[1]);
        close(hold[0]);
        if (read(ready[0], &c, 1) != 1) {
                close(ready[0]);
                close(hold[1]);
                (void) waitpid(pid, NULL, 0);
                return -EIO;
        }
        close(ready[0]);
        *ret_hold = hold[1];
        return pid;
}

/* Connects from pid's namespace to addr:port. 1: connected; 0: nothing within timeout_ms (a drop); -1:
 * refused or another error. */
static int connect_from(pid_t pid, const char *addr, uint16_t port, int timeout_ms) {
        pid_t child = fork();
        int status;

        if (child < 0)
                return -1;
        if (child == 0) {
                struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
                char path[64];
                int err = 0;
                socklen_t len = sizeof(err);

                snprintf(path, sizeof(path), "/proc/%d/ns/net", (int) pid);
                int ns = open(path, O_RDONLY | O_CLOEXEC);
                if (ns < 0 || setns(ns, CLONE_NEWNET) < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
                        _exit(3);
                int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (fd < 0)
                        _exit(3);
                if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0)
                        _exit(1);
                if (errno != EINPROGRESS)
                        _exit(2);
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                if (poll(&p, 1, timeout_ms) == 0)
                        _exit(0);
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0)
                        _exit(2);
                _exit(1);
        }
        if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status))
                return -1;
        return WEXITSTATUS(status) == 1 ? 1 : WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* Sends one UDP datagram from pid's namespace to addr:port. Returns 0 once sent, -1 on an error. */
static int udp_from(pid_t pid, const char *addr, uint16_t port) {
        pid_t child = fork();
        int status;

        if (child < 0)
                return -1;
        if (child == 0) {
                struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
                char path[64];

                snprintf(path, sizeof(path), "/proc/%d/ns/net", (int) pid);
                int ns = open(path, O_RDONLY | O_CLOEXEC);
                int fd = ns < 0 || setns(ns, CLONE_NEWNET) < 0
                                 ? -1
                                 : socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                if (fd < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
                    sendto(fd, "q", 1, 0, (struct sockaddr *) &sa, sizeof(sa)) != 1)
                        _exit(1);
                _exit(0);
        }
        if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status))
                return -1;
        return WEXITSTATUS(status) == 0 ? 0 : -1;
}

static uint16_t icmp_checksum(const uint8_t *p, size_t n) {
        uint32_t sum = 0;

        for (size_t i = 0; i + 1 < n; i += 2)
                sum += (uint32_t) (p[i] << 8 | p[i + 1]);
        if (n % 2)
                sum += (uint32_t) (p[n - 1] << 8);
        while (sum >> 16)
                sum = (sum & 0xffff) + (sum >> 16);
        return (uint16_t) ~sum;
}

/* An ICMP echo request from pid's namespace (a raw socket: we are root there) to addr. 1: the reply came
 * within timeout_ms; 0: none; -1: an error. */
static int ping_from(pid_t pid, const char *addr, int timeout_ms) {
        pid_t child = fork();
        int status;

        if (child < 0)
                return -1;
        if (child == 0) {
                struct sockaddr_in sa = {.sin_family = AF_INET};
                uint8_t req[16] = {8, 0, 0, 0, 0x5b, 0x0d, 0, 1, 'e', 'g', 'r', 'e', 's', 's', '!', '!'},
                        buf[256];
                char path[64];

                snprintf(path, sizeof(path), "/proc/%d/ns/net", (int) pid);
                int ns = open(path, O_RDONLY | O_CLOEXEC);
                int fd = ns < 0 || setns(ns, CLONE_NEWNET) < 0
                                 ? -1
                                 : socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
                uint16_t ck = icmp_checksum(req, sizeof(req));
                req[2] = (uint8_t) (ck >> 8);
                req[3] = (uint8_t) ck;
                if (fd < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
                    sendto(fd, req, sizeof(req), 0, (struct sockaddr *) &sa, sizeof(sa)) !=
                            (ssize_t) sizeof(req))
                        _exit(2);
                for (;;) {
                        struct pollfd p = {.fd = fd, .events = POLLIN};
                        if (poll(&p, 1, timeout_ms) <= 0)
                                _exit(0);
                        ssize_t n = recv(fd, buf, sizeof(buf), 0);
                        if (n < 20)
                                continue;
                        size_t ihl = (size_t) (buf[0] & 0x0f) * 4;
                        /* An echo reply (type 0) with our identifier, from addr. */
                        if ((size_t) n >= ihl + 8 && buf[ihl] == 0 && buf[ihl + 4] == 0x5b &&
                            buf[ihl + 5] == 0x0d && memcmp(buf + 12, &sa.sin_addr, 4) == 0)
                                _exit(1);
                }
        }
        if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status))
                return -1;
        return WEXITSTATUS(status) == 1 ? 1 : WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* Whether a datagram arrives on fd (bound here, in the host's namespace) within timeout_ms. */
static bool udp_arrives(int fd, int timeout_ms) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char c;

        if (poll(&p, 1, timeout_ms) <= 0)
                return false;
        return recv(fd, &c, 1, MSG_DONTWAIT) == 1;
}

static int udp_listen_on(uint16_t port) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

        if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        return fd;
}

/* Generous for what must connect (a loopback-speed veth answers in well under a millisecond); what must
 * not is a drop, which only a wait can tell. */
#define CONNECTS(pid, addr, port) CHECK_INT(connect_from((pid), (addr), (port), 5000), 1)
#define DROPPED(pid, addr, port)  CHECK_INT(connect_from((pid), (addr), (port), 1000), 0)

static void apply(EgressNft *n, const char *text) {
        _cleanup_free_ char *why = NULL;
        int r = egress_nft_run(n, text, &why);

        CHECK_INT(r, 0);
        if (r < 0)
                fprintf(stderr, "    nft: %s\n--- script:\n%s---\n", strna(why), text);
}

/* `nft -j list table inet sandboxd`, parsed: the set named name's elements as text, "|"-joined. */
static char *listed_set(const char *set) {
        char buf[1 << 16], *out = NULL;
        size_t len = 0, outlen = 0;
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "%s -j list table inet sandboxd", nft_binary);
        FILE *p = popen(cmd, "r");
        json_object *root, *list;

        if (!p)
                return NULL;
        for (size_t n; (n = fread(buf + len, 1, sizeof(buf) - 1 - len, p)) > 0;)
                len += n;
        buf[len] = 0;
        if (pclose(p) != 0)
                return NULL;
        root = json_tokener_parse(buf);
        if (!root)
                return NULL;
        FILE *f = open_memstream(&out, &outlen);
        if (json_object_object_get_ex(root, "nftables", &list))
                for (size_t i = 0; i < json_object_array_length(list); i++) {
                        json_object *s, *name, *elem;
                        if (!json_object_object_get_ex(json_object_array_get_idx(list, i), "set", &s) ||
                            !json_object_object_get_ex(s, "name", &name) ||
                            !streq(json_object_get_string(name), set))
                                continue;
                        fputs("set", f);
                        if (json_object_object_get_ex(s, "elem", &elem))
                                for (size_t j = 0; j < json_object_array_length(elem); j++)
                                        fprintf(f, "|%s",
                                                json_object_to_json_string_ext(
                                                        json_object_array_get_idx(elem, j),
                                                        JSON_C_TO_STRING_PLAIN));
                }
        fclose(f);
        json_object_put(root);
        return out;
}

static void traffic(void) {
        _cleanup_(egress_policy_donep) EgressPolicy pa = EGRESS_POLICY_INIT, pb = EGRESS_POLICY_INIT;
        _cleanup_(egress_nft_freep) EgressNft *n = NULL;
        _cleanup_free_ char *table = NULL, *add = NULL, *change = NULL, *rm = NULL, *s1 = NULL, *s2 = NULL;
        int hold_a = -1, hold_b = -1, hold_up = -1, host_fd, resolver_fd;
        EgressCounters c0, c1;
        EgressCidr pool;
        char cmd[256];

        /* "Host": this process, in a namespace of its own. Sandboxes A and B and an upstream with two
         * public test addresses (198.51.100.1, .2) and a private one (192.168.77.1). */
        pid_t a = spawn_netns(&hold_a), b = spawn_netns(&hold_b), up = spawn_netns(&hold_up);
        CHECK(a > 0 && b > 0 && up > 0);
        if (a <= 0 || b <= 0 || up <= 0)
                return;
        host_fd = listen_on(8080);
        resolver_fd = listen_on(53);
        CHECK(host_fd >= 0 && resolver_fd >= 0);

        FILE *fw = fopen("/proc/sys/net/ipv4/ip_forward", "we");
        CHECK(fw && fputs("1", fw) >= 0 && fclose(fw) == 0);
        RUN(0, "ip link set lo up");
        const struct {
                pid_t pid;
                const char *host_if, *peer, *host_addr, *peer_addr;
        } links[] = {
                {a, IF_A, "eth0", "10.213.0.1/30", "10.213.0.2/30"},
                {b, IF_B, "eth0", "10.213.0.5/30", "10.213.0.6/30"},
                {up, "up0", "up1", "198.51.100.254/24", "198.51.100.1/24"},
        };
        for (size_t i = 0; i < ELEMENTSOF(links); i++) {
                snprintf(cmd, sizeof(cmd), "ip link add name %s type veth peer name %s", links[i].host_if,
                         links[i].peer);
                RUN(0, cmd);
                snprintf(cmd, sizeof(cmd), "ip link set %s netns %d", links[i].peer, (int) links[i].pid);
                RUN(0, cmd);
                snprintf(cmd, sizeof(cmd), "ip addr add %s dev %s", links[i].host_addr, links[i].host_if);
                RUN(0, cmd);
                snprintf(cmd, sizeof(cmd), "ip link set %s up", links[i].host_if);
                RUN(0, cmd);
                snprintf(cmd, sizeof(cmd), "ip addr add %s dev %s", links[i].peer_addr, links[i].peer);
                RUN(links[i].pid, cmd);
                snprintf(cmd, sizeof(cmd), "ip link set %s up", links[i].peer);
                RUN(links[i].pid, cmd);
                RUN(links[i].pid, "ip link set lo up");
        }
        RUN(0, "ip addr add 192.168.77.254/24 dev up0");
        RUN(up, "ip addr add 198.51.100.2/24 dev up1");
        RUN(up, "ip addr add 192.168.77.1/24 dev up1");
        RUN(a, "ip route add default via 10.213.0.1");
        RUN(b, "ip route add default via 10.213.0.5");
        /* The upstream has no route back to 10.213.0.0/16: only masquerade makes an answer come back. */

        /* A: default deny, 198.51.100.1 by CIDR, and 10.0.0.0/8 opened, which must still not reach B. */
        CHECK_INT(egress_policy_add(&pa, true, "198.51.100.1/32", NULL), 0);
        CHECK_INT(egress_policy_add(&pa, true, "10.0.0.0/8", NULL), 0);
        pb.default_action = EGRESS_DEFAULT_ALLOW;
        CHECK_INT(egress_policy_add(&pb, false, "198.51.100.2", NULL), 0);
        EgressNftSandbox sb[] = {
                sandbox(SB_A, IF_A, "10.213.0.1", "10.213.0.2", &pa),
                sandbox(SB_B, IF_B, "10.213.0.5", "10.213.0.6", &pb),
        };
        CHECK_INT(egress_cidr_parse("10.213.0.0/16", &pool, NULL), 0);
        CHECK_INT(egress_nft_new(&n), 0);
        /* Someone else's table, which ours must leave alone. */
        apply(n, "add table inet other\nadd set inet other keep { type ipv4_addr; elements = { 192.0.2.1 }; "
                 "}\n");
        CHECK_INT(egress_nft_render_table(&pool, sb, 2, &table), 0);
        apply(n, table);
        apply(n, table); /* again: the same table, atomically replaced */
        snprintf(cmd, sizeof(cmd), "%s list set inet other keep", nft_binary);
        FILE *o = popen(cmd, "r");
        char line[256];
        bool kept = false;
        while (o && fgets(line, sizeof(line), o))
                kept = kept || strstr(line, "192.0.2.1");
        CHECK(o && pclose(o) == 0 && kept);

        s1 = listed_set(SB_A "_allow4");
        CHECK(s1 && strstr(s1, "198.51.100.1") && strstr(s1, "10.0.0.0"));
        if (s1)
                printf("listed " SB_A "_allow4: %s\n", s1);
        CHECK_INT(egress_nft_counters(n, SB_A, &c0), 0);
        CHECK_U64(c0.allowed_packets, 0);
        CHECK_U64(c0.denied_packets, 0);

        CONNECTS(a, "198.51.100.1", 8080);  /* allow CIDR, through masquerade */
        DROPPED(a, "198.51.100.2", 8080);   /* default deny, never resolved */
        DROPPED(a, "192.168.77.1", 8080);   /* private */
        DROPPED(a, "10.213.0.6", 8080);     /* the other sandbox: the pool, whatever 10.0.0.0/8 says */
        DROPPED(a, "10.213.0.1", 8080);     /* the host itself */
        DROPPED(a, "198.51.100.254", 8080); /* the host by another of its addresses */
        CONNECTS(a, "10.213.0.1", 53);      /* its resolver */
        /* ICMP: the same rules. */
        CHECK_INT(ping_from(a, "198.51.100.1", 5000), 1);
        CHECK_INT(ping_from(a, "192.168.77.1", 1000), 0);
        CHECK_INT(ping_from(a, "10.213.0.1", 1000), 0);
        /* The resolver over UDP too; no other UDP port of the host. */
        int udp53 = udp_listen_on(53), udp_other = udp_listen_on(5353);
        CHECK(udp53 >= 0 && udp_other >= 0);
        CHECK_INT(udp_from(a, "10.213.0.1", 53), 0);
        CHECK(udp_arrives(udp53, 5000));
        CHECK_INT(udp_from(a, "10.213.0.1", 5353), 0);
        CHECK(!udp_arrives(udp_other, 1000));
        safe_close(udp53);
        safe_close(udp_other);
        DROPPED(a, "10.213.0.5", 53); /* B's resolver address is not A's */

        /* The resolver's path: an allowed name answered 198.51.100.2 and 192.168.77.1 (rebinding). */
        CHECK_INT(egress_nft_render_allow_address(SB_A, AF_INET, (uint8_t[]){198, 51, 100, 2},
                                                  60 * USEC_PER_SEC, &add),
                  0);
        apply(n, add);
        apply(n, add); /* again: refreshes the timeout, no "exists" error */
        free(add);
        add = NULL;
        CHECK_INT(egress_nft_render_allow_address(SB_A, AF_INET, (uint8_t[]){192, 168, 77, 1},
                                                  60 * USEC_PER_SEC, &add),
                  0);
        apply(n, add);
        s2 = listed_set(SB_A "_dyn4");
        CHECK(s2 && strstr(s2, "198.51.100.2") && strstr(s2, "\"timeout\":60"));
        if (s2)
                printf("listed " SB_A "_dyn4: %s\n", s2);
        CONNECTS(a, "198.51.100.2", 8080);
        DROPPED(a, "192.168.77.1", 8080); /* the fixed list beats what the resolver added */

        /* B: default allow, one deny. */
        CONNECTS(b, "198.51.100.1", 8080);
        DROPPED(b, "198.51.100.2", 8080);
        DROPPED(b, "192.168.77.1", 8080);
        DROPPED(b, "10.213.0.2", 8080);

        CHECK_INT(egress_nft_counters(n, SB_A, &c1), 0);
        CHECK(c1.allowed_packets > 0 && c1.allowed_bytes > 0);
        /* 7 connections, a datagram and two pings dropped */
        CHECK(c1.denied_packets >= 10 && c1.denied_bytes > 0);
        printf("counters " SB_A ": allowed %" PRIu64 " packets %" PRIu64 " bytes, denied %" PRIu64
               " packets %" PRIu64 " bytes\n",
               c1.allowed_packets, c1.allowed_bytes, c1.denied_packets, c1.denied_bytes);

        /* A's policy changes: the CIDR goes; what the resolver added stays. */
        egress_policy_done(&pa);
        CHECK_INT(egress_nft_render_sandbox(&sb[0], &change), 0);
        apply(n, change);
        DROPPED(a, "198.51.100.1", 8080);
        CONNECTS(a, "198.51.100.2", 8080);

        /* B goes: its interface's traffic falls to the catch-all drop, its pieces are gone. */
        CHECK_INT(egress_nft_render_remove(&sb[1], &rm), 0);
        apply(n, rm);
        DROPPED(b, "198.51.100.1", 8080);
        CHECK_INT(egress_nft_counters(n, SB_B, &c0), -ENOENT);
        CONNECTS(a, "198.51.100.2", 8080);

        safe_close(host_fd);
        safe_close(resolver_fd);
        /* Each namespace's process holds the others' pipes too (forked before they were closed): end them.
         */
        for (size_t i = 0; i < ELEMENTSOF(links); i++) {
                (void) kill(links[i].pid, SIGKILL);
                (void) waitpid(links[i].pid, NULL, 0);
        }
        safe_close(hold_a);
        safe_close(hold_b);
        safe_close(hold_up);
}

/* In a child in a new network namespace, so nothing of the host's ruleset or links is touched. */
static void test_netns(void) {
        int status;
        pid_t pid;

        if (geteuid() != 0) {
                printf("SKIP: nftables in a network namespace: needs root (CAP_NET_ADMIN)\n");
                return;
        }
        nft_binary = access("/usr/sbin/nft", X_OK) == 0 ? "/usr/sbin/nft"
                     : access("/sbin/nft", X_OK) == 0   ? "/sbin/nft"
                                                        : NULL;
        if (!nft_binary) {
                printf("SKIP: nftables in a network namespace: no nft here (Debian: nftables)\n");
                return;
        }
        pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
                _cleanup_(egress_nft_freep) EgressNft *n = NULL;
                _cleanup_free_ char *why = NULL;

                if (unshare(CLONE_NEWNET) < 0) {
                        printf("SKIP: nftables in a network namespace: unshare(CLONE_NEWNET): %s\n",
                               strerror(errno));
                        fflush(stdout);
                        _exit(77);
                }
                /* Probe: nf_tables usable here, with timeout sets and NAT? */
                if (egress_nft_new(&n) < 0 ||
                    egress_nft_run(n,
                                   "add table inet probe\n"
                                   "add set inet probe s { type ipv4_addr; flags timeout; }\n"
                                   "add chain inet probe p { type nat hook postrouting priority srcnat; }\n"
                                   "add rule inet probe p masquerade\n"
                                   "delete table inet probe\n",
                                   &why) < 0) {
                        printf("SKIP: nftables in a network namespace: the kernel refused a probe table: "
                               "%s\n",
                               strna(why));
                        fflush(stdout);
                        _exit(77);
                }
                int r = run_in(0, "ip link add name probe0 type veth peer name probe1");
                if (r != 0) {
                        printf("SKIP: nftables in a network namespace: cannot make a veth pair here "
                               "('ip link add … type veth' exited %d%s)\n",
                               r, r == 127 ? ": no ip, Debian: iproute2" : "");
                        fflush(stdout);
                        _exit(77);
                }
                RUN(0, "ip link del probe0");
                traffic();
                fflush(stdout);
                _exit(failures ? 1 : 0);
        }
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 77));
}

int main(void) {
        test_render();
        fflush(stdout);
        test_netns();
        return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
