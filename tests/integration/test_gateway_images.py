# SPDX-License-Identifier: LGPL-2.1-or-later
# POST /v1/images (issue 24): imports whose archive is streamed into sandboxd's ImportImage, builds, answered as
# JSON when the job ends or as SSE progress events; bad input refused with nothing made, a client that leaves
# cancels the job, member keys refused, audit rows under the request's id. No test here reaches the network:
# the one real build is test_images_build.py's.
import hashlib
import json
import os
import socket
import time

import dbus
import pytest

import kernel
from conftest import LONG, wait_for
from gateway_helpers import BASE, admin, assert_error, gateway_config, up  # noqa: F401 (fixtures)
from images_helpers import IMAGES_DIR, Jobs, busybox_tar, images, remove_image, wait_row

pytestmark = pytest.mark.skipif(not kernel.disk_images_possible(),
                                reason="the image store's tests run where image sandboxes can (loop devices, ext4)")

ERR = "org.sandboxd.sandbox1."


@pytest.fixture(scope="module")
def jobs():
    j = Jobs()
    yield j
    j.close()


def dot_entries():
    return [e for e in os.listdir(IMAGES_DIR) if e.startswith(".")] if os.path.isdir(IMAGES_DIR) else []


def listed():
    return {str(r[0]) for r in images().ListImages()}


def running_jobs():
    return [(str(j[0]), str(j[1])) for j in images().ListJobs()]


def nothing_left(name):
    wait_for(lambda: not running_jobs() and not dot_entries(), what="no job and no job directory")
    assert name not in listed()


def sse_events(r):
    """(event, data as JSON) of a requests streaming answer, read to its end."""
    out, ev = [], {}
    for line in r.iter_lines(decode_unicode=True):
        if line == "":
            if "event" in ev:
                out.append((ev["event"], json.loads(ev.get("data", "null"))))
            ev = {}
        elif not line.startswith(":"):
            k, _, v = line.partition(": ")
            ev[k] = v
    return out


def post_archive(client, name, data, stream=False, **query):
    headers = {"Content-Type": "application/x-tar"}
    if stream:
        headers["Accept"] = "text/event-stream"
    return client.req("POST", "/v1/images", params={"name": name, **query}, data=data, headers=headers,
                      stream=stream, timeout=300)


def test_import_answered_as_json(admin):  # noqa: F811
    remove_image("gwjson24")
    data = busybox_tar(b"over rest\n")
    r = post_archive(admin, "gwjson24", data)
    try:
        assert r.status_code == 201, r.text
        img = r.json()
        assert img["name"] == "gwjson24" and img["source"] == "tar"
        assert img["digest"] == "sha256:" + hashlib.sha256(data).hexdigest()
        assert img["size"] > 0 and img["created_at"].endswith("Z") and img["used_by"] == []
        assert admin.get("/v1/images/gwjson24").json()["digest"] == img["digest"]
        # sandboxd's own row of the job, under the key's account and the request's id
        row = wait_row("image.import", '"image":"gwjson24"', request_id=r.headers["X-Request-Id"])
        assert row["event"] == "finished" and row["account_id"].startswith("key:")
    finally:
        remove_image("gwjson24")


def test_import_with_progress_events(admin):  # noqa: F811
    remove_image("gwsse24")
    data = busybox_tar()
    try:
        with post_archive(admin, "gwsse24", data, stream=True) as r:
            assert r.status_code == 200 and r.headers["Content-Type"] == "text/event-stream"
            events = sse_events(r)
        kinds = [e for e, _ in events]
        assert kinds[0] == "job" and kinds[-1] == "image", kinds
        job = events[0][1]["job"]
        assert events[0][1]["image"] == "gwsse24" and job.startswith("job_")
        progress = [d for e, d in events if e == "progress"]
        assert progress and all(p["job"] == job for p in progress), events
        # the stream's bytes are counted as the job reads them, up to all of it
        received = [p["done"] for p in progress if p["phase"] in ("unpack", "receive")]
        assert received and max(received) <= len(data), progress
        assert events[-1][1]["name"] == "gwsse24" and events[-1][1]["source"] == "tar"
        assert "gwsse24" in listed()
    finally:
        remove_image("gwsse24")


def test_bad_archive_is_400_and_leaves_nothing(admin):  # noqa: F811
    remove_image("gwbad24")
    r = post_archive(admin, "gwbad24", b"this is no archive\n" * 200)
    body = assert_error(r, 400, "invalid_image")
    assert "gwbad24" in body["error"]
    nothing_left("gwbad24")
    row = wait_row("image.import", '"image":"gwbad24"', request_id=r.headers["X-Request-Id"])
    assert row["event"] == "failed"
    # the same over SSE: the job's start, then the error body as the last event
    # (zeros would do not: libarchive reads them as an empty tar, which is an image of nothing)
    with post_archive(admin, "gwbad24", b"neither is this\n" * 300, stream=True) as r:
        events = sse_events(r)
    assert events[0][0] == "job" and events[-1][0] == "error", events
    err = events[-1][1]
    assert err["status"] == 400 and err["code"] == "invalid_image" and err["event"] == "error"
    nothing_left("gwbad24")


BAD = [
    ("bad name", lambda c: post_archive(c, "../x24", busybox_tar()), "Invalid image name"),
    ("reserved name", lambda c: post_archive(c, "host", busybox_tar()), "Invalid image name"),
    ("empty body", lambda c: post_archive(c, "gwempty24", b""), "this one is empty"),
    ("bad format", lambda c: post_archive(c, "gwfmt24", busybox_tar(), format="zip"), "format"),
    ("bad tag", lambda c: post_archive(c, "gwtag24", busybox_tar(), format="oci-archive", tag="a:b"), "tag"),
    ("build without build", lambda c: c.post("/v1/images", {"name": "gwb24"}), "build"),
    ("build unknown field", lambda c: c.post("/v1/images", {"name": "gwb24", "build": {"mirror": "x"}}), "mirror"),
    ("build bad variant", lambda c: c.post("/v1/images", {"name": "gwb24", "build": {"variant": "huge"}}),
     "variant"),
    ("build bad package", lambda c: c.post("/v1/images", {"name": "gwb24", "build": {"packages": ["-rf"]}}),
     "-rf"),
    ("not json", lambda c: c.req("POST", "/v1/images", data=b"{", headers={"Content-Type": "application/json"}),
     None),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_400_with_nothing_made(admin, case):  # noqa: F811
    _, send, words = case
    before = listed()
    r = send(admin)
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["event"] == "error" and body["status"] == 400
    if words:
        assert words in body["error"], body
    wait_for(lambda: not running_jobs() and not dot_entries(), what="no job and no job directory")
    assert listed() == before


def test_member_key_refused(admin):  # noqa: F811
    member, _ = admin.mint(preset="member", ttl_seconds=600)
    r = post_archive(member, "gwmember24", busybox_tar())
    assert_error(r, 403, "forbidden", "Building or importing an image needs an admin key.")
    r2 = member.post("/v1/images", {"name": "gwmember24", "build": {}})
    assert_error(r2, 403, "forbidden", "Building or importing an image needs an admin key.")
    assert "gwmember24" not in listed() and not running_jobs()
    for op, rid in (("image.import", r.headers["X-Request-Id"]), ("image.build", r2.headers["X-Request-Id"])):
        row = wait_row(op, request_id=rid)
        assert row["event"] == "denied"


def test_name_taken_is_409(admin):  # noqa: F811
    remove_image("gwtaken24")
    assert post_archive(admin, "gwtaken24", busybox_tar()).status_code == 201
    try:
        assert_error(post_archive(admin, "gwtaken24", busybox_tar()), 409, "conflict")
    finally:
        remove_image("gwtaken24")


def test_client_that_leaves_cancels_the_job(jobs):
    """Half an archive sent, the job waits for the rest; the client goes and the job ends cancelled."""
    from gateway_helpers import cli_key
    secret, _ = cli_key("--preset", "admin", "--ttl", "1h")
    remove_image("gwleave24")
    data = busybox_tar()
    s = socket.create_connection(("127.0.0.1", int(BASE.rsplit(":", 1)[1])))
    head = (f"POST /v1/images?name=gwleave24 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {secret}\r\n"
            f"Content-Type: application/x-tar\r\nContent-Length: {len(data)}\r\n\r\n")
    s.sendall(head.encode() + data[:8192])
    try:
        wait_for(lambda: ("gwleave24" in [n for _, n in running_jobs()]), what="the import's job")
        job = [j for j, n in running_jobs() if n == "gwleave24"][0]
    finally:
        s.close()
    assert jobs.wait(job)[1:3] == ("cancelled", ERR + "Interrupted")
    nothing_left("gwleave24")
    row = wait_row("image.import", f'"job":"{job}"')
    assert row["event"] == "failed" and "cancelled" in row["detail"]


def test_body_is_streamed_not_held(admin):  # noqa: F811
    """An archive larger than MaxBodyBytes= (16 MiB) is imported: the body is never held whole."""
    remove_image("gwbig24")
    blob = os.urandom(1 << 20) * 20  # 20 MiB, incompressible per MiB
    data = busybox_tar(extra=lambda tar: __import__("images_helpers").add_file(tar, "./opt-blob", blob))
    assert len(data) > 16 << 20
    r = post_archive(admin, "gwbig24", data)
    try:
        assert r.status_code == 201, r.text
        assert r.json()["digest"] == "sha256:" + hashlib.sha256(data).hexdigest()
    finally:
        remove_image("gwbig24")


def test_max_image_bytes(admin, gateway_config, jobs):  # noqa: F811
    """MaxImageBytes=: a Content-Length over it is 413 before the body; a chunked body that passes it is 413
    once it does, and the job it had started is cancelled; nothing is kept either way."""
    gateway_config("MaxImageBytes=64K\n")
    wait_for(lambda: admin.get("/v1/images").status_code == 200, what="the gateway")
    data = busybox_tar()
    assert len(data) > 64 << 10
    body = assert_error(post_archive(admin, "gwcap24", data), 413, "payload_too_large")
    assert body["error"] == "The body is larger than 65536 bytes."
    nothing_left("gwcap24")
    # chunked: the length is not known before; the job starts, then the cap ends it
    seen = []

    def chunks():
        for i in range(0, len(data), 8192):
            if i == 8192 * 4:
                wait_for(lambda: [j for j, n in running_jobs() if n == "gwcap24"], what="the import's job")
                seen.extend(j for j, n in running_jobs() if n == "gwcap24")
            yield data[i:i + 8192]
    r = admin.req("POST", "/v1/images", params={"name": "gwcap24"}, data=chunks(),
                  headers={"Content-Type": "application/x-tar"})
    assert_error(r, 413, "payload_too_large", "The body is larger than 65536 bytes.")
    assert seen
    assert jobs.wait(seen[0])[1] == "cancelled"
    nothing_left("gwcap24")
