/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A sandbox's egress policy (issue 23): its entries' syntax, the D-Bus and ini forms, and the matching. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "bus-fields.h"
#include "egress-policy.h"
#include "ini-util.h"
#include "macro.h"

static const char *const egress_default_table[_EGRESS_DEFAULT_MAX] = {
        [EGRESS_DEFAULT_DENY] = "deny",
        [EGRESS_DEFAULT_ALLOW] = "allow",
};

DEFINE_STRING_TABLE(egress_default, EgressDefault, _EGRESS_DEFAULT_MAX);

static const char *const egress_address_verdict_table[_EGRESS_ADDRESS_VERDICT_MAX] = {
        [EGRESS_ADDRESS_DENIED] = "denied",
        [EGRESS_ADDRESS_ALLOWED] = "allowed",
        [EGRESS_ADDRESS_IF_RESOLVED] = "if-resolved",
};

DEFINE_STRING_TABLE(egress_address_verdict, EgressAddressVerdict, _EGRESS_ADDRESS_VERDICT_MAX);

const char *const egress_fixed_private4[] = {
        "0.0.0.0/8",     "10.0.0.0/8",     "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
        "172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/4",   "240.0.0.0/4",
};
const size_t egress_fixed_private4_count = ELEMENTSOF(egress_fixed_private4);

const char *const egress_fixed_private6[] = {
        "::/128", "::1/128", "::ffff:0:0/96", "fc00::/7", "fe80::/10", "ff00::/8",
};
const size_t egress_fixed_private6_count = ELEMENTSOF(egress_fixed_private6);

_printf_(2, 3) static int fail(char **ret_error, const char *fmt, ...) {
        va_list ap;

        if (ret_error) {
                char *m = NULL;

                va_start(ap, fmt);
                if (vasprintf(&m, fmt, ap) < 0)
                        m = NULL;
                va_end(ap);
                if (!m)
                        return -ENOMEM;
                free(*ret_error);
                *ret_error = m;
        }
        return -EINVAL;
}

/* An entry as it may be quoted in a message: printable ASCII only, cut at 64 characters. */
static const char *quotable(const char *s, char buf[static 72]) {
        size_t n = 0;

        for (const char *p = s; *p && n < 64; p++)
                buf[n++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
        if (strlen(s) > 64) {
                memcpy(buf + n, "...", 3);
                n += 3;
        }
        buf[n] = 0;
        return buf;
}

void egress_policy_done(EgressPolicy *p) {
        if (!p)
                return;
        free(p->allow);
        free(p->deny);
        *p = (EgressPolicy) EGRESS_POLICY_INIT;
}

EgressPolicy *egress_policy_free(EgressPolicy *p) {
        egress_policy_done(p);
        free(p);
        return NULL;
}

/* --- Names ------------------------------------------------------------------------------------------ */

/* Checks and lower-cases a name (no wildcard), dropping one trailing dot. Returns 0, or -EINVAL with the
 * reason in *ret_why (a static string). */
static int name_check(const char *s, char buf[static EGRESS_NAME_MAX + 1], const char **ret_why) {
        size_t len = strlen(s), labels = 0, label_len = 0;
        bool label_digits = true;

        if (len > 0 && s[len - 1] == '.')
                len--;
        if (len == 0)
                return *ret_why = "an empty name", -EINVAL;
        if (len > EGRESS_NAME_MAX)
                return *ret_why = "longer than 253 characters", -EINVAL;

        for (size_t i = 0; i <= len; i++) {
                unsigned char c = i < len ? (unsigned char) s[i] : '.';

                if (c == '.') {
                        if (label_len == 0)
                                return *ret_why = "an empty label", -EINVAL;
                        if (buf[i - 1] == '-')
                                return *ret_why = "a label ending with '-'", -EINVAL;
                        labels++;
                        if (i == len && label_digits)
                                return *ret_why = "an all-numeric last label", -EINVAL;
                        label_len = 0;
                        label_digits = true;
                        if (i < len)
                                buf[i] = '.';
                        continue;
                }
                if (c >= 0x80)
                        return *ret_why = "non-ASCII characters (write an IDN in its punycode form, xn--…)",
                               -EINVAL;
                if (c == '*')
                        return *ret_why = "'*' where only a leading \"*.\" may stand", -EINVAL;
                if (c == ':' || c == '/')
                        return *ret_why = "a port, protocol or path (entries are names or CIDRs only)",
                               -EINVAL;
                if (!isalnum(c) && c != '-')
                        return *ret_why = "a character other than a-z, 0-9, '-' and '.'", -EINVAL;
                if (c == '-' && label_len == 0)
                        return *ret_why = "a label starting with '-'", -EINVAL;
                if (++label_len > EGRESS_LABEL_MAX)
                        return *ret_why = "a label longer than 63 characters", -EINVAL;
                if (!isdigit(c))
                        label_digits = false;
                buf[i] = (char) tolower(c);
        }
        if (labels < 2)
                return *ret_why = "a single label (a name needs at least two, like example.org)", -EINVAL;
        buf[len] = 0;
        return 0;
}

int egress_name_normalize(const char *name, char buf[static EGRESS_NAME_MAX + 1]) {
        const char *why;

        if (!name)
                return -EINVAL;
        return name_check(name, buf, &why);
}

/* --- CIDRs ------------------------------------------------------------------------------------------ */

static bool looks_like_address(const char *s) {
        /* A name has neither ':' nor '/', and one of digits and dots only is refused as a name anyway (its
         * last label is all digits): such text is read as an address or CIDR, or refused as one. */
        return strchr(s, ':') || strchr(s, '/') || strspn(s, "0123456789.") == strlen(s);
}

/* The netmask's byte i for a prefix of prefixlen bits. */
static uint8_t prefix_mask(unsigned prefixlen, size_t i) {
        unsigned first = (unsigned) i * 8;

        if (prefixlen >= first + 8)
                return 0xff;
        if (prefixlen <= first)
                return 0;
        return (uint8_t) (0xff << (8 - (prefixlen - first)));
}

int egress_cidr_parse(const char *s, EgressCidr *ret, char **ret_error) {
        char addr[INET6_ADDRSTRLEN + 1], q[72];
        const char *slash;
        EgressCidr c = {};
        size_t alen;

        if (!s)
                return -EINVAL;
        slash = strchr(s, '/');
        alen = slash ? (size_t) (slash - s) : strlen(s);
        if (alen == 0 || alen >= sizeof(addr))
                return fail(ret_error, "Invalid egress entry '%s': not an IPv4 or IPv6 address or CIDR.",
                            quotable(s, q));
        memcpy(addr, s, alen);
        addr[alen] = 0;
        if (inet_pton(AF_INET, addr, c.addr) == 1)
                c.family = AF_INET;
        else if (inet_pton(AF_INET6, addr, c.addr) == 1)
                c.family = AF_INET6;
        else
                return fail(ret_error, "Invalid egress entry '%s': not an IPv4 or IPv6 address or CIDR.",
                            quotable(s, q));

        unsigned max = c.family == AF_INET ? 32 : 128;
        c.prefixlen = max;
        if (slash) {
                uint64_t v;

                /* Plain decimal only: no sign, no spaces, no hex, no leading zeros beyond "0". */
                if (parse_decimal(slash + 1, &v) < 0 || v > max || (slash[1] == '0' && slash[2]))
                        return fail(ret_error, "Invalid egress entry '%s': the prefix length must be 0-%u.",
                                    quotable(s, q), max);
                c.prefixlen = (unsigned) v;
        }
        /* Host bits set: the entry says more than it means, and is probably a typo. */
        EgressCidr masked = c;
        size_t bytes = c.family == AF_INET ? 4 : 16;
        for (size_t i = 0; i < bytes; i++)
                masked.addr[i] &= prefix_mask(c.prefixlen, i);
        if (memcmp(masked.addr, c.addr, bytes) != 0) {
                char canon[INET6_ADDRSTRLEN];

                inet_ntop(c.family, masked.addr, canon, sizeof(canon));
                return fail(ret_error, "Invalid egress entry '%s': host bits are set (did you mean %s/%u?).",
                            quotable(s, q), canon, c.prefixlen);
        }
        *ret = c;
        return 0;
}

bool egress_cidr_contains(const EgressCidr *cidr, int family, const void *addr) {
        const uint8_t *a = addr;

        if (!cidr || !a || cidr->family != family)
                return false;
        for (size_t i = 0; i < (family == AF_INET ? 4u : 16u); i++)
                if ((a[i] & prefix_mask(cidr->prefixlen, i)) !=
                    (cidr->addr[i] & prefix_mask(cidr->prefixlen, i)))
                        return false;
        return true;
}

/* --- Entries ---------------------------------------------------------------------------------------- */

int egress_entry_parse(const char *s, EgressEntry *ret, char **ret_error) {
        EgressEntry e = {};
        const char *why;
        char q[72];

        if (!s)
                return -EINVAL;
        if (!*s)
                return fail(ret_error,
                            "Invalid egress entry '': an entry is a name, \"*.\" and a name, or a CIDR.");
        if (strlen(s) > EGRESS_ENTRY_MAX)
                return fail(ret_error, "Invalid egress entry '%s': longer than %d characters.",
                            quotable(s, q), EGRESS_ENTRY_MAX);
        for (const char *p = s; *p; p++)
                if (isspace((unsigned char) *p))
                        return fail(ret_error, "Invalid egress entry '%s': it contains whitespace.",
                                    quotable(s, q));

        if (looks_like_address(s)) {
                /* A name contains neither ':' nor '/', and all-digit-and-dot text is no valid name either:
                 * this is an address or CIDR, or something with a port, protocol or path, refused as such.
                 */
                char addr[INET6_ADDRSTRLEN + 1];
                uint8_t ignored[16];
                size_t alen = strcspn(s, "/");

                if (alen < sizeof(addr)) {
                        memcpy(addr, s, alen);
                        addr[alen] = 0;
                }
                if ((strchr(s, ':') || strchr(s, '/')) &&
                    (alen >= sizeof(addr) ||
                     (inet_pton(AF_INET, addr, ignored) != 1 && inet_pton(AF_INET6, addr, ignored) != 1)))
                        return fail(
                                ret_error,
                                "Invalid egress entry '%s': not a CIDR; ports, protocols and paths are not "
                                "supported (give a name, \"*.\" and a name, or a CIDR).",
                                quotable(s, q));
                e.kind = EGRESS_ENTRY_CIDR;
                int r = egress_cidr_parse(s, &e.cidr, ret_error);
                if (r < 0)
                        return r;
                *ret = e;
                return 0;
        }

        if (s[0] == '*') {
                if (s[1] != '.')
                        return fail(
                                ret_error,
                                "Invalid egress entry '%s': a wildcard must be \"*.\" followed by a name, "
                                "like *.example.org.",
                                quotable(s, q));
                if (name_check(s + 2, e.name, &why) < 0)
                        return fail(ret_error, "Invalid egress entry '%s': %s.", quotable(s, q), why);
                e.kind = EGRESS_ENTRY_WILDCARD;
                *ret = e;
                return 0;
        }

        if (name_check(s, e.name, &why) < 0)
                return fail(ret_error, "Invalid egress entry '%s': %s.", quotable(s, q), why);
        e.kind = EGRESS_ENTRY_NAME;
        *ret = e;
        return 0;
}

const char *egress_entry_to_string(const EgressEntry *e, char buf[static EGRESS_ENTRY_TEXT_MAX]) {
        switch (e->kind) {
        case EGRESS_ENTRY_NAME:
                snprintf(buf, EGRESS_ENTRY_TEXT_MAX, "%s", e->name);
                break;
        case EGRESS_ENTRY_WILDCARD:
                snprintf(buf, EGRESS_ENTRY_TEXT_MAX, "*.%s", e->name);
                break;
        case EGRESS_ENTRY_CIDR: {
                char a[INET6_ADDRSTRLEN];

                if (!inet_ntop(e->cidr.family, e->cidr.addr, a, sizeof(a)))
                        a[0] = 0;
                snprintf(buf, EGRESS_ENTRY_TEXT_MAX, "%s/%u", a, e->cidr.prefixlen);
                break;
        }
        default:
                buf[0] = 0;
        }
        return buf;
}

/* --- Policies --------------------------------------------------------------------------------------- */

int egress_policy_add(EgressPolicy *p, bool allow, const char *entry, char **ret_error) {
        EgressEntry e;
        int r;

        r = egress_entry_parse(entry, &e, ret_error);
        if (r < 0)
                return r;
        if (p->n_allow + p->n_deny >= EGRESS_POLICY_ENTRIES_MAX)
                return fail(ret_error, "Too many egress entries: at most %d in allow and deny together.",
                            EGRESS_POLICY_ENTRIES_MAX);

        EgressEntry **list = allow ? &p->allow : &p->deny;
        size_t *n = allow ? &p->n_allow : &p->n_deny;
        EgressEntry *l = realloc(*list, (*n + 1) * sizeof(EgressEntry));
        if (!l)
                return -ENOMEM;
        l[(*n)++] = e;
        *list = l;
        return 0;
}

int egress_policy_copy(const EgressPolicy *src, EgressPolicy *ret) {
        EgressPolicy c = {.default_action = src->default_action};

        if (src->n_allow > 0) {
                c.allow = malloc(src->n_allow * sizeof(EgressEntry));
                if (!c.allow)
                        return -ENOMEM;
                memcpy(c.allow, src->allow, src->n_allow * sizeof(EgressEntry));
                c.n_allow = src->n_allow;
        }
        if (src->n_deny > 0) {
                c.deny = malloc(src->n_deny * sizeof(EgressEntry));
                if (!c.deny) {
                        egress_policy_done(&c);
                        return -ENOMEM;
                }
                memcpy(c.deny, src->deny, src->n_deny * sizeof(EgressEntry));
                c.n_deny = src->n_deny;
        }
        *ret = c;
        return 0;
}

typedef struct BusReader {
        EgressPolicy policy;
        bool seen_default, seen_allow, seen_deny;
} BusReader;

static int bus_read_list(sd_bus_message *msg, BusReader *rd, bool allow, sd_bus_error *error) {
        _cleanup_free_ char *why = NULL;
        const char *s;
        int r;

        r = sd_bus_message_enter_container(msg, 'v', "as");
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Egress policy key '%s' must be of type 'as'.",
                                         allow ? "allow" : "deny");
        r = sd_bus_message_enter_container(msg, 'a', "s");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(msg, "s", &s)) > 0) {
                r = egress_policy_add(&rd->policy, allow, s, &why);
                if (r == -EINVAL)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "%s", why);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(msg);
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(msg);
}

static int bus_entry(const char *key, sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        BusReader *rd = userdata;
        int r;

        if (streq(key, "default")) {
                const char *s;

                if (rd->seen_default)
                        return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS,
                                                "Egress policy key 'default' given twice.");
                rd->seen_default = true;
                r = sd_bus_message_read(msg, "v", "s", &s);
                if (r < 0)
                        return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS,
                                                "Egress policy key 'default' must be of type 's'.");
                EgressDefault d = egress_default_from_string(s);
                if (d < 0) {
                        char q[72];
                        return sd_bus_error_setf(
                                error, SD_BUS_ERROR_INVALID_ARGS,
                                "Egress policy 'default' must be \"deny\" or \"allow\", not '%s'.",
                                quotable(s, q));
                }
                rd->policy.default_action = d;
                return 0;
        }
        if (streq(key, "allow") || streq(key, "deny")) {
                bool allow = streq(key, "allow");
                bool *seen = allow ? &rd->seen_allow : &rd->seen_deny;

                if (*seen)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "Egress policy key '%s' given twice.", key);
                *seen = true;
                return bus_read_list(msg, rd, allow, error);
        }
        char q[72];
        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                 "Unknown egress policy key '%s' (expected default, allow, deny).",
                                 quotable(key, q));
}

static void bus_reader_done(BusReader *rd) {
        egress_policy_done(&rd->policy);
}

int egress_policy_from_bus(sd_bus_message *msg, EgressPolicy *ret, sd_bus_error *error) {
        _cleanup_(bus_reader_done) BusReader rd = {.policy = EGRESS_POLICY_INIT};
        int r;

        r = bus_foreach_sv(msg, bus_entry, &rd, error);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                /* What the entries refused says why; anything else the message's shape was not ours. */
                if (!sd_bus_error_is_set(error))
                        return sd_bus_error_set(
                                error, SD_BUS_ERROR_INVALID_ARGS,
                                "The egress policy must be an a{sv} of default s, allow as, deny as.");
                return -EINVAL;
        }
        *ret = rd.policy;
        rd.policy = (EgressPolicy) EGRESS_POLICY_INIT;
        return 0;
}

static int append_list(sd_bus_message *msg, const char *key, const EgressEntry *l, size_t n) {
        char buf[EGRESS_ENTRY_TEXT_MAX];
        int r;

        r = sd_bus_message_open_container(msg, 'e', "sv");
        if (r < 0)
                return r;
        r = sd_bus_message_append(msg, "s", key);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(msg, 'v', "as");
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(msg, 'a', "s");
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                r = sd_bus_message_append(msg, "s", egress_entry_to_string(&l[i], buf));
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(msg);
        if (r < 0)
                return r;
        r = sd_bus_message_close_container(msg);
        if (r < 0)
                return r;
        return sd_bus_message_close_container(msg);
}

int egress_policy_append_bus(sd_bus_message *msg, const EgressPolicy *p) {
        int r;

        r = sd_bus_message_open_container(msg, 'a', "{sv}");
        if (r < 0)
                return r;
        r = sd_bus_message_append(msg, "{sv}", "default", "s", egress_default_to_string(p->default_action));
        if (r < 0)
                return r;
        r = append_list(msg, "allow", p->allow, p->n_allow);
        if (r < 0)
                return r;
        r = append_list(msg, "deny", p->deny, p->n_deny);
        if (r < 0)
                return r;
        return sd_bus_message_close_container(msg);
}

int egress_policy_ini_assign(EgressPolicy *p, const char *key, const char *value, char **ret_error) {
        _cleanup_(egress_policy_donep) EgressPolicy c = EGRESS_POLICY_INIT;
        bool allow;
        char q[72];
        int r;

        if (streq(key, "Egress")) {
                EgressDefault d = egress_default_from_string(value);
                if (d < 0)
                        return fail(ret_error, "Invalid Egress=%s: expected deny or allow.",
                                    quotable(value, q));
                p->default_action = d;
                return 0;
        }
        if (streq(key, "EgressAllow"))
                allow = true;
        else if (streq(key, "EgressDeny"))
                allow = false;
        else
                return -ENOENT;

        /* All or nothing: the entries go to a copy, which replaces p only if every one of them is good. */
        r = egress_policy_copy(p, &c);
        if (r < 0)
                return r;
        for (const char *s = value; *s;) {
                char entry[EGRESS_ENTRY_MAX + 2];
                size_t n;

                s += strspn(s, " \t");
                n = strcspn(s, " \t");
                if (n == 0)
                        break;
                if (n > EGRESS_ENTRY_MAX)
                        return fail(ret_error, "Invalid %s=: an entry longer than %d characters.", key,
                                    EGRESS_ENTRY_MAX);
                memcpy(entry, s, n);
                entry[n] = 0;
                s += n;
                _cleanup_free_ char *why = NULL;
                r = egress_policy_add(&c, allow, entry, &why);
                if (r == -EINVAL)
                        return fail(ret_error, "Invalid %s=: %s", key, why);
                if (r < 0)
                        return r;
        }
        egress_policy_done(p);
        *p = c;
        c = (EgressPolicy) EGRESS_POLICY_INIT;
        return 0;
}

/* --- Matching --------------------------------------------------------------------------------------- */

static bool entry_matches_name(const EgressEntry *e, const char *name, size_t len) {
        if (e->kind == EGRESS_ENTRY_NAME)
                return streq(e->name, name);
        if (e->kind == EGRESS_ENTRY_WILDCARD) {
                size_t sl = strlen(e->name);
                /* One or more whole labels before the suffix: "a.b.example.org" matches "*.example.org";
                 * "example.org" and "badexample.org" do not. */
                return len > sl + 1 && name[len - sl - 1] == '.' && streq(name + len - sl, e->name);
        }
        return false;
}

int egress_policy_name_allowed(const EgressPolicy *p, const char *name, const EgressEntry **ret_entry) {
        char n[EGRESS_NAME_MAX + 1];
        size_t len;

        if (ret_entry)
                *ret_entry = NULL;
        if (egress_name_normalize(name, n) < 0)
                return -EINVAL;
        len = strlen(n);
        for (size_t i = 0; i < p->n_deny; i++)
                if (entry_matches_name(&p->deny[i], n, len)) {
                        if (ret_entry)
                                *ret_entry = &p->deny[i];
                        return 0;
                }
        for (size_t i = 0; i < p->n_allow; i++)
                if (entry_matches_name(&p->allow[i], n, len)) {
                        if (ret_entry)
                                *ret_entry = &p->allow[i];
                        return 1;
                }
        return p->default_action == EGRESS_DEFAULT_ALLOW;
}

bool egress_address_is_fixed_private(int family, const void *addr) {
        const char *const *list = family == AF_INET ? egress_fixed_private4 : egress_fixed_private6;
        size_t n = family == AF_INET ? egress_fixed_private4_count : egress_fixed_private6_count;

        if (family != AF_INET && family != AF_INET6)
                return false;
        for (size_t i = 0; i < n; i++) {
                EgressCidr c;

                if (egress_cidr_parse(list[i], &c, NULL) == 0 && egress_cidr_contains(&c, family, addr))
                        return true;
        }
        return false;
}

static bool list_contains_address(const EgressEntry *l, size_t n, int family, const void *addr) {
        for (size_t i = 0; i < n; i++)
                if (l[i].kind == EGRESS_ENTRY_CIDR && egress_cidr_contains(&l[i].cidr, family, addr))
                        return true;
        return false;
}

EgressAddressVerdict egress_policy_address_verdict(const EgressPolicy *p, const EgressCidr *pool, int family,
                                                   const void *addr) {
        if (!p || !addr || (family != AF_INET && family != AF_INET6))
                return _EGRESS_ADDRESS_VERDICT_INVALID;
        if (list_contains_address(p->deny, p->n_deny, family, addr))
                return EGRESS_ADDRESS_DENIED;
        if (pool && egress_cidr_contains(pool, family, addr))
                return EGRESS_ADDRESS_DENIED;
        if (list_contains_address(p->allow, p->n_allow, family, addr))
                return EGRESS_ADDRESS_ALLOWED;
        if (egress_address_is_fixed_private(family, addr))
                return EGRESS_ADDRESS_DENIED;
        return p->default_action == EGRESS_DEFAULT_ALLOW ? EGRESS_ADDRESS_ALLOWED
                                                         : EGRESS_ADDRESS_IF_RESOLVED;
}
