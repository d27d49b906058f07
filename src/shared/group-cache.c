/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whether a uid is in one group, as NSS says, remembered per uid for a few seconds. */
#include "group-cache.h"

#include <assert.h>
#include <grp.h>
#include <string.h>

#include "time-util.h"
#include "user-util.h"

void group_cache_init(GroupCache *c, const char *group, uint64_t ttl_usec, GroupLookup lookup) {
        assert(c);
        assert(group);

        struct group *g = getgrnam(group);
        *c = (GroupCache) {
                .gid = g ? g->gr_gid : (gid_t) -1,
                .ttl_usec = ttl_usec,
                .lookup = lookup ?: uid_in_group,
        };
}

bool group_cache_test_at(GroupCache *c, uid_t uid, uint64_t now) {
        assert(c);

        if (c->gid == (gid_t) -1)
                return false;
        /* one slot per uid modulo the size: two uids that share one take turns */
        size_t slot = uid % GROUP_CACHE_SLOTS;
        if (c->slots[slot].until > now && c->slots[slot].uid == uid)
                return c->slots[slot].member;
        bool member = c->lookup(uid, c->gid);
        c->slots[slot].uid = uid;
        c->slots[slot].member = member;
        c->slots[slot].until = now + c->ttl_usec;
        return member;
}

bool group_cache_test(GroupCache *c, uid_t uid) {
        return group_cache_test_at(c, uid, now_usec(CLOCK_MONOTONIC));
}
