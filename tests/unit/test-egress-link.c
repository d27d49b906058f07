/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for egress-link: the address pool's allocator, and as root the namespace, veth pair, addresses,
 * routes and sysctls it makes, in a network namespace the test makes itself. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "egress-link.h"
#include "egress-nft.h"
#include "macro.h"
#include "test-util.h"

static EgressCidr cidr(const char *s) {
        EgressCidr c;
        if (egress_cidr_parse(s, &c, NULL) < 0)
                abort();
        return c;
}

static const char *ip(struct in_addr a, char buf[static INET_ADDRSTRLEN]) {
        return inet_ntop(AF_INET, &a, buf, INET_ADDRSTRLEN);
}

static void test_pool(void) {
        EgressPool p;
        struct in_addr host, sb;
        char b1[INET_ADDRSTRLEN], b2[INET_ADDRSTRLEN];
        uint32_t i;

        /* what a pool may be */
        EgressCidr v6 = cidr("fd00::/64");
        CHECK_INT(egress_pool_init(&p, &v6), -EINVAL);
        EgressCidr wide = cidr("10.0.0.0/7"), narrow = cidr("10.0.0.0/31");
        CHECK_INT(egress_pool_init(&p, &wide), -EINVAL);
        CHECK_INT(egress_pool_init(&p, &narrow), -EINVAL);
        EgressCidr eight = cidr("10.0.0.0/8");
        CHECK_INT(egress_pool_init(&p, &eight), 0);
        CHECK_U64(p.n_slots, UINT64_C(1) << 22);
        CHECK_INT(egress_pool_slot(&p, (1u << 22) - 1, &host, &sb), 0);
        CHECK_STR(ip(host, b1), "10.255.255.253");
        CHECK_STR(ip(sb, b2), "10.255.255.254");
        CHECK_INT(egress_pool_slot(&p, 1u << 22, &host, &sb), -ERANGE);
        egress_pool_done(&p);
        egress_pool_done(&p); /* twice is fine */

        /* the default pool: slot i is the i-th /30, host side first */
        EgressCidr def = cidr("10.237.0.0/16");
        CHECK_INT(egress_pool_init(&p, &def), 0);
        CHECK_U64(p.n_slots, 16384);
        CHECK_INT(egress_pool_slot(&p, 0, &host, &sb), 0);
        CHECK_STR(ip(host, b1), "10.237.0.1");
        CHECK_STR(ip(sb, b2), "10.237.0.2");
        CHECK_INT(egress_pool_slot(&p, 65, &host, &sb), 0);
        CHECK_STR(ip(host, b1), "10.237.1.5");
        CHECK_STR(ip(sb, b2), "10.237.1.6");
        CHECK_INT(egress_pool_index_of(&p, sb, &i), 0);
        CHECK_INT((int) i, 65);
        CHECK_INT(egress_pool_index_of(&p, host, &i), -ERANGE); /* a host side is no sandbox's */
        inet_pton(AF_INET, "10.238.0.2", &sb);
        CHECK_INT(egress_pool_index_of(&p, sb, &i), -ERANGE);
        inet_pton(AF_INET, "10.236.255.254", &sb);
        CHECK_INT(egress_pool_index_of(&p, sb, &i), -ERANGE);

        /* lowest free first; the set rebuilt from a store by marking */
        CHECK_INT(egress_pool_mark(&p, 1), 0);
        CHECK_INT(egress_pool_mark(&p, 1), -EEXIST);
        CHECK_INT(egress_pool_mark(&p, 16384), -ERANGE);
        CHECK_INT(egress_pool_take(&p, &i), 0);
        CHECK_INT((int) i, 0);
        CHECK_INT(egress_pool_take(&p, &i), 0);
        CHECK_INT((int) i, 2);
        egress_pool_release(&p, 0);
        egress_pool_release(&p, 0);     /* a free one: ignored */
        egress_pool_release(&p, 99999); /* out of range: ignored */
        CHECK_INT((int) p.n_used, 2);
        CHECK_INT(egress_pool_take(&p, &i), 0);
        CHECK_INT((int) i, 0); /* reused */
        /* past a full word of the bitmap */
        for (uint32_t k = 3; k < 200; k++)
                CHECK_INT(egress_pool_mark(&p, k), 0);
        CHECK_INT(egress_pool_take(&p, &i), 0);
        CHECK_INT((int) i, 200);
        egress_pool_done(&p);

        /* the smallest pool holds four, then is full */
        EgressCidr small = cidr("192.168.7.16/28");
        CHECK_INT(egress_pool_init(&p, &small), 0);
        for (uint32_t k = 0; k < 4; k++) {
                CHECK_INT(egress_pool_take(&p, &i), 0);
                CHECK_INT((int) i, (int) k);
        }
        CHECK_INT(egress_pool_take(&p, &i), -ENOSPC);
        CHECK_INT(egress_pool_slot(&p, 3, &host, &sb), 0);
        CHECK_STR(ip(host, b1), "192.168.7.29");
        CHECK_STR(ip(sb, b2), "192.168.7.30");
        egress_pool_release(&p, 2);
        CHECK_INT(egress_pool_take(&p, &i), 0);
        CHECK_INT((int) i, 2);
        egress_pool_done(&p);
}

/* Runs cmd (sh -c) in the network namespace netns_fd (or ours with -1); its exit status. */
static int run_in(int netns_fd, const char *cmd) {
        pid_t pid = fork();
        int status;

        if (pid < 0)
                return -errno;
        if (pid == 0) {
                if (netns_fd >= 0 && setns(netns_fd, CLONE_NEWNET) < 0)
                        _exit(126);
                execl("/bin/sh", "sh", "-c", cmd, (char *) NULL);
                _exit(127);
        }
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
                return -1;
        return WEXITSTATUS(status);
}

#define CHECK_RUN(ns, cmd)                                                                          \
        do {                                                                                        \
                int _r = run_in((ns), (cmd));                                                       \
                if (_r != 0) {                                                                      \
                        fprintf(stderr, "%s:%d: '%s' exited %d\n", __FILE__, __LINE__, (cmd), _r); \
                        failures++;                                                                 \
                }                                                                                   \
        } while (0)

/* From netns_fd, a TCP connection to addr:port: 0 if it connects. */
static int connect_from(int netns_fd, const char *addr, uint16_t port) {
        pid_t pid = fork();
        int status;

        if (pid == 0) {
                struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
                struct timeval tv = { .tv_sec = 2 };
                if (setns(netns_fd, CLONE_NEWNET) < 0)
                        _exit(2);
                int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                inet_pton(AF_INET, addr, &sa.sin_addr);
                (void) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
                _exit(connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0 ? 0 : 1);
        }
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
                return -1;
        return WEXITSTATUS(status);
}

static bool listed(const char *name) {
        _cleanup_strv_free_ char **l = NULL;
        bool found = false;

        if (egress_link_list(&l) < 0)
                return false;
        for (char **p = l; *p; p++)
                found = found || streq(*p, name);
        return found;
}

static void links(void) {
        EgressCidr def = cidr("10.237.0.0/16");
        EgressPool pool;
        EgressLinkSpec spec = { .ifname = "sbx-abcdefghij", .proc_fd = -EBADF };
        _cleanup_close_ int netns = -EBADF, self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        const char *step = NULL;
        struct stat before, after;
        int fd2 = -EBADF;

        CHECK_INT(egress_pool_init(&pool, &def), 0);
        CHECK_INT(egress_pool_slot(&pool, 0, &spec.host_address, &spec.address), 0);

        /* a fresh namespace has no uplink; with a default route it has */
        CHECK_INT(egress_host_has_uplink(), 0);

        CHECK(fstat(self, &before) == 0);
        CHECK_INT(egress_link_add(&spec, &netns, &step), 0);
        CHECK(netns >= 0);
        /* we are home again */
        _cleanup_close_ int now = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        CHECK(fstat(now, &after) == 0 && after.st_ino == before.st_ino);

        /* the host side */
        CHECK(listed("sbx-abcdefghij"));
        CHECK_RUN(-1, "ip -4 -o addr show dev sbx-abcdefghij | grep -q 'inet 10.237.0.1/30'");
        CHECK_RUN(-1, "ip -o link show dev sbx-abcdefghij | grep -q 'state UP\\|,UP'");
        /* the inside: eth0 with the second address, lo up, the default route, IPv6 off */
        CHECK_RUN(netns, "ip -4 -o addr show dev eth0 | grep -q 'inet 10.237.0.2/30'");
        CHECK_RUN(netns, "ip -4 -o addr show dev lo | grep -q 'inet 127.0.0.1/8'");
        CHECK_RUN(netns, "ip -4 route show default | grep -q 'default via 10.237.0.1 dev eth0'");
        CHECK_RUN(netns, "test \"$(cat /proc/sys/net/ipv6/conf/all/disable_ipv6)\" = 1");
        CHECK_RUN(netns, "test \"$(cat /proc/sys/net/ipv6/conf/default/disable_ipv6)\" = 1");
        CHECK_RUN(netns, "test \"$(cat /proc/sys/net/ipv6/conf/eth0/disable_ipv6)\" = 1");
        CHECK_RUN(netns, "! ip -6 -o addr show | grep -q inet6");
        /* and the host's own namespace did not get any of it */
        CHECK_RUN(-1, "! ip -o link show dev eth0 2>/dev/null");
        CHECK_RUN(-1, "test \"$(cat /proc/sys/net/ipv6/conf/all/disable_ipv6)\" = 0");

        /* the pair carries traffic: the sandbox reaches a listener on the host side */
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(4711), .sin_addr = spec.host_address };
        CHECK(l >= 0 && bind(l, (struct sockaddr *) &sa, sizeof(sa)) == 0 && listen(l, 4) == 0);
        CHECK_INT(connect_from(netns, "10.237.0.1", 4711), 0);
        CHECK_INT(connect_from(netns, "10.237.0.1", 4712), 1); /* refused: nothing listens there */
        safe_close(l);

        /* the same name again: refused, and the first pair untouched */
        step = NULL;
        CHECK_INT(egress_link_add(&spec, &fd2, &step), -EEXIST);
        CHECK(fd2 < 0);
        CHECK_STR(strna(step), "create the veth pair");
        CHECK(listed("sbx-abcdefghij"));

        /* a second sandbox, the next slot */
        EgressLinkSpec two = { .ifname = "sbx-bcdefghijk", .proc_fd = -EBADF };
        CHECK_INT(egress_pool_slot(&pool, 1, &two.host_address, &two.address), 0);
        CHECK_INT(egress_link_add(&two, &fd2, NULL), 0);
        CHECK(listed("sbx-bcdefghijk"));
        CHECK_RUN(fd2, "ip -4 -o addr show dev eth0 | grep -q 'inet 10.237.0.6/30'");

        /* uplink: a default route in this namespace */
        CHECK_RUN(-1, "ip route add default via 10.237.0.2 dev sbx-abcdefghij");
        CHECK_INT(egress_host_has_uplink(), 1);
        CHECK_RUN(-1, "ip route del default");
        CHECK_INT(egress_host_has_uplink(), 0);

        /* removal: the pair goes, its route with it; a second removal finds nothing */
        CHECK_INT(egress_link_remove("sbx-abcdefghij"), 0);
        CHECK(!listed("sbx-abcdefghij"));
        CHECK_RUN(netns, "! ip -o link show dev eth0 2>/dev/null");
        CHECK_RUN(-1, "! ip -4 route | grep -q 10.237.0.0/30");
        CHECK_INT(egress_link_remove("sbx-abcdefghij"), -ENOENT);
        CHECK(listed("sbx-bcdefghijk"));

        /* the namespace going (its last reference) takes the pair with it */
        fd2 = safe_close(fd2);
        for (int k = 0; k < 100 && listed("sbx-bcdefghijk"); k++)
                usleep(20000);
        CHECK(!listed("sbx-bcdefghijk"));

        egress_pool_done(&pool);
}

/* In a child in a new network namespace (the test's "host"), so nothing of the real host is touched. */
static void test_links(void) {
        int status;
        pid_t pid;

        if (geteuid() != 0) {
                printf("SKIP: veth pairs in network namespaces: needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN)\n");
                return;
        }
        pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
                if (unshare(CLONE_NEWNET) < 0) {
                        printf("SKIP: veth pairs in network namespaces: unshare(CLONE_NEWNET): %s\n",
                               strerror(errno));
                        fflush(stdout);
                        _exit(77);
                }
                int r = run_in(-1, "ip link add name probe0 type veth peer name probe1 && ip link del probe0");
                if (r != 0) {
                        printf("SKIP: veth pairs in network namespaces: cannot make a veth pair here "
                               "('ip link add … type veth' exited %d%s)\n",
                               r, r == 127 ? ": no ip, Debian: iproute2" : "");
                        fflush(stdout);
                        _exit(77);
                }
                links();
                fflush(stdout);
                fflush(stderr);
                _exit(failures ? 1 : 0);
        }
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 77));
}

int main(void) {
        test_pool();
        fflush(stdout);
        test_links();
        return test_finish("test-egress-link");
}
