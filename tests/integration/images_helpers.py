# SPDX-License-Identifier: LGPL-2.1-or-later
# Helpers of the image tests (issue 24): tiny root file systems made here, from Debian's static busybox
# or from files the test assembles, imported through the bus; nothing comes from the network.
import io
import json
import os
import shutil
import subprocess
import tarfile
import threading

import dbus

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
    """JobProgress and JobFinished as busctl monitor sees them (a thread reads its JSON lines: no D-Bus
    main loop in a second thread, which dbus-python does not bear)."""

    def __init__(self):
        self.finished = {}
        self.progress = {}
        self.cond = threading.Condition()
        self.proc = subprocess.Popen(["busctl", "--system", "monitor", "--json=short", "--match",
                                      f"type='signal',interface='{IMAGES_IFACE}'"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        # busctl says nothing once it listens: an import of an empty stream fails at once, and its
        # JobFinished, once seen, says the monitor is in place (the loop only bounds a hang)
        for _ in range(120):
            null = os.open("/dev/null", os.O_RDONLY)
            try:
                job = str(images().ImportImage("monitor-probe", dbus.types.UnixFd(null),
                                               dbus.Dictionary({}, signature="sv"), timeout=LONG))
            finally:
                os.close(null)
            with self.cond:
                if self.cond.wait_for(lambda: job in self.finished, timeout=1):
                    return
            # not seen: the job ended before busctl listened; wait for it to be gone, then again
            wait_gone(job)
        raise AssertionError("busctl monitor never saw a JobFinished")

    def _read(self):
        for line in self.proc.stdout:
            try:
                m = json.loads(line)
            except ValueError:
                continue
            data = m.get("payload", {}).get("data", [])
            with self.cond:
                if m.get("member") == "JobFinished" and len(data) == 5:
                    self.finished[data[0]] = tuple(data[1:])
                elif m.get("member") == "JobProgress" and len(data) == 5:
                    self.progress.setdefault(data[0], []).append((data[2], int(data[3]), int(data[4])))
                self.cond.notify_all()

    def wait(self, job, timeout=600):
        with self.cond:
            if not self.cond.wait_for(lambda: job in self.finished, timeout=timeout):
                raise AssertionError(f"job {job} did not finish")
            return self.finished[job]

    def close(self):
        self.proc.terminate()
        self.proc.wait()


def wait_row(operation, *needles, session=None, request_id=None):
    """The newest audit row of operation (of session) whose detail holds every needle, once sandbox-auditd has
    it: rows reach the logger from sandboxd's spool after the call is answered."""
    from conftest import audit_log, wait_for

    def find():
        for row in audit_log(session=session, operation=operation, limit=20):
            if all(n in row["detail"] for n in needles) and request_id in (None, row["request_id"]):
                return row
        return None
    return wait_for(find, what=f"an audit row of {operation} with {needles}")


def wait_gone(job):
    from conftest import wait_for
    wait_for(lambda: job not in [str(j[0]) for j in images().ListJobs()], what=f"job {job} to end")


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


# The one real mmdebstrap build of a test run (issue 24's tests may build at most one image per run): a small
# Debian with what the escape suite's probes run (python3, su/passwd/chfn, mount, busctl). It is kept in the
# store for the rest of the run (the harness's state is thrown away after it), so whichever test asks first
# builds it and the others reuse it.
DEBIAN_IMAGE = "debian24"
DEBIAN_PACKAGES = ["python3", "passwd", "systemd", "procps"]


def archive_hosts():
    """The hosts of the archive the host's apt uses (mmdebstrap's default sources)."""
    hosts = set()
    for d in ("/etc/apt/sources.list.d",):
        for f in os.listdir(d) if os.path.isdir(d) else []:
            if f.endswith((".sources", ".list")):
                for line in open(os.path.join(d, f)):
                    if line.lstrip().startswith("#"):
                        continue
                    for word in line.split():
                        if word.startswith(("http://", "https://")):
                            hosts.add(word.split("/")[2])
    if os.path.exists("/etc/apt/sources.list"):
        for line in open("/etc/apt/sources.list"):
            for word in line.split():
                if word.startswith(("http://", "https://")) and not line.lstrip().startswith("#"):
                    hosts.add(word.split("/")[2])
    return sorted(hosts)


def archive_unreachable():
    """Why the archive cannot be reached from here (a harness with a private network), or None."""
    hosts = archive_hosts()
    if not hosts:
        return "the host's apt has no http(s) sources"
    for h in hosts:
        if subprocess.run(["getent", "ahosts", h], capture_output=True).returncode != 0:
            return (f"{h} (the host's Debian archive) does not resolve here: the harness runs with a private "
                    "network; run it with --net host for the build")
    return None


def debian_image(jobs):
    """The run's Debian image: (name, seconds its build took, or None if it was there already)."""
    if DEBIAN_IMAGE in {str(r[0]) for r in images().ListImages()}:
        return DEBIAN_IMAGE, None
    import time
    started = time.monotonic()
    job = str(images().BuildImage(DEBIAN_IMAGE, dbus.Dictionary({
        "suite": "bookworm", "variant": "minbase",
        "packages": dbus.Array(DEBIAN_PACKAGES, signature="s")}, signature="sv"), timeout=LONG))
    image, result, error_name, message = jobs.wait(job, timeout=1800)
    assert result == "done", (error_name, message)
    return DEBIAN_IMAGE, time.monotonic() - started


# The escape suite's image, made without the network: the files of a few of the host's own Debian packages
# and everything they depend on (dpkg's lists), with the host's PAM configuration, as a rootfs tarball. What
# the suite's probes run (python3, su, passwd, chfn, mount, unshare, busctl, bash) is all there, but nothing
# else of the host: it is an image like any other.
USERLAND_PACKAGES = ["bash", "dash", "coreutils", "util-linux", "mount", "login", "passwd", "python3-minimal",
                     "libpython3.11-stdlib", "systemd", "procps", "libpam-modules", "libpam-runtime", "grep",
                     "findutils", "sed"]


def _dpkg_database():
    """Installed packages and their dependencies (the first installed alternative of each), in one query."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${Package}\t${Status}\t${Depends}, ${Pre-Depends}\n"],
                       capture_output=True, text=True, check=True)
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    installed = {p for p, status, _ in rows if "install ok installed" in status}
    deps = {}
    for p, _, d in rows:
        out = []
        for dep in d.split(","):
            for alt in dep.split("|"):
                name = alt.strip().split(" ")[0].split(":")[0]
                if name in installed:
                    out.append(name)
                    break
        deps[p] = out
    return installed, deps


def host_userland_tar(packages=USERLAND_PACKAGES, marker=b"userland image\n"):
    installed, deps = _dpkg_database()
    seen, todo = set(), [p for p in packages if p in installed]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        todo.extend(d for d in deps.get(p, []) if d not in seen)
    r = subprocess.run(["dpkg-query", "-L"] + sorted(seen), capture_output=True, text=True, check=True)
    files = {line for line in r.stdout.splitlines() if line.startswith("/")}
    for d in ("/etc/pam.d", "/etc/security"):
        files.update(os.path.join(d, f) for f in os.listdir(d)) if os.path.isdir(d) else None
    files.update(["/etc/nsswitch.conf", "/etc/login.defs", "/etc/debian_version"])
    buf = io.BytesIO()
    added = set()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for top in ("bin", "sbin", "lib", "lib64"):  # merged /usr, as the host has it
            if os.path.islink("/" + top):
                add_file(tar, top, type=tarfile.SYMTYPE, linkname=os.readlink("/" + top))
        for d in ("usr", "etc", "tmp", "var", "var/tmp", "home", "proc", "dev", "root", "run"):
            add_file(tar, d, type=tarfile.DIRTYPE, mode=0o1777 if d.endswith("tmp") else 0o755)
        for f in sorted(files):
            if not os.path.lexists(f) or os.path.isdir(f) and not os.path.islink(f):
                continue
            # through the host's merged-/usr links: the real place, never a path through a symlink
            real = os.path.join(os.path.realpath(os.path.dirname(f)), os.path.basename(f)).lstrip("/")
            if real in added:
                continue
            added.add(real)
            tar.add(f, arcname=real, recursive=False)
        add_file(tar, "usr/bin/marker", marker)
        # a Debian image's shadow: its own, locked (the escape suite tries to link it out)
        add_file(tar, "etc/shadow", b"root:*:19000:0:99999:7:::\n", mode=0o640, gid=42)
    return buf.getvalue()
