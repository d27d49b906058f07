/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl's pure helpers: argument syntax, output formatting and plain fd I/O (no bus, testable). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "sandbox-id.h"
#include "sandboxctl-util.h"
#include "time-util.h"

int parse_uint64(const char *s, uint64_t *ret) {
        uint64_t v = 0;

        if (isempty(s))
                return -EINVAL;

        for (const char *p = s; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                unsigned digit = (unsigned) (*p - '0');
                if (v > (UINT64_MAX - digit) / 10)
                        return -ERANGE;
                v = v * 10 + digit;
        }

        *ret = v;
        return 0;
}

int parse_seconds(const char *s, uint64_t *ret_sec) {
        uint64_t usec;
        int r;

        r = parse_sec(s, &usec);
        if (r < 0)
                return r;

        /* Round up: "--timeout 500ms" must not become "no time at all". */
        *ret_sec = usec / USEC_PER_SEC + (usec % USEC_PER_SEC != 0);
        return 0;
}

int parse_mode(const char *s, uint32_t *ret) {
        uint32_t v = 0;

        if (isempty(s))
                return -EINVAL;

        for (const char *p = s; *p; p++) {
                if (*p < '0' || *p > '7')
                        return -EINVAL;
                v = v * 8 + (uint32_t) (*p - '0');
                if (v > 07777)
                        return -ERANGE;
        }

        *ret = v;
        return 0;
}

int parse_env_assignment(const char *s, char **ret_key, char **ret_value) {
        const char *eq;

        if (!s)
                return -EINVAL;

        eq = strchr(s, '=');
        if (!eq || eq == s)
                return -EINVAL;

        _cleanup_free_ char *k = strndup(s, (size_t) (eq - s));
        if (!k)
                return -ENOMEM;
        char *v = strdup(eq + 1);
        if (!v)
                return -ENOMEM;

        *ret_key = TAKE_PTR(k);
        *ret_value = v;
        return 0;
}

int split_sandbox_path(const char *s, char **ret_id, char **ret_path) {
        const char *colon;

        if (!s)
                return 0;

        colon = strchr(s, ':');
        if (!colon)
                return 0;

        _cleanup_free_ char *id = strndup(s, (size_t) (colon - s));
        if (!id)
                return -ENOMEM;

        /* Only a real id makes it remote, so "./a:b" or "notes:txt" stay local file names. */
        if (!sandbox_id_is_valid(id))
                return 0;
        if (isempty(colon + 1))
                return -EINVAL;

        char *path = strdup(colon + 1);
        if (!path)
                return -ENOMEM;

        *ret_id = TAKE_PTR(id);
        *ret_path = path;
        return 1;
}

char *path_basename(const char *s) {
        size_t end, start;

        if (!s)
                return NULL;

        end = strlen(s);
        while (end > 0 && s[end - 1] == '/')
                end--;
        if (end == 0)
                return NULL;

        start = end;
        while (start > 0 && s[start - 1] != '/')
                start--;

        return strndup(s + start, end - start);
}

char *format_timestamp(uint64_t usec, char buf[static FORMAT_TIMESTAMP_MAX]) {
        struct tm tm;
        time_t t;

        /* Past 9999-12-31T23:59:59Z: no sensible date to show (and RFC 3339 stops there too). */
        if (usec / USEC_PER_SEC > UINT64_C(253402300799))
                return NULL;

        t = (time_t) (usec / USEC_PER_SEC);
        if (!localtime_r(&t, &tm))
                return NULL;

        if (strftime(buf, FORMAT_TIMESTAMP_MAX, "%a %Y-%m-%d %H:%M:%S %Z", &tm) == 0)
                return NULL;

        return buf;
}

char *make_printable(const char *s) {
        char *p = strdup(strempty(s));

        if (!p)
                return NULL;

        for (unsigned char *c = (unsigned char *) p; *c; c++) {
                if (*c < 0x20 || *c == 0x7f)
                        *c = '?';
                else if (c[0] == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f) {
                        /* A C1 control in UTF-8 (e.g. U+009B, CSI): two bytes, each replaced. */
                        c[0] = '?';
                        c[1] = '?';
                        c++;
                }
        }

        return p;
}

int read_full_fd(int fd, size_t max, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, allocated = 0;

        for (;;) {
                if (size + 1 >= allocated) {
                        size_t n = allocated == 0 ? 65536 : allocated * 2;
                        char *b;

                        if (n < allocated)
                                return -ENOMEM;
                        b = realloc(buf, n);
                        if (!b)
                                return -ENOMEM;
                        buf = b;
                        allocated = n;
                }

                /* Leave a byte for the NUL. */
                ssize_t k = read(fd, buf + size, allocated - size - 1);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                size += (size_t) k;
                if (size > max)
                        return -EFBIG;
        }

        buf[size] = 0;
        *ret = TAKE_PTR(buf);
        *ret_size = size;
        return 0;
}

int loop_write(int fd, const void *buf, size_t n) {
        const char *p = buf;

        while (n > 0) {
                ssize_t k = write(fd, p, n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return -EIO;
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

int exec_exit_status(int32_t exit_code, int32_t signal, bool timed_out, bool oom_killed) {
        if (timed_out)
                return 124;
        if (signal > 0 && signal < 128)
                return 128 + signal;
        if (oom_killed)
                return 128 + 9;
        if (exit_code < 0 || exit_code > 255)
                return 125;
        return exit_code;
}
