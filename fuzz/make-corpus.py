#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets: `analyze` from the capture fixtures (fuzz/corpus/analyze):
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

# --- sock_diag: the sock_diag/tcp_info decoder (fuzz/corpus/sock_diag) -----------------------
out = 'fuzz/corpus/sock_diag'
os.makedirs(out, exist_ok=True)
k = lambda n: open(os.path.join('fixtures/kernel/6.18', n), 'rb').read()
dump, destroy = k('dump-loopback.nl'), k('destroy-events.nl')
w('dump-loopback.nl', dump)
w('destroy-events.nl', destroy)
w('getsockopt-server.bin', k('getsockopt-server.bin'))
w('empty', b'')
w('short-header', dump[:15])
w('cut-in-payload', dump[:100])
w('cut-in-tcp-info', dump[:300])
w('len-zero', b'\0' * 4 + dump[4:200])
w('len-too-large', struct.pack('=I', 0xffffffff) + dump[4:200])
w('len-below-header', struct.pack('=I', 8) + dump[4:200])
# A sock_diag answer whose attribute claims more bytes than it has.
first_len = struct.unpack('=I', dump[:4])[0]
m = bytearray(dump[:first_len])
m[16 + 72:16 + 74] = struct.pack('=H', 0xfff0)
w('attr-too-long', bytes(m))
m = bytearray(dump[:first_len])
m[16] = 99  # unknown address family
w('bad-family', bytes(m))
w('error-message', struct.pack('=IHHII', 36, 2, 0, 1, 0) + struct.pack('=i', -1) + b'\0' * 16)

# --- spec: the experiment spec parser (fuzz/corpus/spec) --------------------------------------
out = 'fuzz/corpus/spec'
os.makedirs(out, exist_ok=True)
for d in sorted(os.listdir('examples')):
    p = os.path.join('examples', d)
    if os.path.isdir(p):
        for f in sorted(os.listdir(p)):
            if f.endswith('.toml'):
                w(f'{d}-{f}', open(os.path.join(p, f), 'rb').read())
w('empty', b'')
w('not-toml', b'name = [\n')
w('minimal.toml', b'name = "m"\n')
w('paired-unequal.toml', b'name = "p"\n[[paired]]\n"link.rate" = ["1mbit", "2mbit"]\n"link.delay" = ["1ms"]\n')
w('big-sweep.toml', b'name = "b"\n[sweep]\n"link.delay" = [' + b','.join(b'"%dms"' % i for i in range(1, 201)) + b']\n"link.up.jitter" = [' + b','.join(b'"%dus"' % i for i in range(1, 201)) + b']\n')
w('command.toml', b'name = "c"\n[workload]\nkind = "command"\nclient_command = "true"\nduration = "1s"\n')
w('hostile-values.toml', b'name = "h"\n[link]\nrate = "1e300tbit"\ndelay = "1e-12s"\noverhead = -100\n[client]\ncpu = 99\n[workload]\nduration = "0s"\n')
w('label.toml', b'name = "l"\n[[paired]]\nlabel = ["a", "b"]\n"server.sysctl.net.ipv4.tcp_rmem" = ["4096 4096 4096", "4096 8192 8192"]\n')

# --- snapshot: the tune snapshot reader (fuzz/corpus/snapshot) --------------------------------
out = 'fuzz/corpus/snapshot'
os.makedirs(out, exist_ok=True)
w('host.json', b'{"netns": null, "netns_inode": 4026531840, "taken_unix_s": 1700000000, "sysctls": [["net.ipv4.tcp_rmem", "4096\\t131072\\t6291456\\n"], ["net.ipv4.tcp_sack", "0\\n"]], "txqueuelen": [["eth0", 1000]]}')
w('netns.json', b'{"netns": "tt-a", "netns_inode": 4026532001, "taken_unix_s": 0, "sysctls": [], "txqueuelen": []}')
w('old-without-inode.json', b'{"netns": null, "taken_unix_s": 1, "sysctls": [["net.core.rmem_max", "212992\\n"]], "txqueuelen": []}')
w('empty', b'')
w('not-json', b'{"netns": ')
w('path-in-key.json', b'{"netns": null, "taken_unix_s": 1, "sysctls": [["../../etc/passwd", "x"]], "txqueuelen": []}')
w('bad-netns.json', b'{"netns": "../x", "taken_unix_s": 1, "sysctls": [], "txqueuelen": []}')
w('bad-device.json', b'{"netns": null, "taken_unix_s": 1, "sysctls": [], "txqueuelen": [["a/b", 1]]}')
w('wrong-types.json', b'{"netns": 5, "taken_unix_s": -1, "sysctls": {}, "txqueuelen": null}')
# Lab specs (`lab up --spec`, JSON) go through the same target.
out = 'fuzz/corpus/spec'
w('lab-spec.json', b'{"link": {"up": {"delay_s": 0.003, "rate_bps": 100000000, "loss": {"model": "random", "p": 0.01}}, "down": {"delay_s": 0.001}, "seed": 5}, "server": {"cpu_hog": true, "cpu": 0, "sysctls": {"net.ipv4.tcp_rmem": "4096 65536 65536"}}}')
w('lab-spec-hostile.json', b'{"link": {"up": {"delay_s": 1e300, "overhead_bytes": -100, "rate_bps": 1e300}}, "client": {"cpu": 99, "mtu": 0}}')
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
