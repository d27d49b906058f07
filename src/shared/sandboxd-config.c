/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd's configuration: built-in defaults, sandboxd.conf and its drop-ins, and sandbox types. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "macro.h"
#include "sandbox-id.h"
#include "sandboxd-config.h"
#include "time-util.h"

static const SandboxType builtin_types[] = {
        {
                .name = "small",
                .cpu_quota_percent = 100,
                .memory_max = UINT64_C(1) << 30,
                .tasks_max = 256,
                .max_timeout_usec = 1 * USEC_PER_HOUR,
                .default_timeout_usec = 20 * USEC_PER_SEC,
        },
        {
                .name = "medium",
                .cpu_quota_percent = 200,
                .memory_max = UINT64_C(4) << 30,
                .tasks_max = 1024,
                .max_timeout_usec = 6 * USEC_PER_HOUR,
                .default_timeout_usec = 60 * USEC_PER_SEC,
        },
        {
                .name = "large",
                .cpu_quota_percent = 400,
                .memory_max = UINT64_C(16) << 30,
                .tasks_max = 4096,
                .max_timeout_usec = 24 * USEC_PER_HOUR,
                .default_timeout_usec = 120 * USEC_PER_SEC,
        },
};

void sandboxd_config_defaults(SandboxdConfig *c) {
        *c = (SandboxdConfig) {
                .uid_min = SANDBOXD_UID_MIN_DEFAULT,
                .uid_max = SANDBOXD_UID_MAX_DEFAULT,
                .output_max = UINT64_C(1) << 20,
                .stdin_max = UINT64_C(16) << 20,
                .file_max = UINT64_C(16) << 20,
                .max_sandboxes = 4096,
                .default_ttl_usec = 1 * USEC_PER_HOUR,
                .max_ttl_usec = 7 * USEC_PER_DAY,
                .default_type = "small",
                .audit = true,
                .n_types = ELEMENTSOF(builtin_types),
        };
        memcpy(c->types, builtin_types, sizeof(builtin_types));
}

const SandboxType *sandboxd_config_find_type(const SandboxdConfig *c, const char *name) {
        if (!c)
                return NULL;
        if (isempty(name))
                name = c->default_type;

        for (size_t i = 0; i < c->n_types && i < SANDBOX_TYPES_MAX; i++)
                if (streq(c->types[i].name, name))
                        return &c->types[i];
        return NULL;
}

/* Where a setting was last made, so checks of the final result can point at a line. file == NULL means
 * the value is still the one load started from. Files are numbered in load order, so the later of two
 * locations is the greater (file_index, line). */
typedef struct Location {
        const char *file;
        size_t file_index;
        unsigned line;
} Location;

typedef struct TypeLocations {
        Location max_timeout, default_timeout;
} TypeLocations;

typedef struct Loader {
        SandboxdConfig c;
        size_t file_index;
        Location uid_min, uid_max, max_sandboxes, default_ttl, max_ttl, default_type;
        TypeLocations types[SANDBOX_TYPES_MAX];
        char **error;
} Loader;

typedef enum Section {
        SECTION_NONE,
        SECTION_MANAGER,
        SECTION_TYPE,
} Section;

static const Location *location_later(const Location *a, const Location *b) {
        if (!a->file)
                return b;
        if (!b->file)
                return a;
        if (a->file_index != b->file_index)
                return a->file_index > b->file_index ? a : b;
        return a->line > b->line ? a : b;
}

/* Always returns -EINVAL (or -ENOMEM if the message itself cannot be built), so callers can
 * "return config_error(...)". */
_printf_(4, 5) static int config_error(Loader *l, const char *file, unsigned line, const char *fmt, ...) {
        _cleanup_free_ char *what = NULL;
        char *msg;
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&what, fmt, ap);
        va_end(ap);
        if (k < 0) {
                what = NULL;
                return -ENOMEM;
        }

        if (!l->error)
                return -EINVAL;

        if (file)
                k = asprintf(&msg, "%s:%u: %s", file, line, what);
        else
                /* Only reachable if the caller's starting configuration was already inconsistent. */
                k = asprintf(&msg, "initial configuration: %s", what);
        if (k < 0)
                return -ENOMEM;

        *l->error = msg;
        return -EINVAL;
}

static int io_error(Loader *l, const char *file, int error, const char *what) {
        char *msg;

        if (l->error) {
                if (asprintf(&msg, "%s: %s: %s", file, what, strerror(error)) < 0)
                        return -ENOMEM;
                *l->error = msg;
        }
        return -error;
}

static bool is_blank(char c) {
        return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

static char *strip(char *s) {
        size_t n;

        while (is_blank(*s))
                s++;
        n = strlen(s);
        while (n > 0 && is_blank(s[n - 1]))
                s[--n] = 0;
        return s;
}

/* Plain decimal, no sign, no suffix: strtoull() would accept "-1", " 1" and "0x10". */
static int parse_decimal(const char *s, uint64_t *ret) {
        uint64_t v = 0;

        if (isempty(s))
                return -EINVAL;
        for (; *s; s++) {
                if (*s < '0' || *s > '9')
                        return -EINVAL;
                if (v > (UINT64_MAX - (uint64_t) (*s - '0')) / 10)
                        return -ERANGE;
                v = v * 10 + (uint64_t) (*s - '0');
        }
        *ret = v;
        return 0;
}

static int parse_uid(const char *s, uid_t *ret) {
        uint64_t v;
        int r;

        r = parse_decimal(s, &v);
        if (r < 0)
                return r;
        /* (uid_t) -1 means "no uid" to every syscall that takes one. */
        if (v >= UINT32_MAX)
                return -ERANGE;

        *ret = (uid_t) v;
        return 0;
}

static void set_location(Loader *l, Location *loc, const char *file, unsigned line) {
        *loc = (Location) { .file = file, .file_index = l->file_index, .line = line };
}

static int bad_value(Loader *l, const char *file, unsigned line, const char *key, const char *value, int r,
                     const char *expected) {
        return config_error(l, file, line, "Invalid %s=%s: %s (expected %s)", key, value,
                            r == -ERANGE ? "out of range" : "not understood", expected);
}

static int manager_assignment(Loader *l, const char *file, unsigned line, const char *key,
                              const char *value) {
        SandboxdConfig *c = &l->c;
        uint64_t v;
        int r;

        if (streq(key, "UidMin") || streq(key, "UidMax")) {
                bool is_min = streq(key, "UidMin");
                uid_t uid;

                r = parse_uid(value, &uid);
                if (r < 0)
                        return bad_value(l, file, line, key, value, r, "a uid below 4294967295");
                *(is_min ? &c->uid_min : &c->uid_max) = uid;
                set_location(l, is_min ? &l->uid_min : &l->uid_max, file, line);
                return 0;
        }

        uint64_t *size_target = streq(key, "OutputMax") ? &c->output_max
                                : streq(key, "StdinMax") ? &c->stdin_max
                                : streq(key, "FileMax")  ? &c->file_max
                                                         : NULL;
        if (size_target) {
                r = parse_size(value, &v);
                if (r < 0)
                        return bad_value(l, file, line, key, value, r,
                                         "a size such as 1048576, 64K, 1M, 1G");
                *size_target = v;
                return 0;
        }

        if (streq(key, "MaxSandboxes")) {
                r = parse_decimal(value, &v);
                if (r >= 0 && v == 0)
                        r = -ERANGE;
                if (r < 0)
                        return bad_value(l, file, line, key, value, r, "a number of at least 1");
                c->max_sandboxes = v;
                set_location(l, &l->max_sandboxes, file, line);
                return 0;
        }

        if (streq(key, "DefaultTTLSec") || streq(key, "MaxTTLSec")) {
                bool is_default = streq(key, "DefaultTTLSec");

                r = parse_sec(value, &v);
                if (r >= 0 && v == 0)
                        r = -ERANGE;
                if (r < 0)
                        return bad_value(l, file, line, key, value, r,
                                         "a non-zero time such as 3600, 1h, 7d");
                *(is_default ? &c->default_ttl_usec : &c->max_ttl_usec) = v;
                set_location(l, is_default ? &l->default_ttl : &l->max_ttl, file, line);
                return 0;
        }

        if (streq(key, "Audit")) {
                /* the words systemd accepts for booleans */
                if (strcasecmp(value, "yes") == 0 || strcasecmp(value, "true") == 0 || streq(value, "1") ||
                    strcasecmp(value, "on") == 0)
                        c->audit = true;
                else if (strcasecmp(value, "no") == 0 || strcasecmp(value, "false") == 0 || streq(value, "0") ||
                         strcasecmp(value, "off") == 0)
                        c->audit = false;
                else
                        return bad_value(l, file, line, key, value, -EINVAL, "yes or no");
                return 0;
        }

        if (streq(key, "DefaultType")) {
                if (!name_is_valid(value))
                        return bad_value(l, file, line, key, value, -EINVAL, "a type name");
                strcpy(c->default_type, value); /* fits: name_is_valid() caps the length */
                set_location(l, &l->default_type, file, line);
                return 0;
        }

        return config_error(l, file, line, "Unknown key %s= in section [Manager]", key);
}

static int type_assignment(Loader *l, size_t idx, const char *file, unsigned line, const char *key,
                           const char *value) {
        SandboxType *t = &l->c.types[idx];
        uint64_t v;
        int r;

        if (streq(key, "CPUQuota")) {
                unsigned p;

                r = parse_percent(value, &p);
                if (r >= 0 && p == 0)
                        r = -ERANGE;
                if (r < 0)
                        return bad_value(l, file, line, key, value, r, "1%..10000%, 100% being one CPU");
                t->cpu_quota_percent = p;
                return 0;
        }

        if (streq(key, "MemoryMax")) {
                r = parse_size(value, &v);
                if (r >= 0 && v == 0)
                        r = -ERANGE;
                if (r < 0)
                        return bad_value(l, file, line, key, value, r, "a non-zero size such as 512M, 1G");
                t->memory_max = v;
                return 0;
        }

        if (streq(key, "TasksMax")) {
                r = parse_decimal(value, &v);
                if (r >= 0 && v == 0)
                        r = -ERANGE;
                if (r < 0)
                        return bad_value(l, file, line, key, value, r, "a number of at least 1");
                t->tasks_max = v;
                return 0;
        }

        if (streq(key, "MaxTimeoutSec") || streq(key, "DefaultTimeoutSec")) {
                bool is_default = streq(key, "DefaultTimeoutSec");

                r = parse_sec(value, &v);
                if (r >= 0 && v == 0)
                        r = -ERANGE;
                if (r < 0)
                        return bad_value(l, file, line, key, value, r,
                                         "a non-zero time such as 20, 5min, 1h");
                *(is_default ? &t->default_timeout_usec : &t->max_timeout_usec) = v;
                TypeLocations *locs = &l->types[idx];
                set_location(l, is_default ? &locs->default_timeout : &locs->max_timeout, file, line);
                return 0;
        }

        return config_error(l, file, line, "Unknown key %s= in section [Type:%s]", key, t->name);
}

/* Finds or defines the type for a [Type:name] section; returns its index. */
static int section_type(Loader *l, const char *file, unsigned line, const char *name, size_t *ret_idx) {
        SandboxdConfig *c = &l->c;

        if (!name_is_valid(name))
                return config_error(l, file, line,
                                    "Invalid type name '%s' (1..64 of A-Z a-z 0-9 . _ -, not starting with "
                                    ". or -)",
                                    name);

        for (size_t i = 0; i < c->n_types; i++)
                if (streq(c->types[i].name, name)) {
                        *ret_idx = i;
                        return 0;
                }

        if (c->n_types >= SANDBOX_TYPES_MAX)
                return config_error(l, file, line, "Too many sandbox types, at most %d may be defined",
                                    SANDBOX_TYPES_MAX);

        /* A new type starts from the smallest preset, so a key left out means a tight limit rather than
         * none at all. */
        SandboxType *t = &c->types[c->n_types];
        *t = builtin_types[0];
        strcpy(t->name, name);
        *ret_idx = c->n_types++;
        return 0;
}

/* Cuts a trailing "# comment" or "; comment": one at the start of the value or after whitespace. None of
 * our values can contain either character, so this cannot eat data. */
static void strip_inline_comment(char *value) {
        for (char *p = value; *p; p++)
                if ((*p == '#' || *p == ';') && (p == value || is_blank(p[-1]))) {
                        *p = 0;
                        return;
                }
}

static int load_file(Loader *l, const char *path, bool is_dropin) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *buf = NULL;
        size_t bufsize = 0, type_idx = 0;
        Section section = SECTION_NONE;
        unsigned line = 0;
        struct stat st;
        ssize_t n;
        int r;

        f = fopen(path, "re");
        if (!f) {
                if (errno == ENOENT)
                        return 0;
                return io_error(l, path, errno, "cannot open");
        }
        if (fstat(fileno(f), &st) < 0)
                return io_error(l, path, errno, "cannot stat");
        if (S_ISDIR(st.st_mode)) {
                /* A directory named *.conf among the drop-ins is not a drop-in; as the main file it is a
                 * mistake worth reporting. */
                if (is_dropin)
                        return 0;
                return io_error(l, path, EISDIR, "cannot read");
        }

        l->file_index++;

        while ((n = getline(&buf, &bufsize, f)) >= 0) {
                line++;

                if (strlen(buf) != (size_t) n)
                        return config_error(l, path, line, "Line contains a NUL byte");

                char *s = strip(buf);
                if (*s == 0 || *s == '#' || *s == ';')
                        continue;

                if (*s == '[') {
                        size_t len = strlen(s);

                        if (s[len - 1] != ']')
                                return config_error(l, path, line, "Section header without closing ']': %s",
                                                    s);
                        s[len - 1] = 0;
                        s++;

                        if (streq(s, "Manager"))
                                section = SECTION_MANAGER;
                        else if (strncmp(s, "Type:", 5) == 0) {
                                r = section_type(l, path, line, s + 5, &type_idx);
                                if (r < 0)
                                        return r;
                                section = SECTION_TYPE;
                        } else
                                return config_error(
                                        l, path, line,
                                        "Unknown section [%s] (expected [Manager] or [Type:<name>])", s);
                        continue;
                }

                char *eq = strchr(s, '=');
                if (!eq)
                        return config_error(l, path, line,
                                            "Expected Key=Value, a [Section] or a comment: %s", s);
                *eq = 0;
                char *key = strip(s), *value = eq + 1;
                strip_inline_comment(value);
                value = strip(value);

                if (*key == 0)
                        return config_error(l, path, line, "Assignment without a key");
                if (section == SECTION_NONE)
                        return config_error(l, path, line, "Assignment %s= before any [Section]", key);
                if (*value == 0)
                        return config_error(l, path, line, "Empty value for %s=", key);

                if (section == SECTION_MANAGER)
                        r = manager_assignment(l, path, line, key, value);
                else
                        r = type_assignment(l, type_idx, path, line, key, value);
                if (r < 0)
                        return r;
        }
        if (ferror(f))
                return io_error(l, path, errno ?: EIO, "cannot read");

        return 0;
}

static int validate(Loader *l) {
        const SandboxdConfig *c = &l->c;

        if (c->uid_min > c->uid_max) {
                const Location *at = location_later(&l->uid_min, &l->uid_max);
                return config_error(l, at->file, at->line, "UidMin=%u is greater than UidMax=%u", c->uid_min,
                                    c->uid_max);
        }

        /* 0 is root; 65534 is nobody (the overflow uid of user namespaces and NFS); 65535 is (uint16_t) -1,
         * invalid to the 16-bit syscalls. A sandbox running as any of them would not be confined. */
        static const uid_t reserved[] = { 0, 65534, 65535 };
        for (size_t i = 0; i < ELEMENTSOF(reserved); i++)
                if (c->uid_min <= reserved[i] && reserved[i] <= c->uid_max) {
                        const Location *at = location_later(&l->uid_min, &l->uid_max);
                        return config_error(l, at->file, at->line,
                                            "UidMin=%u..UidMax=%u includes the reserved uid %u", c->uid_min,
                                            c->uid_max, reserved[i]);
                }

        /* Every live sandbox has a uid of its own. */
        uint64_t n_uids = (uint64_t) c->uid_max - c->uid_min + 1;
        if (c->max_sandboxes > n_uids) {
                const Location *at =
                        location_later(&l->max_sandboxes, location_later(&l->uid_min, &l->uid_max));
                return config_error(l, at->file, at->line,
                                    "MaxSandboxes=%" PRIu64 " exceeds the %" PRIu64
                                    " uids in UidMin=..UidMax=",
                                    c->max_sandboxes, n_uids);
        }

        if (c->default_ttl_usec > c->max_ttl_usec) {
                const Location *at = location_later(&l->default_ttl, &l->max_ttl);
                return config_error(l, at->file, at->line, "DefaultTTLSec= is greater than MaxTTLSec=");
        }

        if (!sandboxd_config_find_type(c, c->default_type))
                return config_error(l, l->default_type.file, l->default_type.line,
                                    "DefaultType=%s names no defined type", c->default_type);

        for (size_t i = 0; i < c->n_types; i++)
                if (c->types[i].default_timeout_usec > c->types[i].max_timeout_usec) {
                        const Location *at =
                                location_later(&l->types[i].default_timeout, &l->types[i].max_timeout);
                        return config_error(l, at->file, at->line,
                                            "DefaultTimeoutSec= is greater than MaxTimeoutSec= in [Type:%s]",
                                            c->types[i].name);
                }

        return 0;
}

static int compare_strings(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The sorted full paths of dir's "*.conf" entries (hidden files excluded), NULL-terminated; an empty
 * list if dir does not exist. */
static int list_dropins(Loader *l, const char *dir, char ***ret) {
        _cleanup_strv_free_ char **paths = NULL;
        size_t n = 0, allocated = 0;
        DIR *d;
        int r = 0;

        d = opendir(dir);
        if (!d) {
                if (errno != ENOENT)
                        return io_error(l, dir, errno, "cannot open directory");
        } else {
                struct dirent *de;

                for (errno = 0; (de = readdir(d)); errno = 0) {
                        size_t len = strlen(de->d_name);

                        if (de->d_name[0] == '.' || len <= 5 || !streq(de->d_name + len - 5, ".conf"))
                                continue;

                        if (n + 2 > allocated) {
                                size_t a = MAX(allocated * 2, (size_t) 8);
                                char **p = realloc(paths, a * sizeof(char *));
                                if (!p) {
                                        r = -ENOMEM;
                                        break;
                                }
                                paths = p;
                                allocated = a;
                        }
                        if (asprintf(&paths[n], "%s/%s", dir, de->d_name) < 0) {
                                paths[n] = NULL;
                                r = -ENOMEM;
                                break;
                        }
                        paths[++n] = NULL;
                }
                if (r == 0 && errno != 0)
                        r = io_error(l, dir, errno, "cannot read directory");
                closedir(d);
                if (r < 0)
                        return r;
        }

        if (!paths) {
                paths = calloc(1, sizeof(char *));
                if (!paths)
                        return -ENOMEM;
        }
        qsort(paths, n, sizeof(char *), compare_strings);

        *ret = TAKE_PTR(paths);
        return 0;
}

int sandboxd_config_load(SandboxdConfig *c, const char *main_path, const char *dropin_dir,
                         char **ret_error) {
        _cleanup_strv_free_ char **dropins = NULL;
        _cleanup_free_ Loader *l = NULL;
        char *error = NULL;
        int r;

        if (!c)
                return -EINVAL;

        /* On the heap: with its locations the loader is a few KiB, and it must not matter how deep the
         * caller's stack already is. */
        l = calloc(1, sizeof(Loader));
        if (!l)
                return -ENOMEM;
        l->c = *c;
        l->error = &error;
        if (l->c.n_types > SANDBOX_TYPES_MAX)
                return -EINVAL;

        if (main_path) {
                r = load_file(l, main_path, false);
                if (r < 0)
                        goto fail;
        }

        if (dropin_dir) {
                r = list_dropins(l, dropin_dir, &dropins);
                if (r < 0)
                        goto fail;
                for (char **p = dropins; *p; p++) {
                        r = load_file(l, *p, true);
                        if (r < 0)
                                goto fail;
                }
        }

        /* Locations point into dropins, which is still alive here. */
        r = validate(l);
        if (r < 0)
                goto fail;

        *c = l->c;
        return 0;

fail:
        if (ret_error && error)
                *ret_error = error;
        else
                free(error);
        return r;
}
