# SPDX-License-Identifier: LGPL-2.1-or-later
# MCP over the gateway's /mcp (Streamable HTTP), driven by the official TypeScript SDK's client
# (tests/mcp/mcp-client.mjs), and the transport's wire contract checked with plain HTTP requests.
import json
import os
import re
import shutil
import subprocess

import pytest
import requests

from conftest import audit_log, wait_for
from gateway_helpers import BASE, Client, admin, assert_error, raw_request, up  # noqa: F401,F811

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MCP_DIR = os.path.join(ROOT, "tests", "mcp")
URL = BASE + "/mcp"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
TASK = "print(sum(range(10)))\n"


def mcp_client(args, plan, with_stderr=False):
    """Runs the SDK's client on a plan; its one JSON line (and its stderr)."""
    node = shutil.which("node")
    assert node, "node is not installed (scripts/install-deps installs nodejs)"
    assert os.path.isdir(os.path.join(MCP_DIR, "node_modules", "@modelcontextprotocol", "sdk")), \
        "tests/mcp/node_modules is missing: run `npm ci` in tests/mcp (scripts/test does)"
    p = subprocess.run([node, os.path.join(MCP_DIR, "mcp-client.mjs"), *args], input=json.dumps(plan),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    return (out, p.stderr) if with_stderr else out


def http_client(secret, plan, origin=None):
    return mcp_client(["http", URL, secret] + ([origin] if origin else []), plan)


def call(name, progress=False, **args):
    return {"op": "call", "name": name, "args": args, "progress": progress}


def structured(step):
    assert "error" not in step and step["isError"] is False, step
    return step["structuredContent"]


def rpc(secret, body, version=None, headers=None, raw=None):
    h = dict(HEADERS)
    if secret:
        h["Authorization"] = f"Bearer {secret}"
    if version:
        h["MCP-Protocol-Version"] = version
    h.update(headers or {})
    return requests.post(URL, data=raw if raw is not None else json.dumps(body), headers=h, timeout=120)


def seed_plan(sandbox_step=True):
    """create → write task.py → exec → view → str_replace → exec again; the sandbox is "{sid}"."""
    return [
        call("write_file", sandbox="{sid}", path="/tmp/task.py", content=TASK),
        call("exec", sandbox="{sid}", command="python3 /tmp/task.py", timeout_seconds=60),
        call("view", sandbox="{sid}", path="/tmp/task.py"),
        call("str_replace", sandbox="{sid}", path="/tmp/task.py", old_str="range(10)", new_str="range(100)"),
        call("exec", sandbox="{sid}", argv=["python3", "/tmp/task.py"], timeout_seconds=60),
    ]


def with_sandbox(plan, sid):
    return json.loads(json.dumps(plan).replace("{sid}", sid))


def settled_rows(sid, n):
    """A sandbox's audit rows once all n are in: sandboxd hands rows to the logger a moment after a call."""
    def got():
        rows = audit_log(session=sid)
        return rows if len(rows) >= n else None
    return wait_for(got, what=f"{n} audit rows of {sid}")


def ops(rows):
    """A sandbox's audit rows, oldest first, as REST and MCP should both leave them."""
    return [(r["operation"], r["event"], r["source"], r["account_id"]) for r in reversed(rows)]


def test_initialize_and_tools(admin):
    out = http_client(admin.secret, [{"op": "tools"}, {"op": "ping"}])
    assert "connectError" not in out, out
    assert out["protocolVersion"] == "2025-11-25"
    assert out["serverInfo"]["name"] == "sandboxd"
    tools = out["steps"][0]["tools"]
    assert out["steps"][0]["schemaErrors"] == []
    names = {t["name"] for t in tools}
    assert names >= {"sandbox_create", "sandbox_delete", "exec", "read_file", "write_file", "view", "str_replace",
                     "insert", "file_create", "ls", "glob", "grep", "log_read"}
    for t in tools:
        assert t["inputSchema"]["type"] == "object" and t["outputSchema"]["type"] == "object", t
    ex = next(t for t in tools if t["name"] == "exec")
    assert set(ex["inputSchema"]["required"]) == {"sandbox"}
    assert ex["inputSchema"]["properties"]["timeout_seconds"]["type"] == "integer"


def test_seed_flow_matches_rest(admin):
    key_id = None
    out = http_client(admin.secret, [call("sandbox_create", type="small")])
    sid = structured(out["steps"][0])["id"]
    plan = with_sandbox(seed_plan(), sid) + [call("sandbox_delete", sandbox=sid)]
    out = http_client(admin.secret, plan)
    steps = out["steps"]
    assert "connectError" not in out, out
    assert structured(steps[0]) == {"path": "/tmp/task.py", "bytes": len(TASK)}
    first = structured(steps[1])
    assert first["exit_code"] == 0 and first["stdout"] == "45\n" and first["stdout_truncated"] is False
    assert json.loads(steps[1]["content"][0]["text"]) == first  # the same JSON as text, for older clients
    assert "1\tprint(sum(range(10)))" in structured(steps[2])["text"]
    assert steps[3]["isError"] is False
    assert structured(steps[4])["stdout"] == "4950\n"
    assert structured(steps[5]) == {"id": sid, "deleted": True}
    mcp_rows = settled_rows(sid, 7)

    # The same flow over REST, with the same key: the same rows (operation, event, source, account).
    r = admin.post("/v1/sandboxes", {"type": "small"})
    assert r.status_code == 201, r.text
    rid = r.json()["id"]
    assert admin.put(f"/v1/sandboxes/{rid}/files?path=/tmp/task.py", TASK).status_code == 204
    assert admin.post(f"/v1/sandboxes/{rid}/exec", {"command": "python3 /tmp/task.py", "timeout_seconds": 60}
                      ).json()["stdout"] == "45\n"
    assert admin.post(f"/v1/sandboxes/{rid}/tools/view", {"path": "/tmp/task.py"}).status_code == 200
    assert admin.post(f"/v1/sandboxes/{rid}/tools/str_replace", {"path": "/tmp/task.py", "old_str": "range(10)",
                                                                 "new_str": "range(100)"}).status_code == 200
    assert admin.post(f"/v1/sandboxes/{rid}/exec", {"argv": ["python3", "/tmp/task.py"], "timeout_seconds": 60}
                      ).json()["stdout"] == "4950\n"
    assert admin.delete(f"/v1/sandboxes/{rid}").status_code == 204
    rest_rows = settled_rows(rid, 7)

    assert ops(mcp_rows) == ops(rest_rows), (ops(mcp_rows), ops(rest_rows))
    assert all(r["source"] == "agent" and r["account_id"].startswith("key:") for r in mcp_rows), mcp_rows
    key_id = mcp_rows[0]["account_id"]
    assert [r["operation"] for r in reversed(mcp_rows)][:1] == ["sandbox.create"] and key_id


def test_progress_and_truncation(admin):
    r = admin.post("/v1/sandboxes", {"type": "small"})
    sid = r.json()["id"]
    try:
        out = http_client(admin.secret, [
            call("exec", progress=True, sandbox=sid, command="sleep 4; echo done", timeout_seconds=30),
            call("exec", sandbox=sid, command="head -c 3000000 /dev/zero | tr '\\0' a"),
        ])
        s = out["steps"]
        assert structured(s[0])["stdout"] == "done\n"
        # the first notification is sent as the call starts, then one a second as it runs: a 4 s command
        # has at least two more unless the gateway stood still for 2 s
        assert len(s[0]["progress"]) >= 3 and s[0]["progress"][0]["progress"] == 0, s[0]
        p = [n["progress"] for n in s[0]["progress"]]
        assert p == list(range(len(p))), p
        assert all(n["total"] == 30 and n["message"].startswith("exec ") for n in s[0]["progress"]), s[0]
        big = structured(s[1])
        assert big["stdout_truncated"] is True
        assert "stdout_truncated" in s[1]["content"][1]["text"] and "cut" in s[1]["content"][1]["text"]
        # rows reach the log a moment after the call: once both are there, log_read shows them
        wait_for(lambda: len(audit_log(sid, operation="exec")) == 2, what="both exec rows in the log")
        out = http_client(admin.secret, [call("log_read", sandbox=sid, limit=5, operation="exec")])
        rows = structured(out["steps"][0])["entries"]
        assert [r["id"] for r in rows] == [int(r["id"]) for r in audit_log(sid, operation="exec")], rows
        assert all(r["operation"] == "exec" and r["session_id"] == sid for r in rows), rows
    finally:
        admin.delete(f"/v1/sandboxes/{sid}")


def test_scope_refusal_changes_nothing(admin):
    r = admin.post("/v1/sandboxes", {"type": "small"})
    sid = r.json()["id"]
    try:
        assert admin.put(f"/v1/sandboxes/{sid}/files?path=/tmp/keep.txt", "original").status_code == 204
        reader, _ = admin.mint(name="mcp-reader", role="member", actions=["sandbox.read", "file.read"],
                               ttl_seconds=3600)
        runner, _ = admin.mint(name="mcp-runner", preset="runner", ttl_seconds=3600)
        out = http_client(reader.secret, [
            call("write_file", sandbox=sid, path="/tmp/keep.txt", content="changed"),
            call("exec", sandbox=sid, command="rm /tmp/keep.txt"),
            call("read_file", sandbox=sid, path="/tmp/keep.txt"),
        ])
        s = out["steps"]
        rest = reader.put(f"/v1/sandboxes/{sid}/files?path=/tmp/keep.txt", "changed")
        assert_error(rest, 403, "forbidden")
        assert s[0]["isError"] is True and s[0]["content"][0]["text"] == rest.json()["error"]
        assert s[1]["isError"] is True and s[1]["content"][0]["text"] == "This API key lacks the action 'exec'."
        assert structured(s[2])["content"] == "original"
        # a runner key may not read files
        out = http_client(runner.secret, [call("view", sandbox=sid, path="/tmp/keep.txt")])
        assert out["steps"][0]["isError"] is True
        assert out["steps"][0]["content"][0]["text"] == "This API key lacks the action 'file.read'."
        assert admin.get(f"/v1/sandboxes/{sid}/files?path=/tmp/keep.txt").text == "original"
        def denied():
            ops_ = {r["operation"] for r in audit_log(session=sid) if r["event"] == "denied"}
            return ops_ if ops_ >= {"write", "exec", "view"} else None
        wait_for(denied, what="the refusals' denied rows")
    finally:
        admin.delete(f"/v1/sandboxes/{sid}")


def test_a_client_that_leaves_cancels_its_calls(admin):
    """The POST's client closes its socket while its exec runs (answered as JSON, and as an SSE stream
    with progress): the commands are cancelled and recorded so, as a REST client's would be."""
    r = admin.post("/v1/sandboxes", {"type": "small"})
    sid = r.json()["id"]
    try:
        held = []
        for i, progress in enumerate((False, True)):
            params = {"name": "exec", "arguments": {"sandbox": sid, "argv": ["sleep", f"6{i}"],
                                                    "timeout_seconds": 90}}
            if progress:
                params["_meta"] = {"progressToken": "t"}
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
            held.append(raw_request("POST", "/mcp", admin.secret,
                                    ["Content-Type: application/json", "Accept: application/json, text/event-stream",
                                     "MCP-Protocol-Version: 2025-11-25"], body))
        # the stream's first notification is there at once
        held[1].settimeout(30)
        first = held[1].recv(65536)
        assert b"200 OK" in first and b"text/event-stream" in first, first
        wait_for(lambda: admin.post(f"/v1/sandboxes/{sid}/exec", {"argv": ["pgrep", "-c", "-x", "sleep"]},
                                    timeout=30).json()["stdout"] == "2\n", what="both commands to run")
        for s in held:
            s.close()

        def cancelled():
            rows = [r for r in audit_log(sid, operation="exec") if r["event"] == "cancelled"]
            return rows if len(rows) >= 2 else None
        rows = wait_for(cancelled, timeout=10, what="both execs' rows saying cancelled")
        assert {json.loads(r["detail"])["argv"][1] for r in rows} == {"60", "61"}, rows
        r = admin.post(f"/v1/sandboxes/{sid}/exec", {"argv": ["pgrep", "-x", "sleep"]}, timeout=30)
        assert r.json()["exit_code"] == 1, r.text
    finally:
        admin.delete(f"/v1/sandboxes/{sid}")


def mcp_rows():
    return [r for r in audit_log(operation="mcp") if str(r["event"]) == "denied"]


def test_refusals_before_anything(admin):
    before = len(mcp_rows())
    r = rpc(None, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert_error(r, 401, "unauthorized")
    r = rpc("sk_not_a_key", {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 401
    r = rpc(admin.secret, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Origin": "http://evil.example"})
    assert_error(r, 403, "forbidden")
    assert "Origin http://evil.example" in r.json()["error"]
    # the SDK's client sees the same
    out = http_client("", [{"op": "ping"}])
    assert "401" in out["connectError"]["message"], out
    out = http_client(admin.secret, [{"op": "ping"}], origin="http://evil.example")
    assert "403" in out["connectError"]["message"], out
    # each refusal is on the record, as the logger's operation "mcp" (it was once refused as unknown, and lost)
    wait_for(lambda: len(mcp_rows()) >= before + 3, timeout=10, what="the refusals' denied rows")


def test_bad_arguments(admin):
    out = http_client(admin.secret, [
        call("exec", command="true"),
        call("exec", sandbox="sb_aaaaaaaaaa", command=5),
        call("view", sandbox="x", path="/tmp", bogus=1),
        call("exec", sandbox="no-such-sandbox", command="true"),
        {"op": "call", "name": "no_such_tool", "args": {}},
    ])
    s = out["steps"]
    assert s[0]["isError"] and s[0]["content"][0]["text"].startswith("Argument 'sandbox' is required")
    assert s[1]["isError"] and s[1]["content"][0]["text"].startswith("Argument 'command' must be a string")
    assert s[2]["isError"] and s[2]["content"][0]["text"] == "Unknown argument 'bogus' for tool view."
    assert s[3]["isError"] and "no-such-sandbox" in s[3]["content"][0]["text"]
    assert s[4]["error"]["code"] == -32602, s[4]


def gateway_pid():
    return subprocess.run(["systemctl", "show", "-P", "MainPID", "sandbox-gatewayd.service"], capture_output=True,
                          text=True, check=True).stdout.strip()


def test_wire_contract(admin):
    k = admin.secret
    pid = gateway_pid()
    r = rpc(k, {"jsonrpc": "2.0", "id": "a", "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "raw", "version": "0"}}})
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/json", r.text
    assert r.json()["id"] == "a" and r.json()["result"]["protocolVersion"] == "2025-06-18"
    assert "Mcp-Session-Id" not in r.headers  # stateless: no sessions (docs/mcp.md)
    r = rpc(k, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "1999-01-01", "capabilities": {}}})
    assert r.json()["result"]["protocolVersion"] == "2025-11-25"
    # notifications (and responses) are accepted with 202 and no body
    r = rpc(k, {"jsonrpc": "2.0", "method": "notifications/initialized"}, version="2025-11-25")
    assert r.status_code == 202 and r.content == b""
    r = rpc(k, {"jsonrpc": "2.0", "id": 2, "method": "resources/list"}, version="2025-11-25")
    assert r.json()["error"]["code"] == -32601 and r.json()["id"] == 2
    r = rpc(k, None, raw="{not json", version="2025-11-25")
    assert r.status_code == 400 and r.json()["error"]["code"] == -32700 and r.json()["id"] is None
    r = rpc(k, {"jsonrpc": "1.0", "id": 3, "method": "ping"}, version="2025-11-25")
    assert r.json()["error"]["code"] == -32600 and r.json()["id"] == 3
    r = rpc(k, {"jsonrpc": "2.0", "id": 4, "method": "ping"}, version="2024-01-01")
    assert r.status_code == 400 and "MCP-Protocol-Version" in r.json()["error"]["message"]
    r = rpc(k, {"jsonrpc": "2.0", "id": 4, "method": "ping"}, headers={"Accept": "application/json"})
    assert r.status_code == 406
    # output schemas from 2025-06-18 on; batches only in 2025-03-26
    tl = {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}
    assert all("outputSchema" in t for t in rpc(k, tl, version="2025-06-18").json()["result"]["tools"])
    assert not any("outputSchema" in t for t in rpc(k, tl, version="2025-03-26").json()["result"]["tools"])
    batch = [{"jsonrpc": "2.0", "id": 6, "method": "ping"}, {"jsonrpc": "2.0", "method": "notifications/x"},
             {"jsonrpc": "2.0", "id": 7, "method": "nope"}]
    r = rpc(k, batch, version="2025-03-26")
    assert [(a["id"], "result" in a) for a in r.json()] == [(6, True), (7, False)]
    r = rpc(k, batch, version="2025-06-18")
    assert r.status_code == 400 and r.json()["error"]["code"] == -32600
    # no GET stream, no sessions to delete
    assert requests.get(URL, headers={"Authorization": f"Bearer {k}", "Accept": "text/event-stream"},
                        timeout=30).status_code == 405
    # none of it took the gateway down (a refused batch once crashed it on the client's close, and systemd
    # restarted it quickly enough for the next request to be answered)
    assert gateway_pid() == pid


# --- sandboxctl mcp: the same tools over stdio ------------------------------------------------------------

def session_id(stderr):
    m = re.search(r"created sandbox (sb_[a-z2-7]{10}) for this session", stderr)
    assert m, stderr
    return m[1]


def sandbox_exists(sid):
    return subprocess.run(["sandboxctl", "status", sid], capture_output=True).returncode == 0


def test_stdio_seed_flow():
    plan = [{"op": "tools"}] + json.loads(json.dumps(seed_plan()).replace('"sandbox": "{sid}", ', ""))
    out, err = mcp_client(["stdio", "sandboxctl", "mcp"], plan, with_stderr=True)
    assert "connectError" not in out, (out, err)
    assert out["protocolVersion"] is None or out["protocolVersion"] == "2025-11-25"
    s = out["steps"]
    assert s[0]["schemaErrors"] == [] and "sandbox" not in s[0]["tools"][3]["inputSchema"].get("required", [])
    assert structured(s[1]) == {"path": "/tmp/task.py", "bytes": len(TASK)}
    assert structured(s[2])["stdout"] == "45\n"
    assert "1\tprint(sum(range(10)))" in structured(s[3])["text"]
    assert s[4]["isError"] is False
    assert structured(s[5])["stdout"] == "4950\n"
    sid = session_id(err)
    # the session's sandbox is gone with the session, and its rows are those of the HTTP flow
    assert not sandbox_exists(sid)
    rows = settled_rows(sid, 7)
    assert [(r["operation"], r["event"]) for r in reversed(rows)] == [
        ("sandbox.create", "finished"), ("write", "finished"), ("exec", "finished"), ("view", "finished"),
        ("str_replace", "finished"), ("exec", "finished"), ("sandbox.delete", "finished")], ops(rows)
    assert all(r["source"] == "agent" and r["account_id"] == "uid:0" for r in rows), rows
    # log_read over stdio, in a second session that needs no sandbox of its own
    out, err = mcp_client(["stdio", "sandboxctl", "mcp"], [call("log_read", sandbox=sid, limit=10)], with_stderr=True)
    entries = structured(out["steps"][0])["entries"]
    assert [e["operation"] for e in entries] == [r["operation"] for r in rows], entries
    assert "created sandbox" not in err


def test_stdio_keep_and_adopt():
    out, err = mcp_client(["stdio", "sandboxctl", "mcp", "--keep", "--type", "small"],
                          [call("exec", command="echo kept$MARK > /tmp/k", env={"MARK": "!", "B": "2"})],
                          with_stderr=True)
    sid = session_id(err)
    assert structured(out["steps"][0])["exit_code"] == 0
    try:
        assert sandbox_exists(sid)
        out, err = mcp_client(["stdio", "sandboxctl", "mcp", "--sandbox", sid],
                              [call("read_file", path="/tmp/k"), call("exec", sandbox="sb_aaaaaaaaaa", command="true")],
                              with_stderr=True)
        assert structured(out["steps"][0])["content"] == "kept!\n"
        assert out["steps"][1]["isError"] and "sb_aaaaaaaaaa" in out["steps"][1]["content"][0]["text"]
        assert "created sandbox" not in err
        assert sandbox_exists(sid)  # adopted, not the session's to delete
    finally:
        subprocess.run(["sandboxctl", "delete", sid], capture_output=True)
    p = subprocess.run(["sandboxctl", "mcp", "--sandbox", "sb_aaaaaaaaaa"], input="", capture_output=True, text=True)
    assert p.returncode == 1 and "sb_aaaaaaaaaa" in p.stderr
    p = subprocess.run(["sandboxctl", "mcp", "--sandbox", "x", "--type", "small"], capture_output=True, text=True)
    assert p.returncode == 2


def test_stdio_wire_contract():
    lines = [
        "not json",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": "2025-03-26", "capabilities": {}}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "nope"}),
        json.dumps([{"jsonrpc": "2.0", "id": 3, "method": "ping"}, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}]),
        json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "view", "arguments": {}}}),
    ]
    p = subprocess.run(["sandboxctl", "mcp"], input="\n".join(lines) + "\n", capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    answers = [json.loads(x) for x in p.stdout.splitlines()]
    assert len(answers) == 5, answers  # the notification has none
    assert answers[0]["error"]["code"] == -32700 and answers[0]["id"] is None
    assert answers[1]["result"]["protocolVersion"] == "2025-03-26"
    assert answers[2]["error"]["code"] == -32601
    assert [a["id"] for a in answers[3]] == [3, 4]
    assert not any("outputSchema" in t for t in answers[3][1]["result"]["tools"])  # 2025-03-26
    assert answers[4]["result"]["isError"] and answers[4]["result"]["content"][0]["text"] == \
        "Argument 'path' is required."
    assert "created sandbox" not in p.stderr  # nothing was run that needed one
