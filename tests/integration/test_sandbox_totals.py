# SPDX-License-Identifier: LGPL-2.1-or-later
# What all sandboxes together may have ([Sandboxes] in sandboxd.conf): sandbox.slice's limits, derived
# from the host or configured, and CreateSandbox's admission check, pooled sandboxes included.
import os
import re

import dbus
import pytest

from conftest import Manager, dbus_error, delete_all_sandboxes, run, systemctl_show, wait_for

ERR = "org.sandboxd.sandbox1."
POOL_DIR = "/var/lib/sandboxd/pool"
DROPIN_DIR = "/etc/sandboxd/sandboxd.conf.d"
DROPIN = DROPIN_DIR + "/50-totals-test.conf"
MIB = 1 << 20
GIB = 1 << 30


def restart_sandboxd():
    # these tests restart it more often than StartLimitBurst= allows in StartLimitIntervalSec=
    run("systemctl", "reset-failed", "sandboxd.service", check=False)
    run("systemctl", "restart", "sandboxd.service")
    wait_for(lambda: systemctl_show("sandboxd.service", "ActiveState")["ActiveState"] == "active",
             what="sandboxd to be active")


@pytest.fixture
def totals_config():
    """Writes a sandboxd.conf drop-in and restarts sandboxd; removes it and restarts again afterwards."""
    def configure(text):
        os.makedirs(DROPIN_DIR, exist_ok=True)
        with open(DROPIN, "w") as f:
            f.write(text)
        restart_sandboxd()
    yield configure
    delete_all_sandboxes(Manager())
    if os.path.exists(DROPIN):
        os.unlink(DROPIN)
    restart_sandboxd()


def usec(timespan):
    """systemd's CPUQuotaPerSecUSec ("1s", "1.800000s", "900ms") in µs."""
    if timespan == "infinity":
        return None
    m = re.fullmatch(r"([0-9.]+)(s|ms|us)", timespan)
    assert m, timespan
    return round(float(m.group(1)) * {"s": 10 ** 6, "ms": 10 ** 3, "us": 1}[m.group(2)])


def slice_limits():
    return systemctl_show("sandbox.slice", "MemoryMax", "TasksMax", "CPUQuotaPerSecUSec")


def cgroup_value(controller, name):
    cg = systemctl_show("sandbox.slice", "ControlGroup")["ControlGroup"]
    with open(f"/sys/fs/cgroup/{controller}{cg}/{name}") as f:
        return f.read().strip()


def pool_ids():
    return set(os.listdir(POOL_DIR))


def pool_ready(n):
    """The pool's ids once it holds n sandboxes whose slices are up, else None."""
    ids = pool_ids()
    states = [systemctl_show(f"sandbox-{i}.slice", "ActiveState")["ActiveState"] for i in ids]
    return ids if len(ids) == n and all(s == "active" for s in states) else None


def test_slice_limits_derived_from_host():
    """Without configuration, sandbox.slice gets 80 % of the RAM (whole MiB), 75 % of the smaller of
    threads-max and pid_max, and 90 % of the CPUs, and the kernel has them."""
    mem_total = int(re.search(r"^MemTotal:\s+(\d+) kB$", open("/proc/meminfo").read(), re.M).group(1)) * 1024
    threads_max = int(open("/proc/sys/kernel/threads-max").read())
    pid_max = int(open("/proc/sys/kernel/pid_max").read())
    want_mem = mem_total * 80 // 100 // MIB * MIB
    want_tasks = min(threads_max, pid_max) * 75 // 100
    want_cpu = os.cpu_count() * 90 * 10 ** 4  # µs per second: 90 % of each CPU

    show = slice_limits()
    assert int(show["MemoryMax"]) == want_mem, show
    assert int(show["TasksMax"]) == want_tasks, show
    assert usec(show["CPUQuotaPerSecUSec"]) == want_cpu, show
    # in effect in the cgroups, not only in systemd's unit (the hybrid layout's v1 controllers here)
    if os.path.isdir("/sys/fs/cgroup/memory"):
        assert int(cgroup_value("memory", "memory.limit_in_bytes")) == want_mem
    if os.path.isdir("/sys/fs/cgroup/pids"):
        assert int(cgroup_value("pids", "pids.max")) == want_tasks
    log = run("journalctl", "-u", "sandboxd", "--no-pager", "-o", "cat").stdout
    assert f"All sandboxes together: MemoryMax={want_mem >> 20}M TasksMax={want_tasks}" in log


def test_memory_total_admits_and_refuses(totals_config):
    """MemoryMax= of [Sandboxes] that fits two small sandboxes (1 GiB each) but not three: the third
    CreateSandbox is refused with LimitExceeded saying why, and nothing is made; a medium one (4 GiB)
    never fits; a deletion makes room again."""
    totals_config("[Sandboxes]\nMemoryMax=2G\nTasksMax=infinity\nCPUQuota=150%\n[Type:small]\nPoolSize=0\n")
    show = slice_limits()
    assert (show["MemoryMax"], show["TasksMax"], usec(show["CPUQuotaPerSecUSec"])) == \
        (str(2 * GIB), "infinity", 1500000)

    m = Manager()
    a, _ = m.create(type="small")
    b, _ = m.create(type="small")
    before = m.list()
    slices = run("systemctl", "list-units", "--plain", "--no-legend", "--all", "sandbox-*.slice").stdout
    with pytest.raises(dbus.DBusException) as e:
        m.create(type="small", name="one-too-many")
    name, msg = dbus_error(e)
    assert name == ERR + "LimitExceeded"
    assert msg == ("The sandboxes' memory is used up: 2 sandboxes are promised 2048 MiB, this one would add "
                   "1024 MiB, and [Sandboxes] allows 2048 MiB (MemoryMax=2048M, Overcommit=100%).")
    assert m.list() == before
    assert run("systemctl", "list-units", "--plain", "--no-legend", "--all", "sandbox-*.slice").stdout == slices
    with pytest.raises(dbus.DBusException) as e:
        m.create(type="medium")
    assert dbus_error(e)[0] == ERR + "LimitExceeded"

    m.delete(str(a))
    c, _ = m.create(type="small")
    for sid in (b, c):
        m.delete(str(sid))


def test_overcommit_and_tasks(totals_config):
    """Overcommit= lets the promises add up to more than the slice's limits; TasksMax= is summed like
    memory."""
    totals_config("[Sandboxes]\nMemoryMax=1G\nTasksMax=600\nOvercommit=300%\n[Type:small]\nPoolSize=0\n")
    m = Manager()
    made = [str(m.create(type="small")[0]) for _ in range(2)]  # 2 GiB of 3, 512 tasks of 1800
    # tasks: 1800 allowed, a large one (4096) is refused for its memory first (16 GiB)
    with pytest.raises(dbus.DBusException) as e:
        m.create(type="large")
    assert dbus_error(e)[0] == ERR + "LimitExceeded" and "memory is used up" in dbus_error(e)[1]
    made.append(str(m.create(type="small")[0]))  # 3 GiB of 3
    with pytest.raises(dbus.DBusException) as e:
        m.create(type="small")
    assert "memory is used up" in dbus_error(e)[1]
    for sid in made:
        m.delete(sid)

    with open(DROPIN, "w") as f:
        f.write("[Sandboxes]\nMemoryMax=infinity\nTasksMax=300\nCPUQuota=infinity\n[Type:small]\nPoolSize=0\n")
    restart_sandboxd()
    # the earlier run's 1 GiB and 180 % go: infinity is set as well, not left alone
    show = slice_limits()
    assert (show["MemoryMax"], show["TasksMax"], show["CPUQuotaPerSecUSec"]) == ("infinity", "300", "infinity"), show
    log = run("journalctl", "-u", "sandboxd", "--no-pager", "-o", "cat").stdout
    assert "Could not set the limits of sandbox.slice" not in log
    sid = str(m.create(type="small")[0])
    with pytest.raises(dbus.DBusException) as e:
        m.create(type="small")
    name, msg = dbus_error(e)
    assert name == ERR + "LimitExceeded"
    assert msg == ("The sandboxes' tasks are used up: 1 sandboxes are promised 256 tasks, this one would add "
                   "256, and [Sandboxes] allows 300 (TasksMax=300, Overcommit=100%).")
    m.delete(sid)


def test_pool_never_overcommits(totals_config):
    """Pooled sandboxes count: with room for two small sandboxes and PoolSize=2, the pool fills to two;
    after a claim it cannot refill (that would be a third) and waits until a deletion makes room."""
    totals_config("[Sandboxes]\nMemoryMax=2G\n[Type:small]\nPoolSize=2\n")
    m = Manager()
    pooled = wait_for(lambda: pool_ready(2), timeout=60, what="the pool to fill")
    a = str(m.create(type="small")[0])
    assert a in pooled
    b = str(m.create(type="small")[0])
    assert b in pooled, "claims need no room: the pooled sandbox was counted already"
    # the pool stays empty: any refill would promise a third GiB
    with pytest.raises(dbus.DBusException) as e:
        m.create(type="small")
    assert dbus_error(e)[0] == ERR + "LimitExceeded"
    wait_for(lambda: "The pool of type small waits" in
             run("journalctl", "-u", "sandboxd", "--no-pager", "-o", "cat").stdout,
             what="the pool to find no room")
    assert pool_ids() == set()
    m.delete(a)
    wait_for(lambda: pool_ready(1), timeout=60, what="the pool to refill after a deletion")
    m.delete(b)


def test_bad_totals_refused_at_start():
    """A bad [Sandboxes] value keeps sandboxd from starting, with the line in the journal."""
    os.makedirs(DROPIN_DIR, exist_ok=True)
    with open(DROPIN, "w") as f:
        f.write("[Sandboxes]\nOvercommit=50%\n")
    try:
        assert run("systemctl", "restart", "sandboxd", check=False).returncode != 0
        log = run("journalctl", "-u", "sandboxd", "-n", "20", "--no-pager").stdout
        assert f"{DROPIN}:2: Invalid Overcommit=50%: out of range (expected 100%..10000%)" in log, log
    finally:
        os.unlink(DROPIN)
        restart_sandboxd()


def test_sandboxes_per_account(totals_config):
    """MaxSandboxesPerAccount=: one owner (account_id: a gateway key, a local uid) may have that many;
    one more is LimitExceeded and nothing is made; another account is not affected; a deletion gives room.
    Pooled sandboxes count for whoever claims them."""
    totals_config("[Sandboxes]\nMaxSandboxesPerAccount=2\n")
    m = Manager()
    a = str(m.create(type="small", account_id="key:key_aaaaaaaaaaaaaaaaaaaa")[0])
    m.create(type="small", account_id="key:key_aaaaaaaaaaaaaaaaaaaa")
    before = m.list()
    with pytest.raises(dbus.DBusException) as e:
        m.create(type="small", account_id="key:key_aaaaaaaaaaaaaaaaaaaa")
    assert dbus_error(e) == (ERR + "LimitExceeded", "Account key:key_aaaaaaaaaaaaaaaaaaaa has 2 sandboxes "
                             "already, at most 2 are allowed (MaxSandboxesPerAccount=).")
    assert m.list() == before
    m.create(type="small", account_id="key:key_bbbbbbbbbbbbbbbbbbbb")
    m.create(type="small")  # uid:0
    m.delete(a)
    m.create(type="small", account_id="key:key_aaaaaaaaaaaaaaaaaaaa")
