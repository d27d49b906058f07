/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An egress sandbox's resolver and denials (issue 23): names through its policy, refusals on the record.
 *
 * Each egress sandbox (pooled ones too) gets an EgressResolver on its host-side address, port 53, made once
 * its link has that address and freed before the link goes; its allow_address applies
 * egress_nft_render_allow_address() through the Manager's EgressNft (one transaction per address), its
 * denied feeds the sandbox's EgressDenials. The firewall's drops reach us through an NFLOG group (the rule's
 * prefix is the sandbox id) and feed the same EgressDenials. Rows go to the audit spool as operation
 * network.denied, event denied; a timer writes each second's summary once the second is over. */
#include "sandbox-egress-dns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libnetfilter_log/libnetfilter_log.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "egress-resolver.h"
#include "log.h"
#include "macro.h"
#include "sandbox.h"
#include "sandboxd-manager.h"
#include "time-util.h"

#define RESOLV_CONF "/etc/resolv.conf"

struct ManagerEgressDns {
        struct sockaddr_storage *upstreams;
        int n_upstreams;          /* or a negative errno: why there are none */

        struct nflog_handle *nflog;
        struct nflog_g_handle *nflog_group;
        sd_event_source *nflog_source;
};

struct SandboxEgressDns {
        Sandbox *sandbox;
        EgressResolver *resolver;
        EgressDenials *denials;
        sd_event_source *flush_timer;
};

/* --- the audit rows -------------------------------------------------------------------------------- */

static void write_row(Sandbox *s, const EgressDenialRow *row) {
        _cleanup_free_ char *detail = NULL;
        Caller c;

        if (s->pooled)
                return; /* nothing runs in it before it is claimed; not on the record as anyone's */
        if (egress_denial_row_to_json(row, &detail) < 0) {
                log_sandbox(LOG_WARNING, s->id, "Out of memory for a network.denied row of sandbox %s.", s->id);
                return;
        }
        caller_system(&c);
        manager_audit(s->manager, &c,
                      &(AuditRow) {
                              .session_id = s->id,
                              .operation = "network.denied",
                              .event = "denied",
                              .detail = detail,
                              .exit_code = -1,
                              .started_at = row->at_usec,
                      });
}

static int on_flush(sd_event_source *source, uint64_t usec, void *userdata);

static void arm_flush(SandboxEgressDns *d) {
        uint64_t next = egress_denials_next_flush(d->denials);

        if (next == UINT64_MAX) {
                if (d->flush_timer)
                        (void) sd_event_source_set_enabled(d->flush_timer, SD_EVENT_OFF);
                return;
        }
        if (!d->flush_timer) {
                if (sd_event_add_time(d->sandbox->manager->event, &d->flush_timer, CLOCK_REALTIME, next,
                                      10 * USEC_PER_MSEC, on_flush, d) < 0)
                        log_sandbox(LOG_WARNING, d->sandbox->id,
                                    "No timer for sandbox %s's denial summaries: they go with its next denial.",
                                    d->sandbox->id);
                return;
        }
        (void) sd_event_source_set_time(d->flush_timer, next);
        (void) sd_event_source_set_enabled(d->flush_timer, SD_EVENT_ONESHOT);
}

static void flush_due(SandboxEgressDns *d, uint64_t now) {
        EgressDenialRow row;

        while (egress_denials_flush(d->denials, now, &row) > 0)
                write_row(d->sandbox, &row);
}

static int on_flush(sd_event_source *source, uint64_t usec, void *userdata) {
        SandboxEgressDns *d = userdata;

        flush_due(d, now_usec(CLOCK_REALTIME));
        arm_flush(d);
        return 0;
}

void sandbox_egress_dns_denied(Sandbox *s, const EgressDenial *denial) {
        SandboxEgressDns *d = s->egress_dns;
        EgressDenialRow rows[2];
        int n;

        if (!d || !d->denials)
                return;
        n = egress_denials_add(d->denials, now_usec(CLOCK_REALTIME), denial, rows);
        for (int i = 0; i < n; i++)
                write_row(s, &rows[i]);
        arm_flush(d);
}

/* --- the resolver's callbacks ------------------------------------------------------------------------ */

static const EgressPolicy *get_policy(void *userdata) {
        SandboxEgressDns *d = userdata;
        return d->sandbox->egress.policy;
}

static int allow_address(void *userdata, int family, const void *addr, uint64_t timeout_usec) {
        SandboxEgressDns *d = userdata;
        Sandbox *s = d->sandbox;
        _cleanup_free_ char *text = NULL, *why = NULL;
        int r;

        if (!s->manager->egress.nft || !s->egress.in_table)
                return -ENOENT;
        r = egress_nft_render_allow_address(s->id, family, addr, timeout_usec, &text);
        if (r < 0)
                return r;
        r = egress_nft_run(s->manager->egress.nft, text, &why);
        if (r < 0)
                log_sandbox(LOG_WARNING, s->id, "Could not open a resolved address to sandbox %s: %s", s->id,
                            strna(why));
        return r;
}

static void denied(void *userdata, const char *name, uint16_t qtype, const char *reason) {
        SandboxEgressDns *d = userdata;
        EgressDenial e;

        if (egress_denial_make(EGRESS_DENIAL_NAME, isempty(name) ? "." : name, 53, "dns", reason, &e) < 0)
                return;
        sandbox_egress_dns_denied(d->sandbox, &e);
}

/* --- a sandbox's resolver -------------------------------------------------------------------------- */

static int resolver_make(SandboxEgressDns *d, const ManagerEgressDns *md) {
        Sandbox *s = d->sandbox;

        EgressResolverConfig config = {
                .listen = {.sin_family = AF_INET, .sin_port = htons(EGRESS_RESOLVER_PORT),
                           .sin_addr = s->egress.host_address},
                .upstreams = md->upstreams,
                .n_upstreams = (size_t) md->n_upstreams,
                .pool = &s->manager->config.network.pool,
                .get_policy = get_policy,
                .allow_address = allow_address,
                .denied = denied,
                .userdata = d,
        };
        return egress_resolver_new(s->manager->event, &config, &d->resolver);
}

static SandboxEgressDns *dns_free(SandboxEgressDns *d) {
        if (!d)
                return NULL;
        d->resolver = egress_resolver_free(d->resolver);
        d->flush_timer = sd_event_source_disable_unref(d->flush_timer);
        egress_denials_free(d->denials);
        free(d);
        return NULL;
}

int sandbox_egress_dns_start(Sandbox *s, const char **ret_step) {
        ManagerEgressDns *md = s->manager->egress_dns;
        SandboxEgressDns *d;
        const char *step = "start its DNS resolver";
        int r;

        if (s->egress_dns)
                return 0;
        if (!md || md->n_upstreams <= 0) {
                r = md ? md->n_upstreams : -ENOMEM;
                step = "start its DNS resolver (no nameserver could be read from " RESOLV_CONF ")";
                goto fail;
        }
        d = calloc(1, sizeof(SandboxEgressDns));
        if (!d) {
                r = -ENOMEM;
                goto fail;
        }
        d->sandbox = s;
        r = egress_denials_new(0, &d->denials);
        if (r >= 0) {
                r = resolver_make(d, md);
                if (r == -EADDRINUSE)
                        step = "bind its DNS resolver to port 53 of its host-side address (another DNS server "
                               "of the host listens on port 53, on that address or on all of them)";
                else if (r < 0)
                        step = "bind its DNS resolver to port 53 of its host-side address";
        }
        if (r < 0) {
                dns_free(d);
                goto fail;
        }
        s->egress_dns = d;
        return 0;
fail:
        if (ret_step)
                *ret_step = step;
        return r;
}

void sandbox_egress_dns_stop(Sandbox *s) {
        SandboxEgressDns *d = s->egress_dns;

        if (!d)
                return;
        /* Nothing counted goes unrecorded: the second in progress is over for this sandbox. */
        flush_due(d, UINT64_MAX - 1);
        s->egress_dns = dns_free(d);
}

bool sandbox_egress_dns_running(const Sandbox *s) {
        return s->egress_dns && s->egress_dns->resolver;
}

/* --- the firewall's denials (NFLOG) ----------------------------------------------------------------- */

/* One logged packet: its prefix names the sandbox, its IPv4 header and the first bytes of its transport
 * header say where it went. */
static int on_nflog_packet(struct nflog_g_handle *gh, struct nfgenmsg *nfmsg, struct nflog_data *nfa,
                           void *userdata) {
        Manager *m = userdata;
        char *payload = NULL, *prefix = nflog_get_prefix(nfa);
        int len = nflog_get_payload(nfa, &payload);
        EgressDenial e;
        Sandbox *s;

        if (!prefix || !(s = hashmap_get(m->sandboxes, prefix)) || !s->egress_dns || len <= 0)
                return 0;
        if (egress_denial_from_packet(payload, (size_t) len, "dropped by the firewall", &e) >= 0)
                sandbox_egress_dns_denied(s, &e);
        return 0;
}

static int on_nflog_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Manager *m = userdata;
        ManagerEgressDns *md = m->egress_dns;
        char buf[65536] __attribute__((aligned));

        /* A few messages per wakeup, so that a burst cannot starve the rest of the loop. */
        for (int i = 0; i < 64; i++) {
                ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (n < 0) {
                        /* ENOBUFS: the kernel dropped messages we were too slow for; the nft counters still
                         * count those packets. */
                        if (errno == ENOBUFS)
                                continue;
                        break;
                }
                (void) nflog_handle_packet(md->nflog, buf, (int) n);
        }
        return 0;
}

static int nflog_open_group(Manager *m, ManagerEgressDns *md) {
        int r, fd;

        md->nflog = nflog_open();
        if (!md->nflog)
                return errno > 0 ? -errno : -EIO;
        /* On kernels before 3.17 the family has to be bound first; on later ones these do nothing. */
        (void) nflog_unbind_pf(md->nflog, AF_INET);
        (void) nflog_bind_pf(md->nflog, AF_INET);
        md->nflog_group = nflog_bind_group(md->nflog, EGRESS_DNS_NFLOG_GROUP);
        if (!md->nflog_group)
                return errno > 0 ? -errno : -EIO;
        /* The IPv4 header and the transport header's ports are all we read. */
        if (nflog_set_mode(md->nflog_group, NFULNL_COPY_PACKET, 64) < 0)
                return errno > 0 ? -errno : -EIO;
        r = nflog_callback_register(md->nflog_group, on_nflog_packet, m);
        if (r < 0)
                return -EIO;
        fd = nflog_fd(md->nflog);
        (void) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        return sd_event_add_io(m->event, &md->nflog_source, fd, EPOLLIN, on_nflog_io, m);
}

static void nflog_release(ManagerEgressDns *md) {
        md->nflog_source = sd_event_source_disable_unref(md->nflog_source);
        if (md->nflog_group)
                (void) nflog_unbind_group(md->nflog_group);
        md->nflog_group = NULL;
        if (md->nflog)
                (void) nflog_close(md->nflog);
        md->nflog = NULL;
}

/* --- the Manager's part ------------------------------------------------------------------------------ */

static void read_upstreams(ManagerEgressDns *md) {
        struct sockaddr_storage *u = NULL;
        int n = egress_resolver_upstreams_from_resolv_conf(RESOLV_CONF, &u);

        if (n < 0) {
                log_msg(LOG_WARNING, "No DNS server for egress sandboxes' resolvers in %s: %s. Egress sandboxes "
                        "are refused until it names one (then SIGHUP or restart sandboxd).",
                        RESOLV_CONF, strerror(-n));
                /* Keep the servers we had, if any. */
                if (md->n_upstreams <= 0)
                        md->n_upstreams = n;
                return;
        }
        free(md->upstreams);
        md->upstreams = u;
        md->n_upstreams = n;
}

void manager_egress_dns_init(Manager *m) {
        ManagerEgressDns *md;
        int r;

        if (m->egress.error < 0)
                return;
        md = calloc(1, sizeof(ManagerEgressDns));
        if (!md) {
                log_msg(LOG_WARNING, "Out of memory for egress sandboxes' resolvers.");
                return;
        }
        m->egress_dns = md;
        read_upstreams(md);
        r = nflog_open_group(m, md);
        if (r < 0) {
                nflog_release(md);
                log_msg(LOG_WARNING, "The firewall's denials of egress sandboxes are not recorded: NFLOG group %d "
                        "could not be bound (%s; is nfnetlink_log in this kernel, and is the group free?). Their "
                        "resolvers' refusals still are, and the denied counters count every dropped packet.",
                        EGRESS_DNS_NFLOG_GROUP, strerror(-r));
        }
}

static void resolver_remake(Sandbox *s, ManagerEgressDns *md) {
        SandboxEgressDns *d = s->egress_dns;
        int r;

        if (!d)
                return;
        d->resolver = egress_resolver_free(d->resolver);
        r = resolver_make(d, md);
        if (r < 0)
                log_sandbox(LOG_ERR, s->id, "Sandbox %s's resolver could not be made anew: %s; its names do not "
                            "resolve until sandboxd restarts.", s->id, strerror(-r));
}

void manager_egress_dns_reload(Manager *m) {
        ManagerEgressDns *md = m->egress_dns;
        size_t state = 0;
        Sandbox *s;

        if (!md)
                return;
        read_upstreams(md);
        if (md->n_upstreams <= 0)
                return;
        /* Made anew: a query in flight is lost (its client asks again); the sockets are free at once
         * (UDP, and TCP with SO_REUSEADDR). */
        for (Sandbox *p = m->pool; p; p = p->pool_next)
                resolver_remake(p, md);
        while (hashmap_iterate(m->sandboxes, &state, (void **) &s, NULL))
                resolver_remake(s, md);
        log_msg(LOG_INFO, "Egress resolvers: %d upstream servers from %s.", md->n_upstreams, RESOLV_CONF);
}

void manager_egress_dns_done(Manager *m) {
        ManagerEgressDns *md = m->egress_dns;

        if (!md)
                return;
        nflog_release(md);
        free(md->upstreams);
        free(md);
        m->egress_dns = NULL;
}

int manager_egress_dns_check(Manager *m, sd_bus_error *error) {
        ManagerEgressDns *md = m->egress_dns;

        if (!md)
                return sd_bus_error_set(error, SD_BUS_ERROR_NO_MEMORY, "Out of memory for the egress resolvers.");
        if (md->n_upstreams <= 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_NOT_SUPPORTED,
                                         "Network \"egress\" needs a DNS server for the sandbox's resolver: "
                                         "sandboxd could not read one from " RESOLV_CONF " (%s); fix it, then "
                                         "SIGHUP or restart sandboxd.",
                                         strerror(-md->n_upstreams));
        return 0;
}

uint16_t manager_egress_dns_nflog_group(Manager *m) {
        return m->egress_dns && m->egress_dns->nflog_source ? EGRESS_DNS_NFLOG_GROUP : 0;
}
