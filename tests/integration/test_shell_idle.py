# SPDX-License-Identifier: LGPL-2.1-or-later
# ShellIdleSec= (issue 21): a shell with no byte either way for its type's idle time is hung up, its scope
# stopped, and its takeover row says ended_by "idle"; one in use is not. Over the bus (as sandboxctl shell)
# and through the gateway's takeover WebSocket.
import json
import os
import time

import pytest

from conftest import audit_log, run, wait_for
from test_sandboxd import wait_sandboxd_active
from test_key_revocation import close_time
from test_takeover import Pty, Shell, unit_gone
from test_takeover_gateway import Session, gateway, ws_url  # noqa: F401

DROPIN = "/etc/sandboxd/sandboxd.conf.d/50-shell-idle-test.conf"
IDLE = 3


def restart_sandboxd():
    run("systemctl", "reset-failed", "sandboxd.service", check=False)
    run("systemctl", "restart", "sandboxd.service")
    wait_sandboxd_active()


@pytest.fixture(scope="module", autouse=True)
def idle_type():
    os.makedirs(os.path.dirname(DROPIN), exist_ok=True)
    with open(DROPIN, "w") as f:
        f.write(f"[Type:idle]\nShellIdleSec={IDLE}\n\n[Type:noidle]\nShellIdleSec=infinity\n")
    restart_sandboxd()
    yield
    os.unlink(DROPIN)
    restart_sandboxd()


def takeover_row(sid):
    rows = wait_for(lambda: audit_log(sid, operation="takeover"), timeout=60, what="the takeover row")
    return json.loads(str(rows[0]["detail"]))


def test_idle_shell_is_hung_up(mgr, sandbox):
    sid, _ = sandbox(type="idle")
    sh = Shell(mgr, sid)
    sh.send("echo ready-$((6*7))\n")
    sh.read_until(rb"ready-42")
    # typing keeps it: a byte every half second for longer than the idle time
    for i in range(2 * IDLE + 2):
        sh.send(" ")
        time.sleep(0.5)
    assert not sh.eof and not unit_gone(sh.unit)
    sh.send("\x15echo still-$((6*7))\n")  # ^U drops the spaces
    sh.read_until(rb"still-42")
    quiet_from = time.monotonic()
    sh.read_to_eof(timeout=IDLE + 60)
    quiet = time.monotonic() - quiet_from
    assert quiet >= IDLE - 0.1, f"hung up after {quiet:.2f} s of quiet, before ShellIdleSec={IDLE}"
    print(f"hung up after {quiet:.2f} s of quiet (ShellIdleSec={IDLE})")
    code, info = sh.wait()
    assert str(info["ended_by"]) == "idle"
    wait_for(lambda: unit_gone(sh.unit), what=f"{sh.unit} to stop")
    assert takeover_row(sid)["ended_by"] == "idle"


def test_infinity_keeps_a_quiet_shell(mgr, sandbox):
    sid, _ = sandbox(type="noidle")
    sh = Shell(mgr, sid)
    sh.send("echo ready-$((6*7))\n")
    sh.read_until(rb"ready-42")
    time.sleep(IDLE + 1)  # a pause longer than the other type's idle time, not a measurement
    sh.send("echo alive-$((6*7))\n")
    sh.read_until(rb"alive-42")
    sh.close()


def test_idle_takeover_closes(mgr, sandbox, gateway):
    sid, _ = sandbox(type="idle")
    s = Session(ws_url(sid), gateway["admin"])
    s.send("echo ready-$((6*7))\n")
    s.read_until(rb"ready-42")
    close_time(s, timeout=IDLE + 60)  # the server's pings alone would keep a plain read waiting
    assert s.close_code == 1000, (s.close_code, s.close_reason)
    assert takeover_row(sid)["ended_by"] == "idle"


def test_idle_sandboxctl_shell_ends(mgr, sandbox):
    sid, _ = sandbox(type="idle")
    t = Pty(["sh", "-c", 'sandboxctl shell "$0"; echo "RC=$?"', sid])
    t.read_until(rb"\$ $")  # the prompt
    m = t.read_until(rb"was hung up: nothing passed either way for the sandbox type's ShellIdleSec=\.\r\n"
                     rb"RC=(\d+)\r\n", timeout=IDLE + 60)
    assert m.group(1) != b"0"
    assert t.wait() == 0
    assert takeover_row(sid)["ended_by"] == "idle"
