/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Small helpers every module uses: cleanup attributes, ownership transfer, array sizes. */
#pragma once

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _public_ __attribute__((visibility("default")))
#define _unused_ __attribute__((unused))
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _likely_(x) (__builtin_expect(!!(x), 1))
#define _unlikely_(x) (__builtin_expect(!!(x), 0))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_ __attribute__((noreturn))
#define _warn_unused_result_ __attribute__((warn_unused_result))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
/* The struct that member ptr is the field member of. */
#define container_of(ptr, type, member) ((type *) (void *) ((char *) (ptr) - offsetof(type, member)))
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

#define USEC_PER_SEC ((uint64_t) 1000000ULL)
#define USEC_PER_MSEC ((uint64_t) 1000ULL)
#define NSEC_PER_USEC ((uint64_t) 1000ULL)

/* Hand the value to the caller and leave NULL (or -EBADF) behind, so the cleanup does nothing. */
#define TAKE_PTR(p)                                                                                         \
        ({                                                                                                  \
                __typeof__(p) _p_ = (p);                                                                    \
                (p) = NULL;                                                                                 \
                _p_;                                                                                        \
        })
#define TAKE_FD(fd)                                                                                         \
        ({                                                                                                  \
                int _fd_ = (fd);                                                                            \
                (fd) = -EBADF;                                                                              \
                _fd_;                                                                                       \
        })

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -EBADF;
}
static inline void closep(int *fd) {
        safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void close_pairp(int (*p)[2]) {
        safe_close((*p)[0]);
        safe_close((*p)[1]);
}
#define _cleanup_close_pair_ _cleanup_(close_pairp)

static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

static inline void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

static inline void strv_free(char **l) {
        if (!l)
                return;
        for (char **i = l; *i; i++)
                free(*i);
        free(l);
}
static inline void strv_freep(char ***l) {
        strv_free(*l);
}
#define _cleanup_strv_free_ _cleanup_(strv_freep)

/* A deep copy of a NULL-terminated string array (NULL for NULL or on OOM). */
static inline char **strv_copy(char *const *l) {
        size_t n = 0;
        if (!l)
                return NULL;
        while (l[n])
                n++;
        char **c = calloc(n + 1, sizeof(char *));
        if (!c)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (!(c[i] = strdup(l[i]))) {
                        strv_free(c);
                        return NULL;
                }
        return c;
}

/* For types whose free or unref function accepts NULL and returns NULL. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                                             \
        static inline void func##p(type *p) {                                                               \
                if (*p)                                                                                     \
                        *p = func(*p);                                                                      \
        }

static inline const char *strempty(const char *s) {
        return s ?: "";
}
static inline const char *strna(const char *s) {
        return s ?: "n/a";
}
static inline int streq_ptr(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return strcmp(a, b) == 0;
}
#define streq(a, b) (strcmp((a), (b)) == 0)
#define isempty(s) (!(s) || !(s)[0])

/* Enum <-> string tables: NAME_to_string(v) and NAME_from_string(s) (negative errno if unknown). */
#define DEFINE_STRING_TABLE(name, type, max)                                                                \
        const char *name##_to_string(type v) {                                                              \
                if ((int) v < 0 || (size_t) v >= ELEMENTSOF(name##_table))                                  \
                        return NULL;                                                                        \
                return name##_table[v];                                                                     \
        }                                                                                                   \
        type name##_from_string(const char *s) {                                                            \
                if (!s)                                                                                     \
                        return (type) - EINVAL;                                                             \
                for (size_t i = 0; i < ELEMENTSOF(name##_table); i++)                                       \
                        if (name##_table[i] && streq(name##_table[i], s))                                   \
                                return (type) i;                                                            \
                return (type) - EINVAL;                                                                     \
        }
#define DECLARE_STRING_TABLE(name, type)                                                                    \
        const char *name##_to_string(type v);                                                               \
        type name##_from_string(const char *s)
