# SPDX-License-Identifier: LGPL-2.1-or-later
# PropertiesChanged on a sandbox's object: ExpiresAt after SetTTL, State when it is deleted.
import dbus
import dbus.mainloop.glib
from gi.repository import GLib

from conftest import BUS_NAME, SANDBOX_IFACE

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)


def collect_changes(path, action, until, timeout=20):
    """Runs action(), then the main loop until until(changes) is true; returns the PropertiesChanged
    signals of path seen meanwhile, as (changed, invalidated) pairs."""
    bus = dbus.SystemBus()
    changes = []
    loop = GLib.MainLoop()

    def on_changed(iface, changed, invalidated):
        if iface == SANDBOX_IFACE:
            changes.append(({str(k): v for k, v in changed.items()}, [str(x) for x in invalidated]))
            if until(changes):
                loop.quit()

    match = bus.add_signal_receiver(on_changed, signal_name="PropertiesChanged",
                                    dbus_interface="org.freedesktop.DBus.Properties", bus_name=BUS_NAME,
                                    path=path)
    try:
        GLib.idle_add(lambda: action() and False)
        GLib.timeout_add_seconds(timeout, loop.quit)
        loop.run()
    finally:
        match.remove()
    return changes


def test_properties_changed(mgr, sandbox):
    sid, path = sandbox(ttl_seconds=600)
    before = int(mgr.props(path)["ExpiresAt"])

    def set_ttl():
        mgr.iface.SetTTL(sid, dbus.UInt64(3600), dbus.Dictionary({}, signature="sv"))

    changes = collect_changes(path, set_ttl, lambda c: any("ExpiresAt" in ch for ch, _ in c))
    new = [int(ch["ExpiresAt"]) for ch, _ in changes if "ExpiresAt" in ch]
    assert new, changes
    assert new[-1] == int(mgr.props(path)["ExpiresAt"]) and new[-1] > before + 2900 * 10 ** 6

    changes = collect_changes(path, lambda: mgr.delete(sid),
                              lambda c: any(ch.get("State") == "stopping" for ch, _ in c))
    assert any(ch.get("State") == "stopping" for ch, _ in changes), changes
