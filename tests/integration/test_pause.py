# SPDX-License-Identifier: LGPL-2.1-or-later
# Issue 26: PauseSandbox / ResumeSandbox over the bus and sandboxctl. A counting loop stops (its file and the
# slice's CPU time frozen) and goes on after; the TTL does not run while paused; calls that need the sandbox
# running get SandboxPaused, or resume it (AutoResume=yes); IdlePauseSec=; a running Exec's timeout held;
# kept across a restart of sandboxd; deletion of a paused sandbox; the rows; PropertiesChanged.
import json
import os
import subprocess
import time

import dbus
import pytest

from conftest import LONG, audit_log, dbus_error, run, sandbox_path, systemctl_show, wait_for
from test_sandbox_properties import collect_changes
from test_sandboxd import wait_sandboxd_active

PAUSED = "org.sandboxd.sandbox1.SandboxPaused"
DROPIN = "/etc/sandboxd/sandboxd.conf.d/50-pause-test.conf"
CTX = dbus.Dictionary({}, signature="sv")
COUNTER = ("i=0; while :; do i=$((i+1)); echo $i > /tmp/count.tmp; mv /tmp/count.tmp /tmp/count; done "
           ">/dev/null 2>&1 &")


def restart_sandboxd():
    run("systemctl", "reset-failed", "sandboxd.service", check=False)
    run("systemctl", "restart", "sandboxd.service")
    wait_sandboxd_active()


@pytest.fixture(scope="module", autouse=True)
def pause_types():
    os.makedirs(os.path.dirname(DROPIN), exist_ok=True)
    with open(DROPIN, "w") as f:
        f.write("[Type:autoresume]\nAutoResume=yes\n\n[Type:idler]\nIdlePauseSec=2\nAutoResume=yes\n")
    restart_sandboxd()
    yield
    os.unlink(DROPIN)
    restart_sandboxd()


def pause(mgr, sid, **ctx):
    mgr.iface.PauseSandbox(sid, dbus.Dictionary(ctx, signature="sv"), timeout=LONG)


def resume(mgr, sid, **ctx):
    mgr.iface.ResumeSandbox(sid, dbus.Dictionary(ctx, signature="sv"), timeout=LONG)


def cgroup(sid, name):
    with open(f"/sys/fs/cgroup/unified/sandbox.slice/sandbox-{sid}.slice/{name}") as f:
        return f.read()


def frozen(sid):
    return "frozen 1" in cgroup(sid, "cgroup.events")


def cpu_usec(sid):
    return int(dict(line.split() for line in cgroup(sid, "cpu.stat").splitlines())["usage_usec"])


def count(sid):
    with open(sandbox_path(sid, "/tmp/count")) as f:
        return int(f.read().strip() or 0)


def start_counter(mgr, sid):
    assert mgr.sh(sid, COUNTER)[0] == 0
    first = wait_for(lambda: os.path.exists(sandbox_path(sid, "/tmp/count")) and count(sid), what="the counter")
    wait_for(lambda: count(sid) > first, what="the counter to advance")


def test_pause_freezes_everything_and_resume_goes_on(mgr, sandbox):
    sid, path = sandbox()
    start_counter(mgr, sid)
    pause(mgr, sid)
    # answered once the kernel says frozen
    assert frozen(sid)
    props = mgr.props(path)
    assert (str(props["State"]), bool(props["Paused"])) == ("paused", True)
    assert int(props["PausedAt"]) > 0
    assert [r for r in mgr.list() if r[0] == sid][0][3] == "paused"
    c, cpu = count(sid), cpu_usec(sid)
    time.sleep(1)  # a loop that runs bumps its counter many thousand times in this second
    assert count(sid) == c, "the counter advanced while paused"
    # The kernel may still account the last slices before the freeze (a few hundred µs seen); the loop,
    # running, would add about a CPU-second here.
    used = cpu_usec(sid) - cpu
    assert used < 20000, f"the slice used {used} µs of CPU while paused"
    resume(mgr, sid)
    assert not frozen(sid)
    props = mgr.props(path)
    assert (str(props["State"]), bool(props["Paused"]), int(props["PausedAt"])) == ("running", False, 0)
    wait_for(lambda: count(sid) > c, what="the counter to go on after resume")
    assert cpu_usec(sid) > cpu
    rows = wait_for(lambda: audit_log(sid, operation="sandbox.resume") and audit_log(sid), what="the rows")
    ops = [(str(r["operation"]), str(r["event"])) for r in rows]
    assert ("sandbox.pause", "finished") in ops and ("sandbox.resume", "finished") in ops
    resumed = json.loads(str([r for r in rows if r["operation"] == "sandbox.resume"][0]["detail"]))
    assert resumed["reason"] == "request" and resumed["paused_usec"] >= 10 ** 6


def test_calls_refused_while_paused(mgr, sandbox):
    sid, path = sandbox()
    mgr.write(sid, "/tmp/f", b"hello\n")
    pause(mgr, sid, request_id="req_pause_test")
    calls = {
        "exec": lambda: mgr.sh(sid, "true"),
        "write": lambda: mgr.write(sid, "/tmp/g", b"x"),
        "read": lambda: mgr.read(sid, "/tmp/f"),
        "view": lambda: mgr.iface.View(sid, "/tmp/f", CTX, timeout=LONG),
        "takeover": lambda: mgr.iface.OpenShell(sid, CTX, timeout=LONG),
        "process.start": lambda: mgr.iface.StartProcess(sid, ["sleep", "1"], CTX, timeout=LONG),
    }
    for op, call in calls.items():
        with pytest.raises(dbus.DBusException) as e:
            call()
        name, msg = dbus_error(e)
        assert name == PAUSED, (op, name, msg)
        assert "paused" in msg
    # each refusal is on the record
    rows = wait_for(lambda: len(audit_log(sid)) >= 8 and audit_log(sid), what="the refusals' rows")
    for op in calls:
        failed = [r for r in rows if r["operation"] == op and r["event"] == "failed"]
        assert failed and json.loads(str(failed[0]["detail"]))["error"] == PAUSED, op
    # what does not need it running still works, and nothing of it thawed the sandbox
    mgr.iface.SetTTL(sid, dbus.UInt64(600), CTX)
    pause(mgr, sid)  # again: nothing changes
    assert frozen(sid) and bool(mgr.props(path)["Paused"])
    resume(mgr, sid)
    resume(mgr, sid)  # again: nothing changes
    assert mgr.read(sid, "/tmp/f")[0] == b"hello\n"
    rows = wait_for(lambda: audit_log(sid, operation="sandbox.pause"), what="the pause rows")
    assert "req_pause_test" in [str(r["request_id"]) for r in rows]


def test_bad_input(mgr, sandbox):
    sid, _ = sandbox()
    for method in (mgr.iface.PauseSandbox, mgr.iface.ResumeSandbox):
        with pytest.raises(dbus.DBusException) as e:
            method("sb_nosuchthing", CTX)
        assert dbus_error(e)[0] == "org.sandboxd.sandbox1.NoSuchSandbox"
        with pytest.raises(dbus.DBusException) as e:
            method(sid, dbus.Dictionary({"source": "martian"}, signature="sv"))
        assert dbus_error(e)[0] == "org.freedesktop.DBus.Error.InvalidArgs"
    assert not frozen(sid)
    assert mgr.sh(sid, "echo ok")[1] == b"ok\n"


def test_ttl_does_not_run_while_paused(mgr, sandbox):
    sid, path = sandbox(ttl_seconds=6)
    before = int(mgr.props(path)["ExpiresAt"])
    pause(mgr, sid)
    paused_from = time.monotonic()
    time.sleep(8)  # longer than its TTL: a running sandbox would be gone
    assert sid in [r[0] for r in mgr.list()]
    assert int(mgr.props(path)["ExpiresAt"]) == before
    paused_for = time.monotonic() - paused_from
    resume(mgr, sid)
    after = int(mgr.props(path)["ExpiresAt"])
    assert after - before >= paused_for * 10 ** 6, (before, after, paused_for)
    print(f"paused {paused_for:.2f} s; expiry moved {(after - before) / 1e6:.2f} s")
    # and it runs out in running time
    wait_for(lambda: sid not in [r[0] for r in mgr.list()], timeout=60, what="the TTL to expire")
    wait_for(lambda: audit_log(sid, operation="sandbox.expire"), what="the expiry row")


def test_set_ttl_while_paused_counts_from_resume(mgr, sandbox):
    sid, path = sandbox(ttl_seconds=600)
    pause(mgr, sid)
    mgr.iface.SetTTL(sid, dbus.UInt64(3600), CTX)
    time.sleep(2)
    resume(mgr, sid)
    resumed_at = time.time()
    left = int(mgr.props(path)["ExpiresAt"]) / 1e6 - resumed_at
    assert 3590 < left <= 3600, left


def test_properties_changed(mgr, sandbox):
    sid, path = sandbox()
    changes = collect_changes(path, lambda: pause(mgr, sid), lambda c: any("Paused" in ch for ch, _ in c))
    assert any(ch.get("State") == "paused" for ch, _ in changes), changes
    assert any(ch.get("Paused") is not None and bool(ch["Paused"]) for ch, _ in changes), changes
    changes = collect_changes(path, lambda: resume(mgr, sid),
                              lambda c: any(ch.get("State") == "running" for ch, _ in c))
    assert any(ch.get("State") == "running" for ch, _ in changes), changes


def exec_in_background(sid, script, timeout_seconds):
    """busctl's Exec in a child, so that the test can pause meanwhile; its JSON reply."""
    return subprocess.Popen(["busctl", "--timeout=120", "--json=short", "call", "--", "org.sandboxd.sandbox1",
                             "/org/sandboxd/sandbox1", "org.sandboxd.sandbox1.Manager", "Exec", "sasa{sv}", sid,
                             "3", "sh", "-c", script, "1", "timeout_seconds", "t", str(timeout_seconds)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def exec_reply(p):
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    code, _, _, info = json.loads(out)["data"]
    return code, {k: v["data"] for k, v in info.items()}


def running_exec_unit(sid):
    out = run("systemctl", "list-units", "--no-legend", "--plain", f"sandbox-{sid}-exec-*").stdout
    return [line.split()[0] for line in out.splitlines()]


def test_running_exec_timeout_is_held_while_paused(mgr, sandbox):
    sid, _ = sandbox()
    mgr.sh(sid, "true")  # the next command gets a warm scope (systemd's bound: the type's longest timeout)
    p = exec_in_background(sid, "touch /tmp/started; sleep 2; echo done", 3)
    wait_for(lambda: os.path.exists(sandbox_path(sid, "/tmp/started")), what="the command to start")
    pause(mgr, sid)
    units = [u for u in running_exec_unit(sid)
             if systemctl_show(u, "ActiveState")["ActiveState"] == "active"]
    bounds = [systemctl_show(u, "RuntimeMaxUSec")["RuntimeMaxUSec"] for u in units]
    print("exec scopes while paused:", units, bounds)
    time.sleep(5)  # longer than its 3 s timeout: without the hold it would time out while paused
    assert p.poll() is None, "the command ended while its sandbox was paused"
    resume(mgr, sid)
    code, info = exec_reply(p)
    assert (code, info["timed_out"]) == (0, False), info
    exec_row = wait_for(lambda: audit_log(sid, operation="exec"), what="the exec rows")[0]
    assert str(exec_row["event"]) == "finished"

    # a command that outlives its timeout in running time still times out, later by the pause
    p = exec_in_background(sid, "touch /tmp/started2; sleep 100", 3)
    wait_for(lambda: os.path.exists(sandbox_path(sid, "/tmp/started2")), what="the command to start")
    started = time.monotonic()
    pause(mgr, sid)
    time.sleep(4)
    resume(mgr, sid)
    code, info = exec_reply(p)
    took = time.monotonic() - started
    assert info["timed_out"] is True, info
    assert took >= 3 + 4 - 0.5, took  # its 3 s of running time came after the 4 s pause


def test_kept_across_a_restart(mgr, sandbox):
    sid, path = sandbox(ttl_seconds=600)
    start_counter(mgr, sid)
    pause(mgr, sid)
    expires = int(mgr.props(path)["ExpiresAt"])
    restart_sandboxd()
    props = mgr.props(path)
    assert (str(props["State"]), bool(props["Paused"])) == ("paused", True)
    assert int(props["ExpiresAt"]) == expires
    assert frozen(sid)
    c = count(sid)
    time.sleep(1)
    assert count(sid) == c
    with pytest.raises(dbus.DBusException) as e:
        mgr.sh(sid, "true")
    assert dbus_error(e)[0] == PAUSED
    resume(mgr, sid)
    wait_for(lambda: count(sid) > c, what="the counter to go on")
    # and a kill -9 with it paused, too
    pause(mgr, sid)
    pid = run("systemctl", "show", "-p", "MainPID", "--value", "sandboxd.service").stdout.strip()
    os.kill(int(pid), 9)
    wait_for(lambda: run("systemctl", "show", "-p", "MainPID", "--value", "sandboxd.service").stdout.strip()
             not in ("0", pid), timeout=60, what="sandboxd to be started again")
    wait_sandboxd_active()
    assert bool(mgr.props(path)["Paused"]) and frozen(sid)
    resume(mgr, sid)
    assert mgr.sh(sid, "echo ok")[1] == b"ok\n"


def test_delete_while_paused(mgr, sandbox):
    sid, _ = sandbox()
    start_counter(mgr, sid)
    pause(mgr, sid)
    mgr.delete(sid)
    assert sid not in [r[0] for r in mgr.list()]
    wait_for(lambda: not os.path.exists(f"/sys/fs/cgroup/unified/sandbox.slice/sandbox-{sid}.slice"),
             what="the slice's cgroup to go")


def test_auto_resume(mgr, sandbox):
    sid, path = sandbox(type="autoresume")
    mgr.write(sid, "/tmp/f", b"kept\n")
    pause(mgr, sid)
    assert frozen(sid)
    code, out, _, _ = mgr.sh(sid, "cat /tmp/f")
    assert (code, out) == (0, b"kept\n")
    assert not bool(mgr.props(path)["Paused"]) and not frozen(sid)
    row = wait_for(lambda: audit_log(sid, operation="sandbox.resume"), what="the resume row")[0]
    assert json.loads(str(row["detail"]))["reason"] == "exec"


def test_idle_pause(mgr, sandbox):
    sid, path = sandbox(type="idler")
    # busy: a command running longer than IdlePauseSec= keeps it running
    code, out, _, _ = mgr.sh(sid, "sleep 3; echo awake")
    assert out == b"awake\n"
    wait_for(lambda: bool(mgr.props(path)["Paused"]), timeout=30, what="the idle pause")
    assert frozen(sid)
    row = wait_for(lambda: audit_log(sid, operation="sandbox.pause"), what="the pause row")[0]
    detail = json.loads(str(row["detail"]))
    assert detail["reason"] == "idle" and str(row["account_id"]) == "system"
    # AutoResume=yes: the next call wakes it
    assert mgr.sh(sid, "echo again")[1] == b"again\n"
    assert not bool(mgr.props(path)["Paused"])


def ctl(*args, check=True):
    return run("sandboxctl", *args, check=check)


def test_sandboxctl(mgr, sandbox):
    sid, path = sandbox()
    r = ctl("pause", sid)
    assert r.returncode == 0 and bool(mgr.props(path)["Paused"])
    assert "paused" in ctl("list").stdout
    assert json.loads(ctl("status", "--json", sid).stdout)["state"] == "paused"
    r = ctl("exec", sid, "--", "true", check=False)
    assert r.returncode != 0 and "paused" in r.stderr
    assert ctl("resume", sid).returncode == 0 and not bool(mgr.props(path)["Paused"])
    r = ctl("pause", "sb_nosuchthing", check=False)
    assert r.returncode != 0 and "sb_nosuchthing" in r.stderr
    r = ctl("pause", check=False)
    assert r.returncode != 0


def xml_members(mgr, path, iface_name):
    """(methods, properties) of iface_name as dbus/org.sandboxd.sandbox1.xml has them, and as the object at path
    serves them."""
    import xml.etree.ElementTree as ET

    def members(root):
        [iface] = [i for i in root.iter("interface") if i.get("name") == iface_name]
        methods = {m.get("name"): [(a.get("direction", "in"), a.get("type"), a.get("name")) for a in m.iter("arg")]
                   for m in iface.iter("method")}
        return methods, {p.get("name"): p.get("type") for p in iface.iter("property")}

    src = ET.parse(os.path.join(os.path.dirname(__file__), "..", "..", "dbus", "org.sandboxd.sandbox1.xml")).getroot()
    obj = mgr.bus.get_object("org.sandboxd.sandbox1", path, introspect=False)
    served = ET.fromstring(str(obj.Introspect(dbus_interface="org.freedesktop.DBus.Introspectable")))
    return members(src), members(served)


def test_xml_contract_is_what_is_served(mgr, sandbox):
    (want, _), (got, _) = xml_members(mgr, "/org/sandboxd/sandbox1", "org.sandboxd.sandbox1.Manager")
    for name in ("PauseSandbox", "ResumeSandbox"):
        assert got[name] == want[name], name
    sid, spath = sandbox()
    (_, wprops), (_, sprops) = xml_members(mgr, spath, "org.sandboxd.sandbox1.Sandbox")
    assert (sprops["Paused"], sprops["PausedAt"]) == (wprops["Paused"], wprops["PausedAt"]) == ("b", "t")


def test_rest_routes(mgr):
    """POST …/pause and …/resume through the gateway: the object, 409 sandbox_paused, the action's scope."""
    import requests
    run("systemctl", "start", "sandbox-auditd.service", "sandbox-gatewayd.socket")
    base = "http://127.0.0.1:8790"

    def key(*args):
        return json.loads(ctl("api-key", "create", *args, "--ttl", "1h", "--json").stdout)["secret"]

    runner = {"Authorization": "Bearer " + key("--preset", "runner")}
    sb = wait_for(lambda: requests.post(f"{base}/v1/sandboxes", json={"type": "small", "ttl_seconds": 600},
                                        headers=runner, timeout=120), what="the gateway")
    assert sb.status_code == 201, sb.text
    sid = sb.json()["id"]
    try:
        assert sb.json()["paused"] is False and sb.json()["paused_at"] is None
        r = requests.post(f"{base}/v1/sandboxes/{sid}/pause", headers=runner, timeout=120)
        assert r.status_code == 200, r.text
        assert (r.json()["state"], r.json()["paused"]) == ("paused", True) and r.json()["paused_at"]
        assert frozen(sid)
        r = requests.post(f"{base}/v1/sandboxes/{sid}/exec", json={"command": "true"}, headers=runner, timeout=120)
        assert (r.status_code, r.json()["code"]) == (409, "sandbox_paused"), r.text
        # a key without sandbox.pause may neither pause nor resume
        other = {"Authorization": "Bearer " + key("--actions", "sandbox.read,exec")}
        r = requests.post(f"{base}/v1/sandboxes/{sid}/resume", headers=other, timeout=120)
        assert (r.status_code, r.json()["code"]) == (403, "forbidden"), r.text
        assert frozen(sid)
        r = requests.post(f"{base}/v1/sandboxes/{sid}/resume", headers=runner, timeout=120)
        assert r.status_code == 200 and r.json()["state"] == "running" and r.json()["paused"] is False, r.text
        assert not frozen(sid)
        r = requests.post(f"{base}/v1/sandboxes/sb_nosuchthing/pause", headers=runner, timeout=120)
        assert r.status_code == 404, r.text
    finally:
        requests.delete(f"{base}/v1/sandboxes/{sid}", headers=runner, timeout=120)


def test_frozen_slice_of_a_running_sandbox_is_thawed_at_start(mgr, sandbox):
    """A sandboxd killed between the freeze and the store's write leaves the slice frozen while the store says
    running: the store counts, and the next start thaws it."""
    sid, path = sandbox()
    start_counter(mgr, sid)
    with open(f"/sys/fs/cgroup/unified/sandbox.slice/sandbox-{sid}.slice/cgroup.freeze", "w") as f:
        f.write("1")
    wait_for(lambda: frozen(sid), what="the hand-made freeze")
    restart_sandboxd()
    assert not bool(mgr.props(path)["Paused"])
    wait_for(lambda: not frozen(sid), what="the thaw")
    c = count(sid)
    wait_for(lambda: count(sid) > c, what="the counter to go on")
    assert mgr.sh(sid, "echo ok")[1] == b"ok\n"
