# SPDX-License-Identifier: LGPL-2.1-or-later
# A revoked or expired API key loses its open streams (issue 21, items 4 and 5): takeover WebSockets close
# with 1008 and SSE streams (watch, streamed exec, a process's output follow) end with an error event within
# a second, whether the revocation came through the same gateway process (REST, or the Keys bus interface
# that sandboxctl uses) or through another one sharing keys.db.
import json
import selectors
import socket
import time

import pytest
import requests
import websocket

from conftest import audit_log, run, wait_for
from gateway_helpers import SseReader
from test_takeover_gateway import GW, GW2_PORT, Session, gateway, shell_units, unit_gone, ws_url  # noqa: F401
from test_takeover_gateway import second_gateway  # noqa: F401

# The bound is 1 s from the revocation (or expiry) to the end of the stream; the slack is for
# the test's own client on a loaded machine, not for the gateway.
BOUND = 1.5


def admin_key(*args):
    out = run("sandboxctl", "api-key", "create", "--preset=admin", *args, "--json").stdout
    d = json.loads(out)
    return d["secret"], d["apiKey"]


def rest_revoke(by_secret, key_id, base=GW):
    r = requests.delete(f"{base}/v1/api-keys/{key_id}", headers={"Authorization": f"Bearer {by_secret}"},
                        timeout=60)
    assert r.status_code == 204, r.text


def ctl_revoke(key_id):
    run("sandboxctl", "api-key", "revoke", key_id)


def rfc3339(s):
    return time.mktime(time.strptime(s[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone + float("0" + s[19:-1])


def open_sse(port, method, path, secret, body=b""):
    s = socket.create_connection(("127.0.0.1", port))
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Authorization: Bearer {secret}",
             "Accept: text/event-stream"]
    if body:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    return SseReader(s)


def read_until(rd, pred, timeout=60):
    """Reads rd until pred() holds; returns the monotonic time it did."""
    sel = selectors.DefaultSelector()
    rd.sock.setblocking(False)
    sel.register(rd.sock, selectors.EVENT_READ)
    end = time.monotonic() + timeout
    try:
        while not pred():
            if time.monotonic() > end:
                raise AssertionError(f"timed out: {rd.events[-3:]!r}, closed={rd.closed}")
            if rd.closed:
                raise AssertionError(f"the stream ended first: {rd.events[-3:]!r}")
            if sel.select(timeout=0.2):
                try:
                    rd.feed(rd.sock.recv(65536))
                except BlockingIOError:
                    pass
        return time.monotonic()
    finally:
        sel.close()


def assert_cut(rd, message):
    """The stream's last event is the 401 error body, and the stream is over."""
    last = rd.events[-1]
    assert last["event"] == "error", rd.events[-3:]
    body = json.loads(last["data"])
    assert body["status"] == 401 and body["code"] == "unauthorized" and body["error"] == message, body
    # nothing after it: the response's last chunk follows
    n = len(rd.events)
    sel = selectors.DefaultSelector()
    sel.register(rd.sock, selectors.EVENT_READ)
    end = time.monotonic() + 10
    while not rd.closed and time.monotonic() < end:
        if sel.select(timeout=0.2):
            rd.feed(rd.sock.recv(65536))
    sel.close()
    assert rd.closed and len(rd.events) == n, rd.events[n - 1:]
    rd.sock.close()


def exec_log_rows(secret, sid):
    r = requests.get(f"{GW}/v1/sandboxes/{sid}/log", headers={"Authorization": f"Bearer {secret}"}, timeout=60)
    return r.json()["entries"]


def close_time(s, timeout=30):
    """Reads the session to its close frame; the monotonic time it came. The server's pings would keep a
    plain blocking read waiting for ever, so the deadline is ours."""
    s.ws.settimeout(0.2)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if not s._recv():
                return time.monotonic()
        except websocket.WebSocketTimeoutException:
            pass
    raise AssertionError(f"no close frame within {timeout} s: {s.out[-500:]!r}")


@pytest.mark.parametrize("via", ["rest", "bus"])
def test_revoked_key_ends_its_takeover(mgr, sandbox, gateway, via):
    sid, _ = sandbox()
    secret, key = admin_key()
    s = Session(ws_url(sid), secret)
    s.send("echo ready-$((6*7))\n")
    s.read_until(rb"ready-42")
    unit = shell_units(sid)[0]
    t0 = time.monotonic()
    if via == "rest":
        rest_revoke(gateway["admin"], key["id"])
    else:
        ctl_revoke(key["id"])
    t1 = close_time(s)
    assert s.close_code == 1008 and s.close_reason == "API key revoked", (s.close_code, s.close_reason)
    assert t1 - t0 < BOUND, f"closed {t1 - t0:.3f} s after the revocation"
    print(f"takeover closed {t1 - t0:.3f} s after the revocation ({via})")
    # the shell is hung up and its scope stopped
    wait_for(lambda: unit_gone(unit), what=f"{unit} to stop")
    # and the key opens nothing new
    with pytest.raises(Exception):
        Session(ws_url(sid), secret)


def test_revocation_through_another_gateway_ends_a_takeover(mgr, sandbox, gateway, second_gateway):
    sid, _ = sandbox()
    secret, key = admin_key()
    # opened through the second process, revoked through the first (sandboxctl → its Keys interface)
    s = Session(ws_url(sid, base=second_gateway), secret)
    s.send("echo ready-$((6*7))\n")
    s.read_until(rb"ready-42")
    unit = shell_units(sid)[0]
    t0 = time.monotonic()
    ctl_revoke(key["id"])
    t1 = close_time(s)
    assert s.close_code == 1008 and s.close_reason == "API key revoked", (s.close_code, s.close_reason)
    assert t1 - t0 < BOUND, f"closed {t1 - t0:.3f} s after the revocation"
    print(f"takeover on the other gateway closed {t1 - t0:.3f} s after the revocation")
    wait_for(lambda: unit_gone(unit), what=f"{unit} to stop")


def test_expired_key_ends_its_takeover(mgr, sandbox, gateway):
    sid, _ = sandbox()
    secret, key = admin_key("--ttl=4s")
    expires = rfc3339(key["expiresAt"])
    s = Session(ws_url(sid), secret)
    s.send("echo ready-$((6*7))\n")
    s.read_until(rb"ready-42")
    assert time.time() < expires, "the key expired before the test could type (machine too slow)"
    close_time(s)
    late = time.time() - expires
    assert s.close_code == 1008 and s.close_reason == "API key expired", (s.close_code, s.close_reason)
    assert -0.05 < late < BOUND, f"closed {late:.3f} s after the expiry"
    print(f"takeover closed {late:.3f} s after the key expired")


def test_typing_after_revocation_reaches_nothing(mgr, sandbox, gateway):
    sid, _ = sandbox()
    secret, key = admin_key()
    s = Session(ws_url(sid), secret)
    s.send("echo ready-$((6*7))\n")
    s.read_until(rb"ready-42")
    rest_revoke(gateway["admin"], key["id"])
    # the close may not be read yet: whatever is typed now must not run
    try:
        s.send("touch /tmp/typed-after-revoke\n")
    except Exception:
        pass
    close_time(s)
    assert s.close_code == 1008
    time.sleep(0.5)  # a pause for a command that would have run, not a measurement
    code, _, _, _ = mgr.sh(sid, "test -e /tmp/typed-after-revoke")
    assert code == 1


@pytest.mark.parametrize("via", ["rest", "bus"])
def test_revoked_key_ends_its_watch(mgr, sandbox, gateway, via):
    sid, _ = sandbox()
    secret, key = admin_key()
    w = open_sse(8790, "GET", f"/v1/sandboxes/{sid}/watch", secret)
    read_until(w, lambda: w.headers_done and w.comments >= 1)
    assert w.status == 200
    mgr.exec(sid, ["echo", "before"])
    read_until(w, lambda: any(e["event"] == "entry" for e in w.events))
    t0 = time.monotonic()
    if via == "rest":
        rest_revoke(gateway["admin"], key["id"])
    else:
        ctl_revoke(key["id"])
    t1 = read_until(w, lambda: w.events[-1]["event"] == "error")
    assert t1 - t0 < BOUND, f"ended {t1 - t0:.3f} s after the revocation"
    print(f"watch ended {t1 - t0:.3f} s after the revocation ({via})")
    assert_cut(w, "The API key has been revoked.")


def test_revocation_through_another_gateway_ends_a_watch(mgr, sandbox, gateway, second_gateway):
    sid, _ = sandbox()
    secret, key = admin_key()
    w = open_sse(GW2_PORT, "GET", f"/v1/sandboxes/{sid}/watch", secret)
    read_until(w, lambda: w.headers_done and w.comments >= 1)
    assert w.status == 200
    # revoked through the first process's REST API
    t0 = time.monotonic()
    rest_revoke(gateway["admin"], key["id"])
    t1 = read_until(w, lambda: w.events and w.events[-1]["event"] == "error")
    assert t1 - t0 < BOUND, f"ended {t1 - t0:.3f} s after the revocation"
    print(f"watch on the other gateway ended {t1 - t0:.3f} s after the revocation")
    assert_cut(w, "The API key has been revoked.")
    # rows written afterwards reach nobody (the stream is over), and the key reads nothing more
    mgr.exec(sid, ["echo", "after"])
    r = requests.get(f"http://127.0.0.1:{GW2_PORT}/v1/sandboxes/{sid}/log",
                     headers={"Authorization": f"Bearer {secret}"}, timeout=60)
    assert r.status_code == 401


def test_expired_key_ends_its_watch(mgr, sandbox, gateway):
    sid, _ = sandbox()
    secret, key = admin_key("--ttl=3s")
    expires = rfc3339(key["expiresAt"])
    w = open_sse(8790, "GET", f"/v1/sandboxes/{sid}/watch", secret)
    read_until(w, lambda: w.headers_done and w.comments >= 1)
    read_until(w, lambda: w.events and w.events[-1]["event"] == "error")
    late = time.time() - expires
    assert -0.05 < late < BOUND, f"ended {late:.3f} s after the expiry"
    print(f"watch ended {late:.3f} s after the key expired")
    assert_cut(w, "The API key has expired.")


def revoke_after_output(rd, key):
    """Once rd (a streamed exec or a process follow) has output, the key is revoked: the stream is cut
    within BOUND by the 401 error event, with no exit event."""
    read_until(rd, lambda: any(e["event"] == "stdout" for e in rd.events))
    t0 = time.monotonic()
    ctl_revoke(key["id"])
    t1 = read_until(rd, lambda: rd.events[-1]["event"] == "error")
    assert t1 - t0 < BOUND, f"ended {t1 - t0:.3f} s after the revocation"
    assert_cut(rd, "The API key has been revoked.")
    assert not any(e["event"] == "exit" for e in rd.events)


def test_revoked_key_ends_a_streamed_exec(mgr, sandbox, gateway):
    sid, _ = sandbox()
    secret, key = admin_key()
    body = json.dumps({"command": "echo started; sleep 30; echo never"}).encode()
    x = open_sse(8790, "POST", f"/v1/sandboxes/{sid}/exec?stream=true", secret, body)
    revoke_after_output(x, key)
    # nobody reads it any more: the command is cancelled
    rows = wait_for(lambda: [r for r in audit_log(sid, operation="exec") if r["event"] == "cancelled"],
                    timeout=10, what="the streamed Exec's row saying cancelled")
    assert len(rows) == 1 and json.loads(rows[0]["detail"])["streamed"], rows


def test_revoked_key_ends_a_process_follow(mgr, sandbox, gateway):
    """A follow of a process's output is cut like a watch; the process itself goes on."""
    sid, _ = sandbox()
    secret, key = admin_key()
    auth = {"Authorization": f"Bearer {secret}"}
    r = requests.post(f"{GW}/v1/sandboxes/{sid}/processes", json={"argv": ["sh", "-c", "echo up; exec cat"]},
                      headers=auth, timeout=60)
    assert r.status_code == 201, r.text
    pid = r.json()["id"]
    f = open_sse(8790, "GET", f"/v1/sandboxes/{sid}/processes/{pid}/output?follow=true&stream=both", secret)
    revoke_after_output(f, key)
    r = requests.get(f"{GW}/v1/sandboxes/{sid}/processes/{pid}",
                     headers={"Authorization": f"Bearer {gateway['admin']}"}, timeout=60)
    assert r.status_code == 200 and r.json()["state"] == "running", r.text
    r = requests.get(f"{GW}/v1/sandboxes/{sid}/processes/{pid}/output", headers=auth, timeout=60)
    assert r.status_code == 401
