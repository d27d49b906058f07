/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "sandboxctl shell SANDBOX": an interactive login shell in a sandbox, through sandboxd's OpenShell stream.
 *
 * The local terminal goes into raw mode, so every key (^C, ^Z, ^D included) reaches the shell in the
 * sandbox; its size follows SIGWINCH through ResizeShell. Signals that would end us (SIGINT, SIGTERM,
 * SIGHUP, SIGQUIT) are taken by the event loop rather than by default actions, so every way out
 * passes through the one place that restores the terminal; an atexit() handler covers exit() calls
 * in between. Only SIGKILL can leave the terminal raw (`reset` or `stty sane` repairs it). */
#include "sandboxctl-shell.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <termios.h>
#include <unistd.h>

#include "macro.h"
#include "sandboxctl-util.h"
#include "sandboxd-bus.h"
#include "time-util.h"

#define EXIT_SHELL_FAILED  255 /* like ssh: any other status is the remote shell's */
#define INPUT_HIGH_WATER   (64 * 1024)
#define ESCAPE_CHAR        0x1d /* ^] three times within a second ends the session, as machinectl's */
#define ESCAPE_WINDOW_USEC USEC_PER_SEC

/* The terminal as we found it; restored exactly once, from wherever we leave. */
static struct termios saved_termios;
static int saved_fd = -1;

static void terminal_restore(void) {
        if (saved_fd < 0)
                return;
        (void) tcsetattr(saved_fd, TCSADRAIN, &saved_termios);
        saved_fd = -1;
}

static int terminal_make_raw(int fd) {
        struct termios raw;

        if (tcgetattr(fd, &saved_termios) < 0)
                return -errno;
        raw = saved_termios;
        cfmakeraw(&raw);
        /* Output post-processing stays off too: the shell's terminal in the sandbox does it. */
        saved_fd = fd;
        if (tcsetattr(fd, TCSANOW, &raw) < 0) {
                saved_fd = -1;
                return -errno;
        }
        return 0;
}

typedef struct Session {
        sd_event *event;
        sd_bus *bus;
        const char *unit;
        int sock;
        int in_fd, out_fd;
        bool in_tty;
        sd_event_source *in_source, *sock_source;
        char *to_sock;
        size_t to_sock_len;
        bool in_eof, remote_eof;
        int exit_signal; /* a signal ended us */
        int error;       /* a local failure ended us */
        unsigned n_escape;
        uint64_t escape_start;
} Session;

static void session_update(Session *s) {
        if (s->in_source)
                (void) sd_event_source_set_enabled(
                        s->in_source,
                        !s->in_eof && s->to_sock_len < INPUT_HIGH_WATER ? SD_EVENT_ON : SD_EVENT_OFF);
        if (s->sock_source)
                (void) sd_event_source_set_io_events(s->sock_source,
                                                     EPOLLIN | (s->to_sock_len > 0 ? EPOLLOUT : 0));
}

static int write_all(int fd, const char *p, size_t n) {
        while (n > 0) {
                ssize_t k = write(fd, p, n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN) {
                                /* stdout was left non-blocking by someone else: wait for it */
                                fd_set w;
                                FD_ZERO(&w);
                                FD_SET(fd, &w);
                                (void) select(fd + 1, NULL, &w, NULL, NULL);
                                continue;
                        }
                        return -errno;
                }
                p += k;
                n -= k;
        }
        return 0;
}

static void session_end(Session *s) {
        (void) sd_event_exit(s->event, 0);
}

/* ^] ^] ^] within a second: the user wants out, whatever the shell does. */
static bool escape_seen(Session *s, const char *buf, size_t n) {
        for (size_t i = 0; i < n; i++) {
                if ((unsigned char) buf[i] != ESCAPE_CHAR) {
                        s->n_escape = 0;
                        continue;
                }
                uint64_t now = now_usec(CLOCK_MONOTONIC);
                if (s->n_escape == 0 || now - s->escape_start > ESCAPE_WINDOW_USEC) {
                        s->n_escape = 0;
                        s->escape_start = now;
                }
                if (++s->n_escape >= 3)
                        return true;
        }
        return false;
}

static int on_input(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        Session *s = userdata;
        char buf[16384];

        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0) {
                if (errno == EINTR || errno == EAGAIN)
                        return 0;
                n = 0; /* EIO: the terminal is gone */
        }
        if (n == 0) {
                s->in_eof = true;
                s->in_source = sd_event_source_disable_unref(s->in_source);
                if (s->in_tty) {
                        session_end(s); /* our terminal went away: hang up */
                        return 0;
                }
                /* A script ran out: an end-of-file for the shell too (^D), then wait for it to exit. */
                buf[0] = 0x04;
                n = 1;
        } else if (s->in_tty && escape_seen(s, buf, n)) {
                session_end(s);
                return 0;
        }
        char *nb = realloc(s->to_sock, s->to_sock_len + n);
        if (!nb) {
                s->error = -ENOMEM;
                session_end(s);
                return 0;
        }
        memcpy(nb + s->to_sock_len, buf, n);
        s->to_sock = nb;
        s->to_sock_len += n;
        session_update(s);
        return 0;
}

static int on_stream(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        Session *s = userdata;
        char buf[65536];

        if (revents & EPOLLOUT) {
                while (s->to_sock_len > 0) {
                        ssize_t k = send(fd, s->to_sock, s->to_sock_len, MSG_NOSIGNAL | MSG_DONTWAIT);
                        if (k < 0) {
                                if (errno == EINTR)
                                        continue;
                                if (errno != EAGAIN)
                                        s->to_sock_len = 0; /* the session is over; its end is read below */
                                break;
                        }
                        memmove(s->to_sock, s->to_sock + k, s->to_sock_len - k);
                        s->to_sock_len -= k;
                }
        }
        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (n < 0 && (errno == EINTR || errno == EAGAIN))
                        return 0;
                if (n <= 0) {
                        s->remote_eof = true; /* the shell ended */
                        session_end(s);
                        return 0;
                }
                int r = write_all(s->out_fd, buf, n);
                if (r < 0) {
                        s->error = r;
                        session_end(s);
                        return 0;
                }
        }
        session_update(s);
        return 0;
}

static int on_resized(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        return 0; /* a shell that just ended cannot be resized; nothing to tell the user */
}

static int on_winch(sd_event_source *es, const struct signalfd_siginfo *si, void *userdata) {
        Session *s = userdata;
        struct winsize ws;

        if (ioctl(s->in_fd, TIOCGWINSZ, &ws) < 0 || ws.ws_col == 0 || ws.ws_row == 0)
                return 0;
        (void) sd_bus_call_method_async(s->bus, NULL, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                        SANDBOXD_MANAGER_INTERFACE, "ResizeShell", on_resized, s, "suu",
                                        s->unit, (uint32_t) ws.ws_col, (uint32_t) ws.ws_row);
        return 0;
}

static int on_exit_signal(sd_event_source *es, const struct signalfd_siginfo *si, void *userdata) {
        Session *s = userdata;
        s->exit_signal = (int) si->ssi_signo;
        session_end(s);
        return 0;
}

static void usage(FILE *f) {
        fputs("sandboxctl shell [OPTIONS...] SANDBOX\n\n"
              "Opens an interactive login shell in a sandbox (id or name), as its user, in its namespaces:\n"
              "it sees the agent's files and processes. The session is recorded in the audit log "
              "(operation\n"
              "takeover; `sandboxctl log --output=ROW` prints the recording, asciicast v2). Exit the shell, "
              "or\n"
              "press ^] three times within a second, to leave; closing the session hangs the shell up.\n"
              "The exit status is the shell's; 255 if the shell could not be opened.\n\n"
              "  -h --help                   Show this help\n"
              "  -q --quiet                  Do not print the connect and disconnect messages\n"
              "     --term=TERM              TERM in the sandbox (default: $TERM, else xterm-256color)\n",
              f);
}

int verb_shell(int argc, char *argv[]) {
        enum { ARG_TERM = 0x100 };
        static const struct option options[] = {
                {"help", no_argument, NULL, 'h'},
                {"quiet", no_argument, NULL, 'q'},
                {"term", required_argument, NULL, ARG_TERM},
                {},
        };
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL, *wait_bus = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL, *wait_reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL, wait_error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_close_ int sock = -EBADF;
        const char *term = getenv("TERM"), *unit = NULL, *id;
        bool quiet = false;
        int c, r, fd;

        optind = 0;
        while ((c = getopt_long(argc, argv, "hq", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        usage(stdout);
                        return 0;
                case 'q':
                        quiet = true;
                        break;
                case ARG_TERM:
                        term = optarg;
                        break;
                default:
                        return EXIT_USAGE;
                }
        if (optind != argc - 1) {
                fprintf(stderr,
                        "sandboxctl: shell: expected one SANDBOX; usage: sandboxctl shell [-q] SANDBOX\n");
                return EXIT_USAGE;
        }
        id = argv[optind];
        if (isempty(term) || streq(term, "dumb") || strlen(term) > 64)
                term = "xterm-256color";

        bool in_tty = isatty(STDIN_FILENO);
        struct winsize ws = {.ws_col = 80, .ws_row = 24};
        if (in_tty && (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || ws.ws_col == 0 || ws.ws_row == 0))
                ws = (struct winsize){.ws_col = 80, .ws_row = 24};

        r = sd_bus_open_system(&bus);
        if (r < 0) {
                fprintf(stderr, "sandboxctl: shell: Failed to connect to the system bus: %s\n",
                        strerror(-r));
                return EXIT_SHELL_FAILED;
        }
        r = sd_bus_message_new_method_call(bus, &m, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                           SANDBOXD_MANAGER_INTERFACE, "OpenShell");
        if (r >= 0)
                r = sd_bus_message_append(m, "sa{sv}", id, 4, "cols", "u", (uint32_t) ws.ws_col, "rows", "u",
                                          (uint32_t) ws.ws_row, "term", "s", term, "source", "s",
                                          "human_takeover");
        if (r < 0) {
                fprintf(stderr, "sandboxctl: shell: Failed to build the call: %s\n", strerror(-r));
                return EXIT_SHELL_FAILED;
        }
        r = sd_bus_call(bus, m, 60 * USEC_PER_SEC, &error, &reply);
        if (r < 0) {
                _cleanup_free_ char *msg = make_printable(sd_bus_error_is_set(&error) ? error.message
                                                                                      : strerror(-r));
                fprintf(stderr, "sandboxctl: shell: %s%s\n", strna(msg),
                        sd_bus_error_has_names(&error, SD_BUS_ERROR_SERVICE_UNKNOWN,
                                               SD_BUS_ERROR_NAME_HAS_NO_OWNER)
                                ? " (is sandboxd running?)"
                                : "");
                return EXIT_SHELL_FAILED;
        }
        r = sd_bus_message_read(reply, "hs", &fd, &unit);
        if (r >= 0 && (sock = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
                r = -errno;
        if (r < 0) {
                fprintf(stderr, "sandboxctl: shell: Failed to parse the reply: %s\n", strerror(-r));
                return EXIT_SHELL_FAILED;
        }

        /* From here on, signals are events: nothing ends us without passing terminal_restore(). */
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGQUIT);
        sigaddset(&mask, SIGWINCH);
        sigaddset(&mask, SIGPIPE);
        (void) sigprocmask(SIG_BLOCK, &mask, NULL);

        Session s = {
                .bus = bus,
                .unit = unit,
                .sock = sock,
                .in_fd = STDIN_FILENO,
                .out_fd = STDOUT_FILENO,
                .in_tty = in_tty,
        };
        r = sd_event_new(&event);
        if (r >= 0)
                r = sd_bus_attach_event(bus, event, SD_EVENT_PRIORITY_NORMAL);
        s.event = event;
        const int exit_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(exit_signals); i++)
                r = sd_event_add_signal(event, NULL, exit_signals[i], on_exit_signal, &s);
        if (r >= 0 && in_tty)
                r = sd_event_add_signal(event, NULL, SIGWINCH, on_winch, &s);
        if (r >= 0)
                r = sd_event_add_io(event, &s.sock_source, sock, EPOLLIN, on_stream, &s);
        if (r >= 0) {
                r = sd_event_add_io(event, &s.in_source, STDIN_FILENO, EPOLLIN, on_input, &s);
                if (r == -EPERM) { /* a regular file or /dev/null: epoll refuses it; no input then */
                        s.in_eof = true;
                        r = 0;
                }
        }
        if (r < 0) {
                fprintf(stderr, "sandboxctl: shell: Failed to set up the event loop: %s\n", strerror(-r));
                return EXIT_SHELL_FAILED;
        }

        if (!quiet)
                fprintf(stderr,
                        "Connected to sandbox %s (%s). Exit the shell or press ^] three times within 1s "
                        "to leave.\r\n",
                        id, unit);
        if (in_tty) {
                r = terminal_make_raw(STDIN_FILENO);
                if (r < 0) {
                        fprintf(stderr, "sandboxctl: shell: Failed to put the terminal in raw mode: %s\n",
                                strerror(-r));
                        return EXIT_SHELL_FAILED;
                }
                (void) atexit(terminal_restore);
        }

        r = sd_event_loop(event);
        terminal_restore();

        /* Closing the stream hangs the shell up, if it still runs. */
        s.in_source = sd_event_source_disable_unref(s.in_source);
        s.sock_source = sd_event_source_disable_unref(s.sock_source);
        free(s.to_sock);
        sock = safe_close(sock);

        if (s.error < 0 || r < 0) {
                fprintf(stderr, "sandboxctl: shell: %s\n", strerror(-(s.error < 0 ? s.error : r)));
                return EXIT_SHELL_FAILED;
        }
        if (s.exit_signal > 0) {
                if (!quiet)
                        fprintf(stderr, "\nsandboxctl: shell: %s; the shell was hung up.\n",
                                strsignal(s.exit_signal));
                return 128 + s.exit_signal;
        }

        /* The event loop's end closed the connection it was attached to: ask on a new one. */
        int32_t code = EXIT_SHELL_FAILED;
        r = sd_bus_open_system(&wait_bus);
        if (r >= 0)
                r = sd_bus_call_method(wait_bus, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH,
                                       SANDBOXD_MANAGER_INTERFACE, "WaitShell", &wait_error, &wait_reply,
                                       "s", unit);
        if (r >= 0)
                r = sd_bus_message_read(wait_reply, "i", &code);
        if (r < 0) {
                _cleanup_free_ char *msg = make_printable(
                        sd_bus_error_is_set(&wait_error) ? wait_error.message : strerror(-r));
                fprintf(stderr, "sandboxctl: shell: Could not learn the shell's exit status: %s\n",
                        strna(msg));
                return EXIT_SHELL_FAILED;
        }
        /* Why it ended, when sandboxd ended it for being idle (ShellIdleSec=). */
        bool idle = false;
        if (sd_bus_message_enter_container(wait_reply, 'a', "{sv}") > 0)
                while (sd_bus_message_enter_container(wait_reply, 'e', "sv") > 0) {
                        const char *key, *by;
                        if (sd_bus_message_read(wait_reply, "s", &key) < 0)
                                break;
                        if (streq(key, "ended_by") && sd_bus_message_read(wait_reply, "v", "s", &by) >= 0)
                                idle = streq(by, "idle");
                        else if (sd_bus_message_skip(wait_reply, "v") < 0)
                                break;
                        if (sd_bus_message_exit_container(wait_reply) < 0)
                                break;
                }
        if (!quiet && idle)
                fprintf(stderr, "Shell %s was hung up: nothing passed either way for the sandbox type's "
                        "ShellIdleSec=.\n", unit);
        else if (!quiet)
                fprintf(stderr, "%s %s ended%s.\n", s.remote_eof ? "Shell" : "Disconnected; shell", unit,
                        s.remote_eof ? "" : " (hung up)");
        return code < 0 ? EXIT_SHELL_FAILED : code > 255 ? 255 : code;
}
