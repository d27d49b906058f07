/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "sandboxctl ps|start|kill|attach": a sandbox's background processes. */
#pragma once

#include <stdbool.h>

bool is_process_verb(const char *verb);

/* argv[0] is the verb. Returns the exit status. */
int verb_process(int argc, char *argv[]);
