/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests egress-conntrack.c: which of a sandbox's open connections a new policy cuts; then, as root only, in
 * a network namespace of its own, conntrack entries made by loopback traffic and deleted by source and by
 * that decision. */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "egress-conntrack.h"
#include "egress-nft.h"
#include "macro.h"
#include "test-util.h"

static struct in_addr ip(const char *s) {
        struct in_addr a = {};
        CHECK(inet_pton(AF_INET, s, &a) == 1);
        return a;
}

static EgressPolicy policy_of(EgressDefault d, const char *allow, const char *deny) {
        EgressPolicy p = {.default_action = d};
        if (allow)
                CHECK_INT(egress_policy_add(&p, true, allow, NULL), 0);
        if (deny)
                CHECK_INT(egress_policy_add(&p, false, deny, NULL), 0);
        return p;
}

static void test_decision(void) {
        EgressCidr pool;
        struct in_addr host = ip("10.213.0.1");

        CHECK_INT(egress_cidr_parse("10.213.0.0/16", &pool, NULL), 0);

        /* Default deny, one allow CIDR, one allowed name. */
        _cleanup_(egress_policy_donep) EgressPolicy deny =
                policy_of(EGRESS_DEFAULT_DENY, "203.0.113.0/24", NULL);
        CHECK_INT(egress_policy_add(&deny, true, "pypi.org", NULL), 0);
        CHECK(!egress_conntrack_cuts(&deny, &pool, host, ip("203.0.113.10"))); /* the allow CIDR */
        CHECK(egress_conntrack_cuts(&deny, &pool, host, ip("198.51.100.10"))); /* resolved only: cut */
        CHECK(egress_conntrack_cuts(&deny, &pool, host, ip("192.168.1.1")));   /* private */
        CHECK(egress_conntrack_cuts(&deny, &pool, host, ip("10.213.0.6")));    /* another sandbox */
        CHECK(!egress_conntrack_cuts(&deny, &pool, host, ip("10.213.0.1")));   /* its resolver */

        /* Default allow with a deny CIDR. */
        _cleanup_(egress_policy_donep) EgressPolicy allow =
                policy_of(EGRESS_DEFAULT_ALLOW, NULL, "198.51.100.0/24");
        CHECK(!egress_conntrack_cuts(&allow, &pool, host, ip("203.0.113.10")));
        CHECK(egress_conntrack_cuts(&allow, &pool, host, ip("198.51.100.10")));
        CHECK(egress_conntrack_cuts(&allow, &pool, host, ip("169.254.169.254")));
        CHECK(egress_conntrack_cuts(&allow, NULL, host, ip("127.0.0.1")));

        /* An allow CIDR opening a private range keeps it; the pool stays cut. */
        _cleanup_(egress_policy_donep) EgressPolicy priv =
                policy_of(EGRESS_DEFAULT_DENY, "10.0.0.0/8", NULL);
        CHECK(!egress_conntrack_cuts(&priv, &pool, host, ip("10.1.2.3")));
        CHECK(egress_conntrack_cuts(&priv, &pool, host, ip("10.213.0.6")));
}

static bool cut_all(struct in_addr dst, void *userdata) {
        return true;
}

static bool cut_by_policy(struct in_addr dst, void *userdata) {
        return egress_conntrack_cuts(userdata, NULL, ip("127.0.0.6"), dst);
}

static int udp_from_to(const char *from, const char *to, uint16_t port) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr = ip(from)},
                           b = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr = ip(to)};
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r = -1;

        if (fd < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *) &a, sizeof(a)) == 0 &&
            sendto(fd, "x", 1, 0, (struct sockaddr *) &b, sizeof(b)) == 1)
                r = 0;
        close(fd);
        return r;
}

static void traffic(void) {
        _cleanup_(egress_nft_freep) EgressNft *n = NULL;
        _cleanup_free_ char *why = NULL;

        /* Conntrack tracks a namespace's packets only once a rule there needs it. */
        CHECK_INT(egress_nft_new(&n), 0);
        CHECK_INT(egress_nft_run(n,
                                 "add table inet track\n"
                                 "add chain inet track out { type filter hook output priority filter; }\n"
                                 "add rule inet track out ct state new counter accept\n",
                                 &why),
                  0);
        CHECK_INT(udp_from_to("127.0.0.1", "127.0.0.2", 9), 0);  /* fixed list: cut */
        CHECK_INT(udp_from_to("127.0.0.1", "127.0.0.3", 9), 0);  /* allow CIDR: kept */
        CHECK_INT(udp_from_to("127.0.0.1", "127.0.0.6", 53), 0); /* "resolver": kept */
        CHECK_INT(udp_from_to("127.0.0.5", "127.0.0.2", 9), 0);  /* another source: not ours */

        /* TCP too: an established connection to a denied address. */
        struct sockaddr_in l = {.sin_family = AF_INET, .sin_addr = ip("127.0.0.4")},
                           c = {.sin_family = AF_INET, .sin_addr = ip("127.0.0.1")};
        socklen_t len = sizeof(l);
        int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0),
            cs = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK(ls >= 0 && cs >= 0);
        CHECK(bind(ls, (struct sockaddr *) &l, sizeof(l)) == 0 && listen(ls, 1) == 0);
        CHECK(getsockname(ls, (struct sockaddr *) &l, &len) == 0);
        CHECK(bind(cs, (struct sockaddr *) &c, sizeof(c)) == 0);
        CHECK(connect(cs, (struct sockaddr *) &l, sizeof(l)) == 0);

        _cleanup_(egress_policy_donep) EgressPolicy p = policy_of(EGRESS_DEFAULT_DENY, "127.0.0.3/32", NULL);
        CHECK_INT(egress_conntrack_cut(ip("127.0.0.1"), cut_by_policy, &p), 2); /* 127.0.0.2 and .4 */
        CHECK_INT(egress_conntrack_cut(ip("127.0.0.1"), cut_by_policy, &p), 0); /* gone already */
        CHECK_INT(egress_conntrack_cut(ip("127.0.0.1"), cut_all, NULL), 2);     /* .3 and .6 were kept */
        CHECK_INT(egress_conntrack_cut(ip("127.0.0.5"), cut_all, NULL), 1);     /* the other source's */
        CHECK_INT(egress_conntrack_cut(ip("127.0.0.1"), NULL, NULL), -EINVAL);
        close(cs);
        close(ls);
}

static void test_netns(void) {
        int status;
        pid_t pid;

        if (geteuid() != 0) {
                printf("SKIP: conntrack entries in a network namespace: needs root (CAP_NET_ADMIN)\n");
                return;
        }
        pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
                if (unshare(CLONE_NEWNET) < 0) {
                        printf("SKIP: conntrack in a network namespace: unshare(CLONE_NEWNET): %s\n",
                               strerror(errno));
                        fflush(stdout);
                        _exit(77);
                }
                if (system("ip link set lo up") != 0) {
                        printf("SKIP: conntrack in a network namespace: 'ip link set lo up' failed (Debian: "
                               "iproute2)\n");
                        fflush(stdout);
                        _exit(77);
                }
                traffic();
                fflush(stdout);
                _exit(failures ? 1 : 0);
        }
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 77));
}

int main(void) {
        test_decision();
        fflush(stdout);
        test_netns();
        return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
