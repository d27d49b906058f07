/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd's nftables table for egress sandboxes (issue 23): rendered from its state, applied atomically. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <nftables/libnftables.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "egress-nft.h"
#include "macro.h"
#include "sandbox-id.h"

#define T EGRESS_NFT_FAMILY " " EGRESS_NFT_TABLE

/* The table's rule set, per sandbox chain "out_<id>" (from its interface) in this order, first match wins:
 *   established/related: allowed;  invalid, IPv6, or a source other than its address: denied;
 *   <id>_deny4 (deny CIDRs): denied;  pool4 (the other sandboxes): denied;
 *   <id>_allow4 (allow CIDRs): allowed;  fixed4 (private, loopback, link-local, multicast…): denied;
 *   <id>_dyn4 (what the resolver answered for allowed names, with timeouts): allowed;
 *   the policy's default.
 * This is egress_policy_address_verdict()'s order. Traffic to the host itself from a sandbox interface is
 * the input chain's ("host_<id>"): its resolver (port 53 on its host-side address) only. New connections
 * into a sandbox are dropped ("in_<id>": established/related only). Sandbox traffic leaving is masqueraded.
 */

static bool ifname_valid(const char *s) {
        size_t n;

        if (!s || strncmp(s, EGRESS_IFNAME_PREFIX, strlen(EGRESS_IFNAME_PREFIX)) != 0)
                return false;
        n = strlen(s);
        if (n <= strlen(EGRESS_IFNAME_PREFIX) || n >= IFNAMSIZ)
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
                        return false;
        return true;
}

int egress_ifname_from_id(const char *id, char ret[static IFNAMSIZ]) {
        if (!id || !sandbox_id_is_valid(id))
                return -EINVAL;
        snprintf(ret, IFNAMSIZ, EGRESS_IFNAME_PREFIX "%s", id + strlen(SANDBOX_ID_PREFIX));
        return 0;
}

static bool sandbox_valid(const EgressNftSandbox *s) {
        return s && s->id && sandbox_id_is_valid(s->id) && ifname_valid(s->ifname) && s->policy;
}

static const char *ip4(struct in_addr a, char buf[static INET_ADDRSTRLEN]) {
        return inet_ntop(AF_INET, &a, buf, INET_ADDRSTRLEN) ?: "0.0.0.0";
}

/* An "add element" line for the IPv4 CIDRs of a list, if it has any. */
static void put_set_elements(FILE *f, const char *id, const char *suffix, const EgressEntry *l, size_t n) {
        char buf[EGRESS_ENTRY_TEXT_MAX];
        bool first = true;

        for (size_t i = 0; i < n; i++) {
                if (l[i].kind != EGRESS_ENTRY_CIDR || l[i].cidr.family != AF_INET)
                        continue;
                if (first)
                        fprintf(f, "add element " T " %s_%s { ", id, suffix);
                fprintf(f, "%s%s", first ? "" : ", ", egress_entry_to_string(&l[i], buf));
                first = false;
        }
        if (!first)
                fputs(" }\n", f);
}

static void put_sandbox(FILE *f, const EgressNftSandbox *s) {
        const char *id = s->id;
        const EgressPolicy *p = s->policy;
        char a[INET_ADDRSTRLEN], h[INET_ADDRSTRLEN];

        fprintf(f, "add counter " T " %s_allowed\n", id);
        fprintf(f, "add counter " T " %s_denied\n", id);
        /* Interval sets for the policy's CIDRs (auto-merge: overlapping entries are fine), refilled. */
        fprintf(f, "add set " T " %s_allow4 { type ipv4_addr; flags interval; auto-merge; }\n", id);
        fprintf(f, "flush set " T " %s_allow4\n", id);
        put_set_elements(f, id, "allow4", p->allow, p->n_allow);
        fprintf(f, "add set " T " %s_deny4 { type ipv4_addr; flags interval; auto-merge; }\n", id);
        fprintf(f, "flush set " T " %s_deny4\n", id);
        put_set_elements(f, id, "deny4", p->deny, p->n_deny);
        /* The resolver's additions, each with its own timeout: kept when the pool hands a sandbox out with
         * another policy, emptied when SetNetworkPolicy changes it. */
        fprintf(f, "add set " T " %s_dyn4 { type ipv4_addr; flags timeout; }\n", id);
        if (s->flush_dynamic)
                fprintf(f, "flush set " T " %s_dyn4\n", id);

        /* Where the policy's denials go: counted, logged (a few a second) and dropped. Always there, so
         * that removing a sandbox does not depend on how it was rendered. */
        fprintf(f, "add chain " T " deny_%s\n", id);
        fprintf(f, "flush chain " T " deny_%s\n", id);
        if (s->nflog_group > 0)
                fprintf(f,
                        "add rule " T " deny_%s limit rate %d/second burst %d packets log prefix \"%s\" group %u\n",
                        id, EGRESS_NFT_LOG_RATE, EGRESS_NFT_LOG_RATE, id, (unsigned) s->nflog_group);
        fprintf(f, "add rule " T " deny_%s counter name \"%s_denied\" drop\n", id, id);

        fprintf(f, "add chain " T " out_%s\n", id);
        fprintf(f, "flush chain " T " out_%s\n", id);
#define OUT(...)                                          \
        do {                                              \
                fprintf(f, "add rule " T " out_%s ", id); \
                fprintf(f, __VA_ARGS__);                  \
                fputc('\n', f);                           \
        } while (0)
        /* EgressRateMax=: before anything is accepted, open connections included. */
        if (s->rate_max > 0)
                OUT("limit rate over %" PRIu64 " bytes/second counter name \"%s_denied\" drop", s->rate_max,
                    id);
        OUT("ct state established,related counter name \"%s_allowed\" accept", id);
        OUT("ct state invalid counter name \"%s_denied\" drop", id);
        OUT("meta nfproto != ipv4 counter name \"%s_denied\" drop", id);
        OUT("ip saddr != %s counter name \"%s_denied\" drop", ip4(s->address, a), id);
        if (s->nflog_group > 0) {
                /* The policy's own denials, which the audit log names (the ones above are not what an
                 * agent dialled: malformed, spoofed or over the rate). */
                OUT("ip daddr @%s_deny4 goto deny_%s", id, id);
                OUT("ip daddr @pool4 goto deny_%s", id);
                OUT("ip daddr @%s_allow4 counter name \"%s_allowed\" accept", id, id);
                OUT("ip daddr @fixed4 goto deny_%s", id);
                OUT("ip daddr @%s_dyn4 counter name \"%s_allowed\" accept", id, id);
                if (p->default_action == EGRESS_DEFAULT_ALLOW)
                        OUT("counter name \"%s_allowed\" accept", id);
                OUT("goto deny_%s", id);
        } else {
                OUT("ip daddr @%s_deny4 counter name \"%s_denied\" drop", id, id);
                OUT("ip daddr @pool4 counter name \"%s_denied\" drop", id);
                OUT("ip daddr @%s_allow4 counter name \"%s_allowed\" accept", id, id);
                OUT("ip daddr @fixed4 counter name \"%s_denied\" drop", id);
                OUT("ip daddr @%s_dyn4 counter name \"%s_allowed\" accept", id, id);
                if (p->default_action == EGRESS_DEFAULT_ALLOW)
                        OUT("counter name \"%s_allowed\" accept", id);
                OUT("counter name \"%s_denied\" drop", id);
        }
#undef OUT

        fprintf(f, "add chain " T " in_%s\n", id);
        fprintf(f, "flush chain " T " in_%s\n", id);
        fprintf(f, "add rule " T " in_%s ct state established,related counter name \"%s_allowed\" accept\n",
                id, id);
        fprintf(f, "add rule " T " in_%s counter name \"%s_denied\" drop\n", id, id);

        /* To the host itself: its resolver on its host-side address, nothing else. */
        fprintf(f, "add chain " T " host_%s\n", id);
        fprintf(f, "flush chain " T " host_%s\n", id);
        fprintf(f, "add rule " T " host_%s ip daddr %s meta l4proto { tcp, udp } th dport 53 accept\n", id,
                ip4(s->host_address, h));
        fprintf(f, "add rule " T " host_%s ct state established,related accept\n", id);
        if (s->nflog_group > 0)
                fprintf(f, "add rule " T " host_%s goto deny_%s\n", id, id);
        else
                fprintf(f, "add rule " T " host_%s counter name \"%s_denied\" drop\n", id, id);

        fprintf(f, "add element " T " out_dispatch { \"%s\" : jump out_%s }\n", s->ifname, id);
        fprintf(f, "add element " T " in_dispatch { \"%s\" : jump in_%s }\n", s->ifname, id);
        fprintf(f, "add element " T " host_dispatch { \"%s\" : jump host_%s }\n", s->ifname, id);
}

static int finish(FILE *f, char **buf, char **ret_text) {
        bool bad = ferror(f);

        if (fclose(f) != 0 || bad) {
                free(*buf);
                return -ENOMEM;
        }
        *ret_text = *buf;
        return 0;
}

int egress_nft_render_table(const EgressCidr *pool, const EgressNftSandbox *sandboxes, size_t n,
                            char **ret_text) {
        char *buf = NULL, cidr[EGRESS_ENTRY_TEXT_MAX];
        size_t size = 0;
        FILE *f;

        if (pool && pool->family != AF_INET)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (!sandbox_valid(&sandboxes[i]))
                        return -EINVAL;
        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;

        fputs("add table " T "\n"
              "delete table " T "\n"
              "add table " T "\n",
              f);
        fputs("add set " T " fixed4 { type ipv4_addr; flags interval; auto-merge; elements = { ", f);
        for (size_t i = 0; i < egress_fixed_private4_count; i++)
                fprintf(f, "%s%s", i ? ", " : "", egress_fixed_private4[i]);
        fputs(" }; }\n", f);
        fputs("add set " T " pool4 { type ipv4_addr; flags interval; }\n", f);
        if (pool) {
                EgressEntry e = {.kind = EGRESS_ENTRY_CIDR, .cidr = *pool};
                fprintf(f, "add element " T " pool4 { %s }\n", egress_entry_to_string(&e, cidr));
        }
        fputs("add map " T " out_dispatch { type ifname : verdict; }\n"
              "add map " T " in_dispatch { type ifname : verdict; }\n"
              "add map " T " host_dispatch { type ifname : verdict; }\n",
              f);
        fputs("add chain " T " forward { type filter hook forward priority filter; policy accept; }\n"
              "add rule " T " forward iifname vmap @out_dispatch\n"
              "add rule " T " forward iifname \"" EGRESS_IFNAME_PREFIX "*\" drop\n"
              "add rule " T " forward oifname vmap @in_dispatch\n"
              "add rule " T " forward oifname \"" EGRESS_IFNAME_PREFIX "*\" drop\n",
              f);
        fputs("add chain " T " input { type filter hook input priority filter; policy accept; }\n"
              "add rule " T " input iifname vmap @host_dispatch\n"
              "add rule " T " input iifname \"" EGRESS_IFNAME_PREFIX "*\" drop\n",
              f);
        fputs("add chain " T " postrouting { type nat hook postrouting priority srcnat; policy accept; }\n"
              "add rule " T " postrouting iifname \"" EGRESS_IFNAME_PREFIX
              "*\" oifname != \"" EGRESS_IFNAME_PREFIX "*\" masquerade\n",
              f);
        for (size_t i = 0; i < n; i++)
                put_sandbox(f, &sandboxes[i]);
        return finish(f, &buf, ret_text);
}

int egress_nft_render_sandbox(const EgressNftSandbox *s, char **ret_text) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        if (!sandbox_valid(s))
                return -EINVAL;
        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        put_sandbox(f, s);
        return finish(f, &buf, ret_text);
}

int egress_nft_render_remove(const EgressNftSandbox *s, char **ret_text) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        if (!s || !s->id || !sandbox_id_is_valid(s->id) || !ifname_valid(s->ifname))
                return -EINVAL;
        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        /* The references first (dispatch maps), then what they referred to. */
        fprintf(f, "delete element " T " out_dispatch { \"%s\" }\n", s->ifname);
        fprintf(f, "delete element " T " in_dispatch { \"%s\" }\n", s->ifname);
        fprintf(f, "delete element " T " host_dispatch { \"%s\" }\n", s->ifname);
        fprintf(f, "delete chain " T " out_%s\n", s->id);
        fprintf(f, "delete chain " T " in_%s\n", s->id);
        fprintf(f, "delete chain " T " host_%s\n", s->id);
        fprintf(f, "delete chain " T " deny_%s\n", s->id);
        fprintf(f, "delete set " T " %s_allow4\n", s->id);
        fprintf(f, "delete set " T " %s_deny4\n", s->id);
        fprintf(f, "delete set " T " %s_dyn4\n", s->id);
        fprintf(f, "delete counter " T " %s_allowed\n", s->id);
        fprintf(f, "delete counter " T " %s_denied\n", s->id);
        return finish(f, &buf, ret_text);
}

int egress_nft_render_allow_address(const char *id, int family, const void *addr, uint64_t timeout_usec,
                                    char **ret_text) {
        char a[INET_ADDRSTRLEN];
        uint64_t sec;
        char *text;

        if (!id || !sandbox_id_is_valid(id) || !addr)
                return -EINVAL;
        if (family == AF_INET6)
                return -EAFNOSUPPORT;
        if (family != AF_INET)
                return -EINVAL;
        if (!inet_ntop(AF_INET, addr, a, sizeof(a)))
                return -EINVAL;
        sec = timeout_usec / USEC_PER_SEC + (timeout_usec % USEC_PER_SEC != 0);
        sec = MAX(sec, UINT64_C(1));
        /* "add" leaves an existing element's timeout alone, so: make sure it exists, drop it, add it with
         * the new timeout, all in one transaction. */
        if (asprintf(&text,
                     "add element " T " %s_dyn4 { %s }\n"
                     "delete element " T " %s_dyn4 { %s }\n"
                     "add element " T " %s_dyn4 { %s timeout %" PRIu64 "s }\n",
                     id, a, id, a, id, a, sec) < 0)
                return -ENOMEM;
        *ret_text = text;
        return 0;
}

/* --- Running ---------------------------------------------------------------------------------------- */

struct EgressNft {
        struct nft_ctx *ctx;
};

int egress_nft_new(EgressNft **ret) {
        EgressNft *n = calloc(1, sizeof(EgressNft));

        if (!n)
                return -ENOMEM;
        n->ctx = nft_ctx_new(NFT_CTX_DEFAULT);
        if (!n->ctx || nft_ctx_buffer_output(n->ctx) < 0 || nft_ctx_buffer_error(n->ctx) < 0) {
                egress_nft_free(n);
                return -ENOMEM;
        }
        *ret = n;
        return 0;
}

EgressNft *egress_nft_free(EgressNft *n) {
        if (!n)
                return NULL;
        if (n->ctx)
                nft_ctx_free(n->ctx);
        free(n);
        return NULL;
}

static int run(EgressNft *n, const char *text, char **ret_error) {
        const char *err;
        int r;

        if (!n || !text)
                return -EINVAL;
        r = nft_run_cmd_from_buffer(n->ctx, text);
        err = nft_ctx_get_error_buffer(n->ctx);
        if (r == 0)
                return 0;
        if (ret_error) {
                free(*ret_error);
                *ret_error = strdup(err && *err ? err : "nft refused the commands");
        }
        if (err && strstr(err, "Operation not permitted"))
                return -EPERM;
        if (err && strstr(err, "No such file or directory"))
                return -ENOENT;
        return -EIO;
}

int egress_nft_run(EgressNft *n, const char *text, char **ret_error) {
        int r = run(n, text, ret_error);
        return r == -ENOENT ? -EIO : r;
}

static int read_counter(EgressNft *n, const char *id, const char *which, uint64_t *ret_packets,
                        uint64_t *ret_bytes) {
        _cleanup_free_ char *cmd = NULL;
        json_object *root, *list, *c = NULL, *v;
        int r;

        if (asprintf(&cmd, "list counter " T " %s_%s", id, which) < 0)
                return -ENOMEM;
        nft_ctx_output_set_flags(n->ctx, NFT_CTX_OUTPUT_JSON);
        r = run(n, cmd, NULL);
        nft_ctx_output_set_flags(n->ctx, 0);
        if (r < 0)
                return r;
        root = json_tokener_parse(nft_ctx_get_output_buffer(n->ctx));
        if (!root)
                return -EBADMSG;
        /* {"nftables": [{"metainfo": …}, {"counter": {…, "packets": N, "bytes": N}}]} */
        if (json_object_object_get_ex(root, "nftables", &list) && json_object_is_type(list, json_type_array))
                for (size_t i = 0; i < json_object_array_length(list) && !c; i++)
                        (void) json_object_object_get_ex(json_object_array_get_idx(list, i), "counter", &c);
        r = -EBADMSG;
        if (c && json_object_object_get_ex(c, "packets", &v) && json_object_is_type(v, json_type_int)) {
                *ret_packets = (uint64_t) json_object_get_int64(v);
                if (json_object_object_get_ex(c, "bytes", &v) && json_object_is_type(v, json_type_int)) {
                        *ret_bytes = (uint64_t) json_object_get_int64(v);
                        r = 0;
                }
        }
        json_object_put(root);
        return r;
}

int egress_nft_counters(EgressNft *n, const char *id, EgressCounters *ret) {
        EgressCounters c = {};
        int r;

        if (!n || !id || !sandbox_id_is_valid(id))
                return -EINVAL;
        r = read_counter(n, id, "allowed", &c.allowed_packets, &c.allowed_bytes);
        if (r < 0)
                return r;
        r = read_counter(n, id, "denied", &c.denied_packets, &c.denied_bytes);
        if (r < 0)
                return r;
        *ret = c;
        return 0;
}

int egress_nft_forward_drop_elsewhere(EgressNft *n, char **ret_what) {
        json_object *root, *list, *c, *v;
        int r, found = 0;

        if (!n || !ret_what)
                return -EINVAL;
        nft_ctx_output_set_flags(n->ctx, NFT_CTX_OUTPUT_JSON);
        r = run(n, "list chains", NULL);
        nft_ctx_output_set_flags(n->ctx, 0);
        if (r < 0)
                return r == -ENOENT ? -EIO : r;
        root = json_tokener_parse(nft_ctx_get_output_buffer(n->ctx));
        if (!root)
                return -EBADMSG;
        /* {"nftables": [{"metainfo": …}, {"chain": {"family", "table", "name", "hook", "policy", …}}, …]} */
        if (json_object_object_get_ex(root, "nftables", &list) && json_object_is_type(list, json_type_array))
                for (size_t i = 0; i < json_object_array_length(list) && !found; i++) {
                        const char *family, *table, *name;
                        if (!json_object_object_get_ex(json_object_array_get_idx(list, i), "chain", &c) ||
                            !json_object_object_get_ex(c, "hook", &v) ||
                            !streq_ptr(json_object_get_string(v), "forward") ||
                            !json_object_object_get_ex(c, "policy", &v) ||
                            !streq_ptr(json_object_get_string(v), "drop"))
                                continue;
                        family = json_object_object_get_ex(c, "family", &v) ? json_object_get_string(v) : "?";
                        table = json_object_object_get_ex(c, "table", &v) ? json_object_get_string(v) : "?";
                        name = json_object_object_get_ex(c, "name", &v) ? json_object_get_string(v) : "?";
                        if (streq_ptr(family, EGRESS_NFT_FAMILY) && streq_ptr(table, EGRESS_NFT_TABLE))
                                continue;
                        if (asprintf(ret_what, "%s %s %s", family, table, name) < 0) {
                                json_object_put(root);
                                return -ENOMEM;
                        }
                        found = 1;
                }
        json_object_put(root);
        return found;
}
