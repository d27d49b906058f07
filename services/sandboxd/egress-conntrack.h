/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Cutting an egress sandbox's open connections when its policy narrows (issue 23): conntrack entries
 * deleted through libnetfilter_conntrack. */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>

#include "egress-policy.h"

/* Whether a sandbox's open connection to dst (IPv4, network byte order) is cut when policy becomes its
 * policy. Kept: connections to its resolver (host_address) and to addresses the policy allows by address
 * alone (an allow CIDR, or default allow and not denied). Cut: everything else, i.e. what the policy denies
 * and what it allows only once an allowed name resolved to it, because a change flushes the addresses the
 * resolver had opened (sandbox-egress.c): nothing says any more that the name it came from is allowed.
 * pool (may be NULL) is the sandboxes' address pool. */
bool egress_conntrack_cuts(const EgressPolicy *policy, const EgressCidr *pool, struct in_addr host_address,
                           struct in_addr dst);

/* Deletes the conntrack entries of the calling thread's network namespace (IPv4) whose original source is
 * source and for whose original destination cut(dst, userdata) says true. The next packet of a TCP
 * connection so cut is new to conntrack (or invalid) and meets the firewall's policy rules again, not the
 * "established" rule. Needs CAP_NET_ADMIN. Returns the number of entries deleted (an entry that vanished
 * meanwhile does not count), or a negative errno (-EPERM without the capability; entries deleted before a
 * failure stay deleted). */
int egress_conntrack_cut(struct in_addr source, bool (*cut)(struct in_addr dst, void *userdata),
                         void *userdata);
