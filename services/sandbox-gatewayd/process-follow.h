/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* GET …/processes/{p}/output?follow=true: a process's output as SSE, live, resumable by offset. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gatewayd-manager.h"

typedef struct Request Request;

/* A position in both streams: an SSE event id, a Last-Event-ID, or the follow's offset= parameter.
 * Written "<stdout offset>:<stderr offset>"; a single number is that offset for each stream. */
#define FOLLOW_POSITION_MAX (2 * 20 + 2)
int follow_position_parse(const char *s, uint64_t ret[2]);
void follow_position_format(const uint64_t pos[2], char buf[static FOLLOW_POSITION_MAX]);

/* Which streams a follow sends (bits: 1 << 0 stdout, 1 << 1 stderr). */
#define FOLLOW_STDOUT 1u
#define FOLLOW_STDERR 2u

/* Makes the request (its key's stream acquired) a follow of process's streams from pos on: attaches to
 * them (AttachProcessOutput), answers a failure there as the JSON read would, else starts the SSE answer.
 * The follow goes with the client (its fds at once). Returns 0 or a negative errno. */
int follow_start(Request *r, const char *process, unsigned streams, const uint64_t pos[2], bool base64);

/* The heartbeat: a comment on every follow's stream. Returns how many there are. */
size_t follows_heartbeat(Manager *m);
