#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# Writes the seed corpora of the bus targets (bus-options, audit-bus, key-spec) in fuzz-bus.h's input
# format, from readable descriptions below: valid calls and calls each reader must refuse. Rerun after
# changing the key or string tables of fuzz-bus.h (the tables are read from it, so indices stay right).
import os
import re
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))
header = open(os.path.join(here, "fuzz-bus.h")).read()


def table(name):
    body = re.search(r"%s\[\] = \{(.*?)\n\};" % name, header, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    # adjacent literals concatenate, as in C
    return [re.sub(r'"\s*"', "", m).strip('"').encode().decode("unicode_escape")
            for m in re.findall(r'"(?:[^"\\]|\\.)*"(?:\s*"(?:[^"\\]|\\.)*")*', body)]


KEYS, STRINGS = table("fuzz_keys"), table("fuzz_strings")
SIGS = ["s", "t", "u", "i", "b", "h", "y", "ay", "as", "a{ss}", "d", "o", "a{sv}", "x", "q", "g"]


def string(s, tab=STRINGS):
    if s in tab:
        return bytes([0x80 | tab.index(s)])
    b = s.encode()
    assert len(b) < 0x80
    return bytes([len(b)]) + b


def strv(items):
    return bytes([len(items)]) + b"".join(string(s) for s in items)


def value(sig, v):
    out = bytes([SIGS.index(sig)])
    if sig == "s":
        return out + string(v)
    if sig in ("t", "x"):
        return out + struct.pack("<Q", v & (2**64 - 1))
    if sig in ("u", "i"):
        return out + struct.pack("<I", v & (2**32 - 1))
    if sig == "q":
        return out + struct.pack("<H", v)
    if sig in ("b", "y"):
        return out + bytes([v])
    if sig == "ay":
        return out + struct.pack("<H", len(v)) + v
    if sig == "as":
        return out + strv(v)
    if sig == "a{ss}":
        return out + struct.pack("<H", len(v)) + b"".join(string(k) + string(x) for k, x in v)
    if sig == "a{sv}":
        return out + options(v)
    return out  # h, o, g, d take what follows (d: 8 bytes)


def options(entries):
    return b"".join(string(k, KEYS) + value(sig, v) for k, sig, v in entries)


def write(target, name, data):
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, name), "wb").write(data)


def sandboxd(name, path, argv, entries):
    write("bus-options", name, string(path) + strv(argv) + options(entries))


ctx = [("account_id", "s", "key_abc"), ("request_id", "s", "req_1"), ("source", "s", "human_takeover")]
sandboxd("create", "", [], [("name", "s", "build-1"), ("type", "s", "medium"), ("network", "s", "host"),
                            ("ttl_seconds", "t", 3600)] + ctx)
sandboxd("create-bad-name", "", [], [("name", "s", "-bad")])
sandboxd("create-egress", "", [], [("network", "s", "egress"), ("egress_policy", "a{sv}", [
    ("default", "s", "deny"), ("allow", "as", ["pypi.org", "*.pythonhosted.org", "203.0.113.0/24"]),
    ("deny", "as", ["10.0.0.1/8"])])])
sandboxd("create-egress-policy-without-egress", "", [], [("egress_policy", "a{sv}", [("allow", "as", ["pypi.org"])])])
sandboxd("create-egress-bad-default", "", [], [("network", "s", "egress"),
                                               ("egress_policy", "a{sv}", [("default", "s", "allow"),
                                                                           ("deny", "s", "pypi.org")])])
# SetNetworkPolicy's policy a{sv} (the options a{sv} is read as one too)
sandboxd("network-policy", "", [], [("default", "s", "allow"), ("allow", "as", ["example.org", "203.0.113.0/24"]),
                                    ("deny", "as", ["*.example.com", "198.51.100.7"])])
sandboxd("network-policy-bad", "", [], [("allow", "as", ["a.*.example.org", "10.0.0.1/8"]), ("ttl", "t", 1)])
sandboxd("create-id-name", "", [], [("name", "s", "sb_abcdefghij")])
sandboxd("create-ttl-overflow", "", [], [("ttl_seconds", "t", 2**64 - 1)])
sandboxd("create-ttl-string", "", [], [("ttl_seconds", "s", "1h")])
sandboxd("context-bad-source", "", [], [("source", "s", "robot")])
sandboxd("context-long", "", [], [("account_id", "s", max(STRINGS, key=len))])
sandboxd("exec", "", ["sh", "-c", "echo hi"],
         [("cwd", "s", "work/dir"), ("env", "a{ss}", [("PATH", "/bin"), ("A", "A=B")]),
          ("stdin", "ay", b"input\n"), ("timeout_seconds", "t", 5), ("memory_max", "t", 64 << 20),
          ("tasks_max", "t", 16), ("stdout_fd", "h", None), ("stderr_fd", "h", None)] + ctx)
sandboxd("exec-cancel", "", ["sleep", "60"], [("cancel_fd", "h", None), ("timeout_seconds", "t", 50)] + ctx)
sandboxd("exec-cancel-string", "", ["true"], [("cancel_fd", "s", "pipe")])
sandboxd("exec-env-bad", "", ["true"], [("env", "a{ss}", [("1BAD", "x")])])
sandboxd("exec-env-wrong-type", "", ["true"], [("env", "as", ["A=B"])])
sandboxd("exec-env-many", "", ["true"], [("env", "a{ss}", [("V%d" % i, "") for i in range(1030)])])
sandboxd("exec-empty-argv", "", [], [("timeout_seconds", "t", 0)])
sandboxd("exec-limits", "", ["true"], [("memory_max", "t", 1000), ("tasks_max", "t", 10**6),
                                       ("timeout_seconds", "t", 10**9)])
sandboxd("write", "/tmp/x", [], [("mode", "u", 0o600), ("create_dirs", "b", 1), ("append", "b", 1),
                                 ("fd", "h", None)])
sandboxd("write-mode", "../../etc/passwd", [], [("mode", "u", 0o4755)])
sandboxd("read", "work/dir", [], [("offset", "t", 2**63), ("length", "t", 2**40)])
# StartProcess (issue 25): Exec's options but stdin and the fds
sandboxd("process", "", ["python3", "-m", "http.server"],
         [("cwd", "s", "/tmp"), ("env", "a{ss}", [("A", "1")]), ("timeout_seconds", "t", 600),
          ("memory_max", "t", 64 << 20), ("tasks_max", "t", 16)] + ctx)
sandboxd("process-stdin", "", ["cat"], [("stdin", "ay", b"input\n")])
sandboxd("shell", "", [], [("cols", "u", 132), ("rows", "u", 50), ("term", "s", "xterm")])
sandboxd("shell-bad", "", [], [("cols", "u", 0), ("rows", "u", 100000), ("term", "s", "bad;term")])
sandboxd("tools", "", [], [("path", "s", "/tmp/x"), ("glob", "s", "*.c"), ("ignore_case", "b", 1),
                           ("max_results", "u", 5), ("start_line", "u", 3), ("end_line", "u", 1),
                           ("overwrite", "b", 1), ("path_bytes", "ay", b"a\xff")])
sandboxd("tools-glob-empty", "", [], [("glob", "s", "")])
sandboxd("nested", "", ["x"], [("name", "a{sv}", [("name", "s", "x")]), ("cwd", "d", None)])
sandboxd("unknown", "", [], [("colour", "s", "red")])


def audit(name, entries):
    write("audit-bus", name, options(entries))


audit("row", [("key", "s", "key_abc"), ("session_id", "s", "sb_abcdefghij"), ("account_id", "s", "key_abc"),
              ("source", "s", "agent"), ("operation", "s", "exec"), ("event", "s", "finished"),
              ("detail", "s", '{"a":1}'), ("exit_code", "i", 0), ("stdout", "ay", b"out\xff"),
              ("stderr", "ay", b"err"), ("started_at", "t", 1 << 50), ("duration_usec", "t", 1000),
              ("request_id", "s", "req_1")])
audit("row-bad-detail", [("key", "s", "k"), ("operation", "s", "write"), ("event", "s", "failed"),
                         ("detail", "s", "not json")])
audit("row-twice", [("key", "s", "k"), ("key", "s", "k")])
audit("row-wrong-type", [("exit_code", "t", 1)])
audit("row-unknown-op", [("operation", "s", "sandbox.read")])
audit("filter", [("session_id", "s", "sb_abcdefghij"), ("operation", "s", "write"), ("event", "s", "failed"),
                 ("source", "s", "human_takeover"), ("since", "t", 1), ("until", "t", 2**64 - 1),
                 ("after_id", "t", 7), ("max_id", "t", 9)])
audit("filter-bad", [("since", "s", "yesterday"), ("colour", "s", "red")])
# VerifyLog's options
audit("verify", [("max_id", "t", 12)])
audit("verify-zero", [("max_id", "t", 0)])
audit("verify-bad", [("max_id", "s", "12"), ("max_id", "t", 1)])


def keyspec(name, entries):
    write("key-spec", name, options(entries))


keyspec("runner", [("name", "s", "ci"), ("preset", "s", "runner"), ("ttl_seconds", "t", 86400),
                   ("sandboxes", "as", ["sb_abcdefghij"])])
keyspec("admin", [("role", "s", "admin"), ("actions", "as", ["takeover", "api-key.admin"])])
keyspec("member-takeover", [("role", "s", "member"), ("actions", "as", ["takeover"])])
keyspec("empty-lists", [("actions", "as", []), ("sandboxes", "as", ["*"])])
keyspec("bad", [("ttl_seconds", "t", 0), ("preset", "s", "root")])
keyspec("ttl-overflow", [("ttl_seconds", "t", 2**64 - 1)])
keyspec("twice", [("name", "s", "a"), ("name", "s", "b")])
keyspec("wrong-type", [("actions", "s", "exec")])
# names a terminal would act on or that read other than they are (issue 21, item 11)
keyspec("name-c1", [("name", "s", "ci\u009b31m\u0085")])
keyspec("name-bidi", [("name", "s", "ci\u202enimda\u2066\u200b\ufeff")])
keyspec("name-printable", [("name", "s", "caf\u00e9 \\ \u05e9\u05dc\u05d5\u05dd")])
