# SPDX-License-Identifier: LGPL-2.1-or-later
# The gateway stays available to well-behaved clients (issue 21, items 1 and 2): one key's long calls, idle
# connections and connections that trickle their headers cannot lock anyone else out, and an Exec whose
# client left is cancelled.
import json
import socket
import time

import pytest

from conftest import audit_log, wait_for
from gateway_helpers import (Client, admin, assert_error, cli_key, gateway_config, gateway_up,  # noqa: F401,F811
                             raw_request, read_to_eof, up)


def test_one_key_cannot_take_every_call(admin, gateway_config):
    """A member key at MaxCallsPerMemberKey= calls in flight gets 429 too_many_calls; another key is still
    served. A client that leaves while its Exec runs (shutting its sending side, or closing its socket) has
    its connection closed at once and its command cancelled: within 10 s the command is gone from the
    sandbox, its audit row says "cancelled", and the key has its three calls in flight back."""
    gateway_config("MaxCallsPerMemberKey=3\nBusConnections=1\n")
    r = admin.post("/v1/sandboxes", {"type": "small"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    exec_path = f"/v1/sandboxes/{sid}/exec"
    try:
        member, key = admin.mint(preset="member", ttl_seconds=600)
        body = json.dumps({"argv": ["sleep", "60"], "timeout_seconds": 90}).encode()
        held = [raw_request("POST", exec_path, member.secret, ["Content-Type: application/json"], body)
                for _ in range(3)]

        def refused():
            # a short call as the probe: an Exec made before the three are in would wait for their room
            r = member.get(f"/v1/sandboxes/{sid}")
            assert r.status_code in (200, 429), r.text
            return r.status_code == 429  # (a Response with an error status is false)
        wait_for(refused, timeout=6, what="the key's calls in flight to reach the limit")
        r = member.post(exec_path, {"argv": ["true"]})
        body = assert_error(r, 429, "too_many_calls")
        assert "MaxCallsPerMemberKey=" in body["error"] and r.headers["Retry-After"] == "1", (body, r.headers)
        # another key is served
        assert admin.get(f"/v1/sandboxes/{sid}", timeout=10).status_code == 200
        wait_for(lambda: admin.post(exec_path, {"argv": ["pgrep", "-c", "-x", "sleep"]},
                                    timeout=30).json()["stdout"] == "3\n", what="the three commands to run")

        # the clients leave: two shut their sending side (no answer, their connections are closed), one
        # closes its socket
        t0 = time.monotonic()
        for s in held[:2]:
            s.shutdown(socket.SHUT_WR)
            s.settimeout(30)
        held[2].close()
        for s in held[:2]:
            assert read_to_eof(s) == b""

        # their commands are cancelled, each recorded
        account = "key:" + key["id"]

        def cancelled():
            rows = [r for r in audit_log(sid, operation="exec") if r["account_id"] == account and
                    r["event"] == "cancelled"]
            return rows if len(rows) >= 3 else None
        rows = wait_for(cancelled, timeout=10, what="the three Execs' rows saying cancelled")
        print(f"cancelled {time.monotonic() - t0:.3f} s after the clients left")
        assert len(rows) == 3 and all(r["exit_code"] >= 128 for r in rows), rows
        assert not [r for r in audit_log(sid, operation="exec") if r["account_id"] == account and
                    r["event"] == "finished"]
        # gone from the sandbox
        r = admin.post(exec_path, {"argv": ["pgrep", "-x", "sleep"]}, timeout=30)
        assert r.status_code == 200 and r.json()["exit_code"] == 1, r.text

        # the key's three calls are free again: three Execs at once are all served (the replies that free
        # them reach the gateway right after the rows are written: a few tries at most)
        def three_at_once():
            socks = [raw_request("POST", exec_path, member.secret, ["Content-Type: application/json",
                                                                    "Connection: close"],
                                 json.dumps({"argv": ["sleep", "1"]}).encode()) for _ in range(3)]
            for s in socks:
                s.settimeout(30)
            answers = [read_to_eof(s) for s in socks]
            return all(a.startswith(b"HTTP/1.1 200") for a in answers)
        wait_for(three_at_once, timeout=10, what="three calls at once from the key")
    finally:
        admin.delete(f"/v1/sandboxes/{sid}")


def test_exec_starts_per_key(admin, gateway_config):
    """A member key past ExecBurstPerMemberKey= Execs at once (then ExecsPerSecPerMemberKey= a second) gets
    429 too_many_execs with Retry-After, before anything runs, also for a streamed Exec; its other requests
    and another key's Execs are served; the budget refills at its rate; the refused Execs are counted in
    one row (exec, blocked) once the key has been refused none for a while."""
    gateway_config("ExecBurstPerMemberKey=3\nExecsPerSecPerMemberKey=1\n")
    r = admin.post("/v1/sandboxes", {"type": "small"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    exec_path = f"/v1/sandboxes/{sid}/exec"
    try:
        member, key = admin.mint(preset="member", ttl_seconds=600)
        other, _ = admin.mint(preset="member", ttl_seconds=600)
        # the three at once, then (the budget refilling at one a second while they run) a 429 soon
        t0 = time.monotonic()
        ok = 0
        for _ in range(30):
            r = member.post(exec_path, {"command": "echo started >> /tmp/starts"}, timeout=30)
            if r.status_code != 200:
                break
            ok += 1
        elapsed = time.monotonic() - t0
        body = assert_error(r, 429, "too_many_execs")
        assert 3 <= ok <= 3 + int(elapsed) + 1, (ok, elapsed)
        assert "ExecBurstPerMemberKey=" in body["error"] and r.headers["Retry-After"] == "1", (body, r.headers)
        refused_ids = [body["requestId"]]
        # streamed: refused the same way, before any stream is opened
        r = member.post(exec_path + "?stream=true", {"command": "echo started >> /tmp/starts"}, timeout=30)
        if r.status_code == 429:
            refused_ids.append(assert_error(r, 429, "too_many_execs")["requestId"])
        # the key's other requests are not Exec starts; another key has its own budget
        assert member.get(f"/v1/sandboxes/{sid}", timeout=30).status_code == 200
        r = other.post(exec_path, {"command": "wc -l < /tmp/starts"}, timeout=30)
        assert r.status_code == 200, r.text
        ran = int(r.json()["stdout"])
        # nothing of the refused ran, nor has a row of its own
        assert ran == ok + (len(refused_ids) == 1), (ran, ok, refused_ids)
        rows = audit_log(sid, operation="exec")
        assert not [x for x in rows if x["request_id"] in refused_ids], rows

        # the budget refills at one a second: after 3 s (Retry-After said 1) there is room again
        time.sleep(3)
        r = member.post(exec_path, {"argv": ["true"]}, timeout=30)
        assert r.status_code == 200, r.text

        # one row counts the refused, once the key has been refused none for 10 s
        account = "key:" + key["id"]

        def summary():
            return [x for x in audit_log(operation="exec", account_id=account) if x["event"] == "blocked"]
        rows = wait_for(summary, timeout=60, what="the summary row of the refused Execs")
        assert len(rows) == 1 and rows[0]["session_id"] == "", rows
        detail = json.loads(rows[0]["detail"])
        assert detail["code"] == "too_many_execs" and detail["status"] == 429, detail
        assert detail["refused"] >= len(refused_ids) and detail["burst"] == 3 and detail["per_sec"] == 1, detail
        assert detail["role"] == "member", detail
    finally:
        admin.delete(f"/v1/sandboxes/{sid}")


def test_a_streamed_exec_whose_client_left_is_cancelled(admin):
    """A streamed Exec's client closes its socket after the first output: the command is cancelled (its
    row says so, with what it wrote) and gone from the sandbox within 10 s."""
    r = admin.post("/v1/sandboxes", {"type": "small"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    exec_path = f"/v1/sandboxes/{sid}/exec"
    try:
        body = {"command": "echo started; sleep 60; echo never", "timeout_seconds": 90}
        s = raw_request("POST", exec_path + "?stream=true", admin.secret, ["Content-Type: application/json"],
                        json.dumps(body).encode())
        s.settimeout(30)
        seen = b""
        while b"started" not in seen:
            chunk = s.recv(65536)
            assert chunk, seen
            seen += chunk
        s.close()
        rows = wait_for(lambda: [x for x in audit_log(sid, operation="exec") if x["event"] == "cancelled"],
                        timeout=10, what="the row saying cancelled")
        assert len(rows) == 1 and json.loads(rows[0]["detail"])["streamed"], rows
        r = admin.post(exec_path, {"argv": ["pgrep", "-x", "sleep"]}, timeout=30)
        assert r.status_code == 200 and r.json()["exit_code"] == 1, r.text
    finally:
        admin.delete(f"/v1/sandboxes/{sid}")


def test_a_waiting_exec_whose_client_left_never_runs(admin, gateway_config):
    """With room on the bus for one Exec at a time, a second waits; its client leaves, and it is dropped
    rather than run later for nobody. A short call goes by the Execs all along."""
    gateway_config("BusConnections=1\nBusShortCallReserve=119\n")
    r = admin.post("/v1/sandboxes", {"type": "small"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    try:
        member, key = admin.mint(preset="member", ttl_seconds=600)
        exec_path = f"/v1/sandboxes/{sid}/exec"
        first = raw_request("POST", exec_path, member.secret, ["Content-Type: application/json",
                                                               "Connection: close"],
                            json.dumps({"command": "touch /tmp/first; sleep 6"}).encode())
        wait_for(lambda: admin.get(f"/v1/sandboxes/{sid}/files", params={"path": "/tmp/first"}).ok,
                 what="the first Exec to run")
        second = raw_request("POST", exec_path, member.secret, ["Content-Type: application/json"],
                             json.dumps({"command": "touch /tmp/second"}).encode())
        # it waits (the room for Execs is taken) while short calls go by
        assert admin.get(f"/v1/sandboxes/{sid}", timeout=10).status_code == 200
        second.shutdown(socket.SHUT_WR)
        second.settimeout(30)
        assert read_to_eof(second) == b""
        # an Exec made after it starts once the first ends; had the second not been dropped, it would have
        # run before this one (Execs leave their queue in order)
        r = admin.post(exec_path, {"command": "test -e /tmp/second && echo ran || echo dropped"}, timeout=60)
        assert r.status_code == 200 and r.json()["stdout"] == "dropped\n", r.text
        first.settimeout(30)
        assert read_to_eof(first).startswith(b"HTTP/1.1 200")
    finally:
        admin.delete(f"/v1/sandboxes/{sid}")


def closed_by_peer(s):
    """Has the gateway closed s? (non-blocking; whatever it sent is discarded)"""
    try:
        while True:
            data = s.recv(65536, socket.MSG_DONTWAIT)
            if not data:
                return True
    except BlockingIOError:
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True


def test_idle_and_trickling_clients_cannot_lock_out(admin, gateway_config):
    """One address gets MaxConnectionsPerAddress= connections, more are closed at once; a connection that
    trickles its headers is closed at HeaderTimeoutSec= however often it sends; a valid key from another
    address is served all along."""
    gateway_config("MaxConnectionsPerAddress=8\nHeaderTimeoutSec=5\n")
    socks = []
    for _ in range(12):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.2", 0))
        s.connect(("127.0.0.1", 8790))
        s.sendall(b"GET /v1/sandboxes HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        socks.append(s)
    # beyond the eight, closed at once (well before the header deadline)
    wait_for(lambda: sum(map(closed_by_peer, socks)) >= 4, timeout=3, what="the connections beyond the limit")
    assert sum(map(closed_by_peer, socks)) == 4
    assert admin.get("/v1/sandboxes", timeout=10).status_code == 200

    # the eight trickle a header line every 0.3 s: closed at the deadline all the same
    def trickle():
        for s in socks:
            try:
                s.sendall(b"X-Pad: 1\r\n")
            except OSError:
                pass
        return all(closed_by_peer(s) for s in socks)
    end = time.monotonic() + 30
    while not trickle():
        assert time.monotonic() < end, "trickling connections still open after 30 s (HeaderTimeoutSec=5)"
        assert admin.get("/v1/sandboxes", timeout=10).status_code == 200
        time.sleep(0.3)
    for s in socks:
        s.close()
    # a fresh connection from the same address is served
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.2", 0))
    s.connect(("127.0.0.1", 8790))
    s.sendall(("GET /v1/sandboxes HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
               f"Authorization: Bearer {admin.secret}\r\n\r\n").encode())
    s.settimeout(30)
    assert read_to_eof(s).startswith(b"HTTP/1.1 200")
