/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd's nftables table for egress sandboxes (issue 23): rendered from its state, applied atomically. */
#pragma once

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "egress-policy.h"
#include "macro.h"

/* The one table sandboxd owns: "table inet sandboxd". Nothing else of the host's ruleset is touched. */
#define EGRESS_NFT_FAMILY "inet"
#define EGRESS_NFT_TABLE  "sandboxd"
/* Host sides of sandboxes' veth pairs: this prefix and the id's 10 random characters ("sbx-abcdefghij",
 * 14 < IFNAMSIZ). The firewall drops anything from or to an interface with this prefix that it does not
 * know (a veth left behind by a sandboxd killed mid-delete). */
#define EGRESS_IFNAME_PREFIX "sbx-"

/* Host-side interface name for a sandbox id. Returns 0 or -EINVAL (not a sandbox id). */
int egress_ifname_from_id(const char *id, char ret[static IFNAMSIZ]);

/* One egress sandbox as the firewall sees it. IPv4 only in this step: IPv6 from a sandbox interface is
 * dropped (and counted as denied), so it is never left open; a policy's IPv6 CIDRs are kept for later. */
typedef struct EgressNftSandbox {
        const char *id;              /* sb_… */
        const char *ifname;          /* host side of its veth, EGRESS_IFNAME_PREFIX… */
        struct in_addr host_address; /* host side's address: its resolver's, the one host address it reaches
                                      * (port 53, UDP and TCP) */
        struct in_addr address;      /* the sandbox's own; anything else from it is dropped (spoofing) */
        const EgressPolicy *policy;
        uint64_t rate_max;           /* bytes per second out of the sandbox (its type's EgressRateMax=); past it
                                      * packets are dropped and counted as denied; 0: no limit */
        uint16_t nflog_group;        /* connections the policy denies (to an address, or to the host) are
                                      * logged to this NFLOG group, at most EGRESS_NFT_LOG_RATE a second,
                                      * prefixed with the id; 0: not logged */
        bool flush_dynamic;          /* egress_nft_render_sandbox(): empty its resolver-added set too, in the
                                      * same transaction (a policy change: see sandbox_egress_change_policy()) */
} EgressNftSandbox;

/* A sandbox's logged denials per second (nft "limit", per sandbox; the denied counters count them all). */
#define EGRESS_NFT_LOG_RATE 50

/* The whole table as one nft script, one transaction: the table is added (so that the delete cannot fail),
 * deleted and made anew with the shared sets, chains and maps and each sandbox's pieces. pool (IPv4, may
 * be NULL) is the sandboxes' address pool, never reachable from a sandbox. Resolver-added addresses are
 * lost: this is for sandboxd's start (rebuilding from its state) and for tests. Returns 0 and a malloc'd
 * text, -EINVAL for a bad sandbox (id, ifname, no policy, a pool that is not IPv4), or -ENOMEM. */
int egress_nft_render_table(const EgressCidr *pool, const EgressNftSandbox *sandboxes, size_t n,
                            char **ret_text);
/* Adds one sandbox to the table, or replaces its policy: its counters, sets and chains are created if
 * missing, its allow/deny sets and chains refilled, its resolver-added (dynamic) sets kept, or emptied
 * with flush_dynamic. One transaction: the old rules or the new ones, never a mix. */
int egress_nft_render_sandbox(const EgressNftSandbox *s, char **ret_text);
/* Removes one sandbox: its dispatch and resolver elements, chains, sets and counters. */
int egress_nft_render_remove(const EgressNftSandbox *s, char **ret_text);
/* The resolver's path: addr (IPv4, network byte order) joins the sandbox's dynamic allow set for
 * timeout_usec (rounded up to whole seconds, at least 1 s); an address already there gets the new timeout.
 * -EAFNOSUPPORT for IPv6 (not in this step). */
int egress_nft_render_allow_address(const char *id, int family, const void *addr, uint64_t timeout_usec,
                                    char **ret_text);

/* A libnftables context with its output and errors captured. */
typedef struct EgressNft EgressNft;
int egress_nft_new(EgressNft **ret);
EgressNft *egress_nft_free(EgressNft *n);
DEFINE_TRIVIAL_CLEANUP_FUNC(EgressNft *, egress_nft_free);

/* Runs an nft script as one transaction (nft_run_cmd_from_buffer): all of it or nothing. Returns 0; -EPERM
 * without CAP_NET_ADMIN; -EIO for anything else nft refused, with *ret_error (if not NULL) its message. */
int egress_nft_run(EgressNft *n, const char *text, char **ret_error);

typedef struct EgressCounters {
        uint64_t allowed_packets, allowed_bytes;
        uint64_t denied_packets, denied_bytes;
} EgressCounters;

/* Reads a sandbox's named counters (JSON output of "list counter"). Returns 0, -ENOENT if the table or the
 * sandbox is not there, -EIO/-EPERM as egress_nft_run(), -EBADMSG if nft's JSON is not what we expect. */
int egress_nft_counters(EgressNft *n, const char *id, EgressCounters *ret);

/* Another firewall that may drop what our table accepts: a base chain of hook forward with policy drop in
 * another table (iptables-nft's FORWARD chain included; legacy iptables is not seen). Returns 1 and in
 * *ret_what (malloc'd) "<family> <table> <chain>" of the first such chain, 0 if there is none, or
 * -EIO/-EPERM/-EBADMSG as above. Nothing is changed. */
int egress_nft_forward_drop_elsewhere(EgressNft *n, char **ret_what);
