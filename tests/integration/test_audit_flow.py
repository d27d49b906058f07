# SPDX-License-Identifier: LGPL-2.1-or-later
# What sandboxd records with sandbox-auditd: one final row per operation, none lost when the logger
# or sandboxd is killed, none lost while the logger's disk is full.
import json
import os
import subprocess
import threading

import dbus
import pytest

from conftest import LONG, SPOOL, Manager, audit, audit_log, run, spooled, wait_for


def settled(session, n, **flt):
    """Waits until the session has n rows (matching flt) and the spool is empty."""
    return wait_for(lambda: spooled() == 0 and len(audit_log(session, **flt)) == n and audit_log(session, **flt),
                    timeout=60, what=f"{n} rows for {session}")


@pytest.fixture(autouse=True)
def logger_up():
    run("systemctl", "start", "sandbox-auditd")
    yield


def by_op(rows):
    out = {}
    for r in rows:
        out.setdefault(str(r["operation"]), []).append(r)
    return out


def test_every_operation_has_one_row(mgr, sandbox):
    ctx = dbus.Dictionary({"account_id": "acct-42", "request_id": "req_abc", "source": "human_takeover"},
                          signature="sv")
    sid, path = mgr.iface.CreateSandbox(dbus.Dictionary({"type": "small", "account_id": "acct-42",
                                                         "request_id": "req_create"}, signature="sv"),
                                        timeout=LONG)
    sid = str(sid)
    try:
        mgr.sh(sid, "echo hi; echo oops >&2; exit 3")
        mgr.sh(sid, "sleep 30", timeout_seconds=1)
        mgr.exec(sid, ["python3", "-c", "b = bytearray(256 << 20)"], memory_max=32 << 20)
        with pytest.raises(dbus.DBusException):
            mgr.exec(sid, ["true"], cwd="/nonexistent")
        mgr.write(sid, "/tmp/f.txt", b"data")
        mgr.read(sid, "/tmp/f.txt")
        with pytest.raises(dbus.DBusException):
            mgr.read(sid, "/tmp/missing")
        mgr.iface.SetTTL(sid, dbus.UInt64(600), ctx)
        code, out, err, info = mgr.iface.Exec(sid, ["sh", "-c", "echo ctx"], ctx, timeout=LONG)
    finally:
        mgr.iface.DeleteSandbox(sid, dbus.Dictionary({}, signature="sv"), timeout=LONG)

    rows = settled(sid, 11)
    ops = by_op(rows)
    assert sorted((k, len(v)) for k, v in ops.items()) == [
        ("exec", 5), ("read", 2), ("sandbox.create", 1), ("sandbox.delete", 1), ("sandbox.update", 1), ("write", 1)]
    create = ops["sandbox.create"][0]
    assert create["event"] == "finished" and create["account_id"] == "acct-42"
    assert create["request_id"] == "req_create" and create["session_id"] == sid
    execs = sorted(ops["exec"], key=lambda r: int(r["id"]))
    first = execs[0]
    assert (first["event"], int(first["exit_code"])) == ("finished", 3)
    assert json.loads(first["detail"])["argv"] == ["sh", "-c", "echo hi; echo oops >&2; exit 3"]
    assert json.loads(first["output_truncated"]) == {"stdout": "hi\n", "stderr": "oops\n"}
    assert int(first["duration_ms"]) >= 0 and int(first["started_at"]) > 0
    out, err = audit().GetOutput(dbus.UInt64(first["id"]), byte_arrays=True)
    assert (bytes(out), bytes(err)) == (b"hi\n", b"oops\n")
    assert execs[1]["event"] == "timed_out"
    assert execs[2]["event"] == "oom_killed"
    assert execs[3]["event"] == "failed" and "working directory" in json.loads(execs[3]["detail"])["message"]
    assert execs[4]["account_id"] == "acct-42" and execs[4]["source"] == "human_takeover"
    assert execs[4]["request_id"] == "req_abc"
    assert all(r["account_id"] == "uid:0" or r["account_id"] == "acct-42" for r in rows)
    reads = sorted(ops["read"], key=lambda r: int(r["id"]))
    assert [r["event"] for r in reads] == ["finished", "failed"]
    assert ops["sandbox.update"][0]["source"] == "human_takeover"
    assert ops["write"][0]["event"] == "finished" and json.loads(ops["write"][0]["detail"])["path"] == "/tmp/f.txt"


def test_invalid_calls_are_recorded(mgr, sandbox):
    """A call sandboxd refuses still gets its row. (Calls the bus policy refuses never reach
    sandboxd: dbus-daemon answers AccessDenied itself, and those have no row.)"""
    sid, _ = sandbox()
    r = run("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "busctl", "call",
            "org.sandboxd.sandbox1", "/org/sandboxd/sandbox1", "org.sandboxd.sandbox1.Manager", "Exec",
            "sasa{sv}", sid, "1", "true", "0", check=False)
    assert r.returncode != 0
    with pytest.raises(dbus.DBusException):
        mgr.exec(sid, [])
    with pytest.raises(dbus.DBusException):
        mgr.exec(sid, ["true"], timeout_seconds=10 ** 9)
    rows = settled(sid, 3)  # create and the two refused Execs
    ex = sorted([r for r in rows if r["operation"] == "exec"], key=lambda r: int(r["id"]))
    assert [r["event"] for r in ex] == ["failed", "failed"]
    assert json.loads(ex[0]["detail"])["error"] == "org.freedesktop.DBus.Error.InvalidArgs"
    assert json.loads(ex[1]["detail"])["error"] == "org.sandboxd.sandbox1.LimitExceeded"
    assert all(r["account_id"] == "uid:0" for r in ex)


def test_refused_call_by_name_is_recorded_under_the_id(mgr, sandbox):
    """A call that names its sandbox by name and is refused once the sandbox is found (docs/dbus-api.md:
    session_id is the sandbox's id) is in that sandbox's log, as the file tools' refusals always were."""
    sid, _ = sandbox(name="audit-by-name")
    with pytest.raises(dbus.DBusException) as e:
        mgr.exec("audit-by-name", ["true"], timeout_seconds=10 ** 9)
    assert e.value.get_dbus_name() == "org.sandboxd.sandbox1.LimitExceeded"
    with pytest.raises(dbus.DBusException) as e:
        mgr.iface.View("audit-by-name", "/tmp",
                       dbus.Dictionary({"start_line": dbus.UInt32(9), "end_line": dbus.UInt32(2)}, signature="sv"),
                       timeout=LONG)
    assert e.value.get_dbus_name() == "org.freedesktop.DBus.Error.InvalidArgs"
    rows = settled(sid, 3)  # create, the Exec and the View
    assert sorted((str(r["operation"]), str(r["event"])) for r in rows) == [
        ("exec", "failed"), ("sandbox.create", "finished"), ("view", "failed")]
    assert audit_log("audit-by-name") == []


def test_expiry_is_recorded_as_system(mgr, sandbox):
    sid, _ = sandbox(ttl_seconds=2)
    wait_for(lambda: sid not in [r[0] for r in mgr.list()], what="expiry")
    rows = settled(sid, 2)
    exp = [r for r in rows if r["operation"] == "sandbox.expire"]
    assert len(exp) == 1 and exp[0]["source"] == "system" and exp[0]["account_id"] == "system"


def test_logger_killed_during_1000_execs(mgr, sandbox):
    sid, _ = sandbox()
    for i in range(1000):
        if i == 300:
            run("systemctl", "kill", "-s", "KILL", "sandbox-auditd")
        code, out, _, _ = mgr.exec(sid, ["echo", str(i)])
        assert code == 0
    wait_for(lambda: spooled() == 0, timeout=120, what="the spool to drain")
    rows = audit_log(sid, operation="exec", limit=1000)
    got = sorted(int(json.loads(r["detail"])["argv"][1]) for r in rows)
    assert got == list(range(1000)), "each Exec exactly once"
    db = "/var/lib/sandbox-auditd/audit.db"
    assert run("sqlite3", db, "PRAGMA integrity_check").stdout.strip() == "ok"


def test_sandboxd_killed_mid_stream(mgr, sandbox):
    sid, _ = sandbox()
    answered = []
    stop = threading.Event()

    def worker():
        m = Manager()
        i = 0
        while not stop.is_set():
            try:
                code, out, _, _ = m.exec(sid, ["echo", f"marker-{i}"])
                if code == 0:
                    answered.append(i)
            except dbus.DBusException:
                pass  # sandboxd died under this call; unanswered, so nothing is promised
            i += 1

    t = threading.Thread(target=worker)
    t.start()
    wait_for(lambda: len(answered) >= 30, what="some answered Execs")
    run("systemctl", "kill", "-s", "KILL", "sandboxd")
    wait_for(lambda: run("systemctl", "is-active", "sandboxd", check=False).stdout.strip() == "active",
             what="sandboxd restarted")
    stop.set()
    t.join(timeout=60)
    wait_for(lambda: spooled() == 0, timeout=60, what="the spool to drain")
    rows = audit_log(sid, operation="exec", limit=1000)
    recorded = {json.loads(r["detail"])["argv"][1] for r in rows}
    missing = [i for i in answered if f"marker-{i}" not in recorded]
    assert missing == [], f"answered Execs without a row: {missing}"


def test_logger_disk_full(mgr, sandbox):
    state = "/var/lib/sandbox-auditd"
    run("systemctl", "stop", "sandbox-auditd")
    run("mount", "-t", "tmpfs", "-o", "size=3m,mode=0700", "tmpfs", state)
    try:
        run("chown", "sandbox-audit:sandbox-audit", state)
        run("systemctl", "start", "sandbox-auditd")
        sid, _ = sandbox()
        filler = os.path.join(state, "filler")
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
        for i in range(20):
            code, out, _, _ = mgr.exec(sid, ["sh", "-c", f"head -c 100000 /dev/urandom | base64; echo {i}"])
            assert code == 0
        wait_for(lambda: spooled() > 0, what="rows to wait in the spool")
        os.unlink(filler)
        wait_for(lambda: spooled() == 0, timeout=60, what="the rows to arrive once space returned")
        assert len(audit_log(sid, operation="exec")) == 20
    finally:
        run("systemctl", "stop", "sandbox-auditd", check=False)
        run("umount", state, check=False)
        run("systemctl", "start", "sandbox-auditd", check=False)


def test_nothing_of_the_logger_from_inside(mgr, sandbox):
    sid, _ = sandbox(network="host")
    code, out, err, _ = mgr.exec(sid, ["busctl", "--system", "call", "org.sandboxd.audit1", "/org/sandboxd/audit1",
                                       "org.sandboxd.audit1.Log", "GetLog", "a{sv}tt", "0", "10", "0"])
    assert code != 0
    code, out, err, _ = mgr.exec(sid, ["timeout", "2", "busctl", "--system", "monitor", "org.sandboxd.audit1"])
    assert code != 0 and b"EntryAdded" not in out


def test_backlog_drains_in_order(mgr, sandbox):
    """While the logger cannot start, rows wait in the spool; once it can, the pump delivers the backlog
    (in RecordBatch calls) in the order of the operations, each row once."""
    sid, _ = sandbox()
    run("systemctl", "mask", "--runtime", "sandbox-auditd")  # bus activation fails while masked
    try:
        run("systemctl", "stop", "sandbox-auditd")
        for i in range(300):
            code, out, _, _ = mgr.exec(sid, ["echo", str(i)])
            assert code == 0
        assert spooled() >= 300
    finally:
        run("systemctl", "unmask", "--runtime", "sandbox-auditd")
    run("systemctl", "start", "sandbox-auditd")
    wait_for(lambda: spooled() == 0, timeout=120, what="the backlog to drain")
    rows = sorted(audit_log(sid, operation="exec", limit=1000), key=lambda r: int(r["id"]))
    assert [json.loads(r["detail"])["argv"][1] for r in rows] == [str(i) for i in range(300)]


def test_refused_row_does_not_stop_the_others(mgr, sandbox):
    """A row the logger refuses as invalid (here its OutputMax= is below sandboxd's) is kept aside in the
    spool and logged; the rows after it still arrive; sandboxd queues it again when it next starts."""
    sid, _ = sandbox()
    dropin = "/etc/sandboxd/sandbox-auditd.conf.d/50-test-refused.conf"
    os.makedirs(os.path.dirname(dropin), exist_ok=True)
    with open(dropin, "w") as f:
        f.write("[Log]\nOutputMax=1K\n")

    def refused():
        return int(run("sqlite3", SPOOL, "SELECT count(*) FROM refused").stdout.strip())

    def markers():
        return [json.loads(r["detail"])["argv"][-1] for r in audit_log(sid, operation="exec")]

    try:
        run("systemctl", "restart", "sandbox-auditd")
        code, out, _, _ = mgr.exec(sid, ["sh", "-c", "head -c 3000 /dev/zero | tr '\\0' x; : big"])
        assert code == 0 and len(out) == 3000
        for i in range(3):
            assert mgr.exec(sid, ["echo", f"after-{i}"])[0] == 0
        wait_for(lambda: spooled() == 0 and refused() == 1, what="the refused row kept aside")
        assert markers() == ["after-2", "after-1", "after-0"], "the rows after it arrived, in order"
        journal = run("journalctl", "-u", "sandboxd", "--no-pager", "-n", "200").stdout
        assert "refused a row as invalid" in journal and "at most 1024" in journal
    finally:
        os.unlink(dropin)
        run("systemctl", "restart", "sandbox-auditd")
    run("systemctl", "restart", "sandboxd")
    wait_for(lambda: spooled() == 0 and refused() == 0 and len(markers()) == 4, timeout=60,
             what="the refused row delivered once the logger takes it")
    big = [r for r in audit_log(sid, operation="exec") if json.loads(r["detail"])["argv"][-1].endswith(": big")]
    assert len(big) == 1 and int(big[0]["stdout_size"]) == 3000
