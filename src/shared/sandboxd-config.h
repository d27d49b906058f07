/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd's configuration: built-in defaults, sandboxd.conf and its drop-ins, and sandbox types. */
#pragma once

#include <errno.h>
#include <stdbool.h>

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "egress-policy.h"
#include "macro.h"
#include "sandbox-id.h"

/* Named sandboxd-config rather than config: the build's generated config.h sits first on the include
 * path, so a src/shared/config.h would be shadowed for every file outside src/shared. */

#ifdef SYSCONFDIR
#define SANDBOXD_CONFIG_DIR SYSCONFDIR "/sandboxd"
#else
#define SANDBOXD_CONFIG_DIR "/etc/sandboxd"
#endif
#define SANDBOXD_CONFIG_FILE SANDBOXD_CONFIG_DIR "/sandboxd.conf"
#define SANDBOXD_CONFIG_DROPIN_DIR SANDBOXD_CONFIG_DIR "/sandboxd.conf.d"

#define SANDBOX_TYPES_MAX 16
#define SANDBOXD_HIDE_PATHS_MAX 4096 /* bytes of HidePaths=, its paths separated by single spaces */

/* Default uid range: 0x70000000..0x7000FFFF, just above systemd's container range (524288..1879048191,
 * see systemd's UIDS-GIDS.md), so neither host accounts nor nspawn/userns allocations use it. */
#define SANDBOXD_UID_MIN_DEFAULT ((uid_t) UINT32_C(1879048192))
#define SANDBOXD_UID_MAX_DEFAULT ((uid_t) UINT32_C(1879113727))

/* A sandbox's network (CreateSandbox's "network", a type's Network=): */
typedef enum SandboxNetwork {
        SANDBOX_NETWORK_NONE,   /* its own namespace with loopback only (the default) */
        SANDBOX_NETWORK_HOST,   /* the host's namespace, unconfined: only with [Network] AllowHostNetwork=yes */
        SANDBOX_NETWORK_EGRESS, /* its own namespace, a veth pair to the host and an egress policy (issue 23) */
        _SANDBOX_NETWORK_MAX,
        _SANDBOX_NETWORK_INVALID = -EINVAL,
} SandboxNetwork;

DECLARE_STRING_TABLE(sandbox_network, SandboxNetwork);

typedef struct SandboxType {
        char name[SANDBOX_NAME_MAX + 1];
        unsigned cpu_quota_percent;    /* 100 = one CPU */
        uint64_t memory_max;           /* bytes */
        uint64_t tasks_max;
        uint64_t max_timeout_usec;     /* cap on an Exec's timeout */
        uint64_t default_timeout_usec; /* an Exec's timeout when the caller gives none */
        unsigned pool_size;            /* sandboxes of this type (network "none") made ahead */
        uint64_t disk_max;             /* bytes of the disk image holding home, /tmp and /var/tmp; 0: none,
                                        * they are directories on the host without a quota (infinity) */
        /* Issue 21: a shell (OpenShell) with no byte either way for this long is hung up; 0: never. */
        uint64_t shell_idle_usec;
        /* Issue 23. Network=: the network of this type's sandboxes when CreateSandbox gives none, and of its
         * pooled ones. */
        SandboxNetwork network;
        /* Egress=, EgressAllow=, EgressDeny=: the policy of its egress sandboxes when CreateSandbox gives none;
         * NULL: default deny, no entries. Owned by the SandboxdConfig (sandboxd_config_done()). */
        EgressPolicy *egress;
        uint64_t egress_rate_max;      /* EgressRateMax=: bytes per second out of one sandbox; 0: no limit */
        /* Issue 25. ProcessOutputMax=: bytes a background process's output ring keeps per stream. */
        uint64_t process_output_max;
        /* Issue 24. Image=: the image of the store its sandboxes' root is made of, unless CreateSandbox
         * names one; "" (Image=host, the default): the host's own tree, read-only. */
        char image[SANDBOX_NAME_MAX + 1];
        /* Issue 26. IdlePauseSec=: a sandbox with no running Exec, shell, file call or background process
         * and no call naming it for this long is paused; 0: never (the default). AutoResume=: a call that
         * needs the sandbox running resumes a paused one first instead of failing with SandboxPaused. */
        uint64_t idle_pause_usec;
        bool auto_resume;
} SandboxType;

/* ProcessOutputMax= of every built-in type, and its bounds (the upper one keeps a ReadProcessOutput
 * reply well below the bus's 32 MiB per message). */
#define SANDBOX_PROCESS_OUTPUT_DEFAULT (UINT64_C(1) << 20)
#define SANDBOX_PROCESS_OUTPUT_MIN (UINT64_C(4) << 10)
#define SANDBOX_PROCESS_OUTPUT_MAX (UINT64_C(16) << 20)

/* ShellIdleSec= of every built-in type. */
#define SANDBOX_SHELL_IDLE_DEFAULT_USEC (30 * USEC_PER_MINUTE)

/* The smallest DiskMax= other than infinity: mkfs.ext4 makes no usable file system below it. */
#define SANDBOX_DISK_MAX_MIN (UINT64_C(16) << 20)

#define SANDBOX_POOL_SIZE_MAX 64

/* EgressRateMax=: the smallest rate other than infinity (less would stall a TCP connection for good). */
#define SANDBOX_EGRESS_RATE_MIN UINT64_C(1024)

/* [Sandboxes]: what all sandboxes together may have, on sandbox.slice and in CreateSandbox's admission
 * check (sandbox-totals.c in sandboxd resolves "auto" from the host). A value is a number, or one of: */
#define SANDBOX_TOTAL_AUTO UINT64_C(0)        /* derived from the host at start-up (the default) */
#define SANDBOX_TOTAL_INFINITY UINT64_MAX     /* no limit */
#define SANDBOX_OVERCOMMIT_MAX 10000          /* percent */

typedef struct SandboxTotalsConfig {
        uint64_t memory_max;          /* bytes, or AUTO or INFINITY */
        uint64_t tasks_max;
        uint64_t cpu_quota_percent;   /* 100 = one CPU */
        unsigned overcommit_percent;  /* the types' promises may add up to this share of memory_max and
                                       * tasks_max (100..10000) */
        uint64_t max_per_account;     /* sandboxes one owner (account_id) may have; INFINITY: no bound */
} SandboxTotalsConfig;

/* [Network]: egress sandboxes' addresses, and whether network "host" may be asked for. */
#define SANDBOXD_NETWORK_POOL_DEFAULT "10.237.0.0/16"
/* Pool='s prefix bounds: a /8 is 4,194,304 sandboxes' /30s, more than any host runs; a /28 still holds 4. */
#define SANDBOXD_NETWORK_POOL_PREFIX_MIN 8
#define SANDBOXD_NETWORK_POOL_PREFIX_MAX 28
typedef struct SandboxdNetworkConfig {
        EgressCidr pool;          /* Pool=: IPv4, a /30 per egress sandboxes (host side .1, sandbox .2) */
        bool allow_host_network;  /* AllowHostNetwork=: network "host" (unconfined) allowed; default no */
} SandboxdNetworkConfig;

typedef struct SandboxdConfig {
        uid_t uid_min, uid_max;
        uint64_t output_max;    /* captured output cap per stream, bytes */
        uint64_t stdin_max;     /* bytes */
        uint64_t file_max;      /* WriteFile/ReadFile data in one message, bytes */
        uint64_t max_sandboxes;
        char host_tag;          /* HostTag=: the first character after "sb_" of every new id; 0: none
                                 * (docs/scale-out.md) */
        uint64_t default_ttl_usec;
        uint64_t max_ttl_usec;
        char default_type[SANDBOX_NAME_MAX + 1];
        bool audit;             /* record every operation with sandbox-auditd (Audit=, default yes) */
        char hide_paths[SANDBOXD_HIDE_PATHS_MAX]; /* HidePaths=: more host paths no sandbox sees, each
                                                   * absolute and normalized, separated by one space */
        SandboxType types[SANDBOX_TYPES_MAX];
        size_t n_types;
        SandboxTotalsConfig totals;   /* [Sandboxes] */
        SandboxdNetworkConfig network; /* [Network] */
        /* Issue 26. [Manager] SnapshotStoreMax=: bytes all snapshots' images may take on the host together;
         * 0: no limit (infinity, the default). */
        uint64_t snapshot_store_max;
} SandboxdConfig;

/* Built-in defaults: the values documented in sandboxd.conf(5), and the types small (100%, 1G, 256
 * tasks, timeouts 1h max / 20s default, pool of 2, disk 4G), medium (200%, 4G, 1024, 6h / 60s, no
 * pool, 16G), large (400%, 16G, 4096, 24h / 120s, no pool, 64G). */
void sandboxd_config_defaults(SandboxdConfig *c);
/* Frees what a configuration owns (the types' egress policies). A SandboxdConfig copied by value shares
 * them: only one of the copies may be done. */
void sandboxd_config_done(SandboxdConfig *c);

/* Applies main_path, then every "*.conf" in dropin_dir in lexical (strcmp) order, on top of what c
 * holds (normally the defaults); later assignments win. Either path may be NULL, and missing files or
 * directories are fine. The result is then checked as a whole (uid range, TTLs, timeouts, default type).
 *
 * Format: "[Manager]", "[Sandboxes]" and "[Type:<name>]" sections of Key=Value lines; '#' or ';' starts
 * a comment at the start of a line, or after whitespace within a value; whitespace around keys and
 * values is ignored. A type section for a new name defines a type (up to 16), starting from small's values,
 * except PoolSize=, which starts at 0.
 *
 * Returns 0 and updates c; or, leaving c untouched: -EINVAL for a bad file (unknown section or key,
 * bad value, inconsistent result), with *ret_error = "file:line: what is wrong"; a negative errno if a
 * file exists but cannot be read, with *ret_error = "file: reason"; -ENOMEM. ret_error may be NULL;
 * the caller frees the message. */
int sandboxd_config_load(SandboxdConfig *c, const char *main_path, const char *dropin_dir,
                         char **ret_error);

/* Whether path may be hidden from sandboxes (HidePaths=): absolute, normalized (no "//", ".", ".." or
 * trailing "/"), at most 255 bytes, no whitespace, and neither "/" nor anything a sandbox is built of:
 * /usr, /etc, /var, /home, /tmp, /var/tmp, /dev, /proc and what lies below the last five. Returns 0 or
 * -EINVAL. */
int sandboxd_hide_path_check(const char *path);

/* The type called name, or the default type if name is NULL or empty; NULL if there is no such type. */
const SandboxType *sandboxd_config_find_type(const SandboxdConfig *c, const char *name);
