# SPDX-License-Identifier: LGPL-2.1-or-later
# The file tools through sandbox-gatewayd: POST …/tools/{tool} with JSON both ways, file.write / file.read.
import base64

import pytest

from conftest import wait_for
from gateway_helpers import Client, admin, assert_error, cli_key, gateway_up, up  # noqa: F401,F811


@pytest.fixture
def sid(admin):
    r = admin.post("/v1/sandboxes", {"type": "small"})
    assert r.status_code == 201, r.text
    yield r.json()["id"]
    admin.delete(f"/v1/sandboxes/{r.json()['id']}")


def tool(client, sid, name, **body):
    return client.post(f"/v1/sandboxes/{sid}/tools/{name}", body)


def ok(r, status=200):
    assert r.status_code == status, r.text
    return r.json()


def test_every_tool(admin, sid):
    assert ok(tool(admin, sid, "file_create", path="src/a.py", content="x = 1\ny = 2\nx = 3\n",
                   create_dirs=True), 201) == {"size": 18, "created": True}
    assert_error(tool(admin, sid, "file_create", path="src/a.py", content="z"), 409, "conflict")
    v = ok(tool(admin, sid, "view", path="src/a.py", start_line=2, end_line=3))
    assert v["text"] == "     2\ty = 2\n     3\tx = 3\n" and v["lines"] == 3 and v["type"] == "file"
    body = assert_error(tool(admin, sid, "str_replace", path="src/a.py", old="x = ", new="z = "), 422,
                        "ambiguous_match")
    assert "2 times" in body["error"]
    assert_error(tool(admin, sid, "str_replace", path="src/a.py", old="w", new="z"), 422, "no_match")
    assert ok(tool(admin, sid, "str_replace", path="src/a.py", old_str="x = 3", new_str="x = 4"))["line"] == 3
    assert ok(tool(admin, sid, "insert", path="src/a.py", insert_line=0, new_str="# top"))["lines"] == 4
    assert ok(tool(admin, sid, "insert", path="src/a.py", line=4, text="# end"))["lines"] == 5
    assert ok(tool(admin, sid, "view", path="src/a.py"))["text"].splitlines()[0] == "     1\t# top"
    ls = ok(tool(admin, sid, "ls", path="src"))
    assert [(e["name"], e["type"], e["mode"]) for e in ls["entries"]] == [("a.py", "file", "0644")]
    assert ls["entries"][0]["mtime"].endswith("Z") and ls["truncated"] is False
    assert ok(tool(admin, sid, "glob", pattern="**/*.py"))["paths"] == ["/home/sandbox/src/a.py"]
    g = ok(tool(admin, sid, "grep", pattern="^X = \\d", path="src", ignore_case=True))
    assert [(m["file"], m["line"], m["text"]) for m in g["matches"]] == [
        ("/home/sandbox/src/a.py", 2, "x = 1"), ("/home/sandbox/src/a.py", 4, "x = 4")]
    assert g["count"] == 2 and g["files_searched"] == 1


def test_bytes_and_bad_input(admin, sid):
    raw = b"caf\xe9 \xff\n"
    b64 = base64.b64encode(raw).decode()
    ok(tool(admin, sid, "file_create", path="bin.txt", content=b64, encoding="base64"), 201)
    v = ok(tool(admin, sid, "view", path="bin.txt", encoding="base64"))
    assert base64.b64decode(v["text"]) == b"     1\t" + raw
    v = ok(tool(admin, sid, "view", path="bin.txt"))
    assert v["text"] == "     1\tcaf\ufffd \ufffd\n"  # UTF-8 unless base64 is asked for
    assert_error(tool(admin, sid, "view", path="bin.txt", bogus=1), 400, "invalid_request")
    assert_error(tool(admin, sid, "file_create", path="x", content="!", encoding="base64"), 400,
                 "invalid_request")
    assert_error(tool(admin, sid, "file_create", path="x", content="a", file_text="b"), 400, "invalid_request")
    assert_error(tool(admin, sid, "grep", pattern="("), 400, "invalid_request")
    assert_error(tool(admin, sid, "view", path="missing"), 404, "not_found")
    # what the sandbox's user may not read is refused as forbidden, with the reason
    r = tool(admin, sid, "view", path="/etc/shadow")
    assert_error(r, 403, "forbidden")
    assert "Permission denied" in r.json()["error"], r.text
    assert_error(admin.post(f"/v1/sandboxes/{sid}/tools/nope", {}), 404, "not_found")


def test_actions_and_audit(admin, sid):
    reader = Client(cli_key("--actions", "file.read", "--ttl", "1h")[0])
    ok(tool(admin, sid, "file_create", path="r.txt", content="read me\n"), 201)
    assert ok(tool(reader, sid, "view", path="r.txt"))["text"] == "     1\tread me\n"
    assert_error(tool(reader, sid, "file_create", path="w.txt", content="no"), 403, "forbidden")
    assert_error(tool(reader, sid, "insert", path="r.txt", line=0, text="no"), 403, "forbidden")
    assert ok(tool(admin, sid, "view", path="r.txt"))["text"] == "     1\tread me\n"  # unchanged
    # sandboxd recorded the tools' calls under the keys' accounts

    def rows():
        r = admin.get(f"/v1/sandboxes/{sid}/log", params={"limit": 100})
        ops = [(e["operation"], e["event"], e["account_id"]) for e in r.json()["entries"]]
        return ops if sum(1 for o in ops if o[0] == "view") >= 2 else None

    ops = wait_for(rows, timeout=60, what="the tools' audit rows")
    assert any(o[0] == "view" and o[2].startswith("key:") for o in ops), ops
