# SPDX-License-Identifier: LGPL-2.1-or-later
# Human takeover: OpenShell/ResizeShell/WaitShell over the bus, the shell's confinement and scope, its
# hang-up, its audit row and recording, and `sandboxctl shell` driven through a real pty.
import json
import os
import pty
import re
import select
import signal
import socket
import subprocess
import termios
import time

import dbus
import pytest

from conftest import LONG, audit, dbus_error, run, systemctl_show, wait_for

SANDBOXCTL = "sandboxctl"


class Shell:
    """One OpenShell session: the stream as a socket, and what came out of it so far."""

    def __init__(self, mgr, sid, **opts):
        o = {}
        for k, v in opts.items():
            o[k] = dbus.UInt32(v) if k in ("cols", "rows") else dbus.String(v)
        fd, unit = mgr.iface.OpenShell(sid, dbus.Dictionary(o, signature="sv"), timeout=LONG)
        self.mgr = mgr
        self.unit = str(unit)
        self.sock = socket.socket(fileno=fd.take())
        self.out = b""
        self.eof = False

    def send(self, data):
        self.sock.sendall(data.encode() if isinstance(data, str) else data)

    def read_until(self, pattern, timeout=60):
        """Reads until pattern (a regex on bytes) matches the output so far; the deadline bounds a hang."""
        rx = re.compile(pattern if isinstance(pattern, bytes) else pattern.encode())
        end = time.monotonic() + timeout
        while not rx.search(self.out):
            if self.eof:
                raise AssertionError(f"stream ended without {pattern!r}: {self.out[-2000:]!r}")
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {pattern!r} in {self.out[-2000:]!r}")
            r, _, _ = select.select([self.sock], [], [], left)
            if r:
                chunk = self.sock.recv(65536)
                if not chunk:
                    self.eof = True
                self.out += chunk
        return rx.search(self.out)

    def read_to_eof(self, timeout=60):
        end = time.monotonic() + timeout
        while not self.eof:
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"the stream did not end: {self.out[-2000:]!r}")
            r, _, _ = select.select([self.sock], [], [], left)
            if r:
                chunk = self.sock.recv(65536)
                if not chunk:
                    self.eof = True
                self.out += chunk
        return self.out

    def wait(self):
        code, info = self.mgr.iface.WaitShell(self.unit, timeout=LONG)
        return int(code), {str(k): v for k, v in info.items()}

    def close(self):
        self.sock.close()


def unit_state(unit):
    p = systemctl_show(unit, "ActiveState", "LoadState")
    return p.get("ActiveState"), p.get("LoadState")


def unit_gone(unit):
    state, load = unit_state(unit)
    return state in ("inactive", "failed") or load == "not-found"


def shell_units(sid):
    out = run("systemctl", "list-units", "--all", "--plain", "--no-legend", f"sandbox-{sid}-shell-*").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def running(mgr, sid, args):
    """Whether a process with exactly these args runs in the sandbox (ps itself, not a shell, asks)."""
    _, out, _, _ = mgr.exec(sid, ["ps", "-eo", "args"])
    return args in out.decode().splitlines()


def takeover_rows(sid):
    f = dbus.Dictionary({"session_id": sid, "operation": "takeover"}, signature="sv")
    rows = audit().GetLog(f, dbus.UInt64(100), dbus.UInt64(0), timeout=LONG)
    return [{str(k): v for k, v in r.items()} for r in rows]


def cast_output(recording):
    """The header and the concatenated "o" data of an asciicast v2 recording."""
    lines = recording.decode().splitlines()
    header = json.loads(lines[0])
    events = [json.loads(line) for line in lines[1:]]
    return header, events, "".join(e[2] for e in events if e[1] == "o")


@pytest.fixture(autouse=True)
def logger_up():
    run("systemctl", "start", "sandbox-auditd")
    yield


def test_round_trip_sees_the_agents_processes(mgr, sandbox):
    sid, path = sandbox()
    uid = int(mgr.props(path)["Uid"])
    # The agent leaves a process running in the background.
    code, _, _, _ = mgr.sh(sid, "nohup sleep 4711 >/dev/null 2>&1 &")
    assert code == 0

    sh = Shell(mgr, sid, cols=100, rows=30, source="human_takeover", account_id="ops-1")
    assert re.fullmatch(rf"sandbox-{sid}-shell-\d+\.scope", sh.unit)
    assert unit_state(sh.unit)[0] == "active"
    sh.send("ps -eo args; stty size; tty\n")
    sh.read_until(rb"sleep 4711")
    sh.read_until(rb"[\r\n]30 100\r\n")
    sh.read_until(rb"[\r\n]/dev/pts/\d+\r\n")
    sh.send("echo hi; id -u; exit\n")
    out = sh.read_to_eof()
    # (bash ends its bracketed-paste mode with "\x1b[?2004l\r" before a command's output)
    assert re.search(rb"[\r\n]hi\r\n", out)
    assert re.search(rf"[\r\n]{uid}\r\n".encode(), out)
    code, info = sh.wait()
    assert code == 0
    assert info["ended_by"] == "shell"
    wait_for(lambda: unit_gone(sh.unit), what=f"{sh.unit} to stop")
    sh.close()

    # One row, with the recording of what the terminal showed.
    rows = wait_for(lambda: takeover_rows(sid), timeout=60, what="the takeover row")
    assert len(rows) == 1
    row = rows[0]
    assert row["source"] == "human_takeover"
    assert row["account_id"] == "ops-1"
    assert row["event"] == "finished"
    assert int(row["exit_code"]) == 0
    detail = json.loads(str(row["detail"]))
    assert detail["unit"] == sh.unit
    assert detail["recording"] == "asciicast-v2"
    assert detail["ended_by"] == "shell"
    rec, _ = audit().GetOutput(dbus.UInt64(row["id"]), byte_arrays=True)
    header, events, shown = cast_output(bytes(rec))
    assert header["version"] == 2 and header["width"] == 100 and header["height"] == 30
    assert re.search(r"[\r\n]hi\r\n", shown) and re.search(rf"[\r\n]{uid}\r\n", shown)
    assert "sleep 4711" in shown
    # What the caller saw is what was recorded.
    assert shown.encode() == out


def test_exit_status_and_resize(mgr, sandbox):
    sid, _ = sandbox()
    sh = Shell(mgr, sid)
    sh.send("stty size\n")
    sh.read_until(rb"[\r\n]24 80\r\n")
    mgr.iface.ResizeShell(sh.unit, dbus.UInt32(132), dbus.UInt32(43))
    sh.send("stty size; exit 7\n")
    sh.read_until(rb"[\r\n]43 132\r\n")
    sh.read_to_eof()
    code, info = sh.wait()
    assert code == 7 and int(info["signal"]) == 0
    # After the end: the shell is known (for WaitShell), but cannot be resized.
    with pytest.raises(dbus.DBusException) as e:
        mgr.iface.ResizeShell(sh.unit, dbus.UInt32(80), dbus.UInt32(24))
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.NotRunning"
    rows = wait_for(lambda: takeover_rows(sid), timeout=60, what="the takeover row")
    rec, _ = audit().GetOutput(dbus.UInt64(rows[0]["id"]), byte_arrays=True)
    _, events, _ = cast_output(bytes(rec))
    assert [132, 43] in [[int(x) for x in e[2].split("x")] for e in events if e[1] == "r"]
    sh.close()


def test_tiocsti_fails_inside_the_shell(mgr, sandbox):
    sid, _ = sandbox()
    sh = Shell(mgr, sid)
    sh.send("python3 -c 'import fcntl, termios\n"
            "try:\n"
            "    fcntl.ioctl(0, termios.TIOCSTI, b\"x\"); print(\"INJECTED\")\n"
            "except OSError as e:\n"
            "    print(\"REFUSED\", e.errno)'\n")
    m = sh.read_until(rb"[\r\n](INJECTED|REFUSED \d+)\r\n")
    assert m.group(1) == b"REFUSED 1"  # EPERM, from the seccomp filter
    sh.send("exit\n")
    sh.read_to_eof()
    sh.close()


def test_closing_the_stream_kills_the_shell(mgr, sandbox):
    sid, _ = sandbox()
    sh = Shell(mgr, sid)
    sh.send("sleep 5150\n")
    wait_for(lambda: running(mgr, sid, "sleep 5150"), what="the shell's sleep")
    assert unit_state(sh.unit)[0] == "active"
    sh.close()
    wait_for(lambda: unit_gone(sh.unit), what=f"{sh.unit} to stop")
    wait_for(lambda: not running(mgr, sid, "sleep 5150"), what="the shell's processes to end")
    code, info = sh.wait()
    assert info["ended_by"] == "client"
    assert code == 128 + int(info["signal"]) and int(info["signal"]) in (signal.SIGHUP, signal.SIGTERM,
                                                                         signal.SIGKILL)
    rows = wait_for(lambda: takeover_rows(sid), timeout=60, what="the takeover row")
    assert json.loads(str(rows[0]["detail"]))["ended_by"] == "client"


def test_unit_numbers_never_repeat(mgr, sandbox):
    sid, _ = sandbox()
    units = []
    for _ in range(2):
        sh = Shell(mgr, sid)
        units.append(sh.unit)
        sh.send("exit\n")
        sh.read_to_eof()
        sh.close()
    _, _, _, info = mgr.exec(sid, ["true"])
    numbers = [int(re.search(r"-(\d+)\.scope$", u).group(1)) for u in units + [str(info["unit"])]]
    assert len(set(numbers)) == 3


def test_bad_input(mgr, sandbox):
    sid, _ = sandbox()
    bad = [
        ("sb_aaaaaaaaaa", {}, "org.sandboxd.sandbox1.NoSuchSandbox"),
        ("no-such-name", {}, "org.sandboxd.sandbox1.NoSuchSandbox"),
        (sid, {"cols": dbus.UInt32(0)}, "org.freedesktop.DBus.Error.InvalidArgs"),
        (sid, {"cols": dbus.UInt32(100000), "rows": dbus.UInt32(30)}, "org.freedesktop.DBus.Error.InvalidArgs"),
        (sid, {"rows": dbus.UInt32(4294967295)}, "org.freedesktop.DBus.Error.InvalidArgs"),
        (sid, {"cols": dbus.String("80")}, "org.freedesktop.DBus.Error.InvalidArgs"),
        (sid, {"term": dbus.String("xterm; rm -rf /")}, "org.freedesktop.DBus.Error.InvalidArgs"),
        (sid, {"colour": dbus.Boolean(True)}, "org.freedesktop.DBus.Error.InvalidArgs"),
    ]
    for target, opts, name in bad:
        with pytest.raises(dbus.DBusException) as e:
            mgr.iface.OpenShell(target, dbus.Dictionary(opts, signature="sv"), timeout=LONG)
        assert dbus_error(e)[0] == name, (target, opts)
        assert dbus_error(e)[1]
    assert shell_units(sid) == []

    for method, args in (("ResizeShell", (f"sandbox-{sid}-shell-999.scope", dbus.UInt32(80), dbus.UInt32(24))),
                         ("ResizeShell", ("sshd.service", dbus.UInt32(80), dbus.UInt32(24))),
                         ("WaitShell", (f"sandbox-{sid}-shell-999.scope",))):
        with pytest.raises(dbus.DBusException) as e:
            getattr(mgr.iface, method)(*args)
        assert dbus_error(e)[0] == "org.sandboxd.sandbox1.NoSuchShell"

    sh = Shell(mgr, sid)
    for cols, rows in ((0, 24), (80, 0), (70000, 24), (80, 70000)):
        with pytest.raises(dbus.DBusException) as e:
            mgr.iface.ResizeShell(sh.unit, dbus.UInt32(cols), dbus.UInt32(rows))
        assert dbus_error(e)[0] == "org.freedesktop.DBus.Error.InvalidArgs"
    sh.send("stty size; exit\n")
    sh.read_until(rb"[\r\n]24 80\r\n")  # unchanged by the refused resizes
    sh.read_to_eof()
    sh.close()

    # The failed calls were recorded too.
    rows = wait_for(lambda: [r for r in takeover_rows(sid) if r["event"] == "failed"], timeout=60,
                    what="rows of the failed calls")
    assert len(rows) >= 5


def test_at_most_16_shells_per_sandbox(mgr, sandbox):
    sid, _ = sandbox()
    other, _ = sandbox()
    shells = [Shell(mgr, sid) for _ in range(16)]
    with pytest.raises(dbus.DBusException) as e:
        Shell(mgr, sid)
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.LimitExceeded"
    assert len([u for u in shell_units(sid) if not unit_gone(u)]) == 16
    extra = Shell(mgr, other)  # per sandbox, not per daemon
    for sh in shells[:1] + [extra]:
        sh.send("exit\n")
        sh.read_to_eof()
        sh.close()
    sh = Shell(mgr, sid)  # room again once one ended
    for s in shells[1:] + [sh]:
        s.close()


def test_deleting_the_sandbox_ends_the_shell(mgr, sandbox):
    sid, _ = sandbox()
    sh = Shell(mgr, sid)
    sh.send("echo ready\n")
    sh.read_until(rb"[\r\n]ready\r\n")
    mgr.delete(sid)
    sh.read_to_eof()
    code, info = sh.wait()
    assert code != 0
    assert unit_gone(sh.unit)
    sh.close()


class Pty:
    """A command on a fresh pty, its controlling terminal, as in a terminal emulator."""

    def __init__(self, argv, cols=80, rows=24):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execvp(argv[0], argv)
        self.resize(cols, rows)
        self.out = b""

    def resize(self, cols, rows):
        # Sets the terminal's size; the kernel sends SIGWINCH to its foreground process group.
        fcntl_ioctl(self.fd, termios.TIOCSWINSZ, struct_winsize(rows, cols))

    def send(self, data):
        os.write(self.fd, data.encode() if isinstance(data, str) else data)

    def read_until(self, pattern, timeout=60, start=0):
        """Reads until pattern matches the output from start on; the deadline bounds a hang."""
        rx = re.compile(pattern if isinstance(pattern, bytes) else pattern.encode())
        end = time.monotonic() + timeout
        while not rx.search(self.out, start):
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {pattern!r} in {self.out[-2000:]!r}")
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # EIO: every process of the terminal is gone
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"the terminal closed without {pattern!r}: {self.out[-2000:]!r}")
                self.out += chunk
        return rx.search(self.out, start)

    def wait_size(self, size):
        """Asks the shell for its terminal size until it is size: the resize travels as a bus call,
        the keystrokes on the stream, so the first answer may come before the resize."""
        for _ in range(100):
            start = len(self.out)
            self.send("stty size\r")
            # readline redraws the line on SIGWINCH, so the answer may follow the echoed command
            # without a line break of its own
            if self.read_until(rb"(?:[\r\n]|size)(\d+ \d+)\r\n", start=start).group(1) == size:
                return
            time.sleep(0.1)
        raise AssertionError(f"the terminal never became {size!r}")

    def wait(self):
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)


def fcntl_ioctl(fd, req, arg):
    import fcntl
    return fcntl.ioctl(fd, req, arg)


def struct_winsize(rows, cols):
    import struct
    return struct.pack("HHHH", rows, cols, 0, 0)


# The wrapper prints the terminal's settings before and after sandboxctl, and its exit status.
WRAPPER = 'stty -g; echo BEFORE; sandboxctl shell -q "$0"; echo "RC=$?"; stty -g; echo AFTER'


def test_sandboxctl_shell_in_a_terminal(mgr, sandbox):
    sid, path = sandbox()
    uid = int(mgr.props(path)["Uid"])
    t = Pty(["sh", "-c", WRAPPER, sid], cols=90, rows=20)
    before = t.read_until(rb"([0-9a-f:]+)\r\nBEFORE").group(1)
    t.read_until(rb"\$ $")  # the prompt, in raw mode
    t.send("stty size; echo hi; id -u\r")
    t.read_until(rb"[\r\n]20 90\r\n")
    t.read_until(rb"[\r\n]hi\r\n")
    t.read_until(rf"[\r\n]{uid}\r\n")
    # SIGWINCH → ResizeShell
    t.resize(120, 33)
    t.wait_size(b"33 120")
    # ^C reaches the shell in the sandbox, not sandboxctl
    t.send("sleep 600\r")
    wait_for(lambda: running(mgr, sid, "sleep 600"), what="the sleep")
    t.send("\x03")
    wait_for(lambda: not running(mgr, sid, "sleep 600"), what="^C to end the sleep")
    t.send("exit 5\r")
    m = t.read_until(rb"RC=(\d+)\r\n([0-9a-f:]+)\r\nAFTER")
    assert m.group(1) == b"5"
    assert m.group(2) == before  # the terminal is as it was
    assert t.wait() == 0
    rows = wait_for(lambda: takeover_rows(sid), timeout=60, what="the takeover row")
    assert str(rows[0]["source"]) == "human_takeover"
    assert int(rows[0]["exit_code"]) == 5


def test_sandboxctl_shell_ended_by_a_signal(mgr, sandbox):
    sid, _ = sandbox()
    t = Pty(["sh", "-c", WRAPPER, sid])
    before = t.read_until(rb"([0-9a-f:]+)\r\nBEFORE").group(1)
    t.read_until(rb"\$ $")
    units = shell_units(sid)
    assert len(units) == 1
    ctl = [p for p in run("pgrep", "-x", "sandboxctl").stdout.split() if p]
    assert ctl
    for p in ctl:
        os.kill(int(p), signal.SIGTERM)
    m = t.read_until(rb"RC=(\d+)\r\n([0-9a-f:]+)\r\nAFTER")
    assert int(m.group(1)) == 128 + signal.SIGTERM
    assert m.group(2) == before
    t.wait()
    wait_for(lambda: unit_gone(units[0]), what=f"{units[0]} to stop")


def test_sandboxctl_shell_errors(sandbox):
    sid, _ = sandbox()
    r = run("sandboxctl", "shell", "sb_aaaaaaaaaa", check=False, stdin=subprocess.DEVNULL)
    assert r.returncode == 255 and "No sandbox" in r.stderr
    r = run("sandboxctl", "shell", check=False)
    assert r.returncode == 2
    r = run("sandboxctl", "shell", "--help")
    assert r.returncode == 0 and "asciicast" in r.stdout
    # Without a terminal: a script on stdin, then end-of-file.
    r = subprocess.run(["sandboxctl", "shell", "-q", sid], input=b"echo from-a-script; exit 3\n",
                       capture_output=True, timeout=120)
    assert r.returncode == 3 and b"from-a-script" in r.stdout


def test_backpressure_loses_nothing_and_the_recording_is_capped(mgr, sandbox):
    sid, _ = sandbox()
    sh = Shell(mgr, sid)
    sh.send("head -c 3000000 /dev/zero | tr '\\000' x; echo; echo DONE; exit\n")
    # Read nothing for a while: the shell's output stalls on the full relay, sandboxd does not.
    wait_for(lambda: running(mgr, sid, "head -c 3000000 /dev/zero"), what="the writer")
    assert mgr.list()  # sandboxd answers meanwhile
    out = sh.read_to_eof(timeout=300)
    assert out.count(b"x") >= 3000000  # (the echoed command line has a few more)
    assert re.search(rb"[\r\n]DONE\r\n", out)
    code, info = sh.wait()
    assert code == 0 and bool(info["recording_truncated"])
    rows = wait_for(lambda: takeover_rows(sid), timeout=60, what="the takeover row")
    detail = json.loads(str(rows[0]["detail"]))
    assert detail["recording_truncated"] is True
    rec, _ = audit().GetOutput(dbus.UInt64(rows[0]["id"]), byte_arrays=True)
    rec = bytes(rec)
    assert len(rec) <= 1 << 20
    _, events, _ = cast_output(rec)  # every line still parses
    assert events[-1][1:] == ["m", "truncated"]
    sh.close()


def test_introspection_matches_the_contract(mgr):
    import xml.etree.ElementTree as ET

    def methods(root):
        iface = next(i for i in root.iter("interface") if i.get("name") == "org.sandboxd.sandbox1.Manager")
        return {m.get("name"): [(a.get("name"), a.get("type"), a.get("direction", "in")) for a in m.iter("arg")]
                for m in iface.iter("method")}

    obj = mgr.bus.get_object("org.sandboxd.sandbox1", "/org/sandboxd/sandbox1", introspect=False)
    live = methods(ET.fromstring(str(obj.Introspect(dbus_interface="org.freedesktop.DBus.Introspectable"))))
    contract = methods(ET.parse("/usr/share/dbus-1/interfaces/org.sandboxd.sandbox1.xml").getroot())
    for name in ("OpenShell", "ResizeShell", "WaitShell"):
        assert live[name] == contract[name], name
    assert [a[1] for a in live["OpenShell"]] == ["s", "a{sv}", "h", "s"]


CLIENT_AS_USER = r'''
import socket, sys, dbus
m = dbus.Interface(dbus.SystemBus().get_object("org.sandboxd.sandbox1", "/org/sandboxd/sandbox1"),
                   "org.sandboxd.sandbox1.Manager")
fd, unit = m.OpenShell(sys.argv[1], dbus.Dictionary({"source": "human_takeover", "account_id": "someone-else"},
                                                     signature="sv"))
s = socket.socket(fileno=fd.take())
s.sendall(b"exit 4\n")
while s.recv(4096):
    pass
code, _ = m.WaitShell(unit)
print(unit, int(code))
'''


def test_context_is_honoured_only_from_root_and_the_gateway(mgr, sandbox):
    sid, _ = sandbox()
    if run("id", "takeover-admin", check=False).returncode != 0:
        run("useradd", "--system", "--no-create-home", "--groups", "sandbox-admin", "takeover-admin")
    uid = int(run("id", "-u", "takeover-admin").stdout)
    r = run("setpriv", f"--reuid={uid}", f"--regid={uid}", "--init-groups", "/usr/bin/python3", "-c",
            CLIENT_AS_USER, sid, check=False)
    assert r.returncode == 0, r.stderr
    unit, code = r.stdout.split()
    assert int(code) == 4
    # root may wait for anyone's shell; the row says who it really was
    assert int(mgr.iface.WaitShell(unit)[0]) == 4
    rows = wait_for(lambda: takeover_rows(sid), timeout=60, what="the takeover row")
    assert str(rows[0]["account_id"]) == f"uid:{uid}" and str(rows[0]["source"]) == "agent"

    # someone who may not use sandboxd gets no shell
    units = shell_units(sid)
    r = run("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "busctl", "call",
            "org.sandboxd.sandbox1", "/org/sandboxd/sandbox1", "org.sandboxd.sandbox1.Manager", "OpenShell",
            "sa{sv}", sid, "0", check=False)
    assert r.returncode != 0 and ("Access denied" in r.stderr or "AccessDenied" in r.stderr), r.stderr
    assert shell_units(sid) == units


def test_stopping_sandboxd_ends_and_records_the_shell(mgr, sandbox):
    sid, _ = sandbox()
    sh = Shell(mgr, sid)
    sh.send("echo before-restart\n")
    sh.read_until(rb"[\r\n]before-restart\r\n")
    run("systemctl", "restart", "sandboxd.service")
    sh.read_to_eof()  # the relay was sandboxd: the stream ends with it
    wait_for(lambda: unit_gone(sh.unit), what=f"{sh.unit} to stop")
    rows = wait_for(lambda: takeover_rows(sid), timeout=60, what="the takeover row")
    detail = json.loads(str(rows[0]["detail"]))
    assert detail["ended_by"] == "sandboxd" and int(rows[0]["exit_code"]) == -1
    rec, _ = audit().GetOutput(dbus.UInt64(rows[0]["id"]), byte_arrays=True)
    assert "before-restart" in cast_output(bytes(rec))[2]
    # the sandbox itself lives on, and takes a new shell
    sh.close()
    sh = Shell(mgr, sid)
    sh.send("exit\n")
    sh.read_to_eof()
    sh.close()
