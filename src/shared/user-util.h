/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Users and groups as NSS sees them: group membership of a uid. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Whether the account with this uid has gid as its primary group or is listed as a member of it, as
 * NSS (getpwuid, getgrouplist) says: how the bus policy sees membership, rather than a racy read of a
 * process's groups from /proc. False for an unknown uid, for gid (gid_t) -1, and if the lookup fails.
 * Not thread-safe (getpwuid). */
bool uid_in_group(uid_t uid, gid_t gid);
