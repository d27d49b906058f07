# SPDX-License-Identifier: LGPL-2.1-or-later
# The escape suite: what a program inside a sandbox (an Exec or a takeover shell) tries in order to get out
# of it, reach its neighbours or the host. Each attempt must fail with the precise error, and the test
# checks from outside that its side effect did not happen. docs/security.md has the table of results.
import base64
import json
import os
import platform
import re
import subprocess

import dbus
import pytest

import kernel
from conftest import Manager, run, sandbox_path, wait_for
from test_file_tools import Tools
from test_takeover import Shell

# The probes make raw syscalls by their x86_64 numbers (and use the i386/x32 ABIs of that machine).
pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the probes use x86_64 syscall numbers")

WORKSPACES = "/var/lib/sandboxd/sandboxes"

# What every probe starts with: raw syscalls through ctypes (so no libc wrapper truncates or checks an
# argument), results as errno names in one JSON object R printed at the end.
PRELUDE = r'''
import ctypes, errno, json, os, signal, socket, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
R = {}

def arg(x):
    return ctypes.c_ulong(x & 0xffffffffffffffff) if isinstance(x, int) else x

def raw(nr, *a):
    r = libc.syscall(ctypes.c_long(nr), *[arg(x) for x in a])
    return r, (0 if r >= 0 else ctypes.get_errno())

def sc(nr, *a):
    r, e = raw(nr, *a)
    return "ok" if r >= 0 else errno.errorcode.get(e, str(e))

def oserr(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))

def in_child(fn):
    """Runs fn in a forked child (a call that might create a process, or be killed): its result, or
    the signal that killed it."""
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rd)
        try:
            res = fn()
        except BaseException as e:
            res = "exception " + repr(e)
        os.write(wr, str(res).encode())
        os._exit(0)
    os.close(wr)
    out = b""
    while True:
        b = os.read(rd, 4096)
        if not b:
            break
        out += b
    os.close(rd)
    _, st = os.waitpid(pid, 0)
    if os.WIFSIGNALED(st):
        return "signal " + signal.Signals(os.WTERMSIG(st)).name
    return out.decode()

def clone(flags):
    r, e = raw(56, flags, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)
    if r > 0:
        os.waitpid(r, 0)
        return "ok"
    return errno.errorcode.get(e, str(e))

def done():
    print(json.dumps(R))
'''

TIOCSTI, TIOCLINUX = 0x5412, 0x541C
HIGH = 0xFFFFFFFF00000000


def probe(mgr, sid, body, *args, **opts):
    """Runs PRELUDE + body in the sandbox with python3; the JSON object it printed."""
    code, out, err, info = mgr.exec(sid, ["python3", "-c", PRELUDE + body, *[str(a) for a in args]], **opts)
    assert code == 0, (code, out, err)
    return json.loads(out.decode().splitlines()[-1])


def cgroup_procs(unit):
    cg = run("systemctl", "show", "-p", "ControlGroup", "--value", unit).stdout.strip()
    return [int(p) for p in open(f"/sys/fs/cgroup/systemd{cg}/cgroup.procs").read().split()]


def exe(pid):
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def init_pid(sid):
    """The sandbox's init: in its init scope, with its file helpers."""
    return [p for p in cgroup_procs(f"sandbox-{sid}-init.scope") if exe(p).endswith("/sandbox-init")][0]


def host_pid_of(uid, needle):
    """The host pid of the process of uid whose command line contains needle."""
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            st = open(f"/proc/{p}/status").read()
            cmd = open(f"/proc/{p}/cmdline", "rb").read()
        except OSError:
            continue
        if f"\nUid:\t{uid}\t" in st and needle in cmd:
            return int(p)
    return None


def status(pid):
    lines = open(f"/proc/{pid}/status").read().splitlines()
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def gone(pid):
    try:
        return status(pid)["State"][0] in "ZX"
    except OSError:
        return True


def sandboxd_pid():
    return int(run("systemctl", "show", "-p", "MainPID", "--value", "sandboxd.service").stdout.strip())


class World:
    """The sandboxes of this module: a (network none) that attacks, b its neighbour (network none) with a
    secret in a background process's environment and a canary file, h (network host)."""

    def __init__(self, image=None):
        self.mgr = Manager()
        self.made = []
        self.image = image  # issue 24: test_escape_image.py runs the suite on sandboxes of an image
        self.a = self.make(network="none")
        self.b = self.make(network="none")
        self.h = self.make(network="host")
        self.a_uid = self.uid(self.a)
        self.b_uid = self.uid(self.b)
        self.secret = "SECRET-" + os.urandom(8).hex()
        self.canary = ("CANARY-" + os.urandom(8).hex()).encode()
        self.mgr.write(self.b, "canary.txt", self.canary + b"\n")
        code, _, err, _ = self.mgr.sh(self.b, "nohup sleep 4242.5 >/dev/null 2>&1 &",
                                      env={"ESCAPE_SECRET": self.secret}, timeout_seconds=600)
        assert code == 0, err
        # a's own background process, in its own scope (the target of the cgroup moves)
        code, _, err, info = self.mgr.sh(self.a, "nohup sleep 4343.5 >/dev/null 2>&1 &", timeout_seconds=600)
        assert code == 0, err
        self.a_sleeper_unit = str(info["unit"])
        self.b_sleeper = wait_for(lambda: host_pid_of(self.b_uid, b"sleep\x004242.5"), what="b's sleeper")
        self.a_sleeper = wait_for(lambda: host_pid_of(self.a_uid, b"sleep\x004343.5"), what="a's sleeper")

    def make(self, **opts):
        if self.image:
            opts["image"] = self.image
        sid, _ = self.mgr.create(type="small", **opts)
        self.made.append(str(sid))
        return str(sid)

    def uid(self, sid):
        return int(self.mgr.props(self.mgr.iface.GetSandbox(sid))["Uid"])

    def close(self):
        for sid in self.made:
            try:
                self.mgr.delete(sid)
            except dbus.DBusException:
                pass


@pytest.fixture(scope="module")
def world():
    w = World()
    yield w
    w.close()


# --- syscalls and devices --------------------------------------------------------------------------

SYSCALLS = r'''
mountinfo = open("/proc/self/mountinfo").read()
buf = ctypes.create_string_buffer(256)
R["keyctl"] = sc(250, 0, -3, 0)                              # KEYCTL_GET_KEYRING_ID, session keyring
R["add_key"] = sc(248, b"user", b"escape", b"x", 1, -2)
R["request_key"] = sc(249, b"user", b"escape-missing", None, 0)
R["bpf"] = sc(321, 5, buf, 128)                              # BPF_PROG_LOAD
R["perf_event_open"] = sc(298, buf, 0, -1, -1, 0)
R["userfaultfd"] = sc(323, 0o2000000 | 1)                    # O_CLOEXEC | UFFD_USER_MODE_ONLY
R["kexec_load"] = sc(246, 0, 0, None, 0)
R["kexec_file_load"] = sc(320, -1, -1, 0, b"", 0)
R["init_module"] = sc(175, buf, 16, b"")
R["finit_module"] = sc(313, -1, b"", 0)
R["delete_module"] = sc(176, b"ext4", 0o4000)
R["io_uring_setup"] = sc(425, 1, buf)

# io_uring's operations run in the kernel, unseen by seccomp: IORING_OP_SOCKET makes the socket that
# socket() is refused. A ring of one entry, one operation, its result (or the step that failed).
import mmap
def uring_op(opcode, fd=0, off=0, addr=0, length=0, op_flags=0):
    p = ctypes.create_string_buffer(120)                     # struct io_uring_params
    ring, e = raw(425, 4, p)
    if ring < 0:
        return "setup " + errno.errorcode[e]
    sq_entries, cq_entries = struct.unpack_from("II", p.raw, 0)
    sq_off = struct.unpack_from("IIIIIII", p.raw, 40)
    cq_off = struct.unpack_from("IIIIII", p.raw, 80)
    rw = mmap.PROT_READ | mmap.PROT_WRITE
    sq = mmap.mmap(ring, sq_off[6] + sq_entries * 4, mmap.MAP_SHARED, rw, offset=0)
    cq = mmap.mmap(ring, cq_off[5] + cq_entries * 16, mmap.MAP_SHARED, rw, offset=0x8000000)
    sqes = mmap.mmap(ring, sq_entries * 64, mmap.MAP_SHARED, rw, offset=0x10000000)
    sqes[0:64] = struct.pack("<BBHiQQIIQ", opcode, 0, 0, fd, off, addr, length, op_flags, 7) + bytes(24)
    tail = struct.unpack_from("I", sq, sq_off[1])[0]
    struct.pack_into("I", sq, sq_off[6] + 4 * (tail & struct.unpack_from("I", sq, sq_off[2])[0]), 0)
    struct.pack_into("I", sq, sq_off[1], tail + 1)
    r, e = raw(426, ring, 1, 1, 1, None, 0)                  # IORING_ENTER_GETEVENTS
    if r < 0:
        return "enter " + errno.errorcode[e]
    head = struct.unpack_from("I", cq, cq_off[0])[0]
    res = struct.unpack_from("<QiI", cq, cq_off[5] + 16 * (head & struct.unpack_from("I", cq, cq_off[2])[0]))[1]
    return "ok" if res >= 0 else errno.errorcode[-res]
R["io_uring IORING_OP_SOCKET AF_VSOCK"] = uring_op(45, fd=40, off=socket.SOCK_STREAM)
R["io_uring IORING_OP_SOCKET AF_PACKET"] = uring_op(45, fd=17, off=socket.SOCK_RAW)
shadow = ctypes.create_string_buffer(b"/etc/shadow")
R["io_uring IORING_OP_OPENAT /etc/shadow"] = uring_op(18, fd=-100, addr=ctypes.addressof(shadow))
R["io_uring_enter"] = sc(426, 0, 1, 1, 1, None, 0)
R["io_uring_register"] = sc(427, 0, 0, None, 0)
R["personality(PER_LINUX32)"] = sc(135, 0x0008)
R["personality(ADDR_NO_RANDOMIZE)"] = sc(135, 0x0040000)
R["chroot"] = sc(161, b"/tmp")
R["pivot_root"] = sc(155, b"/tmp", b"/tmp")
R["iopl"] = sc(172, 3)
R["ioperm"] = sc(173, 0x60, 1, 1)
R["reboot"] = sc(169, 0xfee1dead, 672274793, 0x12345678, None)   # no such command
R["syslog"] = sc(103, 3, buf, 256)                           # SYSLOG_ACTION_READ_ALL
R["open_by_handle_at"] = sc(304, -100, buf, 0)
R["acct"] = sc(163, b"/tmp/acct")
os.makedirs("/tmp/mnt", exist_ok=True)
R["mount tmpfs"] = sc(165, b"none", b"/tmp/mnt", b"tmpfs", 0, None)
R["mount cgroup v1 release_agent"] = sc(165, b"cgroup", b"/tmp/mnt", b"cgroup", 0,
                                         b"rdma,release_agent=/tmp/release.sh")
R["mount cgroup v1 pids"] = sc(165, b"cgroup", b"/tmp/mnt", b"cgroup", 0, b"pids")
R["mount cgroup2"] = sc(165, b"cgroup2", b"/tmp/mnt", b"cgroup2", 0, None)
R["mount sysfs"] = sc(165, b"sysfs", b"/tmp/mnt", b"sysfs", 0, None)
R["mount proc"] = sc(165, b"proc", b"/tmp/mnt", b"proc", 0, None)
R["mount --bind /"] = sc(165, b"/", b"/tmp/mnt", None, 4096 | 16384, None)      # MS_BIND | MS_REC
R["remount / rw"] = sc(165, None, b"/", None, 32 | 4096, None)                  # MS_REMOUNT | MS_BIND
R["umount /sys/fs/cgroup"] = sc(166, b"/sys/fs/cgroup", 2)                      # MNT_DETACH
R["umount /run"] = sc(166, b"/run", 2)
R["fsopen cgroup"] = sc(430, b"cgroup", 0)
R["fsopen cgroup2"] = sc(430, b"cgroup2", 0)
R["open_tree"] = sc(428, -100, b"/", 1)                      # OPEN_TREE_CLONE
R["move_mount"] = sc(429, -100, b"/tmp", -100, b"/tmp/mnt", 0)
R["fspick"] = sc(433, -100, b"/", 0)
R["mount_setattr"] = sc(442, -100, b"/", 0, buf, 32)
R["unshare(NEWUSER)"] = sc(272, 0x10000000)
R["unshare(NEWNS)"] = sc(272, 0x00020000)
R["unshare(NEWUSER|NEWNS)"] = sc(272, 0x10020000)
R["unshare(NEWCGROUP)"] = sc(272, 0x02000000)
R["unshare(NEWPID)"] = sc(272, 0x20000000)
R["unshare(NEWNET)"] = sc(272, 0x40000000)
R["clone(NEWUSER)"] = in_child(lambda: clone(0x10000000 | 17))
R["clone(NEWUSER|NEWNS), high bits set"] = in_child(lambda: clone(0xffffffff00000000 | 0x10020000 | 17))
R["clone3"] = in_child(lambda: sc(435, bytes(88), 88))
R["unshare -Urm (command)"] = in_child(lambda: os.WEXITSTATUS(os.system(
    "unshare -Urm sh -c 'mount -t tmpfs none /tmp/mnt && touch /tmp/mnt/in' 2>/dev/null")))
R["setns"] = sc(308, os.open("/proc/self/ns/user", os.O_RDONLY), 0)
R["open /proc/1/ns/mnt"] = oserr(lambda: os.open("/proc/1/ns/mnt", os.O_RDONLY))
R["socket AF_INET SOCK_RAW"] = oserr(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, 1))  # ICMP
R["socket AF_PACKET"] = oserr(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
R["socket AF_VSOCK"] = oserr(lambda: socket.socket(40, socket.SOCK_STREAM, 0))
R["socket AF_ALG"] = oserr(lambda: socket.socket(38, socket.SOCK_SEQPACKET, 0))
for dev in ("/dev/mem", "/dev/kmem", "/dev/port", "/dev/sda", "/dev/kmsg"):
    R["open " + dev] = oserr(lambda: os.open(dev, os.O_RDONLY))
R["mknod /tmp/mem"] = oserr(lambda: os.mknod("/tmp/mem", 0o20600, os.makedev(1, 1)))
R["link /etc/shadow"] = oserr(lambda: os.link("/etc/shadow", "/tmp/shadow"))
R["link /etc/passwd"] = oserr(lambda: os.link("/etc/passwd", "/home/sandbox/passwd"))
R["mountinfo unchanged"] = open("/proc/self/mountinfo").read() == mountinfo
R["mnt empty"] = os.listdir("/tmp/mnt") == []

# the compat ABIs: a 32-bit syscall through int 0x80 (code and data below 4 GiB), an x32 one
import mmap
def i386(nr, b=0, c=0, d=0):
    m = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40, prot=7)   # MAP_32BIT, rwx
    code = (b"\xb8" + struct.pack("<I", nr) + b"\xbb" + struct.pack("<I", b) + b"\xb9" + struct.pack("<I", c)
            + b"\xba" + struct.pack("<I", d) + b"\xcd\x80\xc3")
    m[0:len(code)] = code
    r = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))()
    return "ok" if r >= 0 else errno.errorcode.get(-r, str(-r))
R["i386 unshare(NEWUSER)"] = in_child(lambda: i386(310, 0x10000000))
R["i386 ioctl(TIOCSTI)"] = in_child(lambda: i386(54, 0, 0x5412, 0))
R["i386 getpid"] = in_child(lambda: i386(20))
R["x32 ioctl(TIOCSTI)"] = in_child(lambda: sc(0x40000000 | 514, 0, 0x5412, 0))
R["x32 unshare(NEWUSER)"] = in_child(lambda: sc(0x40000000 | 272, 0x10000000))
done()
'''

SYSCALL_EXPECT = {
        "keyctl": "EPERM", "add_key": "EPERM", "request_key": "EPERM",
        "bpf": "EPERM", "perf_event_open": "EPERM", "userfaultfd": "EPERM",
        "kexec_load": "EPERM", "kexec_file_load": "EPERM",
        "init_module": "EPERM", "finit_module": "EPERM", "delete_module": "EPERM",
        # filtered as if the kernel had no io_uring (its operations would bypass seccomp)
        "io_uring_setup": "ENOSYS", "io_uring_enter": "ENOSYS", "io_uring_register": "ENOSYS",
        "io_uring IORING_OP_SOCKET AF_VSOCK": "setup ENOSYS",
        "io_uring IORING_OP_SOCKET AF_PACKET": "setup ENOSYS",
        "io_uring IORING_OP_OPENAT /etc/shadow": "setup ENOSYS",
        # LockPersonality= of sandboxd.service
        "personality(PER_LINUX32)": "EPERM", "personality(ADDR_NO_RANDOMIZE)": "EPERM",
        "chroot": "EPERM", "pivot_root": "EPERM",
        "iopl": "EPERM", "ioperm": "EPERM", "reboot": "EPERM", "syslog": "EPERM",
        "open_by_handle_at": "EPERM", "acct": "EPERM",
        "mount tmpfs": "EPERM", "mount cgroup v1 release_agent": "EPERM", "mount cgroup v1 pids": "EPERM",
        "mount cgroup2": "EPERM", "mount sysfs": "EPERM", "mount proc": "EPERM", "mount --bind /": "EPERM",
        "remount / rw": "EPERM", "umount /sys/fs/cgroup": "EPERM", "umount /run": "EPERM",
        "fsopen cgroup": "EPERM", "fsopen cgroup2": "EPERM", "open_tree": "EPERM", "move_mount": "EPERM",
        "fspick": "EPERM", "mount_setattr": "EPERM",
        "unshare(NEWUSER)": "EPERM", "unshare(NEWNS)": "EPERM", "unshare(NEWUSER|NEWNS)": "EPERM",
        "unshare(NEWCGROUP)": "EPERM", "unshare(NEWPID)": "EPERM", "unshare(NEWNET)": "EPERM",
        "clone(NEWUSER)": "EPERM", "clone(NEWUSER|NEWNS), high bits set": "EPERM",
        "clone3": "ENOSYS",
        "unshare -Urm (command)": "1",
        "setns": "EPERM",
        "open /proc/1/ns/mnt": "EACCES",  # sandbox-init is not dumpable
        "socket AF_INET SOCK_RAW": "EPERM",  # no CAP_NET_RAW
        # RestrictAddressFamilies= of sandboxd.service
        "socket AF_PACKET": "EAFNOSUPPORT", "socket AF_VSOCK": "EAFNOSUPPORT", "socket AF_ALG": "EAFNOSUPPORT",
        "open /dev/mem": "ENOENT", "open /dev/kmem": "ENOENT", "open /dev/port": "ENOENT",
        "open /dev/sda": "ENOENT", "open /dev/kmsg": "ENOENT",
        "mknod /tmp/mem": "EPERM",
        "link /etc/shadow": "EXDEV", "link /etc/passwd": "EXDEV",
        "mountinfo unchanged": True, "mnt empty": True,
        # SystemCallArchitectures=native of sandboxd.service kills the process on any other ABI
        "i386 unshare(NEWUSER)": "signal SIGSYS", "i386 ioctl(TIOCSTI)": "signal SIGSYS",
        "i386 getpid": "signal SIGSYS",
        "x32 ioctl(TIOCSTI)": "signal SIGSYS", "x32 unshare(NEWUSER)": "signal SIGSYS",
}


# Cases whose meaning depends on the kernel (the probe's findings, docs/testing.md "What the kernel
# decides"): case → (feature, {state in which the filter's answer cannot be told apart here: (what is
# asserted instead, why)}). Every other state checks SYSCALL_EXPECT as it stands. x32 calls and TIOCSTI
# need no entry: seccomp sees an x32 call before the kernel finds it has no x32 table, and the kernel's
# own refusal of TIOCSTI (EIO) differs from the filter's EPERM.
INT80 = ("ia32", {"unreachable": ({"signal SIGSEGV"}, "int 0x80 never reaches a syscall table on this kernel, so no "
                                  "filter sees it; asserted instead: the call dies of SIGSEGV, as the probe's did")})
USERNS = ("userns", {"refused": (None, "the kernel refuses unprivileged user namespaces itself, so the filter's "
                                 "answer is not told apart from the kernel's here (it is still asserted)")})
URING = ("io_uring", {"absent": (None, "the kernel has no io_uring: ENOSYS is its own answer as well as the "
                                 "filter's (it is still asserted)")})
KERNEL_DEPENDENT = {
        "i386 unshare(NEWUSER)": INT80, "i386 ioctl(TIOCSTI)": INT80, "i386 getpid": INT80,
        "unshare(NEWUSER)": USERNS, "unshare(NEWUSER|NEWNS)": USERNS, "clone(NEWUSER)": USERNS,
        "clone(NEWUSER|NEWNS), high bits set": USERNS, "unshare -Urm (command)": USERNS,
        "io_uring_setup": URING, "io_uring_enter": URING, "io_uring_register": URING,
        "io_uring IORING_OP_SOCKET AF_VSOCK": URING, "io_uring IORING_OP_SOCKET AF_PACKET": URING,
        "io_uring IORING_OP_OPENAT /etc/shadow": URING,
}


@pytest.fixture(scope="module")
def syscalls(world):
    return probe(world.mgr, world.a, SYSCALLS)


@pytest.mark.parametrize("case", list(SYSCALL_EXPECT))
def test_syscall(syscalls, case):
    got, want = syscalls[case], SYSCALL_EXPECT[case]
    feature, uncheckable = KERNEL_DEPENDENT.get(case, (None, {}))
    if feature:
        f = kernel.features()[feature]
        if f.state in uncheckable:
            instead, why = uncheckable[f.state]
            # a forced state may stand on a kernel where the filter's answer does come
            accepted = (instead or {want}) | ({want} if kernel.forced(f) else set())
            assert got in accepted, (got, kernel.describe(f))
            pytest.skip(f"{kernel.describe(f)}: {why}")
    assert got == want, got


def test_no_release_agent_ran(world, syscalls):
    """The cgroup v1 mount with release_agent failed, so nothing could arm the agent: no agent file
    anywhere a v1 hierarchy of the host has one, and nothing the agent would have written."""
    assert syscalls["mount cgroup v1 release_agent"] == "EPERM"
    for d in os.listdir("/sys/fs/cgroup"):
        agent = f"/sys/fs/cgroup/{d}/release_agent"
        if os.path.exists(agent):
            assert "release.sh" not in open(agent).read()
    assert not os.path.exists(sandbox_path(world.a, "/tmp/mnt/in"))
    assert os.listdir(sandbox_path(world.a, "/tmp/mnt")) == []


# --- terminals ---------------------------------------------------------------------------------------

# An Exec has no controlling terminal; it makes a pty its own controlling terminal (where TIOCSTI is allowed
# without privileges on this kernel, dev.tty.legacy_tiocsti = 1) and tries to push input into it.
EXEC_TTY = r'''
import fcntl, termios, tty
R["open /dev/tty"] = oserr(lambda: os.open("/dev/tty", os.O_RDWR))
m, s = os.openpty()
fcntl.ioctl(s, termios.TIOCSCTTY, 0)
tty.setraw(s)
R["open /dev/tty after TIOCSCTTY"] = oserr(lambda: os.close(os.open("/dev/tty", os.O_RDWR)))
c = ctypes.c_char(b"X")
sub = ctypes.c_char(b"\x03")                                # TIOCL_PASTESEL
for hi in (0, 1 << 32, 0xffffffff00000000):
    R["TIOCSTI|%x" % hi] = sc(16, s, 0x5412 | hi, ctypes.byref(c))
    R["TIOCLINUX|%x" % hi] = sc(16, s, 0x541C | hi, ctypes.byref(sub))
os.set_blocking(s, False)
R["slave input"] = oserr(lambda: os.read(s, 16))             # EAGAIN: nothing was injected
done()
'''


def test_exec_terminal_injection(world):
    got = probe(world.mgr, world.a, EXEC_TTY)
    assert got["open /dev/tty"] == "ENXIO"  # a new session without a controlling terminal
    assert got["open /dev/tty after TIOCSCTTY"] == "ok"
    for hi in (0, 1 << 32, HIGH):
        assert got[f"TIOCSTI|{hi:x}"] == "EPERM", got
        assert got[f"TIOCLINUX|{hi:x}"] == "EPERM", got
    assert got["slave input"] == "EAGAIN"


# Run in the takeover shell: injection into its own terminal (fd 0 and /dev/tty), with and without high bits.
SHELL_TTY = r'''
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
R = {}
fds = {"pty": 0, "devtty": os.open("/dev/tty", os.O_RDWR)}
for name, fd in fds.items():
    for hi in (0, 1 << 32, 0xffffffff00000000):
        for rname, req, text in (("TIOCSTI", 0x5412, b"touch /tmp/injected-sti\r"),
                                 ("TIOCLINUX", 0x541C, b"\x03")):
            res = set()
            for ch in text:
                r = libc.syscall(ctypes.c_long(16), ctypes.c_long(fd), ctypes.c_ulong(req | hi),
                                 ctypes.byref(ctypes.c_char(ch)))
                res.add("ok" if r >= 0 else errno.errorcode[ctypes.get_errno()])
            R["%s/%s/%x" % (rname, name, hi)] = sorted(res)
print("RESULT" + json.dumps(R, separators=(",", ":")))
'''

# From an Exec, at the live shell's terminal (which is not the Exec's controlling terminal).
EXEC_AT_SHELL = r'''
import glob
ptys = [p for p in glob.glob("/dev/pts/[0-9]*") if os.stat(p).st_uid == os.getuid()]
R["ptys"] = ptys
for p in ptys:
    fd = os.open(p, os.O_RDWR | os.O_NOCTTY)
    for hi in (0, 1 << 32, 0xffffffff00000000):
        res = set()
        for ch in b"touch /tmp/injected-exec\r":
            res.add(sc(16, fd, 0x5412 | hi, ctypes.byref(ctypes.c_char(ch))))
        R["TIOCSTI %s %x" % (p, hi)] = sorted(res)
done()
'''


def test_shell_terminal_injection(world):
    mgr, sid = world.mgr, world.a
    sh = Shell(mgr, sid)
    try:
        mgr.write(sid, "/tmp/tty.py", SHELL_TTY.encode())
        sh.send("python3 /tmp/tty.py\n")
        m = sh.read_until(rb"RESULT(\{[^\r\n]*\})")
        got = json.loads(m.group(1))
        assert len(got) == 12
        for case, res in got.items():
            assert res == ["EPERM"], (case, res)
        at_shell = probe(mgr, sid, EXEC_AT_SHELL)
        assert len(at_shell["ptys"]) == 1, at_shell
        for case, res in at_shell.items():
            if case != "ptys":
                assert res == ["EPERM"], (case, res)
        # Whatever had been injected would have been read by the shell before this line.
        sh.send("echo DONE-$((40+2))\n")
        sh.read_until(rb"[\r\n]DONE-42\r\n")
        code, out, _, _ = mgr.sh(sid, "ls /tmp")
        assert b"injected" not in out, out
        assert not [f for f in os.listdir(sandbox_path(sid, "/tmp")) if "injected" in f]
        sh.send("exit\n")
        sh.read_to_eof()
    finally:
        sh.close()


# --- cgroups -----------------------------------------------------------------------------------------

CGROUPS = r'''
own = os.getpid()
sleeper = int(sys.argv[1])
others = sys.argv[2:]   # the cgroup paths of a's other scope and of b's init scope
before = open("/proc/self/cgroup").read()
R["ls /sys/fs/cgroup"] = os.listdir("/sys/fs/cgroup")
R["create /sys/fs/cgroup/cgroup.procs"] = oserr(lambda: open("/sys/fs/cgroup/cgroup.procs", "w").write("1"))
R["mkdir /sys/fs/cgroup/x"] = oserr(lambda: os.mkdir("/sys/fs/cgroup/x"))
R["kernel knobs"] = {}
for knob, value in (("/sys/kernel/mm/transparent_hugepage/enabled", "never"), ("/sys/class/net/lo/mtu", "1280"),
                    ("/proc/sys/kernel/core_pattern", "|/tmp/x"), ("/proc/sys/vm/drop_caches", "3"),
                    ("/proc/sys/kernel/hostname", "escaped")):
    if os.path.exists(knob):
        R["kernel knobs"][knob] = oserr(lambda: open(knob, "w").write(value))
tried = {}
paths = set()
for line in before.splitlines():
    _, ctrl, path = line.split(":", 2)
    for d in ([ctrl.replace("name=", "")] if ctrl else ["unified", ""]):
        for p in [path] + others:
            paths.add(os.path.normpath("/sys/fs/cgroup/%s/%s/cgroup.procs" % (d, p)))
for p in sorted(paths):
    for pid in (own, sleeper):
        tried["%s <- %d" % (p, pid)] = oserr(lambda: open(p, "w").write(str(pid)))
R["cgroup.procs writes"] = sorted(set(tried.values()))
R["cgroup.procs tried"] = len(tried)
R["unchanged"] = open("/proc/self/cgroup").read() == before
done()
'''


def test_cgroup_writes(world):
    mgr, sid = world.mgr, world.a
    other = f"sandbox-{world.b}.slice"
    # the sleeper's pid as a sees it
    _, out, _, _ = mgr.exec(sid, ["pgrep", "-f", "sleep 4343.5"])
    sleeper_ns = int(out.split()[0])
    before = cgroup_procs(world.a_sleeper_unit)
    cg = [run("systemctl", "show", "-p", "ControlGroup", "--value", u).stdout.strip()
          for u in (world.a_sleeper_unit, f"sandbox-{world.b}-init.scope")]
    got = probe(mgr, sid, CGROUPS, sleeper_ns, *cg)
    assert got["ls /sys/fs/cgroup"] == []
    assert got["create /sys/fs/cgroup/cgroup.procs"] == "EACCES"
    assert got["mkdir /sys/fs/cgroup/x"] == "EACCES"
    assert len(got["kernel knobs"]) >= 3, got["kernel knobs"]
    for knob, res in got["kernel knobs"].items():
        assert res in ("EACCES", "EROFS"), (knob, res)
    assert got["cgroup.procs tried"] >= 20
    assert got["cgroup.procs writes"] == ["ENOENT"]
    assert got["unchanged"]
    # from outside: the sleeper is still in its scope, and nothing joined it or b's init scope
    assert cgroup_procs(world.a_sleeper_unit) == before
    assert world.a_sleeper in before
    assert [p for p in cgroup_procs(f"sandbox-{world.b}-init.scope")
            if not exe(p).endswith("/sandboxd-file-helper")] == [init_pid(world.b)]
    assert other in open(f"/proc/{world.b_sleeper}/cgroup").read()


# --- processes: /proc, environ, ptrace -----------------------------------------------------------------

PROCS = r'''
targets = [int(a) for a in sys.argv[1:]]
R["visible"] = {}
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            cmd = open("/proc/%s/cmdline" % p, "rb").read()
        except OSError as e:
            cmd = b""
        try:
            env = base64.b64encode(open("/proc/%s/environ" % p, "rb").read()).decode()
        except OSError as e:
            env = errno.errorcode[e.errno]
        R["visible"][p] = [cmd.decode(errors="replace"), env]
R["targets"] = {}
for t in targets:
    R["targets"][t] = {
        "exists": os.path.exists("/proc/%d" % t),
        "kill 0": oserr(lambda: os.kill(t, 0)),
        "PTRACE_ATTACH": sc(101, 16, t, 0, 0),
        "PTRACE_SEIZE": sc(101, 0x4206, t, 0, 0),
        "pidfd_open": sc(434, t, 0),
    }
local = ctypes.create_string_buffer(64)
liov = struct.pack("QQ", ctypes.addressof(local), 64)
riov = struct.pack("QQ", 0x400000, 64)
for t in [1] + targets:
    R["process_vm_readv %d" % t] = sc(310, t, liov, 1, riov, 1, 0)
    R["process_vm_writev %d" % t] = sc(311, t, liov, 1, riov, 1, 0)
R["PTRACE_ATTACH 1"] = sc(101, 16, 1, 0, 0)
R["PTRACE_SEIZE 1"] = sc(101, 0x4206, 1, 0, 0)
pidfd, _ = raw(434, 1, 0)
R["pidfd_getfd 1"] = sc(438, pidfd, 0, 0) if pidfd >= 0 else "pidfd_open failed"
R["open /proc/1/mem"] = oserr(lambda: os.open("/proc/1/mem", os.O_RDONLY))
R["open /proc/1/environ"] = oserr(lambda: os.open("/proc/1/environ", os.O_RDONLY))
R["ls /proc/1/fd"] = oserr(lambda: os.listdir("/proc/1/fd"))
R["readlink /proc/1/root"] = oserr(lambda: os.readlink("/proc/1/root"))
done()
'''


def test_processes_ptrace_and_environ(world):
    mgr, sid = world.mgr, world.a
    sd = sandboxd_pid()
    b_init = init_pid(world.b)
    a_init = init_pid(sid)
    targets = [sd, world.b_sleeper, b_init, 1, os.getpid()]
    got = probe(mgr, sid, "import base64\n" + PROCS, *targets)

    # Only a's processes: its init, its sleeper, the probe itself (and what earlier tests left running).
    cmds = [v[0] for v in got["visible"].values()]
    assert {c.split("\x00")[0] for c in cmds} <= {"python3", "sandbox-init", "sleep", "bash"}, cmds
    assert [c for c in cmds if c.startswith("sandbox-init")] == [f"sandbox-init\x00{sid}\x00"], cmds
    assert "sleep\x004343.5\x00" in cmds and "sleep\x004242.5\x00" not in cmds
    assert got["visible"]["1"][0].startswith("sandbox-init\x00" + sid)
    assert got["visible"]["1"][1] == "EACCES"  # the init is not dumpable
    secrets = [world.secret.encode(), f"INVOCATION_ID={status_env(sd, 'INVOCATION_ID')}".encode()]
    for cmd, env in got["visible"].values():
        if env != "EACCES":
            for s in secrets:
                assert s not in base64.b64decode(env)

    for t in targets:
        r = got["targets"][str(t)]
        if t == 1:
            assert r["exists"]  # a's own init: refused below
            continue
        if r["exists"]:  # the same number happens to name one of a's own processes
            assert got["visible"][str(t)][0].split("\x00")[0] in ("python3", "sleep"), (t, got["visible"])
            continue
        assert r == {"exists": False, "kill 0": "ESRCH", "PTRACE_ATTACH": "ESRCH", "PTRACE_SEIZE": "ESRCH",
                     "pidfd_open": "ESRCH"}, (t, r)
        assert got[f"process_vm_readv {t}"] == "ESRCH" and got[f"process_vm_writev {t}"] == "ESRCH"
    assert got["PTRACE_ATTACH 1"] == "EPERM" and got["PTRACE_SEIZE 1"] == "EPERM"
    assert got["process_vm_readv 1"] == "EPERM" and got["process_vm_writev 1"] == "EPERM"
    assert got["open /proc/1/mem"] == "EACCES"
    assert got["pidfd_getfd 1"] == "EPERM"  # no stealing the init's fds either
    assert got["open /proc/1/environ"] == "EACCES"
    assert got["ls /proc/1/fd"] == "EACCES"
    assert got["readlink /proc/1/root"] == "EACCES"
    # the targets are untouched: nobody traces them, none stopped
    for pid in (a_init, b_init, world.b_sleeper, sd):
        st = status(pid)
        assert st["TracerPid"] == "0" and st["State"][0] in "SR", (pid, st["State"])


def status_env(pid, key):
    for kv in open(f"/proc/{pid}/environ", "rb").read().split(b"\0"):
        if kv.startswith(key.encode() + b"="):
            return kv.split(b"=", 1)[1].decode()
    raise AssertionError(f"{key} not in the environment of {pid}")


# --- file descriptors ----------------------------------------------------------------------------------

FDS = r'''
import fcntl, resource
soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
fds = []
for fd in range(soft):
    try:
        fcntl.fcntl(fd, fcntl.F_GETFD)
        fds.append(fd)
    except OSError:
        pass
R["fds"] = fds
R["links"] = [os.readlink("/proc/self/fd/%d" % fd) for fd in fds]
R["NoNewPrivs"] = [l.split()[1] for l in open("/proc/self/status") if l.startswith("NoNewPrivs:")][0]
done()
'''


def test_no_fd_leaks_into_execs(world):
    mgr, sid = world.mgr, world.a
    runs = [probe(mgr, sid, FDS), probe(mgr, sid, FDS, stdin=b"input"), probe(mgr, sid, FDS, cwd="/tmp")]
    r, w = os.pipe()
    try:
        code, out, err, _ = mgr.exec(sid, ["python3", "-c", PRELUDE + FDS], stdout_fd=w)
    finally:
        os.close(w)
    streamed = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        streamed += chunk
    os.close(r)
    assert code == 0, err
    runs.append(json.loads(streamed.decode().splitlines()[-1]))
    for got in runs:
        assert got["fds"] == [0, 1, 2], got
        assert re.fullmatch(r"/dev/null|/memfd:.*", got["links"][0]), got
        assert all(link.startswith("pipe:") for link in got["links"][1:]), got
        assert got["NoNewPrivs"] == "1"
    # the init, seen from outside: nothing but /dev/null
    pid = init_pid(sid)
    fds = sorted(int(f) for f in os.listdir(f"/proc/{pid}/fd"))
    assert fds == [0, 1, 2]
    assert {os.readlink(f"/proc/{pid}/fd/{f}") for f in fds} == {"/dev/null"}


SHELL_FDS = r'''
import json, os
def fds(pid):
    out = {}
    for f in os.listdir("/proc/%d/fd" % pid):
        try:
            out[f] = os.readlink("/proc/%d/fd/%s" % (pid, f))
        except OSError:
            pass  # the directory listing's own fd, closed by now
    return out
me = fds(os.getpid())
nnp = [l.split()[1] for l in open("/proc/self/status") if l.startswith("NoNewPrivs:")][0]
print("RESULT" + json.dumps({"me": me, "shell": fds(os.getppid()), "nnp": nnp}, separators=(",", ":")))
'''


def test_no_fd_leaks_into_the_shell(world):
    mgr, sid = world.mgr, world.a
    sh = Shell(mgr, sid)
    try:
        mgr.write(sid, "/tmp/fds.py", SHELL_FDS.encode())
        sh.send("python3 /tmp/fds.py\n")
        got = json.loads(sh.read_until(rb"RESULT(\{[^\r\n]*\})").group(1))
        sh.send("exit\n")
        sh.read_to_eof()
    finally:
        sh.close()
    tty = got["me"]["0"]
    assert re.fullmatch(r"/dev/pts/\d+", tty)
    assert got["me"] == {"0": tty, "1": tty, "2": tty}, got["me"]
    # bash: stdio and its own copy of the terminal (255), all the shell's terminal
    assert set(got["shell"]) <= {"0", "1", "2", "255"} and set(got["shell"].values()) == {tty}, got["shell"]
    assert got["nnp"] == "1"


# --- setuid binaries ------------------------------------------------------------------------------------

SETUID = r'''
import subprocess, time
mountinfo = open("/proc/self/mountinfo").read()
R["NoNewPrivs"] = [l.split()[1] for l in open("/proc/self/status") if l.startswith("NoNewPrivs:")][0]
R["caps"] = {l.split()[0]: l.split()[1] for l in open("/proc/self/status") if l.startswith("Cap")}
R["unset no_new_privs"] = sc(157, 38, 0, 0, 0, 0)          # prctl(PR_SET_NO_NEW_PRIVS, 0)
open("/tmp/suid", "w").close()
R["chmod u+s"] = oserr(lambda: os.chmod("/tmp/suid", 0o4755))
R["chmod g+s"] = oserr(lambda: os.chmod("/tmp/suid", 0o2755))
for m in ("/", "/usr/bin", "/tmp", "/var/tmp", "/home/sandbox", "/dev/shm"):
    R["nosuid " + m] = bool(os.statvfs(m).f_flag & os.ST_NOSUID)
# su and passwd wait for a password on a pipe: their credentials while they run
for argv in (["su", "-c", "id"], ["passwd"], ["chfn"]):
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    os.set_blocking(p.stdout.fileno(), False)
    seen = b""
    for _ in range(500):
        try:
            seen += os.read(p.stdout.fileno(), 4096) or b""
        except BlockingIOError:
            pass
        if b"assword" in seen:
            break
        time.sleep(0.01)
    st = open("/proc/%d/status" % p.pid).read()
    R[argv[0]] = {"prompt": seen.decode(errors="replace"),
                  "ids": [l.split()[1:] for l in st.splitlines() if l.split()[0] in ("Uid:", "Gid:")],
                  "CapEff": [l.split()[1] for l in st.splitlines() if l.startswith("CapEff:")][0]}
    p.kill()
    p.wait()
r = subprocess.run(["mount", "-t", "tmpfs", "none", "/tmp"], capture_output=True)
R["mount (setuid)"] = [r.returncode, r.stderr.decode()]
R["mountinfo unchanged"] = open("/proc/self/mountinfo").read() == mountinfo
done()
'''


def test_setuid_binaries_stay_unprivileged(world):
    got = probe(world.mgr, world.a, SETUID)
    uid = str(world.a_uid)
    assert got["NoNewPrivs"] == "1"
    assert got["unset no_new_privs"] == "EINVAL"  # it cannot be taken back
    assert got["caps"] == {k: "0000000000000000" for k in ("CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:")}
    assert got["chmod u+s"] == "EPERM" and got["chmod g+s"] == "EPERM"  # RestrictSUIDSGID=
    for m in ("/", "/usr/bin", "/tmp", "/var/tmp", "/home/sandbox", "/dev/shm"):
        assert got["nosuid " + m], m
    for prog in ("su", "passwd", "chfn"):
        assert "assword" in got[prog]["prompt"], got[prog]
        assert got[prog]["ids"] == [[uid] * 4, [uid] * 4], got[prog]
        assert got[prog]["CapEff"] == "0000000000000000"
    assert got["mount (setuid)"][0] != 0 and "superuser" in got["mount (setuid)"][1], got["mount (setuid)"]
    assert got["mountinfo unchanged"]


# --- D-Bus ----------------------------------------------------------------------------------------------

BUS = r'''
def dbus_auth(connect):
    s = None
    try:
        s = connect()
        s.settimeout(2)
        s.sendall(b"\0AUTH EXTERNAL " + str(os.getuid()).encode().hex().encode() + b"\r\n")
        return s.recv(256).decode(errors="replace") or "closed"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    finally:
        if s:
            s.close()

def unix(addr):
    def c():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(addr)
        return s
    return c

R["paths"] = {}
for p in ("/run/dbus/system_bus_socket", "/var/run/dbus/system_bus_socket", "/run/systemd/private",
          "/run/systemd/notify", "/run/systemd/journal/stdout"):
    R["paths"][p] = dbus_auth(unix(p))
import subprocess
def busctl_at(address):
    r = subprocess.run(["busctl", "--address=" + address, "call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                        "org.freedesktop.DBus", "GetId"], capture_output=True, timeout=30)
    return [r.returncode, r.stdout.decode(), r.stderr.decode()]
R["abstract"] = {}
for line in open("/proc/net/unix").read().splitlines()[1:]:
    f = line.split()
    if len(f) >= 8 and f[7].startswith("@"):
        R["abstract"][f[7]] = [dbus_auth(unix("\0" + f[7][1:])),
                               busctl_at("unix:abstract=" + f[7][1:])]
test_bus = sys.argv[1]
R["test bus"] = [dbus_auth(unix("\0" + test_bus)), busctl_at("unix:abstract=" + test_bus)]
R["tcp"] = {}
for name, fam in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
    for line in open("/proc/net/" + name).read().splitlines()[1:]:
        f = line.split()
        if f[3] != "0A":
            continue
        addr, port = f[1].split(":")
        port = int(port, 16)
        host = "127.0.0.1" if fam == socket.AF_INET else "::1"
        R["tcp"]["%s:%d" % (host, port)] = dbus_auth(lambda: socket.create_connection((host, port), timeout=2))
r = subprocess.run("find / \\( -path /proc -o -path /sys \\) -prune -o -type s -print 2>/dev/null", shell=True,
                   capture_output=True)
R["sockets on disk"] = r.stdout.decode().split()
R["busctl"] = {}
for dest, path, iface, member, sig, args in (
        ("org.sandboxd.sandbox1", "/org/sandboxd/sandbox1", "org.sandboxd.sandbox1.Manager", "CreateSandbox",
         "a{sv}", ["0"]),
        ("org.sandboxd.audit1", "/org/sandboxd/audit1", "org.sandboxd.audit1.Log", "GetLog", "a{sv}tt",
         ["0", "1", "0"]),
        ("org.sandboxd.gateway1", "/org/sandboxd/gateway1", "org.sandboxd.gateway1.Keys", "ListKeys", "", []),
        ("org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
         "KillUnit", "ssi", ["sandboxd.service", "all", "9"])):
    for bus in ("--system", "--user"):
        r = subprocess.run(["busctl", bus, "call", dest, path, iface, member] + ([sig] if sig else []) + args,
                           capture_output=True)
        R["busctl"]["%s %s %s" % (bus, dest, member)] = [r.returncode, r.stdout.decode()]
done()
'''


@pytest.fixture(scope="module")
def abstract_bus():
    """A bus with the host's system-bus configuration, listening on an abstract socket of the host's network
    namespace: what a host with such a listener offers a sandbox with network "host"."""
    name = f"/sandboxd-escape-{os.urandom(4).hex()}"
    p = subprocess.Popen(["dbus-daemon", "--config-file=/usr/share/dbus-1/system.conf", "--nofork", "--nopidfile",
                          "--nosyslog", f"--address=unix:abstract={name}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: f"@{name}" in open("/proc/net/unix").read(), what="the abstract bus")
        # it works for the host's own users
        assert run("busctl", f"--address=unix:abstract={name}", "call", "org.freedesktop.DBus",
                   "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetId").stdout.startswith("s ")
        yield name
    finally:
        p.terminate()
        p.wait()


@pytest.mark.parametrize("net", ["none", "host"])
def test_no_bus_reachable(world, abstract_bus, net):
    sid = world.a if net == "none" else world.h
    before = world.mgr.list()
    sd = sandboxd_pid()
    got = probe(world.mgr, sid, BUS, abstract_bus)
    for p, res in got["paths"].items():
        assert res == "ENOENT", (p, res)  # /run is an empty tmpfs
    auth, (code, out, err) = got["test bus"]
    if net == "none":
        # the abstract socket namespace is the network namespace's: the host's bus is not there
        assert auth == "ECONNREFUSED" and f"@{abstract_bus}" not in got["abstract"], got["abstract"]
    else:
        # reachable with network "host" (see "Not protected yet"), and it authenticates the sandbox's uid,
        # but drops the connection at Hello: the uid has no account on the host
        assert auth.startswith("OK "), auth
        assert f"@{abstract_bus}" in got["abstract"]
    assert code != 0 and out == "", (code, out, err)
    if net == "host":
        assert "Transport endpoint is not connected" in err, err
    # No other abstract socket or TCP listener lets a D-Bus call through.
    for addr, (res, (code, out, err)) in got["abstract"].items():
        assert code != 0 and out == "", (addr, res, code, out, err)
    for addr, res in got["tcp"].items():
        assert not res.startswith("OK"), (addr, res)
    assert got["sockets on disk"] == []
    for call, (code, out) in got["busctl"].items():
        assert code != 0 and out == "", (call, code, out)
    assert world.mgr.list() == before
    assert sandboxd_pid() == sd


def test_bus_refuses_the_sandbox_uid(world):
    """The second wall: were the bus reachable, the sandbox's uid could not call any service. Observed here:
    dbus-daemon drops the connection of a uid it cannot resolve (sandbox uids have no host account) before
    Hello; a uid it could resolve would meet the bus policy and sandboxd's own check (AccessDenied)."""
    uid = str(world.a_uid)
    before = world.mgr.list()
    marker = f"/tmp/escape-{os.urandom(4).hex()}"
    calls = [
        ["org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetId"],
        ["org.sandboxd.sandbox1", "/org/sandboxd/sandbox1", "org.sandboxd.sandbox1.Manager", "ListSandboxes"],
        ["org.sandboxd.sandbox1", "/org/sandboxd/sandbox1", "org.sandboxd.sandbox1.Manager", "CreateSandbox",
         "a{sv}", "0"],
        ["org.sandboxd.sandbox1", "/org/sandboxd/sandbox1", "org.sandboxd.sandbox1.Manager", "Exec", "sasa{sv}",
         world.b, "2", "touch", marker, "0"],
        ["org.sandboxd.audit1", "/org/sandboxd/audit1", "org.sandboxd.audit1.Log", "GetLog", "a{sv}tt",
         "0", "1", "0"],
        ["org.sandboxd.audit1", "/org/sandboxd/audit1", "org.sandboxd.audit1.Log", "Record", "a{sv}", "0"],
        ["org.sandboxd.gateway1", "/org/sandboxd/gateway1", "org.sandboxd.gateway1.Keys", "ListKeys"],
        ["org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
         "StartTransientUnit", "ssa(sv)a(sa(sv))", "escape.service", "fail", "1", "ExecStart", "a(sasb)", "1",
         "/bin/touch", "2", "/bin/touch", marker, "false", "0"],
        ["org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
         "KillUnit", "ssi", "sandboxd.service", "all", "9"],
    ]
    sd = sandboxd_pid()
    for c in calls:
        r = run("setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "busctl", "call", *c,
                check=False)
        assert r.returncode != 0, c
        assert re.search(r"Transport endpoint is not connected|Access denied|AccessDenied",
                         r.stderr), (c, r.stderr)
        assert r.stdout == ""
    assert world.mgr.list() == before
    assert not os.path.exists(marker)
    assert not os.path.exists(sandbox_path(world.b, f"/tmp/{os.path.basename(marker)}"))
    assert sandboxd_pid() == sd


# --- the file tools against symlink races -----------------------------------------------------------------

FLIPPER = r'''
import os, sys
os.chdir("/home/sandbox")
open("flip.started", "w").close()
n = 0
while not os.path.exists("flip.stop"):
    # link points at a file of the sandbox or, in turn, at each of the targets
    for t in sys.argv[1:]:
        os.symlink(t, "tmp-link")
        os.replace("tmp-link", "link")
    # dir is a directory of the sandbox, or a symlink to /etc or to another sandbox's home
    for alt in ("dir-etc", "dir-b"):
        os.rename("dir", "dir-real")
        os.rename(alt, "dir")
        os.rename("dir", alt)
        os.rename("dir-real", "dir")
    n += 1
open("flip.tmp", "w").write(str(n))
os.rename("flip.tmp", "flip.done")
'''


def test_file_tools_symlink_race(world):
    mgr, sid = world.mgr, world.a
    t = Tools(mgr, sid)
    b_canary = f"{WORKSPACES}/{world.b}/home/canary.txt"  # where it would be without a disk image
    shadow_before = open("/etc/shadow", "rb").read()
    passwd_before = open("/etc/passwd", "rb").read()
    shadow_line = shadow_before.splitlines()[0]
    code, _, err, _ = mgr.sh(sid, "cd && echo mine > mine.txt && mkdir dir && echo mine > dir/passwd && "
                                  f"ln -s /etc dir-etc && ln -s {WORKSPACES}/{world.b}/home dir-b")
    assert code == 0, err
    mgr.write(sid, "flip.py", FLIPPER.encode())
    code, _, err, _ = mgr.exec(sid, ["sh", "-c", "nohup python3 flip.py /home/sandbox/mine.txt /etc/shadow "
                                     f"{b_canary} /var/lib/sandboxd/sandboxd.db /proc/1/environ "
                                     "/proc/self/environ >/dev/null 2>flip.err &"], timeout_seconds=600)
    assert code == 0, err

    def exists(p):
        try:
            return mgr.read(sid, p)[0] or b"-"
        except dbus.DBusException:
            return None

    wait_for(lambda: exists("flip.started"), what="the flipper to start")
    secret_bytes = [shadow_line, world.canary, world.secret.encode(), b"INVOCATION_ID"]
    errors, ok = set(), 0
    calls = [lambda: mgr.read(sid, "link"),
             lambda: mgr.write(sid, "link", b"mine\n"),
             lambda: mgr.read(sid, "dir/passwd"),
             lambda: mgr.write(sid, "dir/passwd", b"mine\n"),
             lambda: t.view("link"),
             lambda: t.view("dir/passwd"),
             lambda: t.create("link", b"mine\n", overwrite=True),
             lambda: t.create("dir/passwd", b"mine\n", overwrite=True),
             lambda: t.replace("link", b"mine\n", b"mine\n"),
             lambda: t.replace("dir/passwd", b"mine\n", b"mine\n")]
    for _ in range(25):
        for call in calls:
            try:
                r = call()
            except dbus.DBusException as e:
                errors.add(e.get_dbus_name())
                continue
            ok += 1
            blob = repr(r).encode()
            for s in secret_bytes:
                assert s not in blob, (s, r)
    mgr.sh(sid, "touch ~/flip.stop")
    n = wait_for(lambda: exists("flip.done"), timeout=120, what="the flipper to finish")
    assert int(n) >= 100, mgr.read(sid, "flip.err")
    assert ok > 0  # the calls did work on the sandbox's own files some of the time
    print(f"symlink race: {len(calls) * 25} calls, {ok} succeeded, {int(n)} flip rounds, {sorted(errors)}")
    # (InvalidArgs: the file tools refuse the magic link /proc/self/environ)
    assert errors <= {"org.sandboxd.sandbox1.NoSuchFile", "org.sandboxd.sandbox1.PermissionDenied",
                      "org.sandboxd.sandbox1.NoMatch", "org.freedesktop.DBus.Error.InvalidArgs"}, errors
    assert open("/etc/shadow", "rb").read() == shadow_before
    assert open("/etc/passwd", "rb").read() == passwd_before
    assert open(sandbox_path(world.b, "/home/sandbox/canary.txt"), "rb").read() == world.canary + b"\n"
    # ReadFile of the helper's own /proc/self: the helper is not in the sandbox's PID namespace, so its
    # /proc/self does not resolve (ENOENT) and nothing of sandboxd's memory map or environment comes out; the
    # file tools refuse the link outright (ELOOP: InvalidArgs)
    P, I = "org.sandboxd.sandbox1.", "org.freedesktop.DBus.Error.InvalidArgs"
    for p, want_read, want_view in (("/proc/self/environ", P + "NoSuchFile", I),
                                    ("/proc/self/maps", P + "NoSuchFile", I),
                                    ("/proc/thread-self/environ", P + "NoSuchFile", I),
                                    ("/proc/1/environ", P + "PermissionDenied", P + "PermissionDenied"),
                                    ("/proc/1/mem", P + "PermissionDenied", P + "PermissionDenied")):
        for call, want in ((lambda: mgr.read(sid, p), want_read), (lambda: t.view(p), want_view)):
            with pytest.raises(dbus.DBusException) as e:
                call()
            assert e.value.get_dbus_name() == want, (p, e.value.get_dbus_name())


# --- signals ----------------------------------------------------------------------------------------------

def test_kill_everything(world, sandbox):
    """kill(-1, SIGKILL) reaches only what the sandbox sees: not sandboxd, not its file helper (which runs
    under the sandbox's uid, in its cgroups, outside its PID namespace), not the neighbour, and not the
    sandbox's own init."""
    mgr = world.mgr
    c, path = sandbox()
    uid = int(mgr.props(path)["Uid"])
    mgr.write(c, "a.txt", b"x")  # leaves a file helper of c's running
    server = wait_for(lambda: [p for p in cgroup_procs(f"sandbox-{c}-init.scope")
                               if exe(p).endswith("/sandboxd-file-helper")], what="c's file helper")
    mgr.sh(c, "nohup sleep 4444.5 >/dev/null 2>&1 &", timeout_seconds=600)
    sleeper = wait_for(lambda: host_pid_of(uid, b"sleep\x004444.5"), what="c's sleeper")
    sd, c_init = sandboxd_pid(), init_pid(c)
    # (kill(-1) spares the caller and, inside a PID namespace, its init)
    code, out, err, info = mgr.exec(c, ["python3", "-c", "import os, signal; os.kill(-1, signal.SIGKILL)"])
    assert code == 0, err
    wait_for(lambda: gone(sleeper), what="c's own sleeper to die")
    assert sandboxd_pid() == sd and status(sd)["State"][0] in "SR"
    assert status(server[0])["State"][0] in "SR"
    assert init_pid(c) == c_init
    assert status(world.b_sleeper)["State"][0] == "S"
    assert mgr.read(c, "a.txt")[0] == b"x"  # and the sandbox still works
    assert mgr.exec(c, ["true"])[0] == 0


# --- the neighbour's IPC ------------------------------------------------------------------------------------

PLANT = r'''
import mmap, time
sysv = ctypes.CDLL(None, use_errno=True)
R["shmget"] = sysv.shmget(0x5EED5EED, 4096, 0o1666)             # IPC_CREAT | 0666
R["msgget"] = sysv.msgget(0x5EED5EED, 0o1666)
open("/dev/shm/escape-marker", "w").write("a")
open("/tmp/escape-marker", "w").write("a")
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0escape-marker")
s.listen()
open("/tmp/escape-planter.pid", "w").write(str(os.getpid()))
done()
sys.stdout.flush()
os.close(1)
time.sleep(600)                                                   # keeps the socket for the neighbour to try
'''

LOOK = r'''
sysv = ctypes.CDLL(None, use_errno=True)
R["shmget"] = sysv.shmget(0x5EED5EED, 0, 0) >= 0 or errno.errorcode[ctypes.get_errno()]
R["msgget"] = sysv.msgget(0x5EED5EED, 0) >= 0 or errno.errorcode[ctypes.get_errno()]
R["/dev/shm"] = os.path.exists("/dev/shm/escape-marker")
R["/tmp"] = os.path.exists("/tmp/escape-marker")
R["sysvipc"] = [open("/proc/sysvipc/" + f).read().count("\n") - 1 for f in ("shm", "msg")]
def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\0escape-marker")
R["abstract"] = oserr(connect)
done()
'''


def test_neighbour_ipc_is_separate(world):
    """SysV IPC, POSIX shared memory, /tmp and abstract sockets of one sandbox are not the neighbour's."""
    mgr = world.mgr
    try:
        # (busctl, so that the Exec runs while this test goes on; "--" keeps "-c" from busctl)
        planter = subprocess.Popen(["busctl", "call", "--timeout=700", "--", "org.sandboxd.sandbox1",
                                    "/org/sandboxd/sandbox1", "org.sandboxd.sandbox1.Manager", "Exec", "sasa{sv}",
                                    world.a, "3", "python3", "-c", PRELUDE + PLANT, "1", "timeout_seconds", "t", "600"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: "@escape-marker" in probe(mgr, world.a, 'R["unix"] = open("/proc/net/unix").read()\n'
                                                   'done()')["unix"], what="a's planted objects")
        mine = probe(mgr, world.a, LOOK)
        theirs = probe(mgr, world.b, LOOK)
    finally:
        mgr.sh(world.a, "kill $(cat /tmp/escape-planter.pid); rm -f /tmp/escape-* /dev/shm/escape-*")
        planter.wait(timeout=120)
    # seen from a itself, everything is there: the look finds what it looks for
    assert mine == {"shmget": True, "msgget": True, "/dev/shm": True, "/tmp": True, "sysvipc": [1, 1],
                    "abstract": "ok"}, mine
    assert theirs == {"shmget": "ENOENT", "msgget": "ENOENT", "/dev/shm": False, "/tmp": False, "sysvipc": [0, 0],
                      "abstract": "ECONNREFUSED"}, theirs
