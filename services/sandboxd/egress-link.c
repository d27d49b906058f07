/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Egress sandboxes' links (issue 23): addresses out of Pool=, the namespace, veth pair and routes.
 *
 * The links are made with libnl-route-3 (rtnetlink); the namespace with unshare(CLONE_NEWNET) by the
 * calling thread, which configures the inside through a netlink socket opened there and returns to its own
 * namespace before anything else happens. */
#include "egress-link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>

#include "egress-nft.h"

/* --- addresses ------------------------------------------------------------------------------------- */

int egress_pool_init(EgressPool *p, const EgressCidr *cidr) {
        if (!p || !cidr || cidr->family != AF_INET || cidr->prefixlen < 8 || cidr->prefixlen > 30)
                return -EINVAL;
        uint32_t n = UINT32_C(1) << (30 - cidr->prefixlen);
        uint64_t *used = calloc((n + 63) / 64, sizeof(uint64_t));
        if (!used)
                return -ENOMEM;
        *p = (EgressPool) { .cidr = *cidr, .n_slots = n, .used = used };
        return 0;
}

void egress_pool_done(EgressPool *p) {
        if (!p)
                return;
        free(p->used);
        *p = (EgressPool) {};
}

static uint32_t pool_base(const EgressPool *p) {
        uint32_t base;
        memcpy(&base, p->cidr.addr, 4);
        return ntohl(base);
}

int egress_pool_slot(const EgressPool *p, uint32_t index, struct in_addr *ret_host,
                     struct in_addr *ret_sandbox) {
        if (!p || !p->used || index >= p->n_slots)
                return -ERANGE;
        uint32_t first = pool_base(p) + 4 * index;
        if (ret_host)
                ret_host->s_addr = htonl(first + 1);
        if (ret_sandbox)
                ret_sandbox->s_addr = htonl(first + 2);
        return 0;
}

int egress_pool_index_of(const EgressPool *p, struct in_addr addr, uint32_t *ret_index) {
        if (!p || !p->used)
                return -ERANGE;
        uint32_t a = ntohl(addr.s_addr), base = pool_base(p);
        if (a < base || (a - base) / 4 >= p->n_slots || (a - base) % 4 != 2)
                return -ERANGE;
        *ret_index = (a - base) / 4;
        return 0;
}

static bool slot_used(const EgressPool *p, uint32_t i) {
        return p->used[i / 64] & (UINT64_C(1) << (i % 64));
}

int egress_pool_take(EgressPool *p, uint32_t *ret_index) {
        if (!p || !p->used)
                return -EINVAL;
        for (uint32_t w = 0; w < (p->n_slots + 63) / 64; w++) {
                if (p->used[w] == UINT64_MAX)
                        continue;
                for (uint32_t i = w * 64; i < p->n_slots && i < (w + 1) * 64; i++)
                        if (!slot_used(p, i)) {
                                p->used[i / 64] |= UINT64_C(1) << (i % 64);
                                p->n_used++;
                                *ret_index = i;
                                return 0;
                        }
        }
        return -ENOSPC;
}

int egress_pool_mark(EgressPool *p, uint32_t index) {
        if (!p || !p->used || index >= p->n_slots)
                return -ERANGE;
        if (slot_used(p, index))
                return -EEXIST;
        p->used[index / 64] |= UINT64_C(1) << (index % 64);
        p->n_used++;
        return 0;
}

void egress_pool_release(EgressPool *p, uint32_t index) {
        if (!p || !p->used || index >= p->n_slots || !slot_used(p, index))
                return;
        p->used[index / 64] &= ~(UINT64_C(1) << (index % 64));
        p->n_used--;
}

/* --- netlink --------------------------------------------------------------------------------------- */

static int nl_errno(int e) {
        switch (e < 0 ? -e : e) {
        case 0:
                return 0;
        case NLE_NOMEM:
                return -ENOMEM;
        case NLE_EXIST:
                return -EEXIST;
        case NLE_OBJ_NOTFOUND:
        case NLE_NODEV:
                return -ENOENT;
        case NLE_PERM:
                return -EPERM;
        case NLE_BUSY:
                return -EBUSY;
        case NLE_INVAL:
        case NLE_RANGE:
                return -EINVAL;
        case NLE_OPNOTSUPP:
                return -EOPNOTSUPP;
        case NLE_AF_NOSUPPORT:
                return -EAFNOSUPPORT;
        default:
                return -EIO;
        }
}

static void nl_socket_freep(struct nl_sock **s) {
        if (*s)
                nl_socket_free(*s);
}
static void rtnl_link_putp(struct rtnl_link **l) {
        if (*l)
                rtnl_link_put(*l);
}
static void rtnl_addr_putp(struct rtnl_addr **a) {
        if (*a)
                rtnl_addr_put(*a);
}
static void rtnl_route_putp(struct rtnl_route **r) {
        if (*r)
                rtnl_route_put(*r);
}
static void nl_addr_putp(struct nl_addr **a) {
        if (*a)
                nl_addr_put(*a);
}
static void nl_cache_freep(struct nl_cache **c) {
        if (*c)
                nl_cache_free(*c);
}

/* A NETLINK_ROUTE socket in the calling thread's namespace. */
static int route_socket(struct nl_sock **ret) {
        struct nl_sock *s = nl_socket_alloc();
        int r;

        if (!s)
                return -ENOMEM;
        r = nl_connect(s, NETLINK_ROUTE);
        if (r < 0) {
                nl_socket_free(s);
                return nl_errno(r);
        }
        *ret = s;
        return 0;
}

static int link_index(struct nl_sock *sk, const char *name, int *ret) {
        _cleanup_(rtnl_link_putp) struct rtnl_link *l = NULL;
        int r = rtnl_link_get_kernel(sk, 0, name, &l);
        if (r < 0)
                return nl_errno(r);
        *ret = rtnl_link_get_ifindex(l);
        return 0;
}

static int link_up(struct nl_sock *sk, const char *name) {
        _cleanup_(rtnl_link_putp) struct rtnl_link *l = NULL, *change = NULL;
        int r;

        r = rtnl_link_get_kernel(sk, 0, name, &l);
        if (r < 0)
                return nl_errno(r);
        change = rtnl_link_alloc();
        if (!change)
                return -ENOMEM;
        rtnl_link_set_flags(change, IFF_UP);
        return nl_errno(rtnl_link_change(sk, l, change, 0));
}

static int addr_v4(struct in_addr a, unsigned prefixlen, struct nl_addr **ret) {
        struct nl_addr *n = nl_addr_build(AF_INET, &a, sizeof(a));
        if (!n)
                return -ENOMEM;
        nl_addr_set_prefixlen(n, (int) prefixlen);
        *ret = n;
        return 0;
}

static int address_add(struct nl_sock *sk, int ifindex, struct in_addr a) {
        _cleanup_(rtnl_addr_putp) struct rtnl_addr *addr = rtnl_addr_alloc();
        _cleanup_(nl_addr_putp) struct nl_addr *local = NULL;
        int r;

        if (!addr)
                return -ENOMEM;
        r = addr_v4(a, 30, &local);
        if (r < 0)
                return r;
        rtnl_addr_set_ifindex(addr, ifindex);
        rtnl_addr_set_family(addr, AF_INET);
        r = rtnl_addr_set_local(addr, local);
        if (r < 0)
                return nl_errno(r);
        return nl_errno(rtnl_addr_add(sk, addr, 0));
}

static int default_route_add(struct nl_sock *sk, int ifindex, struct in_addr gateway) {
        _cleanup_(rtnl_route_putp) struct rtnl_route *route = rtnl_route_alloc();
        _cleanup_(nl_addr_putp) struct nl_addr *dst = NULL, *gw = NULL;
        struct rtnl_nexthop *nh;
        int r;

        if (!route)
                return -ENOMEM;
        r = addr_v4((struct in_addr) {}, 0, &dst);
        if (r < 0)
                return r;
        r = addr_v4(gateway, 32, &gw);
        if (r < 0)
                return r;
        rtnl_route_set_family(route, AF_INET);
        r = rtnl_route_set_dst(route, dst);
        if (r < 0)
                return nl_errno(r);
        nh = rtnl_route_nh_alloc();
        if (!nh)
                return -ENOMEM;
        rtnl_route_nh_set_ifindex(nh, ifindex);
        rtnl_route_nh_set_gateway(nh, gw);
        rtnl_route_add_nexthop(route, nh); /* the route owns it now */
        return nl_errno(rtnl_route_add(sk, route, NLM_F_CREATE | NLM_F_EXCL));
}

int egress_sysctl_write(int proc_fd, const char *path, const char *value) {
        char full[256];
        int fd, r = 0;

        snprintf(full, sizeof(full), "%s%s", proc_fd >= 0 ? "sys/" : "/proc/sys/", path);
        fd = openat(proc_fd >= 0 ? proc_fd : AT_FDCWD, full, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        size_t n = strlen(value);
        ssize_t k = write(fd, value, n);
        if (k < 0)
                r = -errno;
        else if ((size_t) k != n)
                r = -EIO;
        close(fd);
        return r;
}

int egress_ip_forward_enable(int proc_fd) {
        return egress_sysctl_write(proc_fd, "net/ipv4/ip_forward", "1");
}

/* The inside, while the calling thread is in the new namespace: its sysctls, then a netlink socket that
 * stays bound to it. */
static int inside_prepare(int proc_fd, struct nl_sock **ret_sk, const char **step) {
        int r;

        *step = "switch IPv6 off in the sandbox's network namespace";
        r = egress_sysctl_write(proc_fd, "net/ipv6/conf/all/disable_ipv6", "1");
        if (r >= 0)
                r = egress_sysctl_write(proc_fd, "net/ipv6/conf/default/disable_ipv6", "1");
        if (r == -ENOENT)
                r = 0; /* a kernel without IPv6: nothing to switch off */
        if (r < 0)
                return r;
        *step = "open a netlink socket in the sandbox's network namespace";
        return route_socket(ret_sk);
}

int egress_link_add(const EgressLinkSpec *spec, int *ret_netns_fd, const char **ret_step) {
        _cleanup_(nl_socket_freep) struct nl_sock *host = NULL, *inside = NULL;
        _cleanup_(rtnl_link_putp) struct rtnl_link *veth = NULL;
        _cleanup_close_ int self = -EBADF, netns = -EBADF;
        const char *step = "check the arguments";
        bool made = false;
        int r, idx = 0;

        if (!spec || !spec->ifname || strlen(spec->ifname) >= IFNAMSIZ || !ret_netns_fd) {
                r = -EINVAL;
                goto fail;
        }

        step = "open our own network namespace";
        self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (self < 0) {
                r = -errno;
                goto fail;
        }
        step = "create a network namespace";
        if (unshare(CLONE_NEWNET) < 0) {
                r = -errno;
                goto fail;
        }
        netns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        r = netns < 0 ? -errno : inside_prepare(spec->proc_fd, &inside, &step);
        /* Back home, whatever happened: sandboxd must never stay in a sandbox's namespace. */
        if (setns(self, CLONE_NEWNET) < 0)
                abort();
        if (r < 0)
                goto fail;

        step = "open a netlink socket";
        r = route_socket(&host);
        if (r < 0)
                goto fail;

        step = "create the veth pair";
        veth = rtnl_link_veth_alloc();
        if (!veth) {
                r = -ENOMEM;
                goto fail;
        }
        rtnl_link_set_name(veth, spec->ifname);
        struct rtnl_link *peer = rtnl_link_veth_get_peer(veth);
        if (!peer) {
                r = -ENOMEM;
                goto fail;
        }
        rtnl_link_set_name(peer, EGRESS_PEER_IFNAME);
        rtnl_link_set_ns_fd(peer, netns);
        rtnl_link_put(peer);
        r = nl_errno(rtnl_link_add(host, veth, NLM_F_CREATE | NLM_F_EXCL));
        if (r < 0)
                goto fail;
        made = true;

        step = "address the host side of the veth pair";
        r = link_index(host, spec->ifname, &idx);
        if (r >= 0)
                r = address_add(host, idx, spec->host_address);
        if (r < 0)
                goto fail;
        step = "bring the host side of the veth pair up";
        r = link_up(host, spec->ifname);
        if (r < 0)
                goto fail;

        step = "bring the sandbox's loopback up";
        r = link_up(inside, "lo");
        if (r < 0)
                goto fail;
        step = "address the sandbox's side of the veth pair";
        r = link_index(inside, EGRESS_PEER_IFNAME, &idx);
        if (r >= 0)
                r = address_add(inside, idx, spec->address);
        if (r < 0)
                goto fail;
        step = "bring the sandbox's side of the veth pair up";
        r = link_up(inside, EGRESS_PEER_IFNAME);
        if (r < 0)
                goto fail;
        step = "add the sandbox's default route";
        r = default_route_add(inside, idx, spec->host_address);
        if (r < 0)
                goto fail;

        *ret_netns_fd = TAKE_FD(netns);
        return 0;

fail:
        if (made)
                (void) egress_link_remove(spec->ifname);
        if (ret_step)
                *ret_step = step;
        return r;
}

int egress_link_remove(const char *ifname) {
        _cleanup_(nl_socket_freep) struct nl_sock *sk = NULL;
        _cleanup_(rtnl_link_putp) struct rtnl_link *l = NULL;
        int r;

        if (!ifname || strlen(ifname) >= IFNAMSIZ)
                return -EINVAL;
        r = route_socket(&sk);
        if (r < 0)
                return r;
        l = rtnl_link_alloc();
        if (!l)
                return -ENOMEM;
        rtnl_link_set_name(l, ifname);
        return nl_errno(rtnl_link_delete(sk, l));
}

int egress_link_list(char ***ret) {
        _cleanup_(nl_socket_freep) struct nl_sock *sk = NULL;
        _cleanup_(nl_cache_freep) struct nl_cache *cache = NULL;
        _cleanup_strv_free_ char **names = NULL;
        size_t n = 0;
        int r;

        r = route_socket(&sk);
        if (r < 0)
                return r;
        r = nl_errno(rtnl_link_alloc_cache(sk, AF_UNSPEC, &cache));
        if (r < 0)
                return r;
        names = calloc(1, sizeof(char *));
        if (!names)
                return -ENOMEM;
        for (struct nl_object *o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
                const char *name = rtnl_link_get_name((struct rtnl_link *) o);
                if (!name || strncmp(name, EGRESS_IFNAME_PREFIX, strlen(EGRESS_IFNAME_PREFIX)) != 0)
                        continue;
                char **l = realloc(names, (n + 2) * sizeof(char *));
                if (!l)
                        return -ENOMEM;
                names = l;
                names[n] = strdup(name);
                if (!names[n])
                        return -ENOMEM;
                names[++n] = NULL;
        }
        *ret = TAKE_PTR(names);
        return 0;
}

int egress_host_has_uplink(void) {
        _cleanup_(nl_socket_freep) struct nl_sock *sk = NULL;
        _cleanup_(nl_cache_freep) struct nl_cache *cache = NULL;
        int r;

        r = route_socket(&sk);
        if (r < 0)
                return r;
        r = nl_errno(rtnl_route_alloc_cache(sk, AF_INET, 0, &cache));
        if (r < 0)
                return r;
        for (struct nl_object *o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
                struct rtnl_route *route = (struct rtnl_route *) o;
                struct nl_addr *dst = rtnl_route_get_dst(route);
                if (rtnl_route_get_table(route) == RT_TABLE_MAIN &&
                    rtnl_route_get_type(route) == RTN_UNICAST && (!dst || nl_addr_get_prefixlen(dst) == 0))
                        return 1;
        }
        return 0;
}
