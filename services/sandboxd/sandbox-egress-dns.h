/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An egress sandbox's resolver and denials (issue 23): names through its policy, refusals on the record. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include "egress-denials.h"

typedef struct Manager Manager;
typedef struct Sandbox Sandbox;
typedef struct ManagerEgressDns ManagerEgressDns;
typedef struct SandboxEgressDns SandboxEgressDns;

/* The NFLOG group the firewall's denials are logged to (nft "log group"), read by sandboxd. */
#define EGRESS_DNS_NFLOG_GROUP 2323
/* How many of a sandbox's firewall denials per second reach sandboxd at all (nft "limit", in the kernel):
 * a flood costs a few messages a second, and the <id>_denied counters still count every packet. */
#define EGRESS_DNS_NFLOG_RATE 50

/* At start, after manager_egress_init(): the upstream servers from /etc/resolv.conf, and the NFLOG group
 * bound (probed: without NFLOG the firewall logs nothing and only the resolver's denials are rows). Never
 * fatal: what is missing is logged, and egress sandboxes are refused with the reason when they need it. */
void manager_egress_dns_init(Manager *m);
/* SIGHUP: /etc/resolv.conf read again; every running resolver is made anew with the new servers. */
void manager_egress_dns_reload(Manager *m);
void manager_egress_dns_done(Manager *m);
/* Whether egress sandboxes can have their resolver: 0, or a negative errno with a D-Bus error saying why (no
 * DNS server in /etc/resolv.conf). */
int manager_egress_dns_check(Manager *m, sd_bus_error *error);
/* The group for the firewall's rules: EGRESS_DNS_NFLOG_GROUP if it is bound, else 0 (no log rule). */
uint16_t manager_egress_dns_nflog_group(Manager *m);

/* Starts the sandbox's resolver on its host-side address, port 53 (UDP and TCP). Returns 0, or a negative
 * errno with *ret_step saying what failed (-EADDRINUSE: something else listens there, such as a DNS server
 * of the host on 0.0.0.0:53). Idempotent: a running one is kept. */
int sandbox_egress_dns_start(Sandbox *s, const char **ret_step);
/* Stops it: the summaries of denials still pending are written, the sockets closed. Accepts a sandbox
 * without one. */
void sandbox_egress_dns_stop(Sandbox *s);
/* One denial of this sandbox (the resolver's refusals, the firewall's drops): a network.denied row now, or
 * counted into the second's summary (egress-denials.h). */
void sandbox_egress_dns_denied(Sandbox *s, const EgressDenial *d);
/* Whether its resolver runs (tests, the bus). */
bool sandbox_egress_dns_running(const Sandbox *s);
