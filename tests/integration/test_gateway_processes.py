# SPDX-License-Identifier: LGPL-2.1-or-later
# Issue 25, the gateway's step: background processes over REST (…/processes: start, list, get, output
# from an offset, stdin with close, signal, DELETE = SIGTERM then SIGKILL), their errors, and who may.
import base64
import json

import pytest

from conftest import audit_log, wait_for
from gateway_helpers import (admin, assert_error, gateway_config, raw_request,  # noqa: F401,F811
                             up)

PROCESS_FIELDS = {"id", "sandbox", "state", "exit_code", "pid", "started_at", "argv", "unit"}


@pytest.fixture
def sandboxes(admin):  # noqa: F811
    """Sandboxes made through the gateway, deleted afterwards with the admin key."""
    made = []

    def make(client=None, **body):
        body.setdefault("type", "small")
        r = (client or admin).post("/v1/sandboxes", body)
        assert r.status_code == 201, r.text
        made.append(r.json()["id"])
        return r.json()["id"]

    yield make
    for sid in made:
        admin.delete(f"/v1/sandboxes/{sid}")


def start(client, sid, argv, **body):
    r = client.post(f"/v1/sandboxes/{sid}/processes", dict(body, argv=argv))
    assert r.status_code == 201, r.text
    return r.json()


def get(client, sid, pid):
    r = client.get(f"/v1/sandboxes/{sid}/processes/{pid}")
    assert r.status_code == 200, r.text
    return r.json()


def output(client, sid, pid, **params):
    r = client.get(f"/v1/sandboxes/{sid}/processes/{pid}/output", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def output_until(client, sid, pid, want, stream="stdout"):
    return wait_for(lambda: (o := output(client, sid, pid, stream=stream))["data"] == want and o,
                    what=f"{want!r} as {pid}'s {stream}")


def ended(client, sid, pid):
    return wait_for(lambda: (p := get(client, sid, pid))["state"] != "running" and p, what=f"{pid} to end")


def test_start_list_get_output_stdin(admin, sandboxes):  # noqa: F811
    sid = sandboxes()
    p = start(admin, sid, ["sh", "-c", "printf 'hello\\n'; printf 'oops' >&2; exec cat"], cwd="/tmp",
              env={"GREETING": "hi"}, timeout_seconds=600)
    assert set(p) == PROCESS_FIELDS, p
    assert p["id"].startswith("p") and p["sandbox"] == sid and p["state"] == "running"
    assert p["exit_code"] is None and p["pid"] > 0 and p["started_at"].endswith("Z")
    assert p["argv"] == ["sh", "-c", "printf 'hello\\n'; printf 'oops' >&2; exec cat"]
    assert p["unit"].startswith(f"sandbox-{sid}-process-") and p["unit"].endswith(".scope")
    pid = p["id"]

    # list and get show the same object
    r = admin.get(f"/v1/sandboxes/{sid}/processes")
    assert r.status_code == 200, r.text
    assert list(r.json()) == ["processes"] and r.json()["processes"] == [p]
    assert get(admin, sid, pid) == p

    # output from an offset, a bounded read, the other stream, base64
    o = output_until(admin, sid, pid, "hello\n")
    assert o == {"data": "hello\n", "encoding": "utf-8", "next_offset": 6, "first_offset": 0, "ended": False}
    assert output(admin, sid, pid, offset=2) == dict(o, data="llo\n")
    assert output(admin, sid, pid, offset=1, max=3) == dict(o, data="ell", next_offset=4)
    assert output(admin, sid, pid, offset=6)["data"] == ""
    assert output_until(admin, sid, pid, "oops", stream="stderr")["next_offset"] == 4
    b = output(admin, sid, pid, encoding="base64")
    assert b["encoding"] == "base64" and base64.b64decode(b["data"]) == b"hello\n"

    # stdin round trip through cat, text and base64, then close: cat ends with 0
    r = admin.post(f"/v1/sandboxes/{sid}/processes/{pid}/stdin", {"data": "ping\n"})
    assert r.status_code == 204, r.text
    output_until(admin, sid, pid, "hello\nping\n")
    r = admin.post(f"/v1/sandboxes/{sid}/processes/{pid}/stdin",
                   {"data": base64.b64encode(b"\xc3\xa9t\xc3\xa9\n").decode(), "encoding": "base64", "close": True})
    assert r.status_code == 204, r.text
    done = ended(admin, sid, pid)
    assert (done["state"], done["exit_code"]) == ("exited", 0)
    o = output(admin, sid, pid, offset=6)
    assert o == {"data": "ping\nété\n", "encoding": "utf-8", "next_offset": 6 + 5 + 6, "first_offset": 0,
                 "ended": True}
    # a character cut by max is left for the next read, so text reads never split one
    assert output(admin, sid, pid, offset=11, max=1)["data"] == "\ufffd"
    cut = output(admin, sid, pid, offset=11, max=4)
    assert cut["data"] == "ét" and cut["next_offset"] == 14 and not cut["ended"]
    # its stdin is closed now: a conflict
    r = admin.post(f"/v1/sandboxes/{sid}/processes/{pid}/stdin", {"data": "late\n"})
    assert_error(r, 409, "conflict")


def test_signal(admin, sandboxes):  # noqa: F811
    sid = sandboxes()
    pid = start(admin, sid, ["sleep", "1000"])["id"]
    r = admin.post(f"/v1/sandboxes/{sid}/processes/{pid}/signal", {"signal": "TERM"})
    assert r.status_code == 200, r.text
    assert set(r.json()) == PROCESS_FIELDS and r.json()["id"] == pid
    done = ended(admin, sid, pid)
    assert (done["state"], done["exit_code"]) == ("killed", 128 + 15)
    # once ended: a conflict
    r = admin.post(f"/v1/sandboxes/{sid}/processes/{pid}/signal", {"signal": 15})
    assert_error(r, 409, "conflict")

    # by number and by the SIG name
    for sig, code in ((9, 137), ("SIGINT", 130)):
        pid = start(admin, sid, ["sleep", "1000"])["id"]
        r = admin.post(f"/v1/sandboxes/{sid}/processes/{pid}/signal", {"signal": sig})
        assert r.status_code == 200, r.text
        assert ended(admin, sid, pid)["exit_code"] == code


def test_delete_terminates_then_kills(admin, sandboxes):  # noqa: F811
    sid = sandboxes()
    pid = start(admin, sid, ["sleep", "1000"])["id"]
    r = admin.delete(f"/v1/sandboxes/{sid}/processes/{pid}")
    assert r.status_code == 200, r.text
    # answered once it has ended: SIGTERM was enough
    assert (r.json()["state"], r.json()["exit_code"]) == ("killed", 143)

    # one that ignores SIGTERM gets SIGKILL
    pid = start(admin, sid, ["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"])["id"]
    output_until(admin, sid, pid, "ready\n")
    r = admin.delete(f"/v1/sandboxes/{sid}/processes/{pid}")
    assert r.status_code == 200, r.text
    assert (r.json()["state"], r.json()["exit_code"]) == ("killed", 137)

    # an ended one: nothing to stop, the same answer
    r2 = admin.delete(f"/v1/sandboxes/{sid}/processes/{pid}")
    assert r2.status_code == 200 and r2.json() == r.json()
    # it stays listed
    assert pid in [p["id"] for p in admin.get(f"/v1/sandboxes/{sid}/processes").json()["processes"]]


def test_delete_whose_client_leaves_still_kills(admin, sandboxes):  # noqa: F811
    """A client that leaves once the SIGTERM is sent: the grace and the SIGKILL follow all the same, both
    signals recorded under the DELETE's request id."""
    sid = sandboxes()
    pid = start(admin, sid, ["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"])["id"]
    output_until(admin, sid, pid, "ready\n")
    sock = raw_request("DELETE", f"/v1/sandboxes/{sid}/processes/{pid}", secret=admin.secret)

    def signals():
        return [(json.loads(str(r["detail"]))["signal"], str(r["request_id"]))
                for r in audit_log(sid, operation="process.signal")]
    [(sig, request_id)] = wait_for(signals, what="the SIGTERM's row")
    assert sig == 15
    sock.close()
    done = ended(admin, sid, pid)
    assert (done["state"], done["exit_code"]) == ("killed", 137)
    assert sorted(signals()) == [(9, request_id), (15, request_id)]


def test_unknown_process_and_sandbox(admin, sandboxes):  # noqa: F811
    sid = sandboxes()
    base = f"/v1/sandboxes/{sid}/processes/p999999"
    assert_error(admin.get(base), 404, "not_found", f"Process p999999 does not exist in sandbox {sid}.")
    assert_error(admin.get(base + "/output"), 404, "not_found")
    assert_error(admin.post(base + "/stdin", {"data": "x"}), 404, "not_found")
    assert_error(admin.post(base + "/signal", {"signal": "TERM"}), 404, "not_found")
    assert_error(admin.delete(base), 404, "not_found")
    # an argv[0] that is not there: sandboxd's NoSuchFile, nothing started
    before = admin.get(f"/v1/sandboxes/{sid}/processes").json()
    assert_error(admin.post(f"/v1/sandboxes/{sid}/processes", {"argv": ["/no/such/program"]}), 404, "not_found")
    assert admin.get(f"/v1/sandboxes/{sid}/processes").json() == before
    assert_error(admin.get("/v1/sandboxes/sb_nosuchsandbox/processes"), 404, "not_found")
    assert_error(admin.post("/v1/sandboxes/sb_nosuchsandbox/processes", {"argv": ["true"]}), 404, "not_found")


def test_bad_input_changes_nothing(admin, sandboxes):  # noqa: F811
    sid = sandboxes()
    pid = start(admin, sid, ["cat"])["id"]
    before = admin.get(f"/v1/sandboxes/{sid}/processes").json()
    procs = f"/v1/sandboxes/{sid}/processes"
    base = f"{procs}/{pid}"

    for body in ({}, {"argv": []}, {"argv": "true"}, {"argv": [1]}, {"argv": ["true"], "stdin": "x"},
                 {"argv": ["true"], "timeout_seconds": -1}, {"argv": ["true"], "env": {"A": 1}}, [], "x"):
        assert_error(admin.post(procs, body), 400, "invalid_request")
    assert_error(admin.req("POST", procs, data="{", headers={"Content-Type": "application/json"}), 400,
                 "invalid_json")
    # a cwd that is not there: sandboxd's InvalidArgs
    assert_error(admin.post(procs, {"argv": ["true"], "cwd": "/no/such/dir"}), 400, "invalid_request")

    for body in ({}, {"data": 1}, {"close": "yes"}, {"data": "x", "encoding": "latin1"},
                 {"data": "!!", "encoding": "base64"}, {"data": "x", "more": 1}, {"data": "a\u0000b"}):
        assert_error(admin.post(base + "/stdin", body), 400, "invalid_request")
    for body in ({}, {"signal": "FOO"}, {"signal": "TE\u0000RM"}, {"signal": 0}, {"signal": 1000}, {"signal": -9},
                 {"signal": True},
                 {"signal": "TERM", "x": 1}, []):
        assert_error(admin.post(base + "/signal", body), 400, "invalid_request")
    for params in ({"stream": "stdin"}, {"offset": "abc"}, {"offset": "-1"}, {"max": "4294967296"},
                   {"encoding": "latin1"}, {"offset": "1000000"}):
        assert_error(admin.get(base + "/output", params=params), 400, "invalid_request")

    # nothing started, nothing written, nothing signalled
    assert admin.get(procs).json() == before
    r = admin.post(base + "/stdin", {"data": "still\n", "close": True})
    assert r.status_code == 204, r.text
    o = output_until(admin, sid, pid, "still\n")
    assert ended(admin, sid, pid)["exit_code"] == 0 and o["next_offset"] == 6


def test_who_may(admin, sandboxes):  # noqa: F811
    own, other = sandboxes(), sandboxes()
    pid = start(admin, other, ["sleep", "1000"])["id"]
    before = admin.get(f"/v1/sandboxes/{other}/processes").json()

    # a member key for its own sandbox: allowed there, refused on another's, every route
    member, _ = admin.mint(preset="member", sandboxes=[own], ttl_seconds=600, name="proc-member")
    mine = start(member, own, ["true"])["id"]
    assert get(member, own, mine)["id"] == mine
    base = f"/v1/sandboxes/{other}/processes"
    for method, path, body in (("POST", base, {"argv": ["true"]}), ("GET", base, None),
                               ("GET", f"{base}/{pid}", None), ("GET", f"{base}/{pid}/output", None),
                               ("POST", f"{base}/{pid}/stdin", {"data": "x"}),
                               ("POST", f"{base}/{pid}/signal", {"signal": "KILL"}),
                               ("DELETE", f"{base}/{pid}", None)):
        r = member.post(path, body) if method == "POST" else member.req(method, path)
        assert_error(r, 403, "forbidden", f"Sandbox {other} is outside this API key's scope.")

    # a key without exec: reads only
    reader, _ = admin.mint(role="admin", actions=["sandbox.read"], sandboxes=[other], ttl_seconds=600,
                           name="proc-reader")
    assert reader.get(base).json() == before
    assert reader.get(f"{base}/{pid}/output").status_code == 200
    for method, path, body in (("POST", base, {"argv": ["true"]}), ("POST", f"{base}/{pid}/stdin", {"data": "x"}),
                               ("POST", f"{base}/{pid}/signal", {"signal": "KILL"}),
                               ("DELETE", f"{base}/{pid}", None)):
        r = reader.post(path, body) if method == "POST" else reader.req(method, path)
        assert_error(r, 403, "forbidden", "This API key lacks the action 'exec'.")
    # a key with exec but not sandbox.read: no reads
    runner, _ = admin.mint(role="admin", actions=["exec"], sandboxes=[other], ttl_seconds=600, name="proc-exec")
    assert_error(runner.get(base), 403, "forbidden", "This API key lacks the action 'sandbox.read'.")
    assert_error(runner.get(f"{base}/{pid}/output"), 403, "forbidden")

    # none of it changed the process
    assert admin.get(f"/v1/sandboxes/{other}/processes").json() == before


def test_starts_count_as_exec_starts(admin, sandboxes, gateway_config):  # noqa: F811
    """A start is a new scope, as an Exec's: past the key's budget of Exec starts it is 429
    too_many_execs, and nothing is started."""
    gateway_config("ExecBurstPerMemberKey=3\nExecsPerSecPerMemberKey=1\n")
    sid = sandboxes()
    member, _ = admin.mint(preset="member", ttl_seconds=600, name="proc-budget")
    ok = 0
    for _ in range(30):
        r = member.post(f"/v1/sandboxes/{sid}/processes", {"argv": ["true"]})
        if r.status_code != 201:
            break
        ok += 1
    body = assert_error(r, 429, "too_many_execs")
    assert ok >= 3 and "ExecBurstPerMemberKey=" in body["error"], (ok, body)
    assert len(admin.get(f"/v1/sandboxes/{sid}/processes").json()["processes"]) == ok
