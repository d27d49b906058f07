/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for sandbox-id: generated ids are valid and distinct; validation of ids and names. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "sandbox-id.h"
#include "test-util.h"


#define CHECK_VALID(fn, s, expected)                                                                        \
        do {                                                                                                \
                if (fn(s) != (expected)) {                                                                  \
                        fprintf(stderr, "%s:%d: %s(\"%s\") is %s, expected %s\n", __FILE__, __LINE__, #fn,  \
                                strna(s), (expected) ? "false" : "true", (expected) ? "true" : "false");    \
                        failures++;                                                                         \
                }                                                                                           \
        } while (0)

static int compare_ids(const void *a, const void *b) {
        return strcmp(a, b);
}

static void test_generate(void) {
        enum { N = 10000 };
        char (*ids)[SANDBOX_ID_LEN + 1] = calloc(N, sizeof(*ids));
        unsigned used[256] = { 0 };

        CHECK(ids);
        if (!ids)
                return;

        for (size_t i = 0; i < N; i++) {
                CHECK(sandbox_id_generate(ids[i]) == 0);
                CHECK(strlen(ids[i]) == SANDBOX_ID_LEN);
                CHECK_VALID(sandbox_id_is_valid, ids[i], true);
                for (size_t j = 3; j < SANDBOX_ID_LEN; j++)
                        used[(unsigned char) ids[i][j]]++;
        }

        /* Every one of the 32 symbols must show up; a stuck bit would leave half of them unused. */
        const char *alphabet = "abcdefghijklmnopqrstuvwxyz234567";
        for (const char *c = alphabet; *c; c++)
                if (used[(unsigned char) *c] == 0) {
                        fprintf(stderr, "%s:%d: symbol '%c' never generated\n", __FILE__, __LINE__, *c);
                        failures++;
                }

        /* Neighbouring symbols must be independent: all 32 x 32 pairs show up among the 90000 pairs (about
         * 88 expected of each). A generator reusing bits across symbols reaches only some of them. */
        static bool pairs[32][32];
        unsigned n_pairs = 0;
        for (size_t i = 0; i < N; i++)
                for (size_t j = 3; j + 1 < SANDBOX_ID_LEN; j++) {
                        const char *a = strchr(alphabet, ids[i][j]), *b = strchr(alphabet, ids[i][j + 1]);
                        if (a && b && !pairs[a - alphabet][b - alphabet]) {
                                pairs[a - alphabet][b - alphabet] = true;
                                n_pairs++;
                        }
                }
        if (n_pairs != 32 * 32) {
                fprintf(stderr, "%s:%d: only %u of 1024 symbol pairs generated\n", __FILE__, __LINE__,
                        n_pairs);
                failures++;
        }

        /* 50 random bits: a collision among 10000 would be a ~5e-8 event, i.e. a broken generator. */
        qsort(ids, N, sizeof(*ids), compare_ids);
        for (size_t i = 1; i < N; i++)
                if (streq(ids[i - 1], ids[i])) {
                        fprintf(stderr, "%s:%d: id %s generated twice\n", __FILE__, __LINE__, ids[i]);
                        failures++;
                }

        free(ids);
}

static void test_id_is_valid(void) {
        CHECK_VALID(sandbox_id_is_valid, "sb_abcdefghij", true);
        CHECK_VALID(sandbox_id_is_valid, "sb_234567zzzz", true);
        CHECK_VALID(sandbox_id_is_valid, "sb_abcdefghi", false);   /* 9 chars */
        CHECK_VALID(sandbox_id_is_valid, "sb_abcdefghijk", false); /* 11 chars */
        CHECK_VALID(sandbox_id_is_valid, "sb_abcdefgh1j", false);  /* 1 is not base32 */
        CHECK_VALID(sandbox_id_is_valid, "sb_abcdefgh8j", false);
        CHECK_VALID(sandbox_id_is_valid, "sb_ABCDEFGHIJ", false);
        CHECK_VALID(sandbox_id_is_valid, "sx_abcdefghij", false);
        CHECK_VALID(sandbox_id_is_valid, "abcdefghijklm", false);
        CHECK_VALID(sandbox_id_is_valid, "sb_", false);
        CHECK_VALID(sandbox_id_is_valid, "", false);
        CHECK_VALID(sandbox_id_is_valid, NULL, false);
        CHECK_VALID(sandbox_id_is_valid, "sb_abcde/ghij", false);
}

static void test_name_is_valid(void) {
        char s[80];

        CHECK_VALID(name_is_valid, "a", true);
        CHECK_VALID(name_is_valid, "my-box_1.test", true);
        CHECK_VALID(name_is_valid, "A9", true);
        CHECK_VALID(name_is_valid, "_x", true);
        CHECK_VALID(name_is_valid, "x.", true);
        CHECK_VALID(name_is_valid, "", false);
        CHECK_VALID(name_is_valid, NULL, false);
        CHECK_VALID(name_is_valid, ".", false);
        CHECK_VALID(name_is_valid, "..", false);
        CHECK_VALID(name_is_valid, ".hidden", false);
        CHECK_VALID(name_is_valid, "-rf", false);
        CHECK_VALID(name_is_valid, "a b", false);
        CHECK_VALID(name_is_valid, "a/b", false);
        CHECK_VALID(name_is_valid, "a\nb", false);
        CHECK_VALID(name_is_valid, "caf\xc3\xa9", false);

        memset(s, 'x', 64);
        s[64] = 0;
        CHECK_VALID(name_is_valid, s, true);
        s[64] = 'x';
        s[65] = 0;
        CHECK_VALID(name_is_valid, s, false);
}

/* HostTag=: the tag is the first character after "sb_", the other nine stay random. */
static void test_generate_tagged(void) {
        char id[SANDBOX_ID_LEN + 1], before[SANDBOX_ID_LEN + 1];
        unsigned used[256] = { 0 };

        for (size_t i = 0; i < 2000; i++) {
                CHECK_INT(sandbox_id_generate_tagged('b', id), 0);
                CHECK_VALID(sandbox_id_is_valid, id, true);
                CHECK(strncmp(id, "sb_b", 4) == 0);
                used[(unsigned char) id[4]]++;
        }
        /* the character after the tag is still random: all 32 show up among 2000 (about 62 each) */
        for (const char *c = "abcdefghijklmnopqrstuvwxyz234567"; *c; c++)
                CHECK(used[(unsigned char) *c] > 0);
        CHECK_INT(sandbox_id_generate_tagged('7', id), 0);
        CHECK(strncmp(id, "sb_7", 4) == 0);
        /* no tag: as sandbox_id_generate() */
        CHECK_INT(sandbox_id_generate_tagged(0, id), 0);
        CHECK_VALID(sandbox_id_is_valid, id, true);
        /* not one of the ids' characters: refused, ret untouched */
        memcpy(before, id, sizeof(id));
        CHECK_INT(sandbox_id_generate_tagged('A', id), -EINVAL);
        CHECK_INT(sandbox_id_generate_tagged('1', id), -EINVAL);
        CHECK_INT(sandbox_id_generate_tagged('_', id), -EINVAL);
        CHECK(memcmp(before, id, sizeof(id)) == 0);
        CHECK(sandbox_id_char_is_valid('a') && sandbox_id_char_is_valid('2') && !sandbox_id_char_is_valid('8') &&
              !sandbox_id_char_is_valid(0));
}

int main(void) {
        test_generate();
        test_generate_tagged();
        test_id_is_valid();
        test_name_is_valid();

        return test_finish("test-sandbox-id");
}
