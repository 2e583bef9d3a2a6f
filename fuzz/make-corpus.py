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
