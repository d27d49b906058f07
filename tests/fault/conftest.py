# SPDX-License-Identifier: LGPL-2.1-or-later
# Fixtures for the fault suite: the integration suite's (tests/integration/conftest.py), with private bus
# connections (dbus-daemon is restarted here, which kills a shared one), and the checks every fault
# ends with: nothing leaked, every sandbox reachable, every acknowledged row recorded.
import importlib.util
import json
import os
import random
import re
import sys

import dbus
import dbus.bus
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
INTEGRATION = os.path.join(HERE, "..", "integration")
sys.path.insert(0, INTEGRATION)

_spec = importlib.util.spec_from_file_location("integration_conftest", os.path.join(INTEGRATION, "conftest.py"))
itc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(itc)

LONG, run, wait_for, systemctl_show, dbus_error = itc.LONG, itc.run, itc.wait_for, itc.systemctl_show, itc.dbus_error
pytest_configure, pytest_report_header = itc.pytest_configure, itc.pytest_report_header

SPOOL, spooled = itc.SPOOL, itc.spooled
call_into_pipe, read_to_end = itc.call_into_pipe, itc.read_to_end
POOL_DIR = "/var/lib/sandboxd/pool"
UID_MIN, UID_MAX = 1879048192, 1879113727
DAEMONS = ("sandboxd", "sandbox-auditd", "sandbox-gatewayd")


def system_bus():
    """A connection of its own: a shared one dies for good with the dbus-daemon it was made on."""
    return dbus.bus.BusConnection(dbus.bus.BUS_SYSTEM)


class Manager(itc.Manager):
    def __init__(self):
        self.bus = system_bus()


def audit():
    return itc.audit(system_bus())


def log(session=None, limit=5000, **flt):
    return itc.audit_log(session, limit, system_bus(), **flt)


def main_pid(unit):
    return int(systemctl_show(unit, "MainPID")["MainPID"])


def restarts(unit):
    return int(systemctl_show(unit, "NRestarts")["NRestarts"])


def is_active(unit):
    return run("systemctl", "is-active", unit, check=False).stdout.strip() == "active"


def fake_id():
    return "sb_" + "".join(random.choice("abcdefghijklmnopqrstuvwxyz234567") for _ in range(10))


UNIT_RE = re.compile(r"^sandbox-(sb_[a-z2-7]{10})(\.slice|-init\.scope|-exec-\d+\.scope|-shell-\d+\.scope)$")


def known_ids():
    """The sandboxes sandboxd answers for, and those it made ahead for its pool."""
    ids = {row[0] for row in Manager().list()}
    if os.path.isdir(POOL_DIR):
        ids |= {d for d in os.listdir(POOL_DIR) if d.startswith("sb_")}
    return ids


def leaks():
    """Everything of sandboxes that are gone: active units, cgroups, processes of sandbox uids."""
    known = known_ids()
    found = []
    out = run("systemctl", "list-units", "--all", "--plain", "--no-legend", "sandbox-sb_*").stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) < 3:
            continue
        m = UNIT_RE.match(f[0])
        if m and f[2] not in ("inactive",) and m.group(1) not in known:
            found.append(f"unit {f[0]} ({f[2]})")
    for root in ("/sys/fs/cgroup/systemd/sandbox.slice", "/sys/fs/cgroup/unified/sandbox.slice"):
        if not os.path.isdir(root):
            continue
        with open(os.path.join(root, "cgroup.procs")) as fp:
            if fp.read().strip():
                found.append(f"processes directly in {root}")
        for d in os.listdir(root):
            m = re.match(r"^sandbox-(sb_[a-z2-7]{10})\.slice$", d)
            if m and m.group(1) not in known:
                found.append(f"cgroup {root}/{d}")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as fp:
                uid = int(re.search(r"^Uid:\s+(\d+)", fp.read(), re.M).group(1))
            with open(f"/proc/{pid}/cgroup") as fp:
                cg = fp.read()
        except (OSError, AttributeError):
            continue
        if not UID_MIN <= uid <= UID_MAX:
            continue
        m = re.search(r"sandbox\.slice/sandbox-(sb_[a-z2-7]{10})\.slice/", cg)
        if not m or m.group(1) not in known:
            found.append(f"process {pid} (uid {uid}) outside a live sandbox")
    return found


def assert_no_leaks():
    """Stops are asynchronous: wait until nothing is left (the deadline only bounds a hang)."""
    last = []

    def clean():
        nonlocal last
        last = leaks()
        return not last

    try:
        wait_for(clean, timeout=60, interval=0.5, what="no leaked unit, cgroup or process")
    except AssertionError:
        raise AssertionError(f"leaked: {last}")


def assert_all_reachable():
    m = Manager()
    for sid, name, typ, state, owner, path in m.list():
        if state != "running":
            continue
        assert str(m.iface.GetSandbox(sid)) == path
        code, out, _, _ = m.exec(sid, ["echo", "still-here"])
        assert (code, out) == (0, b"still-here\n"), sid


def kill9(unit):
    """kill -9 of the daemon's main process; systemd must start it again. The start rate limit (5 in
    10 s) is reset first: these tests kill more often than any real failure would."""
    run("systemctl", "reset-failed", unit)
    before = restarts(unit)
    pid = main_pid(unit)
    assert pid > 0, f"{unit} runs"
    os.kill(pid, 9)
    wait_restarted(unit, before)


def wait_restarted(unit, before):
    wait_for(lambda: restarts(unit) > before and is_active(unit), timeout=60, interval=0.1,
             what=f"{unit} restarted by systemd")


# The fault suite makes bursts of sandboxes (48 small ones at once) to kill sandboxd among them: what it
# tests is recovery, not admission, so the sandboxes may be promised more than the host's memory here.
OVERCOMMIT_DROPIN = "/etc/sandboxd/sandboxd.conf.d/00-fault-overcommit.conf"


@pytest.fixture(scope="session", autouse=True)
def sandboxd_running():
    itc.disks_as_the_kernel_allows()
    os.makedirs(os.path.dirname(OVERCOMMIT_DROPIN), exist_ok=True)
    with open(OVERCOMMIT_DROPIN, "w") as f:
        f.write("[Sandboxes]\nOvercommit=1000%\n")
    run("systemctl", "start", "sandboxd.service", "sandbox-auditd.service", "sandbox-gatewayd.socket")
    yield
    itc.delete_all_sandboxes(Manager())


@pytest.fixture
def mgr():
    return Manager()


@pytest.fixture
def sandbox():
    """A fresh small sandbox, deleted afterwards (on a connection made then: the bus may have been
    restarted in between): (id, path)."""
    made = []

    def make(**opts):
        opts.setdefault("type", "small")
        sid, path = Manager().create(**opts)
        made.append(str(sid))
        return str(sid), str(path)

    yield make
    m = Manager()
    for sid in made:
        try:
            m.delete(sid)
        except dbus.DBusException as e:
            assert e.get_dbus_name() == "org.sandboxd.sandbox1.NoSuchSandbox"


@pytest.fixture
def admin_key():
    out = run("sandboxctl", "api-key", "create", "--preset=admin", "--json").stdout
    return json.loads(out)["secret"]
