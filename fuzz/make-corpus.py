#!/usr/bin/env python3
"""Writes the seed corpus for the `analyze` fuzz target from the fixtures (fuzz/corpus/analyze):
prefixes of real captures, the same packets on other link types and byte orders, and broken
headers. Run from the repository root: python3 fuzz/make-corpus.py"""
import os, struct
out = 'fuzz/corpus/analyze'
os.makedirs(out, exist_ok=True)
fx = lambda n: open(os.path.join('fixtures', n), 'rb').read()
def w(name, data): open(os.path.join(out, name), 'wb').write(data)

ka = fx('keepalive.pcap')
w('keepalive.pcap', ka)
w('reuse-v6-prefix.pcap', fx('reuse-v6.pcap')[:3000])
w('zerowin-prefix.pcap', fx('zerowin.pcap')[:2500])
w('dup-reorder-prefix.pcapng', fx('dup-reorder.pcapng')[:4000])
w('empty', b'')
w('garbage', b'GET / HTTP/1.1\r\n\r\n' * 4)
w('pcap-header-only', ka[:24])
w('pcap-cut-in-header', ka[:30])
w('pcap-zero-snaplen', ka[:16] + b'\0\0\0\0' + ka[20:])
w('pcap-huge-record', ka[:32] + struct.pack('<I', 0xfffffff0) + ka[36:200])
w('pcapng-bad-block-length', fx('dup-reorder.pcapng')[:4] + b'\x05\0\0\0' + fx('dup-reorder.pcapng')[8:400])

# Re-encode keepalive.pcap's packets: raw IPv4, null/loopback, SLL, VLAN, big-endian pcap.
recs, off = [], 24
while off + 16 <= len(ka):
    s, us, incl, orig = struct.unpack('<IIII', ka[off:off + 16])
    recs.append((s, us, ka[off + 16:off + 16 + incl], orig))
    off += 16 + incl
def pcap(link, frames, be=False):
    e = '>' if be else '<'
    b = struct.pack(e + 'IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, link)
    for s, us, f, orig in frames:
        b += struct.pack(e + 'IIII', s, us, len(f), orig) + f
    return b
strip = lambda hdr: [(s, us, hdr + f[14:], o - 14 + len(hdr)) for s, us, f, o in recs]
w('raw-ipv4.pcap', pcap(101, strip(b'')))
w('null-loopback.pcap', pcap(0, strip(struct.pack('<I', 2))))
w('loop.pcap', pcap(108, strip(struct.pack('>I', 2))))
w('linux-sll.pcap', pcap(113, strip(b'\0' * 14 + b'\x08\x00')))
w('linux-sll2.pcap', pcap(276, strip(b'\x08\x00' + b'\0' * 18)))
w('vlan-qinq.pcap', pcap(1, [(s, us, f[:12] + b'\x88\xa8\0\x01\x81\x00\0\x02' + f[12:], o + 8) for s, us, f, o in recs]))
w('big-endian.pcap', pcap(1, recs, be=True))
w('unsupported-link.pcap', pcap(147, recs[:5]))

# The iperf3 session target (fuzz/fuzz_targets/iperf3.rs): byte 0 picks the side (even: our
# server fed a client's bytes; odd: our client fed a server's), then chunks, each after its
# length byte. Seeds: the recorded iperf3 3.12 control streams whole, cut, and made hostile.
out = 'fuzz/corpus/iperf3'
os.makedirs(out, exist_ok=True)
rec = lambda n: open(os.path.join('fixtures/iperf3', n), 'rb').read()
def chunked(data, size):
    b = b''
    for i in range(0, len(data), size):
        piece = data[i:i + size]
        b += bytes([len(piece)]) + piece
    return b
def messages(data, cookie):
    """Cuts a recorded control stream at its messages: the cookie, JSON frames (a zero byte,
    then three more of length, then '{'), single state bytes."""
    out, i = ([data[:37]], 37) if cookie else ([], 0)
    while i < len(data):
        if data[i] == 0 and i + 4 < len(data) and data[i + 4:i + 5] == b'{':
            n = 4 + struct.unpack('>I', data[i:i + 4])[0]
        else:
            n = 1
        out.append(data[i:i + n])
        i += n
    return out
def w3(name, mode, data, size=200):
    open(os.path.join(out, name), 'wb').write(bytes([mode]) + chunked(data, size))
def w3msgs(name, mode, msgs):
    # A message longer than 255 bytes goes as several chunks, all before the next message.
    b = b''.join(chunked(m, 255) for m in msgs)
    open(os.path.join(out, name), 'wb').write(bytes([mode]) + b)
for tag, base in [('forward-P2', '3.12-forward-P2'), ('bidir', '3.12-bidir-w256K-reno-O1-server-output')]:
    c2s, s2c = rec(base + '.c2s.bin'), rec(base + '.s2c.bin')
    w3msgs('whole-server-' + tag, 0, messages(c2s, True))
    w3msgs('whole-client-' + tag, 1, messages(s2c, False))
    w3('bytewise-server-' + tag, 0, c2s, 1)
    w3('half-server-' + tag, 0, c2s[:len(c2s) // 2])
    w3('half-client-' + tag, 1, s2c[:len(s2c) // 2])
c2s = rec('3.12-forward-P2.c2s.bin')
w3('server-huge-length', 0, c2s[:37] + b'\xff\xff\xff\xff')
w3('server-zero-length', 0, c2s[:37] + b'\0\0\0\0')
w3('server-bad-state', 0, c2s[:37] + struct.pack('>I', 2) + b'{}' + b'\x07')
w3('server-terminate', 0, c2s[:37] + struct.pack('>I', 2) + b'{}' + b'\x0c')
w3('server-title-number', 0, c2s[:37] + struct.pack('>I', 24) + b'{"tcp":true,"title":500}')
w3('server-not-object', 0, c2s[:37] + struct.pack('>I', 7) + b'[1,2,3]')
udp = b'{"udp":true,"time":1,"parallel":2,"bidirectional":true,"len":1400,"bandwidth":1000000,"udp_counters_64bit":1}'
w3msgs('server-udp-bidir', 0, [c2s[:37], struct.pack('>I', len(udp)) + udp, b'\x04'])
w3('client-busy', 1, b'\xff')
w3('client-server-error', 1, b'\x09\xfe\0\0\0\x05\0\0\0\0')
w3('client-unknown-state', 1, b'\x09\x0a\x03')
w3('empty', 0, b'')
# Mode 2: UDP datagrams (a 12-byte header, then payload) into the receiver's accounting.
dg = lambda sec, usec, n: struct.pack('>III', sec, usec, n) + b'x' * 20
w3msgs('udp-loss-reorder', 2, [dg(1, 0, 1), dg(1, 1000, 2), dg(1, 5000, 5), dg(1, 3000, 3), dg(1, 6000, 6)])
w3msgs('udp-short-and-wrapping', 2, [b'abc', dg(0xffffffff, 999999, 0xffffffff), dg(0, 0, 0)])
