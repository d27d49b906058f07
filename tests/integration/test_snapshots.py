# SPDX-License-Identifier: LGPL-2.1-or-later
# Issue 26: snapshots of sandboxes' disks over the bus and sandboxctl: taken frozen and thawed after, forks that
# start from one and diverge on their own, a snapshot taken while a command writes files (every file whole in the
# fork, never torn), bad input, removal while a sandbox is being made from it, SnapshotStoreMax=, a full disk,
# a kill -9 of sandboxd in the middle of one, and snapshots kept across a restart.
import json
import os
import subprocess
import time

import dbus
import pytest

from conftest import LONG, audit_log, dbus_error, run, sandbox_path, wait_for
from test_pause import count, frozen, restart_sandboxd, start_counter, xml_members
from test_sandboxd import wait_sandboxd_active

CTX = dbus.Dictionary({}, signature="sv")
SNAPDIR = "/var/lib/sandboxd/snapshots"


def snapshot(mgr, sid, name=""):
    return str(mgr.iface.SnapshotSandbox(sid, name, CTX, timeout=LONG))


def snapshots(mgr):
    return {str(r[0]): {"name": str(r[1]), "source": str(r[2]), "type": str(r[3]), "owner": str(r[4]),
                        "created_at": int(r[5]), "size": int(r[6]), "image": str(r[7])}
            for r in mgr.iface.ListSnapshots()}


def remove(mgr, snap):
    mgr.iface.RemoveSnapshot(snap, CTX, timeout=LONG)


@pytest.fixture
def made_snapshots(mgr):
    made = []
    yield made
    for s in made:
        try:
            remove(mgr, s)
        except dbus.DBusException:
            pass


def test_snapshot_and_three_forks(mgr, sandbox, made_snapshots):
    sid, _ = sandbox()
    assert mgr.sh(sid, "mkdir -p ~/proj/sub && echo original > ~/proj/a.txt && echo deep > ~/proj/sub/b && "
                       "ln -s a.txt ~/proj/link && chmod 640 ~/proj/a.txt && echo t > /tmp/t && "
                       "echo vt > /var/tmp/vt")[0] == 0
    snap = snapshot(mgr, sid, "before-refactor")
    made_snapshots.append(snap)
    assert snap.startswith("sn_")
    listed = snapshots(mgr)[snap]
    assert (listed["name"], listed["source"], listed["type"]) == ("before-refactor", sid, "small")
    assert listed["image"] == "host"  # a host sandbox's: its forks run on the host's tree too
    assert listed["size"] > 0 and listed["owner"] == "uid:0"
    # not frozen after it
    assert not frozen(sid) and mgr.sh(sid, "echo alive")[1] == b"alive\n"
    row = wait_for(lambda: audit_log(sid, operation="snapshot.create"), what="the snapshot row")[0]
    detail = json.loads(str(row["detail"]))
    assert row["event"] == "finished" and detail["snapshot"] == snap and detail["name"] == "before-refactor"

    forks = []
    for i in range(3):
        fid, _ = sandbox(snapshot="before-refactor")
        forks.append(fid)
        code, out, err, _ = mgr.sh(fid, "cat ~/proj/a.txt ~/proj/sub/b ~/proj/link /tmp/t /var/tmp/vt; "
                                        "stat -c '%U %a' ~/proj/a.txt ~/proj ~/proj/sub/b; readlink ~/proj/link")
        assert code == 0, err
        assert out.decode().split("\n") == ["original", "deep", "original", "t", "vt", "sandbox 640",
                                            "sandbox 755", "sandbox 644", "a.txt", ""], out
        assert mgr.sh(fid, f"echo fork{i} > ~/proj/a.txt && touch ~/only-{i}")[0] == 0
    # each went its own way, and the original is as it was
    for i, fid in enumerate(forks):
        code, out, _, _ = mgr.sh(fid, "cat ~/proj/a.txt; ls ~ | grep only- || true")
        assert out.decode().split() == [f"fork{i}", f"only-{i}"], out
    assert mgr.sh(sid, "cat ~/proj/a.txt; ls ~")[1].decode().split() == ["original", "proj"]
    row = wait_for(lambda: audit_log(forks[0], operation="sandbox.create"), what="the fork's row")[0]
    assert json.loads(str(row["detail"]))["snapshot"] == snap
    assert all(mgr.props(mgr.iface.GetSandbox(f))["Image"] == "host" for f in forks)
    # a fork's files belong to its own user, not the source's
    src_uid = mgr.sh(sid, "id -u")[1].strip()
    for fid in forks:
        uid = mgr.sh(fid, "id -u")[1].strip()
        assert uid != src_uid
        assert mgr.sh(fid, "find / -xdev -user " + src_uid.decode() + " 2>/dev/null | head -1")[1] == b""


def test_snapshot_of_a_writing_sandbox_is_consistent(mgr, sandbox, made_snapshots):
    """Files written to a temporary name and renamed into place, 1 MiB each, while snapshots are taken: in every
    fork each such file is whole (1 MiB of its pattern) or absent."""
    sid, _ = sandbox()
    mgr.write(sid, "/tmp/writer.sh", b"i=0; while [ $i -lt 400 ]; do i=$((i+1)); "
              b"head -c 1048576 /dev/zero | tr '\\0' x > ~/w.tmp && mv ~/w.tmp ~/f$i; done; touch ~/done\n")
    assert mgr.sh(sid, "nohup sh /tmp/writer.sh >/dev/null 2>&1 &")[0] == 0
    wait_for(lambda: os.path.exists(sandbox_path(sid, "/home/sandbox/f2")), what="the writer")
    taken = []
    while not os.path.exists(sandbox_path(sid, "/home/sandbox/done")) and len(taken) < 4:
        taken.append(snapshot(mgr, sid))
        made_snapshots.append(taken[-1])
    assert taken
    for snap in taken:
        fid, _ = sandbox(snapshot=snap)
        code, out, err, _ = mgr.sh(fid, "n=0; for f in ~/f*; do [ \"$(tr -d x < $f | wc -c)\" = 0 ] && "
                                        "[ $(stat -c %s $f) = 1048576 ] || echo torn $f; n=$((n+1)); done; echo $n")
        assert code == 0, err
        lines = out.decode().split()
        assert "torn" not in lines, out
        print(f"{snap}: {lines[-1]} whole files")
        mgr.delete(fid)


def test_snapshot_of_a_paused_sandbox_leaves_it_paused(mgr, sandbox, made_snapshots):
    sid, path = sandbox()
    start_counter(mgr, sid)
    mgr.iface.PauseSandbox(sid, CTX, timeout=LONG)
    made_snapshots.append(snapshot(mgr, sid))
    assert frozen(sid) and bool(mgr.props(path)["Paused"])
    c = count(sid)
    time.sleep(0.5)
    assert count(sid) == c
    mgr.iface.ResumeSandbox(sid, CTX, timeout=LONG)
    wait_for(lambda: count(sid) > c, what="the counter after resume")


def test_bad_input(mgr, sandbox, made_snapshots):
    sid, _ = sandbox()
    before = snapshots(mgr)
    cases = [
        (lambda: snapshot(mgr, "sb_nosuchthing"), "org.sandboxd.sandbox1.NoSuchSandbox"),
        (lambda: snapshot(mgr, sid, "../x"), "org.freedesktop.DBus.Error.InvalidArgs"),
        (lambda: snapshot(mgr, sid, "sn_aaaaaaaaaa"), "org.freedesktop.DBus.Error.InvalidArgs"),
        (lambda: mgr.iface.SnapshotSandbox(sid, "x", dbus.Dictionary({"colour": "blue"}, signature="sv")),
         "org.freedesktop.DBus.Error.InvalidArgs"),
        (lambda: remove(mgr, "sn_nosuchthing"), "org.sandboxd.sandbox1.NoSuchSnapshot"),
        (lambda: mgr.create(type="small", snapshot="no-such-snapshot"), "org.sandboxd.sandbox1.NoSuchSnapshot"),
    ]
    for call, name in cases:
        with pytest.raises(dbus.DBusException) as e:
            call()
        assert dbus_error(e)[0] == name, dbus_error(e)
    assert snapshots(mgr) == before
    snap = snapshot(mgr, sid, "dup-name")
    made_snapshots.append(snap)
    with pytest.raises(dbus.DBusException) as e:
        snapshot(mgr, sid, "dup-name")
    assert dbus_error(e)[0] == "org.sandboxd.sandbox1.NameExists"
    # a type whose disk is not the snapshot's size
    n = len(mgr.list())
    with pytest.raises(dbus.DBusException) as e:
        mgr.create(type="medium", snapshot="dup-name")
    assert dbus_error(e)[0] == "org.freedesktop.DBus.Error.InvalidArgs" and "DiskMax" in dbus_error(e)[1]
    assert len(mgr.list()) == n
    assert not frozen(sid)
    failed = wait_for(lambda: [r for r in audit_log(sid, operation="snapshot.create") if r["event"] == "failed"],
                      what="the refused snapshots' rows")
    assert failed


def test_remove_while_a_sandbox_is_made_from_it(mgr, sandbox):
    sid, _ = sandbox()
    mgr.sh(sid, "echo kept > ~/k")
    snap = snapshot(mgr, sid)
    # the creation is sent first, the removal right after it on another connection
    p = subprocess.Popen(["busctl", "--timeout=120", "call", "--", "org.sandboxd.sandbox1", "/org/sandboxd/sandbox1",
                          "org.sandboxd.sandbox1.Manager", "CreateSandbox", "a{sv}", "1", "snapshot", "s", snap],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.05)
    remove(mgr, snap)
    out, err = p.communicate(timeout=120)
    assert snap not in snapshots(mgr)
    if p.returncode == 0:
        fid = out.split()[1].strip('"')
        try:
            assert mgr.sh(fid, "cat ~/k")[1] == b"kept\n"
        finally:
            mgr.delete(fid)
    else:
        assert "NoSuchSnapshot" in err or "No snapshot" in err, err  # removed before it was looked up
    assert not [f for f in os.listdir(SNAPDIR) if snap in f]
    row = wait_for(lambda: audit_log(sid, operation="snapshot.remove"), what="the removal row")[0]
    assert json.loads(str(row["detail"]))["snapshot"] == snap


def test_kept_across_a_restart_and_sandboxctl(mgr, sandbox, made_snapshots):
    sid, _ = sandbox()
    mgr.sh(sid, "echo ctl > ~/c")
    r = run("sandboxctl", "snapshot", sid, "--name", "ctl-snap")
    snap = r.stdout.strip()
    made_snapshots.append(snap)
    assert snap.startswith("sn_")
    restart_sandboxd()
    listed = json.loads(run("sandboxctl", "snapshot", "list", "--json").stdout)["snapshots"]
    assert [s for s in listed if s["id"] == snap and s["name"] == "ctl-snap" and s["source"] == sid and
            s["image"] == "host"]
    assert "ctl-snap" in run("sandboxctl", "snapshot", "list").stdout
    fid = run("sandboxctl", "create", "--from-snapshot", "ctl-snap").stdout.strip()
    try:
        assert mgr.sh(fid, "cat ~/c")[1] == b"ctl\n"
    finally:
        mgr.delete(fid)
    bad = run("sandboxctl", "snapshot", "remove", "sn_nosuchthing", check=False)
    assert bad.returncode == 1 and "sn_nosuchthing" in bad.stderr
    assert run("sandboxctl", "snapshot", check=False).returncode == 2
    assert run("sandboxctl", "snapshot", "remove", "ctl-snap").returncode == 0
    assert snap not in snapshots(mgr)


def test_store_max(mgr, sandbox):
    dropin = "/etc/sandboxd/sandboxd.conf.d/50-snapshot-max.conf"
    with open(dropin, "w") as f:
        f.write("[Manager]\nSnapshotStoreMax=1M\n")
    restart_sandboxd()
    try:
        sid, _ = sandbox()
        mgr.sh(sid, "head -c 3000000 /dev/urandom > ~/big")
        before = snapshots(mgr)
        with pytest.raises(dbus.DBusException) as e:
            snapshot(mgr, sid)
        assert dbus_error(e)[0] == "org.sandboxd.sandbox1.LimitExceeded" and "SnapshotStoreMax" in dbus_error(e)[1]
        assert snapshots(mgr) == before and not frozen(sid)
    finally:
        os.unlink(dropin)
        restart_sandboxd()


def test_full_disk(mgr, sandbox):
    """The snapshots' file system full: a clear error, nothing kept, the sandbox running as before."""
    run("mount", "-t", "tmpfs", "-o", "size=6M,mode=0700", "tmpfs", SNAPDIR)
    try:
        restart_sandboxd()  # sees the small file system (its mount namespace follows the host's anyway)
        sid, _ = sandbox()
        start_counter(mgr, sid)
        mgr.sh(sid, "head -c 20000000 /dev/urandom > ~/big")
        with pytest.raises(dbus.DBusException) as e:
            snapshot(mgr, sid, "too-big")
        name, msg = dbus_error(e)
        assert name == "org.sandboxd.sandbox1.LimitExceeded" and "no space left" in msg, (name, msg)
        assert "too-big" not in [s["name"] for s in snapshots(mgr).values()]
        assert os.listdir(SNAPDIR) == []
        assert not frozen(sid)
        c = count(sid)
        wait_for(lambda: count(sid) > c, what="the counter after the failed snapshot")
        assert mgr.sh(sid, "echo fine")[1] == b"fine\n"
    finally:
        run("umount", SNAPDIR)
        restart_sandboxd()


def test_kill9_mid_snapshot_leaves_no_half_snapshot(mgr, sandbox):
    sid, _ = sandbox()
    start_counter(mgr, sid)
    mgr.sh(sid, "head -c 400000000 /dev/urandom > ~/big", timeout_seconds=600)
    before = set(snapshots(mgr))
    p = subprocess.Popen(["busctl", "--timeout=300", "call", "--", "org.sandboxd.sandbox1", "/org/sandboxd/sandbox1",
                          "org.sandboxd.sandbox1.Manager", "SnapshotSandbox", "ssa{sv}", sid, "killed", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # kill it while the copy is under way (or, if it was too quick, right after)
    wait_for(lambda: any(f.startswith(".tmp-") for f in os.listdir(SNAPDIR)) or p.poll() is not None,
             interval=0.001, what="the copy to start")
    mid = p.poll() is None
    pid = run("systemctl", "show", "-p", "MainPID", "--value", "sandboxd.service").stdout.strip()
    os.kill(int(pid), 9)
    p.communicate(timeout=120)
    wait_for(lambda: run("systemctl", "show", "-p", "MainPID", "--value", "sandboxd.service").stdout.strip()
             not in ("0", pid), timeout=60, what="sandboxd to be started again")
    wait_sandboxd_active()
    after = snapshots(mgr)
    print("killed in the middle of the copy" if mid else "the snapshot was done before the kill")
    if mid:
        assert set(after) == before, after
    assert not [f for f in os.listdir(SNAPDIR) if f.startswith(".")]
    for snap in set(after) - before:
        remove(mgr, snap)
    # its sandbox, frozen for the snapshot, runs again
    wait_for(lambda: not frozen(sid), what="the thaw")
    c = count(sid)
    wait_for(lambda: count(sid) > c, what="the counter")


def test_xml_contract_is_what_is_served(mgr):
    (want, _), (got, _) = xml_members(mgr, "/org/sandboxd/sandbox1", "org.sandboxd.sandbox1.Manager")
    for name in ("SnapshotSandbox", "ListSnapshots", "RemoveSnapshot"):
        assert got[name] == want[name], name


def test_rest_routes(mgr):
    """POST …/snapshots, GET /v1/snapshots[/{id}], DELETE, and POST /v1/sandboxes with a snapshot, through the
    gateway, with the actions' rules."""
    import requests
    run("systemctl", "start", "sandbox-auditd.service", "sandbox-gatewayd.socket")
    base = "http://127.0.0.1:8790"

    def key(*args):
        return {"Authorization": "Bearer " + json.loads(run("sandboxctl", "api-key", "create", *args, "--ttl", "1h",
                                                            "--json").stdout)["secret"]}

    runner, admin = key("--preset", "runner"), key("--preset", "admin")
    r = wait_for(lambda: requests.post(f"{base}/v1/sandboxes", json={"type": "small", "ttl_seconds": 600},
                                       headers=runner, timeout=120), what="the gateway")
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    made = [sid]
    try:
        requests.put(f"{base}/v1/sandboxes/{sid}/files", params={"path": "/home/sandbox/r.txt"}, data=b"rest\n",
                     headers=runner, timeout=120).raise_for_status()
        r = requests.post(f"{base}/v1/sandboxes/{sid}/snapshots", json={"name": "rest-snap"}, headers=runner,
                          timeout=300)
        assert r.status_code == 201, r.text
        snap = r.json()
        assert set(snap) == {"id", "name", "source", "type", "image", "owner", "created_at", "size"}
        assert snap["image"] == "host"
        assert (snap["name"], snap["source"], snap["type"]) == ("rest-snap", sid, "small") and snap["size"] > 0
        assert snap["owner"].startswith("key:")
        listed = requests.get(f"{base}/v1/snapshots", headers=runner, timeout=120).json()["snapshots"]
        assert snap in listed
        assert requests.get(f"{base}/v1/snapshots/rest-snap", headers=runner, timeout=120).json() == snap
        # a fork through the API
        r = requests.post(f"{base}/v1/sandboxes", json={"snapshot": "rest-snap", "ttl_seconds": 600},
                          headers=runner, timeout=120)
        assert r.status_code == 201, r.text
        made.append(r.json()["id"])
        out = requests.post(f"{base}/v1/sandboxes/{made[-1]}/exec", json={"command": "cat ~/r.txt"},
                            headers=runner, timeout=120).json()
        assert out["stdout"] == "rest\n", out
        # a key scoped to some sandboxes may not fork, nor see snapshots of others
        scoped = key("--actions", "sandbox.create,snapshot.read,sandbox.read", "--sandboxes", made[-1])
        r = requests.post(f"{base}/v1/sandboxes", json={"snapshot": "rest-snap"}, headers=scoped, timeout=120)
        assert (r.status_code, r.json()["code"]) == (403, "forbidden"), r.text
        assert requests.get(f"{base}/v1/snapshots", headers=scoped, timeout=120).json()["snapshots"] == []
        assert requests.get(f"{base}/v1/snapshots/rest-snap", headers=scoped, timeout=120).status_code == 404
        # bad input
        r = requests.post(f"{base}/v1/sandboxes/{sid}/snapshots", json={"name": 3}, headers=runner, timeout=120)
        assert r.status_code == 400, r.text
        r = requests.post(f"{base}/v1/sandboxes/{sid}/snapshots", json={"name": "rest-snap"}, headers=runner,
                          timeout=120)
        assert (r.status_code, r.json()["code"]) == (409, "conflict"), r.text
        r = requests.post(f"{base}/v1/sandboxes", json={"snapshot": "sn_nosuchthing"}, headers=runner, timeout=120)
        assert r.status_code == 404, r.text
        # the runner preset has no snapshot.delete
        r = requests.delete(f"{base}/v1/snapshots/{snap['id']}", headers=runner, timeout=120)
        assert (r.status_code, r.json()["code"]) == (403, "forbidden"), r.text
        assert requests.delete(f"{base}/v1/snapshots/{snap['id']}", headers=admin, timeout=120).status_code == 204
        assert requests.get(f"{base}/v1/snapshots/{snap['id']}", headers=admin, timeout=120).status_code == 404
        assert requests.delete(f"{base}/v1/snapshots/{snap['id']}", headers=admin, timeout=120).status_code == 404
    finally:
        for s in made:
            requests.delete(f"{base}/v1/sandboxes/{s}", headers=admin, timeout=120)
