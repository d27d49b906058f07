/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One command in a sandbox: its scope, its confinement, its output and its result. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

typedef struct Sandbox Sandbox;
typedef struct Exec Exec;
typedef struct Caller Caller;

typedef struct ExecSpec {
        char **argv;
        char **env;              /* extra KEY=VALUE, validated */
        const char *cwd;         /* NULL: the home */
        const void *stdin_data;
        size_t stdin_size;
        uint64_t timeout_usec;
        uint64_t memory_max;
        uint64_t tasks_max;
        int stdout_fd, stderr_fd;   /* caller's fds for streaming, or -1 */
        int cancel_fd;              /* caller's pipe or socket: its hang-up cancels the command; or -1 */
        const Caller *caller;       /* for the audit row */
        uint64_t started_at;        /* when the call came in, µs since the epoch */
} ExecSpec;

/* Starts the command; the reply to request is sent when it has exited. Without a warm scope ready
 * for these limits, the call waits for a scope made for it (keeping its own copy of spec, and
 * request). */
int exec_start(Sandbox *s, const ExecSpec *spec, sd_bus_message *request);

/* The sandbox is going away: forget it, but keep waiting for the process. */
void exec_detach_all(Sandbox *s);

/* Issue 26: the sandbox is paused (hold: the running commands' deadline timers stop) or resumed after
 * paused_usec (their deadlines move out by that much and the timers run again). */
void exec_hold_deadlines(Sandbox *s, bool hold, uint64_t paused_usec);

/* The environment of a command of s: the sandbox's defaults (PATH, HOME, USER, …), with extra's
 * KEY=VALUE entries added or overriding them. NULL on ENOMEM. StartProcess's too. */
char **exec_build_env(Sandbox *s, char **extra);
