/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "sandboxctl api-key create|list|revoke": API keys of sandbox-gatewayd, over org.sandboxd.gateway1. */
#pragma once

/* argv[0] is "api-key". Parses its own options; returns the process exit status (0, 1, or 2 for bad
 * usage). */
int verb_api_key(int argc, char *argv[]);
