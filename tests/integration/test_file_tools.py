# SPDX-License-Identifier: LGPL-2.1-or-later
# The file tools (FileCreate, View, StrReplace, Insert, Ls, Glob, Grep) through the bus and sandboxctl: what each
# does on a fixture tree, the uniqueness rule, bytes that are not UTF-8, bad input, an escape corpus, audit rows.
import json
import os
import subprocess
import tempfile

import dbus
import pytest

from conftest import LONG, audit_log, call_into_pipe, dbus_error, read_to_end, run, sandbox_path, wait_for

E = dbus.Dictionary({}, signature="sv")
WORKSPACES = "/var/lib/sandboxd/sandboxes"

FIXTURE = r"""
set -e
mkdir -p proj/src/pkg proj/.git proj/docs
printf 'def main():\n    print("hello")\n    return 0\n' > proj/src/main.py
printf 'X = 1\nY = 2\nX = 3\n' > proj/src/pkg/consts.py
printf 'hello world\nHELLO again\n' > proj/docs/README.md
printf 'hello from git\n' > proj/.git/config
printf 'bin\000ary hello\n' > proj/src/blob.bin
ln -s src/main.py proj/link.py
"""


def opts(**kw):
    o = {}
    for k, v in kw.items():
        if k == "fd":
            o[k] = dbus.types.UnixFd(v)
        elif isinstance(v, bool):
            o[k] = dbus.Boolean(v)
        elif isinstance(v, int):
            o[k] = dbus.UInt32(v)
        elif isinstance(v, bytes):
            o[k] = dbus.ByteArray(v)
        else:
            o[k] = dbus.String(v)
    return dbus.Dictionary(o, signature="sv")


class Tools:
    def __init__(self, mgr, sid):
        self.m, self.sid = mgr.iface, sid

    def create(self, path, content, **kw):
        return dict(self.m.FileCreate(self.sid, path, dbus.ByteArray(content), opts(**kw), timeout=LONG))

    def view(self, path, **kw):
        text, info = self.m.View(self.sid, path, opts(**kw), timeout=LONG, byte_arrays=True)
        return bytes(text), dict(info)

    def replace(self, path, old, new, **kw):
        return dict(self.m.StrReplace(self.sid, path, dbus.ByteArray(old), dbus.ByteArray(new), opts(**kw),
                                      timeout=LONG))

    def insert(self, path, line, text, **kw):
        return dict(self.m.Insert(self.sid, path, dbus.UInt32(line), dbus.ByteArray(text), opts(**kw), timeout=LONG))

    def ls(self, path, **kw):
        entries, info = self.m.Ls(self.sid, path, opts(**kw), timeout=LONG, byte_arrays=True)
        return [(bytes(n), str(t), int(mo), int(s), int(mt)) for n, t, mo, s, mt in entries], dict(info)

    def glob(self, pattern, **kw):
        paths, info = self.m.Glob(self.sid, pattern, opts(**kw), timeout=LONG, byte_arrays=True)
        return [bytes(p) for p in paths], dict(info)

    def grep(self, pattern, **kw):
        matches, info = self.m.Grep(self.sid, pattern, opts(**kw), timeout=LONG, byte_arrays=True)
        return [(bytes(f), int(l), bytes(t)) for f, l, t in matches], dict(info)


@pytest.fixture
def tools(mgr, sandbox):
    sid, _ = sandbox()
    code, out, err, _ = mgr.sh(sid, FIXTURE)
    assert code == 0, err
    t = Tools(mgr, sid)
    t.mgr = mgr
    return t


def read(t, path):
    return t.mgr.read(t.sid, path)[0]


def test_file_create(tools):
    info = tools.create("proj/new.txt", b"one\ntwo\n")
    assert info["created"] and info["size"] == 8
    assert read(tools, "/home/sandbox/proj/new.txt") == b"one\ntwo\n"
    with pytest.raises(dbus.DBusException) as e:
        tools.create("proj/new.txt", b"other")
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.FileExists"
    assert read(tools, "proj/new.txt") == b"one\ntwo\n"
    info = tools.create("proj/new.txt", b"other", overwrite=True)
    assert not info["created"]
    assert read(tools, "proj/new.txt") == b"other"
    with pytest.raises(dbus.DBusException) as e:
        tools.create("proj/a/b/c.txt", b"x")
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.NoSuchFile"
    tools.create("proj/a/b/c.txt", b"x", create_dirs=True, mode=0o600)
    code, out, _, _ = tools.mgr.sh(tools.sid, "stat -c '%a %U' proj/a/b/c.txt")
    assert out == b"600 sandbox\n"


def test_view(tools):
    text, info = tools.view("proj/src/main.py")
    assert text == b'     1\tdef main():\n     2\t    print("hello")\n     3\t    return 0\n'
    assert info["type"] == "file" and info["lines"] == 3 and not info["truncated"]
    text, info = tools.view("proj/src/main.py", start_line=2, end_line=2)
    assert text == b'     2\t    print("hello")\n'
    assert (info["start_line"], info["end_line"]) == (2, 2)
    text, _ = tools.view("proj/link.py", start_line=3)  # through the symlink, as the user would
    assert text == b"     3\t    return 0\n"
    text, info = tools.view("/home/sandbox/proj")
    assert info["type"] == "directory"
    # two levels, hidden entries left out, sorted
    assert text == b"docs/\ndocs/README.md\nlink.py\nsrc/\nsrc/blob.bin\nsrc/main.py\nsrc/pkg/\n"
    with pytest.raises(dbus.DBusException) as e:
        tools.view("proj/src/blob.bin")
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.BinaryFile"
    with pytest.raises(dbus.DBusException) as e:
        tools.view("proj/src/main.py", start_line=9)
    assert dbus_error(e)[0] == "org.freedesktop.DBus.Error.InvalidArgs"
    assert "3 lines" in dbus_error(e)[1]


def test_str_replace_uniqueness(tools):
    path = "proj/src/pkg/consts.py"
    before = read(tools, path)
    with pytest.raises(dbus.DBusException) as e:
        tools.replace(path, b"X = ", b"Z = ")
    name, msg = dbus_error(e)
    assert name == "org.sandboxd.sandbox1.AmbiguousMatch" and "occurs 2 times" in msg
    with pytest.raises(dbus.DBusException) as e:
        tools.replace(path, b"W = ", b"Z = ")
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.NoMatch"
    assert read(tools, path) == before  # nothing changed
    info = tools.replace(path, b"X = 3", b"X = 30")
    assert info["line"] == 3
    assert read(tools, path) == b"X = 1\nY = 2\nX = 30\n"
    # overlapping occurrences are not unique
    tools.create("overlap.txt", b"aaa")
    with pytest.raises(dbus.DBusException) as e:
        tools.replace("overlap.txt", b"aa", b"b")
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.AmbiguousMatch"


def test_insert(tools):
    path = "proj/src/pkg/consts.py"
    info = tools.insert(path, 0, b"# top")
    assert info["lines"] == 4
    tools.insert(path, 4, b"Z = 9\n")
    tools.insert(path, 2, b"# a\n# b")
    assert read(tools, path) == b"# top\nX = 1\n# a\n# b\nY = 2\nX = 3\nZ = 9\n"
    with pytest.raises(dbus.DBusException) as e:
        tools.insert(path, 99, b"x")
    assert dbus_error(e)[0] == "org.freedesktop.DBus.Error.InvalidArgs"
    assert read(tools, path).count(b"\n") == 7


def test_ls(tools):
    entries, info = tools.ls("proj")
    names = [e[0] for e in entries]
    assert names == [b".git", b"docs", b"link.py", b"src"]
    by = {e[0]: e for e in entries}
    assert by[b"link.py"][1] == "symlink" and by[b"src"][1] == "directory"
    assert info["count"] == 4 and not info["truncated"]
    entries, _ = tools.ls("proj/src/main.py")
    assert entries[0][:4] == (b"main.py", "file", 0o644, 44)
    assert entries[0][4] > 1_700_000_000_000_000  # µs since the epoch
    entries, info = tools.ls("proj", max_results=2)
    assert len(entries) == 2 and info["truncated"]


def test_glob(tools):
    paths, info = tools.glob("proj/**/*.py")
    assert paths == [b"/home/sandbox/proj/link.py", b"/home/sandbox/proj/src/main.py",
                     b"/home/sandbox/proj/src/pkg/consts.py"]
    paths, _ = tools.glob("*.py", path="/home/sandbox/proj/src")
    assert paths == [b"/home/sandbox/proj/src/main.py"]
    paths, _ = tools.glob("/home/sandbox/proj/.git/*")
    assert paths == [b"/home/sandbox/proj/.git/config"]
    paths, info = tools.glob("proj/**", max_results=3)
    assert len(paths) == 3 and info["truncated"]


def test_grep(tools):
    m, info = tools.grep("hello", path="proj")
    assert m == [(b"/home/sandbox/proj/.git/config", 1, b"hello from git"),
                 (b"/home/sandbox/proj/docs/README.md", 1, b"hello world"),
                 (b"/home/sandbox/proj/src/main.py", 2, b'    print("hello")')]
    assert info["binary_skipped"] == 1 and not info["truncated"]
    m, _ = tools.grep("^hello", path="proj/docs", ignore_case=True)
    assert [x[1] for x in m] == [1, 2]
    m, _ = tools.grep("hel+o", path="proj", glob="*.md")
    assert [x[0] for x in m] == [b"/home/sandbox/proj/docs/README.md"]
    m, _ = tools.grep("X = \\d", path="proj/src/pkg/consts.py")
    assert [x[1] for x in m] == [1, 3]
    m, info = tools.grep("hello", path="proj", max_results=1)
    assert len(m) == 1 and info["truncated"]
    with pytest.raises(dbus.DBusException) as e:
        tools.grep("(unclosed", path="proj")
    name, msg = dbus_error(e)
    # compiled in the helper only; PCRE2's own words come back
    assert name == "org.freedesktop.DBus.Error.InvalidArgs" and msg.startswith("Grep: invalid regular expression: ")
    assert "missing closing parenthesis" in msg, msg


def test_bad_input(tools):
    bad = [
        lambda: tools.view(""),
        lambda: tools.view("proj", start_line=5, end_line=2),
        lambda: tools.create("x", b"y", bogus=True),
        lambda: tools.create("x", b"y", mode=0o7777),
        lambda: tools.replace("proj/src/main.py", b"", b"x"),
        lambda: tools.insert("proj/src/main.py", 1, b""),
        lambda: tools.grep("x", max_results=2_000_000),
        lambda: tools.glob(""),
        lambda: tools.glob("/abs/*", path="/tmp"),
        lambda: tools.view("x", path_bytes=b"a\0b"),
        lambda: tools.view("proj", path_bytes=b"proj"),
    ]
    for call in bad:
        with pytest.raises(dbus.DBusException) as e:
            call()
        assert dbus_error(e)[0] == "org.freedesktop.DBus.Error.InvalidArgs", dbus_error(e)
    with pytest.raises(dbus.DBusException) as e:
        tools.view("proj/missing")
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.NoSuchFile"
    with pytest.raises(dbus.DBusException) as e:
        tools.m.View("sb_nosuchsandb", "x", E)
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.NoSuchSandbox"
    with pytest.raises(dbus.DBusException) as e:
        tools.replace("proj", b"a", b"b")
    assert dbus_error(e)[0] == "org.freedesktop.DBus.Error.InvalidArgs"  # a directory
    # above the 64 MiB cap: a clear error, nothing read
    tools.mgr.sh(tools.sid, "truncate -s 65M big.txt")
    for call in (lambda: tools.view("big.txt"), lambda: tools.replace("big.txt", b"a", b"b"),
                 lambda: tools.insert("big.txt", 0, b"x")):
        with pytest.raises(dbus.DBusException) as e:
            call()
        assert dbus_error(e)[0] == "org.sandboxd.sandbox1.LimitExceeded"
    _, info = tools.grep("x", path="/home/sandbox")
    assert info["large_skipped"] == 1


def test_non_utf8_round_trip(tools):
    name = b"/home/sandbox/caf\xe9-\xff.txt"
    content = b"line \xfe\xff one\nsecond \xc3\x28 line\n"
    tools.create("", content, path_bytes=name)
    # the sandbox sees exactly these bytes
    code, out, _, _ = tools.mgr.exec(tools.sid, ["python3", "-c",
                                                 "import os,sys; sys.stdout.buffer.write(open(b'" +
                                                 "caf\\xe9-\\xff.txt', 'rb').read())"])
    assert code == 0 and out == content
    entries, _ = tools.ls("/home/sandbox")
    assert b"caf\xe9-\xff.txt" in [e[0] for e in entries]
    paths, _ = tools.glob("caf*")
    assert paths == [name]
    text, _ = tools.view("", path_bytes=name)
    assert text == b"     1\tline \xfe\xff one\n     2\tsecond \xc3\x28 line\n"
    m, _ = tools.grep("second", path="/home/sandbox")
    assert m == [(name, 2, b"second \xc3\x28 line")]
    tools.replace("", b"\xfe\xff", b"\x80", path_bytes=name)
    tools.insert("", 1, b"\xf0\x28\x8c\x28", path_bytes=name)
    text, _ = tools.view("", path_bytes=name)
    assert text == b"     1\tline \x80 one\n     2\t\xf0\x28\x8c\x28\n     3\tsecond \xc3\x28 line\n"


def test_large_through_fd(tools):
    data = b"".join(b"line %d\n" % i for i in range(3_000_000))  # about 30 MiB
    assert len(data) > 16 << 20
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.seek(0)
        info = dict(tools.m.FileCreate(tools.sid, "big-in.txt", dbus.ByteArray(b""),
                                       opts(fd=f.fileno()), timeout=LONG))
    assert info["size"] == len(data)
    with tempfile.TemporaryFile() as out:
        text, info = tools.m.View(tools.sid, "big-in.txt", opts(fd=out.fileno(), start_line=2_999_999),
                                  timeout=LONG, byte_arrays=True)
        out.seek(0)
        assert bytes(text) == b""
        assert out.read() == b"2999999\tline 2999998\n3000000\tline 2999999\n"
    with pytest.raises(dbus.DBusException) as e:
        tools.create("too-big.txt", b"x" * (17 << 20))
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.LimitExceeded"


def test_escape_corpus(mgr, sandbox):
    """Links to /etc/shadow and to another sandbox's home, "..", hard links and a directory swapped for a
    symlink 10,000 times while the tools write: nothing outside the sandbox is read or written."""
    a, _ = sandbox()
    b, _ = sandbox()
    canary = b"CANARY-" + os.urandom(8).hex().encode()
    mgr.write(b, "canary.txt", canary + b"\n")
    b_home = f"{WORKSPACES}/{b}/home"  # where it would be on the host without a disk image
    b_seen = sandbox_path(b, "/home/sandbox")  # where it is
    assert open(f"{b_seen}/canary.txt", "rb").read() == canary + b"\n"
    etc_before = sorted(os.listdir("/etc"))
    shadow_before = open("/etc/shadow", "rb").read()

    code, out, err, _ = mgr.sh(a, f"""
        ln -s /etc/shadow shadow
        ln -s {b_home} other
        ln -s {b_home}/canary.txt other-canary
        ln -s ../../../../../../.. up
        ln -s /proc/1/root magic
        ln /etc/shadow hard 2>/dev/null || true
        mkdir -p w/d
        ln -s {b_home} w/evil
    """)
    assert code == 0, err
    t = Tools(mgr, a)
    t.mgr = mgr

    def refused(call):
        with pytest.raises(dbus.DBusException) as e:
            call()
        return dbus_error(e)[0]

    assert refused(lambda: t.view("shadow")) == "org.sandboxd.sandbox1.PermissionDenied"
    assert refused(lambda: t.view("/etc/shadow")) == "org.sandboxd.sandbox1.PermissionDenied"
    assert refused(lambda: t.replace("shadow", b"root", b"toor")) == "org.sandboxd.sandbox1.PermissionDenied"
    assert refused(lambda: t.insert("shadow", 0, b"x")) == "org.sandboxd.sandbox1.PermissionDenied"
    assert refused(lambda: t.create("shadow", b"x", overwrite=True)) == "org.sandboxd.sandbox1.PermissionDenied"
    assert refused(lambda: t.view("other-canary")) == "org.sandboxd.sandbox1.NoSuchFile"
    assert refused(lambda: t.view("hard")) in ("org.sandboxd.sandbox1.NoSuchFile",
                                               "org.sandboxd.sandbox1.PermissionDenied")
    assert refused(lambda: t.create("other/evil.txt", b"x")) == "org.sandboxd.sandbox1.NoSuchFile"
    assert refused(lambda: t.create("up/etc/evil.txt", b"x")) in ("org.sandboxd.sandbox1.PermissionDenied",)
    assert refused(lambda: t.create(f"/home/sandbox/../../{b_home}/evil.txt", b"x",
                                    create_dirs=True)) == "org.sandboxd.sandbox1.PermissionDenied"
    assert refused(lambda: t.ls("other")) == "org.sandboxd.sandbox1.NoSuchFile"
    # magic links are refused; this one would be the sandbox's own root anyway
    assert refused(lambda: t.view("magic/etc/hostname")) in ("org.freedesktop.DBus.Error.InvalidArgs",
                                                              "org.sandboxd.sandbox1.NoSuchFile",
                                                              "org.sandboxd.sandbox1.PermissionDenied")
    for root in ("/home", "/var/lib", "/tmp", "/home/sandbox"):
        m, _ = t.grep(canary.decode(), path=root)
        assert m == [], root
    assert refused(lambda: t.glob(f"{WORKSPACES}/**")) == "org.sandboxd.sandbox1.NoSuchFile"
    paths, _ = t.glob("**", path="/var/lib")
    assert not any(b.encode() in p or canary in p for p in paths)
    m, _ = t.grep(canary.decode(), path="/home/sandbox/up/home")
    assert m == []

    # the race: a process in the sandbox swaps w/d for a symlink to b's home, at least 10,000 times and
    # for as long as the tools keep writing there
    swapper = r"""
import os
os.chdir('/home/sandbox/w')
open('/home/sandbox/swap.started', 'w').close()
n = 0
try:
    while n < 10000 or not os.path.exists('/home/sandbox/stop'):
        os.rename('d', 'real'); os.rename('evil', 'd')
        os.rename('d', 'evil'); os.rename('real', 'd')
        n += 1
finally:
    # whole or not at all: the test reads it as soon as it exists
    open('/home/sandbox/swap.tmp', 'w').write(str(n))
    os.rename('/home/sandbox/swap.tmp', '/home/sandbox/swap.done')
"""
    mgr.write(a, "swap.py", swapper.encode())
    code, _, err, _ = mgr.sh(a, "nohup python3 swap.py >/dev/null 2>&1 &", timeout_seconds=600)
    assert code == 0, err

    def exists(p):
        try:
            return mgr.read(a, p)[0] or b"-"
        except dbus.DBusException:
            return None

    wait_for(lambda: exists("swap.started"), what="the swapper to start")
    seen = set()
    calls = [lambda: t.create("w/d/f.txt", b"ok\n", overwrite=True),
             lambda: t.create("w/d/new.txt", b"ok\n", overwrite=True),
             lambda: t.insert("w/d/f.txt", 0, b"x"),
             lambda: t.replace("w/d/f.txt", b"ok\n", b"ok\n"),
             lambda: t.view("w/d/f.txt"),
             lambda: t.grep("CANARY", path="w/d"),
             lambda: t.ls("w/d"),
             lambda: t.glob("w/d/*")]
    for _ in range(40):
        for call in calls:
            try:
                r = call()
            except dbus.DBusException as e:
                seen.add(e.get_dbus_name())
                continue
            if isinstance(r, tuple) and isinstance(r[0], bytes):
                assert canary not in r[0]
            elif isinstance(r, tuple):
                for x in r[0]:
                    assert canary not in repr(x).encode()
                    assert b"canary.txt" not in (x[0] if isinstance(x, tuple) else x)
    mgr.write(a, "stop", b"")
    n = wait_for(lambda: exists("swap.done"), timeout=120, what="the swapper to finish")
    assert int(n) >= 10000
    # b's home, /etc and /etc/shadow are exactly as they were
    assert sorted(os.listdir(b_seen)) == ["canary.txt"]
    assert open(f"{b_seen}/canary.txt", "rb").read() == canary + b"\n"
    assert sorted(os.listdir("/etc")) == etc_before
    assert open("/etc/shadow", "rb").read() == shadow_before
    assert seen <= {"org.sandboxd.sandbox1.NoSuchFile", "org.freedesktop.DBus.Error.InvalidArgs",
                    "org.sandboxd.sandbox1.NoMatch", "org.sandboxd.sandbox1.AmbiguousMatch",
                    "org.sandboxd.sandbox1.PermissionDenied"}, seen


def test_one_audit_row_per_call(tools):
    run("systemctl", "start", "sandbox-auditd")
    ok = [lambda: tools.create("a.txt", b"a\n"), lambda: tools.view("a.txt"),
          lambda: tools.replace("a.txt", b"a", b"b"), lambda: tools.insert("a.txt", 1, b"c"),
          lambda: tools.ls("."), lambda: tools.glob("*.txt"), lambda: tools.grep("b")]
    bad = [lambda: tools.create("a.txt", b"again"), lambda: tools.view("missing"),
           lambda: tools.replace("a.txt", b"zz", b"y"), lambda: tools.insert("a.txt", 9, b"x"),
           lambda: tools.ls("missing"), lambda: tools.glob(""), lambda: tools.grep("(")]
    for c in ok:
        c()
    for c in bad:
        with pytest.raises(dbus.DBusException):
            c()
    ops = ["file_create", "view", "str_replace", "insert", "ls", "glob", "grep"]
    want = {op: 2 for op in ops}

    def counts():
        rows = [r for r in audit_log(tools.sid) if str(r["operation"]) in ops]
        got = {}
        for r in rows:
            got[str(r["operation"])] = got.get(str(r["operation"]), 0) + 1
        return rows if got == want else None

    rows = wait_for(counts, timeout=60, what="one audit row per tool call")
    for op in ops:
        mine = [r for r in rows if str(r["operation"]) == op]
        assert sorted(str(r["event"]) for r in mine) == ["failed", "finished"], op
        for r in mine:
            d = json.loads(str(r["detail"]))
            if op not in ("glob", "grep") or str(r["event"]) == "finished":
                assert "path" in d, (op, d)
            assert str(r["session_id"]) == tools.sid
    d = json.loads(str([r for r in rows if str(r["operation"]) == "file_create" and str(r["event"]) == "failed"]
                       [0]["detail"]))
    assert d["path"] == "/home/sandbox/a.txt" and d["error"] == "org.sandboxd.sandbox1.FileExists"


def ctl(*args, input=None, check=True):
    r = subprocess.run(["sandboxctl", *args], input=input, capture_output=True)
    if check and r.returncode != 0:
        raise AssertionError(f"sandboxctl {' '.join(args)} exited {r.returncode}: {r.stderr.decode()}")
    return r


def test_sandboxctl_verbs(tools):
    sid = tools.sid
    ctl("file-create", sid, "ctl/a.py", "--mkdir", input=b"x = 1\ny = 2\n")
    r = ctl("file-create", sid, "ctl/a.py", input=b"z", check=False)
    assert r.returncode == 1 and b"exists" in r.stderr
    assert ctl("view", sid, "ctl/a.py").stdout == b"     1\tx = 1\n     2\ty = 2\n"
    assert ctl("view", sid, "ctl/a.py", "--range=2:").stdout == b"     2\ty = 2\n"
    r = ctl("str-replace", sid, "ctl/a.py", " = ", " := ", check=False)
    assert r.returncode == 1 and b"2 times" in r.stderr
    ctl("str-replace", sid, "ctl/a.py", "y = 2", "y = 3")
    info = json.loads(ctl("insert", sid, "ctl/a.py", "0", "# top", "--json").stdout)
    assert info["lines"] == 3
    assert read(tools, "ctl/a.py") == b"# top\nx = 1\ny = 3\n"
    ls = json.loads(ctl("ls", sid, "ctl", "--json").stdout)
    assert [e["name"] for e in ls["entries"]] == ["a.py"] and ls["entries"][0]["mode"] == "0644"
    assert b"a.py" in ctl("ls", sid, "ctl").stdout
    assert ctl("glob", sid, "ctl/*.py").stdout == b"/home/sandbox/ctl/a.py\n"
    g = json.loads(ctl("glob", sid, "**/*.py", "--json").stdout)
    assert "/home/sandbox/ctl/a.py" in [p["path"] for p in g["paths"]]
    assert ctl("grep", sid, "y = \\d", "ctl").stdout == b"/home/sandbox/ctl/a.py:3:y = 3\n"
    j = json.loads(ctl("grep", sid, "X =", "ctl", "-i", "--json").stdout)
    assert [(m["line"], m["text"]) for m in j["matches"]] == [(2, "x = 1")]
    assert ctl("view", sid, "x", "--range=3:1", check=False).returncode == 2
    assert ctl("grep", sid, "(", check=False).returncode == 1
    assert b"str-replace" in ctl("view", "--help").stdout
    # bytes that are not UTF-8 come out escaped on a terminal, as base64 in JSON
    tools.create("", b"\xff\n", path_bytes=b"/home/sandbox/ctl/\xe9.txt")
    assert ctl("glob", sid, "ctl/*.txt").stdout == b"/home/sandbox/ctl/\\xe9.txt\n"
    g = json.loads(ctl("glob", sid, "ctl/*.txt", "--json").stdout)
    assert g["paths"] == [{"path_base64": "L2hvbWUvc2FuZGJveC9jdGwv6S50eHQ="}]


def test_introspection_matches_the_xml(mgr):
    """The contract in dbus/org.sandboxd.sandbox1.xml is what sandboxd serves, for the file tools."""
    import xml.etree.ElementTree as ET

    def methods(root):
        iface = [i for i in root.iter("interface") if i.get("name") == "org.sandboxd.sandbox1.Manager"][0]
        return {m.get("name"): [(a.get("direction", "in"), a.get("type"), a.get("name")) for a in m.iter("arg")]
                for m in iface.iter("method")}

    src = os.path.join(os.path.dirname(__file__), "..", "..", "dbus", "org.sandboxd.sandbox1.xml")
    want = methods(ET.parse(src).getroot())
    obj = mgr.bus.get_object("org.sandboxd.sandbox1", "/org/sandboxd/sandbox1", introspect=False)
    got = methods(ET.fromstring(str(obj.Introspect(dbus_interface="org.freedesktop.DBus.Introspectable"))))
    for name in ("FileCreate", "View", "StrReplace", "Insert", "Ls", "Glob", "Grep"):
        assert got[name] == want[name], name


def uid_processes(uid):
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                st = open(f"/proc/{p}/status").read()
            except OSError:
                continue
            if f"\nUid:\t{uid}\t" in st and "\nState:\tZ" not in st:  # a zombie runs nothing
                out.append((int(p), st))
    return out


HELPER = "/usr/libexec/sandboxd/sandboxd-file-helper"


def file_helpers(uid):
    """The sandbox's file helpers: processes of its uid that sandboxd started and that exec'd the helper
    (before the exec, a helper is briefly a confined fork of sandboxd)."""
    out = []
    for pid, st in uid_processes(uid):
        if "\nPPid:\t%d\n" % sandboxd_pid() not in st:
            continue
        try:
            if os.readlink(f"/proc/{pid}/exe") == HELPER:
                out.append((pid, st))
        except OSError:
            pass
    return out


def test_warm_helper_is_confined_and_goes_with_the_sandbox(mgr, sandbox):
    """After a WriteFile, sandboxd keeps the sandbox's file helper ready: sandboxd-file-helper, running as
    the sandbox's uid in the sandbox's cgroups, confined, with nothing open but /dev/null, its socket, the
    init's pidfd and the sandbox's root; deleting the sandbox ends it before the reply."""
    sid, path = sandbox()
    uid = int(mgr.props(path)["Uid"])
    mgr.write(sid, "a.txt", b"x")

    found = wait_for(lambda: file_helpers(uid), what="the warm helper")
    pid, st = found[0]
    assert "\nNoNewPrivs:\t1\n" in st and "\nSeccomp:\t2\n" in st
    assert [l for l in st.splitlines() if l.startswith("CapEff:")] == ["CapEff:\t0000000000000000"]
    fds = {int(fd): os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    assert sorted(fds) == [0, 1, 2, 3, 4, 5], fds
    assert [fds[0], fds[1], fds[2]] == ["/dev/null"] * 3
    assert fds[3].startswith("socket:") and fds[4] == "anon_inode:[pidfd]" and fds[5] == "/", fds
    assert open(f"/proc/{pid}/environ", "rb").read() == b""
    # in the sandbox's cgroups (its init's scope, in every hierarchy), not sandboxd's: its memory and
    # tasks count against the sandbox's limits
    init = [p for p, _ in uid_processes(uid) if os.readlink(f"/proc/{p}/exe").endswith("/sandbox-init")]
    assert len(init) == 1
    cgroups = open(f"/proc/{pid}/cgroup").read()
    assert cgroups == open(f"/proc/{init[0]}/cgroup").read() and f"sandbox-{sid}-init.scope" in cgroups, cgroups
    # and it does the next call
    mgr.write(sid, "a.txt", b"y")
    assert mgr.read(sid, "a.txt")[0] == b"y"
    assert [p for p, _ in file_helpers(uid)] == [pid]
    mgr.delete(sid)
    assert uid_processes(uid) == []


SCAN = r"""
import sys
pid, needles = int(sys.argv[1]), [n.encode() for n in sys.argv[2:]]
found, overlap = set(), max(len(n) for n in needles)
with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
    for line in maps:
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        # unreadable, the vvar page, or a sanitizer's shadow (terabytes, reserved, never ours)
        if line.split()[1][0] != "r" or line.rstrip().endswith("[vvar]") or hi - lo > 1 << 30:
            continue
        tail = b""
        for at in range(lo, hi, 1 << 20):
            try:
                mem.seek(at)
                chunk = tail + mem.read(min(1 << 20, hi - at))
            except OSError:
                break
            found |= {n for n in needles if n in chunk}
            tail = chunk[-overlap:]
print("\n".join(sorted(n.decode() for n in found)))
"""


def memory_holds(pid, uid, *needles):
    """Which needles occur in the readable memory of process pid, read by a process of uid (a helper's
    own uid may read it; root may lack CAP_SYS_PTRACE here)."""
    p = run("setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "/usr/bin/python3", "-c", SCAN,
            str(pid), *needles, check=False)
    assert p.returncode == 0, p.stderr
    return set(p.stdout.splitlines())


def test_file_helper_holds_nothing_of_sandboxd(mgr, sandbox):
    """The process that parses a sandbox's files holds no copy of sandboxd's memory: another sandbox's
    command line and environment, which passed through sandboxd, are nowhere in it."""
    other, _ = sandbox()
    secret = "helper-probe-" + os.urandom(8).hex()
    code, out, _, _ = mgr.exec(other, ["sh", "-c", 'echo "$PROBE" ' + secret + "-argv"], env={"PROBE": secret + "-env"})
    assert code == 0 and out == f"{secret}-env {secret}-argv\n".encode()

    sid, path = sandbox()
    uid = int(mgr.props(path)["Uid"])
    mgr.write(sid, "a.txt", b"x")
    pid, _ = wait_for(lambda: file_helpers(uid), what="the file helper")[0]
    # the scan sees the helper's memory: its own usage text is there
    assert memory_holds(pid, uid, "started by sandboxd only", secret) == {"started by sandboxd only"}
def sandboxd_pid():
    return int(run("systemctl", "show", "-p", "MainPID", "--value", "sandboxd.service").stdout.strip())


def test_busy_file_server_does_not_hold_up_other_calls(mgr, sandbox):
    """A ReadFile that blocks the sandbox's file helper (writing 1 MiB into a pipe nobody reads yet)
    leaves other file calls of that sandbox working: they get helpers of their own."""
    sid, path = sandbox()
    uid = int(mgr.props(path)["Uid"])
    data = os.urandom(1 << 20)
    mgr.write(sid, "big.bin", data)
    wait_for(lambda: [p for p, st in uid_processes(uid) if "\nPPid:\t%d\n" % sandboxd_pid() in st],
             what="the file helper")
    r = call_into_pipe(mgr, "ReadFile", sid, "big.bin")
    try:
        mgr.write(sid, "other.txt", b"still works")
        assert mgr.read(sid, "other.txt")[0] == b"still works"
        assert read_to_end(r) == data
    finally:
        os.close(r)


def test_sandboxctl_large_file_create(tools):
    """Above 8 MiB, sandboxctl file-create passes the content through an fd."""
    data = os.urandom(9 << 20)
    info = json.loads(ctl("file-create", tools.sid, "large.bin", "--json", input=data).stdout)
    assert info == {"size": len(data), "created": True}
    got, _ = tools.mgr.read(tools.sid, "large.bin")
    assert got == data


def test_delete_ends_running_helpers(mgr, sandbox):
    """Helpers still working for a sandbox (here blocked writing into pipes nobody reads), and calls
    waiting for one (10 calls, 8 helpers at most), are ended when it is deleted: when DeleteSandbox
    answers, no process of its uid is left, and nothing holds the pipes."""
    sid, path = sandbox()
    uid = int(mgr.props(path)["Uid"])
    code, _, err, _ = mgr.sh(sid, "head -c 1048576 /dev/zero | tr '\\0' a > big.txt; echo >> big.txt")
    assert code == 0, err
    pipes = [call_into_pipe(mgr, method, sid, "big.txt") for method in ["ReadFile", "View"] * 5]
    try:
        mgr.delete(sid)
        assert uid_processes(uid) == []
        for r in pipes:
            read_to_end(r)  # ends: every writer is gone
    finally:
        for r in pipes:
            os.close(r)


def test_helpers_per_sandbox_are_bounded(mgr, sandbox):
    """A sandbox has at most 8 file helpers (they run in sandboxd's cgroup): with 12 ReadFiles blocked on
    pipes nobody reads yet, 8 run and 4 wait; as the pipes are read, every call completes."""
    sid, path = sandbox()
    uid = int(mgr.props(path)["Uid"])
    data = os.urandom(1 << 20)
    mgr.write(sid, "big.bin", data)
    pipes = [call_into_pipe(mgr, "ReadFile", sid, "big.bin") for _ in range(12)]
    try:
        mgr.iface.GetSandbox(sid)  # answered after the 12 calls before it on this connection were taken
        assert len(wait_for(lambda: len(file_helpers(uid)) == 8 and file_helpers(uid), what="8 helpers")) == 8
        children = [p for p, st in uid_processes(uid) if "\nPPid:\t%d\n" % sandboxd_pid() in st]
        assert len(children) == 8 + 1, children  # the helpers and the sandbox's init
        for r in pipes:
            assert read_to_end(r) == data
    finally:
        for r in pipes:
            os.close(r)
