# SPDX-License-Identifier: LGPL-2.1-or-later
# Issue 25: background processes over the bus (StartProcess, ListProcesses, SignalProcess, WaitProcess,
# ReadProcessOutput, WriteProcessStdin, the Process objects), their limits, their end with the sandbox and
# with sandboxd, and their audit rows.
import json
import signal

import dbus
import pytest

from conftest import BUS_NAME, LONG, Manager, audit_log, dbus_error, run, wait_for
from test_sandboxd import scope_units, uid_processes, wait_sandboxd_active

PROCESS_IFACE = "org.sandboxd.sandbox1.Process"
PORT = 8123


def start(mgr, sid, argv, **opts):
    o = {}
    for k, v in opts.items():
        if k in ("timeout_seconds", "memory_max", "tasks_max"):
            o[k] = dbus.UInt64(v)
        elif k == "env":
            o[k] = dbus.Dictionary(v, signature="ss")
        else:
            o[k] = v
    pid, path = mgr.iface.StartProcess(sid, dbus.Array(argv, signature="s"), dbus.Dictionary(o, signature="sv"),
                                       timeout=LONG)
    return str(pid), str(path)


def wait(mgr, sid, pid):
    code, info = mgr.iface.WaitProcess(sid, pid, timeout=LONG)
    return int(code), {str(k): v for k, v in info.items()}


def read(mgr, sid, pid, stream="stdout", offset=0, max=0):
    data, nxt, first, ended = mgr.iface.ReadProcessOutput(sid, pid, stream, dbus.UInt64(offset), dbus.UInt32(max),
                                                          byte_arrays=True)
    return bytes(data), int(nxt), int(first), bool(ended)


def write(mgr, sid, pid, data, close=False):
    mgr.iface.WriteProcessStdin(sid, pid, dbus.ByteArray(data), dbus.Boolean(close))


def kill(mgr, sid, pid, sig, **ctx):
    mgr.iface.SignalProcess(sid, pid, dbus.Int32(sig), dbus.Dictionary(ctx, signature="sv"))


def props(mgr, path):
    o = mgr.bus.get_object(BUS_NAME, path)
    return {str(k): v for k, v in o.GetAll(PROCESS_IFACE, dbus_interface=dbus.PROPERTIES_IFACE).items()}


def listing(mgr, sid):
    return [(str(i), str(st), int(code), int(pid), int(t), [str(a) for a in argv], str(unit), str(path))
            for i, st, code, pid, t, argv, unit, path in mgr.iface.ListProcesses(sid)]


def output_until(mgr, sid, pid, want, stream="stdout"):
    return wait_for(lambda: want in read(mgr, sid, pid, stream)[0] and read(mgr, sid, pid, stream),
                    what=f"{want!r} in {pid}'s {stream}")


def process_units(sid):
    return [u for u in scope_units(sid) if "-process-" in u]


def rows(sid, operation, n=1):
    return wait_for(lambda: (r := audit_log(sid, operation=operation)) and len(r) >= n and r,
                    what=f"{n} {operation} row(s)")


def test_server_in_background_answers_exec(mgr, sandbox):
    sid, spath = sandbox()
    pid, path = start(mgr, sid, ["python3", "-m", "http.server", str(PORT), "--bind", "127.0.0.1"],
                      cwd="/tmp")
    assert path == f"{spath}/process/{pid}" and pid.startswith("p")
    mgr.write(sid, "/tmp/hello.txt", b"served from the sandbox\n")
    fetch = ["python3", "-c", f"import urllib.request; print(urllib.request.urlopen("
             f"'http://127.0.0.1:{PORT}/hello.txt', timeout=5).read().decode(), end='')"]
    # the server listens a moment after it starts: the Exec is retried until it answers
    out = wait_for(lambda: (r := mgr.exec(sid, fetch))[0] == 0 and r[1], what="the server to answer")
    assert out == b"served from the sandbox\n"

    p = props(mgr, path)
    assert p["Id"] == pid and p["State"] == "running" and p["ExitCode"] == -1 and p["Sandbox"] == sid
    assert list(p["Argv"]) == ["python3", "-m", "http.server", str(PORT), "--bind", "127.0.0.1"]
    assert p["Unit"].startswith(f"sandbox-{sid}-process-") and p["Unit"] in process_units(sid)
    assert p["StartedAt"] > 0
    # Pid is the sandbox's view: the process it names there is the server
    code, cmdline, _, _ = mgr.exec(sid, ["cat", f"/proc/{int(p['Pid'])}/cmdline"])
    assert code == 0 and b"http.server" in cmdline
    assert run("systemctl", "is-active", p["Unit"], check=False).stdout.strip() == "active"
    # its requests are logged on stderr, readable while it runs
    assert b"GET /hello.txt" in output_until(mgr, sid, pid, b"GET /hello.txt", "stderr")[0]

    [row] = listing(mgr, sid)
    assert row[0] == pid and row[1] == "running" and row[2] == -1 and row[6] == p["Unit"] and row[7] == path

    kill(mgr, sid, pid, signal.SIGTERM)
    code, info = wait(mgr, sid, pid)
    assert code == 128 + signal.SIGTERM and info["signal"] == signal.SIGTERM and info["state"] == "killed"
    assert info["unit"] == p["Unit"] and not info["timed_out"]
    assert props(mgr, path)["State"] == "killed" and props(mgr, path)["ExitCode"] == code
    wait_for(lambda: p["Unit"] not in process_units(sid), what="its scope to go")
    # an ended process stays readable until its sandbox goes
    assert listing(mgr, sid)[0][1] == "killed"


def test_output_from_an_offset_and_after_overflow(mgr, sandbox):
    sid, _ = sandbox()
    # the small type keeps 1 MiB per stream (ProcessOutputMax=)
    pid, _ = start(mgr, sid, ["sh", "-c", "printf hello; printf oops >&2; head -c 3000000 /dev/zero | tr '\\0' x;"
                                          " printf END"])
    code, info = wait(mgr, sid, pid)
    assert code == 0 and info["state"] == "exited" and info["stdout_truncated"] and not info["stderr_truncated"]
    total = 5 + 3000000 + 3
    data, nxt, first, ended = read(mgr, sid, pid)
    assert nxt == total and first == total - (1 << 20) and ended
    assert len(data) == 1 << 20 and data.endswith(b"xxxEND") and set(data[:-3]) == {ord("x")}
    # from before what is kept: it starts at first_offset
    data, nxt, first, ended = read(mgr, sid, pid, offset=0, max=10)
    assert (data, nxt, first, ended) == (b"x" * 10, total - (1 << 20) + 10, total - (1 << 20), False)
    # from an offset inside it, and at its end
    kept = total - (1 << 20)
    assert read(mgr, sid, pid, offset=total - 4) == (b"xEND", total, kept, True)
    assert read(mgr, sid, pid, offset=total) == (b"", total, kept, True)
    assert read(mgr, sid, pid, "stderr") == (b"oops", 4, 0, True)
    assert read(mgr, sid, pid, "stderr", offset=2, max=1) == (b"p", 3, 0, False)
    with pytest.raises(dbus.DBusException) as e:
        read(mgr, sid, pid, offset=total + 1)
    assert dbus_error(e)[0] == "org.freedesktop.DBus.Error.InvalidArgs" and "past the end" in dbus_error(e)[1]
    with pytest.raises(dbus.DBusException) as e:
        read(mgr, sid, pid, "stdin")
    assert dbus_error(e)[0] == "org.freedesktop.DBus.Error.InvalidArgs"


def attach(mgr, sid, pid, stream="stdout", offset=0):
    """AttachProcessOutput into a new pipe; returns (start_offset, the pipe's read end). Every copy of
    the write end here is closed, so reading sees EOF once sandboxd lets go of it."""
    import os
    r, w = os.pipe()
    ufd = dbus.types.UnixFd(w)
    os.close(w)
    start_offset = mgr.iface.AttachProcessOutput(sid, pid, stream, dbus.UInt64(offset), ufd)
    os.close(ufd.take())
    return int(start_offset), r


def read_to_eof(fd):
    import os
    data = b""
    while chunk := os.read(fd, 1 << 16):
        data += chunk
    os.close(fd)
    return data


def test_attach_output_to_a_pipe(mgr, sandbox):
    sid, _ = sandbox()
    # attached while it runs, before most of its output: all of it, then EOF at its end
    pid, _ = start(mgr, sid, ["sh", "-c", "cat >/dev/null; seq 1 50000; echo done"])
    start_offset, fd = attach(mgr, sid, pid)
    assert start_offset == 0
    _, fd_err = attach(mgr, sid, pid, "stderr")
    write(mgr, sid, pid, b"", close=True)
    want = "".join(f"{i}\n" for i in range(1, 50001)).encode() + b"done\n"
    assert read_to_eof(fd) == want and read_to_eof(fd_err) == b""
    assert wait(mgr, sid, pid)[0] == 0
    # after its end, from an offset: the rest, then EOF at once
    start_offset, fd = attach(mgr, sid, pid, offset=len(want) - 5)
    assert start_offset == len(want) - 5 and read_to_eof(fd) == want[-5:]
    # bad input: past the end, not a pipe, bad stream, no such process
    import tempfile
    with pytest.raises(dbus.DBusException) as e:
        attach(mgr, sid, pid, offset=len(want) + 1)
    assert dbus_error(e)[0] == "org.freedesktop.DBus.Error.InvalidArgs"
    with tempfile.TemporaryFile() as f, pytest.raises(dbus.DBusException) as e:
        mgr.iface.AttachProcessOutput(sid, pid, "stdout", dbus.UInt64(0), dbus.types.UnixFd(f.fileno()))
    assert dbus_error(e)[0] == "org.freedesktop.DBus.Error.InvalidArgs" and "pipe or a socket" in dbus_error(e)[1]
    with pytest.raises(dbus.DBusException) as e:
        attach(mgr, sid, pid, "stdin")
    assert dbus_error(e)[0] == "org.freedesktop.DBus.Error.InvalidArgs"
    with pytest.raises(dbus.DBusException) as e:
        attach(mgr, sid, "p999999")
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.NoSuchProcess"


def test_attach_reader_that_goes_away(mgr, sandbox):
    """A reader that closes its end is dropped; the process and sandboxd go on."""
    import os
    sid, _ = sandbox()
    pid, _ = start(mgr, sid, ["sh", "-c", "while :; do echo tick; sleep 0.05; done"])
    _, fd = attach(mgr, sid, pid)
    assert os.read(fd, 5) == b"tick\n"
    os.close(fd)
    output_until(mgr, sid, pid, b"tick\ntick\ntick\ntick\n")
    # room for PROCESS_ATTACH_MAX again: the dropped one does not count once its write failed
    fds = []
    try:
        for _ in range(8):
            fds.append(attach(mgr, sid, pid)[1])
        with pytest.raises(dbus.DBusException) as e:
            attach(mgr, sid, pid, "stderr")
        assert dbus_error(e)[0] == "org.sandboxd.sandbox1.LimitExceeded"
    finally:
        for f in fds:
            os.close(f)
    kill(mgr, sid, pid, signal.SIGKILL)
    assert wait(mgr, sid, pid)[0] == 137


def test_attach_readers_that_go_while_it_is_quiet(mgr, sandbox):
    """Readers that close their ends while the process writes nothing are dropped at once: their places
    among the 8 are free again before it writes another byte."""
    import os
    sid, _ = sandbox()
    pid, _ = start(mgr, sid, ["sh", "-c", "echo up; exec cat"])
    output_until(mgr, sid, pid, b"up\n")
    fds = [attach(mgr, sid, pid)[1] for _ in range(8)]
    for fd in fds:
        assert os.read(fd, 3) == b"up\n"
    with pytest.raises(dbus.DBusException) as e:
        attach(mgr, sid, pid)
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.LimitExceeded"
    for fd in fds:
        os.close(fd)

    def attached():
        try:
            return attach(mgr, sid, pid)[1]
        except dbus.DBusException as e:
            assert e.get_dbus_name() == "org.sandboxd.sandbox1.LimitExceeded", e
            return None
    fd = wait_for(attached, what="a place among the 8 again")
    # still quiet, and the new reader gets what follows
    assert read(mgr, sid, pid)[0] == b"up\n"
    write(mgr, sid, pid, b"more\n", close=True)
    assert read_to_eof(fd) == b"up\nmore\n"
    assert wait(mgr, sid, pid)[0] == 0


def test_stdin_round_trip(mgr, sandbox):
    sid, _ = sandbox()
    pid, path = start(mgr, sid, ["cat"])
    write(mgr, sid, pid, b"hello\n")
    output_until(mgr, sid, pid, b"hello\n")
    assert read(mgr, sid, pid)[3] is False  # not ended: cat still runs
    write(mgr, sid, pid, b"world\n", close=True)
    code, info = wait(mgr, sid, pid)
    assert code == 0 and info["state"] == "exited"
    assert read(mgr, sid, pid) == (b"hello\nworld\n", 12, 0, True)
    with pytest.raises(dbus.DBusException) as e:
        write(mgr, sid, pid, b"more")
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.NotRunning"

    # closing without data; and a second close refused while it still runs
    pid, _ = start(mgr, sid, ["sh", "-c", "cat; echo eof; sleep 1000"])
    write(mgr, sid, pid, b"", close=True)
    output_until(mgr, sid, pid, b"eof\n")
    with pytest.raises(dbus.DBusException) as e:
        write(mgr, sid, pid, b"late")
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.NotRunning" and "stdin" in dbus_error(e)[1]
    kill(mgr, sid, pid, signal.SIGKILL)
    assert wait(mgr, sid, pid)[0] == 128 + signal.SIGKILL


def test_stdin_from_a_pipe(mgr, sandbox):
    import os
    sid, _ = sandbox()
    pid, _ = start(mgr, sid, ["cat"])
    r, w = os.pipe()
    ufd = dbus.types.UnixFd(r)
    os.close(r)
    mgr.iface.AttachProcessStdin(sid, pid, ufd)
    os.close(ufd.take())
    os.write(w, b"hello\n")
    output_until(mgr, sid, pid, b"hello\n")
    # one at a time; WriteProcessStdin still works beside it
    r2, w2 = os.pipe()
    with pytest.raises(dbus.DBusException) as e:
        mgr.iface.AttachProcessStdin(sid, pid, dbus.types.UnixFd(r2))
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.LimitExceeded"
    os.close(r2)
    os.close(w2)
    write(mgr, sid, pid, b"from the bus\n")
    output_until(mgr, sid, pid, b"from the bus\n")
    # more than the pipe and sandboxd's high water hold at once: it all arrives, in order
    big = b"".join(b"%06d\n" % i for i in range(60000))
    os.write(w, big[:30000])
    with os.fdopen(w, "wb") as f:
        f.write(big[30000:])  # blocks while cat and sandboxd catch up; its close is cat's EOF
    code, _ = wait(mgr, sid, pid)
    assert code == 0
    assert read(mgr, sid, pid)[0] == b"hello\nfrom the bus\n" + big
    with pytest.raises(dbus.DBusException) as e:
        mgr.iface.AttachProcessStdin(sid, pid, dbus.types.UnixFd(0))
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.NotRunning"


def test_sigterm_and_sigkill(mgr, sandbox):
    sid, _ = sandbox()
    pid, path = start(mgr, sid, ["sleep", "1000"])
    kill(mgr, sid, pid, signal.SIGTERM)
    code, info = wait(mgr, sid, pid)
    assert (code, info["signal"], info["state"]) == (143, signal.SIGTERM, "killed")
    # a second WaitProcess answers at once, the same
    assert wait(mgr, sid, pid)[0] == 143
    with pytest.raises(dbus.DBusException) as e:
        kill(mgr, sid, pid, signal.SIGTERM)
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.NotRunning"

    # one that ignores SIGTERM: still running after it, ended by SIGKILL
    pid, path = start(mgr, sid, ["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"])
    output_until(mgr, sid, pid, b"ready\n")
    kill(mgr, sid, pid, signal.SIGTERM)
    code, _, _, _ = mgr.exec(sid, ["true"])  # a round trip through sandboxd after the signal
    assert props(mgr, path)["State"] == "running"
    kill(mgr, sid, pid, signal.SIGKILL)
    code, info = wait(mgr, sid, pid)
    assert (code, info["signal"], info["state"]) == (137, signal.SIGKILL, "killed")


def test_runtime_limit(mgr, sandbox):
    sid, _ = sandbox()
    pid, path = start(mgr, sid, ["sleep", "1000"], timeout_seconds=2)
    code, info = wait(mgr, sid, pid)
    assert info["timed_out"] and info["state"] == "timed-out" and code == 128 + info["signal"]
    assert props(mgr, path)["State"] == "timed-out"
    # over the type's maximum: refused, nothing started
    with pytest.raises(dbus.DBusException) as e:
        start(mgr, sid, ["sleep", "1"], timeout_seconds=7200)
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.LimitExceeded"
    assert [r[0] for r in listing(mgr, sid)] == [pid]


def test_memory_bomb_oom_killed(mgr, sandbox):
    sid, _ = sandbox()
    pid, _ = start(mgr, sid, ["python3", "-c", "b = bytearray(512 * 1024 * 1024); print('survived')"],
                   memory_max=64 * 1024 * 1024)
    code, info = wait(mgr, sid, pid)
    assert info["oom_killed"] and code == 128 + signal.SIGKILL and info["state"] == "killed", (code, info)
    assert read(mgr, sid, pid)[0] == b""
    [row] = rows(sid, "process.exit")
    assert row["event"] == "oom_killed" and json.loads(str(row["detail"]))["oom_killed"] is True
    # and a process that ends normally is not
    pid, _ = start(mgr, sid, ["true"])
    assert not wait(mgr, sid, pid)[1]["oom_killed"]


def test_delete_ends_processes(mgr, sandbox):
    sid, _ = sandbox()
    uid = int(mgr.props(mgr.iface.GetSandbox(sid))["Uid"])
    pids = [start(mgr, sid, ["sh", "-c", "sleep 1000 & sleep 1000"])[0] for _ in range(3)]
    assert len(process_units(sid)) == 3
    mgr.delete(sid)
    wait_for(lambda: process_units(sid) == [], what="the process scopes to go")
    assert uid_processes(uid) == []
    exits = rows(sid, "process.exit", 3)
    for r in exits:
        d = json.loads(str(r["detail"]))
        assert d["process"] in pids and d["state"] == "killed" and d["sandbox_gone"] is True


def test_ttl_expiry_ends_processes(mgr, sandbox):
    sid, _ = sandbox(ttl_seconds=3)
    pid, _ = start(mgr, sid, ["sleep", "1000"])
    wait_for(lambda: sid not in [r[0] for r in mgr.list()], what="the sandbox to expire")
    wait_for(lambda: process_units(sid) == [], what="its process scope to go")
    [row] = rows(sid, "process.exit")
    d = json.loads(str(row["detail"]))
    assert d["process"] == pid and d["state"] == "killed" and d["sandbox_gone"] is True


@pytest.mark.parametrize("how", ["restart", "kill9"])
def test_restart_stops_and_records_them(mgr, sandbox, how):
    sid, _ = sandbox()
    pid, _ = start(mgr, sid, ["sleep", "1000"])
    [unit] = process_units(sid)
    if how == "restart":
        run("systemctl", "restart", "sandboxd")
    else:
        before = run("systemctl", "show", "-p", "NRestarts", "--value", "sandboxd").stdout.strip()
        run("systemctl", "kill", "-s", "KILL", "sandboxd")
        wait_for(lambda: run("systemctl", "show", "-p", "NRestarts", "--value", "sandboxd").stdout.strip() != before,
                 what="sandboxd to be restarted")
    wait_sandboxd_active()
    m2 = Manager()
    # the sandbox is re-adopted, its process is not: stopped, and recorded as interrupted
    assert sid in [r[0] for r in m2.list()]
    wait_for(lambda: unit not in process_units(sid), what="its scope to be stopped")
    assert listing(m2, sid) == []
    with pytest.raises(dbus.DBusException) as e:
        wait(m2, sid, pid)
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.NoSuchProcess"
    [row] = rows(sid, "process.exit")
    d = json.loads(str(row["detail"]))
    assert row["event"] == "failed" and d["process"] == pid and d["error"] == "org.sandboxd.sandbox1.Interrupted"
    # a new one gets a new id
    pid2, _ = start(m2, sid, ["true"])
    assert pid2 != pid


def test_hundred_processes_and_the_limit(mgr, sandbox):
    sid, _ = sandbox()
    pids = [start(mgr, sid, ["sleep", "1000"])[0] for _ in range(100)]
    assert len(set(pids)) == 100
    rows_ = listing(mgr, sid)
    assert [r[0] for r in rows_] == pids and all(r[1] == "running" for r in rows_)
    assert len(process_units(sid)) == 100
    # up to 128 running; the 129th is refused, with nothing started
    pids += [start(mgr, sid, ["sleep", "1000"])[0] for _ in range(28)]
    with pytest.raises(dbus.DBusException) as e:
        start(mgr, sid, ["sleep", "1000"])
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.LimitExceeded"
    assert len(listing(mgr, sid)) == 128 and len(process_units(sid)) == 128
    # an ended one makes room: the oldest ended one goes, once the new one runs (not for a start
    # that fails)
    kill(mgr, sid, pids[5], signal.SIGKILL)
    wait(mgr, sid, pids[5])
    with pytest.raises(dbus.DBusException) as e:
        start(mgr, sid, ["/no/such/program"])
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.NoSuchFile"
    assert wait(mgr, sid, pids[5])[0] == 137
    start(mgr, sid, ["sleep", "1000"])
    with pytest.raises(dbus.DBusException) as e:
        wait(mgr, sid, pids[5])
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.NoSuchProcess"


def test_bad_input_changes_nothing(mgr, sandbox):
    sid, _ = sandbox()
    bad = [
        (["sh"], {"stdin": dbus.ByteArray(b"x")}, "org.freedesktop.DBus.Error.InvalidArgs"),
        ([], {}, "org.freedesktop.DBus.Error.InvalidArgs"),
        (["true"], {"cwd": dbus.String("/nonexistent")}, "org.freedesktop.DBus.Error.InvalidArgs"),
        (["/no/such/program"], {}, "org.sandboxd.sandbox1.NoSuchFile"),
        (["true"], {"tasks_max": dbus.UInt64(100000)}, "org.sandboxd.sandbox1.LimitExceeded"),
        (["true"], {"timeout_seconds": dbus.String("1")}, "org.freedesktop.DBus.Error.InvalidArgs"),
    ]
    for argv, opts, name in bad:
        with pytest.raises(dbus.DBusException) as e:
            mgr.iface.StartProcess(sid, dbus.Array(argv, signature="s"), dbus.Dictionary(opts, signature="sv"),
                                   timeout=LONG)
        assert dbus_error(e)[0] == name, (argv, opts, dbus_error(e))
    with pytest.raises(dbus.DBusException) as e:
        start(mgr, "sb_nosuchsandb", ["true"])
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.NoSuchSandbox"
    assert listing(mgr, sid) == [] and process_units(sid) == []

    pid, _ = start(mgr, sid, ["sleep", "1000"])
    for sig in (0, -1, 1000):
        with pytest.raises(dbus.DBusException) as e:
            kill(mgr, sid, pid, sig)
        assert dbus_error(e)[0] == "org.freedesktop.DBus.Error.InvalidArgs"
    for call in (lambda: kill(mgr, sid, "p999999", 15), lambda: wait(mgr, sid, "p999999"),
                 lambda: read(mgr, sid, "nope"), lambda: write(mgr, sid, "", b"x")):
        with pytest.raises(dbus.DBusException) as e:
            call()
        assert dbus_error(e)[0] == "org.sandboxd.sandbox1.NoSuchProcess"
    with pytest.raises(dbus.DBusException) as e:
        kill(mgr, sid, pid, 15, source=dbus.String("robot"))
    assert dbus_error(e)[0] == "org.freedesktop.DBus.Error.InvalidArgs"
    [(i, state, *_)] = listing(mgr, sid)
    assert (i, state) == (pid, "running")


def test_audit_rows(mgr, sandbox):
    sid, _ = sandbox()
    pid, _ = start(mgr, sid, ["sh", "-c", "echo started; read x; echo got $x; echo bye >&2; sleep 1000"],
                   env={"FOO": "bar"})
    write(mgr, sid, pid, b"line\n")
    output_until(mgr, sid, pid, b"got line\n")
    kill(mgr, sid, pid, signal.SIGTERM, request_id=dbus.String("req_sig1"))
    wait(mgr, sid, pid)
    with pytest.raises(dbus.DBusException):
        start(mgr, sid, ["/no/such/program"])

    starts = rows(sid, "process.start", 2)
    ok = [r for r in starts if r["event"] == "finished"]
    failed = [r for r in starts if r["event"] == "failed"]
    assert len(ok) == 1 and len(failed) == 1
    d = json.loads(str(ok[0]["detail"]))
    assert d["process"] == pid and d["argv"][0] == "sh" and d["unit"].startswith(f"sandbox-{sid}-process-")
    assert json.loads(str(failed[0]["detail"]))["error"] == "org.sandboxd.sandbox1.NoSuchFile"
    [sig] = rows(sid, "process.signal")
    d = json.loads(str(sig["detail"]))
    assert (d["process"], d["signal"], sig["event"], str(sig["request_id"])) == (pid, 15, "finished", "req_sig1")
    [ex] = rows(sid, "process.exit")
    d = json.loads(str(ex["detail"]))
    assert ex["event"] == "finished" and int(ex["exit_code"]) == 143 and d["state"] == "killed"
    assert d["stdout_bytes"] == len(b"started\ngot line\n") and d["stderr_bytes"] == 4
    out = json.loads(str(ex["output_truncated"]))
    assert out["stdout"] == "started\ngot line\n" and out["stderr"] == "bye\n"
    # a refused signal has its row too
    with pytest.raises(dbus.DBusException):
        kill(mgr, sid, pid, 15)
    failed_sig = wait_for(lambda: [r for r in audit_log(sid, operation="process.signal") if r["event"] == "failed"],
                          what="the refused signal's row")
    assert json.loads(str(failed_sig[0]["detail"]))["error"] == "org.sandboxd.sandbox1.NotRunning"


def test_xml_contract_is_what_is_served(mgr, sandbox):
    """dbus/org.sandboxd.sandbox1.xml is what sandboxd serves: the process methods and the Process object."""
    import os
    import xml.etree.ElementTree as ET

    def members(root, iface_name):
        [iface] = [i for i in root.iter("interface") if i.get("name") == iface_name]
        methods = {m.get("name"): [(a.get("direction", "in"), a.get("type"), a.get("name")) for a in m.iter("arg")]
                   for m in iface.iter("method")}
        props = {p.get("name"): p.get("type") for p in iface.iter("property")}
        return methods, props

    src = ET.parse(os.path.join(os.path.dirname(__file__), "..", "..", "dbus", "org.sandboxd.sandbox1.xml")).getroot()
    obj = mgr.bus.get_object(BUS_NAME, "/org/sandboxd/sandbox1", introspect=False)
    served = ET.fromstring(str(obj.Introspect(dbus_interface="org.freedesktop.DBus.Introspectable")))
    want, got = members(src, "org.sandboxd.sandbox1.Manager")[0], members(served, "org.sandboxd.sandbox1.Manager")[0]
    for name in ("StartProcess", "ListProcesses", "SignalProcess", "WaitProcess", "ReadProcessOutput",
                 "AttachProcessOutput", "AttachProcessStdin", "WriteProcessStdin"):
        assert got[name] == want[name], name

    sid, spath = sandbox()
    pid, path = start(mgr, sid, ["sleep", "1000"])
    pobj = mgr.bus.get_object(BUS_NAME, path, introspect=False)
    served = ET.fromstring(str(pobj.Introspect(dbus_interface="org.freedesktop.DBus.Introspectable")))
    assert members(served, PROCESS_IFACE)[1] == members(src, PROCESS_IFACE)[1]
    # the process is a child node of its sandbox's object, and in GetManagedObjects
    sobj = mgr.bus.get_object(BUS_NAME, spath, introspect=False)
    sx = ET.fromstring(str(sobj.Introspect(dbus_interface="org.freedesktop.DBus.Introspectable")))
    # (sd-bus names the enumerated descendant by its relative path)
    assert f"process/{pid}" in [n.get("name") for n in sx.findall("node")]
    managed = obj.GetManagedObjects(dbus_interface="org.freedesktop.DBus.ObjectManager")
    assert str(managed[dbus.ObjectPath(path)][PROCESS_IFACE]["State"]) == "running"


def ctl(*args, check=True):
    import subprocess
    r = subprocess.run(["sandboxctl", *args], capture_output=True)
    if check:
        assert r.returncode == 0, (args, r.returncode, r.stderr)
    return r


def test_sandboxctl_start_ps_kill_attach(mgr, sandbox):
    sid, _ = sandbox()
    r = ctl("start", sid, "--cwd=/tmp", "--env=GREETING=hi there", "--timeout=600", "--", "sh", "-c",
            'echo "$GREETING from $(pwd)"; echo to-stderr >&2; exec sleep 1000')
    pid = r.stdout.decode().strip()
    assert pid.startswith("p")
    output_until(mgr, sid, pid, b"hi there from /tmp\n")

    table = ctl("ps", sid).stdout.decode().splitlines()
    assert table[0].split()[:5] == ["ID", "STATE", "EXIT", "PID", "STARTED"]
    row = [line for line in table[1:] if line.split()[0] == pid][0]
    assert row.split()[1] == "running" and row.split()[2] == "-"
    # the command shell-quoted: its arguments' boundaries stay visible
    assert "sh -c 'echo" in row
    [j] = json.loads(ctl("ps", "--json", sid).stdout)["processes"]
    assert j["id"] == pid and j["state"] == "running" and j["exit_code"] == -1 and j["argv"][0] == "sh"

    ctl("kill", "--signal=KILL", sid, pid)
    r = ctl("attach", sid, pid, check=False)
    # attach prints everything so far and exits as exec would: 128 + SIGKILL
    assert r.returncode == 137
    assert r.stdout == b"hi there from /tmp\n" and r.stderr == b"to-stderr\n"
    assert json.loads(ctl("ps", "--json", sid).stdout)["processes"][0]["state"] == "killed"

    # attach follows a running process to its end, and exits with its status
    pid = ctl("start", sid, "sh", "-c", "for i in 1 2 3; do echo $i; sleep 0.2; done; exit 3").stdout.decode().strip()
    r = ctl("attach", sid, pid, check=False)
    assert (r.returncode, r.stdout) == (3, b"1\n2\n3\n")

    # errors: a bad signal, an ended process, no such process, no command
    assert ctl("kill", "--signal=NOPE", sid, pid, check=False).returncode == 2
    r = ctl("kill", sid, pid, check=False)
    assert r.returncode == 1 and b"exited" in r.stderr
    r = ctl("attach", sid, "p999999", check=False)
    assert r.returncode == 1 and b"no process" in r.stderr
    assert ctl("start", sid, check=False).returncode == 2
    assert b"start ID" in ctl("start", "--help").stdout


def test_state_change_is_signalled(mgr, sandbox):
    """PropertiesChanged on the process's object with State and ExitCode when it ends."""
    import dbus.mainloop.glib
    from gi.repository import GLib

    sid, _ = sandbox()
    pid, path = start(mgr, sid, ["sleep", "1000"])
    bus = dbus.SystemBus(mainloop=dbus.mainloop.glib.DBusGMainLoop(), private=True)
    changes, loop = [], GLib.MainLoop()

    def on_changed(iface, changed, invalidated):
        if iface == PROCESS_IFACE:
            changes.append({str(k): v for k, v in changed.items()})
            loop.quit()

    match = bus.add_signal_receiver(on_changed, signal_name="PropertiesChanged",
                                    dbus_interface="org.freedesktop.DBus.Properties", bus_name=BUS_NAME, path=path)
    try:
        GLib.idle_add(lambda: kill(mgr, sid, pid, signal.SIGTERM) and False)
        GLib.timeout_add_seconds(30, loop.quit)  # only bounds a hang
        loop.run()
    finally:
        match.remove()
        bus.close()
    assert changes and str(changes[0]["State"]) == "killed" and int(changes[0]["ExitCode"]) == 143, changes


def test_unprivileged_caller_denied(mgr, sandbox):
    """Neither the methods nor a process's properties are for callers outside sandbox-admin."""
    sid, _ = sandbox()
    pid, path = start(mgr, sid, ["sleep", "1000"])
    nobody = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "busctl")
    for args in (("StartProcess", "sasa{sv}", sid, "1", "true", "0"), ("ListProcesses", "s", sid),
                 ("SignalProcess", "ssia{sv}", sid, pid, "9", "0"), ("ReadProcessOutput", "ssstu", sid, pid,
                                                                      "stdout", "0", "0")):
        r = run(*nobody, "call", BUS_NAME, "/org/sandboxd/sandbox1", "org.sandboxd.sandbox1.Manager", *args,
                check=False)
        assert r.returncode != 0 and ("Access denied" in r.stderr or "AccessDenied" in r.stderr), (args, r.stderr)
    r = run(*nobody, "get-property", BUS_NAME, path, PROCESS_IFACE, "State", check=False)
    assert r.returncode != 0 and ("Access denied" in r.stderr or "AccessDenied" in r.stderr), r.stderr
    assert [(i, st) for i, st, *_ in listing(mgr, sid)] == [(pid, "running")]
