/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A background process of a sandbox (StartProcess): a confined child in a transient scope of its own, as
 * an Exec's, that lives on after the call is answered; its output kept in a ring per stream, its stdin a
 * pipe sandboxd writes to, its end recorded and told to whoever waits. */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "audit-row.h"
#include "caller.h"
#include "macro.h"
#include "oom.h"
#include "process-output.h"
#include "scope-child.h"

typedef struct Sandbox Sandbox;
typedef struct Manager Manager;

/* Processes a sandbox runs or starts at once; ended ones (whose output is still readable) are kept up to
 * this many in all, the oldest going when a new one runs. The type's TasksMax= bounds their tasks besides. */
#define PROCESS_MAX_PER_SANDBOX 128
/* Bytes written to a process's stdin that it has not read yet, at most. */
#define PROCESS_STDIN_PENDING_MAX (1024 * 1024)
/* "p" + a unit number. */
#define PROCESS_ID_MAX 24

typedef enum ProcessState {
        PROCESS_STARTING,   /* not on the bus yet: StartProcess has not been answered */
        PROCESS_RUNNING,
        PROCESS_EXITED,     /* its main process exited (exit_code is its status) */
        PROCESS_KILLED,     /* a signal ended it (exit_code 128 + the signal), the OOM killer's too */
        PROCESS_TIMED_OUT,  /* its runtime limit ended it */
        _PROCESS_STATE_MAX,
        _PROCESS_STATE_INVALID = -EINVAL,
} ProcessState;

DECLARE_STRING_TABLE(process_state, ProcessState);

typedef enum ProcessStream {
        PROCESS_STDOUT,
        PROCESS_STDERR,
        _PROCESS_STREAM_MAX,
        _PROCESS_STREAM_INVALID = -EINVAL,
} ProcessStream;

DECLARE_STRING_TABLE(process_stream, ProcessStream);

typedef struct Process Process;
typedef struct ProcessAttach ProcessAttach;

/* Callers' fds that a stream is copied to (AttachProcessOutput), at most this many per process. */
#define PROCESS_ATTACH_MAX 8

typedef struct ProcessOutput {
        Process *process;
        OutputRing ring;
        int fd;
        sd_event_source *source;
        ProcessAttach *attaches;  /* fds it is copied to as it comes */
} ProcessOutput;

struct Process {
        Manager *manager;
        Sandbox *sandbox;      /* NULL once the sandbox is gone (its child is still reaped) */
        Process *next;         /* in the sandbox's list, newest first */
        char id[PROCESS_ID_MAX];
        char session_id[32];   /* the sandbox's id, for its rows after the sandbox went */
        ProcessState state;
        ScopeChild child;      /* its unit, pid, go channel, failure pipe and scope job */
        char **argv;
        char *cwd;
        uint64_t timeout_usec, memory_max, tasks_max;
        pid_t ns_pid;          /* its pid in the sandbox's PID namespace (0 until it runs) */
        uint64_t started_at;   /* µs since the epoch, when it exec'd */
        uint64_t start_mono, end_mono;
        int exit_code, signal;
        bool timed_out;
        bool oom_killed;       /* the kernel's OOM killer ended it (oom.c, as for an Exec) */
        OomWatch oom;
        sd_event_source *oom_source;
        ProcessOutput out, err;
        int stdin_fd;          /* our end of its stdin pipe, or -1 once closed */
        sd_event_source *stdin_source;
        char *stdin_pending;
        size_t stdin_pending_len;
        bool stdin_close;      /* close stdin once what is pending is written */
        int stdin_src_fd;      /* a caller's pipe or socket whose bytes go to stdin (AttachProcessStdin), or -1 */
        sd_event_source *stdin_src_source;
        sd_event_source *deadline_source;
        sd_bus_message *request;   /* StartProcess, until answered */
        sd_bus_message **waiters;  /* WaitProcess calls */
        size_t n_waiters;
        ScopeChildFailure failure; /* what the child reported, if it gave up */
        int scope_error;           /* systemd could not make its scope: the errno */
        /* for the audit rows */
        Caller caller;
        uint64_t call_started_at, call_mono;
        char audit_key[AUDIT_KEY_SIZE]; /* the note of its exit row while it runs, or "" */
};

typedef struct ProcessSpec {
        char **argv;
        char **env;              /* extra KEY=VALUE, validated */
        const char *cwd;         /* NULL: the home */
        uint64_t timeout_usec;
        uint64_t memory_max;
        uint64_t tasks_max;
        const Caller *caller;
        uint64_t started_at;     /* when the call came in, µs since the epoch */
        uint64_t call_mono;
} ProcessSpec;

/* Starts a process; request is answered (s process, o path) once it has exec'd, or with the error if it
 * could not. -EUSERS: PROCESS_MAX_PER_SANDBOX are running. */
int process_start(Sandbox *s, const ProcessSpec *spec, sd_bus_message *request);

/* A process of s that is on the bus (StartProcess answered), by id; NULL if none. */
Process *process_find(Sandbox *s, const char *id);

/* Sends sig to its main process. -ESRCH: it is not running. */
int process_signal(Process *p, int sig);

/* Answers request (i exit_code, a{sv} info) when it has ended, or now if it has. */
int process_wait(Process *p, sd_bus_message *request);

/* Queues data for its stdin, then closes it if close. -ESRCH: not running; -EPIPE: its stdin is closed
 * (by an earlier close, or the process closed its end); -E2BIG: more than PROCESS_STDIN_PENDING_MAX
 * would be pending (nothing is queued then). */
int process_write_stdin(Process *p, const void *data, size_t size, bool close);

/* Copies stream from offset (or from what the ring still holds, if that is later: *ret_start says) to fd, a
 * pipe or socket of the caller's (dup'd), then what comes, until the stream ends (fd then gets EOF) or the
 * reader goes. -ERANGE: offset is past the end; -ENOTSOCK: fd is no pipe or socket; -EUSERS: too many. */
int process_attach_output(Process *p, ProcessStream stream, uint64_t offset, int fd, uint64_t *ret_start);

/* Feeds what the caller writes into fd (a pipe or socket, dup'd) to the process's stdin, and closes its
 * stdin at fd's EOF. -ESRCH: not running; -EPIPE: its stdin is closed; -ENOTSOCK: fd is no pipe or
 * socket; -EBUSY: one is attached already. */
int process_attach_stdin(Process *p, int fd);

/* Appends the info a{sv} of WaitProcess (Exec's keys, and state). */
int process_append_info(sd_bus_message *m, Process *p);

char *process_bus_path(const Process *p);

/* The sandbox is going away (its slice is stopped, which ends every process): the running processes
 * forget it and end on their own; the ended ones are freed. */
void process_detach_all(Sandbox *s);

/* Issue 26: as exec_hold_deadlines(), for the sandbox's running background processes. */
void process_hold_deadlines(Sandbox *s, bool hold, uint64_t paused_usec);
/* Background processes of s still running. */
unsigned process_count_running(Sandbox *s);

/* --- sandbox-process-dbus.c --------------------------------------------------------------------- */

int process_bus_register(Manager *m);
void process_emit_changed(Process *p);
