# SPDX-License-Identifier: LGPL-2.1-or-later
# Fixtures for the integration suite: it runs inside the throwaway systemd (tests/harness), as root,
# against the installed fleet, through the system bus like any user of sandboxd.
import os
import subprocess
import time

import dbus
import pytest

import kernel

BUS_NAME = "org.sandboxd.sandbox1"
MANAGER_PATH = "/org/sandboxd/sandbox1"
MANAGER_IFACE = "org.sandboxd.sandbox1.Manager"
SANDBOX_IFACE = "org.sandboxd.sandbox1.Sandbox"
LONG = 120  # seconds: D-Bus call timeout for long Execs


def pytest_configure(config):
    if not os.environ.get("HARNESS_INSTANCE"):
        raise pytest.UsageError("the integration suite runs inside the harness: "
                                "tests/harness/sandbox-harness run --build BUILD -- python3 -m pytest tests/integration")


def pytest_report_header(config):
    """The kernel probe's findings head the log, so a reader knows what was and was not exercised."""
    return ["kernel: " + kernel.describe(f) for f in kernel.features().values()]


def run(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, **kw)


def systemctl_show(unit, *props):
    out = run("systemctl", "show", unit, "-p", ",".join(props)).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def wait_for(pred, timeout=30.0, interval=0.05, what="condition"):
    """Polls pred() until it is true; the deadline only bounds a hang, it is not a measurement."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def call_into_pipe(mgr, method, sid, path, **options):
    """Sends method(sid, path, {fd: a new pipe's write end, **options}) (ReadFile, View) without waiting
    for its reply (sandboxd handles one connection's calls in order, so it has taken this one before any
    later call of mgr's) and returns the pipe's read end. The file helper doing it stays busy until the
    pipe is read; every copy of the write end here is closed, so reading sees EOF once it is done."""
    r, w = os.pipe()
    msg = dbus.lowlevel.MethodCallMessage(BUS_NAME, MANAGER_PATH, MANAGER_IFACE, method)
    ufd = dbus.types.UnixFd(w)
    msg.append(sid, path, dbus.Dictionary({"fd": ufd, **options}, signature="sv"), signature="ssa{sv}")
    mgr.bus.send_message(msg)
    del msg
    os.close(ufd.take())
    os.close(w)
    return r


def read_to_end(fd):
    data = b""
    while chunk := os.read(fd, 1 << 16):
        data += chunk
    return data


AUDIT = ("org.sandboxd.audit1", "/org/sandboxd/audit1", "org.sandboxd.audit1.Log")
SPOOL = "/var/lib/sandboxd/audit-spool.db"


def sandbox_path(sid, path):
    """Where the host reaches path as sandbox sid sees it: through its init's /proc/<pid>/root, since
    its home, /tmp and /var/tmp are on its disk image, mounted only in its mount namespace."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read().split(b"\0")[:2] == [b"sandbox-init", sid.encode()]:
                    return f"/proc/{pid}/root{path}"
        except OSError:
            pass  # gone meanwhile
    raise AssertionError(f"no sandbox-init of {sid}")


def audit(bus=None):
    """The audit log's interface, on the shared system bus unless given a connection."""
    bus = bus or dbus.SystemBus()
    return dbus.Interface(bus.get_object(AUDIT[0], AUDIT[1], introspect=False), AUDIT[2])


def audit_log(session=None, limit=1000, bus=None, **flt):
    """GetLog's rows, newest first, as dicts; integer filters go as t, the others as s."""
    f = {k: (dbus.UInt64(v) if isinstance(v, int) else dbus.String(v)) for k, v in flt.items()}
    if session:
        f["session_id"] = dbus.String(session)
    rows = audit(bus).GetLog(dbus.Dictionary(f, signature="sv"), dbus.UInt64(limit), dbus.UInt64(0), timeout=LONG)
    return [{str(k): v for k, v in r.items()} for r in rows]


def spooled():
    """Rows in sandboxd's audit spool, not yet acknowledged by the logger (-1: unreadable)."""
    r = run("sqlite3", SPOOL, "SELECT count(*) FROM spool", check=False)
    return int(r.stdout.strip() or -1)


class Manager:
    def __init__(self):
        self.bus = dbus.SystemBus()

    @property
    def iface(self):
        # A fresh proxy each time: a proxy binds to the unique name it resolved, and sandboxd gets a
        # new one whenever a test restarts it.
        return dbus.Interface(self.bus.get_object(BUS_NAME, MANAGER_PATH, introspect=False), MANAGER_IFACE)

    def create(self, **opts):
        o = {}
        for k, v in opts.items():
            o[k] = dbus.UInt64(v) if k == "ttl_seconds" else dbus.String(v)
        return self.iface.CreateSandbox(dbus.Dictionary(o, signature="sv"), timeout=LONG)

    def delete(self, sid):
        self.iface.DeleteSandbox(sid, dbus.Dictionary({}, signature="sv"), timeout=LONG)

    def list(self):
        return [tuple(str(x) for x in row) for row in self.iface.ListSandboxes()]

    def exec(self, sid, argv, timeout=LONG, **opts):
        o = {}
        for k, v in opts.items():
            if k in ("timeout_seconds", "memory_max", "tasks_max"):
                o[k] = dbus.UInt64(v)
            elif k == "stdin":
                o[k] = dbus.ByteArray(v)
            elif k == "env":
                o[k] = dbus.Dictionary(v, signature="ss")
            elif k in ("stdout_fd", "stderr_fd", "cancel_fd"):
                o[k] = dbus.types.UnixFd(v)
            else:
                o[k] = v
        code, out, err, info = self.iface.Exec(sid, dbus.Array(argv, signature="s"),
                                               dbus.Dictionary(o, signature="sv"), timeout=timeout,
                                               byte_arrays=True)
        return int(code), bytes(out), bytes(err), {str(k): v for k, v in info.items()}

    def sh(self, sid, script, **opts):
        return self.exec(sid, ["sh", "-c", script], **opts)

    def write(self, sid, path, data, **opts):
        o = {k: (dbus.UInt32(v) if k == "mode" else dbus.Boolean(v)) for k, v in opts.items()}
        self.iface.WriteFile(sid, path, dbus.ByteArray(data), dbus.Dictionary(o, signature="sv"), timeout=LONG)

    def read(self, sid, path, **opts):
        o = {k: dbus.UInt64(v) for k, v in opts.items()}
        data, info = self.iface.ReadFile(sid, path, dbus.Dictionary(o, signature="sv"), timeout=LONG,
                                         byte_arrays=True)
        return bytes(data), {str(k): v for k, v in info.items()}

    def props(self, path):
        o = self.bus.get_object(BUS_NAME, path)
        return {str(k): v for k, v in o.GetAll(SANDBOX_IFACE, dbus_interface=dbus.PROPERTIES_IFACE).items()}


# Where the kernel cannot give sandboxes disks (no loop devices or no ext4), the built-in types keep plain
# directories for the run (DiskMax=infinity) and test_sandbox_disk.py is skipped with the probe's reason.
NO_DISK_DROPIN = "/etc/sandboxd/sandboxd.conf.d/00-test-no-disk.conf"


def disks_as_the_kernel_allows():
    """Before sandboxd starts: the no-disk drop-in where the kernel cannot give sandboxes disks."""
    if not kernel.disk_images_possible():
        os.makedirs(os.path.dirname(NO_DISK_DROPIN), exist_ok=True)
        with open(NO_DISK_DROPIN, "w") as f:
            f.write("".join(f"[Type:{t}]\nDiskMax=infinity\n\n" for t in ("small", "medium", "large")))


# Network "host" is refused unless sandboxd.conf says AllowHostNetwork=yes (shipped: no). The suite's
# tests of what a host-network sandbox can and cannot do need it; test_egress.py removes it for a moment
# to check the shipped default.
HOST_NETWORK_DROPIN = "/etc/sandboxd/sandboxd.conf.d/00-test-host-network.conf"


def allow_host_network():
    os.makedirs(os.path.dirname(HOST_NETWORK_DROPIN), exist_ok=True)
    with open(HOST_NETWORK_DROPIN, "w") as f:
        f.write("[Network]\nAllowHostNetwork=yes\n")


def assert_config_refused(unit, dropin, text, message, restore=None):
    """With the drop-in dropin holding text, unit does not start and says message in its journal. Afterwards
    dropin holds restore (None: it is removed) and unit runs again."""
    os.makedirs(os.path.dirname(dropin), exist_ok=True)
    with open(dropin, "w") as f:
        f.write(text)
    try:
        run("systemctl", "reset-failed", unit, check=False)
        assert run("systemctl", "restart", unit, check=False).returncode != 0
        log = run("journalctl", "-b", "-u", unit, "-n", "30", "--no-pager").stdout
        assert message in log, log
    finally:
        if restore is None:
            os.unlink(dropin)
        else:
            with open(dropin, "w") as f:
                f.write(restore)
        run("systemctl", "reset-failed", unit, check=False)
        run("systemctl", "restart", unit)


def delete_all_sandboxes(m):
    """Deletes every sandbox m lists; one already gone is no error."""
    for row in m.list():
        try:
            m.delete(row[0])
        except dbus.DBusException:
            pass


@pytest.fixture(scope="session", autouse=True)
def sandboxd_running():
    disks_as_the_kernel_allows()
    allow_host_network()
    run("systemctl", "start", "sandboxd.service")
    yield
    # Whatever a test left behind must not outlive the suite.
    delete_all_sandboxes(Manager())


@pytest.fixture
def mgr():
    return Manager()


@pytest.fixture
def sandbox(mgr):
    """A fresh small sandbox, deleted afterwards: (id, path)."""
    made = []

    def make(**opts):
        opts.setdefault("type", "small")
        sid, path = mgr.create(**opts)
        made.append(str(sid))
        return str(sid), str(path)

    yield make
    for sid in made:
        try:
            mgr.delete(sid)
        except dbus.DBusException as e:
            assert e.get_dbus_name() == "org.sandboxd.sandbox1.NoSuchSandbox"


def dbus_error(excinfo):
    return excinfo.value.get_dbus_name(), excinfo.value.get_dbus_message()
