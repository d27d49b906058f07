# SPDX-License-Identifier: LGPL-2.1-or-later
# The Python SDK against the live fleet (run inside the harness): the reference flow, typed errors, exec
# (plain and streamed), files, log, watch with resume, takeover, API keys, and the key never leaking.
import json
import os
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import sandboxd  # noqa: E402
from sandboxd import (BadRequest, Client, Conflict, Forbidden, NotFound, SandboxdError,  # noqa: E402
                      Unauthorized)


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=120)


def sdk_wait(pred, timeout=60.0, what="condition"):
    """Polls pred(); the deadline bounds a hang only, it is not a measurement."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def sdk_cli_key(*args):
    d = json.loads(sh("sandboxctl", "api-key", "create", *args, "--json").stdout)
    return d["secret"], d["apiKey"]


@pytest.fixture(scope="module", autouse=True)
def sdk_gateway_up():
    sh("systemctl", "start", "sandbox-auditd.service", "sandbox-gatewayd.socket")
    yield


@pytest.fixture(scope="module")
def sdk_admin_secret():
    secret, _ = sdk_cli_key("--preset", "admin", "--ttl", "1d", "--name", "sdk-python-tests")
    return secret


@pytest.fixture(scope="module")
def sdk_admin(sdk_admin_secret):
    return Client(sdk_admin_secret, timeout=120)


@pytest.fixture
def sdk_sb(sdk_admin):
    """A running sandbox for one test, deleted afterwards."""
    with sdk_admin.create(type="small", ttl_seconds=600) as sb:
        yield sb


def assert_gone(client, sid):
    with pytest.raises(NotFound) as ei:
        client.get(sid)
    assert ei.value.code == "not_found" and ei.value.status == 404


# --- the reference flow -----------------------------------------------------------------------------------

def test_reference_flow(sdk_admin):
    code = "import sys\nprint('hello from', sys.argv[0])\nprint(sum(range(10)))\n"
    with sdk_admin.create(type="small", ttl_seconds=600, name="sdk-task-1", on_exit="delete") as sb:
        assert sb.id.startswith("sb_") and sb.name == "sdk-task-1" and sb.state == "running"
        sb.files.write("/tmp/task.py", code)
        r = sb.exec("python3 /tmp/task.py", timeout_seconds=30)
        sid = sb.id
    assert isinstance(r, sandboxd.ExecResult)
    assert r.exit_code == 0 and r.stdout == "hello from /tmp/task.py\n45\n" and r.stderr == ""
    assert not (r.timed_out or r.oom_killed or r.stdout_truncated or r.stderr_truncated)
    assert r.duration_ms >= 0
    assert_gone(sdk_admin, sid)
    assert sid not in [s.id for s in sdk_admin.list()]


def test_block_that_raises_still_deletes(sdk_admin):
    sid = None
    with pytest.raises(RuntimeError, match="agent bug"):
        with sdk_admin.create(type="small", ttl_seconds=600, on_exit="delete") as sb:
            sid = sb.id
            raise RuntimeError("agent bug")
    assert_gone(sdk_admin, sid)
    # an SDK error raised inside the block (here: the file to run does not exist, so reading fails)
    with pytest.raises(NotFound):
        with sdk_admin.create(type="small", ttl_seconds=600) as sb:
            sid = sb.id
            sb.files.read("/tmp/does-not-exist")
    assert_gone(sdk_admin, sid)


def test_create_that_raises_leaves_nothing(sdk_admin):
    before = {s.id for s in sdk_admin.list()}
    with pytest.raises(BadRequest) as ei:
        with sdk_admin.create(type="no-such-type", ttl_seconds=600, name="sdk-bad-type"):
            pytest.fail("the block must not run")
    assert ei.value.code == "invalid_request" and ei.value.request_id.startswith("req_")
    assert {s.id for s in sdk_admin.list()} == before


def test_image(sdk_admin):
    """issue 24: a sandbox's image ("host" by default), and one the store does not have."""
    with sdk_admin.create(type="small", ttl_seconds=600) as sb:
        assert sb.image == "host"
    with sdk_admin.create(type="small", ttl_seconds=600, image="host") as sb:
        assert sb.image == "host"
    before = {s.id for s in sdk_admin.list()}
    with pytest.raises(NotFound) as ei:
        sdk_admin.create(type="small", ttl_seconds=600, image="no-such-image")
    assert ei.value.code == "not_found" and "no-such-image" in str(ei.value)
    assert {s.id for s in sdk_admin.list()} == before


def test_on_exit_keep(sdk_admin):
    with sdk_admin.create(type="small", ttl_seconds=600, on_exit="keep") as sb:
        sid = sb.id
    try:
        got = sdk_admin.get(sid)
        assert got.state == "running"
        assert sdk_admin.get(sb.name).id == sid  # by name too
    finally:
        sdk_admin.get(sid).delete()
    assert_gone(sdk_admin, sid)
    with pytest.raises(ValueError):
        sdk_admin.create(on_exit="sometimes")


def test_extend_and_list(sdk_admin, sdk_sb):
    before = sdk_sb.expires_at
    sdk_sb.extend(3000)
    assert sdk_sb.expires_at > before
    assert sdk_sb.refresh().expires_at == sdk_sb.expires_at
    assert sdk_sb.id in [s.id for s in sdk_admin.list()]
    with pytest.raises(BadRequest):
        sdk_sb.extend(0)


def test_pause_and_resume(sdk_admin, sdk_admin_secret, sdk_sb):
    """Issue 26: sb.pause() freezes it (exec refused with Conflict sandbox_paused), sb.resume() thaws it."""
    assert sdk_sb.pause() is sdk_sb
    assert (sdk_sb.state, sdk_sb.paused) == ("paused", True) and sdk_sb.paused_at
    assert sdk_admin.get(sdk_sb.id).state == "paused"
    with pytest.raises(Conflict) as ei:
        sdk_sb.exec("true")
    assert ei.value.code == "sandbox_paused" and ei.value.status == 409
    sdk_sb.pause()  # again: nothing changes
    assert sdk_sb.resume().state == "running" and not sdk_sb.paused and sdk_sb.paused_at is None
    assert sdk_sb.exec("echo back").stdout == "back\n"
    import asyncio
    from sandboxd.aio import AsyncClient

    async def go():
        a = await AsyncClient(sdk_admin_secret, timeout=120).get(sdk_sb.id)
        assert (await a.pause()).paused
        assert not (await a.resume()).paused
    asyncio.run(go())


def test_snapshot_and_fork(sdk_admin, sdk_sb):
    """Issue 26: sb.snapshot() and client.create(snapshot=…): a fork with the files, going its own way."""
    sdk_sb.files.write("/home/sandbox/s.txt", "snap\n")
    snap = sdk_sb.snapshot("sdk-py-snap")
    try:
        assert snap["id"].startswith("sn_") and snap["name"] == "sdk-py-snap" and snap["source"] == sdk_sb.id
        assert snap in sdk_admin.list_snapshots() and sdk_admin.get_snapshot("sdk-py-snap") == snap
        with sdk_admin.create(snapshot=snap["id"], ttl_seconds=300) as fork:
            assert fork.exec("cat ~/s.txt").stdout == "snap\n"
            fork.exec("echo fork > ~/s.txt")
        assert sdk_sb.exec("cat ~/s.txt").stdout == "snap\n"
        with pytest.raises(Conflict):
            sdk_sb.snapshot("sdk-py-snap")
    finally:
        sdk_admin.delete_snapshot(snap["id"])
    with pytest.raises(NotFound):
        sdk_admin.get_snapshot(snap["id"])


# --- typed errors ----------------------------------------------------------------------------------------

def test_error_unauthorized():
    bad = Client("sbx_live_" + "a" * 52)
    with pytest.raises(Unauthorized) as ei:
        bad.list()
    e = ei.value
    assert isinstance(e, SandboxdError) and e.status == 401 and e.code == "unauthorized"
    assert e.request_id.startswith("req_")
    with pytest.raises(Unauthorized):
        Client("not-a-key").create(type="small")


def test_behaviour_shared_with_the_js_sdk(sdk_admin_secret, sdk_admin, monkeypatch):
    """Issue 25: what both SDKs do alike. No answer at all is ConnectionFailed with status 0 and code
    "connection_error"; deleting a sandbox that is gone is no error (by object and by id), other refusals
    of a delete still raise; $SANDBOXD_API_KEY and $SANDBOXD_URL when the arguments leave them out."""
    base = sdk_admin.base_url
    # nothing listens on loopback port 1
    with pytest.raises(sandboxd.ConnectionFailed) as ei:
        Client(sdk_admin_secret, "http://127.0.0.1:1").list()
    assert ei.value.status == 0 and ei.value.code == "connection_error"
    # deleting twice, by the object and by id
    sb = sdk_admin.create(type="small", ttl_seconds=120, on_exit="keep")
    sb.delete()
    sb.delete()
    sdk_admin.delete(sb.id)
    assert_gone(sdk_admin, sb.id)
    other = sdk_admin.create(type="small", ttl_seconds=120, on_exit="keep")
    try:
        with pytest.raises(Unauthorized):
            Client("sbx_live_" + "a" * 52, base).delete(other.id)
        assert sdk_admin.get(other.id).state == "running"
    finally:
        other.delete()
    # the environment
    monkeypatch.setenv("SANDBOXD_API_KEY", sdk_admin_secret)
    monkeypatch.setenv("SANDBOXD_URL", base + "/")
    c = Client()
    assert c.base_url == base and isinstance(c.list(), list)
    monkeypatch.setenv("SANDBOXD_URL", "http://127.0.0.1:1")
    with pytest.raises(sandboxd.ConnectionFailed):
        Client().list()
    monkeypatch.delenv("SANDBOXD_API_KEY")
    with pytest.raises(TypeError):
        Client(base_url=base)
    with pytest.raises(TypeError):
        Client("", base)
    from sandboxd.aio import AsyncClient
    with pytest.raises(TypeError):
        AsyncClient(base_url=base)


def test_error_forbidden(sdk_admin, sdk_sb):
    member = Client(sdk_admin.api_keys.create(name="sdk-member", preset="member", ttl_seconds=3600).secret)
    runner = Client(sdk_admin.api_keys.create(name="sdk-runner", preset="runner", ttl_seconds=3600).secret)
    with pytest.raises(Forbidden) as ei:
        member.api_keys.create(preset="runner")
    assert ei.value.code == "session_required" and ei.value.status == 403
    with pytest.raises(Forbidden) as ei:
        member.get(sdk_sb.id).takeover_token()
    assert ei.value.code == "forbidden"
    with pytest.raises(Forbidden) as ei:
        runner.get(sdk_sb.id).get_log()
    assert ei.value.code == "forbidden" and ei.value.request_id.startswith("req_")
    rid = ei.value.request_id
    # the refusal is in the audit log under the same request id (recorded once the gateway has asked sandboxd
    # whether the sandbox exists, which it does after answering: so the row may come a moment later)
    sdk_wait(lambda: rid in [row.get("request_id") for row in sdk_admin.get_log(limit=200, event="denied")],
             what="the denied row")
    # a runner may delete only what it created
    with pytest.raises(Forbidden):
        runner.delete(sdk_sb.id)
    assert sdk_admin.get(sdk_sb.id).state == "running"


def test_error_not_found_and_bad_input(sdk_admin, sdk_sb):
    with pytest.raises(NotFound) as ei:
        sdk_admin.get("sb_aaaaaaaaaa")
    assert ei.value.code == "not_found" and ei.value.request_id.startswith("req_")
    with pytest.raises(BadRequest) as ei:
        sdk_admin.create(type="small", ttl_seconds=600, name="-bad name")
    assert ei.value.code == "invalid_request" and ei.value.status == 400
    with pytest.raises(BadRequest):
        sdk_sb.exec("true", env={"BAD=NAME": "x"})
    with pytest.raises(BadRequest):
        sdk_sb.get_log(limit=100000)
    with pytest.raises(Conflict) as ei:
        with sdk_admin.create(type="small", name=sdk_sb.id.replace("sb_", "dup-")):
            sdk_admin.create(type="small", name=sdk_sb.id.replace("sb_", "dup-"))
    assert ei.value.code == "conflict"


# --- network egress: the policy at creation and while it runs ------------------------------------------

@pytest.fixture(scope="module")
def sdk_uplink():
    """An IPv4 default route, which egress sandboxes need. In the integration suite test_sdk_python.py puts
    test_egress.py's fake internet here (203.0.113.10 and 198.51.100.10 serving HTTP on port 8080)."""
    pytest.skip("egress sandboxes need test_egress.py's fake internet (run through test_sdk_python.py)")


def sdk_reaches(sb, addr):
    r = sb.exec(["curl", "-s", "-S", "-m", "3", f"http://{addr}:8080/"])
    return r.exit_code == 0 and "upstream says hello" in r.stdout


def test_network_policy(sdk_admin, sdk_uplink):
    with sdk_admin.create(type="small", ttl_seconds=600, network="egress",
                          egress_policy={"allow": ["203.0.113.0/24"]}) as sb:
        assert sb.network == "egress"
        assert sb.egress_policy == {"default": "deny", "allow": ["203.0.113.0/24"], "deny": []}
        assert sb.egress_address and sb.egress_address.startswith("10.237.")
        before = dict(sb.egress_counters)
        assert sdk_reaches(sb, "203.0.113.10") and not sdk_reaches(sb, "198.51.100.10")
        sb.refresh()
        assert sb.egress_counters["allowed_packets"] > before["allowed_packets"]
        assert sb.egress_counters["denied_packets"] > before["denied_packets"]

        # replaced whole, by keywords and by a dict
        assert sb.set_network_policy(allow=["198.51.100.0/24"]) is sb
        assert sb.egress_policy == {"default": "deny", "allow": ["198.51.100.0/24"], "deny": []}
        assert sdk_reaches(sb, "198.51.100.10") and not sdk_reaches(sb, "203.0.113.10")
        sb.set_network_policy({"default": "allow", "deny": ["198.51.100.0/24"]})
        assert sdk_admin.get(sb.id).egress_policy == {"default": "allow", "allow": [], "deny": ["198.51.100.0/24"]}

        # a bad policy: BadRequest, nothing changed
        with pytest.raises(BadRequest) as ei:
            sb.set_network_policy(allow=["10.0.0.1/8"])
        assert "host bits" in str(ei.value)
        with pytest.raises(BadRequest):
            sb.set_network_policy({"allow": ["x.example.test"], "ports": [80]})
        with pytest.raises(ValueError):
            sb.set_network_policy({"default": "deny"}, allow=["x.example.test"])
        assert sb.refresh().egress_policy == {"default": "allow", "allow": [], "deny": ["198.51.100.0/24"]}
    with pytest.raises(BadRequest):
        sdk_admin.create(type="small", network="egress", egress_policy={"allow": "pypi.org"})
    # network none: no policy, and none to set
    with sdk_admin.create(type="small", ttl_seconds=600) as sb:
        assert sb.egress_policy is None and sb.egress_address is None and sb.egress_counters is None
        with pytest.raises(Conflict) as ei:
            sb.set_network_policy(default="allow")
        assert ei.value.code == "not_egress" and ei.value.status == 409


def test_network_policy_async(sdk_admin_secret, sdk_uplink):
    import asyncio

    from sandboxd.aio import AsyncClient

    async def main():
        client = AsyncClient(sdk_admin_secret, timeout=120)
        async with await client.create(type="small", ttl_seconds=600, network="egress",
                                       egress_policy={"default": "deny", "allow": ["*.example.test"]}) as sb:
            assert sb.egress_policy["allow"] == ["*.example.test"]
            assert await sb.set_network_policy(deny=["203.0.113.0/24"]) is sb
            assert sb.egress_policy == {"default": "deny", "allow": [], "deny": ["203.0.113.0/24"]}
            assert (await client.get(sb.id)).egress_policy == sb.egress_policy

    asyncio.run(main())


# --- exec ------------------------------------------------------------------------------------------------

def test_exec_forms(sdk_sb):
    r = sdk_sb.exec(["sh", "-c", 'echo "$0 $FOO"; pwd; cat; echo err >&2; exit 7', "arg0"], cwd="/tmp",
                    env={"FOO": "bar"}, stdin="from stdin\n")
    assert r.exit_code == 7
    assert r.stdout == "arg0 bar\n/tmp\nfrom stdin\n" and r.stderr == "err\n"
    r = sdk_sb.exec("head -c 4 | od -An -tx1", stdin=b"\x00\xff\x10\x80")
    assert r.stdout == b" 00 ff 10 80\n"
    r = sdk_sb.exec("printf '\\377\\000x'", binary=True)
    assert r.stdout == b"\xff\x00x"
    r = sdk_sb.exec("sleep 30", timeout_seconds=1)
    assert r.timed_out and r.exit_code != 0


def test_exec_streamed_callbacks(sdk_sb):
    """Output reaches the callbacks while the command runs: the command waits for a file that only the
    stdout callback writes, on seeing the first line, so without live streaming it would time out."""
    out, err, sent = [], [], []

    def on_out(chunk):
        out.append(chunk)
        if "ready" in "".join(out) and not sent:
            sdk_sb.files.write("/tmp/go", "go")
            sent.append(True)

    r = sdk_sb.exec("echo ready; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo warn >&2; echo done",
                    timeout_seconds=20, on_stdout=on_out, on_stderr=err.append)
    assert not r.timed_out, "the callback did not see 'ready' before the command ended"
    assert r.exit_code == 0
    assert "".join(out) == "ready\ndone\n" == r.stdout
    assert "".join(err) == "warn\n" == r.stderr
    assert len(out) >= 2
    # binary streaming
    chunks = []
    r = sdk_sb.exec("printf '\\001\\002'", on_stdout=chunks.append, binary=True)
    assert b"".join(chunks) == b"\x01\x02" == r.stdout


def test_exec_stream_error_is_typed(sdk_admin):
    sb = sdk_admin.create(type="small", ttl_seconds=60)
    sb.delete()
    with pytest.raises(NotFound) as ei:
        sb.exec("true", on_stdout=print)
    assert ei.value.code == "not_found" and ei.value.request_id.startswith("req_")


# --- files -----------------------------------------------------------------------------------------------

def test_files_text_and_bytes(sdk_sb):
    sdk_sb.files.write("/tmp/t.txt", "grüße\n")
    assert sdk_sb.files.read_text("/tmp/t.txt") == "grüße\n"
    blob = bytes(range(256)) * 4
    sdk_sb.files.write("/tmp/b.bin", blob)
    assert sdk_sb.files.read("/tmp/b.bin") == blob
    assert sdk_sb.files.read("/tmp/b.bin", offset=250, length=10) == blob[250:260]
    sdk_sb.files.write("/tmp/b.bin", b"tail", append=True)
    assert sdk_sb.files.read("/tmp/b.bin")[-4:] == b"tail"
    sdk_sb.files.write("/tmp/deep/er/x.sh", "echo ok\n", mode=0o755, create_dirs=True)
    assert sdk_sb.exec("/tmp/deep/er/x.sh").stdout == "ok\n"
    with pytest.raises(NotFound):
        sdk_sb.files.read("/tmp/missing")


def test_file_tools(sdk_sb):
    try:
        made = sdk_sb.files.file_create("/tmp/tool/app.py", "def f():\n    return 1\n", create_dirs=True)
    except NotFound as e:
        if "route" in e.message.lower():
            pytest.skip("this gateway has no file tools yet (/tools/* answers No route)")
        raise
    assert made["created"] is True
    with pytest.raises(Conflict):
        sdk_sb.files.file_create("/tmp/tool/app.py", "again")
    assert sdk_sb.files.str_replace("/tmp/tool/app.py", "return 1", "return 2")["line"] == 2
    sdk_sb.files.insert("/tmp/tool/app.py", 0, "# top\n")
    assert sdk_sb.files.read_text("/tmp/tool/app.py") == "# top\ndef f():\n    return 2\n"
    v = sdk_sb.files.view("/tmp/tool/app.py", start_line=2, end_line=3)
    assert "return 2" in v["text"] and v["type"] == "file"
    assert [e["name"] for e in sdk_sb.files.ls("/tmp/tool")["entries"]] == ["app.py"]
    assert sdk_sb.files.glob("*.py", path="/tmp/tool")["count"] == 1
    m = sdk_sb.files.grep(r"return \d", path="/tmp/tool")["matches"]
    assert m and m[0]["line"] == 3 and m[0]["text"] == "    return 2"
    with pytest.raises(sandboxd.LimitExceeded) as ei:
        sdk_sb.files.str_replace("/tmp/tool/app.py", "not there", "x")
    assert ei.value.status == 422 and ei.value.code == "no_match"


# --- log and watch ---------------------------------------------------------------------------------------

def test_get_log(sdk_admin, sdk_sb):
    sdk_sb.exec("echo logged")

    def exec_rows():  # the audit row is written as the exec ends, maybe just after the answer
        rows = sdk_sb.get_log(limit=50, offset=0)
        ex = [r for r in rows if r["operation"] == "exec" and r["event"] == "finished"]
        return (rows, ex) if ex else None
    rows, ex = sdk_wait(exec_rows, what="the exec's audit row")
    assert all(r["session_id"] == sdk_sb.id for r in rows)
    assert ex and ex[0]["request_id"].startswith("req_")
    assert [r["id"] for r in rows] == sorted((r["id"] for r in rows), reverse=True)
    assert sdk_sb.get_log(limit=1, offset=1)[0]["id"] == rows[1]["id"]
    assert [r["id"] for r in sdk_sb.get_log(limit=2, before_id=rows[0]["id"])] == [r["id"] for r in rows[1:3]]
    assert {r["id"] for r in sdk_admin.get_log(limit=100, session_id=sdk_sb.id)} == {r["id"] for r in rows}
    out, _ = sdk_admin.get_output(ex[0]["id"])
    assert out == "logged\n"


def test_export(sdk_admin, sdk_sb, tmp_path):
    sdk_sb.exec("echo exported; echo err >&2")
    sdk_sb.exec("exit 3")
    sdk_sb.files.write("/tmp/exported.txt", b"x")
    sdk_wait(lambda: len(sdk_admin.get_log(limit=10, session_id=sdk_sb.id)) >= 4 and
             sh("sqlite3", "/var/lib/sandboxd/audit-spool.db", "SELECT count(*) FROM spool",
                check=False).stdout.strip() in ("0", ""), what="the rows")

    ev = list(sdk_admin.export(sandbox=sdk_sb.id))
    assert [e["event"] for e in ev] == ["sandbox.command.started", "sandbox.command.finished",
                                        "sandbox.command.started", "sandbox.command.failed",
                                        "sandbox.file.write"]
    assert ev[3]["exitCode"] == 3 and ev[3]["reason"] == "exit_code" and ev[4]["path"] == "/tmp/exported.txt"
    assert all(e["sandbox"] == sdk_sb.id for e in ev)
    assert list(sdk_admin.export(sandbox=sdk_sb.id, since=ev[1]["rowId"])) == ev[2:]

    # the directory layout, the same as sandboxctl's, resumable by either
    mine, cli = tmp_path / "sdk", tmp_path / "cli"
    mine.mkdir()
    cli.mkdir()
    assert list(sdk_admin.export(sandbox=sdk_sb.id, dir=str(mine))) == ev
    sh("sandboxctl", "log", "--export", str(cli), sdk_sb.id)
    assert (mine / "audit.jsonl").read_bytes() == (cli / "audit.jsonl").read_bytes()
    run = ev[0]["runId"]
    assert (mine / run / "stdout.txt").read_bytes() == b"exported\n" == (cli / run / "stdout.txt").read_bytes()
    assert (mine / run / "stderr.txt").read_bytes() == b"err\n"
    assert json.loads((mine / run / "metadata.json").read_text()) == json.loads((cli / run / "metadata.json").read_text())
    assert list(sdk_admin.export(sandbox=sdk_sb.id, dir=str(mine))) == []
    sdk_sb.exec("echo later")
    sdk_wait(lambda: len(sdk_admin.get_log(limit=10, session_id=sdk_sb.id)) >= 5, what="the new row")
    new = list(sdk_admin.export(sandbox=sdk_sb.id, dir=str(mine)))
    assert [e["event"] for e in new] == ["sandbox.command.started", "sandbox.command.finished"]
    sh("sandboxctl", "log", "--export", str(mine), sdk_sb.id)  # the CLI resumes the SDK's export
    assert len((mine / "audit.jsonl").read_bytes().splitlines()) == 7

    with pytest.raises(BadRequest):
        list(sdk_admin.export(since=-1))
    with pytest.raises(ValueError):
        sdk_admin.export(since=1, dir=str(mine))
    with pytest.raises(FileNotFoundError):
        list(sdk_admin.export(dir=str(tmp_path / "missing")))
    secret, _ = sdk_cli_key("--preset", "member", "--ttl", "1h")
    with pytest.raises(Forbidden):
        list(Client(secret).export())


def test_export_background_process(sdk_admin, sdk_sb, tmp_path):
    """A background process is one run over its rows: the SDK's directory says it runs, then resumes
    with its signal and end as sandboxctl does (the same metadata, the exit row's output)."""
    pid = sh("sandboxctl", "start", sdk_sb.id, "--", "sh", "-c", "echo out; exec sleep 1000").stdout.strip()
    sdk_wait(lambda: sdk_sb.exec("pgrep -x sleep").exit_code == 0, what="the process's sleep")
    spooled = lambda: sh("sqlite3", "/var/lib/sandboxd/audit-spool.db", "SELECT count(*) FROM spool",  # noqa: E731
                         check=False).stdout.strip() in ("0", "")
    sdk_wait(lambda: any(r["operation"] == "process.start" for r in sdk_admin.get_log(limit=10, session_id=sdk_sb.id))
             and spooled(), what="the start row")
    mine, cli = tmp_path / "sdk", tmp_path / "cli"
    mine.mkdir()
    cli.mkdir()
    ev = [e for e in sdk_admin.export(sandbox=sdk_sb.id, dir=str(mine)) if e.get("kind") == "process"]
    run = f"run-{sdk_sb.id}-{pid}"
    assert [(e["event"], e["runId"]) for e in ev] == [("sandbox.command.started", run)]
    md = json.loads((mine / run / "metadata.json").read_text())
    assert md["state"] == "running" and md["signals"] == [] and not (mine / run / "stdout.txt").exists()

    sh("sandboxctl", "kill", sdk_sb.id, pid)
    sdk_wait(lambda: any(r["operation"] == "process.exit" for r in sdk_admin.get_log(limit=10, session_id=sdk_sb.id))
             and spooled(), what="the exit row")
    new = list(sdk_admin.export(sandbox=sdk_sb.id, dir=str(mine)))
    assert [e["event"] for e in new] == ["sandbox.command.signal", "sandbox.command.failed"]
    sh("sandboxctl", "log", "--export", str(cli), sdk_sb.id)
    assert (mine / "audit.jsonl").read_bytes() == (cli / "audit.jsonl").read_bytes()
    assert (mine / run / "stdout.txt").read_bytes() == b"out\n" == (cli / run / "stdout.txt").read_bytes()
    md = json.loads((mine / run / "metadata.json").read_text())
    assert md == json.loads((cli / run / "metadata.json").read_text())
    assert md["state"] == "killed" and [s["signal"] for s in md["signals"]] == [15] and md["exitCode"] == 143
    sh("sandboxctl", "log", "--export", str(mine), sdk_sb.id)  # the CLI resumes it: nothing new
    assert (mine / "audit.jsonl").read_bytes() == (cli / "audit.jsonl").read_bytes()


def _collect(watch, into, stop):
    try:
        for entry in watch:
            into.append(entry)
            if stop.is_set():
                break
    except Exception as e:  # surfaced by the test
        into.append(e)


def test_watch_live_and_resume(sdk_admin, sdk_sb):
    w = sdk_sb.watch()
    got, stop = [], threading.Event()
    t = threading.Thread(target=_collect, args=(w, got, stop), daemon=True)
    t.start()
    # the stream is open once a row written now arrives; write until one does
    sdk_wait(lambda: sdk_sb.exec("echo live") and got, what="a live row")
    n = len(got)
    sdk_sb.exec("echo second")
    sdk_wait(lambda: len(got) > n, what="a second live row")

    # 1) the client's connection drops: the rows written meanwhile arrive once, on the new connection
    w.drop_connection()
    for i in range(3):
        sdk_sb.exec(f"echo during-drop-{i}")
    sdk_wait(lambda: w.reconnects >= 1, what="a reconnect")

    # 2) the gateway itself goes away and rows are written without it (through sandboxd directly)
    sh("systemctl", "stop", "sandbox-gatewayd.socket", "sandbox-gatewayd.service")
    try:
        sdk_wait(lambda: w.reconnects >= 2, what="the stream to notice the gateway is gone")
        for i in range(3):
            sh("sandboxctl", "exec", "--capture", sdk_sb.id, "echo", f"gateway-down-{i}")
    finally:
        sh("systemctl", "start", "sandbox-gatewayd.socket")
    last = sdk_admin.get_log(limit=1, session_id=sdk_sb.id)[0]["id"]
    sdk_wait(lambda: any(not isinstance(e, dict) for e in got) or (got and got[-1]["id"] >= last), what="catch-up")
    stop.set()
    w.close()
    assert all(isinstance(e, dict) for e in got), got[-1]
    ids = [e["id"] for e in got]
    assert ids == sorted(set(ids)), "a duplicate or out-of-order row"
    # no gap: every row of the sandbox since the first one received is there
    log_ids = sorted(r["id"] for r in sdk_sb.get_log(limit=1000) if ids[0] <= r["id"] <= ids[-1])
    assert ids == log_ids
    texts = json.dumps(got)
    assert all(f"gateway-down-{i}" in texts and f"during-drop-{i}" in texts for i in range(3))


def test_watch_resume_from_id(sdk_sb):
    sdk_sb.exec("echo one")
    sdk_sb.exec("echo two")
    rows = sdk_sb.get_log(limit=1000)
    start = rows[-1]["id"]  # the oldest: resume right after it
    w = sdk_sb.watch(last_event_id=start)
    it = iter(w)
    first = next(it)
    w.close()
    assert first["id"] == min(r["id"] for r in rows if r["id"] > start)
    with pytest.raises(BadRequest):
        next(iter(sdk_sb.watch(last_event_id="nope")))


# --- takeover --------------------------------------------------------------------------------------------

def test_takeover_echo(sdk_admin, sdk_sb):
    ws = sdk_sb.takeover(cols=100, rows=30)
    try:
        assert isinstance(ws, sandboxd.takeover.TakeoverSocket)
        ws.resize(120, 40)
        ws.write(b"stty size; echo hi; exit 3\n")
        out = b""
        while True:
            chunk = ws.read()
            if chunk is None:
                break
            out += chunk
    finally:
        ws.close()
    lines = out.decode(errors="replace").replace("\r", "").split("\n")
    assert "hi" in lines, out
    assert any(line.endswith("40 120") for line in lines), out  # after the shell's bracketed-paste escape
    assert ws.close_status == 1000 and ws.exit_status == 3
    rows = sdk_sb.get_log(operation="takeover")
    assert rows and rows[0]["source"] == "human_takeover"


def test_takeover_refused_for_member(sdk_admin, sdk_sb):
    member = Client(sdk_admin.api_keys.create(name="sdk-member-tk", preset="member", ttl_seconds=600).secret)
    with pytest.raises(Forbidden):
        member.get(sdk_sb.id).takeover()
    with pytest.raises(Unauthorized):
        sandboxd.Sandbox(Client("sbx_live_" + "b" * 52), {"id": sdk_sb.id}).takeover()


# --- API keys and secrecy --------------------------------------------------------------------------------

def test_api_keys(sdk_admin):
    made = sdk_admin.api_keys.create(name="sdk-runner-2", preset="runner", ttl_seconds=600)
    assert made.secret.startswith("sbx_live_") and made.id.startswith("key_")
    assert made.api_key["role"] == "member" and made.api_key["name"] == "sdk-runner-2"
    assert made.id in [k["id"] for k in sdk_admin.api_keys.list()]
    runner = Client(made.secret)
    with runner.create(type="small", ttl_seconds=60) as sb:
        assert sb.owner == f"key:{made.id}"
    sdk_admin.api_keys.revoke(made.id)
    with pytest.raises(Unauthorized):
        runner.list()
    with pytest.raises(NotFound):
        sdk_admin.api_keys.revoke("key_aaaaaaaaaaaaaaaaaaaa")
    with pytest.raises(BadRequest):
        sdk_admin.api_keys.create(preset="superuser")


def test_key_never_in_sandbox_output(sdk_admin_secret, sdk_admin):
    client = Client(sdk_admin_secret)
    assert sdk_admin_secret not in repr(client)
    with client.create(type="small", ttl_seconds=600) as sb:
        sb.files.write("/tmp/x.py", "print('x')\n")
        outputs = [
            sb.exec("env; cat /proc/self/environ | tr '\\0' '\\n'"),
            sb.exec("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; "
                    "tr '\\0' '\\n' < $p/environ 2>/dev/null; done"),
            sb.exec("grep -rIl . /tmp /var/tmp \"$HOME\" 2>/dev/null | xargs cat 2>/dev/null"),
            sb.exec(["python3", "/tmp/x.py"]),
        ]
        streamed = []
        outputs.append(sb.exec("env", on_stdout=streamed.append))
        texts = [o.stdout + o.stderr for o in outputs] + ["".join(streamed)]
        assert outputs[0].exit_code == 0 and "PATH=" in outputs[0].stdout
        for t in texts:
            assert sdk_admin_secret not in t
            assert sdk_admin_secret[len("sbx_live_"):] not in t
        log = json.dumps(sb.get_log(limit=1000))
        assert sdk_admin_secret not in log


# --- background processes ---------------------------------------------------------------------------------

def test_processes_server_output_stdin_kill_wait_list(sdk_sb):
    """A server started in the background: its output read live (it answers a request made after the
    follow began), stdin written, list and get, kill, wait."""
    server = sdk_sb.processes.start(
        ["python3", "-u", "-c",
         "import http.server, sys\n"
         "class H(http.server.BaseHTTPRequestHandler):\n"
         "    def do_GET(self):\n"
         "        self.send_response(200); self.end_headers(); self.wfile.write(b'pong')\n"
         "    def log_message(self, *a):\n"
         "        print('served', self.path, flush=True)\n"
         "s = http.server.HTTPServer(('127.0.0.1', 8123), H)\n"
         "print('listening', flush=True)\n"
         "s.serve_forever()\n"], cwd="/tmp", env={"SDK": "1"}, timeout=600)
    assert isinstance(server, sandboxd.Process)
    assert server.id.startswith("p") and server.state == "running" and server.running and server.exit_code is None
    assert server.sandbox_id == sdk_sb.id and server.argv[0] == "python3" and server.pid > 0
    follow = server.follow(stream="stdout")
    it = iter(follow)
    got = ""

    def read_until(text):
        nonlocal got
        while text not in got:
            c = next(it)
            # chunks come as the process wrote them (python -u writes "listening" and "\n" apart)
            assert c.stream == "stdout" and c.offset == len(got.encode()), (c, got)
            got += c.data
    read_until("listening\n")
    assert got == "listening\n"
    # live: a request after the follow began shows up in it
    r = sdk_sb.exec("python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8123/x').read().decode())\"")
    assert r.exit_code == 0 and r.stdout == "pong\n", r
    read_until("served /x\n")
    assert got == "listening\nserved /x\n" and follow.position == f"{len(got)}:0"
    follow.close()
    assert server.output() == got and server.output("stderr") == ""

    # stdin through cat; list and get
    cat = sdk_sb.processes.start("exec cat")
    cat.write("hello\n")
    cat.write(b"\xc3\xa9\n")
    assert {p.id for p in sdk_sb.processes.list()} >= {server.id, cat.id}
    assert [p.id for p in sdk_sb.processes.list()].index(server.id) < [p.id for p in sdk_sb.processes.list()].index(cat.id)
    assert sdk_sb.processes.get(cat.id).argv == ["/bin/sh", "-c", "exec cat"]
    cat.close_stdin()
    assert cat.wait() == sandboxd.ProcessExit(0, "exited")
    assert cat.state == "exited" and cat.exit_code == 0 and not cat.running
    assert cat.output() == "hello\né\n" and cat.output(binary=True) == b"hello\n\xc3\xa9\n"
    with pytest.raises(Conflict):
        cat.write("late\n")

    # kill: the server ends by SIGTERM; wait says so; refresh agrees
    assert server.kill().id == server.id
    assert server.wait(timeout=60) == sandboxd.ProcessExit(143, "killed")
    assert server.refresh().exit_code == 143
    with pytest.raises(Conflict):
        server.kill("KILL")


def test_processes_follow_both_streams_resumes_after_a_drop(sdk_sb):
    """Iterating a process gives both streams' chunks with their offsets until it ends; a connection
    broken mid-stream is reopened from the last chunk's position: nothing twice, nothing lost."""
    p = sdk_sb.processes.start("for i in 1 2 3; do echo out$i; echo err$i >&2; read x; done; exit 7")
    follow = p.follow()
    chunks = []
    it = iter(follow)
    while "".join(c.data for c in chunks if c.stream == "stderr") != "err1\n" or \
            "".join(c.data for c in chunks if c.stream == "stdout") != "out1\n":
        chunks.append(next(it))
    follow.drop_connection()
    p.write("a\nb\n")
    # it has not ended: its last read waits for a third line
    while "".join(c.data for c in chunks if c.stream == "stderr") != "err1\nerr2\nerr3\n" or \
            "".join(c.data for c in chunks if c.stream == "stdout") != "out1\nout2\nout3\n":
        chunks.append(next(it))
    assert follow.reconnects >= 1
    p.write("c\n")
    assert list(it) == [] and follow.exit == sandboxd.ProcessExit(7, "exited")
    assert "".join(c.data for c in chunks if c.stream == "stdout") == "out1\nout2\nout3\n"
    assert "".join(c.data for c in chunks if c.stream == "stderr") == "err1\nerr2\nerr3\n"
    pos = {"stdout": 0, "stderr": 0}
    for c in chunks:
        assert c.offset == pos[c.stream], chunks
        pos[c.stream] += len(c.data)
    assert p.wait() == sandboxd.ProcessExit(7, "exited")
    # from a position, and the whole thing with `for … in p`, in bytes
    assert "".join(c.data for c in p.follow(stream="stdout", offset="5:0")) == "out2\nout3\n"
    assert b"".join(c.data for c in p.follow(binary=True) if c.stream == "stderr") == b"err1\nerr2\nerr3\n"
    assert [c.stream for c in p].count("stdout") >= 1


def test_processes_wait_timeout_stop_and_errors(sdk_sb):
    p = sdk_sb.processes.start(["sh", "-c", "trap '' TERM; echo up; while :; do sleep 1; done"])
    with pytest.raises(sandboxd.Timeout) as ei:
        p.wait(timeout=0.5)
    assert ei.value.code == "client_timeout" and p.refresh().running
    # stop: TERM is ignored, KILL follows
    assert p.stop().state == "killed" and p.exit_code == 137
    assert p.wait() == sandboxd.ProcessExit(137, "killed")
    # unknown process, bad input: the SDK's typed errors
    with pytest.raises(NotFound) as ei:
        sdk_sb.processes.get("p999999")
    assert ei.value.code == "not_found"
    with pytest.raises(NotFound):
        sdk_sb.processes.start(["/no/such/program"])
    with pytest.raises(BadRequest):
        sdk_sb.processes.start([])
    with pytest.raises(BadRequest):
        p.kill("NOSUCHSIGNAL")
    with pytest.raises(ValueError):
        p.follow(stream="stdin")


def test_processes_async(sdk_admin_secret):
    import asyncio
    from sandboxd.aio import AsyncClient

    async def main():
        c = AsyncClient(sdk_admin_secret, timeout=120)
        async with await c.create(type="small", ttl_seconds=600) as sb:
            p = await sb.processes.start("echo one; read x; echo two")
            seen = []
            async for chunk in p:
                seen.append(chunk)
                if chunk.data == "one\n":
                    await p.write("go\n")
            assert "".join(c.data for c in seen) == "one\ntwo\n"
            assert await p.wait() == sandboxd.ProcessExit(0, "exited")
            assert [q.id for q in await sb.processes.list()] == [p.id]
            assert (await sb.processes.get(p.id)).state == "exited"
            assert await p.output() == "one\ntwo\n"
    asyncio.run(main())


# --- asyncio ---------------------------------------------------------------------------------------------

def test_async_variant(sdk_admin_secret, sdk_admin):
    import asyncio

    from sandboxd.aio import AsyncClient

    async def main():
        client = AsyncClient(sdk_admin_secret, timeout=120)

        async def task(n):
            async with await client.create(type="small", ttl_seconds=600, name=f"sdk-async-{n}") as sb:
                await sb.files.write("/tmp/task.py", f"print({n} * 2)\n")
                r = await sb.exec("python3 /tmp/task.py", timeout_seconds=30)
                return sb.id, r
        done = await asyncio.gather(*(task(n) for n in range(3)))
        for n, (sid, r) in enumerate(done):
            assert r.exit_code == 0 and r.stdout == f"{n * 2}\n"
            with pytest.raises(NotFound):
                await client.get(sid)
        sid = None
        with pytest.raises(ZeroDivisionError):
            async with await client.create(type="small", ttl_seconds=600) as sb:
                sid = sb.id
                1 / 0
        with pytest.raises(NotFound):
            await client.get(sid)
        # the export as an async iterator: the same events as the sync one
        since = sdk_admin.get_log(limit=20)[-1]["id"]
        assert [e async for e in client.export(since=since)] == list(sdk_admin.export(since=since))
        # an async watch sees a row written after it began
        async with await client.create(type="small", ttl_seconds=600) as sb:
            rows = []

            async def consume():
                async for entry in sb.watch():
                    rows.append(entry)
                    if "async-watch" in json.dumps(entry):
                        return
            consumer = asyncio.ensure_future(consume())
            for _ in range(300):  # bounds a hang only
                if consumer.done():
                    break
                await sb.exec("echo async-watch")
                await asyncio.wait([consumer], timeout=0.2)
            assert consumer.done(), "the async watch got no row"
            await consumer
            assert rows and all(r["session_id"] == sb.id for r in rows)

    asyncio.run(main())


# --- issue 24: the images namespace ------------------------------------------------------------------------

def _tiny_rootfs():
    """A root file system of busybox-static (Debian's, on the host) as tar bytes."""
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in ("bin", "etc", "tmp", "home", "proc", "dev"):
            info = tarfile.TarInfo("./" + d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        with open("/bin/busybox", "rb") as f:
            data = f.read()
        info = tarfile.TarInfo("./bin/busybox")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _drop_image(client, name):
    try:
        client.images.remove(name)
    except NotFound:
        pass


def test_images_import_list_get_remove(sdk_admin, tmp_path):
    """images.import_archive from bytes (with progress), a path and a stream of chunks; list, get, remove."""
    import hashlib
    data = _tiny_rootfs()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    path = tmp_path / "rootfs.tar"
    path.write_bytes(data)
    names = ("sdkimg-bytes", "sdkimg-path", "sdkimg-stream")
    for n in names:
        _drop_image(sdk_admin, n)
    try:
        progress = []
        img = sdk_admin.images.import_archive("sdkimg-bytes", data, on_progress=progress.append)
        assert img["name"] == "sdkimg-bytes" and img["source"] == "tar" and img["digest"] == digest
        assert progress and {"job", "phase", "done", "total"} <= set(progress[0])
        assert sdk_admin.images.import_archive("sdkimg-path", str(path))["digest"] == digest
        chunks = (data[i:i + 10000] for i in range(0, len(data), 10000))
        assert sdk_admin.images.import_archive("sdkimg-stream", chunks)["digest"] == digest
        listed = {i["name"]: i for i in sdk_admin.images.list()}
        assert set(names) <= set(listed)
        got = sdk_admin.images.get("sdkimg-path")
        assert got["digest"] == digest and got["used_by"] == []
        with pytest.raises(Conflict):
            sdk_admin.images.import_archive("sdkimg-path", data)
    finally:
        for n in names:
            _drop_image(sdk_admin, n)
    assert not set(names) & {i["name"] for i in sdk_admin.images.list()}
    with pytest.raises(NotFound):
        sdk_admin.images.get("sdkimg-path")
    with pytest.raises(NotFound):
        sdk_admin.images.remove("sdkimg-path")


def test_images_errors(sdk_admin):
    """A refused archive, bad build input, a member key: typed errors, nothing made."""
    before = {i["name"] for i in sdk_admin.images.list()}
    with pytest.raises(BadRequest) as ei:
        sdk_admin.images.import_archive("sdkimg-bad", b"no archive at all\n" * 100)
    assert ei.value.code == "invalid_image"
    with pytest.raises(BadRequest) as ei:
        sdk_admin.images.import_archive("sdkimg-bad", b"no archive at all\n" * 100, on_progress=lambda p: None)
    assert ei.value.code == "invalid_image"
    with pytest.raises(BadRequest) as ei:
        sdk_admin.images.build("sdkimg-bad", variant="enormous", on_progress=lambda p: None)
    assert "variant" in str(ei.value)
    member = Client(sdk_admin.api_keys.create(preset="member", ttl_seconds=600).secret)
    with pytest.raises(Forbidden):
        member.images.import_archive("sdkimg-bad", _tiny_rootfs())
    with pytest.raises(Forbidden):
        member.images.build("sdkimg-bad")
    assert {i["name"] for i in sdk_admin.images.list()} == before


def test_images_async(sdk_admin_secret):
    import asyncio
    from sandboxd.aio import AsyncClient

    async def main():
        c = AsyncClient(sdk_admin_secret, timeout=120)
        try:
            await c.images.remove("sdkimg-async")
        except NotFound:
            pass
        seen = []
        img = await c.images.import_archive("sdkimg-async", _tiny_rootfs(), on_progress=seen.append)
        assert img["name"] == "sdkimg-async" and seen
        assert (await c.images.get("sdkimg-async"))["digest"] == img["digest"]
        assert "sdkimg-async" in {i["name"] for i in await c.images.list()}
        await c.images.remove("sdkimg-async")
        with pytest.raises(NotFound):
            await c.images.get("sdkimg-async")
    asyncio.run(main())
