/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The file tools on the bus (FileCreate, View, …, Grep), each call a job for the sandbox's file helper. */
#pragma once

#include <systemd/sd-bus.h>

#include "sandboxd-bus.h"

typedef struct Sandbox Sandbox;

int vt_tool_file_create(sd_bus_message *msg, void *userdata, sd_bus_error *error);
int vt_tool_view(sd_bus_message *msg, void *userdata, sd_bus_error *error);
int vt_tool_str_replace(sd_bus_message *msg, void *userdata, sd_bus_error *error);
int vt_tool_insert(sd_bus_message *msg, void *userdata, sd_bus_error *error);
int vt_tool_ls(sd_bus_message *msg, void *userdata, sd_bus_error *error);
int vt_tool_glob(sd_bus_message *msg, void *userdata, sd_bus_error *error);
int vt_tool_grep(sd_bus_message *msg, void *userdata, sd_bus_error *error);

/* The Manager's vtable entries, documented in dbus/org.sandboxd.sandbox1.xml. */
#define SANDBOX_TOOLS_METHODS                                                                                \
        SD_BUS_METHOD_WITH_ARGS("FileCreate", SD_BUS_ARGS("s", id, "s", path, "ay", content, "a{sv}", options), \
                                SD_BUS_RESULT("a{sv}", info), vt_tool_file_create, SD_BUS_VTABLE_UNPRIVILEGED), \
        SD_BUS_METHOD_WITH_ARGS("View", SD_BUS_ARGS("s", id, "s", path, "a{sv}", options),                   \
                                SD_BUS_RESULT("ay", text, "a{sv}", info), vt_tool_view,                      \
                                SD_BUS_VTABLE_UNPRIVILEGED),                                                 \
        SD_BUS_METHOD_WITH_ARGS("StrReplace",                                                                \
                                SD_BUS_ARGS("s", id, "s", path, "ay", old, "ay", new, "a{sv}", options),     \
                                SD_BUS_RESULT("a{sv}", info), vt_tool_str_replace, SD_BUS_VTABLE_UNPRIVILEGED), \
        SD_BUS_METHOD_WITH_ARGS("Insert", SD_BUS_ARGS("s", id, "s", path, "u", line, "ay", text, "a{sv}", options), \
                                SD_BUS_RESULT("a{sv}", info), vt_tool_insert, SD_BUS_VTABLE_UNPRIVILEGED),   \
        SD_BUS_METHOD_WITH_ARGS("Ls", SD_BUS_ARGS("s", id, "s", path, "a{sv}", options),                     \
                                SD_BUS_RESULT("a(aysutt)", entries, "a{sv}", info), vt_tool_ls,              \
                                SD_BUS_VTABLE_UNPRIVILEGED),                                                 \
        SD_BUS_METHOD_WITH_ARGS("Glob", SD_BUS_ARGS("s", id, "s", pattern, "a{sv}", options),                \
                                SD_BUS_RESULT("aay", paths, "a{sv}", info), vt_tool_glob,                    \
                                SD_BUS_VTABLE_UNPRIVILEGED),                                                 \
        SD_BUS_METHOD_WITH_ARGS("Grep", SD_BUS_ARGS("s", id, "s", pattern, "a{sv}", options),                \
                                SD_BUS_RESULT("a(ayuay)", matches, "a{sv}", info), vt_tool_grep,             \
                                SD_BUS_VTABLE_UNPRIVILEGED)
