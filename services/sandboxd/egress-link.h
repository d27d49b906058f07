/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Egress sandboxes' links (issue 23): addresses out of Pool=, the namespace, veth pair and routes. */
#pragma once

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "egress-policy.h"
#include "macro.h"

/* --- addresses: a /30 per sandbox out of [Network] Pool= (pure logic) ---------------------------------

 * Slot i of the pool is its i-th /30: the host side of the sandbox's veth gets the first address of it
 * (network + 4i + 1), the sandbox the second (+ 2). The pool is IPv4, /8../28 (sandboxd-config.h). */

typedef struct EgressPool {
        EgressCidr cidr;
        uint32_t n_slots;  /* 2^(30 - prefixlen) */
        uint64_t *used;    /* a bit per slot */
        uint32_t n_used;
} EgressPool;

/* Returns 0, -EINVAL (not IPv4, or a prefix outside /8../30), or -ENOMEM. */
int egress_pool_init(EgressPool *p, const EgressCidr *cidr);
void egress_pool_done(EgressPool *p);

/* The two addresses of slot index (network byte order). -ERANGE past the pool's end. */
int egress_pool_slot(const EgressPool *p, uint32_t index, struct in_addr *ret_host,
                     struct in_addr *ret_sandbox);
/* The slot whose sandbox address is addr: 0, or -ERANGE if addr is not a sandbox address of this pool. */
int egress_pool_index_of(const EgressPool *p, struct in_addr addr, uint32_t *ret_index);

/* The lowest free slot, now taken. -ENOSPC when every slot is taken. */
int egress_pool_take(EgressPool *p, uint32_t *ret_index);
/* Takes slot index (rebuilding the set in use from the store at start): -EEXIST if taken, -ERANGE. */
int egress_pool_mark(EgressPool *p, uint32_t index);
/* Frees slot index (a free or out-of-range one is ignored). */
void egress_pool_release(EgressPool *p, uint32_t index);

/* --- the links (root: CAP_NET_ADMIN, CAP_SYS_ADMIN for the namespace) -------------------------------- */

/* The name of the sandbox's side of the pair, inside its namespace. */
#define EGRESS_PEER_IFNAME "eth0"

typedef struct EgressLinkSpec {
        const char *ifname;          /* host side: egress_ifname_from_id() */
        struct in_addr host_address; /* the slot's first address, on ifname */
        struct in_addr address;      /* the second, on eth0 inside */
        /* A proc instance to write the namespace's sysctls through (sandboxd's own /proc hides sys/), or
         * -EBADF for /proc. */
        int proc_fd;
} EgressLinkSpec;

/* Makes a network namespace for a sandbox and its link to the host: loopback up, IPv6 switched off
 * (net.ipv6.conf.{all,default}.disable_ipv6=1, written in the namespace), a veth pair from ifname in the
 * calling thread's namespace (host_address/30, up) to eth0 inside (address/30, up), and inside a default
 * route via host_address. The calling thread is back in its own namespace when this returns. Returns 0
 * and the new namespace's fd (O_CLOEXEC); or a negative errno with nothing left behind; *ret_step (if not
 * NULL) names the step that failed. */
int egress_link_add(const EgressLinkSpec *spec, int *ret_netns_fd, const char **ret_step);

/* Removes the host side (and with it the pair). 0, or -ENOENT if there is no such link. */
int egress_link_remove(const char *ifname);

/* The names of the links in the calling thread's namespace that start with EGRESS_IFNAME_PREFIX, a
 * NULL-terminated strv (strv_free()). */
int egress_link_list(char ***ret);

/* Whether the calling thread's namespace has an IPv4 default route (an uplink): 1, 0, or a negative errno. */
int egress_host_has_uplink(void);

/* net.ipv4.ip_forward=1 in the calling thread's namespace, through proc_fd as above. */
int egress_ip_forward_enable(int proc_fd);

/* Writes value to the sysctl at path (relative to proc's "sys/", e.g. "net/ipv4/ip_forward"). */
int egress_sysctl_write(int proc_fd, const char *path, const char *value);
