/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes egress-policy's parsers: ini assignments build a policy, then names and addresses are matched. */
#include <arpa/inet.h>
#include <errno.h>
#include <sys/socket.h>

#include "egress-policy.h"
#include "fuzz.h"
#include "macro.h"

/* An accepted entry means what it says: its canonical text parses back to the same entry, is no longer
 * than the limit, and a name entry matches itself (or, for a wildcard, one label more) by name. */
static void check_entry(const EgressEntry *e) {
        char buf[EGRESS_ENTRY_TEXT_MAX], sub[EGRESS_ENTRY_TEXT_MAX + 8];
        EgressEntry again;

        egress_entry_to_string(e, buf);
        FUZZ_ASSERT(strlen(buf) <= EGRESS_ENTRY_MAX);
        FUZZ_ASSERT(egress_entry_parse(buf, &again, NULL) == 0);
        FUZZ_ASSERT(memcmp(e, &again, sizeof(again)) == 0);

        EgressPolicy one = {.default_action = EGRESS_DEFAULT_DENY, .allow = &again, .n_allow = 1};
        if (e->kind == EGRESS_ENTRY_NAME) {
                FUZZ_ASSERT(strlen(e->name) <= EGRESS_NAME_MAX);
                FUZZ_ASSERT(egress_policy_name_allowed(&one, e->name, NULL) == 1);
        } else if (e->kind == EGRESS_ENTRY_WILDCARD) {
                FUZZ_ASSERT(egress_policy_name_allowed(&one, e->name, NULL) == 0);
                snprintf(sub, sizeof(sub), "a.%s", e->name);
                if (strlen(sub) <= EGRESS_NAME_MAX)
                        FUZZ_ASSERT(egress_policy_name_allowed(&one, sub, NULL) == 1);
        } else {
                FUZZ_ASSERT(e->kind == EGRESS_ENTRY_CIDR);
                FUZZ_ASSERT(e->cidr.family == AF_INET || e->cidr.family == AF_INET6);
                FUZZ_ASSERT(e->cidr.prefixlen <= (e->cidr.family == AF_INET ? 32u : 128u));
                FUZZ_ASSERT(egress_cidr_contains(&e->cidr, e->cidr.family, e->cidr.addr));
                /* An allow CIDR opens its own network address unless that is in the pool. */
                FUZZ_ASSERT(egress_policy_address_verdict(&one, NULL, e->cidr.family, e->cidr.addr) ==
                            EGRESS_ADDRESS_ALLOWED);
                one.deny = &again;
                one.n_deny = 1;
                FUZZ_ASSERT(egress_policy_address_verdict(&one, NULL, e->cidr.family, e->cidr.addr) ==
                            EGRESS_ADDRESS_DENIED);
        }
}

/* Input: lines. "KEY=VALUE" lines are ini assignments (Egress=, EgressAllow=, EgressDeny=) on one policy;
 * "?NAME" lines are names matched against it; "@ADDR" lines addresses; any other line is one entry. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(egress_policy_donep) EgressPolicy p = EGRESS_POLICY_INIT;

        while (size > 0) {
                _cleanup_free_ char *line = fuzz_take_line(&data, &size);
                _cleanup_free_ char *why = NULL;

                if (!line)
                        return 0;
                char *eq = strchr(line, '=');
                if (line[0] == '?') {
                        char n[EGRESS_NAME_MAX + 1];
                        const EgressEntry *by = (const EgressEntry *) 1;
                        int r = egress_policy_name_allowed(&p, line + 1, &by);
                        FUZZ_ASSERT(r == 0 || r == 1 || r == -EINVAL);
                        FUZZ_ASSERT((r == -EINVAL) == (egress_name_normalize(line + 1, n) < 0));
                        /* The deciding entry is one of the policy's, of the list that decided. */
                        if (by) {
                                FUZZ_ASSERT(r >= 0);
                                if (r == 1)
                                        FUZZ_ASSERT(by >= p.allow && by < p.allow + p.n_allow);
                                else
                                        FUZZ_ASSERT(by >= p.deny && by < p.deny + p.n_deny);
                        } else if (r >= 0)
                                FUZZ_ASSERT(r == (p.default_action == EGRESS_DEFAULT_ALLOW));
                } else if (line[0] == '@') {
                        uint8_t a[16];
                        int family = strchr(line + 1, ':') ? AF_INET6 : AF_INET;
                        if (inet_pton(family, line + 1, a) == 1) {
                                EgressAddressVerdict v = egress_policy_address_verdict(&p, NULL, family, a);
                                FUZZ_ASSERT(v >= 0 && v < _EGRESS_ADDRESS_VERDICT_MAX);
                                /* The fixed list is never opened by the default alone. */
                                if (egress_address_is_fixed_private(family, a))
                                        FUZZ_ASSERT(v != EGRESS_ADDRESS_IF_RESOLVED);
                        }
                } else if (eq) {
                        *eq = 0;
                        size_t before = p.n_allow + p.n_deny;
                        int r = egress_policy_ini_assign(&p, line, eq + 1, &why);
                        FUZZ_ASSERT(r == 0 || r == -EINVAL || r == -ENOENT || r == -ENOMEM);
                        FUZZ_ASSERT(r != -EINVAL || why);
                        if (r < 0)
                                FUZZ_ASSERT(p.n_allow + p.n_deny == before);
                        FUZZ_ASSERT(p.n_allow + p.n_deny <= EGRESS_POLICY_ENTRIES_MAX);
                } else {
                        EgressEntry e;
                        int r = egress_entry_parse(line, &e, &why);
                        FUZZ_ASSERT(r == 0 || r == -EINVAL);
                        if (r == 0)
                                check_entry(&e);
                        else
                                FUZZ_ASSERT(why && strlen(why) < 512);
                }
        }
        for (size_t i = 0; i < p.n_allow; i++)
                check_entry(&p.allow[i]);
        for (size_t i = 0; i < p.n_deny; i++)
                check_entry(&p.deny[i]);
        return 0;
}
