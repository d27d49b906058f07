# SPDX-License-Identifier: LGPL-2.1-or-later
# sandbox-auditd on its own, through the system bus as its callers and readers use it: Record, GetLog,
# GetOutput and EntryAdded, bad rows, who may do what, activation, kill -9, retention, a full disk.
import json
import os
import pwd
import re
import shutil
import subprocess
import time
import uuid

import dbus
import pytest

from conftest import dbus_error, run, systemctl_show, wait_for

BUS_NAME, PATH, IFACE = "org.sandboxd.audit1", "/org/sandboxd/audit1", "org.sandboxd.audit1.Log"
ERR = "org.sandboxd.audit1."
INVALID = "org.freedesktop.DBus.Error.InvalidArgs"
DENIED = "org.freedesktop.DBus.Error.AccessDenied"
STATE = "/var/lib/sandbox-auditd"
DB = STATE + "/audit.db"
DROPIN_DIR = "/etc/sandboxd/sandbox-auditd.conf.d"
SINK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../examples/audit-sink.py")
PY = "/usr/bin/python3"

# Types of Record's fields; everything else is a string.
TYPES = {"exit_code": dbus.Int32, "started_at": dbus.UInt64, "duration_usec": dbus.UInt64,
         "stdout": dbus.ByteArray, "stderr": dbus.ByteArray}

# A program recording rows key-0..key-(n-1) of a session in order, retrying each until it is
# acknowledged (as sandboxd's spool does), printing "index id" per acknowledged row.
WRITER = r"""
import sys, time, dbus
session, n, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
bus = dbus.SystemBus()
def log():
    return dbus.Interface(bus.get_object("org.sandboxd.audit1", "/org/sandboxd/audit1", introspect=False),
                          "org.sandboxd.audit1.Log")
for i in range(n):
    row = dbus.Dictionary({"key": f"{session}-{i}", "session_id": session, "operation": "exec",
                           "event": "finished", "detail": '{"i": %d}' % i,
                           "stdout": dbus.ByteArray(b"x" * 2000)}, signature="sv")
    while True:
        try:
            rid = log().Record(row, timeout=30)
            break
        except dbus.DBusException as e:
            time.sleep(0.05)
    print(i, int(rid), flush=True)
    time.sleep(delay)
"""

# Subscribes to EntryAdded (from any sender) for a while, then prints the ids it got.
WATCHER = r"""
import sys, dbus, dbus.mainloop.glib
from gi.repository import GLib
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.SystemBus()
got = []
bus.add_signal_receiver(lambda i, s, row: got.append(int(i)), "EntryAdded", "org.sandboxd.audit1.Log", None,
                        "/org/sandboxd/audit1")
print("ready", flush=True)
loop = GLib.MainLoop()
GLib.timeout_add(int(float(sys.argv[1]) * 1000), loop.quit)
loop.run()
print("got", *got, flush=True)
"""


def iface():
    # A fresh proxy each time: sandbox-auditd gets a new unique name whenever a test restarts it.
    return dbus.Interface(dbus.SystemBus().get_object(BUS_NAME, PATH, introspect=False), IFACE)


def session():
    return "t-" + uuid.uuid4().hex[:12]


def row_dict(**fields):
    return dbus.Dictionary({k: TYPES.get(k, dbus.String)(v) for k, v in fields.items()}, signature="sv")


def record(**fields):
    fields.setdefault("key", uuid.uuid4().hex)
    fields.setdefault("operation", "exec")
    fields.setdefault("event", "finished")
    return int(iface().Record(row_dict(**fields)))


def plain(row):
    out = {}
    for k, v in row.items():
        if isinstance(v, dbus.Boolean):
            v = bool(v)
        elif isinstance(v, (dbus.Int32, dbus.UInt64)):
            v = int(v)
        else:
            v = str(v)
        out[str(k)] = v
    return out


def get_log(limit=1000, offset=0, **flt):
    f = dbus.Dictionary({k: dbus.UInt64(v) if isinstance(v, int) else dbus.String(v) for k, v in flt.items()},
                        signature="sv")
    return [plain(r) for r in iface().GetLog(f, dbus.UInt64(limit), dbus.UInt64(offset))]


def get_output(rid):
    out, err = iface().GetOutput(dbus.UInt64(rid), byte_arrays=True)
    return bytes(out), bytes(err)


def error_of(fn, *args, **kw):
    with pytest.raises(dbus.DBusException) as e:
        fn(*args, **kw)
    return dbus_error(e)


def busctl(*args, user=None, check=False):
    pre = ["setpriv", f"--reuid={user}", f"--regid={pwd.getpwnam(user).pw_gid}", "--init-groups"] if user else []
    return run(*pre, "busctl", "call", BUS_NAME, PATH, IFACE, *args, check=check)


def wait_active():
    wait_for(lambda: run("systemctl", "is-active", "sandbox-auditd", check=False).stdout.strip() == "active",
             what="sandbox-auditd active")
    wait_for(lambda: run("busctl", "status", BUS_NAME, check=False).returncode == 0, what="the bus name")


def restart():
    # reset-failed also resets the start rate limit, which a test restarting it often would hit
    run("systemctl", "reset-failed", "sandbox-auditd", check=False)
    run("systemctl", "restart", "sandbox-auditd")
    wait_active()


def reload_bus():
    run("busctl", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "ReloadConfig")


def collect_signals(action, want, session_id=None, timeout=10.0):
    """Runs action() while subscribed to EntryAdded on a connection of our own; returns the signals."""
    import dbus.mainloop.glib
    from gi.repository import GLib

    bus = dbus.SystemBus(mainloop=dbus.mainloop.glib.DBusGMainLoop(), private=True)
    got = []
    match = {"arg1": session_id} if session_id else {}
    bus.add_signal_receiver(lambda i, s, row: got.append((int(i), str(s), plain(row))), "EntryAdded", IFACE,
                            BUS_NAME, PATH, **match)
    try:
        action()
        ctx = GLib.MainContext.default()
        end = time.monotonic() + timeout
        linger = None
        while time.monotonic() < end:
            while ctx.iteration(False):
                pass
            if len(got) >= want:
                # a little longer, so that a signal too many would be seen
                linger = linger or time.monotonic() + 0.5
                if time.monotonic() > linger:
                    break
            time.sleep(0.01)
    finally:
        bus.close()
    return got


@pytest.fixture(autouse=True)
def auditd_up():
    run("systemctl", "start", "sandbox-auditd")
    yield


@pytest.fixture
def users():
    """Makes host users for a test (optionally in sandbox-admin) and removes them afterwards."""
    made = []

    def make(name, admin=False):
        run("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
            *(["--groups", "sandbox-admin"] if admin else []), name)
        made.append(name)
        return name

    yield make
    for name in made:
        run("userdel", name, check=False)


def test_record_and_read_back():
    s = session()
    t0 = int(time.time() * 1e6)
    rid = record(key=f"{s}-1", session_id=s, account_id="acct-7", source="human_takeover", operation="exec",
                 event="timed_out", detail='{"argv": ["sleep", "30"]}', exit_code=-9, stdout=b"hi\n",
                 stderr=b"oops\xff\n", started_at=t0, duration_usec=2_500_000, request_id="req_1")
    rows = get_log(session_id=s)
    assert re.fullmatch(r"[0-9a-f]{64}", rows[0].pop("hash")), "the chain's hash (test_audit_chain.py)"
    assert rows == [{
        "id": rid, "key": f"{s}-1", "session_id": s, "account_id": "acct-7", "source": "human_takeover",
        "operation": "exec", "event": "timed_out", "detail": '{"argv": ["sleep", "30"]}',
        "detail_truncated": False, "exit_code": -9,
        "output_truncated": json.dumps({"stdout": "hi\n", "stderr": "oops\ufffd\n"}, ensure_ascii=False,
                                       separators=(",", ":")),
        "started_at": t0, "duration_ms": 2500, "request_id": "req_1", "stdout_size": 3, "stderr_size": 6}]
    assert get_output(rid) == (b"hi\n", b"oops\xff\n")

    # defaults: agent, "{}", 0, empty output, started now
    rid2 = record(key=f"{s}-2", session_id=s, operation="sandbox.create")
    row = get_log(session_id=s, limit=1)[0]
    assert row["id"] == rid2 > rid
    assert (row["source"], row["detail"], row["exit_code"], row["account_id"]) == ("agent", "{}", 0, "")
    assert abs(row["started_at"] - time.time() * 1e6) < 60e6
    assert json.loads(row["output_truncated"]) == {"stdout": "", "stderr": ""}
    assert get_output(rid2) == (b"", b"")
    assert error_of(iface().GetOutput, dbus.UInt64(10 ** 12))[0] == ERR + "NoSuchEntry"


def test_idempotent_key():
    s = session()
    a = record(key=f"{s}-k", session_id=s, exit_code=1)
    b = record(key=f"{s}-k", session_id=s, exit_code=2, event="failed")  # a retry: stores nothing
    assert a == b
    rows = get_log(session_id=s)
    assert [(r["id"], r["exit_code"], r["event"]) for r in rows] == [(a, 1, "finished")]


def test_entry_added():
    s = session()
    ids = []

    def act():
        ids.append(record(key=f"{s}-1", session_id=s, stdout=b"one"))
        ids.append(record(key=f"{s}-2", session_id=s, operation="write", detail='{"path": "/tmp/x"}'))
        record(key=f"{s}-1", session_id=s)  # a repeated key: no second signal
        ids.append(record(key=f"{s}-3", session_id=s, event="denied"))
        record(key=session() + "-other", session_id=session())  # not ours: filtered by arg1

    got = collect_signals(act, 3, session_id=s)
    assert [g[0] for g in got] == ids
    assert all(g[1] == s for g in got)
    by_id = {r["id"]: r for r in get_log(session_id=s)}
    for rid, _, row in got:
        assert row == by_id[rid], "the signal carries the row as GetLog returns it"


def test_bad_rows_rejected():
    s = session()
    long = "x" * 129
    cases = [
        ({"session_id": s}, "key is required"),
        ({"key": "", "session_id": s}, "key must be 1 to 128 bytes"),
        ({"key": long, "session_id": s}, "key must be 1 to 128 bytes"),
        ({"session_id": "s" * 65}, "session_id must be 0 to 64 bytes"),
        ({"session_id": s, "account_id": "a" * 257}, "account_id must be 0 to 256 bytes"),
        ({"session_id": s, "request_id": long}, "request_id must be 0 to 128 bytes"),
        ({"session_id": s, "operation": "rm"}, "Unknown operation 'rm'"),
        ({"session_id": s, "event": "ok"}, "Unknown event 'ok'"),
        ({"session_id": s, "source": "root"}, "Unknown source 'root'"),
        ({"session_id": s, "detail": "{not json"}, "detail is not valid JSON"),
        ({"session_id": s, "detail": "NaN"}, "detail is not valid JSON"),
        ({"session_id": s, "detail": "{'a': 1}"}, "detail is not valid JSON"),
        ({"session_id": s, "detail": ""}, "detail is not valid JSON"),
        ({"session_id": s, "stdout": b"x" * (1024 * 1024 + 1)}, "stdout is 1048577 bytes"),
        ({"session_id": s, "stderr": b"x" * (1024 * 1024 + 1)}, "stderr is 1048577 bytes"),
        ({"session_id": s, "bogus": "x"}, "Unknown row field 'bogus'"),
    ]
    for fields, message in cases:
        f = {"operation": "exec", "event": "finished", **fields}
        if "key" not in fields and not message.startswith("key is"):
            f["key"] = uuid.uuid4().hex
        name, msg = error_of(iface().Record, row_dict(**f))
        assert name == INVALID and message in msg, (fields, name, msg)

    # wrong types, missing required fields, duplicates: spelled with busctl, which can say all that
    for args, message in [
        (["3", "key", "s", "k1", "operation", "s", "exec", "event", "i", "1"], "must be of type 's', not 'i'"),
        (["4", "key", "s", "k1", "operation", "s", "exec", "event", "s", "failed", "exit_code", "s", "1"],
         "'exit_code' must be of type 'i'"),
        (["4", "key", "s", "k1", "operation", "s", "exec", "event", "s", "failed", "started_at", "i", "1"],
         "'started_at' must be of type 't'"),
        (["4", "key", "s", "k1", "operation", "s", "exec", "event", "s", "failed", "stdout", "s", "x"],
         "'stdout' must be of type 'ay'"),
        (["2", "key", "s", "k1", "event", "s", "failed"], "operation is required"),
        (["2", "key", "s", "k1", "operation", "s", "exec"], "event is required"),
        (["4", "key", "s", "k1", "key", "s", "k2", "operation", "s", "exec", "event", "s", "failed"],
         "'key' is given twice"),
    ]:
        args = [str(int(args[0]) + 1), "session_id", "s", s, *[a.replace("k1", f"{s}-k1") for a in args[1:]]]
        r = busctl("Record", "a{sv}", *args)
        assert r.returncode != 0 and message in r.stderr, (args, r.stderr)

    assert get_log(session_id=s) == [], "nothing of a bad row is stored"
    assert get_log(session_id="s" * 65) == []


def test_detail_and_output_caps():
    s = session()
    big = json.dumps({"argv": ["python3", "-c", "x" * 10000], "note": "é\"\\/"})
    rid = record(session_id=s, detail=big)
    row = get_log(session_id=s)[0]
    assert row["detail_truncated"] is True and len(row["detail"].encode()) <= 4096
    capped = json.loads(row["detail"])
    assert capped["truncated"] is True and capped["size"] == len(big.encode())
    assert big.startswith(capped["head"]) and len(capped["head"]) > 2000

    small = json.dumps({"ok": True})
    record(session_id=s, detail=small)
    assert get_log(session_id=s, limit=1)[0]["detail"] == small

    # output: exactly OutputMax is taken; output_truncated has the first KiB of each stream
    out = (b"\xe2\x82\xac" * 400000)[:1024 * 1024]  # 1 MiB of euro signs, cut mid-character at the end
    err = bytes(range(256)) * 4
    rid = record(session_id=s, stdout=out, stderr=err)
    row = get_log(session_id=s, limit=1)[0]
    assert row["id"] == rid and (row["stdout_size"], row["stderr_size"]) == (len(out), len(err))
    heads = json.loads(row["output_truncated"])
    assert heads["stdout"] == "€" * 341  # 1024 bytes: 341 characters and a third of one, dropped
    assert heads["stderr"] == err.decode("utf-8", errors="replace")
    assert get_output(rid) == (out, err)


def test_getlog_paging_limits_and_filters():
    s = session()
    t0 = 1_600_000_000_000_000
    ids = [record(key=f"{s}-{i}", session_id=s, account_id=f"acct-{i % 2}", started_at=t0 + i,
                  operation="write" if i % 10 == 0 else "exec", event="failed" if i % 7 == 0 else "finished",
                  source="system" if i % 50 == 0 else "agent")
           for i in range(1100)]
    assert ids == sorted(ids)
    rows = get_log(session_id=s, limit=0)
    assert [r["id"] for r in rows] == ids[::-1][:50], "limit 0 means 50, newest first"
    assert len(get_log(session_id=s, limit=5000)) == 1000, "limit is capped at 1000"
    assert [r["id"] for r in get_log(session_id=s, limit=10, offset=1095)] == ids[4::-1]
    assert get_log(session_id=s, limit=10, offset=2 ** 64 - 1) == [], "offset is capped (past the end)"

    def n(**flt):
        return len(get_log(session_id=s, **flt))

    assert n(account_id="acct-1") == 550
    assert n(operation="write") == 110
    assert n(event="failed") == 158
    assert n(source="system") == 22
    assert n(source="human_takeover") == 0
    assert n(since=t0 + 100, until=t0 + 110) == 10
    assert n(after_id=ids[1089]) == 10
    assert n(max_id=ids[9]) == 10
    assert n(after_id=ids[9], max_id=ids[19]) == 10
    assert n(operation="write", event="failed", account_id="acct-0") == 16  # multiples of 70 below 1100

    for flt, message in [({"bogus": "x"}, "Unknown filter 'bogus'"), ({"operation": "rm"}, "Unknown operation"),
                         ({"since": "yesterday"}, "must be of type 't'"), ({"session_id": 5}, "of type 's'")]:
        f = dbus.Dictionary({k: dbus.UInt64(v) if isinstance(v, int) else dbus.String(v) for k, v in flt.items()},
                            signature="sv")
        name, msg = error_of(iface().GetLog, f, dbus.UInt64(10), dbus.UInt64(0))
        assert name == INVALID and message in msg, (flt, msg)


def test_paging_is_stable_while_rows_arrive():
    s = session()
    for i in range(200):
        record(key=f"{s}-pre-{i}", session_id=s)
    writer = subprocess.Popen([PY, "-c", WRITER, s, "400", "0.005"], stdout=subprocess.PIPE, text=True)
    try:
        writer.stdout.readline()  # it is writing
        first = get_log(session_id=s, limit=10)
        top = first[0]["id"]
        seen = [r["id"] for r in first]
        offset = 10
        while True:
            time.sleep(0.01)
            page = get_log(session_id=s, limit=10, offset=offset, max_id=top)
            if not page:
                break
            seen += [r["id"] for r in page]
            offset += 10
        assert writer.poll() is None, "rows were still arriving while we paged"
    finally:
        writer.wait(timeout=120)
    assert len(seen) == len(set(seen)), "no row twice"
    assert seen == sorted(seen, reverse=True)
    below = [r["id"] for r in get_log(session_id=s, limit=1000, max_id=top)]
    assert seen == below and len(seen) >= 200, "no row skipped"
    newer = get_log(session_id=s, after_id=top, limit=1000)
    assert len(newer) + len(below) == 600


def test_access(users):
    reader = users("audit-reader", admin=True)
    outsider = users("audit-outsider")
    reload_bus()  # the bus resolves the users of its policy when it loads it
    s = session()
    rid = record(session_id=s, stdout=b"secret")

    for user in ("nobody", outsider):
        for args in (["GetLog", "a{sv}tt", "0", "10", "0"], ["GetOutput", "t", str(rid)],
                     ["Record", "a{sv}", "3", "key", "s", f"{s}-x", "operation", "s", "exec", "event", "s", "failed"]):
            r = busctl(*args, user=user)
            assert r.returncode != 0 and "Access denied" in r.stderr, (user, args, r.stderr)

    r = busctl("GetLog", "a{sv}tt", "1", "session_id", "s", s, "10", "0", user=reader)
    assert r.returncode == 0 and f'"id" t {rid}' in r.stdout, r.stderr
    r = busctl("GetOutput", "t", str(rid), user=reader)
    assert r.returncode == 0 and "ay 6 115 101 99 114 101 116" in r.stdout, r.stderr
    r = busctl("Record", "a{sv}", "3", "key", "s", f"{s}-y", "operation", "s", "exec", "event", "s", "failed",
               user=reader)
    assert r.returncode != 0 and "Access denied" in r.stderr, "readers do not write"
    assert len(get_log(session_id=s)) == 1

    # EntryAdded reaches readers (here through the example sink), not others
    sink_copy = "/run/audit-sink-test.py"  # readable by every user, unlike the test's tmp_path
    shutil.copy(SINK, sink_copy)
    os.chmod(sink_copy, 0o755)

    def as_user(user, *argv):
        pw = pwd.getpwnam(user)
        return subprocess.Popen(["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups",
                                 *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    sink = as_user(reader, PY, sink_copy, "--session", s, "--exit-after", "2")
    watchers = [as_user(u, PY, "-c", WATCHER, "4") for u in ("nobody", outsider)]
    try:
        assert "watching" in sink.stderr.readline()
        for w in watchers:
            assert w.stdout.readline().strip() == "ready"
        a = record(key=f"{s}-a", session_id=s)
        b = record(key=f"{s}-b", session_id=s, detail='{"n": 2}')
        out, err = sink.communicate(timeout=30)
        lines = [json.loads(line) for line in out.splitlines()]
        assert [x["id"] for x in lines] == [a, b], err
        assert lines[1]["detail"] == {"n": 2} and lines[1]["session_id"] == s
        for w in watchers:
            out, _ = w.communicate(timeout=30)
            assert out.strip() == "got", "no signal for non-readers"
    finally:
        for p in [sink, *watchers]:
            if p.poll() is None:
                p.kill()
                p.wait()
        os.unlink(sink_copy)


def test_gateway_may_record(users):
    had_gateway = True
    try:
        pwd.getpwnam("sandbox-gateway")
    except KeyError:
        had_gateway = False
        users("sandbox-gateway", admin=True)
    reload_bus()
    restart()  # the logger looks the gateway up when it starts
    try:
        s = session()
        r = busctl("Record", "a{sv}", "5", "key", "s", f"{s}-g", "session_id", "s", s, "account_id", "s",
                   "key_123", "operation", "s", "api_key.create", "event", "s", "finished", user="sandbox-gateway")
        assert r.returncode == 0, r.stderr
        rid = int(r.stdout.split()[1])
        rows = get_log(session_id=s)
        assert [(x["id"], x["account_id"], x["operation"]) for x in rows] == [(rid, "key_123", "api_key.create")]
        r = busctl("GetLog", "a{sv}tt", "1", "session_id", "s", s, "10", "0", user="sandbox-gateway")
        assert r.returncode == 0 and f'"id" t {rid}' in r.stdout, r.stderr
        r = busctl("RecordBatch", "aa{sv}", "1", "4", "key", "s", f"{s}-h", "session_id", "s", s, "operation",
                   "s", "api_key.revoke", "event", "s", "finished", user="sandbox-gateway")
        assert r.returncode == 0 and r.stdout.startswith("at 1 "), r.stderr
    finally:
        if not had_gateway:
            run("userdel", "sandbox-gateway", check=False)
            reload_bus()
            restart()


def test_bus_activation():
    run("systemctl", "stop", "sandbox-auditd")
    assert run("systemctl", "is-active", "sandbox-auditd", check=False).stdout.strip() != "active"
    s = session()
    rid = record(session_id=s)  # activates it
    assert run("systemctl", "is-active", "sandbox-auditd").stdout.strip() == "active"
    assert get_log(session_id=s)[0]["id"] == rid


def test_service_runs_unprivileged():
    wait_active()
    pid = systemctl_show("sandbox-auditd", "MainPID")["MainPID"]
    status = open(f"/proc/{pid}/status").read()
    uid = pwd.getpwnam("sandbox-audit").pw_uid
    assert re.search(rf"^Uid:\s+{uid}\s+{uid}\s+{uid}\s+{uid}$", status, re.M), status
    assert re.search(r"^CapEff:\s+0+$", status, re.M) and re.search(r"^NoNewPrivs:\s+1$", status, re.M)
    assert re.search(r"^Seccomp:\s+2$", status, re.M)
    st = os.stat(STATE)
    assert (st.st_uid, st.st_mode & 0o777) == (uid, 0o700)
    assert os.stat(DB).st_uid == uid
    assert run("sqlite3", DB, "PRAGMA journal_mode").stdout.strip() == "wal"
    assert run("sqlite3", DB, "PRAGMA user_version").stdout.strip() == "2"
    out = run("systemd-analyze", "security", "--no-pager", "sandbox-auditd").stdout
    level = float(re.search(r"Overall exposure level for sandbox-auditd.service: ([\d.]+)", out).group(1))
    assert level <= 1.0, out


def test_restart_keeps_rows_and_ids():
    s = session()
    a = record(session_id=s)
    restart()
    b = record(session_id=s)
    assert b > a
    assert [r["id"] for r in get_log(session_id=s)] == [b, a]


def test_kill9_during_burst():
    s = session()
    restarts = int(systemctl_show("sandbox-auditd", "NRestarts")["NRestarts"])
    writer = subprocess.Popen([PY, "-c", WRITER, s, "1000", "0"], stdout=subprocess.PIPE, text=True)
    acked = {}
    try:
        for line in writer.stdout:
            i, rid = map(int, line.split())
            acked[i] = rid
            if i == 300:
                run("systemctl", "kill", "-s", "KILL", "sandbox-auditd")
        assert writer.wait(timeout=120) == 0
    finally:
        if writer.poll() is None:
            writer.kill()
    wait_active()
    assert int(systemctl_show("sandbox-auditd", "NRestarts")["NRestarts"]) > restarts, "it was killed"
    rows = get_log(session_id=s, limit=1000)
    assert len(rows) == 1000
    assert sorted(r["key"] for r in rows) == sorted(f"{s}-{i}" for i in range(1000)), "each row exactly once"
    assert {int(r["key"].rsplit("-", 1)[1]): r["id"] for r in rows} == acked, "acknowledged ids are kept"
    assert run("sqlite3", DB, "PRAGMA integrity_check").stdout.strip() == "ok"
    # and the hash chain holds across the crash (the rolled-back group left no half of a link)
    res = iface().VerifyLog(dbus.Dictionary({}, signature="sv"), timeout=600)
    assert bool(res["verified"]), str(res["message"])


def write_dropin(name, text):
    os.makedirs(DROPIN_DIR, exist_ok=True)
    path = os.path.join(DROPIN_DIR, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_retention_and_config():
    old, fresh = session(), session()
    day = 86400 * 10 ** 6
    now = int(time.time() * 1e6)
    for i in range(5):
        record(key=f"{old}-{i}", session_id=old, started_at=now - 3 * day)
    kept = [record(key=f"{fresh}-{i}", session_id=fresh, started_at=now) for i in range(5)]

    # retention removes the oldest ids first (the hash chain loses only its head): first cut the log
    # down to these ten rows, so that the old ones lead it
    dropin = write_dropin("50-test.conf", "[Log]\nMaxAgeSec=0\nMaxRows=10\n")
    try:
        restart()
        wait_for(lambda: len(get_log(limit=20)) <= 10, what="the log to shrink to 10 rows")
        write_dropin("50-test.conf", "[Log]\nMaxAgeSec=2d\n")
        restart()  # retention runs at start
        wait_for(lambda: get_log(session_id=old) == [], what="the old rows to go")
        assert [r["id"] for r in get_log(session_id=fresh)] == kept[::-1]

        # by count: only the newest 3 ids stay (in the whole log)
        write_dropin("50-test.conf", "[Log]\nMaxAgeSec=0\nMaxRows=3\n")
        restart()
        wait_for(lambda: len(get_log()) <= 3, what="the log to shrink to 3 rows")
        left = [r["id"] for r in get_log(session_id=fresh)][::-1]
        assert left == kept[len(kept) - len(left):], "the newest stay"

        # smaller caps from the configuration
        write_dropin("50-test.conf", "[Log]\nOutputMax=1K\nDetailMax=256\n")
        restart()
        name, msg = error_of(iface().Record, row_dict(key=uuid.uuid4().hex, operation="exec", event="finished",
                                                      stdout=b"x" * 1025))
        assert name == INVALID and "at most 1024" in msg
        rid = record(session_id=fresh, detail=json.dumps({"x": "y" * 300}))
        assert get_log(max_id=rid, limit=1)[0]["detail_truncated"] is True
    finally:
        os.unlink(dropin)
    restart()

    # a broken configuration keeps it from starting, with the reason in the journal
    write_dropin("50-test.conf", "[Log]\nMaxRows=lots\n")
    try:
        r = run("systemctl", "restart", "sandbox-auditd", check=False)
        assert r.returncode != 0
        journal = run("journalctl", "-u", "sandbox-auditd", "-n", "20", "--no-pager").stdout
        assert "50-test.conf:2: Invalid MaxRows=lots" in journal, journal
    finally:
        os.unlink(os.path.join(DROPIN_DIR, "50-test.conf"))
        run("systemctl", "reset-failed", "sandbox-auditd", check=False)
    restart()


def test_disk_full():
    run("systemctl", "stop", "sandbox-auditd")
    run("mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", STATE)
    filler = os.path.join(STATE, "filler")
    try:
        # the daemon sees the mount only from its next start (its mount namespace is made then)
        run("chown", "sandbox-audit:sandbox-audit", STATE)
        run("systemctl", "start", "sandbox-auditd")
        wait_active()
        s = session()
        first = record(session_id=s)
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
        big = b"y" * 300_000
        name, msg = error_of(iface().Record, row_dict(key=f"{s}-big", session_id=s, operation="exec",
                                                      event="finished", stdout=big))
        assert name == ERR + "StorageFull" and "database or disk is full" in msg, msg
        assert [r["id"] for r in get_log(session_id=s)] == [first], "reads still work, nothing half-stored"
        assert run("systemctl", "is-active", "sandbox-auditd").stdout.strip() == "active"
        os.unlink(filler)
        rid = record(key=f"{s}-big", session_id=s, stdout=big)  # the same row, retried
        assert get_output(rid)[0] == big
        assert [r["id"] for r in get_log(session_id=s)] == [rid, first]
        assert run("sqlite3", DB, "PRAGMA integrity_check").stdout.strip() == "ok"
        journal = run("journalctl", "-u", "sandbox-auditd", "-n", "50", "--no-pager").stdout
        assert "database or disk is full" in journal and "Storing audit rows again" in journal
    finally:
        run("systemctl", "stop", "sandbox-auditd", check=False)
        run("umount", STATE, check=False)
        run("systemctl", "start", "sandbox-auditd", check=False)
    wait_active()


def test_example_sink_resumes(tmp_path):
    """examples/audit-sink.py with --state: what is recorded while it is down comes on its next start."""
    s, state, out = session(), str(tmp_path / "last-id"), str(tmp_path / "audit.jsonl")
    first = [record(key=f"{s}-{i}", session_id=s) for i in range(3)]
    sink = [PY, SINK, "--session", s, "--state", state, "--output", out]
    r = run(*sink, "--after-id", "0", "--exit-after", "3", timeout=60)
    assert "watching" not in r.stderr  # all three came from the catch-up, then it was done
    assert open(state).read().strip() == str(first[-1])
    more = [record(key=f"{s}-{i}", session_id=s, stdout=b"x" * i) for i in range(3, 6)]
    p = subprocess.Popen([*sink, "--exit-after", "4"], stderr=subprocess.PIPE, text=True)
    try:
        assert "watching" in p.stderr.readline()  # caught up with the three, waits for one more
        last = record(key=f"{s}-6", session_id=s)
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()
    lines = [json.loads(line) for line in open(out)]
    assert [x["id"] for x in lines] == first + more + [last], "each row once, in order"
    assert lines[4]["output_truncated"] == {"stdout": "xxxx", "stderr": ""}
    assert all(x["session_id"] == s and x["detail"] == {} for x in lines)


# --- RecordBatch ---------------------------------------------------------------------------------------


def record_batch(rows, **kw):
    return [int(i) for i in iface().RecordBatch(dbus.Array([row_dict(**r) for r in rows], signature="a{sv}"),
                                                **kw)]


def exec_row(key, s, **fields):
    return {"key": key, "session_id": s, "operation": "exec", "event": "finished", **fields}


def test_record_batch_ids_keys_and_signals():
    s = session()
    first = record(key=f"{s}-0", session_id=s, exit_code=7)
    got = []
    rows = [exec_row(f"{s}-1", s, stdout=b"one\n", detail='{"n": 1}'),
            exec_row(f"{s}-0", s, exit_code=9),              # stored already: its first id, nothing stored
            exec_row(f"{s}-2", s, event="failed", exit_code=2, stderr=b"two"),
            exec_row(f"{s}-1", s, exit_code=3),              # repeated within the batch: the same id
            exec_row(f"{s}-3", s, operation="write", detail='{"path": "/tmp/x"}')]
    sig = collect_signals(lambda: got.extend(record_batch(rows)), 3, session_id=s)
    assert len(got) == 5
    assert got[1] == first and got[3] == got[0], "a key stored already returns the id it was stored with"
    new = [got[0], got[2], got[4]]
    assert first < new[0] < new[1] < new[2], "new rows get increasing ids, in the batch's order"
    assert [g[0] for g in sig] == new, "one EntryAdded per stored row, in id order, none for repeated keys"
    stored = {r["id"]: r for r in get_log(session_id=s)}
    assert sorted(stored) == [first, *new]
    assert stored[first]["exit_code"] == 7, "a repeated key changes nothing"
    assert stored[got[0]]["exit_code"] == 0 and stored[got[2]]["event"] == "failed"
    assert stored[got[4]]["operation"] == "write" and stored[got[4]]["detail"] == '{"path": "/tmp/x"}'
    for rid, _, row in sig:
        assert row == stored[rid], "the signal carries the row as GetLog returns it"
    assert get_output(got[0]) == (b"one\n", b"") and get_output(got[2]) == (b"", b"two")

    # the same batch again (a spool resending after a lost answer): the same ids, nothing new
    again = collect_signals(lambda: got.__setitem__(slice(None), record_batch(rows)), 0, session_id=s,
                            timeout=1.0)
    assert got == [new[0], first, new[1], new[0], new[2]] and again == []
    assert len(get_log(session_id=s)) == 4
    assert record_batch([]) == []


def test_record_batch_is_all_or_nothing():
    s = session()
    good = [exec_row(f"{s}-a", s), exec_row(f"{s}-c", s)]
    for bad, message in [
        ({"key": f"{s}-b", "session_id": s, "operation": "rm", "event": "finished"},
         "Row 1: Unknown operation 'rm'"),
        (exec_row(f"{s}-b", s, detail="{oops"), "Row 1: detail is not valid JSON"),
        ({"session_id": s, "operation": "exec", "event": "finished"}, "Row 1: key is required"),
        (exec_row(f"{s}-b", s, stdout=b"x" * (1024 * 1024 + 1)), "Row 1: stdout is 1048577 bytes"),
        (exec_row(f"{s}-b", s, bogus="x"), "Row 1: Unknown row field 'bogus'"),
    ]:
        name, msg = error_of(record_batch, [good[0], bad, good[1]])
        assert name == INVALID and message in msg, (bad, name, msg)
    # a field of the wrong type, spelled with busctl
    r = busctl("RecordBatch", "aa{sv}", "2",
               "3", "key", "s", f"{s}-a", "operation", "s", "exec", "event", "s", "finished",
               "3", "key", "s", f"{s}-b", "operation", "s", "exec", "event", "i", "1")
    want = "Row 1: Row field 'event' must be of type 's', not 'i'"
    assert r.returncode != 0 and want in r.stderr, r.stderr
    name, msg = error_of(record_batch, [exec_row(f"{s}-{i}", s) for i in range(4097)], timeout=60)
    assert name == INVALID and "at most 4096 rows" in msg
    assert get_log(session_id=s) == [], "nothing of a refused batch is stored"
    # and the good rows, alone, go in
    assert len(set(record_batch(good))) == 2 and len(get_log(session_id=s)) == 2


def test_record_batch_access(users):
    reader = users("audit-batch-reader", admin=True)
    reload_bus()
    s = session()
    args = ["RecordBatch", "aa{sv}", "1", "4", "key", "s", f"{s}-x", "session_id", "s", s, "operation", "s",
            "exec", "event", "s", "failed"]
    for user in ("nobody", reader):
        r = busctl(*args, user=user)
        assert r.returncode != 0 and "Access denied" in r.stderr, (user, r.stderr)
    assert get_log(session_id=s) == []
    r = busctl(*args)
    assert r.returncode == 0 and r.stdout.startswith("at 1 "), r.stderr
    assert len(get_log(session_id=s)) == 1


def test_reader_membership_is_seen_again(users):
    """Readers' group membership is remembered for a few seconds, not for ever."""
    u = users("audit-late-reader")
    reload_bus()
    r = busctl("GetLog", "a{sv}tt", "0", "1", "0", user=u)
    assert r.returncode != 0 and "Access denied" in r.stderr
    run("usermod", "-a", "-G", "sandbox-admin", u)
    reload_bus()
    wait_for(lambda: busctl("GetLog", "a{sv}tt", "0", "1", "0", user=u).returncode == 0, timeout=30,
             interval=0.5, what="the new member to be let in")


def test_introspection_matches_the_contract():
    """What the running logger says it has is what dbus/org.sandboxd.audit1.xml promises."""
    import xml.etree.ElementTree as ET

    def members(root):
        iface = next(i for i in root.iter("interface") if i.get("name") == IFACE)
        def args(m):
            default = "out" if m.tag == "signal" else "in"
            return tuple((a.get("direction", default), a.get("type"), a.get("name")) for a in m.iter("arg"))
        return {(m.tag, m.get("name"), args(m)) for m in iface if m.tag in ("method", "signal")}

    xml = dbus.Interface(dbus.SystemBus().get_object(BUS_NAME, PATH, introspect=False),
                         "org.freedesktop.DBus.Introspectable").Introspect()
    contract = ET.parse("/usr/share/dbus-1/interfaces/org.sandboxd.audit1.xml").getroot()
    assert members(ET.fromstring(str(xml))) == members(contract)
    assert ("method", "RecordBatch", (("in", "aa{sv}", "rows"), ("out", "at", "ids"))) in members(contract)
