/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A string-keyed hash map that iterates in insertion order and tolerates removal while iterating. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

/* Ownership: the map stores the key pointer, it does not copy the string. The key must stay valid and
 * unchanged while its entry is in the map; usually it points into the value (e.g. sandbox->id), so
 * remove the entry before freeing the value. The map never frees keys or values.
 *
 * Values must not be NULL, so that NULL from hashmap_get()/hashmap_remove() always means "absent".
 *
 * Hashing is SipHash-2-4 with a per-map random key, so names chosen by remote users cannot be crafted
 * to collide. Reading functions accept a NULL map as an empty one. */
typedef struct Hashmap Hashmap;

/* NULL on allocation failure. */
Hashmap *hashmap_new(void);
/* Frees the map itself only (see above). Accepts NULL; returns NULL. */
Hashmap *hashmap_free(Hashmap *h);

/* 0 on success, -EEXIST if key is present (the map is unchanged), -ENOMEM, -EINVAL for NULL
 * arguments. May reorganise storage: adding during an iteration is not allowed. */
int hashmap_put(Hashmap *h, const char *key, void *value);
void *hashmap_get(Hashmap *h, const char *key);
bool hashmap_contains(Hashmap *h, const char *key);
/* Returns the removed entry's value, or NULL if the key was absent. Never reorganises storage, so it
 * is safe during an iteration, for the current entry as well as any other. */
void *hashmap_remove(Hashmap *h, const char *key);
size_t hashmap_size(Hashmap *h);
bool hashmap_isempty(Hashmap *h);

/* Start with *state = 0. Returns true and the next entry (in insertion order) until there are no
 * more, then false, leaving the outputs untouched; ret_value and ret_key may be NULL. Removing entries
 * (the current one included) during the iteration is fine: removed entries are not returned and no
 * entry is skipped or returned twice. Adding entries during an iteration is not allowed. */
bool hashmap_iterate(Hashmap *h, size_t *state, void **ret_value, const char **ret_key);

/* for each value v (of any pointer type); state names the iteration's cursor, declared by the macro. */
#define HASHMAP_FOREACH(v, h, state)                                                                        \
        for (size_t state = 0; hashmap_iterate((h), &state, (void **) &(v), NULL);)
#define HASHMAP_FOREACH_KEY(v, k, h, state)                                                                 \
        for (size_t state = 0; hashmap_iterate((h), &state, (void **) &(v), &(k));)

DEFINE_TRIVIAL_CLEANUP_FUNC(Hashmap *, hashmap_free)
#define _cleanup_hashmap_free_ _cleanup_(hashmap_freep)
