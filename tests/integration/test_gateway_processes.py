# SPDX-License-Identifier: LGPL-2.1-or-later
# Issue 25, the gateway's step: background processes over REST (…/processes: start, list, get, output
# from an offset, stdin with close, signal, DELETE = SIGTERM then SIGKILL), their errors, and who may.
import base64
import json
import os

import pytest

from conftest import audit_log, wait_for
from gateway_helpers import (admin, assert_error, gateway_config, gateway_pid, raw_request,  # noqa: F401,F811
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


# --- following the output (SSE) ------------------------------------------------------------------------

class Follow:
    """GET …/output?follow=true read event by event: (id, event, data as JSON) and the comments' count."""

    def __init__(self, client, sid, pid, headers=None, **params):
        params.setdefault("follow", "true")
        self.r = client.req("GET", f"/v1/sandboxes/{sid}/processes/{pid}/output", params=params,
                            headers=headers or {}, stream=True)
        self.buf = b""
        self.chunks = self.r.iter_content(chunk_size=None)
        self.comments = []

    def next(self):
        """The next event, or None at the end of the stream."""
        while True:
            while b"\n\n" in self.buf:
                block, self.buf = self.buf.split(b"\n\n", 1)
                ev = {}
                for line in block.decode().split("\n"):
                    if line.startswith(":"):
                        self.comments.append(line[1:].strip())
                        continue
                    k, _, v = line.partition(": ")
                    ev[k] = v
                if "event" in ev:
                    return ev.get("id"), ev["event"], json.loads(ev["data"])
            try:
                self.buf += next(self.chunks)
            except StopIteration:
                return None

    def until(self, pred):
        """Events until pred(events so far) holds; all of them."""
        got = []
        while not pred(got):
            ev = self.next()
            assert ev is not None, f"the stream ended after {got}"
            got.append(ev)
        return got

    def rest(self):
        got = []
        while (ev := self.next()) is not None:
            got.append(ev)
        return got

    def close(self):
        self.r.close()


def joined(events, stream, b64=False):
    parts = [base64.b64decode(d["data"]) if b64 else d["data"].encode() for _, e, d in events if e == stream]
    return b"".join(parts) if b64 else b"".join(parts).decode()


def check_ids(events, start=(0, 0)):
    """Each event's offset is where the one before it left its stream, and its id says where both are after
    it (as byte counts of the UTF-8 sent: the processes here write nothing invalid)."""
    pos = list(start)
    for eid, event, data in events:
        if event in ("stdout", "stderr"):
            i = 0 if event == "stdout" else 1
            assert data["offset"] == pos[i], (events, pos)
            pos[i] += len(data["data"].encode())
        assert eid == f"{pos[0]}:{pos[1]}", (eid, pos, events)
    return pos


def stdin(client, sid, pid, data, close=False):
    r = client.post(f"/v1/sandboxes/{sid}/processes/{pid}/stdin", {"data": data, "close": close})
    assert r.status_code == 204, r.text


def test_follow_live_both_streams_and_the_end(admin, sandboxes):  # noqa: F811
    """What is kept, then what the process writes while followed (it waits for stdin between, so the
    second part cannot have been there before), both streams, then the exit event with the process."""
    sid = sandboxes()
    pid = start(admin, sid, ["sh", "-c", "echo ready; echo warming >&2; read x; echo got $x; echo bye >&2; exit 3"])["id"]
    output_until(admin, sid, pid, "ready\n")
    f = Follow(admin, sid, pid, stream="both")
    assert f.r.status_code == 200 and f.r.headers["Content-Type"] == "text/event-stream"
    first = f.until(lambda ev: joined(ev, "stdout") == "ready\n" and joined(ev, "stderr") == "warming\n")
    # it waits for its stdin: still running, and the stream stays open meanwhile
    assert get(admin, sid, pid)["state"] == "running"
    stdin(admin, sid, pid, "hi\n")
    rest = f.rest()
    events = first + rest
    assert joined(events, "stdout") == "ready\ngot hi\n" and joined(events, "stderr") == "warming\nbye\n"
    pos = check_ids(events)
    assert pos == [len("ready\ngot hi\n"), len("warming\nbye\n")]
    eid, event, obj = events[-1]
    assert event == "exit" and [e for _, e, _ in events].count("exit") == 1
    assert set(obj) == PROCESS_FIELDS and obj["id"] == pid
    assert (obj["state"], obj["exit_code"]) == ("exited", 3)
    assert "following" in f.comments

    # an ended process: what is kept, then the end at once; Accept: text/event-stream asks for it too
    f = Follow(admin, sid, pid, headers={"Accept": "text/event-stream"}, follow=None)
    again = f.rest()
    assert joined(again, "stdout") == "ready\ngot hi\n" and joined(again, "stderr") == ""
    assert again[-1][1] == "exit" and again[-1][2] == obj
    # stderr alone
    f = Follow(admin, sid, pid, stream="stderr")
    assert joined(f.rest(), "stderr") == "warming\nbye\n"


def test_follow_resumes_by_last_event_id(admin, sandboxes):  # noqa: F811
    """A client that drops the connection mid-stream and comes back with Last-Event-ID gets what follows,
    with no gap and nothing twice; the event id is also accepted as offset=."""
    sid = sandboxes()
    script = "for i in 1 2 3; do echo out$i; echo err$i >&2; read x; done; echo last; exit 0"
    pid = start(admin, sid, ["sh", "-c", script])["id"]
    f = Follow(admin, sid, pid, stream="both")
    seen = f.until(lambda ev: joined(ev, "stdout") == "out1\n" and joined(ev, "stderr") == "err1\n")
    last_id = seen[-1][0]
    assert last_id == "5:5"
    f.close()
    # written while nobody followed
    stdin(admin, sid, pid, "a\n")
    output_until(admin, sid, pid, "err1\nerr2\n", stream="stderr")
    f = Follow(admin, sid, pid, headers={"Last-Event-ID": last_id}, stream="both")
    more = f.until(lambda ev: joined(ev, "stdout") == "out2\n" and joined(ev, "stderr") == "err2\n")
    check_ids(more, start=(5, 5))
    stdin(admin, sid, pid, "b\n")
    more += f.until(lambda ev: joined(ev, "stdout") == "out3\n" and joined(ev, "stderr") == "err3\n")
    mid = more[-1][0]
    f.close()
    stdin(admin, sid, pid, "c\n")
    # the id as offset=: the rest, then the end
    f = Follow(admin, sid, pid, stream="both", offset=mid)
    tail = f.rest()
    check_ids(tail, start=tuple(int(x) for x in mid.split(":")))
    everything = seen + more + tail
    assert joined(everything, "stdout") == "out1\nout2\nout3\nlast\n"
    assert joined(everything, "stderr") == "err1\nerr2\nerr3\n"
    assert tail[-1][1] == "exit" and tail[-1][2]["exit_code"] == 0

    # one number: that offset in each stream followed
    f = Follow(admin, sid, pid, offset="10")
    assert joined(f.rest(), "stdout") == "out3\nlast\n"


def test_follow_text_never_splits_a_character_and_base64(admin, sandboxes):  # noqa: F811
    """A character whose first byte came alone waits for the rest (no U+FFFD, the id before it); base64
    gives the bytes as they are, invalid ones too."""
    sid = sandboxes()
    pid = start(admin, sid, ["sh", "-c", "printf 'caf\\303'; read x; printf '\\251\\n\\377'"])["id"]
    output_until(admin, sid, pid, "caf")  # the JSON read keeps the cut character back too
    f = Follow(admin, sid, pid)
    first = f.until(lambda ev: joined(ev, "stdout") == "caf")
    assert first[-1][0] == "3:0"
    stdin(admin, sid, pid, "go\n")
    events = first + f.rest()
    # the last byte is invalid: U+FFFD once the stream has ended
    assert joined(events, "stdout") == "café\n\ufffd"
    assert "\ufffd" not in "".join(d["data"] for _, e, d in events if e == "stdout")[:-1]
    assert events[-1][1] == "exit" and events[-2][0] == "7:0"

    f = Follow(admin, sid, pid, encoding="base64")
    raw = f.rest()
    assert joined(raw, "stdout", b64=True) == b"caf\xc3\xa9\n\xff"
    assert raw[-1][0] == "7:0"


def test_follow_client_that_leaves_frees_its_fds(admin, sandboxes):  # noqa: F811
    """A follow holds the connection and a pipe per stream; when its client goes they go at once, while
    the process still runs (no answer from sandboxd is waited for)."""
    sid = sandboxes()
    pid = start(admin, sid, ["sh", "-c", "echo up; exec cat"])["id"]
    output_until(admin, sid, pid, "up\n")
    gw = gateway_pid()

    def fds():
        return [os.readlink(f"/proc/{gw}/fd/{fd}") for fd in os.listdir(f"/proc/{gw}/fd")]

    def nfds():
        return len(fds())
    before = nfds()
    pipes = sum(t.startswith("pipe:") for t in fds())
    follows = [Follow(admin, sid, pid, stream="both") for _ in range(3)]
    for f in follows:
        f.until(lambda ev: joined(ev, "stdout") == "up\n")
    # each: a pipe per stream (and its connection)
    assert sum(t.startswith("pipe:") for t in fds()) == pipes + 3 * 2, fds()
    for f in follows:
        f.close()
    wait_for(lambda: nfds() <= before, what=f"the gateway's fds back to {before} (now {nfds()})")
    # the process did not notice
    assert get(admin, sid, pid)["state"] == "running"
    stdin(admin, sid, pid, "still here\n", close=True)
    assert ended(admin, sid, pid)["exit_code"] == 0


def test_follow_bad_params(admin, sandboxes):  # noqa: F811
    """Bad parameters are 400 JSON before anything is followed; the JSON read's errors otherwise."""
    sid = sandboxes()
    pid = start(admin, sid, ["sh", "-c", "echo hi; exec cat"])["id"]
    output_until(admin, sid, pid, "hi\n")
    base = f"/v1/sandboxes/{sid}/processes/{pid}/output"
    for params in ({"follow": "maybe"}, {"stream": "both"}, {"follow": "true", "stream": "stdin"},
                   {"follow": "true", "offset": "x"}, {"follow": "true", "offset": "1:2:3"},
                   {"follow": "true", "offset": "-1"}, {"follow": "true", "offset": "1:"},
                   {"follow": "true", "max": "10"}, {"follow": "true", "encoding": "latin1"},
                   {"follow": "true", "offset": "1000"}, {"follow": "true", "offset": "0:1000", "stream": "both"}):
        assert_error(admin.get(base, params=params), 400, "invalid_request")
    for last in ("abc", "1:x", ""):
        assert_error(admin.get(base, params={"follow": "true"}, headers={"Last-Event-ID": last}), 400,
                     "invalid_request")
    assert_error(admin.get(f"/v1/sandboxes/{sid}/processes/p999999/output", params={"follow": "true"}), 404,
                 "not_found")
    # follow=false is the JSON read
    assert admin.get(base, params={"follow": "false"}).json()["data"] == "hi\n"
    # a key without sandbox.read cannot follow either
    runner, _ = admin.mint(role="admin", actions=["exec"], sandboxes=[sid], ttl_seconds=600, name="follow-exec")
    assert_error(runner.get(base, params={"follow": "true"}), 403, "forbidden",
                 "This API key lacks the action 'sandbox.read'.")
    stdin(admin, sid, pid, "", close=True)


def test_follow_caps(admin, sandboxes, gateway_config):  # noqa: F811
    """Follows count against MaxStreamsPerKey= like watches; sandboxd takes 8 attached fds per process,
    so a fifth follow of both streams is refused (422) and the four go on."""
    gateway_config("MaxStreamsPerKey=5\n")
    sid = sandboxes()
    pid = start(admin, sid, ["sh", "-c", "echo up; exec cat"])["id"]
    output_until(admin, sid, pid, "up\n")
    key, _ = admin.mint(role="admin", actions=["sandbox.read", "exec"], ttl_seconds=600, name="follow-cap")
    follows = [Follow(key, sid, pid, stream="both") for _ in range(4)]
    for f in follows:
        f.until(lambda ev: joined(ev, "stdout") == "up\n")
    assert_error(key.get(f"/v1/sandboxes/{sid}/processes/{pid}/output", params={"follow": "true", "stream": "both"}),
                 422, "limit_exceeded")
    other = Follow(key, sid, p2 := start(admin, sid, ["sh", "-c", "echo two; exec cat"])["id"])
    other.until(lambda ev: joined(ev, "stdout") == "two\n")
    # the sixth stream of the key
    assert_error(key.get(f"/v1/sandboxes/{sid}/processes/{p2}/output", params={"follow": "true"}), 429,
                 "too_many_streams")
    stdin(admin, sid, pid, "more\n", close=True)
    for f in follows:
        rest = f.rest()
        assert joined(rest, "stdout") == "more\n" and rest[-1][1] == "exit"
    stdin(admin, sid, p2, "", close=True)
    assert other.rest()[-1][2]["state"] == "exited"
