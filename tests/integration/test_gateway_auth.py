# SPDX-License-Identifier: LGPL-2.1-or-later
# sandbox-gatewayd's API keys over real HTTP: the auth matrix of every route, denials in the audit log,
# no escalation, no key inside a sandbox, sandboxctl api-key against the gateway, the OpenAPI file.
import json
import os
import re
import secrets
import sqlite3
import subprocess

import dbus
import pytest
import requests

from conftest import LONG, audit_log, run, wait_for
from gateway_helpers import restart_gateway

GATEWAY = os.environ.get("SANDBOXD_GATEWAY_URL", "http://127.0.0.1:8790")
KEYS = ("org.sandboxd.gateway1", "/org/sandboxd/gateway1", "org.sandboxd.gateway1.Keys")
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SESSION_REQUIRED = "Creating API keys needs a dashboard or CLI session, or an admin-scoped key."
ERROR_KEYS = {"event", "error", "code", "status", "requestId"}
ALL_ACTIONS = ["sandbox.create", "sandbox.read", "sandbox.update", "sandbox.delete", "sandbox.delete-own",
               "exec", "file.write", "file.read", "log.read", "takeover", "api-key.admin", "sandbox.pause",
               "snapshot.create", "snapshot.read", "snapshot.delete"]
ADMIN_ONLY = {"takeover", "api-key.admin"}


# --- fixtures of this file (conftest.py belongs to the gateway's own tests) ------------------------

def keys_iface():
    bus = dbus.SystemBus()
    return dbus.Interface(bus.get_object(KEYS[0], KEYS[1], introspect=False), KEYS[2])


def mint(**spec):
    """A key minted by root over the bus: (secret, key object)."""
    d = {}
    for k, v in spec.items():
        if k == "ttl_seconds":
            d[k] = dbus.UInt64(v)
        elif isinstance(v, list):
            d[k] = dbus.Array(v, signature="s")
        else:
            d[k] = dbus.String(v)
    secret, js = keys_iface().CreateKey(dbus.Dictionary(d, signature="sv"), timeout=LONG)
    return str(secret), json.loads(str(js))


def revoke(key_id):
    keys_iface().RevokeKey(key_id, timeout=LONG)


def list_keys():
    return json.loads(str(keys_iface().ListKeys(timeout=LONG)))["api_keys"]


def top_row_id():
    rows = audit_log(limit=1)
    return int(rows[0]["id"]) if rows else 0


class Api:
    def __init__(self, secret=None, header=None):
        self.s = requests.Session()
        if header is not None:
            self.s.headers["Authorization"] = header
        elif secret is not None:
            self.s.headers["Authorization"] = f"Bearer {secret}"

    def req(self, method, path, **kw):
        kw.setdefault("timeout", LONG)
        return self.s.request(method, GATEWAY + path, **kw)

    def ok(self, method, path, **kw):
        r = self.req(method, path, **kw)
        assert r.status_code < 300, f"{method} {path}: {r.status_code} {r.text}"
        return r.json() if r.content and r.headers.get("Content-Type", "").startswith("application/json") else r


def gateway_up():
    try:
        return requests.get(GATEWAY + "/v1/sandboxes", timeout=5).status_code == 401
    except requests.ConnectionError:
        return False


# The matrix alone is some 370 refusals from 127.0.0.1 within seconds, the module's other tests add
# theirs: more than the default RefusalBurst= (600) holds with its refill. The refusal budget is
# test_gateway.py's subject; here every refusal must be answered (and audited) one by one.
REFUSAL_DROPIN = "/etc/sandboxd/sandbox-gatewayd.conf.d/40-test-auth-matrix.conf"


@pytest.fixture(scope="module", autouse=True)
def gateway():
    run("systemctl", "start", "sandbox-auditd.service")
    os.makedirs(os.path.dirname(REFUSAL_DROPIN), exist_ok=True)
    with open(REFUSAL_DROPIN, "w") as f:
        f.write("[Gateway]\nRefusalBurst=100000\nRefusalBurstTotal=100000\n")
    run("systemctl", "start", "sandbox-gatewayd.socket", check=False)
    if gateway_up():
        restart_gateway()
    else:
        run("systemctl", "start", "sandbox-gatewayd.service")
    wait_for(gateway_up, timeout=30, what="the gateway answering")
    yield
    os.unlink(REFUSAL_DROPIN)
    restart_gateway()
    wait_for(gateway_up, timeout=30, what="the gateway answering")


@pytest.fixture(scope="module")
def admin():
    secret, key = mint(preset="admin", ttl_seconds=3600, name="test-admin")
    yield Api(secret)
    revoke(key["id"])


def expect_error(r, status, code=None, message=None):
    """The reference API's error body, exactly: these five keys, the status repeated, the request id
    that X-Request-Id carries."""
    assert r.status_code == status, f"expected {status}, got {r.status_code}: {r.text}"
    assert r.headers.get("Content-Type", "").startswith("application/json")
    body = r.json()
    assert set(body) == ERROR_KEYS, body
    assert body["event"] == "error" and body["status"] == status
    assert isinstance(body["error"], str) and body["error"]
    assert re.fullmatch(r"req_[A-Za-z0-9._-]+", body["requestId"])
    assert r.headers.get("X-Request-Id") == body["requestId"]
    if code:
        assert body["code"] == code, body
    if message:
        assert body["error"] == message, body
    return body


# --- the world the matrix runs in ---------------------------------------------------------------

@pytest.fixture(scope="module")
def world(admin):
    """Two sandboxes made by two runner keys, a file in one, a log row, a victim key: what the refused
    requests must leave exactly as they were."""
    w = {}
    w["runner_secret"], w["runner"] = mint(preset="runner", ttl_seconds=7200, name="runner-a")
    w["other_secret"], w["other"] = mint(preset="runner", ttl_seconds=7200, name="runner-b")
    ra, rb = Api(w["runner_secret"]), Api(w["other_secret"])
    w["sb"] = ra.ok("POST", "/v1/sandboxes", json={"type": "small", "ttl_seconds": 900})["id"]
    w["sb_other"] = rb.ok("POST", "/v1/sandboxes", json={"type": "small", "ttl_seconds": 900})["id"]
    ra.ok("PUT", f"/v1/sandboxes/{w['sb']}/files", params={"path": "/tmp/keep.txt"}, data=b"untouched\n")
    ra.ok("POST", f"/v1/sandboxes/{w['sb']}/exec", json={"argv": ["true"]})
    w["row"] = wait_for(lambda: audit_log(session_id=w["sb"], operation="exec"), what="an exec row")[0]["id"]
    # a background cat: a refused stdin, signal or DELETE would echo, end or kill it
    w["process"] = ra.ok("POST", f"/v1/sandboxes/{w['sb']}/processes", json={"argv": ["cat"]})["id"]
    w["victim_secret"], w["victim"] = mint(preset="member", name="victim")
    yield w
    for sid in (w["sb"], w["sb_other"]):
        admin.req("DELETE", f"/v1/sandboxes/{sid}")
    for k in ("runner", "other", "victim"):
        revoke(w[k]["id"])


UPGRADE = {"headers": {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                       "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}}

# Every route of DESIGN.md's table: (method, path template, action, request). Bodies are valid, so
# that only the credentials decide. {sb} is runner A's sandbox, {row} an audit row, {victim} a key,
# {p} a background process in {sb}.
ROUTES = [
    ("POST", "/v1/sandboxes", "sandbox.create", {"json": {"type": "small"}}),
    ("GET", "/v1/sandboxes", "sandbox.read", {}),
    ("GET", "/v1/sandboxes/{sb}", "sandbox.read", {}),
    ("PATCH", "/v1/sandboxes/{sb}", "sandbox.update", {"json": {"ttl_seconds": 60}}),
    ("PUT", "/v1/sandboxes/{sb}/network", "sandbox.update", {"json": {"egress_policy": {"default": "allow"}}}),
    ("DELETE", "/v1/sandboxes/{sb}", "sandbox.delete", {}),
    ("POST", "/v1/sandboxes/{sb}/exec", "exec", {"json": {"argv": ["touch", "/tmp/exec-ran"]}}),
    ("POST", "/v1/sandboxes/{sb}/processes", "exec", {"json": {"argv": ["touch", "/tmp/process-ran"]}}),
    ("GET", "/v1/sandboxes/{sb}/processes", "sandbox.read", {}),
    ("GET", "/v1/sandboxes/{sb}/processes/{p}", "sandbox.read", {}),
    ("GET", "/v1/sandboxes/{sb}/processes/{p}/output", "sandbox.read", {}),
    ("POST", "/v1/sandboxes/{sb}/processes/{p}/stdin", "exec", {"json": {"data": "x", "close": True}}),
    ("POST", "/v1/sandboxes/{sb}/processes/{p}/signal", "exec", {"json": {"signal": "KILL"}}),
    ("DELETE", "/v1/sandboxes/{sb}/processes/{p}", "exec", {}),
    ("PUT", "/v1/sandboxes/{sb}/files", "file.write", {"params": {"path": "/tmp/keep.txt"}, "data": b"changed\n"}),
    ("GET", "/v1/sandboxes/{sb}/files", "file.read", {"params": {"path": "/tmp/keep.txt"}}),
    ("POST", "/v1/sandboxes/{sb}/tools/file_create", "file.write",
     {"json": {"path": "/tmp/tool-made.txt", "file_text": "x"}}),
    ("POST", "/v1/sandboxes/{sb}/tools/str_replace", "file.write",
     {"json": {"path": "/tmp/keep.txt", "old_str": "untouched", "new_str": "changed"}}),
    ("POST", "/v1/sandboxes/{sb}/tools/insert", "file.write",
     {"json": {"path": "/tmp/keep.txt", "insert_line": 0, "new_str": "changed"}}),
    ("POST", "/v1/sandboxes/{sb}/tools/view", "file.read", {"json": {"path": "/tmp/keep.txt"}}),
    ("POST", "/v1/sandboxes/{sb}/tools/ls", "file.read", {"json": {"path": "/tmp"}}),
    ("POST", "/v1/sandboxes/{sb}/tools/glob", "file.read", {"json": {"pattern": "/tmp/*"}}),
    ("POST", "/v1/sandboxes/{sb}/tools/grep", "file.read", {"json": {"pattern": "untouched", "path": "/tmp"}}),
    ("GET", "/v1/sandboxes/{sb}/log", "log.read", {}),
    ("GET", "/v1/sandboxes/{sb}/watch", "log.read", {"stream": True}),
    ("GET", "/v1/log", "log.read", {}),
    # issue 24's read-only image routes (not in DESIGN.md's table: docs/API.md#images says why sandbox.read)
    ("GET", "/v1/images", "sandbox.read", {}),
    ("GET", "/v1/images/{img}", "sandbox.read", {}),
    ("DELETE", "/v1/images/{img}", "sandbox.delete", {}),
    # building or importing needs sandbox.create and role admin (the admin check: test_gateway_images.py)
    ("POST", "/v1/images", "sandbox.create", {"json": {"name": "authz24", "build": {}}}),
    ("GET", "/v1/log/{row}/output", "log.read", {}),
    ("GET", "/v1/log/export", "log.read", {"stream": True}),
    ("POST", "/v1/sandboxes/{sb}/takeover-token", "takeover", {}),
    ("GET", "/v1/sandboxes/{sb}/takeover", "takeover", UPGRADE),
    ("GET", "/v1/sandboxes/{sb}/takeovers/{row}/recording", "takeover", {}),
    ("POST", "/v1/api-keys", "api-key.admin", {"json": {"preset": "admin"}}),
    ("GET", "/v1/api-keys", "api-key.admin", {}),
    ("DELETE", "/v1/api-keys/{victim}", "api-key.admin", {}),
    ("POST", "/v1/sandboxes/{sb}/pause", "sandbox.pause", {}),
    ("POST", "/v1/sandboxes/{sb}/resume", "sandbox.pause", {}),
    ("POST", "/v1/sandboxes/{sb}/snapshots", "snapshot.create", {"json": {"name": "matrix"}}),
    ("GET", "/v1/snapshots", "snapshot.read", {}),
    ("GET", "/v1/snapshots/{snap}", "snapshot.read", {}),
    ("DELETE", "/v1/snapshots/{snap}", "snapshot.delete", {}),
]
ROUTE_IDS = [f"{m} {p}" for m, p, _, _ in ROUTES]
CREDENTIALS_401 = ["no key", "empty bearer", "basic", "malformed", "not base32", "unknown", "expired", "revoked"]
# Request ids of every refusal of the matrix, checked against the audit log at the end.
DENIED = []


def fill(w, template):
    # {snap}: no such snapshot; the refusals come before any lookup
    return template.format(sb=w["sb"], row=int(w["row"]), victim=w["victim"]["id"], p=w["process"],
                           img="any-image", snap="sn_aaaaaaaaaa")


def snapshot(w, admin):
    """What a refused request might have changed: sandboxes, their TTLs, the file, /tmp, the keys."""
    sbs = {}
    for sid in (w["sb"], w["sb_other"]):
        r = admin.req("GET", f"/v1/sandboxes/{sid}")
        assert r.status_code == 200, r.text
        d = r.json()
        sbs[sid] = (d["state"], d["expires_at"], d["egress_policy"])
    mgr = dbus.Interface(dbus.SystemBus().get_object("org.sandboxd.sandbox1", "/org/sandboxd/sandbox1",
                                                     introspect=False), "org.sandboxd.sandbox1.Manager")
    ids = sorted(str(row[0]) for row in mgr.ListSandboxes())
    _, out, _, _ = mgr.Exec(w["sb"], ["sh", "-c", "cat /tmp/keep.txt; ls /tmp"], dbus.Dictionary({}, signature="sv"),
                            timeout=LONG, byte_arrays=True)
    keys = sorted((k["id"], k["revokedAt"]) for k in list_keys())
    procs = sorted((str(p[0]), str(p[1])) for p in mgr.ListProcesses(w["sb"]))
    cat_out = bytes(mgr.ReadProcessOutput(w["sb"], w["process"], "stdout", dbus.UInt64(0), dbus.UInt32(0),
                                          byte_arrays=True)[0])
    return {"sandboxes": sbs, "ids": ids, "files": bytes(out), "keys": keys, "processes": procs,
            "process_output": cat_out}


def refused(api, method, path, kw, status, code=None):
    kw = dict(kw)
    stream = kw.pop("stream", False)
    r = api.req(method, path, stream=stream, **kw)
    try:
        body = expect_error(r, status, code)
    finally:
        r.close()
    DENIED.append(body["requestId"])
    return body


@pytest.fixture(scope="module")
def creds(world):
    """The credentials of the matrix, and the state before any of it ran."""
    c = {}
    expired_secret, expired = mint(preset="admin", ttl_seconds=1, name="expiring")
    revoked_secret, revoked_key = mint(preset="admin", name="revoked")
    revoke(revoked_key["id"])
    unknown = "sbx_live_" + "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz234567") for _ in range(52))
    c["401"] = {
        "no key": Api(),
        "empty bearer": Api(header="Bearer "),
        "basic": Api(header="Basic dXNlcjpwYXNz"),
        "malformed": Api(header="Bearer sbx_live_short"),
        "not base32": Api(header="Bearer sbx_live_" + "A" * 52),
        "unknown": Api(unknown),
        "expired": Api(expired_secret),
        "revoked": Api(revoked_secret),
    }
    c["member"] = Api(mint(preset="member", name="member")[0])
    c["scoped"] = Api(mint(preset="admin", sandboxes=[world["sb_other"]], name="scoped-elsewhere")[0])
    c["without"] = {}
    for action in ALL_ACTIONS:
        drop = {action, "sandbox.delete-own"} if action == "sandbox.delete" else {action}
        c["without"][action] = Api(mint(role="admin", actions=[a for a in ALL_ACTIONS if a not in drop],
                                         name=f"without-{action}")[0])
    # Waiting for the expiry is not a measurement: the wait ends only once it has passed.
    wait_for(lambda: c["401"]["expired"].req("GET", "/v1/sandboxes").status_code == 401, timeout=30,
             what=f"the key to expire at {expired['expiresAt']}")
    c["first_row"] = top_row_id()
    return c


@pytest.fixture(scope="module")
def before(world, admin, creds):
    return snapshot(world, admin)


def served(method, path):
    """The gateway answers an unknown route 404 before looking at credentials."""
    r = Api().req(method, path, stream=True)
    r.close()
    if r.status_code == 404:
        pytest.skip(f"{method} {path} is not served by this gateway")


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
@pytest.mark.parametrize("cred", CREDENTIALS_401)
def test_matrix_401(world, creds, before, route, cred):
    method, template, action, kw = route
    path = fill(world, template)
    served(method, path)
    refused(creds["401"][cred], method, path, kw, 401, "unauthorized")


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
def test_matrix_403(world, creds, before, route):
    method, template, action, kw = route
    path = fill(world, template)
    served(method, path)
    code = "session_required" if action == "api-key.admin" else "forbidden"
    # a member where admin is needed
    if action in ADMIN_ONLY:
        refused(creds["member"], method, path, kw, 403, code)
    # a key with every action but this one
    refused(creds["without"][action], method, path, kw, 403, code)
    # a key scoped to another sandbox, on a route of one sandbox
    if "{sb}" in template:
        refused(creds["scoped"], method, path, kw, 403, "forbidden")


def test_matrix_delete_own(world, creds, before):
    """Runner A holds sandbox.delete-own: runner B's sandbox is not its own."""
    body = refused(Api(world["runner_secret"]), "DELETE", f"/v1/sandboxes/{world['sb_other']}", {}, 403, "forbidden")
    assert "delete-own" in body["error"] or "created" in body["error"]


def test_matrix_changed_nothing_and_is_audited(world, admin, creds, before):
    assert DENIED, "the matrix ran no request"
    assert snapshot(world, admin) == before

    def denied_ids():
        return {r["request_id"] for r in audit_log(event="denied", after_id=creds["first_row"], limit=100000)}
    wait_for(lambda: set(DENIED) <= denied_ids(), timeout=60, what="a denied row per refusal")
    rows = [r for r in audit_log(event="denied", after_id=creds["first_row"], limit=100000)
            if r["request_id"] in set(DENIED)]
    # one row per refusal, no more
    assert len(rows) == len(set(DENIED)) == len(DENIED)


def test_runner_cannot_mint_admin_key(world):
    r = Api(world["runner_secret"]).req("POST", "/v1/api-keys", json={"preset": "admin", "ttl_seconds": 60})
    body = expect_error(r, 403, "session_required", SESSION_REQUIRED)
    assert body == {"event": "error", "error": SESSION_REQUIRED, "code": "session_required", "status": 403,
                    "requestId": body["requestId"]}
    assert body["requestId"].startswith("req_")


def test_no_escalation_through_rest(admin, world):
    limited_secret, limited = mint(role="admin", actions=["api-key.admin", "exec", "sandbox.read"],
                                   sandboxes=[world["sb"]], ttl_seconds=600, name="limited-admin")
    api = Api(limited_secret)
    before = sorted(k["id"] for k in list_keys())
    for spec in ({"preset": "admin"},                                              # actions it lacks
                 {"actions": ["exec"], "sandboxes": "*", "ttl_seconds": 60},        # wider scope
                 {"actions": ["exec"], "sandboxes": [world["sb_other"]], "ttl_seconds": 60},
                 {"actions": ["exec"], "sandboxes": [world["sb"]]},                 # never expires
                 {"actions": ["exec"], "sandboxes": [world["sb"]], "ttl_seconds": 7200}):  # outlives it
        # it may mint keys, so it is told what exceeds its own rights
        body = expect_error(api.req("POST", "/v1/api-keys", json=spec), 403, "forbidden")
        assert any(w in body["error"].lower() for w in ("actions", "sandbox", "expire")), body
    assert sorted(k["id"] for k in list_keys()) == before
    # Within its rights it may.
    r = api.req("POST", "/v1/api-keys", json={"actions": ["exec"], "sandboxes": [world["sb"]], "ttl_seconds": 60})
    assert r.status_code == 201, r.text
    made = r.json()
    assert set(made) == {"secret", "apiKey"} and made["apiKey"]["scope"] == {"actions": ["exec"],
                                                                              "sandboxes": [world["sb"]]}
    # It lists and revokes only keys within its own rights: the one it made, not the admin's.
    listed = api.req("GET", "/v1/api-keys")
    assert listed.status_code == 200, listed.text
    assert {k["id"] for k in listed.json()["api_keys"]} == {limited["id"], made["apiKey"]["id"]}
    wider = [k["id"] for k in list_keys() if k["id"] not in (limited["id"], made["apiKey"]["id"])]
    assert wider
    body = expect_error(api.req("DELETE", f"/v1/api-keys/{wider[0]}"), 403, "forbidden")
    assert wider[0] in body["error"]
    assert next(k for k in list_keys() if k["id"] == wider[0])["revokedAt"] is None
    assert api.req("DELETE", f"/v1/api-keys/{made['apiKey']['id']}").status_code == 204
    assert next(k for k in list_keys() if k["id"] == made["apiKey"]["id"])["revokedAt"] is not None
    revoke(limited["id"])


# --- the key inside a sandbox ------------------------------------------------------------------

PROBE = r'''
import os, re, urllib.request, urllib.error
found = set()
pat = re.compile(rb"sbx_(?:live|tt)_[a-z2-7]{20,}")
for k, v in os.environ.items():
    found.update(m.decode() for m in pat.findall(v.encode()))
for root in ("/tmp", "/var/tmp", os.path.expanduser("~"), "/etc", "/run", "/dev/shm", "/proc/self"):
    for d, dirs, files in os.walk(root):
        if d.startswith("/proc/self/") and d.count("/") > 3:
            continue
        for f in files:
            try:
                with open(os.path.join(d, f), "rb") as fh:
                    found.update(m.decode() for m in pat.findall(fh.read(1 << 20)))
            except OSError:
                pass
codes = []
for cred in sorted(found) + [None]:
    req = urllib.request.Request("http://127.0.0.1:8790/v1/sandboxes")
    if cred:
        req.add_header("Authorization", "Bearer " + cred)
    try:
        codes.append(urllib.request.urlopen(req, timeout=10).status)
    except urllib.error.HTTPError as e:
        codes.append(e.code)
    except OSError as e:
        codes.append(str(e))
print("found", len(found))
print("codes", codes)
'''


def test_key_nowhere_inside_sandbox(world):
    secret = world["runner_secret"]
    api = Api(secret)
    sid = api.ok("POST", "/v1/sandboxes", json={"type": "small", "network": "host", "ttl_seconds": 300})["id"]
    try:
        api.ok("PUT", f"/v1/sandboxes/{sid}/files", params={"path": "/tmp/probe.py"}, data=PROBE.encode())
        res = api.ok("POST", f"/v1/sandboxes/{sid}/exec",
                     json={"argv": ["python3", "/tmp/probe.py"], "timeout_seconds": 60})
        assert res["exit_code"] == 0, res
        assert "found 0" in res["stdout"], res["stdout"]
        assert "codes [401]" in res["stdout"], res["stdout"]
        env = api.ok("POST", f"/v1/sandboxes/{sid}/exec", json={"command": "env; cat /proc/1/environ; id"})
        for blob in (env["stdout"], env["stderr"], res["stdout"], res["stderr"]):
            assert secret not in blob and secret[len("sbx_live_"):] not in blob
        # A whole-tree search from inside, as root sees the sandbox's files from the host side is not
        # possible through the API: grep what the sandbox user can read.
        g = api.ok("POST", f"/v1/sandboxes/{sid}/exec",
                   json={"command": f"grep -rIl -- '{secret[9:]}' / --exclude-dir=proc --exclude-dir=sys 2>/dev/null;"
                                    " echo done", "timeout_seconds": 120})
        assert g["stdout"].strip() == "done", g
    finally:
        api.req("DELETE", f"/v1/sandboxes/{sid}")


# --- sandboxctl api-key against the real gateway -------------------------------------------------

def ctl(*args, check=True, user=None):
    cmd = ["sandboxctl", "api-key", *args]
    if user:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user if user != 'nobody' else 'nogroup'}", "--init-groups", *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check:
        assert r.returncode == 0, f"{cmd}: {r.returncode} {r.stderr}"
    return r


def test_sandboxctl_api_key():
    r = ctl("create", "--preset", "runner", "--ttl", "2h", "--name", "from-ctl", "--json")
    made = json.loads(r.stdout)
    assert set(made) == {"secret", "apiKey"}
    secret, key = made["secret"], made["apiKey"]
    assert re.fullmatch(r"sbx_live_[a-z2-7]{52}", secret)
    assert list(key) == ["id", "name", "role", "expiresAt", "createdAt", "revokedAt", "scope"]
    assert re.fullmatch(r"key_[a-z2-7]{20}", key["id"])
    assert key["name"] == "from-ctl" and key["role"] == "member" and key["revokedAt"] is None
    assert key["scope"] == {"actions": ["sandbox.create", "sandbox.read", "sandbox.update", "sandbox.delete-own",
                                        "exec", "file.write", "sandbox.pause", "snapshot.create",
                                        "snapshot.read"], "sandboxes": "*"}
    for t in (key["createdAt"], key["expiresAt"]):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", t)

    # Only its hash is stored: the secret's random part is in none of the gateway's files, its id is.
    state = "/var/lib/sandbox-gatewayd"
    blobs = b""
    for f in os.listdir(state):
        with open(os.path.join(state, f), "rb") as fh:
            blobs += fh.read()
    assert key["id"].encode() in blobs
    assert secret[len("sbx_live_"):].encode() not in blobs
    assert os.stat(os.path.join(state, "keys.db")).st_mode & 0o777 == 0o600

    # The key works over HTTP; its secret is shown once: never in list, text or JSON.
    assert Api(secret).req("GET", "/v1/sandboxes").status_code == 200
    listed = ctl("list", "--json")
    assert secret not in listed.stdout and secret[9:] not in listed.stdout
    keys = {k["id"]: k for k in json.loads(listed.stdout)["api_keys"]}
    assert keys[key["id"]] == key
    text = ctl("list")
    assert secret[9:] not in text.stdout
    assert re.search(rf"^{key['id']}\s+from-ctl\s+member\s+\S+\s+active$", text.stdout, re.M)

    # Text mode prints the secret alone on stdout, the id on stderr.
    t = ctl("create", "--preset", "member", "--ttl", "10min")
    assert re.fullmatch(r"sbx_live_[a-z2-7]{52}\n", t.stdout)
    assert "shown only once" in t.stderr

    # Revoked → 401 at once; listed as revoked; revoking twice is fine; unknown is an error.
    ctl("revoke", key["id"])
    expect_error(Api(secret).req("GET", "/v1/sandboxes"), 401, "unauthorized")
    again = {k["id"]: k for k in json.loads(ctl("list", "--json").stdout)["api_keys"]}
    assert again[key["id"]]["revokedAt"] is not None
    assert re.search(rf"^{key['id']}\s.*revoked$", ctl("list").stdout, re.M)
    ctl("revoke", key["id"])
    bad = ctl("revoke", "key_aaaaaaaaaaaaaaaaaaaa", check=False)
    assert bad.returncode != 0 and "No API key" in bad.stderr

    # Bad input: clear errors, nothing made.
    n = len(list_keys())
    for args, msg in ((["--preset", "wizard"], "Unknown preset"), (["--role", "owner"], "Unknown role"),
                      (["--role", "member", "--actions", "exec,takeover"], "cannot hold"),
                      (["--actions", "exec,fly"], "Unknown action"), (["--sandboxes", "nope"], "not a sandbox id")):
        r = ctl("create", *args, check=False)
        assert r.returncode != 0 and msg in r.stderr, (args, r.stderr)
    assert len(list_keys()) == n


# Names a terminal would act on or that read other than they are (issue 21, item 11): C1 controls (CSI,
# NEL, OSC), bidi overrides, isolates and marks, zero-width and other format characters.
BAD_KEY_NAMES = ["ci\u009b2J", "ci\u0085x", "ci\u009d0;t\u009c", "ci\u202enimda", "ci\u2066x\u2069",
                 "ci\u200fx", "ci\u061cx", "ci\u200bx", "ci\u00adx", "\ufeffci", "ci\u2028x", "ci\U000e0001",
                 "ci\x1b[2J", "ci\x7f"]


def test_key_names_refuse_controls_and_format_characters(admin):
    n = len(list_keys())
    for name in BAD_KEY_NAMES:
        with pytest.raises(dbus.DBusException) as e:
            mint(preset="member", name=name)
        assert e.value.get_dbus_name() == "org.freedesktop.DBus.Error.InvalidArgs", name
        assert "format characters" in e.value.get_dbus_message(), name
        body = expect_error(admin.req("POST", "/v1/api-keys", json={"preset": "member", "name": name}), 400,
                            "invalid_request")
        assert "format characters" in body["error"], name
        r = ctl("create", "--preset", "member", "--name", name, check=False)
        assert r.returncode != 0 and "format characters" in r.stderr, (name, r.stderr)
    assert len(list_keys()) == n
    # Other text is a name, right-to-left script and a backslash included.
    for name in ("caf\u00e9 \U0001f680", "\u05e9\u05dc\u05d5\u05dd", "back\\slash"):
        secret, key = mint(preset="member", name=name)
        assert key["name"] == name
        revoke(key["id"])


def test_api_key_list_escapes_names():
    """A name stored before the check existed (an older gateway's database) reaches the terminal escaped:
    no raw ESC, BEL, C1 or bidi override in "api-key list", the raw name in --json."""
    secret, key = mint(preset="member", name="old")
    raw = "old\x1b]0;owned\x07\x1b[2J\u202etxt.exe\u009b31m\\"
    db = sqlite3.connect("/var/lib/sandbox-gatewayd/keys.db", timeout=30)
    with db:
        db.execute("UPDATE api_keys SET name = ? WHERE id = ?", (raw, key["id"]))
    db.close()
    try:
        r = subprocess.run(["sandboxctl", "api-key", "list"], capture_output=True, check=True)
        line = [l for l in r.stdout.split(b"\n") if l.startswith(key["id"].encode())][0]
        for b in (b"\x1b", b"\x07", "\u202e".encode(), "\u009b".encode()):
            assert b not in r.stdout, (b, line)
        assert b"old\\x1b]0;owned\\x07\\x1b[2J\\u202etxt.exe\\u009b31m\\\\ " in line, line
        listed = {k["id"]: k for k in json.loads(ctl("list", "--json").stdout)["api_keys"]}
        assert listed[key["id"]]["name"] == raw
    finally:
        revoke(key["id"])


def test_api_key_self():
    """GET /v1/api-keys/self: any active key reads its own object (what the dashboard offers depends on
    it), whatever its actions; nothing else is readable through it, and a key that is gone gets 401."""
    narrow, nkey = mint(role="member", actions=["log.read"], sandboxes=["sb_aaaaaaaaaa"], name="self-narrow")
    runner, rkey = mint(preset="runner", ttl_seconds=600, name="self-runner")
    try:
        got = Api(narrow).ok("GET", "/v1/api-keys/self")
        assert got == nkey, (got, nkey)
        assert got["scope"] == {"actions": ["log.read"], "sandboxes": ["sb_aaaaaaaaaa"]}
        assert "secret" not in json.dumps(got) and narrow not in json.dumps(got)
        got = Api(runner).ok("GET", "/v1/api-keys/self")
        assert got["id"] == rkey["id"] and got["role"] == "member" and got["expiresAt"] == rkey["expiresAt"]
        assert "exec" in got["scope"]["actions"] and "log.read" not in got["scope"]["actions"]
        # other keys stay behind api-key.admin: the narrow key may not list, and "self" is no key's id
        expect_error(Api(narrow).req("GET", "/v1/api-keys"), 403, "session_required")
        expect_error(Api(runner).req("DELETE", "/v1/api-keys/self"), 403, "session_required")
        r = Api(runner).req("POST", "/v1/api-keys/self")
        expect_error(r, 405, "method_not_allowed")
        assert r.headers["Allow"] == "GET, DELETE"
        expect_error(Api().req("GET", "/v1/api-keys/self"), 401, "unauthorized")
        revoke(nkey["id"])
        wait_for(lambda: Api(narrow).req("GET", "/v1/api-keys/self").status_code == 401, what="the revocation")
        expect_error(Api(narrow).req("GET", "/v1/api-keys/self"), 401, "unauthorized")
    finally:
        revoke(nkey["id"])
        revoke(rkey["id"])


KEYS_DB = "/var/lib/sandbox-gatewayd/keys.db"


def gateway_deleted_files():
    """The files of keys.db the running gateway has open that are no longer in the directory."""
    pid = run("systemctl", "show", "-P", "MainPID", "sandbox-gatewayd.service").stdout.strip()
    assert pid not in ("", "0"), "the gateway is not running"
    gone = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if "keys.db" in target and target.endswith(" (deleted)"):
            gone.append(target)
    return gone


def test_keys_db_shared_with_another_process():
    """keys.db may be shared (a second gateway process, sqlite3 for a look): another process opening it and
    closing it leaves the gateway on the files everybody reads. Before the fix the gateway held no lock on
    keys.db (it had closed a descriptor of the file after SQLite opened it), so the other process, closing
    "last", removed the -wal and -shm files the gateway kept writing to: keys made afterwards were seen
    by no other process and lost at the gateway's next start ("The API key is not known")."""
    wait_for(gateway_up, timeout=30, what="the gateway answering")
    db = sqlite3.connect(KEYS_DB, timeout=30)
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    db.execute("SELECT count(*) FROM api_keys").fetchone()
    db.close()
    assert os.path.exists(KEYS_DB + "-wal") and os.path.exists(KEYS_DB + "-shm")
    assert gateway_deleted_files() == []

    secret, key = mint(preset="member", name="after-another-close")
    try:
        db = sqlite3.connect(KEYS_DB, timeout=30)
        found = db.execute("SELECT id FROM api_keys WHERE id = ?", (key["id"],)).fetchall()
        db.close()
        assert found == [(key["id"],)], "a key the gateway made is not in keys.db for other processes"
        restart_gateway()
        wait_for(gateway_up, timeout=30, what="the gateway answering after its restart")
        r = Api(secret).req("GET", "/v1/sandboxes")
        assert r.status_code == 200, r.text
    finally:
        revoke(key["id"])


@pytest.fixture
def admin_member():
    """A host user in sandbox-admin (which may use sandboxd and read the audit log), removed afterwards."""
    name = "sbx-keys-test"
    run("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "--groups", "sandbox-admin", name)
    yield name
    run("userdel", name, check=False)


def test_keys_interface_root_only(admin_member):
    """Only root may manage keys: not nobody, not a sandbox-admin member, not the gateway's own user."""
    n = len(list_keys())
    for user in ("nobody", admin_member, "sandbox-gateway"):
        r = ctl("create", "--preset", "admin", check=False, user=user)
        assert r.returncode != 0 and "root" in r.stderr, (user, r.stderr)
        for method, sig, args in (("ListKeys", "", []), ("CreateKey", "a{sv}", ["0"]),
                                  ("RevokeKey", "s", ["key_aaaaaaaaaaaaaaaaaaaa"])):
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user if user != 'nobody' else 'nogroup'}",
                   "--init-groups", "busctl", "call", *KEYS, method]
            if sig:
                cmd += [sig, *args]
            p = subprocess.run(cmd, capture_output=True, text=True)
            assert p.returncode != 0 and ("Access denied" in p.stderr or "AccessDenied" in p.stderr), (user, p.stderr)
    assert len(list_keys()) == n
    # Root's bad input: InvalidArgs saying what, NoSuchKey for an unknown id.
    unknown_field = subprocess.run(["busctl", "call", *KEYS, "CreateKey", "a{sv}", "1", "colour", "s", "blue"],
                                   capture_output=True, text=True)
    assert unknown_field.returncode != 0 and "Unknown key spec field 'colour'" in unknown_field.stderr
    wrong_type = subprocess.run(["busctl", "call", *KEYS, "CreateKey", "a{sv}", "1", "ttl_seconds", "s", "1h"],
                                capture_output=True, text=True)
    assert wrong_type.returncode != 0 and "must be of type 't'" in wrong_type.stderr
    missing = subprocess.run(["busctl", "call", *KEYS, "RevokeKey", "s", "key_aaaaaaaaaaaaaaaaaaaa"],
                             capture_output=True, text=True)
    assert missing.returncode != 0 and "No API key" in missing.stderr


# --- the OpenAPI file --------------------------------------------------------------------------

def served_routes():
    """The gateway's own route table, from its source: {(METHOD, path pattern, public)}."""
    with open(os.path.join(SRC, "services", "sandbox-gatewayd", "gatewayd-routes.c")) as f:
        text = f.read()
    return {(m, p, "ROUTE_PUBLIC" in rest) for m, p, rest in re.findall(r'\{\s*"([A-Z]+)",\s*"(/[^"]*)"([^}]*)\}', text)}


def served_actions():
    """{(METHOD, path shape): action wire name} from the gateway's route table."""
    with open(os.path.join(SRC, "services", "sandbox-gatewayd", "gatewayd-routes.c")) as f:
        text = f.read()
    names = {a.upper().replace(".", "_").replace("-", "_"): a for a in ALL_ACTIONS}
    return {(m, re.sub(r"\{[^}]+\}", "{}", p)): names.get(a, a)
            for m, p, a in re.findall(r'\{\s*"([A-Z]+)",\s*"(/[^"]*)",\s*GATEWAY_ACTION_([A-Z_]+)', text)}


def test_served_actions_follow_the_design():
    """Each route the gateway serves needs the action DESIGN.md's table names for it."""
    design = {(m, re.sub(r"\{[^}]+\}", "{}", p)): a for m, p, a, _ in ROUTES}
    served = served_actions()
    assert len(served) >= 10, served
    for route, action in served.items():
        tool_route = (route[0], re.sub(r"/tools/[a-z_]+$", "/tools/{}", route[1]))
        if route in design:
            assert design[route] == action, (route, action, design[route])
        elif tool_route[1] != route[1] or route[1].endswith("/tools/{}"):
            # one route per tool, or one for all whose action depends on the tool
            assert action in ("file.read", "file.write"), (route, action)
        else:
            raise AssertionError(f"{route} is served but not in DESIGN.md's route table")


def openapi_routes():
    with open(os.path.join(SRC, "docs", "openapi.json")) as f:
        doc = json.load(f)
    assert doc["openapi"].startswith("3.1")
    # Path parameter names differ ({id}, {row}, …): compare the shapes.
    return {(m.upper(), re.sub(r"\{[^}]+\}", "{}", p)) for p, item in doc["paths"].items()
            for m in item if m != "parameters"}, doc


def test_openapi_names_every_route(world):
    documented, doc = openapi_routes()
    table = served_routes()
    assert len(table) >= 10, table
    for method, pattern, public in table:
        shape = re.sub(r"\{[^}]+\}", "{}", pattern)
        # tools may be one route each or one with a {tool} parameter; the file documents the latter
        tool_shape = re.sub(r"/tools/[a-z_]+$", "/tools/{}", shape)
        assert (method, shape) in documented or (method, tool_shape) in documented, \
            f"{method} {pattern} is served but not in docs/openapi.json"
        # … and really served: without a key, 401 rather than the 404 of an unknown route.
        path = pattern.replace("{id}", world["sb"]).replace("{row}", str(int(world["row"])))
        path = path.replace("{path*}", "app.js")  # the dashboard's files: one that is installed
        path = re.sub(r"\{[^}]+\}", "x", path)
        r = Api().req(method, path, stream=True)
        r.close()
        assert r.status_code != 404 if public else r.status_code == 401, (method, path, r.status_code)
    # Every documented route has its action named, as docs/API.md's table does.
    for p, item in doc["paths"].items():
        for m, o in item.items():
            if m != "parameters":
                assert o.get("x-sandboxd-action"), (m, p)
    # An unknown route is 404 before any credentials are looked at.
    expect_error(Api().req("GET", "/v1/no-such-route"), 404, "not_found")
