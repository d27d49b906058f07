/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-auditd's configuration: built-in defaults, sandbox-auditd.conf and its drop-ins. */
#include "audit-config.h"

#include <errno.h>
#include <string.h>

#include "ini-util.h"
#include "macro.h"
#include "pg-util.h"
#include "time-util.h"

void audit_config_defaults(AuditConfig *c) {
        *c = (AuditConfig) {
                .max_age_usec = AUDIT_MAX_AGE_DEFAULT,
                .max_rows = AUDIT_MAX_ROWS_DEFAULT,
                .output_max = AUDIT_OUTPUT_MAX_DEFAULT,
                .detail_max = AUDIT_DETAIL_MAX_DEFAULT,
                .journal_rows = false,
                .checkpoint_rows = AUDIT_CHECKPOINT_ROWS_DEFAULT,
                .checkpoint_interval_usec = AUDIT_CHECKPOINT_INTERVAL_DEFAULT,
        };
}

typedef struct Loader {
        AuditConfig c;
        char **error;
        bool journal; /* in [Journal], else in [Log] */
        bool postgresql; /* in [PostgreSQL] */
} Loader;

/* The [PostgreSQL] section's keys. */
static int postgresql_assignment(Loader *l, const IniPosition *at, const char *key, const char *value) {
        if (streq(key, "URL")) {
                _cleanup_free_ char *why = NULL, *expected = NULL;
                if (strlen(value) >= sizeof(l->c.pg_url) || pg_check_url(value, &why) < 0) {
                        if (asprintf(&expected, "a PostgreSQL URI such as postgresql://user@host/db%s%s",
                                     why ? ": " : "", strempty(why)) < 0)
                                return -ENOMEM;
                        return ini_bad_value(l->error, at, key, value, -EINVAL, expected);
                }
                snprintf(l->c.pg_url, sizeof(l->c.pg_url), "%s", value);
                return 0;
        }
        if (streq(key, "Host")) {
                bool ok = strlen(value) < sizeof(l->c.pg_host);
                for (const char *p = value; ok && *p; p++)
                        ok = (unsigned char) *p > ' ' && *p != 0x7f;
                if (!ok)
                        return ini_bad_value(l->error, at, key, value, -EINVAL,
                                             "a name without spaces or control characters, up to 255 bytes");
                snprintf(l->c.pg_host, sizeof(l->c.pg_host), "%s", value);
                return 0;
        }
        return ini_error(l->error, at, "Unknown key %s= in section [PostgreSQL]", key);
}

static int parse_bool(const char *s, bool *ret) {
        if (streq(s, "yes") || streq(s, "true") || streq(s, "on") || streq(s, "1"))
                *ret = true;
        else if (streq(s, "no") || streq(s, "false") || streq(s, "off") || streq(s, "0"))
                *ret = false;
        else
                return -EINVAL;
        return 0;
}

/* The [Journal] section's keys. */
static int journal_assignment(Loader *l, const IniPosition *at, const char *key, const char *value) {
        AuditConfig *c = &l->c;
        uint64_t v;
        int r;

        if (streq(key, "Rows")) {
                r = parse_bool(value, &c->journal_rows);
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r, "yes or no");
                return 0;
        }
        if (streq(key, "CheckpointRows")) {
                r = parse_decimal(value, &v);
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r, "a number of rows, or 0");
                c->checkpoint_rows = v;
                return 0;
        }
        if (streq(key, "CheckpointIntervalSec")) {
                r = parse_sec(value, &v);
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r, "a time such as 5min, or 0");
                c->checkpoint_interval_usec = v;
                return 0;
        }
        return ini_error(l->error, at, "Unknown key %s= in section [Journal]", key);
}

/* The [Log] section's keys. */
static int log_assignment(const IniPosition *at, const char *key, const char *value, void *userdata) {
        Loader *l = userdata;
        AuditConfig *c = &l->c;
        uint64_t v;
        int r;

        if (l->journal)
                return journal_assignment(l, at, key, value);
        if (l->postgresql)
                return postgresql_assignment(l, at, key, value);
        if (streq(key, "MaxAgeSec")) {
                r = parse_sec(value, &v);
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r,
                                             "a time such as 90d, 12h, or 0 to keep rows");
                c->max_age_usec = v;
                return 0;
        }
        if (streq(key, "MaxRows")) {
                r = parse_decimal(value, &v);
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r, "a number, or 0 for no limit");
                c->max_rows = v;
                return 0;
        }
        if (streq(key, "OutputMax")) {
                r = parse_size(value, &v);
                if (r >= 0 && (v == 0 || v > AUDIT_OUTPUT_MAX_LIMIT))
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r,
                                             "a size from 1 to 15M, such as 1M");
                c->output_max = v;
                return 0;
        }
        if (streq(key, "DetailMax")) {
                r = parse_size(value, &v);
                if (r >= 0 && (v < AUDIT_DETAIL_MAX_MIN || v > AUDIT_DETAIL_MAX_LIMIT))
                        r = -ERANGE;
                if (r < 0)
                        return ini_bad_value(l->error, at, key, value, r,
                                             "a size from 256 to 64K, such as 4K");
                c->detail_max = v;
                return 0;
        }
        return ini_error(l->error, at, "Unknown key %s= in section [Log]", key);
}

static int log_section(const IniPosition *at, const char *name, void *userdata) {
        Loader *l = userdata;

        if (!streq(name, "Log") && !streq(name, "Journal") && !streq(name, "PostgreSQL"))
                return ini_error(l->error, at, "Unknown section [%s] (expected [Log], [Journal] or [PostgreSQL])",
                                 name);
        l->journal = streq(name, "Journal");
        l->postgresql = streq(name, "PostgreSQL");
        return 0;
}

int audit_config_load(AuditConfig *c, const char *main_path, const char *dropin_dir, char **ret_error) {
        static const IniHandler handler = { .section = log_section, .assignment = log_assignment };
        Loader l = { .error = ret_error }; /* set only when the load fails */
        int r;

        if (!c)
                return -EINVAL;
        l.c = *c;

        r = ini_parse_files(main_path, dropin_dir, &handler, &l, ret_error);
        if (r < 0)
                return r;
        *c = l.c;
        return 0;
}
