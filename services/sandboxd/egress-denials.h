/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An egress sandbox's denials as audit rows (issue 23): one row each, summarised per second in a flood. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egress-policy.h"
#include "macro.h"

/* Pure logic: no bus, no clock of its own (every time is passed in, µs on any one clock), no I/O.
 *
 * Within one second (the clock's whole seconds: [k s, (k+1) s)) the first `per_second` denials become a
 * row each, at once. Any more in that second are counted: when the second is over, one summary row says how
 * many there were, with the first EGRESS_DENIALS_EXAMPLES distinct targets among them (the last place goes to
 * a kind none of the others is, so a summary shows every kind it counts). So a flood of any
 * size yields at most per_second + 1 rows a second, and no denial goes unrecorded: each is a row or counted
 * in one. The summary is handed out by the first egress_denials_add() of a later second, or by
 * egress_denials_flush() once its second is over (the caller arms a timer for egress_denials_next_flush()).
 */
#define EGRESS_DENIALS_PER_SECOND_DEFAULT 10
#define EGRESS_DENIALS_PER_SECOND_MAX     1000
#define EGRESS_DENIALS_EXAMPLES           5

typedef enum EgressDenialKind {
        EGRESS_DENIAL_NAME,    /* the resolver refused a name: target is the name, protocol "dns", port 53 */
        EGRESS_DENIAL_ADDRESS, /* the firewall dropped a connection: target is the address */
        _EGRESS_DENIAL_KIND_MAX,
        _EGRESS_DENIAL_KIND_INVALID = -EINVAL,
} EgressDenialKind;

DECLARE_STRING_TABLE(egress_denial_kind, EgressDenialKind);

#define EGRESS_DENIAL_PROTOCOL_MAX 8
#define EGRESS_DENIAL_REASON_MAX   96

typedef struct EgressDenial {
        EgressDenialKind kind;
        char target[EGRESS_NAME_MAX + 1];          /* a name, or an address as text */
        uint16_t port;                             /* 0 when there is none (ICMP) */
        char protocol[EGRESS_DENIAL_PROTOCOL_MAX]; /* "dns", "tcp", "udp", "icmp", … */
        char reason[EGRESS_DENIAL_REASON_MAX];     /* why, one phrase ("denied by policy"); may be "" */
} EgressDenial;

/* Fills *ret from its parts, cutting over-long texts. Returns 0, or -EINVAL (a bad kind, or a NULL or empty
 * target or protocol). */
int egress_denial_make(EgressDenialKind kind, const char *target, uint16_t port, const char *protocol,
                       const char *reason, EgressDenial *ret);

/* A denial from a packet the firewall logged (NFLOG copies its first bytes): the IPv4 header's destination
 * and protocol ("tcp", "udp", "icmp", else "ip" and its number in the reason), and for TCP and UDP the
 * destination port when the transport header's first 4 bytes are there (else 0). The bytes come from a
 * sandbox: anything goes. Returns 0; -EBADMSG (shorter than an IPv4 header, not version 4, a header length
 * under 20 bytes or past len); -EINVAL (NULL arguments). */
int egress_denial_from_packet(const void *buf, size_t len, const char *reason, EgressDenial *ret);

typedef struct EgressDenialRow {
        bool summary;
        /* A row of its own: the denial and when it happened. A summary: the start of the second it covers.
         */
        uint64_t at_usec;
        EgressDenial denial;                            /* a row of its own */
        uint64_t count;                                 /* a summary: the denials it stands for (>= 1) */
        EgressDenial examples[EGRESS_DENIALS_EXAMPLES]; /* a summary: distinct targets among them */
        size_t n_examples;
} EgressDenialRow;

typedef struct EgressDenials EgressDenials;

/* per_second: rows of their own per second, 1..EGRESS_DENIALS_PER_SECOND_MAX (0 means the default).
 * Returns 0, -EINVAL, -ENOMEM. */
int egress_denials_new(unsigned per_second, EgressDenials **ret);
EgressDenials *egress_denials_free(EgressDenials *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(EgressDenials *, egress_denials_free);

/* Records one denial at now_usec (which must not go back in time: an earlier time counts as the current
 * second). ret_rows (room for 2) gets the rows to write now, in order: the previous second's summary if one
 * is due, then this denial's own row if it gets one. Returns how many (0, 1 or 2), or -EINVAL. */
int egress_denials_add(EgressDenials *d, uint64_t now_usec, const EgressDenial *denial,
                       EgressDenialRow ret_rows[static 2]);

/* Hands out the summary of a second that is over at now_usec. Returns 1 and fills *ret_row, or 0 (nothing
 * due). */
int egress_denials_flush(EgressDenials *d, uint64_t now_usec, EgressDenialRow *ret_row);

/* When a summary will be due (the end of the current second), or UINT64_MAX if none is pending. */
uint64_t egress_denials_next_flush(const EgressDenials *d);

/* How many denials were recorded in all, and how many of them went into summaries (for counters). */
uint64_t egress_denials_total(const EgressDenials *d);
uint64_t egress_denials_summarised(const EgressDenials *d);

/* A row's detail as the audit row's JSON (operation "network.denied", event "denied"):
 *   one:     {"name": "evil.example", "port": 53, "protocol": "dns", "reason": "denied by policy"}
 *            (or "address": "198.51.100.7" for an address);
 *   summary: {"summary": true, "count": 9990, "second_start_usec": …, "examples": [ {one's fields}, … ]}.
 * Returns 0 and a malloc'd string, or -ENOMEM. */
int egress_denial_row_to_json(const EgressDenialRow *row, char **ret);
