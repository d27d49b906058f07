/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Egress sandboxes in sandboxd's life cycle (issue 23): their address, link and firewall rules from
 * creation to deletion, and the table rebuilt from the store at start. */
#pragma once

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <systemd/sd-bus.h>

#include "egress-link.h"
#include "egress-nft.h"
#include "egress-policy.h"

typedef struct Manager Manager;
typedef struct Sandbox Sandbox;

/* The Manager's part. */
typedef struct ManagerEgress {
        EgressPool pool;          /* addresses in use, rebuilt from the store at start */
        EgressNft *nft;
        int proc_fd;              /* a proc of our own (sandboxd's /proc hides sys/), or -EBADF */
        int error;                /* set up at start? 0, or why not (negative errno) ... */
        char *error_text;         /* ... and in words */
} ManagerEgress;

/* A sandbox's part (network egress). */
typedef struct SandboxEgress {
        EgressPolicy *policy;      /* owned; NULL unless network egress */
        uint32_t slot;             /* in the pool, with have_slot */
        bool have_slot;
        struct in_addr address, host_address;
        char ifname[IFNAMSIZ];     /* host side: sbx-… */
        bool in_table;             /* its chains, sets and counters are in the firewall */
        int netns_fd;              /* while it is made: the namespace its init joins; else -EBADF */
} SandboxEgress;

/* At start, before the store's sandboxes are adopted: the address pool, a libnftables context, a proc of
 * our own to write sysctls through, net.ipv4.ip_forward=1. Not fatal: without it, egress sandboxes are
 * refused with the reason (manager_egress_check()). */
void manager_egress_init(Manager *m);
/* After adoption: the table rebuilt from the egress sandboxes there are (a deleted sandbox's pieces go
 * with the old table), links named sbx-* that no sandbox owns removed, and a warning if another firewall's
 * forward chain drops by default. */
void manager_egress_startup(Manager *m);
void manager_egress_done(Manager *m);

/* Whether an egress sandbox can be made now: egress set up at start, and an IPv4 default route (uplink).
 * Returns 0, or a negative errno with a D-Bus error saying why. */
int manager_egress_check(Manager *m, sd_bus_error *error);

/* For a sandbox being made (its workspace exists, its init does not run yet): a copy of policy, an
 * address, its firewall rules (before anything can leave), the namespace and veth pair
 * (s->egress.netns_fd, for the init to join), and resolv.conf in its workspace naming the host side.
 * Returns 0, or a negative errno with *ret_step saying what failed and nothing left behind. */
int sandbox_egress_setup(Sandbox *s, const EgressPolicy *policy, const char **ret_step);
/* Everything of it: its rules, link and address (idempotent; for delete, TTL expiry, a failed create). */
void sandbox_egress_teardown(Sandbox *s);
/* Frees what it holds (sandbox_free()); the link, rules and address must be gone or stay (adopted). */
void sandbox_egress_free(Sandbox *s);
/* Replaces its policy (a pooled sandbox claimed with a policy of its own): the rules are re-rendered
 * before it is handed out. Returns 0 or a negative errno, the old policy kept then. */
int sandbox_egress_set_policy(Sandbox *s, const EgressPolicy *policy);
/* SetNetworkPolicy: replaces a running egress sandbox's policy, whole. In this order: the store (a restart
 * keeps it); the firewall, one transaction: its allow/deny sets and chains re-rendered and its
 * resolver-added set emptied, so that addresses answered for names the new policy may deny stop working
 * (the resolver reads the new policy at the next query and adds a still-allowed name's addresses again);
 * then its open connections that the new policy does not allow by address are cut (egress-conntrack.h
 * says which). Returns 0 with *ret_cut (if not NULL) the number of connections cut, or a negative errno
 * if cutting failed (logged; the policy is in force anyway); -ENOTCONN if the sandbox has no egress
 * network in the firewall; another negative errno with nothing changed. */
int sandbox_egress_change_policy(Sandbox *s, const EgressPolicy *policy, int *ret_cut);
/* An adopted sandbox's egress state from its stored address and policy. */
int sandbox_egress_adopt(Sandbox *s, const char *address, const char *policy_json);
/* Its counters (zeros unless network egress and in the table). */
int sandbox_egress_counters(Sandbox *s, EgressCounters *ret);

/* The store's form of a policy: {"default": "deny"|"allow", "allow": [...], "deny": [...]}, canonical
 * entries. */
char *egress_policy_to_json_string(const EgressPolicy *p);
struct json_object *egress_policy_to_json(const EgressPolicy *p);
int egress_policy_from_json_string(const char *s, EgressPolicy *ret);
