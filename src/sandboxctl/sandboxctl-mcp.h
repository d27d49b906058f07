/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "sandboxctl mcp": the MCP tools of the gateway's /mcp over stdio, against the local bus. */
#pragma once

/* argv[0] is "mcp". Returns the exit status. */
int verb_mcp(int argc, char *argv[]);
