/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Egress sandboxes in sandboxd's life cycle (issue 23): their address, link and firewall rules from
 * creation to deletion, and the table rebuilt from the store at start.
 *
 * Order matters for what can leave a sandbox: its rules are in the table before its link exists, and its
 * init joins the namespace only after both. On the way out the rules go last but one: the link first (so
 * nothing is routed any more), then the rules, then the address is free for the next sandbox. */
#include "sandbox-egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "egress-conntrack.h"
#include "log.h"
#include "macro.h"
#include "sandbox.h"
#include "sandbox-egress-dns.h"
#include "sandboxd-bus.h"
#include "sandboxd-manager.h"
#include "sandbox-store.h"

/* --- the policy as the store keeps it ------------------------------------------------------------- */

static json_object *entries_json(const EgressEntry *l, size_t n) {
        char buf[EGRESS_ENTRY_TEXT_MAX];
        json_object *a = json_object_new_array();

        for (size_t i = 0; a && i < n; i++)
                if (json_object_array_add(a, json_object_new_string(egress_entry_to_string(&l[i], buf)))) {
                        json_object_put(a);
                        return NULL;
                }
        return a;
}

json_object *egress_policy_to_json(const EgressPolicy *p) {
        json_object *o = json_object_new_object(), *allow, *deny;

        if (!o || !p)
                return o;
        allow = entries_json(p->allow, p->n_allow);
        deny = entries_json(p->deny, p->n_deny);
        if (!allow || !deny) {
                json_object_put(allow);
                json_object_put(deny);
                json_object_put(o);
                return NULL;
        }
        json_object_object_add(o, "default",
                               json_object_new_string(egress_default_to_string(p->default_action)));
        json_object_object_add(o, "allow", allow);
        json_object_object_add(o, "deny", deny);
        return o;
}

char *egress_policy_to_json_string(const EgressPolicy *p) {
        json_object *o = egress_policy_to_json(p);
        char *s = o ? strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN)) : NULL;
        json_object_put(o);
        return s;
}

static int entries_from_json(json_object *o, const char *key, bool allow, EgressPolicy *p) {
        json_object *a;

        if (!json_object_object_get_ex(o, key, &a))
                return 0;
        if (!json_object_is_type(a, json_type_array))
                return -EBADMSG;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *e = json_object_array_get_idx(a, i);
                if (!json_object_is_type(e, json_type_string))
                        return -EBADMSG;
                int r = egress_policy_add(p, allow, json_object_get_string(e), NULL);
                if (r < 0)
                        return r == -ENOMEM ? r : -EBADMSG;
        }
        return 0;
}

int egress_policy_from_json_string(const char *s, EgressPolicy *ret) {
        _cleanup_(egress_policy_donep) EgressPolicy p = EGRESS_POLICY_INIT;
        json_object *o, *d;
        int r = -EBADMSG;

        if (!s || !ret)
                return -EINVAL;
        o = json_tokener_parse(s);
        if (!o)
                return -EBADMSG;
        if (!json_object_is_type(o, json_type_object))
                goto out;
        if (json_object_object_get_ex(o, "default", &d)) {
                EgressDefault def = egress_default_from_string(json_object_get_string(d));
                if (!json_object_is_type(d, json_type_string) || def < 0)
                        goto out;
                p.default_action = def;
        }
        r = entries_from_json(o, "allow", true, &p);
        if (r >= 0)
                r = entries_from_json(o, "deny", false, &p);
        if (r >= 0) {
                *ret = p;
                p = (EgressPolicy) EGRESS_POLICY_INIT;
        }
out:
        json_object_put(o);
        return r;
}

/* --- the Manager's part ---------------------------------------------------------------------------- */

/* A writable proc instance of our own, mounted nowhere: sandboxd's /proc (ProcSubset=pid,
 * ProtectKernelTunables=yes) has no writable sys/. */
static int open_proc_rw(void) {
        _cleanup_close_ int fs = fsopen("proc", FSOPEN_CLOEXEC);
        if (fs < 0)
                return -errno;
        if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        int mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        return mnt < 0 ? -errno : mnt;
}

static void egress_failed(Manager *m, int r, const char *what) {
        ManagerEgress *e = &m->egress;
        char buf[512];

        snprintf(buf, sizeof(buf), "%s: %s", what, strerror(-r));
        e->error = r;
        free(e->error_text);
        e->error_text = strdup(buf);
        log_msg(LOG_WARNING, "Egress sandboxes are not available: %s.", buf);
}

void manager_egress_init(Manager *m) {
        ManagerEgress *e = &m->egress;
        int r;

        e->proc_fd = -EBADF;
        r = egress_pool_init(&e->pool, &m->config.network.pool);
        if (r < 0)
                return egress_failed(m, r, "the address pool ([Network] Pool=)");
        r = egress_nft_new(&e->nft);
        if (r < 0)
                return egress_failed(m, r, "a libnftables context");
        e->proc_fd = open_proc_rw();
        if (e->proc_fd < 0)
                log_msg(LOG_DEBUG, "Could not mount a proc of our own (%s); writing sysctls through /proc.",
                        strerror(-e->proc_fd));
        /* Forwarding for the sandboxes' links; the forward chain of our table drops anything from or to an
         * sbx-* interface that the sandbox's policy does not allow (docs/security.md). */
        r = egress_ip_forward_enable(e->proc_fd);
        if (r < 0)
                return egress_failed(m, r, "net.ipv4.ip_forward=1");
}

static EgressNftSandbox nft_sandbox(const Sandbox *s) {
        /* The type's EgressRateMax= as configured now: a restart applies a change to every sandbox. */
        const SandboxType *t = sandboxd_config_find_type(&s->manager->config, s->type);
        return (EgressNftSandbox) {
                .rate_max = t ? t->egress_rate_max : 0,
                .id = s->id,
                .ifname = s->egress.ifname,
                .host_address = s->egress.host_address,
                .address = s->egress.address,
                .policy = s->egress.policy,
                .nflog_group = manager_egress_dns_nflog_group(s->manager),
        };
}

static bool has_egress(const Sandbox *s) {
        return s->network == SANDBOX_NETWORK_EGRESS && s->egress.policy && s->egress.have_slot;
}

void manager_egress_startup(Manager *m) {
        ManagerEgress *e = &m->egress;
        _cleanup_free_ EgressNftSandbox *list = NULL;
        _cleanup_free_ char *text = NULL, *why = NULL, *what = NULL;
        _cleanup_strv_free_ char **links = NULL;
        size_t n = 0, state = 0;
        Sandbox *s;
        int r;

        if (e->error < 0) {
                /* Without egress set up, the table cannot be trusted to be ours as the store says: no
                 * sbx-* link stays, so nothing of an egress sandbox is routable. */
                if (egress_link_list(&links) >= 0)
                        for (char **l = links; *l; l++) {
                                r = egress_link_remove(*l);
                                log_msg(LOG_WARNING, "Removed link %s: egress is not available%s%s.", *l,
                                        r < 0 ? ": " : "", r < 0 ? strerror(-r) : "");
                        }
                return;
        }
        list = calloc(hashmap_size(m->sandboxes) + 1, sizeof(EgressNftSandbox));
        if (!list)
                return egress_failed(m, -ENOMEM, "the firewall table");
        while (hashmap_iterate(m->sandboxes, &state, (void **) &s, NULL))
                if (has_egress(s))
                        list[n++] = nft_sandbox(s);
        r = egress_nft_render_table(&m->config.network.pool, list, n, &text);
        if (r >= 0)
                r = egress_nft_run(e->nft, text, &why);
        if (r < 0) {
                egress_failed(m, r, why ? why : "the firewall table");
                /* The adopted egress sandboxes keep their links: without our table an sbx-* interface is
                 * not forwarded by the rules of ours, but nothing says another firewall drops it. Remove
                 * them, so that nothing of theirs is routable. */
                for (state = 0; hashmap_iterate(m->sandboxes, &state, (void **) &s, NULL);)
                        if (has_egress(s))
                                (void) egress_link_remove(s->egress.ifname);
                return;
        }
        for (state = 0; hashmap_iterate(m->sandboxes, &state, (void **) &s, NULL);)
                if (has_egress(s)) {
                        const char *step = NULL;
                        s->egress.in_table = true;
                        /* Its resolver again (a sandboxd killed or restarted took the old one along). */
                        r = sandbox_egress_dns_start(s, &step);
                        if (r < 0)
                                log_sandbox(LOG_ERR, s->id, "Sandbox %s could not %s: %s; its names do not resolve.",
                                            s->id, step, strerror(-r));
                }
        log_msg(LOG_INFO, "Egress firewall: table %s %s with %zu sandboxes.", EGRESS_NFT_FAMILY,
                EGRESS_NFT_TABLE, n);

        /* Links of sandboxes that are gone (a sandboxd killed mid-delete or mid-create). */
        r = egress_link_list(&links);
        if (r < 0)
                log_msg(LOG_WARNING, "Could not list the host's links: %s", strerror(-r));
        for (char **l = links; l && *l; l++) {
                bool owned = false;
                for (state = 0; !owned && hashmap_iterate(m->sandboxes, &state, (void **) &s, NULL);)
                        owned = has_egress(s) && streq(s->egress.ifname, *l);
                if (owned)
                        continue;
                r = egress_link_remove(*l);
                log_msg(r < 0 && r != -ENOENT ? LOG_WARNING : LOG_INFO,
                        "Removed link %s, which no sandbox owns%s%s.", *l, r < 0 ? ": " : "",
                        r < 0 ? strerror(-r) : "");
        }

        r = egress_nft_forward_drop_elsewhere(e->nft, &what);
        if (r > 0)
                log_msg(LOG_WARNING,
                        "The host's firewall has a forward chain that drops by default (%s): it may drop "
                        "egress sandboxes' traffic that table %s %s accepts. sandboxd does not change it; "
                        "allow forwarding from and to interfaces sbx-* there.",
                        what, EGRESS_NFT_FAMILY, EGRESS_NFT_TABLE);
        else if (r < 0)
                log_msg(LOG_DEBUG, "Could not list the host's forward chains: %s", strerror(-r));
}

void manager_egress_done(Manager *m) {
        ManagerEgress *e = &m->egress;

        egress_pool_done(&e->pool);
        e->nft = egress_nft_free(e->nft);
        e->proc_fd = safe_close(e->proc_fd);
        free(e->error_text);
        e->error_text = NULL;
}

int manager_egress_check(Manager *m, sd_bus_error *error) {
        ManagerEgress *e = &m->egress;
        int r;

        if (e->error < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_NOT_SUPPORTED,
                                         "Network \"egress\" is not available on this host: %s (see sandboxd's "
                                         "journal).",
                                         strna(e->error_text));
        r = egress_host_has_uplink();
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED,
                                         "Network \"egress\": could not read the host's routes: %s.",
                                         strerror(-r));
        if (r == 0)
                return sd_bus_error_set(error, SD_BUS_ERROR_NOT_SUPPORTED,
                                        "Network \"egress\" needs an uplink: this host has no IPv4 default "
                                        "route.");
        if (e->pool.n_used >= e->pool.n_slots)
                return sd_bus_error_setf(error, SANDBOXD_ERROR_LIMIT_EXCEEDED,
                                         "No address is left in [Network] Pool= (%u egress sandboxes).",
                                         (unsigned) e->pool.n_slots);
        return manager_egress_dns_check(m, error);
}

/* --- a sandbox's part ------------------------------------------------------------------------------ */

static int write_resolv_conf(Sandbox *s) {
        char path[4096], text[64], host[INET_ADDRSTRLEN];
        _cleanup_close_ int fd = -EBADF;

        snprintf(path, sizeof(path), "%s/etc/resolv.conf", s->workspace);
        snprintf(text, sizeof(text), "nameserver %s\n",
                 inet_ntop(AF_INET, &s->egress.host_address, host, sizeof(host)));
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        size_t n = strlen(text);
        if (write(fd, text, n) != (ssize_t) n)
                return errno > 0 ? -errno : -EIO;
        return 0;
}

static int render_and_run(Sandbox *s, int (*render)(const EgressNftSandbox *, char **)) {
        _cleanup_free_ char *text = NULL, *why = NULL;
        EgressNftSandbox n = nft_sandbox(s);
        int r;

        r = render(&n, &text);
        if (r < 0)
                return r;
        r = egress_nft_run(s->manager->egress.nft, text, &why);
        if (r < 0)
                log_sandbox(LOG_ERR, s->id, "nft refused sandbox %s's rules: %s", s->id, strna(why));
        return r;
}

int sandbox_egress_setup(Sandbox *s, const EgressPolicy *policy, const char **ret_step) {
        Manager *m = s->manager;
        SandboxEgress *e = &s->egress;
        const char *step = "copy the egress policy";
        int r;

        e->netns_fd = -EBADF;
        if (m->egress.error < 0) {
                r = m->egress.error;
                step = "set up egress at start";
                goto fail;
        }
        e->policy = calloc(1, sizeof(EgressPolicy));
        if (!e->policy) {
                r = -ENOMEM;
                goto fail;
        }
        r = egress_policy_copy(policy, e->policy);
        if (r < 0)
                goto fail;
        step = "take an address from [Network] Pool=";
        r = egress_pool_take(&m->egress.pool, &e->slot);
        if (r < 0)
                goto fail;
        e->have_slot = true;
        (void) egress_pool_slot(&m->egress.pool, e->slot, &e->host_address, &e->address);
        r = egress_ifname_from_id(s->id, e->ifname);
        if (r < 0)
                goto fail;

        /* The rules first: nothing may leave before they are there. */
        step = "add the sandbox's firewall rules";
        r = render_and_run(s, egress_nft_render_sandbox);
        if (r < 0)
                goto fail;
        e->in_table = true;

        step = "write the sandbox's resolv.conf";
        r = write_resolv_conf(s);
        if (r < 0)
                goto fail;

        r = egress_link_add(&(EgressLinkSpec) {
                                    .ifname = e->ifname,
                                    .host_address = e->host_address,
                                    .address = e->address,
                                    .proc_fd = m->egress.proc_fd,
                            },
                            &e->netns_fd, &step);
        if (r < 0)
                goto fail;
        /* Its host side has its address now: the resolver can bind to it. */
        r = sandbox_egress_dns_start(s, &step);
        if (r < 0)
                goto fail;
        return 0;

fail:
        if (ret_step)
                *ret_step = step;
        sandbox_egress_teardown(s);
        return r;
}

void sandbox_egress_teardown(Sandbox *s) {
        Manager *m = s->manager;
        SandboxEgress *e = &s->egress;
        int r;

        sandbox_egress_dns_stop(s);
        e->netns_fd = safe_close(e->netns_fd);
        if (e->ifname[0]) {
                r = egress_link_remove(e->ifname);
                if (r < 0 && r != -ENOENT)
                        log_sandbox(LOG_WARNING, s->id, "Could not remove link %s of sandbox %s: %s", e->ifname,
                                    s->id, strerror(-r));
        }
        if (e->in_table && m->egress.nft && e->policy) {
                r = render_and_run(s, egress_nft_render_remove);
                if (r < 0)
                        log_sandbox(LOG_WARNING, s->id, "Could not remove sandbox %s's firewall rules: %s",
                                    s->id, strerror(-r));
                e->in_table = false;
        }
        if (e->have_slot) {
                egress_pool_release(&m->egress.pool, e->slot);
                e->have_slot = false;
        }
        e->ifname[0] = 0;
}

void sandbox_egress_free(Sandbox *s) {
        sandbox_egress_dns_stop(s);
        s->egress.netns_fd = safe_close(s->egress.netns_fd);
        s->egress.policy = egress_policy_free(s->egress.policy);
}

/* The policy replaced and the sandbox's rules re-rendered in one transaction; the old policy kept if nft
 * refuses. */
static int replace_policy(Sandbox *s, const EgressPolicy *policy, bool flush_dynamic) {
        _cleanup_free_ char *text = NULL, *why = NULL;
        EgressPolicy *copy, *old = s->egress.policy;
        int r;

        copy = calloc(1, sizeof(EgressPolicy));
        if (!copy)
                return -ENOMEM;
        r = egress_policy_copy(policy, copy);
        if (r < 0) {
                free(copy);
                return r;
        }
        EgressNftSandbox n = nft_sandbox(s);
        n.policy = copy;
        n.flush_dynamic = flush_dynamic;
        r = egress_nft_render_sandbox(&n, &text);
        if (r >= 0) {
                r = egress_nft_run(s->manager->egress.nft, text, &why);
                if (r < 0)
                        log_sandbox(LOG_ERR, s->id, "nft refused sandbox %s's rules: %s", s->id, strna(why));
        }
        if (r < 0) {
                egress_policy_free(copy);
                return r;
        }
        /* The resolver reads the policy through this pointer at each query (sandbox-egress-dns.c). */
        s->egress.policy = copy;
        egress_policy_free(old);
        return 0;
}

int sandbox_egress_set_policy(Sandbox *s, const EgressPolicy *policy) {
        if (!has_egress(s))
                return -EINVAL;
        return replace_policy(s, policy, false);
}

static bool cut_connection(struct in_addr dst, void *userdata) {
        Sandbox *s = userdata;
        return egress_conntrack_cuts(s->egress.policy, &s->manager->config.network.pool,
                                     s->egress.host_address, dst);
}

int sandbox_egress_change_policy(Sandbox *s, const EgressPolicy *policy, int *ret_cut) {
        _cleanup_free_ char *json = NULL, *old_json = NULL;
        int r;

        if (!has_egress(s) || !s->egress.in_table || !s->manager->egress.nft)
                return -ENOTCONN;
        json = egress_policy_to_json_string(policy);
        old_json = egress_policy_to_json_string(s->egress.policy);
        if (!json || !old_json)
                return -ENOMEM;
        /* The store first: a failure there changes nothing; a refusal by nft puts the old text back. */
        r = sandbox_store_set_egress_policy(s->manager->store, s->id, json);
        if (r < 0)
                return r;
        r = replace_policy(s, policy, true);
        if (r < 0) {
                int k = sandbox_store_set_egress_policy(s->manager->store, s->id, old_json);
                if (k < 0)
                        log_sandbox(LOG_ERR, s->id, "Could not restore sandbox %s's stored policy: %s",
                                    s->id, strerror(-k));
                return r;
        }
        r = egress_conntrack_cut(s->egress.address, cut_connection, s);
        if (r < 0)
                log_sandbox(LOG_WARNING, s->id,
                            "Sandbox %s's new egress policy is in force, but its open connections could "
                            "not be cut: %s",
                            s->id, strerror(-r));
        if (ret_cut)
                *ret_cut = r;
        return 0;
}

int sandbox_egress_adopt(Sandbox *s, const char *address, const char *policy_json) {
        Manager *m = s->manager;
        SandboxEgress *e = &s->egress;
        EgressPolicy p;
        int r;

        e->netns_fd = -EBADF;
        if (m->egress.error < 0 && !m->egress.pool.used)
                return m->egress.error;
        if (inet_pton(AF_INET, strempty(address), &e->address) != 1)
                return -EBADMSG;
        r = egress_pool_index_of(&m->egress.pool, e->address, &e->slot);
        if (r < 0)
                return r; /* Pool= changed: its address is not one of ours any more */
        r = egress_pool_mark(&m->egress.pool, e->slot);
        if (r < 0)
                return r;
        e->have_slot = true;
        (void) egress_pool_slot(&m->egress.pool, e->slot, &e->host_address, NULL);
        r = egress_ifname_from_id(s->id, e->ifname);
        if (r < 0)
                return r;
        r = egress_policy_from_json_string(policy_json, &p);
        if (r < 0)
                return r;
        e->policy = calloc(1, sizeof(EgressPolicy));
        if (!e->policy) {
                egress_policy_done(&p);
                return -ENOMEM;
        }
        *e->policy = p;
        return 0;
}

int sandbox_egress_counters(Sandbox *s, EgressCounters *ret) {
        *ret = (EgressCounters) {};
        if (!has_egress(s) || !s->egress.in_table || !s->manager->egress.nft)
                return 0;
        return egress_nft_counters(s->manager->egress.nft, s->id, ret);
}
