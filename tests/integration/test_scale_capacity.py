# SPDX-License-Identifier: LGPL-2.1-or-later
# Issue 29, part 3 on one host: HostTag= in sandbox ids, and the capacity agent HAProxy's agent-check reads
# (sandbox-gatewayd-agent.socket): its line follows the sandboxes against MaxSandboxes=, "drain" when full,
# "down" when sandboxd cannot be asked.
import os
import socket

import pytest

from conftest import assert_config_refused, delete_all_sandboxes, run, wait_for
from gateway_helpers import DROPIN_DIR

SANDBOXD_DROPIN = "/etc/sandboxd/sandboxd.conf.d/60-test-capacity.conf"
AGENT = ("127.0.0.1", 8792)


def agent_line():
    with socket.create_connection(AGENT, timeout=10) as s:
        data = b""
        while chunk := s.recv(256):
            data += chunk
    return data.decode()


@pytest.fixture
def four_slots(mgr):
    delete_all_sandboxes(mgr)
    os.makedirs(os.path.dirname(SANDBOXD_DROPIN), exist_ok=True)
    with open(SANDBOXD_DROPIN, "w") as f:
        f.write("[Manager]\nMaxSandboxes=4\nHostTag=c\n")
    run("systemctl", "restart", "sandboxd.service")
    # the gateway reads MaxSandboxes= from sandboxd.conf when it starts, and takes the agent's socket then;
    # systemd starts no socket for a service that runs already
    run("systemctl", "stop", "sandbox-gatewayd.service")
    run("systemctl", "start", "sandbox-auditd.service", "sandbox-gatewayd.socket", "sandbox-gatewayd-agent.socket")
    run("systemctl", "reset-failed", "sandbox-gatewayd.service", check=False)
    run("systemctl", "start", "sandbox-gatewayd.service")
    try:
        yield
    finally:
        run("systemctl", "unmask", "--runtime", "sandboxd.service", check=False)
        delete_all_sandboxes(mgr)
        os.unlink(SANDBOXD_DROPIN)
        run("systemctl", "restart", "sandboxd.service")
        run("systemctl", "stop", "sandbox-gatewayd-agent.socket")
        run("systemctl", "reset-failed", "sandbox-gatewayd.service", check=False)
        run("systemctl", "restart", "sandbox-gatewayd.service")


def test_agent_line_follows_the_sandboxes(mgr, four_slots):
    wait_for(lambda: agent_line() == "up ready 100%\n", timeout=30, what="the agent's first count")
    made = []
    for expected in ("up ready 75%\n", "up ready 50%\n", "up ready 25%\n", "drain\n"):
        sid, _ = mgr.create(type="small")
        made.append(str(sid))
        wait_for(lambda: agent_line() == expected, timeout=30, what=f"the agent to say {expected!r}")
    # HostTag=c: every id this host made starts with sb_c, the rest stays an id
    assert all(s.startswith("sb_c") and len(s) == 13 for s in made), made
    mgr.delete(made.pop())
    wait_for(lambda: agent_line() == "up ready 25%\n", timeout=30, what="room again after a delete")
    # sandboxd gone and not activatable: within the agent's staleness bound, "down"
    run("systemctl", "mask", "--runtime", "sandboxd.service")
    run("systemctl", "stop", "sandboxd.service")
    wait_for(lambda: agent_line() == "down\n", timeout=30, what="the agent to say down")
    run("systemctl", "unmask", "--runtime", "sandboxd.service")
    run("systemctl", "start", "sandboxd.service")
    wait_for(lambda: agent_line() == "up ready 25%\n", timeout=30, what="the agent back after sandboxd")


def test_bad_agent_listen_is_refused():
    assert_config_refused("sandbox-gatewayd.service", os.path.join(DROPIN_DIR, "60-test-agent.conf"),
                          "[Gateway]\nAgentListen=somewhere\n", "Invalid AgentListen=somewhere")
