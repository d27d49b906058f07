# SPDX-License-Identifier: LGPL-2.1-or-later
# The audit log's tamper evidence and its journal sink, as an operator meets them: rows carry hashes
# that chain (re-checked here with the documented Python recipe), VerifyLog and `sandboxctl log
# --verify` find an edited, a deleted and a moved row at the right row, retention keeps the chain
# verifiable, and with [Journal] Rows=yes `journalctl SANDBOX_ID=…` shows the rows and their checkpoints.
import hashlib
import json
import os
import pwd
import sqlite3
import struct
import subprocess
import time
import uuid

import dbus
import pytest

from conftest import dbus_error, run, wait_for
from test_auditd import DB, DROPIN_DIR, INVALID, DENIED, IFACE, get_log, iface, record, restart, session, \
    write_dropin, users  # noqa: F401 (users is a fixture)
from gateway_helpers import Client, cli_key, gateway_up

CHECKPOINT_ID = "2cdcf263b8a64da892cdc6d37b58c533"
EXEC_ID = "395ffae0c4224acda950cfabc1bd5d44"
FILE_ID = "74a16b0e346b4e3387d4f2c476517eb2"
SANDBOX_ID = "ad7ec25ea2d74aaa8134c37fc2176f4d"
SEED = bytes(32)


@pytest.fixture(autouse=True)
def logger_up():
    run("systemctl", "start", "sandbox-auditd")
    yield


# --- the documented recipe (docs/audit-api.md, "Checking the chain yourself") --------------------
def i64(v):
    return struct.pack(">q", v)


def b(v):
    v = v.encode() if isinstance(v, str) else (v or b"")
    return i64(len(v)) + v


def row_hash(prev, r):
    enc = (i64(r["id"]) + b(r["key"]) + b(r["session_id"]) + b(r["account_id"]) + b(r["source"]) +
           b(r["operation"]) + b(r["event"]) + i64(r["exit_code"]) + i64(r["started_at"]) +
           i64(r["duration_usec"]) + b(r["request_id"]) + i64(r["recorded_at"]) + i64(r["stdout_size"]) +
           i64(r["stderr_size"]) + i64(r["detail_truncated"]) + b(r["output_truncated"]) + b(r["detail"]) +
           b(r["stdout"]) + b(r["stderr"]))
    return hashlib.sha256(prev + enc).digest()


def check_chain(path):
    """The recipe: walks the database read-only; returns (rows verified, first bad id or None)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    anchor_id, anchor_hash = db.execute("SELECT id, hash FROM chain_anchor").fetchone()
    prev, prev_id, n = anchor_hash or SEED, anchor_id, 0
    for r in db.execute("SELECT e.*, h.hash AS chain_hash FROM entries e LEFT JOIN entry_hashes h"
                        " ON h.id = e.id WHERE e.id > ? ORDER BY e.id", (anchor_id,)):
        if r["id"] != prev_id + 1 or r["chain_hash"] != row_hash(prev, r):
            return n, r["id"]
        prev, prev_id, n = r["chain_hash"], r["id"], n + 1
    db.close()
    return n, None
# ----------------------------------------------------------------------------------------------------


def verify(**opts):
    res = iface().VerifyLog(dbus.Dictionary({k: dbus.UInt64(v) for k, v in opts.items()}, signature="sv"),
                            timeout=600)
    return {str(k): (bool(v) if isinstance(v, dbus.Boolean) else int(v) if isinstance(v, dbus.UInt64)
                     else str(v)) for k, v in res.items()}


def ctl(*args, check=True):
    r = subprocess.run(["sandboxctl", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"sandboxctl {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return r


def tamper(sql, params=()):
    """Stops the logger, changes its database as an attacker with the file would, starts it again.
    Returns a function that puts the untouched database back."""
    run("systemctl", "stop", "sandbox-auditd")
    saved = DB + ".saved"
    src = sqlite3.connect(DB)
    dst = sqlite3.connect(saved)
    src.backup(dst)
    dst.close()
    if callable(sql):
        sql(src)
    else:
        src.executescript(sql) if not params else src.execute(sql, params)
    src.commit()
    src.close()
    run("chown", "-R", "sandbox-audit:sandbox-audit", os.path.dirname(DB))
    restart()

    def undo():
        run("systemctl", "stop", "sandbox-auditd")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(DB + suffix):
                os.unlink(DB + suffix)
        os.rename(saved, DB)
        run("chown", "-R", "sandbox-audit:sandbox-audit", os.path.dirname(DB))
        restart()
    return undo


def mixed_session():
    """A sandbox with a create, an exec that fails, one that times out, a file write and read, a file
    tool, a refused call and a delete, plus rows recorded directly with output: their ids."""
    sid = ctl("create", "--type", "small", "--ttl", "600").stdout.strip()
    ctl("exec", sid, "--", "sh", "-c", "echo out; echo err >&2; exit 3", check=False)
    ctl("exec", sid, "--timeout", "1", "--", "sleep", "30", check=False)
    subprocess.run(["sandboxctl", "write", sid, "/tmp/f.txt"], input=b"hello\n", check=True)
    ctl("cat", sid, "/tmp/f.txt")
    ctl("view", sid, "/tmp/f.txt")
    ctl("cat", sid, "/etc/shadow", check=False)  # refused
    ctl("delete", sid)
    own = session()
    for i in range(5):
        record(session_id=own, stdout=bytes(range(256)) * (i + 1), stderr=b"\xff\xfe" * i, exit_code=-i,
               detail=json.dumps({"argv": ["x", "ü", str(i)]}))
    rows = wait_for(lambda: (lambda r: len(r) >= 7 and r)(get_log(session_id=sid)), timeout=60,
                    what="the sandbox's rows")
    return sid, own, rows


def test_mixed_session_verifies():
    sid, own, rows = mixed_session()
    mine = get_log(session_id=own)
    assert len(mine) == 5
    for r in rows + mine:
        assert len(r["hash"]) == 64 and int(r["hash"], 16) >= 0, r

    res = verify()
    assert res["verified"] is True and res["reason"] == "ok", res
    assert res["rows"] >= len(rows) + 5
    assert res["last_id"] >= max(r["id"] for r in mine)
    assert "verify" in res["message"]
    # the last verified hash is the row's hash as GetLog shows it
    assert get_log(max_id=res["last_id"], limit=1)[0]["hash"] == res["last_hash"]
    # a walk that stops early
    part = verify(max_id=mine[-1]["id"])
    assert part["verified"] and part["last_id"] == mine[-1]["id"]

    # anybody can re-check it from the documented encoding, reading the file directly
    n, bad = check_chain(DB)
    assert bad is None and n >= res["rows"]

    r = ctl("log", "--verify")
    assert r.stdout.startswith("Verified: All "), r.stdout
    j = json.loads(ctl("log", "--verify", "--json").stdout)
    assert j["verified"] is True and j["reason"] == "ok"

    # EntryAdded's row and the gateway's REST rows carry the same hash
    gateway_up()
    admin = Client(cli_key("--preset", "admin", "--ttl", "1h")[0])
    rest = admin.get("/v1/log", params={"session_id": own, "limit": 10}).json()["entries"]
    assert {e["id"]: e["hash"] for e in rest} == {r["id"]: r["hash"] for r in mine}


@pytest.mark.parametrize("how", ["edited", "edited-output", "missing", "reordered"])
def test_tampering_is_found_at_the_right_row(how):
    own = session()
    ids = [record(session_id=own, stdout=b"row %d\n" % i) for i in range(6)]
    assert verify()["verified"], "the log verifies before it is touched"
    x = ids[2]
    sql = {
        "edited": f"UPDATE entries SET exit_code = 1 WHERE id = {x}",
        "edited-output": f"UPDATE entries SET stdout = X'726f772032210a' WHERE id = {x}",
        "missing": f"DELETE FROM entries WHERE id = {x}",
        "reordered": f"UPDATE entries SET id = -1 WHERE id = {x}; UPDATE entries SET id = {x} WHERE id = {x + 1};"
                     f" UPDATE entries SET id = {x + 1} WHERE id = -1;"
                     f" UPDATE entry_hashes SET id = -1 WHERE id = {x};"
                     f" UPDATE entry_hashes SET id = {x} WHERE id = {x + 1};"
                     f" UPDATE entry_hashes SET id = {x + 1} WHERE id = -1",
    }[how]
    undo = tamper(sql)
    try:
        res = verify()
        reason = how.split("-")[0]
        bad = x + 1 if how == "missing" else x
        assert (res["verified"], res["reason"], res["bad_id"]) == (False, reason, bad), res
        assert res["last_id"] == bad - 1 - (how == "missing")
        if how == "missing":
            assert res["message"] == f"Row {x} is missing: row {x + 1} does not follow from row {x - 1}."
        elif how == "edited":
            assert res["message"].startswith(f"Row {x} does not match its hash")
            assert len(res["stored_hash"]) == 64 and res["stored_hash"] != res["expected_hash"]
        r = ctl("log", "--verify", check=False)
        assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
        assert r.stdout.startswith("BROKEN: ") and res["message"] in r.stdout
        assert check_chain(DB)[1] == bad, "the recipe finds it at the same row"
    finally:
        undo()
    assert verify()["verified"]


def test_verify_bad_input_and_access(users):
    for opts, msg in [({"max_id": dbus.String("x")}, "Option field 'max_id' must be of type 't', not 's'."),
                      ({"bogus": dbus.UInt64(1)}, "Unknown option field 'bogus' (expected max_id)."),
                      ({"max_id": dbus.UInt64(0)}, "max_id must be 1 or more")]:
        with pytest.raises(dbus.DBusException) as e:
            iface().VerifyLog(dbus.Dictionary(opts, signature="sv"))
        name, message = dbus_error(e)
        assert name == INVALID and message.startswith(msg), (name, message)
    r = run("busctl", "call", "org.sandboxd.audit1", "/org/sandboxd/audit1", IFACE, "VerifyLog", "a{sv}", "0")
    assert r.stdout.startswith("a{sv} ")

    reader, other = users("chain-admin-%d" % os.getpid(), admin=True), users("chain-other-%d" % os.getpid())
    def as_user(user):
        gid = pwd.getpwnam(user).pw_gid
        return run("setpriv", f"--reuid={user}", f"--regid={gid}", "--init-groups", "busctl", "call",
                   "org.sandboxd.audit1", "/org/sandboxd/audit1", IFACE, "VerifyLog", "a{sv}", "0", check=False)
    wait_for(lambda: as_user(reader).returncode == 0, what="sandbox-admin may verify")
    r = as_user(other)
    assert r.returncode != 0 and ("AccessDenied" in r.stderr or "Access denied" in r.stderr), r.stderr
    gid = pwd.getpwnam(other).pw_gid
    r = subprocess.run(["setpriv", f"--reuid={other}", f"--regid={gid}", "--init-groups", "sandboxctl", "log",
                        "--verify"], capture_output=True, text=True)
    assert r.returncode == 1 and "sandbox-admin" in r.stderr, (r.returncode, r.stderr)


def test_retention_keeps_the_chain_verifiable():
    own = session()
    ids = [record(session_id=own) for i in range(8)]
    dropin = write_dropin("60-chain.conf", "[Log]\nMaxRows=4\n")
    try:
        restart()  # retention runs at start
        wait_for(lambda: len(get_log(limit=10)) <= 4, what="the log to shrink to 4 rows")
        res = verify()
        assert res["verified"], res
        assert res["anchor_id"] == ids[-1] - 4 and len(res["anchor_hash"]) == 64
        assert res["rows"] == 4 and res["last_id"] == ids[-1]
        assert check_chain(DB) == (4, None)
        # deleting the row right after the anchor is still found
        undo = tamper(f"DELETE FROM entries WHERE id = {ids[-4]}")
        try:
            res = verify()
            assert (res["reason"], res["bad_id"]) == ("missing", ids[-3]), res
        finally:
            undo()
    finally:
        os.unlink(dropin)
    restart()
    assert verify()["verified"]


def journal(*matches):
    out = run("journalctl", "--no-pager", "-o", "json", *matches, check=False).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_journal_rows_and_checkpoints():
    dropin = write_dropin("60-journal.conf", "[Journal]\nRows=yes\nCheckpointRows=3\nCheckpointIntervalSec=0\n")
    try:
        restart()
        sid = ctl("create", "--type", "small", "--ttl", "600").stdout.strip()
        ctl("exec", sid, "--", "sh", "-c", "exit 4", check=False)
        subprocess.run(["sandboxctl", "write", sid, "/tmp/j.txt"], input=b"x", check=True)
        ctl("delete", sid)
        rows = wait_for(lambda: (lambda r: len(r) >= 4 and r)(get_log(session_id=sid)), timeout=60,
                        what="the sandbox's rows")
        # sandboxd logs with SANDBOX_ID= too: the rows are sandbox-auditd's entries
        entries = wait_for(lambda: (lambda j: len(j) >= len(rows) and j)(
            journal(f"SANDBOX_ID={sid}", "_SYSTEMD_UNIT=sandbox-auditd.service")), what="the rows in the journal")
        by_row = {int(e["SANDBOX_ROW"]): e for e in entries}
        for r in rows:
            e = by_row[r["id"]]
            assert e["SANDBOX_OPERATION"] == r["operation"] and e["SANDBOX_EVENT"] == r["event"]
            assert e["SANDBOX_ACCOUNT"] == r["account_id"] and e["SANDBOX_SOURCE"] == r["source"]
            assert int(e["SANDBOX_EXIT"]) == r["exit_code"] and e["SANDBOX_HASH"] == r["hash"]
            assert e["_SYSTEMD_UNIT"] == "sandbox-auditd.service"
            assert "\n" not in e["MESSAGE"] and f"row {r['id']}" in e["MESSAGE"]
        ex = next(r for r in rows if r["operation"] == "exec")
        assert by_row[ex["id"]]["MESSAGE_ID"] == EXEC_ID and by_row[ex["id"]]["SANDBOX_EXIT"] == "4"
        assert by_row[ex["id"]]["MESSAGE"] == \
            f"exec {ex['event']} in {sid} by {ex['account_id']} (exit 4), row {ex['id']}"
        assert {by_row[r["id"]]["MESSAGE_ID"] for r in rows if r["operation"].startswith("sandbox.")} == {SANDBOX_ID}
        assert {by_row[r["id"]]["MESSAGE_ID"] for r in rows if r["operation"] == "write"} == {FILE_ID}

        # checkpoints: every 3 rows, each the id and hash of a stored row
        own = session()
        ids = [record(session_id=own) for i in range(3)]
        # fewer than 3 rows were uncovered before the first of them, so one of the three commits fires
        wait_for(lambda: [c for c in journal(f"MESSAGE_ID={CHECKPOINT_ID}")
                          if ids[0] <= int(c["SANDBOX_ROW"]) <= ids[-1]], what="a checkpoint among the new rows")
        checked = 0
        for c in journal(f"MESSAGE_ID={CHECKPOINT_ID}"):
            row = get_log(max_id=int(c["SANDBOX_ROW"]), limit=1)
            if row and row[0]["id"] == int(c["SANDBOX_ROW"]):
                assert row[0]["hash"] == c["SANDBOX_HASH"] and len(c["SANDBOX_HASH"]) == 64, c
                checked += 1
        assert checked >= 1

        # by time: one row, and a checkpoint for it within the interval
        write_dropin("60-journal.conf", "[Journal]\nRows=no\nCheckpointRows=0\nCheckpointIntervalSec=1s\n")
        restart()
        one = record(session_id=session())
        wait_for(lambda: any(int(c["SANDBOX_ROW"]) == one for c in journal(f"MESSAGE_ID={CHECKPOINT_ID}")),
                 what="a checkpoint by time")
        assert journal(f"SANDBOX_ROW={one}", f"MESSAGE_ID={EXEC_ID}") == [], "Rows=no writes no rows"
    finally:
        os.unlink(os.path.join(DROPIN_DIR, "60-journal.conf"))
    restart()


def rewrite_from(row_id):
    """An attacker who knows the recipe: edits row_id and recomputes every hash from there on."""
    def edit(db):
        db.row_factory = sqlite3.Row
        db.execute("UPDATE entries SET exit_code = exit_code + 1 WHERE id = ?", (row_id,))
        prev = db.execute("SELECT hash FROM entry_hashes WHERE id = (SELECT max(id) FROM entries WHERE id < ?)",
                          (row_id,)).fetchone()[0]
        for r in db.execute("SELECT * FROM entries WHERE id >= ? ORDER BY id", (row_id,)).fetchall():
            prev = row_hash(prev, r)
            db.execute("UPDATE entry_hashes SET hash = ? WHERE id = ?", (prev, r["id"]))
    return edit


def test_rewritten_chain_disagrees_with_the_journal():
    dropin = write_dropin("60-checkpoints.conf", "[Journal]\nCheckpointRows=2\nCheckpointIntervalSec=0\n")
    try:
        restart()
        own = session()
        ids = [record(session_id=own) for i in range(4)]
        wait_for(lambda: any(ids[0] <= int(c["SANDBOX_ROW"]) <= ids[-1] for c in journal(f"MESSAGE_ID={CHECKPOINT_ID}")),
                 what="a checkpoint among the rows")
        r = ctl("log", "--verify")
        assert "checkpoints agree with the log" in r.stdout, r.stdout

        undo = tamper(rewrite_from(ids[0]))
        try:
            res = verify()
            assert res["verified"], "a chain rewritten whole verifies on its own"
            r = ctl("log", "--verify", check=False)
            assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
            assert r.stdout.startswith("BROKEN: The journal's checkpoint of row "), r.stdout
            assert "the chain was rewritten after it" in r.stdout
            j = json.loads(ctl("log", "--verify", "--json", check=False).stdout)
            assert (j["verified"], j["reason"]) == (False, "checkpoint") and j["bad_id"] >= ids[0]
        finally:
            undo()
    finally:
        os.unlink(os.path.join(DROPIN_DIR, "60-checkpoints.conf"))
    restart()
    assert ctl("log", "--verify").returncode == 0


def test_the_logger_answers_while_a_walk_runs():
    """VerifyLog works in steps at idle priority: a GetLog sent after it is answered before it."""
    import dbus.mainloop.glib
    from gi.repository import GLib

    own = session()
    for b in range(3):
        rows = [dbus.Dictionary({"key": f"{own}-{b}-{i}", "session_id": own, "operation": "exec",
                                 "event": "finished", "stdout": dbus.ByteArray(b"x" * 200)}, signature="sv")
                for i in range(2000)]
        iface().RecordBatch(dbus.Array(rows, signature="a{sv}"), timeout=120)

    bus = dbus.SystemBus(mainloop=dbus.mainloop.glib.DBusGMainLoop(), private=True)
    log = dbus.Interface(bus.get_object("org.sandboxd.audit1", "/org/sandboxd/audit1", introspect=False), IFACE)
    order, loop = [], GLib.MainLoop()

    def done(name):
        def handler(*args):
            order.append(name)
            if len(order) == 2:
                loop.quit()
        return handler

    log.VerifyLog(dbus.Dictionary({}, signature="sv"), reply_handler=done("verify"), error_handler=done("error"),
                  timeout=600)
    log.GetLog(dbus.Dictionary({"session_id": own}, signature="sv"), dbus.UInt64(1), dbus.UInt64(0),
               reply_handler=done("getlog"), error_handler=done("error"))
    GLib.timeout_add(300_000, loop.quit)  # bounds a hang only
    loop.run()
    bus.close()
    assert order == ["getlog", "verify"], order
