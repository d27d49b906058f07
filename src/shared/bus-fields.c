/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An a{sv} of named, typed fields: the loop the logger's rows and the gateway's key specs share. */

#include "bus-fields.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"

int bus_read_fields(sd_bus_message *msg, const BusField *fields, size_t n_fields, const char *what,
                    const char *expected, bus_field_read_t read, void *userdata, unsigned *ret_seen,
                    sd_bus_error *error) {
        unsigned seen = 0;
        int r;

        if (n_fields > 32)
                return -EINVAL;
        r = sd_bus_message_enter_container(msg, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(msg, 'e', "sv")) > 0) {
                const char *key, *contents;
                size_t f;

                r = sd_bus_message_read(msg, "s", &key);
                if (r < 0)
                        return r;
                for (f = 0; f < n_fields; f++)
                        if (strcmp(key, fields[f].name) == 0)
                                break;
                if (f == n_fields) {
                        char lower[64];
                        size_t i;
                        for (i = 0; what[i] && i < sizeof(lower) - 1; i++)
                                lower[i] = (char) tolower((unsigned char) what[i]);
                        lower[i] = 0;
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Unknown %s field '%s'%s.", lower,
                                                 key, expected ?: "");
                }
                if (seen & (1u << f))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "%s field '%s' is given twice.",
                                                 what, key);
                seen |= 1u << f;
                r = sd_bus_message_peek_type(msg, NULL, &contents);
                if (r < 0)
                        return r;
                if (strcmp(contents, fields[f].signature) != 0)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "%s field '%s' must be of type '%s', not '%s'.", what, key,
                                                 fields[f].signature, contents);
                r = read(f, key, msg, userdata, error);
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(msg);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(msg);
        if (r < 0)
                return r;
        if (ret_seen)
                *ret_seen = seen;
        return 0;
}
