# SPDX-License-Identifier: LGPL-2.1-or-later
# dbus-daemon restarted while calls are in flight: the callers get errors (no hang), every daemon of ours
# exits on the lost connection and systemd starts it again on the new bus, sandboxd adopts its
# sandboxes again, and a full cycle then works through busctl and HTTP.
import json
import threading

import dbus
import requests

from conftest import (DAEMONS, LONG, Manager, assert_all_reachable, assert_no_leaks, audit, is_active, main_pid,
                      run, spooled, wait_for)

GW = "http://127.0.0.1:8790"


def test_dbus_restarted_mid_call(mgr, sandbox, admin_key):
    sid, _ = sandbox()
    h = {"Authorization": f"Bearer {admin_key}"}
    # the gateway runs (socket activation) and has a connection to every daemon
    assert requests.get(f"{GW}/v1/sandboxes/{sid}", headers=h, timeout=60).status_code == 200
    pids = {u: main_pid(u) for u in DAEMONS}
    assert all(pids.values()), pids

    outcomes = {}
    started = threading.Barrier(3)

    def bus_call():
        m = Manager()
        started.wait()
        try:
            outcomes["bus"] = m.exec(sid, ["sleep", "5"], timeout=60)
        except dbus.DBusException as e:
            outcomes["bus"] = e.get_dbus_name()

    def http_call():
        started.wait()
        try:
            r = requests.post(f"{GW}/v1/sandboxes/{sid}/exec", json={"argv": ["sleep", "5"]}, headers=h, timeout=60)
            outcomes["http"] = r.status_code
        except requests.RequestException as e:
            outcomes["http"] = type(e).__name__

    threads = [threading.Thread(target=bus_call), threading.Thread(target=http_call)]
    for t in threads:
        t.start()
    started.wait()
    # both calls are in sandboxd's hands once their sleep runs
    wait_for(lambda: run("pgrep", "-c", "-f", "^sleep 5$", check=False).stdout.strip() == "2",
             what="both calls running")
    run("systemctl", "restart", "dbus.service")
    for t in threads:
        t.join(timeout=90)  # bounds a hang only
    assert not any(t.is_alive() for t in threads), f"a caller hung: {outcomes}"
    # The bus call lost its bus: an error, not an answer. The HTTP call lost the gateway or its answer.
    assert isinstance(outcomes["bus"], str), outcomes
    assert outcomes["http"] != 200, outcomes

    # Each daemon exits on the lost bus and is started again (the gateway by its socket or Restart=).
    for u in ("sandboxd", "sandbox-auditd"):
        wait_for(lambda: is_active(u) and main_pid(u) not in (0, pids[u]), timeout=60, interval=0.2,
                 what=f"{u} back on the new bus")
    wait_for(lambda: main_pid("sandbox-gatewayd") != pids["sandbox-gatewayd"], timeout=60, interval=0.2,
             what="the old gateway gone")

    # busctl: the sandbox is adopted again, and a full cycle works
    out = run("busctl", "--json=short", "call", "org.sandboxd.sandbox1", "/org/sandboxd/sandbox1",
              "org.sandboxd.sandbox1.Manager", "GetSandbox", "s", sid).stdout
    assert json.loads(out)["data"][0].endswith(sid.replace("_", "_5f"))
    out = run("busctl", "--json=short", "call", "org.sandboxd.sandbox1", "/org/sandboxd/sandbox1",
              "org.sandboxd.sandbox1.Manager", "CreateSandbox", "a{sv}", "1", "type", "s", "small").stdout
    new = json.loads(out)["data"][0]
    out = run("busctl", "--json=short", "--timeout=120", "call", "org.sandboxd.sandbox1", "/org/sandboxd/sandbox1",
              "org.sandboxd.sandbox1.Manager", "Exec", "sasa{sv}", new, "2", "echo", "after-restart", "0").stdout
    assert json.loads(out)["data"][0] == 0
    run("busctl", "call", "org.sandboxd.sandbox1", "/org/sandboxd/sandbox1", "org.sandboxd.sandbox1.Manager",
        "DeleteSandbox", "sa{sv}", new, "0")

    # HTTP: the same cycle through the gateway (which the socket starts again)
    r = requests.post(f"{GW}/v1/sandboxes", json={"type": "small"}, headers=h, timeout=60)
    assert r.status_code == 201, r.text
    hid = r.json()["id"]
    r = requests.post(f"{GW}/v1/sandboxes/{hid}/exec", json={"argv": ["echo", "via-http"]}, headers=h, timeout=60)
    assert r.status_code == 200 and r.json()["stdout"] == "via-http\n", r.text
    assert requests.delete(f"{GW}/v1/sandboxes/{hid}", headers=h, timeout=60).status_code == 204

    # and the rows of both reach the logger
    wait_for(lambda: spooled() == 0, timeout=60, what="the spool to drain")

    def rows(session):
        f = dbus.Dictionary({"session_id": session, "operation": "exec"}, signature="sv")
        return [json.loads(str(r["detail"]))["argv"] for r in audit().GetLog(f, dbus.UInt64(10), dbus.UInt64(0),
                                                                               timeout=LONG)]
    assert ["echo", "after-restart"] in rows(new)
    assert ["echo", "via-http"] in rows(hid)
    assert_all_reachable()
    assert_no_leaks()
