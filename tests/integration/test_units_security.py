# SPDX-License-Identifier: LGPL-2.1-or-later
# The service units' hardening, as systemd loaded it and as the running daemons carry it: each unit's
# `systemd-analyze security` exposure no worse than docs/security.md records, the settings in effect,
# and the daemons' capabilities, no_new_privs, seccomp, namespaces and read-only root.
import ctypes
import os
import platform
import re

import pytest

from conftest import run, systemctl_show, wait_for

# docs/security.md#service-units: the exposure each unit had when it was last hardened. Loosening a
# unit makes this fail; after tightening one, lower its figure here and in the docs.
MAX_EXPOSURE = {
        "sandboxd.service": 5.2,
        "sandbox-auditd.service": 0.2,
        "sandbox-gatewayd.service": 0.2,
}

# Exactly what sandboxd.service keeps (units/sandboxd.service.in says what each is for).
SANDBOXD_CAPS = {"cap_sys_admin", "cap_sys_ptrace", "cap_sys_chroot", "cap_mknod", "cap_net_admin",
                 "cap_setuid", "cap_setgid", "cap_setpcap", "cap_chown", "cap_fowner",
                 "cap_dac_override", "cap_kill", "cap_sys_resource",
                 # egress sandboxes' resolvers on port 53 (docs/security.md)
                 "cap_net_bind_service"}

COMMON = {
        "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
        "PrivateMounts": "yes", "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes",
        "ProtectKernelLogs": "yes", "ProtectClock": "yes", "ProtectProc": "invisible", "ProcSubset": "pid",
        "DevicePolicy": "closed", "LockPersonality": "yes", "RestrictRealtime": "yes",
        "RestrictSUIDSGID": "yes", "SystemCallArchitectures": "native", "AmbientCapabilities": "",
}
UNPRIVILEGED = dict(COMMON, **{
        "CapabilityBoundingSet": "", "PrivateTmp": "yes", "PrivateDevices": "yes", "PrivateNetwork": "yes",
        "PrivateUsers": "yes", "PrivateIPC": "yes", "ProtectControlGroups": "yes", "ProtectHostname": "yes",
        "RestrictNamespaces": "yes", "MemoryDenyWriteExecute": "yes", "RestrictAddressFamilies": "AF_UNIX",
        "IPAddressDeny": "0.0.0.0/0 ::/0", "UMask": "0077",
})
EXPECTED = {
        "sandbox-auditd.service": UNPRIVILEGED,
        "sandbox-gatewayd.service": UNPRIVILEGED,
        # What it must not have is checked too: each would break its job or the sandboxes (the docs say
        # why), so adding one has to come with a change to the docs and to this test.
        "sandboxd.service": dict(COMMON, **{
                "PrivateIPC": "yes", "RestrictAddressFamilies": "AF_INET AF_INET6 AF_NETLINK AF_UNIX",
                "MemoryDenyWriteExecute": "no", "RestrictNamespaces": "no", "ProtectControlGroups": "no",
                "PrivateTmp": "no", "PrivateDevices": "no", "ProtectHostname": "no", "PrivateNetwork": "no",
                "PrivateUsers": "no",
        }),
}

CAP_BITS = {"cap_chown": 0, "cap_dac_override": 1, "cap_fowner": 3, "cap_kill": 5, "cap_setgid": 6,
            "cap_setuid": 7, "cap_setpcap": 8, "cap_net_bind_service": 10, "cap_net_admin": 12, "cap_sys_chroot": 18,
            "cap_sys_ptrace": 19, "cap_sys_admin": 21, "cap_sys_resource": 24, "cap_mknod": 27}


@pytest.fixture(scope="module", autouse=True)
def fleet():
    # The gateway is socket-activated: start it outright, so that there is a process to look at.
    run("systemctl", "start", "sandboxd.service", "sandbox-auditd.service", "sandbox-gatewayd.socket",
        "sandbox-gatewayd.service")
    yield


def main_pid(unit):
    return wait_for(lambda: int(systemctl_show(unit, "MainPID")["MainPID"]), what=f"{unit}'s main pid")


def proc_status(pid):
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def root_mount_options(pid):
    with open(f"/proc/{pid}/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == "/":
                last = fields  # the topmost mount on / is the one the process sees
    return set(last[5].split(","))


@pytest.mark.parametrize("unit", sorted(MAX_EXPOSURE))
def test_exposure_at_most_recorded(unit):
    out = run("systemd-analyze", "security", "--no-pager", unit).stdout
    m = re.search(r"Overall exposure level for " + re.escape(unit) + r": (\d+\.\d)", out)
    assert m, out[-500:]
    assert float(m[1]) <= MAX_EXPOSURE[unit], f"{unit} is now exposed {m[1]}:\n" + \
        "\n".join(line for line in out.splitlines() if line.startswith("✗"))
    # systemd's own check agrees (its threshold is the exposure times ten).
    assert run("systemd-analyze", "security", "--no-pager", f"--threshold={round(MAX_EXPOSURE[unit] * 10)}",
               unit, check=False).returncode == 0


@pytest.mark.parametrize("unit", sorted(EXPECTED))
def test_settings_in_effect(unit):
    want = EXPECTED[unit]
    got = systemctl_show(unit, *want, "CapabilityBoundingSet", "SystemCallFilter")
    # systemd prints an address list in no fixed order ("::/0 0.0.0.0/0" or the other way round)
    unordered = {"IPAddressDeny", "IPAddressAllow"}
    norm = {k: (sorted(v.split()) if k in unordered and v is not None else v) for k, v in got.items()}
    assert {k: norm.get(k) for k in want} == {k: (sorted(v.split()) if k in unordered else v)
                                             for k, v in want.items()}
    if unit == "sandboxd.service":
        assert set(got["CapabilityBoundingSet"].split()) == SANDBOXD_CAPS
        # A deny list, and one without anything the sandboxes' programs may use (ptrace, setrlimit, …).
        assert got["SystemCallFilter"].startswith("~")
        denied = set(got["SystemCallFilter"][1:].split())
        assert {"modify_ldt", "kexec_load", "bpf", "clock_settime", "swapon", "reboot"} <= denied
        assert not denied & {"ptrace", "setrlimit", "prlimit64", "sched_setaffinity", "mount", "setns",
                             "clone3", "openat2", "sethostname", "mknod"}
    else:
        assert not got["SystemCallFilter"].startswith("~")  # an allow list
        allowed = set(got["SystemCallFilter"].split())
        assert "read" in allowed
        assert not allowed & {"mount", "setuid", "ptrace", "bpf", "setrlimit", "reboot"}


@pytest.mark.parametrize("unit", ["sandbox-auditd.service", "sandbox-gatewayd.service"])
def test_unprivileged_daemons_run_confined(unit):
    pid = main_pid(unit)
    st = proc_status(pid)
    assert st["Uid"].split()[0] != "0"
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(st[cap], 16) == 0, (cap, st[cap])
    assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2"
    for ns in ("net", "user", "mnt", "ipc", "uts"):
        assert os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/1/ns/{ns}"), ns
    assert "ro" in root_mount_options(pid)
    # Its network namespace holds nothing but a loopback interface.
    links = run("nsenter", f"--target={pid}", "--net", "ip", "-o", "link").stdout.splitlines()
    assert [line.split(":")[1].strip() for line in links] == ["lo"]


def test_sandboxd_runs_confined():
    pid = main_pid("sandboxd.service")
    st = proc_status(pid)
    # Of those, what the machine has: root lacks CAP_SYS_RESOURCE on the machines the suite runs on.
    mask = sum(1 << CAP_BITS[c] for c in SANDBOXD_CAPS) & int(proc_status(1)["CapBnd"], 16)
    assert int(st["CapBnd"], 16) == mask and int(st["CapEff"], 16) == mask
    assert int(st["CapAmb"], 16) == 0
    assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2"
    assert os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/1/ns/mnt")
    assert "ro" in root_mount_options(pid)
    devices = "/sys/fs/cgroup/devices/system.slice/sandboxd.service/devices.list"
    if os.path.exists(devices):  # hybrid and v1 hosts; on cgroup2 systemd attaches a BPF program
        with open(devices) as f:
            allowed = f.read().split("\n")
        assert "a *:* rwm" not in allowed and "c 1:3 rwm" in allowed


def test_sandboxes_inherit_sandboxd_filters(mgr, sandbox):
    """The unit's filters stay on every sandboxed process: modify_ldt is refused by sandboxd.service's
    SystemCallFilter= alone (not by the sandbox's own filter), and outside the service it works."""
    sid, _ = sandbox()
    if platform.machine() == "x86_64":  # modify_ldt is x86's alone; 154 on x86-64
        probe = ("import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
                 "b = ctypes.create_string_buffer(16); "
                 "print(libc.syscall(154, 0, b, 16), ctypes.get_errno())")  # modify_ldt(read)
        code, out, err, _ = mgr.exec(sid, ["python3", "-c", probe])
        assert code == 0, err
        assert out.split() == [b"-1", b"1"]  # EPERM
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.syscall(154, 0, ctypes.create_string_buffer(16), 16) >= 0
    code, out, _, _ = mgr.exec(sid, ["grep", "Seccomp_filters", "/proc/self/status"])
    assert code == 0
    own = int(proc_status(main_pid("sandboxd.service"))["Seccomp_filters"])
    assert int(out.split()[1]) > own
