/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A sandbox's egress policy (issue 23): its entries' syntax, the D-Bus and ini forms, and the matching. */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include "macro.h"

/* Limits, the same in every form (D-Bus, ini, later REST):
 * - at most 256 entries in allow and deny together;
 * - a name is at most 253 characters (without a trailing dot), each label 1-63 characters of the LDH set
 *   (a-z, 0-9, '-', not at a label's start or end), at least two labels, the last one not all digits;
 *   names are case-insensitive and kept in lower case; a trailing dot is dropped;
 * - IDNs: ASCII only. A non-ASCII name is refused; write its punycode form ("xn--…"), which is LDH;
 * - a wildcard is "*." followed by such a name, and only that: "*" alone, "py*.org", "a.*.b" and
 *   "*.*.org" are refused;
 * - a CIDR is an IPv4 or IPv6 address, optionally "/prefix" (decimal, ≤ 32 or ≤ 128); without a prefix it
 *   is the one address. Host bits must be zero ("10.0.0.1/8" is refused; "10.0.0.0/8" is meant);
 * - ports and protocols are not supported: "pypi.org:443" or "tcp/443" are refused with that reason. */
#define EGRESS_POLICY_ENTRIES_MAX 256
#define EGRESS_NAME_MAX           253
#define EGRESS_LABEL_MAX          63
/* The longest entry text accepted at all: "*." + a name (a CIDR is shorter). */
#define EGRESS_ENTRY_MAX (2 + EGRESS_NAME_MAX)

typedef enum EgressDefault {
        EGRESS_DEFAULT_DENY,
        EGRESS_DEFAULT_ALLOW,
        _EGRESS_DEFAULT_MAX,
        _EGRESS_DEFAULT_INVALID = -EINVAL,
} EgressDefault;

DECLARE_STRING_TABLE(egress_default, EgressDefault);

typedef enum EgressEntryKind {
        EGRESS_ENTRY_NAME,     /* "pypi.org": that name only */
        EGRESS_ENTRY_WILDCARD, /* "*.pythonhosted.org": any name with one or more labels before the suffix,
                                * not the suffix itself */
        EGRESS_ENTRY_CIDR,     /* "203.0.113.0/24", "2001:db8::/32", "198.51.100.7" */
        _EGRESS_ENTRY_KIND_MAX,
        _EGRESS_ENTRY_KIND_INVALID = -EINVAL,
} EgressEntryKind;

typedef struct EgressCidr {
        int family;         /* AF_INET or AF_INET6 */
        uint8_t addr[16];   /* network byte order; the first 4 bytes for AF_INET */
        unsigned prefixlen; /* 0..32 or 0..128 */
} EgressCidr;

typedef struct EgressEntry {
        EgressEntryKind kind;
        /* NAME: the name; WILDCARD: the suffix after "*."; both in lower case without a trailing dot. */
        char name[EGRESS_NAME_MAX + 1];
        EgressCidr cidr; /* CIDR */
} EgressEntry;

typedef struct EgressPolicy {
        EgressDefault default_action;
        EgressEntry *allow;
        size_t n_allow;
        EgressEntry *deny;
        size_t n_deny;
} EgressPolicy;

/* An empty policy: default deny, no entries. */
#define EGRESS_POLICY_INIT \
        { .default_action = EGRESS_DEFAULT_DENY }

/* Frees the entries, leaves an empty policy; accepts NULL. */
void egress_policy_done(EgressPolicy *p);
/* The same for a heap-allocated policy; returns NULL. */
EgressPolicy *egress_policy_free(EgressPolicy *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(EgressPolicy *, egress_policy_free);
static inline void egress_policy_donep(EgressPolicy *p) {
        egress_policy_done(p);
}

/* Parses one entry. Returns 0 and fills *ret; or -EINVAL, with *ret_error (if not NULL) set to a sentence
 * that names the entry and what is wrong with it (the text of a D-Bus InvalidArgs error). */
int egress_entry_parse(const char *s, EgressEntry *ret, char **ret_error);
/* The entry's canonical text ("*.pythonhosted.org", "10.0.0.0/8", "2001:db8::/32", "198.51.100.7/32"),
 * which parses back to the same entry. buf must hold EGRESS_ENTRY_MAX + 1 bytes. */
#define EGRESS_ENTRY_TEXT_MAX (EGRESS_ENTRY_MAX + 1)
const char *egress_entry_to_string(const EgressEntry *e, char buf[static EGRESS_ENTRY_TEXT_MAX]);

/* Parses a CIDR (or one address) alone; the same rules and messages as egress_entry_parse(). */
int egress_cidr_parse(const char *s, EgressCidr *ret, char **ret_error);
/* Whether addr (network byte order, 4 or 16 bytes per family) lies in cidr. */
bool egress_cidr_contains(const EgressCidr *cidr, int family, const void *addr);

/* Appends one entry to the allow (allow = true) or deny list, checking the entry and the count. Returns 0,
 * -EINVAL with *ret_error, or -ENOMEM. */
int egress_policy_add(EgressPolicy *p, bool allow, const char *entry, char **ret_error);

/* Reads a policy from an a{sv} at msg: "default" s ("deny" | "allow"; deny when absent), "allow" as,
 * "deny" as. Unknown keys, wrong types and bad entries are refused: -EINVAL with an InvalidArgs error
 * saying what. *ret is filled only on success (and then owned by the caller: egress_policy_done()). */
int egress_policy_from_bus(sd_bus_message *msg, EgressPolicy *ret, sd_bus_error *error);
/* Appends the policy as such an a{sv}: "default" s, "allow" as, "deny" as, entries in canonical form. */
int egress_policy_append_bus(sd_bus_message *msg, const EgressPolicy *p);

/* One assignment of a [Type:<name>] section: "Egress=" deny | allow, "EgressAllow=" and "EgressDeny="
 * whitespace-separated entries, each assignment adding to its list (as HidePaths= does). Returns 0 if
 * done; -ENOENT if key is none of these three (not ours: p unchanged); -EINVAL with *ret_error (without
 * a file position: the caller adds it) and p unchanged; -ENOMEM. */
int egress_policy_ini_assign(EgressPolicy *p, const char *key, const char *value, char **ret_error);

/* Copies src into *ret (which is overwritten). Returns 0 or -ENOMEM. */
int egress_policy_copy(const EgressPolicy *src, EgressPolicy *ret);

/* Normalizes a name as a DNS query carries it (case, one trailing dot). Returns 0 and writes the name in
 * lower case without a trailing dot to buf; -EINVAL if it is not a valid name by the rules above (a query
 * for such a name is refused as if denied). */
int egress_name_normalize(const char *name, char buf[static EGRESS_NAME_MAX + 1]);

/* Name precedence: a deny entry that matches (exact or wildcard) denies, whatever any allow entry says;
 * otherwise an allow entry that matches allows; otherwise the default decides. Returns 1 (allowed),
 * 0 (denied) or -EINVAL (not a valid name: denied). *ret_entry (if not NULL) is the deciding entry, or NULL
 * when the default decided. */
int egress_policy_name_allowed(const EgressPolicy *p, const char *name, const EgressEntry **ret_entry);

typedef enum EgressAddressVerdict {
        EGRESS_ADDRESS_DENIED,      /* a deny CIDR, the pool, or the fixed list without an allow CIDR */
        EGRESS_ADDRESS_ALLOWED,     /* an allow CIDR, or default allow and not in the fixed list */
        EGRESS_ADDRESS_IF_RESOLVED, /* default deny: only once an allowed name resolved to it */
        _EGRESS_ADDRESS_VERDICT_MAX,
        _EGRESS_ADDRESS_VERDICT_INVALID = -EINVAL,
} EgressAddressVerdict;

DECLARE_STRING_TABLE(egress_address_verdict, EgressAddressVerdict);

/* Address precedence, the same as the firewall's (egress-nft.c), first match wins:
 *   1. a deny CIDR contains it: denied;
 *   2. pool (the other sandboxes' addresses; may be NULL) contains it: denied, even if an allow CIDR
 *      covers it (sandboxes never reach each other);
 *   3. an allow CIDR contains it: allowed (this is how a private range is opened explicitly);
 *   4. the fixed list (egress_address_is_fixed_private) contains it: denied, even when an allowed name
 *      resolved to it (DNS rebinding);
 *   5. default allow: allowed; default deny: allowed only if resolved through an allowed name.
 * addr is 4 or 16 bytes in network byte order per family (AF_INET, AF_INET6). The host's own addresses are
 * refused by the firewall's input chain whatever this says (except the resolver). */
EgressAddressVerdict egress_policy_address_verdict(const EgressPolicy *p, const EgressCidr *pool, int family,
                                                   const void *addr);

/* The fixed list of ranges no sandbox reaches unless an allow CIDR covers them. IPv4: 0.0.0.0/8 (this
 * network), 10.0.0.0/8, 100.64.0.0/10 (shared address space), 127.0.0.0/8, 169.254.0.0/16 (link-local,
 * the cloud metadata endpoint), 172.16.0.0/12, 192.168.0.0/16, 224.0.0.0/4 (multicast), 240.0.0.0/4
 * (reserved, and the broadcast address). IPv6: ::/128, ::1/128, ::ffff:0:0/96 (IPv4-mapped: the same
 * ranges by another name), fc00::/7 (ULA), fe80::/10 (link-local), ff00::/8 (multicast). */
extern const char *const egress_fixed_private4[];
extern const size_t egress_fixed_private4_count;
extern const char *const egress_fixed_private6[];
extern const size_t egress_fixed_private6_count;
bool egress_address_is_fixed_private(int family, const void *addr);
