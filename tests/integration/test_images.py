# SPDX-License-Identifier: LGPL-2.1-or-later
# Images (issue 24): the store (import, list, get, remove, jobs with progress and cancel, audit rows,
# hygiene of hostile tarballs, OCI and docker archives) and sandboxes whose root is an image: what they see,
# where their writes go, pools per type, removal refused while in use, and a kill -9 mid-import. Every image
# here is made locally (busybox-static, files the test assembles, layouts made with umoci and skopeo).
import hashlib
import json
import io
import os
import re
import subprocess
import tarfile
import time

import dbus
import pytest

import kernel
from conftest import LONG, Manager, dbus_error, run, sandbox_path, systemctl_show, wait_for
from gateway_helpers import admin, assert_error, up  # noqa: F401 (admin, up: fixtures)
from images_helpers import (IMAGES_DIR, Jobs, add_file, busybox_tar, images, import_image, oci_layout_tar,
                            remove_image, start_import, wait_row)
from test_pause import count, frozen, pause, resume

pytestmark = pytest.mark.skipif(not kernel.disk_images_possible(),
                                reason="image sandboxes keep their writable layer on a disk image, which this "
                                       "kernel cannot give them (no loop devices or ext4)")

ERR = "org.sandboxd.sandbox1."
DROPIN = "/etc/sandboxd/sandboxd.conf.d/50-images-test.conf"
HOST_MARKERS = ("/etc/host-marker-images24", "/opt/host-marker-images24")


def restart_sandboxd(kill=False):
    if kill:
        run("systemctl", "kill", "-s", "KILL", "sandboxd.service")
        wait_for(lambda: systemctl_show("sandboxd.service", "ActiveState")["ActiveState"] != "active",
                 what="sandboxd to die")
    run("systemctl", "reset-failed", "sandboxd.service", check=False)
    run("systemctl", "restart", "sandboxd.service")
    wait_for(lambda: systemctl_show("sandboxd.service", "ActiveState")["ActiveState"] == "active",
             what="sandboxd to be active")


def dot_entries():
    return [e for e in os.listdir(IMAGES_DIR) if e.startswith(".")] if os.path.isdir(IMAGES_DIR) else []


def listed():
    return {str(r[0]): r for r in images().ListImages()}


@pytest.fixture(scope="module")
def jobs():
    j = Jobs()
    yield j
    j.close()


def writable_opt(tar):
    """/opt/pkgs, writable by everyone: where "installs" of a sandbox's user land in the overlay."""
    add_file(tar, "./opt", type=tarfile.DIRTYPE, mode=0o755)
    add_file(tar, "./opt/pkgs", type=tarfile.DIRTYPE, mode=0o1777)


@pytest.fixture(scope="module")
def bb(jobs):
    """The busybox image most tests use."""
    remove_image("bb24")
    data = busybox_tar(extra=writable_opt)
    assert import_image(jobs, "bb24", data)[1] == "done"
    yield "bb24", data
    for row in Manager().list():  # what a failed test left on it
        if str(Manager().props(row[5])["Image"]) == "bb24":
            Manager().delete(row[0])
    remove_image("bb24")


@pytest.fixture
def host_markers():
    for p in HOST_MARKERS:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write("host\n")
    yield HOST_MARKERS
    for p in HOST_MARKERS:
        os.unlink(p)


def test_import_list_get_remove(jobs):
    remove_image("imp24")
    data = busybox_tar(marker=b"imp\n")
    started = time.time()
    job = start_import("imp24", data)
    assert jobs.wait(job) == ("imp24", "done", "", "")
    assert any(phase == "unpack" for phase, _, _ in jobs.progress[job]), jobs.progress[job]
    row = listed()["imp24"]
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    assert (str(row[1]), str(row[4])) == ("tar", digest)
    assert row[2] / 1e6 >= started - 1 and row[3] > len(data) // 2
    info = {str(k): v for k, v in images().GetImage("imp24").items()}
    assert info["name"] == "imp24" and info["digest"] == digest and list(info["used_by"]) == []
    assert (info["devices_dropped"], info["setid_stripped"], info["owners_reset"]) == (0, 0, 0)
    # the tree is root's and read-only to everyone else on the host
    assert os.stat(f"{IMAGES_DIR}/imp24/tree").st_uid == 0
    assert os.stat(IMAGES_DIR).st_mode & 0o777 == 0o700
    row = wait_row("image.import", f'"job":"{job}"')
    assert row["event"] == "finished" and '"image":"imp24"' in row["detail"] and digest in row["detail"]

    images().RemoveImage("imp24", dbus.Dictionary({}, signature="sv"))
    assert "imp24" not in listed()
    assert not os.path.exists(f"{IMAGES_DIR}/imp24") and dot_entries() == []
    assert wait_row("image.remove", '"image":"imp24"')["event"] == "finished"
    with pytest.raises(dbus.DBusException) as e:
        images().GetImage("imp24")
    assert dbus_error(e)[0] == ERR + "NoSuchImage"


@pytest.mark.parametrize("call,want", [
    (lambda: images().RemoveImage("nope24", dbus.Dictionary({}, signature="sv")), "NoSuchImage"),
    (lambda: start_import("host", b""), "org.freedesktop.DBus.Error.InvalidArgs"),
    (lambda: start_import("../x", b""), "org.freedesktop.DBus.Error.InvalidArgs"),
    (lambda: start_import("ok24", b"", fmt="zip"), "org.freedesktop.DBus.Error.InvalidArgs"),
    (lambda: start_import("ok24", b"", fmt="oci-archive", tag="a:b"), "org.freedesktop.DBus.Error.InvalidArgs"),
    (lambda: images().BuildImage("ok24", dbus.Dictionary({"variant": "everything"}, signature="sv")),
     "org.freedesktop.DBus.Error.InvalidArgs"),
    (lambda: images().BuildImage("ok24", dbus.Dictionary({"packages": dbus.Array(["--evil"], signature="s")},
                                                         signature="sv")),
     "org.freedesktop.DBus.Error.InvalidArgs"),
    (lambda: images().BuildImage("ok24", dbus.Dictionary({"mirror": "x"}, signature="sv")),
     "org.freedesktop.DBus.Error.InvalidArgs"),
    (lambda: images().CancelJob("job_999999", dbus.Dictionary({}, signature="sv")), "NoSuchJob"),
    (lambda: Manager().create(type="small", image="nope24"), "NoSuchImage"),
    (lambda: Manager().create(type="small", image="bad/name"), "org.freedesktop.DBus.Error.InvalidArgs"),
])
def test_bad_input_changes_nothing(call, want):
    before = (set(listed()), dot_entries(), Manager().list())
    with pytest.raises(dbus.DBusException) as e:
        call()
    name, message = dbus_error(e)
    assert name == (want if "." in want else ERR + want), (name, message)
    assert message
    assert (set(listed()), dot_entries(), Manager().list()) == before


def test_name_taken(jobs, bb):
    with pytest.raises(dbus.DBusException) as e:
        start_import(bb[0], bb[1])
    assert dbus_error(e)[0] == ERR + "ImageExists"


def test_image_sandbox_sees_the_image_only(mgr, sandbox, bb, host_markers):
    sid, path = sandbox(image=bb[0])
    assert mgr.props(path)["Image"] == bb[0]
    code, out, err, _ = mgr.exec(sid, ["cat", "/usr/bin/marker", "/etc/os-release"])
    assert (code, out) == (0, b"image marker\nID=busybox-test\n"), err
    # nothing of the host's tree: not its markers, not its /usr, not sandboxd's state
    for p in list(host_markers) + ["/usr/bin/python3", "/usr/lib/x86_64-linux-gnu", "/var/lib/sandboxd",
                                   "/usr/libexec/sandboxd"]:
        code, _, _, _ = mgr.exec(sid, ["test", "-e", p])
        assert code == 1, p
    code, out, _, _ = mgr.exec(sid, ["cat", "/proc/self/mountinfo"])
    assert b"/var/lib/sandboxd" not in out and b"images" not in out, out  # not even as a path
    # its user, hostname, hosts, /proc (only its processes) and /dev as every sandbox's
    code, out, _, _ = mgr.sh(sid, "id -un; hostname; cat /etc/hostname; grep -c . /etc/hosts; ls /dev; "
                                  "ls /proc | grep -c '^[0-9]'")
    lines = out.decode().split("\n")
    assert lines[0] == "sandbox" and lines[1] == sid and lines[2] == sid and int(lines[3]) >= 2
    assert "null" in lines and "sda" not in lines and "loop0" not in lines
    # the home, /tmp and the file tools work as in every sandbox
    mgr.write(sid, "/home/sandbox/notes.txt", b"hello image\n")
    assert mgr.read(sid, "notes.txt")[0] == b"hello image\n"
    code, out, _, _ = mgr.sh(sid, "cat ~/notes.txt; echo t > /tmp/t && cat /tmp/t")
    assert out == b"hello image\nt\n"
    # the image itself is read-only to the sandbox: its user may write only where the image lets it
    code, _, err, _ = mgr.sh(sid, "echo x > /usr/bin/marker")
    assert code != 0 and b"ermission denied" in err
    row = wait_row("sandbox.create", session=sid)
    assert f'"image":"{bb[0]}"' in row["detail"]


def test_writes_go_to_the_sandboxs_layer(mgr, sandbox, bb):
    a, _ = sandbox(image=bb[0])
    b, _ = sandbox(image=bb[0])
    code, out, err, _ = mgr.sh(a, "df -k / | tail -1")
    used_before = int(out.split()[2])
    # a "user install" into the image's writable /opt/pkgs: it lands in a's upper layer, on a's disk
    code, _, err, _ = mgr.sh(a, "dd if=/dev/zero of=/opt/pkgs/blob bs=1M count=8 2>&1 && sync")
    assert code == 0, err
    code, out, _, _ = mgr.sh(a, "df -k / | tail -1; stat -c %s /opt/pkgs/blob")
    lines = out.split(b"\n")
    assert int(lines[0].split()[2]) - used_before >= 8 * 1024 - 64  # counted on a's disk
    assert lines[1] == b"8388608"
    # b, of the same image, does not see it; the image on the host is unchanged
    assert mgr.exec(b, ["test", "-e", "/opt/pkgs/blob"])[0] == 1
    assert os.listdir(f"{IMAGES_DIR}/{bb[0]}/tree/opt/pkgs") == []
    ws = f"/var/lib/sandboxd/sandboxes/{a}"
    assert os.path.exists(ws)
    mgr.delete(a)
    assert not os.path.exists(ws)  # its layer went with its disk


def test_remove_refused_while_in_use(mgr, sandbox, bb):
    sid, _ = sandbox(image=bb[0])
    with pytest.raises(dbus.DBusException) as e:
        images().RemoveImage(bb[0], dbus.Dictionary({}, signature="sv"))
    assert dbus_error(e)[0] == ERR + "ImageInUse"
    assert bb[0] in listed() and os.path.isdir(f"{IMAGES_DIR}/{bb[0]}/tree")
    info = {str(k): v for k, v in images().GetImage(bb[0]).items()}
    assert sid in [str(x) for x in info["used_by"]]
    row = wait_row("image.remove", f'"image":"{bb[0]}"', "ImageInUse")
    assert row["event"] == "failed"


def _snapshots():
    return {str(r[0]): {"name": str(r[1]), "source": str(r[2]), "type": str(r[3]), "image": str(r[7])}
            for r in Manager().iface.ListSnapshots()}


@pytest.fixture
def snaps(mgr):
    made = []
    yield made
    for s in made:
        try:
            mgr.iface.RemoveSnapshot(s, CTX, timeout=LONG)
        except dbus.DBusException:
            pass


CTX = dbus.Dictionary({}, signature="sv")
COUNTER = "i=0; while :; do i=$((i+1)); echo $i > /tmp/count; done >/dev/null 2>&1 &"


def test_pause_resume_of_an_image_sandbox(mgr, sandbox, bb):
    """An image sandbox freezes and thaws like any other: its loop stops while paused, calls are refused,
    and it goes on after ResumeSandbox."""
    sid, path = sandbox(image=bb[0])
    assert mgr.sh(sid, COUNTER)[0] == 0
    wait_for(lambda: os.path.exists(sandbox_path(sid, "/tmp/count")) and count(sid) > 1, what="the counter")
    pause(mgr, sid)
    assert frozen(sid) and bool(mgr.props(path)["Paused"]) and str(mgr.props(path)["State"]) == "paused"
    c = count(sid)
    time.sleep(0.5)
    assert count(sid) == c
    with pytest.raises(dbus.DBusException) as e:
        mgr.exec(sid, ["true"])
    assert dbus_error(e)[0] == ERR + "SandboxPaused"
    resume(mgr, sid)
    wait_for(lambda: count(sid) > c, what="the counter after resume")
    assert not frozen(sid) and mgr.exec(sid, ["cat", "/usr/bin/marker"])[1] == b"image marker\n"


def test_snapshot_of_an_image_sandbox_forks_on_its_image(mgr, sandbox, bb, snaps, jobs):
    """A snapshot of an image sandbox records its image: the upper layer on its disk (a file written in the
    image's /opt/pkgs) is there in a fork, which runs on the same image by default; another image, or a type
    of another Image=, is refused with nothing made; the image cannot be removed while the snapshot needs
    it, even once no sandbox runs on it; the snapshot keeps its image across a restart."""
    sid, _ = sandbox(image=bb[0])
    assert mgr.sh(sid, "echo layer > /opt/pkgs/x && echo home > ~/h && sync")[0] == 0
    snap = str(mgr.iface.SnapshotSandbox(sid, "img-snap", CTX, timeout=LONG))
    snaps.append(snap)
    assert _snapshots()[snap] == {"name": "img-snap", "source": sid, "type": "small", "image": bb[0]}
    assert snap in [str(x) for x in {str(k): v for k, v in images().GetImage(bb[0]).items()}["snapshots"]]
    row = wait_row("snapshot.create", snap, session=sid)
    assert json.loads(row["detail"])["image"] == bb[0]
    mgr.delete(sid)

    # refused while the snapshot needs it, though no sandbox runs on it now
    with pytest.raises(dbus.DBusException) as e:
        images().RemoveImage(bb[0], CTX)
    assert dbus_error(e)[0] == ERR + "ImageInUse" and snap in dbus_error(e)[1], dbus_error(e)
    assert bb[0] in listed()
    wait_row("image.remove", f'"image":"{bb[0]}"', snap)

    # no type, no image: the snapshot's type and image
    fid, fpath = mgr.create(snapshot="img-snap")
    fid = str(fid)
    try:
        assert str(mgr.props(fpath)["Image"]) == bb[0]
        code, out, err, _ = mgr.sh(fid, "cat /opt/pkgs/x ~/h /usr/bin/marker; stat -c %U /opt/pkgs/x ~/h")
        assert code == 0, err
        assert out.decode().split("\n") == ["layer", "home", "image marker", "sandbox", "sandbox", ""], out
        # the fork's layer is its own: a change there is not in the image nor in the snapshot's next fork
        assert mgr.sh(fid, "echo changed > /opt/pkgs/x")[0] == 0
        assert os.listdir(f"{IMAGES_DIR}/{bb[0]}/tree/opt/pkgs") == []
    finally:
        mgr.delete(fid)

    # bad input: nothing made
    n, ws = len(mgr.list()), sorted(os.listdir("/var/lib/sandboxd/sandboxes"))
    for opts, says in [({"image": "host"}, "'host'"), ({"image": "other-image"}, "'other-image'"),
                       ({"type": "small"}, "Image=host"), ({"type": "small", "image": "host"}, "'host'")]:
        with pytest.raises(dbus.DBusException) as e:
            mgr.create(snapshot=snap, **opts)
        name, msg = dbus_error(e)
        assert name == "org.freedesktop.DBus.Error.InvalidArgs" and says in msg and bb[0] in msg, (opts, msg)
    assert len(mgr.list()) == n and sorted(os.listdir("/var/lib/sandboxd/sandboxes")) == ws

    # the snapshot's image given explicitly, with a type of another Image=: allowed; across a restart
    restart_sandboxd()
    assert _snapshots()[snap]["image"] == bb[0]
    fid, fpath = sandbox(snapshot=snap, type="small", image=bb[0])
    assert str(mgr.props(fpath)["Image"]) == bb[0]
    assert mgr.sh(fid, "cat /opt/pkgs/x")[1] == b"layer\n"  # not the other fork's change
    mgr.delete(fid)

    # a host sandbox's snapshot does not go onto an image; its fork is on the host's tree
    hid, _ = sandbox()
    hsnap = str(mgr.iface.SnapshotSandbox(hid, "", CTX, timeout=LONG))
    snaps.append(hsnap)
    assert _snapshots()[hsnap]["image"] == "host"
    with pytest.raises(dbus.DBusException) as e:
        mgr.create(snapshot=hsnap, image=bb[0])
    assert dbus_error(e)[0] == "org.freedesktop.DBus.Error.InvalidArgs"
    fid, fpath = sandbox(snapshot=hsnap)
    assert str(mgr.props(fpath)["Image"]) == "host"
    assert mgr.exec(fid, ["test", "-e", "/usr/bin/marker"])[0] == 1

    # with the snapshot gone, the image may go (imported again for the tests after this one)
    mgr.iface.RemoveSnapshot(snap, CTX, timeout=LONG)
    assert [str(x) for x in {str(k): v for k, v in images().GetImage(bb[0]).items()}["snapshots"]] == []
    images().RemoveImage(bb[0], CTX)
    assert bb[0] not in listed()
    assert import_image(jobs, bb[0], bb[1])[1] == "done"


def hostile(build):
    def make():
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:
            add_file(t, "./bin", type=tarfile.DIRTYPE, mode=0o755)
            build(t)
        return buf.getvalue()
    return make


REFUSED = {
    "dotdot": hostile(lambda t: add_file(t, "../escaped-images24", b"x")),
    "dotdot inside": hostile(lambda t: add_file(t, "./bin/../../escaped-images24", b"x")),
    "absolute": hostile(lambda t: add_file(t, "/tmp/escaped-images24", b"x")),
    "through a symlink": hostile(lambda t: (add_file(t, "./out", type=tarfile.SYMTYPE, linkname="/tmp"),
                                            add_file(t, "./out/escaped-images24", b"x"))),
    "hard link outside": hostile(lambda t: add_file(t, "./pw", type=tarfile.LNKTYPE, linkname="../../etc/passwd")),
    "hard link absolute": hostile(lambda t: add_file(t, "./pw", type=tarfile.LNKTYPE, linkname="/etc/passwd")),
    "not a tar": lambda: b"\x7fELF not an archive at all" * 100,
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_hostile_tarball_refused(jobs, case):
    before = os.stat("/etc/passwd")
    name = "hostile24"
    remove_image(name)
    job = start_import(name, REFUSED[case]())
    image, result, error_name, message = jobs.wait(job)
    assert result == "failed" and error_name == "org.freedesktop.DBus.Error.Failed", message
    assert ("refused" in message) or case == "not a tar", message
    assert name not in listed() and dot_entries() == []
    assert not os.path.exists("/tmp/escaped-images24") and not os.path.exists("/escaped-images24")
    assert not os.path.exists("/var/lib/sandboxd/escaped-images24")
    assert os.stat("/etc/passwd") == before
    row = wait_row("image.import", f'"job":"{job}"')
    assert row["event"] == "failed" and row["exit_code"] == -1


def test_hostile_entries_neutralised(jobs, mgr, sandbox):
    """Device nodes are dropped, setuid and setgid bits cleared, foreign owners made root's; symlinks pointing
    anywhere are kept (inside a sandbox they resolve in its own root), mount points forced to directories."""
    def extra(t):
        add_file(t, "./bin/suid", b"#!/bin/sh\n", mode=0o4755)
        add_file(t, "./bin/sgid", b"#!/bin/sh\n", mode=0o2755)
        add_file(t, "./mem", type=tarfile.CHRTYPE)
        add_file(t, "./owned", b"mine", uid=1000, gid=1000)
        add_file(t, "./sandboxuid", b"x", uid=1879048193, gid=100)
        add_file(t, "./hostlink", type=tarfile.SYMTYPE, linkname="/etc/shadow")
    remove_image("neut24")
    data = busybox_tar(extra=extra)
    # proc as a symlink to the host's /: a mount there must not follow it
    buf = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(data)) as src, tarfile.open(fileobj=buf, mode="w") as dst:
        for m in src.getmembers():
            if m.name == "./proc":
                m = tarfile.TarInfo("./proc")
                m.type, m.linkname = tarfile.SYMTYPE, "/"
                dst.addfile(m)
            else:
                dst.addfile(m, src.extractfile(m) if m.isreg() else None)
    assert import_image(jobs, "neut24", buf.getvalue())[1] == "done"
    try:
        info = {str(k): v for k, v in images().GetImage("neut24").items()}
        assert info["devices_dropped"] == 1 and info["setid_stripped"] == 2 and info["owners_reset"] == 2
        tree = f"{IMAGES_DIR}/neut24/tree"
        assert not os.path.lexists(f"{tree}/mem")
        assert os.stat(f"{tree}/bin/suid").st_mode & 0o7777 == 0o755
        assert os.stat(f"{tree}/bin/sgid").st_mode & 0o7777 == 0o755
        assert (os.stat(f"{tree}/owned").st_uid, os.stat(f"{tree}/owned").st_gid) == (0, 0)
        assert (os.stat(f"{tree}/sandboxuid").st_uid, os.stat(f"{tree}/sandboxuid").st_gid) == (0, 100)
        assert os.readlink(f"{tree}/hostlink") == "/etc/shadow"
        assert os.path.isdir(f"{tree}/proc") and not os.path.islink(f"{tree}/proc")
        sid, _ = sandbox(image="neut24")
        code, out, _, _ = mgr.sh(sid, "cat /hostlink; echo $?; ls /proc/self/ >/dev/null && echo proc")
        assert b"proc" in out and b"root:" not in out
        mgr.delete(sid)
    finally:
        remove_image("neut24")


def test_oci_archive_import(jobs, mgr, sandbox):
    remove_image("oci24")
    layout = oci_layout_tar(busybox_tar(marker=b"from oci\n"), "/var/tmp/oci24-work", tag="v1")
    assert import_image(jobs, "oci24", layout, fmt="oci-archive", tag="v1")[1] == "done"
    try:
        assert str(listed()["oci24"][1]) == "oci-archive:v1"
        sid, _ = sandbox(image="oci24")
        assert mgr.exec(sid, ["cat", "/usr/bin/marker"])[1] == b"from oci\n"
        mgr.delete(sid)
    finally:
        remove_image("oci24")
    # a tag the layout does not have fails the job, and leaves nothing
    r = import_image(jobs, "oci24", layout, fmt="oci-archive", tag="v2")
    assert r[1] == "failed" and "umoci" in r[3], r
    assert "oci24" not in listed() and dot_entries() == []


def test_docker_archive_import(jobs, mgr, sandbox):
    remove_image("docker24")
    workdir = "/var/tmp/docker24-work"
    layout = oci_layout_tar(busybox_tar(marker=b"from docker\n"), workdir + "-oci", tag="latest")
    os.makedirs(workdir, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(layout)) as t:
        t.extractall(workdir + "/layout")
    archive = workdir + "/image.tar"
    run("skopeo", "--insecure-policy", "copy", "--quiet", f"oci:{workdir}/layout:latest",
        f"docker-archive:{archive}:test/bb:latest")
    with open(archive, "rb") as f:
        data = f.read()
    subprocess.run(["rm", "-rf", workdir], check=True)
    assert import_image(jobs, "docker24", data, fmt="docker-archive")[1] == "done"
    try:
        sid, _ = sandbox(image="docker24")
        assert mgr.exec(sid, ["cat", "/usr/bin/marker"])[1] == b"from docker\n"
        mgr.delete(sid)
    finally:
        remove_image("docker24")


class Held:
    """An ImportImage whose stream this side keeps open: the job runs until cancelled or killed."""

    def __init__(self, name):
        self.r, self.w = os.pipe()
        os.write(self.w, busybox_tar()[:4096])
        self.job = str(images().ImportImage(name, dbus.types.UnixFd(self.r),
                                            dbus.Dictionary({}, signature="sv"), timeout=LONG))
        os.close(self.r)

    def close(self):
        os.close(self.w)


def helper_pids():
    r = run("pgrep", "-f", "sandboxd-image-helper", check=False)
    return [int(p) for p in r.stdout.split()]


def test_cancel(jobs):
    remove_image("cancel24")
    held = Held("cancel24")
    try:
        wait_for(lambda: dot_entries(), what="the job's directory")
        assert [str(j[0]) for j in images().ListJobs()] == [held.job]
        images().CancelJob(held.job, dbus.Dictionary({}, signature="sv"))
        assert jobs.wait(held.job)[1:3] == ("cancelled", ERR + "Interrupted")
    finally:
        held.close()
    assert "cancel24" not in listed() and dot_entries() == [] and list(images().ListJobs()) == []
    wait_for(lambda: not helper_pids(), what="the helper to be gone")
    row = wait_row("image.import", f'"job":"{held.job}"')
    assert row["event"] == "failed" and "cancelled" in row["detail"]


def test_kill9_mid_import_leaves_no_half_image():
    remove_image("half24")
    held = Held("half24")
    try:
        wait_for(lambda: dot_entries(), what="the job's directory")
        restart_sandboxd(kill=True)
    finally:
        held.close()
    assert "half24" not in listed()
    assert dot_entries() == []  # removed at start-up
    wait_for(lambda: not helper_pids(), what="the helper to die with sandboxd")


def test_type_image_pool_and_disk(mgr, sandbox, bb, jobs):
    """A type with Image=: its pool holds sandboxes of that image (claimed at creation), its DiskMax= bounds the
    writable layer, and the image cannot be removed while the type's pool holds sandboxes of it."""
    os.makedirs(os.path.dirname(DROPIN), exist_ok=True)
    with open(DROPIN, "w") as f:
        f.write(f"[Type:img24]\nImage={bb[0]}\nDiskMax=32M\nPoolSize=1\n")
    try:
        restart_sandboxd()
        pool = "/var/lib/sandboxd/pool"

        def ready():  # small's 2 and img24's 1, their inits exec'd (set-up done, sandbox-init runs)
            ids = set(os.listdir(pool))
            return ids if len(ids) == 3 and all(
                systemctl_show(f"sandbox-{i}-init.scope", "ActiveState")["ActiveState"] == "active" and
                run("pgrep", "-f", f"^sandbox-init {i}$", check=False).returncode == 0
                for i in ids) else None
        pooled = wait_for(ready, timeout=60, what="the pools to fill")
        with pytest.raises(dbus.DBusException) as e:
            images().RemoveImage(bb[0], dbus.Dictionary({}, signature="sv"))
        assert dbus_error(e)[0] == ERR + "ImageInUse"
        sid, path = sandbox(type="img24")
        assert sid in pooled, "claimed from the type's pool"
        assert mgr.props(path)["Image"] == bb[0]
        assert mgr.exec(sid, ["cat", "/usr/bin/marker"])[1] == b"image marker\n"
        # an image "host" at creation overrides the type's Image=
        hid, hpath = sandbox(type="img24", image="host")
        assert mgr.props(hpath)["Image"] == "host" and hid not in pooled
        assert mgr.exec(hid, ["test", "-e", "/usr/bin/marker"])[0] == 1
        # the writable layer lives on the 32M disk: it fills up, and says so
        code, out, err, _ = mgr.sh(sid, "dd if=/dev/zero of=/opt/pkgs/big bs=1M count=64 2>&1")
        assert code != 0 and b"No space left" in out + err
    finally:
        os.unlink(DROPIN)
        restart_sandboxd()
    # with the type gone (and its sandboxes deleted by the fixture later) the pool lets go of the image
    wait_for(lambda: not any(os.path.exists(f"/var/lib/sandboxd/pool/{p}") for p in pooled
                             if p != sid), timeout=60, what="the old pool to go")


def test_image_needs_a_disk(mgr):
    os.makedirs(os.path.dirname(DROPIN), exist_ok=True)
    with open(DROPIN, "w") as f:
        f.write("[Type:nodisk24]\nDiskMax=infinity\n")
    try:
        restart_sandboxd()
        with pytest.raises(dbus.DBusException) as e:
            mgr.create(type="nodisk24", image="whatever")
        name, message = dbus_error(e)
        assert name == "org.freedesktop.DBus.Error.InvalidArgs" and "disk" in message
    finally:
        os.unlink(DROPIN)
        restart_sandboxd()


def test_xml_contract_is_what_is_served(mgr, sandbox, bb):
    """dbus/org.sandboxd.sandbox1.xml is what sandboxd serves: the Images interface and the Image property."""
    import xml.etree.ElementTree as ET

    def members(root, iface_name):
        [iface] = [i for i in root.iter("interface") if i.get("name") == iface_name]
        methods = {m.get("name"): [(a.get("direction", "in"), a.get("type"), a.get("name")) for a in m.iter("arg")]
                   for m in iface.iter("method")}
        signals = {s.get("name"): [(a.get("type"), a.get("name")) for a in s.iter("arg")] for s in iface.iter("signal")}
        props = {p.get("name"): p.get("type") for p in iface.iter("property")}
        return methods, signals, props

    src = ET.parse(os.path.join(os.path.dirname(__file__), "..", "..", "dbus", "org.sandboxd.sandbox1.xml")).getroot()
    obj = mgr.bus.get_object("org.sandboxd.sandbox1", "/org/sandboxd/sandbox1", introspect=False)
    served = ET.fromstring(str(obj.Introspect(dbus_interface="org.freedesktop.DBus.Introspectable")))
    assert members(served, "org.sandboxd.sandbox1.Images") == members(src, "org.sandboxd.sandbox1.Images")
    sid, path = sandbox(image=bb[0])
    sobj = mgr.bus.get_object("org.sandboxd.sandbox1", path, introspect=False)
    served = ET.fromstring(str(sobj.Introspect(dbus_interface="org.freedesktop.DBus.Introspectable")))
    assert members(served, "org.sandboxd.sandbox1.Sandbox")[2]["Image"] == "s"
    assert members(src, "org.sandboxd.sandbox1.Sandbox")[2]["Image"] == "s"


def test_sandboxctl_image(mgr, bb, tmp_path):
    """sandboxctl image import (a file, a directory holding an OCI layout), list, show, remove; create --image."""
    tarball = "/var/tmp/ctl24.tar"
    with open(tarball, "wb") as f:
        f.write(busybox_tar(marker=b"ctl\n"))
    try:
        remove_image("ctl24")
        r = run("sandboxctl", "image", "import", "ctl24", tarball, check=False)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("job_") and "ctl24: unpack" in r.stderr and "ctl24: done" in r.stderr
        out = run("sandboxctl", "image", "list").stdout
        assert "ctl24" in out and "tar" in out
        show = json.loads(run("sandboxctl", "image", "show", "ctl24", "--json").stdout)
        with open(tarball, "rb") as f:
            assert show["digest"] == "sha256:" + hashlib.sha256(f.read()).hexdigest()
        sid = run("sandboxctl", "create", "--type=small", "--image=ctl24").stdout.strip()
        try:
            assert "Image: ctl24" in run("sandboxctl", "status", sid).stdout
            assert mgr.exec(sid, ["cat", "/usr/bin/marker"])[1] == b"ctl\n"
            r = run("sandboxctl", "image", "remove", "ctl24", check=False)
            assert r.returncode == 1 and "in use" in r.stderr
        finally:
            mgr.delete(sid)
        assert run("sandboxctl", "image", "remove", "ctl24", check=False).returncode == 0
        # a hostile one fails with the job's message, and exit status 1
        bad = "/var/tmp/ctl24-bad.tar"
        with open(bad, "wb") as f:
            f.write(REFUSED["dotdot"]())
        r = run("sandboxctl", "image", "import", "ctl24", bad, check=False)
        assert r.returncode == 1 and "refused" in r.stderr
        os.unlink(bad)
        # an OCI layout directory goes as an oci-archive, read with the caller's rights
        layout_tar = oci_layout_tar(busybox_tar(marker=b"dir\n"), "/var/tmp/ctl24-oci")
        layout = "/var/tmp/ctl24-layout"
        os.makedirs(layout, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(layout_tar)) as t:
            t.extractall(layout)
        r = run("sandboxctl", "image", "import", "ctl24", layout, check=False)
        assert r.returncode == 0, r.stderr
        assert json.loads(run("sandboxctl", "image", "show", "ctl24", "--json").stdout)["source"] == \
            "oci-archive:latest"
        subprocess.run(["rm", "-rf", layout], check=True)
        # usage errors
        assert run("sandboxctl", "image", "import", "x", check=False).returncode == 2
        assert run("sandboxctl", "image", "frobnicate", check=False).returncode == 2
    finally:
        os.unlink(tarball)
        remove_image("ctl24")


def test_gateway_image(admin, bb, mgr):  # noqa: F811 (gateway_helpers' module fixture)
    """POST /v1/sandboxes with an image, the object's image, and the refusals."""
    r = admin.post("/v1/sandboxes", {"type": "small", "image": bb[0], "ttl_seconds": 600})
    assert r.status_code == 201, r.text
    sb = r.json()
    try:
        assert sb["image"] == bb[0]
        assert admin.get(f"/v1/sandboxes/{sb['id']}").json()["image"] == bb[0]
        assert mgr.exec(sb["id"], ["cat", "/usr/bin/marker"])[1] == b"image marker\n"
        r = admin.post(f"/v1/sandboxes/{sb['id']}/exec", {"argv": ["cat", "/etc/os-release"]})
        assert r.status_code == 200 and r.json()["stdout"] == "ID=busybox-test\n", r.text
    finally:
        admin.delete(f"/v1/sandboxes/{sb['id']}")
    host = admin.post("/v1/sandboxes", {"type": "small"}).json()
    assert host["image"] == "host"
    admin.delete(f"/v1/sandboxes/{host['id']}")
    before = len(mgr.list())
    assert_error(admin.post("/v1/sandboxes", {"image": "nope24"}), 404, "not_found", "No image 'nope24'.")
    assert_error(admin.post("/v1/sandboxes", {"image": "a/b"}), 400, "invalid_request")
    assert_error(admin.post("/v1/sandboxes", {"image": 5}), 400, "invalid_request")
    assert len(mgr.list()) == before


def test_gateway_snapshot_of_an_image_sandbox(admin, bb, mgr, sandbox, snaps):  # noqa: F811
    """The REST snapshot object names its image; POST /v1/sandboxes from it runs on that image, and with
    another image is 400 with nothing made."""
    sid, _ = sandbox(image=bb[0])
    assert mgr.sh(sid, "echo rest > /opt/pkgs/r")[0] == 0
    r = admin.post(f"/v1/sandboxes/{sid}/snapshots", {"name": "rest-img-snap"})
    assert r.status_code == 201, r.text
    snap = r.json()
    snaps.append(snap["id"])
    assert snap["image"] == bb[0] and admin.get(f"/v1/snapshots/{snap['id']}").json()["image"] == bb[0]
    before = len(mgr.list())
    assert_error(admin.post("/v1/sandboxes", {"snapshot": snap["id"], "image": "host"}), 400, "invalid_request")
    assert len(mgr.list()) == before
    r = admin.post("/v1/sandboxes", {"snapshot": snap["id"], "ttl_seconds": 600})
    assert r.status_code == 201, r.text
    fork = r.json()
    try:
        assert fork["image"] == bb[0]
        assert mgr.exec(fork["id"], ["cat", "/opt/pkgs/r"])[1] == b"rest\n"
    finally:
        admin.delete(f"/v1/sandboxes/{fork['id']}")


def test_gateway_images_routes(admin, bb, mgr, sandbox):  # noqa: F811
    """GET /v1/images and GET /v1/images/{name}: the store as sandboxd lists it; used_by as the key may see it."""
    r = admin.get("/v1/images")
    assert r.status_code == 200, r.text
    [img] = [i for i in r.json()["images"] if i["name"] == bb[0]]
    assert set(img) == {"name", "source", "created_at", "size", "digest"}
    row = listed()[bb[0]]
    assert img["digest"] == str(row[4]) and img["size"] == int(row[3]) and img["source"] == "tar"
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$", img["created_at"])
    sid, _ = sandbox(image=bb[0])
    one = admin.get(f"/v1/images/{bb[0]}").json()
    assert one["name"] == bb[0] and sid in one["used_by"] and one["devices_dropped"] == 0
    # a key scoped to another sandbox sees the image, not the sandbox on it
    other, _ = sandbox()
    scoped, _ = admin.mint(preset="runner", sandboxes=[other], ttl_seconds=600)
    got = scoped.get(f"/v1/images/{bb[0]}")
    assert got.status_code == 200 and sid not in got.json()["used_by"], got.text
    assert_error(admin.get("/v1/images/nope24"), 404, "not_found", "No image 'nope24'.")
    # a key without sandbox.read is refused
    nothing, _ = admin.mint(role="member", actions=["exec"], ttl_seconds=600)
    assert nothing.get("/v1/images").status_code == 403


def test_sandboxctl_image_ctrl_c_cancels():
    """sandboxctl image import from a stream that does not end: Ctrl-C cancels the job, nothing is left."""
    import signal
    remove_image("ctlc24")
    r, w = os.pipe()
    p = subprocess.Popen(["sandboxctl", "image", "import", "ctlc24", "-"], stdin=r, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    os.close(r)
    try:
        os.write(w, busybox_tar()[:4096])
        job = wait_for(lambda: [str(j[0]) for j in images().ListJobs() if str(j[1]) == "ctlc24"], what="the job")[0]
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        os.close(w)
    assert p.returncode == 1 and out.strip() == job, (out, err)
    assert "cancelling" in err and "ctlc24 cancelled" in err, err
    assert "ctlc24" not in listed() and dot_entries() == []
    assert wait_row("image.import", f'"job":"{job}"')["event"] == "failed"


def test_full_disk_fails_clearly(jobs):
    """The store's file system full in the middle of an import: the job fails saying so, and leaves nothing."""
    # mounted before sandboxd starts, so that its own mount namespace (PrivateMounts=) has it too
    run("mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "images24-full", IMAGES_DIR)
    restart_sandboxd()
    try:
        def big(tar):
            add_file(tar, "./usr/big", os.urandom(8 << 20))
        job = start_import("full24", busybox_tar(extra=big))
        image, result, error_name, message = jobs.wait(job)
        assert result == "failed" and "No space left" in message, message
        assert os.listdir(IMAGES_DIR) == []  # the job's directory went
        assert wait_row("image.import", f'"job":"{job}"')["event"] == "failed"
    finally:
        run("umount", IMAGES_DIR)
        restart_sandboxd()
    assert "full24" not in listed()


def test_gateway_delete_image(admin, jobs, mgr):  # noqa: F811
    """DELETE /v1/images/{name}: admin keys only, refused while in use, then gone, audited under the request."""
    remove_image("rest24")
    assert import_image(jobs, "rest24", busybox_tar())[1] == "done"
    sid = admin.post("/v1/sandboxes", {"type": "small", "image": "rest24"}).json()["id"]
    try:
        member, _ = admin.mint(preset="member", ttl_seconds=600)
        assert_error(member.delete("/v1/images/rest24"), 403, "forbidden", "Removing an image needs an admin key.")
        body = assert_error(admin.delete("/v1/images/rest24"), 409, "conflict")
        assert "in use" in body["error"]
        assert "rest24" in listed()
    finally:
        admin.delete(f"/v1/sandboxes/{sid}")
    r = admin.delete("/v1/images/rest24")
    assert r.status_code == 204, r.text
    assert "rest24" not in listed()
    row = wait_row("image.remove", '"image":"rest24"', request_id=r.headers["X-Request-Id"])
    assert row["event"] == "finished"
    assert_error(admin.delete("/v1/images/rest24"), 404, "not_found")
