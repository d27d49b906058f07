/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Human takeover: a login shell in a sandbox on a PTY that sandboxd relays, records and hangs up. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include "sandboxd-bus.h"

typedef struct Manager Manager;
typedef struct Sandbox Sandbox;
typedef struct Caller Caller;
typedef struct Shell Shell;

typedef struct ShellSpec {
        unsigned cols, rows;
        const char *term;     /* TERM in the shell; NULL: xterm-256color */
        const Caller *caller; /* for the audit row */
        uint64_t started_at;  /* when the call came in, µs since the epoch */
        uid_t opener;         /* may resize and wait for it (and root) */
} ShellSpec;

/* Starts a login shell in the sandbox on a fresh PTY in its own scope. request gets (h stream, s unit)
 * once the shell is confined and in its scope, or an error. -EUSERS: SHELL_MAX_PER_SANDBOX are open. */
int shell_open(Sandbox *s, const ShellSpec *spec, sd_bus_message *request);

/* -ENOENT: no such shell (or not the caller's); -ESRCH: it has ended. */
int shell_resize(Manager *m, const char *unit, uid_t caller, unsigned cols, unsigned rows);

/* request gets (i exit_code, a{sv} info) when the shell has ended (now, if it has). Results are kept a
 * minute after the end. -ENOENT: no such shell (or not the caller's). */
int shell_wait(Manager *m, const char *unit, uid_t caller, sd_bus_message *request);

/* At exit: hangs up every shell and forgets them. */
void shell_free_all(Manager *m);

/* Issue 26: the shells of sandbox id that have not ended. */
unsigned shell_count_open(Manager *m, const char *id);
