# SPDX-License-Identifier: LGPL-2.1-or-later
# Issue 23's networks in CreateSandbox: "host" only where sandboxd.conf allows it, "egress" with its policy,
# and bad input refused with nothing made.
import os

import dbus
import pytest

from conftest import HOST_NETWORK_DROPIN, allow_host_network, dbus_error, run
from test_sandboxd import wait_sandboxd_active

INVALID = "org.freedesktop.DBus.Error.InvalidArgs"


def restart_sandboxd():
    run("systemctl", "reset-failed", "sandboxd.service", check=False)
    run("systemctl", "restart", "sandboxd.service")
    wait_sandboxd_active()


def create_raw(mgr, opts):
    return mgr.iface.CreateSandbox(dbus.Dictionary(opts, signature="sv"), timeout=120)


@pytest.fixture
def shipped_default():
    """sandboxd as shipped: without the suite's AllowHostNetwork=yes drop-in; put back afterwards."""
    os.unlink(HOST_NETWORK_DROPIN)
    try:
        restart_sandboxd()
        yield
    finally:
        allow_host_network()
        restart_sandboxd()


def test_host_network_refused_by_default(mgr, shipped_default):
    before = mgr.list()
    with pytest.raises(dbus.DBusException) as e:
        mgr.create(type="small", network="host")
    name, msg = dbus_error(e)
    assert name == INVALID
    assert "AllowHostNetwork=yes" in msg, msg
    assert mgr.list() == before, "nothing made"
    # the other networks are still there
    sid, _ = mgr.create(type="small", network="none")
    mgr.delete(sid)


def test_host_network_allowed_by_the_setting(mgr, sandbox):
    sid, path = sandbox(network="host")
    assert mgr.props(path)["Network"] == "host"


def test_bad_network_input(mgr):
    before = mgr.list()
    cases = [
        ({"network": "bridge"}, "'network' must be \"none\", \"egress\" or \"host\""),
        ({"egress_policy": dbus.Dictionary({"allow": dbus.Array(["pypi.org"], signature="s")}, signature="sv")},
         "'egress_policy' needs network \"egress\", not \"none\""),
        ({"network": "egress",
          "egress_policy": dbus.Dictionary({"allow": dbus.Array(["10.0.0.1/8"], signature="s")}, signature="sv")},
         "host bits"),
        ({"network": "egress",
          "egress_policy": dbus.Dictionary({"allow": dbus.Array(["pypi.org:443"], signature="s")}, signature="sv")},
         "ports, protocols and paths are not supported"),
        ({"network": "egress", "egress_policy": dbus.Dictionary({"ports": dbus.Array([], signature="s")},
                                                                signature="sv")},
         "Unknown egress policy key 'ports'"),
        ({"network": "egress", "egress_policy": dbus.String("deny")}, "must be of type 'a{sv}'"),
    ]
    for opts, want in cases:
        opts = dict(opts, type="small")
        with pytest.raises(dbus.DBusException) as e:
            create_raw(mgr, opts)
        name, msg = dbus_error(e)
        assert name == INVALID, (opts, name, msg)
        assert want in msg, (opts, msg)
    assert mgr.list() == before, "nothing made"
