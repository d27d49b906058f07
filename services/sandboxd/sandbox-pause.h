/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Pausing a sandbox (issue 26): its slice frozen and thawed as one, its TTL and its commands' timeouts held.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include "caller.h"

typedef struct Sandbox Sandbox;

/* Freezes every process of the sandbox (its slice's cgroup2 cgroup.freeze), stores it as paused and holds
 * its TTL and its running commands' deadlines. request (may be NULL) is answered once the kernel reports
 * the slice frozen (or after a bound, should a process sit in an uninterruptible sleep). A paused sandbox:
 * answered at once, nothing changes. reason: "request", "idle". Negative errno with nothing changed. */
int sandbox_pause(Sandbox *s, const Caller *c, const char *reason, sd_bus_message *request);

/* Thaws it, and moves its expiry and its commands' deadlines out by the time it was paused. reason:
 * "request", or the operation that resumed it (AutoResume=). A running sandbox: nothing changes, 0. */
int sandbox_resume(Sandbox *s, const Caller *c, const char *reason);

/* At start-up: for a sandbox the store has as paused (paused_at > 0) the slice frozen (again), no TTL
 * timer; for one it has as running, a slice that a pause cut short left frozen is thawed. */
int sandbox_pause_adopt(Sandbox *s, uint64_t paused_at, uint64_t ttl_left);

/* IdlePauseSec=: a call names the sandbox, or work in it ended. */
void sandbox_touch(Sandbox *s);
/* Arms its idle timer, if its type has IdlePauseSec=. */
void sandbox_idle_arm(Sandbox *s);

/* Snapshots: the slice frozen for a moment without pausing the sandbox (nothing on the bus changes). cb
 * runs once the kernel reports it frozen (status 0), or with -ETIMEDOUT if it is not after the bound (a
 * process in an uninterruptible sleep), or with -ESRCH if the sandbox goes first. Every hold that succeeded is released once: the last release thaws the slice unless
 * the sandbox is paused meanwhile. A ResumeSandbox during a hold leaves the thaw to the release. */
typedef void (*sandbox_frozen_t)(void *userdata, int status);
int sandbox_freeze_hold(Sandbox *s, sandbox_frozen_t cb, void *userdata);
void sandbox_freeze_release(Sandbox *s);

/* In sandbox_free(): answers waiting PauseSandbox calls, drops the timers. */
void sandbox_pause_free(Sandbox *s);

/* The cgroup2 file of the sandbox's slice, e.g. "cgroup.freeze", in buf. */
void sandbox_slice_cgroup_file(const Sandbox *s, const char *file, char *buf, size_t size);
