/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An egress sandbox's DNS resolver (issue 23): answers allowed names only, opening what they resolve to. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress-resolver.h"

static const char *const egress_query_action_table[_EGRESS_QUERY_ACTION_MAX] = {
        [EGRESS_QUERY_DROP] = "drop",
        [EGRESS_QUERY_ANSWER] = "answer",
        [EGRESS_QUERY_FORWARD] = "forward",
};

DEFINE_STRING_TABLE(egress_query_action, EgressQueryAction, _EGRESS_QUERY_ACTION_MAX);

uint64_t egress_resolver_address_timeout(uint32_t ttl) {
        return MIN((uint64_t) ttl, (uint64_t) EGRESS_RESOLVER_TTL_MAX_SEC) * USEC_PER_SEC +
               EGRESS_RESOLVER_GRACE_USEC;
}

static void ldns_pkt_freep(ldns_pkt **p) {
        if (*p)
                ldns_pkt_free(*p);
}

void egress_query_decision_done(EgressQueryDecision *d) {
        if (!d)
                return;
        if (d->answer)
                ldns_pkt_free(d->answer);
        if (d->forward)
                ldns_pkt_free(d->forward);
        if (d->question)
                ldns_rr_free(d->question);
        d->answer = d->forward = NULL;
        d->question = NULL;
}

/* A response to the client's query: its id, RD and CD, RA, the question it asked (if any), EDNS0 if it
 * used it. */
static ldns_pkt *reply_new(const EgressQueryDecision *q, int rcode) {
        ldns_pkt *p = ldns_pkt_new();

        if (!p)
                return NULL;
        ldns_pkt_set_id(p, q->id);
        ldns_pkt_set_qr(p, true);
        ldns_pkt_set_opcode(p, LDNS_PACKET_QUERY);
        ldns_pkt_set_rd(p, q->rd);
        ldns_pkt_set_cd(p, q->cd);
        ldns_pkt_set_ra(p, true);
        ldns_pkt_set_rcode(p, (uint8_t) rcode);
        if (q->question) {
                ldns_rr *qr = ldns_rr_clone(q->question);
                if (!qr || !ldns_pkt_push_rr(p, LDNS_SECTION_QUESTION, qr)) {
                        ldns_rr_free(qr);
                        ldns_pkt_free(p);
                        return NULL;
                }
        }
        if (q->edns) {
                ldns_pkt_set_edns_udp_size(p, EGRESS_RESOLVER_UDP_SIZE);
                ldns_pkt_set_edns_do(p, q->edns_do);
        }
        return p;
}

ldns_pkt *egress_resolver_reply_rcode(const EgressQueryDecision *q, int rcode) {
        return reply_new(q, rcode);
}

static int decide_answer(EgressQueryDecision *d, int rcode, const char *denied_reason) {
        d->action = EGRESS_QUERY_ANSWER;
        d->denied_reason = denied_reason;
        d->answer = reply_new(d, rcode);
        return d->answer ? 0 : -ENOMEM;
}

int egress_resolver_decide(const EgressPolicy *policy, const uint8_t *buf, size_t len,
                           EgressQueryDecision *ret) {
        _cleanup_(ldns_pkt_freep) ldns_pkt *pkt = NULL;
        EgressQueryDecision d = {.action = EGRESS_QUERY_DROP, .udp_size = 512};
        const EgressEntry *by = NULL;
        ldns_rr_list *questions;
        char *text;
        int r;

        *ret = d;
        /* Nothing to answer without a header; never answer an answer. */
        if (!buf || len < LDNS_HEADER_SIZE || LDNS_QR_WIRE(buf))
                return 0;
        d.id = LDNS_ID_WIRE(buf);
        d.rd = LDNS_RD_WIRE(buf);
        d.cd = LDNS_CD_WIRE(buf);

        if (ldns_wire2pkt(&pkt, buf, len) != LDNS_STATUS_OK) {
                pkt = NULL;
                r = decide_answer(&d, LDNS_RCODE_FORMERR, NULL);
                goto done;
        }
        if (ldns_pkt_edns(pkt)) {
                d.edns = true;
                d.edns_do = ldns_pkt_edns_do(pkt);
                d.udp_size = MAX((size_t) 512, MIN((size_t) ldns_pkt_edns_udp_size(pkt),
                                                   (size_t) EGRESS_RESOLVER_CLIENT_UDP_MAX));
        }
        if (ldns_pkt_get_opcode(pkt) != LDNS_PACKET_QUERY) {
                r = decide_answer(&d, LDNS_RCODE_NOTIMPL, NULL);
                goto done;
        }
        questions = ldns_pkt_question(pkt);
        if (ldns_pkt_qdcount(pkt) != 1 || !questions || ldns_rr_list_rr_count(questions) != 1) {
                r = decide_answer(&d, LDNS_RCODE_FORMERR, NULL);
                goto done;
        }
        d.question = ldns_rr_clone(ldns_rr_list_rr(questions, 0));
        if (!d.question) {
                r = -ENOMEM;
                goto done;
        }
        d.qtype = (uint16_t) ldns_rr_get_type(d.question);

        text = ldns_rdf2str(ldns_rr_owner(d.question));
        if (!text) {
                r = -ENOMEM;
                goto done;
        }
        r = egress_name_normalize(text, d.name);
        if (r < 0)
                /* Kept as the query had it for the denied callback (cut to fit). */
                snprintf(d.name, sizeof(d.name), "%s", text);
        free(text);
        if (r < 0) {
                r = decide_answer(&d, LDNS_RCODE_REFUSED, "not a valid name");
                goto done;
        }

        if (ldns_rr_get_class(d.question) != LDNS_RR_CLASS_IN) {
                r = decide_answer(&d, LDNS_RCODE_REFUSED, "class is not served (only IN)");
                goto done;
        }
        if (d.qtype == LDNS_RR_TYPE_AXFR || d.qtype == LDNS_RR_TYPE_IXFR) {
                r = decide_answer(&d, LDNS_RCODE_NOTIMPL, NULL);
                goto done;
        }
        r = policy ? egress_policy_name_allowed(policy, d.name, &by) : 0;
        if (r <= 0) {
                r = decide_answer(&d, LDNS_RCODE_REFUSED,
                                  r < 0 ? "not a valid name"
                                  : by  ? "denied by a deny entry"
                                        : "not allowed by the policy");
                goto done;
        }
        if (d.qtype == LDNS_RR_TYPE_AAAA) {
                /* IPv6 is not routed from a sandbox in this step: an empty answer, so clients use IPv4. */
                r = decide_answer(&d, LDNS_RCODE_NOERROR, NULL);
                goto done;
        }

        ldns_rdf *owner = ldns_rdf_clone(ldns_rr_owner(d.question));
        if (!owner) {
                r = -ENOMEM;
                goto done;
        }
        d.forward = ldns_pkt_query_new(owner, (ldns_rr_type) d.qtype, LDNS_RR_CLASS_IN,
                                       (d.rd ? LDNS_RD : 0) | (d.cd ? LDNS_CD : 0));
        if (!d.forward) {
                r = -ENOMEM;
                goto done;
        }
        ldns_pkt_set_id(d.forward, 0);
        ldns_pkt_set_edns_udp_size(d.forward, EGRESS_RESOLVER_UDP_SIZE);
        ldns_pkt_set_edns_do(d.forward, d.edns_do);
        d.action = EGRESS_QUERY_FORWARD;
        r = 0;
done:
        if (r < 0) {
                egress_query_decision_done(&d);
                return r;
        }
        *ret = d;
        return 0;
}

void egress_answer_done(EgressAnswer *a) {
        if (!a)
                return;
        if (a->reply)
                ldns_pkt_free(a->reply);
        free(a->allow);
        free(a->denied);
        *a = (EgressAnswer){};
}

static int push_address(EgressAnswerAddress **l, size_t *n, const EgressAnswerAddress *a) {
        EgressAnswerAddress *m = reallocarray(*l, *n + 1, sizeof(**l));

        if (!m)
                return -ENOMEM;
        m[(*n)++] = *a;
        *l = m;
        return 0;
}

/* Whether rr's owner is on the chain (the question's name and the CNAME targets followed from it). */
static bool on_chain(ldns_rdf *const *chain, size_t n, const ldns_rr *rr) {
        for (size_t i = 0; i < n; i++)
                if (ldns_dname_compare(chain[i], ldns_rr_owner(rr)) == 0)
                        return true;
        return false;
}

int egress_resolver_filter_answer(const EgressPolicy *policy, const EgressCidr *pool,
                                  const EgressQueryDecision *q, uint16_t upstream_id, const uint8_t *buf,
                                  size_t len, EgressAnswer *ret) {
        _cleanup_(ldns_pkt_freep) ldns_pkt *pkt = NULL;
        _cleanup_(egress_answer_done) EgressAnswer a = {};
        ldns_rdf *chain[EGRESS_RESOLVER_CNAME_MAX + 1];
        size_t n_chain = 0;
        ldns_rr_list *section;
        int r;

        if (!q || !q->question || q->action != EGRESS_QUERY_FORWARD)
                return -EINVAL;
        if (!buf || len < LDNS_HEADER_SIZE || !LDNS_QR_WIRE(buf) || LDNS_ID_WIRE(buf) != upstream_id)
                return -EBADMSG;
        if (ldns_wire2pkt(&pkt, buf, len) != LDNS_STATUS_OK) {
                pkt = NULL;
                return -EBADMSG;
        }
        /* It must answer our question (a spoofed answer to another one is ignored). */
        section = ldns_pkt_question(pkt);
        if (ldns_rr_list_rr_count(section) != 1 ||
            ldns_dname_compare(ldns_rr_owner(ldns_rr_list_rr(section, 0)), ldns_rr_owner(q->question)) !=
                    0 ||
            ldns_rr_get_type(ldns_rr_list_rr(section, 0)) != (ldns_rr_type) q->qtype ||
            ldns_rr_get_class(ldns_rr_list_rr(section, 0)) != LDNS_RR_CLASS_IN)
                return -EBADMSG;

        a.rcode = ldns_pkt_get_rcode(pkt);
        a.truncated = ldns_pkt_tc(pkt);
        a.reply = reply_new(q, a.rcode);
        if (!a.reply)
                return -ENOMEM;
        ldns_pkt_set_ad(a.reply, ldns_pkt_ad(pkt));

        /* The chain: the question's name, then each CNAME target whose owner is on it, in any order. */
        section = ldns_pkt_answer(pkt);
        chain[n_chain++] = ldns_rr_owner(q->question);
        for (bool grew = true; grew && n_chain <= EGRESS_RESOLVER_CNAME_MAX;) {
                grew = false;
                for (size_t i = 0;
                     i < ldns_rr_list_rr_count(section) && n_chain <= EGRESS_RESOLVER_CNAME_MAX; i++) {
                        ldns_rr *rr = ldns_rr_list_rr(section, i);
                        ldns_rdf *target;
                        if (ldns_rr_get_type(rr) != LDNS_RR_TYPE_CNAME || !on_chain(chain, n_chain, rr))
                                continue;
                        target = ldns_rr_rdf(rr, 0);
                        if (!target || ldns_rdf_get_type(target) != LDNS_RDF_TYPE_DNAME)
                                continue;
                        bool known = false;
                        for (size_t k = 0; k < n_chain && !known; k++)
                                known = ldns_dname_compare(chain[k], target) == 0;
                        if (!known) {
                                chain[n_chain++] = target;
                                grew = true;
                        }
                }
        }

        for (size_t i = 0; i < ldns_rr_list_rr_count(section); i++) {
                ldns_rr *rr = ldns_rr_list_rr(section, i), *copy;
                ldns_rr_type t = ldns_rr_get_type(rr);

                if (t == LDNS_RR_TYPE_AAAA)
                        continue; /* IPv6 is not routed in this step */
                if (t == LDNS_RR_TYPE_A) {
                        ldns_rdf *rd = ldns_rr_rdf(rr, 0);
                        EgressAnswerAddress addr = {.ttl = ldns_rr_ttl(rr)};

                        if (ldns_rr_get_class(rr) != LDNS_RR_CLASS_IN || !on_chain(chain, n_chain, rr) ||
                            !rd || ldns_rdf_get_type(rd) != LDNS_RDF_TYPE_A || ldns_rdf_size(rd) != 4)
                                continue; /* not the answer to this question: not opened, not passed on */
                        memcpy(&addr.address, ldns_rdf_data(rd), 4);
                        addr.verdict = egress_policy_address_verdict(policy, pool, AF_INET, &addr.address);
                        /* No policy (or anything unexpected) opens nothing. */
                        if (addr.verdict != EGRESS_ADDRESS_ALLOWED &&
                            addr.verdict != EGRESS_ADDRESS_IF_RESOLVED)
                                addr.verdict = EGRESS_ADDRESS_DENIED;
                        if (addr.verdict == EGRESS_ADDRESS_DENIED) {
                                r = push_address(&a.denied, &a.n_denied, &addr);
                                if (r < 0)
                                        return r;
                                continue;
                        }
                        r = push_address(&a.allow, &a.n_allow, &addr);
                        if (r < 0)
                                return r;
                }
                copy = ldns_rr_clone(rr);
                if (!copy || !ldns_pkt_push_rr(a.reply, LDNS_SECTION_ANSWER, copy)) {
                        ldns_rr_free(copy);
                        return -ENOMEM;
                }
        }

        section = ldns_pkt_authority(pkt);
        for (size_t i = 0; i < ldns_rr_list_rr_count(section); i++) {
                ldns_rr *rr = ldns_rr_list_rr(section, i), *copy;
                if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_A || ldns_rr_get_type(rr) == LDNS_RR_TYPE_AAAA)
                        continue;
                copy = ldns_rr_clone(rr);
                if (!copy || !ldns_pkt_push_rr(a.reply, LDNS_SECTION_AUTHORITY, copy)) {
                        ldns_rr_free(copy);
                        return -ENOMEM;
                }
        }

        *ret = a;
        a = (EgressAnswer){};
        return 0;
}

int egress_resolver_reply_to_wire(const ldns_pkt *reply, size_t max, uint8_t **ret, size_t *ret_len) {
        uint8_t *wire = NULL;
        size_t n = 0;

        if (ldns_pkt2wire(&wire, reply, &n) != LDNS_STATUS_OK) {
                free(wire);
                return -EBADMSG;
        }
        if (n > max) {
                /* Too big for the client: the header and the question, TC set; it asks again over TCP. */
                _cleanup_(ldns_pkt_freep) ldns_pkt *tc = ldns_pkt_new();
                ldns_rr_list *qs = ldns_pkt_question(reply);

                free(wire);
                wire = NULL;
                if (!tc)
                        return -ENOMEM;
                ldns_pkt_set_id(tc, ldns_pkt_id(reply));
                ldns_pkt_set_qr(tc, true);
                ldns_pkt_set_opcode(tc, ldns_pkt_get_opcode(reply));
                ldns_pkt_set_rd(tc, ldns_pkt_rd(reply));
                ldns_pkt_set_cd(tc, ldns_pkt_cd(reply));
                ldns_pkt_set_ra(tc, ldns_pkt_ra(reply));
                ldns_pkt_set_rcode(tc, ldns_pkt_get_rcode(reply));
                ldns_pkt_set_tc(tc, true);
                if (ldns_pkt_edns(reply))
                        ldns_pkt_set_edns_udp_size(tc, ldns_pkt_edns_udp_size(reply));
                for (size_t i = 0; i < ldns_rr_list_rr_count(qs); i++) {
                        ldns_rr *c = ldns_rr_clone(ldns_rr_list_rr(qs, i));
                        if (!c || !ldns_pkt_push_rr(tc, LDNS_SECTION_QUESTION, c)) {
                                ldns_rr_free(c);
                                return -ENOMEM;
                        }
                }
                if (ldns_pkt2wire(&wire, tc, &n) != LDNS_STATUS_OK) {
                        free(wire);
                        return -EBADMSG;
                }
                if (n > max) {
                        free(wire);
                        return -EBADMSG;
                }
        }
        *ret = wire;
        *ret_len = n;
        return 0;
}

/* ---- I/O ---- */

typedef struct Conn Conn;
typedef struct Query Query;

struct EgressResolver {
        sd_event *event;
        EgressResolverConfig config;
        struct sockaddr_storage *upstreams;
        EgressCidr pool;
        bool have_pool;
        struct sockaddr_in local;
        int udp_fd, tcp_fd;
        sd_event_source *udp_source, *tcp_source;
        uint8_t *buf; /* one datagram */
        Query *queries;
        unsigned n_queries;
        Conn *conns;
        unsigned n_conns;
        EgressResolverStats stats;
};

#define TCP_MSG_MAX (2 + 65535)
/* Answers queued on one TCP connection, at most. */
#define TCP_OUT_MAX (4 * TCP_MSG_MAX)

struct Conn {
        EgressResolver *resolver;
        Conn *prev, *next;
        int fd;
        sd_event_source *io, *timer;
        uint8_t *in;
        size_t in_len;
        uint8_t *out;
        size_t out_len;
        unsigned n_queries;
        bool eof;
        bool broken; /* an answer could not be queued: freed as soon as nothing runs on it */
        bool busy;   /* on_conn_io() is running on it: not freed under it */
};

struct Query {
        EgressResolver *resolver;
        Query *prev, *next;
        EgressQueryDecision decision;
        Conn *conn; /* a TCP client; NULL for UDP (or a TCP client gone) */
        bool udp;   /* a UDP client, at client */
        struct sockaddr_in client;
        unsigned attempt; /* upstream index = attempt % n_upstreams */
        uint16_t upstream_id;
        bool tcp; /* this attempt over TCP */
        int fd;
        sd_event_source *io, *timer;
        uint8_t *wire; /* the query for upstream; over TCP with its length prefix */
        size_t wire_len, wire_done;
        uint8_t *in; /* the answer over TCP, with its length prefix */
        size_t in_len;
};

#define LIST_PREPEND(head, item)               \
        do {                                   \
                (item)->prev = NULL;           \
                (item)->next = (head);         \
                if (head)                      \
                        (head)->prev = (item); \
                (head) = (item);               \
        } while (0)
#define LIST_REMOVE(head, item)                            \
        do {                                               \
                if ((item)->prev)                          \
                        (item)->prev->next = (item)->next; \
                else                                       \
                        (head) = (item)->next;             \
                if ((item)->next)                          \
                        (item)->next->prev = (item)->prev; \
                (item)->prev = (item)->next = NULL;        \
        } while (0)

static void conn_free(Conn *c);
static void conn_maybe_done(Conn *c);
static int conn_update_events(Conn *c);
static int query_attempt(Query *q);

static const EgressPolicy *policy_now(EgressResolver *r) {
        return r->config.get_policy(r->config.userdata);
}

static void query_end_attempt(Query *q) {
        q->io = sd_event_source_disable_unref(q->io);
        q->fd = safe_close(q->fd);
        free(q->in);
        q->in = NULL;
        q->in_len = 0;
        q->wire_done = 0;
}

static Query *query_free(Query *q) {
        if (!q)
                return NULL;
        query_end_attempt(q);
        q->timer = sd_event_source_disable_unref(q->timer);
        LIST_REMOVE(q->resolver->queries, q);
        q->resolver->n_queries--;
        if (q->conn) {
                q->conn->n_queries--;
                conn_maybe_done(q->conn);
        }
        egress_query_decision_done(&q->decision);
        free(q->wire);
        free(q);
        return NULL;
}

/* Sends a reply to a client: a datagram, or a message queued on its TCP connection. */
static void send_reply(EgressResolver *r, const EgressQueryDecision *d, Conn *conn, bool udp,
                       const struct sockaddr_in *client, const ldns_pkt *reply) {
        _cleanup_free_ uint8_t *wire = NULL;
        size_t n;

        if (egress_resolver_reply_to_wire(reply, udp ? d->udp_size : 65535, &wire, &n) < 0)
                return;
        if (ldns_pkt_tc(reply) || (n > LDNS_HEADER_SIZE && LDNS_TC_WIRE(wire)))
                r->stats.truncated++;
        if (udp) {
                /* A datagram socket: it goes whole or not at all; a full buffer loses it, as UDP may. */
                (void) sendto(r->udp_fd, wire, n, MSG_DONTWAIT | MSG_NOSIGNAL,
                              (const struct sockaddr *) client, sizeof(*client));
                return;
        }
        if (!conn || conn->broken)
                return;
        if (conn->out_len + 2 + n > TCP_OUT_MAX) {
                /* A client that sends queries and reads no answers: closed. */
                conn->broken = true;
                return;
        }
        uint8_t *m = realloc(conn->out, conn->out_len + 2 + n);
        if (!m) {
                conn->broken = true;
                return;
        }
        conn->out = m;
        m[conn->out_len] = (uint8_t) (n >> 8);
        m[conn->out_len + 1] = (uint8_t) n;
        memcpy(m + conn->out_len + 2, wire, n);
        conn->out_len += 2 + n;
        if (conn_update_events(conn) < 0)
                conn->broken = true;
}

static void query_reply_rcode(Query *q, int rcode) {
        _cleanup_(ldns_pkt_freep) ldns_pkt *p = egress_resolver_reply_rcode(&q->decision, rcode);

        if (rcode == LDNS_RCODE_SERVFAIL)
                q->resolver->stats.servfail++;
        if (p)
                send_reply(q->resolver, &q->decision, q->conn, q->udp, &q->client, p);
}

static void query_fail(Query *q) {
        query_reply_rcode(q, LDNS_RCODE_SERVFAIL);
        query_free(q);
}

/* The next upstream, or SERVFAIL after the last attempt. */
static void query_next(Query *q) {
        EgressResolver *r = q->resolver;

        query_end_attempt(q);
        q->tcp = false;
        q->attempt++;
        if (q->attempt >= r->config.n_upstreams * EGRESS_RESOLVER_ROUNDS || query_attempt(q) < 0)
                query_fail(q);
}

/* Answers that say this upstream cannot help: the next one is asked. */
static bool rcode_asks_next(int rcode) {
        return rcode == LDNS_RCODE_SERVFAIL || rcode == LDNS_RCODE_REFUSED || rcode == LDNS_RCODE_NOTIMPL ||
               rcode == LDNS_RCODE_FORMERR;
}

static void query_answer(Query *q, const uint8_t *buf, size_t len) {
        EgressResolver *r = q->resolver;
        _cleanup_(egress_answer_done) EgressAnswer a = {};
        const EgressPolicy *policy = policy_now(r);
        int k;

        k = egress_resolver_filter_answer(policy, r->have_pool ? &r->pool : NULL, &q->decision,
                                          q->upstream_id, buf, len, &a);
        if (k == -EBADMSG)
                return; /* not the answer: keep waiting for it (or the timeout) */
        /* The policy may have changed while the query was upstream: a name it no longer allows is refused
         * now, and nothing of its answer is opened. */
        if (k >= 0 && (!policy || egress_policy_name_allowed(policy, q->decision.name, NULL) != 1)) {
                r->stats.refused++;
                if (r->config.denied)
                        r->config.denied(r->config.userdata, q->decision.name, q->decision.qtype,
                                         "not allowed by the policy (changed while the query was upstream)");
                query_reply_rcode(q, LDNS_RCODE_REFUSED);
                query_free(q);
                return;
        }
        if (k < 0) {
                query_fail(q);
                return;
        }
        if (a.truncated && !q->tcp) {
                /* Too big for UDP: ask the same upstream over TCP. */
                query_end_attempt(q);
                q->tcp = true;
                if (query_attempt(q) < 0)
                        query_fail(q);
                return;
        }
        if (rcode_asks_next(a.rcode)) {
                query_next(q);
                return;
        }
        for (size_t i = 0; i < a.n_denied; i++)
                if (r->config.denied) {
                        char t[INET_ADDRSTRLEN], why[64];
                        snprintf(why, sizeof(why), "answer %s denied",
                                 inet_ntop(AF_INET, &a.denied[i].address, t, sizeof(t)) ?: "?");
                        r->config.denied(r->config.userdata, q->decision.name, q->decision.qtype, why);
                }
        for (size_t i = 0; i < a.n_allow; i++)
                if (r->config.allow_address(r->config.userdata, AF_INET, &a.allow[i].address,
                                            egress_resolver_address_timeout(a.allow[i].ttl)) < 0) {
                        query_fail(q);
                        return;
                }
        send_reply(r, &q->decision, q->conn, q->udp, &q->client, a.reply);
        query_free(q);
}

static int on_query_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Query *q = userdata;
        EgressResolver *r = q->resolver;
        ssize_t n;

        if (!q->tcp) {
                n = recv(fd, r->buf, 65535, MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                return 0;
                        query_next(q); /* ECONNREFUSED: nothing listens there */
                        return 0;
                }
                query_answer(q, r->buf, (size_t) n);
                return 0;
        }

        if (q->wire_done < q->wire_len) {
                int err = 0;
                socklen_t sl = sizeof(err);
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0 || err != 0) {
                        query_next(q);
                        return 0;
                }
                n = send(fd, q->wire + q->wire_done, q->wire_len - q->wire_done,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno != EAGAIN && errno != EINTR)
                                query_next(q);
                        return 0;
                }
                q->wire_done += (size_t) n;
                if (q->wire_done == q->wire_len && sd_event_source_set_io_events(s, EPOLLIN) < 0)
                        query_next(q);
                return 0;
        }

        if (!q->in) {
                q->in = malloc(TCP_MSG_MAX);
                if (!q->in) {
                        query_fail(q);
                        return 0;
                }
        }
        size_t want = q->in_len < 2 ? 2 : 2 + ((size_t) q->in[0] << 8 | q->in[1]);
        n = recv(fd, q->in + q->in_len, want - q->in_len, MSG_DONTWAIT);
        if (n < 0) {
                if (errno != EAGAIN && errno != EINTR)
                        query_next(q);
                return 0;
        }
        if (n == 0) {
                query_next(q); /* closed before a whole answer */
                return 0;
        }
        q->in_len += (size_t) n;
        if (q->in_len >= 2) {
                want = 2 + ((size_t) q->in[0] << 8 | q->in[1]);
                if (q->in_len == want) {
                        /* The buffer outlives query_answer(), which may free q. */
                        _cleanup_free_ uint8_t *msg = TAKE_PTR(q->in);
                        q->in_len = 0;
                        query_answer(q, msg + 2, want - 2);
                }
        }
        return 0;
}

static int on_query_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        query_next(userdata);
        return 0;
}

static uint64_t upstream_timeout(EgressResolver *r) {
        return r->config.upstream_timeout_usec ?: EGRESS_RESOLVER_UPSTREAM_TIMEOUT_USEC;
}

/* One attempt: a socket of its own to the upstream of this attempt, the query sent (UDP) or queued (TCP),
 * the timer (re)armed. */
static int query_attempt(Query *q) {
        EgressResolver *r = q->resolver;
        const struct sockaddr_storage *up = &r->upstreams[q->attempt % r->config.n_upstreams];
        socklen_t sl = up->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
        _cleanup_free_ uint8_t *wire = NULL;
        size_t n;
        int k;

        q->upstream_id = (uint16_t) arc4random();
        ldns_pkt_set_id(q->decision.forward, q->upstream_id);
        if (ldns_pkt2wire(&wire, q->decision.forward, &n) != LDNS_STATUS_OK)
                return -ENOMEM;
        free(q->wire);
        q->wire = malloc(n + 2);
        if (!q->wire)
                return -ENOMEM;
        q->wire[0] = (uint8_t) (n >> 8);
        q->wire[1] = (uint8_t) n;
        memcpy(q->wire + 2, wire, n);
        q->wire_len = n + 2;
        q->wire_done = q->tcp ? 0 : q->wire_len;

        q->fd = socket(up->ss_family, (q->tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (q->fd < 0)
                return -errno;
        if (connect(q->fd, (const struct sockaddr *) up, sl) < 0 && errno != EINPROGRESS) {
                /* Treated as this upstream failing: the timer's zero delay moves to the next one. */
                k = sd_event_source_set_time_relative(q->timer, 0);
                return k < 0 ? k : sd_event_source_set_enabled(q->timer, SD_EVENT_ONESHOT);
        }
        if (!q->tcp && send(q->fd, q->wire + 2, n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
                k = sd_event_source_set_time_relative(q->timer, 0);
                return k < 0 ? k : sd_event_source_set_enabled(q->timer, SD_EVENT_ONESHOT);
        }
        k = sd_event_add_io(r->event, &q->io, q->fd, q->tcp ? EPOLLOUT : EPOLLIN, on_query_io, q);
        if (k < 0)
                return k;
        k = sd_event_source_set_time_relative(q->timer, upstream_timeout(r));
        if (k < 0)
                return k;
        return sd_event_source_set_enabled(q->timer, SD_EVENT_ONESHOT);
}

static unsigned inflight_of_udp_client(EgressResolver *r, const struct sockaddr_in *client) {
        unsigned n = 0;

        for (Query *q = r->queries; q; q = q->next)
                if (q->udp && q->client.sin_addr.s_addr == client->sin_addr.s_addr &&
                    q->client.sin_port == client->sin_port)
                        n++;
        return n;
}

/* One query from a client (UDP: client; TCP: conn). */
static void handle_query(EgressResolver *r, const uint8_t *buf, size_t len, Conn *conn,
                         const struct sockaddr_in *client) {
        _cleanup_(egress_query_decision_done) EgressQueryDecision d = {};
        bool udp = !conn;
        Query *q;

        r->stats.queries++;
        if (egress_resolver_decide(policy_now(r), buf, len, &d) < 0) {
                r->stats.dropped++;
                return;
        }
        if (d.action == EGRESS_QUERY_DROP) {
                r->stats.dropped++;
                return;
        }
        if (d.action == EGRESS_QUERY_ANSWER) {
                if (d.denied_reason) {
                        r->stats.refused++;
                        if (r->config.denied)
                                r->config.denied(r->config.userdata, d.name, d.qtype, d.denied_reason);
                } else
                        r->stats.answered_locally++;
                send_reply(r, &d, conn, udp, client, d.answer);
                return;
        }

        unsigned per_client = r->config.inflight_per_client_max ?: EGRESS_RESOLVER_INFLIGHT_PER_CLIENT_MAX;
        if (r->n_queries >= (r->config.inflight_max ?: EGRESS_RESOLVER_INFLIGHT_MAX) ||
            (conn ? conn->n_queries : inflight_of_udp_client(r, client)) >= per_client) {
                _cleanup_(ldns_pkt_freep) ldns_pkt *p = egress_resolver_reply_rcode(&d, LDNS_RCODE_SERVFAIL);
                r->stats.overload++;
                r->stats.servfail++;
                if (p)
                        send_reply(r, &d, conn, udp, client, p);
                return;
        }

        q = calloc(1, sizeof(*q));
        if (!q)
                return;
        q->resolver = r;
        q->fd = -EBADF;
        q->decision = d;
        d = (EgressQueryDecision){};
        q->udp = udp;
        if (client)
                q->client = *client;
        q->conn = conn;
        if (conn)
                conn->n_queries++;
        LIST_PREPEND(r->queries, q);
        r->n_queries++;
        r->stats.forwarded++;
        if (sd_event_add_time_relative(r->event, &q->timer, CLOCK_MONOTONIC, upstream_timeout(r),
                                       USEC_PER_MSEC, on_query_timeout, q) < 0 ||
            query_attempt(q) < 0)
                query_fail(q);
}

static int on_udp(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        EgressResolver *r = userdata;

        /* A bounded batch per wake-up, so that TCP clients and upstream answers get their turn. */
        for (unsigned i = 0; i < 64; i++) {
                struct sockaddr_in client;
                socklen_t sl = sizeof(client);
                ssize_t n = recvfrom(fd, r->buf, 65535, MSG_DONTWAIT, (struct sockaddr *) &client, &sl);
                if (n < 0)
                        break;
                if (sl != sizeof(client) || client.sin_family != AF_INET)
                        continue;
                handle_query(r, r->buf, (size_t) n, NULL, &client);
        }
        return 0;
}

/* ---- TCP clients ---- */

static void conn_free(Conn *c) {
        if (!c)
                return;
        for (Query *q = c->resolver->queries; q; q = q->next)
                if (q->conn == c)
                        q->conn = NULL; /* its answer has nowhere to go */
        c->io = sd_event_source_disable_unref(c->io);
        c->timer = sd_event_source_disable_unref(c->timer);
        safe_close(c->fd);
        LIST_REMOVE(c->resolver->conns, c);
        c->resolver->n_conns--;
        free(c->in);
        free(c->out);
        free(c);
}

static void conn_maybe_done(Conn *c) {
        if (c->busy)
                return;
        if (c->broken || (c->eof && c->n_queries == 0 && c->out_len == 0))
                conn_free(c);
        else if (conn_update_events(c) < 0)
                conn_free(c);
}

static int conn_update_events(Conn *c) {
        uint32_t ev = (c->eof ? 0 : EPOLLIN) | (c->out_len > 0 ? EPOLLOUT : 0);
        int k;

        if (ev == 0)
                return sd_event_source_set_enabled(c->io, SD_EVENT_OFF);
        k = sd_event_source_set_io_events(c->io, ev);
        if (k < 0)
                return k;
        return sd_event_source_set_enabled(c->io, SD_EVENT_ON);
}

static int conn_touch(Conn *c) {
        int k = sd_event_source_set_time_relative(c->timer, c->resolver->config.tcp_idle_usec
                                                                    ?: EGRESS_RESOLVER_TCP_IDLE_USEC);
        return k < 0 ? k : sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
}

static int on_conn_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Conn *c = userdata;

        /* Idle, or too slow to send a whole query: closed, whatever is in flight. */
        conn_free(c);
        return 0;
}

static int on_conn_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Conn *c = userdata;
        ssize_t n;

        c->busy = true;
        if (revents & EPOLLOUT && c->out_len > 0) {
                n = send(fd, c->out, c->out_len, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0 && errno != EAGAIN && errno != EINTR)
                        c->broken = true;
                if (n > 0) {
                        memmove(c->out, c->out + n, c->out_len - (size_t) n);
                        c->out_len -= (size_t) n;
                        if (conn_touch(c) < 0)
                                c->broken = true;
                }
        }
        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR) && !c->eof && !c->broken) {
                n = recv(fd, c->in + c->in_len, TCP_MSG_MAX - c->in_len, MSG_DONTWAIT);
                if (n < 0 && errno != EAGAIN && errno != EINTR)
                        c->broken = true;
                if (n == 0)
                        c->eof = true;
                if (n > 0)
                        c->in_len += (size_t) n;
                /* Every whole message in the buffer; handle_query() may queue answers but never frees c. */
                while (c->in_len >= 2 && !c->broken) {
                        size_t m = (size_t) c->in[0] << 8 | c->in[1];
                        if (c->in_len < 2 + m)
                                break;
                        handle_query(c->resolver, c->in + 2, m, c, NULL);
                        memmove(c->in, c->in + 2 + m, c->in_len - 2 - m);
                        c->in_len -= 2 + m;
                        if (conn_touch(c) < 0)
                                c->broken = true;
                }
        }
        c->busy = false;
        conn_maybe_done(c);
        return 0;
}

static int on_tcp_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        EgressResolver *r = userdata;

        for (unsigned i = 0; i < 16; i++) {
                _cleanup_close_ int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                Conn *c;

                if (cfd < 0)
                        break;
                if (r->n_conns >= (r->config.tcp_connections_max ?: EGRESS_RESOLVER_TCP_CONNECTIONS_MAX))
                        continue; /* closed: over the bound */
                c = calloc(1, sizeof(*c));
                if (!c)
                        continue;
                c->resolver = r;
                c->in = malloc(TCP_MSG_MAX);
                c->fd = TAKE_FD(cfd);
                LIST_PREPEND(r->conns, c);
                r->n_conns++;
                if (!c->in || sd_event_add_io(r->event, &c->io, c->fd, EPOLLIN, on_conn_io, c) < 0 ||
                    sd_event_add_time_relative(r->event, &c->timer, CLOCK_MONOTONIC,
                                               r->config.tcp_idle_usec ?: EGRESS_RESOLVER_TCP_IDLE_USEC,
                                               USEC_PER_MSEC, on_conn_timeout, c) < 0)
                        conn_free(c);
        }
        return 0;
}

/* ---- Life ---- */

EgressResolver *egress_resolver_free(EgressResolver *r) {
        if (!r)
                return NULL;
        while (r->queries)
                query_free(r->queries);
        while (r->conns)
                conn_free(r->conns);
        r->udp_source = sd_event_source_disable_unref(r->udp_source);
        r->tcp_source = sd_event_source_disable_unref(r->tcp_source);
        safe_close(r->udp_fd);
        safe_close(r->tcp_fd);
        if (r->config.free_userdata)
                r->config.free_userdata(r->config.userdata);
        sd_event_unref(r->event);
        free(r->upstreams);
        free(r->buf);
        free(r);
        return NULL;
}

static int bind_sockets(EgressResolver *r, const struct sockaddr_in *listen_addr) {
        static const int one = 1;
        struct sockaddr_in a = *listen_addr;
        socklen_t sl = sizeof(a);

        a.sin_family = AF_INET;
        r->udp_fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (r->udp_fd < 0)
                return -errno;
        if (bind(r->udp_fd, (struct sockaddr *) &a, sizeof(a)) < 0)
                return -errno;
        /* With port 0, TCP takes the port UDP got. */
        if (getsockname(r->udp_fd, (struct sockaddr *) &a, &sl) < 0)
                return -errno;
        r->tcp_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (r->tcp_fd < 0)
                return -errno;
        (void) setsockopt(r->tcp_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(r->tcp_fd, (struct sockaddr *) &a, sizeof(a)) < 0 || listen(r->tcp_fd, 16) < 0)
                return -errno;
        r->local = a;
        return 0;
}

int egress_resolver_new(sd_event *event, const EgressResolverConfig *config, EgressResolver **ret) {
        EgressResolver *r;
        int k;

        if (!event || !config || !ret || !config->get_policy || !config->allow_address ||
            !config->upstreams || config->n_upstreams == 0 ||
            config->n_upstreams > EGRESS_RESOLVER_UPSTREAMS_MAX ||
            (config->pool && config->pool->family != AF_INET))
                return -EINVAL;
        for (size_t i = 0; i < config->n_upstreams; i++)
                if (config->upstreams[i].ss_family != AF_INET && config->upstreams[i].ss_family != AF_INET6)
                        return -EINVAL;

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->udp_fd = r->tcp_fd = -EBADF;
        r->config = *config;
        r->event = sd_event_ref(event);
        r->upstreams = calloc(config->n_upstreams, sizeof(*r->upstreams));
        r->buf = malloc(65535);
        if (!r->upstreams || !r->buf) {
                k = -ENOMEM;
                goto fail;
        }
        memcpy(r->upstreams, config->upstreams, config->n_upstreams * sizeof(*r->upstreams));
        r->config.upstreams = r->upstreams;
        if (config->pool) {
                r->pool = *config->pool;
                r->have_pool = true;
        }
        r->config.pool = NULL;

        k = bind_sockets(r, &config->listen);
        if (k < 0)
                goto fail;
        k = sd_event_add_io(event, &r->udp_source, r->udp_fd, EPOLLIN, on_udp, r);
        if (k < 0)
                goto fail;
        k = sd_event_add_io(event, &r->tcp_source, r->tcp_fd, EPOLLIN, on_tcp_accept, r);
        if (k < 0)
                goto fail;
        *ret = r;
        return 0;
fail:
        r->config.free_userdata = NULL; /* not ours on failure */
        egress_resolver_free(r);
        return k;
}

void egress_resolver_local_address(const EgressResolver *r, struct sockaddr_in *ret) {
        *ret = r->local;
}

void egress_resolver_stats(const EgressResolver *r, EgressResolverStats *ret) {
        *ret = r->stats;
        ret->inflight = r->n_queries;
        ret->tcp_connections = r->n_conns;
}

int egress_resolver_upstreams_from_resolv_conf(const char *path, struct sockaddr_storage **ret) {
        ldns_resolver *res = NULL;
        struct sockaddr_storage *l;
        size_t n, k = 0;

        if (access(path, F_OK) < 0)
                return -errno;
        if (ldns_resolver_new_frm_file(&res, path) != LDNS_STATUS_OK || !res)
                return -EBADMSG;
        n = MIN(ldns_resolver_nameserver_count(res), (size_t) EGRESS_RESOLVER_UPSTREAMS_MAX);
        if (n == 0) {
                ldns_resolver_deep_free(res);
                return -ENXIO;
        }
        l = calloc(n, sizeof(*l));
        if (!l) {
                ldns_resolver_deep_free(res);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                size_t size = 0;
                struct sockaddr_storage *ss = ldns_rdf2native_sockaddr_storage(
                        ldns_resolver_nameservers(res)[i], EGRESS_RESOLVER_PORT, &size);
                if (!ss)
                        continue;
                l[k++] = *ss;
                free(ss);
        }
        ldns_resolver_deep_free(res);
        if (k == 0) {
                free(l);
                return -ENXIO;
        }
        *ret = l;
        return (int) k;
}
