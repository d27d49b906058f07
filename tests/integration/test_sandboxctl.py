# SPDX-License-Identifier: LGPL-2.1-or-later
# sandboxctl against the installed sandboxd, as a person or a script uses it.
import json
import os
import re
import signal
import subprocess

import pytest

from conftest import audit_log, wait_for


def ctl(*args, input=None, check=True):
    r = subprocess.run(["sandboxctl", *args], input=input, capture_output=True)
    if check and r.returncode != 0:
        raise AssertionError(f"sandboxctl {' '.join(args)} exited {r.returncode}: {r.stderr.decode()}")
    return r


@pytest.fixture
def sid():
    s = ctl("create", "--type", "small", "--ttl", "600").stdout.decode().strip()
    assert re.fullmatch(r"sb_[a-z2-7]{10}", s)
    yield s
    ctl("delete", s, check=False)


def test_list_and_status(sid):
    out = ctl("list").stdout.decode()
    assert out.splitlines()[0].split() == ["ID", "NAME", "TYPE", "STATE", "OWNER"]
    assert re.search(rf"^{sid}\s+{sid}\s+small\s+running\s+uid:0\s*$", out, re.M)
    assert "listed." in out.splitlines()[-1]
    bare = ctl("list", "--no-legend").stdout.decode()
    assert "ID" not in bare and "listed" not in bare and sid in bare
    doc = json.loads(ctl("list", "--json=short").stdout)
    assert {"id": sid, "name": sid, "type": "small", "state": "running", "owner": "uid:0"} in doc["sandboxes"]
    st = json.loads(ctl("status", sid, "--json=pretty").stdout)
    assert st["id"] == sid and st["network"] == "none" and st["unit"] == f"sandbox-{sid}.slice"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", st["created_at"])
    text = ctl("status", sid).stdout.decode()
    assert re.search(r"^\s*State: running$", text, re.M)


def test_exec_status_and_streams(sid):
    r = ctl("exec", sid, "--", "sh", "-c", "echo out; echo err >&2; exit 5", check=False)
    assert (r.returncode, r.stdout, r.stderr) == (5, b"out\n", b"err\n")
    r = ctl("exec", "--capture", sid, "--", "sh", "-c", "echo captured", check=False)
    assert (r.returncode, r.stdout) == (0, b"captured\n")
    r = ctl("exec", "-i", sid, "--", "tr", "a-z", "A-Z", input=b"shout\n")
    assert r.stdout == b"SHOUT\n"
    r = ctl("exec", "--env", "GREETING=hi", "--cwd", "/tmp", sid, "--", "sh", "-c", 'echo "$GREETING $PWD"')
    assert r.stdout == b"hi /tmp\n"
    r = ctl("exec", "--timeout", "1", sid, "--", "sleep", "30", check=False)
    assert r.returncode == 124 and b"timed out" in r.stderr
    r = ctl("exec", sid, "--", "sh", "-c", "kill -KILL $$", check=False)
    assert r.returncode == 137


@pytest.mark.parametrize("opts,sig", [([], signal.SIGINT), ([], signal.SIGKILL), (["--capture"], signal.SIGINT)])
def test_exec_ends_with_sandboxctl(sid, opts, sig):
    """Ctrl-C, or sandboxctl killed, cancels the command (streamed or captured): within 10 s it is gone from
    the sandbox, and its audit row says "cancelled"."""
    p = subprocess.Popen(["sandboxctl", "exec", *opts, sid, "--", "sh", "-c", "echo started; sleep 60"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: ctl("exec", sid, "--", "pgrep", "-x", "sleep", check=False).returncode == 0,
                 timeout=30, what="the command to run")
        p.send_signal(sig)
        p.communicate(timeout=30)
        rows = wait_for(lambda: [x for x in audit_log(sid, operation="exec") if x["event"] == "cancelled"],
                        timeout=10, what="the row saying cancelled")
        assert len(rows) == 1, rows
        wait_for(lambda: ctl("exec", sid, "--", "pgrep", "-x", "sleep", check=False).returncode == 1,
                 timeout=10, what="the sleep to be gone")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_files(sid, tmp_path):
    ctl("write", sid, "/tmp/task.py", input=b"print('from a file')\n")
    assert ctl("cat", sid, "/tmp/task.py").stdout == b"print('from a file')\n"
    assert ctl("exec", sid, "--", "python3", "/tmp/task.py").stdout == b"from a file\n"
    src = tmp_path / "big.bin"
    data = os.urandom(3 * 1024 * 1024 + 17)
    src.write_bytes(data)
    ctl("cp", str(src), f"{sid}:data/big.bin", "--mkdir")
    back = tmp_path / "back.bin"
    ctl("cp", f"{sid}:data/big.bin", str(back))
    assert back.read_bytes() == data
    ctl("write", "--append", sid, "log.txt", input=b"a\n")
    ctl("write", "--append", sid, "log.txt", input=b"b\n")
    assert ctl("cat", sid, "log.txt").stdout == b"a\nb\n"


def test_errors(sid):
    r = ctl("exec", "sb_aaaaaaaaaa", "--", "true", check=False)
    assert r.returncode == 125 and b"No sandbox" in r.stderr
    r = ctl("cat", sid, "/does/not/exist", check=False)
    assert r.returncode == 1 and b"/does/not/exist" in r.stderr
    r = ctl("delete", "sb_aaaaaaaaaa", check=False)
    assert r.returncode == 1
    r = ctl("create", "--type", "enormous", check=False)
    assert r.returncode == 1 and b"enormous" in r.stderr
    r = ctl("frobnicate", check=False)
    assert r.returncode == 2


def test_set_ttl_and_delete(sid):
    ctl("set-ttl", sid, "120")
    st = json.loads(ctl("status", sid, "--json=short").stdout)
    assert st["expires_at"] is not None
    ctl("delete", sid)
    assert sid not in ctl("list", "--no-legend").stdout.decode()


# File names a sandbox chose (issue 21, item 10): a window title (OSC 0, ended by BEL), a screen clear, a
# clipboard write (OSC 52, ended by ST), a C1 CSI, a bidi override, a backslash. On a terminal each comes
# out escaped (make_printable()'s rule); --json keeps the names as they are.
EVIL = {
    "title": ("t\x1b]0;owned\x07\x1b[2J", "t\\x1b]0;owned\\x07\\x1b[2J"),
    "clip": ("c\x1b]52;c;cm0gLXJmIH4=\x1b\\", "c\\x1b]52;c;cm0gLXJmIH4=\\x1b\\\\"),
    "csi": ("s\u009b31m", "s\\u009b31m"),
    "bidi": ("b\u202etxt.exe", "b\\u202etxt.exe"),
}
RAW_CONTROLS = (b"\x1b", b"\x07", "\u009b".encode(), "\u202e".encode())


def assert_no_raw_controls(out):
    for b in RAW_CONTROLS:
        assert b not in out, (b, out)


def test_sandbox_file_names_reach_the_terminal_escaped(sid):
    make = ("import os, sys\nos.makedirs('/tmp/evil', exist_ok=True)\n"
            "for n in sys.argv[1:]:\n"
            "    open('/tmp/evil/' + n, 'w').write('needle \\x1b]0;line\\x07\\tend\\n')\n")
    ctl("exec", sid, "--", "python3", "-c", make, *[raw for raw, _ in EVIL.values()])

    ls = ctl("ls", sid, "/tmp/evil").stdout
    assert_no_raw_controls(ls)
    names = sorted(line.rsplit(b" ", 1)[-1].decode() for line in ls.splitlines())  # no blank in a name
    assert names == sorted(esc for _, esc in EVIL.values()), ls

    glob = ctl("glob", sid, "/tmp/evil/*").stdout
    assert_no_raw_controls(glob)
    assert sorted(glob.decode().splitlines()) == sorted(f"/tmp/evil/{esc}" for _, esc in EVIL.values())

    # grep: the file name and the matched line are escaped; a TAB in the line stays.
    grep = ctl("grep", sid, "needle", "/tmp/evil").stdout
    assert_no_raw_controls(grep)
    assert sorted(grep.decode().splitlines()) == sorted(
        f"/tmp/evil/{esc}:1:needle \\x1b]0;line\\x07\tend" for _, esc in EVIL.values())

    # --json: the raw names and lines, JSON-escaped as JSON does.
    j = json.loads(ctl("ls", sid, "/tmp/evil", "--json").stdout)
    assert sorted(e["name"] for e in j["entries"]) == sorted(raw for raw, _ in EVIL.values())
    j = json.loads(ctl("glob", sid, "/tmp/evil/*", "--json").stdout)
    assert sorted(p["path"] for p in j["paths"]) == sorted(f"/tmp/evil/{raw}" for raw, _ in EVIL.values())
    j = json.loads(ctl("grep", sid, "needle", "/tmp/evil", "--json").stdout)
    assert {m["text"] for m in j["matches"]} == {"needle \x1b]0;line\x07\tend"}

    # view is the file itself, raw like cat (docs/sandboxctl.md says why).
    raw, _ = EVIL["title"]
    assert ctl("view", sid, f"/tmp/evil/{raw}").stdout == b"     1\tneedle \x1b]0;line\x07\tend\n"

    # An error message that quotes such a path is escaped too.
    r = ctl("view", sid, "/tmp/evil/missing\x1b]0;owned\x07", check=False)
    assert r.returncode == 1
    assert_no_raw_controls(r.stderr)
    assert b"missing\\x1b]0;owned\\x07" in r.stderr, r.stderr
