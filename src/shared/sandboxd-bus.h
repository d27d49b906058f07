/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The bus contract in C: every bus name, object path, interface and error name of our three services. */
#pragma once

/* This header owns the names (docs/dbus-api.md and dbus/org.sandboxd.*.xml are their reference): the
 * daemons, sandboxctl, the gateway (its HTTP mapping too), bench/ and the fuzz targets take them from here.
 * The Python tests and the docs keep the literal strings: they are the users' view of the contract. */

#include <systemd/sd-bus.h>

/* --- sandboxd: org.sandboxd.sandbox1 (dbus/org.sandboxd.sandbox1.xml) ---------------------------- */
#define SANDBOXD_BUS_NAME "org.sandboxd.sandbox1"
#define SANDBOXD_BUS_PATH "/org/sandboxd/sandbox1"
#define SANDBOXD_MANAGER_INTERFACE "org.sandboxd.sandbox1.Manager"
#define SANDBOXD_SANDBOX_INTERFACE "org.sandboxd.sandbox1.Sandbox"
/* A background process's object (StartProcess): its sandbox's path + "/process/" + its id. */
#define SANDBOXD_PROCESS_INTERFACE "org.sandboxd.sandbox1.Process"
/* A sandbox's object: this prefix + "/" + sd_bus_path_encode(id); clients take paths from the replies. */
#define SANDBOXD_SANDBOX_PATH_PREFIX "/org/sandboxd/sandbox1/sandbox"

#define SANDBOXD_ERROR_NO_SUCH_SANDBOX "org.sandboxd.sandbox1.NoSuchSandbox"
#define SANDBOXD_ERROR_LIMIT_EXCEEDED "org.sandboxd.sandbox1.LimitExceeded"
#define SANDBOXD_ERROR_NOT_RUNNING "org.sandboxd.sandbox1.NotRunning"
#define SANDBOXD_ERROR_NAME_EXISTS "org.sandboxd.sandbox1.NameExists"
#define SANDBOXD_ERROR_NO_SUCH_FILE "org.sandboxd.sandbox1.NoSuchFile"
#define SANDBOXD_ERROR_FILE_EXISTS "org.sandboxd.sandbox1.FileExists"
/* The sandbox's user may not do that to that file (not AccessDenied: that one says the caller may not
 * call). */
#define SANDBOXD_ERROR_PERMISSION_DENIED "org.sandboxd.sandbox1.PermissionDenied"
/* The file tools' (sandbox-tools.c) */
#define SANDBOXD_ERROR_NO_MATCH "org.sandboxd.sandbox1.NoMatch"
#define SANDBOXD_ERROR_AMBIGUOUS_MATCH "org.sandboxd.sandbox1.AmbiguousMatch"
#define SANDBOXD_ERROR_BINARY_FILE "org.sandboxd.sandbox1.BinaryFile"
/* SetNetworkPolicy on a sandbox whose network is not egress (none or host has no policy to change).
 * Not in the errno map. */
#define SANDBOXD_ERROR_NOT_EGRESS "org.sandboxd.sandbox1.NotEgress"
/* ResizeShell and WaitShell: no such shell of the caller's. Not in the errno map. */
#define SANDBOXD_ERROR_NO_SUCH_SHELL "org.sandboxd.sandbox1.NoSuchShell"
/* SignalProcess, WaitProcess, ReadProcessOutput, WriteProcessStdin: the sandbox has no such process (ended
 * ones stay until their sandbox goes, or make room for new ones). Not in the errno map, as NoSuchShell. */
#define SANDBOXD_ERROR_NO_SUCH_PROCESS "org.sandboxd.sandbox1.NoSuchProcess"
/* Issue 26: Exec, the file calls, OpenShell and StartProcess on a paused sandbox (unless its type has
 * AutoResume=yes). Not in the errno map. */
#define SANDBOXD_ERROR_SANDBOX_PAUSED "org.sandboxd.sandbox1.SandboxPaused"
/* Issue 26: RemoveSnapshot, CreateSandbox's snapshot: no snapshot with that id or name. Not in the errno map. */
#define SANDBOXD_ERROR_NO_SUCH_SNAPSHOT "org.sandboxd.sandbox1.NoSuchSnapshot"
/* Issue 26: SnapshotSandbox of a sandbox without a disk image (its type has DiskMax=infinity). Not in the
 * errno map. */
#define SANDBOXD_ERROR_NO_DISK "org.sandboxd.sandbox1.NoDisk"
/* Never a reply: the "error" in the detail of an audit row whose operation sandboxd's death cut off
 * (audit-spool.c). Not in the errno map. */
#define SANDBOXD_ERROR_INTERRUPTED "org.sandboxd.sandbox1.Interrupted"

/* --- sandbox-auditd: org.sandboxd.audit1 (dbus/org.sandboxd.audit1.xml) -------------------------- */
#define AUDITD_BUS_NAME "org.sandboxd.audit1"
#define AUDITD_BUS_PATH "/org/sandboxd/audit1"
#define AUDITD_LOG_INTERFACE "org.sandboxd.audit1.Log"

#define AUDITD_ERROR_NO_SUCH_ENTRY "org.sandboxd.audit1.NoSuchEntry"
#define AUDITD_ERROR_STORAGE_FULL "org.sandboxd.audit1.StorageFull"

/* --- sandbox-gatewayd: org.sandboxd.gateway1 (dbus/org.sandboxd.gateway1.xml) ------------------- */
#define GATEWAY_BUS_NAME "org.sandboxd.gateway1"
#define GATEWAY_BUS_PATH "/org/sandboxd/gateway1"
#define GATEWAY_KEYS_INTERFACE "org.sandboxd.gateway1.Keys"

#define GATEWAY_ERROR_NO_SUCH_KEY "org.sandboxd.gateway1.NoSuchKey"
#define GATEWAY_ERROR_KEY_STORE_UNAVAILABLE "org.sandboxd.gateway1.KeyStoreUnavailable"

/* Each service's error names ↔ errnos, for sd_bus_error_add_map() in that service (a map only turns a
 * name into an errno: sd-bus never picks one of our names for an errno). Two names may share an errno
 * (NameExists and FileExists are both EEXIST). */
extern const sd_bus_error_map sandboxd_bus_errors[];
extern const sd_bus_error_map auditd_bus_errors[];
extern const sd_bus_error_map gateway_bus_errors[];
