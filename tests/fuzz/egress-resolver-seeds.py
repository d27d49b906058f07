#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# Writes the seeds of fuzz-egress-resolver (corpus/egress-resolver/): queries a sandbox might send and answers
# an upstream might give, valid and broken. The first byte picks the mode (0: query, 1: answer); for an answer
# the second picks the question it answers (0: allowed.example.test A, 1: x.wild.example.test TXT).
import os
import struct
import sys

A, NS, CNAME, SOA, TXT, AAAA, OPT, AXFR = 1, 2, 5, 6, 16, 28, 41, 252


def name(n):
    if n in ('', '.'):
        return b'\0'
    return b''.join(bytes([len(l)]) + l.encode() for l in n.rstrip('.').split('.')) + b'\0'


def header(id, flags, qd=1, an=0, ns=0, ar=0):
    return struct.pack('>HHHHHH', id, flags, qd, an, ns, ar)


def question(n, t, c=1):
    return name(n) + struct.pack('>HH', t, c)


def rr(n, t, ttl, rdata, c=1):
    return name(n) + struct.pack('>HHIH', t, c, ttl, len(rdata)) + rdata


def opt(size=1232, do=False):
    return b'\0' + struct.pack('>HHIH', OPT, size, 0x8000 if do else 0, 0)


def ipv4(s):
    return bytes(int(x) for x in s.split('.'))


def txt(s):
    return bytes([len(s)]) + s.encode()


RD, QR = 0x0100, 0x8000
seeds = {
    'query-allowed-a': header(0x1111, RD) + question('allowed.example.test', A),
    'query-denied': header(0x1112, RD) + question('evil.example', A),
    'query-wildcard-mixed-case': header(0x1113, RD) + question('A.Wild.Example.Test', TXT),
    'query-deny-entry': header(0x1114, RD) + question('bad.wild.example.test', A),
    'query-aaaa': header(0x1115, RD) + question('allowed.example.test', AAAA),
    'query-edns-do': header(0x1116, RD, ar=1) + question('allowed.example.test', A) + opt(4096, True),
    'query-cut': (header(0x1117, RD) + question('allowed.example.test', A))[:-3],
    'query-is-response': header(0x1118, RD | QR) + question('allowed.example.test', A),
    'query-chaos': header(0x1119, RD) + question('version.bind', TXT, 3),
    'query-two-questions': header(0x111a, RD, qd=2) + question('allowed.example.test', A) * 2,
    'query-axfr': header(0x111b, 0) + question('allowed.example.test', AXFR),
    'query-root': header(0x111c, RD) + question('.', NS),
    'query-status-opcode': header(0x111d, 0x1000) + question('allowed.example.test', A),
    'query-short': header(0x111e, RD)[:7],
    'query-compression-loop': header(0x111f, RD) + b'\xc0\x0c' + struct.pack('>HH', A, 1),
}
ans = QR | RD | 0x0080
seeds.update({
    'answer-chain': bytes([0]) + header(0x4242, ans, an=6, ns=1) + question('allowed.example.test', A)
    + rr('allowed.example.test', CNAME, 300, name('cdn.example.net'))
    + rr('cdn.example.net', A, 60, ipv4('198.51.100.7'))
    + rr('cdn.example.net', A, 60, ipv4('127.0.0.1'))
    + rr('cdn.example.net', A, 60, ipv4('10.1.2.3'))
    + rr('cdn.example.net', A, 60, ipv4('10.1.9.9'))
    + rr('cdn.example.net', AAAA, 60, bytes(15) + b'\1')
    + rr('example.net', SOA, 60, name('ns.example.net') + name('h.example.net') + struct.pack('>IIIII', 1, 2, 3, 4, 5)),
    'answer-outside-chain': bytes([0]) + header(0x4242, ans, an=1) + question('allowed.example.test', A)
    + rr('elsewhere.example.net', A, 60, ipv4('192.0.2.9')),
    'answer-nxdomain': bytes([0]) + header(0x4242, ans | 3) + question('allowed.example.test', A),
    'answer-truncated': bytes([0]) + header(0x4242, ans | 0x0200) + question('allowed.example.test', A),
    'answer-wrong-id': bytes([0]) + header(0x4243, ans, an=1) + question('allowed.example.test', A)
    + rr('allowed.example.test', A, 60, ipv4('203.0.113.10')),
    'answer-other-question': bytes([0]) + header(0x4242, ans, an=1) + question('other.example.test', A)
    + rr('other.example.test', A, 60, ipv4('203.0.113.20')),
    'answer-bad-rdlength': bytes([0]) + header(0x4242, ans, an=1) + question('allowed.example.test', A)
    + name('allowed.example.test') + struct.pack('>HHIH', A, 1, 60, 7) + b'\1\2\3\4\5\6\7',
    'answer-txt-edns': bytes([1]) + header(0x4242, ans, an=2, ar=1) + question('x.wild.example.test', TXT)
    + rr('x.wild.example.test', TXT, 60, txt('hello'))
    + rr('x.wild.example.test', TXT, 60, txt('x' * 250)) + opt(),
})

out = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), 'corpus', 'egress-resolver')
os.makedirs(out, exist_ok=True)
for n, data in seeds.items():
    # The mode byte: queries 0, answers 1 (their own first byte, above, picks the question).
    with open(os.path.join(out, n), 'wb') as f:
        f.write((b'\0' if n.startswith('query') else b'\1') + data)
