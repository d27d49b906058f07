/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes utf8_sanitize(): whatever the bytes, the result is valid UTF-8 of the length it claims. */
#include "fuzz.h"
#include "utf8-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Utf8SanitizeFlags flags;
        size_t len = 0, consumed = 0;
        char *s = NULL;

        if (size < 1)
                return 0;
        /* The first byte picks the flags, the rest is the text. */
        flags = data[0] & (UTF8_KEEP_TAIL | UTF8_REPLACE_NUL);
        data++, size--;

        if (utf8_sanitize(data, size, flags, &s, &len, &consumed) < 0)
                return 0;
        FUZZ_ASSERT(s);
        FUZZ_ASSERT(s[len] == 0);
        FUZZ_ASSERT(utf8_is_valid((const uint8_t *) s, len));
        FUZZ_ASSERT(consumed <= size);
        if (!(flags & UTF8_KEEP_TAIL))
                FUZZ_ASSERT(consumed == size);
        if (flags & UTF8_REPLACE_NUL)
                FUZZ_ASSERT(strlen(s) == len);
        /* Valid input comes back unchanged. */
        if (utf8_is_valid(data, size) && !(flags & UTF8_REPLACE_NUL))
                FUZZ_ASSERT(len == size && memcmp(s, data, size) == 0);
        free(s);
        return 0;
}
