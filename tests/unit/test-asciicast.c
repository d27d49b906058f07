/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for asciicast: the header, output events with any bytes, split characters, resizes and the cap.
 */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asciicast.h"
#include "macro.h"
#include "test-util.h"

/* The recording's lines, each parsed as JSON (NULL for a line that is not). */
static size_t parse_lines(const Asciicast *a, json_object **lines, size_t max) {
        size_t n = 0, start = 0;

        for (size_t i = 0; i < a->len && n < max; i++)
                if (a->buf[i] == '\n') {
                        _cleanup_free_ char *l = strndup(a->buf + start, i - start);
                        lines[n++] = l ? json_tokener_parse(l) : NULL;
                        start = i + 1;
                }
        CHECK(start == a->len); /* every line ends in a newline */
        return n;
}

static void free_lines(json_object **lines, size_t n) {
        for (size_t i = 0; i < n; i++)
                json_object_put(lines[i]);
}

static const char *event_field(json_object *ev, size_t i) {
        json_object *f = ev ? json_object_array_get_idx(ev, i) : NULL;
        return f ? json_object_get_string(f) : NULL;
}

static void test_header_and_events(void) {
        Asciicast a = ASCIICAST_INIT;
        json_object *lines[16];

        CHECK(asciicast_start(&a, 1 << 20, 120, 40, 1764700000, "xterm-256color", "/bin/bash",
                              "sb_x \"shell\"") == 0);
        asciicast_output(&a, 1500000, "hi\r\n\x1b[0m\"q\"\\", 12);
        asciicast_resize(&a, 2000001, 100, 30);
        asciicast_output(&a, 3000000, "\x01\x7f", 2);
        asciicast_finish(&a, 4000000);

        size_t n = parse_lines(&a, lines, ELEMENTSOF(lines));
        CHECK_INT(n, 4);
        for (size_t i = 0; i < n; i++)
                CHECK(lines[i] != NULL);
        if (n == 4 && lines[0] && lines[1] && lines[2] && lines[3]) {
                json_object *v;
                CHECK(json_object_object_get_ex(lines[0], "version", &v) && json_object_get_int(v) == 2);
                CHECK(json_object_object_get_ex(lines[0], "width", &v) && json_object_get_int(v) == 120);
                CHECK(json_object_object_get_ex(lines[0], "height", &v) && json_object_get_int(v) == 40);
                CHECK(json_object_object_get_ex(lines[0], "timestamp", &v) &&
                      json_object_get_int64(v) == 1764700000);
                CHECK(json_object_object_get_ex(lines[0], "title", &v));
                CHECK_STR(json_object_get_string(v), "sb_x \"shell\"");
                CHECK(json_object_object_get_ex(lines[0], "env", &v) &&
                      json_object_object_get_ex(v, "TERM", &v));
                CHECK_STR(json_object_get_string(v), "xterm-256color");

                CHECK(json_object_get_double(json_object_array_get_idx(lines[1], 0)) == 1.5);
                CHECK_STR(event_field(lines[1], 1), "o");
                CHECK_STR(event_field(lines[1], 2), "hi\r\n\x1b[0m\"q\"\\");
                CHECK_STR(event_field(lines[2], 1), "r");
                CHECK_STR(event_field(lines[2], 2), "100x30");
                CHECK_STR(event_field(lines[3], 2), "\x01\x7f");
        }
        free_lines(lines, n);
        CHECK(!a.truncated);
        asciicast_done(&a);
}

static void test_utf8(void) {
        Asciicast a = ASCIICAST_INIT;
        json_object *lines[16];

        CHECK(asciicast_start(&a, 4096, 80, 24, 0, NULL, NULL, NULL) == 0);
        /* "é€" split inside both characters, then an invalid byte, an overlong form and a surrogate */
        asciicast_output(&a, 1, "a\xc3", 2);
        asciicast_output(&a, 2, "\xa9\xe2\x82", 3);
        asciicast_output(&a, 3, "\xac!", 2);
        asciicast_output(&a, 4, "\xff\xc0\xaf\xed\xa0\x80.", 7);
        /* a character left unfinished at the end */
        asciicast_output(&a, 5, "\xf0\x9f", 2);
        asciicast_finish(&a, 6);

        size_t n = parse_lines(&a, lines, ELEMENTSOF(lines));
        CHECK_INT(n, 6);
        if (n == 6) {
                CHECK_STR(event_field(lines[1], 2), "a");
                CHECK_STR(event_field(lines[2], 2), "\xc3\xa9");
                CHECK_STR(event_field(lines[3], 2), "\xe2\x82\xac!");
                /* six bytes that are not UTF-8: six replacement characters */
                CHECK_STR(event_field(lines[4], 2),
                          "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                          "\xef\xbf\xbd.");
                CHECK_STR(event_field(lines[5], 2), "\xef\xbf\xbd\xef\xbf\xbd");
        }
        free_lines(lines, n);
        asciicast_done(&a);
}

static void test_cap(void) {
        Asciicast a = ASCIICAST_INIT;
        json_object *lines[512];
        char chunk[100];

        memset(chunk, 'x', sizeof(chunk));
        CHECK(asciicast_start(&a, 2048, 80, 24, 0, "dumb", NULL, NULL) == 0);
        for (int i = 0; i < 100; i++)
                asciicast_output(&a, i * 1000, chunk, sizeof(chunk));
        CHECK(a.truncated);
        CHECK(a.len <= 2048);
        size_t before = a.len;
        asciicast_output(&a, 999999, chunk, sizeof(chunk));
        asciicast_resize(&a, 999999, 1, 1);
        CHECK_U64(a.len, before); /* nothing after the marker */

        size_t n = parse_lines(&a, lines, ELEMENTSOF(lines));
        CHECK(n > 2);
        for (size_t i = 0; i < n; i++)
                CHECK(lines[i] != NULL);
        if (n > 2) {
                CHECK_STR(event_field(lines[n - 1], 1), "m");
                CHECK_STR(event_field(lines[n - 1], 2), "truncated");
                CHECK_STR(event_field(lines[n - 2], 1), "o");
        }
        free_lines(lines, n);
        asciicast_done(&a);

        /* too small, or no size */
        CHECK(asciicast_start(&a, 100, 80, 24, 0, NULL, NULL, NULL) == -EINVAL);
        CHECK(asciicast_start(&a, 4096, 0, 24, 0, NULL, NULL, NULL) == -EINVAL);
        CHECK(a.buf == NULL);
        /* events without a start are ignored, not a crash */
        asciicast_output(&a, 1, "x", 1);
        asciicast_finish(&a, 1);
        CHECK_U64(a.len, 0);
}

int main(void) {
        test_header_and_events();
        test_utf8();
        test_cap();
        return test_finish("test-asciicast");
}
