# SPDX-License-Identifier: LGPL-2.1-or-later
# Issue 29, part 3: two hosts behind HAProxy. Run from the host, not inside a harness instance (it boots its
# own):
#   sudo SANDBOXD_SCALE_BUILD=build-test /usr/bin/python3 -m pytest -q -p no:cacheprovider \
#           tests/e2e/test_scale_hosts.py
# Each host is a throwaway systemd of tests/harness with the build installed, in a network namespace of its
# own, joined by a veth pair to a namespace the test makes for the rest: PostgreSQL (the shared key store)
# and HAProxy running the shipped examples/haproxy/sandboxd.cfg. The test itself moves into that namespace:
# all its traffic is between these namespaces and their loopback. Everything is stopped and removed after.
import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest
import requests

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HARNESS = os.path.join(SRC, "tests/harness/sandbox-harness")
BUILD = os.path.join(SRC, os.environ.get("SANDBOXD_SCALE_BUILD", "build-test"))
PG_BIN = "/usr/lib/postgresql/15/bin"
HOSTS = {"a": 1, "b": 2}  # tag → subnet 10.29.<n>.0/24: .1 the test's namespace, .2 the host
LB = f"sbxscale-{os.getpid()}"
PROXY = "http://127.0.0.1:18780"
CLONE_NEWNET = 0x40000000

pytestmark = [
    pytest.mark.skipif("HARNESS_INSTANCE" in os.environ, reason="boots harness instances of its own: run it "
                       "from the host (see the top of this file)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (harness instances, network namespaces)"),
    pytest.mark.skipif(not (os.path.exists(PG_BIN + "/initdb") and shutil.which("haproxy")),
                       reason="needs Debian's postgresql-15 and haproxy"),
]


def run(*args, check=True, env=None, **kw):
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"{args!r} failed ({p.returncode}): {p.stdout}{p.stderr}")
    return p


def wait_for(pred, timeout=60.0, what="condition"):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


class Fleet:
    def __init__(self):
        self.state = tempfile.mkdtemp(prefix="sbxscale-harness.")
        self.env = dict(os.environ, SANDBOX_HARNESS_STATE=self.state, HARNESS_QUIET="1")
        self.pid1 = {}
        self.pg_dir = None
        self.haproxy = None

    def harness(self, *args, check=True):
        return run(HARNESS, "-q", *args, env=self.env, check=check)

    def name(self, tag):
        return f"sbxscale{os.getpid()}{tag}"

    def exec(self, tag, *cmd, check=True):
        return self.harness("exec", self.name(tag), "--", *cmd, check=check)

    def boot(self, tag):
        self.harness("boot", self.name(tag), "--net", "private")
        for line in self.harness("list").stdout.splitlines():
            f = line.split()
            if f and f[0] == self.name(tag):
                self.pid1[tag] = int(f[1].split("=")[1])
        self.harness("install", self.name(tag), BUILD)
        n = HOSTS[tag]
        run("ip", "link", "add", "name", f"sbxs{n}l", "type", "veth", "peer", "name", f"sbxs{n}h")
        run("ip", "link", "set", f"sbxs{n}l", "netns", LB)
        run("ip", "link", "set", f"sbxs{n}h", "netns", str(self.pid1[tag]))
        run("ip", "-n", LB, "addr", "add", f"10.29.{n}.1/24", "dev", f"sbxs{n}l")
        run("ip", "-n", LB, "link", "set", f"sbxs{n}l", "up")
        ns = ("nsenter", "-t", str(self.pid1[tag]), "-n")
        run(*ns, "ip", "addr", "add", f"10.29.{n}.2/24", "dev", f"sbxs{n}h")
        run(*ns, "ip", "link", "set", f"sbxs{n}h", "up")

    def configure(self, tag):
        n = HOSTS[tag]
        root = f"/proc/{self.pid1[tag]}/root"
        files = {
            "/etc/sandboxd/sandboxd.conf.d/60-scale.conf": f"[Manager]\nHostTag={tag}\n",
            "/etc/sandboxd/sandbox-gatewayd.conf.d/60-scale.conf":
                f"[Gateway]\nKeyStore=postgresql://postgres@10.29.{n}.1/postgres?connect_timeout=2\nClusterLog=yes\n",
            "/etc/sandboxd/sandbox-auditd.conf.d/60-scale.conf":
                f"[PostgreSQL]\nURL=postgresql://postgres@10.29.{n}.1/postgres?connect_timeout=2\nHost={tag}\n",
            "/etc/systemd/system/sandbox-auditd.service.d/60-scale.conf":
                "[Service]\nPrivateNetwork=no\nIPAddressDeny=\nRestrictAddressFamilies=AF_INET AF_INET6\n",
            # the gateway reaches PostgreSQL over the network, and listens where HAProxy reaches it
            "/etc/systemd/system/sandbox-gatewayd.service.d/60-scale.conf":
                "[Service]\nPrivateNetwork=no\nIPAddressDeny=\nRestrictAddressFamilies=AF_INET AF_INET6\n",
            "/etc/systemd/system/sandbox-gatewayd.socket.d/60-scale.conf": "[Socket]\nListenStream=\nListenStream=8790\n",
            "/etc/systemd/system/sandbox-gatewayd-agent.socket.d/60-scale.conf":
                "[Socket]\nListenStream=\nListenStream=8792\n",
        }
        for path, text in files.items():
            os.makedirs(os.path.dirname(root + path), exist_ok=True)
            with open(root + path, "w") as f:
                f.write(text)
        self.exec(tag, "systemctl", "daemon-reload")
        self.exec(tag, "systemctl", "restart", "sandbox-auditd.service")
        self.exec(tag, "systemctl", "start", "sandboxd.service")
        self.exec(tag, "systemctl", "stop", "sandbox-gatewayd.service")
        self.exec(tag, "systemctl", "restart", "sandbox-gatewayd.socket", "sandbox-gatewayd-agent.socket")
        self.exec(tag, "systemctl", "start", "sandbox-gatewayd.service")

    def postgres(self):
        self.pg_dir = tempfile.mkdtemp(prefix="sbxscale-pg.", dir="/var/tmp")
        shutil.chown(self.pg_dir, "postgres", "postgres")
        as_pg = ("ip", "netns", "exec", LB, "setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups")
        run(*as_pg, f"{PG_BIN}/initdb", "-D", f"{self.pg_dir}/data", "--auth=trust", "-U", "postgres", "--no-sync")
        with open(f"{self.pg_dir}/data/pg_hba.conf", "a") as f:
            f.write("host all all 10.29.0.0/16 trust\n")
        addresses = ",".join(f"10.29.{n}.1" for n in HOSTS.values())
        run(*as_pg, f"{PG_BIN}/pg_ctl", "-D", f"{self.pg_dir}/data", "-l", f"{self.pg_dir}/log", "-w", "-o",
            f"-k {self.pg_dir} -c listen_addresses={addresses} -c fsync=off", "start")

    def start_haproxy(self):
        env = dict(os.environ, SBX_LISTEN="127.0.0.1:18780", SBX_HOST_A="10.29.1.2", SBX_HOST_B="10.29.2.2")
        self.haproxy = subprocess.Popen(["ip", "netns", "exec", LB, "haproxy", "-db", "-f",
                                         os.path.join(SRC, "examples/haproxy/sandboxd.cfg")],
                                        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def kill(self, tag):
        os.kill(self.pid1.pop(tag), signal.SIGKILL)

    def diagnose(self):
        """What a failed setup left, for the failure's report."""
        out = []
        for tag, pid in self.pid1.items():
            for cmd in (("systemctl", "--no-pager", "status", "sandbox-gatewayd.socket", "sandbox-gatewayd.service",
                         "sandbox-gatewayd-agent.socket"), ("journalctl", "--no-pager", "-n", "40", "-u",
                         "sandbox-gatewayd.service"), ("ss", "-ltn")):
                p = self.exec(tag, *cmd, check=False)
                out.append(f"--- {tag}: {' '.join(cmd)}\n{p.stdout}{p.stderr}")
        if self.haproxy:
            self.haproxy.terminate()
            out.append("--- haproxy\n" + self.haproxy.communicate(timeout=30)[1].decode(errors="replace"))
            self.haproxy = None
        return "\n".join(out)

    def teardown(self):
        if self.haproxy:
            self.haproxy.terminate()
            self.haproxy.wait(timeout=30)
        for tag in list(self.pid1):
            self.harness("down", self.name(tag), check=False)
        self.harness("gc", check=False)
        if self.pg_dir:
            run("setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", f"{PG_BIN}/pg_ctl", "-D",
                f"{self.pg_dir}/data", "-m", "fast", "-w", "stop", check=False)
            shutil.rmtree(self.pg_dir, ignore_errors=True)
        run("ip", "netns", "delete", LB, check=False)
        shutil.rmtree(self.state, ignore_errors=True)


def enter_netns(name):
    """Moves this thread (pytest's, which makes every request) into the test's namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns")
    finally:
        os.close(fd)


@pytest.fixture(scope="module")
def fleet():
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    f = Fleet()
    try:
        run("ip", "netns", "add", LB)
        run("ip", "-n", LB, "link", "set", "lo", "up")
        for tag in HOSTS:
            f.boot(tag)
        f.postgres()
        for tag in HOSTS:
            f.configure(tag)
        f.start_haproxy()
        enter_netns(LB)
        wait_for(lambda: proxy_status("GET", "/v1/sandboxes") == 401, what="HAProxy and a gateway")
    except BaseException:
        print(f.diagnose())
        leave(own, f)
        raise
    try:
        yield f
    finally:
        leave(own, f)


def leave(own, f):
    ctypes.CDLL(None).setns(own, CLONE_NEWNET)
    os.close(own)
    f.teardown()


def proxy_status(method, path):
    try:
        return requests.request(method, PROXY + path, timeout=10).status_code
    except requests.RequestException:
        return None


def api(method, path, secret, **kw):
    return requests.request(method, PROXY + path, headers={"Authorization": f"Bearer {secret}"}, timeout=120, **kw)


@pytest.fixture(scope="module")
def runner(fleet):
    d = json.loads(fleet.exec("a", "sandboxctl", "api-key", "create", "--preset=runner", "--json").stdout)
    return d["secret"]


def test_runner_flow_through_haproxy_lands_on_both_hosts(fleet, runner):
    made = []
    for _ in range(6):
        # both agents must have counted once before creates are weighted; until then HAProxy may answer 503
        r = wait_for(lambda: (lambda r: r if r.status_code == 201 else None)(
            api("POST", "/v1/sandboxes", runner, json={"type": "small", "ttl_seconds": 600})),
            what="a create through HAProxy")
        made.append(r.json()["id"])
    tags = {sid[3] for sid in made}
    assert tags == {"a", "b"}, made
    for sid in made:
        r = api("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/task.py", runner, data=b"print(6 * 7)\n")
        assert r.status_code in (200, 201, 204), r.text
        r = api("POST", f"/v1/sandboxes/{sid}/exec", runner, json={"argv": ["python3", "/tmp/task.py"]})
        assert r.status_code == 200 and r.json()["exit_code"] == 0 and r.json()["stdout"] == "42\n", r.text
        r = api("PATCH", f"/v1/sandboxes/{sid}", runner, json={"ttl_seconds": 300})
        assert r.status_code == 200, r.text
    # each host knows only its own: the sandbox is on the host its tag names
    for tag in HOSTS:
        listed = json.loads(fleet.exec(tag, "busctl", "--json=short", "call", "org.sandboxd.sandbox1",
                                       "/org/sandboxd/sandbox1", "org.sandboxd.sandbox1.Manager",
                                       "ListSandboxes").stdout)["data"][0]
        ids = {row[0] for row in listed}
        assert {s for s in made if s[3] == tag} <= ids and not {s for s in made if s[3] != tag} & ids
    keep = {tag: next(s for s in made if s[3] == tag) for tag in HOSTS}
    for sid in made:
        if sid not in keep.values():
            assert api("DELETE", f"/v1/sandboxes/{sid}", runner).status_code == 204
    fleet.kept = keep


def local_log(fleet, tag):
    """The ids of a host's own log (GetLog over its bus)."""
    out = fleet.exec(tag, "busctl", "--json=short", "call", "org.sandboxd.audit1", "/org/sandboxd/audit1",
                     "org.sandboxd.audit1.Log", "GetLog", "a{sv}tt", "0", "1000", "0").stdout
    return sorted(row["id"]["data"] for row in json.loads(out)["data"][0])


def test_log_across_hosts_shows_every_row_once(fleet):
    admin = json.loads(fleet.exec("b", "sandboxctl", "api-key", "create", "--preset=admin", "--json").stdout)["secret"]

    def page():
        r = api("GET", "/v1/log?limit=1000", admin)
        assert r.status_code == 200, r.text
        return r.json()["entries"]

    def complete():
        rows = page()
        by_host = {tag: sorted(e["id"] for e in rows if e["host"] == tag) for tag in HOSTS}
        return all(by_host[tag] == local_log(fleet, tag) for tag in HOSTS) and rows
    rows = wait_for(complete, what="GET /v1/log through HAProxy to show both hosts' rows")
    keys = [(e["host"], e["id"]) for e in rows]
    assert len(keys) == len(set(keys)), "a row shown twice"
    # the runner's sandboxes' creations, each on its own host's rows
    created = {e["session_id"]: e["host"] for e in rows if e["operation"] == "sandbox.create"}
    for sid in fleet.kept.values():
        assert created[sid] == sid[3], (sid, created.get(sid))
    # one host's ids are not another's: paging by id is refused across hosts
    r = api("GET", "/v1/log?after_id=1", admin)
    assert r.status_code == 400 and r.json()["code"] == "invalid_request", r.text
    fleet.admin = admin


def test_watch_and_takeover_through_haproxy(fleet):
    """The long-lived routes go to the owning host too: an SSE watch, and a takeover WebSocket on a token
    minted through HAProxy, for each host's sandbox."""
    import websocket
    for tag, sid in fleet.kept.items():
        with api("GET", f"/v1/sandboxes/{sid}/watch", fleet.admin, stream=True) as w:
            assert w.status_code == 200 and w.headers["Content-Type"].startswith("text/event-stream")
            r = api("POST", f"/v1/sandboxes/{sid}/exec", fleet.admin, json={"argv": ["echo", f"watched-{tag}"]})
            assert r.status_code == 200, r.text
            lines = w.iter_lines(decode_unicode=True)
            assert any(f"watched-{tag}" in line for line, _ in zip(lines, range(10000)) if line.startswith("data:"))
        r = api("POST", f"/v1/sandboxes/{sid}/takeover-token", fleet.admin, json={})
        assert r.status_code == 201, r.text
        ws = websocket.create_connection(PROXY.replace("http://", "ws://") +
                                         f"/v1/sandboxes/{sid}/takeover?token={r.json()['token']}", timeout=60)
        ws.send_binary(b"echo host-$((6*7))-" + tag.encode() + b"; exit\n")
        out = b""
        try:
            while True:
                frame = ws.recv()
                out += frame if isinstance(frame, bytes) else frame.encode()
        except websocket.WebSocketConnectionClosedException:
            pass
        assert b"host-42-" + tag.encode() in out, out[-300:]


def test_host_down_answers_host_unavailable_and_the_rest_goes_on(fleet, runner):
    keep = fleet.kept
    fleet.kill("b")
    # within HAProxy's checks (1 s, 2 failures), b's sandbox answers 503 host_unavailable
    seen = []

    def b_unavailable():
        r = api("POST", f"/v1/sandboxes/{keep['b']}/exec", runner, json={"argv": ["true"]})
        seen[:] = [r.status_code, r.text[:300]]
        return [r] if r.status_code == 503 else None  # a Response of 503 is falsy itself
    try:
        r, = wait_for(b_unavailable, timeout=30, what="host b's sandbox to answer 503")
    except AssertionError as e:
        raise AssertionError(f"{e}; last answer: {seen}") from None
    body = r.json()
    assert body["code"] == "host_unavailable" and body["status"] == 503 and body["event"] == "error", body
    assert body["requestId"].startswith("req_"), body
    # a's keeps working, and new sandboxes go to a
    r = api("POST", f"/v1/sandboxes/{keep['a']}/exec", runner, json={"argv": ["echo", "still"]})
    assert r.status_code == 200 and r.json()["stdout"] == "still\n", r.text
    for _ in range(3):
        r = wait_for(lambda: (lambda r: r if r.status_code == 201 else None)(
            api("POST", "/v1/sandboxes", runner, json={"type": "small"})), what="a create with b down")
        assert r.json()["id"].startswith("sb_a"), r.json()
    # the log across hosts still has b's rows: their copy outlives the host
    # (the any backend's own checks mark b down within the same two seconds; until then a request may reach
    # for b and get the 503)
    r, = wait_for(lambda: (lambda r: [r] if r.status_code == 200 else None)(
        api("GET", "/v1/log?limit=1000", fleet.admin)), what="GET /v1/log with b down")
    rows = r.json()["entries"]
    assert any(e["host"] == "b" and e["session_id"] == keep["b"] for e in rows)
