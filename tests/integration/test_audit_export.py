# SPDX-License-Identifier: LGPL-2.1-or-later
# The run-session export of the audit log (docs/audit-api.md, "Run-session export"): sandboxctl log
# --export DIR of a mixed session, byte for byte with GetOutput; resumed and followed; bad directories.
import json
import os
import signal
import socket
import subprocess
import time

import dbus
import pytest

from conftest import LONG, audit, audit_log, run, spooled, wait_for


@pytest.fixture(autouse=True)
def logger_up():
    run("systemctl", "start", "sandbox-auditd")
    yield


def ctl(*args, check=True):
    r = subprocess.run(["sandboxctl", *args], capture_output=True)
    if check and r.returncode != 0:
        raise AssertionError(f"sandboxctl {' '.join(args)} exited {r.returncode}: {r.stderr.decode()}")
    return r


def lines(d):
    with open(os.path.join(d, "audit.jsonl"), "rb") as f:
        data = f.read()
    assert data == b"" or data.endswith(b"\n")
    return [json.loads(x) for x in data.splitlines()]


def settled(sid, n):
    return wait_for(lambda: spooled() == 0 and len(audit_log(sid)) >= n and audit_log(sid), timeout=60,
                    what=f"{n} rows for {sid}")


def output(row_id):
    out, err = audit().GetOutput(dbus.UInt64(row_id), byte_arrays=True, timeout=LONG)
    return bytes(out), bytes(err)


def mixed_session(mgr, sid):
    """exec ok, exit 3, timed out, OOM-killed; a refused exec; file tools; a takeover. Returns the row count."""
    mgr.sh(sid, "printf 'out\\000\\377\\n'; echo err >&2")
    mgr.sh(sid, "echo three; exit 3")
    mgr.sh(sid, "sleep 30", timeout_seconds=1)
    mgr.exec(sid, ["python3", "-c", "b = bytearray(256 << 20)"], memory_max=32 << 20)
    with pytest.raises(dbus.DBusException):
        mgr.exec(sid, [])
    mgr.write(sid, "/tmp/f.txt", b"alpha\nbeta\n")
    mgr.read(sid, "/tmp/f.txt")
    ctl("view", sid, "/tmp/f.txt")
    ctl("str-replace", sid, "/tmp/f.txt", "beta", "gamma")
    assert ctl("str-replace", sid, "/tmp/f.txt", "nowhere", "x", check=False).returncode != 0
    ctl("ls", sid, "/tmp")
    ctl("grep", sid, "gamma", "/tmp")
    fd, unit = mgr.iface.OpenShell(sid, dbus.Dictionary({}, signature="sv"), timeout=LONG)
    s = socket.socket(fileno=fd.take())
    s.sendall(b"echo taken-over; exit 5\n")
    s.settimeout(60)
    while s.recv(65536):
        pass
    s.close()
    return 13


def test_mixed_session_resume_and_bad_input(mgr, sandbox, tmp_path):
    sid, _ = sandbox()
    n = mixed_session(mgr, sid)
    rows = {int(r["id"]): r for r in settled(sid, n + 1)}  # + sandbox.create
    rows = wait_for(lambda: (lambda rs: any(str(r["operation"]) == "takeover" for r in rs) and rs)(audit_log(sid)),
                    timeout=60, what="the takeover row")
    rows = {int(r["id"]): r for r in rows}

    d = tmp_path / "exp"
    d.mkdir()
    r = ctl("log", "--export", str(d), sid)
    assert b"Exported" in r.stderr
    ev = lines(d)
    by_op = {}
    for e in ev:
        assert e["sandbox"] == sid and e["rowId"] in rows and e["runId"] == f"run-{e['rowId']}"
        assert e["account"] == "uid:0" and e["source"] in ("agent", "human_takeover")
        by_op.setdefault(e["operation"], []).append(e)
    # sandbox.create maps to nothing; every other row to its events, in row order
    assert "sandbox.create" not in by_op
    assert [e["rowId"] for e in ev] == sorted(e["rowId"] for e in ev)

    execs = by_op["exec"]
    names = [(e["event"], e.get("reason"), e.get("exitCode")) for e in execs]
    assert names[:2] == [("sandbox.command.started", None, None), ("sandbox.command.finished", None, 0)]
    assert names[2:4] == [("sandbox.command.started", None, None), ("sandbox.command.failed", "exit_code", 3)]
    assert names[4][0] == "sandbox.command.started" and names[5][:2] == ("sandbox.command.failed", "timed_out")
    assert names[6][0] == "sandbox.command.started" and names[7][:2] == ("sandbox.command.failed", "oom_killed")
    assert names[8] == ("sandbox.command.blocked", None, None)
    assert len(execs) == 9
    assert execs[1]["command"] == "sh -c 'printf '\\''out\\000\\377\\n'\\''; echo err >&2'"
    assert execs[5]["limits"]["timeoutSeconds"] == 1 and execs[7]["limits"]["memoryMax"] == 32 << 20
    assert execs[8]["error"] == "org.freedesktop.DBus.Error.InvalidArgs"

    files = [e["event"] for op in ("write", "read", "view", "str_replace", "ls", "grep") for e in by_op[op]]
    assert files == ["sandbox.file.write", "sandbox.file.read", "sandbox.file.view", "sandbox.file.str_replace",
                     "sandbox.file.str_replace", "sandbox.file.ls", "sandbox.file.grep"]
    assert [e["status"] for e in by_op["str_replace"]] == ["finished", "failed"]
    assert all(e["path"] == "/tmp/f.txt" for e in by_op["write"] + by_op["view"])
    takeover = by_op["takeover"]
    assert [(e["event"], e["kind"]) for e in takeover] == [("sandbox.command.started", "takeover"),
                                                          ("sandbox.command.failed", "takeover")]
    assert takeover[1]["exitCode"] == 5 and takeover[1]["reason"] == "exit_code"

    # one run directory per command row, its output byte for byte as GetOutput has it
    runs = sorted(p.name for p in d.iterdir() if p.is_dir())
    cmd_rows = sorted(i for i, r in rows.items() if str(r["operation"]) in ("exec", "takeover"))
    assert runs == sorted(f"run-{i}" for i in cmd_rows)
    for i in cmd_rows:
        out, err = output(i)
        assert (d / f"run-{i}" / "stdout.txt").read_bytes() == out
        assert (d / f"run-{i}" / "stderr.txt").read_bytes() == err
        md = json.loads((d / f"run-{i}" / "metadata.json").read_text())
        assert md["runId"] == f"run-{i}" and md["rowId"] == i and md["sandbox"] == sid
        assert md["stdoutBytes"] == len(out) and md["stderrBytes"] == len(err) and md["outputAvailable"]
        assert md["kind"] == str(rows[i]["operation"])
    first = d / f"run-{cmd_rows[0]}"
    assert (first / "stdout.txt").read_bytes() == b"out\x00\xff\n"
    assert json.loads((first / "metadata.json").read_text())["status"] == "finished"
    assert b"taken-over" in (d / f"run-{cmd_rows[-1]}" / "stdout.txt").read_bytes()

    # resumed: nothing twice; a new row is appended
    before = (d / "audit.jsonl").read_bytes()
    ctl("log", "--export", str(d), sid)
    assert (d / "audit.jsonl").read_bytes() == before
    mgr.sh(sid, "echo later")
    wait_for(lambda: spooled() == 0 and len(audit_log(sid)) == len(rows) + 1, timeout=60, what="the new row")
    ctl("log", "--export", str(d), sid)
    after = lines(d)
    assert after[:len(ev)] == ev and [e["event"] for e in after[len(ev):]] == [
        "sandbox.command.started", "sandbox.command.finished"]

    # a crash after the lines and before the state: the uncommitted tail is cut and written once
    with open(d / "audit.jsonl", "ab") as f:
        f.write(b'{"runId":"run-999999","event":"half')
    ctl("log", "--export", str(d), sid)
    assert lines(d) == after

    # bad input: clear errors, nothing written
    r = ctl("log", "--export", str(tmp_path / "missing"), check=False)
    assert r.returncode != 0 and b"no such directory" in r.stderr
    (tmp_path / "file").write_text("x")
    r = ctl("log", "--export", str(tmp_path / "file"), check=False)
    assert r.returncode != 0 and b"not a directory" in r.stderr
    r = ctl("log", "--export", str(d), check=False)  # the whole log into a sandbox's export
    assert r.returncode != 0 and b"export" in r.stderr
    r = ctl("log", "--export", str(d), "--operation", "exec", sid, check=False)
    assert r.returncode == 2
    other = tmp_path / "other"
    other.mkdir()
    (other / "audit.jsonl").write_text("{}\n")
    r = ctl("log", "--export", str(other), sid, check=False)
    assert r.returncode != 0 and b"missing" in r.stderr and (other / "audit.jsonl").read_text() == "{}\n"
    link = tmp_path / "link"
    link.mkdir()
    os.symlink("/etc/passwd", link / "audit.jsonl")
    r = ctl("log", "--export", str(link), sid, check=False)
    assert r.returncode != 0 and b"symlink" in r.stderr


def test_follow_picks_up_a_new_run(mgr, sandbox, tmp_path):
    sid, _ = sandbox()
    settled(sid, 1)
    d = tmp_path / "f"
    d.mkdir()
    p = subprocess.Popen(["sandboxctl", "log", "--export", str(d), "--follow", sid], stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)
        mgr.sh(sid, "echo followed")
        ev = wait_for(lambda: (lambda x: len(x) == 2 and x)(lines(d) if (d / "audit.jsonl").exists() else []),
                      timeout=60, what="the followed run's events")
        assert [e["event"] for e in ev] == ["sandbox.command.started", "sandbox.command.finished"]
        assert (d / ev[0]["runId"] / "stdout.txt").read_bytes() == b"followed\n"
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    assert p.returncode == 0, err


def test_rest_export(mgr, sandbox, tmp_path):
    from gateway_helpers import Client, assert_error, cli_key, gateway_up

    gateway_up()
    admin = Client(cli_key("--preset", "admin", "--ttl", "1h")[0])
    member = Client(cli_key("--preset", "member", "--ttl", "1h")[0])
    sid, _ = sandbox()
    mgr.sh(sid, "echo one")
    mgr.sh(sid, "exit 4")
    mgr.write(sid, "/tmp/x", b"x")
    settled(sid, 4)
    d = tmp_path / "cli"
    d.mkdir()
    ctl("log", "--export", str(d), sid)
    cli = (d / "audit.jsonl").read_bytes()

    r = admin.get(f"/v1/log/export?sandbox={sid}", stream=True)
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/x-ndjson"
    assert r.headers.get("Transfer-Encoding") == "chunked"
    body = r.raw.read()
    # the same lines as sandboxctl's export: one mapping
    assert body == cli and len(body.splitlines()) == 5
    ev = [json.loads(x) for x in body.splitlines()]

    # since= is exclusive: the rows after it
    r = admin.get(f"/v1/log/export?sandbox={sid}&since={ev[1]['rowId']}")
    assert r.status_code == 200
    assert [json.loads(x) for x in r.content.splitlines()] == ev[2:]
    r = admin.get(f"/v1/log/export?sandbox={sid}&since={ev[-1]['rowId']}")
    assert r.status_code == 200 and r.content == b""

    # the whole log holds this sandbox's lines too, oldest first
    whole = [json.loads(x) for x in admin.get("/v1/log/export").content.splitlines()]
    assert [e for e in whole if e["sandbox"] == sid] == ev
    assert [e["rowId"] for e in whole] == sorted(e["rowId"] for e in whole)

    # members are refused, and bad input is a clear error
    assert_error(member.get("/v1/log/export"), 403, "forbidden")
    assert_error(admin.get("/v1/log/export?since=abc"), 400, "invalid_request")
    assert_error(admin.get("/v1/log/export?since=-1"), 400, "invalid_request")
    assert_error(admin.get("/v1/log/export?sandbox=../etc"), 400, "invalid_request")
    assert_error(Client().get("/v1/log/export"), 401, "unauthorized")
    # an admin key limited to some sandboxes exports only one of them, named
    scoped = Client(cli_key("--preset", "admin", "--ttl", "1h", "--sandboxes", sid)[0])
    assert_error(scoped.get("/v1/log/export"), 403, "forbidden")
    assert_error(scoped.get("/v1/log/export?sandbox=sb_aaaaaaaaaa"), 403, "forbidden")
    r = scoped.get(f"/v1/log/export?sandbox={sid}")
    assert r.status_code == 200 and r.content == body


def test_large_log_exports_every_row_once(tmp_path):
    """Thousands of rows in one id range: windows narrow and widen, pages follow the client's reading,
    and each row comes out exactly once, in order, from both the CLI and the REST route."""
    from gateway_helpers import Client, cli_key, gateway_up

    gateway_up()
    sid = "sb_" + "".join("abcdefghijklmnopqrstuvwxyz234567"[b % 32] for b in os.urandom(10))
    n = 2500
    log = audit()
    for start in range(0, n, 500):
        log.RecordBatch(dbus.Array([dbus.Dictionary({
            "key": f"{sid}-{i}", "session_id": sid, "operation": "exec", "event": "finished",
            "detail": json.dumps({"argv": ["echo", str(i), "x" * 1000]}), "exit_code": dbus.Int32(0),
            "stdout": dbus.ByteArray(b"%d\n" % i)}, signature="sv") for i in range(start, start + 500)],
            signature="a{sv}"), timeout=LONG)

    d = tmp_path / "big"
    d.mkdir()
    ctl("log", "--export", str(d), sid)
    ev = lines(d)
    assert len(ev) == 2 * n
    assert [e["command"].split()[1] for e in ev[1::2]] == [str(i) for i in range(n)]
    assert len({e["rowId"] for e in ev}) == n
    assert len([p for p in d.iterdir() if p.is_dir()]) == n

    admin = Client(cli_key("--preset", "admin", "--ttl", "1h")[0])
    r = admin.get(f"/v1/log/export?sandbox={sid}", stream=True)
    body = b""
    for chunk in r.iter_content(4096):
        body += chunk
    assert body == (d / "audit.jsonl").read_bytes()


def test_rest_export_failure_is_its_last_line():
    """The logger goes away while an export streams: the stream ends with the error body as its last
    line, after whole lines only, so a client tells a cut export from a complete one."""
    from gateway_helpers import cli_key, gateway_up, raw_request

    gateway_up()
    sid = "sb_" + "".join("abcdefghijklmnopqrstuvwxyz234567"[b % 32] for b in os.urandom(10))
    log = audit()
    for start in range(0, 20000, 1000):
        log.RecordBatch(dbus.Array([dbus.Dictionary({
            "key": f"{sid}-{i}", "session_id": sid, "operation": "view", "event": "finished",
            "detail": json.dumps({"path": f"/tmp/{i}", "pad": "x" * 1000})}, signature="sv")
            for i in range(start, start + 1000)], signature="a{sv}"), timeout=LONG)
    secret, _ = cli_key("--preset", "admin", "--ttl", "1h")
    s = raw_request("GET", f"/v1/log/export?sandbox={sid}", secret, headers=("Connection: close",), rcvbuf=4096)
    try:
        data = s.recv(4096)
        assert data.startswith(b"HTTP/1.1 200"), data[:200]
        # the headers may go before the first page is fetched: wait for the first event's line
        s.settimeout(120)
        while b"sandbox.file.view" not in data:
            chunk = s.recv(4096)
            assert chunk, data[:400]
            data += chunk
        # the gateway waits for this client now; take the logger away (masked: no bus activation either)
        run("systemctl", "mask", "--runtime", "--now", "sandbox-auditd.service")
        s.settimeout(120)
        while chunk := s.recv(1 << 20):
            data += chunk
    finally:
        s.close()
        run("systemctl", "unmask", "--runtime", "sandbox-auditd.service")
        run("systemctl", "start", "sandbox-auditd.service")
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"chunked" in head.lower()
    text = b""
    while body:  # de-chunk
        size, _, rest = body.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            break
        text += rest[:n]
        body = rest[n + 2:]
    lines = text.split(b"\n")
    assert lines[-1] == b"", "the stream ends with a whole line"
    events = [json.loads(x) for x in lines[:-1]]
    err = events.pop()
    assert err["event"] == "error" and err["status"] >= 500 and set(err) == {
        "event", "error", "code", "status", "requestId"}, err
    assert 0 < len(events) < 20000
    assert [e["rowId"] for e in events] == sorted(e["rowId"] for e in events)
    assert all(e["event"] == "sandbox.file.view" for e in events)


def test_background_process_is_a_run(mgr, sandbox, tmp_path):
    """A background process (sandboxctl start, kill) is one run over its rows: exported while it runs
    (started, metadata saying so), then resumed after its end (the signals and its end appended once,
    the run directory completed with the exit row's output), the same as exporting it in one go and as
    GET /v1/log/export; a start that could not run is a run that ended at once."""
    from gateway_helpers import Client, cli_key, gateway_up
    from test_processes import output_until, rows as process_rows

    sid, _ = sandbox()
    pid = ctl("start", sid, "--cwd=/tmp", "--", "sh", "-c",
              "echo out; echo err >&2; exec sleep 1000").stdout.decode().strip()
    output_until(mgr, sid, pid, b"out\n")
    output_until(mgr, sid, pid, b"err\n", stream="stderr")
    [start] = process_rows(sid, "process.start")
    settled(sid, 2)
    run_id = f"run-{sid}-{pid}"

    d = tmp_path / "exp"
    d.mkdir()
    ctl("log", "--export", str(d), sid)
    [started] = lines(d)
    assert started["event"] == "sandbox.command.started" and started["runId"] == run_id
    assert started["kind"] == "process" and started["process"] == pid and started["rowId"] == int(start["id"])
    assert started["argv"] == ["sh", "-c", "echo out; echo err >&2; exec sleep 1000"]
    assert started["command"] == "sh -c 'echo out; echo err >&2; exec sleep 1000'" and started["cwd"] == "/tmp"
    assert started["unit"] == f"sandbox-{sid}-process-{pid[1:]}.scope"
    rd = d / run_id
    # while it runs its directory holds metadata only: the output comes with its exit row
    assert sorted(p.name for p in rd.iterdir()) == ["metadata.json"]
    md = json.loads((rd / "metadata.json").read_text())
    assert md["state"] == "running" and md["finishedAt"] is None and md["signals"] == []
    assert md["startRowId"] == int(start["id"]) and md["account"] == "uid:0" and md["sandbox"] == sid
    before = (d / "audit.jsonl").read_bytes()

    ctl("kill", "--signal=CONT", sid, pid)
    ctl("kill", sid, pid)  # SIGTERM
    sigs = process_rows(sid, "process.signal", 2)
    [end] = process_rows(sid, "process.exit")
    settled(sid, 5)
    ctl("log", "--export", str(d), sid)
    ev = lines(d)
    assert (d / "audit.jsonl").read_bytes().startswith(before)
    assert [(e["event"], e["runId"]) for e in ev] == [
        ("sandbox.command.started", run_id), ("sandbox.command.signal", run_id),
        ("sandbox.command.signal", run_id), ("sandbox.command.failed", run_id)]
    assert [e["signal"] for e in ev[1:3]] == [int(signal.SIGCONT), int(signal.SIGTERM)]
    assert all(e["status"] == "finished" for e in ev[1:3])
    fin = ev[3]
    assert fin["rowId"] == int(end["id"]) and fin["reason"] == "signal" and fin["exitCode"] == 143
    assert fin["state"] == "killed" and fin["signal"] == 15 and fin["sandboxGone"] is False
    out, err = output(int(end["id"]))
    assert (out, err) == (b"out\n", b"err\n")
    assert (rd / "stdout.txt").read_bytes() == out and (rd / "stderr.txt").read_bytes() == err
    assert fin["stdoutBytes"] == 4 and fin["stdoutTotalBytes"] == 4 and fin["stdoutOffset"] == 0
    md = json.loads((rd / "metadata.json").read_text())
    assert md["state"] == "killed" and md["exitCode"] == 143 and md["outputAvailable"] is True
    assert md["startRowId"] == int(start["id"]) and md["rowId"] == int(end["id"])
    assert md["finishedAt"] == fin["time"] and md["startedAt"] == fin["startedAt"]
    assert [(s["signal"], s["rowId"]) for s in md["signals"]] == [
        (int(signal.SIGCONT), int(sigs[-1]["id"])), (int(signal.SIGTERM), int(sigs[0]["id"]))]
    assert md["argv"][0] == "sh" and md["cwd"] == "/tmp" and md["unit"] == started["unit"]

    # resumed again: nothing new; an uncommitted tail is cut and written once
    done = (d / "audit.jsonl").read_bytes()
    ctl("log", "--export", str(d), sid)
    with open(d / "audit.jsonl", "ab") as f:
        f.write(done[len(before):len(before) + 40])
    ctl("log", "--export", str(d), sid)
    assert (d / "audit.jsonl").read_bytes() == done

    # exported in one go: the same lines and the same run directory, byte for byte
    once = tmp_path / "once"
    once.mkdir()
    ctl("log", "--export", str(once), sid)
    assert (once / "audit.jsonl").read_bytes() == done
    for name in ("metadata.json", "stdout.txt", "stderr.txt"):
        assert (once / run_id / name).read_bytes() == (rd / name).read_bytes(), name

    # a start that could not run: started and failed at once, in its own process's run
    assert ctl("start", sid, "--", "/nonexistent", check=False).returncode == 1
    [bad] = [r for r in process_rows(sid, "process.start", 2) if str(r["event"]) == "failed"]
    settled(sid, 6)
    ctl("log", "--export", str(d), sid)
    new = lines(d)[len(ev):]
    bad_run = new[0]["runId"]
    assert [e["event"] for e in new] == ["sandbox.command.started", "sandbox.command.failed"]
    assert bad_run.startswith(f"run-{sid}-p") and bad_run != run_id and new[1]["rowId"] == int(bad["id"])
    assert new[1]["reason"] == "error" and new[1]["error"] == "org.sandboxd.sandbox1.NoSuchFile"
    assert (d / bad_run / "stdout.txt").read_bytes() == b"" and (d / bad_run / "stderr.txt").read_bytes() == b""
    assert json.loads((d / bad_run / "metadata.json").read_text())["status"] == "failed"

    # the REST route gives the same lines: one mapping
    gateway_up()
    admin = Client(cli_key("--preset", "admin", "--ttl", "1h")[0])
    r = admin.get(f"/v1/log/export?sandbox={sid}")
    assert r.status_code == 200 and r.content == (d / "audit.jsonl").read_bytes()
