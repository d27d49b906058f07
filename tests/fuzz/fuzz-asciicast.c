/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes the takeover recorder (asciicast.c) with what a sandbox's shell prints, which is anybody's bytes:
 * split anywhere, not UTF-8, interleaved with resizes, against a small cap. Input: a byte for the cap,
 * then ops: "o" u8 n + n bytes of output; "r" u16 cols + u16 rows; anything else ends. Every line of
 * the recording must be valid JSON of the asciicast v2 shape, the recording within its cap, and the
 * output, when it was UTF-8 and not cut, exactly what was printed. */
#include <json-c/json.h>

#include "asciicast.h"
#include "fuzz.h"
#include "macro.h"
#include "utf8-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Asciicast a = ASCIICAST_INIT;
        uint8_t *printed = NULL, *seen = NULL;
        size_t n_printed = 0, n_seen = 0, max;
        uint64_t t = 0;

        if (size < 1)
                return 0;
        max = ASCIICAST_MIN_MAX + (size_t) data[0] * 64;
        data++, size--;
        if (asciicast_start(&a, max, 80, 24, 1800000000, "xterm", "/bin/sh", "fuzz") < 0)
                return 0;
        printed = malloc(size + 1);
        seen = malloc(size * 3 + 16); /* each byte decodes to at most U+FFFD's three */
        FUZZ_ASSERT(printed && seen);

        while (size > 0) {
                uint8_t op = data[0];
                data++, size--;
                t += 1000 * op;
                if (op == 'o' && size >= 1) {
                        size_t n = MIN((size_t) data[0], size - 1);
                        asciicast_output(&a, t, data + 1, n);
                        memcpy(printed + n_printed, data + 1, n);
                        n_printed += n;
                        data += 1 + n, size -= 1 + n;
                } else if (op == 'r' && size >= 4) {
                        asciicast_resize(&a, t, (unsigned) (data[0] | data[1] << 8),
                                         (unsigned) (data[2] | data[3] << 8));
                        data += 4, size -= 4;
                } else
                        break;
        }
        asciicast_finish(&a, t);

        FUZZ_ASSERT(a.len <= max);
        FUZZ_ASSERT(a.buf && !memchr(a.buf, 0, a.len)); /* text: a NUL is escaped */
        char *text = fuzz_strndup((const uint8_t *) a.buf, a.len);
        FUZZ_ASSERT(text);
        bool marker = false;
        size_t lineno = 0;
        for (char *line = text, *nl; *line; line = nl + 1, lineno++) {
                nl = strchr(line, '\n');
                FUZZ_ASSERT(nl); /* every line ends */
                json_tokener *tok = json_tokener_new();
                json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
                json_object *o = json_tokener_parse_ex(tok, line, (int) (nl - line));
                FUZZ_ASSERT(o && json_tokener_get_error(tok) == json_tokener_success);
                json_tokener_free(tok);
                if (lineno == 0)
                        FUZZ_ASSERT(json_object_is_type(o, json_type_object));
                else {
                        FUZZ_ASSERT(!marker); /* nothing after the truncation marker */
                        FUZZ_ASSERT(json_object_is_type(o, json_type_array) &&
                                    json_object_array_length(o) == 3);
                        const char *kind = json_object_get_string(json_object_array_get_idx(o, 1));
                        json_object *d = json_object_array_get_idx(o, 2);
                        FUZZ_ASSERT(kind && json_object_is_type(d, json_type_string));
                        if (streq(kind, "o")) {
                                size_t k = (size_t) json_object_get_string_len(d);
                                if (n_seen + k <= n_printed * 3 + 16) {
                                        memcpy(seen + n_seen, json_object_get_string(d), k);
                                        n_seen += k;
                                }
                        } else if (streq(kind, "m"))
                                marker = true;
                        else
                                FUZZ_ASSERT(streq(kind, "r"));
                }
                json_object_put(o);
        }
        FUZZ_ASSERT(marker == a.truncated);
        if (!a.truncated && utf8_is_valid(printed, n_printed))
                FUZZ_ASSERT(n_seen == n_printed && memcmp(seen, printed, n_printed) == 0);

        asciicast_done(&a);
        free(text);
        free(printed);
        free(seen);
        return 0;
}
