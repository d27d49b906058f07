/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests egress-denials: a row per denial, a summary per second in a flood, nothing lost, the JSON detail. */
#include <errno.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <string.h>

#include "egress-denials.h"
#include "macro.h"
#include "test-util.h"

#define SEC USEC_PER_SEC

static EgressDenial name_denial(const char *name) {
        EgressDenial d;
        CHECK_INT(egress_denial_make(EGRESS_DENIAL_NAME, name, 53, "dns", "denied by policy", &d), 0);
        return d;
}

static void test_kind_table(void) {
        for (EgressDenialKind k = 0; k < _EGRESS_DENIAL_KIND_MAX; k++)
                CHECK_INT(egress_denial_kind_from_string(egress_denial_kind_to_string(k)), k);
        CHECK_INT(egress_denial_kind_from_string("port"), -EINVAL);
}

static void test_make(void) {
        EgressDenial d;
        char long_name[400];

        CHECK_INT(egress_denial_make(EGRESS_DENIAL_NAME, "", 53, "dns", NULL, &d), -EINVAL);
        CHECK_INT(egress_denial_make(EGRESS_DENIAL_NAME, "a.example", 53, NULL, NULL, &d), -EINVAL);
        CHECK_INT(egress_denial_make(_EGRESS_DENIAL_KIND_MAX, "a.example", 53, "dns", NULL, &d), -EINVAL);
        memset(long_name, 'a', sizeof(long_name) - 1);
        long_name[sizeof(long_name) - 1] = 0;
        CHECK_INT(egress_denial_make(EGRESS_DENIAL_ADDRESS, long_name, 443, "tcp", NULL, &d), 0);
        CHECK_INT(strlen(d.target), EGRESS_NAME_MAX);
        CHECK_STR(d.reason, "");
}

static void test_bad_args(void) {
        _cleanup_(egress_denials_freep) EgressDenials *d = NULL;

        CHECK_INT(egress_denials_new(EGRESS_DENIALS_PER_SECOND_MAX + 1, &d), -EINVAL);
        CHECK(!d);
        CHECK_INT(egress_denials_new(0, &d), 0);
        CHECK_U64(egress_denials_next_flush(d), UINT64_MAX);
}

/* Slow denials: a row each, no summary ever. */
static void test_slow(void) {
        _cleanup_(egress_denials_freep) EgressDenials *d = NULL;
        EgressDenialRow rows[2], row;
        EgressDenial den = name_denial("evil.example");

        CHECK_INT(egress_denials_new(3, &d), 0);
        for (unsigned i = 0; i < 20; i++) {
                CHECK_INT(egress_denials_add(d, 100 * SEC + i * SEC / 2, &den, rows), 1);
                CHECK(!rows[0].summary);
                CHECK_U64(rows[0].at_usec, 100 * SEC + i * SEC / 2);
                CHECK_STR(rows[0].denial.target, "evil.example");
        }
        CHECK_INT(egress_denials_flush(d, 1000 * SEC, &row), 0);
        CHECK_U64(egress_denials_total(d), 20);
        CHECK_U64(egress_denials_summarised(d), 0);
}

/* The flood: 10,000 denials in one second yield N rows and one summary that counts the rest. */
static void test_flood(void) {
        _cleanup_(egress_denials_freep) EgressDenials *d = NULL;
        EgressDenialRow rows[2], row;
        unsigned n_rows = 0, n_summaries = 0;
        uint64_t counted = 0;

        CHECK_INT(egress_denials_new(10, &d), 0);
        for (unsigned i = 0; i < 10000; i++) {
                char name[64];
                snprintf(name, sizeof(name), "host%u.evil.example", i % 7);
                EgressDenial den = name_denial(name);
                int n = egress_denials_add(d, 50 * SEC + i * 99, &den, rows); /* all within [50 s, 51 s) */
                CHECK(n >= 0 && n <= 1);
                for (int k = 0; k < n; k++) {
                        CHECK(!rows[k].summary);
                        n_rows++;
                        counted++;
                }
        }
        CHECK_INT(n_rows, 10);
        /* Not due before the second is over. */
        CHECK_U64(egress_denials_next_flush(d), 51 * SEC);
        CHECK_INT(egress_denials_flush(d, 51 * SEC - 1, &row), 0);
        CHECK_INT(egress_denials_flush(d, 51 * SEC, &row), 1);
        n_summaries++;
        CHECK(row.summary);
        CHECK_U64(row.count, 9990);
        CHECK_U64(row.at_usec, 50 * SEC);
        counted += row.count;
        /* Five distinct examples, no repeats (7 names went round). */
        CHECK_INT(row.n_examples, EGRESS_DENIALS_EXAMPLES);
        for (size_t i = 0; i < row.n_examples; i++)
                for (size_t j = i + 1; j < row.n_examples; j++)
                        CHECK(!streq(row.examples[i].target, row.examples[j].target));
        CHECK_INT(egress_denials_flush(d, 52 * SEC, &row), 0);
        CHECK_U64(egress_denials_next_flush(d), UINT64_MAX);
        CHECK_INT(n_rows + n_summaries, 11);
        CHECK_U64(counted, 10000);
        CHECK_U64(egress_denials_total(d), 10000);
        CHECK_U64(egress_denials_summarised(d), 9990);
}

/* A flood spread over seconds: the next second's first denial hands out the previous summary, then its own
 * row; at most per_second + 1 rows a second; every denial is counted once. */
static void test_flood_over_seconds(void) {
        _cleanup_(egress_denials_freep) EgressDenials *d = NULL;
        EgressDenialRow rows[2], row;
        uint64_t counted = 0, per_second_rows[4] = {};
        EgressDenial den;

        CHECK_INT(egress_denials_new(2, &d), 0);
        CHECK_INT(egress_denial_make(EGRESS_DENIAL_ADDRESS, "198.51.100.7", 443, "tcp", NULL, &den), 0);
        for (unsigned s = 0; s < 3; s++)
                for (unsigned i = 0; i < 1000; i++) {
                        int n = egress_denials_add(d, (10 + s) * SEC + i * 1000, &den, rows);
                        CHECK(n >= 0 && n <= 2);
                        for (int k = 0; k < n; k++) {
                                counted += rows[k].summary ? rows[k].count : 1;
                                /* A summary belongs to the second it covers. */
                                per_second_rows[rows[k].at_usec / SEC - 10]++;
                                if (rows[k].summary && s > 0)
                                        CHECK_INT(k, 0);
                        }
                }
        CHECK_INT(egress_denials_flush(d, 13 * SEC + 5, &row), 1);
        counted += row.count;
        per_second_rows[row.at_usec / SEC - 10]++;
        CHECK_U64(counted, 3000);
        for (unsigned s = 0; s < 3; s++)
                CHECK_U64(per_second_rows[s], 3);
        CHECK_INT(row.n_examples, 1);
}

/* A summary shows every kind it counts: a dropped connection after five refused names takes the last
 * example's place. */
static void test_examples_show_each_kind(void) {
        _cleanup_(egress_denials_freep) EgressDenials *d = NULL;
        EgressDenialRow rows[2], row;
        EgressDenial addr;

        CHECK_INT(egress_denials_new(1, &d), 0);
        for (unsigned i = 0; i < 8; i++) {
                char name[64];
                snprintf(name, sizeof(name), "host%u.evil.example", i);
                EgressDenial den = name_denial(name);
                CHECK(egress_denials_add(d, 20 * SEC + i, &den, rows) >= 0);
        }
        CHECK_INT(egress_denial_make(EGRESS_DENIAL_ADDRESS, "198.51.100.10", 9, "udp", "denied by policy", &addr), 0);
        CHECK_INT(egress_denials_add(d, 20 * SEC + 9, &addr, rows), 0);
        CHECK_INT(egress_denials_add(d, 20 * SEC + 10, &addr, rows), 0); /* already shown: no second place */
        CHECK_INT(egress_denials_flush(d, 21 * SEC, &row), 1);
        CHECK_U64(row.count, 9);
        CHECK_INT(row.n_examples, EGRESS_DENIALS_EXAMPLES);
        CHECK(row.examples[EGRESS_DENIALS_EXAMPLES - 1].kind == EGRESS_DENIAL_ADDRESS);
        CHECK_STR(row.examples[EGRESS_DENIALS_EXAMPLES - 1].target, "198.51.100.10");
        for (size_t i = 0; i + 1 < EGRESS_DENIALS_EXAMPLES; i++)
                CHECK(row.examples[i].kind == EGRESS_DENIAL_NAME);
}

/* A clock that steps back counts in the current second. */
static void test_clock_back(void) {
        _cleanup_(egress_denials_freep) EgressDenials *d = NULL;
        EgressDenialRow rows[2];
        EgressDenial den = name_denial("evil.example");

        CHECK_INT(egress_denials_new(1, &d), 0);
        CHECK_INT(egress_denials_add(d, 20 * SEC, &den, rows), 1);
        CHECK_INT(egress_denials_add(d, 19 * SEC, &den, rows), 0);
        CHECK_U64(egress_denials_next_flush(d), 21 * SEC);
}

static void test_json(void) {
        _cleanup_(egress_denials_freep) EgressDenials *d = NULL;
        EgressDenialRow rows[2], row;
        _cleanup_free_ char *one = NULL, *sum = NULL;
        EgressDenial den = name_denial("evil.example"), addr;

        CHECK_INT(egress_denials_new(1, &d), 0);
        CHECK_INT(egress_denials_add(d, 7 * SEC, &den, rows), 1);
        CHECK_INT(egress_denial_row_to_json(&rows[0], &one), 0);
        CHECK_STR(one, "{\"name\":\"evil.example\",\"port\":53,\"protocol\":\"dns\",\"reason\":\"denied by "
                       "policy\"}");
        CHECK_INT(egress_denial_make(EGRESS_DENIAL_ADDRESS, "198.51.100.7", 0, "icmp", "", &addr), 0);
        CHECK_INT(egress_denials_add(d, 7 * SEC + 1, &addr, rows), 0);
        CHECK_INT(egress_denials_add(d, 7 * SEC + 2, &addr, rows), 0);
        CHECK_INT(egress_denials_flush(d, 8 * SEC, &row), 1);
        CHECK_INT(egress_denial_row_to_json(&row, &sum), 0);
        CHECK_STR(sum, "{\"summary\":true,\"count\":2,\"second_start_usec\":7000000,\"examples\":"
                       "[{\"address\":\"198.51.100.7\",\"port\":0,\"protocol\":\"icmp\"}]}");
}

static void test_from_packet(void) {
        /* IPv4 header (20 bytes, to 198.51.100.10) + a TCP header's ports (40000 -> 8080) */
        uint8_t tcp[24] = {0x45, 0, 0, 60, 0, 0, 0x40, 0, 64, IPPROTO_TCP, 0, 0, 10, 237, 0, 2,
                           198, 51, 100, 10, 0x9c, 0x40, 0x1f, 0x90};
        EgressDenial d;

        CHECK_INT(egress_denial_from_packet(tcp, sizeof(tcp), "dropped by the firewall", &d), 0);
        CHECK_INT(d.kind, EGRESS_DENIAL_ADDRESS);
        CHECK_STR(d.target, "198.51.100.10");
        CHECK_INT(d.port, 8080);
        CHECK_STR(d.protocol, "tcp");
        CHECK_STR(d.reason, "dropped by the firewall");
        /* UDP; the ports cut off: port 0 */
        tcp[9] = IPPROTO_UDP;
        CHECK_INT(egress_denial_from_packet(tcp, 22, NULL, &d), 0);
        CHECK_STR(d.protocol, "udp");
        CHECK_INT(d.port, 0);
        tcp[9] = IPPROTO_ICMP;
        CHECK_INT(egress_denial_from_packet(tcp, sizeof(tcp), "x", &d), 0);
        CHECK_STR(d.protocol, "icmp");
        CHECK_INT(d.port, 0);
        tcp[9] = 47; /* GRE */
        CHECK_INT(egress_denial_from_packet(tcp, sizeof(tcp), "dropped", &d), 0);
        CHECK_STR(d.protocol, "ip");
        CHECK_STR(d.reason, "dropped (IP protocol 47)");
        /* options: the ports come after them */
        uint8_t opt[28] = {0x46, 0, 0, 60, 0, 0, 0, 0, 64, IPPROTO_TCP, 0, 0, 10, 237, 0, 2,
                           203, 0, 113, 10, 1, 1, 1, 0, 0x9c, 0x40, 0x01, 0xbb};
        CHECK_INT(egress_denial_from_packet(opt, sizeof(opt), "", &d), 0);
        CHECK_STR(d.target, "203.0.113.10");
        CHECK_INT(d.port, 443);
        /* not IPv4, too short, a header length under 20 or past the end */
        CHECK_INT(egress_denial_from_packet(tcp, 19, "", &d), -EBADMSG);
        uint8_t bad[24];
        memcpy(bad, tcp, sizeof(bad));
        bad[0] = 0x65;
        CHECK_INT(egress_denial_from_packet(bad, sizeof(bad), "", &d), -EBADMSG);
        bad[0] = 0x44;
        CHECK_INT(egress_denial_from_packet(bad, sizeof(bad), "", &d), -EBADMSG);
        bad[0] = 0x4f;
        CHECK_INT(egress_denial_from_packet(bad, sizeof(bad), "", &d), -EBADMSG);
        CHECK_INT(egress_denial_from_packet(NULL, 20, "", &d), -EINVAL);
}

int main(void) {
        test_kind_table();
        test_from_packet();
        test_make();
        test_bad_args();
        test_slow();
        test_flood();
        test_flood_over_seconds();
        test_examples_show_each_kind();
        test_clock_back();
        test_json();
        return test_finish("test-egress-denials");
}
