# SPDX-License-Identifier: LGPL-2.1-or-later
# Issue 23's networks in CreateSandbox: "host" only where sandboxd.conf allows it, "egress" with its policy,
# and bad input refused with nothing made.
import json
import os
import time
import subprocess

import dbus
import pytest

from conftest import HOST_NETWORK_DROPIN, LONG, allow_host_network, audit_log, dbus_error, run, wait_for
from test_sandboxd import wait_sandboxd_active

INVALID = "org.freedesktop.DBus.Error.InvalidArgs"


def restart_sandboxd():
    run("systemctl", "reset-failed", "sandboxd.service", check=False)
    run("systemctl", "restart", "sandboxd.service")
    wait_sandboxd_active()


def create_raw(mgr, opts):
    return mgr.iface.CreateSandbox(dbus.Dictionary(opts, signature="sv"), timeout=120)


@pytest.fixture
def shipped_default():
    """sandboxd as shipped: without the suite's AllowHostNetwork=yes drop-in; put back afterwards."""
    os.unlink(HOST_NETWORK_DROPIN)
    try:
        restart_sandboxd()
        yield
    finally:
        allow_host_network()
        restart_sandboxd()


def test_host_network_refused_by_default(mgr, shipped_default):
    before = mgr.list()
    with pytest.raises(dbus.DBusException) as e:
        mgr.create(type="small", network="host")
    name, msg = dbus_error(e)
    assert name == INVALID
    assert "AllowHostNetwork=yes" in msg, msg
    assert mgr.list() == before, "nothing made"
    # the other networks are still there
    sid, _ = mgr.create(type="small", network="none")
    mgr.delete(sid)


def test_host_network_allowed_by_the_setting(mgr, sandbox):
    sid, path = sandbox(network="host")
    assert mgr.props(path)["Network"] == "host"


def test_bad_network_input(mgr):
    before = mgr.list()
    cases = [
        ({"network": "bridge"}, "'network' must be \"none\", \"egress\" or \"host\""),
        ({"egress_policy": dbus.Dictionary({"allow": dbus.Array(["pypi.org"], signature="s")}, signature="sv")},
         "'egress_policy' needs network \"egress\", not \"none\""),
        ({"network": "egress",
          "egress_policy": dbus.Dictionary({"allow": dbus.Array(["10.0.0.1/8"], signature="s")}, signature="sv")},
         "host bits"),
        ({"network": "egress",
          "egress_policy": dbus.Dictionary({"allow": dbus.Array(["pypi.org:443"], signature="s")}, signature="sv")},
         "ports, protocols and paths are not supported"),
        ({"network": "egress", "egress_policy": dbus.Dictionary({"ports": dbus.Array([], signature="s")},
                                                                signature="sv")},
         "Unknown egress policy key 'ports'"),
        ({"network": "egress", "egress_policy": dbus.String("deny")}, "must be of type 'a{sv}'"),
    ]
    for opts, want in cases:
        opts = dict(opts, type="small")
        with pytest.raises(dbus.DBusException) as e:
            create_raw(mgr, opts)
        name, msg = dbus_error(e)
        assert name == INVALID, (opts, name, msg)
        assert want in msg, (opts, msg)
    assert mgr.list() == before, "nothing made"


# --- network "egress": a fake internet the test makes itself -------------------------------------------
#
# The harness's systemd runs in a network namespace of its own. The test adds an "upstream" namespace
# joined to it by a veth pair (192.0.2.1 here, 192.0.2.2 there, TEST-NET-1) and makes it the default route
# (the uplink). Upstream has 203.0.113.10 and 198.51.100.10 (TEST-NET-3 and -2), 169.254.169.254 (the
# metadata endpoint) and 192.168.77.10 (a private address), and serves HTTP on port 8080 on all of them.
# Nothing leaves the machine.

UPSTREAM = "sbxtest-up"
UP_ADDRS = ["203.0.113.10", "198.51.100.10", "169.254.169.254", "192.168.77.10"]
HTTP_PORT = 8080
HOST_PORT = 8081  # a listener of the host itself (the harness namespace)


def probe_veth():
    r = run("ip", "link", "add", "name", "sbxprobe0", "type", "veth", "peer", "name", "sbxprobe1", check=False)
    if r.returncode != 0:
        return f"cannot make a veth pair here: {r.stderr.strip()}"
    run("ip", "link", "del", "sbxprobe0", check=False)
    r = run("nft", "add", "table", "inet", "sbxprobe", check=False)
    if r.returncode != 0:
        return f"nftables refused a table here: {r.stderr.strip()}"
    run("nft", "delete", "table", "inet", "sbxprobe", check=False)
    return None


def ns(*cmd, check=True):
    return run("ip", "netns", "exec", UPSTREAM, *cmd, check=check)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    why = probe_veth()
    if why:
        pytest.skip(why)
    docroot = tmp_path_factory.mktemp("www")
    (docroot / "index.html").write_text("upstream says hello\n")
    run("ip", "netns", "add", UPSTREAM)
    procs = []
    try:
        run("ip", "link", "add", "name", "sbxtest-up0", "type", "veth", "peer", "name", "up1", "netns", UPSTREAM)
        run("ip", "addr", "add", "192.0.2.1/24", "dev", "sbxtest-up0")
        run("ip", "link", "set", "sbxtest-up0", "up")
        ns("ip", "link", "set", "lo", "up")
        ns("ip", "addr", "add", "192.0.2.2/24", "dev", "up1")
        for a in UP_ADDRS:
            ns("ip", "addr", "add", a + "/32", "dev", "lo")
        ns("ip", "link", "set", "up1", "up")
        run("ip", "route", "add", "default", "via", "192.0.2.2", "dev", "sbxtest-up0")
        procs.append(subprocess.Popen(["ip", "netns", "exec", UPSTREAM, "/usr/bin/python3", "-m", "http.server",
                                       "--bind", "0.0.0.0", "--directory", str(docroot), str(HTTP_PORT)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        # a listener of the host itself, on every address it has (the sandboxes' host sides included)
        procs.append(subprocess.Popen(["/usr/bin/python3", "-m", "http.server", "--bind", "0.0.0.0",
                                       "--directory", str(docroot), str(HOST_PORT)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for(lambda: run("curl", "-s", "-m", "2", f"http://203.0.113.10:{HTTP_PORT}/",
                             check=False).returncode == 0, what="the upstream's HTTP server")
        wait_for(lambda: run("curl", "-s", "-m", "2", f"http://127.0.0.1:{HOST_PORT}/", check=False).returncode == 0,
                 what="the host's HTTP server")
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()
        run("ip", "route", "del", "default", check=False)
        run("ip", "link", "del", "sbxtest-up0", check=False)
        run("ip", "netns", "del", UPSTREAM, check=False)


def policy(default="deny", allow=(), deny=()):
    return dbus.Dictionary({"default": dbus.String(default), "allow": dbus.Array(list(allow), signature="s"),
                            "deny": dbus.Array(list(deny), signature="s")}, signature="sv")


@pytest.fixture
def egress(mgr):
    """Makes egress sandboxes (policy as keyword arguments), deleted afterwards: (id, path)."""
    made = []

    def make(ttl_seconds=None, **pol):
        opts = {"type": "small", "network": "egress"}
        if pol:
            opts["egress_policy"] = policy(**pol)
        if ttl_seconds:
            opts["ttl_seconds"] = dbus.UInt64(ttl_seconds)
        sid, path = create_raw(mgr, opts)
        made.append(str(sid))
        return str(sid), str(path)

    yield make
    for sid in made:
        try:
            mgr.delete(sid)
        except dbus.DBusException as e:
            assert e.get_dbus_name() == "org.sandboxd.sandbox1.NoSuchSandbox"


def fetch(mgr, sid, url, timeout=3):
    """curl inside the sandbox: (exit code, body)."""
    code, out, err, _ = mgr.exec(sid, ["curl", "-s", "-S", "-m", str(timeout), url])
    return code, out.decode(errors="replace")


def reachable(mgr, sid, addr, port=HTTP_PORT):
    code, body = fetch(mgr, sid, f"http://{addr}:{port}/")
    return code == 0 and "upstream says hello" in body


def counters(mgr, path):
    c = mgr.props(path)["EgressCounters"]
    return {"allowed_packets": int(c[0]), "allowed_bytes": int(c[1]), "denied_packets": int(c[2]),
            "denied_bytes": int(c[3])}


def nft_table():
    r = run("nft", "-j", "list", "table", "inet", "sandboxd", check=False)
    return r.stdout if r.returncode == 0 else ""


def links():
    return run("ip", "-o", "link", "show").stdout


def ifname(sid):
    return "sbx-" + sid[3:]


def test_egress_properties_and_allowed_cidr(mgr, upstream, egress):
    sid, path = egress(allow=["203.0.113.0/24"])
    p = mgr.props(path)
    assert p["Network"] == "egress"
    pol = {str(k): v for k, v in p["EgressPolicy"].items()}
    assert str(pol["default"]) == "deny"
    assert [str(x) for x in pol["allow"]] == ["203.0.113.0/24"]
    assert [str(x) for x in pol["deny"]] == []
    addr = str(p["EgressAddress"])
    assert addr.startswith("10.237."), addr
    # inside: its address on eth0, the default route via the host side, resolv.conf naming it
    code, out, _, _ = mgr.sh(sid, "ip -4 -o addr show dev eth0; ip -4 route show default; cat /etc/resolv.conf")
    host_side = ".".join(addr.split(".")[:3] + [str(int(addr.split(".")[3]) - 1)])
    text = out.decode()
    assert code == 0 and f"inet {addr}/30" in text and f"default via {host_side} dev eth0" in text, text
    assert f"nameserver {host_side}" in text, text
    # the allowed CIDR is reached, through the masquerade
    before = counters(mgr, path)
    assert reachable(mgr, sid, "203.0.113.10")
    after = counters(mgr, path)
    assert after["allowed_packets"] > before["allowed_packets"], (before, after)
    # an address the policy does not allow (default deny): fails, and is counted as denied
    assert not reachable(mgr, sid, "198.51.100.10")
    assert counters(mgr, path)["denied_packets"] > after["denied_packets"]
    # other networks show empty egress properties
    nid, npath = mgr.create(type="small")
    try:
        q = mgr.props(npath)
        assert q["Network"] == "none" and len(q["EgressPolicy"]) == 0 and q["EgressAddress"] == ""
        assert tuple(int(x) for x in q["EgressCounters"]) == (0, 0, 0, 0)
    finally:
        mgr.delete(nid)


def test_default_allow_with_deny_and_what_is_never_reachable(mgr, upstream, egress):
    sid, path = egress(default="allow", deny=["198.51.100.0/24"])
    other, opath = egress(default="allow")
    other_addr = str(mgr.props(opath)["EgressAddress"])
    addr = str(mgr.props(path)["EgressAddress"])
    host_side = ".".join(addr.split(".")[:3] + [str(int(addr.split(".")[3]) - 1)])
    # a listener in the other sandbox, reachable from inside it: a background process, since one left
    # behind by an Exec's shell ends with that Exec's runtime limit (small: 20 s), which the checks below
    # can outlast on a loaded machine
    mgr.sh(other, "echo upstream says hello > /tmp/index.html")
    mgr.iface.StartProcess(other, dbus.Array(["python3", "-m", "http.server", "8080"], signature="s"),
                           dbus.Dictionary({"cwd": "/tmp"}, signature="sv"), timeout=LONG)
    wait_for(lambda: reachable(mgr, other, "127.0.0.1"), what="the other sandbox's server")

    assert reachable(mgr, sid, "203.0.113.10")                  # default allow
    assert not reachable(mgr, sid, "198.51.100.10")             # its deny CIDR
    assert not reachable(mgr, sid, "169.254.169.254")           # link-local: the metadata endpoint
    assert not reachable(mgr, sid, "192.168.77.10")             # a private address
    assert not reachable(mgr, sid, other_addr)                  # another sandbox
    assert not reachable(mgr, sid, host_side, HOST_PORT)        # the host by its side of the veth
    assert not reachable(mgr, sid, "192.0.2.1", HOST_PORT)      # the host by its uplink address
    assert not reachable(mgr, sid, "127.0.0.1", 8790)           # the gateway's port: its own loopback
    assert reachable(mgr, other, "127.0.0.1")                   # (the other one's server is up)


def test_ipv6_off_and_no_raw_sockets(mgr, upstream, egress):
    sid, _ = egress(allow=["203.0.113.0/24"])
    code, out, _, _ = mgr.sh(sid, "cat /proc/sys/net/ipv6/conf/all/disable_ipv6 "
                                  "/proc/sys/net/ipv6/conf/default/disable_ipv6 /proc/sys/net/ipv6/conf/eth0/disable_ipv6;"
                                  " ip -6 -o addr show | wc -l")
    assert code == 0 and out.decode().split() == ["1", "1", "1", "0"], out
    code, out, err, _ = mgr.exec(sid, ["python3", "-c", "import socket\n"
                                       "try:\n socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)\n"
                                       " print('raw socket made')\n"
                                       "except OSError as e:\n print('refused', e.errno)\n"])
    assert out.decode().startswith("refused"), (out, err)


def gone_everywhere(sid, addr):
    """Nothing of the sandbox is left: link, nft pieces, route."""
    assert ifname(sid) not in links()
    assert sid not in nft_table()
    net = ".".join(addr.split(".")[:3] + [str(int(addr.split(".")[3]) - 2)]) + "/30"
    assert net not in run("ip", "-4", "route").stdout


def test_teardown_after_delete_and_address_reused(mgr, upstream, egress):
    sid, path = egress(allow=["203.0.113.0/24"])
    addr = str(mgr.props(path)["EgressAddress"])
    assert ifname(sid) in links() and sid in nft_table()
    mgr.delete(sid)
    gone_everywhere(sid, addr)
    sid2, path2 = egress()
    assert str(mgr.props(path2)["EgressAddress"]) == addr, "the lowest free address again"


def test_teardown_after_ttl_expiry(mgr, upstream, egress):
    sid, path = egress(ttl_seconds=2, allow=["203.0.113.0/24"])
    addr = str(mgr.props(path)["EgressAddress"])
    wait_for(lambda: sid not in [r[0] for r in mgr.list()], what="the TTL to expire")
    wait_for(lambda: ifname(sid) not in links() and sid not in nft_table(), what="its network to go")
    gone_everywhere(sid, addr)


def test_teardown_after_kill9_and_restart(mgr, upstream, egress):
    keep, kpath = egress(allow=["203.0.113.0/24"])
    lost, lpath = egress(allow=["203.0.113.0/24"])
    lost_addr = str(mgr.props(lpath)["EgressAddress"])
    run("systemctl", "kill", "-s", "KILL", "sandboxd.service")
    wait_for(lambda: run("systemctl", "is-active", "sandboxd", check=False).stdout.strip() != "active",
             what="sandboxd to die")
    # while it is away: the sandbox's init dies (so the next sandboxd removes it), a stray sbx-* link
    # appears, and the table gets a piece of no sandbox
    run("systemctl", "kill", "-s", "KILL", f"sandbox-{lost}-init.scope", check=False)
    run("ip", "link", "add", "name", "sbx-zzzzzzzzzz", "type", "veth", "peer", "name", "sbxstray1")
    run("nft", "add", "set", "inet", "sandboxd", "sb_zzzzzzzzzz_allow4", "{ type ipv4_addr; }")
    restart_sandboxd()
    wait_for(lambda: lost not in [r[0] for r in mgr.list()], what="the lost sandbox to go")
    wait_for(lambda: ifname(lost) not in links(), what="its link to go")
    gone_everywhere(lost, lost_addr)
    assert "sbx-zzzzzzzzzz" not in links()
    assert "sb_zzzzzzzzzz" not in nft_table()
    # the one that survived still works, with its rules rebuilt
    assert keep in nft_table()
    assert reachable(mgr, keep, "203.0.113.10")
    assert not reachable(mgr, keep, "198.51.100.10")
    # and the lost one's address is free again
    again, apath = egress()
    assert str(mgr.props(apath)["EgressAddress"]) == lost_addr


def test_no_uplink_refused(mgr, upstream):
    run("ip", "route", "del", "default")
    try:
        before = mgr.list()
        before_links = links()
        with pytest.raises(dbus.DBusException) as e:
            create_raw(mgr, {"type": "small", "network": "egress"})
        name, msg = dbus_error(e)
        assert name == "org.freedesktop.DBus.Error.NotSupported" and "needs an uplink" in msg, (name, msg)
        assert mgr.list() == before
        assert links().count("sbx-") == before_links.count("sbx-")
    finally:
        run("ip", "route", "add", "default", "via", "192.0.2.2", "dev", "sbxtest-up0")


POOL_DIR = "/var/lib/sandboxd/pool"
POOL_DROPIN = "/etc/sandboxd/sandboxd.conf.d/50-egress-pool.conf"


@pytest.fixture
def egress_pool_type(upstream):
    """A type whose sandboxes are egress by default, with a policy and a pool of one."""
    with open(POOL_DROPIN, "w") as f:
        f.write("[Type:egresspool]\nNetwork=egress\nPoolSize=1\nEgressAllow=203.0.113.0/24\n")
    try:
        restart_sandboxd()
        yield
    finally:
        os.unlink(POOL_DROPIN)
        restart_sandboxd()


def pooled_ready():
    """The pooled egress sandbox's id once it is made and its link is there; else None. (The pool has the
    built-in small type's sandboxes too, network none: no link.)"""
    have = links()
    ids = [i for i in os.listdir(POOL_DIR) if ifname(i) in have]
    assert len(ids) <= 1, ids
    # Its link comes before its init runs; claimable once sandboxd has seen the init start (it says so).
    if not ids or f"Pooled sandbox {ids[0]} (type egresspool) is ready." not in run(
            "journalctl", "-u", "sandboxd", "--no-pager", "-o", "cat", "-n", "200").stdout:
        return None
    return ids[0]


def test_pool_of_egress_sandboxes(mgr, egress_pool_type):
    made = []
    try:
        pooled = wait_for(pooled_ready, what="the egress pool to fill")
        assert pooled in nft_table(), "its rules are there before it is claimed"
        # claimed with the type's network and policy
        sid, path = mgr.create(type="egresspool")
        made.append(str(sid))
        assert str(sid) == pooled
        p = mgr.props(path)
        assert p["Network"] == "egress"
        assert [str(x) for x in p["EgressPolicy"]["allow"]] == ["203.0.113.0/24"]
        assert reachable(mgr, sid, "203.0.113.10")
        assert not reachable(mgr, sid, "198.51.100.10")

        # claimed with a policy of its own: its rules re-rendered before it is handed out
        pooled = wait_for(lambda: pooled_ready() if pooled_ready() != str(sid) else None,
                          what="the pool to refill")
        sid2, path2 = create_raw(mgr, {"type": "egresspool", "network": "egress",
                                       "egress_policy": policy(allow=["198.51.100.0/24"])})
        made.append(str(sid2))
        assert str(sid2) == pooled
        assert [str(x) for x in mgr.props(path2)["EgressPolicy"]["allow"]] == ["198.51.100.0/24"]
        assert reachable(mgr, sid2, "198.51.100.10")
        assert not reachable(mgr, sid2, "203.0.113.10")
        # and two pooled sandboxes never share an address
        assert mgr.props(path)["EgressAddress"] != mgr.props(path2)["EgressAddress"]
    finally:
        for s in made:
            mgr.delete(s)


RATE_DROPIN = "/etc/sandboxd/sandboxd.conf.d/50-egress-rate.conf"
UDP_BURST = ("import socket\n"
             "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
             "for i in range(300):\n"
             "    s.sendto(b'x' * 1200, ('203.0.113.10', 9))\n")


@pytest.fixture
def rate_limited_type(upstream):
    with open(RATE_DROPIN, "w") as f:
        f.write("[Type:slow]\nNetwork=egress\nEgressRateMax=16K\nEgressAllow=203.0.113.0/24\n")
    try:
        restart_sandboxd()
        yield
    finally:
        os.unlink(RATE_DROPIN)
        restart_sandboxd()


def test_egress_rate_max(mgr, egress, rate_limited_type):
    """EgressRateMax=16K: a burst of 360 KB of UDP to an allowed address is mostly dropped and counted as
    denied; the same burst from a sandbox of a type without the limit is all allowed."""
    slow, spath = create_raw(mgr, {"type": "slow"})
    try:
        fast, fpath = egress(allow=["203.0.113.0/24"])
        chain = run("nft", "list", "chain", "inet", "sandboxd", f"out_{slow}").stdout
        assert "limit rate over 16 kbytes/second" in chain, chain
        assert "limit rate" not in run("nft", "list", "chain", "inet", "sandboxd", f"out_{fast}").stdout
        for sid, path, limited in ((slow, spath, True), (fast, fpath, False)):
            before = counters(mgr, path)
            code, out, err, _ = mgr.exec(sid, ["python3", "-c", UDP_BURST])
            assert code == 0, err
            after = counters(mgr, path)
            denied = after["denied_packets"] - before["denied_packets"]
            if limited:
                assert denied >= 200, (before, after)  # 16 KiB of 360 KB pass at most in the first second
            else:
                assert denied == 0, (before, after)
        # below the rate, the limited sandbox still works
        assert reachable(mgr, slow, "203.0.113.10")
    finally:
        mgr.delete(slow)


def test_sandboxctl_network_egress(mgr, upstream):
    """sandboxctl create --network=egress makes an egress sandbox with the type's (empty) policy; status
    says so; a mode it does not know is a usage error with nothing made."""
    r = subprocess.run(["sandboxctl", "create", "--type", "small", "--network=egress"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    sid = r.stdout.strip()
    try:
        st = subprocess.run(["sandboxctl", "status", sid], capture_output=True, text=True).stdout
        assert "Network: egress" in st, st
        assert not reachable(mgr, sid, "203.0.113.10")  # default deny, no entries
    finally:
        mgr.delete(sid)
    before = mgr.list()
    r = subprocess.run(["sandboxctl", "create", "--network=bridge"], capture_output=True, text=True)
    assert r.returncode != 0 and "expected none, egress or host" in r.stderr, r.stderr
    assert mgr.list() == before


def test_forward_drop_elsewhere_is_reported(mgr, upstream):
    """Another table's forward chain with policy drop (as iptables-nft's FORWARD makes it): sandboxd says so
    at start, names it, and changes nothing of it."""
    run("nft", "add", "table", "ip", "sbxtestfilter")
    try:
        run("nft", "add chain ip sbxtestfilter FORWARD { type filter hook forward priority 0; policy drop; }")
        restart_sandboxd()
        log = run("journalctl", "-u", "sandboxd", "--no-pager", "-o", "cat", "-n", "100").stdout
        assert "forward chain that drops by default (ip sbxtestfilter FORWARD)" in log, log[-2000:]
        chain = run("nft", "list", "chain", "ip", "sbxtestfilter", "FORWARD").stdout
        assert "policy drop" in chain, chain
    finally:
        run("nft", "delete", "table", "ip", "sbxtestfilter", check=False)
        restart_sandboxd()


ICMP_ECHO = r'''
import os, select, socket, struct, sys
def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff)
    return ~(s + (s >> 16)) & 0xffff
dst = sys.argv[1]
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
hdr = struct.pack("!BBHHH", 8, 0, 0, 0x5bd, 1) + b"sandboxd-egress-test"
s.sendto(hdr[:2] + struct.pack("!H", csum(hdr)) + hdr[4:], (dst, 0))
while select.select([s], [], [], 2)[0]:
    data, (src, _) = s.recvfrom(2048)
    ihl = (data[0] & 15) * 4
    if src == dst and data[ihl] == 0 and struct.unpack("!H", data[ihl + 4:ihl + 6])[0] == 0x5bd:
        sys.exit(0)
sys.exit(1)
'''


def init_pid(sid):
    cg = run("systemctl", "show", "-P", "ControlGroup", f"sandbox-{sid}-init.scope").stdout.strip()
    for root in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup/systemd", "/sys/fs/cgroup"):
        try:
            with open(root + cg + "/cgroup.procs") as f:
                return int(f.read().split()[0])
        except (OSError, IndexError, ValueError):
            continue
    raise AssertionError(f"no process in {cg}")


def test_icmp_through_the_sandbox_rules(mgr, upstream, egress):
    """ICMP echo from the sandbox's network namespace (sent by root there: the sandbox's own user may not
    open the raw socket ping needs) passes the sandbox's rules like any other packet: an allowed CIDR
    answers, a denied one and the host do not, and the denied ones are counted."""
    sid, path = egress(allow=["203.0.113.0/24"])
    netns = f"/proc/{init_pid(sid)}/ns/net"
    addr = str(mgr.props(path)["EgressAddress"])
    host_side = ".".join(addr.split(".")[:3] + [str(int(addr.split(".")[3]) - 1)])

    def echo(dst):
        return run("nsenter", f"--net={netns}", "/usr/bin/python3", "-c", ICMP_ECHO, dst, check=False).returncode

    assert echo("203.0.113.10") == 0
    before = counters(mgr, path)["denied_packets"]
    assert echo("198.51.100.10") == 1
    assert echo("169.254.169.254") == 1
    assert echo(host_side) == 1
    assert echo("192.0.2.1") == 1
    assert counters(mgr, path)["denied_packets"] >= before + 4


# --- names through the sandbox's resolver, denials on the record (issue 23, step 2c) ------------------
#
# The fake internet gets a DNS server: dnsmasq in the upstream namespace on 192.0.2.2, port 53, and the
# harness's /etc/resolv.conf names it while the tests below run (sandboxd reads it at start and on SIGHUP).

RESOLV_CONF = "/etc/resolv.conf"
DNS_NAMES = {"allowed.example.test": "203.0.113.10", "other.example.test": "198.51.100.10",
             "rebind.example.test": "127.0.0.1", "wild.example.test": "203.0.113.10"}  # and its subdomains

# A DNS query of one A question, and its answer's rcode and answer count, over UDP or TCP; for the tests only
# (the resolver itself reads and writes DNS with ldns). The server is the one the sandbox's resolv.conf names.
DNS_QUERY_PY = r"""
import socket, struct, sys
name, proto = sys.argv[1], sys.argv[2]
server = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
q = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
if proto == "tcp":
    s = socket.create_connection((server, 53), timeout=3)
    s.sendall(struct.pack(">H", len(q)) + q)
    buf = b""
    while len(buf) < 2 or len(buf) < 2 + struct.unpack(">H", buf[:2])[0]:
        chunk = s.recv(4096)
        if not chunk:
            break
        buf += chunk
    a = buf[2:]
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(q, (server, 53))
    a = s.recv(4096)
print(a[3] & 15, struct.unpack(">H", a[6:8])[0])
"""
RCODE = {"NOERROR": 0, "NXDOMAIN": 3, "REFUSED": 5}


def sighup_sandboxd():
    run("systemctl", "kill", "-s", "HUP", "--kill-whom=main", "sandboxd.service")


@pytest.fixture(scope="module")
def fake_dns(upstream):
    """dnsmasq upstream, the harness's resolv.conf naming it; sandboxd restarted to read it at start."""
    args = ["ip", "netns", "exec", UPSTREAM, "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null",
            "--listen-address=192.0.2.2", "--bind-interfaces", "--no-resolv", "--no-hosts", "--pid-file=",
            "--user=root", "--local-ttl=60", "--log-facility=/dev/null", "--local=/example.test/"]
    args += [f"--address=/{n}/{a}" for n, a in DNS_NAMES.items()]
    dns = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(RESOLV_CONF) as f:
        saved = f.read()
    try:
        wait_for(lambda: "192.0.2.2:53" in ns("ss", "-lun").stdout, what="the fake DNS server")
        with open(RESOLV_CONF, "w") as f:
            f.write("nameserver 192.0.2.2\n")
        restart_sandboxd()
        yield
    finally:
        with open(RESOLV_CONF, "w") as f:
            f.write(saved)
        dns.kill()
        dns.wait()
        sighup_sandboxd()


def dns_query(mgr, sid, name, proto="udp"):
    """(rcode, answer count) of an A query from inside the sandbox to its resolver."""
    code, out, err, _ = mgr.exec(sid, ["python3", "-c", DNS_QUERY_PY, name, proto])
    assert code == 0, (out, err)
    rcode, ancount = out.decode().split()
    return int(rcode), int(ancount)


def resolves(mgr, sid, name, env=None):
    """The addresses glibc gets for name inside the sandbox (its resolv.conf), or None."""
    script = ("import socket, sys\n"
              "try:\n print(' '.join(sorted({a[4][0] for a in socket.getaddrinfo(sys.argv[1], 80, socket.AF_INET)})))\n"
              "except socket.gaierror as e:\n print('FAIL', e)")
    opts = {"env": env} if env else {}
    code, out, _, _ = mgr.exec(sid, ["python3", "-c", script, name], **opts)
    text = out.decode().strip()
    return None if code != 0 or text.startswith("FAIL") else text


def denied_rows(sid):
    rows = audit_log(session=sid, operation="network.denied")
    return [dict(r, detail=json.loads(str(r["detail"]))) for r in rows]


def resolver_sockets(addr):
    """The host's sockets listening on addr port 53 (UDP and TCP)."""
    return [l for l in (run("ss", "-Hlun").stdout + run("ss", "-Hltn").stdout).splitlines() if f"{addr}:53 " in l]


def host_side(addr):
    return ".".join(addr.split(".")[:3] + [str(int(addr.split(".")[3]) - 1)])


def test_names_through_the_resolver(mgr, fake_dns, egress):
    sid, path = egress(allow=["allowed.example.test", "*.wild.example.test"])
    addr = str(mgr.props(path)["EgressAddress"])
    assert resolver_sockets(host_side(addr)), "its resolver listens on its host side, UDP and TCP"
    assert len(resolver_sockets(host_side(addr))) == 2

    # an allowed name: resolved, and reachable by name (its address opened by the answer)
    assert resolves(mgr, sid, "allowed.example.test") == "203.0.113.10"
    code, body = fetch(mgr, sid, f"http://allowed.example.test:{HTTP_PORT}/")
    assert code == 0 and "upstream says hello" in body, body
    # over UDP and over TCP, from a query of our own and from glibc told to use TCP
    assert dns_query(mgr, sid, "allowed.example.test", "udp") == (RCODE["NOERROR"], 1)
    assert dns_query(mgr, sid, "allowed.example.test", "tcp") == (RCODE["NOERROR"], 1)
    assert resolves(mgr, sid, "allowed.example.test", env={"RES_OPTIONS": "use-vc"}) == "203.0.113.10"

    # a denied name: REFUSED over UDP and TCP, unresolvable, and on the record
    assert dns_query(mgr, sid, "other.example.test", "udp") == (RCODE["REFUSED"], 0)
    assert dns_query(mgr, sid, "other.example.test", "tcp") == (RCODE["REFUSED"], 0)
    assert resolves(mgr, sid, "other.example.test") is None
    rows = wait_for(lambda: [r for r in denied_rows(sid) if r["detail"].get("name") == "other.example.test"],
                    what="the refused name's row")
    r = rows[0]
    assert str(r["event"]) == "denied" and str(r["source"]) == "system", r
    assert r["detail"]["port"] == 53 and r["detail"]["protocol"] == "dns", r
    assert r["detail"]["reason"] == "not allowed by the policy", r

    # the denied name's address dialled directly: fails, and the firewall's drop is on the record
    assert not reachable(mgr, sid, "198.51.100.10")
    rows = wait_for(lambda: [r for r in denied_rows(sid) if r["detail"].get("address") == "198.51.100.10"],
                    what="the dropped address's row")
    assert rows[0]["detail"]["port"] == HTTP_PORT and rows[0]["detail"]["protocol"] == "tcp", rows[0]

    # the wildcard: names under it, not the name itself
    assert resolves(mgr, sid, "a.wild.example.test") == "203.0.113.10"
    assert resolves(mgr, sid, "x.y.wild.example.test") == "203.0.113.10"
    assert dns_query(mgr, sid, "wild.example.test") == (RCODE["REFUSED"], 0)


def test_rebinding_answer_reaches_nothing(mgr, fake_dns, egress):
    sid, _ = egress(allow=["rebind.example.test"])
    # allowed, but its answer (127.0.0.1) is removed: no address at all, and on the record
    assert dns_query(mgr, sid, "rebind.example.test") == (RCODE["NOERROR"], 0)
    assert resolves(mgr, sid, "rebind.example.test") is None
    code, _ = fetch(mgr, sid, f"http://rebind.example.test:{HTTP_PORT}/")
    assert code != 0
    rows = wait_for(lambda: [r for r in denied_rows(sid) if "127.0.0.1" in r["detail"].get("reason", "")],
                    what="the rebinding answer's row")
    assert rows[0]["detail"]["name"] == "rebind.example.test", rows[0]


FLOOD_PY = r"""
import socket, struct, sys, time
server = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
dial = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
start = time.monotonic()
for i in range(5000):
    name = f"flood{i}.example.test"
    q = struct.pack(">HHHHHH", i, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
    dns.sendto(q, (server, 53))
    dial.sendto(b"x", ("198.51.100.10", 9 + i % 100))
print(time.monotonic() - start)
"""


def test_flood_of_denials_gives_bounded_rows(mgr, fake_dns, egress):
    sid, _ = egress(allow=["allowed.example.test"])
    other, _ = egress(allow=["allowed.example.test"])
    before = {r["id"] for r in denied_rows(sid)}
    start = time.monotonic()
    # 10,000 denied attempts: 5,000 refused names and 5,000 datagrams to a denied address
    code, out, err, _ = mgr.exec(sid, ["python3", "-c", FLOOD_PY])
    assert code == 0, err
    sent_in = float(out.decode())
    assert sent_in < 5, f"the flood took {sent_in:.1f} s to send"
    # the gateway and another sandbox still answer
    import requests
    from gateway_helpers import BASE, gateway_up
    gateway_up()
    assert requests.get(BASE + "/v1/sandboxes", timeout=10).status_code in (200, 401)
    assert resolves(mgr, other, "allowed.example.test") == "203.0.113.10"
    # the summaries come once their second is over
    wait_for(lambda: any(r["detail"].get("summary") for r in denied_rows(sid) if r["id"] not in before),
             what="a summary row")
    time.sleep(1.5)  # the last second's summary (not part of any assertion's timing)
    rows = [r for r in denied_rows(sid) if r["id"] not in before]
    seconds = time.monotonic() - start
    # per second at most 10 rows of their own and one summary, per sandbox
    assert len(rows) <= 11 * (int(seconds) + 2), (len(rows), seconds)
    counted = sum(r["detail"]["count"] if r["detail"].get("summary") else 1 for r in rows)
    print(f"flood: sent in {sent_in:.3f} s; {len(rows)} rows in {seconds:.1f} s standing for {counted} denials")
    assert counted > len(rows), (counted, len(rows))
    # both kinds are on the record, as rows of their own or as a summary's examples (sandboxd reads the
    # resolver's refusals and the firewall's log apart, so the last of either may come a moment later)
    def kinds():
        rows = [r for r in denied_rows(sid) if r["id"] not in before]
        k = {("name" if "name" in r["detail"] else "address") for r in rows if not r["detail"].get("summary")}
        return k | {("name" if "name" in e else "address") for r in rows if r["detail"].get("summary")
                    for e in r["detail"]["examples"]}
    wait_for(lambda: kinds() == {"name", "address"}, timeout=10, what="rows of both kinds")


def test_resolver_socket_goes_with_the_sandbox(mgr, fake_dns, egress):
    # delete
    sid, path = egress(allow=["allowed.example.test"])
    hs = host_side(str(mgr.props(path)["EgressAddress"]))
    assert len(resolver_sockets(hs)) == 2
    mgr.delete(sid)
    assert resolver_sockets(hs) == []
    # TTL expiry
    sid, path = egress(ttl_seconds=2, allow=["allowed.example.test"])
    hs = host_side(str(mgr.props(path)["EgressAddress"]))
    assert len(resolver_sockets(hs)) == 2
    wait_for(lambda: sid not in [r[0] for r in mgr.list()], what="the TTL to expire")
    assert resolver_sockets(hs) == []


def test_resolver_after_kill9_and_restart(mgr, fake_dns, egress):
    keep, kpath = egress(allow=["allowed.example.test"])
    lost, lpath = egress(allow=["allowed.example.test"])
    khs = host_side(str(mgr.props(kpath)["EgressAddress"]))
    lhs = host_side(str(mgr.props(lpath)["EgressAddress"]))
    assert resolves(mgr, keep, "allowed.example.test") == "203.0.113.10"
    run("systemctl", "kill", "-s", "KILL", "sandboxd.service")
    wait_for(lambda: run("systemctl", "is-active", "sandboxd", check=False).stdout.strip() != "active",
             what="sandboxd to die")
    assert resolver_sockets(khs) == [] and resolver_sockets(lhs) == [], "the sockets died with it"
    run("systemctl", "kill", "-s", "KILL", f"sandbox-{lost}-init.scope", check=False)
    restart_sandboxd()
    wait_for(lambda: lost not in [r[0] for r in mgr.list()], what="the lost sandbox to go")
    assert resolver_sockets(lhs) == []
    assert len(resolver_sockets(khs)) == 2
    # the survivor's names resolve again, and what they name is reachable
    assert resolves(mgr, keep, "allowed.example.test") == "203.0.113.10"
    assert reachable(mgr, keep, "allowed.example.test")
    assert dns_query(mgr, keep, "other.example.test") == (RCODE["REFUSED"], 0)


def test_pooled_egress_sandbox_has_its_resolver(mgr, fake_dns, egress_pool_type):
    sid = wait_for(pooled_ready, what="the pooled egress sandbox")
    addr = None
    for line in run("ip", "-4", "-o", "addr", "show", "dev", ifname(sid)).stdout.splitlines():
        addr = line.split()[3].split("/")[0]
    assert addr and len(resolver_sockets(addr)) == 2, "a pooled sandbox's resolver runs before it is claimed"


def test_resolver_bind_failure_fails_the_create(mgr, fake_dns):
    """A DNS server of the host on 0.0.0.0:53 takes the port: the create fails with a clear error."""
    import socket
    squatter = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    squatter.bind(("0.0.0.0", 53))
    try:
        before, before_links, before_table = mgr.list(), links(), nft_table()
        with pytest.raises(dbus.DBusException) as e:
            create_raw(mgr, {"type": "small", "network": "egress"})
        name, msg = dbus_error(e)
        assert "port 53" in msg and "Address already in use" in msg, (name, msg)
        assert mgr.list() == before
        assert links().count("sbx-") == before_links.count("sbx-")
        assert nft_table().count('"out_sb_') == before_table.count('"out_sb_')
    finally:
        squatter.close()


def test_sighup_reads_resolv_conf_again(mgr, fake_dns, egress):
    sid, _ = egress(allow=["allowed.example.test"])
    assert resolves(mgr, sid, "allowed.example.test") == "203.0.113.10"
    with open(RESOLV_CONF, "w") as f:
        f.write("nameserver 192.0.2.77\n")  # nothing answers there
    try:
        sighup_sandboxd()
        wait_for(lambda: dns_query_rcode_or_none(mgr, sid) == 2, what="SERVFAIL from the new, silent server")
    finally:
        with open(RESOLV_CONF, "w") as f:
            f.write("nameserver 192.0.2.2\n")
        sighup_sandboxd()
    wait_for(lambda: resolves(mgr, sid, "allowed.example.test") == "203.0.113.10", what="the old server again")


def dns_query_rcode_or_none(mgr, sid):
    code, out, _, _ = mgr.exec(sid, ["python3", "-c", DNS_QUERY_PY, "allowed.example.test", "udp"])
    return int(out.decode().split()[0]) if code == 0 else None


def test_no_dns_server_refused(mgr, fake_dns):
    """/etc/resolv.conf without a server at start: egress refused, saying so, nothing made."""
    with open(RESOLV_CONF, "w") as f:
        f.write("# no server\n")
    try:
        restart_sandboxd()
        before, before_links = mgr.list(), links()
        with pytest.raises(dbus.DBusException) as e:
            create_raw(mgr, {"type": "small", "network": "egress"})
        name, msg = dbus_error(e)
        assert name == "org.freedesktop.DBus.Error.NotSupported", (name, msg)
        assert "needs a DNS server" in msg and "/etc/resolv.conf" in msg, msg
        assert mgr.list() == before and links().count("sbx-") == before_links.count("sbx-")
    finally:
        with open(RESOLV_CONF, "w") as f:
            f.write("nameserver 192.0.2.2\n")
        restart_sandboxd()


def nflog_squat(group):
    """A netlink socket of our own bound to NFLOG group `group` (so sandboxd cannot bind it), or a reason."""
    import socket
    import struct
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)  # NETLINK_NETFILTER
    s.bind((0, 0))
    # nlmsghdr; nfgenmsg (AF_UNSPEC, version 0, the group big-endian); NFULA_CFG_CMD (1) = NFULNL_CFG_CMD_BIND
    body = struct.pack("=BBH", 0, 0, socket.htons(group)) + struct.pack("=HHB3x", 5, 1, 1)
    msg = struct.pack("=IHHII", 16 + len(body), (4 << 8) | 1, 0x1 | 0x4, 1, 0) + body  # ULOG, CONFIG; REQUEST|ACK
    s.send(msg)
    ack = s.recv(4096)
    err = struct.unpack("=i", ack[16:20])[0]
    if err != 0:
        s.close()
        return None, f"binding NFLOG group {group} failed: errno {-err}"
    return s, None


def test_without_nflog_only_the_resolver_names_denials(mgr, fake_dns, egress):
    """NFLOG group taken (as a kernel without nfnetlink_log would refuse it): sandboxd says so at start, its
    rules log nothing (nft would refuse them), the firewall still drops and counts, the resolver's refusals
    are still rows."""
    run("systemctl", "stop", "sandboxd.service")  # it holds the group while it runs
    squat, why = nflog_squat(2323)
    if squat is None:
        restart_sandboxd()
        pytest.skip(why)
    try:
        restart_sandboxd()
        journal = run("journalctl", "-u", "sandboxd", "--no-pager", "-o", "cat", "-n", "300").stdout
        assert "NFLOG group 2323 could not be bound" in journal, journal[-2000:]
        sid, path = egress(allow=["allowed.example.test"])
        assert " log " not in run("nft", "list", "table", "inet", "sandboxd").stdout
        assert resolves(mgr, sid, "allowed.example.test") == "203.0.113.10"
        before = counters(mgr, path)["denied_packets"]
        assert not reachable(mgr, sid, "198.51.100.10")
        assert counters(mgr, path)["denied_packets"] > before
        assert dns_query(mgr, sid, "other.example.test") == (RCODE["REFUSED"], 0)
        wait_for(lambda: [r for r in denied_rows(sid) if r["detail"].get("name") == "other.example.test"],
                 what="the refused name's row")
        assert not [r for r in denied_rows(sid) if "address" in r["detail"]]
    finally:
        squat.close()
        restart_sandboxd()
