/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for group-cache: answers kept for the TTL per uid, shared slots, no group, a real group. */
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <unistd.h>

#include "group-cache.h"
#include "macro.h"
#include "test-util.h"

/* A fake NSS: uids below 1000 are members; counts the questions. */
static unsigned lookups;
static gid_t asked_gid;

static bool fake_lookup(uid_t uid, gid_t gid) {
        lookups++;
        asked_gid = gid;
        return uid < 1000;
}

int main(void) {
        GroupCache c;

        /* a group that exists: the test user's primary group (as NSS says), resolved by name */
        struct passwd *pw = getpwuid(getuid());
        struct group *g = pw ? getgrgid(pw->pw_gid) : NULL;
        if (!g) {
                printf("test-group-cache: skipped, uid %u has no passwd entry or no group\n",
                       (unsigned) getuid());
                return 77;
        }
        gid_t gid = g->gr_gid;

        group_cache_init(&c, g->gr_name, 5 * USEC_PER_SEC, fake_lookup);
        CHECK_U64(c.gid, gid);

        /* first question asks NSS, with the group's gid; the next ones within the TTL do not */
        CHECK(group_cache_test_at(&c, 100, 1000));
        CHECK_U64(lookups, 1);
        CHECK_U64(asked_gid, gid);
        CHECK(group_cache_test_at(&c, 100, 1000 + 5 * USEC_PER_SEC - 1));
        CHECK(!group_cache_test_at(&c, 2000, 1000));
        CHECK(!group_cache_test_at(&c, 2000, 2000));
        CHECK_U64(lookups, 2);

        /* after the TTL it asks again (membership changes are seen) */
        CHECK(group_cache_test_at(&c, 100, 1000 + 5 * USEC_PER_SEC));
        CHECK_U64(lookups, 3);

        /* two uids in one slot take turns: each answer stays right */
        uid_t other = 100 + GROUP_CACHE_SLOTS * 100; /* same slot as 100, not a member */
        CHECK(!group_cache_test_at(&c, other, 10 * USEC_PER_SEC));
        CHECK(group_cache_test_at(&c, 100, 10 * USEC_PER_SEC));
        CHECK(!group_cache_test_at(&c, other, 10 * USEC_PER_SEC));
        CHECK_U64(lookups, 6);

        /* the slots start empty: uid 0 at time 0 is asked, not read from a zeroed slot */
        CHECK(group_cache_test_at(&c, 0, 0));
        CHECK_U64(lookups, 7);

        /* a group that does not exist has no members, and nobody is asked */
        group_cache_init(&c, "sandboxd-test-no-such-group", 5 * USEC_PER_SEC, fake_lookup);
        CHECK_U64(c.gid, (gid_t) -1);
        CHECK(!group_cache_test(&c, 100));
        CHECK_U64(lookups, 7);

        /* the real lookup (uid_in_group): the test user is in its own primary group, on the real clock */
        group_cache_init(&c, g->gr_name, 5 * USEC_PER_SEC, NULL);
        CHECK(group_cache_test(&c, getuid()));
        CHECK(group_cache_test(&c, getuid()));
        return test_finish("test-group-cache");
}
