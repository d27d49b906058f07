# SPDX-License-Identifier: LGPL-2.1-or-later
# Takeover through sandbox-gatewayd: the WebSocket shell, its credentials (header, single-use tokens
# across two gateway processes, expiry), refusals before the upgrade, close codes, and recordings.
import base64
import contextlib
import json
import os
import re
import socket
import struct
import subprocess
import time

import dbus
import pytest
import requests
import websocket

from conftest import LONG, run, systemctl_show, wait_for

GW = "http://127.0.0.1:8790"
GW2_PORT = 8791
DROPIN_DIR = "/etc/sandboxd/sandbox-gatewayd.conf.d"
AUDIT = ("org.sandboxd.audit1", "/org/sandboxd/audit1", "org.sandboxd.audit1.Log")


def shell_units(sid):
    out = run("systemctl", "list-units", "--all", "--plain", "--no-legend", f"sandbox-{sid}-shell-*").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def unit_gone(unit):
    p = systemctl_show(unit, "ActiveState", "LoadState")
    return p.get("ActiveState") in ("inactive", "failed") or p.get("LoadState") == "not-found"


def make_key(preset):
    out = run("sandboxctl", "api-key", "create", f"--preset={preset}", "--json").stdout
    return json.loads(out)["secret"]


def takeover_rows(sid):
    bus = dbus.SystemBus()
    log = dbus.Interface(bus.get_object(AUDIT[0], AUDIT[1], introspect=False), AUDIT[2])
    f = dbus.Dictionary({"session_id": sid, "operation": "takeover"}, signature="sv")
    return [{str(k): v for k, v in r.items()} for r in log.GetLog(f, dbus.UInt64(100), dbus.UInt64(0), timeout=LONG)]


def ws_url(sid, base=GW, **query):
    q = "&".join(f"{k}={v}" for k, v in query.items())
    return base.replace("http://", "ws://") + f"/v1/sandboxes/{sid}/takeover" + (f"?{q}" if q else "")


class Session:
    """A takeover WebSocket: what came out of it, and how it was closed."""

    def __init__(self, url, key=None, **kw):
        header = [f"Authorization: Bearer {key}"] if key else []
        self.ws = websocket.create_connection(url, header=header, timeout=60, **kw)
        self.out = b""
        self.close_code = None
        self.close_reason = None

    def send(self, data):
        self.ws.send_binary(data.encode() if isinstance(data, str) else data)

    def resize(self, cols, rows):
        self.ws.send(json.dumps({"type": "resize", "cols": cols, "rows": rows}))

    def _recv(self):
        op, frame = self.ws.recv_data_frame(True)
        if op == websocket.ABNF.OPCODE_CLOSE:
            data = frame.data
            self.close_code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else None
            self.close_reason = data[2:].decode(errors="replace")
            return False
        if op == websocket.ABNF.OPCODE_BINARY:
            self.out += frame.data
        return True

    def read_until(self, pattern, start=0):
        rx = re.compile(pattern)
        while not rx.search(self.out, start):
            if not self._recv():
                raise AssertionError(f"closed ({self.close_code}) without {pattern!r}: {self.out[-2000:]!r}")
        return rx.search(self.out, start)

    def read_to_close(self):
        while self._recv():
            pass
        return self.out

    def wait_size(self, size):
        for _ in range(100):
            start = len(self.out)
            self.send("stty size\n")
            if self.read_until(rb"[\r\n](\d+ \d+)\r\n", start).group(1) == size:
                return
            time.sleep(0.1)
        raise AssertionError(f"the terminal never became {size!r}")


def refused(url, key=None, **kw):
    """The HTTP status of a refused upgrade."""
    with pytest.raises(websocket.WebSocketBadStatusException) as e:
        Session(url, key, **kw)
    return e.value.status_code


@pytest.fixture(scope="module")
def gateway():
    run("systemctl", "start", "sandbox-auditd.service", "sandbox-gatewayd.socket")
    wait_for(lambda: requests.get(GW + "/v1/sandboxes", timeout=10).status_code == 401, what="the gateway")
    yield {"admin": make_key("admin"), "member": make_key("member")}


@contextlib.contextmanager
def running_second_gateway():
    """A second gateway process on its own port, sharing the first one's key database."""
    unit = "takeover-gw2.service"
    run("systemd-run", f"--unit={unit}", "-p", "User=sandbox-gateway", "-p", "Group=sandbox-gateway",
        "-p", "StateDirectory=sandbox-gatewayd", "-p", "Type=notify", "-p", "NotifyAccess=main",
        "/usr/libexec/sandboxd/sandbox-gatewayd", f"--listen=127.0.0.1:{GW2_PORT}")
    base = f"http://127.0.0.1:{GW2_PORT}"
    try:
        wait_for(lambda: requests.get(base + "/v1/sandboxes", timeout=10).status_code == 401,
                 what="gateway 2")
        yield base
    finally:
        run("systemctl", "stop", unit, check=False)
        run("systemctl", "reset-failed", unit, check=False)


@pytest.fixture
def second_gateway():
    with running_second_gateway() as base:
        yield base


def mint(sid, key, base=GW):
    r = requests.post(f"{base}/v1/sandboxes/{sid}/takeover-token", headers={"Authorization": f"Bearer {key}"},
                      timeout=60)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["token"].startswith("sbx_tt_") and body["expires_at"].endswith("Z")
    return body["token"]


def test_admin_round_trip_and_recording(mgr, sandbox, gateway):
    sid, path = sandbox()
    uid = int(mgr.props(path)["Uid"])
    code, _, _, _ = mgr.sh(sid, "nohup sleep 4242 >/dev/null 2>&1 &")
    assert code == 0
    s = Session(ws_url(sid, cols=100, rows=30), gateway["admin"])
    units = shell_units(sid)
    assert len(units) == 1 and not unit_gone(units[0])
    s.send("ps -eo args; stty size\n")
    s.read_until(rb"sleep 4242")
    s.read_until(rb"[\r\n]30 100\r\n")
    s.resize(132, 43)
    s.wait_size(b"43 132")
    s.send("echo hi; id -u; exit 3\n")
    out = s.read_to_close()
    assert re.search(rb"[\r\n]hi\r\n", out) and re.search(rf"[\r\n]{uid}\r\n".encode(), out)
    assert s.close_code == 1000 and s.close_reason == "exit 3"
    wait_for(lambda: unit_gone(units[0]), what=f"{units[0]} to stop")

    rows = wait_for(lambda: takeover_rows(sid), timeout=60, what="the takeover row")
    row = rows[0]
    assert str(row["source"]) == "human_takeover" and str(row["account_id"]).startswith("key:")
    assert int(row["exit_code"]) == 3
    n = int(row["id"])
    auth = {"Authorization": f"Bearer {gateway['admin']}"}
    r = requests.get(f"{GW}/v1/sandboxes/{sid}/takeovers/{n}/recording", headers=auth, timeout=60)
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/x-asciicast"
    lines = r.content.decode().splitlines()
    assert json.loads(lines[0])["version"] == 2
    shown = "".join(e[2] for e in map(json.loads, lines[1:]) if e[1] == "o")
    assert "sleep 4242" in shown and re.search(r"[\r\n]hi\r\n", shown)
    # members, other numbers, other sandboxes: no recording
    r = requests.get(f"{GW}/v1/sandboxes/{sid}/takeovers/{n}/recording",
                     headers={"Authorization": f"Bearer {gateway['member']}"}, timeout=60)
    assert r.status_code == 403 and r.json()["code"] == "forbidden"
    for bad in (f"{sid}/takeovers/{n + 100000}", f"{sid}/takeovers/x", f"sb_aaaaaaaaaa/takeovers/{n}"):
        r = requests.get(f"{GW}/v1/sandboxes/{bad}/recording", headers=auth, timeout=60)
        assert r.status_code == 404, bad


def test_member_and_anonymous_are_refused_before_the_upgrade(mgr, sandbox, gateway):
    sid, _ = sandbox()
    assert refused(ws_url(sid), gateway["member"]) == 403
    assert refused(ws_url(sid)) == 401
    assert refused(ws_url(sid), "sbx_live_" + "a" * 52) == 401
    assert refused(ws_url(sid, token="sbx_tt_" + "a" * 52)) == 401
    # a browser page from elsewhere, even with an admin key
    assert refused(ws_url(sid), gateway["admin"], origin="https://evil.example") == 403
    # bad sizes and no such sandbox
    assert refused(ws_url(sid, cols=0, rows=24), gateway["admin"]) == 400
    assert refused(ws_url(sid, cols=80), gateway["admin"]) == 400
    assert refused(ws_url("sb_aaaaaaaaaa"), gateway["admin"]) == 404
    # not a WebSocket at all
    r = requests.get(f"{GW}/v1/sandboxes/{sid}/takeover", headers={"Authorization": f"Bearer {gateway['admin']}"},
                     timeout=60)
    assert r.status_code == 426 and r.json()["code"] == "upgrade_required"
    # a member cannot mint a token either
    r = requests.post(f"{GW}/v1/sandboxes/{sid}/takeover-token",
                      headers={"Authorization": f"Bearer {gateway['member']}"}, timeout=60)
    assert r.status_code == 403
    # none of it made a shell
    assert shell_units(sid) == []
    # the refusals are in the audit log
    rows = wait_for(lambda: [r for r in takeover_rows(sid) if str(r["event"]) == "denied"], timeout=60,
                    what="denied rows")
    assert len(rows) >= 5


def test_member_refusal_is_one_sentence_and_a_human_takeover_row(mgr, sandbox, gateway):
    """Issue 25: a member asking for a token and a member opening the WebSocket are refused with the same
    body text, and both denied rows say what they were, a person's takeover (as sandboxd's own row of a
    takeover that happens does), not "agent"."""
    sid, _ = sandbox()
    member = json.loads(run("sandboxctl", "api-key", "create", "--preset=member", "--json").stdout)
    auth = {"Authorization": f"Bearer {member['secret']}"}
    r = requests.post(f"{GW}/v1/sandboxes/{sid}/takeover-token", headers=auth, timeout=60)
    assert r.status_code == 403 and r.json()["code"] == "forbidden", r.text
    token_body = r.json()
    # the WebSocket route's upgrade request, as a client library sends it (python3-websocket keeps no body)
    r = requests.get(f"{GW}/v1/sandboxes/{sid}/takeover", timeout=60, headers={
        **auth, "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode()})
    assert r.status_code == 403 and r.json()["code"] == "forbidden", r.text
    ws_body = r.json()
    assert token_body["error"] == ws_body["error"] == \
        "This API key lacks the action 'takeover': only admin keys may take over a sandbox."
    account = f"key:{member['apiKey']['id']}"
    rids = {token_body["requestId"], ws_body["requestId"]}

    def both_rows():
        rows = [r for r in takeover_rows(sid) if str(r["request_id"]) in rids]
        return rows if len(rows) == 2 else None

    rows = wait_for(both_rows, timeout=60, what="both denied rows")
    for row in rows:
        assert str(row["event"]) == "denied" and str(row["account_id"]) == account, row
        assert str(row["source"]) == "human_takeover", row
    assert shell_units(sid) == []


def test_token_is_single_use_across_gateways(mgr, sandbox, gateway, second_gateway):
    sid, _ = sandbox()
    other, _ = sandbox()
    token = mint(sid, gateway["admin"])
    # not for another sandbox
    assert refused(ws_url(other, token=token)) == 401
    # once, through the second process
    s = Session(ws_url(sid, base=second_gateway, token=token))
    s.send("exit 0\n")
    s.read_to_close()
    assert s.close_code == 1000
    # never again, through either
    assert refused(ws_url(sid, token=token)) == 401
    assert refused(ws_url(sid, base=second_gateway, token=token)) == 401
    # a token minted by the second works once on the first
    token = mint(sid, gateway["admin"], base=second_gateway)
    s = Session(ws_url(sid, token=token, cols=90, rows=20))
    s.send("stty size; exit\n")
    s.read_until(rb"[\r\n]20 90\r\n")
    s.read_to_close()
    assert refused(ws_url(sid, base=second_gateway, token=token)) == 401


def test_second_gateway_stopping_leaves_the_first_on_shared_files(mgr, sandbox, gateway):
    """The order that once failed, in one test: a second gateway process sharing keys.db starts and stops;
    what the first one stores afterwards must reach a second process started later. Before the fix the
    first gateway held no lock on keys.db, so the second, stopping "last" in its own eyes, removed the -wal
    and -shm files the first kept writing to: the token below was unknown to the next second process
    (401), and a key made then was gone after the first one's restart."""
    sid, _ = sandbox()
    with running_second_gateway():
        pass
    token = mint(sid, gateway["admin"])
    secret = make_key("member")
    with running_second_gateway() as base:
        r = requests.get(base + "/v1/sandboxes", headers={"Authorization": f"Bearer {secret}"}, timeout=LONG)
        assert r.status_code == 200, r.text
        s = Session(ws_url(sid, base=base, token=token))
        s.send("exit 0\n")
        s.read_to_close()
        assert s.close_code == 1000


def test_expired_token(mgr, sandbox, gateway):
    sid, _ = sandbox()
    os.makedirs(DROPIN_DIR, exist_ok=True)
    dropin = os.path.join(DROPIN_DIR, "50-takeover-test.conf")
    with open(dropin, "w") as f:
        f.write("[Gateway]\nTakeoverTokenTTLSec=1\n")
    try:
        run("systemctl", "restart", "sandbox-gatewayd.service")
        token = mint(sid, gateway["admin"])
        r = requests.post(f"{GW}/v1/sandboxes/{sid}/takeover-token",
                          headers={"Authorization": f"Bearer {gateway['admin']}"}, timeout=60)
        assert r.status_code == 201
        # wait until the token's own expiry has passed (the server's clock decides)
        expires = r.json()["expires_at"]
        deadline = time.mktime(time.strptime(expires[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone + 1
        while time.time() < deadline + 0.2:
            time.sleep(0.1)
        assert refused(ws_url(sid, token=token)) == 401
        assert shell_units(sid) == []
    finally:
        os.unlink(dropin)
        run("systemctl", "restart", "sandbox-gatewayd.service")


def test_client_gone_and_protocol_errors_hang_up(mgr, sandbox, gateway):
    sid, _ = sandbox()
    # the client vanishes without a close frame
    s = Session(ws_url(sid), gateway["admin"])
    s.send("sleep 3131\n")
    unit = shell_units(sid)[0]
    wait_for(lambda: b"sleep 3131" in mgr.exec(sid, ["ps", "-eo", "args"])[1], what="the shell's sleep")
    s.ws.sock.shutdown(socket.SHUT_RDWR)
    s.ws.sock.close()
    wait_for(lambda: unit_gone(unit), what=f"{unit} to stop")
    wait_for(lambda: b"sleep 3131" not in mgr.exec(sid, ["ps", "-eo", "args"])[1], what="the sleep to end")

    # an unmasked frame breaks the protocol: 1002, and the shell is hung up
    s = Session(ws_url(sid), gateway["admin"])
    s.read_until(rb"\$ ")
    unit = [u for u in shell_units(sid) if not unit_gone(u)][0]
    s.ws.sock.sendall(bytes([0x82, 3]) + b"ls\n")
    s.read_to_close()
    assert s.close_code == 1002
    wait_for(lambda: unit_gone(unit), what=f"{unit} to stop")

    # a control message that is not one: 1008
    s = Session(ws_url(sid), gateway["admin"])
    s.ws.send(json.dumps({"type": "kill"}))
    s.read_to_close()
    assert s.close_code == 1008


def test_large_output_arrives_whole(mgr, sandbox, gateway):
    sid, _ = sandbox()
    s = Session(ws_url(sid), gateway["admin"])
    # Far more than every buffer on the way (sandboxd, the bridge, the sockets): held back, not dropped.
    s.send("head -c 20000000 /dev/zero | tr '\\000' x; echo; echo DONE; exit\n")
    # Read nothing while it writes: the queues fill and the writer stalls (a pause, not a measurement).
    wait_for(lambda: b"head -c 20000000" in mgr.exec(sid, ["ps", "-eo", "args"])[1], what="the writer")
    time.sleep(1)
    assert b"head -c 20000000" in mgr.exec(sid, ["ps", "-eo", "args"])[1]  # still blocked on its output
    out = s.read_to_close()
    assert out.count(b"x") >= 20000000
    assert re.search(rb"[\r\n]DONE\r\n", out) and s.close_code == 1000


def test_scoped_key_takes_over_its_sandbox_by_name(mgr, sandbox, gateway):
    """The takeover route authenticates itself, so it resolves a scoped key's sandbox name to its id before
    the scope check, as dispatch does for every other route (before, a name was always outside the scope)."""
    name = "tk-" + os.urandom(4).hex()
    sid, _ = sandbox(name=name)
    other, _ = sandbox(name="tk-other-" + os.urandom(4).hex())
    out = run("sandboxctl", "api-key", "create", "--preset=admin", f"--sandboxes={sid}", "--json").stdout
    key = json.loads(out)["secret"]

    s = Session(ws_url(name), key)
    try:
        s.send("echo BY-NAME-$((6*7))\n")
        s.read_until(rb"BY-NAME-42")
        s.send("exit\n")
        s.read_to_close()
    finally:
        s.ws.close()
    rows = takeover_rows(sid)
    assert rows and all(str(r["session_id"]) == sid for r in rows), rows
    # another sandbox's name, and a name that is nobody's, are outside the scope alike
    assert refused(ws_url(other), key) == 403
    assert refused(ws_url("no-such-name-here"), key) == 403
    # an unscoped admin key by name works as before
    s = Session(ws_url(name), gateway["admin"])
    s.ws.close()
