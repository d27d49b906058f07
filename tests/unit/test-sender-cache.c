/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for sender-cache: only unique names are kept, forgetting one or all, the size bound. */
#include <stdio.h>

#include "macro.h"
#include "sender-cache.h"
#include "test-util.h"

int main(void) {
        _cleanup_(sender_cache_freep) SenderCache *c = NULL;
        char name[32];
        uid_t uid = 0;

        CHECK(sender_cache_new(3, &c) == 0);
        sender_cache_put(c, ":1.1", 1000);
        sender_cache_put(c, "org.example.Name", 7); /* a well-known name can change hands */
        sender_cache_put(c, NULL, 7);
        CHECK_U64(sender_cache_size(c), 1);
        CHECK(sender_cache_get(c, ":1.1", &uid) && uid == 1000);
        CHECK(!sender_cache_get(c, "org.example.Name", &uid));
        CHECK(!sender_cache_get(c, NULL, &uid));
        sender_cache_put(c, ":1.1", 5); /* a connection's uid never changes: the first answer stays */
        CHECK(sender_cache_get(c, ":1.1", &uid) && uid == 1000);

        sender_cache_forget(c, ":1.1");
        CHECK(!sender_cache_get(c, ":1.1", &uid));
        sender_cache_forget(c, ":1.404"); /* unknown: nothing happens */

        /* past the bound it starts over rather than grow */
        for (unsigned i = 0; i < 7; i++) {
                snprintf(name, sizeof(name), ":1.%u", 100 + i);
                sender_cache_put(c, name, 100 + i);
                CHECK(sender_cache_size(c) <= 3);
                CHECK(sender_cache_get(c, name, &uid) && uid == 100 + i);
        }
        sender_cache_forget(c, NULL);
        CHECK_U64(sender_cache_size(c), 0);
        return test_finish("test-sender-cache");
}
