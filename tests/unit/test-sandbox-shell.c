/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for OpenShell's input checks (sandbox-options.c): terminal sizes and TERM values. */
#include <stdio.h>

#include "macro.h"
#include "sandbox-options.h"
#include "test-util.h"

static void test_sizes(void) {
        CHECK(shell_size_is_valid(80, 24));
        CHECK(shell_size_is_valid(1, 1));
        CHECK(shell_size_is_valid(SHELL_COLS_MAX, SHELL_ROWS_MAX));
        CHECK(shell_size_is_valid(SHELL_COLS_DEFAULT, SHELL_ROWS_DEFAULT));
        CHECK(!shell_size_is_valid(0, 24));
        CHECK(!shell_size_is_valid(80, 0));
        CHECK(!shell_size_is_valid(SHELL_COLS_MAX + 1, 24));
        CHECK(!shell_size_is_valid(80, SHELL_ROWS_MAX + 1));
        /* a winsize field is 16 bits: these must not wrap into something valid */
        CHECK(!shell_size_is_valid(65536 + 80, 24));
        CHECK(!shell_size_is_valid(80, 4294967295u));
}

static void test_terms(void) {
        CHECK(shell_term_is_valid("xterm-256color"));
        CHECK(shell_term_is_valid("screen.xterm-256color"));
        CHECK(shell_term_is_valid("rxvt-unicode+x_1"));
        CHECK(shell_term_is_valid("vt100"));
        CHECK(!shell_term_is_valid(NULL));
        CHECK(!shell_term_is_valid(""));
        CHECK(!shell_term_is_valid("xterm; rm -rf /"));
        CHECK(!shell_term_is_valid("xterm\n"));
        CHECK(!shell_term_is_valid("../../etc/passwd"));
        CHECK(!shell_term_is_valid("a b"));
        char long_term[SHELL_TERM_MAX + 2];
        memset(long_term, 'x', sizeof(long_term) - 1);
        long_term[SHELL_TERM_MAX + 1] = 0;
        CHECK(!shell_term_is_valid(long_term));
        long_term[SHELL_TERM_MAX] = 0;
        CHECK(shell_term_is_valid(long_term));
}

int main(void) {
        test_sizes();
        test_terms();
        return test_finish("test-sandbox-shell");
}
