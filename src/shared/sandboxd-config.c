/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd's configuration: built-in defaults, sandboxd.conf and its drop-ins, and sandbox types. */
#include <ctype.h>
#include <sys/socket.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ini-util.h"
#include "macro.h"
#include "sandbox-id.h"
#include "sandboxd-config.h"
#include "time-util.h"

static const SandboxType builtin_types[] = {
        {
                .name = "small",
                .cpu_quota_percent = 100,
                .memory_max = UINT64_C(1) << 30,
                .tasks_max = 256,
                .max_timeout_usec = 1 * USEC_PER_HOUR,
                .default_timeout_usec = 20 * USEC_PER_SEC,
                .pool_size = 2,
                .disk_max = UINT64_C(4) << 30,
                .shell_idle_usec = SANDBOX_SHELL_IDLE_DEFAULT_USEC,
                .process_output_max = SANDBOX_PROCESS_OUTPUT_DEFAULT,
        },
        {
                .name = "medium",
                .cpu_quota_percent = 200,
                .memory_max = UINT64_C(4) << 30,
                .tasks_max = 1024,
                .max_timeout_usec = 6 * USEC_PER_HOUR,
                .default_timeout_usec = 60 * USEC_PER_SEC,
                .disk_max = UINT64_C(16) << 30,
                .shell_idle_usec = SANDBOX_SHELL_IDLE_DEFAULT_USEC,
                .process_output_max = SANDBOX_PROCESS_OUTPUT_DEFAULT,
        },
        {
                .name = "large",
                .cpu_quota_percent = 400,
                .memory_max = UINT64_C(16) << 30,
                .tasks_max = 4096,
                .max_timeout_usec = 24 * USEC_PER_HOUR,
                .default_timeout_usec = 120 * USEC_PER_SEC,
                .disk_max = UINT64_C(64) << 30,
                .shell_idle_usec = SANDBOX_SHELL_IDLE_DEFAULT_USEC,
                .process_output_max = SANDBOX_PROCESS_OUTPUT_DEFAULT,
        },
};

static const char *const sandbox_network_table[_SANDBOX_NETWORK_MAX] = {
        [SANDBOX_NETWORK_NONE] = "none",
        [SANDBOX_NETWORK_HOST] = "host",
        [SANDBOX_NETWORK_EGRESS] = "egress",
};

DEFINE_STRING_TABLE(sandbox_network, SandboxNetwork, _SANDBOX_NETWORK_MAX);

void sandboxd_config_done(SandboxdConfig *c) {
        if (!c)
                return;
        for (size_t i = 0; i < c->n_types && i < SANDBOX_TYPES_MAX; i++)
                c->types[i].egress = egress_policy_free(c->types[i].egress);
}

void sandboxd_config_defaults(SandboxdConfig *c) {
        *c = (SandboxdConfig) {
                .uid_min = SANDBOXD_UID_MIN_DEFAULT,
                .uid_max = SANDBOXD_UID_MAX_DEFAULT,
                .output_max = UINT64_C(1) << 20,
                .stdin_max = UINT64_C(16) << 20,
                .file_max = UINT64_C(16) << 20,
                .max_sandboxes = 4096,
                .default_ttl_usec = 1 * USEC_PER_HOUR,
                .max_ttl_usec = 7 * USEC_PER_DAY,
                .default_type = "small",
                .audit = true,
                .n_types = ELEMENTSOF(builtin_types),
                .totals = {
                        .memory_max = SANDBOX_TOTAL_AUTO,
                        .tasks_max = SANDBOX_TOTAL_AUTO,
                        .cpu_quota_percent = SANDBOX_TOTAL_AUTO,
                        .overcommit_percent = 100,
                        .max_per_account = SANDBOX_TOTAL_INFINITY,
                },
        };
        memcpy(c->types, builtin_types, sizeof(builtin_types));
        /* SANDBOXD_NETWORK_POOL_DEFAULT */
        c->network.pool = (EgressCidr) { .family = AF_INET, .addr = { 10, 237, 0, 0 }, .prefixlen = 16 };
}

const SandboxType *sandboxd_config_find_type(const SandboxdConfig *c, const char *name) {
        if (!c)
                return NULL;
        if (isempty(name))
                name = c->default_type;

        for (size_t i = 0; i < c->n_types && i < SANDBOX_TYPES_MAX; i++)
                if (streq(c->types[i].name, name))
                        return &c->types[i];
        return NULL;
}

/* Where a setting was last made, so checks of the final result can point at a line: an IniPosition,
 * whose file == NULL means the value is still the one load started from. Files are numbered in load
 * order, so the later of two locations is the greater (file_index, line). */
typedef IniPosition Location;

typedef enum Section {
        SECTION_NONE,
        SECTION_MANAGER,
        SECTION_SANDBOXES,
        SECTION_NETWORK,
        SECTION_TYPE,
} Section;

typedef struct TypeLocations {
        Location max_timeout, default_timeout, network, image;
} TypeLocations;

typedef struct Loader {
        SandboxdConfig c;
        Section section; /* of the current file's lines */
        size_t type_idx; /* with SECTION_TYPE */
        Location uid_min, uid_max, max_sandboxes, default_ttl, max_ttl, default_type, allow_host_network;
        TypeLocations types[SANDBOX_TYPES_MAX];
        char **error;
} Loader;

static const Location *location_later(const Location *a, const Location *b) {
        if (!a->file)
                return b;
        if (!b->file)
                return a;
        if (a->file_index != b->file_index)
                return a->file_index > b->file_index ? a : b;
        return a->line > b->line ? a : b;
}

static int parse_uid(const char *s, uid_t *ret) {
        uint64_t v;
        int r;

        r = parse_decimal(s, &v);
        if (r < 0)
                return r;
        /* (uid_t) -1 means "no uid" to every syscall that takes one. */
        if (v >= UINT32_MAX)
                return -ERANGE;

        *ret = (uid_t) v;
        return 0;
}

int sandboxd_hide_path_check(const char *path) {
        /* What a sandbox is made of: hiding one of these (or a directory holding one) breaks every
         * sandbox, and the last five are its own mounts, below which nothing of the host is. */
        static const char *const whole[] = { "/usr", "/etc", "/var" };
        static const char *const own[] = { "/home", "/tmp", "/var/tmp", "/dev", "/proc" };
        size_t n = strlen(path);

        if (n < 2 || n > 255 || path[0] != '/' || path[n - 1] == '/')
                return -EINVAL;
        for (const char *p = path; *p; p++)
                if (isspace((unsigned char) *p))
                        return -EINVAL;
        for (const char *seg = path + 1;;) {
                const char *end = strchrnul(seg, '/');
                size_t len = (size_t) (end - seg);
                if (len == 0 || (len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.'))
                        return -EINVAL;
                if (!*end)
                        break;
                seg = end + 1;
        }
        for (size_t i = 0; i < ELEMENTSOF(whole); i++)
                if (streq(path, whole[i]))
                        return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(own); i++) {
                size_t m = strlen(own[i]);
                /* the path itself, a directory holding it, or anything below it */
                if ((strncmp(own[i], path, n) == 0 && (own[i][n] == '/' || own[i][n] == 0)) ||
                    (strncmp(path, own[i], m) == 0 && path[m] == '/'))
                        return -EINVAL;
        }
        return 0;
}

static int manager_assignment(Loader *l, const IniPosition *at, const char *key, const char *value) {
        SandboxdConfig *c = &l->c;
        uint64_t v;
        int r;

        if (streq(key, "HidePaths")) {
                /* A list: each assignment adds to it (a drop-in adds to the main file's), all or nothing. */
                char buf[SANDBOXD_HIDE_PATHS_MAX];
                size_t len = strlen(c->hide_paths);

                memcpy(buf, c->hide_paths, len + 1);
                for (const char *p = value; *p;) {
                        while (isspace((unsigned char) *p))
                                p++;
                        if (!*p)
                                break;
                        const char *end = p;
                        while (*end && !isspace((unsigned char) *end))
                                end++;
                        char path[256];
                        size_t n = (size_t) (end - p);
                        if (n >= sizeof(path))
                                return ini_error(l->error, at, "Invalid HidePaths=: a path longer than 255 bytes");
                        memcpy(path, p, n);
                        path[n] = 0;
                        if (sandboxd_hide_path_check(path) < 0)
                                return ini_error(l->error, at,
                                                 "Invalid HidePaths= path %s (expected absolute, normalized paths, "
                                                 "not /, /usr, /etc, /var, nor /home, /tmp, /var/tmp, /dev, /proc, "
                                                 "what holds them or what is below them)", path);
                        if (len + (len > 0) + n + 1 > sizeof(buf))
                                return ini_error(l->error, at, "Invalid HidePaths=: more than %d bytes of paths in all",
                                                 SANDBOXD_HIDE_PATHS_MAX - 1);
                        if (len > 0)
                                buf[len++] = ' ';
                        memcpy(buf + len, path, n + 1);
                        len += n;
                        p = end;
                }
                memcpy(c->hide_paths, buf, len + 1);
                return 0;
        }

        if (streq(key, "UidMin") || streq(key, "UidMax")) {
                bool is_min = streq(key, "UidMin");
                uid_t uid;

                r = parse_uid(value, &uid);
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r, "a uid below 4294967295");
                *(is_min ? &c->uid_min : &c->uid_max) = uid;
                *(is_min ? &l->uid_min : &l->uid_max) = *at;
                return 0;
        }

        uint64_t *size_target = streq(key, "OutputMax") ? &c->output_max
                                : streq(key, "StdinMax") ? &c->stdin_max
                                : streq(key, "FileMax")  ? &c->file_max
                                                         : NULL;
        if (size_target) {
                r = parse_size(value, &v);
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r,
                                             "a size such as 1048576, 64K, 1M, 1G");
                *size_target = v;
                return 0;
        }

        if (streq(key, "MaxSandboxes")) {
                r = parse_decimal(value, &v);
                if (r >= 0 && v == 0)
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r, "a number of at least 1");
                c->max_sandboxes = v;
                l->max_sandboxes = *at;
                return 0;
        }

        if (streq(key, "HostTag")) {
                /* One character of the ids' alphabet, or "no". */
                if (streq(value, "no")) {
                        c->host_tag = 0;
                        return 0;
                }
                if (strlen(value) != 1 || !sandbox_id_char_is_valid(value[0]))
                        return ini_bad_value(l->error, at, key, value, -EINVAL,
                                             "one character of a-z or 2-7 (the host's tag in sandbox ids), or no");
                c->host_tag = value[0];
                return 0;
        }

        if (streq(key, "DefaultTTLSec") || streq(key, "MaxTTLSec")) {
                bool is_default = streq(key, "DefaultTTLSec");

                r = parse_sec(value, &v);
                if (r >= 0 && v == 0)
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r,
                                             "a non-zero time such as 3600, 1h, 7d");
                *(is_default ? &c->default_ttl_usec : &c->max_ttl_usec) = v;
                *(is_default ? &l->default_ttl : &l->max_ttl) = *at;
                return 0;
        }

        if (streq(key, "SnapshotStoreMax")) {
                if (streq(value, "infinity")) {
                        c->snapshot_store_max = 0;
                        return 0;
                }
                r = parse_size(value, &v);
                if (r >= 0 && v == 0)
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r, "a size such as 20G, or infinity");
                c->snapshot_store_max = v;
                return 0;
        }

        if (streq(key, "Audit")) {
                r = parse_boolean(value);
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, -EINVAL, "yes or no");
                c->audit = r;
                return 0;
        }

        if (streq(key, "DefaultType")) {
                if (!name_is_valid(value))
                        return ini_bad_value(l->error, at, key, value, -EINVAL, "a type name");
                strcpy(c->default_type, value); /* fits: name_is_valid() caps the length */
                l->default_type = *at;
                return 0;
        }

        return ini_error(l->error, at, "Unknown key %s= in section [Manager]", key);
}

static int type_assignment(Loader *l, size_t idx, const IniPosition *at, const char *key,
                           const char *value) {
        SandboxType *t = &l->c.types[idx];
        uint64_t v;
        int r;

        if (streq(key, "CPUQuota")) {
                unsigned p;

                r = parse_percent(value, &p);
                if (r >= 0 && p == 0)
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r, "1%..10000%, 100% being one CPU");
                t->cpu_quota_percent = p;
                return 0;
        }

        if (streq(key, "MemoryMax")) {
                r = parse_size(value, &v);
                if (r >= 0 && v == 0)
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r,
                                             "a non-zero size such as 512M, 1G");
                t->memory_max = v;
                return 0;
        }

        if (streq(key, "TasksMax")) {
                r = parse_decimal(value, &v);
                if (r >= 0 && v == 0)
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r, "a number of at least 1");
                t->tasks_max = v;
                return 0;
        }

        if (streq(key, "MaxTimeoutSec") || streq(key, "DefaultTimeoutSec")) {
                bool is_default = streq(key, "DefaultTimeoutSec");

                r = parse_sec(value, &v);
                if (r >= 0 && v == 0)
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r,
                                             "a non-zero time such as 20, 5min, 1h");
                *(is_default ? &t->default_timeout_usec : &t->max_timeout_usec) = v;
                TypeLocations *locs = &l->types[idx];
                *(is_default ? &locs->default_timeout : &locs->max_timeout) = *at;
                return 0;
        }

        if (streq(key, "DiskMax")) {
                if (streq(value, "infinity")) {
                        t->disk_max = 0;
                        return 0;
                }
                r = parse_size(value, &v);
                if (r >= 0 && (v < SANDBOX_DISK_MAX_MIN || v > (uint64_t) INT64_MAX))
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r,
                                             "a size of at least 16M such as 4G, or infinity");
                t->disk_max = v;
                return 0;
        }

        if (streq(key, "PoolSize")) {
                r = parse_decimal(value, &v);
                if (r >= 0 && v > SANDBOX_POOL_SIZE_MAX)
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r, "a number from 0 to 64");
                t->pool_size = (unsigned) v;
                return 0;
        }

        /* Issue 24: the image its sandboxes' root is made of. */
        if (streq(key, "Image")) {
                if (streq(value, "host")) {
                        t->image[0] = 0;
                        return 0;
                }
                if (!name_is_valid(value))
                        return ini_bad_value(l->error, at, key, value, -EINVAL, "host, or an image's name");
                strcpy(t->image, value); /* fits: name_is_valid() caps the length */
                l->types[idx].image = *at;
                return 0;
        }

        /* Issue 21: the shell idle timeout. */
        if (streq(key, "ShellIdleSec")) {
                if (streq(value, "infinity")) {
                        t->shell_idle_usec = 0;
                        return 0;
                }
                r = parse_sec(value, &v);
                if (r >= 0 && (v < USEC_PER_SEC || v > 7 * USEC_PER_DAY))
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r,
                                             "a time from 1s to 7d such as 30min, or infinity");
                t->shell_idle_usec = v;
                return 0;
        }

        /* Issue 25: a background process's output ring, per stream. */
        if (streq(key, "ProcessOutputMax")) {
                r = parse_size(value, &v);
                if (r >= 0 && (v < SANDBOX_PROCESS_OUTPUT_MIN || v > SANDBOX_PROCESS_OUTPUT_MAX))
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r, "a size from 4K to 16M such as 1M");
                t->process_output_max = v;
                return 0;
        }

        /* Issue 26: pausing an idle sandbox, and resuming a paused one on use. */
        if (streq(key, "IdlePauseSec")) {
                if (streq(value, "infinity")) {
                        t->idle_pause_usec = 0;
                        return 0;
                }
                r = parse_sec(value, &v);
                if (r >= 0 && (v < USEC_PER_SEC || v > 30 * USEC_PER_DAY))
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r,
                                             "a time from 1s to 30d such as 10min, or infinity");
                t->idle_pause_usec = v;
                return 0;
        }

        if (streq(key, "AutoResume")) {
                r = parse_boolean(value);
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r, "yes or no");
                t->auto_resume = r;
                return 0;
        }

        /* Issue 23: the type's network, egress policy and rate. */
        if (streq(key, "EgressRateMax")) {
                if (streq(value, "infinity")) {
                        t->egress_rate_max = 0;
                        return 0;
                }
                r = parse_size(value, &v);
                if (r >= 0 && (v < SANDBOX_EGRESS_RATE_MIN || v > UINT32_MAX))
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r,
                                             "bytes per second from 1K to 4G such as 10M, or infinity");
                t->egress_rate_max = v;
                return 0;
        }

        if (streq(key, "Network")) {
                SandboxNetwork n = sandbox_network_from_string(value);
                if (n < 0)
                        return ini_bad_value(l->error, at, key, value, -EINVAL, "none, egress or host");
                t->network = n;
                l->types[idx].network = *at;
                return 0;
        }

        if (streq(key, "Egress") || streq(key, "EgressAllow") || streq(key, "EgressDeny")) {
                _cleanup_(egress_policy_freep) EgressPolicy *fresh = NULL;
                _cleanup_free_ char *msg = NULL;

                /* The policy is allocated on first use; a failed assignment leaves the type as it was
                 * (egress_policy_ini_assign() changes nothing on failure). */
                if (!t->egress) {
                        fresh = calloc(1, sizeof(EgressPolicy));
                        if (!fresh)
                                return -ENOMEM;
                        *fresh = (EgressPolicy) EGRESS_POLICY_INIT;
                }
                r = egress_policy_ini_assign(t->egress ?: fresh, key, value, &msg);
                if (r == -EINVAL)
                        return ini_error(l->error, at, "%s", msg);
                if (r < 0)
                        return r;
                if (fresh)
                        t->egress = TAKE_PTR(fresh);
                return 0;
        }

        return ini_error(l->error, at, "Unknown key %s= in section [Type:%s]", key, t->name);
}

/* --- [Network]: egress sandboxes' addresses, and whether "host" may be asked for ----------------------- */

static int network_assignment(Loader *l, const IniPosition *at, const char *key, const char *value) {
        SandboxdNetworkConfig *n = &l->c.network;
        int r;

        if (streq(key, "Pool")) {
                _cleanup_free_ char *msg = NULL;
                EgressCidr cidr;

                r = egress_cidr_parse(value, &cidr, &msg);
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        /* the parser's reason without its "Invalid egress entry '…': " */
                        const char *why = msg ? strstr(msg, "': ") : NULL;
                        return ini_error(l->error, at, "Invalid Pool=%s: %s", value,
                                         why ? why + 3 : "not an IPv4 CIDR.");
                }
                if (cidr.family != AF_INET)
                        return ini_error(l->error, at,
                                         "Invalid Pool=%s: IPv6 is not supported yet (expected an IPv4 CIDR "
                                         "such as " SANDBOXD_NETWORK_POOL_DEFAULT ")", value);
                if (cidr.prefixlen < SANDBOXD_NETWORK_POOL_PREFIX_MIN ||
                    cidr.prefixlen > SANDBOXD_NETWORK_POOL_PREFIX_MAX)
                        return ini_error(l->error, at,
                                         "Invalid Pool=%s: the prefix must be /%d../%d (a /30 per egress sandbox)",
                                         value, SANDBOXD_NETWORK_POOL_PREFIX_MIN,
                                         SANDBOXD_NETWORK_POOL_PREFIX_MAX);
                n->pool = cidr;
                return 0;
        }

        if (streq(key, "AllowHostNetwork")) {
                r = parse_boolean(value);
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, -EINVAL, "yes or no");
                n->allow_host_network = r;
                l->allow_host_network = *at;
                return 0;
        }

        return ini_error(l->error, at, "Unknown key %s= in section [Network]", key);
}

/* --- [Sandboxes]: all sandboxes together ----------------------------------------------------------- */

static int sandboxes_assignment(Loader *l, const IniPosition *at, const char *key, const char *value) {
        SandboxTotalsConfig *t = &l->c.totals;
        uint64_t v;
        unsigned p;
        int r;

        if (streq(key, "Overcommit")) {
                r = parse_percent(value, &p);
                if (r >= 0 && (p < 100 || p > SANDBOX_OVERCOMMIT_MAX))
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r, "100%..10000%");
                t->overcommit_percent = p;
                return 0;
        }

        if (streq(key, "MaxSandboxesPerAccount")) {
                if (streq(value, "infinity")) {
                        t->max_per_account = SANDBOX_TOTAL_INFINITY;
                        return 0;
                }
                r = parse_decimal(value, &v);
                if (r >= 0 && (v == 0 || v > (uint64_t) INT64_MAX))
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r, "infinity or a number of at least 1");
                t->max_per_account = v;
                return 0;
        }

        uint64_t *target = streq(key, "MemoryMax") ? &t->memory_max
                           : streq(key, "TasksMax") ? &t->tasks_max
                           : streq(key, "CPUQuota") ? &t->cpu_quota_percent
                                                    : NULL;
        if (!target)
                return ini_error(l->error, at, "Unknown key %s= in section [Sandboxes]", key);
        if (streq(value, "auto")) {
                *target = SANDBOX_TOTAL_AUTO;
                return 0;
        }
        if (streq(value, "infinity")) {
                *target = SANDBOX_TOTAL_INFINITY;
                return 0;
        }
        if (target == &t->memory_max) {
                r = parse_size(value, &v);
                if (r >= 0 && (v == 0 || v > (uint64_t) INT64_MAX))
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r,
                                             "auto, infinity or a non-zero size such as 16G");
        } else if (target == &t->tasks_max) {
                r = parse_decimal(value, &v);
                if (r >= 0 && (v == 0 || v > (uint64_t) INT64_MAX))
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r,
                                             "auto, infinity or a number of at least 1");
        } else {
                r = parse_percent(value, &p);
                if (r >= 0 && p == 0)
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r, "auto, infinity or 1%..10000%");
                v = p;
        }
        *target = v;
        return 0;
}

/* Finds or defines the type for a [Type:name] section; returns its index. */
static int section_type(Loader *l, const IniPosition *at, const char *name, size_t *ret_idx) {
        SandboxdConfig *c = &l->c;

        if (!name_is_valid(name))
                return ini_error(l->error, at,
                                 "Invalid type name '%s' (1..64 of A-Z a-z 0-9 . _ -, not starting with "
                                 ". or -)",
                                 name);

        for (size_t i = 0; i < c->n_types; i++)
                if (streq(c->types[i].name, name)) {
                        *ret_idx = i;
                        return 0;
                }

        if (c->n_types >= SANDBOX_TYPES_MAX)
                return ini_error(l->error, at, "Too many sandbox types, at most %d may be defined",
                                 SANDBOX_TYPES_MAX);

        /* A new type starts from the smallest preset, so a key left out means a tight limit rather than
         * none at all. */
        SandboxType *t = &c->types[c->n_types];
        *t = builtin_types[0];
        t->pool_size = 0; /* sandboxes made ahead are asked for, never inherited */
        strcpy(t->name, name);
        *ret_idx = c->n_types++;
        return 0;
}

static int validate(void *userdata) {
        Loader *l = userdata;
        const SandboxdConfig *c = &l->c;

        if (c->uid_min > c->uid_max) {
                const Location *at = location_later(&l->uid_min, &l->uid_max);
                return ini_error(l->error, at, "UidMin=%u is greater than UidMax=%u", c->uid_min,
                                 c->uid_max);
        }

        /* 0 is root; 65534 is nobody (the overflow uid of user namespaces and NFS); 65535 is (uint16_t) -1,
         * invalid to the 16-bit syscalls. A sandbox running as any of them would not be confined. */
        static const uid_t reserved[] = { 0, 65534, 65535 };
        for (size_t i = 0; i < ELEMENTSOF(reserved); i++)
                if (c->uid_min <= reserved[i] && reserved[i] <= c->uid_max) {
                        const Location *at = location_later(&l->uid_min, &l->uid_max);
                        return ini_error(l->error, at, "UidMin=%u..UidMax=%u includes the reserved uid %u",
                                         c->uid_min, c->uid_max, reserved[i]);
                }

        /* Every live sandbox has a uid of its own. */
        uint64_t n_uids = (uint64_t) c->uid_max - c->uid_min + 1;
        if (c->max_sandboxes > n_uids) {
                const Location *at =
                        location_later(&l->max_sandboxes, location_later(&l->uid_min, &l->uid_max));
                return ini_error(l->error, at,
                                 "MaxSandboxes=%" PRIu64 " exceeds the %" PRIu64 " uids in UidMin=..UidMax=",
                                 c->max_sandboxes, n_uids);
        }

        if (c->default_ttl_usec > c->max_ttl_usec) {
                const Location *at = location_later(&l->default_ttl, &l->max_ttl);
                return ini_error(l->error, at, "DefaultTTLSec= is greater than MaxTTLSec=");
        }

        if (!sandboxd_config_find_type(c, c->default_type))
                return ini_error(l->error, &l->default_type, "DefaultType=%s names no defined type",
                                 c->default_type);

        for (size_t i = 0; i < c->n_types; i++)
                if (c->types[i].default_timeout_usec > c->types[i].max_timeout_usec) {
                        const Location *at =
                                location_later(&l->types[i].default_timeout, &l->types[i].max_timeout);
                        return ini_error(l->error, at,
                                         "DefaultTimeoutSec= is greater than MaxTimeoutSec= in [Type:%s]",
                                         c->types[i].name);
                }

        /* An image sandbox's writable layer lives on its disk: without one it would share the host's space
         * (and overlayfs cannot put it on every file system). */
        for (size_t i = 0; i < c->n_types; i++)
                if (c->types[i].image[0] && c->types[i].disk_max == 0)
                        return ini_error(l->error, &l->types[i].image,
                                         "Image=%s in [Type:%s] needs a DiskMax= other than infinity",
                                         c->types[i].image, c->types[i].name);

        /* Network "host" is unconfined: a type may default to it only where the host allows it. */
        for (size_t i = 0; i < c->n_types; i++)
                if (c->types[i].network == SANDBOX_NETWORK_HOST && !c->network.allow_host_network) {
                        const Location *at = location_later(&l->types[i].network, &l->allow_host_network);
                        return ini_error(l->error, at,
                                         "Network=host in [Type:%s] needs AllowHostNetwork=yes in [Network]",
                                         c->types[i].name);
                }

        return 0;
}

static int on_section(const IniPosition *at, const char *name, void *userdata) {
        Loader *l = userdata;
        int r;

        if (streq(name, "Manager")) {
                l->section = SECTION_MANAGER;
                return 0;
        }
        if (streq(name, "Sandboxes")) {
                l->section = SECTION_SANDBOXES;
                return 0;
        }
        if (streq(name, "Network")) {
                l->section = SECTION_NETWORK;
                return 0;
        }
        if (strncmp(name, "Type:", 5) == 0) {
                r = section_type(l, at, name + 5, &l->type_idx);
                if (r < 0)
                        return r;
                l->section = SECTION_TYPE;
                return 0;
        }
        return ini_error(l->error, at, "Unknown section [%s] (expected [Manager], [Sandboxes], [Network] or "
                         "[Type:<name>])",
                         name);
}

static int on_assignment(const IniPosition *at, const char *key, const char *value, void *userdata) {
        Loader *l = userdata;

        if (l->section == SECTION_MANAGER)
                return manager_assignment(l, at, key, value);
        if (l->section == SECTION_SANDBOXES)
                return sandboxes_assignment(l, at, key, value);
        if (l->section == SECTION_NETWORK)
                return network_assignment(l, at, key, value);
        return type_assignment(l, l->type_idx, at, key, value);
}

int sandboxd_config_load(SandboxdConfig *c, const char *main_path, const char *dropin_dir,
                         char **ret_error) {
        /* validate() checks the result as a whole, while the locations' file names are still valid. */
        static const IniHandler handler = {
                .section = on_section,
                .assignment = on_assignment,
                .finish = validate,
        };
        _cleanup_free_ Loader *l = NULL;
        int r;

        if (!c)
                return -EINVAL;

        /* On the heap: with its locations the loader is a few KiB, and it must not matter how deep the
         * caller's stack already is. */
        l = calloc(1, sizeof(Loader));
        if (!l)
                return -ENOMEM;
        l->c = *c;
        l->error = ret_error; /* set only when the load fails */
        if (l->c.n_types > SANDBOX_TYPES_MAX)
                return -EINVAL;

        /* All or nothing with the types' heap policies too: the loader works on copies of them, which
         * replace the originals on success and are freed on failure. */
        for (size_t i = 0; i < l->c.n_types; i++)
                l->c.types[i].egress = NULL;
        for (size_t i = 0; i < l->c.n_types; i++) {
                if (!c->types[i].egress)
                        continue;
                EgressPolicy *copy = calloc(1, sizeof(EgressPolicy));
                if (!copy || egress_policy_copy(c->types[i].egress, copy) < 0) {
                        free(copy);
                        sandboxd_config_done(&l->c);
                        return -ENOMEM;
                }
                l->c.types[i].egress = copy;
        }

        r = ini_parse_files(main_path, dropin_dir, &handler, l, ret_error);
        if (r < 0) {
                sandboxd_config_done(&l->c);
                return r;
        }

        sandboxd_config_done(c);
        *c = l->c;
        return 0;
}
