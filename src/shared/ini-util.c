/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The syntax of our configuration files: [Section] and Key=Value lines, drop-ins, and error messages. */
#include "ini-util.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

typedef struct IniParser {
        const IniHandler *handler;
        void *userdata;
        size_t file_index;
        char **error;
} IniParser;

int ini_error(char **ret_error, const IniPosition *at, const char *fmt, ...) {
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

        if (!ret_error)
                return -EINVAL;

        if (at && at->file)
                k = asprintf(&msg, "%s:%u: %s", at->file, at->line, what);
        else
                k = asprintf(&msg, "initial configuration: %s", what);
        if (k < 0)
                return -ENOMEM;

        *ret_error = msg;
        return -EINVAL;
}

int ini_bad_value(char **ret_error, const IniPosition *at, const char *key, const char *value, int r,
                  const char *expected) {
        return ini_error(ret_error, at, "Invalid %s=%s: %s (expected %s)", key, value,
                         r == -ERANGE ? "out of range" : "not understood", expected);
}

static int io_error(IniParser *p, const char *file, int error, const char *what) {
        char *msg;

        if (p->error) {
                if (asprintf(&msg, "%s: %s: %s", file, what, strerror(error)) < 0)
                        return -ENOMEM;
                *p->error = msg;
        }
        return -error;
}

int parse_boolean(const char *v) {
        if (!v)
                return -EINVAL;
        if (strcasecmp(v, "yes") == 0 || strcasecmp(v, "true") == 0 || streq(v, "1") || strcasecmp(v, "on") == 0)
                return 1;
        if (strcasecmp(v, "no") == 0 || strcasecmp(v, "false") == 0 || streq(v, "0") || strcasecmp(v, "off") == 0)
                return 0;
        return -EINVAL;
}

int parse_decimal(const char *s, uint64_t *ret) {
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

/* Cuts a trailing "# comment" or "; comment": one at the start of the value or after whitespace. None of
 * our values can contain either character, so this cannot eat data. */
static void strip_inline_comment(char *value) {
        for (char *p = value; *p; p++)
                if ((*p == '#' || *p == ';') && (p == value || is_blank(p[-1]))) {
                        *p = 0;
                        return;
                }
}

static int parse_file(IniParser *p, const char *path, bool is_dropin) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *buf = NULL;
        size_t bufsize = 0;
        bool in_section = false;
        IniPosition at = { .file = path };
        struct stat st;
        ssize_t n;
        int r;

        f = fopen(path, "re");
        if (!f) {
                if (errno == ENOENT)
                        return 0;
                return io_error(p, path, errno, "cannot open");
        }
        if (fstat(fileno(f), &st) < 0)
                return io_error(p, path, errno, "cannot stat");
        if (S_ISDIR(st.st_mode)) {
                /* A directory named *.conf among the drop-ins is not a drop-in; as the main file it is a
                 * mistake worth reporting. */
                if (is_dropin)
                        return 0;
                return io_error(p, path, EISDIR, "cannot read");
        }

        at.file_index = ++p->file_index;

        while ((n = getline(&buf, &bufsize, f)) >= 0) {
                at.line++;

                if (strlen(buf) != (size_t) n)
                        return ini_error(p->error, &at, "Line contains a NUL byte");

                char *s = strip(buf);
                if (*s == 0 || *s == '#' || *s == ';')
                        continue;

                if (*s == '[') {
                        size_t len = strlen(s);

                        if (s[len - 1] != ']')
                                return ini_error(p->error, &at, "Section header without closing ']': %s", s);
                        s[len - 1] = 0;
                        r = p->handler->section(&at, s + 1, p->userdata);
                        if (r < 0)
                                return r;
                        in_section = true;
                        continue;
                }

                char *eq = strchr(s, '=');
                if (!eq)
                        return ini_error(p->error, &at, "Expected Key=Value, a [Section] or a comment: %s",
                                         s);
                *eq = 0;
                char *key = strip(s), *value = eq + 1;
                strip_inline_comment(value);
                value = strip(value);

                if (*key == 0)
                        return ini_error(p->error, &at, "Assignment without a key");
                if (!in_section)
                        return ini_error(p->error, &at, "Assignment %s= before any [Section]", key);
                if (*value == 0)
                        return ini_error(p->error, &at, "Empty value for %s=", key);
                r = p->handler->assignment(&at, key, value, p->userdata);
                if (r < 0)
                        return r;
        }
        if (ferror(f))
                return io_error(p, path, errno ?: EIO, "cannot read");

        return 0;
}

static int compare_strings(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The sorted full paths of dir's "*.conf" entries (hidden files excluded), NULL-terminated; an empty
 * list if dir does not exist. */
static int list_dropins(IniParser *p, const char *dir, char ***ret) {
        _cleanup_strv_free_ char **paths = NULL;
        size_t n = 0, allocated = 0;
        DIR *d;
        int r = 0;

        d = opendir(dir);
        if (!d) {
                if (errno != ENOENT)
                        return io_error(p, dir, errno, "cannot open directory");
        } else {
                struct dirent *de;

                for (errno = 0; (de = readdir(d)); errno = 0) {
                        size_t len = strlen(de->d_name);

                        if (de->d_name[0] == '.' || len <= 5 || !streq(de->d_name + len - 5, ".conf"))
                                continue;

                        if (n + 2 > allocated) {
                                size_t a = MAX(allocated * 2, (size_t) 8);
                                char **l = realloc(paths, a * sizeof(char *));
                                if (!l) {
                                        r = -ENOMEM;
                                        break;
                                }
                                paths = l;
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
                        r = io_error(p, dir, errno, "cannot read directory");
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

int ini_parse_files(const char *main_path, const char *dropin_dir, const IniHandler *handler, void *userdata,
                    char **ret_error) {
        _cleanup_strv_free_ char **dropins = NULL;
        IniParser p = { .handler = handler, .userdata = userdata, .error = ret_error };
        int r;

        if (main_path) {
                r = parse_file(&p, main_path, false);
                if (r < 0)
                        return r;
        }

        if (dropin_dir) {
                r = list_dropins(&p, dropin_dir, &dropins);
                if (r < 0)
                        return r;
                for (char **f = dropins; *f; f++) {
                        r = parse_file(&p, *f, true);
                        if (r < 0)
                                return r;
                }
        }

        /* The positions point into dropins, which is still alive here. */
        return handler->finish ? handler->finish(userdata) : 0;
}
