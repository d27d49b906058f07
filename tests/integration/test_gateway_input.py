# SPDX-License-Identifier: LGPL-2.1-or-later
# sandbox-gatewayd against hostile input (issue 21): NUL characters in JSON strings, bodies framed two ways
# (request smuggling), invalid UTF-8 in paths, in answers and in audit rows, and a scoped key that names
# its sandbox by name.
import json
import re
import socket
import uuid

import pytest

from conftest import audit_log, wait_for
from gateway_helpers import (BASE, Client, admin, assert_error, cli_key, gateway_pid, gateway_up,  # noqa: F401,F811
                             raw_request, up)

# a response starts where the one before ends, after its body: a JSON body ends without a newline
STATUS_LINE = re.compile(rb"HTTP/1\.1 (\d{3}) [A-Za-z ]*\r\n")
READ_TIMEOUT = 30  # bounds a hang only: a connection the gateway keeps open is the failure


@pytest.fixture(scope="module")
def sandbox(admin):
    r = admin.post("/v1/sandboxes", {"type": "small", "name": "input-" + uuid.uuid4().hex[:8]})
    assert r.status_code == 201, r.text
    yield r.json()
    admin.delete(f"/v1/sandboxes/{r.json()['id']}")


def post_json_text(client, path, text):
    """A body as written: json.dumps() spells a NUL character \\u0000, as an attacker would."""
    return client.post(path, data=text.encode(), headers={"Content-Type": "application/json"})


def run_in(admin, sid, command):
    r = admin.post(f"/v1/sandboxes/{sid}/exec", {"command": command})
    assert r.status_code == 200, r.text
    return r.json()


def nul_refused(r, field):
    body = assert_error(r, 400, "invalid_request")
    assert f"Field '{field}' holds a NUL character" in body["error"], body


# --- 6: a \u0000 never cuts a string short ---------------------------------------------------------------

def test_nul_in_strings_is_refused_and_changes_nothing(admin, sandbox):
    sid = sandbox["id"]
    tools = f"/v1/sandboxes/{sid}/tools"

    nul_refused(admin.post(f"{tools}/file_create", {"path": "/tmp/nul-created", "content": "abc\x00def"}), "content")
    assert run_in(admin, sid, "test -e /tmp/nul-created")["exit_code"] == 1

    assert admin.post(f"{tools}/file_create", {"path": "/tmp/nul-edit", "content": "abcdef"}).status_code == 201
    nul_refused(admin.post(f"{tools}/str_replace", {"path": "/tmp/nul-edit", "old": "abc\x00zzz", "new": "X"}), "old")
    nul_refused(admin.post(f"{tools}/str_replace", {"path": "/tmp/nul-edit", "old_str": "abc",
                                                    "new_str": "Y\x00Z"}), "new_str")
    assert run_in(admin, sid, "cat /tmp/nul-edit")["stdout"] == "abcdef"

    exe = f"/v1/sandboxes/{sid}/exec"
    nul_refused(admin.post(exe, {"command": "touch /tmp/nul-ran\x00; echo INJECTED"}), "command")
    nul_refused(admin.post(exe, {"argv": ["touch", "/tmp/nul-ran\x00x"]}), "argv[1]")
    nul_refused(admin.post(exe, {"command": "touch /tmp/nul-ran", "env": {"A": "x\x00y"}}), "env.A")
    nul_refused(admin.post(exe, {"command": "touch /tmp/nul-ran", "stdin": "a\x00b"}), "stdin")
    nul_refused(admin.post(exe, {"command": "touch /tmp/nul-ran", "cwd": "/tmp\x00/x"}), "cwd")
    body = assert_error(post_json_text(admin, exe, '{"command":"touch /tmp/nul-ran","env":{"A\\u0000B":"x"}}'),
                        400, "invalid_request")
    assert "field name" in body["error"]
    assert run_in(admin, sid, "test -e /tmp/nul-ran")["exit_code"] == 1

    # a %00 in the query is the same NUL: PUT …/files?path=/tmp/nul-q%00x wrote /tmp/nul-q
    files = f"{BASE}/v1/sandboxes/{sid}/files"
    r = admin.s.put(files + "?path=/tmp/nul-q%00x", data=b"data", timeout=60)
    body = assert_error(r, 400, "invalid_request")
    assert "Query parameter 'path' holds a NUL character" in body["error"], body
    assert_error(admin.s.get(files + "?path=/etc/hostname&off%00set=1", timeout=60), 400, "invalid_request")
    assert run_in(admin, sid, "test -e /tmp/nul-q")["exit_code"] == 1

    # elsewhere too: a sandbox's name, a key's name
    nul_refused(admin.post("/v1/sandboxes", {"name": "nul\x00name"}), "name")
    nul_refused(admin.post("/v1/api-keys", {"name": "nul\x00name", "preset": "runner"}), "name")

    # bytes with a NUL go base64-encoded, whole
    r = admin.post(f"{tools}/file_create", {"path": "/tmp/nul-b64", "content": "YWJjAGRlZg==", "encoding": "base64"})
    assert r.status_code == 201, r.text
    assert run_in(admin, sid, "od -An -c /tmp/nul-b64 | tr -d ' \\n'")["stdout"] == "abc\\0def"


# --- 7: a body framed two ways is refused and the connection closed ----------------------------------------

def responses(sock):
    """The status codes of every response the gateway sends until it closes the connection."""
    sock.settimeout(READ_TIMEOUT)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pytest.fail(f"the gateway kept the connection open after: {data[:400]!r}")
    finally:
        sock.close()
    return [int(m.group(1)) for m in STATUS_LINE.finditer(data)], data


def send(raw):
    s = socket.create_connection(("127.0.0.1", 8790))
    s.sendall(raw)
    return s


def smuggled(secret):
    return (f"GET /v1/smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {secret}\r\n"
            "Connection: close\r\n\r\n").encode()


@pytest.mark.parametrize("framing", ["two-lengths", "equal-lengths", "te-and-cl", "chunked-identity",
                                     "two-te"])
def test_smuggling_is_refused_and_closes(admin, framing):
    secret = admin.secret
    inner = smuggled(secret)
    head = f"POST /v1/api-keys HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {secret}\r\n"
    if framing == "two-lengths":       # the first, 0, won: the body was the next request
        head += f"Content-Length: 0\r\nContent-Length: {len(inner)}\r\n"
        body = inner
    elif framing == "equal-lengths":
        head += f"Content-Length: {len(inner)}\r\nContent-Length: {len(inner)}\r\n"
        body = inner
    elif framing == "te-and-cl":        # chunked won: what follows its end was the next request
        body = b"0\r\n\r\n" + inner
        head += f"Transfer-Encoding: chunked\r\nContent-Length: {len(body)}\r\n"
    elif framing == "chunked-identity":  # no body at all: the body was the next request
        head += "Transfer-Encoding: chunked, identity\r\n"
        body = inner
    else:
        body = b"0\r\n\r\n" + inner
        head += "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"
    keys_before = admin.get("/v1/api-keys").json()["api_keys"]

    codes, data = responses(send(head.encode() + b"\r\n" + body))
    assert codes == [400], data
    head_part, _, payload = data.partition(b"\r\n\r\n")
    assert re.search(rb"\r\nConnection: close\r\n", head_part, re.I), data
    err = json.loads(payload)
    assert err["code"] == "invalid_request" and err["status"] == 400, err
    assert admin.get("/v1/api-keys").json()["api_keys"] == keys_before


def test_one_framing_still_keeps_the_connection(admin):
    """The check refuses only ambiguity: a chunked body is read, and the next request is answered."""
    secret = admin.secret
    body = b"1\r\n{\r\n0\r\n\r\n"
    first = (f"POST /v1/api-keys HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {secret}\r\n"
             "Transfer-Encoding: chunked\r\n\r\n").encode() + body
    second = (f"GET /v1/sandboxes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {secret}\r\n"
              "Connection: close\r\n\r\n").encode()
    codes, data = responses(send(first + second))
    assert codes == [400, 200], data
    assert b'"code":"invalid_json"' in data


# --- 8 and 9: invalid UTF-8 in a path: a valid answer, and a row that is not lost ---------------------------

def test_invalid_utf8_path_answers_valid_utf8(admin):
    r = admin.get("/v1/rt%ff%fe%80")
    assert r.status_code == 404
    text = r.content.decode("utf-8")  # strict: raises on invalid UTF-8
    assert json.loads(text)["error"] == "No route GET /v1/rt\ufffd\ufffd\ufffd."
    r = Client().get("/v1/sandboxes/sb_%ff%fe%c0x/log")
    assert r.status_code == 401
    json.loads(r.content.decode("utf-8"))


def denied_rows(admin, request_id):
    return [e for e in admin.get("/v1/log", params={"event": "denied", "limit": 1000}).json()["entries"]
            if e["request_id"] == request_id]


def test_denied_row_is_never_dropped_nor_put_in_a_stranger_sandbox(admin, sandbox):
    pid = gateway_pid()
    rid = "denied-utf8-" + uuid.uuid4().hex[:8]
    r = Client().get("/v1/sandboxes/sb_%ff%fe%c0x/log", headers={"X-Request-Id": rid})
    assert_error(r, 401, "unauthorized")
    row = wait_for(lambda: denied_rows(admin, rid), what="the denied row of an invalid UTF-8 path")[0]
    assert row["session_id"] == "" and row["operation"] == "log.read" and row["account_id"] == "anonymous"
    assert row["detail"]["path"] == "/v1/sandboxes/sb_\ufffd\ufffd\ufffdx/log"

    # a sandbox that does not exist gets no log of its own: the path is in the detail
    rid = "denied-nosuch-" + uuid.uuid4().hex[:8]
    assert_error(Client().post("/v1/sandboxes/sb_aaaaaaaaaa/exec", json={"command": "true"},
                               headers={"X-Request-Id": rid}), 401, "unauthorized")
    row = wait_for(lambda: denied_rows(admin, rid), what="the denied row of a sandbox that does not exist")[0]
    assert row["session_id"] == ""
    assert row["detail"]["path"] == "/v1/sandboxes/sb_aaaaaaaaaa/exec"
    # (other tests' calls on this id that sandboxd itself refused are in its log: only this request matters)
    assert [r for r in audit_log(session="sb_aaaaaaaaaa") if r["request_id"] == rid] == []

    # one that does exists gets the row, under its id whether the path names it by id or by name
    for named in (sandbox["id"], sandbox["name"]):
        rid = "denied-exists-" + uuid.uuid4().hex[:8]
        assert_error(Client().get(f"/v1/sandboxes/{named}/log", headers={"X-Request-Id": rid}), 401,
                     "unauthorized")
        row = wait_for(lambda: denied_rows(admin, rid), what="the denied row of a sandbox")[0]
        assert row["session_id"] == sandbox["id"], (named, row)
    assert gateway_pid() == pid


# --- a scoped key may name its sandbox by name ---------------------------------------------------------------

def test_scoped_key_names_its_sandbox(admin, sandbox):
    other = admin.post("/v1/sandboxes", {"type": "small", "name": "input-other-" + uuid.uuid4().hex[:6]}).json()
    try:
        scoped, _ = admin.mint(preset="member", sandboxes=[sandbox["id"]], ttl_seconds=600)
        r = scoped.get(f"/v1/sandboxes/{sandbox['name']}")
        assert r.status_code == 200, r.text
        assert r.json()["id"] == sandbox["id"]
        r = scoped.post(f"/v1/sandboxes/{sandbox['name']}/exec", {"command": "echo by-name"})
        assert r.status_code == 200 and r.json()["stdout"] == "by-name\n", r.text
        assert scoped.get(f"/v1/sandboxes/{sandbox['name']}/log").status_code == 200

        # outside the scope by name as by id; and a name that is nobody's is no different to it
        assert_error(scoped.get(f"/v1/sandboxes/{other['name']}"), 403, "forbidden")
        assert_error(scoped.get(f"/v1/sandboxes/{other['id']}"), 403, "forbidden")
        assert_error(scoped.get("/v1/sandboxes/no-such-name-here"), 403, "forbidden")
        assert_error(scoped.get("/v1/sandboxes/bad%ffname"), 403, "forbidden")
        # an unscoped key learns what is not there
        assert_error(admin.get("/v1/sandboxes/no-such-name-here"), 404, "not_found")
        assert admin.get(f"/v1/sandboxes/{other['name']}").json()["id"] == other["id"]
    finally:
        admin.delete(f"/v1/sandboxes/{other['id']}")
