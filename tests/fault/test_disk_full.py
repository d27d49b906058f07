# SPDX-License-Identifier: LGPL-2.1-or-later
# The logger's disk full: Record fails with a clear D-Bus error and nothing is corrupted, readers keep
# working, the logger does not crash, sandboxd keeps the rows in its spool and delivers every one of
# them once there is space again.
import os
import subprocess

import dbus
import pytest

from conftest import LONG, audit, log, main_pid, run, spooled, wait_for

STATE = "/var/lib/sandbox-auditd"


@pytest.fixture
def small_disk():
    run("systemctl", "stop", "sandbox-auditd")
    run("mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", STATE)
    try:
        run("chown", "sandbox-audit:sandbox-audit", STATE)
        run("systemctl", "start", "sandbox-auditd")
        yield
    finally:
        run("systemctl", "stop", "sandbox-auditd", check=False)
        run("umount", STATE, check=False)
        run("systemctl", "reset-failed", "sandbox-auditd", check=False)
        run("systemctl", "start", "sandbox-auditd", check=False)


def test_logger_disk_full(mgr, sandbox, small_disk):
    sid, _ = sandbox()
    code, _, _, _ = mgr.exec(sid, ["echo", "before"])
    assert code == 0
    wait_for(lambda: spooled() == 0 and len(log(sid, operation="exec")) == 1, what="the first row stored")
    pid = main_pid("sandbox-auditd")

    filler = os.path.join(STATE, "filler")
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
    # a direct Record: a clear error of its own
    row = {"key": "fault-disk-full-1", "session_id": sid, "account_id": "uid:0", "source": "agent",
           "operation": "exec", "event": "finished", "detail": "{}", "exit_code": dbus.Int32(0),
           "stdout": dbus.ByteArray(b"x" * 200000), "stderr": dbus.ByteArray(b""),
           "started_at": dbus.UInt64(1), "duration_usec": dbus.UInt64(1), "request_id": ""}
    with pytest.raises(dbus.DBusException) as e:
        audit().Record(dbus.Dictionary(row, signature="sv"), timeout=LONG)
    assert e.value.get_dbus_name() == "org.sandboxd.audit1.StorageFull", e.value.get_dbus_message()

    for i in range(20):
        code, out, _, _ = mgr.exec(sid, ["sh", "-c", f"head -c 40000 /dev/urandom | base64; echo {i}"])
        assert code == 0
    wait_for(lambda: spooled() > 0, what="rows to wait in the spool")
    # readers keep working, and the logger did not die of it
    assert [str(r["detail"]) for r in log(sid, operation="exec")][0].find("before") >= 0
    assert main_pid("sandbox-auditd") == pid

    os.unlink(filler)
    wait_for(lambda: spooled() == 0, timeout=90, what="the rows to arrive once space returned")
    assert len(log(sid, operation="exec")) == 21
    assert main_pid("sandbox-auditd") == pid
    assert run("sqlite3", os.path.join(STATE, "audit.db"), "PRAGMA integrity_check").stdout.strip() == "ok"
