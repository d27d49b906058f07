/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests egress-resolver: its decisions on queries and answers, and the resolver on loopback with dnsmasq. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "egress-resolver.h"
#include "macro.h"
#include "test-util.h"

/* ---- Helpers: messages built with ldns ---- */

static ldns_pkt *query_pkt(const char *name, ldns_rr_type type, ldns_rr_class class, uint16_t edns_size) {
        ldns_pkt *p = ldns_pkt_query_new(ldns_dname_new_frm_str(name), type, class, LDNS_RD);

        ldns_pkt_set_id(p, (uint16_t) arc4random());
        if (edns_size)
                ldns_pkt_set_edns_udp_size(p, edns_size);
        return p;
}

static uint8_t *to_wire(const ldns_pkt *p, size_t *n) {
        uint8_t *w = NULL;
        CHECK_INT(ldns_pkt2wire(&w, p, n), LDNS_STATUS_OK);
        return w;
}

static void decide_pkt(const EgressPolicy *policy, const ldns_pkt *p, EgressQueryDecision *d) {
        size_t n;
        _cleanup_free_ uint8_t *w = to_wire(p, &n);
        CHECK_INT(egress_resolver_decide(policy, w, n, d), 0);
}

static int answer_rcode(const EgressQueryDecision *d) {
        return d->answer ? (int) ldns_pkt_get_rcode(d->answer) : -1;
}

static EgressPolicy make_policy(const char *const *allow, const char *const *deny, EgressDefault def) {
        EgressPolicy p = {.default_action = def};
        for (; allow && *allow; allow++)
                CHECK_INT(egress_policy_add(&p, true, *allow, NULL), 0);
        for (; deny && *deny; deny++)
                CHECK_INT(egress_policy_add(&p, false, *deny, NULL), 0);
        return p;
}

/* ---- Pure decisions ---- */

static void test_tables(void) {
        for (EgressQueryAction a = 0; a < _EGRESS_QUERY_ACTION_MAX; a++)
                CHECK_INT(egress_query_action_from_string(egress_query_action_to_string(a)), a);
        CHECK_U64(egress_resolver_address_timeout(0), 30 * USEC_PER_SEC);
        CHECK_U64(egress_resolver_address_timeout(300), 330 * USEC_PER_SEC);
        CHECK_U64(egress_resolver_address_timeout(UINT32_MAX), 3630 * USEC_PER_SEC);
}

static void test_decide(void) {
        _cleanup_(egress_policy_donep) EgressPolicy policy =
                make_policy((const char *const[]){"allowed.example.test", "*.wild.example.test", NULL},
                            (const char *const[]){"bad.wild.example.test", NULL}, EGRESS_DEFAULT_DENY);
        EgressQueryDecision d;
        uint8_t raw[64] = {};

        /* No header, or a response: dropped. */
        CHECK_INT(egress_resolver_decide(&policy, raw, 11, &d), 0);
        CHECK_INT(d.action, EGRESS_QUERY_DROP);
        egress_query_decision_done(&d);
        raw[0] = 0xab, raw[1] = 0xcd, raw[2] = 0x80; /* QR */
        CHECK_INT(egress_resolver_decide(&policy, raw, 12, &d), 0);
        CHECK_INT(d.action, EGRESS_QUERY_DROP);
        egress_query_decision_done(&d);

        /* A header saying one question, and none: FORMERR with the client's id. */
        raw[2] = 0x01, raw[5] = 1;
        CHECK_INT(egress_resolver_decide(&policy, raw, 12, &d), 0);
        CHECK_INT(d.action, EGRESS_QUERY_ANSWER);
        CHECK_INT(answer_rcode(&d), LDNS_RCODE_FORMERR);
        CHECK_INT(ldns_pkt_id(d.answer), 0xabcd);
        CHECK(!d.denied_reason);
        egress_query_decision_done(&d);
        /* No question at all. */
        raw[5] = 0;
        CHECK_INT(egress_resolver_decide(&policy, raw, 12, &d), 0);
        CHECK_INT(answer_rcode(&d), LDNS_RCODE_FORMERR);
        egress_query_decision_done(&d);

        /* Two questions. */
        ldns_pkt *p = query_pkt("allowed.example.test.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, 0);
        ldns_pkt_push_rr(p, LDNS_SECTION_QUESTION, ldns_rr_clone(ldns_rr_list_rr(ldns_pkt_question(p), 0)));
        decide_pkt(&policy, p, &d);
        CHECK_INT(answer_rcode(&d), LDNS_RCODE_FORMERR);
        egress_query_decision_done(&d);
        ldns_pkt_free(p);

        /* Another opcode. */
        p = query_pkt("allowed.example.test.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, 0);
        ldns_pkt_set_opcode(p, LDNS_PACKET_STATUS);
        decide_pkt(&policy, p, &d);
        CHECK_INT(answer_rcode(&d), LDNS_RCODE_NOTIMPL);
        egress_query_decision_done(&d);
        ldns_pkt_free(p);

        /* Names: denied by default, by a deny entry, not valid, another class; zone transfers. */
        struct {
                const char *name;
                ldns_rr_type type;
                ldns_rr_class class;
                int rcode;
                const char *reason;
        } cases[] = {
                {"evil.example.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, LDNS_RCODE_REFUSED,
                 "not allowed by the policy"},
                {"EVIL.example.", LDNS_RR_TYPE_TXT, LDNS_RR_CLASS_IN, LDNS_RCODE_REFUSED,
                 "not allowed by the policy"},
                {"bad.wild.example.test.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, LDNS_RCODE_REFUSED,
                 "denied by a deny entry"},
                {"wild.example.test.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, LDNS_RCODE_REFUSED,
                 "not allowed by the policy"},
                {"_x.allowed.example.test.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, LDNS_RCODE_REFUSED,
                 "not a valid name"},
                {".", LDNS_RR_TYPE_NS, LDNS_RR_CLASS_IN, LDNS_RCODE_REFUSED, "not a valid name"},
                {"allowed.example.test.", LDNS_RR_TYPE_TXT, LDNS_RR_CLASS_CH, LDNS_RCODE_REFUSED,
                 "class is not served (only IN)"},
                {"evil.example.", LDNS_RR_TYPE_AAAA, LDNS_RR_CLASS_IN, LDNS_RCODE_REFUSED,
                 "not allowed by the policy"},
                {"allowed.example.test.", LDNS_RR_TYPE_AXFR, LDNS_RR_CLASS_IN, LDNS_RCODE_NOTIMPL, NULL},
                /* Allowed, AAAA: empty NOERROR, not forwarded. */
                {"allowed.example.test.", LDNS_RR_TYPE_AAAA, LDNS_RR_CLASS_IN, LDNS_RCODE_NOERROR, NULL},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                p = query_pkt(cases[i].name, cases[i].type, cases[i].class, 0);
                decide_pkt(&policy, p, &d);
                CHECK_INT(d.action, EGRESS_QUERY_ANSWER);
                CHECK_INT(answer_rcode(&d), cases[i].rcode);
                CHECK_STR(d.denied_reason, cases[i].reason);
                if (d.answer) {
                        CHECK_INT(ldns_pkt_id(d.answer), ldns_pkt_id(p));
                        CHECK(ldns_pkt_qr(d.answer));
                        CHECK_INT(ldns_pkt_ancount(d.answer), 0);
                        CHECK_INT(ldns_pkt_qdcount(d.answer), 1);
                }
                if (cases[i].rcode == LDNS_RCODE_REFUSED && !strstr(cases[i].reason, "valid") &&
                    !strstr(cases[i].reason, "class"))
                        CHECK(!strchr(d.name, 'E')); /* normalized for the audit */
                egress_query_decision_done(&d);
                ldns_pkt_free(p);
        }

        /* No policy: everything denied. */
        p = query_pkt("allowed.example.test.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, 0);
        decide_pkt(NULL, p, &d);
        CHECK_INT(answer_rcode(&d), LDNS_RCODE_REFUSED);
        egress_query_decision_done(&d);
        ldns_pkt_free(p);

        /* Allowed: forwarded as a query of our own, EDNS0 with our size, RD as the client's. */
        p = query_pkt("A.Wild.Example.Test.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, 0);
        decide_pkt(&policy, p, &d);
        CHECK_INT(d.action, EGRESS_QUERY_FORWARD);
        CHECK_STR(d.name, "a.wild.example.test");
        CHECK_INT(d.qtype, LDNS_RR_TYPE_A);
        CHECK_INT(d.udp_size, 512);
        CHECK(!d.edns);
        CHECK(d.forward && ldns_pkt_rd(d.forward) && !ldns_pkt_qr(d.forward));
        CHECK_INT(ldns_pkt_edns_udp_size(d.forward), EGRESS_RESOLVER_UDP_SIZE);
        CHECK_INT(ldns_pkt_arcount(d.forward), 0);
        egress_query_decision_done(&d);
        ldns_pkt_free(p);

        /* The client's EDNS0 size, within bounds. */
        p = query_pkt("allowed.example.test.", LDNS_RR_TYPE_TXT, LDNS_RR_CLASS_IN, 65000);
        decide_pkt(&policy, p, &d);
        CHECK_INT(d.action, EGRESS_QUERY_FORWARD);
        CHECK(d.edns);
        CHECK_INT(d.udp_size, EGRESS_RESOLVER_CLIENT_UDP_MAX);
        egress_query_decision_done(&d);
        ldns_pkt_free(p);

        /* EDNS0 with DO: the answer has EDNS0 with DO too (the empty AAAA here), and the forward asks for
         * DO. */
        p = query_pkt("allowed.example.test.", LDNS_RR_TYPE_AAAA, LDNS_RR_CLASS_IN, 1400);
        ldns_pkt_set_edns_do(p, true);
        decide_pkt(&policy, p, &d);
        CHECK(d.answer && ldns_pkt_edns(d.answer) && ldns_pkt_edns_do(d.answer));
        CHECK_INT(d.answer ? ldns_pkt_edns_udp_size(d.answer) : 0, EGRESS_RESOLVER_UDP_SIZE);
        egress_query_decision_done(&d);
        ldns_pkt_free(p);
        p = query_pkt("allowed.example.test.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, 1400);
        ldns_pkt_set_edns_do(p, true);
        decide_pkt(&policy, p, &d);
        CHECK(d.forward && ldns_pkt_edns_do(d.forward));
        egress_query_decision_done(&d);
        ldns_pkt_free(p);

        /* ldns cannot parse it (a question cut short): FORMERR. */
        p = query_pkt("allowed.example.test.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, 0);
        size_t n;
        _cleanup_free_ uint8_t *w = to_wire(p, &n);
        CHECK_INT(egress_resolver_decide(&policy, w, n - 3, &d), 0);
        CHECK_INT(d.action, EGRESS_QUERY_ANSWER);
        CHECK_INT(answer_rcode(&d), LDNS_RCODE_FORMERR);
        egress_query_decision_done(&d);
        ldns_pkt_free(p);
}

/* An upstream answer to d, built from zone-file lines. */
static uint8_t *upstream_answer(const EgressQueryDecision *d, uint16_t id, int rcode, const char *const *rrs,
                                size_t *n) {
        ldns_pkt *p = ldns_pkt_new();
        uint8_t *w;

        ldns_pkt_set_id(p, id);
        ldns_pkt_set_qr(p, true);
        ldns_pkt_set_rcode(p, (uint8_t) rcode);
        ldns_pkt_push_rr(p, LDNS_SECTION_QUESTION, ldns_rr_clone(d->question));
        for (; rrs && *rrs; rrs++) {
                ldns_rr *rr = NULL;
                CHECK_INT(ldns_rr_new_frm_str(&rr, *rrs, 0, NULL, NULL), LDNS_STATUS_OK);
                ldns_pkt_push_rr(p, strstr(*rrs, " SOA ") ? LDNS_SECTION_AUTHORITY : LDNS_SECTION_ANSWER,
                                 rr);
        }
        w = to_wire(p, n);
        ldns_pkt_free(p);
        return w;
}

static bool reply_has(const ldns_pkt *p, const char *needle) {
        _cleanup_free_ char *s = ldns_rr_list2str(ldns_pkt_answer(p));
        return s && strstr(s, needle);
}

static void test_filter(void) {
        _cleanup_(egress_policy_donep) EgressPolicy policy = make_policy(
                (const char *const[]){"alias.example.test", "open.example.test", "10.9.0.0/16", NULL}, NULL,
                EGRESS_DEFAULT_DENY);
        EgressCidr pool;
        EgressQueryDecision d;
        EgressAnswer a;
        size_t n;

        CHECK_INT(egress_cidr_parse("10.9.8.0/24", &pool, NULL), 0);
        ldns_pkt *p = query_pkt("Alias.Example.Test.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, 1232);
        decide_pkt(&policy, p, &d);
        ldns_pkt_free(p);
        CHECK_INT(d.action, EGRESS_QUERY_FORWARD);

        /* A CNAME chain (records in any order), a rebinding address on it, one outside it, an AAAA. */
        _cleanup_free_ uint8_t *w = upstream_answer(
                &d, 4242, LDNS_RCODE_NOERROR,
                (const char *const[]){"cdn2.example.net. 60 IN A 198.51.100.7",
                                      "alias.example.test. 300 IN CNAME cdn1.example.net.",
                                      "cdn1.example.net. 300 IN CNAME cdn2.example.net.",
                                      "cdn2.example.net. 60 IN A 127.0.0.1",
                                      "cdn2.example.net. 60 IN A 10.9.1.1", /* an allow CIDR opens it */
                                      "cdn2.example.net. 60 IN A 10.9.8.7", /* the pool: never */
                                      "elsewhere.example.net. 60 IN A 192.0.2.99",
                                      "cdn2.example.net. 60 IN AAAA 2001:db8::1",
                                      "example.net. 60 IN SOA ns.example.net. host.example.net. 1 2 3 4 5",
                                      NULL},
                &n);
        CHECK_INT(egress_resolver_filter_answer(&policy, &pool, &d, 4243, w, n, &a),
                  -EBADMSG); /* wrong id */
        CHECK_INT(egress_resolver_filter_answer(&policy, &pool, &d, 4242, w, n - 1, &a), -EBADMSG);
        CHECK_INT(egress_resolver_filter_answer(&policy, &pool, &d, 4242, w, n, &a), 0);
        CHECK_INT(a.rcode, LDNS_RCODE_NOERROR);
        CHECK(!a.truncated);
        CHECK_INT(a.n_allow, 2);
        if (a.n_allow == 2) {
                CHECK_STR(inet_ntoa(a.allow[0].address), "198.51.100.7");
                CHECK_INT(a.allow[0].ttl, 60);
                CHECK_INT(a.allow[0].verdict, EGRESS_ADDRESS_IF_RESOLVED);
                CHECK_STR(inet_ntoa(a.allow[1].address), "10.9.1.1");
                CHECK_INT(a.allow[1].verdict, EGRESS_ADDRESS_ALLOWED);
        }
        CHECK_INT(a.n_denied, 2);
        if (a.n_denied == 2) {
                CHECK_STR(inet_ntoa(a.denied[0].address), "127.0.0.1");
                CHECK_STR(inet_ntoa(a.denied[1].address), "10.9.8.7");
        }
        CHECK_INT(ldns_pkt_id(a.reply), d.id);
        CHECK_INT(ldns_pkt_ancount(a.reply), 4); /* two CNAMEs, two A */
        CHECK(reply_has(a.reply, "198.51.100.7"));
        CHECK(reply_has(a.reply, "10.9.1.1"));
        CHECK(!reply_has(a.reply, "127.0.0.1"));
        CHECK(!reply_has(a.reply, "10.9.8.7"));
        CHECK(!reply_has(a.reply, "192.0.2.99"));
        CHECK(!reply_has(a.reply, "2001:db8"));
        CHECK_INT(ldns_pkt_nscount(a.reply), 1);
        CHECK(ldns_pkt_edns(a.reply)); /* the client used EDNS0 */
        /* The client's question as it sent it (case kept). */
        _cleanup_free_ char *qs = ldns_rr_list2str(ldns_pkt_question(a.reply));
        CHECK(qs && strstr(qs, "Alias.Example.Test."));

        /* Too big for 60 bytes: header and question with TC. */
        _cleanup_free_ uint8_t *out = NULL;
        size_t out_n;
        CHECK_INT(egress_resolver_reply_to_wire(a.reply, 80, &out, &out_n), 0);
        CHECK(out_n <= 80 && LDNS_TC_WIRE(out) && LDNS_ANCOUNT(out) == 0 && LDNS_QDCOUNT(out) == 1);
        free(out);
        out = NULL;
        CHECK_INT(egress_resolver_reply_to_wire(a.reply, 4096, &out, &out_n), 0);
        CHECK(!LDNS_TC_WIRE(out) && LDNS_ANCOUNT(out) == 4);
        egress_answer_done(&a);

        /* An answer to another question is not ours. */
        ldns_pkt *other = query_pkt("open.example.test.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, 0);
        EgressQueryDecision d2;
        decide_pkt(&policy, other, &d2);
        ldns_pkt_free(other);
        size_t n2;
        _cleanup_free_ uint8_t *w2 = upstream_answer(&d2, 7, LDNS_RCODE_NOERROR, NULL, &n2);
        CHECK_INT(egress_resolver_filter_answer(&policy, &pool, &d, 7, w2, n2, &a), -EBADMSG);
        /* A query is not an answer. */
        w2[2] &= (uint8_t) ~0x80;
        CHECK_INT(egress_resolver_filter_answer(&policy, &pool, &d2, 7, w2, n2, &a), -EBADMSG);
        egress_query_decision_done(&d2);

        /* A CNAME loop ends. */
        free(w);
        w = upstream_answer(&d, 1, LDNS_RCODE_NOERROR,
                            (const char *const[]){"alias.example.test. 5 IN CNAME b.example.net.",
                                                  "b.example.net. 5 IN CNAME alias.example.test.",
                                                  "b.example.net. 5 IN A 198.51.100.8", NULL},
                            &n);
        CHECK_INT(egress_resolver_filter_answer(&policy, &pool, &d, 1, w, n, &a), 0);
        CHECK_INT(a.n_allow, 1);
        egress_answer_done(&a);

        /* No policy (it went away while the query was upstream): nothing is opened. */
        free(w);
        w = upstream_answer(&d, 3, LDNS_RCODE_NOERROR,
                            (const char *const[]){"alias.example.test. 5 IN A 198.51.100.9", NULL}, &n);
        CHECK_INT(egress_resolver_filter_answer(NULL, NULL, &d, 3, w, n, &a), 0);
        CHECK_INT(a.n_allow, 0);
        CHECK_INT(a.n_denied, 1);
        CHECK_INT(ldns_pkt_ancount(a.reply), 0);
        egress_answer_done(&a);

        /* NXDOMAIN passes through. */
        free(w);
        w = upstream_answer(&d, 2, LDNS_RCODE_NXDOMAIN, NULL, &n);
        CHECK_INT(egress_resolver_filter_answer(&policy, &pool, &d, 2, w, n, &a), 0);
        CHECK_INT(ldns_pkt_get_rcode(a.reply), LDNS_RCODE_NXDOMAIN);
        egress_answer_done(&a);
        egress_query_decision_done(&d);
}

static void test_resolv_conf(void) {
        char dir[] = "/tmp/test-egress-resolver.XXXXXX", path[128];
        struct sockaddr_storage *l = NULL;
        FILE *f;

        test_mkdtemp(dir);
        snprintf(path, sizeof(path), "%s/resolv.conf", dir);
        CHECK_INT(egress_resolver_upstreams_from_resolv_conf(path, &l), -ENOENT);

        f = fopen(path, "we");
        fputs("# generated\nsearch example.test\nnameserver 127.0.0.53\noptions edns0 trust-ad\n"
              "nameserver 2001:db8::53\nnameserver 192.0.2.53\nnameserver 198.51.100.53\n",
              f);
        fclose(f);
        CHECK_INT(egress_resolver_upstreams_from_resolv_conf(path, &l), 3);
        if (l) {
                char t[INET6_ADDRSTRLEN];
                struct sockaddr_in *a = (struct sockaddr_in *) &l[0];
                struct sockaddr_in6 *b = (struct sockaddr_in6 *) &l[1];
                CHECK_INT(a->sin_family, AF_INET);
                CHECK_STR(inet_ntop(AF_INET, &a->sin_addr, t, sizeof(t)), "127.0.0.53");
                CHECK_INT(ntohs(a->sin_port), 53);
                CHECK_INT(b->sin6_family, AF_INET6);
                CHECK_STR(inet_ntop(AF_INET6, &b->sin6_addr, t, sizeof(t)), "2001:db8::53");
                CHECK_INT(ntohs(b->sin6_port), 53);
                a = (struct sockaddr_in *) &l[2];
                CHECK_STR(inet_ntop(AF_INET, &a->sin_addr, t, sizeof(t)), "192.0.2.53");
        }
        free(l);
        l = NULL;

        f = fopen(path, "we");
        fputs("search example.test\n", f);
        fclose(f);
        CHECK_INT(egress_resolver_upstreams_from_resolv_conf(path, &l), -ENXIO);
        test_rm_rf(dir);
}

/* ---- The resolver on loopback, dnsmasq as its upstream ---- */

typedef struct Fixture {
        sd_event *event;
        EgressResolver *resolver;
        struct sockaddr_in at;
        EgressPolicy *policy;
        EgressCidr pool;
        pid_t dnsmasq;
        struct sockaddr_storage upstream;
        int client_fd; /* the client waiting now: its answer must not have come when allow_address runs */
        struct {
                struct in_addr address;
                uint64_t timeout;
                bool answer_waiting;
        } allowed[32];
        size_t n_allowed;
        char denied[32][300];
        size_t n_denied;
        int allow_result;
        unsigned inflight_max; /* for the next fx_resolver() */
} Fixture;

static const EgressPolicy *fx_get_policy(void *userdata) {
        return ((Fixture *) userdata)->policy;
}

static int fx_allow(void *userdata, int family, const void *addr, uint64_t timeout_usec) {
        Fixture *f = userdata;
        struct pollfd pfd = {.fd = f->client_fd, .events = POLLIN};

        CHECK_INT(family, AF_INET);
        if (f->n_allowed < ELEMENTSOF(f->allowed)) {
                memcpy(&f->allowed[f->n_allowed].address, addr, 4);
                f->allowed[f->n_allowed].timeout = timeout_usec;
                f->allowed[f->n_allowed].answer_waiting = f->client_fd >= 0 && poll(&pfd, 1, 0) > 0;
                f->n_allowed++;
        }
        return f->allow_result;
}

static void fx_denied(void *userdata, const char *name, uint16_t qtype, const char *reason) {
        Fixture *f = userdata;
        if (f->n_denied < ELEMENTSOF(f->denied))
                snprintf(f->denied[f->n_denied++], sizeof(f->denied[0]), "%s/%u: %s", name, qtype, reason);
}

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

/* Runs the loop until fd is readable or timeout_usec passed. Returns whether it is readable. */
static bool run_until_readable(Fixture *f, int fd, uint64_t timeout_usec) {
        uint64_t end = now_usec() + timeout_usec;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};

        for (;;) {
                if (poll(&pfd, 1, 0) > 0)
                        return true;
                if (now_usec() >= end)
                        return false;
                (void) sd_event_run(f->event, 20 * USEC_PER_MSEC);
        }
}

static int connect_to(const struct sockaddr_in *a, int type) {
        int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
        CHECK(fd >= 0);
        CHECK_INT(connect(fd, (const struct sockaddr *) a, sizeof(*a)), 0);
        return fd;
}

/* Sends raw bytes over UDP or TCP; returns the answer's bytes (malloc'd), or NULL if none came within
 * timeout_usec. */
static uint8_t *exchange_raw(Fixture *f, const uint8_t *msg, size_t n, bool tcp, uint64_t timeout_usec,
                             size_t *ret_n) {
        _cleanup_close_ int fd = connect_to(&f->at, tcp ? SOCK_STREAM : SOCK_DGRAM);
        uint8_t *buf = malloc(65537);
        size_t have = 0;

        f->client_fd = fd;
        if (tcp) {
                uint8_t len[2] = {(uint8_t) (n >> 8), (uint8_t) n};
                CHECK_INT(send(fd, len, 2, MSG_NOSIGNAL), 2);
        }
        CHECK_INT(send(fd, msg, n, MSG_NOSIGNAL), (ssize_t) n);
        for (;;) {
                if (!run_until_readable(f, fd, timeout_usec)) {
                        free(buf);
                        buf = NULL;
                        break;
                }
                ssize_t k = recv(fd, buf + have, 65537 - have, MSG_DONTWAIT);
                if (k <= 0) {
                        free(buf);
                        buf = NULL;
                        break;
                }
                have += (size_t) k;
                if (!tcp) {
                        *ret_n = have;
                        break;
                }
                if (have >= 2 && have == 2 + ((size_t) buf[0] << 8 | buf[1])) {
                        memmove(buf, buf + 2, have - 2);
                        *ret_n = have - 2;
                        break;
                }
        }
        f->client_fd = -EBADF;
        return buf;
}

static ldns_pkt *ask(Fixture *f, const char *name, ldns_rr_type type, bool tcp, uint16_t edns_size) {
        ldns_pkt *q = query_pkt(name, type, LDNS_RR_CLASS_IN, edns_size), *a = NULL;
        size_t n, an;
        _cleanup_free_ uint8_t *w = to_wire(q, &n);
        _cleanup_free_ uint8_t *r = exchange_raw(f, w, n, tcp, 10 * USEC_PER_SEC, &an);

        if (!r)
                fprintf(stderr, "    no answer to %s\n", name);
        else if (ldns_wire2pkt(&a, r, an) != LDNS_STATUS_OK)
                a = NULL;
        if (a)
                CHECK_INT(ldns_pkt_id(a), ldns_pkt_id(q));
        ldns_pkt_free(q);
        return a;
}

static int rcode_of(ldns_pkt *a) {
        return a ? (int) ldns_pkt_get_rcode(a) : -1;
}

static void fx_reset(Fixture *f) {
        f->n_allowed = f->n_denied = 0;
        f->allow_result = 0;
}

static int fx_resolver(Fixture *f, const struct sockaddr_storage *ups, size_t n_ups, uint64_t timeout,
                       unsigned per_client, unsigned conns) {
        EgressResolverConfig c = {
                .listen = {.sin_family = AF_INET,
                           .sin_addr.s_addr = htonl(0x7f000002)}, /* 127.0.0.2, any port */
                .upstreams = ups,
                .n_upstreams = n_ups,
                .upstream_timeout_usec = timeout,
                .inflight_max = f->inflight_max,
                .inflight_per_client_max = per_client,
                .tcp_connections_max = conns,
                .tcp_idle_usec = conns ? 500 * USEC_PER_MSEC : 0,
                .pool = &f->pool,
                .get_policy = fx_get_policy,
                .allow_address = fx_allow,
                .denied = fx_denied,
                .userdata = f,
        };
        f->resolver = egress_resolver_free(f->resolver);
        int r = egress_resolver_new(f->event, &c, &f->resolver);
        if (r >= 0)
                egress_resolver_local_address(f->resolver, &f->at);
        return r;
}

/* A loopback port nothing listens on (UDP: queries there get ICMP port unreachable). */
static struct sockaddr_storage free_port(int type) {
        struct sockaddr_storage ss = {};
        struct sockaddr_in *a = (struct sockaddr_in *) &ss;
        socklen_t sl = sizeof(*a);
        _cleanup_close_ int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        CHECK_INT(bind(fd, (struct sockaddr *) a, sizeof(*a)), 0);
        CHECK_INT(getsockname(fd, (struct sockaddr *) a, &sl), 0);
        return ss;
}

static void stop_dnsmasq(Fixture *f) {
        if (f->dnsmasq > 0) {
                kill(f->dnsmasq, SIGTERM);
                (void) waitpid(f->dnsmasq, NULL, 0);
                f->dnsmasq = 0;
        }
}

static bool start_dnsmasq(Fixture *f) {
        char port[32], big[8][260];
        const char *argv[64];
        size_t n = 0;

        if (access("/usr/sbin/dnsmasq", X_OK) < 0) {
                printf("SKIP: resolver on loopback: /usr/sbin/dnsmasq is missing (Debian: dnsmasq-base)\n");
                return false;
        }
        /* A free port for UDP and TCP alike (racy only against other processes binding 127.0.0.1). */
        for (;;) {
                f->upstream = free_port(SOCK_DGRAM);
                struct sockaddr_in *a = (struct sockaddr_in *) &f->upstream;
                _cleanup_close_ int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (bind(t, (struct sockaddr *) a, sizeof(*a)) == 0)
                        break;
        }
        snprintf(port, sizeof(port), "--port=%u", ntohs(((struct sockaddr_in *) &f->upstream)->sin_port));
        argv[n++] = "dnsmasq";
        argv[n++] = "--keep-in-foreground";
        argv[n++] = "--conf-file=/dev/null";
        argv[n++] = port;
        argv[n++] = "--listen-address=127.0.0.1";
        argv[n++] = "--bind-interfaces";
        argv[n++] = "--no-resolv";
        argv[n++] = "--no-hosts";
        argv[n++] = "--pid-file=";
        argv[n++] = "--local-ttl=300";
        argv[n++] = "--log-facility=/dev/null";
        argv[n++] = "--local=/example.test/"; /* names it does not know: NXDOMAIN */
        argv[n++] = "--host-record=allowed.example.test,203.0.113.10";
        argv[n++] = "--host-record=other.example.test,203.0.113.20";
        argv[n++] = "--host-record=a.wild.example.test,203.0.113.30";
        argv[n++] = "--host-record=wild.example.test,203.0.113.31";
        argv[n++] = "--host-record=rebind.example.test,127.0.0.1";
        argv[n++] = "--host-record=private.example.test,10.1.2.3";
        argv[n++] = "--host-record=pooled.example.test,10.99.0.7";
        argv[n++] = "--address=/mixed.example.test/203.0.113.40";
        argv[n++] = "--address=/mixed.example.test/10.0.0.5";
        argv[n++] = "--cname=alias.example.test,allowed.example.test";
        argv[n++] = "--cname=sneaky.example.test,rebind.example.test";
        argv[n++] = "--txt-record=allowed.example.test,hello";
        for (size_t i = 0; i < 8; i++) {
                snprintf(big[i], sizeof(big[i]), "--txt-record=big.example.test,%zu%0200d", i, 0);
                argv[n++] = big[i];
        }
        argv[n] = NULL;

        f->dnsmasq = fork();
        if (f->dnsmasq == 0) {
                /* Ends with the test, however the test ends. */
                (void) prctl(PR_SET_PDEATHSIG, SIGTERM);
                execv("/usr/sbin/dnsmasq", (char **) argv);
                _exit(127);
        }
        /* Ready when it answers. */
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ldns_pkt *q = query_pkt("allowed.example.test.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, 0);
        size_t wn;
        _cleanup_free_ uint8_t *w = to_wire(q, &wn);
        ldns_pkt_free(q);
        CHECK_INT(connect(fd, (struct sockaddr *) &f->upstream, sizeof(struct sockaddr_in)), 0);
        for (uint64_t end = now_usec() + 10 * USEC_PER_SEC; now_usec() < end;) {
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                uint8_t b[512];
                (void) send(fd, w, wn, 0);
                if (poll(&pfd, 1, 100) > 0 && recv(fd, b, sizeof(b), 0) > 0)
                        return true;
                (void) usleep(20000); /* refused: not listening yet */
                if (waitpid(f->dnsmasq, NULL, WNOHANG) == f->dnsmasq) {
                        f->dnsmasq = 0;
                        break;
                }
        }
        fprintf(stderr, "dnsmasq did not answer\n");
        failures++;
        stop_dnsmasq(f);
        return false;
}

static bool allowed_has(Fixture *f, const char *addr, uint64_t timeout) {
        for (size_t i = 0; i < f->n_allowed; i++)
                if (streq(inet_ntoa(f->allowed[i].address), addr) && f->allowed[i].timeout == timeout &&
                    !f->allowed[i].answer_waiting)
                        return true;
        return false;
}

static bool denied_has(Fixture *f, const char *text) {
        for (size_t i = 0; i < f->n_denied; i++)
                if (strstr(f->denied[i], text))
                        return true;
        return false;
}

static void test_live(void) {
        _cleanup_(egress_policy_donep) EgressPolicy deny_default = make_policy(
                (const char *const[]){"allowed.example.test", "*.wild.example.test", "alias.example.test",
                                      "sneaky.example.test", "rebind.example.test", "private.example.test",
                                      "mixed.example.test", "big.example.test", "nothere.example.test",
                                      "pooled.example.test", NULL},
                NULL, EGRESS_DEFAULT_DENY);
        _cleanup_(egress_policy_donep) EgressPolicy other_only = make_policy(
                (const char *const[]){"other.example.test", "10.0.0.0/8", NULL}, NULL, EGRESS_DEFAULT_DENY);
        Fixture f = {.client_fd = -EBADF, .policy = &deny_default};
        const uint64_t ttl300 = 330 * USEC_PER_SEC;
        ldns_pkt *a;

        CHECK_INT(egress_cidr_parse("10.99.0.0/16", &f.pool, NULL), 0);
        if (!start_dnsmasq(&f))
                return;
        CHECK_INT(sd_event_new(&f.event), 0);
        CHECK_INT(fx_resolver(&f, &f.upstream, 1, 300 * USEC_PER_MSEC, 0, 0), 0);

        /* Allowed: answered, the address opened with TTL + grace before the answer reached the client. */
        a = ask(&f, "allowed.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK_INT(rcode_of(a), LDNS_RCODE_NOERROR);
        CHECK(a && reply_has(a, "203.0.113.10"));
        CHECK_INT(f.n_allowed, 1);
        CHECK(allowed_has(&f, "203.0.113.10", ttl300));
        CHECK_INT(f.n_denied, 0);
        ldns_pkt_free(a);

        /* Denied: REFUSED and reported; nothing opened. */
        fx_reset(&f);
        a = ask(&f, "other.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK_INT(rcode_of(a), LDNS_RCODE_REFUSED);
        CHECK_INT(f.n_allowed, 0);
        CHECK(denied_has(&f, "other.example.test/1: not allowed by the policy"));
        ldns_pkt_free(a);

        /* Wildcards: a name under it, not the name itself. */
        fx_reset(&f);
        a = ask(&f, "A.WILD.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK(a && reply_has(a, "203.0.113.30"));
        CHECK(allowed_has(&f, "203.0.113.30", ttl300));
        ldns_pkt_free(a);
        a = ask(&f, "wild.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK_INT(rcode_of(a), LDNS_RCODE_REFUSED);
        CHECK(denied_has(&f, "wild.example.test/1"));
        ldns_pkt_free(a);

        /* Rebinding: loopback and private answers removed, reported, never opened. */
        fx_reset(&f);
        a = ask(&f, "rebind.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK_INT(rcode_of(a), LDNS_RCODE_NOERROR);
        CHECK(a && ldns_pkt_ancount(a) == 0);
        CHECK(denied_has(&f, "rebind.example.test/1: answer 127.0.0.1 denied"));
        ldns_pkt_free(a);
        a = ask(&f, "private.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK(a && ldns_pkt_ancount(a) == 0);
        CHECK(denied_has(&f, "answer 10.1.2.3 denied"));
        ldns_pkt_free(a);
        a = ask(&f, "mixed.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK(a && reply_has(a, "203.0.113.40") && !reply_has(a, "10.0.0.5"));
        CHECK(denied_has(&f, "mixed.example.test/1: answer 10.0.0.5 denied"));
        CHECK_INT(f.n_allowed, 1);
        CHECK(allowed_has(&f, "203.0.113.40", ttl300));
        ldns_pkt_free(a);
        /* Through a CNAME of an allowed name too. */
        fx_reset(&f);
        a = ask(&f, "sneaky.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK(a && !reply_has(a, "127.0.0.1") && reply_has(a, "CNAME"));
        CHECK(denied_has(&f, "sneaky.example.test/1: answer 127.0.0.1 denied"));
        CHECK_INT(f.n_allowed, 0);
        ldns_pkt_free(a);

        /* A CNAME chain: the target's address is opened for the allowed alias. */
        fx_reset(&f);
        a = ask(&f, "alias.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK(a && reply_has(a, "CNAME") && reply_has(a, "203.0.113.10"));
        CHECK(allowed_has(&f, "203.0.113.10", ttl300));
        ldns_pkt_free(a);

        /* AAAA: empty NOERROR at once, not forwarded. */
        EgressResolverStats st0, st1;
        egress_resolver_stats(f.resolver, &st0);
        a = ask(&f, "allowed.example.test.", LDNS_RR_TYPE_AAAA, false, 0);
        CHECK_INT(rcode_of(a), LDNS_RCODE_NOERROR);
        CHECK(a && ldns_pkt_ancount(a) == 0);
        egress_resolver_stats(f.resolver, &st1);
        CHECK_U64(st1.forwarded, st0.forwarded);
        ldns_pkt_free(a);

        /* Other types of an allowed name are forwarded; NXDOMAIN passes through. */
        a = ask(&f, "allowed.example.test.", LDNS_RR_TYPE_TXT, false, 0);
        CHECK(a && reply_has(a, "hello"));
        ldns_pkt_free(a);
        a = ask(&f, "nothere.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK_INT(rcode_of(a), LDNS_RCODE_NXDOMAIN);
        ldns_pkt_free(a);

        /* TCP. */
        fx_reset(&f);
        a = ask(&f, "allowed.example.test.", LDNS_RR_TYPE_A, true, 0);
        CHECK(a && reply_has(a, "203.0.113.10"));
        CHECK(allowed_has(&f, "203.0.113.10", ttl300));
        ldns_pkt_free(a);
        a = ask(&f, "other.example.test.", LDNS_RR_TYPE_A, true, 0);
        CHECK_INT(rcode_of(a), LDNS_RCODE_REFUSED);
        ldns_pkt_free(a);

        /* Two queries in one write on one connection (pipelined), then the client shuts its sending side:
         * both answered (in any order), then the connection closed. */
        {
                _cleanup_close_ int t = connect_to(&f.at, SOCK_STREAM);
                uint8_t out[1024], in[2048];
                size_t on = 0, have = 0;
                uint16_t ids[2];
                const char *names[2] = {"allowed.example.test.", "other.example.test."};
                for (int i = 0; i < 2; i++) {
                        ldns_pkt *p = query_pkt(names[i], LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, 0);
                        size_t pn;
                        _cleanup_free_ uint8_t *pw = to_wire(p, &pn);
                        ids[i] = ldns_pkt_id(p);
                        ldns_pkt_free(p);
                        out[on] = (uint8_t) (pn >> 8), out[on + 1] = (uint8_t) pn;
                        memcpy(out + on + 2, pw, pn);
                        on += 2 + pn;
                }
                CHECK_INT(send(t, out, on, MSG_NOSIGNAL), (ssize_t) on);
                CHECK_INT(shutdown(t, SHUT_WR), 0);
                for (;;) {
                        if (!run_until_readable(&f, t, 10 * USEC_PER_SEC))
                                break;
                        ssize_t k = recv(t, in + have, sizeof(in) - have, MSG_DONTWAIT);
                        if (k <= 0)
                                break; /* closed after the answers */
                        have += (size_t) k;
                }
                int seen = 0;
                for (size_t at = 0; at + 2 <= have;) {
                        size_t m = (size_t) in[at] << 8 | in[at + 1];
                        CHECK(at + 2 + m <= have);
                        if (at + 2 + m > have)
                                break;
                        uint16_t id = LDNS_ID_WIRE(in + at + 2);
                        int rc = LDNS_RCODE_WIRE(in + at + 2);
                        if (id == ids[0] && rc == LDNS_RCODE_NOERROR)
                                seen |= 1;
                        if (id == ids[1] && rc == LDNS_RCODE_REFUSED)
                                seen |= 2;
                        at += 2 + m;
                }
                CHECK_INT(seen, 3);
                egress_resolver_stats(f.resolver, &st1);
                CHECK_INT(st1.tcp_connections, 0);
        }

        /* Large answers: TC to a client without EDNS0; 8 records over EDNS0 (the upstream's TC made us ask
         * it over TCP) and over TCP. */
        a = ask(&f, "big.example.test.", LDNS_RR_TYPE_TXT, false, 0);
        CHECK(a && ldns_pkt_tc(a) && ldns_pkt_ancount(a) == 0);
        ldns_pkt_free(a);
        a = ask(&f, "big.example.test.", LDNS_RR_TYPE_TXT, false, 4096);
        CHECK(a && !ldns_pkt_tc(a));
        CHECK_INT(a ? ldns_pkt_ancount(a) : 0, 8);
        ldns_pkt_free(a);
        a = ask(&f, "big.example.test.", LDNS_RR_TYPE_TXT, true, 0);
        CHECK_INT(a ? ldns_pkt_ancount(a) : 0, 8);
        ldns_pkt_free(a);

        /* Malformed: a short datagram gets nothing; a cut question FORMERR, over UDP and TCP. */
        uint8_t junk[5] = {1, 2, 3, 4, 5};
        size_t rn;
        uint8_t *raw = exchange_raw(&f, junk, sizeof(junk), false, 300 * USEC_PER_MSEC, &rn);
        CHECK(!raw);
        free(raw);
        ldns_pkt *q = query_pkt("allowed.example.test.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, 0);
        size_t qn;
        _cleanup_free_ uint8_t *qw = to_wire(q, &qn);
        ldns_pkt_free(q);
        for (int tcp = 0; tcp < 2; tcp++) {
                raw = exchange_raw(&f, qw, qn - 3, tcp, 5 * USEC_PER_SEC, &rn);
                CHECK(raw && rn >= 12 && LDNS_RCODE_WIRE(raw) == LDNS_RCODE_FORMERR &&
                      LDNS_ID_WIRE(raw) == LDNS_ID_WIRE(qw));
                free(raw);
        }
        /* The resolver still answers after that. */
        a = ask(&f, "allowed.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK_INT(rcode_of(a), LDNS_RCODE_NOERROR);
        ldns_pkt_free(a);

        /* A policy changed between two queries takes effect at once; a CIDR allow opens a private answer. */
        f.policy = &other_only;
        fx_reset(&f);
        a = ask(&f, "allowed.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK_INT(rcode_of(a), LDNS_RCODE_REFUSED);
        ldns_pkt_free(a);
        a = ask(&f, "other.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK(a && reply_has(a, "203.0.113.20"));
        CHECK(allowed_has(&f, "203.0.113.20", ttl300));
        ldns_pkt_free(a);
        f.policy = &deny_default;
        CHECK_INT(egress_policy_add(&deny_default, true, "10.0.0.0/8", NULL), 0);
        fx_reset(&f);
        a = ask(&f, "private.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK(a && reply_has(a, "10.1.2.3"));
        CHECK(allowed_has(&f, "10.1.2.3", ttl300));
        ldns_pkt_free(a);
        /* The pool stays closed whatever a CIDR says. */
        a = ask(&f, "pooled.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK(a && ldns_pkt_ancount(a) == 0);
        CHECK(denied_has(&f, "answer 10.99.0.7 denied"));
        ldns_pkt_free(a);

        /* allow_address fails (the firewall could not take it): SERVFAIL, not an answer it cannot reach. */
        fx_reset(&f);
        f.allow_result = -EIO;
        a = ask(&f, "allowed.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK_INT(rcode_of(a), LDNS_RCODE_SERVFAIL);
        ldns_pkt_free(a);
        f.allow_result = 0;

        /* TCP connections past the bound (2 here) are closed at once; a connection that sends nothing whole
         * is closed after the read deadline. */
        CHECK_INT(fx_resolver(&f, &f.upstream, 1, 300 * USEC_PER_MSEC, 0, 2), 0);
        {
                _cleanup_close_ int c1 = connect_to(&f.at, SOCK_STREAM), c2 = connect_to(&f.at, SOCK_STREAM);
                (void) run_until_readable(&f, c1, 100 * USEC_PER_MSEC);
                _cleanup_close_ int c3 = connect_to(&f.at, SOCK_STREAM);
                uint8_t b[4];
                CHECK(run_until_readable(&f, c3, 5 * USEC_PER_SEC));
                CHECK_INT(recv(c3, b, sizeof(b), MSG_DONTWAIT), 0);
                egress_resolver_stats(f.resolver, &st1);
                CHECK_INT(st1.tcp_connections, 2);
                /* c1 sends half a length prefix and stops: closed by the read deadline (500 ms here). */
                CHECK_INT(send(c1, b, 1, MSG_NOSIGNAL), 1);
                CHECK(run_until_readable(&f, c1, 20 * USEC_PER_SEC));
                CHECK_INT(recv(c1, b, sizeof(b), MSG_DONTWAIT), 0);
        }

        /* Upstreams: one that never answers, then dnsmasq: answered by the second. */
        _cleanup_close_ int hole = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct sockaddr_storage ups[2] = {{}, f.upstream};
        struct sockaddr_in *h = (struct sockaddr_in *) &ups[0];
        socklen_t hl = sizeof(*h);
        h->sin_family = AF_INET;
        h->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        CHECK_INT(bind(hole, (struct sockaddr *) h, sizeof(*h)), 0);
        CHECK_INT(getsockname(hole, (struct sockaddr *) h, &hl), 0);
        CHECK_INT(fx_resolver(&f, ups, 2, 200 * USEC_PER_MSEC, 2, 0), 0);
        fx_reset(&f);
        a = ask(&f, "allowed.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK(a && reply_has(a, "203.0.113.10"));
        ldns_pkt_free(a);

        /* The policy changes while a query is upstream (its first attempt waits on the black hole for 200
         * ms): the answer that comes later is refused, nothing opened. */
        fx_reset(&f);
        {
                _cleanup_close_ int c = connect_to(&f.at, SOCK_DGRAM);
                ldns_pkt *p = query_pkt("allowed.example.test.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, 0);
                size_t pn;
                _cleanup_free_ uint8_t *pw = to_wire(p, &pn);
                uint8_t b[512];
                ldns_pkt_free(p);
                CHECK_INT(send(c, pw, pn, 0), (ssize_t) pn);
                CHECK(!run_until_readable(&f, c, 50 * USEC_PER_MSEC));
                egress_resolver_stats(f.resolver, &st1);
                CHECK_INT(st1.inflight, 1);
                f.policy = &other_only;
                CHECK(run_until_readable(&f, c, 10 * USEC_PER_SEC));
                ssize_t k = recv(c, b, sizeof(b), MSG_DONTWAIT);
                CHECK(k >= 12 && LDNS_RCODE_WIRE(b) == LDNS_RCODE_REFUSED &&
                      LDNS_ID_WIRE(b) == LDNS_ID_WIRE(pw));
                CHECK_INT(f.n_allowed, 0);
                CHECK(denied_has(&f, "allowed.example.test/1: not allowed by the policy (changed while"));
                f.policy = &deny_default;
        }

        /* Only the black hole: SERVFAIL after the attempts (2 rounds of 200 ms), well within 10 s. */
        CHECK_INT(fx_resolver(&f, ups, 1, 200 * USEC_PER_MSEC, 2, 0), 0);
        a = ask(&f, "allowed.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK_INT(rcode_of(a), LDNS_RCODE_SERVFAIL);
        ldns_pkt_free(a);
        /* Per client: two in flight from one socket, the third at once SERVFAIL. */
        {
                _cleanup_close_ int c = connect_to(&f.at, SOCK_DGRAM);
                uint8_t b[512];
                uint16_t ids[3];
                for (int i = 0; i < 3; i++) {
                        ldns_pkt *p =
                                query_pkt("allowed.example.test.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, 0);
                        size_t pn;
                        _cleanup_free_ uint8_t *pw = to_wire(p, &pn);
                        ids[i] = ldns_pkt_id(p);
                        ldns_pkt_free(p);
                        CHECK_INT(send(c, pw, pn, 0), (ssize_t) pn);
                }
                CHECK(run_until_readable(&f, c, 5 * USEC_PER_SEC));
                ssize_t k = recv(c, b, sizeof(b), MSG_DONTWAIT);
                CHECK(k >= 12 && LDNS_ID_WIRE(b) == ids[2] && LDNS_RCODE_WIRE(b) == LDNS_RCODE_SERVFAIL);
                egress_resolver_stats(f.resolver, &st1);
                CHECK_INT(st1.inflight, 2);
                CHECK_U64(st1.overload, 1);
                /* The two others end with SERVFAIL too. */
                for (int i = 0; i < 2; i++) {
                        CHECK(run_until_readable(&f, c, 10 * USEC_PER_SEC));
                        k = recv(c, b, sizeof(b), MSG_DONTWAIT);
                        CHECK(k >= 12 && LDNS_RCODE_WIRE(b) == LDNS_RCODE_SERVFAIL);
                }
        }

        /* Per resolver: two in flight from two clients, a third client's query at once SERVFAIL. */
        f.inflight_max = 2;
        CHECK_INT(fx_resolver(&f, ups, 1, 200 * USEC_PER_MSEC, 0, 0), 0);
        f.inflight_max = 0;
        {
                int c[3] = {connect_to(&f.at, SOCK_DGRAM), connect_to(&f.at, SOCK_DGRAM),
                            connect_to(&f.at, SOCK_DGRAM)};
                uint8_t b[512];
                for (int i = 0; i < 3; i++) {
                        ldns_pkt *p =
                                query_pkt("allowed.example.test.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, 0);
                        size_t pn;
                        _cleanup_free_ uint8_t *pw = to_wire(p, &pn);
                        ldns_pkt_free(p);
                        CHECK_INT(send(c[i], pw, pn, 0), (ssize_t) pn);
                        (void) run_until_readable(&f, c[i], 20 * USEC_PER_MSEC);
                }
                CHECK(run_until_readable(&f, c[2], 5 * USEC_PER_SEC));
                ssize_t k = recv(c[2], b, sizeof(b), MSG_DONTWAIT);
                CHECK(k >= 12 && LDNS_RCODE_WIRE(b) == LDNS_RCODE_SERVFAIL);
                egress_resolver_stats(f.resolver, &st1);
                CHECK_INT(st1.inflight, 2);
                CHECK_U64(st1.overload, 1);
                for (int i = 0; i < 3; i++)
                        safe_close(c[i]);
        }

        /* An upstream port nothing listens on (ICMP refusal): SERVFAIL. */
        struct sockaddr_storage gone = free_port(SOCK_DGRAM);
        CHECK_INT(fx_resolver(&f, &gone, 1, 5 * USEC_PER_SEC, 0, 0), 0);
        a = ask(&f, "allowed.example.test.", LDNS_RR_TYPE_A, false, 0);
        CHECK_INT(rcode_of(a), LDNS_RCODE_SERVFAIL);
        ldns_pkt_free(a);

        /* Freed with a query in flight and a TCP client connected: nothing left behind (ASan). */
        CHECK_INT(fx_resolver(&f, ups, 1, 5 * USEC_PER_SEC, 0, 0), 0);
        {
                _cleanup_close_ int c = connect_to(&f.at, SOCK_DGRAM), t = connect_to(&f.at, SOCK_STREAM);
                ldns_pkt *p = query_pkt("allowed.example.test.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, 0);
                size_t pn;
                _cleanup_free_ uint8_t *pw = to_wire(p, &pn);
                ldns_pkt_free(p);
                CHECK_INT(send(c, pw, pn, 0), (ssize_t) pn);
                (void) run_until_readable(&f, c, 100 * USEC_PER_MSEC);
                egress_resolver_stats(f.resolver, &st1);
                CHECK_INT(st1.inflight, 1);
                CHECK_INT(st1.tcp_connections, 1);
        }

        f.resolver = egress_resolver_free(f.resolver);
        sd_event_unref(f.event);
        stop_dnsmasq(&f);
}

static void test_bad_config(void) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        EgressResolver *r = NULL;
        struct sockaddr_storage up = free_port(SOCK_DGRAM), unix_up = {.ss_family = AF_UNIX};
        EgressResolverConfig c = {
                .listen = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000002)},
                .upstreams = &up,
                .n_upstreams = 1,
                .get_policy = fx_get_policy,
                .allow_address = fx_allow,
        };

        CHECK_INT(sd_event_new(&e), 0);
        c.n_upstreams = 0;
        CHECK_INT(egress_resolver_new(e, &c, &r), -EINVAL);
        c.n_upstreams = EGRESS_RESOLVER_UPSTREAMS_MAX + 1;
        CHECK_INT(egress_resolver_new(e, &c, &r), -EINVAL);
        c.n_upstreams = 1;
        c.upstreams = &unix_up;
        CHECK_INT(egress_resolver_new(e, &c, &r), -EINVAL);
        c.upstreams = &up;
        c.allow_address = NULL;
        CHECK_INT(egress_resolver_new(e, &c, &r), -EINVAL);
        c.allow_address = fx_allow;
        /* An address that is not this host's. */
        c.listen.sin_addr.s_addr = htonl(0xc0000201); /* 192.0.2.1 */
        CHECK_INT(egress_resolver_new(e, &c, &r), -EADDRNOTAVAIL);
        CHECK(!r);
        /* The same address and port twice. */
        c.listen.sin_addr.s_addr = htonl(0x7f000002);
        _cleanup_(egress_resolver_freep) EgressResolver *first = NULL;
        CHECK_INT(egress_resolver_new(e, &c, &first), 0);
        egress_resolver_local_address(first, &c.listen);
        CHECK_INT(egress_resolver_new(e, &c, &r), -EADDRINUSE);
}

int main(void) {
        test_tables();
        test_decide();
        test_filter();
        test_resolv_conf();
        test_bad_config();
        test_live();
        return test_finish("test-egress-resolver");
}
