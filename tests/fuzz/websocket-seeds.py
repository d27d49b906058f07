#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# Writes the seed corpus of fuzz-websocket (see its header for the input format): upgrade requests good
# and bad, and client streams that resize, type, ping, fragment, break the protocol and close.
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "corpus", "websocket")
os.makedirs(out, exist_ok=True)

GOOD = ["websocket", "Upgrade", "13", "dGhlIHNhbXBsZSBub25jZQ==", "", "* 127.0.0.1:8790", "80 24"]
RAW, SMALL = 1, 2


def headers(**kw):
    h = list(GOOD)
    for k, v in kw.items():
        h[["upgrade", "connection", "version", "key", "origin", "allowed_host", "size"].index(k)] = v
    return "".join(x + "\n" for x in h).encode()


def frame(payload, op=0x1, fin=True, rsv=0, unmasked=False, long_len=False):
    if isinstance(payload, str):
        payload = payload.encode()
    b0 = (0x80 if fin else 0) | rsv << 4 | op
    return bytes([b0, (1 if unmasked else 0) | (2 if long_len else 0)]) + struct.pack("<H", len(payload)) + payload


def write(name, data):
    open(os.path.join(out, name), "wb").write(data)


resize = '{"type":"resize","cols":120,"rows":40}'
write("session", headers() + bytes([0]) + frame(resize) + frame(b"ls -l\n", op=0x2) + frame(b"", op=0x9) +
      frame(b"pong", op=0xA))
write("bad-control", headers() + bytes([0]) + frame("hello"))
write("fragmented-resize", headers() + bytes([0]) + frame('{"type":"resize",', fin=False) +
      frame(b"x", op=0x9) + frame('"cols":100,"rows":30}', op=0x0))
write("unmasked", headers() + bytes([0]) + frame(resize, unmasked=True))
write("rsv", headers() + bytes([0]) + frame(b"abc", op=0x2, rsv=4))
write("too-large", headers() + bytes([SMALL]) + frame(b"x" * 100, op=0x2))
write("too-large-fragments", headers() + bytes([SMALL]) + frame(b"x" * 40, op=0x2, fin=False) +
      frame(b"y" * 40, op=0x0))
for i, bad in enumerate(['{"type":"resize","cols":0,"rows":40}', '{"type":"resize","cols":1001,"rows":1}',
                         '{"type":"resize","cols":-1,"rows":40}', '{"type":"resize","cols":"80","rows":40}',
                         '{"type":"resize","cols":80.5,"rows":40}', '{"type":"resize","cols":80,"rows":40,"x":1}',
                         '{"type":"resize","cols":80,"rows":40} {}', '[1]']):
    write("resize-bad-%d" % i, headers() + bytes([0]) + frame(resize) + frame(bad) + frame(resize))
write("close-short", headers() + bytes([0]) + frame(b"\x03", op=0x8))
write("close-1005", headers() + bytes([0]) + frame(b"\x03\xed", op=0x8) + frame(resize))
write("continuation-first", headers() + bytes([0]) + frame(b"abc", op=0x0))
write("long-length", headers() + bytes([0]) + frame(resize, long_len=True))
write("ping-too-long", headers() + bytes([0]) + frame(b"p" * 126, op=0x9))
write("unknown-opcode", headers() + bytes([0]) + frame(b"?", op=0x3))
write("text-not-utf8", headers() + bytes([0]) + frame(b"\xff\xfe", op=0x1))
# raw streams: a masked text frame cut short, and the same with half already read by libmicrohttpd
masked = bytes([0x81, 0x80 | 5]) + b"\x01\x02\x03\x04" + bytes(c ^ k for c, k in zip(b"hello", b"\x01\x02\x03\x04\x01"))
write("raw-cut", headers() + bytes([RAW]) + masked + bytes([0x82, 0xff]))
write("raw-extra", headers() + bytes([RAW | 32 << 2]) + masked * 3)
write("raw-64bit-huge", headers() + bytes([RAW]) + bytes([0x82, 0xff]) + b"\x7f" + b"\xff" * 7 + b"abcd")
# the upgrade request's checks
write("no-upgrade", headers(upgrade="h2c", connection="keep-alive") + bytes([0]))
write("version-8", headers(version="8") + bytes([0]))
write("key-short", headers(key="dGhlIHNhbXBsZQ==") + bytes([0]))
write("key-bad-bits", headers(key="dGhlIHNhbXBsZSBub25jZR==") + bytes([0]))
write("origin-listed", headers(origin="https://console.example",
                               allowed_host="https://a.example https://console.example gw:8790") + bytes([0]))
write("origin-evil", headers(origin="https://console.example.evil",
                             allowed_host="https://console.example gw:8790") + bytes([0]))
write("origin-host", headers(origin="http://GW:8790", allowed_host=" gw:8790") + bytes([0]))
write("size-half", headers(size="132") + bytes([0]))
write("size-bad", headers(size="0 99999") + bytes([0]))
