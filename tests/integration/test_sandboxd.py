# SPDX-License-Identifier: LGPL-2.1-or-later
# sandboxd end to end: the reference flow, limits, isolation, persistence and bad input, through the
# system bus as its users drive it.
import concurrent.futures
import os
import re
import signal
import socket
import shutil
import subprocess
import threading
import time

import dbus
import pytest

from conftest import (BUS_NAME, LONG, MANAGER_IFACE, MANAGER_PATH, Manager, audit_log, dbus_error, run,
                      sandbox_path, systemctl_show, wait_for)

ERR = "org.sandboxd.sandbox1."
INVALID = "org.freedesktop.DBus.Error.InvalidArgs"


def scope_units(sid):
    out = run("systemctl", "list-units", "--all", "--plain", "--no-legend", f"sandbox-{sid}-*").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def uid_processes(uid):
    r = run("pgrep", "-u", str(uid), check=False)
    return [int(p) for p in r.stdout.split()]


def busctl_exec_async(sid, *argv, timeout=10):
    """An Exec through busctl in the background, so the test can look at it while it runs."""
    return subprocess.Popen(["busctl", f"--timeout={timeout + 60}", "call", "--", "org.sandboxd.sandbox1",
                             "/org/sandboxd/sandbox1", "org.sandboxd.sandbox1.Manager", "Exec", "sasa{sv}", sid,
                             str(len(argv)), *argv, "1", "timeout_seconds", "t", str(timeout)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_reference_flow(mgr, sandbox):
    sid, path = sandbox(type="small", name="reference")
    assert re.fullmatch(r"sb_[a-z2-7]{10}", sid)
    assert path == "/org/sandboxd/sandbox1/sandbox/" + sid.replace("_", "_5f")
    props = mgr.props(path)
    assert props["Id"] == sid and props["Name"] == "reference" and props["Type"] == "small"
    assert props["State"] == "running" and props["Unit"] == f"sandbox-{sid}.slice"
    assert props["Owner"] == "uid:0" and props["Network"] == "none"
    uid = int(props["Uid"])
    assert uid >= 1879048192

    mgr.write(sid, "/tmp/task.py", b"import os\nprint('hello from', os.getuid())\nimport time; time.sleep(2)\n")
    p = busctl_exec_async(sid, "python3", "/tmp/task.py", timeout=20)
    try:
        # the scope may exist (made ahead, or just started) before the command is in it: wait until
        # the command itself, past its exec, runs there
        def running_scope():
            for u in scope_units(sid):
                if "-exec-" not in u:
                    continue
                cg = systemctl_show(u, "ControlGroup")["ControlGroup"]
                try:
                    procs = open(f"/sys/fs/cgroup/systemd{cg}/cgroup.procs").read().split()
                    if any(b"/tmp/task.py" in open(f"/proc/{pid}/cmdline", "rb").read() for pid in procs):
                        return u
                except (FileNotFoundError, ProcessLookupError):
                    continue
            return None

        unit = wait_for(running_scope, what="the command in its exec scope")
        assert re.fullmatch(rf"sandbox-{sid}-exec-\d+\.scope", unit)
        show = systemctl_show(unit, "Slice", "TasksMax", "MemoryMax", "RuntimeMaxUSec", "ControlGroup",
                              "TimeoutStopUSec")
        assert show["Slice"] == f"sandbox-{sid}.slice"
        assert show["TasksMax"] == "256"
        assert show["MemoryMax"] == str(1024 ** 3)
        assert show["RuntimeMaxUSec"] == "20s"
        assert show["TimeoutStopUSec"] == "1s"
        procs = open(f"/sys/fs/cgroup/systemd{show['ControlGroup']}/cgroup.procs").read().split()
        assert procs, "the command runs in its scope"
        for pid in procs:
            st = open(f"/proc/{pid}/status").read()
            assert re.search(rf"^Uid:\s+{uid}\s+{uid}\s+{uid}\s+{uid}$", st, re.M), st
            assert re.search(r"^CapEff:\s+0+$", st, re.M) and re.search(r"^NoNewPrivs:\s+1$", st, re.M)
            assert re.search(r"^Seccomp:\s+2$", st, re.M)
        slice_show = systemctl_show(f"sandbox-{sid}.slice", "MemoryMax", "TasksMax", "CPUQuotaPerSecUSec")
        assert slice_show == {"MemoryMax": str(1024 ** 3), "TasksMax": "256", "CPUQuotaPerSecUSec": "1s"}
    finally:
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    # busctl prints the reply as "iayaya{sv} <exit code> <stdout length> <stdout bytes>… …"
    fields = out.split()
    assert fields[:2] == ["iayaya{sv}", "0"], out
    n = int(fields[2])
    assert bytes(int(x) for x in fields[3:3 + n]) == f"hello from {uid}\n".encode()
    code, out, err, info = mgr.exec(sid, ["python3", "/tmp/task.py"])
    assert (code, out, err) == (0, f"hello from {uid}\n".encode(), b"")
    assert not info["timed_out"]
    assert not info["oom_killed"] and int(info["signal"]) == 0 and info["duration_usec"] > 0
    mgr.delete(sid)
    # when DeleteSandbox answers, nothing of the sandbox runs and its files are gone; systemd
    # collects its units right after
    assert sid not in [r[0] for r in mgr.list()]
    assert not os.path.exists(f"/var/lib/sandboxd/sandboxes/{sid}")
    assert uid_processes(uid) == []
    wait_for(lambda: scope_units(sid) == [], what="the units to be collected")


def test_exit_codes_stdin_env_cwd(mgr, sandbox):
    sid, _ = sandbox()
    code, out, err, info = mgr.sh(sid, "echo out; echo err >&2; exit 7")
    assert (code, out, err) == (7, b"out\n", b"err\n")
    code, out, _, _ = mgr.exec(sid, ["cat"], stdin=b"piped\x00bytes")
    assert (code, out) == (0, b"piped\x00bytes")
    code, out, _, _ = mgr.sh(sid, "echo $FOO:$HOME:$USER:$PATH", env={"FOO": "bar"})
    assert out == b"bar:/home/sandbox:sandbox:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
    mgr.sh(sid, "mkdir -p ~/work/sub")
    code, out, _, _ = mgr.exec(sid, ["pwd"], cwd="work/sub")
    assert out == b"/home/sandbox/work/sub\n"
    code, out, err, info = mgr.exec(sid, ["/nonexistent/binary"])
    assert code == 127 and b"cannot execute" in err
    code, _, _, info = mgr.sh(sid, "kill -TERM $$")
    assert code == 128 + signal.SIGTERM and int(info["signal"]) == signal.SIGTERM


def test_clean_environment(mgr, sandbox):
    sid, _ = sandbox()
    code, out, _, _ = mgr.exec(sid, ["env"])
    keys = {line.split("=", 1)[0] for line in out.decode().splitlines()}
    assert keys <= {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "PWD", "SHLVL", "_"}, keys
    for leaked in ("INVOCATION_ID", "NOTIFY_SOCKET", "STATE_DIRECTORY", "JOURNAL_STREAM", "WATCHDOG_USEC",
                   "DBUS_SYSTEM_BUS_ADDRESS", "HARNESS_INSTANCE"):
        assert leaked not in keys


def test_output_cap_and_streaming(mgr, sandbox):
    sid, _ = sandbox()
    code, out, err, info = mgr.sh(sid, "head -c 3000000 /dev/zero")
    assert code == 0 and len(out) == 1024 * 1024 and info["stdout_truncated"] and not info["stderr_truncated"]
    r, w = os.pipe()
    try:
        code, out, err, info = mgr.sh(sid, "echo streamed; echo also >&2", stdout_fd=w, stderr_fd=w)
    finally:
        os.close(w)
    data = os.read(r, 4096)
    os.close(r)
    assert code == 0 and out == b"" and err == b""
    assert sorted(data.decode().split()) == ["also", "streamed"]


def test_files(mgr, sandbox):
    sid, _ = sandbox()
    mgr.write(sid, "notes/a.txt", b"one\n", create_dirs=True, mode=0o600)
    mgr.write(sid, "notes/a.txt", b"two\n", append=True)
    data, info = mgr.read(sid, "/home/sandbox/notes/a.txt")
    assert data == b"one\ntwo\n" and int(info["size"]) == 8 and int(info["mode"]) == 0o600
    data, info = mgr.read(sid, "notes/a.txt", offset=4, length=3)
    assert data == b"two"
    code, out, _, _ = mgr.sh(sid, "stat -c '%U %a' ~/notes/a.txt")
    assert out == b"sandbox 600\n"
    with pytest.raises(dbus.DBusException) as e:
        mgr.read(sid, "/etc/shadow")
    assert dbus_error(e)[0] == ERR + "PermissionDenied"
    with pytest.raises(dbus.DBusException) as e:
        mgr.read(sid, "missing.txt")
    assert dbus_error(e)[0] == ERR + "NoSuchFile"
    with pytest.raises(dbus.DBusException) as e:
        mgr.write(sid, "/usr/bin/evil", b"x")
    assert dbus_error(e)[0] == ERR + "PermissionDenied"
    # a FIFO planted where a file is written neither hangs the call nor gets truncated into
    mgr.sh(sid, "mkfifo ~/pipe")
    with pytest.raises(dbus.DBusException) as e:
        mgr.write(sid, "pipe", b"x")
    assert dbus_error(e) == (INVALID, "Cannot write /home/sandbox/pipe: not a regular file")
    # ReadFile into a caller's fd still reports size and mode
    r, w = os.pipe()
    try:
        data, info = mgr.iface.ReadFile(sid, "notes/a.txt", dbus.Dictionary({"fd": dbus.types.UnixFd(w)},
                                        signature="sv"), timeout=LONG, byte_arrays=True)
    finally:
        os.close(w)
    assert bytes(data) == b"" and os.read(r, 100) == b"one\ntwo\n"
    os.close(r)
    assert int(info["size"]) == 8 and int(info["mode"]) == 0o600
    # /tmp and /var/tmp are two places
    mgr.sh(sid, "touch /tmp/only-in-tmp")
    assert mgr.sh(sid, "ls /var/tmp")[1] == b""
    # a symlink planted in the sandbox leads nowhere outside it
    mgr.sh(sid, "ln -s /var/lib/sandboxd/sandboxd.db ~/db; ln -s /root ~/rootlink")
    with pytest.raises(dbus.DBusException) as e:
        mgr.read(sid, "db")
    assert dbus_error(e)[0] == ERR + "NoSuchFile"


def test_fork_bomb_contained(mgr, sandbox):
    a, _ = sandbox()
    b, _ = sandbox()
    uid = int(mgr.props(mgr.iface.GetSandbox(a))["Uid"])
    bomb = busctl_exec_async(a, "bash", "-c", "b() { b | b & }; b; sleep 60", timeout=5)
    try:
        wait_for(lambda: len(uid_processes(uid)) > 50, what="the fork bomb to spread")
        # another sandbox still answers while the bomb runs
        code, out, _, _ = mgr.exec(b, ["echo", "alive"])
        assert (code, out) == (0, b"alive\n")
        assert bomb.poll() is None, "the bomb's Exec is still running while the other answered"
        out, err = bomb.communicate(timeout=60)
    finally:
        if bomb.poll() is None:
            bomb.kill()
    assert bomb.returncode == 0, err
    assert '"timed_out" b true' in out
    time.sleep(2)
    # only the sandbox's init is left of that uid, beside sandboxd's file helper for the sandbox (a
    # child of sandboxd outside the sandbox's PID namespace, started when it was claimed from the pool)
    sandboxd = int(run("systemctl", "show", "-p", "MainPID", "--value", "sandboxd.service").stdout.strip())
    init = [p for p in uid_processes(uid) if open(f"/proc/{p}/comm").read().strip() == "sandbox-init"]
    assert len(init) == 1, init
    sandbox_pidns = os.readlink(f"/proc/{init[0]}/ns/pid")

    def file_server(p):
        ppid = int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
        return ppid == sandboxd and os.readlink(f"/proc/{p}/ns/pid") != sandbox_pidns

    left = [p for p in uid_processes(uid) if p not in init and not file_server(p)]
    assert left == [], [(p, open(f"/proc/{p}/comm").read().strip()) for p in left]


def test_memory_bomb_oom_killed(mgr, sandbox):
    sid, _ = sandbox()
    code, out, err, info = mgr.exec(sid, ["python3", "-c", "b = bytearray(512 * 1024 * 1024); print('survived')"],
                                    memory_max=64 * 1024 * 1024)
    assert info["oom_killed"], (code, out, err, info)
    assert code == 128 + signal.SIGKILL and out == b""
    # sandboxd is fine, and so is the sandbox
    code, out, _, info = mgr.exec(sid, ["echo", "ok"])
    assert (code, out) == (0, b"ok\n") and not info["oom_killed"]


def test_memory_bomb_in_a_scope_made_for_it(mgr, sandbox):
    """The same while another Exec of the sandbox runs: the bomb's scope is made for it and held by a
    placeholder that shares sandboxd's memory, which must be gone before the command runs (the OOM
    killer, choosing it, would kill sandboxd with it). sandboxd answers, and answers again."""
    sid, _ = sandbox()
    other = busctl_exec_async(sid, "sleep", "5", timeout=30)
    try:
        wait_for(lambda: [u for u in scope_units(sid) if "-exec-" in u], what="the first Exec's scope")
        code, out, err, info = mgr.exec(sid, ["python3", "-c", "b = bytearray(512 * 1024 * 1024)"],
                                        memory_max=64 * 1024 * 1024)
        assert info["oom_killed"], (code, out, err, info)
        assert code == 128 + signal.SIGKILL
    finally:
        out, err = other.communicate(timeout=60)
    assert other.returncode == 0, err
    code, out, _, info = mgr.exec(sid, ["echo", "ok"])
    assert (code, out) == (0, b"ok\n") and not info["oom_killed"]


def test_timeout(mgr, sandbox):
    sid, _ = sandbox()
    code, out, err, info = mgr.sh(sid, "echo started; sleep 30", timeout_seconds=2)
    assert info["timed_out"] and out == b"started\n" and code >= 128


def test_cancel_fd(mgr, sandbox):
    """The caller of an Exec hangs up its cancel_fd (closes the pipe's write end): the command ends at once,
    as its timeout would end it, and the reply comes with what it wrote, exit 128 + the signal, cancelled
    true; its audit row's event is "cancelled". A cancel_fd that is not a pipe or a socket is refused and
    nothing runs."""
    sid, _ = sandbox()
    r, w = os.pipe()
    cancel = dbus.types.UnixFd(r)  # a copy: the message's
    os.close(r)
    result = {}

    def call():
        bus = dbus.SystemBus(private=True)
        try:
            iface = dbus.Interface(bus.get_object(BUS_NAME, MANAGER_PATH, introspect=False), MANAGER_IFACE)
            argv = dbus.Array(["sh", "-c", "echo started; sleep 60; echo never"], signature="s")
            opts = dbus.Dictionary({"cancel_fd": cancel, "timeout_seconds": dbus.UInt64(90)}, signature="sv")
            result["reply"] = iface.Exec(sid, argv, opts, timeout=LONG, byte_arrays=True)
        except dbus.DBusException as e:
            result["error"] = e
        finally:
            bus.close()
    t = threading.Thread(target=call)
    t.start()
    try:
        wait_for(lambda: "error" in result or mgr.exec(sid, ["pgrep", "-x", "sleep"])[0] == 0,
                 what="the command to run")
        assert "error" not in result, result
        os.close(cancel.take())  # ours; sandboxd has its own
    finally:
        os.close(w)
    t.join(timeout=10)
    assert not t.is_alive(), "no reply within 10 s of the hang-up"
    assert "error" not in result, result
    code, out, err, info = result["reply"]
    info = {str(k): v for k, v in info.items()}
    assert info["cancelled"] and not info["timed_out"], info
    assert bytes(out) == b"started\n" and info["signal"] > 0 and code == 128 + info["signal"], (code, out, info)
    # the reply goes out when the command's first process has ended; what it left behind (here the sleep)
    # is being stopped with its scope
    wait_for(lambda: mgr.exec(sid, ["pgrep", "-x", "sleep"])[0] == 1, timeout=10, what="the sleep to be gone")
    rows = wait_for(lambda: [x for x in audit_log(sid, operation="exec") if x["event"] == "cancelled"],
                    timeout=10, what="the audit row")
    assert len(rows) == 1 and "sleep 60" in str(rows[0]["detail"]), rows

    # not a pipe: refused, and nothing ran
    with open("/dev/null") as f:
        with pytest.raises(dbus.DBusException) as e:
            mgr.exec(sid, ["touch", "/tmp/ran"], cancel_fd=f.fileno())
    assert dbus_error(e)[0] == INVALID and "cancel_fd" in dbus_error(e)[1]
    assert mgr.exec(sid, ["test", "-e", "/tmp/ran"])[0] == 1


def test_isolation_between_sandboxes(mgr, sandbox):
    a, _ = sandbox()
    b, _ = sandbox()
    mgr.write(a, "keep.txt", b"a")
    mgr.write(b, "keep.txt", b"b")
    mgr.sh(b, "touch ~/.hidden")
    code, out, err, _ = mgr.sh(a, "rm -rf ~/* ~/.[!.]*; ls -A ~")
    assert out == b""
    assert mgr.read(b, "keep.txt")[0] == b"b"
    assert mgr.sh(b, "ls -A ~")[1] == b".hidden\nkeep.txt\n"
    for path in ["/var/lib/sandboxd", "/root", "/home"]:
        code, out, err, _ = mgr.sh(a, f"ls -A {path}")
        names = out.decode().split()
        assert b not in out.decode() and "sandboxd.db" not in names, (path, out, err)
    assert mgr.sh(a, "ls -A /home")[1] == b"sandbox\n"
    code, _, _, _ = mgr.sh(a, f"cat /var/lib/sandboxd/sandboxes/{b}/home/keep.txt")
    assert code != 0
    # writes to the host's system fail
    code, _, err, _ = mgr.sh(a, "touch /usr/evil /etc/evil /opt/evil")
    assert code != 0 and not os.path.exists("/usr/evil") and not os.path.exists("/etc/evil")


def test_one_sandbox_is_one_machine(mgr, sandbox):
    sid, _ = sandbox()
    mgr.sh(sid, "echo shared > /tmp/x")
    code, out, _, _ = mgr.sh(sid, "sleep 120 >/dev/null 2>&1 & echo $! > /tmp/bg.pid")
    assert code == 0
    code, out, _, _ = mgr.sh(sid, "cat /tmp/x; kill -0 $(cat /tmp/bg.pid) && echo bg-alive; ps -e -o comm=")
    lines = out.decode().split()
    assert lines[:2] == ["shared", "bg-alive"]
    assert set(lines[2:]) <= {"sandbox-init", "sleep", "sh", "ps"}, lines
    code, out, _, _ = mgr.sh(sid, "echo $$; hostname; cat /proc/1/comm")
    assert out.decode().split()[1:] == [sid, "sandbox-init"]
    # the host's /tmp is not the sandbox's
    assert not os.path.exists("/tmp/bg.pid")


def test_network_none_and_host(mgr, sandbox):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    port = srv.getsockname()[1]
    try:
        probe = f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 3); print(\"connected\")'"
        none, _ = sandbox(network="none")
        code, out, err, _ = mgr.sh(none, probe)
        assert code != 0 and b"connected" not in out
        code, out, _, _ = mgr.sh(none, "cat /sys/class/net/lo/operstate; ls /sys/class/net")
        host, _ = sandbox(network="host")
        code, out, err, _ = mgr.sh(host, probe)
        assert (code, out) == (0, b"connected\n"), err
    finally:
        srv.close()


def test_no_bus_from_inside(mgr, sandbox):
    for net in ("none", "host"):
        sid, _ = sandbox(network=net)
        code, out, err, _ = mgr.exec(sid, ["busctl", "--system", "call", "org.sandboxd.sandbox1",
                                           "/org/sandboxd/sandbox1", "org.sandboxd.sandbox1.Manager",
                                           "ListSandboxes"])
        assert code != 0, (out, err)
        code, out, _, _ = mgr.sh(sid, "ls -A /run; test -e /run/dbus/system_bus_socket && echo present")
        assert b"present" not in out


def test_unprivileged_caller_denied(mgr, sandbox):
    before = mgr.list()
    r = run("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "busctl", "call",
            "org.sandboxd.sandbox1", "/org/sandboxd/sandbox1", "org.sandboxd.sandbox1.Manager", "CreateSandbox",
            "a{sv}", "0", check=False)
    assert r.returncode != 0 and ("Access denied" in r.stderr or "AccessDenied" in r.stderr), r.stderr
    assert mgr.list() == before


def test_bad_input(mgr, sandbox):
    sid, _ = sandbox(name="taken")
    before = mgr.list()
    units_before = sorted(scope_units(sid))

    def err(fn, *a, **kw):
        with pytest.raises(dbus.DBusException) as e:
            fn(*a, **kw)
        return dbus_error(e)

    assert err(mgr.exec, "sb_aaaaaaaaaa", ["true"])[0] == ERR + "NoSuchSandbox"
    assert err(mgr.exec, sid, [])[0] == INVALID
    assert err(mgr.exec, sid, [""])[0] == INVALID
    assert err(mgr.exec, sid, ["true"], timeout_seconds=10 ** 9)[0] == ERR + "LimitExceeded"
    assert err(mgr.exec, sid, ["true"], timeout_seconds=2 ** 64 - 1)[0] == INVALID
    assert err(mgr.exec, sid, ["true"], timeout_seconds=0)[0] == INVALID
    assert err(mgr.exec, sid, ["true"], memory_max=2 ** 64 - 1)[0] == ERR + "LimitExceeded"
    assert err(mgr.exec, sid, ["true"], tasks_max=10 ** 6)[0] == ERR + "LimitExceeded"
    assert err(mgr.exec, sid, ["true"], stdin=b"x" * (16 * 1024 * 1024 + 1))[0] == ERR + "LimitExceeded"
    assert err(mgr.exec, sid, ["true"], cwd="/nonexistent")[0] == INVALID
    assert err(mgr.exec, sid, ["true"], bogus="x")[0] == INVALID
    assert err(mgr.exec, sid, ["true"], env={"BAD=NAME": "x"})[0] == INVALID
    with open("/dev/null") as f:
        assert err(mgr.exec, sid, ["true"], cancel_fd=f.fileno())[0] == INVALID
    assert err(mgr.create, name="taken")[0] == ERR + "NameExists"
    assert err(mgr.create, name="../etc")[0] == INVALID
    assert err(mgr.create, type="huge")[0] == INVALID
    assert err(mgr.create, network="bridge")[0] == INVALID
    # network egress and its bad input: test_egress.py
    assert err(mgr.create, ttl_seconds=2 ** 64 - 1)[0] == INVALID
    assert err(mgr.create, ttl_seconds=0)[0] == INVALID
    assert err(mgr.iface.SetTTL, sid, dbus.UInt64(2 ** 64 - 1), dbus.Dictionary({}, signature="sv"))[0] == INVALID
    assert err(mgr.iface.DeleteSandbox, "nope", dbus.Dictionary({}, signature="sv"))[0] == ERR + "NoSuchSandbox"
    assert err(mgr.write, sid, "", b"x")[0] == INVALID
    assert err(mgr.write, sid, "f", b"x", mode=0o4755)[0] == INVALID
    assert err(mgr.iface.GetSandbox, "sb_zzzzzzzzzz")[0] == ERR + "NoSuchSandbox"
    assert mgr.list() == before
    assert sorted(scope_units(sid)) == units_before
    assert sorted(os.listdir("/var/lib/sandboxd/sandboxes")) == sorted(r[0] for r in before)


def test_ttl_expiry(mgr, sandbox):
    sid, path = sandbox(ttl_seconds=3)
    props = mgr.props(path)
    assert props["ExpiresAt"] > props["CreatedAt"]
    uid = int(props["Uid"])
    mgr.sh(sid, "sleep 100 >/dev/null 2>&1 &")
    wait_for(lambda: sid not in [r[0] for r in mgr.list()], what="the TTL to expire")
    wait_for(lambda: scope_units(sid) == [], what="the units to go")
    assert not os.path.exists(f"/var/lib/sandboxd/sandboxes/{sid}")
    assert uid_processes(uid) == []


def test_set_ttl(mgr, sandbox):
    sid, path = sandbox(ttl_seconds=3600)
    mgr.iface.SetTTL(sid, dbus.UInt64(2), dbus.Dictionary({}, signature="sv"))
    assert mgr.props(path)["ExpiresAt"] < mgr.props(path)["CreatedAt"] + 3600 * 10 ** 6
    wait_for(lambda: sid not in [r[0] for r in mgr.list()], what="the new TTL to expire")


def wait_sandboxd_active():
    wait_for(lambda: run("systemctl", "is-active", "sandboxd", check=False).stdout.strip() == "active",
             what="sandboxd to be active")
    wait_for(lambda: run("busctl", "status", "org.sandboxd.sandbox1", check=False).returncode == 0,
             what="sandboxd on the bus")


def test_restart_and_kill9_keep_sandboxes(mgr, sandbox):
    sid, _ = sandbox()
    short, _ = sandbox(ttl_seconds=8)
    mgr.sh(sid, "echo persisted > ~/state; sleep 300 >/dev/null 2>&1 & echo $! > /tmp/bg")
    # after the reply come the sandbox's warm scopes (the next command's and a spare): count them too
    wait_for(lambda: len([u for u in scope_units(sid) if "-exec-" in u]) >= 3, what="the warm scopes")
    n_units = len(scope_units(sid))

    run("systemctl", "restart", "sandboxd")
    wait_sandboxd_active()
    m2 = Manager()
    assert sid in [r[0] for r in m2.list()]
    code, out, _, _ = m2.sh(sid, "cat ~/state; kill -0 $(cat /tmp/bg) && echo bg")
    assert out == b"persisted\nbg\n"

    run("systemctl", "kill", "-s", "KILL", "sandboxd")
    wait_for(lambda: run("systemctl", "show", "-p", "NRestarts", "--value", "sandboxd").stdout.strip() != "0",
             what="sandboxd to be restarted")
    wait_sandboxd_active()
    m3 = Manager()
    rows = {r[0]: r for r in m3.list()}
    assert sid in rows and rows[sid][3] == "running"
    code, out, _, info = m3.sh(sid, "cat ~/state")
    assert out == b"persisted\n"
    # unit numbers never repeat across restarts
    assert len(scope_units(sid)) >= 1 and len(scope_units(sid)) <= n_units + 2
    # the TTL was re-armed
    wait_for(lambda: short not in [r[0] for r in m3.list()], what="the short TTL after restarts")
    wait_for(lambda: scope_units(short) == [], what="its units to go")


SECCOMP_PROBE = r'''
import ctypes, fcntl, os, pty, termios
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(rc):
    return "ok" if rc == 0 or rc > 0 else os.strerror(ctypes.get_errno())
m, s = pty.openpty()
try:
    fcntl.ioctl(s, termios.TIOCSTI, b"x")
    print("tiocsti ok")
except OSError as e:
    print("tiocsti", e.strerror)
print("unshare-user", errno_of(libc.unshare(0x10000000)))
print("keyctl", errno_of(libc.syscall(250, 0, 0, 0, 0, 0)))
print("bpf", errno_of(libc.syscall(321, 0, 0, 0)))
print("mount", errno_of(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)))
print("clone3", errno_of(libc.syscall(435, 0, 0)))
pid = os.fork()
if pid == 0:
    os._exit(0)
print("fork", "ok" if os.waitpid(pid, 0)[1] == 0 else "failed")
'''


def test_seccomp_inside(mgr, sandbox):
    sid, _ = sandbox()
    code, out, err, _ = mgr.exec(sid, ["python3", "-c", SECCOMP_PROBE])
    got = dict(line.split(" ", 1) for line in out.decode().splitlines())
    assert got == {"tiocsti": "Operation not permitted", "unshare-user": "Operation not permitted",
                   "keyctl": "Operation not permitted", "bpf": "Operation not permitted",
                   "mount": "Operation not permitted", "clone3": "Function not implemented",
                   "fork": "ok"}, (out, err)


def test_delete_does_not_follow_planted_symlinks(mgr, sandbox, tmp_path):
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "precious").write_text("keep me")
    os.chmod(tmp_path, 0o755)
    sid, _ = sandbox(network="none")
    # The sandbox cannot see the host's /tmp; it plants links to where that directory is on the host,
    # hoping that the root-run cleanup follows them.
    mgr.sh(sid, f"ln -s {canary} ~/link; ln -s {canary}/precious ~/file; mkdir -p ~/d; ln -s / ~/d/root")
    ws = f"/var/lib/sandboxd/sandboxes/{sid}"
    assert os.path.islink(sandbox_path(sid, "/home/sandbox/link"))  # on its disk image, out of the way
    mgr.delete(sid)
    assert (canary / "precious").read_text() == "keep me"
    assert not os.path.exists(ws)


def test_parallel_execs(mgr, sandbox):
    sid, _ = sandbox()
    procs = [busctl_exec_async(sid, "sh", "-c", f"sleep 1; echo {i}", timeout=30) for i in range(20)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    assert all('"timed_out" b false' in o[0] for o in outs)


def test_bus_activation(mgr, sandbox):
    run("systemctl", "stop", "sandboxd")
    assert run("systemctl", "is-active", "sandboxd", check=False).stdout.strip() != "active"
    sid, _ = Manager().create(type="small")  # activates it
    assert run("systemctl", "is-active", "sandboxd").stdout.strip() == "active"
    Manager().delete(str(sid))


def test_unadoptable_sandbox_is_cleaned_up(mgr, sandbox):
    sid, path = sandbox()
    uid = int(mgr.props(path)["Uid"])
    run("systemctl", "stop", "sandboxd")
    # while sandboxd is away, the sandbox's init dies
    run("systemctl", "stop", f"sandbox-{sid}-init.scope")
    run("systemctl", "start", "sandboxd")
    wait_sandboxd_active()
    m = Manager()
    wait_for(lambda: sid not in [r[0] for r in m.list()], what="the orphaned sandbox to be removed")
    wait_for(lambda: scope_units(sid) == [], what="its units to go")
    assert not os.path.exists(f"/var/lib/sandboxd/sandboxes/{sid}")
    assert uid_processes(uid) == []


def assert_refused_at_start(dropin, text, reason):
    """A drop-in that keeps sandboxd from starting, with the reason in the journal; it is removed and
    sandboxd started again afterwards."""
    with open(dropin, "w") as f:
        f.write(text)
    try:
        assert run("systemctl", "restart", "sandboxd", check=False).returncode != 0
        log = run("journalctl", "-u", "sandboxd", "-n", "20", "--no-pager").stdout
        assert reason in log, log
    finally:
        os.unlink(dropin)
        run("systemctl", "reset-failed", "sandboxd", check=False)
        run("systemctl", "restart", "sandboxd")
        wait_sandboxd_active()


def test_config_dropin(mgr):
    os.makedirs("/etc/sandboxd/sandboxd.conf.d", exist_ok=True)
    dropin = "/etc/sandboxd/sandboxd.conf.d/50-test.conf"
    with open(dropin, "w") as f:
        f.write("[Type:small]\nTasksMax=64\nMemoryMax=256M\n\n[Type:tiny]\nTasksMax=16\nMemoryMax=64M\n")
    try:
        run("systemctl", "restart", "sandboxd")
        wait_sandboxd_active()
        m = Manager()
        sid, _ = m.create(type="tiny")
        sid = str(sid)
        try:
            show = systemctl_show(f"sandbox-{sid}.slice", "TasksMax", "MemoryMax")
            assert show == {"TasksMax": "16", "MemoryMax": str(64 * 1024 * 1024)}
            with pytest.raises(dbus.DBusException) as e:
                m.exec(sid, ["true"], tasks_max=17)
            assert dbus_error(e)[0] == ERR + "LimitExceeded"
        finally:
            m.delete(sid)
    finally:
        os.unlink(dropin)
        run("systemctl", "restart", "sandboxd")
        wait_sandboxd_active()
    # a broken configuration keeps sandboxd from starting, with the reason in the journal
    assert_refused_at_start(dropin, "[Manager]\nUidMin=0\n", "50-test.conf")


def test_hide_paths(mgr):
    """HidePaths= hides more of the host: a directory shows empty, a file empty and read-only; a missing
    path is skipped, a symlink is not followed; sandboxes made before keep their view."""
    base = "/srv/hide-test"
    os.makedirs(f"{base}/dir", exist_ok=True)
    for path, text in ((f"{base}/dir/secret", "dir secret"), (f"{base}/file", "file secret")):
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)
    if not os.path.islink(f"{base}/link"):
        os.symlink(f"{base}/file", f"{base}/link")
    show = f"ls -A {base}/dir; cat {base}/file; echo; readlink {base}/link"
    m = Manager()
    before, _ = m.create(type="small")
    before = str(before)
    dropin = "/etc/sandboxd/sandboxd.conf.d/50-hide.conf"
    try:
        assert m.sh(before, show)[1] == f"secret\nfile secret\n{base}/file\n".encode()  # visible without it
        with open(dropin, "w") as f:
            f.write(f"[Manager]\nHidePaths={base}/dir {base}/file\nHidePaths={base}/link {base}/missing\n")
        run("systemctl", "restart", "sandboxd")
        wait_sandboxd_active()
        m = Manager()
        sid, _ = m.create(type="small", network="host")  # made now, not from the pool of before
        sid = str(sid)
        try:
            code, out, err, _ = m.sh(sid, show)
            assert code == 0, err
            assert out == f"\n{base}/file\n".encode(), out  # empty directory, empty file, the link kept
            code, _, err, _ = m.sh(sid, f"echo x > {base}/file")
            assert code != 0 and b"Read-only file system" in err, err
            code, _, err, _ = m.sh(sid, f"touch {base}/dir/new")
            assert code != 0, err
            # what the sandbox sees is its own: the host's files are as they were
            assert open(f"{base}/file").read() == "file secret"
            assert os.listdir(f"{base}/dir") == ["secret"]
            # a sandbox made before the change keeps its view
            assert m.sh(before, f"cat {base}/file")[1] == b"file secret"
        finally:
            m.delete(sid)
    finally:
        if os.path.exists(dropin):
            os.unlink(dropin)
        run("systemctl", "restart", "sandboxd")
        wait_sandboxd_active()
        Manager().delete(before)
    # a path that would break every sandbox keeps sandboxd from starting, with the reason
    assert_refused_at_start(dropin, "[Manager]\nHidePaths=/usr\n", "Invalid HidePaths= path /usr")


def test_warm_scope(mgr, sandbox):
    """After an Exec, the next one's scope is made ahead; a command moved into it is confined and
    limited exactly like one in a fresh scope, and nothing but the command is in it."""
    sid, path = sandbox()
    uid = int(mgr.props(path)["Uid"])
    first = str(mgr.exec(sid, ["true"])[3]["unit"])
    # the first Exec's own scope may still be active for a moment after its reply: skip it
    warm = wait_for(lambda: [u for u in scope_units(sid) if "-exec-" in u and u != first and
                             systemctl_show(u, "ActiveState")["ActiveState"] == "active"],
                    what="a warm scope")[0]
    # systemd 252 takes RuntimeMaxUSec only at creation: a warm scope carries an upper bound
    assert systemctl_show(warm, "RuntimeMaxUSec")["RuntimeMaxUSec"] == "1h 6min"
    p = busctl_exec_async(sid, "sleep", "3", timeout=20)
    try:
        def running():
            cg = systemctl_show(warm, "ControlGroup")["ControlGroup"]
            procs = open(f"/sys/fs/cgroup/systemd{cg}/cgroup.procs").read().split()
            comms = [open(f"/proc/{x}/comm").read().strip() for x in procs]
            return procs if comms == ["sleep"] else None
        procs = wait_for(running, what="the command, alone, in the warm scope")
        st = open(f"/proc/{procs[0]}/status").read()
        assert re.search(rf"^Uid:\s+{uid}\s+{uid}\s+{uid}\s+{uid}$", st, re.M)
        assert re.search(r"^Seccomp:\s+2$", st, re.M) and re.search(r"^CapEff:\s+0+$", st, re.M)
        cg = open(f"/proc/{procs[0]}/cgroup").read()
        assert f"memory:/sandbox.slice/sandbox-{sid}.slice/{warm}" in cg
        assert f"pids:/sandbox.slice/sandbox-{sid}.slice/{warm}" in cg
        show = systemctl_show(warm, "TasksMax", "MemoryMax")
        assert show["TasksMax"] == "256" and show["MemoryMax"] == str(1024 ** 3)
    finally:
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and f'"unit" s "{warm}"' in out, (out, err)
    # a warm scope honours the Exec's timeout: sandboxd stops it at the deadline
    p = busctl_exec_async(sid, "sh", "-c", "sleep 100 & sleep 100", timeout=2)
    out, err = p.communicate(timeout=60)
    assert '"timed_out" b true' in out, (out, err)
    unit = re.search(r'"unit" s "([^"]+)"', out)[1]
    wait_for(lambda: systemctl_show(unit, "ActiveState")["ActiveState"] != "active", what="the scope to stop")


def test_execs_at_once_get_scopes_made_for_them(mgr, sandbox):
    """An Exec that comes while another of the sandbox runs and finds no warm scope ready gets a scope
    made for it, with its own limits and its exact timeout (not a warm scope's bound), and its command
    runs there alone: the placeholder that held the scope is gone. No two Execs share a scope."""
    sid, _ = sandbox()
    first = busctl_exec_async(sid, "sleep", "6", timeout=30)
    try:
        # while it runs (and before any Exec was answered, so no warm scope exists yet) come six more
        wait_for(lambda: [u for u in scope_units(sid) if "-exec-" in u], what="the first Exec's scope")
        others = [busctl_exec_async(sid, "sleep", "3", timeout=9) for _ in range(6)]
        try:
            def all_running():
                units = {}
                for u in scope_units(sid):
                    if "-exec-" not in u:
                        continue
                    cg = systemctl_show(u, "ControlGroup")["ControlGroup"]
                    try:
                        procs = open(f"/sys/fs/cgroup/systemd{cg}/cgroup.procs").read().split()
                        comms = [open(f"/proc/{x}/comm").read().strip() for x in procs]
                    except (FileNotFoundError, ProcessLookupError):
                        return None
                    units[u] = comms
                running = [u for u, comms in units.items() if comms == ["sleep"]]
                return running if len(running) == 7 else None
            running = wait_for(all_running, what="seven commands, each alone in its scope")
            for u in running:
                show = systemctl_show(u, "TasksMax", "MemoryMax", "RuntimeMaxUSec", "Slice")
                assert show["Slice"] == f"sandbox-{sid}.slice"
                assert (show["TasksMax"], show["MemoryMax"]) == ("256", str(1024 ** 3))
                assert show["RuntimeMaxUSec"] in ("30s", "9s"), (u, show)
            assert sorted(systemctl_show(u, "RuntimeMaxUSec")["RuntimeMaxUSec"] for u in running) == \
                ["30s"] + ["9s"] * 6
        finally:
            results = [p.communicate(timeout=60) for p in others]
    finally:
        out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    units = [re.search(r'"unit" s "([^"]+)"', out)[1]]
    for p, (out, err) in zip(others, results):
        assert p.returncode == 0 and out.startswith("iayaya{sv} 0 "), (out, err)
        units.append(re.search(r'"unit" s "([^"]+)"', out)[1])
    assert len(set(units)) == 7 and set(units) == set(running)


def test_many_clients_exec_in_one_sandbox(mgr, sandbox):
    """Sixteen clients each run twelve short commands back to back in one sandbox: the warm scopes are
    taken, made and reused while worker threads clone the children and the event loop goes on. Every
    call answers with the command's own result, each in a scope of its own, and nothing is left."""
    sid, _ = sandbox()

    def client(k):
        results = []
        for i in range(12):
            p = busctl_exec_async(sid, "sh", "-c", f"echo {k}-{i}", timeout=20)
            out, err = p.communicate(timeout=90)
            results.append((p.returncode, out, err))
        return results

    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        all_results = [r for rs in pool.map(client, range(16)) for r in rs]
    units = []
    for k in range(16):
        for i in range(12):
            rc, out, err = all_results[k * 12 + i]
            said = f"{k}-{i}\n".encode()
            assert rc == 0, (k, i, out, err)
            assert out.startswith(f"iayaya{{sv}} 0 {len(said)} " + " ".join(map(str, said)) + " 0 "), (k, i, out)
            units.append(re.search(r'"unit" s "([^"]+)"', out)[1])
    assert len(set(units)) == len(units) == 16 * 12
    # no command is left behind: their scopes go (the warm ones, made ahead, hold no command)
    def still_active():
        out = run("systemctl", "list-units", "--plain", "--no-legend", f"sandbox-{sid}-*").stdout
        return [line.split()[0] for line in out.splitlines() if line.split() and line.split()[0] in set(units)]
    wait_for(lambda: still_active() == [], what="the commands' scopes to go")
    assert run("systemctl", "is-active", "sandboxd").stdout.strip() == "active"


def test_back_to_back_execs_cost_one_scope_each(mgr, sandbox):
    """A client that runs commands back to back sends each right after the previous reply, while the
    sandbox's next warm scope is still being made: the Exec waits for that one rather than forking a
    child of its own and asking systemd for a second scope. Scopes are numbered in the order they are
    asked for, so N commands span N numbers (N and a half of them when each second Exec made its own)."""
    sid, _ = sandbox()
    n = 30
    numbers = []
    for _ in range(n):
        code, _, _, info = mgr.exec(sid, ["true"])
        assert code == 0
        numbers.append(int(re.fullmatch(rf"sandbox-{sid}-exec-(\d+)\.scope", str(info["unit"]))[1]))
    assert numbers == sorted(numbers) and len(set(numbers)) == n
    assert numbers[-1] - numbers[0] <= n, numbers


def test_a_spare_warm_scope_for_the_next_command(mgr, sandbox):
    """After an Exec, the sandbox has two warm scopes: the next command finds one ready while the one
    asked for at the reply is still being made, and the command after it finds the other."""
    sid, _ = sandbox()
    code, _, _, info = mgr.exec(sid, ["true"])
    assert code == 0
    n = int(re.fullmatch(rf"sandbox-{sid}-exec-(\d+)\.scope", str(info["unit"]))[1])
    spare = {f"sandbox-{sid}-exec-{n + 1}.scope", f"sandbox-{sid}-exec-{n + 2}.scope"}
    wait_for(lambda: spare <= set(scope_units(sid)), what="two warm scopes")
    assert systemctl_show(f"sandbox-{sid}-exec-{n + 2}.scope", "ActiveState")["ActiveState"] == "active"
    used = [str(mgr.exec(sid, ["true"])[3]["unit"]) for _ in range(2)]
    assert set(used) == spare, used


def test_delete_while_execs_start(mgr, sandbox):
    """DeleteSandbox while dozens of Execs of the sandbox are being started (some cloned by worker
    threads right then): every call gets an answer (the command's or an error), the sandbox and all
    its processes and units go, and sandboxd goes on serving."""
    sid, path = sandbox()
    uid = int(mgr.props(path)["Uid"])
    mgr.exec(sid, ["true"])  # a warm scope, and so the worker path, for the first of them
    procs = [busctl_exec_async(sid, "sleep", "0.3", timeout=20) for _ in range(40)]
    time.sleep(0.2)
    mgr.delete(sid)
    for p in procs:
        out, err = p.communicate(timeout=90)
        # answered by sandboxd (the command's result, or an error saying why), not by busctl's timeout
        if p.returncode == 0:
            assert out.startswith("iayaya{sv} "), out
        else:
            assert err.strip() and "timed out" not in err.lower(), err
    assert sid not in [r[0] for r in mgr.list()]
    wait_for(lambda: scope_units(sid) == [], what="the sandbox's units to go")
    assert uid_processes(uid) == []
    sid2, _ = sandbox()
    assert mgr.exec(sid2, ["echo", "still here"])[1] == b"still here\n"


def test_user_survives_host_account_changes(mgr, sandbox):
    """The host replaces /etc/passwd and /etc/group by rename whenever an account changes; a sandbox
    made before that (a pooled one, say) keeps its own user and groups, and never sees the host's."""
    sid, _ = sandbox()
    before = mgr.sh(sid, "id -un; id -gn; cat /etc/passwd /etc/group")[1]
    assert before.startswith(b"sandbox\nsandbox\n")
    for f in ("/etc/passwd", "/etc/group"):
        shutil.copy2(f, f + ".test-new")
        os.rename(f + ".test-new", f)  # what useradd, systemd-sysusers and vipw do
    code, after, err, _ = mgr.sh(sid, "id -un; id -gn; cat /etc/passwd /etc/group; test -s /etc/os-release")
    assert code == 0, err
    assert after == before
    assert b"sandbox-audit" not in after and b"sandbox-admin" not in after
