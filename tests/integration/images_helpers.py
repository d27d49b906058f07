# SPDX-License-Identifier: LGPL-2.1-or-later
# Helpers of the image tests (issue 24): tiny root file systems made here, from Debian's static busybox
# or from files the test assembles, imported through the bus; nothing comes from the network.
import io
import os
import shutil
import subprocess
import tarfile
import threading

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

from conftest import BUS_NAME, LONG, MANAGER_PATH

IMAGES_IFACE = "org.sandboxd.sandbox1.Images"
IMAGES_DIR = "/var/lib/sandboxd/images"
BUSYBOX = "/bin/busybox"
APPLETS = ["sh", "ls", "cat", "echo", "id", "touch", "mkdir", "dd", "df", "rm", "stat", "readlink", "head",
           "sleep", "test", "wc", "hostname", "true", "false", "env", "ps", "find", "grep", "chmod", "sync"]


def images(bus=None):
    bus = bus or dbus.SystemBus()
    return dbus.Interface(bus.get_object(BUS_NAME, MANAGER_PATH, introspect=False), IMAGES_IFACE)


def add_file(tar, name, data=b"", mode=0o644, uid=0, gid=0, type=tarfile.REGTYPE, linkname=""):
    info = tarfile.TarInfo(name)
    info.mode = mode
    info.uid, info.gid = uid, gid
    info.type = type
    info.linkname = linkname
    if type == tarfile.REGTYPE:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    else:
        tar.addfile(info)


def busybox_tar(marker=b"image marker\n", extra=None):
    """A root file system of busybox-static as tar bytes: /bin/busybox and its applets as symlinks,
    /usr/bin/marker, the directories a sandbox needs, and whatever extra(tar) adds."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in ("bin", "usr", "usr/bin", "etc", "tmp", "var", "var/tmp", "home", "proc", "dev", "root"):
            add_file(tar, "./" + d, type=tarfile.DIRTYPE, mode=0o1777 if d.endswith("tmp") else 0o755)
        with open(BUSYBOX, "rb") as f:
            add_file(tar, "./bin/busybox", f.read(), mode=0o755)
        for a in APPLETS:
            add_file(tar, "./bin/" + a, type=tarfile.SYMTYPE, linkname="busybox")
        add_file(tar, "./usr/bin/marker", marker, mode=0o644)
        add_file(tar, "./etc/os-release", b"ID=busybox-test\n")
        if extra:
            extra(tar)
    return buf.getvalue()


class Jobs:
    """Listens to JobProgress and JobFinished on its own connection, in a thread of its own."""

    def __init__(self):
        dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
        self.bus = dbus.SystemBus(private=True)
        self.finished = {}
        self.progress = {}
        self.cond = threading.Condition()
        self.bus.add_signal_receiver(self._on_finished, "JobFinished", IMAGES_IFACE, None, MANAGER_PATH)
        self.bus.add_signal_receiver(self._on_progress, "JobProgress", IMAGES_IFACE, None, MANAGER_PATH)
        self.loop = GLib.MainLoop()
        self.thread = threading.Thread(target=self.loop.run, daemon=True)
        self.thread.start()

    def _on_finished(self, job, image, result, error_name, message):
        with self.cond:
            self.finished[str(job)] = (str(image), str(result), str(error_name), str(message))
            self.cond.notify_all()

    def _on_progress(self, job, image, phase, done, total):
        with self.cond:
            self.progress.setdefault(str(job), []).append((str(phase), int(done), int(total)))

    def wait(self, job, timeout=600):
        with self.cond:
            if not self.cond.wait_for(lambda: job in self.finished, timeout=timeout):
                raise AssertionError(f"job {job} did not finish")
            return self.finished[job]

    def close(self):
        self.loop.quit()
        self.thread.join(5)
        self.bus.close()


def start_import(name, data, fmt="tar", tag=None, bus=None):
    """ImportImage from a pipe that a thread feeds with data; returns the job id."""
    r, w = os.pipe()
    opts = {"format": dbus.String(fmt)}
    if tag:
        opts["tag"] = dbus.String(tag)

    def feed():
        try:
            with os.fdopen(w, "wb") as f:
                f.write(data)
        except BrokenPipeError:
            pass
    t = threading.Thread(target=feed, daemon=True)
    t.start()
    try:
        job = images(bus).ImportImage(name, dbus.types.UnixFd(r), dbus.Dictionary(opts, signature="sv"),
                                      timeout=LONG)
    finally:
        os.close(r)
    return str(job)


def import_image(jobs, name, data, **kw):
    """Imports and waits; returns JobFinished's (image, result, error_name, message)."""
    return jobs.wait(start_import(name, data, **kw))


def remove_image(name):
    try:
        images().RemoveImage(name, dbus.Dictionary({}, signature="sv"), timeout=LONG)
    except dbus.DBusException as e:
        if e.get_dbus_name() != "org.sandboxd.sandbox1.NoSuchImage":
            raise


def oci_layout_tar(tree_tar, workdir, tag="latest"):
    """An OCI image layout made with umoci from a rootfs tarball, as the bytes of a tar of the layout."""
    layout = os.path.join(workdir, "layout")
    bundle = os.path.join(workdir, "bundle")
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    subprocess.run(["umoci", "init", "--layout", layout], check=True)
    subprocess.run(["umoci", "new", "--image", f"{layout}:{tag}"], check=True)
    subprocess.run(["umoci", "unpack", "--image", f"{layout}:{tag}", bundle], check=True,
                   capture_output=True)
    with tarfile.open(fileobj=io.BytesIO(tree_tar)) as t:
        t.extractall(os.path.join(bundle, "rootfs"), numeric_owner=True)
    subprocess.run(["umoci", "repack", "--image", f"{layout}:{tag}", bundle], check=True, capture_output=True)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        t.add(layout, arcname=".")
    shutil.rmtree(workdir, ignore_errors=True)
    return buf.getvalue()
