/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl's pure helpers: argument syntax, output formatting and plain fd I/O (no bus, testable). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "sandbox-id.h"
#include "sandboxd-bus.h"
#include "sandboxctl-util.h"
#include "time-util.h"
#include "utf8-util.h"

int fail_usage(const char *verb, const char *fmt, ...) {
        va_list ap;

        fputs("sandboxctl: ", stderr);
        if (verb)
                fprintf(stderr, "%s: ", verb);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        return EXIT_USAGE;
}

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

int env_list_add(EnvVar **list, size_t *n, const char *assignment) {
        _cleanup_free_ char *k = NULL, *v = NULL;
        EnvVar *l;
        int r;

        r = parse_env_assignment(assignment, &k, &v);
        if (r < 0)
                return r;
        for (size_t i = 0; i < *n; i++)
                if (streq((*list)[i].key, k)) {
                        free((*list)[i].value);
                        (*list)[i].value = TAKE_PTR(v);
                        return 0;
                }
        l = reallocarray(*list, *n + 1, sizeof(EnvVar));
        if (!l)
                return -ENOMEM;
        *list = l;
        l[(*n)++] = (EnvVar) { .key = TAKE_PTR(k), .value = TAKE_PTR(v) };
        return 0;
}

void env_list_free(EnvVar **list, size_t *n) {
        for (size_t i = 0; i < *n; i++) {
                free((*list)[i].key);
                free((*list)[i].value);
        }
        free(*list);
        *list = NULL;
        *n = 0;
}

int bus_append_env(sd_bus_message *m, const EnvVar *env, size_t n) {
        int r;

        if (n == 0)
                return 0;
        r = sd_bus_message_open_container(m, 'e', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", "env");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "a{ss}");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "{ss}");
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = sd_bus_message_append(m, "{ss}", env[i].key, env[i].value);
        for (unsigned i = 0; r >= 0 && i < 3; i++)
                r = sd_bus_message_close_container(m);
        return r;
}

char **split_commas(const char *s) {
        size_t n = 1;
        for (const char *p = s; *p; p++)
                n += *p == ',';
        char **l = calloc(n + 1, sizeof(char *));
        if (!l)
                return NULL;
        size_t i = 0;
        for (const char *p = s;;) {
                const char *e = strchrnul(p, ',');
                if (e > p && !(l[i++] = strndup(p, (size_t) (e - p)))) {
                        strv_free(l);
                        return NULL;
                }
                if (!*e)
                        break;
                p = e + 1;
        }
        return l;
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
        char *p;

        if (utf8_escape((const uint8_t *) strempty(s), strlen(strempty(s)), 0, &p, NULL) < 0)
                return NULL;
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

/* --- log ----------------------------------------------------------------------------------------- */

const char *const log_column_header[_LOG_COLUMN_MAX] = {
        [LOG_COLUMN_TIME] = "TIME",
        [LOG_COLUMN_ID] = "ID",
        [LOG_COLUMN_SANDBOX] = "SANDBOX",
        [LOG_COLUMN_ACCOUNT] = "ACCOUNT",
        [LOG_COLUMN_SOURCE] = "SOURCE",
        [LOG_COLUMN_OPERATION] = "OPERATION",
        [LOG_COLUMN_EVENT] = "EVENT",
        [LOG_COLUMN_EXIT] = "EXIT",
        [LOG_COLUMN_DURATION] = "DURATION",
        [LOG_COLUMN_DETAIL] = "DETAIL",
};

const bool log_column_right[_LOG_COLUMN_MAX] = {
        [LOG_COLUMN_ID] = true,
        [LOG_COLUMN_EXIT] = true,
        [LOG_COLUMN_DURATION] = true,
};

char *format_log_time(uint64_t usec, char buf[static FORMAT_LOG_TIME_MAX]) {
        char tmp[FORMAT_LOG_TIME_MAX - 8]; /* room for ".mmm" and the NUL */
        struct tm tm;
        time_t t;

        if (usec / USEC_PER_SEC > UINT64_C(253402300799))
                return NULL;

        t = (time_t) (usec / USEC_PER_SEC);
        if (!localtime_r(&t, &tm))
                return NULL;

        /* No setlocale() anywhere in sandboxctl: %b is always the C locale's "Dec". */
        if (strftime(tmp, sizeof(tmp), "%b %d %H:%M:%S", &tm) == 0)
                return NULL;

        snprintf(buf, FORMAT_LOG_TIME_MAX, "%s.%03u", tmp, (unsigned) (usec / USEC_PER_MSEC % 1000));
        return buf;
}

static bool shell_safe_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               strchr("_@%+=:,./-", c);
}

char *shell_quote(const char *s) {
        size_t n = 0, extra = 0;
        bool safe;
        char *q, *p;

        s = strempty(s);
        safe = !isempty(s);
        for (const char *c = s; *c; c++, n++) {
                if (!shell_safe_char(*c))
                        safe = false;
                if (*c == '\'')
                        extra += 3; /* ' becomes '\'' */
        }
        if (safe)
                return strdup(s);

        q = malloc(n + extra + 3);
        if (!q)
                return NULL;
        p = q;
        *p++ = '\'';
        for (const char *c = s; *c; c++) {
                if (*c == '\'') {
                        memcpy(p, "'\\''", 4);
                        p += 4;
                } else
                        *p++ = *c;
        }
        *p++ = '\'';
        *p = 0;
        return q;
}

/* Appends s (and a separator first, if buf is not empty) to a growing buffer. */
static int strbuf_append(char **buf, size_t *len, const char *sep, const char *s) {
        size_t sl = *len > 0 ? strlen(sep) : 0, l = strlen(s);
        char *n = realloc(*buf, *len + sl + l + 1);

        if (!n)
                return -ENOMEM;
        memcpy(n + *len, sep, sl);
        memcpy(n + *len + sl, s, l + 1);
        *buf = n;
        *len += sl + l;
        return 0;
}

static const char *json_get_string(json_object *o, const char *key) {
        json_object *v;

        if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v) ||
            !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

static bool json_get_uint64(json_object *o, const char *key, uint64_t *ret) {
        json_object *v;

        if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v) ||
            !json_object_is_type(v, json_type_int))
                return false;
        /* json-c keeps uint64 and int64 apart; a negative number is not a count. */
        if (json_object_get_int64(v) < 0 && json_object_get_uint64(v) <= INT64_MAX)
                return false;
        *ret = json_object_get_uint64(v);
        return true;
}

static bool json_get_int64(json_object *o, const char *key, int64_t *ret) {
        json_object *v;

        if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v) ||
            !json_object_is_type(v, json_type_int))
                return false;
        *ret = json_object_get_int64(v);
        return true;
}

/* Cuts a printable string to at most max bytes, at a UTF-8 character boundary, ending in "…". */
/* Cuts s to at most max bytes ending in "…", at the end of a character or of an escape, so that what is
 * left still reads back unambiguously. */
static void ellipsize(char *s, size_t max) {
        static const char dots[] = "\xe2\x80\xa6"; /* … */
        size_t l = strlen(s), cut = 0;

        if (l <= max)
                return;
        if (max < sizeof(dots) - 1) {
                s[0] = 0;
                return;
        }
        for (size_t u; cut < l && cut + (u = utf8_escaped_unit_len(s + cut)) <= max - (sizeof(dots) - 1);)
                cut += u;
        memcpy(s + cut, dots, sizeof(dots));
}

char *log_detail_summary(json_object *detail, size_t max) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        json_object *argv;
        const char *s, *err;

        text = strdup("");
        if (!text)
                return NULL;

        if (json_object_is_type(detail, json_type_string)) {
                /* Not JSON after all: show it as it is. */
                if (strbuf_append(&text, &len, "", json_object_get_string(detail)) < 0)
                        return NULL;
        } else if (json_object_is_type(detail, json_type_object)) {
                if (json_object_object_get_ex(detail, "argv", &argv) &&
                    json_object_is_type(argv, json_type_array)) {
                        size_t n = json_object_array_length(argv);

                        for (size_t i = 0; i < n; i++) {
                                json_object *a = json_object_array_get_idx(argv, i);
                                _cleanup_free_ char *q =
                                        shell_quote(json_object_is_type(a, json_type_string)
                                                            ? json_object_get_string(a)
                                                            : json_object_to_json_string(a));
                                if (!q || strbuf_append(&text, &len, " ", q) < 0)
                                        return NULL;
                        }
                } else if ((s = json_get_string(detail, "path")) || (s = json_get_string(detail, "name"))) {
                        if (strbuf_append(&text, &len, "", s) < 0)
                                return NULL;
                } else if (!json_get_string(detail, "error") && json_object_object_length(detail) > 0) {
                        /* Something we do not know (api_key.*, a newer operation): the JSON itself. */
                        s = json_object_to_json_string_ext(detail, JSON_C_TO_STRING_PLAIN |
                                                                           JSON_C_TO_STRING_NOSLASHESCAPE);
                        if (!s || strbuf_append(&text, &len, "", s) < 0)
                                return NULL;
                }

                err = json_get_string(detail, "message");
                if (isempty(err))
                        err = json_get_string(detail, "error");
                if (!isempty(err) && len > 0 && strstr(err, text)) {
                        /* "Cannot read /tmp/x: …" says the path already. */
                        free(text);
                        text = strdup(err);
                        if (!text)
                                return NULL;
                } else if (!isempty(err)) {
                        bool paren = len > 0;

                        if (strbuf_append(&text, &len, paren ? " (" : "", err) < 0 ||
                            (paren && strbuf_append(&text, &len, "", ")") < 0))
                                return NULL;
                }
        }

        char *p = make_printable(text);
        if (!p)
                return NULL;
        ellipsize(p, max);
        return p;
}

/* detail and output_truncated are JSON in a string: the value it holds, or the string itself if it is
 * not (exactly, trailing blanks aside) one JSON value. */
static json_object *parse_json_string(json_object *v) {
        const char *s = json_object_get_string(v);
        json_tokener *tok;
        json_object *parsed;
        size_t l = strlen(s);

        tok = json_tokener_new();
        if (!tok)
                return NULL;
        parsed = json_tokener_parse_ex(tok, s, (int) MIN(l, (size_t) INT32_MAX));
        if (parsed && json_tokener_get_error(tok) == json_tokener_success) {
                size_t off = json_tokener_get_parse_end(tok);

                while (off < l && strchr(" \t\r\n", s[off]))
                        off++;
                if (off != l) {
                        json_object_put(parsed);
                        parsed = NULL;
                }
        } else {
                json_object_put(parsed);
                parsed = NULL;
        }
        json_tokener_free(tok);

        return parsed ?: json_object_get(v);
}

json_object *log_row_to_json(json_object *raw) {
        static const char *const order[] = {
                "id",         "key",    "session_id",       "account_id",  "source",
                "operation",  "event",  "exit_code",        "started_at",  "duration_ms",
                "request_id", "detail", "output_truncated", "stdout_size", "stderr_size",
        };
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;

        /* The known keys in their order, then whatever else the logger sends, as it sends it. */
        for (size_t i = 0; i < ELEMENTSOF(order); i++) {
                json_object *v, *n;
                uint64_t usec;

                if (!json_object_object_get_ex(raw, order[i], &v))
                        continue;

                if (streq(order[i], "started_at") && json_get_uint64(raw, "started_at", &usec)) {
                        char buf[RFC3339_USEC_MAX];

                        n = usec > 0 && format_rfc3339_usec(usec, buf) >= 0 ? json_object_new_string(buf)
                                                                            : NULL;
                        if (usec > 0 && !n)
                                goto oom;
                        if (json_object_object_add(o, "started_at", n) < 0) {
                                json_object_put(n);
                                goto oom;
                        }
                        n = json_object_new_uint64(usec);
                        if (!n || json_object_object_add(o, "started_at_usec", n) < 0) {
                                json_object_put(n);
                                goto oom;
                        }
                        continue;
                }

                if ((streq(order[i], "detail") || streq(order[i], "output_truncated")) &&
                    json_object_is_type(v, json_type_string)) {
                        n = parse_json_string(v);
                        if (!n)
                                goto oom;
                } else
                        n = json_object_get(v);

                if (json_object_object_add(o, order[i], n) < 0) {
                        json_object_put(n);
                        goto oom;
                }
        }

        json_object_object_foreach(raw, key, val) {
                bool known = false;

                for (size_t i = 0; i < ELEMENTSOF(order); i++)
                        if (streq(order[i], key))
                                known = true;
                if (known || streq(key, "started_at_usec"))
                        continue;
                if (json_object_object_add(o, key, json_object_get(val)) < 0) {
                        json_object_put(val);
                        goto oom;
                }
        }

        return o;

oom:
        json_object_put(o);
        return NULL;
}

static bool filter_string_matches(json_object *row, const char *key, const char *want) {
        return !want || streq_ptr(json_get_string(row, key), want);
}

bool log_row_matches(json_object *row, const LogFilter *f) {
        uint64_t t = 0;

        if (!filter_string_matches(row, "session_id", f->session_id) ||
            !filter_string_matches(row, "account_id", f->account_id) ||
            !filter_string_matches(row, "operation", f->operation) ||
            !filter_string_matches(row, "source", f->source) ||
            !filter_string_matches(row, "event", f->event))
                return false;

        if (f->since > 0 || f->until > 0) {
                (void) json_get_uint64(row, "started_at_usec", &t);
                if (f->since > 0 && t < f->since)
                        return false;
                if (f->until > 0 && t >= f->until)
                        return false;
        }

        return true;
}

uint64_t log_row_id(json_object *row) {
        uint64_t id = 0;

        (void) json_get_uint64(row, "id", &id);
        return id;
}

void log_cells_free(char *cells[static _LOG_COLUMN_MAX]) {
        for (size_t c = 0; c < _LOG_COLUMN_MAX; c++) {
                free(cells[c]);
                cells[c] = NULL;
        }
}

int log_row_cells(json_object *row, char *ret_cells[static _LOG_COLUMN_MAX]) {
        static const struct {
                LogColumn column;
                const char *key;
        } strings[] = {
                { LOG_COLUMN_SANDBOX, "session_id" },
                { LOG_COLUMN_ACCOUNT, "account_id" },
                { LOG_COLUMN_SOURCE, "source" },
                { LOG_COLUMN_OPERATION, "operation" },
                { LOG_COLUMN_EVENT, "event" },
        };
        char *cells[_LOG_COLUMN_MAX] = {};
        char buf[MAX(FORMAT_LOG_TIME_MAX, 32)];
        const char *operation = json_get_string(row, "operation");
        json_object *detail = NULL;
        uint64_t u;
        int64_t i;

        if (json_get_uint64(row, "started_at_usec", &u) && u > 0 && format_log_time(u, buf))
                cells[LOG_COLUMN_TIME] = strdup(buf);
        else
                cells[LOG_COLUMN_TIME] = strdup("-");

        if (json_get_uint64(row, "id", &u)) {
                snprintf(buf, sizeof(buf), "%" PRIu64, u);
                cells[LOG_COLUMN_ID] = strdup(buf);
        } else
                cells[LOG_COLUMN_ID] = strdup("-");

        for (size_t k = 0; k < ELEMENTSOF(strings); k++) {
                const char *s = json_get_string(row, strings[k].key);
                cells[strings[k].column] = make_printable(isempty(s) ? "-" : s);
        }

        if (json_get_int64(row, "exit_code", &i) && (streq_ptr(operation, "exec") || i != 0)) {
                snprintf(buf, sizeof(buf), "%" PRIi64, i);
                cells[LOG_COLUMN_EXIT] = strdup(buf);
        } else
                cells[LOG_COLUMN_EXIT] = strdup("-");

        if (json_get_uint64(row, "duration_ms", &u)) {
                snprintf(buf, sizeof(buf), "%" PRIu64 "ms", u);
                cells[LOG_COLUMN_DURATION] = strdup(buf);
        } else
                cells[LOG_COLUMN_DURATION] = strdup("-");

        (void) json_object_object_get_ex(row, "detail", &detail);
        cells[LOG_COLUMN_DETAIL] = log_detail_summary(detail, LOG_SUMMARY_MAX);

        for (size_t c = 0; c < _LOG_COLUMN_MAX; c++)
                if (!cells[c]) {
                        log_cells_free(cells);
                        return -ENOMEM;
                }

        memcpy(ret_cells, cells, sizeof(cells));
        return 0;
}

char *egress_entries_join(const EgressEntry *l, size_t n) {
        char buf[EGRESS_ENTRY_TEXT_MAX], *text = NULL;
        size_t size = 0;
        FILE *f;

        if (n == 0)
                return strdup("-");
        f = open_memstream(&text, &size);
        if (!f)
                return NULL;
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s%s", i > 0 ? " " : "", egress_entry_to_string(&l[i], buf));
        if (fclose(f) != 0) {
                free(text);
                return NULL;
        }
        return text;
}

static json_object *entries_json(const EgressEntry *l, size_t n) {
        char buf[EGRESS_ENTRY_TEXT_MAX];
        json_object *a = json_object_new_array();

        for (size_t i = 0; a && i < n; i++)
                if (json_object_array_add(a, json_object_new_string(egress_entry_to_string(&l[i], buf))) <
                    0) {
                        json_object_put(a);
                        return NULL;
                }
        return a;
}

json_object *egress_policy_json(const EgressPolicy *p) {
        json_object *o = json_object_new_object(), *allow = entries_json(p->allow, p->n_allow),
                    *deny = entries_json(p->deny, p->n_deny);

        if (!o || !allow || !deny) {
                json_object_put(o);
                json_object_put(allow);
                json_object_put(deny);
                return NULL;
        }
        json_object_object_add(o, "default",
                               json_object_new_string(egress_default_to_string(p->default_action)));
        json_object_object_add(o, "allow", allow);
        json_object_object_add(o, "deny", deny);
        return o;
}

int bus_read_dict(sd_bus_message *m, json_object *o) {
        const char *key, *contents;
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                r = sd_bus_message_read(m, "s", &key);
                if (r >= 0)
                        r = sd_bus_message_peek_type(m, NULL, &contents);
                if (r >= 0)
                        r = sd_bus_message_enter_container(m, 'v', contents);
                if (r < 0)
                        return r;
                if (streq(contents, "t")) {
                        uint64_t v;
                        r = sd_bus_message_read(m, "t", &v);
                        json_object_object_add(o, key, json_object_new_uint64(v));
                } else if (streq(contents, "u")) {
                        uint32_t v;
                        r = sd_bus_message_read(m, "u", &v);
                        json_object_object_add(o, key, json_object_new_uint64(v));
                } else if (streq(contents, "i")) {
                        int32_t v;
                        r = sd_bus_message_read(m, "i", &v);
                        json_object_object_add(o, key, json_object_new_int(v));
                } else if (streq(contents, "b")) {
                        int v;
                        r = sd_bus_message_read(m, "b", &v);
                        json_object_object_add(o, key, json_object_new_boolean(v));
                } else if (streq(contents, "s") || streq(contents, "o")) {
                        const char *v;
                        r = sd_bus_message_read(m, contents, &v);
                        json_object_object_add(o, key, json_object_new_string(v));
                } else
                        r = sd_bus_message_skip(m, contents);
                if (r >= 0)
                        r = sd_bus_message_exit_container(m);
                if (r >= 0)
                        r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

static int on_stop_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

int follow_log_entries(sd_bus *bus, sd_bus_message_handler_t on_entry, void *userdata,
                       sd_bus_slot **ret_slot, sd_event **ret_event) {
        sd_bus_slot *slot = NULL;
        sd_event *event = NULL;
        sigset_t mask;
        int r;

        r = sd_bus_match_signal(bus, &slot, AUDITD_BUS_NAME, AUDITD_BUS_PATH, AUDITD_LOG_INTERFACE,
                                "EntryAdded", on_entry, userdata);
        if (r >= 0)
                r = sd_event_default(&event);
        if (r >= 0)
                r = sd_bus_attach_event(bus, event, SD_EVENT_PRIORITY_NORMAL);
        if (r >= 0)
                r = sd_bus_set_exit_on_disconnect(bus, true);
        if (r >= 0) {
                sigemptyset(&mask);
                sigaddset(&mask, SIGINT);
                sigaddset(&mask, SIGTERM);
                r = sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ? -errno : 0;
        }
        if (r >= 0)
                r = sd_event_add_signal(event, NULL, SIGINT, on_stop_signal, NULL);
        if (r >= 0)
                r = sd_event_add_signal(event, NULL, SIGTERM, on_stop_signal, NULL);
        if (r < 0) {
                if (event)
                        (void) sd_bus_detach_event(bus);
                sd_event_unref(event);
                sd_bus_slot_unref(slot);
                return r;
        }
        *ret_slot = slot;
        *ret_event = event;
        return 0;
}
