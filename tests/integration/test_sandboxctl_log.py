# SPDX-License-Identifier: LGPL-2.1-or-later
# "sandboxctl log" against the installed sandboxd and sandbox-auditd: the rows an operator reads, as a
# table, as JSON lines, live with --follow, and an exec's captured output with --output.
import json
import os
import re
import selectors
import signal
import subprocess
import time

import pytest

from conftest import run, wait_for

RFC3339_USEC = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"


def ctl(*args, input=None, check=True):
    r = subprocess.run(["sandboxctl", *args], input=input, capture_output=True)
    if check and r.returncode != 0:
        raise AssertionError(f"sandboxctl {' '.join(args)} exited {r.returncode}: {r.stderr.decode()}")
    return r


def jsonl(*args):
    out = ctl("log", *args, "--json").stdout.decode()
    return [json.loads(line) for line in out.splitlines()]


def rows_settled(ref, n, *args):
    """The rows of ref once there are n of them (sandboxd hands rows to the logger asynchronously)."""
    return wait_for(lambda: (lambda rows: len(rows) == n and rows)(jsonl(ref, *args)), timeout=60,
                    what=f"{n} rows for {ref}")


@pytest.fixture(autouse=True)
def logger_up():
    run("systemctl", "start", "sandbox-auditd")
    yield


@pytest.fixture
def named():
    """A sandbox created with sandboxctl under a unique name: (id, name)."""
    name = f"log-{os.getpid()}-{time.monotonic_ns()}"
    sid = ctl("create", "--type", "small", "--ttl", "600", "--name", name).stdout.decode().strip()
    yield sid, name
    ctl("delete", sid, check=False)


def test_json_lines_table_and_output(named):
    sid, name = named
    r = ctl("exec", sid, "--", "sh", "-c", "echo hello-log; echo err-log >&2; exit 3", check=False)
    assert r.returncode == 3

    create, ex = rows_settled(sid, 2)
    # Oldest first, every row a JSON object of its own line, snake_case as GetLog has them.
    assert create["id"] < ex["id"]
    assert create["operation"] == "sandbox.create" and create["event"] == "finished"
    assert create["session_id"] == sid and create["detail"]["name"] == name
    assert ex["operation"] == "exec" and ex["event"] == "finished" and ex["exit_code"] == 3
    assert ex["session_id"] == sid and ex["account_id"] == "uid:0" and ex["source"] == "agent"
    assert ex["detail"]["argv"] == ["sh", "-c", "echo hello-log; echo err-log >&2; exit 3"]
    assert ex["output_truncated"] == {"stdout": "hello-log\n", "stderr": "err-log\n"}
    assert re.fullmatch(RFC3339_USEC, ex["started_at"])
    assert isinstance(ex["started_at_usec"], int) and ex["started_at_usec"] >= create["started_at_usec"]
    assert isinstance(ex["duration_ms"], int) and ex["duration_ms"] >= 0
    for key in ("key", "request_id"):
        assert key in ex

    # A name is resolved to the id; filters and --limit pick rows.
    assert jsonl(name) == [create, ex]
    assert jsonl(sid, "--operation", "exec") == [ex]
    assert jsonl(sid, "--limit", "1") == [ex]
    assert jsonl(sid, "--event", "failed") == []
    assert jsonl(sid, "--since", "2999-01-01T00:00:00Z") == []
    assert jsonl(sid, "--since", create["started_at"], "--account", "uid:0") == [create, ex]

    # --output: the exec's captured output, raw, each stream to its own.
    r = ctl("log", "--output", str(ex["id"]))
    assert (r.stdout, r.stderr) == (b"hello-log\n", b"err-log\n")

    # The table: a header, then one line per row, the newest last.
    lines = ctl("log", sid).stdout.decode().splitlines()
    assert lines[0].split() == ["TIME", "ID", "SANDBOX", "ACCOUNT", "SOURCE", "OPERATION", "EVENT", "EXIT",
                                "DURATION", "DETAIL"]
    assert len(lines) == 3
    assert re.match(rf"^\w{{3}} \d\d \d\d:\d\d:\d\d\.\d{{3}} +{create['id']} {sid} +uid:0 +agent +sandbox\.create "
                    rf"+finished +- +\d+ms {re.escape(name)}$", lines[1])
    assert re.search(rf" {ex['id']} {sid} .* exec +finished +3 +\d+ms "
                     r"sh -c 'echo hello-log; echo err-log >&2; exit 3'$", lines[2])
    bare = ctl("log", sid, "--no-legend").stdout.decode().splitlines()
    assert bare == lines[1:]
    assert ctl("log", "sb_nnnnnnnnnn").stdout.decode().splitlines()[1:] == ["-- No entries --"]


def read_lines_until(proc, pred, timeout=30.0):
    """Reads proc's stdout line by line until pred(line) holds; returns all lines read."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    buf, lines = b"", []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not sel.select(timeout=max(0.0, end - time.monotonic())):
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            lines.append(line.decode())
            if pred(line.decode()):
                return lines
    raise AssertionError(f"timed out; read so far: {lines!r}")


def test_follow(named):
    sid, _ = named
    ctl("exec", sid, "--", "echo", "before")
    rows_settled(sid, 2)

    proc = subprocess.Popen(["sandboxctl", "log", sid, "--follow", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    table = subprocess.Popen(["sandboxctl", "log", sid, "-f", "--operation", "exec"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    try:
        # The last rows first, the newest at the bottom ...
        first = read_lines_until(proc, lambda l: '"before"' in l)
        assert [json.loads(l)["operation"] for l in first] == ["sandbox.create", "exec"]
        read_lines_until(table, lambda l: "echo before" in l)

        # ... then a row produced later, as it arrives, and only rows of this sandbox.
        other = ctl("create", "--type", "small", "--ttl", "600").stdout.decode().strip()
        try:
            ctl("exec", other, "--", "echo", "elsewhere")
            ctl("exec", sid, "--", "echo", "later")
        finally:
            ctl("delete", other, check=False)
        later = read_lines_until(proc, lambda l: '"later"' in l)
        rows = [json.loads(l) for l in later]
        assert rows[-1]["detail"]["argv"] == ["echo", "later"] and rows[-1]["session_id"] == sid
        assert all(r["session_id"] == sid for r in rows)
        assert rows[-1]["id"] > json.loads(first[-1])["id"]
        assert re.fullmatch(RFC3339_USEC, rows[-1]["started_at"])
        assert read_lines_until(table, lambda l: "echo later" in l)[-1].split()[7:9] == ["exec", "finished"]
    finally:
        for p in (proc, table):
            p.send_signal(signal.SIGINT)
    for p in (proc, table):
        assert p.wait(timeout=10) == 0, p.stderr.read().decode()
        p.stdout.close()
        p.stderr.close()
    # Nothing was printed twice.
    ids = [json.loads(l)["id"] for l in first + later]
    assert len(ids) == len(set(ids))


def test_errors(named):
    sid, _ = named
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    r = subprocess.run(nobody + ["sandboxctl", "log"], capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.startswith("sandboxctl: log: ") and "sandbox-admin" in r.stderr
    r = subprocess.run(nobody + ["sandboxctl", "log", "--output", "1"], capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.startswith("sandboxctl: log: ")
    assert ctl("log", "--output", "18446744073709551615", check=False).returncode == 1
    assert ctl("log", "--limit", "x", check=False).returncode == 2
    assert ctl("log", "--output", "1", sid, check=False).returncode == 2
    assert ctl("log", "--since", "yesterday", check=False).returncode == 2
    assert ctl("log", sid, sid, check=False).returncode == 2


def test_rows_reach_the_terminal_escaped(named):
    """Issue 21, item 12: a row's detail carries what a sandbox or client chose (a path with U+202E and
    other format characters, an argv with ESC); the table escapes it, --json keeps it."""
    sid, _ = named
    path = "/tmp/\u202egnp.sh\u2066\u200b\u00ad"
    ctl("write", sid, path, input=b"x")
    ctl("exec", sid, "--", "printf", "\x1b]0;owned\x07")
    rows = rows_settled(sid, 3)
    assert rows[1]["detail"]["path"] == path
    assert rows[2]["detail"]["argv"] == ["printf", "\x1b]0;owned\x07"]

    out = ctl("log", sid).stdout
    for b in (b"\x1b", b"\x07", "\u202e".encode(), "\u2066".encode(), "\u200b".encode(), "\u00ad".encode()):
        assert b not in out, (b, out)
    lines = out.decode().splitlines()
    assert lines[2].endswith(" /tmp/\\u202egnp.sh\\u2066\\u200b\\u00ad"), lines[2]
    assert lines[3].endswith(" printf '\\x1b]0;owned\\x07'"), lines[3]
