# SPDX-License-Identifier: LGPL-2.1-or-later
# Helpers for tests of sandbox-gatewayd over real HTTP: keys from sandboxctl, a requests session per key,
# raw sockets for SSE clients that read slowly or not at all, and temporary configuration drop-ins.
import json
import os
import socket
import subprocess

import pytest
import requests

from conftest import run

BASE = "http://127.0.0.1:8790"
DROPIN_DIR = "/etc/sandboxd/sandbox-gatewayd.conf.d"


def gateway_up():
    run("systemctl", "start", "sandbox-auditd.service", "sandbox-gatewayd.socket")


# The gateway test modules' common fixtures: import both into a module to use them.
@pytest.fixture(scope="module", autouse=True)
def up():
    """The gateway's socket and the audit log are started for the module."""
    gateway_up()
    yield


@pytest.fixture(scope="module")
def admin():
    """A client with a fresh admin key, for the module."""
    secret, _ = cli_key("--preset", "admin", "--ttl", "1d")
    return Client(secret)


def gateway_pid():
    return int(run("systemctl", "show", "-p", "MainPID", "--value", "sandbox-gatewayd.service").stdout.strip() or 0)


def cli_key(*args):
    """A key minted by root over the bus: (secret, api key object)."""
    out = run("sandboxctl", "api-key", "create", *args, "--json").stdout
    d = json.loads(out)
    return d["secret"], d["apiKey"]


class Client:
    """A requests session that sends one key's bearer secret."""

    def __init__(self, secret=None):
        self.s = requests.Session()
        self.secret = secret
        if secret:
            self.s.headers["Authorization"] = f"Bearer {secret}"

    def req(self, method, path, **kw):
        kw.setdefault("timeout", 120)
        return self.s.request(method, BASE + path, **kw)

    def get(self, path, **kw):
        return self.req("GET", path, **kw)

    def post(self, path, body=None, **kw):
        if body is not None:
            kw["data"] = json.dumps(body)
            kw.setdefault("headers", {})["Content-Type"] = "application/json"
        return self.req("POST", path, **kw)

    def patch(self, path, body, **kw):
        return self.req("PATCH", path, data=json.dumps(body), **kw)

    def put(self, path, data, **kw):
        return self.req("PUT", path, data=data, **kw)

    def delete(self, path, **kw):
        return self.req("DELETE", path, **kw)

    def mint(self, **spec):
        r = self.post("/v1/api-keys", spec)
        assert r.status_code == 201, r.text
        return Client(r.json()["secret"]), r.json()["apiKey"]


def assert_error(r, status, code, message=None):
    """The reference API's error body, exactly these five fields, and the request id of the answer."""
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"] == "application/json"
    body = r.json()
    assert set(body) == {"event", "error", "code", "status", "requestId"}, body
    assert body["event"] == "error" and body["code"] == code and body["status"] == status, body
    assert body["requestId"] == r.headers["X-Request-Id"] and body["requestId"], body
    if message is not None:
        assert body["error"] == message
    return body


def raw_request(method, path, secret=None, headers=(), body=b"", rcvbuf=None):
    """Sends a request on a fresh socket and returns the socket, unread."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", 8790))
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    if secret:
        lines.append(f"Authorization: Bearer {secret}")
    lines += list(headers)
    if body:
        lines.append(f"Content-Length: {len(body)}")
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    return s


def read_to_eof(s):
    """Everything the peer sends until it closes; the socket is closed then."""
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return data


class SseReader:
    """Incremental parser of an SSE byte stream (chunked transfer encoding of HTTP/1.1 undone)."""

    def __init__(self, sock):
        self.sock = sock
        self.raw = b""
        self.headers_done = False
        self.status = None
        self.body = b""
        self.events = []  # (id, event, data)
        self.comments = 0
        self.closed = False

    def feed(self, data):
        if not data:
            self.closed = True
            return
        self.raw += data
        if not self.headers_done:
            if b"\r\n\r\n" not in self.raw:
                return
            head, self.raw = self.raw.split(b"\r\n\r\n", 1)
            self.status = int(head.split(b" ", 2)[1])
            self.headers_done = True
        # undo chunked encoding
        while True:
            if b"\r\n" not in self.raw:
                break
            size_line, rest = self.raw.split(b"\r\n", 1)
            size = int(size_line, 16)
            if len(rest) < size + 2:
                break
            self.body += rest[:size]
            self.raw = rest[size + 2:]
            if size == 0:
                self.closed = True
                break
        while b"\n\n" in self.body:
            block, self.body = self.body.split(b"\n\n", 1)
            ev = {"id": None, "event": None, "data": None}
            comment = False
            for line in block.decode().split("\n"):
                if line.startswith(":"):
                    comment = True
                    continue
                k, _, v = line.partition(": ")
                ev[k] = v
            if ev["event"] or ev["data"]:
                self.events.append(ev)
            elif comment:
                self.comments += 1


def restart_gateway():
    # reset-failed also resets the start rate limit (5 starts in 10 s), which tests that reconfigure the
    # gateway one after another would hit
    run("systemctl", "reset-failed", "sandbox-gatewayd.service", check=False)
    run("systemctl", "restart", "sandbox-gatewayd.service")


@pytest.fixture
def gateway_config():
    """Writes a drop-in and restarts the gateway; removes it and restarts again afterwards."""
    written = []

    def apply(text):
        os.makedirs(DROPIN_DIR, exist_ok=True)
        path = os.path.join(DROPIN_DIR, "50-test.conf")
        with open(path, "w") as f:
            f.write("[Gateway]\n" + text)
        if path not in written:  # applied again: the same file, removed once
            written.append(path)
        restart_gateway()

    yield apply
    for p in written:
        os.unlink(p)
    if written:
        restart_gateway()


def curl(*args):
    return subprocess.run(["curl", "-sS", *args], capture_output=True, text=True, timeout=120)
