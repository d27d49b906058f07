/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An egress sandbox's DNS resolver (issue 23): answers allowed names only, opening what they resolve to. */
#pragma once

#include <ldns/ldns.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>

#include "egress-policy.h"
#include "macro.h"

/* One resolver per egress sandbox, on sandboxd's event loop, listening on the sandbox's host-side address
 * (port 53) over UDP and TCP (RFC 1035 length-prefixed; RFC 7766's out-of-order answers). ldns reads and
 * writes every DNS message; the I/O is ours (ldns's own send functions block).
 *
 * A query, in order (egress_resolver_decide()):
 *   - shorter than a DNS header, or a response (QR set): dropped, no answer (nothing to answer, and never
 *     answer an answer: no loops);
 *   - not parseable by ldns, or not exactly one question: FORMERR; an opcode other than QUERY: NOTIMP;
 *     AXFR, IXFR (zone transfers): NOTIMP;
 *   - a class other than IN: REFUSED, reported as denied ("class … is not served");
 *   - the name normalized (egress_name_normalize(): case, trailing dot) and checked with
 *     egress_policy_name_allowed() against the policy get_policy() gives at that moment: not a valid name,
 *     or denied: REFUSED and the denied callback;
 *   - allowed, AAAA: an empty NOERROR answer at once (IPv6 is not routed from a sandbox in this step; an
 *     empty answer makes clients fall back to IPv4 without waiting);
 *   - allowed, any other type: forwarded. The query sent upstream is built anew (the name, type, class IN,
 *     RD and CD as the client set them, EDNS0 with our UDP size and the client's DO bit), never the client's
 *     bytes, with a random id of its own, from a socket of its own (a random source port). One attempt per
 *     upstream, EGRESS_RESOLVER_ROUNDS rounds over the list; an attempt ends with the timeout, an ICMP
 *     refusal, or an answer with SERVFAIL, REFUSED, NOTIMP or FORMERR (the next upstream is asked); after
 *     the last, SERVFAIL. An answer with TC set is asked again over TCP from the same upstream.
 *
 * When the answer comes, the name is checked again against the policy of that moment: if a change made while
 * the query was upstream denies it now, the client gets REFUSED (and denied() is told) and nothing is
 * opened.
 *
 * The answer (egress_resolver_filter_answer()) is passed on rebuilt, not as the upstream's bytes: header
 * (the client's id, RD and CD; RA; the upstream's rcode and AD), the client's question as it sent it, the
 * answer section filtered, the authority section without address records, no additional section, EDNS0
 * only if the client used it. In the answer section:
 *   - CNAMEs are followed from the question's name (at most EGRESS_RESOLVER_CNAME_MAX links); A records
 *     of the question's name or of a name on its CNAME chain get egress_policy_address_verdict(). Not
 *     denied: allow_address() is called with the address and a timeout of
 *     MIN(TTL, EGRESS_RESOLVER_TTL_MAX_SEC) s + EGRESS_RESOLVER_GRACE_USEC, and the record is kept. Denied
 *     (a rebinding answer: loopback, private ranges, link-local, the pool, a deny CIDR): the record is
 *     removed from the answer and reported to denied() ("answer 127.0.0.1 denied"); the firewall would drop
 *     the connection anyway, and removing it makes the failure clear at once (no connection to the
 *     sandbox's own loopback, no timeout);
 *   - A records outside the chain and every AAAA record are removed (not opened, so not passed on);
 *   - all allow_address() calls are made before the answer is sent; if one fails, the client gets SERVFAIL
 *     instead (it could not reach the address).
 * An answer larger than the client's UDP size (512 without EDNS0, else its EDNS0 size within
 * [512, EGRESS_RESOLVER_CLIENT_UDP_MAX]) goes as a header and question with TC set, and the client asks
 * again over TCP.
 *
 * Bounds: EGRESS_RESOLVER_INFLIGHT_MAX forwarded queries at once per resolver and
 * EGRESS_RESOLVER_INFLIGHT_PER_CLIENT_MAX per client (a UDP source address and port, or a TCP connection);
 * past them a query gets SERVFAIL at once. EGRESS_RESOLVER_TCP_CONNECTIONS_MAX TCP connections (more are
 * accepted and closed); a connection that sends nothing complete for EGRESS_RESOLVER_TCP_IDLE_USEC is
 * closed. */

#define EGRESS_RESOLVER_PORT                    53
#define EGRESS_RESOLVER_UPSTREAMS_MAX           3 /* as resolv.conf's MAXNS */
#define EGRESS_RESOLVER_ROUNDS                  2
#define EGRESS_RESOLVER_UPSTREAM_TIMEOUT_USEC   (1000 * USEC_PER_MSEC)
#define EGRESS_RESOLVER_INFLIGHT_MAX            256
#define EGRESS_RESOLVER_INFLIGHT_PER_CLIENT_MAX 32
#define EGRESS_RESOLVER_TCP_CONNECTIONS_MAX     16
#define EGRESS_RESOLVER_TCP_IDLE_USEC           (10 * USEC_PER_SEC)
#define EGRESS_RESOLVER_GRACE_USEC              (30 * USEC_PER_SEC)
#define EGRESS_RESOLVER_TTL_MAX_SEC             3600
#define EGRESS_RESOLVER_CNAME_MAX               16
/* The EDNS0 UDP size we advertise upstream and to clients (the DNS flag day 2020 figure). */
#define EGRESS_RESOLVER_UDP_SIZE       1232
#define EGRESS_RESOLVER_CLIENT_UDP_MAX 4096

/* The address timeout for a record's TTL: MIN(ttl, EGRESS_RESOLVER_TTL_MAX_SEC) s plus the grace, so at
 * least the grace (30 s, for a TTL of 0: the client connects right after) and at most an hour and 30 s (a
 * week's TTL does not keep an address open for a week). */
uint64_t egress_resolver_address_timeout(uint32_t ttl);

/* ---- The pure part: decisions on messages, no I/O (fuzzed by fuzz-egress-resolver) ---- */

typedef enum EgressQueryAction {
        EGRESS_QUERY_DROP,    /* no answer at all */
        EGRESS_QUERY_ANSWER,  /* answer: answer (FORMERR, NOTIMP, REFUSED, the empty AAAA) */
        EGRESS_QUERY_FORWARD, /* forward: forward (the query for upstream, id 0 until the caller sets one) */
        _EGRESS_QUERY_ACTION_MAX,
        _EGRESS_QUERY_ACTION_INVALID = -EINVAL,
} EgressQueryAction;

DECLARE_STRING_TABLE(egress_query_action, EgressQueryAction);

typedef struct EgressQueryDecision {
        EgressQueryAction action;
        ldns_pkt *answer;               /* ANSWER */
        ldns_pkt *forward;              /* FORWARD */
        ldns_rr *question;              /* the client's question as sent (NULL when it had none) */
        uint16_t id;                    /* the client's id */
        bool rd, cd, edns, edns_do;     /* the client's flags */
        size_t udp_size;                /* the largest UDP answer the client takes */
        char name[EGRESS_NAME_MAX + 1]; /* normalized, or "" when the query had no valid name */
        uint16_t qtype;
        /* Set when the query was refused for its name or class: what the denied callback is told. */
        const char *denied_reason;
} EgressQueryDecision;

void egress_query_decision_done(EgressQueryDecision *d);

/* Decides about one query message. Returns 0 with *ret filled (owned by the caller:
 * egress_query_decision_done()), or -ENOMEM. policy may be NULL: everything is denied. */
int egress_resolver_decide(const EgressPolicy *policy, const uint8_t *buf, size_t len,
                           EgressQueryDecision *ret);

typedef struct EgressAnswerAddress {
        struct in_addr address;
        uint32_t ttl;
        EgressAddressVerdict verdict;
} EgressAnswerAddress;

typedef struct EgressAnswer {
        int rcode;                  /* the upstream's (LDNS_RCODE_*) */
        bool truncated;             /* the upstream set TC: ask it again over TCP */
        ldns_pkt *reply;            /* what the client gets (its id, question, the filtered sections) */
        EgressAnswerAddress *allow; /* to be allowed before the reply goes: verdict ALLOWED or IF_RESOLVED */
        size_t n_allow;
        EgressAnswerAddress *denied; /* removed from the answer: verdict DENIED */
        size_t n_denied;
} EgressAnswer;

void egress_answer_done(EgressAnswer *a);

/* Reads an upstream's answer to the FORWARD decision q, sent with id upstream_id. Returns 0 with *ret filled
 * (owned by the caller: egress_answer_done()); -EBADMSG if it is not parseable, not a response, or not to
 * that id and question (to be ignored); -ENOMEM. */
int egress_resolver_filter_answer(const EgressPolicy *policy, const EgressCidr *pool,
                                  const EgressQueryDecision *q, uint16_t upstream_id, const uint8_t *buf,
                                  size_t len, EgressAnswer *ret);

/* A reply for q with only a header and its question (SERVFAIL when upstreams fail, and the like). */
ldns_pkt *egress_resolver_reply_rcode(const EgressQueryDecision *q, int rcode);

/* The reply's wire form in at most max bytes: as it is if it fits, else its header and question with TC set.
 * Returns 0 and a malloc'd buffer, -ENOMEM, -EBADMSG (ldns could not write it). */
int egress_resolver_reply_to_wire(const ldns_pkt *reply, size_t max, uint8_t **ret, size_t *ret_len);

/* ---- The resolver on the event loop ---- */

typedef struct EgressResolverConfig {
        struct sockaddr_in listen; /* IPv4 address and port (0: any free port, the same for UDP and TCP) */
        /* Upstream servers, AF_INET or AF_INET6 with their port; 1..EGRESS_RESOLVER_UPSTREAMS_MAX (copied).
         */
        const struct sockaddr_storage *upstreams;
        size_t n_upstreams;
        uint64_t upstream_timeout_usec;   /* per attempt; 0: EGRESS_RESOLVER_UPSTREAM_TIMEOUT_USEC */
        unsigned inflight_max;            /* 0: EGRESS_RESOLVER_INFLIGHT_MAX */
        unsigned inflight_per_client_max; /* 0: EGRESS_RESOLVER_INFLIGHT_PER_CLIENT_MAX */
        unsigned tcp_connections_max;     /* 0: EGRESS_RESOLVER_TCP_CONNECTIONS_MAX */
        uint64_t tcp_idle_usec;           /* 0: EGRESS_RESOLVER_TCP_IDLE_USEC */
        /* The other sandboxes' addresses (IPv4), never opened; NULL for none (copied). */
        const EgressCidr *pool;

        /* The sandbox's policy now (it may change between two queries; each query reads it once). NULL
         * denies everything. Required. */
        const EgressPolicy *(*get_policy)(void *userdata);
        /* Opens family/addr (network byte order) to the sandbox for timeout_usec, before the answer naming
         * it is sent (sandboxd: egress_nft_render_allow_address() applied). A negative errno fails the
         * query with SERVFAIL. Required. */
        int (*allow_address)(void *userdata, int family, const void *addr, uint64_t timeout_usec);
        /* A refused name (name is normalized when valid, else as the query had it, possibly ""), or an
         * address removed from an answer; reason is one phrase. For the audit (egress-denials). Optional. */
        void (*denied)(void *userdata, const char *name, uint16_t qtype, const char *reason);
        /* Called with userdata when the resolver is freed. Optional. */
        void (*free_userdata)(void *userdata);
        void *userdata;
} EgressResolverConfig;

typedef struct EgressResolver EgressResolver;

/* Binds the UDP and TCP sockets and attaches them to event. Returns 0; -EINVAL (a bad config: no upstream,
 * too many, a family other than AF_INET/AF_INET6, no get_policy or allow_address); a negative errno from
 * socket(), bind() (-EADDRINUSE, -EADDRNOTAVAIL) or sd-event. Nothing is left bound on failure, and
 * free_userdata is not called then. */
int egress_resolver_new(sd_event *event, const EgressResolverConfig *config, EgressResolver **ret);
/* Closes the sockets, ends every query in flight without an answer and every TCP connection. Accepts NULL.
 */
EgressResolver *egress_resolver_free(EgressResolver *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(EgressResolver *, egress_resolver_free);

/* Where it listens (the port chosen when the config said 0). */
void egress_resolver_local_address(const EgressResolver *r, struct sockaddr_in *ret);

typedef struct EgressResolverStats {
        uint64_t queries, forwarded, refused, answered_locally, dropped, servfail, truncated, overload;
        unsigned inflight, tcp_connections;
} EgressResolverStats;
void egress_resolver_stats(const EgressResolver *r, EgressResolverStats *ret);

/* The host's upstream servers from a resolv.conf (ldns_resolver_new_frm_file()), port 53, in the file's
 * order, at most EGRESS_RESOLVER_UPSTREAMS_MAX. Loopback servers (systemd-resolved's 127.0.0.53, a local
 * dnsmasq) are kept: the resolver runs in sandboxd, in the host's network namespace, where they answer.
 * Returns the number (>= 1) and a malloc'd array; -ENOENT if the file does not exist; -ENXIO if it names
 * no server; -EBADMSG if ldns cannot read it; -ENOMEM. */
int egress_resolver_upstreams_from_resolv_conf(const char *path, struct sockaddr_storage **ret);
