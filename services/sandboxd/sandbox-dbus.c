/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sandboxes on the bus: their objects (org.sandboxd.sandbox1.Sandbox), properties and signals. */
#include "sandbox-dbus.h"

#include <assert.h>
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <stdlib.h>

#include "caller.h"
#include "macro.h"
#include "sandbox.h"
#include "sandboxd-dbus.h"
#include "sandboxd-manager.h"

/* --- per-sandbox objects -------------------------------------------------------------------------- */

static int sandbox_object_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
                               sd_bus_error *error) {
        Manager *m = userdata;
        _cleanup_free_ char *id = NULL;
        int r;

        assert(m);
        r = sd_bus_path_decode(path, SANDBOXD_SANDBOX_PATH_PREFIX, &id);
        if (r <= 0)
                return r;
        Sandbox *s = hashmap_get(m->sandboxes, id);
        if (!s)
                return 0;
        /* Property reads are checked here, like method calls: the bus policy is not the only guard. */
        sd_bus_message *msg = sd_bus_get_current_message(bus);
        if (msg) {
                Caller c;
                r = manager_caller_check(m, msg, &c, error);
                if (r < 0)
                        return r;
        }
        *found = s;
        return 1;
}

static int sandbox_node_enumerator(sd_bus *bus, const char *path, void *userdata, char ***nodes,
                                   sd_bus_error *error) {
        Manager *m = userdata;
        size_t n = 0, state = 0;
        Sandbox *s = NULL;
        char **l = calloc(hashmap_size(m->sandboxes) + 1, sizeof(char *));

        if (!l)
                return -ENOMEM;
        while (hashmap_iterate(m->sandboxes, &state, (void **) &s, NULL)) {
                l[n] = sandbox_bus_path(s);
                if (!l[n]) {
                        strv_free(l);
                        return -ENOMEM;
                }
                n++;
        }
        *nodes = l;
        return 1;
}

static int property_state(sd_bus *bus, const char *path, const char *interface, const char *property,
                          sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Sandbox *s = userdata;
        return sd_bus_message_append(reply, "s", sandbox_state_name(s));
}

static int property_paused(sd_bus *bus, const char *path, const char *interface, const char *property,
                           sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Sandbox *s = userdata;
        return sd_bus_message_append(reply, "b", (int) s->paused);
}

static int property_network(sd_bus *bus, const char *path, const char *interface, const char *property,
                            sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Sandbox *s = userdata;
        return sd_bus_message_append(reply, "s", sandbox_network_to_string(s->network));
}

static bool sandbox_has_egress(const Sandbox *s) {
        return s->network == SANDBOX_NETWORK_EGRESS && s->egress.policy;
}

/* Issue 23: the policy as CreateSandbox takes it; an empty a{sv} for other networks. */
static int property_egress_policy(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Sandbox *s = userdata;
        if (!sandbox_has_egress(s))
                return sd_bus_message_append(reply, "a{sv}", 0);
        return egress_policy_append_bus(reply, s->egress.policy);
}

static int property_egress_address(sd_bus *bus, const char *path, const char *interface, const char *property,
                                   sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Sandbox *s = userdata;
        char buf[INET_ADDRSTRLEN] = "";

        if (sandbox_has_egress(s) && s->egress.have_slot)
                (void) inet_ntop(AF_INET, &s->egress.address, buf, sizeof(buf));
        return sd_bus_message_append(reply, "s", buf);
}

/* Read from the firewall at each Get: allowed packets and bytes, denied packets and bytes. */
static int property_egress_counters(sd_bus *bus, const char *path, const char *interface, const char *property,
                                    sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Sandbox *s = userdata;
        EgressCounters c;
        int r;

        r = sandbox_egress_counters(s, &c);
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED,
                                         "Could not read sandbox %s's counters from the firewall: %s.", s->id,
                                         strerror(-r));
        return sd_bus_message_append(reply, "(tttt)", c.allowed_packets, c.allowed_bytes, c.denied_packets,
                                     c.denied_bytes);
}

static int property_string_ptr(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        char **p = userdata;
        return sd_bus_message_append(reply, "s", strempty(*p));
}

static int property_id(sd_bus *bus, const char *path, const char *interface, const char *property,
                       sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "s", (const char *) userdata);
}

/* Issue 24: its image, or "host" for the host's own tree. */
static int property_image(sd_bus *bus, const char *path, const char *interface, const char *property,
                          sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        char **p = userdata;
        return sd_bus_message_append(reply, "s", *p ?: "host");
}

static const sd_bus_vtable sandbox_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Id", "s", property_id, offsetof(Sandbox, id), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Name", "s", property_string_ptr, offsetof(Sandbox, name), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Type", "s", property_string_ptr, offsetof(Sandbox, type), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("State", "s", property_state, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Uid", "u", NULL, offsetof(Sandbox, uid), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Unit", "s", property_string_ptr, offsetof(Sandbox, slice), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Network", "s", property_network, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Image", "s", property_image, offsetof(Sandbox, image), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("EgressPolicy", "a{sv}", property_egress_policy, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("EgressAddress", "s", property_egress_address, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("EgressCounters", "(tttt)", property_egress_counters, 0, 0),
        SD_BUS_PROPERTY("Owner", "s", property_string_ptr, offsetof(Sandbox, owner), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("CreatedAt", "t", NULL, offsetof(Sandbox, created_at), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("ExpiresAt", "t", NULL, offsetof(Sandbox, expires_at), SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        /* Issue 26 */
        SD_BUS_PROPERTY("Paused", "b", property_paused, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("PausedAt", "t", NULL, offsetof(Sandbox, paused_at), SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_VTABLE_END,
};

/* --- signals ------------------------------------------------------------------------------------ */

void sandbox_emit_new(Sandbox *s) {
        _cleanup_free_ char *path = sandbox_bus_path(s);
        if (path)
                (void) sd_bus_emit_signal(s->manager->bus, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "SandboxNew",
                                          "so", s->id, path);
}

void sandbox_emit_removed(Sandbox *s) {
        _cleanup_free_ char *path = sandbox_bus_path(s);
        if (path)
                (void) sd_bus_emit_signal(s->manager->bus, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE,
                                          "SandboxRemoved", "so", s->id, path);
}

void sandbox_emit_changed(Sandbox *s, const char *property) {
        _cleanup_free_ char *path = NULL;

        /* A pooled sandbox is not on the bus yet. */
        if (s->pooled || !hashmap_get(s->manager->sandboxes, s->id))
                return;
        path = sandbox_bus_path(s);
        if (path)
                (void) sd_bus_emit_properties_changed(s->manager->bus, path, SANDBOXD_SANDBOX_INTERFACE, property,
                                                      NULL);
}

int sandbox_bus_register(Manager *m) {
        int r;

        assert(m);
        assert(m->bus);
        r = sd_bus_add_fallback_vtable(m->bus, NULL, SANDBOXD_SANDBOX_PATH_PREFIX, SANDBOXD_SANDBOX_INTERFACE,
                                       sandbox_vtable, sandbox_object_find, m);
        if (r < 0)
                return r;
        return sd_bus_add_node_enumerator(m->bus, NULL, SANDBOXD_SANDBOX_PATH_PREFIX, sandbox_node_enumerator, m);
}
