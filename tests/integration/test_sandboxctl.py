# SPDX-License-Identifier: LGPL-2.1-or-later
# sandboxctl against the installed sandboxd, as a person or a script uses it.
import json
import os
import re
import subprocess

import pytest


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
