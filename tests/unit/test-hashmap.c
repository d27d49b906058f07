/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for hashmap: put/get/remove, growth to 100k entries, reinsertion, iteration with removal. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "macro.h"
#include "test-util.h"


/* Like CHECK, but stops a loop at the first failure instead of printing 100k lines. */
#define CHECK_OR_BREAK(expr, i)                                                                             \
        if (!(expr)) {                                                                                      \
                fprintf(stderr, "%s:%d: check failed at i=%zu: %s\n", __FILE__, __LINE__, (size_t) (i),     \
                        #expr);                                                                             \
                failures++;                                                                                 \
                break;                                                                                      \
        }

typedef struct Item {
        char key[32];
        size_t n;
        unsigned seen;
} Item;

enum { N = 100000 };

static Item *make_items(size_t n) {
        Item *items = calloc(n, sizeof(Item));
        if (!items)
                abort();
        for (size_t i = 0; i < n; i++) {
                snprintf(items[i].key, sizeof(items[i].key), "key-%zu", i);
                items[i].n = i;
        }
        return items;
}

static void test_basic(void) {
        _cleanup_hashmap_free_ Hashmap *h = hashmap_new();
        char a[] = "alpha", b[] = "beta", a2[] = "alpha";
        int x = 1, y = 2;

        CHECK(h);
        CHECK(hashmap_size(h) == 0);
        CHECK(hashmap_isempty(h));
        CHECK(!hashmap_get(h, "alpha"));
        CHECK(!hashmap_remove(h, "alpha"));

        CHECK(hashmap_put(h, a, &x) == 0);
        CHECK(hashmap_put(h, b, &y) == 0);
        CHECK(hashmap_size(h) == 2);
        CHECK(hashmap_get(h, "alpha") == &x);
        CHECK(hashmap_get(h, a2) == &x); /* by content, not by pointer */
        CHECK(hashmap_get(h, "beta") == &y);
        CHECK(hashmap_contains(h, "beta"));
        CHECK(!hashmap_get(h, "gamma"));
        CHECK(!hashmap_get(h, "alph"));
        CHECK(!hashmap_get(h, ""));

        CHECK(hashmap_put(h, a2, &y) == -EEXIST);
        CHECK(hashmap_get(h, "alpha") == &x);
        CHECK(hashmap_size(h) == 2);

        CHECK(hashmap_put(h, NULL, &x) == -EINVAL);
        CHECK(hashmap_put(h, "c", NULL) == -EINVAL);
        CHECK(hashmap_put(NULL, "c", &x) == -EINVAL);
        CHECK(hashmap_size(h) == 2);

        /* The empty string is a key like any other. */
        CHECK(hashmap_put(h, "", &y) == 0);
        CHECK(hashmap_get(h, "") == &y);
        CHECK(hashmap_remove(h, "") == &y);

        CHECK(hashmap_remove(h, "alpha") == &x);
        CHECK(!hashmap_remove(h, "alpha"));
        CHECK(!hashmap_get(h, "alpha"));
        CHECK(hashmap_get(h, "beta") == &y);
        CHECK(hashmap_size(h) == 1);

        CHECK(hashmap_put(h, a, &y) == 0);
        CHECK(hashmap_get(h, "alpha") == &y);
        CHECK(hashmap_size(h) == 2);

        /* NULL maps read as empty. */
        CHECK(hashmap_size(NULL) == 0);
        CHECK(!hashmap_get(NULL, "alpha"));
        CHECK(!hashmap_remove(NULL, "alpha"));
        size_t state = 0;
        CHECK(!hashmap_iterate(NULL, &state, NULL, NULL));
        CHECK(hashmap_free(NULL) == NULL);
}

static void test_many(void) {
        _cleanup_hashmap_free_ Hashmap *h = hashmap_new();
        Item *items = make_items(N);

        CHECK(h);

        for (size_t i = 0; i < N; i++) {
                CHECK_OR_BREAK(hashmap_put(h, items[i].key, &items[i]) == 0, i);
                CHECK_OR_BREAK(hashmap_size(h) == i + 1, i);
        }
        for (size_t i = 0; i < N; i++)
                CHECK_OR_BREAK(hashmap_get(h, items[i].key) == &items[i], i);
        CHECK(!hashmap_get(h, "key-100000"));
        CHECK(!hashmap_get(h, "key-"));
        CHECK(hashmap_put(h, "key-77", &items[0]) == -EEXIST);

        /* Remove the odd ones; the even ones must all survive. */
        for (size_t i = 1; i < N; i += 2)
                CHECK_OR_BREAK(hashmap_remove(h, items[i].key) == &items[i], i);
        CHECK(hashmap_size(h) == N / 2);
        for (size_t i = 0; i < N; i++)
                CHECK_OR_BREAK(hashmap_get(h, items[i].key) == (i % 2 ? NULL : &items[i]), i);

        /* Reinsert them: they must land again, with removed slots in the middle of probe chains. */
        for (size_t i = 1; i < N; i += 2)
                CHECK_OR_BREAK(hashmap_put(h, items[i].key, &items[i]) == 0, i);
        CHECK(hashmap_size(h) == N);
        for (size_t i = 0; i < N; i++)
                CHECK_OR_BREAK(hashmap_get(h, items[i].key) == &items[i], i);

        /* Churn: remove and re-add over and over, which must neither leak slots nor lose entries. */
        for (unsigned round = 0; round < 20; round++) {
                for (size_t i = round; i < N; i += 7)
                        CHECK_OR_BREAK(hashmap_remove(h, items[i].key) == &items[i], i);
                for (size_t i = round; i < N; i += 7)
                        CHECK_OR_BREAK(hashmap_put(h, items[i].key, &items[i]) == 0, i);
        }
        CHECK(hashmap_size(h) == N);
        for (size_t i = 0; i < N; i++)
                CHECK_OR_BREAK(hashmap_get(h, items[i].key) == &items[i], i);

        /* Empty it completely, then reuse. */
        for (size_t i = 0; i < N; i++)
                CHECK_OR_BREAK(hashmap_remove(h, items[i].key) == &items[i], i);
        CHECK(hashmap_size(h) == 0);
        CHECK(hashmap_isempty(h));
        size_t state = 0;
        CHECK(!hashmap_iterate(h, &state, NULL, NULL));
        for (size_t i = 0; i < 1000; i++)
                CHECK_OR_BREAK(hashmap_put(h, items[i].key, &items[i]) == 0, i);
        CHECK(hashmap_size(h) == 1000);
        CHECK(hashmap_get(h, "key-999") == &items[999]);

        free(items);
}

static void test_iterate(void) {
        _cleanup_hashmap_free_ Hashmap *h = hashmap_new();
        enum { M = 5000 };
        Item *items = make_items(M);
        size_t count = 0, expected_next = 0;
        Item *it;
        const char *k;

        for (size_t i = 0; i < M; i++)
                CHECK(hashmap_put(h, items[i].key, &items[i]) == 0);

        /* Insertion order, every entry once, keys matching values. */
        HASHMAP_FOREACH_KEY(it, k, h, s) {
                CHECK_OR_BREAK(it->n == expected_next, it->n);
                CHECK_OR_BREAK(k == it->key, it->n);
                it->seen++;
                expected_next++;
                count++;
        }
        CHECK(count == M);

        /* Remove the current entry, and also one ahead, while iterating: none skipped, none twice. */
        count = 0;
        HASHMAP_FOREACH(it, h, s) {
                it->seen++;
                count++;
                CHECK(hashmap_remove(h, it->key) == it);
                if (it->n % 10 == 0 && it->n + 1 < M)
                        CHECK(hashmap_remove(h, items[it->n + 1].key) == &items[it->n + 1]);
        }
        CHECK(count == M - M / 10);
        CHECK(hashmap_size(h) == 0);
        for (size_t i = 0; i < M; i++) {
                unsigned expected = (i % 10 == 1) ? 1 : 2;
                CHECK_OR_BREAK(items[i].seen == expected, i);
        }

        /* After removals the order stays insertion order, also across the rebuild that drops the
         * removed entries. */
        for (size_t i = 0; i < M; i++)
                CHECK(hashmap_put(h, items[i].key, &items[i]) == 0);
        for (size_t i = 0; i < M; i += 3)
                CHECK(hashmap_remove(h, items[i].key));
        for (size_t i = 0; i < M; i += 3)
                CHECK(hashmap_put(h, items[i].key, &items[i]) == 0);
        size_t *expected = calloc(M, sizeof(size_t)), n_expected = 0, n_seen = 0;
        CHECK(expected);
        if (!expected)
                abort();
        for (size_t i = 0; i < M; i++)
                if (i % 3 != 0)
                        expected[n_expected++] = i; /* the survivors, in their order */
        for (size_t i = 0; i < M; i += 3)
                expected[n_expected++] = i; /* then the re-added ones, in theirs */
        HASHMAP_FOREACH(it, h, s) {
                CHECK_OR_BREAK(n_seen < M && it->n == expected[n_seen], n_seen);
                n_seen++;
        }
        CHECK(n_seen == M);
        free(expected);

        /* A finished iteration stays finished and leaves the outputs alone. */
        size_t state = 0;
        void *v = NULL, *sentinel = &state;
        const char *key = NULL;
        while (hashmap_iterate(h, &state, &v, &key))
                ;
        v = sentinel;
        CHECK(!hashmap_iterate(h, &state, &v, &key));
        CHECK(v == sentinel);

        free(items);
}

static void test_collisions_by_content(void) {
        /* Keys that differ in one byte at every position and in length: catches a hash or compare that
         * looks at a prefix only. */
        _cleanup_hashmap_free_ Hashmap *h = hashmap_new();
        static char keys[64][65];
        int v = 0;

        for (size_t i = 0; i < 64; i++) {
                memset(keys[i], 'a', 64);
                keys[i][64] = 0;
                keys[i][i] = 'b';
                CHECK(hashmap_put(h, keys[i], &keys[i]) == 0);
        }
        for (size_t i = 0; i < 64; i++)
                CHECK(hashmap_get(h, keys[i]) == &keys[i]);

        static char prefixes[64][65];
        for (size_t l = 0; l < 64; l++) {
                memset(prefixes[l], 'a', l);
                CHECK(hashmap_put(h, prefixes[l], &v) == 0);
        }
        CHECK(hashmap_size(h) == 128);
        for (size_t l = 0; l < 64; l++)
                CHECK(hashmap_remove(h, prefixes[l]) == &v);
        CHECK(hashmap_size(h) == 64);
}

int main(void) {
        test_basic();
        test_many();
        test_iterate();
        test_collisions_by_content();

        return test_finish("test-hashmap");
}
