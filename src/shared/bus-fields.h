/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Reading an a{sv} of named, typed fields, with the errors a caller of a bus method should get. */

#include <stddef.h>
#include <systemd/sd-bus.h>

/* Called with the message at an entry's variant, which it reads (whole: the caller then leaves the
 * entry). */
typedef int (*bus_sv_entry_t)(const char *key, sd_bus_message *msg, void *userdata, sd_bus_error *error);

/* entry() for each entry of the a{sv} at msg, in order, stopping at its first error. */
int bus_foreach_sv(sd_bus_message *msg, bus_sv_entry_t entry, void *userdata, sd_bus_error *error);

typedef struct BusField {
        const char *name;
        const char *signature; /* of the variant's contents */
} BusField;

/* Called with the message at the variant of fields[i] (of the right signature): reads it. */
typedef int (*bus_field_read_t)(size_t i, const char *key, sd_bus_message *msg, void *userdata, sd_bus_error *error);

/* Reads the a{sv} at msg, entry by entry: a key that is none of fields' is InvalidArgs "Unknown <what>
 * field '<key>'<expected>." (what in lower case; expected, if not NULL, e.g. " (expected a, b)"), a key
 * given twice "<What> field '<key>' is given twice.", a variant of another type "<What> field '<key>'
 * must be of type '<sig>', not '<sig>'."; otherwise read() reads the variant. *ret_seen (if not NULL)
 * gets bit i set for each field given (at most 32 fields). Returns 0, or a negative errno (with error set
 * for bad input). */
int bus_read_fields(sd_bus_message *msg, const BusField *fields, size_t n_fields, const char *what,
                    const char *expected, bus_field_read_t read, void *userdata, unsigned *ret_seen,
                    sd_bus_error *error);
