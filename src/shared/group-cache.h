/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whether a uid is in one group (sandbox-admin), as NSS says, remembered per uid for a few seconds. */
#pragma once

/* Owns the membership cache behind sandboxd's manager_uid_is_admin() and sandbox-auditd's
 * manager_uid_may_read(): an NSS lookup (getpwuid + getgrouplist) per call would cost more than most
 * calls, and a change of membership is seen within ttl_usec. Not thread-safe (NSS, and the slots). */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define GROUP_CACHE_SLOTS 16

/* How membership is asked: uid_in_group() (user-util.h), or a fake one in tests. */
typedef bool (*GroupLookup)(uid_t uid, gid_t gid);

typedef struct GroupCache {
        gid_t gid;          /* (gid_t) -1: the group does not exist, and nobody is in it */
        uint64_t ttl_usec;
        GroupLookup lookup;
        struct {
                uid_t uid;
                bool member;
                uint64_t until; /* CLOCK_MONOTONIC µs; 0: empty */
        } slots[GROUP_CACHE_SLOTS];
} GroupCache;

/* Resolves the group's name now (getgrnam): a group added later is seen after a restart. lookup NULL
 * means uid_in_group(). */
void group_cache_init(GroupCache *c, const char *group, uint64_t ttl_usec, GroupLookup lookup);

/* Whether uid is in the group, from the cache if it answered for this uid less than ttl_usec before now
 * (CLOCK_MONOTONIC µs), else asked again and remembered. Root is not special here: callers decide. */
bool group_cache_test_at(GroupCache *c, uid_t uid, uint64_t now);
bool group_cache_test(GroupCache *c, uid_t uid);
