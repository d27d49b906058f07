/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "sandboxctl snapshot": snapshots of sandboxes' disks (issue 26). */
#pragma once

/* argv[0] is "snapshot". Returns the exit status. */
int verb_snapshot(int argc, char *argv[]);
