/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Users and groups as NSS sees them: group membership of a uid. */
#include "user-util.h"

#include <grp.h>
#include <pwd.h>
#include <stdlib.h>

#include "macro.h"

bool uid_in_group(uid_t uid, gid_t gid) {
        _cleanup_free_ gid_t *groups = NULL;
        int n = 64;

        if (gid == (gid_t) -1)
                return false;
        struct passwd *pw = getpwuid(uid);
        if (!pw)
                return false;
        if (pw->pw_gid == gid)
                return true;
        for (;;) {
                gid_t *g = realloc(groups, n * sizeof(gid_t));
                if (!g)
                        return false;
                groups = g;
                int want = n;
                if (getgrouplist(pw->pw_name, pw->pw_gid, groups, &want) >= 0) {
                        n = want;
                        break;
                }
                if (want <= n || want > 65536)
                        return false;
                n = want; /* it told us how many there are */
        }
        for (int i = 0; i < n; i++)
                if (groups[i] == gid)
                        return true;
        return false;
}
