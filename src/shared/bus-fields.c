/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An a{sv} of named, typed fields: the loop the logger's rows and the gateway's key specs share. */

#include "bus-fields.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"

int bus_foreach_sv(sd_bus_message *msg, bus_sv_entry_t entry, void *userdata, sd_bus_error *error) {
        int r;

        r = sd_bus_message_enter_container(msg, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(msg, 'e', "sv")) > 0) {
                const char *key;

                r = sd_bus_message_read(msg, "s", &key);
                if (r < 0)
                        return r;
                r = entry(key, msg, userdata, error);
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(msg);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(msg);
        return r < 0 ? r : 0;
}

typedef struct FieldsReader {
        const BusField *fields;
        size_t n_fields;
        const char *what, *expected;
        bus_field_read_t read;
        void *userdata;
        unsigned seen;
} FieldsReader;

static int fields_entry(const char *key, sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        FieldsReader *fr = userdata;
        const char *contents;
        size_t f;
        int r;

        for (f = 0; f < fr->n_fields; f++)
                if (strcmp(key, fr->fields[f].name) == 0)
                        break;
        if (f == fr->n_fields) {
                char lower[64];
                size_t i;
                for (i = 0; fr->what[i] && i < sizeof(lower) - 1; i++)
                        lower[i] = (char) tolower((unsigned char) fr->what[i]);
                lower[i] = 0;
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Unknown %s field '%s'%s.", lower, key,
                                         fr->expected ?: "");
        }
        if (fr->seen & (1u << f))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "%s field '%s' is given twice.", fr->what,
                                         key);
        fr->seen |= 1u << f;
        r = sd_bus_message_peek_type(msg, NULL, &contents);
        if (r < 0)
                return r;
        if (strcmp(contents, fr->fields[f].signature) != 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "%s field '%s' must be of type '%s', not '%s'.",
                                         fr->what, key, fr->fields[f].signature, contents);
        return fr->read(f, key, msg, fr->userdata, error);
}

int bus_read_fields(sd_bus_message *msg, const BusField *fields, size_t n_fields, const char *what,
                    const char *expected, bus_field_read_t read, void *userdata, unsigned *ret_seen,
                    sd_bus_error *error) {
        FieldsReader fr = { .fields = fields, .n_fields = n_fields, .what = what, .expected = expected,
                            .read = read, .userdata = userdata };
        int r;

        if (n_fields > 32)
                return -EINVAL;
        r = bus_foreach_sv(msg, fields_entry, &fr, error);
        if (r < 0)
                return r;
        if (ret_seen)
                *ret_seen = fr.seen;
        return 0;
}
