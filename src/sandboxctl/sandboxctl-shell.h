/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "sandboxctl shell SANDBOX": an interactive login shell in a sandbox, through sandboxd's OpenShell stream.
 */
#pragma once

/* argv[0] is "shell". Parses its own options; returns the process exit status: the shell's, 255 if it
 * could not be opened, 2 for bad usage, 128+N if signal N ended the session. */
int verb_shell(int argc, char *argv[]);
