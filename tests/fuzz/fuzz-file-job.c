/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzzes file_job_decode(): whatever the bytes, a job comes out whole or not at all, and re-encodes. */
#include "file-helper.h"
#include "fuzz.h"

static bool string_ok(const char *s, const uint8_t *data, size_t size) {
        /* absent, or NUL-terminated inside the buffer */
        return !s || ((const uint8_t *) s >= data && (const uint8_t *) s + strlen(s) < data + size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        FileJob job, again;
        ToolBuf b = {};

        if (file_job_decode(data, size, &job) < 0)
                return 0;
        FUZZ_ASSERT((unsigned) job.kind < _FILE_JOB_KIND_MAX);
        FUZZ_ASSERT(job.path && string_ok(job.path, data, size));
        FUZZ_ASSERT(string_ok(job.pattern, data, size) && string_ok(job.glob, data, size));
        FUZZ_ASSERT(!job.data == (job.size == 0) && !job.data2 == (job.size2 == 0));
        /* What decodes encodes to the same bytes (nothing is lost or invented on the way). */
        FUZZ_ASSERT(file_job_encode(&job, &b) >= 0);
        FUZZ_ASSERT(b.size == size && memcmp(b.data, data, size) == 0);
        FUZZ_ASSERT(file_job_decode(b.data, b.size, &again) >= 0);
        FUZZ_ASSERT(again.kind == job.kind && strcmp(again.path, job.path) == 0);
        tool_buf_free(&b);
        return 0;
}
