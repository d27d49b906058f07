/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes egress-resolver's decisions: bytes as a sandbox's query, or as an upstream's answer to one. */
#include <arpa/inet.h>
#include <errno.h>

#include "egress-resolver.h"
#include "fuzz.h"
#include "macro.h"

static const char *const allow[] = {"allowed.example.test", "*.wild.example.test", "10.1.0.0/16", NULL};
static const char *const deny[] = {"bad.wild.example.test", "203.0.113.66/32", NULL};

static void make_policy(EgressPolicy *p) {
        for (size_t i = 0; allow[i]; i++)
                FUZZ_ASSERT(egress_policy_add(p, true, allow[i], NULL) == 0);
        for (size_t i = 0; deny[i]; i++)
                FUZZ_ASSERT(egress_policy_add(p, false, deny[i], NULL) == 0);
}

/* Whatever is to be sent fits the size it is sent in. */
static void check_wire(const ldns_pkt *reply, size_t max, uint16_t id) {
        uint8_t *w = NULL;
        size_t n = 0;

        if (egress_resolver_reply_to_wire(reply, max, &w, &n) < 0)
                return;
        FUZZ_ASSERT(n >= LDNS_HEADER_SIZE && n <= max);
        FUZZ_ASSERT(LDNS_ID_WIRE(w) == id && LDNS_QR_WIRE(w));
        free(w);
}

static void fuzz_query(const EgressPolicy *policy, const uint8_t *data, size_t size) {
        EgressQueryDecision d;

        if (egress_resolver_decide(policy, data, size, &d) < 0)
                return;
        switch (d.action) {
        case EGRESS_QUERY_DROP:
                /* Only what has no header, or is an answer. */
                FUZZ_ASSERT(size < LDNS_HEADER_SIZE || LDNS_QR_WIRE(data));
                break;
        case EGRESS_QUERY_ANSWER:
                FUZZ_ASSERT(d.answer && !d.forward);
                FUZZ_ASSERT(ldns_pkt_id(d.answer) == LDNS_ID_WIRE(data) && ldns_pkt_qr(d.answer));
                FUZZ_ASSERT(ldns_pkt_ancount(d.answer) == 0);
                /* Refused for its name: never a name the policy allows, unless the class is not IN. */
                if (d.denied_reason && !strstr(d.denied_reason, "class"))
                        FUZZ_ASSERT(egress_policy_name_allowed(policy, d.name, NULL) != 1);
                check_wire(d.answer, d.udp_size, d.id);
                break;
        case EGRESS_QUERY_FORWARD:
                FUZZ_ASSERT(d.forward && !d.answer && d.question);
                FUZZ_ASSERT(egress_policy_name_allowed(policy, d.name, NULL) == 1);
                FUZZ_ASSERT(d.qtype != LDNS_RR_TYPE_AAAA && d.qtype != LDNS_RR_TYPE_AXFR);
                FUZZ_ASSERT(!ldns_pkt_qr(d.forward) && ldns_pkt_qdcount(d.forward) == 1);
                FUZZ_ASSERT(d.udp_size >= 512 && d.udp_size <= EGRESS_RESOLVER_CLIENT_UDP_MAX);
                break;
        default:
                FUZZ_ASSERT(!"unknown action");
        }
        egress_query_decision_done(&d);
}

/* The answer's bytes against the question "allowed.example.test A" (id 0x4242), or, with the first byte
 * odd, "x.wild.example.test TXT". */
static void fuzz_answer(const EgressPolicy *policy, const uint8_t *data, size_t size) {
        const char *name = size > 0 && (data[0] & 1) ? "x.wild.example.test." : "allowed.example.test.";
        ldns_rr_type type = size > 0 && (data[0] & 1) ? LDNS_RR_TYPE_TXT : LDNS_RR_TYPE_A;
        ldns_pkt *q = ldns_pkt_query_new(ldns_dname_new_frm_str(name), type, LDNS_RR_CLASS_IN, LDNS_RD);
        EgressQueryDecision d;
        EgressAnswer a;
        EgressCidr pool;
        uint8_t *w = NULL;
        size_t n;

        FUZZ_ASSERT(q);
        ldns_pkt_set_id(q, 0x1234);
        FUZZ_ASSERT(ldns_pkt2wire(&w, q, &n) == LDNS_STATUS_OK);
        ldns_pkt_free(q);
        FUZZ_ASSERT(egress_resolver_decide(policy, w, n, &d) == 0 && d.action == EGRESS_QUERY_FORWARD);
        free(w);
        FUZZ_ASSERT(egress_cidr_parse("10.1.9.0/24", &pool, NULL) == 0);

        if (size > 0)
                data++, size--;
        if (egress_resolver_filter_answer(policy, &pool, &d, 0x4242, data, size, &a) == 0) {
                FUZZ_ASSERT(a.reply && ldns_pkt_id(a.reply) == 0x1234);
                for (size_t i = 0; i < a.n_allow; i++)
                        FUZZ_ASSERT(
                                a.allow[i].verdict != EGRESS_ADDRESS_DENIED &&
                                egress_policy_address_verdict(policy, &pool, AF_INET, &a.allow[i].address) ==
                                        a.allow[i].verdict);
                for (size_t i = 0; i < a.n_denied; i++)
                        FUZZ_ASSERT(a.denied[i].verdict == EGRESS_ADDRESS_DENIED);
                /* No address record goes to the client that was not opened. */
                ldns_rr_list *an = ldns_pkt_answer(a.reply);
                size_t n_a = 0;
                for (size_t i = 0; i < ldns_rr_list_rr_count(an); i++) {
                        FUZZ_ASSERT(ldns_rr_get_type(ldns_rr_list_rr(an, i)) != LDNS_RR_TYPE_AAAA);
                        n_a += ldns_rr_get_type(ldns_rr_list_rr(an, i)) == LDNS_RR_TYPE_A;
                }
                FUZZ_ASSERT(n_a == a.n_allow);
                FUZZ_ASSERT(ldns_pkt_arcount(a.reply) == 0 || ldns_pkt_edns(a.reply));
                check_wire(a.reply, 512, 0x1234);
                check_wire(a.reply, 65535, 0x1234);
                egress_answer_done(&a);
        }
        egress_query_decision_done(&d);
}

/* Input: the first byte chooses: even, the rest is a query; odd, an upstream's answer. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(egress_policy_donep) EgressPolicy p = EGRESS_POLICY_INIT;

        if (size < 1)
                return 0;
        make_policy(&p);
        if (data[0] & 1)
                fuzz_answer(&p, data + 1, size - 1);
        else
                fuzz_query(&p, data + 1, size - 1);
        return 0;
}
