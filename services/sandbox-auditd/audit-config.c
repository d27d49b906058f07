/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-auditd's configuration: built-in defaults, sandbox-auditd.conf and its drop-ins. */
#include "audit-config.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "macro.h"
#include "time-util.h"

void audit_config_defaults(AuditConfig *c) {
        *c = (AuditConfig) {
                .max_age_usec = AUDIT_MAX_AGE_DEFAULT,
                .max_rows = AUDIT_MAX_ROWS_DEFAULT,
                .output_max = AUDIT_OUTPUT_MAX_DEFAULT,
                .detail_max = AUDIT_DETAIL_MAX_DEFAULT,
        };
}

typedef struct Loader {
        AuditConfig c;
        char **error;
} Loader;

/* Always returns -EINVAL (or -ENOMEM if the message itself cannot be built). */
_printf_(4, 5) static int config_error(Loader *l, const char *file, unsigned line, const char *fmt, ...) {
        _cleanup_free_ char *what = NULL;
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&what, fmt, ap);
        va_end(ap);
        if (k < 0) {
                what = NULL;
                return -ENOMEM;
        }
        if (l->error && asprintf(l->error, "%s:%u: %s", file, line, what) < 0) {
                *l->error = NULL;
                return -ENOMEM;
        }
        return -EINVAL;
}

static int io_error(Loader *l, const char *file, int error, const char *what) {
        if (l->error && asprintf(l->error, "%s: %s: %s", file, what, strerror(error)) < 0) {
                *l->error = NULL;
                return -ENOMEM;
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

static void strip_inline_comment(char *value) {
        for (char *p = value; *p; p++)
                if ((*p == '#' || *p == ';') && (p == value || is_blank(p[-1]))) {
                        *p = 0;
                        return;
                }
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

static int bad_value(Loader *l, const char *file, unsigned line, const char *key, const char *value, int r,
                     const char *expected) {
        return config_error(l, file, line, "Invalid %s=%s: %s (expected %s)", key, value,
                            r == -ERANGE ? "out of range" : "not understood", expected);
}

static int log_assignment(Loader *l, const char *file, unsigned line, const char *key, const char *value) {
        AuditConfig *c = &l->c;
        uint64_t v;
        int r;

        if (streq(key, "MaxAgeSec")) {
                r = parse_sec(value, &v);
                if (r < 0)
                        return bad_value(l, file, line, key, value, r,
                                         "a time such as 90d, 12h, or 0 to keep rows");
                c->max_age_usec = v;
                return 0;
        }
        if (streq(key, "MaxRows")) {
                r = parse_decimal(value, &v);
                if (r < 0)
                        return bad_value(l, file, line, key, value, r, "a number, or 0 for no limit");
                c->max_rows = v;
                return 0;
        }
        if (streq(key, "OutputMax")) {
                r = parse_size(value, &v);
                if (r >= 0 && (v == 0 || v > AUDIT_OUTPUT_MAX_LIMIT))
                        r = -ERANGE;
                if (r < 0)
                        return bad_value(l, file, line, key, value, r, "a size from 1 to 15M, such as 1M");
                c->output_max = v;
                return 0;
        }
        if (streq(key, "DetailMax")) {
                r = parse_size(value, &v);
                if (r >= 0 && (v < AUDIT_DETAIL_MAX_MIN || v > AUDIT_DETAIL_MAX_LIMIT))
                        r = -ERANGE;
                if (r < 0)
                        return bad_value(l, file, line, key, value, r, "a size from 256 to 64K, such as 4K");
                c->detail_max = v;
                return 0;
        }
        return config_error(l, file, line, "Unknown key %s= in section [Log]", key);
}

static int load_file(Loader *l, const char *path, bool is_dropin) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *buf = NULL;
        size_t bufsize = 0;
        bool in_section = false;
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
                        if (!streq(s + 1, "Log"))
                                return config_error(l, path, line, "Unknown section [%s] (expected [Log])",
                                                    s + 1);
                        in_section = true;
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
                if (!in_section)
                        return config_error(l, path, line, "Assignment %s= before any [Section]", key);
                if (*value == 0)
                        return config_error(l, path, line, "Empty value for %s=", key);
                r = log_assignment(l, path, line, key, value);
                if (r < 0)
                        return r;
        }
        if (ferror(f))
                return io_error(l, path, errno ?: EIO, "cannot read");
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

int audit_config_load(AuditConfig *c, const char *main_path, const char *dropin_dir, char **ret_error) {
        _cleanup_strv_free_ char **dropins = NULL;
        char *error = NULL;
        Loader l = { .error = &error };
        int r;

        if (!c)
                return -EINVAL;
        l.c = *c;

        if (main_path) {
                r = load_file(&l, main_path, false);
                if (r < 0)
                        goto fail;
        }
        if (dropin_dir) {
                r = list_dropins(&l, dropin_dir, &dropins);
                if (r < 0)
                        goto fail;
                for (char **p = dropins; *p; p++) {
                        r = load_file(&l, *p, true);
                        if (r < 0)
                                goto fail;
                }
        }
        *c = l.c;
        return 0;

fail:
        if (ret_error && error)
                *ret_error = error;
        else
                free(error);
        return r;
}
