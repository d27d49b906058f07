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

/* Terminal sizes outside these are refused: a winsize holds 16 bits, and no real terminal is wider. */
#define SHELL_COLS_MAX     1000
#define SHELL_ROWS_MAX     1000
#define SHELL_COLS_DEFAULT 80
#define SHELL_ROWS_DEFAULT 24
#define SHELL_TERM_MAX     64
/* Open shells per sandbox: each holds fds in sandboxd and a session in the sandbox. */
#define SHELL_MAX_PER_SANDBOX 16

typedef struct ShellSpec {
        unsigned cols, rows;
        const char *term;     /* TERM in the shell; NULL: xterm-256color */
        const Caller *caller; /* for the audit row */
        uint64_t started_at;  /* when the call came in, µs since the epoch */
        uid_t opener;         /* may resize and wait for it (and root) */
} ShellSpec;

bool shell_size_is_valid(unsigned cols, unsigned rows);

/* A TERM value we pass on: 1-64 characters of A-Z a-z 0-9 . _ + -. */
bool shell_term_is_valid(const char *term);

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
