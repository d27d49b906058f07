#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""audit-sink: a self-hosted sink for sandbox-auditd, as JSON lines.

Subscribes to org.sandboxd.audit1.Log.EntryAdded on the system bus and writes every row as one JSON
line (to stdout, or appended to --output), in id order, each row once. With --state it remembers the
last id it wrote and, when started again, first fetches what it missed with GetLog (after_id), so a
sink that was down or restarting loses nothing: signals are not stored anywhere, the log is. A gap
in the ids of the signals it gets is filled from GetLog too.

Run it as root or as a member of the sandbox-admin group (only they receive the signal and may call
GetLog). Needs python3-dbus and python3-gi (GLib main loop). See docs/audit-sinks.md.

  audit-sink.py                               # new rows from now on, to stdout
  audit-sink.py --state /var/lib/my-sink/last --output /var/log/sandbox-audit.jsonl
  audit-sink.py --after-id 0 --session sb_abcdefghij   # one sandbox's whole history, then live
"""
import argparse
import json
import os
import sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

BUS_NAME = "org.sandboxd.audit1"
PATH = "/org/sandboxd/audit1"
IFACE = "org.sandboxd.audit1.Log"
PAGE = 1000  # GetLog's largest page


def plain(v):
    """D-Bus values as JSON values."""
    if isinstance(v, dbus.Boolean):
        return bool(v)
    if isinstance(v, (dbus.Byte, dbus.Int16, dbus.Int32, dbus.Int64, dbus.UInt16, dbus.UInt32, dbus.UInt64)):
        return int(v)
    if isinstance(v, dbus.Double):
        return float(v)
    if isinstance(v, (dbus.String, dbus.ObjectPath, dbus.Signature)):
        return str(v)
    if isinstance(v, dbus.Array):
        return [plain(x) for x in v]
    if isinstance(v, dbus.Dictionary):
        return {str(k): plain(x) for k, x in v.items()}
    return v


def row_json(row):
    """A row with its JSON-valued fields (detail, output_truncated) as JSON, not as strings."""
    r = {str(k): plain(v) for k, v in row.items()}
    for k in ("detail", "output_truncated"):
        if isinstance(r.get(k), str):
            try:
                r[k] = json.loads(r[k])
            except ValueError:
                pass
    return r


class Sink:
    def __init__(self, out, last_id, state, session, exit_after):
        self.out = out
        self.last = last_id
        self.state = state
        self.session = session
        self.left = exit_after
        self.loop = GLib.MainLoop()
        self.log = None

    def emit(self, row):
        rid = int(row["id"])
        if self.left is not None and self.left <= 0:
            return  # done (--exit-after)
        if rid <= self.last:
            return  # seen already: a row can come both from the backfill and as a signal
        self.out.write(json.dumps(row_json(row), ensure_ascii=False, separators=(",", ":")) + "\n")
        self.out.flush()
        self.last = rid
        if self.state:
            tmp = self.state + ".tmp"
            with open(tmp, "w") as f:
                f.write(f"{rid}\n")
            os.replace(tmp, self.state)
        if self.left is not None:
            self.left -= 1
            if self.left <= 0:
                self.loop.quit()

    def filter(self, **extra):
        f = {k: dbus.UInt64(v) for k, v in extra.items()}
        if self.session:
            f["session_id"] = dbus.String(self.session)
        return dbus.Dictionary(f, signature="sv")

    def fill(self, lo, hi):
        """Writes the rows with lo < id <= hi, oldest first."""
        if not self.session:
            # the whole log: ids are unique, so a window of PAGE ids never holds more than a page
            while lo < hi:
                top = min(lo + PAGE, hi)
                rows = self.log.GetLog(self.filter(after_id=lo, max_id=top), dbus.UInt64(PAGE), dbus.UInt64(0))
                for row in reversed(rows):  # GetLog is newest first
                    self.emit(row)
                lo = top
            return
        # one session: its ids are sparse; page down from hi (keyset), then write them oldest first
        rows, top = [], hi
        while top > lo:
            page = self.log.GetLog(self.filter(after_id=lo, max_id=top), dbus.UInt64(PAGE), dbus.UInt64(0))
            if not page:
                break
            rows += page
            top = int(page[-1]["id"]) - 1
        for row in reversed(rows):
            self.emit(row)

    def newest(self):
        rows = self.log.GetLog(self.filter(), dbus.UInt64(1), dbus.UInt64(0))
        return int(rows[0]["id"]) if rows else 0

    def on_signal(self, rid, session_id, row):
        # A gap before this id may hide a row whose signal we never got (the bus drops messages for a
        # slow receiver; the logger may die between its commit and its signal): look it up.
        if int(rid) > self.last + 1:
            try:
                self.fill(self.last, int(rid) - 1)
            except dbus.DBusException as e:
                print(f"audit-sink: could not catch up: {e.get_dbus_message()}", file=sys.stderr, flush=True)
        self.emit(row)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--output", help="append JSON lines to this file (default: stdout)")
    p.add_argument("--state", help="file holding the last id written; resume from it")
    p.add_argument("--after-id", type=int, help="start with the rows after this id (0: all)")
    p.add_argument("--session", help="only this session (sandbox id)")
    p.add_argument("--exit-after", type=int, help="exit after writing this many rows")
    args = p.parse_args()

    last = None
    if args.state and os.path.exists(args.state):
        with open(args.state) as f:
            last = int(f.read().strip() or 0)
    if last is None:
        last = args.after_id

    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    out = open(args.output, "a", encoding="utf-8") if args.output else sys.stdout
    sink = Sink(out, last if last is not None else 0, args.state, args.session, args.exit_after)

    sink.log = dbus.Interface(bus.get_object(BUS_NAME, PATH, introspect=False), IFACE)
    # Subscribe first, then look back: a row stored in between comes both ways, and emit() drops the
    # second. The match's arg1 is EntryAdded's session_id, so the bus filters sessions for us.
    match = {"arg1": args.session} if args.session else {}
    bus.add_signal_receiver(sink.on_signal, "EntryAdded", IFACE, BUS_NAME, PATH, **match)
    try:
        top = sink.newest()
        if last is None:
            sink.last = top  # no starting point given: only rows from now on
        else:
            sink.fill(sink.last, top)
    except dbus.DBusException as e:
        sys.exit(f"audit-sink: {e.get_dbus_name()}: {e.get_dbus_message()}")
    if sink.left is not None and sink.left <= 0:
        return  # --exit-after: the catch-up was enough
    print(f"audit-sink: watching (after id {sink.last})", file=sys.stderr, flush=True)
    try:
        sink.loop.run()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
