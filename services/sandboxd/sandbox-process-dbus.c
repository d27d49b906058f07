/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The background processes on the bus: their objects (org.sandboxd.sandbox1.Process) under their sandbox's,
 * <sandbox path>/process/<id>, with their properties and PropertiesChanged. */
#include "sandbox-process.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox.h"
#include "sandboxd-bus.h"
#include "sandboxd-dbus.h"
#include "sandboxd-manager.h"

/* The sandbox and the process a path names: <prefix>/<encoded id>/process/<process id>. */
static Process *process_from_path(Manager *m, const char *path) {
        _cleanup_free_ char *sandbox_path = NULL, *id = NULL;
        size_t plen = strlen(SANDBOXD_SANDBOX_PATH_PREFIX);

        if (strncmp(path, SANDBOXD_SANDBOX_PATH_PREFIX "/", plen + 1) != 0)
                return NULL;
        const char *rest = path + plen + 1, *slash = strchr(rest, '/');
        if (!slash || strncmp(slash, "/process/", 9) != 0 || strchr(slash + 9, '/'))
                return NULL;
        sandbox_path = strndup(path, slash - path);
        if (!sandbox_path || sd_bus_path_decode(sandbox_path, SANDBOXD_SANDBOX_PATH_PREFIX, &id) <= 0)
                return NULL;
        Sandbox *s = hashmap_get(m->sandboxes, id);
        return s ? process_find(s, slash + 9) : NULL;
}

static int process_object_find(sd_bus *bus, const char *path, const char *interface, void *userdata,
                               void **found, sd_bus_error *error) {
        Manager *m = userdata;
        Process *p = process_from_path(m, path);
        int r;

        if (!p)
                return 0;
        /* As the sandboxes' objects: the caller is checked here, not only by the bus policy. */
        sd_bus_message *msg = sd_bus_get_current_message(bus);
        if (msg) {
                Caller c;
                r = manager_caller_check(m, msg, &c, error);
                if (r < 0)
                        return r;
        }
        *found = p;
        return 1;
}

static int process_node_enumerator(sd_bus *bus, const char *path, void *userdata, char ***nodes,
                                   sd_bus_error *error) {
        Manager *m = userdata;
        size_t n = 0, total = 0, state = 0;
        Sandbox *s = NULL;

        while (hashmap_iterate(m->sandboxes, &state, (void **) &s, NULL))
                total += s->n_processes;
        char **l = calloc(total + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        state = 0;
        while (hashmap_iterate(m->sandboxes, &state, (void **) &s, NULL))
                for (Process *p = s->processes; p && n < total; p = p->next) {
                        if (p->state == PROCESS_STARTING)
                                continue;
                        l[n] = process_bus_path(p);
                        if (!l[n]) {
                                strv_free(l);
                                return -ENOMEM;
                        }
                        n++;
                }
        *nodes = l;
        return 1;
}

static int property_id(sd_bus *bus, const char *path, const char *interface, const char *property,
                       sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Process *p = userdata;
        return sd_bus_message_append(reply, "s", p->id);
}

static int property_sandbox(sd_bus *bus, const char *path, const char *interface, const char *property,
                            sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Process *p = userdata;
        return sd_bus_message_append(reply, "s", p->session_id);
}

static int property_argv(sd_bus *bus, const char *path, const char *interface, const char *property,
                         sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Process *p = userdata;
        return sd_bus_message_append_strv(reply, p->argv);
}

static int property_state(sd_bus *bus, const char *path, const char *interface, const char *property,
                          sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Process *p = userdata;
        return sd_bus_message_append(reply, "s", process_state_to_string(p->state));
}

static int property_pid(sd_bus *bus, const char *path, const char *interface, const char *property,
                        sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Process *p = userdata;
        return sd_bus_message_append(reply, "u", (uint32_t) p->ns_pid);
}

static int property_exit_code(sd_bus *bus, const char *path, const char *interface, const char *property,
                              sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Process *p = userdata;
        /* -1 while it runs */
        return sd_bus_message_append(reply, "i", p->state == PROCESS_RUNNING ? -1 : p->exit_code);
}

static int property_unit(sd_bus *bus, const char *path, const char *interface, const char *property,
                         sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Process *p = userdata;
        return sd_bus_message_append(reply, "s", p->child.unit);
}

static const sd_bus_vtable process_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Id", "s", property_id, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Sandbox", "s", property_sandbox, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Argv", "as", property_argv, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("State", "s", property_state, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Pid", "u", property_pid, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("StartedAt", "t", NULL, offsetof(Process, started_at), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("ExitCode", "i", property_exit_code, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Unit", "s", property_unit, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_VTABLE_END,
};

void process_emit_changed(Process *p) {
        _cleanup_free_ char *path = NULL;

        /* Only while its sandbox is on the bus: afterwards its object is gone. */
        if (!p->sandbox || !p->manager->bus)
                return;
        path = process_bus_path(p);
        if (path)
                (void) sd_bus_emit_properties_changed(p->manager->bus, path, SANDBOXD_PROCESS_INTERFACE, "State",
                                                      "ExitCode", NULL);
}

int process_bus_register(Manager *m) {
        int r;

        assert(m);
        assert(m->bus);
        r = sd_bus_add_fallback_vtable(m->bus, NULL, SANDBOXD_SANDBOX_PATH_PREFIX, SANDBOXD_PROCESS_INTERFACE,
                                       process_vtable, process_object_find, m);
        if (r < 0)
                return r;
        return sd_bus_add_node_enumerator(m->bus, NULL, SANDBOXD_SANDBOX_PATH_PREFIX, process_node_enumerator, m);
}
