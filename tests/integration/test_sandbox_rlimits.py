# SPDX-License-Identifier: LGPL-2.1-or-later
# RLIMIT_NOFILE of every process sandboxd starts in a sandbox (init, Exec, shell, file helper): exactly
# 1024 soft / 65536 hard, whatever sandboxd's own limit; where the host does not let sandboxd raise a
# hard limit (no CAP_SYS_RESOURCE in its bounding set), its own, and a warning at start.
import os
import re

import pytest

from conftest import run, systemctl_show, wait_for
from test_takeover import Shell

CAP_SYS_RESOURCE = 24
UNIT_DROPIN_DIR = "/run/systemd/system/sandboxd.service.d"
UNIT_DROPIN = UNIT_DROPIN_DIR + "/50-nofile-test.conf"


def restart_sandboxd():
    run("systemctl", "reset-failed", "sandboxd.service", check=False)
    run("systemctl", "restart", "sandboxd.service")
    wait_for(lambda: systemctl_show("sandboxd.service", "ActiveState")["ActiveState"] == "active",
             what="sandboxd to be active")


def sandboxd_pid():
    return int(systemctl_show("sandboxd.service", "MainPID")["MainPID"])


def may_raise_hard_limits(pid):
    capbnd = int(re.search(r"^CapBnd:\s+([0-9a-f]+)$", open(f"/proc/{pid}/status").read(), re.M).group(1), 16)
    return bool(capbnd & (1 << CAP_SYS_RESOURCE))


def own_hard_nofile(pid):
    return int(re.search(r"^Max open files\s+\d+\s+(\d+)", open(f"/proc/{pid}/limits").read(), re.M).group(1))


def expected_hard():
    """65536, unless sandboxd may not raise a hard limit (then its own, and it said so at start)."""
    pid = sandboxd_pid()
    if may_raise_hard_limits(pid):
        return 65536
    hard = own_hard_nofile(pid)
    if hard < 65536:
        log = run("journalctl", "-u", "sandboxd", "--no-pager", "-o", "cat").stdout
        assert (f"Sandboxed processes get a hard RLIMIT_NOFILE of {hard}, not 65536: sandboxd's own is that "
                "low and it may not raise it") in log
    return min(hard, 65536)


def sandbox_nofile(mgr, sid):
    """Every process in the sandbox (as its PID namespace shows them): {comm: (soft, hard)}."""
    code, out, err, _ = mgr.sh(sid, 'for p in /proc/[0-9]*; do '
                                    'echo "$(cat $p/comm) $(grep "^Max open files" $p/limits)"; done; '
                                    'echo "ulimit $(ulimit -n) $(ulimit -Hn)"')
    assert code == 0, err
    seen = {}
    for line in out.decode().splitlines():
        m = re.match(r"^(\S+) Max open files\s+(\d+)\s+(\d+)", line) or re.match(r"^(ulimit) (\d+) (\d+)$", line)
        if m:
            seen.setdefault(m.group(1), set()).add((int(m.group(2)), int(m.group(3))))
    return seen


def check_all(mgr, sid, hard):
    mgr.write(sid, "/tmp/f", b"x")  # the file helper runs now
    sh = Shell(mgr, sid)
    sh.send("echo NOFILE $(ulimit -n) $(ulimit -Hn)\n")
    m = sh.read_until(rb"NOFILE (\d+) (\d+)\r\n")
    assert (int(m.group(1)), int(m.group(2))) == (1024, hard), "in a shell"
    seen = sandbox_nofile(mgr, sid)
    sh.send("exit\n")
    sh.read_to_eof()
    sh.close()
    assert seen.pop("ulimit") == {(1024, hard)}, "in an Exec"
    assert "sandbox-init" in seen and "bash" in seen, seen
    for comm, limits in seen.items():
        # the shell may have started sleep, ls, ... all of them inherit; the Exec's own sh and cat too
        assert limits == {(1024, hard)}, (comm, limits)


def test_nofile_everywhere(mgr, sandbox):
    sid, _ = sandbox()
    check_all(mgr, sid, expected_hard())


def test_nofile_does_not_follow_sandboxd_own(mgr, sandbox):
    """sandboxd with a lower LimitNOFILE= of its own: sandboxed processes still get 65536 where sandboxd
    may raise hard limits; where it may not, its 4096, and a warning saying so."""
    os.makedirs(UNIT_DROPIN_DIR, exist_ok=True)
    with open(UNIT_DROPIN, "w") as f:
        f.write("[Service]\nLimitNOFILE=4096\n")
    try:
        run("systemctl", "daemon-reload")
        restart_sandboxd()
        hard = expected_hard()
        if not may_raise_hard_limits(sandboxd_pid()):
            assert hard == 4096
        sid, _ = sandbox()
        check_all(mgr, sid, hard)
        if hard != 65536:
            pytest.skip("this host does not let sandboxd raise a hard limit (no CAP_SYS_RESOURCE in its "
                        "bounding set): only the fallback to its own limit and the warning were checked")
    finally:
        os.unlink(UNIT_DROPIN)
        run("systemctl", "daemon-reload")
        restart_sandboxd()
