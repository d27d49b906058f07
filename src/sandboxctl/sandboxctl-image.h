/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "sandboxctl image build|import|list|show|remove|jobs|cancel": sandboxd's image store (issue 24). */
#pragma once

/* argv[0] is "image". Parses its own options; returns the process exit status (0, 1, or 2 for bad usage). */
int verb_image(int argc, char *argv[]);
