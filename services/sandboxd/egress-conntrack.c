/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Cutting an egress sandbox's open connections when its policy narrows (issue 23): conntrack entries
 * deleted through libnetfilter_conntrack.
 *
 * The firewall accepts a sandbox's established connections before its policy rules (egress-nft.c): that is
 * what keeps the rules cheap, and what would keep a connection open after the policy stopped allowing its
 * destination. Deleting the connection's conntrack entry ends that: its next packet is seen as new (or
 * invalid, with nf_conntrack_tcp_loose=0) and is dropped by the policy, and the peer's packets find no
 * entry to be translated back through the masquerade. */
#include "egress-conntrack.h"

#include <errno.h>
#include <libnetfilter_conntrack/libnetfilter_conntrack.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "macro.h"

bool egress_conntrack_cuts(const EgressPolicy *policy, const EgressCidr *pool, struct in_addr host_address,
                           struct in_addr dst) {
        if (dst.s_addr == host_address.s_addr)
                return false;
        return egress_policy_address_verdict(policy, pool, AF_INET, &dst) != EGRESS_ADDRESS_ALLOWED;
}

typedef struct Collect {
        uint32_t source;
        bool (*cut)(struct in_addr dst, void *userdata);
        void *userdata;
        struct nf_conntrack **list;
        size_t n, allocated;
        int error;
} Collect;

static int on_entry(enum nf_conntrack_msg_type type, struct nf_conntrack *ct, void *userdata) {
        Collect *c = userdata;
        struct in_addr dst;

        if (nfct_get_attr_u8(ct, ATTR_L3PROTO) != AF_INET ||
            nfct_get_attr_u32(ct, ATTR_ORIG_IPV4_SRC) != c->source)
                return NFCT_CB_CONTINUE;
        dst.s_addr = nfct_get_attr_u32(ct, ATTR_ORIG_IPV4_DST);
        if (!c->cut(dst, c->userdata))
                return NFCT_CB_CONTINUE;
        if (c->n == c->allocated) {
                size_t k = MAX(c->allocated * 2, (size_t) 16);
                struct nf_conntrack **l = reallocarray(c->list, k, sizeof(*l));
                if (!l) {
                        c->error = -ENOMEM;
                        return NFCT_CB_STOP;
                }
                c->list = l;
                c->allocated = k;
        }
        c->list[c->n] = nfct_clone(ct);
        if (!c->list[c->n]) {
                c->error = -ENOMEM;
                return NFCT_CB_STOP;
        }
        c->n++;
        return NFCT_CB_CONTINUE;
}

int egress_conntrack_cut(struct in_addr source, bool (*cut)(struct in_addr dst, void *userdata),
                         void *userdata) {
        Collect c = {.source = source.s_addr, .cut = cut, .userdata = userdata};
        struct nfct_filter_dump *filter = NULL;
        struct nfct_handle *h;
        int r, n = 0;

        if (!cut)
                return -EINVAL;
        h = nfct_open(CONNTRACK, 0);
        if (!h)
                return errno > 0 ? -errno : -EIO;

        /* A handle cannot be asked anything from inside its own dump: collect first, delete after. */
        r = nfct_callback_register(h, NFCT_T_ALL, on_entry, &c);
        if (r < 0) {
                r = errno > 0 ? -errno : -EIO;
                goto out;
        }
        filter = nfct_filter_dump_create();
        if (!filter) {
                r = -ENOMEM;
                goto out;
        }
        nfct_filter_dump_set_attr_u8(filter, NFCT_FILTER_DUMP_L3NUM, AF_INET);
        r = nfct_query(h, NFCT_Q_DUMP_FILTER, filter);
        if (c.error < 0) {
                r = c.error;
                goto out;
        }
        if (r < 0) {
                r = errno > 0 ? -errno : -EIO;
                goto out;
        }
        nfct_callback_unregister(h);

        r = 0;
        for (size_t i = 0; i < c.n; i++) {
                if (nfct_query(h, NFCT_Q_DESTROY, c.list[i]) >= 0)
                        n++;
                else if (errno != ENOENT && r == 0)
                        r = errno > 0 ? -errno : -EIO; /* the others are still tried */
        }
out:
        for (size_t i = 0; i < c.n; i++)
                nfct_destroy(c.list[i]);
        free(c.list);
        if (filter)
                nfct_filter_dump_destroy(filter);
        nfct_close(h);
        return r < 0 ? r : n;
}
