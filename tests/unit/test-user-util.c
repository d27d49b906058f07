/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for user-util: primary and supplementary group membership, unknown uids and gids. */
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "user-util.h"
#include "test-util.h"


/* A gid (or uid) in the range sandboxd hands out, which no host account may use. */
#define MADE_UP_ID 1879113000u

static void test_root(void) {
        struct passwd *pw = getpwuid(0);

        CHECK(pw);
        if (!pw)
                return;
        CHECK(pw->pw_gid == 0);
        CHECK(uid_in_group(0, 0));
        CHECK(!getgrgid(MADE_UP_ID));
        CHECK(!uid_in_group(0, MADE_UP_ID));
        CHECK(!uid_in_group(0, (gid_t) -1));
}

static void test_current_user(void) {
        uid_t uid = getuid();
        struct passwd *pw = getpwuid(uid);
        gid_t groups[256];
        int n = ELEMENTSOF(groups);

        if (!pw) {
                printf("SKIP: uid %u: no passwd entry here\n", (unsigned) uid);
                return;
        }
        gid_t primary = pw->pw_gid;
        char *name = strdup(pw->pw_name);
        CHECK(name);
        if (!name)
                return;

        CHECK(uid_in_group(uid, primary));
        CHECK(!uid_in_group(uid, MADE_UP_ID));
        /* every group NSS lists for the user */
        if (getgrouplist(name, primary, groups, &n) >= 0)
                for (int i = 0; i < n; i++)
                        CHECK(uid_in_group(uid, groups[i]));
        free(name);
}

/* Supplementary membership: a member listed in /etc/group whose primary group is another one. */
static void test_supplementary(void) {
        struct group *gr;
        bool found = false;
        uid_t uid = 0;
        gid_t gid = 0;

        /* find one first: uid_in_group() reads the group database too */
        setgrent();
        while (!found && (gr = getgrent()))
                for (char **m = gr->gr_mem; m && *m && !found; m++) {
                        struct passwd *pw = getpwnam(*m);
                        if (pw && pw->pw_gid != gr->gr_gid) {
                                uid = pw->pw_uid;
                                gid = gr->gr_gid;
                                found = true;
                        }
                }
        endgrent();
        if (!found) {
                printf("SKIP: supplementary groups: no group with a supplementary member here\n");
                return;
        }
        CHECK(uid_in_group(uid, gid));
        CHECK(!uid_in_group(uid, MADE_UP_ID));
}

static void test_unknown_uid(void) {
        CHECK(!getpwuid(MADE_UP_ID));
        CHECK(!uid_in_group(MADE_UP_ID, 0));
        CHECK(!uid_in_group(MADE_UP_ID, MADE_UP_ID));
}

int main(void) {
        test_root();
        test_current_user();
        test_supplementary();
        test_unknown_uid();

        return test_finish("test-user-util");
}
