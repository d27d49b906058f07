/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes the file tools' pure helpers on caller-given patterns and file contents: glob split and match,
 * line numbering of a range, line insertion, the UTF-8 copy. Input: "PATTERN\nPATH\n" then the file. */
#include "file-tools.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *pattern, *path, *base = NULL, *u;
        const char *rest = NULL;
        uint64_t start, end, n_lines;
        size_t first = 0;
        ToolBuf b = {};
        ToolResult res = {};

        pattern = fuzz_take_line(&data, &size);
        path = fuzz_take_line(&data, &size);
        if (!pattern || !path)
                goto finish;

        if (tool_glob_split(pattern, &base, &rest) >= 0) {
                FUZZ_ASSERT(base && rest);
                FUZZ_ASSERT(rest >= pattern && rest <= pattern + strlen(pattern));
                free(base);
        }
        (void) tool_glob_match(pattern, path);
        (void) tool_glob_match_dir(pattern, path);

        /* The remaining bytes are the file; the path's first bytes pick the line range. */
        n_lines = tool_count_lines(data, size);
        start = path[0] ? (uint8_t) path[0] % 8 : 0;
        end = path[0] && path[1] ? start + (uint8_t) path[1] % 8 : 0;
        if (tool_number_lines(data, size, start, end, 4096, &b, &res) >= 0)
                FUZZ_ASSERT(b.size <= 4096);
        tool_buf_free(&b);

        b = (ToolBuf) {};
        (void) tool_insert_lines(data, size, n_lines ? start % (n_lines + 2) : start, path, strlen(path), &b);
        tool_buf_free(&b);

        if (size > 0)
                FUZZ_ASSERT(tool_line_of_offset(data, size, size - 1) <= n_lines);
        (void) tool_is_binary(data, size);
        if (tool_count_occurrences(data, size, pattern, strlen(pattern), 16, &first) > 0)
                FUZZ_ASSERT(first + strlen(pattern) <= size);

        u = tool_utf8_sanitize(data, size);
        free(u);
finish:
        free(pattern);
        free(path);
        return 0;
}
