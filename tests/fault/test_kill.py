# SPDX-License-Identifier: LGPL-2.1-or-later
# kill -9 of each daemon, repeatedly, while D-Bus and REST clients keep working: systemd brings each one
# back, no acknowledged Exec loses its audit row, every sandbox is still reachable or cleanly gone, and
# nothing of a sandbox outlives it (units, cgroups, processes). Also sandboxd's start-up sweep of units
# that an earlier sandboxd left behind, and the row of an Exec that sandboxd's death cut off.
import json
import os
import subprocess
import threading

import dbus
import requests

from conftest import (DAEMONS, LONG, SPOOL, Manager, assert_all_reachable, assert_no_leaks, audit, call_into_pipe,
                      fake_id, is_active, kill9, log, read_to_end, run, spooled, wait_for)

GW = "http://127.0.0.1:8790"


def all_exec_markers(since, prefix):
    """Every exec row since `since` whose argv[1] starts with prefix, paged through."""
    seen, offset = set(), 0
    aud = audit()
    while True:
        f = dbus.Dictionary({"operation": "exec", "since": dbus.UInt64(since)}, signature="sv")
        rows = aud.GetLog(f, dbus.UInt64(1000), dbus.UInt64(offset), timeout=LONG)
        for r in rows:
            argv = json.loads(str(r["detail"])).get("argv", [])
            if len(argv) > 1 and argv[1].startswith(prefix):
                seen.add(argv[1])
        if len(rows) < 1000:
            return seen
        offset += len(rows)


class Load:
    """Clients that keep calling, each on its own connection, and note what was acknowledged."""

    def __init__(self, sids, key):
        self.sids, self.key = sids, key
        self.acked, self.errors, self.statuses = set(), 0, {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.dbus_exec, args=(sids[0], "d0-")),
                        threading.Thread(target=self.dbus_exec, args=(sids[1], "d1-")),
                        threading.Thread(target=self.rest_exec, args=(sids[0], "r0-")),
                        threading.Thread(target=self.rest_exec, args=(sids[1], "r1-")),
                        threading.Thread(target=self.rest_lifecycle, args=("l-",))]

    def ack(self, marker):
        with self.lock:
            self.acked.add(marker)

    def fail(self, status=None):
        with self.lock:
            self.errors += 1
            if status:
                self.statuses[status] = self.statuses.get(status, 0) + 1

    def dbus_exec(self, sid, prefix):
        m, i = None, 0
        while not self.stop.is_set():
            i += 1
            try:
                m = m or Manager()
                code, out, _, _ = m.exec(sid, ["echo", f"{prefix}{i}"], timeout=60)
                if code == 0 and out == f"{prefix}{i}\n".encode():
                    self.ack(f"{prefix}{i}")
            except dbus.DBusException:
                self.fail()
                m = None  # a new connection after a daemon died (ours is fine, but cheap to renew)

    def rest_exec(self, sid, prefix):
        s, i = requests.Session(), 0
        s.headers["Authorization"] = f"Bearer {self.key}"
        while not self.stop.is_set():
            i += 1
            try:
                r = s.post(f"{GW}/v1/sandboxes/{sid}/exec", json={"argv": ["echo", f"{prefix}{i}"]}, timeout=60)
                if r.status_code == 200 and r.json()["stdout"] == f"{prefix}{i}\n":
                    self.ack(f"{prefix}{i}")
                else:
                    self.fail(r.status_code)
            except requests.RequestException:
                self.fail()
                s = requests.Session()
                s.headers["Authorization"] = f"Bearer {self.key}"

    def rest_lifecycle(self, prefix):
        h, i = {"Authorization": f"Bearer {self.key}"}, 0
        while not self.stop.is_set():
            i += 1
            sid = None
            try:
                r = requests.post(f"{GW}/v1/sandboxes", json={"type": "small"}, headers=h, timeout=60)
                if r.status_code != 201:
                    self.fail(r.status_code)
                    continue
                sid = r.json()["id"]
                r = requests.post(f"{GW}/v1/sandboxes/{sid}/exec", json={"argv": ["echo", f"{prefix}{i}"]},
                                  headers=h, timeout=60)
                if r.status_code == 200:
                    self.ack(f"{prefix}{i}")
                else:
                    self.fail(r.status_code)
            except requests.RequestException:
                self.fail()
            finally:
                if sid:
                    try:
                        requests.delete(f"{GW}/v1/sandboxes/{sid}", headers=h, timeout=60)
                    except requests.RequestException:
                        pass  # left for the leak check: it must be gone or reachable

    def progress(self, n):
        """Waits until n more calls were acknowledged."""
        with self.lock:
            target = len(self.acked) + n
        wait_for(lambda: len(self.acked) >= target, timeout=120, interval=0.05, what=f"{n} more acknowledged calls")

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in self.threads), "a client hung"


def test_kill9_each_daemon_under_load(mgr, sandbox, admin_key):
    sids = [sandbox()[0], sandbox()[0]]
    since = int(run("date", "+%s%6N").stdout.strip())
    kills = {}
    with Load(sids, admin_key) as load:
        load.progress(20)
        for _ in range(2):
            for unit in DAEMONS:
                kill9(unit)
                kills[unit] = kills.get(unit, 0) + 1
                load.progress(10)  # everything works again before the next kill
    assert kills == {u: 2 for u in DAEMONS}

    wait_for(lambda: spooled() == 0, timeout=120, what="the audit spool to drain")
    recorded = set()
    for prefix in ("d0-", "d1-", "r0-", "r1-", "l-"):
        recorded |= all_exec_markers(since, prefix)
    missing = sorted(load.acked - recorded)
    assert missing == [], f"acknowledged Execs without an audit row: {missing[:20]} ({len(missing)})"
    assert len(load.acked) > 0
    print(f"acknowledged {len(load.acked)}, failed calls {load.errors}, statuses {load.statuses}")

    db = "/var/lib/sandbox-auditd/audit.db"
    assert run("sqlite3", db, "PRAGMA integrity_check").stdout.strip() == "ok"
    assert_all_reachable()
    assert_no_leaks()


def test_units_of_gone_sandboxes_are_swept_at_start(mgr, sandbox):
    """Units whose stop was still queued when sandboxd died: the next start stops them (a regression
    test: they were never swept, as neither a row nor a workspace told of them)."""
    sid, _ = sandbox()
    gone = fake_id()
    procs = []
    try:
        # What a dead sandboxd leaves: a slice and an exec scope of a sandbox it had already forgotten,
        # a shell scope without its relay, and a command's background process of a live sandbox.
        for unit, slice_ in ((f"sandbox-{gone}-exec-3", f"sandbox-{gone}"),
                             (f"sandbox-{sid}-shell-999", f"sandbox-{sid}"),
                             (f"sandbox-{sid}-exec-999", f"sandbox-{sid}")):
            procs.append(subprocess.Popen(["systemd-run", "--quiet", "--scope", f"--unit={unit}", f"--slice={slice_}",
                                           "sleep", "3600"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_for(lambda: is_active(unit + ".scope"), what=f"{unit} up")
        assert is_active(f"sandbox-{gone}.slice")

        kill9("sandboxd")

        wait_for(lambda: not is_active(f"sandbox-{gone}.slice") and not is_active(f"sandbox-{gone}-exec-3.scope"),
                 what="the gone sandbox's units stopped")
        wait_for(lambda: not is_active(f"sandbox-{sid}-shell-999.scope"), what="the orphaned shell scope stopped")
        # the live sandbox and its command's processes stay
        assert is_active(f"sandbox-{sid}-exec-999.scope")
        assert is_active(f"sandbox-{sid}.slice")
        code, out, _, _ = Manager().exec(sid, ["echo", "ok"])
        assert (code, out) == (0, b"ok\n")
    finally:
        for p in procs:
            p.kill()
            p.wait()
        run("systemctl", "stop", f"sandbox-{gone}.slice", f"sandbox-{sid}-exec-999.scope", check=False)


def test_burst_of_deletions_then_kill9(mgr):
    """Deleting many sandboxes queues their slices' stops (32 in flight at once); kill -9 right after the
    last answer, and whatever was still queued is swept by the next sandboxd."""
    m = Manager()
    sids = [str(m.create(type="small")[0]) for _ in range(48)]
    errors = []

    def delete(part):
        mm = Manager()
        for sid in part:
            try:
                mm.delete(sid)
            except dbus.DBusException as e:
                errors.append(e)

    threads = [threading.Thread(target=delete, args=(sids[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    kill9("sandboxd")
    assert errors == []
    listed = {row[0] for row in Manager().list()}
    assert not listed & set(sids)
    assert_no_leaks()


def test_exec_cut_off_by_sandboxd_death_has_its_row(mgr, sandbox):
    """An Exec under way when sandboxd dies is never answered (its caller gets an error), but it is on the
    record: its note in the spool becomes a "failed" row at the next start, with who asked, the
    command, and "interrupted" as the error. One row for it, none for the Execs that were answered."""
    sid, _ = sandbox()
    marker = f"cut-off-{fake_id()}"
    done = [str(mgr.exec(sid, ["echo", f"{marker}-answered"])[1], "ascii")]
    call = subprocess.Popen(["busctl", "--timeout=120", "call", "--", "org.sandboxd.sandbox1", "/org/sandboxd/sandbox1",
                             "org.sandboxd.sandbox1.Manager", "Exec", "sasa{sv}", sid, "3", "sh", "-c",
                             f"sleep 30 # {marker}", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: int(run("sqlite3", SPOOL, "SELECT count(*) FROM running WHERE detail LIKE "
                                 f"'%{marker}%'").stdout.strip() or 0) == 1, what="the Exec noted as running")
        kill9("sandboxd")
        out, err = call.communicate(timeout=60)
        assert call.returncode != 0, out  # never answered
    finally:
        call.kill()
        call.wait()

    def rows():
        return [r for r in log(session=sid, operation="exec")
                if any(marker in a for a in json.loads(str(r["detail"])).get("argv", []))]
    wait_for(lambda: len(rows()) == 2, timeout=60, what="the rows of both Execs in the log")
    by_event = {str(r["event"]): r for r in rows()}
    assert set(by_event) == {"finished", "failed"}, rows()
    cut = by_event["failed"]
    detail = json.loads(str(cut["detail"]))
    assert detail["argv"] == ["sh", "-c", f"sleep 30 # {marker}"] and detail["unit"].startswith(f"sandbox-{sid}-exec-")
    assert detail["error"] == "org.sandboxd.sandbox1.Interrupted" and "unknown" in detail["message"]
    assert int(cut["exit_code"]) == -1 and str(cut["account_id"]) == "uid:0"
    assert run("sqlite3", SPOOL, "SELECT count(*) FROM running").stdout.strip() == "0"
    assert done == [f"{marker}-answered\n"]
    run("systemctl", "stop", *[u for u in run("systemctl", "list-units", "--plain", "--no-legend",
                                                f"sandbox-{sid}-exec-*").stdout.split() if u.endswith(".scope")],
        check=False)


def test_takeover_cut_off_by_sandboxd_death_has_its_row(mgr, sandbox):
    """The same for a takeover shell: sandboxd is its relay, so the session dies with it, and its row
    (written when a session ends) comes from its note at the next start."""
    sid, _ = sandbox()
    fd, unit = mgr.iface.OpenShell(sid, dbus.Dictionary({"cols": dbus.UInt32(100), "rows": dbus.UInt32(30)},
                                                        signature="sv"), timeout=LONG)
    sock = fd.take()
    try:
        kill9("sandboxd")
    finally:
        os.close(sock)
    wait_for(lambda: [r for r in log(session=sid, operation="takeover")], timeout=60, what="the session's row")
    rows = log(session=sid, operation="takeover")
    assert len(rows) == 1, rows
    row = rows[0]
    detail = json.loads(str(row["detail"]))
    assert str(row["event"]) == "failed" and int(row["exit_code"]) == -1
    assert detail["unit"] == str(unit) and (detail["cols"], detail["rows"]) == (100, 30)
    assert detail["error"] == "org.sandboxd.sandbox1.Interrupted"
    run("systemctl", "stop", str(unit), check=False)


def test_file_helpers_die_with_sandboxd(mgr, sandbox):
    """File helpers run in their sandbox's cgroups, so systemd's stop of sandboxd.service does not end
    them: they must die with sandboxd themselves (PR_SET_PDEATHSIG, and their socket closing), a busy
    one too, and the sandbox's next file call gets a new helper."""
    sid, path = sandbox()
    uid = int(mgr.props(path)["Uid"])
    mgr.write(sid, "big.bin", b"z" * (1 << 20))

    def helpers():
        out = []
        for p in os.listdir("/proc"):
            try:
                if (p.isdigit() and f"\nUid:\t{uid}\t" in open(f"/proc/{p}/status").read()
                        and os.readlink(f"/proc/{p}/exe").endswith("/sandboxd-file-helper")):
                    out.append(int(p))
            except OSError:
                pass
        return out

    # a ReadFile blocked on a pipe nobody reads keeps the sandbox's helper busy
    r = call_into_pipe(mgr, "ReadFile", sid, "big.bin")
    try:
        before = wait_for(helpers, what="the busy helper")
        assert "\nState:\tZ" not in open(f"/proc/{before[0]}/status").read()
        kill9("sandboxd")
        wait_for(lambda: not set(before) & set(helpers()), what="the helpers to die with sandboxd")
        read_to_end(r)  # ends: the busy helper held the pipe's last write end
    finally:
        os.close(r)
    m2 = Manager()
    m2.write(sid, "after.txt", b"still works")
    assert m2.read(sid, "after.txt")[0] == b"still works"
    assert not set(before) & set(helpers())
