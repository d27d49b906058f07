# SPDX-License-Identifier: LGPL-2.1-or-later
# A sandbox flooding output: yes and /dev/zero into stdout and stderr, with and without streaming fds,
# large single writes, output without newlines, a flood that outlives its command. The capture cap
# holds, sandboxd's memory stays bounded, another sandbox's Execs are answered during the flood, and the
# audit row keeps the capped output.
import os
import threading

import dbus

from conftest import LONG, Manager, audit, log, main_pid, spooled, wait_for

MIB = 1 << 20


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_capture_cap_holds(mgr, sandbox):
    sid, _ = sandbox()
    cases = [
        # (script, stdout bytes written, stderr bytes written)
        ("yes | head -c 30000000", 30000000, 0),
        ("head -c 30000000 /dev/zero >&2", 0, 30000000),
        ("head -c 20000000 /dev/zero & head -c 20000000 /dev/zero >&2; wait", 20000000, 20000000),
        # one write(2) of 8 MiB, no newline anywhere
        ("python3 -c 'import os; os.write(1, b\"z\" * (8 << 20))'", 8 << 20, 0),
        ("printf abc", 3, 0),
    ]
    for script, n_out, n_err in cases:
        code, out, err, info = mgr.exec(sid, ["sh", "-c", script])
        assert code == 0, (script, err[:200])
        assert len(out) == min(n_out, MIB) and len(err) == min(n_err, MIB), (script, len(out), len(err))
        assert bool(info["stdout_truncated"]) == (n_out > MIB), script
        assert bool(info["stderr_truncated"]) == (n_err > MIB), script
    # the audit row keeps the capped output
    wait_for(lambda: spooled() == 0, timeout=60, what="the spool to drain")
    rows = log(sid, operation="exec")
    first = min(rows, key=lambda r: int(r["id"]))
    out, err = audit().GetOutput(dbus.UInt64(first["id"]), timeout=LONG, byte_arrays=True)
    assert len(bytes(out)) == MIB and bytes(out).startswith(b"y\ny\n") and len(bytes(err)) == 0


def test_endless_flood_is_bounded_and_others_are_answered(mgr, sandbox):
    flood, _ = sandbox()
    other, _ = sandbox()
    pid = main_pid("sandboxd")
    before = rss_kib(pid)
    answered = []
    done = threading.Event()

    def neighbour():
        m = Manager()
        i = 0
        while not done.is_set():
            code, out, _, _ = m.exec(other, ["echo", str(i)])
            assert (code, out) == (0, f"{i}\n".encode())
            answered.append(i)
            i += 1

    t = threading.Thread(target=neighbour)
    t.start()
    try:
        # both streams at once, until the timeout ends it: sandboxd reads all of it and keeps 1 MiB each
        code, out, err, info = mgr.exec(flood, ["sh", "-c", "yes >&2 & cat /dev/zero"], timeout_seconds=6)
        during = len(answered)
    finally:
        done.set()
        t.join(timeout=60)
    assert len(out) == MIB and len(err) == MIB, (code, info)
    assert info["stdout_truncated"] and info["stderr_truncated"], (code, info)
    assert info["timed_out"], (code, info)
    assert during > 0, "the neighbour's Execs were answered while the flood ran"
    # A flood that outlives its command: the answer does not wait for it (sandboxd would otherwise read
    # forever at the command's exit).
    code, out, err, info = Manager().exec(flood, ["sh", "-c", "echo started; yes & yes >&2 & exit 0"], timeout=60)
    assert code == 0 and out.startswith(b"started\n")
    assert Manager().exec(other, ["echo", "still"])[1] == b"still\n"
    Manager().exec(flood, ["pkill", "yes"])
    # bounded: what sandboxd holds does not grow with what went through it (GiBs); the slack is for
    # ASan's quarantine of freed memory in the test build
    after = rss_kib(pid)
    assert after - before < 320 * 1024, (before, after)


def test_streamed_flood(mgr, sandbox):
    """With streaming fds every byte is forwarded, the reply's own stdout/stderr stay empty."""
    sid, _ = sandbox()
    got = {"out": 0, "err": 0}
    r_out, w_out = os.pipe()
    r_err, w_err = os.pipe()

    def drain(fd, key):
        while True:
            b = os.read(fd, 1 << 16)
            if not b:
                break
            got[key] += len(b)
        os.close(fd)

    threads = [threading.Thread(target=drain, args=(r_out, "out")), threading.Thread(target=drain, args=(r_err, "err"))]
    for t in threads:
        t.start()
    try:
        code, out, err, info = mgr.exec(sid, ["sh", "-c", "head -c 50000000 /dev/zero & yes | head -c 30000000 >&2; wait"],
                                        stdout_fd=w_out, stderr_fd=w_err, timeout_seconds=110, timeout=LONG)
    finally:
        os.close(w_out)
        os.close(w_err)
    for t in threads:
        t.join(timeout=120)
    assert code == 0 and out == b"" and err == b""
    assert got == {"out": 50000000, "err": 30000000}
