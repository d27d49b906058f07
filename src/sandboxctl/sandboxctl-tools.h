/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "sandboxctl file-create|view|str-replace|insert|ls|glob|grep": the file tools of org.sandboxd.sandbox1. */
#pragma once

#include <stdbool.h>

/* Whether verb is one of the file tools' verbs. */
bool is_tool_verb(const char *verb);

/* argv[0] is the verb. Parses its own options; returns the process exit status (0, 1, or 2 for bad
 * usage). */
int verb_tool(int argc, char *argv[]);
