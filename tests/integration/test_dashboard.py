# SPDX-License-Identifier: LGPL-2.1-or-later
# The web dashboard: its static routes over HTTP (types, headers, 404s, no way out of its directory), and
# the end-to-end test in Debian's headless Chromium (tests/e2e, node's test runner with playwright-core),
# run here against this fleet so that it counts in the integration suite. Screenshots of each step go to
# <build>/meson-logs/dashboard/ (next to the JUnit file), or $DASHBOARD_ARTIFACTS.
import json
import os
import re
import shutil
import socket
import subprocess

import pytest
import requests

from conftest import run, wait_for
from gateway_helpers import BASE, assert_error, gateway_config, read_to_eof  # noqa: F401 (a fixture)
from test_egress import upstream  # noqa: F401 (the fake internet: the e2e test's egress sandbox needs an uplink)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
E2E = os.path.join(ROOT, "tests", "e2e")
INSTALLED = "/usr/share/sandboxd/dashboard"
CHROMIUM = "/usr/bin/chromium"

@pytest.fixture(scope="module")
def gateway():
    run("systemctl", "start", "sandbox-auditd.service", "sandbox-gatewayd.socket")
    wait_for(lambda: requests.get(BASE + "/v1/sandboxes", timeout=10).status_code == 401, what="the gateway")


def key(preset):
    return json.loads(run("sandboxctl", "api-key", "create", f"--preset={preset}", "--json").stdout)["secret"]


def raw_get(path):
    """GET with the path sent exactly as given (requests would normalise '..' and '%2e')."""
    s = socket.create_connection(("127.0.0.1", 8790), timeout=30)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:8790\r\nConnection: close\r\n\r\n".encode())
    data = read_to_eof(s)
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), head.decode(errors="replace"), body


def assert_security_headers(r):
    csp = r.headers["Content-Security-Policy"]
    assert "script-src 'self';" in csp and "unsafe-eval" not in csp and "frame-ancestors 'none'" in csp, csp
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp, csp
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["X-Frame-Options"] == "DENY"
    assert r.headers["Referrer-Policy"] == "no-referrer"


def test_static_routes(gateway):
    r = requests.get(BASE + "/", timeout=30)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert r.headers["Cache-Control"] == "no-cache" and r.headers["ETag"].startswith('"')
    assert_security_headers(r)
    assert r.content == open(os.path.join(INSTALLED, "index.html"), "rb").read()
    # no inline script: every <script> names a file of ours
    assert not re.search(rb"<script(?![^>]*\bsrc=\"/ui/)[^>]*>", r.content), r.text

    for path, ctype in [("/ui/app.js", "text/javascript; charset=utf-8"), ("/ui/style.css", "text/css; charset=utf-8"),
                        ("/ui/vendor/xterm/xterm.mjs", "text/javascript; charset=utf-8"),
                        ("/ui/vendor/xterm/addon-fit.mjs", "text/javascript; charset=utf-8"),
                        ("/ui/vendor/xterm/xterm.css", "text/css; charset=utf-8")]:
        r = requests.get(BASE + path, timeout=30)
        assert r.status_code == 200, (path, r.text)
        assert r.headers["Content-Type"] == ctype, path
        assert_security_headers(r)
        assert r.content == open(INSTALLED + path[3:], "rb").read()

    # revalidation by the ETag
    r = requests.get(BASE + "/ui/app.js", timeout=30)
    r2 = requests.get(BASE + "/ui/app.js", headers={"If-None-Match": r.headers["ETag"]}, timeout=30)
    assert r2.status_code == 304 and r2.content == b""
    r3 = requests.get(BASE + "/ui/app.js", headers={"If-None-Match": '"other"'}, timeout=30)
    assert r3.status_code == 200 and r3.content == r.content
    # HEAD: the headers only
    h = requests.head(BASE + "/", timeout=30)
    assert h.status_code == 200 and h.content == b"" and h.headers["Content-Type"].startswith("text/html")
    # no key needed, and a key changes nothing
    assert requests.get(BASE + "/", headers={"Authorization": "Bearer nonsense"}, timeout=30).status_code == 200
    # the API's answers are still never cached
    assert requests.get(BASE + "/v1/sandboxes", timeout=30).headers["Cache-Control"] == "no-store"


def test_static_refusals(gateway):
    for path in ["/ui/missing.js", "/ui/index.htm", "/ui/vendor", "/ui/vendor/", "/ui/.hidden.js",
                 "/ui/vendor/xterm/LICENSE", "/favicon.ico", "/ui/app.js/x.js"]:
        r = requests.get(BASE + path, timeout=30)
        body = assert_error(r, 404, "not_found")
        assert "No route GET" in body["error"], (path, body)
    assert_error(requests.post(BASE + "/", timeout=30), 405, "method_not_allowed")
    assert_error(requests.get(BASE + "/ui/", timeout=30), 404, "not_found")

    # out of the directory: '..' as is, percent-encoded, doubled slashes, absolute
    for path in ["/ui/../../../etc/passwd", "/ui/%2e%2e/%2e%2e/etc/os-release", "/ui/..%2f..%2fetc%2fhostname",
                 "/ui//etc/hostname", "/ui/vendor/../../../../etc/hostname", "/ui/%2fetc%2fhostname"]:
        status, head, body = raw_get(path)
        assert status in (400, 404), (path, head)
        assert b"root:" not in body and b"PRETTY_NAME" not in body, (path, body[:200])


def test_static_never_follows_symlinks(gateway):
    # a link planted inside the installed directory still leads nowhere
    link = os.path.join(INSTALLED, "leak.txt")
    sub = os.path.join(INSTALLED, "etc-link")
    os.symlink("/etc/hostname", link)
    os.symlink("/etc", sub)
    try:
        assert_error(requests.get(BASE + "/ui/leak.txt", timeout=30), 404, "not_found")
        assert_error(requests.get(BASE + "/ui/etc-link/os-release.txt", timeout=30), 404, "not_found")
    finally:
        os.unlink(link)
        os.unlink(sub)


def test_dashboard_directory_setting(gateway, gateway_config):
    # the gateway's unit has PrivateTmp=: a directory outside /tmp
    target = "/var/lib/sandboxd-test-console"
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target, mode=0o755)
    os.chmod(target, 0o755)
    with open(os.path.join(target, "index.html"), "w") as f:
        f.write("<!doctype html><title>other</title>")
    os.chmod(os.path.join(target, "index.html"), 0o644)
    try:
        gateway_config(f"DashboardDirectory={target}\n")
        wait_for(lambda: requests.get(BASE + "/", timeout=10).status_code == 200, what="the gateway")
        assert b"<title>other</title>" in requests.get(BASE + "/", timeout=30).content
        assert_error(requests.get(BASE + "/ui/app.js", timeout=30), 404, "not_found")
        gateway_config("DashboardDirectory=no\n")
        r = requests.get(BASE + "/", timeout=30)
        assert_error(r, 404, "not_found", "The dashboard is turned off (DashboardDirectory=no).")
    finally:
        shutil.rmtree(target, ignore_errors=True)


def artifacts_dir(config):
    if os.environ.get("DASHBOARD_ARTIFACTS"):
        return os.environ["DASHBOARD_ARTIFACTS"]
    xml = getattr(config.option, "xmlpath", None)
    if xml:
        return os.path.join(os.path.dirname(os.path.abspath(xml)), "dashboard")
    return os.path.join(ROOT, "build-test", "meson-logs", "dashboard")


def test_dashboard_e2e(gateway, upstream, request):
    node = shutil.which("node")
    assert node, "node is not installed (scripts/install-deps installs nodejs)"
    assert os.access(CHROMIUM, os.X_OK), "Debian's chromium is not installed (scripts/install-deps installs it)"
    assert os.path.isdir(os.path.join(E2E, "node_modules", "playwright-core")), \
        "tests/e2e/node_modules is missing: run `npm ci` in tests/e2e (scripts/test does)"
    out_dir = artifacts_dir(request.config)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    env = dict(os.environ, GATEWAY_URL=BASE, ADMIN_KEY=key("admin"), MEMBER_KEY=key("member"),
               ARTIFACTS=out_dir, CHROMIUM=CHROMIUM, PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD="1",
               PLAYWRIGHT_BROWSERS_PATH="/nonexistent", HOME=os.environ.get("HOME", "/root"))
    p = subprocess.run([node, "--test", "--test-concurrency=1", "--test-reporter=tap", "dashboard.test.mjs"],
                       cwd=E2E, env=env, capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    passed = re.search(r"^# pass (\d+)$", out, re.M)
    failed = re.search(r"^# fail (\d+)$", out, re.M)
    assert passed and failed, out[-6000:]
    # A run that ran nothing cannot pass.
    assert int(passed[1]) > 0, out[-6000:]
    assert p.returncode == 0 and int(failed[1]) == 0, out[-10000:]
    shots = sorted(f for f in os.listdir(out_dir) if f.endswith(".png"))
    assert len(shots) >= 8, shots
