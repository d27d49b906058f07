/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An egress sandbox's denials as audit rows (issue 23): one row each, summarised per second in a flood. */
#include <arpa/inet.h>
#include <errno.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress-denials.h"

static const char *const egress_denial_kind_table[_EGRESS_DENIAL_KIND_MAX] = {
        [EGRESS_DENIAL_NAME] = "name",
        [EGRESS_DENIAL_ADDRESS] = "address",
};

DEFINE_STRING_TABLE(egress_denial_kind, EgressDenialKind, _EGRESS_DENIAL_KIND_MAX);

struct EgressDenials {
        unsigned per_second;
        bool active;        /* second is the second of the last denial */
        uint64_t second;    /* now_usec / USEC_PER_SEC of the last denial */
        uint64_t in_second; /* denials in that second */
        /* What that second's summary holds so far (denials past per_second). */
        uint64_t over;
        EgressDenial examples[EGRESS_DENIALS_EXAMPLES];
        size_t n_examples;
        uint64_t total, summarised;
};

int egress_denial_make(EgressDenialKind kind, const char *target, uint16_t port, const char *protocol,
                       const char *reason, EgressDenial *ret) {
        EgressDenial d = {.kind = kind, .port = port};

        if (kind < 0 || kind >= _EGRESS_DENIAL_KIND_MAX || isempty(target) || isempty(protocol) || !ret)
                return -EINVAL;
        snprintf(d.target, sizeof(d.target), "%s", target);
        snprintf(d.protocol, sizeof(d.protocol), "%s", protocol);
        snprintf(d.reason, sizeof(d.reason), "%s", strempty(reason));
        *ret = d;
        return 0;
}

int egress_denials_new(unsigned per_second, EgressDenials **ret) {
        EgressDenials *d;

        if (per_second == 0)
                per_second = EGRESS_DENIALS_PER_SECOND_DEFAULT;
        if (per_second > EGRESS_DENIALS_PER_SECOND_MAX || !ret)
                return -EINVAL;
        d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        d->per_second = per_second;
        *ret = d;
        return 0;
}

EgressDenials *egress_denials_free(EgressDenials *d) {
        free(d);
        return NULL;
}

/* The pending summary as a row, and the summary emptied. */
static void take_summary(EgressDenials *d, EgressDenialRow *ret) {
        *ret = (EgressDenialRow){
                .summary = true,
                .at_usec = d->second * USEC_PER_SEC,
                .count = d->over,
                .n_examples = d->n_examples,
        };
        memcpy(ret->examples, d->examples, d->n_examples * sizeof(EgressDenial));
        d->over = 0;
        d->n_examples = 0;
}

int egress_denials_add(EgressDenials *d, uint64_t now_usec, const EgressDenial *denial,
                       EgressDenialRow ret_rows[static 2]) {
        uint64_t second = now_usec / USEC_PER_SEC;
        int n = 0;

        if (!d || !denial || denial->kind < 0 || denial->kind >= _EGRESS_DENIAL_KIND_MAX)
                return -EINVAL;
        /* A time before the current second (a caller's clock stepping back) counts in the current one. */
        if (!d->active || second > d->second) {
                if (d->over > 0)
                        take_summary(d, &ret_rows[n++]);
                d->active = true;
                d->second = second;
                d->in_second = 0;
        }

        d->total++;
        d->in_second++;
        if (d->in_second <= d->per_second) {
                ret_rows[n++] = (EgressDenialRow){.at_usec = now_usec, .denial = *denial};
                return n;
        }

        d->over++;
        d->summarised++;
        bool seen = false, kind_seen = false;
        for (size_t i = 0; i < d->n_examples && !seen; i++) {
                kind_seen = kind_seen || d->examples[i].kind == denial->kind;
                seen = d->examples[i].kind == denial->kind && streq(d->examples[i].target, denial->target) &&
                       d->examples[i].port == denial->port && streq(d->examples[i].protocol, denial->protocol);
        }
        if (!seen && d->n_examples < EGRESS_DENIALS_EXAMPLES)
                d->examples[d->n_examples++] = *denial;
        else if (!seen && !kind_seen)
                /* A kind the examples do not show yet takes the last place: a summary of a flood that mixes
                 * refused names with dropped connections names both. */
                d->examples[EGRESS_DENIALS_EXAMPLES - 1] = *denial;
        return n;
}

int egress_denials_flush(EgressDenials *d, uint64_t now_usec, EgressDenialRow *ret_row) {
        if (!d || !d->active || d->over == 0 || now_usec / USEC_PER_SEC <= d->second)
                return 0;
        take_summary(d, ret_row);
        return 1;
}

uint64_t egress_denials_next_flush(const EgressDenials *d) {
        if (!d || !d->active || d->over == 0)
                return UINT64_MAX;
        return (d->second + 1) * USEC_PER_SEC;
}

uint64_t egress_denials_total(const EgressDenials *d) {
        return d ? d->total : 0;
}

uint64_t egress_denials_summarised(const EgressDenials *d) {
        return d ? d->summarised : 0;
}

static int add_denial_fields(json_object *o, const EgressDenial *den) {
        if (json_object_object_add(o, den->kind == EGRESS_DENIAL_NAME ? "name" : "address",
                                   json_object_new_string(den->target)) < 0 ||
            json_object_object_add(o, "port", json_object_new_int(den->port)) < 0 ||
            json_object_object_add(o, "protocol", json_object_new_string(den->protocol)) < 0)
                return -ENOMEM;
        if (den->reason[0] && json_object_object_add(o, "reason", json_object_new_string(den->reason)) < 0)
                return -ENOMEM;
        return 0;
}

int egress_denial_row_to_json(const EgressDenialRow *row, char **ret) {
        json_object *o = json_object_new_object(), *examples = NULL;
        char *s = NULL;
        int r = -ENOMEM;

        if (!o)
                return -ENOMEM;
        if (!row->summary) {
                if (add_denial_fields(o, &row->denial) < 0)
                        goto finish;
        } else {
                if (json_object_object_add(o, "summary", json_object_new_boolean(true)) < 0 ||
                    json_object_object_add(o, "count", json_object_new_uint64(row->count)) < 0 ||
                    json_object_object_add(o, "second_start_usec", json_object_new_uint64(row->at_usec)) < 0)
                        goto finish;
                examples = json_object_new_array();
                if (!examples)
                        goto finish;
                for (size_t i = 0; i < row->n_examples; i++) {
                        json_object *e = json_object_new_object();
                        if (!e || add_denial_fields(e, &row->examples[i]) < 0 ||
                            json_object_array_add(examples, e) < 0) {
                                json_object_put(e);
                                json_object_put(examples);
                                goto finish;
                        }
                }
                if (json_object_object_add(o, "examples", examples) < 0) {
                        json_object_put(examples);
                        goto finish;
                }
        }
        s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        if (s) {
                *ret = s;
                r = 0;
        }
finish:
        json_object_put(o);
        return r;
}

int egress_denial_from_packet(const void *buf, size_t len, const char *reason, EgressDenial *ret) {
        char addr[INET_ADDRSTRLEN], why[EGRESS_DENIAL_REASON_MAX];
        const char *proto = "ip";
        uint16_t port = 0;
        struct iphdr ip;

        if (!buf || !ret)
                return -EINVAL;
        if (len < sizeof(ip))
                return -EBADMSG;
        memcpy(&ip, buf, sizeof(ip));
        if (ip.version != 4 || ip.ihl < 5 || (size_t) ip.ihl * 4 > len)
                return -EBADMSG;
        const uint8_t *l4 = (const uint8_t *) buf + ip.ihl * 4;
        size_t l4len = len - (size_t) ip.ihl * 4;
        switch (ip.protocol) {
        case IPPROTO_TCP:
                proto = "tcp";
                break;
        case IPPROTO_UDP:
                proto = "udp";
                break;
        case IPPROTO_ICMP:
                proto = "icmp";
                break;
        }
        /* TCP and UDP headers both start with the source and destination ports. */
        if ((ip.protocol == IPPROTO_TCP || ip.protocol == IPPROTO_UDP) && l4len >= 4)
                port = (uint16_t) (l4[2] << 8 | l4[3]);
        if (!inet_ntop(AF_INET, &ip.daddr, addr, sizeof(addr)))
                return -EBADMSG;
        if (streq(proto, "ip")) {
                snprintf(why, sizeof(why), "%s (IP protocol %u)", reason ?: "", (unsigned) ip.protocol);
                reason = why;
        }
        return egress_denial_make(EGRESS_DENIAL_ADDRESS, addr, port, proto, reason, ret);
}
