/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A terminal session recorded as asciicast v2 (a JSON header line, then one JSON array per event), capped.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The recording never grows past max bytes. When the next event would not fit, a marker event
 * ([t, "m", "truncated: ..."]) is written in the room kept for it, and nothing after it. Output bytes
 * need not be valid UTF-8 nor arrive in whole characters: a character split across two chunks is
 * joined, and bytes that are not UTF-8 become U+FFFD, so every line is valid JSON. */
typedef struct Asciicast {
        char *buf;
        size_t len;
        size_t max;
        bool truncated;
        unsigned char carry[4]; /* the start of a character whose rest comes with the next chunk */
        size_t carry_len;
} Asciicast;

#define ASCIICAST_INIT \
        { .buf = NULL }

/* Room a recording needs at least: the header and the truncation marker. */
#define ASCIICAST_MIN_MAX 1024

/* Writes the header: {"version": 2, "width", "height", "timestamp" (s since the epoch), "env": {"TERM",
 * "SHELL"}, "title"}. term, shell and title may be NULL (left out). -EINVAL if max is below
 * ASCIICAST_MIN_MAX or the size is 0; -ENOMEM. */
int asciicast_start(Asciicast *a, size_t max, unsigned cols, unsigned rows, uint64_t timestamp,
                    const char *term, const char *shell, const char *title);

/* [elapsed, "o", data]: what the terminal showed. */
void asciicast_output(Asciicast *a, uint64_t elapsed_usec, const void *data, size_t n);

/* [elapsed, "r", "COLSxROWS"]: the terminal was resized. */
void asciicast_resize(Asciicast *a, uint64_t elapsed_usec, unsigned cols, unsigned rows);

/* Writes out a character left incomplete at the end (as U+FFFD). */
void asciicast_finish(Asciicast *a, uint64_t elapsed_usec);

void asciicast_done(Asciicast *a);

/* Appends s (n bytes, any bytes) as a JSON string, quotes included, to dst (which has room for
 * asciicast_json_string_max(n) bytes); returns the bytes written. Incomplete UTF-8 at the end is
 * encoded as U+FFFD unless ret_incomplete is given, which then gets how many trailing bytes were left
 * out because they may begin a character completed by more input. */
size_t asciicast_json_string(char *dst, const unsigned char *s, size_t n, size_t *ret_incomplete);
#define asciicast_json_string_max(n) ((n) *6 + 2)
