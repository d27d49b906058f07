/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for utf8-util: sequence lengths at every boundary, validity, and sanitizing with each flag. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "utf8-util.h"
#include "test-util.h"

#define U(s) ((const uint8_t *) (s))

static void test_sequence_len(void) {
        bool cut;

        CHECK_U64(utf8_sequence_len(U("a"), 1, &cut), 1);
        CHECK_U64(utf8_sequence_len(U("\0"), 1, NULL), 1);
        CHECK_U64(utf8_sequence_len(U("\xc3\xa9"), 2, &cut), 2);
        CHECK_U64(utf8_sequence_len(U("\xe2\x82\xac"), 3, &cut), 3);
        CHECK_U64(utf8_sequence_len(U("\xf0\x9f\x98\x80"), 4, &cut), 4);
        CHECK_U64(utf8_sequence_len(U("\xf4\x8f\xbf\xbf"), 4, &cut), 4); /* U+10FFFF */

        /* invalid, and not merely cut short */
        static const char *const bad[] = {
                "\x80",             /* a lone continuation byte */
                "\xc0\xaf",         /* overlong '/' */
                "\xc1\xbf",         /* overlong */
                "\xe0\x80\xaf",     /* overlong, three bytes */
                "\xed\xa0\x80",     /* a surrogate */
                "\xf0\x80\x80\xaf", /* overlong, four bytes */
                "\xf4\x90\x80\x80", /* above U+10FFFF */
                "\xf5\x80\x80\x80",
                "\xff",
                "\xc3\x28", /* a continuation byte missing */
                "\xe2\x28\xac",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                CHECK_U64(utf8_sequence_len(U(bad[i]), strlen(bad[i]), &cut), 0);
                CHECK(!cut);
        }

        /* a valid start that the end cuts short */
        CHECK_U64(utf8_sequence_len(U("\xe2\x82"), 2, &cut), 0);
        CHECK(cut);
        CHECK_U64(utf8_sequence_len(U("\xf0\x9f\x98"), 3, &cut), 0);
        CHECK(cut);
        CHECK_U64(utf8_sequence_len(U("\xc3"), 1, &cut), 0);
        CHECK(cut);
}

static void test_is_valid(void) {
        CHECK(utf8_is_valid(U(""), 0));
        CHECK(utf8_is_valid(U("h\xc3\xa9llo \xce\xbb \xf0\x9f\x98\x80"), 15));
        CHECK(utf8_is_valid(U("a\0b"), 3));
        CHECK(!utf8_is_valid(U("ab\xe2\x82"), 4));
        CHECK(!utf8_is_valid(U("a\xff" "b"), 3));
}

static void test_sanitize(void) {
        size_t len, used;
        char *s;

        CHECK(utf8_sanitize(U("a\xff" "b\xc0\xaf" "c\xed\xa0\x80"), 9, 0, &s, &len, &used) == 0);
        /* every invalid byte becomes one U+FFFD */
        CHECK_STR(s, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
        CHECK_U64(len, strlen(s));
        CHECK_U64(used, 9);
        free(s);

        /* a cut tail is kept for the next chunk only when asked */
        CHECK(utf8_sanitize(U("ab\xe2\x82"), 4, UTF8_KEEP_TAIL, &s, &len, &used) == 0);
        CHECK_STR(s, "ab");
        CHECK_U64(used, 2);
        free(s);
        CHECK(utf8_sanitize(U("ab\xe2\x82"), 4, 0, &s, &len, &used) == 0);
        CHECK_STR(s, "ab\xef\xbf\xbd\xef\xbf\xbd");
        CHECK_U64(used, 4);
        free(s);
        /* an invalid byte is no cut tail */
        CHECK(utf8_sanitize(U("a\x80"), 2, UTF8_KEEP_TAIL, &s, &len, &used) == 0);
        CHECK_STR(s, "a\xef\xbf\xbd");
        CHECK_U64(used, 2);
        free(s);

        /* NUL stays, unless it must not */
        CHECK(utf8_sanitize(U("a\0b"), 3, 0, &s, &len, NULL) == 0);
        CHECK_U64(len, 3);
        CHECK(memcmp(s, "a\0b", 3) == 0);
        free(s);
        CHECK(utf8_sanitize(U("a\0b"), 3, UTF8_REPLACE_NUL, &s, &len, NULL) == 0);
        CHECK_STR(s, "a\xef\xbf\xbd" "b");
        free(s);

        CHECK(utf8_sanitize(U(""), 0, 0, &s, &len, &used) == 0);
        CHECK_STR(s, "");
        CHECK_U64(len, 0);
        CHECK_U64(used, 0);
        free(s);
}

static void test_decode(void) {
        CHECK_U64(utf8_decode(U("a"), 1), 'a');
        CHECK_U64(utf8_decode(U("\xc2\x9b"), 2), 0x9b);
        CHECK_U64(utf8_decode(U("\xe2\x80\xae"), 3), 0x202e);
        CHECK_U64(utf8_decode(U("\xf3\xa0\x80\x81"), 4), 0xe0001);
        CHECK_U64(utf8_decode(U("\xf4\x8f\xbf\xbf"), 4), 0x10ffff);
}

static void test_unprintable(void) {
        /* Each range's ends and the code points just outside them. */
        static const uint32_t yes[] = {
                0x00,    0x1b,    0x1f,    0x7f,    0x80,    0x9b,    0x9f,    0xad,    0x600,   0x605,
                0x61c,   0x6dd,   0x70f,   0x890,   0x891,   0x8e2,   0x180e,  0x200b,  0x200e,  0x200f,
                0x2028,  0x2029,  0x202a,  0x202e,  0x2060,  0x2064,  0x2066,  0x2069,  0x206f,  0xfeff,
                0xfff9,  0xfffb,  0x110bd, 0x110cd, 0x13430, 0x1343f, 0x1bca0, 0x1bca3, 0x1d173, 0x1d17a,
                0xe0001, 0xe0020, 0xe007f,
        };
        static const uint32_t no[] = {
                0x20,    '\\',    0x7e,    0xa0,    0xac,    0xae,    0xe9,    0x5ff,   0x606,   0x61b,
                0x61d,   0x88f,   0x892,   0x200a,  0x2010,  0x2027,  0x202f,  0x205f,  0x2065,  0x2070,
                0xfefe,  0xff00,  0xfff8,  0xfffc,  0xfffd,  0x1342f, 0x13440, 0x1bca4, 0x1d17b, 0xe0000,
                0xe0002, 0xe001f, 0xe0080, 0x1f600, 0x10ffff,
        };
        for (size_t i = 0; i < ELEMENTSOF(yes); i++)
                if (!unichar_is_unprintable(yes[i]))
                        CHECK_U64(yes[i], 0); /* prints the code point that failed */
        for (size_t i = 0; i < ELEMENTSOF(no); i++)
                if (unichar_is_unprintable(no[i]))
                        CHECK_U64(no[i], 0);

        CHECK(utf8_is_printable(U("h\xc3\xa9llo \xf0\x9f\x98\x80 \\"), 13));
        CHECK(utf8_is_printable(U(""), 0));
        CHECK(!utf8_is_printable(U("a\tb"), 3));
        CHECK(!utf8_is_printable(U("a\xc2\x85"), 3));              /* NEL, a C1 control */
        CHECK(!utf8_is_printable(U("admin\xe2\x80\xae"), 8));      /* RLO */
        CHECK(!utf8_is_printable(U("x\xe2\x81\xa6y"), 5));         /* LRI */
        CHECK(!utf8_is_printable(U("\xef\xbb\xbfkey"), 6));        /* BOM */
        CHECK(!utf8_is_printable(U("k\xf3\xa0\x80\x81"), 5));      /* LANGUAGE TAG */
        CHECK(!utf8_is_printable(U("a\xff"), 2));                  /* not UTF-8 */
}

static void check_escape(const char *in, size_t n, Utf8EscapeFlags flags, const char *want, int line) {
        char *s = NULL;
        size_t len = 0;

        if (utf8_escape(U(in), n, flags, &s, &len) < 0 || !streq(s, want) || len != strlen(want)) {
                fprintf(stderr, "%s:%d: escape: got \"%s\", want \"%s\"\n", __FILE__, line, s ? s : "(null)",
                        want);
                failures++;
        }
        free(s);
}
#define CHECK_ESCAPE(in, flags, want) check_escape(in, sizeof(in) - 1, flags, want, __LINE__)

static void test_escape(void) {
        CHECK_ESCAPE("", 0, "");
        CHECK_ESCAPE("plain h\xc3\xa9llo \xf0\x9f\x98\x80", 0, "plain h\xc3\xa9llo \xf0\x9f\x98\x80");
        /* OSC 0 (title), ED, OSC 52 (clipboard) ended by ST */
        CHECK_ESCAPE("\033]0;t\a\033[2J\033]52;c;eA==\033\\", 0,
                     "\\x1b]0;t\\x07\\x1b[2J\\x1b]52;c;eA==\\x1b\\\\");
        CHECK_ESCAPE("a\\b", 0, "a\\\\b");
        CHECK_ESCAPE("\t\n\r\x01\x7f", 0, "\\t\\n\\r\\x01\\x7f");
        CHECK_ESCAPE("a\tb\n", UTF8_ESCAPE_KEEP_TAB, "a\tb\\n");
        CHECK_ESCAPE("\0x", 0, "\\x00x");
        /* C1: CSI and NEL; a byte that is not UTF-8 reads differently from the code point */
        CHECK_ESCAPE("\xc2\x9b" "31m\xc2\x85", 0, "\\u009b31m\\u0085");
        CHECK_ESCAPE("\x9b\xff\xc0\xaf\xed\xa0\x80", 0, "\\x9b\\xff\\xc0\\xaf\\xed\\xa0\\x80");
        CHECK_ESCAPE("ab\xe2\x82", 0, "ab\\xe2\\x82"); /* cut short */
        /* bidi and other format characters */
        CHECK_ESCAPE("\xe2\x80\xae" "fdp.exe", 0, "\\u202efdp.exe");
        CHECK_ESCAPE("\xd8\x9c\xe2\x81\xa6\xe2\x81\xa9\xc2\xad\xe2\x80\x8b\xef\xbb\xbf", 0,
                     "\\u061c\\u2066\\u2069\\u00ad\\u200b\\ufeff");
        CHECK_ESCAPE("\xf3\xa0\x80\x81\xf3\xa0\x81\xbf", 0, "\\U000e0001\\U000e007f");
        CHECK_ESCAPE("\xe2\x80\xa8", 0, "\\u2028");
}

static void test_escaped_unit_len(void) {
        CHECK_U64(utf8_escaped_unit_len(""), 0);
        CHECK_U64(utf8_escaped_unit_len("ab"), 1);
        CHECK_U64(utf8_escaped_unit_len("\xc3\xa9x"), 2);
        CHECK_U64(utf8_escaped_unit_len("\\\\x"), 2);
        CHECK_U64(utf8_escaped_unit_len("\\nx"), 2);
        CHECK_U64(utf8_escaped_unit_len("\\x1bx"), 4);
        CHECK_U64(utf8_escaped_unit_len("\\u202ex"), 6);
        CHECK_U64(utf8_escaped_unit_len("\\U000e0001x"), 10);
        CHECK_U64(utf8_escaped_unit_len("\\u20"), 4); /* never past the end */
}

int main(void) {
        test_sequence_len();
        test_is_valid();
        test_sanitize();
        test_decode();
        test_unprintable();
        test_escape();
        test_escaped_unit_len();
        return test_finish("test-utf8-util");
}
