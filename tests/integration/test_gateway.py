# SPDX-License-Identifier: LGPL-2.1-or-later
# sandbox-gatewayd over real HTTP (requests, curl, raw sockets): the reference flow, response shapes,
# encodings, streamed exec, log pages, watch with resume, many watchers beside one that never reads, and
# bad input that must change nothing.
import base64
import json
import re
import selectors
import socket
import threading
import time

import pytest

from conftest import audit_log, run, systemctl_show, wait_for
from gateway_helpers import (BASE, Client, SseReader, admin, assert_error, cli_key, curl,  # noqa: F401,F811
                             gateway_config, gateway_pid, gateway_up, raw_request, read_to_eof, up)

SESSION_REQUIRED = {"event": "error",
                    "error": "Creating API keys needs a dashboard or CLI session, or an admin-scoped key.",
                    "code": "session_required", "status": 403}
TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
SANDBOX_FIELDS = {"id", "name", "type", "state", "network", "image", "egress_policy", "egress", "owner",
                  "created_at", "expires_at", "limits", "paused", "paused_at"}
RESULT_FIELDS = {"exit_code", "stdout", "stderr", "stdout_truncated", "stderr_truncated", "duration_ms",
                 "timed_out", "oom_killed"}


@pytest.fixture
def sandboxes(admin):
    """Sandboxes made through the gateway, deleted afterwards with the admin key."""
    made = []

    def make(client=None, **body):
        body.setdefault("type", "small")
        r = (client or admin).post("/v1/sandboxes", body)
        assert r.status_code == 201, r.text
        made.append(r.json()["id"])
        return r.json()

    yield make
    for sid in made:
        admin.delete(f"/v1/sandboxes/{sid}")


def exec_(client, sid, **body):
    r = client.post(f"/v1/sandboxes/{sid}/exec", body)
    assert r.status_code == 200, r.text
    return r.json()


def test_reference_flow(admin):
    runner, key = admin.mint(name="runner", preset="runner", ttl_seconds=7200)
    assert key["role"] == "member" and key["expiresAt"] is not None

    r = runner.post("/v1/sandboxes", {"type": "small"})
    assert r.status_code == 201, r.text
    sb = r.json()
    sid = sb["id"]
    assert sb["owner"] == f"key:{key['id']}" and sb["state"] == "running"

    task = b"import sys, time\nprint('task ran', sum(range(10)))\nsys.stdout.flush()\ntime.sleep(3)\n"
    r = runner.put(f"/v1/sandboxes/{sid}/files", task, params={"path": "task.py"})
    assert r.status_code == 204, r.text

    # The exec runs in a thread while the test looks at its scope (the sandbox's first Exec has a scope of
    # its own, with the type's limits).
    result = {}
    t = threading.Thread(target=lambda: result.update(exec_(runner, sid, argv=["python3", "task.py"])))
    t.start()

    def scope():
        out = run("systemctl", "list-units", "--type=scope", "--all", "--plain", "--no-legend",
                  f"sandbox-{sid}-exec-*").stdout.split()
        units = sorted(u for u in out if u.startswith(f"sandbox-{sid}-exec-"))
        return units[0] if units else None

    unit = wait_for(scope, what="the exec's scope")
    props = systemctl_show(unit, "TasksMax", "MemoryMax", "RuntimeMaxUSec")
    t.join()
    assert props == {"TasksMax": "256", "MemoryMax": str(1 << 30), "RuntimeMaxUSec": "20s"}
    assert result["exit_code"] == 0 and result["stdout"] == "task ran 45\n", result

    r = runner.delete(f"/v1/sandboxes/{sid}")
    assert r.status_code == 204, r.text
    assert_error(admin.get(f"/v1/sandboxes/{sid}"), 404, "not_found")

    # The runner may not mint keys, least of all an admin key: exactly the reference API's answer.
    r = runner.post("/v1/api-keys", {"preset": "admin"})
    body = assert_error(r, 403, "session_required")
    assert {k: v for k, v in body.items() if k != "requestId"} == SESSION_REQUIRED
    assert body["requestId"].startswith("req_")
    # nothing was made
    assert all(k["role"] != "admin" or k["id"] != key["id"] for k in admin.get("/v1/api-keys").json()["api_keys"])


def test_shapes(admin, sandboxes):
    sb = sandboxes(name="shape-test", ttl_seconds=600)
    assert set(sb) == SANDBOX_FIELDS
    assert sb["name"] == "shape-test" and sb["type"] == "small" and sb["network"] == "none"
    assert sb["egress_policy"] is None and sb["egress"] is None  # network egress only
    assert TIME_RE.match(sb["created_at"]) and TIME_RE.match(sb["expires_at"])
    assert sb["limits"]["memory_max"] == 1 << 30 and sb["limits"]["tasks_max"] == 256

    r = admin.get(f"/v1/sandboxes/{sb['id']}")
    assert r.status_code == 200 and r.json() == sb
    assert re.match(r"^req_[a-z2-7]{20}$", r.headers["X-Request-Id"])

    listed = admin.get("/v1/sandboxes").json()
    assert set(listed) == {"sandboxes"}
    assert sb in listed["sandboxes"]

    r = admin.patch(f"/v1/sandboxes/{sb['id']}", {"ttl_seconds": 7200})
    assert r.status_code == 200, r.text
    assert r.json()["expires_at"] > sb["expires_at"]

    # a request id of the client's own is kept
    r = admin.get("/v1/sandboxes", headers={"X-Request-Id": "my-trace.42"})
    assert r.headers["X-Request-Id"] == "my-trace.42"

    # by name where an id goes: sandboxd takes either; the log (rows name the id) is looked up by id
    assert admin.get("/v1/sandboxes/shape-test").json() == admin.get(f"/v1/sandboxes/{sb['id']}").json()
    exec_(admin, "shape-test", command="true")
    log_ids(admin, sb["id"], 1)  # the exec's row is there (recorded after the reply)
    by_name = admin.get("/v1/sandboxes/shape-test/log").json()["entries"]
    assert by_name and by_name == admin.get(f"/v1/sandboxes/{sb['id']}/log").json()["entries"]
    assert_error(admin.get("/v1/sandboxes/no-such-name/log"), 404, "not_found")

    res = exec_(admin, sb["id"], command="echo out; echo err >&2; exit 3")
    assert set(res) == RESULT_FIELDS
    assert res["exit_code"] == 3 and res["stdout"] == "out\n" and res["stderr"] == "err\n"

    # files round trip, binary safe
    data = bytes(range(256)) * 4
    assert admin.put(f"/v1/sandboxes/{sb['id']}/files", data, params={"path": "/tmp/bin"}).status_code == 204
    r = admin.get(f"/v1/sandboxes/{sb['id']}/files", params={"path": "/tmp/bin"})
    assert r.status_code == 200 and r.content == data
    r = admin.get(f"/v1/sandboxes/{sb['id']}/files", params={"path": "/tmp/bin", "offset": 10, "length": 5})
    assert r.content == data[10:15]
    assert_error(admin.get(f"/v1/sandboxes/{sb['id']}/files", params={"path": "/tmp/nope"}), 404, "not_found")


def test_encodings(admin, sandboxes):
    sid = sandboxes()["id"]
    # invalid UTF-8 becomes U+FFFD; base64 gives the bytes
    script = "printf 'a\\377b\\303'; printf '\\316\\273' >&2"
    res = exec_(admin, sid, command=script)
    assert res["stdout"] == "a\ufffdb\ufffd" and res["stderr"] == "\u03bb"
    res = exec_(admin, sid, command=script, encoding="base64")
    assert base64.b64decode(res["stdout"]) == b"a\xffb\xc3"
    assert base64.b64decode(res["stderr"]) == "\u03bb".encode()
    # stdin both ways
    res = exec_(admin, sid, argv=["cat"], stdin="h\u00e9llo")
    assert res["stdout"] == "h\u00e9llo"
    raw = b"\x00\x01\xfe\xff"
    res = exec_(admin, sid, argv=["cat"], stdin=base64.b64encode(raw).decode(), encoding="base64")
    assert base64.b64decode(res["stdout"]) == raw
    assert_error(admin.post(f"/v1/sandboxes/{sid}/exec", {"argv": ["cat"], "stdin": "***", "encoding": "base64"}),
                 400, "invalid_request")
    assert_error(admin.post(f"/v1/sandboxes/{sid}/exec", {"argv": ["cat"], "encoding": "latin1"}),
                 400, "invalid_request")


def parse_sse(text):
    events = []
    for block in text.split("\n\n"):
        ev = {}
        for line in block.split("\n"):
            if line and not line.startswith(":"):
                k, _, v = line.partition(": ")
                ev[k] = v
        if ev:
            events.append(ev)
    return events


def test_streamed_exec(admin, sandboxes):
    sid = sandboxes()["id"]
    # a multi-byte character split across two writes stays one character
    cmd = "printf 'one\\n'; sleep 0.2; printf '\\316'; sleep 0.2; printf '\\273\\n'; echo warn >&2; exit 7"
    r = admin.post(f"/v1/sandboxes/{sid}/exec", {"command": cmd}, headers={"Accept": "text/event-stream"},
                   stream=True)
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/event-stream"
    events = parse_sse(r.content.decode())
    out = "".join(json.loads(e["data"])["data"] for e in events if e["event"] == "stdout")
    err = "".join(json.loads(e["data"])["data"] for e in events if e["event"] == "stderr")
    assert out == "one\n\u03bb\n" and err == "warn\n"
    assert events[-1]["event"] == "exit"
    res = json.loads(events[-1]["data"])
    assert set(res) == RESULT_FIELDS and res["exit_code"] == 7

    # the same with curl and ?stream=true, base64
    p = curl("-N", "-H", f"Authorization: Bearer {admin.secret}", "-d",
             json.dumps({"command": "printf '\\377'", "encoding": "base64"}),
             f"{BASE}/v1/sandboxes/{sid}/exec?stream=true")
    events = parse_sse(p.stdout)
    assert [e.get("event") for e in events] == ["stdout", "exit"], p.stdout + p.stderr
    assert base64.b64decode(json.loads(events[0]["data"])["data"]) == b"\xff"

    # errors before the command runs are plain JSON errors
    r = admin.post("/v1/sandboxes/sb_aaaaaaaaaa/exec", {"command": "true"}, headers={"Accept": "text/event-stream"})
    assert_error(r, 404, "not_found")


def test_streamed_exec_slow_reader_loses_nothing(admin, sandboxes):
    """8 MiB of output to a client that pauses: the gateway stops reading the pipes (and the command waits)
    past its high-water mark, and every byte still arrives, in order."""
    sid = sandboxes()["id"]
    size = 8 << 20
    s = raw_request("POST", f"/v1/sandboxes/{sid}/exec?stream=true", admin.secret,
                    ["Content-Type: application/json"],
                    json.dumps({"command": f"head -c {size} /dev/zero | tr '\\0' x; echo done >&2",
                                "timeout_seconds": 120}).encode(), rcvbuf=4096)
    time.sleep(2)  # not a measurement: the client just does not read for a while
    rd = SseReader(s)
    read_until([rd], lambda: rd.closed or any(e["event"] == "exit" for e in rd.events), timeout=300)
    out = "".join(json.loads(e["data"])["data"] for e in rd.events if e["event"] == "stdout")
    err = "".join(json.loads(e["data"])["data"] for e in rd.events if e["event"] == "stderr")
    assert len(out) == size and set(out) == {"x"} and err == "done\n"
    assert json.loads(rd.events[-1]["data"])["exit_code"] == 0
    s.close()


def test_log_pages_and_output(admin, sandboxes):
    sid = sandboxes()["id"]
    for i in range(5):
        exec_(admin, sid, command=f"echo line{i}")
    rows = wait_for(lambda: (lambda j: len(j["entries"]) >= 6 and j)(
        admin.get(f"/v1/sandboxes/{sid}/log", params={"limit": 100}).json()), what="rows")
    ids = [e["id"] for e in rows["entries"]]
    assert ids == sorted(ids, reverse=True)

    p1 = admin.get(f"/v1/sandboxes/{sid}/log", params={"limit": 2, "offset": 0}).json()
    p2 = admin.get(f"/v1/sandboxes/{sid}/log", params={"limit": 2, "offset": 2}).json()
    assert (p1["limit"], p1["offset"], p2["offset"]) == (2, 0, 2)
    assert [e["id"] for e in p1["entries"] + p2["entries"]] == ids[:4]
    e = p1["entries"][0]
    assert e["session_id"] == sid and e["operation"] == "exec" and TIME_RE.match(e["started_at"])
    assert isinstance(e["detail"], dict) and isinstance(e["output_truncated"], dict)

    g = admin.get("/v1/log", params={"session_id": sid, "operation": "exec", "limit": 10}).json()
    assert [x["id"] for x in g["entries"]] == [x["id"] for x in rows["entries"] if x["operation"] == "exec"]

    out = admin.get(f"/v1/log/{e['id']}/output")
    assert out.status_code == 200 and out.json()["stdout"] == "line4\n"
    assert base64.b64decode(admin.get(f"/v1/log/{e['id']}/output?encoding=base64").json()["stdout"]) == b"line4\n"
    assert_error(admin.get("/v1/log/999999999/output"), 404, "not_found")
    assert_error(admin.get(f"/v1/sandboxes/{sid}/log", params={"limit": "x"}), 400, "invalid_request")
    assert_error(admin.get(f"/v1/sandboxes/{sid}/log", params={"since": "yesterday"}), 400, "invalid_request")
    assert_error(admin.get(f"/v1/sandboxes/{sid}/log", params={"before_id": 0}), 400, "invalid_request")

    # Paging back by id holds still while new rows come: the page before the oldest row seen is the
    # same whatever was added since, where an offset would shift by the new rows.
    older = admin.get(f"/v1/sandboxes/{sid}/log", params={"limit": 2, "before_id": ids[1]}).json()
    assert [x["id"] for x in older["entries"]] == ids[2:4]
    exec_(admin, sid, command="echo later")
    wait_for(lambda: admin.get(f"/v1/sandboxes/{sid}/log", params={"limit": 1}).json()["entries"][0]["id"] > ids[0],
             what="a newer row")
    again = admin.get(f"/v1/sandboxes/{sid}/log", params={"limit": 2, "before_id": ids[1]}).json()
    assert again["entries"] == older["entries"]
    assert admin.get("/v1/log", params={"session_id": sid, "before_id": ids[-1]}).json()["entries"] == []


def open_watch(secret, sid, last_id=None, rcvbuf=None):
    headers = ["Accept: text/event-stream"]
    if last_id is not None:
        headers.append(f"Last-Event-ID: {last_id}")
    return raw_request("GET", f"/v1/sandboxes/{sid}/watch", secret, headers, rcvbuf=rcvbuf)


def read_until(readers, pred, timeout=60):
    sel = selectors.DefaultSelector()
    for rd in readers:
        rd.sock.setblocking(False)
        sel.register(rd.sock, selectors.EVENT_READ, rd)
    end = time.monotonic() + timeout
    try:
        while not pred():
            if time.monotonic() > end:
                raise AssertionError("timed out reading watch streams")
            for key, _ in sel.select(timeout=1):
                try:
                    key.data.feed(key.fileobj.recv(65536))
                except BlockingIOError:
                    pass
                if key.data.closed:
                    sel.unregister(key.fileobj)
    finally:
        sel.close()


def log_ids(client, sid, n_exec):
    """The sandbox's row ids, oldest first, once its log holds n_exec exec rows (sandboxd records
    after its replies, so rows arrive a little later than the answers)."""
    def rows():
        e = client.get(f"/v1/sandboxes/{sid}/log", params={"limit": 1000}).json()["entries"]
        return sum(x["operation"] == "exec" for x in e) >= n_exec and e
    return sorted(x["id"] for x in wait_for(rows, what=f"{n_exec} exec rows"))


def test_watch_live_and_resume(admin, sandboxes):
    sid = sandboxes()["id"]
    w = SseReader(open_watch(admin.secret, sid))
    read_until([w], lambda: w.headers_done and w.comments >= 1)
    assert w.status == 200
    for i in range(3):
        exec_(admin, sid, command=f"echo {i}")
    seen = log_ids(admin, sid, 3)
    read_until([w], lambda: w.events and int(w.events[-1]["id"]) >= seen[-1])
    first = [int(e["id"]) for e in w.events]
    assert all(e["event"] == "entry" for e in w.events)
    assert [json.loads(e["data"])["id"] for e in w.events] == first
    assert first == [i for i in seen if i >= first[0]] and first[-1] == seen[-1]
    w.sock.close()

    # rows written while nobody watches, then resume after the last one seen
    for i in range(4):
        exec_(admin, sid, command=f"echo later{i}")
    w2 = SseReader(open_watch(admin.secret, sid, last_id=first[-1]))
    exec_(admin, sid, command="echo live")
    expected = [i for i in log_ids(admin, sid, 8) if i > first[-1]]
    read_until([w2], lambda: len(w2.events) >= len(expected))
    got = [int(e["id"]) for e in w2.events]
    assert got == expected, (got, expected)  # no gap, no duplicate, in order
    assert json.loads(w2.events[-1]["data"])["output_truncated"]["stdout"] == "live\n"
    w2.sock.close()
    assert_error(admin.get(f"/v1/sandboxes/{sid}/watch", headers={"Last-Event-ID": "abc"}), 400, "invalid_request")


def test_many_watchers_and_one_that_never_reads(admin, sandboxes):
    sid = sandboxes()["id"]
    # This one asks and never reads, with a tiny receive buffer.
    stalled = open_watch(admin.secret, sid, rcvbuf=1024)
    # two keys: 200 watches opened at once may have more calls in flight than one key's 128
    other = cli_key("--preset", "admin", "--ttl", "1h")[0]
    readers = [SseReader(open_watch(admin.secret if i % 2 else other, sid)) for i in range(200)]
    read_until(readers, lambda: all(r.headers_done and r.comments >= 1 for r in readers))
    assert all(r.status == 200 for r in readers)

    n = 20
    for i in range(n):
        # each row carries 1 KiB of output, so the stalled client's buffers fill
        exec_(admin, sid, command=f"head -c 1024 /dev/zero | tr '\\0' x; echo {i}")
    all_ids = log_ids(admin, sid, n)
    read_until(readers, lambda: all(r.events and int(r.events[-1]["id"]) >= all_ids[-1] for r in readers),
               timeout=120)
    first_exec = all_ids[-n]
    for r in readers:
        ids = [int(e["id"]) for e in r.events]
        # every row from the first one it saw (the sandbox's creation row may come before or after it
        # started watching), each once, in order
        assert ids[0] <= first_exec and ids == [i for i in all_ids if i >= ids[0]], ids
    for r in readers:
        r.sock.close()
    stalled.close()
    # and the gateway still answers
    assert admin.get("/v1/sandboxes").status_code == 200


def test_many_requests_at_once_queue(admin, sandboxes):
    """Many requests at once, more than the bus connections carry (4 x 120 calls); none fails. Five keys
    share them: one key has at most MaxCallsPerAdminKey= (128) calls in flight (test_gateway_availability)."""
    sid = sandboxes()["id"]
    n = 600
    secrets = [cli_key("--preset", "admin", "--ttl", "1h")[0] for _ in range(5)]
    socks = []
    for i in range(n):
        path = f"/v1/sandboxes/{sid}" if i % 2 else f"/v1/sandboxes/{sid}/log?limit=1"
        socks.append(raw_request("GET", path, secrets[i % 5], ["Connection: close"]))
    statuses = []
    for s in socks:
        s.settimeout(120)
        data = read_to_eof(s)
        statuses.append(int(data.split(b" ", 2)[1]))
    assert statuses == [200] * n


def test_scoped_key_reads_only_its_sandboxes(admin, sandboxes):
    a, b, c = (sandboxes()["id"] for _ in range(3))
    for sid in (a, b, c):
        for i in range(2):
            exec_(admin, sid, command=f"echo {sid} {i}")
    for sid in (a, b, c):
        log_ids(admin, sid, 2)
    scoped, _ = admin.mint(preset="member", sandboxes=[a, b], ttl_seconds=600)

    assert {x["id"] for x in scoped.get("/v1/sandboxes").json()["sandboxes"]} == {a, b}
    everything = [e for e in admin.get("/v1/log", params={"limit": 1000}).json()["entries"]
                  if e["session_id"] in (a, b)]
    page = scoped.get("/v1/log", params={"limit": 1000}).json()
    assert page["entries"] == everything and page["offset"] == 0
    p2 = scoped.get("/v1/log", params={"limit": 2, "offset": 2}).json()["entries"]
    assert p2 == everything[2:4]
    assert [e["id"] for e in scoped.get("/v1/log", params={"session_id": a}).json()["entries"]] == \
        [e["id"] for e in everything if e["session_id"] == a][:50]
    assert_error(scoped.get("/v1/log", params={"session_id": c}), 403, "forbidden")
    assert_error(scoped.get(f"/v1/sandboxes/{c}/log"), 403, "forbidden")
    assert_error(scoped.get(f"/v1/sandboxes/{c}"), 403, "forbidden")


def test_delete_own(admin, sandboxes):
    a, _ = admin.mint(preset="runner", ttl_seconds=600)
    b, _ = admin.mint(preset="runner", ttl_seconds=600)
    sid = sandboxes(client=a)["id"]
    assert_error(b.delete(f"/v1/sandboxes/{sid}"), 403, "forbidden")
    assert admin.get(f"/v1/sandboxes/{sid}").status_code == 200
    assert a.delete(f"/v1/sandboxes/{sid}").status_code == 204


def test_denied_is_audited(admin):
    r = Client("sbx_live_" + "a" * 52).get("/v1/sandboxes", headers={"X-Request-Id": "denied-probe-1"})
    assert_error(r, 401, "unauthorized")
    rows = wait_for(lambda: admin.get("/v1/log", params={"event": "denied", "operation": "sandbox.read"}).json()
                    ["entries"] and [e for e in admin.get("/v1/log", params={"event": "denied", "limit": 1000})
                                     .json()["entries"] if e["request_id"] == "denied-probe-1"], what="denied row")
    assert rows[0]["operation"] == "sandbox.read" and rows[0]["account_id"] == "anonymous"


def test_bad_input(admin, sandboxes):
    pid = gateway_pid()
    before = admin.get("/v1/sandboxes").json()
    keys_before = admin.get("/v1/api-keys").json()["api_keys"]
    s = admin.s

    def post_raw(path, data):
        return s.post(BASE + path, data=data, headers={"Content-Type": "application/json"}, timeout=60)

    assert_error(post_raw("/v1/sandboxes", b"{"), 400, "invalid_json")
    assert_error(post_raw("/v1/sandboxes", b"{\"type\": \"small\"} x"), 400, "invalid_json")
    assert_error(post_raw("/v1/sandboxes", b"[" * 100 + b"]" * 100), 400, "invalid_json")
    assert_error(post_raw("/v1/sandboxes", b"{\"name\":\"\xff\"}"), 400, "invalid_json")
    assert_error(post_raw("/v1/sandboxes", b"[]"), 400, "invalid_request")
    assert_error(admin.post("/v1/sandboxes", {"type": 5}), 400, "invalid_request")
    assert_error(admin.post("/v1/sandboxes", {"ttl_seconds": -1}), 400, "invalid_request")
    assert_error(admin.post("/v1/sandboxes", {"ttl_seconds": 1.5}), 400, "invalid_request")
    assert_error(admin.post("/v1/sandboxes", {"colour": "blue"}), 400, "invalid_request")
    assert_error(admin.post("/v1/sandboxes", {"type": "enormous"}), 400, "invalid_request")
    assert_error(admin.get("/v1/nothing"), 404, "not_found")
    assert_error(admin.get("/v1/sandboxes/x/y/z"), 404, "not_found")
    r = admin.req("PUT", "/v1/sandboxes")
    assert_error(r, 405, "method_not_allowed")
    assert set(r.headers["Allow"].split(", ")) == {"GET", "POST"}
    sid = sandboxes()["id"]
    assert_error(admin.post(f"/v1/sandboxes/{sid}/exec", {"argv": "ls"}), 400, "invalid_request")
    assert_error(admin.post(f"/v1/sandboxes/{sid}/exec", {}), 400, "invalid_request")
    assert_error(admin.post(f"/v1/sandboxes/{sid}/exec", {"command": "x", "argv": ["y"]}), 400, "invalid_request")
    assert_error(admin.post(f"/v1/sandboxes/{sid}/exec", {"command": "true", "env": {"A": 1}}), 400,
                 "invalid_request")
    assert_error(admin.patch(f"/v1/sandboxes/{sid}", {}), 400, "invalid_request")
    assert_error(admin.put(f"/v1/sandboxes/{sid}/files", b"x"), 400, "invalid_request")
    assert_error(admin.put(f"/v1/sandboxes/{sid}/files", b"x", params={"path": "/tmp/a", "mode": "999"}),
                 400, "invalid_request")
    assert_error(admin.post("/v1/api-keys", {"preset": "superuser"}), 400, "invalid_request")
    assert_error(admin.post("/v1/api-keys", {"actions": "exec"}), 400, "invalid_request")
    assert_error(admin.post("/v1/api-keys", {"ttl_seconds": 0}), 400, "invalid_request")
    assert_error(admin.post("/v1/api-keys", {"sandboxes": "some"}), 400, "invalid_request")
    assert_error(post_raw("/v1/api-keys", b"{" * 50), 400, "invalid_json")
    assert_error(admin.delete("/v1/api-keys/key_nosuchkey"), 404, "not_found")
    # nothing changed, nothing crashed
    after = admin.get("/v1/sandboxes").json()
    assert [x["id"] for x in after["sandboxes"]] == [x["id"] for x in before["sandboxes"]] + [sid]
    assert admin.get("/v1/api-keys").json()["api_keys"] == keys_before
    assert gateway_pid() == pid


def test_limits(admin, sandboxes, gateway_config):
    gateway_config("MaxBodyBytes=64K\nMaxStreamsPerKey=3\nConnectionTimeoutSec=2\nWatchQueueMax=3\n")
    pid = gateway_pid()
    sid = sandboxes()["id"]

    # 413: announced by Content-Length, and sent chunked
    assert_error(admin.put(f"/v1/sandboxes/{sid}/files", b"x" * (65 * 1024), params={"path": "/tmp/big"}),
                 413, "payload_too_large")
    r = admin.put(f"/v1/sandboxes/{sid}/files", iter([b"y" * 40000, b"y" * 40000]), params={"path": "/tmp/big"})
    assert_error(r, 413, "payload_too_large")
    assert_error(admin.get(f"/v1/sandboxes/{sid}/files", params={"path": "/tmp/big"}), 404, "not_found")

    # 429 past MaxStreamsPerKey=, and a stream that ends gives its place back
    streams = [SseReader(open_watch(admin.secret, sid)) for _ in range(3)]
    read_until(streams, lambda: all(s.headers_done for s in streams))
    assert_error(admin.get(f"/v1/sandboxes/{sid}/watch"), 429, "too_many_streams")
    other, _ = admin.mint(preset="member", ttl_seconds=600)
    w = SseReader(open_watch(other.secret, sid))
    read_until([w], lambda: w.headers_done)
    assert w.status == 200
    streams[0].sock.close()
    wait_for(lambda: admin.get(f"/v1/sandboxes/{sid}/watch", stream=True, timeout=5).status_code == 200,
             what="a freed stream slot")
    for s in streams[1:] + [w]:
        s.sock.close()

    # a watch that sleeps (nothing to send) is not a stalled client: it outlives ConnectionTimeoutSec=
    w = SseReader(open_watch(admin.secret, sid))
    read_until([w], lambda: w.headers_done)
    time.sleep(4)
    exec_(admin, sid, command="echo after-sleep")
    # rows of the calls above may still be on their way from sandboxd's spool: wait for the exec's
    execs = lambda: [e for e in map(lambda e: json.loads(e["data"]), w.events) if e["operation"] == "exec"]
    read_until([w], lambda: execs())
    assert execs()[0]["output_truncated"]["stdout"] == "after-sleep\n"
    w.sock.close()

    # resuming further back than a stream's queue holds: an error event, not a gap
    for i in range(4):
        exec_(admin, sid, command="true")
    log_ids(admin, sid, 5)  # all four rows are in the log before the resume reads it
    w = SseReader(open_watch(admin.secret, sid, last_id=int(w.events[0]["id"])))
    read_until([w], lambda: w.closed or any(e["event"] == "error" for e in w.events))
    assert [e["event"] for e in w.events] == ["error"]
    err = json.loads(w.events[0]["data"])
    assert err["code"] == "too_far_behind" and err["status"] == 409
    w.sock.close()

    # a client that stalls in the middle of its request is closed
    s = socket.create_connection(("127.0.0.1", 8790))
    s.sendall(b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
    s.settimeout(30)
    data = read_to_eof(s)
    assert b"201" not in data
    assert gateway_pid() == pid
    assert admin.get("/v1/sandboxes").status_code == 200


def refused_from(source, method="GET", path="/v1/sandboxes"):
    """A request with an unknown key from the loopback address source: (status, body, headers)."""
    data = ["-H", "Content-Type: application/json", "--data", "{}"] if method == "POST" else []
    r = curl("-X", method, "--interface", source, "-D", "-", "-H", "Authorization: Bearer sbx_live_" + "B" * 43,
             *data, BASE + path)
    assert r.returncode == 0, r.stderr
    head, _, body = r.stdout.partition("\n\n")  # text mode: CRLF read as LF
    assert body, r.stdout
    status = int(head.split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head.splitlines()[1:])}
    return status, json.loads(body), headers


def test_refusals_over_all_clients_budget(admin, gateway_config):
    """All client addresses together get RefusalBurstTotal= refusals answered one by one: a second
    address, within its own budget, gets 429 once the first has spent the rest; each throttled address
    gets its summary row."""
    gateway_config("RefusalBurst=3\nRefusalsPerSec=1\nRefusalBurstTotal=5\nRefusalsPerSecTotal=1\n")
    first_row = max([int(r["id"]) for r in audit_log(limit=1)] or [0])
    for _ in range(3):
        status, body, _ = refused_from("127.0.0.2")
        assert status == 401 and body["code"] == "unauthorized", body
    status, body, headers = refused_from("127.0.0.2")
    assert status == 429 and "from 127.0.0.2" in body["error"] and int(headers["retry-after"]) >= 1, body
    for _ in range(2):
        status, body, _ = refused_from("127.0.0.3")
        assert status == 401, body
    status, body, headers = refused_from("127.0.0.3", "POST")
    assert status == 429 and body["code"] == "too_many_refusals", body
    assert "from all clients" in body["error"] and int(headers["retry-after"]) >= 1, body
    assert admin.get("/v1/sandboxes").status_code == 200  # a valid key still works
    gateway_config("RefusalBurst=3\nRefusalsPerSec=1\nRefusalBurstTotal=5\nRefusalsPerSecTotal=1\n")
    def summaries():
        rows = [r for r in audit_log(operation="auth", after_id=first_row)
                if r["account_id"] in ("client:127.0.0.2", "client:127.0.0.3")]
        return rows if len(rows) >= 2 else None
    rows = wait_for(summaries, what="a summary row for each address")
    assert sorted(r["account_id"] for r in rows) == ["client:127.0.0.2", "client:127.0.0.3"], rows
    for r in rows:
        detail = json.loads(r["detail"])
        assert detail["refused"] == 1 and detail["burst_total"] == 5 and detail["per_sec_total"] == 1, detail
    assert len(audit_log(event="denied", after_id=first_row)) == 5
    assert not audit_log(operation="sandbox.create", after_id=first_row)


def test_refusals_over_a_clients_budget(admin, gateway_config):
    """A client (here 127.0.0.1) gets RefusalBurst= refusals answered and audited one by one; beyond its
    budget it gets 429 too_many_refusals with Retry-After, nothing changes, requests with a valid key
    still work, and one summary row (operation auth, event blocked) counts the throttled ones."""
    gateway_config("RefusalBurst=3\nRefusalsPerSec=1\n")
    first_row = max([int(r["id"]) for r in audit_log(limit=1)] or [0])
    bad = Client("sbx_live_" + "A" * 43)
    ids = []
    for _ in range(3):
        r = bad.get("/v1/sandboxes")
        assert_error(r, 401, "unauthorized")
        ids.append(r.headers["X-Request-Id"])
    for _ in range(4):
        r = bad.post("/v1/sandboxes", {"type": "small"})
        body = assert_error(r, 429, "too_many_refusals")
        assert "127.0.0.1" in body["error"] and 1 <= int(r.headers["Retry-After"]) <= 2, (body, r.headers)
    # a valid key is not refused, and spends nothing
    assert admin.get("/v1/sandboxes").status_code == 200
    # the three answered refusals have their rows
    wait_for(lambda: set(ids) <= {r["request_id"] for r in audit_log(event="denied", after_id=first_row)},
             what="a row per answered refusal")
    # the throttled four: one summary row once the gateway stops (or its client has been quiet 10 s)
    gateway_config("RefusalBurst=3\nRefusalsPerSec=1\n")
    rows = wait_for(lambda: audit_log(operation="auth", after_id=first_row), what="the summary row")
    assert len(rows) == 1 and rows[0]["event"] == "blocked" and rows[0]["account_id"] == "client:127.0.0.1"
    detail = json.loads(rows[0]["detail"])
    assert detail["refused"] == 4 and detail["client"] == "127.0.0.1" and detail["status"] == 429, detail
    assert TIME_RE.match(detail["first"]) and TIME_RE.match(detail["last"]) and detail["first"] <= detail["last"]
    # no sandbox was created by the refused POSTs
    assert not [r for r in audit_log(operation="sandbox.create", after_id=first_row)]


def test_sandboxes_per_key(admin, sandboxes, gateway_config):
    """MaxSandboxesPerKey=: a key's live sandboxes, counted with its creations in flight; one more is
    429 too_many_sandboxes and nothing is made; other keys are not affected; a deletion gives room."""
    gateway_config("MaxSandboxesPerKey=2\n")
    runner, key = admin.mint(preset="runner", ttl_seconds=600)
    owner = "key:" + key["id"]
    a = sandboxes(runner)["id"]
    sandboxes(runner)
    before = sorted(s["id"] for s in admin.get("/v1/sandboxes").json()["sandboxes"])
    assert_error(runner.post("/v1/sandboxes", {"type": "small", "name": "one-too-many"}), 429, "too_many_sandboxes",
                 "This API key has 2 sandboxes (or is creating them); at most 2 are allowed (MaxSandboxesPerKey=).")
    assert sorted(s["id"] for s in admin.get("/v1/sandboxes").json()["sandboxes"]) == before
    # another key has its own count
    other, _ = admin.mint(preset="runner", ttl_seconds=600)
    sandboxes(other)
    # a deletion makes room
    assert runner.delete(f"/v1/sandboxes/{a}").status_code == 204
    sandboxes(runner)

    # many at once never get past the bound: each counts the others in flight
    burst, burst_key = admin.mint(preset="runner", ttl_seconds=600)
    results = []

    def post():
        results.append(burst.post("/v1/sandboxes", {"type": "small"}))

    threads = [threading.Thread(target=post) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    made = [r.json()["id"] for r in results if r.status_code == 201]
    try:
        # never more than the bound; a creation that ends while another counts can be counted twice for a
        # moment (configuration.md, MaxSandboxesPerKey=: the count errs on the safe side), so one of the two may be refused
        codes = sorted(r.status_code for r in results)
        assert codes in ([201, 201, 429, 429, 429, 429], [201, 429, 429, 429, 429, 429]), [r.text for r in results]
        for r in results:
            if r.status_code == 429:
                assert_error(r, 429, "too_many_sandboxes")
        listed = admin.get("/v1/sandboxes").json()["sandboxes"]
        assert sorted(s["id"] for s in listed if s["owner"] == "key:" + burst_key["id"]) == sorted(made)
        assert len([s for s in listed if s["owner"] == owner]) == 2
    finally:
        for sid in made:
            admin.delete(f"/v1/sandboxes/{sid}")
