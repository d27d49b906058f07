# SPDX-License-Identifier: LGPL-2.1-or-later
# Issue 29, part 2: two gateways sharing their keys and takeover tokens in PostgreSQL (KeyStore=postgresql://…).
# The test starts Debian's PostgreSQL 15 in a scratch directory as the postgres user, on a Unix socket only
# (the gateway's unit allows AF_UNIX and nothing else), points the installed gateway and a second gateway
# process at it, and stops and removes it afterwards.
import concurrent.futures
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

import pytest
import requests
import websocket

from conftest import LONG, assert_config_refused, run, wait_for
from gateway_helpers import DROPIN_DIR, restart_gateway
from test_key_revocation import BOUND, assert_cut, open_sse, read_until, rest_revoke
from test_takeover_gateway import GW, GW2_PORT, mint, running_second_gateway, ws_url

PG_BIN = "/usr/lib/postgresql/15/bin"
PG_SOCKET_DIR = "/run/sandboxd-test-pg"
PG_URL = f"postgresql:///postgres?host={PG_SOCKET_DIR}&user=postgres"
DROPIN = os.path.join(DROPIN_DIR, "60-test-keystore-pg.conf")
GW2 = f"http://127.0.0.1:{GW2_PORT}"
RACERS = 20

pytestmark = pytest.mark.skipif(not os.path.exists(PG_BIN + "/initdb"),
                                reason=f"no {PG_BIN}/initdb (Debian's postgresql-15)")


class Postgres:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sandboxd-test-pg.", dir="/var/tmp")
        shutil.chown(self.dir, "postgres", "postgres")
        os.makedirs(PG_SOCKET_DIR, mode=0o755, exist_ok=True)
        shutil.chown(PG_SOCKET_DIR, "postgres", "postgres")
        self.pg("initdb", "-D", f"{self.dir}/data", "--auth=trust", "-U", "postgres", "--no-sync", "-E", "UTF8")

    def pg(self, tool, *args):
        return run("setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", f"{PG_BIN}/{tool}", *args)

    def start(self):
        self.pg("pg_ctl", "-D", f"{self.dir}/data", "-l", f"{self.dir}/log", "-w", "-o",
                f"-k {PG_SOCKET_DIR} -c listen_addresses= -c fsync=off", "start")

    def stop(self):
        self.pg("pg_ctl", "-D", f"{self.dir}/data", "-m", "fast", "-w", "stop")

    def sql(self, query):
        return run("setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "psql", "-At", "-h",
                   PG_SOCKET_DIR, "-U", "postgres", "-c", query).stdout.strip()

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(PG_SOCKET_DIR, ignore_errors=True)


@pytest.fixture(scope="module")
def pg():
    run("systemctl", "start", "sandbox-auditd.service", "sandbox-gatewayd.socket")
    p = Postgres()
    p.start()
    os.makedirs(DROPIN_DIR, exist_ok=True)
    with open(DROPIN, "w") as f:
        f.write(f"[Gateway]\nKeyStore={PG_URL}\n")
    restart_gateway()
    try:
        yield p
    finally:
        os.unlink(DROPIN)
        restart_gateway()
        subprocess.run(["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", f"{PG_BIN}/pg_ctl",
                        "-D", f"{p.dir}/data", "-m", "fast", "-w", "stop"], capture_output=True)
        p.remove()


@pytest.fixture(scope="module")
def gw2(pg):
    """A second gateway process, as the gateway of another host would be: same configuration, so the same
    PostgreSQL, and nothing else shared (its own port)."""
    with running_second_gateway() as base:
        yield base


def ctl_key(preset="admin"):
    d = json.loads(run("sandboxctl", "api-key", "create", f"--preset={preset}", "--json").stdout)
    return d["secret"], d["apiKey"]


def get(base, path, secret):
    return requests.get(base + path, headers={"Authorization": f"Bearer {secret}"}, timeout=LONG)


def test_keys_live_in_postgres_and_work_on_both_gateways(pg, gw2):
    secret, key = ctl_key("member")
    # stored in PostgreSQL (only the hash of the secret), not in the gateway's SQLite file
    row = pg.sql(f"SELECT role, length(secret_hash) FROM api_keys WHERE id = '{key['id']}'")
    assert row == "member|32", row
    assert pg.sql(f"SELECT count(*) FROM api_keys WHERE secret_hash::text LIKE '%{secret[9:20]}%'") == "0"
    for base in (GW, gw2):
        r = get(base, "/v1/sandboxes", secret)
        assert r.status_code == 200, r.text
    # a key minted through B's REST API works on A, and both list it
    admin, _ = ctl_key("admin")
    r = requests.post(gw2 + "/v1/api-keys", json={"name": "made-on-b", "preset": "runner"},
                      headers={"Authorization": f"Bearer {admin}"}, timeout=LONG)
    assert r.status_code == 201, r.text
    made = r.json()
    assert get(GW, "/v1/sandboxes", made["secret"]).status_code == 200
    for base in (GW, gw2):
        ids = [k["id"] for k in get(base, "/v1/api-keys", admin).json()["api_keys"]]
        assert made["apiKey"]["id"] in ids and key["id"] in ids


def test_token_redeemed_once_when_20_race_through_two_gateways(pg, gw2, sandbox):
    sid, _ = sandbox()
    admin, _ = ctl_key("admin")
    token = mint(sid, admin)  # through A
    start = threading.Barrier(RACERS)

    def redeem(i):
        url = ws_url(sid, base=GW if i % 2 == 0 else gw2, token=token)
        start.wait()
        try:
            ws = websocket.create_connection(url, timeout=LONG)
        except websocket.WebSocketBadStatusException as e:
            return e.status_code
        ws.send("exit 0\n")
        try:
            while ws.recv():
                pass
        except websocket.WebSocketConnectionClosedException:
            pass
        ws.close()
        return 101

    with concurrent.futures.ThreadPoolExecutor(RACERS) as pool:
        codes = list(pool.map(redeem, range(RACERS)))
    assert sorted(codes) == [101] + [401] * (RACERS - 1), codes
    assert pg.sql("SELECT count(*) FROM takeover_tokens WHERE used_at IS NOT NULL AND sandbox_id = "
                  f"'{sid}'") == "1"


def test_key_revoked_on_a_is_refused_on_b(pg, gw2, sandbox):
    sid, _ = sandbox()
    admin, _ = ctl_key("admin")
    secret, key = ctl_key("admin")
    # a watch open on B, and B answering the key
    w = open_sse(GW2_PORT, "GET", f"/v1/sandboxes/{sid}/watch", secret)
    read_until(w, lambda: w.headers_done and w.comments >= 1)
    assert w.status == 200
    assert get(gw2, "/v1/sandboxes", secret).status_code == 200
    t0 = time.monotonic()
    rest_revoke(admin, key["id"])  # through A
    # B's very next request is refused: it reads the key from PostgreSQL
    r = get(gw2, "/v1/sandboxes", secret)
    assert r.status_code == 401 and r.json()["error"] == "The API key has been revoked.", r.text
    # and B's open stream ends within the bound of test_key_revocation.py
    t1 = read_until(w, lambda: w.events and w.events[-1]["event"] == "error")
    assert t1 - t0 < BOUND, f"B's watch ended {t1 - t0:.3f} s after the revocation on A"
    assert_cut(w, "The API key has been revoked.")


def test_postgres_down_answers_503_and_loses_nothing(pg, gw2):
    secret, key = ctl_key("admin")
    pg.stop()
    try:
        for base in (GW, gw2):
            r = get(base, "/v1/sandboxes", secret)
            assert r.status_code == 503, r.text
            body = r.json()
            assert body["code"] == "key_store_unavailable" and body["status"] == 503, body
            assert body["event"] == "error" and body["requestId"].startswith("req_"), body
        # the bus interface says so too, and nothing is made
        p = run("sandboxctl", "api-key", "create", "--preset=member", check=False)
        assert p.returncode != 0 and "key store" in (p.stderr + p.stdout), (p.stdout, p.stderr)
        p = run("busctl", "call", "org.sandboxd.gateway1", "/org/sandboxd/gateway1", "org.sandboxd.gateway1.Keys",
                "ListKeys", check=False)
        assert p.returncode != 0 and "key store (PostgreSQL) cannot be reached" in p.stderr, p.stderr
    finally:
        pg.start()
    # back: within a few reconnect attempts (one a second at most) both answer, and the key made before works
    for base in (GW, gw2):
        wait_for(lambda: get(base, "/v1/sandboxes", secret).status_code == 200, timeout=30,
                 what=f"{base} to reach PostgreSQL again")
    assert pg.sql(f"SELECT count(*) FROM api_keys WHERE id = '{key['id']}'") == "1"
    n = int(pg.sql("SELECT count(*) FROM api_keys"))
    new, _ = ctl_key("member")
    assert int(pg.sql("SELECT count(*) FROM api_keys")) == n + 1
    assert get(gw2, "/v1/sandboxes", new).status_code == 200


def test_bad_key_store_uri_keeps_the_gateway_from_starting(pg):
    assert_config_refused("sandbox-gatewayd.service", DROPIN, "[Gateway]\nKeyStore=postgresql://db/x?colour=blue\n",
                          "colour", restore=f"[Gateway]\nKeyStore={PG_URL}\n")
