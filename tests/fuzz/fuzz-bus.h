/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* D-Bus messages made from fuzz input, for the targets that fuzz what our methods read out of a call.
 *
 * libsystemd cannot parse a message from a buffer, so the input is read as a small stream of values that
 * are appended to a real message, which is then sealed and read from the start, as a daemon receives it:
 *
 *   strv    := u8 count (mod 8), then count × string
 *   options := up to 64 × entry, while input is left  (an a{sv})
 *   entry   := key string, u8 type, value
 *   string  := u8 n: n < 0x80: the next n bytes (NUL, and bytes >= 0x80 if not UTF-8 as sd-bus takes it,
 *              are made '?': the bus never delivers them); n >= 0x80: the (n & 0x7f)th of fuzz_strings[]
 *   key     := as string, but n >= 0x80 picks from fuzz_keys[], every key any of our methods takes
 *   value   := by type % 16: s, t (8 bytes LE), u, i, b, h (a real fd), y, ay (u16 LE length), as,
 *              a{ss} (u16 LE count), d, o, a{sv} (one level, same entries), x, q, g
 * Input that runs out reads as zeros, so every input makes a well-formed message. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>

#include "fuzz.h"
#include "macro.h"
#include "utf8-util.h"

static const char *const fuzz_keys[] = {
        /* the caller context */
        "account_id", "request_id", "source",
        /* sandboxd */
        "name", "type", "network", "ttl_seconds", "cwd", "env", "stdin", "timeout_seconds", "memory_max",
        "tasks_max", "stdout_fd", "stderr_fd", "cancel_fd", "mode", "create_dirs", "append", "fd", "offset",
        "length", "cols", "rows", "term", "path", "path_bytes", "glob", "overwrite", "ignore_case", "start_line", "end_line",
        "max_results",
        /* sandbox-auditd: Record's row, GetLog's filter */
        "key", "session_id", "operation", "event", "detail", "exit_code", "stdout", "stderr", "started_at",
        "duration_usec", "since", "until", "after_id", "max_id",
        /* the gateway: CreateKey's spec */
        "preset", "role", "actions", "sandboxes",
        /* sandboxd: CreateSandbox's egress policy (issue 23) */
        "egress_policy", "default", "allow", "deny",
};

static const char *const fuzz_strings[] = {
        "", "agent", "human_takeover", "none", "host", "small", "medium", "large", "sb_abcdefghij",
        "build-1", "-bad", "/tmp/x", "../../etc/passwd", "work/dir", "/", "PATH", "1BAD", "A=B", "xterm",
        "bad;term", "*.c", "exec", "finished", "failed", "write", "sandbox.create", "api_key.create",
        "member", "admin", "runner", "sandbox.read", "takeover", "api-key.admin", "*", "{}",
        "{\"a\":1}", "not json", "key_abc",
        /* longer than the 256-byte caller fields, and than the 4096-byte patterns */
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        /* issue 23: networks, policy defaults and entries */
        "egress", "allow", "deny", "pypi.org", "*.pythonhosted.org", "203.0.113.0/24", "10.0.0.1/8",
};

#define FUZZ_ELEMENTS(a) (sizeof(a) / sizeof((a)[0]))

typedef struct FuzzInput {
        const uint8_t *p;
        size_t left;
} FuzzInput;

static inline uint8_t fuzz_u8(FuzzInput *in) {
        if (in->left == 0)
                return 0;
        in->left--;
        return *in->p++;
}

static inline uint64_t fuzz_le(FuzzInput *in, unsigned bytes) {
        uint64_t v = 0;
        for (unsigned i = 0; i < bytes; i++)
                v |= (uint64_t) fuzz_u8(in) << (8 * i);
        return v;
}

/* What sd-bus accepts as a string: valid UTF-8 without the noncharacters U+FDD0..U+FDEF and U+xFFFE/F. */
static inline bool fuzz_bus_utf8(const uint8_t *p, size_t n) {
        if (!utf8_is_valid(p, n))
                return false;
        for (size_t i = 0; i < n;) {
                size_t len = p[i] < 0x80 ? 1 : p[i] < 0xe0 ? 2 : p[i] < 0xf0 ? 3 : 4;
                uint32_t cp = len == 1 ? p[i] : p[i] & (0x7f >> len);
                for (size_t j = 1; j < len; j++)
                        cp = cp << 6 | (p[i + j] & 0x3f);
                if ((cp >= 0xfdd0 && cp <= 0xfdef) || (cp & 0xfffe) == 0xfffe)
                        return false;
                i += len;
        }
        return true;
}

/* A string as the bus would carry it, in buf (at least 128 bytes; table strings are returned as is). */
static inline const char *fuzz_string(FuzzInput *in, char *buf, const char *const *table, size_t n_table) {
        uint8_t n = fuzz_u8(in);
        size_t k;

        if (n & 0x80)
                return table[(n & 0x7f) % n_table];
        for (k = 0; k < n && in->left > 0; k++) {
                char c = (char) fuzz_u8(in);
                buf[k] = c ? c : '?';
        }
        buf[k] = 0;
        if (!fuzz_bus_utf8((const uint8_t *) buf, k))
                for (size_t i = 0; i < k; i++)
                        if ((uint8_t) buf[i] >= 0x80)
                                buf[i] = '?';
        return buf;
}

#define FUZZ_STR(in, buf) fuzz_string(in, buf, fuzz_strings, FUZZ_ELEMENTS(fuzz_strings))
#define FUZZ_KEY(in, buf) fuzz_string(in, buf, fuzz_keys, FUZZ_ELEMENTS(fuzz_keys))

/* A client bus on one end of a socketpair, mid-handshake: enough to make messages on, fds included.
 * Made once per process. */
static inline sd_bus *fuzz_bus(void) {
        static sd_bus *bus = NULL;
        int fds[2];

        if (bus)
                return bus;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) < 0 || sd_bus_new(&bus) < 0 ||
            sd_bus_set_fd(bus, fds[0], fds[0]) < 0 || sd_bus_start(bus) < 0) {
                fprintf(stderr, "cannot make a bus to build messages on\n");
                abort();
        }
        return bus;
}

static inline int fuzz_append_strv(sd_bus_message *m, FuzzInput *in) {
        unsigned n = fuzz_u8(in) % 8;
        char buf[128];
        int r;

        r = sd_bus_message_open_container(m, 'a', "s");
        for (unsigned i = 0; r >= 0 && i < n; i++)
                r = sd_bus_message_append_basic(m, 's', FUZZ_STR(in, buf));
        return r < 0 ? r : sd_bus_message_close_container(m);
}

static inline int fuzz_append_options(sd_bus_message *m, FuzzInput *in, unsigned depth);

static inline int fuzz_append_value(sd_bus_message *m, FuzzInput *in, unsigned depth) {
        static const char *const sigs[16] = { "s", "t", "u", "i", "b", "h", "y", "ay",
                                              "as", "a{ss}", "d", "o", "a{sv}", "x", "q", "g" };
        unsigned t = fuzz_u8(in) % 16;
        char buf[128], buf2[128];
        uint64_t v;
        int r;

        r = sd_bus_message_open_container(m, 'v', sigs[t]);
        if (r < 0)
                return r;
        switch (t) {
        case 0: /* s */
                r = sd_bus_message_append_basic(m, 's', FUZZ_STR(in, buf));
                break;
        case 1:  /* t */
        case 13: /* x */
                v = fuzz_le(in, 8);
                r = sd_bus_message_append_basic(m, sigs[t][0], &v);
                break;
        case 2: /* u */
        case 3: /* i */ {
                uint32_t u = (uint32_t) fuzz_le(in, 4);
                r = sd_bus_message_append_basic(m, sigs[t][0], &u);
                break;
        }
        case 14: /* q */ {
                uint16_t q = (uint16_t) fuzz_le(in, 2);
                r = sd_bus_message_append_basic(m, 'q', &q);
                break;
        }
        case 4: /* b */ {
                int b = fuzz_u8(in) & 1;
                r = sd_bus_message_append_basic(m, 'b', &b);
                break;
        }
        case 5: /* h */ {
                int fd = STDERR_FILENO; /* appending dups it: the message owns its copy */
                r = sd_bus_message_append_basic(m, 'h', &fd);
                break;
        }
        case 6: /* y */ {
                uint8_t y = fuzz_u8(in);
                r = sd_bus_message_append_basic(m, 'y', &y);
                break;
        }
        case 7: /* ay */ {
                size_t n = (size_t) fuzz_le(in, 2) % 8193;
                n = n < in->left ? n : in->left;
                r = sd_bus_message_append_array(m, 'y', in->p, n);
                in->p += n, in->left -= n;
                break;
        }
        case 8: /* as */
                r = fuzz_append_strv(m, in);
                break;
        case 9: /* a{ss} */ {
                unsigned n = (unsigned) fuzz_le(in, 2) % 2048;
                r = sd_bus_message_open_container(m, 'a', "{ss}");
                for (unsigned i = 0; r >= 0 && i < n && in->left > 0; i++) {
                        const char *k = FUZZ_STR(in, buf);
                        r = sd_bus_message_append(m, "{ss}", k, FUZZ_STR(in, buf2));
                }
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                break;
        }
        case 10: /* d */ {
                double d;
                v = fuzz_le(in, 8);
                memcpy(&d, &v, sizeof(d));
                r = sd_bus_message_append_basic(m, 'd', &d);
                break;
        }
        case 11: /* o */
                r = sd_bus_message_append_basic(m, 'o', "/org/sandboxd/x");
                break;
        case 12: /* a{sv}, one level deep */
                r = depth < 1 ? fuzz_append_options(m, in, depth + 1) : sd_bus_message_append(m, "a{sv}", 0);
                break;
        default: /* g */
                r = sd_bus_message_append_basic(m, 'g', "a{sv}");
                break;
        }
        if (r < 0)
                return r;
        return sd_bus_message_close_container(m);
}

static inline int fuzz_append_options(sd_bus_message *m, FuzzInput *in, unsigned depth) {
        char buf[128];
        int r;

        r = sd_bus_message_open_container(m, 'a', "{sv}");
        for (unsigned i = 0; r >= 0 && i < 64 && in->left > 0; i++) {
                r = sd_bus_message_open_container(m, 'e', "sv");
                if (r >= 0)
                        r = sd_bus_message_append_basic(m, 's', FUZZ_KEY(in, buf));
                if (r >= 0)
                        r = fuzz_append_value(m, in, depth);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
        }
        return r < 0 ? r : sd_bus_message_close_container(m);
}

/* A method call, to be filled, then fuzz_bus_seal()ed. */
static inline sd_bus_message *fuzz_bus_message(void) {
        sd_bus_message *m = NULL;

        if (sd_bus_message_new_method_call(fuzz_bus(), &m, "org.sandboxd.fuzz", "/org/sandboxd/fuzz",
                                           "org.sandboxd.fuzz", "Fuzz") < 0)
                return NULL;
        return m;
}

/* As a daemon receives it: sealed, and read from the start. FUZZ_BUS_DUMP=1 in the environment prints
 * it, to see what a seed makes. */
static inline int fuzz_bus_seal(sd_bus_message *m) {
        static uint64_t cookie = 0;
        int r = sd_bus_message_seal(m, ++cookie, 0);
        if (r >= 0 && getenv("FUZZ_BUS_DUMP"))
                (void) sd_bus_message_dump(m, stderr, SD_BUS_MESSAGE_DUMP_WITH_HEADER);
        return r < 0 ? r : sd_bus_message_rewind(m, true);
}

/* A sealed message carrying one a{sv} made from the input, as the readers of a daemon's option
 * dictionaries get it; NULL if memory ran out (our builder makes only what the bus would carry, so any
 * other refusal is a bug in it and aborts). */
static inline sd_bus_message *fuzz_options_message(FuzzInput *in) {
        sd_bus_message *m = fuzz_bus_message();
        int r;

        if (!m)
                return NULL;
        r = fuzz_append_options(m, in, 0);
        if (r >= 0)
                r = fuzz_bus_seal(m);
        if (r < 0) {
                fprintf(stderr, "building the message: %s\n", strerror(-r));
                FUZZ_ASSERT(r == -ENOMEM);
                return sd_bus_message_unref(m);
        }
        return m;
}

/* Every reader's contract: accepted, or refused with an error name and a message; only running out of
 * memory may go without. */
#define FUZZ_ASSERT_REFUSED(r, e) FUZZ_ASSERT((r) == -ENOMEM || ((e)->name && (e)->message))
