/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests egress-policy: entries accepted and refused with their reasons, the D-Bus and ini forms, name and
 * address precedence, the fixed private list and the limits. */
#include <arpa/inet.h>
#include <errno.h>
#include <sys/socket.h>

#include "egress-policy.h"
#include "macro.h"
#include "test-bus-msg.h"
#include "test-util.h"

static void check_entry_ok(const char *in, EgressEntryKind kind, const char *canonical) {
        char buf[EGRESS_ENTRY_TEXT_MAX];
        _cleanup_free_ char *why = NULL;
        EgressEntry e, again;

        CHECK_INT(egress_entry_parse(in, &e, &why), 0);
        if (why)
                fprintf(stderr, "    %s: %s\n", in, why);
        CHECK_INT(e.kind, kind);
        CHECK_STR(egress_entry_to_string(&e, buf), canonical);
        /* The canonical text parses back to the same entry. */
        CHECK_INT(egress_entry_parse(buf, &again, NULL), 0);
        CHECK(memcmp(&e, &again, sizeof(e)) == 0);
}

static void check_entry_bad(const char *in, const char *what) {
        _cleanup_free_ char *why = NULL;
        EgressEntry e;

        CHECK_INT(egress_entry_parse(in, &e, &why), -EINVAL);
        CHECK(why && strstr(why, what));
        if (!(why && strstr(why, what)))
                fprintf(stderr, "    %s: message %s, expected to contain %s\n", in, strna(why), what);
}

static void test_entries(void) {
        check_entry_ok("pypi.org", EGRESS_ENTRY_NAME, "pypi.org");
        check_entry_ok("PyPI.Org.", EGRESS_ENTRY_NAME, "pypi.org");
        check_entry_ok("xn--bcher-kva.example", EGRESS_ENTRY_NAME, "xn--bcher-kva.example");
        check_entry_ok("a-b.c0.example", EGRESS_ENTRY_NAME, "a-b.c0.example");
        check_entry_ok("123.example", EGRESS_ENTRY_NAME, "123.example");
        check_entry_ok("cafe.be", EGRESS_ENTRY_NAME, "cafe.be");
        check_entry_ok("*.pythonhosted.org", EGRESS_ENTRY_WILDCARD, "*.pythonhosted.org");
        check_entry_ok("*.Example.ORG", EGRESS_ENTRY_WILDCARD, "*.example.org");
        check_entry_ok("203.0.113.0/24", EGRESS_ENTRY_CIDR, "203.0.113.0/24");
        check_entry_ok("198.51.100.7", EGRESS_ENTRY_CIDR, "198.51.100.7/32");
        check_entry_ok("0.0.0.0/0", EGRESS_ENTRY_CIDR, "0.0.0.0/0");
        check_entry_ok("2001:DB8::/32", EGRESS_ENTRY_CIDR, "2001:db8::/32");
        check_entry_ok("::/0", EGRESS_ENTRY_CIDR, "::/0");
        check_entry_ok("2001:db8::1", EGRESS_ENTRY_CIDR, "2001:db8::1/128");
        check_entry_ok("::ffff:10.0.0.0/104", EGRESS_ENTRY_CIDR, "::ffff:10.0.0.0/104");

        /* The longest name: 253 characters in labels of 63. */
        char name[300];
        snprintf(name, sizeof(name), "%.63s.%.63s.%.63s.%.61s",
                 "a123456789a123456789a123456789a123456789a123456789a123456789abc",
                 "b123456789a123456789a123456789a123456789a123456789a123456789abc",
                 "c123456789a123456789a123456789a123456789a123456789a123456789abc",
                 "d123456789a123456789a123456789a123456789a123456789a123456789a");
        CHECK_INT(strlen(name), 253);
        check_entry_ok(name, EGRESS_ENTRY_NAME, name);
        char longer[320];
        snprintf(longer, sizeof(longer), "x%s", name);
        check_entry_bad(longer, "longer than 253");

        check_entry_bad("", "an entry is a name");
        check_entry_bad("*", "a wildcard must be");
        check_entry_bad("py*.org", "only a leading");
        check_entry_bad("a.*.b", "only a leading");
        check_entry_bad("*.*.org", "only a leading");
        check_entry_bad("**.org", "a wildcard must be");
        check_entry_bad("*.org", "a single label");
        check_entry_bad("localhost", "a single label");
        check_entry_bad("a..b", "an empty label");
        check_entry_bad(".example.org", "an empty label");
        check_entry_bad("-a.example", "starting with '-'");
        check_entry_bad("a-.example", "ending with '-'");
        check_entry_bad("under_score.example", "other than a-z");
        check_entry_bad("b\xc3\xbc"
                        "cher.example",
                        "punycode");
        check_entry_bad("example.123", "all-numeric last label");
        check_entry_bad("pypi .org", "whitespace");
        check_entry_bad("x123456789a123456789a123456789a123456789a123456789a123456789abcd.example",
                        "longer than 63");
        check_entry_bad("10.0.0.1/8", "host bits are set (did you mean 10.0.0.0/8?)");
        check_entry_bad("2001:db8::1/32", "did you mean 2001:db8::/32?");
        check_entry_bad("10.0.0.0/33", "prefix length must be 0-32");
        check_entry_bad("2001:db8::/129", "prefix length must be 0-128");
        check_entry_bad("10.0.0.0/", "prefix length");
        check_entry_bad("10.0.0.0/+8", "prefix length");
        check_entry_bad("10.0.0.0/08", "prefix length");
        check_entry_bad("10.0.0.0/ 8", "whitespace");
        check_entry_bad("10.0.0", "not an IPv4 or IPv6 address");
        check_entry_bad("256.0.0.0", "not an IPv4 or IPv6 address");
        check_entry_bad("pypi.org:443", "ports, protocols and paths are not supported");
        check_entry_bad("1.2.3.4:80", "ports, protocols and paths are not supported");
        check_entry_bad("tcp/443", "ports, protocols and paths are not supported");
        check_entry_bad("example.org/path", "ports, protocols and paths are not supported");
        /* Control characters are not quoted as they are. */
        _cleanup_free_ char *why = NULL;
        EgressEntry e;
        CHECK_INT(egress_entry_parse("a\x1b[2J.example", &e, &why), -EINVAL);
        CHECK(why && !strchr(why, '\x1b'));
}

static void test_name_matching(void) {
        _cleanup_(egress_policy_donep) EgressPolicy p = EGRESS_POLICY_INIT;
        const EgressEntry *by;

        CHECK_INT(egress_policy_add(&p, true, "pypi.org", NULL), 0);
        CHECK_INT(egress_policy_add(&p, true, "*.pythonhosted.org", NULL), 0);
        CHECK_INT(egress_policy_add(&p, true, "*.example.com", NULL), 0);
        CHECK_INT(egress_policy_add(&p, false, "evil.example.com", NULL), 0);
        CHECK_INT(egress_policy_add(&p, false, "*.internal.example.com", NULL), 0);

        CHECK_INT(egress_policy_name_allowed(&p, "pypi.org", &by), 1);
        CHECK(by == &p.allow[0]);
        CHECK_INT(egress_policy_name_allowed(&p, "PYPI.ORG.", NULL), 1);
        CHECK_INT(egress_policy_name_allowed(&p, "www.pypi.org", NULL), 0); /* exact means exact */
        CHECK_INT(egress_policy_name_allowed(&p, "files.pythonhosted.org", NULL), 1);
        CHECK_INT(egress_policy_name_allowed(&p, "a.b.pythonhosted.org", NULL), 1);
        CHECK_INT(egress_policy_name_allowed(&p, "pythonhosted.org", NULL), 0); /* not the suffix itself */
        CHECK_INT(egress_policy_name_allowed(&p, "evilpythonhosted.org", NULL), 0);
        /* Deny overrides allow, exact or wildcard, whatever the order or specificity. */
        CHECK_INT(egress_policy_name_allowed(&p, "evil.example.com", &by), 0);
        CHECK(by == &p.deny[0]);
        CHECK_INT(egress_policy_name_allowed(&p, "ok.example.com", NULL), 1);
        CHECK_INT(egress_policy_name_allowed(&p, "db.internal.example.com", &by), 0);
        CHECK(by == &p.deny[1]);
        CHECK_INT(egress_policy_name_allowed(&p, "other.test", &by), 0);
        CHECK(by == NULL);
        CHECK_INT(egress_policy_name_allowed(&p, "bad..name", NULL), -EINVAL);
        CHECK_INT(egress_policy_name_allowed(&p, "", NULL), -EINVAL);

        p.default_action = EGRESS_DEFAULT_ALLOW;
        CHECK_INT(egress_policy_name_allowed(&p, "other.test", &by), 1);
        CHECK(by == NULL);
        CHECK_INT(egress_policy_name_allowed(&p, "evil.example.com", NULL), 0);
}

static int addr_verdict(const EgressPolicy *p, const EgressCidr *pool, const char *a) {
        uint8_t buf[16];
        int family = strchr(a, ':') ? AF_INET6 : AF_INET;

        if (inet_pton(family, a, buf) != 1)
                abort();
        return egress_policy_address_verdict(p, pool, family, buf);
}

static void test_address_matching(void) {
        _cleanup_(egress_policy_donep) EgressPolicy p = EGRESS_POLICY_INIT;
        EgressCidr pool;

        CHECK_INT(egress_cidr_parse("10.213.0.0/16", &pool, NULL), 0);
        CHECK_INT(egress_policy_add(&p, true, "203.0.113.0/24", NULL), 0);
        CHECK_INT(egress_policy_add(&p, true, "192.168.7.0/24", NULL), 0);
        CHECK_INT(egress_policy_add(&p, true, "10.0.0.0/8", NULL), 0);
        CHECK_INT(egress_policy_add(&p, false, "203.0.113.128/25", NULL), 0);
        CHECK_INT(egress_policy_add(&p, true, "2001:db8::/32", NULL), 0);

        CHECK_INT(addr_verdict(&p, &pool, "203.0.113.5"), EGRESS_ADDRESS_ALLOWED);
        CHECK_INT(addr_verdict(&p, &pool, "203.0.113.200"), EGRESS_ADDRESS_DENIED); /* deny wins */
        CHECK_INT(addr_verdict(&p, &pool, "192.168.7.9"), EGRESS_ADDRESS_ALLOWED);  /* opened by a CIDR */
        CHECK_INT(addr_verdict(&p, &pool, "192.168.8.9"), EGRESS_ADDRESS_DENIED);   /* fixed list */
        CHECK_INT(addr_verdict(&p, &pool, "10.213.4.5"), EGRESS_ADDRESS_DENIED);    /* the pool, always */
        CHECK_INT(addr_verdict(&p, &pool, "10.1.2.3"), EGRESS_ADDRESS_ALLOWED);
        CHECK_INT(addr_verdict(&p, NULL, "10.213.4.5"), EGRESS_ADDRESS_ALLOWED); /* no pool given */
        CHECK_INT(addr_verdict(&p, &pool, "198.51.100.1"), EGRESS_ADDRESS_IF_RESOLVED);
        CHECK_INT(addr_verdict(&p, &pool, "169.254.169.254"), EGRESS_ADDRESS_DENIED);
        CHECK_INT(addr_verdict(&p, &pool, "127.0.0.1"), EGRESS_ADDRESS_DENIED);
        CHECK_INT(addr_verdict(&p, &pool, "100.64.0.1"), EGRESS_ADDRESS_DENIED);
        CHECK_INT(addr_verdict(&p, &pool, "172.31.255.255"), EGRESS_ADDRESS_DENIED);
        CHECK_INT(addr_verdict(&p, &pool, "172.32.0.1"), EGRESS_ADDRESS_IF_RESOLVED);
        CHECK_INT(addr_verdict(&p, &pool, "224.0.0.251"), EGRESS_ADDRESS_DENIED);
        CHECK_INT(addr_verdict(&p, &pool, "255.255.255.255"), EGRESS_ADDRESS_DENIED);
        CHECK_INT(addr_verdict(&p, &pool, "2001:db8::5"), EGRESS_ADDRESS_ALLOWED);
        CHECK_INT(addr_verdict(&p, &pool, "::1"), EGRESS_ADDRESS_DENIED);
        CHECK_INT(addr_verdict(&p, &pool, "fe80::1"), EGRESS_ADDRESS_DENIED);
        CHECK_INT(addr_verdict(&p, &pool, "fd00::1"), EGRESS_ADDRESS_DENIED);
        CHECK_INT(addr_verdict(&p, &pool, "ff02::1"), EGRESS_ADDRESS_DENIED);
        CHECK_INT(addr_verdict(&p, &pool, "::ffff:127.0.0.1"), EGRESS_ADDRESS_DENIED);
        CHECK_INT(addr_verdict(&p, &pool, "2606:4700::1"), EGRESS_ADDRESS_IF_RESOLVED);

        p.default_action = EGRESS_DEFAULT_ALLOW;
        CHECK_INT(addr_verdict(&p, &pool, "198.51.100.1"), EGRESS_ADDRESS_ALLOWED);
        CHECK_INT(addr_verdict(&p, &pool, "169.254.169.254"), EGRESS_ADDRESS_DENIED);
        CHECK_INT(addr_verdict(&p, &pool, "203.0.113.200"), EGRESS_ADDRESS_DENIED);

        /* The tables round-trip. */
        for (int v = 0; v < _EGRESS_ADDRESS_VERDICT_MAX; v++)
                CHECK_INT(egress_address_verdict_from_string(egress_address_verdict_to_string(v)), v);
        for (int v = 0; v < _EGRESS_DEFAULT_MAX; v++)
                CHECK_INT(egress_default_from_string(egress_default_to_string(v)), v);
        CHECK_INT(egress_default_from_string("Deny"), -EINVAL);
        /* Every fixed range parses (a typo there would silently open it). */
        for (size_t i = 0; i < egress_fixed_private4_count; i++) {
                EgressCidr c;
                CHECK_INT(egress_cidr_parse(egress_fixed_private4[i], &c, NULL), 0);
                CHECK_INT(c.family, AF_INET);
        }
        for (size_t i = 0; i < egress_fixed_private6_count; i++) {
                EgressCidr c;
                CHECK_INT(egress_cidr_parse(egress_fixed_private6[i], &c, NULL), 0);
                CHECK_INT(c.family, AF_INET6);
        }
}

static void test_limits(void) {
        _cleanup_(egress_policy_donep) EgressPolicy p = EGRESS_POLICY_INIT;
        _cleanup_free_ char *why = NULL;
        char e[64];

        for (int i = 0; i < EGRESS_POLICY_ENTRIES_MAX; i++) {
                snprintf(e, sizeof(e), "h%d.example", i);
                CHECK_INT(egress_policy_add(&p, i % 2, e, NULL), 0);
        }
        CHECK_INT(egress_policy_add(&p, true, "one-more.example", &why), -EINVAL);
        CHECK(why && strstr(why, "at most 256"));
        CHECK_INT(p.n_allow + p.n_deny, EGRESS_POLICY_ENTRIES_MAX);
}

static void check_bus_refused(sd_bus_message *m, const char *what) {
        _cleanup_(egress_policy_donep) EgressPolicy p = EGRESS_POLICY_INIT;
        sd_bus_error e = SD_BUS_ERROR_NULL;

        CHECK_INT(egress_policy_from_bus(m, &p, &e), -EINVAL);
        CHECK_STR(e.name, SD_BUS_ERROR_INVALID_ARGS);
        CHECK(e.message && strstr(e.message, what));
        if (!(e.message && strstr(e.message, what)))
                fprintf(stderr, "    message: %s, expected %s\n", strna(e.message), what);
        CHECK_INT(p.n_allow + p.n_deny, 0);
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
}

static void test_bus(void) {
        _cleanup_(egress_policy_donep) EgressPolicy p = EGRESS_POLICY_INIT, q = EGRESS_POLICY_INIT;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *m;

        m = MSG("a{sv}", 3, "default", "s", "deny", "allow", "as", 3, "pypi.org", "*.pythonhosted.org",
                "203.0.113.0/24", "deny", "as", 1, "Evil.Example");
        CHECK_INT(egress_policy_from_bus(m, &p, &e), 0);
        CHECK_INT(p.default_action, EGRESS_DEFAULT_DENY);
        CHECK_INT(p.n_allow, 3);
        CHECK_INT(p.n_deny, 1);
        CHECK_STR(p.deny[0].name, "evil.example");
        sd_bus_message_unref(m);

        /* Round trip through our own a{sv}. */
        m = new_msg();
        CHECK_INT(egress_policy_append_bus(m, &p), 0);
        done(m);
        CHECK_INT(egress_policy_from_bus(m, &q, &e), 0);
        CHECK_INT(q.n_allow, 3);
        CHECK_INT(q.n_deny, 1);
        CHECK(memcmp(p.allow, q.allow, 3 * sizeof(EgressEntry)) == 0);
        CHECK(memcmp(p.deny, q.deny, sizeof(EgressEntry)) == 0);
        sd_bus_message_unref(m);

        /* Empty: default deny, nothing allowed. */
        egress_policy_done(&q);
        m = MSG("a{sv}", 0);
        CHECK_INT(egress_policy_from_bus(m, &q, &e), 0);
        CHECK_INT(q.default_action, EGRESS_DEFAULT_DENY);
        CHECK_INT(q.n_allow + q.n_deny, 0);
        sd_bus_message_unref(m);

        check_bus_refused(MSG("a{sv}", 1, "default", "s", "maybe"),
                          "'default' must be \"deny\" or \"allow\"");
        check_bus_refused(MSG("a{sv}", 1, "default", "b", 1), "'default' must be of type 's'");
        check_bus_refused(MSG("a{sv}", 1, "allow", "s", "pypi.org"), "'allow' must be of type 'as'");
        check_bus_refused(MSG("a{sv}", 1, "ports", "as", 0), "Unknown egress policy key 'ports'");
        check_bus_refused(MSG("a{sv}", 2, "allow", "as", 1, "pypi.org", "allow", "as", 0), "given twice");
        check_bus_refused(MSG("a{sv}", 2, "allow", "as", 1, "pypi.org", "deny", "as", 1, "py*.org"),
                          "Invalid egress entry 'py*.org'");
        check_bus_refused(MSG("a{sv}", 1, "allow", "as", 1, "10.0.0.1/8"), "host bits");
}

static void test_ini(void) {
        _cleanup_(egress_policy_donep) EgressPolicy p = EGRESS_POLICY_INIT;
        _cleanup_free_ char *why = NULL;

        CHECK_INT(egress_policy_ini_assign(&p, "Egress", "allow", &why), 0);
        CHECK_INT(p.default_action, EGRESS_DEFAULT_ALLOW);
        CHECK_INT(egress_policy_ini_assign(&p, "EgressAllow", "pypi.org  *.pythonhosted.org\t203.0.113.0/24",
                                           &why),
                  0);
        CHECK_INT(p.n_allow, 3);
        CHECK_INT(egress_policy_ini_assign(&p, "EgressAllow", "github.com", &why), 0); /* adds */
        CHECK_INT(p.n_allow, 4);
        CHECK_INT(egress_policy_ini_assign(&p, "EgressDeny", "10.0.0.0/8", &why), 0);
        CHECK_INT(p.n_deny, 1);

        /* All or nothing: a bad entry leaves the list as it was. */
        CHECK_INT(egress_policy_ini_assign(&p, "EgressAllow", "ok.example a.*.b", &why), -EINVAL);
        CHECK(why && strstr(why, "Invalid EgressAllow=: Invalid egress entry 'a.*.b'"));
        CHECK_INT(p.n_allow, 4);
        free(why);
        why = NULL;
        CHECK_INT(egress_policy_ini_assign(&p, "Egress", "yes", &why), -EINVAL);
        CHECK(why && strstr(why, "expected deny or allow"));
        CHECK_INT(p.default_action, EGRESS_DEFAULT_ALLOW);
        CHECK_INT(egress_policy_ini_assign(&p, "MemoryMax", "1G", &why), -ENOENT);
}

int main(void) {
        bus_setup();
        test_entries();
        test_name_matching();
        test_address_matching();
        test_limits();
        test_bus();
        test_ini();
        sd_bus_unref(bus);
        return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
