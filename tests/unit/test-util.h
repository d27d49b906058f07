/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What every unit test shares: CHECK macros that count failures, a scratch directory, and the verdict. */
#pragma once

#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Each test is one program, so one counter per program. */
static int failures = 0;

#define CHECK(expr)                                                                                         \
        do {                                                                                                \
                if (!(expr)) {                                                                              \
                        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #expr);            \
                        failures++;                                                                         \
                }                                                                                           \
        } while (0)

#define CHECK_U64(a, b)                                                                                     \
        do {                                                                                                \
                uint64_t _a = (a), _b = (b);                                                                \
                if (_a != _b) {                                                                             \
                        fprintf(stderr, "%s:%d: %s is %" PRIu64 ", expected %" PRIu64 "\n", __FILE__,       \
                                __LINE__, #a, _a, _b);                                                      \
                        failures++;                                                                         \
                }                                                                                           \
        } while (0)

#define CHECK_INT(a, b)                                                                                     \
        do {                                                                                                \
                long long _a = (a), _b = (b);                                                               \
                if (_a != _b) {                                                                             \
                        fprintf(stderr, "%s:%d: %s is %lld, expected %lld\n", __FILE__, __LINE__, #a, _a,   \
                                _b);                                                                        \
                        failures++;                                                                         \
                }                                                                                           \
        } while (0)

#define CHECK_STR(a, b)                                                                                     \
        do {                                                                                                \
                const char *_a = (a), *_b = (b);                                                            \
                if (_a != _b && (!_a || !_b || strcmp(_a, _b) != 0)) { /* NULL equals only NULL */         \
                        fprintf(stderr, "%s:%d: %s is \"%s\"\n    expected \"%s\"\n", __FILE__, __LINE__,   \
                                #a, _a ?: "(null)", _b ?: "(null)");                                        \
                        failures++;                                                                         \
                }                                                                                           \
        } while (0)

static inline int test_remove_one_(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
        (void) st, (void) flag, (void) ftw;
        return remove(p);
}

/* Removes a scratch tree without following symlinks in it. */
static inline void test_rm_rf(const char *path) {
        (void) nftw(path, test_remove_one_, 16, FTW_DEPTH | FTW_PHYS);
}

/* mkdtemp() that ends the test on failure: template is like "/tmp/test-foo.XXXXXX". */
static inline void test_mkdtemp(char *template) {
        if (!mkdtemp(template)) {
                perror("mkdtemp");
                exit(EXIT_FAILURE);
        }
}

/* The verdict, as main()'s return value. */
static inline int test_finish(const char *name) {
        if (failures > 0) {
                fprintf(stderr, "%s: %d check(s) failed\n", name, failures);
                return EXIT_FAILURE;
        }
        printf("%s: all checks passed\n", name);
        return EXIT_SUCCESS;
}
