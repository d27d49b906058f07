/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Human takeover: a login shell in a sandbox on a PTY that sandboxd relays, records and hangs up.
 *
 * The shell is forked and confined like every Exec (sandbox-exec.c): born in the sandbox's PID namespace
 * with sandboxd as its parent, it joins the sandbox's other namespaces, becomes a session leader, drops
 * to the sandbox's uid and installs the same seccomp filter, and waits on a socket until systemd has put
 * it in its own scope, sandbox-<id>-shell-<n>.scope. Its PTY comes from the sandbox's own devpts (the
 * child opens /dev/ptmx once inside the sandbox's mount namespace), so the terminal has a name the
 * sandbox can see; the child makes the other end its controlling terminal and hands the master to
 * sandboxd with its "ready".
 *
 * The caller never holds the master. It gets one end of a socketpair, and sandboxd copies bytes between
 * the socket and the master in the event loop, non-blocking, with a bounded buffer each way (when one is
 * full, sandboxd stops reading the side that fills it). So sandboxd alone records the session and can
 * hang it up: when the caller closes its end, sandboxd closes the master (the kernel hangs up the
 * terminal: SIGHUP to the shell) and stops the scope (SIGTERM and SIGHUP to everything in it, SIGKILL
 * after 1 s). When the shell exits, its last output is passed on and the caller's socket is closed.
 *
 * What the terminal showed is recorded as asciicast v2, capped at OutputMax=, and goes into the
 * session's one audit row ("takeover") as its stdout, so GetOutput on the audit log replays it. */
#include "sandbox-shell.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "asciicast.h"
#include "confine.h"
#include "hashmap.h"
#include "log.h"
#include "macro.h"
#include "sandbox-options.h"
#include "sandbox.h"
#include "sandboxd-bus.h"
#include "sandboxd-manager.h"
#include "scope-child.h"
#include "time-util.h"
#include "unit.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

/* Per direction: past this, stop reading the side that fills it. */
#define RELAY_HIGH_WATER (256 * 1024)
/* A shell still alive this long after a hang-up gets SIGKILL. */
#define HANGUP_KILL_USEC (2 * USEC_PER_SEC)
/* WaitShell finds an ended shell this long. */
#define RESULT_KEEP_USEC (60 * USEC_PER_SEC)
/* A caller that reads nothing of the last output gets cut off after this. */
#define DRAIN_USEC          (10 * USEC_PER_SEC)
#define SHELL_PATH          "/bin/bash"
#define SHELL_FALLBACK_PATH "/bin/sh"
#define TERM_DEFAULT        "xterm-256color"

struct Shell {
        Manager *manager;
        ScopeChild child; /* its unit, pid, go channel, failure pipe and scope job */
        char sandbox_id[SANDBOX_ID_LEN + 1];
        char *slice;
        uid_t opener;
        unsigned cols, rows;
        char term[SHELL_TERM_MAX + 1];
        uint64_t tasks_max, memory_max;
        uint64_t idle_usec;      /* the type's ShellIdleSec=, 0: none */
        uint64_t last_activity;  /* CLOCK_MONOTONIC of the last byte either way */
        sd_event_source *idle_timer;

        sd_event_source *master_source, *sock_source, *kill_timer, *keep_timer, *drain_timer;
        int master_fd; /* the PTY master, from the child */
        int sock_fd;   /* our end of the caller's socketpair */
        int peer_fd;   /* the caller's end, until it is sent */
        char *to_client, *to_pty;
        size_t to_client_len, to_pty_len;
        bool master_eof, sock_eof;

        bool hung_up, ended;
        const char *ended_by; /* "shell", "client", "sandboxd" */
        int exit_code, signal;
        uint64_t duration_usec;

        Asciicast rec;
        bool rec_truncated; /* kept when the recording itself is gone (into the audit row) */
        sd_bus_message *request;
        sd_bus_message **waiters;
        size_t n_waiters;

        Caller caller;
        uint64_t call_started_at, call_mono, start_mono;
        char audit_key[AUDIT_KEY_SIZE]; /* its note in the spool while the session lasts, or "" */
};

static void shell_audit(Shell *sh, const char *event, const char *error_name, const char *error_message);
static uint64_t shell_elapsed(Shell *sh);

static void shell_close_relay(Shell *sh) {
        sh->master_source = sd_event_source_disable_unref(sh->master_source);
        sh->sock_source = sd_event_source_disable_unref(sh->sock_source);
        sh->master_fd = safe_close(sh->master_fd);
        sh->sock_fd = safe_close(sh->sock_fd);
        free(sh->to_client);
        free(sh->to_pty);
        sh->to_client = sh->to_pty = NULL;
        sh->to_client_len = sh->to_pty_len = 0;
}

static Shell *shell_free(Shell *sh) {
        if (!sh)
                return NULL;
        if (sh->manager->shells && hashmap_get(sh->manager->shells, sh->child.unit) == sh)
                (void) hashmap_remove(sh->manager->shells, sh->child.unit);
        scope_child_release(&sh->child);
        shell_close_relay(sh);
        sh->kill_timer = sd_event_source_disable_unref(sh->kill_timer);
        sh->keep_timer = sd_event_source_disable_unref(sh->keep_timer);
        sh->drain_timer = sd_event_source_disable_unref(sh->drain_timer);
        sh->idle_timer = sd_event_source_disable_unref(sh->idle_timer);
        sh->peer_fd = safe_close(sh->peer_fd);
        for (size_t i = 0; i < sh->n_waiters; i++) {
                (void) sd_bus_reply_method_errorf(sh->waiters[i], SD_BUS_ERROR_FAILED,
                                                  "sandboxd is shutting down.");
                sd_bus_message_unref(sh->waiters[i]);
        }
        free(sh->waiters);
        sd_bus_message_unref(sh->request);
        asciicast_done(&sh->rec);
        manager_audit_cancel(sh->manager, sh->audit_key); /* (its row, if any, took the note already) */
        free(sh->slice);
        free(sh);
        return NULL;
}

unsigned shell_count_open(Manager *m, const char *id) {
        unsigned n = 0;
        Shell *sh;

        if (!m->shells)
                return 0;
        HASHMAP_FOREACH(sh, m->shells, i)
        if (!sh->ended && streq(sh->sandbox_id, id))
                n++;
        return n;
}

void shell_free_all(Manager *m) {
        Shell *sh;

        if (!m->shells)
                return;
        HASHMAP_FOREACH(sh, m->shells, i) {
                /* A session cut short by our exit still gets its row, as far as it got; freeing the
                 * master hangs the terminal up. */
                if (sh->child.started && !sh->ended) {
                        sh->ended_by = "sandboxd";
                        sh->exit_code = -1;
                        asciicast_finish(&sh->rec, shell_elapsed(sh));
                        shell_audit(sh, "finished", NULL, NULL);
                        /* Sent when the bus is flushed on our way out: the session's processes end. */
                        (void) unit_stop_nowait(sh->manager, sh->child.unit);
                }
                shell_free(sh);
        }
        m->shells = hashmap_free(m->shells);
}

/* --- the child --------------------------------------------------------------------------------- */

typedef struct ShellChildArgs {
        int init_pidfd;
        int ns_flags;
        int go_fd, err_fd;
        uid_t uid;
        unsigned cols, rows;
        char **envp;
} ShellChildArgs;

#define CHILD_FAIL(step, error) scope_child_fail(a->err_fd, SCOPE_CHILD_STAGE_SETUP, step, error, 127)

extern char **environ;

static void shell_child_run(void *userdata);

static _noreturn_ void shell_child(const ShellChildArgs *a) {
        int master, slave, r;

        if (confine_reset_signals() < 0)
                CHILD_FAIL("reset signals", errno);
        /* The sandbox's mount, IPC, UTS (and network) namespaces; the PID namespace we were born in. */
        if (setns(a->init_pidfd, a->ns_flags) < 0)
                CHILD_FAIL("join the sandbox's namespaces", errno);
        if (setsid() < 0)
                CHILD_FAIL("setsid", errno);

        /* The sandbox's devpts instance: the terminal's name (/dev/pts/N) exists where the shell runs. */
        master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master < 0)
                CHILD_FAIL("open /dev/ptmx", errno);
        int unlock = 0;
        if (ioctl(master, TIOCSPTLCK, &unlock) < 0)
                CHILD_FAIL("unlock the PTY", errno);
        slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0)
                CHILD_FAIL("open the PTY's terminal", errno);
        /* The user's terminal, as login would make it. */
        if (fchown(slave, a->uid, (gid_t) a->uid) < 0 || fchmod(slave, 0600) < 0)
                CHILD_FAIL("chown the terminal", errno);
        struct winsize ws = {.ws_row = a->rows, .ws_col = a->cols};
        if (ioctl(slave, TIOCSWINSZ, &ws) < 0)
                CHILD_FAIL("set the terminal size", errno);
        if (ioctl(slave, TIOCSCTTY, 0) < 0)
                CHILD_FAIL("make the PTY the controlling terminal", errno);
        if (dup2(slave, 0) < 0 || dup2(slave, 1) < 0 || dup2(slave, 2) < 0)
                CHILD_FAIL("set up stdio", errno);

        /* From here on exactly what an Exec's child does. */
        int keep[] = {a->go_fd, a->err_fd, master};
        const char *step = NULL;
        r = confine_sandbox_process(keep, ELEMENTSOF(keep), a->uid, &step);
        if (r < 0)
                CHILD_FAIL(step, -r);
        if (chdir(SANDBOXD_SANDBOX_HOME) < 0 && chdir("/") < 0)
                CHILD_FAIL("change to the home directory", errno);

        /* Ready: confined, waiting only for our scope; EOF means: give up. The master goes to sandboxd
         * with our "ready". */
        r = scope_child_send_ready(a->go_fd, master);
        if (r < 0)
                CHILD_FAIL("report readiness", -r);
        close(master);
        if (scope_child_wait_go(a->go_fd) < 0)
                _exit(127);
        close(a->go_fd);

        /* A login shell: argv[0] starts with '-'. */
        environ = a->envp;
        execve(SHELL_PATH, (char *[]){(char *) "-bash", NULL}, a->envp);
        if (errno == ENOENT)
                execve(SHELL_FALLBACK_PATH, (char *[]){(char *) "-sh", NULL}, a->envp);
        CHILD_FAIL("execute the shell", errno);
}

static void shell_child_run(void *userdata) {
        shell_child(userdata);
}

/* --- relay ------------------------------------------------------------------------------------- */

static void shell_hangup(Shell *sh, const char *by);
static void shell_maybe_end(Shell *sh);

static uint64_t shell_elapsed(Shell *sh) {
        return now_usec(CLOCK_MONOTONIC) - sh->start_mono;
}

/* Which events each side waits for follows from the buffers. */
static void relay_update(Shell *sh) {
        if (sh->master_source) {
                uint32_t ev = 0;
                if (!sh->master_eof && sh->to_client_len < RELAY_HIGH_WATER)
                        ev |= EPOLLIN;
                if (sh->to_pty_len > 0)
                        ev |= EPOLLOUT;
                if (ev == 0)
                        (void) sd_event_source_set_enabled(sh->master_source, SD_EVENT_OFF);
                else {
                        (void) sd_event_source_set_io_events(sh->master_source, ev);
                        (void) sd_event_source_set_enabled(sh->master_source, SD_EVENT_ON);
                }
        }
        if (sh->sock_source) {
                /* EPOLLRDHUP always: a caller that went away is noticed even while its input waits. */
                uint32_t ev = EPOLLRDHUP;
                if (!sh->sock_eof && sh->to_pty_len < RELAY_HIGH_WATER)
                        ev |= EPOLLIN;
                if (sh->to_client_len > 0)
                        ev |= EPOLLOUT;
                (void) sd_event_source_set_io_events(sh->sock_source, ev);
        }
}

static int buffer_append(char **buf, size_t *len, const char *data, size_t n) {
        char *nb = realloc(*buf, *len + n);
        if (!nb)
                return -ENOMEM;
        memcpy(nb + *len, data, n);
        *buf = nb;
        *len += n;
        return 0;
}

static void buffer_consume(char *buf, size_t *len, size_t n) {
        memmove(buf, buf + n, *len - n);
        *len -= n;
}

/* Reads what the terminal shows: 1 at EOF (the terminal is gone), 0 otherwise. */
static int master_read_some(Shell *sh) {
        char tmp[16384];

        while (sh->to_client_len < RELAY_HIGH_WATER) {
                ssize_t n = read(sh->master_fd, tmp, sizeof(tmp));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        return 1; /* EIO: no process has the terminal open any more */
                }
                if (n == 0)
                        return 1;
                sh->last_activity = now_usec(CLOCK_MONOTONIC);
                asciicast_output(&sh->rec, shell_elapsed(sh), tmp, n);
                if (sh->sock_fd >= 0 && buffer_append(&sh->to_client, &sh->to_client_len, tmp, n) < 0)
                        return 1;
        }
        return 0;
}

static int client_write_some(Shell *sh) {
        while (sh->to_client_len > 0) {
                ssize_t k = send(sh->sock_fd, sh->to_client, sh->to_client_len, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        return -errno;
                }
                buffer_consume(sh->to_client, &sh->to_client_len, k);
        }
        return 0;
}

static int on_master_event(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        Shell *sh = userdata;

        if (revents & EPOLLOUT) {
                while (sh->to_pty_len > 0) {
                        ssize_t k = write(sh->master_fd, sh->to_pty, sh->to_pty_len);
                        if (k < 0) {
                                if (errno == EINTR)
                                        continue;
                                if (errno != EAGAIN)
                                        sh->to_pty_len = 0; /* the terminal is gone; its input with it */
                                break;
                        }
                        buffer_consume(sh->to_pty, &sh->to_pty_len, k);
                }
        }
        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                if (master_read_some(sh) > 0 ||
                    ((revents & (EPOLLHUP | EPOLLERR)) && !(revents & EPOLLIN))) {
                        /* Every process of the session closed the terminal; the shell's exit follows. */
                        sh->master_eof = true;
                        sh->to_pty_len = 0;
                        sh->master_source = sd_event_source_disable_unref(sh->master_source);
                }
                if (sh->sock_fd >= 0 && client_write_some(sh) < 0) {
                        shell_hangup(sh, "client");
                        return 0;
                }
        }
        relay_update(sh);
        return 0;
}

static int on_sock_event(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        Shell *sh = userdata;
        char tmp[16384];

        if (revents & EPOLLOUT) {
                if (client_write_some(sh) < 0) {
                        shell_hangup(sh, "client");
                        return 0;
                }
                if (sh->child.exited && sh->to_client_len == 0) {
                        shell_maybe_end(sh);
                        return 0;
                }
        }
        if (revents & EPOLLIN) {
                while (sh->to_pty_len < RELAY_HIGH_WATER) {
                        ssize_t n = recv(sh->sock_fd, tmp, sizeof(tmp), MSG_DONTWAIT);
                        if (n < 0) {
                                if (errno == EINTR)
                                        continue;
                                if (errno == EAGAIN)
                                        break;
                                shell_hangup(sh, "client");
                                return 0;
                        }
                        if (n == 0) {
                                shell_hangup(sh, "client"); /* the caller closed the stream */
                                return 0;
                        }
                        sh->last_activity = now_usec(CLOCK_MONOTONIC);
                        if (sh->master_eof)
                                continue; /* nobody to type to */
                        if (buffer_append(&sh->to_pty, &sh->to_pty_len, tmp, n) < 0)
                                break;
                }
        } else if (revents & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
                shell_hangup(sh, "client");
                return 0;
        }
        relay_update(sh);
        return 0;
}

/* --- the end ------------------------------------------------------------------------------------- */

static char *shell_detail(Shell *sh, const char *error_name, const char *error_message) {
        json_object *o = json_object_new_object();
        char *s;

        if (!o)
                return NULL;
        json_object_object_add(o, "unit", json_object_new_string(sh->child.unit));
        json_object_object_add(o, "cols", json_object_new_int((int) sh->cols));
        json_object_object_add(o, "rows", json_object_new_int((int) sh->rows));
        json_object_object_add(o, "term", json_object_new_string(sh->term));
        json_object_object_add(o, "signal", json_object_new_int(sh->signal));
        if (sh->ended_by)
                json_object_object_add(o, "ended_by", json_object_new_string(sh->ended_by));
        json_object_object_add(o, "recording", json_object_new_string("asciicast-v2"));
        json_object_object_add(o, "recording_bytes", json_object_new_uint64(sh->rec.len));
        json_object_object_add(o, "recording_truncated", json_object_new_boolean(sh->rec.truncated));
        if (error_name) {
                json_object_object_add(o, "error", json_object_new_string(error_name));
                json_object_object_add(o, "message", json_object_new_string(strempty(error_message)));
        }
        s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
        return s;
}

static void shell_audit(Shell *sh, const char *event, const char *error_name, const char *error_message) {
        _cleanup_free_ char *detail = shell_detail(sh, error_name, error_message);
        AuditRow row = {
                .session_id = sh->sandbox_id,
                .operation = "takeover",
                .event = event,
                .detail = detail,
                .exit_code = error_name ? -1 : sh->exit_code,
                .out = sh->rec.buf,
                .out_size = sh->rec.len,
                .started_at = sh->call_started_at,
                .duration_usec = now_usec(CLOCK_MONOTONIC) - sh->call_mono,
        };
        manager_audit_finish(sh->manager, &sh->caller, &row, sh->audit_key);
}

static int reply_result(Shell *sh, sd_bus_message *request) {
        return sd_bus_reply_method_return(request, "ia{sv}", sh->exit_code, 4, "signal", "i", sh->signal,
                                          "duration_usec", "t", sh->duration_usec, "ended_by", "s",
                                          strempty(sh->ended_by), "recording_truncated", "b",
                                          (int) (sh->rec.truncated || sh->rec_truncated));
}

static int on_keep_expired(sd_event_source *es, uint64_t usec, void *userdata) {
        shell_free(userdata);
        return 0;
}

/* The session is over once the shell has exited and what it showed has reached the caller (or the
 * caller is gone): record it, close the stream, take down whatever the session left running. */
static void shell_maybe_end(Shell *sh) {
        if (sh->ended || !sh->child.exited)
                return;
        if (sh->sock_fd >= 0 && sh->to_client_len > 0)
                return; /* on_sock_event() comes back when it is written */

        sh->ended = true;
        sh->duration_usec = shell_elapsed(sh);
        asciicast_finish(&sh->rec, sh->duration_usec);
        shell_close_relay(sh);
        sh->kill_timer = sd_event_source_disable_unref(sh->kill_timer);
        sh->drain_timer = sd_event_source_disable_unref(sh->drain_timer);
        if (!sh->ended_by)
                sh->ended_by = "shell";
        /* Background processes of the session end with it, as on a logout. */
        (void) unit_stop_nowait(sh->manager, sh->child.unit);

        shell_audit(sh, "finished", NULL, NULL);
        log_sandbox(LOG_INFO, sh->sandbox_id,
                    "Shell %s of sandbox %s ended (%s, exit code %d) after %" PRIu64 " ms.", sh->child.unit,
                    sh->sandbox_id, sh->ended_by, sh->exit_code, sh->duration_usec / USEC_PER_MSEC);

        for (size_t i = 0; i < sh->n_waiters; i++) {
                (void) reply_result(sh, sh->waiters[i]);
                sh->waiters[i] = sd_bus_message_unref(sh->waiters[i]);
        }
        sh->n_waiters = 0;
        /* Kept a while for WaitShell; the recording is in the audit row already. */
        sh->rec_truncated = sh->rec.truncated;
        asciicast_done(&sh->rec);
        if (sd_event_add_time_relative(sh->manager->event, &sh->keep_timer, CLOCK_MONOTONIC,
                                       RESULT_KEEP_USEC, 0, on_keep_expired, sh) < 0)
                shell_free(sh);
}

static int on_kill_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        Shell *sh = userdata;
        if (!sh->child.exited)
                (void) kill(sh->child.pid, SIGKILL);
        return 0;
}

static int on_drain_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        shell_hangup(userdata, "shell");
        return 0;
}

/* The caller went away (or sandboxd ends the session): hang up the terminal and stop the scope. */
static void shell_hangup(Shell *sh, const char *by) {
        if (sh->hung_up)
                return;
        sh->hung_up = true;
        if (!sh->ended_by)
                sh->ended_by = by;
        /* What is still buffered for the caller goes nowhere; the recording has it already. */
        sh->sock_source = sd_event_source_disable_unref(sh->sock_source);
        sh->sock_fd = safe_close(sh->sock_fd);
        sh->to_client_len = 0;
        if (sh->child.exited) {
                shell_maybe_end(sh);
                return;
        }
        /* Closing the master hangs up the terminal: the kernel sends SIGHUP (and SIGCONT) to the
         * session. Systemd's stop sends SIGTERM and SIGHUP to all of the scope and SIGKILL after 1 s;
         * should the shell still live after 2 s, it gets SIGKILL from us. */
        sh->master_source = sd_event_source_disable_unref(sh->master_source);
        sh->master_fd = safe_close(sh->master_fd);
        (void) kill(sh->child.pid, SIGHUP);
        (void) unit_stop_nowait(sh->manager, sh->child.unit);
        (void) sd_event_add_time_relative(sh->manager->event, &sh->kill_timer, CLOCK_MONOTONIC,
                                          HANGUP_KILL_USEC, 0, on_kill_timer, sh);
}

/* --- setup ---------------------------------------------------------------------------------------- */

static void shell_reply_error(Shell *sh, const char *name, const char *what, int error) {
        char message[512];

        if (!sh->request)
                return;
        if (error > 0)
                snprintf(message, sizeof(message), "%s: %s", what, strerror(error));
        else
                snprintf(message, sizeof(message), "%s", what);
        shell_audit(sh, "failed", name, message);
        (void) sd_bus_reply_method_errorf(sh->request, name, "%s", message);
        sh->request = sd_bus_message_unref(sh->request);
}

static void shell_setup_failed(Shell *sh) {
        ScopeChildFailure f;
        char what[256];

        if (scope_child_read_failure(&sh->child, &f) > 0) {
                snprintf(what, sizeof(what), "Could not set up the shell (%s)", f.step ?: "setup");
                shell_reply_error(sh, SD_BUS_ERROR_FAILED, what, f.error);
        } else
                shell_reply_error(sh, SD_BUS_ERROR_FAILED, "The shell died during its setup", 0);
        shell_free(sh);
}

static void shell_child_exited(ScopeChild *c) {
        Shell *sh = c->userdata;

        if (c->status.si_code == CLD_EXITED)
                sh->exit_code = c->status.si_status;
        else {
                sh->signal = c->status.si_status;
                sh->exit_code = 128 + c->status.si_status;
        }
}

/* The shell exited; had it died during its setup, its scope is gone too. */
static void shell_child_done(ScopeChild *c) {
        Shell *sh = c->userdata;

        if (!c->started) {
                shell_setup_failed(sh);
                return;
        }

        /* The last of what it showed is in the master now. */
        if (sh->master_fd >= 0 && !sh->master_eof)
                (void) master_read_some(sh);
        sh->master_source = sd_event_source_disable_unref(sh->master_source);
        sh->master_fd = safe_close(sh->master_fd);
        sh->master_eof = true;
        if (sh->sock_fd >= 0 && client_write_some(sh) < 0) {
                shell_hangup(sh, "client");
                return;
        }
        relay_update(sh);
        if (sh->to_client_len > 0)
                (void) sd_event_add_time_relative(sh->manager->event, &sh->drain_timer, CLOCK_MONOTONIC,
                                                  DRAIN_USEC, 0, on_drain_timer, sh);
        shell_maybe_end(sh);
}

/* ShellIdleSec=: no byte either way for that long hangs the shell up (ended_by "idle"). The timer is
 * not moved per byte: when it fires early it sleeps again until the last byte's deadline. */
static int on_idle_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        Shell *sh = userdata;
        uint64_t now = now_usec(CLOCK_MONOTONIC), deadline = sh->last_activity + sh->idle_usec;

        if (sh->hung_up || sh->child.exited)
                return 0;
        if (now < deadline) {
                (void) sd_event_source_set_time(es, deadline);
                (void) sd_event_source_set_enabled(es, SD_EVENT_ONESHOT);
                return 0;
        }
        log_sandbox(LOG_INFO, sh->sandbox_id, "Shell %s of sandbox %s idle for %" PRIu64 " s: hanging up.",
                    sh->child.unit, sh->sandbox_id, sh->idle_usec / USEC_PER_SEC);
        shell_hangup(sh, "idle");
        return 0;
}

static int shell_start_relay(Shell *sh) {
        Manager *m = sh->manager;
        int r;

        sh->last_activity = now_usec(CLOCK_MONOTONIC);
        if (sh->idle_usec > 0) {
                r = sd_event_add_time(m->event, &sh->idle_timer, CLOCK_MONOTONIC,
                                      sh->last_activity + sh->idle_usec, 0, on_idle_timer, sh);
                if (r < 0)
                        return r;
        }

        (void) fcntl(sh->master_fd, F_SETFL, O_NONBLOCK);
        (void) fcntl(sh->sock_fd, F_SETFL, O_NONBLOCK);
        r = sd_event_add_io(m->event, &sh->master_source, sh->master_fd, EPOLLIN, on_master_event, sh);
        if (r < 0)
                return r;
        r = sd_event_add_io(m->event, &sh->sock_source, sh->sock_fd, EPOLLIN | EPOLLRDHUP, on_sock_event,
                            sh);
        if (r < 0)
                return r;
        relay_update(sh);
        return 0;
}

/* The shell may run once it is confined and its scope is up, whichever comes last
 * (scope_child_may_go()). */
static void shell_child_go(ScopeChild *c) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Shell *sh = c->userdata;
        int r;

        sh->start_mono = now_usec(CLOCK_MONOTONIC);
        /* OutputMax= too small for even a header (0: capture nothing) means no recording. */
        r = 0;
        if (sh->manager->config.output_max >= ASCIICAST_MIN_MAX)
                r = asciicast_start(&sh->rec, sh->manager->config.output_max, sh->cols, sh->rows,
                                    now_usec(CLOCK_REALTIME) / USEC_PER_SEC, sh->term, SHELL_PATH, sh->child.unit);
        if (r >= 0)
                r = shell_start_relay(sh);
        if (r >= 0)
                r = sd_bus_message_new_method_return(sh->request, &reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "hs", sh->peer_fd, sh->child.unit);
        if (r < 0) {
                (void) kill(c->pid, SIGKILL);
                shell_reply_error(sh, SD_BUS_ERROR_FAILED, "Could not start relaying the shell", -r);
                return; /* the child's exit stops the scope and frees us */
        }

        /* Noted before the shell runs: a session cut off by sandboxd's death gets its row ("interrupted")
         * at the next start, if not its recording. */
        _cleanup_free_ char *detail = shell_detail(sh, NULL, NULL);
        manager_audit_begin(sh->manager, &sh->caller,
                            &(AuditRow) { .session_id = sh->sandbox_id, .operation = "takeover", .detail = detail,
                                          .started_at = sh->call_started_at },
                            sh->audit_key);
        r = scope_child_go(c);
        if (r < 0) {
                (void) kill(c->pid, SIGKILL);
                shell_reply_error(sh, SD_BUS_ERROR_FAILED, "Could not start the shell", -r);
                c->started = false;
                return;
        }
        /* The message holds its own copy of the caller's end; ours must go, or the caller's close
         * would never reach us as EOF. */
        (void) sd_bus_send(NULL, reply, NULL);
        sh->peer_fd = safe_close(sh->peer_fd);
        sh->request = sd_bus_message_unref(sh->request);
        log_sandbox(LOG_INFO, sh->sandbox_id, "Shell %s of sandbox %s opened for %s (%ux%u).", sh->child.unit,
                    sh->sandbox_id, sh->caller.account_id, sh->cols, sh->rows);
}

static void shell_child_scope_failed(ScopeChild *c, int error, const sd_bus_error *bus_error) {
        shell_reply_error(c->userdata, SD_BUS_ERROR_FAILED, "Could not start the shell's scope", error);
}

/* Its "ready" brings the PTY master. */
static bool shell_child_ready(ScopeChild *c, bool ok, int fd) {
        Shell *sh = c->userdata;

        if (fd >= 0) {
                safe_close(sh->master_fd);
                sh->master_fd = fd;
        }
        return ok && sh->master_fd >= 0;
}

static const ScopeChildOps shell_child_ops = {
        .ready = shell_child_ready,
        .go = shell_child_go,
        .scope_failed = shell_child_scope_failed,
        .exited = shell_child_exited,
        .done = shell_child_done,
};

static char **shell_env(const char *term) {
        char **env = calloc(9, sizeof(char *));
        if (!env)
                return NULL;
        const char *fixed[] = {
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME=" SANDBOXD_SANDBOX_HOME,
                "USER=" SANDBOXD_SANDBOX_USER,
                "LOGNAME=" SANDBOXD_SANDBOX_USER,
                "SHELL=" SHELL_PATH,
                "LANG=C.UTF-8",
        };
        size_t n = 0;
        for (; n < ELEMENTSOF(fixed); n++)
                if (!(env[n] = strdup(fixed[n])))
                        goto fail;
        if (asprintf(&env[n], "TERM=%s", term) < 0) {
                env[n] = NULL;
                goto fail;
        }
        return env;
fail:
        strv_free(env);
        return NULL;
}

int shell_open(Sandbox *s, const ShellSpec *spec, sd_bus_message *request) {
        Manager *m = s->manager;
        _cleanup_close_pair_ int stream[2] = { -EBADF, -EBADF }, go[2] = { -EBADF, -EBADF },
                                 fail[2] = { -EBADF, -EBADF };
        _cleanup_strv_free_ char **env = NULL;
        const char *term = spec->term ?: TERM_DEFAULT;
        Shell *sh;
        int r;

        if (!shell_size_is_valid(spec->cols, spec->rows) || !shell_term_is_valid(term))
                return -EINVAL;
        const SandboxType *t = sandboxd_config_find_type(&m->config, s->type);
        if (!t)
                return -EINVAL;
        if (!m->shells && !(m->shells = hashmap_new()))
                return -ENOMEM;
        unsigned n_open = 0;
        HASHMAP_FOREACH(sh, m->shells, i)
        if (!sh->ended && streq(sh->sandbox_id, s->id))
                n_open++;
        if (n_open >= SHELL_MAX_PER_SANDBOX)
                return -EUSERS;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, stream) < 0 ||
            socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) < 0 || pipe2(fail, O_CLOEXEC) < 0)
                return -errno;
        env = shell_env(term);
        if (!env)
                return -ENOMEM;

        sh = calloc(1, sizeof(Shell));
        if (!sh)
                return -ENOMEM;
        sh->manager = m;
        scope_child_setup(&sh->child, m, &shell_child_ops, sh);
        sh->master_fd = sh->sock_fd = sh->peer_fd = -EBADF;
        sh->rec = (Asciicast) ASCIICAST_INIT;
        sh->cols = spec->cols;
        sh->rows = spec->rows;
        sh->opener = spec->opener;
        snprintf(sh->term, sizeof(sh->term), "%s", term);
        snprintf(sh->sandbox_id, sizeof(sh->sandbox_id), "%s", s->id);
        sh->tasks_max = t->tasks_max;
        sh->memory_max = t->memory_max;
        sh->idle_usec = t->shell_idle_usec;
        sh->call_mono = now_usec(CLOCK_MONOTONIC);
        sh->call_started_at = spec->started_at ?: now_usec(CLOCK_REALTIME);
        if (spec->caller)
                sh->caller = *spec->caller;
        else
                caller_system(&sh->caller);
        sh->slice = strdup(s->slice);
        if (!sh->slice) {
                free(sh);
                return -ENOMEM;
        }
        snprintf(sh->child.unit, sizeof(sh->child.unit), "sandbox-%s-shell-%" PRIu64 ".scope", s->id,
                 sandbox_next_unit_number(s));

        ShellChildArgs a = {
                .init_pidfd = s->init_pidfd,
                .ns_flags =
                        CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS |
                                (s->network != SANDBOX_NETWORK_HOST ? CLONE_NEWNET : 0),
                .go_fd = go[0],
                .err_fd = fail[1],
                .uid = s->uid,
                .cols = spec->cols,
                .rows = spec->rows,
                .envp = env,
        };

        /* Born in the sandbox's PID namespace; we ourselves stay where we are. */
        pid_t pid = scope_child_spawn(&(ScopeChildSpawn) {
                .pidns_fd = s->init_pidfd,
                .host_pidns_fd = m->host_pidns_fd,
                .cgroup2_fd = -EBADF,
                .child = shell_child_run,
                .arg = &a,
        });
        if (pid < 0) {
                r = -errno;
                shell_free(sh);
                return r;
        }
        sh->sock_fd = TAKE_FD(stream[0]);
        sh->peer_fd = TAKE_FD(stream[1]);

        r = scope_child_attach(&sh->child, pid, TAKE_FD(go[1]), TAKE_FD(fail[0]));
        if (r < 0)
                goto fail_kill;
        r = hashmap_put(m->shells, sh->child.unit, sh);
        if (r < 0)
                goto fail_kill;
        /* systemd sets up the scope while the child confines itself. */
        char desc[SCOPE_DESCRIPTION_MAX];
        ScopeProps props = scope_props_sandbox(desc, sh->sandbox_id, "shell", sh->slice, pid, sh->tasks_max,
                                               sh->memory_max, UINT64_MAX);
        r = scope_child_start_scope(&sh->child, &props, NULL, NULL);
        if (r < 0)
                goto fail_kill;
        sh->request = sd_bus_message_ref(request);
        return 0;

fail_kill:
        /* Nothing of the shell ran yet; it dies and the caller gets the error now. */
        (void) kill(pid, SIGKILL);
        if (!sh->child.child_source)
                (void) waitpid(pid, NULL, 0);
        shell_free(sh);
        return r;
}

static Shell *shell_find(Manager *m, const char *unit, uid_t caller) {
        Shell *sh = m->shells ? hashmap_get(m->shells, unit) : NULL;
        if (!sh || (caller != 0 && caller != sh->opener))
                return NULL;
        return sh;
}

int shell_resize(Manager *m, const char *unit, uid_t caller, unsigned cols, unsigned rows) {
        Shell *sh = shell_find(m, unit, caller);

        if (!sh)
                return -ENOENT;
        if (!shell_size_is_valid(cols, rows))
                return -EINVAL;
        if (sh->ended || sh->child.exited || sh->hung_up)
                return -ESRCH;
        sh->cols = cols;
        sh->rows = rows;
        if (sh->master_fd >= 0) {
                struct winsize ws = {.ws_row = rows, .ws_col = cols};
                /* The kernel sends SIGWINCH to the terminal's foreground process group. */
                if (ioctl(sh->master_fd, TIOCSWINSZ, &ws) < 0)
                        return -errno;
        }
        if (sh->child.started)
                asciicast_resize(&sh->rec, shell_elapsed(sh), cols, rows);
        return 0;
}

int shell_wait(Manager *m, const char *unit, uid_t caller, sd_bus_message *request) {
        Shell *sh = shell_find(m, unit, caller);

        if (!sh)
                return -ENOENT;
        if (sh->ended)
                return reply_result(sh, request);
        sd_bus_message **nw = realloc(sh->waiters, (sh->n_waiters + 1) * sizeof(sd_bus_message *));
        if (!nw)
                return -ENOMEM;
        sh->waiters = nw;
        sh->waiters[sh->n_waiters++] = sd_bus_message_ref(request);
        return 1;
}
