# SPDX-License-Identifier: LGPL-2.1-or-later
# The pool of sandboxes made ahead (PoolSize=): invisible until claimed, refilled, limits and TTL
# exactly those of a sandbox made on demand, and removed by the next sandboxd after a restart.
import os
import re
import subprocess
import time

import dbus
import pytest

import kernel
from conftest import Manager, dbus_error, run, systemctl_show, wait_for

ERR = "org.sandboxd.sandbox1."
POOL_DIR = "/var/lib/sandboxd/pool"
DROPIN_DIR = "/etc/sandboxd/sandboxd.conf.d"
DROPIN = DROPIN_DIR + "/50-pool-test.conf"


def pool_ids():
    return set(os.listdir(POOL_DIR))


def slice_state(sid):
    return systemctl_show(f"sandbox-{sid}.slice", "ActiveState")["ActiveState"]


def wait_pool(n, what="the pool to fill"):
    """The pool holds n sandboxes whose slices are up; returns their ids."""
    def full():
        ids = pool_ids()
        return ids if len(ids) == n and all(slice_state(i) == "active" for i in ids) else None
    return wait_for(full, timeout=60, what=what)


def uid_processes(uid):
    r = run("pgrep", "-u", str(uid), check=False)
    return [int(p) for p in r.stdout.split()]


def restart_sandboxd(kill=False):
    if kill:
        run("systemctl", "kill", "-s", "KILL", "sandboxd.service")
        wait_for(lambda: systemctl_show("sandboxd.service", "ActiveState")["ActiveState"] != "active",
                 what="sandboxd to die")
        run("systemctl", "reset-failed", "sandboxd.service", check=False)
        run("systemctl", "start", "sandboxd.service")
    else:
        run("systemctl", "restart", "sandboxd.service")
    wait_for(lambda: systemctl_show("sandboxd.service", "ActiveState")["ActiveState"] == "active",
             what="sandboxd to be active")


def test_pool_invisible_and_refilled(mgr, sandbox):
    ids = wait_pool(2)
    listed = {r[0] for r in mgr.list()}
    assert not ids & listed
    for pid in ids:
        for call in (lambda: mgr.iface.GetSandbox(pid),
                     lambda: mgr.exec(pid, ["true"]),
                     lambda: mgr.write(pid, "/tmp/x", b"x"),
                     lambda: mgr.iface.SetTTL(pid, dbus.UInt64(60), dbus.Dictionary({}, signature="sv")),
                     lambda: mgr.delete(pid)):
            with pytest.raises(dbus.DBusException) as e:
                call()
            assert dbus_error(e)[0] == ERR + "NoSuchSandbox"
        # nor as an object on the bus
        with pytest.raises(dbus.DBusException):
            mgr.props("/org/sandboxd/sandbox1/sandbox/" + pid.replace("_", "_5f"))
        assert slice_state(pid) == "active"
    sid, path = sandbox(name="pooled-one")
    assert sid in ids, "CreateSandbox claims a sandbox from the pool"
    assert sid in {r[0] for r in mgr.list()}
    assert sid not in pool_ids()
    props = mgr.props(path)
    assert props["Name"] == "pooled-one" and props["State"] == "running" and props["Network"] == "none"
    wait_for(lambda: systemctl_show(f"sandbox-{sid}.slice", "Description")["Description"] ==
             f"sandbox {sid} (pooled-one)", what="the slice to carry the name")
    # refilled in the background, with new sandboxes
    refilled = wait_pool(2, what="the pool to be refilled")
    assert sid not in refilled and len(refilled & ids) == 1

    # network "host" is never pooled: made on demand, the pool untouched
    hid, _ = sandbox(network="host")
    assert hid not in refilled
    assert pool_ids() == refilled


def test_pooled_sandbox_is_exact(mgr, sandbox):
    ids = wait_pool(2)
    before = time.time()
    sid, path = sandbox(type="small", ttl_seconds=600)
    assert sid in ids
    props = mgr.props(path)
    uid = int(props["Uid"])
    # its life starts when it is claimed, not when it was made
    assert props["CreatedAt"] / 1e6 >= before - 1
    assert props["ExpiresAt"] - props["CreatedAt"] == 600 * 10 ** 6
    assert systemctl_show(f"sandbox-{sid}.slice", "MemoryMax", "TasksMax", "CPUQuotaPerSecUSec") == \
        {"MemoryMax": str(1024 ** 3), "TasksMax": "256", "CPUQuotaPerSecUSec": "1s"}
    disk = f"/var/lib/sandboxd/sandboxes/{sid}/disk.img"
    if kernel.disk_images_possible():
        assert os.path.isfile(disk)  # its disk, of the type's size
        assert os.stat(disk).st_size == 4 << 30
    else:  # the session runs the types with DiskMax=infinity (conftest.py)
        assert not os.path.exists(disk)

    mgr.write(sid, "/tmp/task.py", b"import os, socket\nprint(os.getuid(), socket.gethostname())\n")
    p = subprocess.Popen(["busctl", "--timeout=80", "call", "--", "org.sandboxd.sandbox1", "/org/sandboxd/sandbox1",
                          "org.sandboxd.sandbox1.Manager", "Exec", "sasa{sv}", sid, "2", "sleep", "3",
                          "1", "timeout_seconds", "t", "20"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        unit = wait_for(lambda: [u for u in run("systemctl", "list-units", "--plain", "--no-legend",
                                                f"sandbox-{sid}-exec-*").stdout.split() if u.endswith(".scope")],
                        what="the exec scope")[0]
        show = systemctl_show(unit, "Slice", "TasksMax", "MemoryMax", "RuntimeMaxUSec", "ControlGroup")
        assert show["Slice"] == f"sandbox-{sid}.slice"
        assert (show["TasksMax"], show["MemoryMax"], show["RuntimeMaxUSec"]) == ("256", str(1024 ** 3), "20s")
        procs = wait_for(lambda: open(f"/sys/fs/cgroup/systemd{show['ControlGroup']}/cgroup.procs").read().split(),
                         what="the command in its scope")
        st = open(f"/proc/{procs[0]}/status").read()
        assert re.search(rf"^Uid:\s+{uid}\s+{uid}\s+{uid}\s+{uid}$", st, re.M)
        assert re.search(r"^Seccomp:\s+2$", st, re.M) and re.search(r"^CapEff:\s+0+$", st, re.M)
    finally:
        p.communicate(timeout=60)
    assert p.returncode == 0
    code, out, err, _ = mgr.exec(sid, ["python3", "/tmp/task.py"])
    assert (code, out, err) == (0, f"{uid} {sid}\n".encode(), b"")
    mgr.delete(sid)
    assert not os.path.exists(f"/var/lib/sandboxd/sandboxes/{sid}")
    assert uid_processes(uid) == []


def test_pooled_sandbox_ttl(mgr, sandbox):
    ids = wait_pool(2)
    sid, _ = sandbox(ttl_seconds=2)
    assert sid in ids
    wait_for(lambda: sid not in [r[0] for r in mgr.list()], what="the TTL to expire")
    wait_for(lambda: not os.path.exists(f"/var/lib/sandboxd/sandboxes/{sid}"), what="the workspace to go")


@pytest.mark.parametrize("kill", [False, True], ids=["restart", "kill-9"])
def test_pool_after_restart(mgr, kill):
    old = wait_pool(2)
    restart_sandboxd(kill=kill)
    m = Manager()
    # what the old sandboxd made ahead is removed, whole; a new pool is made
    new = wait_pool(2, what="a new pool")
    assert not new & old
    for pid in old:
        wait_for(lambda: slice_state(pid) in ("inactive", ""), what=f"the old pool's slice {pid} to go")
        assert not os.path.exists(f"{POOL_DIR}/{pid}")
        assert not os.path.exists(f"/var/lib/sandboxd/sandboxes/{pid}")
        assert pid not in {r[0] for r in m.list()}
    # nothing of them is left running (their uids may be handed out again: look by cgroup, not uid)
    for pid in old:
        wait_for(lambda: not os.path.exists(f"/sys/fs/cgroup/systemd/sandbox.slice/sandbox-{pid}.slice"),
                 what="the old pool's cgroups to go")


def test_pool_size_config(mgr):
    os.makedirs(DROPIN_DIR, exist_ok=True)
    with open(DROPIN, "w") as f:
        f.write("[Type:small]\nPoolSize=0\n\n[Type:medium]\nPoolSize=1\n")
    try:
        restart_sandboxd()
        m = Manager()
        (pid,) = wait_pool(1)
        assert systemctl_show(f"sandbox-{pid}.slice", "MemoryMax")["MemoryMax"] == str(4 * 1024 ** 3)
        sid, _ = m.create(type="small")
        sid = str(sid)
        assert sid != pid and pool_ids() == {pid}
        mid, _ = m.create(type="medium")
        mid = str(mid)
        assert mid == pid
        assert systemctl_show(f"sandbox-{mid}.slice", "MemoryMax", "TasksMax") == \
            {"MemoryMax": str(4 * 1024 ** 3), "TasksMax": "1024"}
        wait_pool(1, what="the medium pool to be refilled")
        m.delete(sid)
        m.delete(mid)
    finally:
        os.unlink(DROPIN)
        restart_sandboxd()
    wait_pool(2, what="the default pool again")
