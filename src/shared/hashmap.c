/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A string-keyed hash map that iterates in insertion order and tolerates removal while iterating. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "hashmap.h"
#include "macro.h"

/* Layout after CPython's compact dict: entries live in a dense array in insertion order, and an open
 * addressing index (linear probing) maps hashes to entry positions. Removal only marks the entry and
 * its index slot as deleted, so nothing moves and iteration (a position in the entry array) stays
 * valid. Deleted entries are dropped when the entry array fills up and is rebuilt by hashmap_put(). */

#define SLOT_EMPTY UINT32_MAX
#define SLOT_DELETED (UINT32_MAX - 1)
#define ENTRIES_MIN 8
/* Positions are uint32_t in the index; SLOT_* are reserved. */
#define ENTRIES_MAX (UINT32_C(1) << 30)

typedef struct Entry {
        const char *key; /* NULL once removed */
        void *value;
        uint64_t hash;
} Entry;

struct Hashmap {
        Entry *entries;
        size_t n_entries; /* used positions in entries[], removed ones included */
        size_t n_allocated;
        size_t n_live;

        uint32_t *index; /* 2 * n_allocated slots, so the load stays at or below 1/2 */
        size_t n_index;

        uint8_t hash_key[16];
};

/* SipHash-2-4 (Aumasson, Bernstein), as in systemd's siphash24.c, condensed to one-shot. */
#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND(v0, v1, v2, v3)                                                                            \
        do {                                                                                                \
                v0 += v1;                                                                                   \
                v1 = ROTL(v1, 13);                                                                          \
                v1 ^= v0;                                                                                   \
                v0 = ROTL(v0, 32);                                                                          \
                v2 += v3;                                                                                   \
                v3 = ROTL(v3, 16);                                                                          \
                v3 ^= v2;                                                                                   \
                v0 += v3;                                                                                   \
                v3 = ROTL(v3, 21);                                                                          \
                v3 ^= v0;                                                                                   \
                v2 += v1;                                                                                   \
                v1 = ROTL(v1, 17);                                                                          \
                v1 ^= v2;                                                                                   \
                v2 = ROTL(v2, 32);                                                                          \
        } while (0)

static uint64_t load_le64(const uint8_t *p) {
        uint64_t v = 0;

        for (unsigned i = 0; i < 8; i++)
                v |= (uint64_t) p[i] << (8 * i);
        return v;
}

static uint64_t siphash24(const void *data, size_t len, const uint8_t key[16]) {
        const uint8_t *in = data, *end = in + (len & ~(size_t) 7);
        uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
        uint64_t v0 = UINT64_C(0x736f6d6570736575) ^ k0;
        uint64_t v1 = UINT64_C(0x646f72616e646f6d) ^ k1;
        uint64_t v2 = UINT64_C(0x6c7967656e657261) ^ k0;
        uint64_t v3 = UINT64_C(0x7465646279746573) ^ k1;
        uint64_t b = (uint64_t) len << 56;

        for (; in != end; in += 8) {
                uint64_t m = load_le64(in);

                v3 ^= m;
                SIPROUND(v0, v1, v2, v3);
                SIPROUND(v0, v1, v2, v3);
                v0 ^= m;
        }

        for (size_t i = 0; i < (len & 7); i++)
                b |= (uint64_t) in[i] << (8 * i);

        v3 ^= b;
        SIPROUND(v0, v1, v2, v3);
        SIPROUND(v0, v1, v2, v3);
        v0 ^= b;
        v2 ^= 0xff;
        for (unsigned i = 0; i < 4; i++)
                SIPROUND(v0, v1, v2, v3);

        return v0 ^ v1 ^ v2 ^ v3;
}

static void init_hash_key(uint8_t key[16]) {
        /* GRND_NONBLOCK: a map must be creatable early at boot. If the pool is not ready the key is
         * weaker (time and address), which only costs flood resistance, never correctness. */
        if (getrandom(key, 16, GRND_NONBLOCK) == 16)
                return;

        struct timespec ts;
        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t a = (uint64_t) ts.tv_nsec ^ ((uint64_t) ts.tv_sec << 30), b = (uint64_t) (uintptr_t) key;
        memcpy(key, &a, 8);
        memcpy(key + 8, &b, 8);
}

Hashmap *hashmap_new(void) {
        Hashmap *h = calloc(1, sizeof(Hashmap));
        if (!h)
                return NULL;

        init_hash_key(h->hash_key);
        return h;
}

Hashmap *hashmap_free(Hashmap *h) {
        if (!h)
                return NULL;

        free(h->entries);
        free(h->index);
        free(h);
        return NULL;
}

static uint64_t key_hash(const Hashmap *h, const char *key) {
        return siphash24(key, strlen(key), h->hash_key);
}

/* The index slot holding key's entry, or SIZE_MAX. */
static size_t find_slot(const Hashmap *h, const char *key, uint64_t hash) {
        if (h->n_index == 0)
                return SIZE_MAX;

        size_t mask = h->n_index - 1;
        for (size_t i = (size_t) hash & mask;; i = (i + 1) & mask) {
                uint32_t pos = h->index[i];

                if (pos == SLOT_EMPTY)
                        return SIZE_MAX;
                if (pos == SLOT_DELETED)
                        continue;

                const Entry *e = &h->entries[pos];
                if (e->hash == hash && streq(e->key, key))
                        return i;
        }
}

static void index_insert(uint32_t *index, size_t n_index, uint64_t hash, uint32_t pos) {
        size_t mask = n_index - 1;
        size_t i = (size_t) hash & mask;

        /* The load is at most 1/2 (counting deleted slots, which are not reused, so probe chains of
         * present keys stay intact), so an empty slot always exists. */
        while (index[i] != SLOT_EMPTY)
                i = (i + 1) & mask;
        index[i] = pos;
}

/* Makes room for more entries: compacts out removed ones into fresh arrays. On failure the map is
 * unchanged. */
static int rebuild(Hashmap *h) {
        size_t n_allocated = ENTRIES_MIN;

        /* Sized from the live entries alone, so a map that shrank gives memory back, and at most half
         * full, so the next rebuild is at least as many puts away as there are entries (amortised O(1)). */
        while (h->n_live + 1 > n_allocated / 2) {
                if (n_allocated >= ENTRIES_MAX || n_allocated > SIZE_MAX / 4 / sizeof(Entry))
                        return -ENOMEM;
                n_allocated *= 2;
        }

        Entry *entries = malloc(n_allocated * sizeof(Entry));
        if (!entries)
                return -ENOMEM;
        uint32_t *index = malloc(2 * n_allocated * sizeof(uint32_t));
        if (!index) {
                free(entries);
                return -ENOMEM;
        }
        memset(index, 0xff, 2 * n_allocated * sizeof(uint32_t)); /* all SLOT_EMPTY */

        size_t n = 0;
        for (size_t i = 0; i < h->n_entries; i++) {
                if (!h->entries[i].key)
                        continue;
                entries[n] = h->entries[i];
                index_insert(index, 2 * n_allocated, entries[n].hash, (uint32_t) n);
                n++;
        }

        free(h->entries);
        free(h->index);
        h->entries = entries;
        h->n_allocated = n_allocated;
        h->n_entries = n;
        h->index = index;
        h->n_index = 2 * n_allocated;
        return 0;
}

int hashmap_put(Hashmap *h, const char *key, void *value) {
        int r;

        if (!h || !key || !value)
                return -EINVAL;

        uint64_t hash = key_hash(h, key);
        if (find_slot(h, key, hash) != SIZE_MAX)
                return -EEXIST;

        if (h->n_entries >= h->n_allocated) {
                r = rebuild(h);
                if (r < 0)
                        return r;
        }

        uint32_t pos = (uint32_t) h->n_entries++;
        h->entries[pos] = (Entry) { .key = key, .value = value, .hash = hash };
        index_insert(h->index, h->n_index, hash, pos);
        h->n_live++;
        return 0;
}

void *hashmap_get(Hashmap *h, const char *key) {
        if (!h || !key)
                return NULL;

        size_t slot = find_slot(h, key, key_hash(h, key));
        if (slot == SIZE_MAX)
                return NULL;

        return h->entries[h->index[slot]].value;
}

bool hashmap_contains(Hashmap *h, const char *key) {
        return hashmap_get(h, key) != NULL;
}

void *hashmap_remove(Hashmap *h, const char *key) {
        if (!h || !key)
                return NULL;

        size_t slot = find_slot(h, key, key_hash(h, key));
        if (slot == SIZE_MAX)
                return NULL;

        Entry *e = &h->entries[h->index[slot]];
        void *value = e->value;

        h->index[slot] = SLOT_DELETED;
        *e = (Entry) { .key = NULL };
        h->n_live--;
        return value;
}

size_t hashmap_size(Hashmap *h) {
        return h ? h->n_live : 0;
}

bool hashmap_isempty(Hashmap *h) {
        return hashmap_size(h) == 0;
}

bool hashmap_iterate(Hashmap *h, size_t *state, void **ret_value, const char **ret_key) {
        if (!h || !state)
                return false;

        for (size_t i = *state; i < h->n_entries; i++) {
                const Entry *e = &h->entries[i];

                if (!e->key)
                        continue;

                *state = i + 1;
                if (ret_value)
                        *ret_value = e->value;
                if (ret_key)
                        *ret_key = e->key;
                return true;
        }

        *state = h->n_entries;
        return false;
}
