# SPDX-License-Identifier: LGPL-2.1-or-later
# A sandbox's disk (DiskMax=): home, /tmp and /var/tmp share one ext4 image of that size on a loop
# device; a full disk refuses writes inside the sandbox and through WriteFile without changing
# anything, touches no other sandbox and no more of the host than its size; the loop device goes with
# the sandbox; a type with DiskMax=infinity keeps plain directories; a disk that cannot be made is an
# error, never a sandbox without its quota.
import glob
import os
import subprocess

import dbus
import pytest

import kernel
from conftest import Manager, dbus_error, run, sandbox_path, wait_for
from test_sandboxd import wait_sandboxd_active

ERR = "org.sandboxd.sandbox1."
DROPIN_DIR = "/etc/sandboxd/sandboxd.conf.d"
DROPIN = DROPIN_DIR + "/50-disk-test.conf"
MiB = 1 << 20

# The tests that mount a disk need loop devices and ext4 in the kernel (probed, docs/testing.md).
needs_disk = pytest.mark.skipif(
    not kernel.disk_images_possible(),
    reason="no disk images on this kernel: " + "; ".join(kernel.describe(kernel.features()[f]) for f in ("loop", "ext4")))


def restart_sandboxd():
    run("systemctl", "reset-failed", "sandboxd.service", check=False)  # the tests restart it often
    run("systemctl", "restart", "sandboxd.service")
    wait_sandboxd_active()


@pytest.fixture(scope="module")
def disk_types():
    """Two more types: disk64 (DiskMax=64M) and nodisk (DiskMax=infinity)."""
    os.makedirs(DROPIN_DIR, exist_ok=True)
    with open(DROPIN, "w") as f:
        f.write("[Type:disk64]\nDiskMax=64M\n\n[Type:nodisk]\nDiskMax=infinity\n")
    restart_sandboxd()
    yield
    os.unlink(DROPIN)
    restart_sandboxd()


@pytest.fixture
def made():
    """Sandboxes to delete afterwards, whatever their type."""
    ids = []
    yield ids
    m = Manager()
    for sid in ids:
        try:
            m.delete(sid)
        except dbus.DBusException:
            pass


def create(mgr, made, type):
    sid, path = mgr.create(type=type)
    made.append(str(sid))
    return str(sid), str(path)


def df(mgr, sid, *paths):
    """{mount point: (device, size in bytes, available bytes)} as the sandbox sees them."""
    code, out, err, _ = mgr.exec(sid, ["df", "-B1", "--output=source,size,avail,target", *paths])
    assert code == 0, err
    rows = [line.split() for line in out.decode().splitlines()[1:]]
    return {r[3]: (r[0], int(r[1]), int(r[2])) for r in rows}


# Fills the disk: ext4 reserves room for delayed allocations pessimistically, and gives part of it back
# once the data is written out; so write and sync until what is left is less than a block group's worth.
FILL = ("i=0; while [ $i -lt 20 ]; do i=$((i+1)); dd if=/dev/zero of={dir}/fill$i bs=64k count=4096 2>&1; sync; "
        "[ $(df -B1 --output=avail {dir} | tail -1) -lt 524288 ] && break; done")


def sandboxd_holds_disk(sid):
    """Whether sandboxd holds the sandbox's disk open (its pin, so that the unmount is not left to the
    init's exit): one of its fds is on the file system of the sandbox's home."""
    pid = run("systemctl", "show", "-P", "MainPID", "sandboxd.service").stdout.strip()
    dev = os.stat(sandbox_path(sid, "/home/sandbox")).st_dev
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.stat(f"/proc/{pid}/fd/{fd}").st_dev == dev:
                return True
        except OSError:
            pass
    return False


def loop_backing_files():
    files = []
    for f in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            with open(f) as fh:
                files.append(fh.read().strip())
        except OSError:
            pass  # detached meanwhile
    return files


@needs_disk
def test_disk_is_the_quota(mgr, disk_types, made):
    sid, _ = create(mgr, made, "disk64")
    seen = df(mgr, sid, "/home/sandbox", "/tmp", "/var/tmp")
    devices = {v[0] for v in seen.values()}
    assert len(devices) == 1 and devices.pop().startswith("/dev/loop"), seen
    size = seen["/home/sandbox"][1]
    assert 48 * MiB < size <= 64 * MiB, seen

    # the image on the host: 64 MiB long, holding only what was written
    image = f"/var/lib/sandboxd/sandboxes/{sid}/disk.img"
    st = os.stat(image)
    assert st.st_size == 64 * MiB and st.st_blocks * 512 < 8 * MiB
    assert image in loop_backing_files()
    assert sandboxd_holds_disk(sid)

    # writing beyond it fails inside the sandbox, for home and /tmp alike (one disk)
    code, out, err, _ = mgr.sh(sid, "dd if=/dev/zero of=/home/sandbox/big bs=1M count=100 2>&1; sync")
    assert b"No space left on device" in out, out
    code, out, _, _ = mgr.sh(sid, FILL.format(dir="/tmp"))
    assert b"No space left on device" in out, out
    assert df(mgr, sid, "/var/tmp")["/var/tmp"][2] < 512 * 1024
    code, out, _, _ = mgr.sh(sid, "{ head -c 1M /dev/zero > /var/tmp/more; } 2>&1")
    assert code != 0 and b"No space left on device" in out, out
    st = os.stat(image)
    assert st.st_blocks * 512 <= 66 * MiB  # the host gave the sandbox no more than its size

    # another sandbox is not touched
    other, _ = create(mgr, made, "disk64")
    code, _, err, _ = mgr.sh(other, "dd if=/dev/zero of=/tmp/f bs=1M count=8 status=none")
    assert code == 0, err

    # WriteFile into the full disk: LimitExceeded, and nothing changed — no new file, no old one cut
    # (2 MiB left free: a write that did not make sure of its room first would get half-way)
    code, _, err, _ = mgr.sh(sid, "rm /home/sandbox/big && printf keep > /home/sandbox/small.txt && "
                                  "head -c 2M /dev/zero > /home/sandbox/pad && "
                                  "dd if=/dev/zero of=/home/sandbox/big bs=1M count=100 status=none; "
                                  + FILL.format(dir="/home/sandbox") + " >/dev/null; rm /home/sandbox/pad; sync; "
                                  "test -s /home/sandbox/small.txt")
    assert code == 0, err
    assert 1 * MiB < df(mgr, sid, "/home/sandbox")["/home/sandbox"][2] < 4 * MiB
    for path in ("/home/sandbox/new.bin", "/home/sandbox/small.txt"):
        with pytest.raises(dbus.DBusException) as e:
            mgr.write(sid, path, b"x" * (4 * MiB))
        assert dbus_error(e)[0] == ERR + "LimitExceeded", dbus_error(e)
    code, out, _, _ = mgr.sh(sid, "ls /home/sandbox; cat /home/sandbox/small.txt")
    assert b"new.bin" not in out and out.split()[-2:] == [b"small.txt", b"keep"], out
    # nor does the editing tool cut a file it cannot rewrite
    with pytest.raises(dbus.DBusException) as e:
        mgr.iface.StrReplace(sid, "/home/sandbox/small.txt", dbus.ByteArray(b"keep"),
                             dbus.ByteArray(b"k" * (4 * MiB)), dbus.Dictionary({}, signature="sv"), timeout=60)
    assert dbus_error(e)[0] == ERR + "LimitExceeded", dbus_error(e)
    assert mgr.read(sid, "/home/sandbox/small.txt")[0] == b"keep"

    # room again once the sandbox frees it
    mgr.sh(sid, "rm -f /home/sandbox/big /home/sandbox/fill* /tmp/fill*")
    mgr.write(sid, "/home/sandbox/new.bin", b"x" * (4 * MiB))
    assert mgr.read(sid, "/home/sandbox/new.bin")[0] == b"x" * (4 * MiB)

    # the loop device goes with the sandbox
    mgr.delete(sid)
    assert not os.path.exists(image)
    wait_for(lambda: not [f for f in loop_backing_files() if sid in f], what="the loop device to be detached")


@needs_disk
def test_disk_survives_a_restart(mgr, disk_types, made):
    sid, _ = create(mgr, made, "disk64")
    mgr.write(sid, "/home/sandbox/state", b"persisted")
    restart_sandboxd()
    m = Manager()
    assert m.read(sid, "/home/sandbox/state")[0] == b"persisted"
    assert sandboxd_holds_disk(sid)  # taken again at the adoption
    seen = df(m, sid, "/home/sandbox")
    assert seen["/home/sandbox"][0].startswith("/dev/loop") and seen["/home/sandbox"][1] <= 64 * MiB


def test_no_disk_with_infinity(mgr, disk_types, made):
    sid, _ = create(mgr, made, "nodisk")
    seen = df(mgr, sid, "/home/sandbox")
    assert not seen["/home/sandbox"][0].startswith("/dev/loop"), seen
    ws = f"/var/lib/sandboxd/sandboxes/{sid}"
    assert not os.path.exists(ws + "/disk.img") and os.path.isdir(ws + "/home")
    mgr.write(sid, "/tmp/x", b"plain")
    assert mgr.read(sid, "/tmp/x")[0] == b"plain"


def test_a_disk_that_cannot_be_made_is_an_error(mgr, disk_types, made):
    run("systemctl", "set-environment", "SANDBOXD_MKFS_EXT4=/bin/false")
    try:
        restart_sandboxd()
        m = Manager()
        with pytest.raises(dbus.DBusException) as e:
            create(m, made, "disk64")
        name, message = dbus_error(e)
        assert name == "org.freedesktop.DBus.Error.Failed"
        assert "disk image of type disk64 (DiskMax=67108864)" in message and "mkfs.ext4 failed" in message
        log = run("journalctl", "-u", "sandboxd", "-n", "50", "--no-pager").stdout
        assert "Could not make a 67108864-byte disk image with /bin/false" in log, log
        assert not [d for d in os.listdir("/var/lib/sandboxd/sandboxes") if d not in made]
        # a type without a disk is not affected
        sid, _ = create(m, made, "nodisk")
        assert m.exec(sid, ["true"])[0] == 0
    finally:
        run("systemctl", "unset-environment", "SANDBOXD_MKFS_EXT4")
        restart_sandboxd()


def test_delete_without_a_disk_does_not_follow_planted_symlinks(mgr, disk_types, made, tmp_path):
    """Without a disk image, the home is a directory of the host that root removes with the sandbox:
    links planted there, to a directory of the host, are removed, not followed."""
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "precious").write_text("keep me")
    os.chmod(tmp_path, 0o755)
    sid, _ = create(mgr, made, "nodisk")
    mgr.sh(sid, f"ln -s {canary} ~/link; ln -s {canary}/precious ~/file; mkdir -p ~/d; ln -s / ~/d/root")
    ws = f"/var/lib/sandboxd/sandboxes/{sid}"
    assert os.path.islink(f"{ws}/home/link")
    mgr.delete(sid)
    assert (canary / "precious").read_text() == "keep me"
    assert not os.path.exists(ws)


@needs_disk
def test_a_lost_template_leaves_nothing_behind(mgr, disk_types, made):
    """The template goes while sandboxd runs: CreateSandbox fails with the reason, and no half-made
    workspace stays."""
    template = "/var/lib/sandboxd/disk-templates/ext4-67108864.img"
    assert os.path.exists(template)
    before = set(os.listdir("/var/lib/sandboxd/sandboxes"))
    os.rename(template, template + ".away")
    try:
        with pytest.raises(dbus.DBusException) as e:
            create(mgr, made, "disk64")
        name, message = dbus_error(e)
        assert name == "org.freedesktop.DBus.Error.FileNotFound" or "No such file" in message, (name, message)
        assert set(os.listdir("/var/lib/sandboxd/sandboxes")) == before
    finally:
        os.rename(template + ".away", template)
    sid, _ = create(mgr, made, "disk64")
    assert mgr.exec(sid, ["true"])[0] == 0
