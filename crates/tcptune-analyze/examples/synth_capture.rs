//! Writes a synthetic capture of many interleaved bulk TCP transfers, for the benchmark
//! (`bench/analyze`): handshakes with options, window-limited rounds of 1448-byte segments,
//! delayed ACKs, random loss (the lost segment is in the capture, as seen at the sender; the
//! receiver answers with duplicate ACKs and the sender fast-retransmits), and FINs.
//!
//! With `--second OUT2.pcap`, also writes the same packets as a second capture point further
//! along the path sees them (for the two-point join's benchmark): the client's packets 2 ms
//! later and the server's 2 ms earlier, plus up to 100 µs of jitter, `--drop PERCENT` of the
//! client's packets lost between the points and `--dup PERCENT` duplicated; the counts go to
//! standard error, to check the join against.
//!
//! Usage: synth_capture OUT.pcap [--packets N] [--flows F] [--loss PERCENT] [--seed S]
//!        [--second OUT2.pcap [--drop PERCENT] [--dup PERCENT]]

use std::collections::BinaryHeap;
use std::io::BufWriter;

use tcptune_wire::packet::flags::{ACK, FIN, SYN};
use tcptune_wire::write::{PcapWriter, SegSpec};

const MSS: u32 = 1448;
const WINDOW_SEGS: u32 = 40;
/// MSS 1460, SACK permitted, window scale 7 (the one layout every SYN carries).
const SYN_OPTS: [u8; 12] = [2, 4, 0x05, 0xb4, 4, 2, 1, 1, 3, 3, 7, 0];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Clone, Copy)]
struct Pkt {
    t: i64,
    from_client: bool,
    seq: u32,
    ack: u32,
    flags: u16,
    len: u32,
}

struct Flow {
    id: u16,
    c_isn: u32,
    s_isn: u32,
    snd_nxt: u32,
    rcv_nxt: u32,
    /// Segments the receiver holds above a hole.
    ooo: Vec<(u32, u32)>,
    /// Sequence numbers to retransmit at the next round.
    rexmit: Vec<u32>,
    t: i64,
    rtt: i64,
    queue: std::collections::VecDeque<Pkt>,
    done: bool,
    rounds_left: u32,
}

impl Flow {
    /// Generates one round (a window of data and the ACKs it causes) into the queue.
    fn round(&mut self, rng: &mut Rng, loss: f64) {
        let mut t = self.t;
        let s_seq = self.s_isn.wrapping_add(1);
        let mut sent = Vec::new();
        for seq in self.rexmit.drain(..) {
            sent.push((t, seq, false));
            t += 8_000;
        }
        for _ in 0..WINDOW_SEGS {
            let lost = rng.unit() < loss;
            sent.push((t, self.snd_nxt, lost));
            self.snd_nxt = self.snd_nxt.wrapping_add(MSS);
            t += 8_000;
        }
        let mut acks = Vec::new();
        let mut since_ack = 0;
        let mut dups = 0;
        for &(ts, seq, lost) in &sent {
            self.queue.push_back(Pkt {
                t: ts,
                from_client: true,
                seq,
                ack: s_seq,
                flags: ACK,
                len: MSS,
            });
            if lost {
                continue;
            }
            let arrive = ts + self.rtt;
            if seq == self.rcv_nxt {
                self.rcv_nxt = self.rcv_nxt.wrapping_add(MSS);
                let mut filled = false;
                self.ooo.sort_by_key(|&(s, _)| s.wrapping_sub(self.rcv_nxt));
                while let Some(i) = self.ooo.iter().position(|&(s, _)| s == self.rcv_nxt) {
                    self.rcv_nxt = self.ooo.swap_remove(i).1;
                    filled = true;
                }
                since_ack += 1;
                if since_ack >= 2 || filled {
                    acks.push((arrive, self.rcv_nxt));
                    since_ack = 0;
                    dups = 0;
                }
            } else if (seq.wrapping_sub(self.rcv_nxt) as i32) > 0 {
                self.ooo.push((seq, seq.wrapping_add(MSS)));
                acks.push((arrive, self.rcv_nxt));
                dups += 1;
                if dups == 3 {
                    self.rexmit.push(self.rcv_nxt);
                }
            }
        }
        if since_ack > 0 {
            acks.push((t + self.rtt, self.rcv_nxt));
        }
        // A hole the receiver saw fewer than 3 duplicates for is retransmitted anyway.
        if !self.ooo.is_empty() && self.rexmit.is_empty() {
            self.rexmit.push(self.rcv_nxt);
        }
        for (ts, ack) in acks {
            self.queue.push_back(Pkt {
                t: ts,
                from_client: false,
                seq: s_seq,
                ack,
                flags: ACK,
                len: 0,
            });
        }
        self.queue.make_contiguous().sort_by_key(|p| p.t);
        self.t = t + self.rtt + 20_000;
    }

    fn handshake(&mut self) {
        let t = self.t;
        let c = self.c_isn;
        let s = self.s_isn;
        self.queue.extend([
            Pkt {
                t,
                from_client: true,
                seq: c,
                ack: 0,
                flags: SYN,
                len: 0,
            },
            Pkt {
                t: t + self.rtt,
                from_client: false,
                seq: s,
                ack: c.wrapping_add(1),
                flags: SYN | ACK,
                len: 0,
            },
            Pkt {
                t: t + self.rtt + 5_000,
                from_client: true,
                seq: c.wrapping_add(1),
                ack: s.wrapping_add(1),
                flags: ACK,
                len: 0,
            },
        ]);
        self.snd_nxt = c.wrapping_add(1);
        self.rcv_nxt = c.wrapping_add(1);
        self.t = t + self.rtt + 10_000;
    }

    fn finish(&mut self) {
        let t = self.t;
        let s1 = self.s_isn.wrapping_add(1);
        self.queue.extend([
            Pkt {
                t,
                from_client: true,
                seq: self.snd_nxt,
                ack: s1,
                flags: FIN | ACK,
                len: 0,
            },
            Pkt {
                t: t + self.rtt,
                from_client: false,
                seq: s1,
                ack: self.snd_nxt.wrapping_add(1),
                flags: FIN | ACK,
                len: 0,
            },
            Pkt {
                t: t + self.rtt + 5_000,
                from_client: true,
                seq: self.snd_nxt.wrapping_add(1),
                ack: s1.wrapping_add(1),
                flags: ACK,
                len: 0,
            },
        ]);
        self.done = true;
    }
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let Some(out) = args.get(1).filter(|a| !a.starts_with("--")) else {
        eprintln!(
            "usage: synth_capture OUT.pcap [--packets N] [--flows F] [--loss PERCENT] [--seed S]"
        );
        std::process::exit(2);
    };
    let opt = |name: &str, default: f64| -> f64 {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(|v| {
                v.parse()
                    .unwrap_or_else(|_| panic!("{name} takes a number"))
            })
            .unwrap_or(default)
    };
    let packets = opt("--packets", 2_000_000.0) as u64;
    let nflows = opt("--flows", 100.0) as u16;
    let loss = opt("--loss", 0.2) / 100.0;
    let mut rng = Rng(opt("--seed", 1.0) as u64 ^ 0x9e37_79b9_7f4a_7c15);
    // Rounds per flow so the total comes out near `packets` (about 61 packets per round).
    let rounds = (packets / u64::from(nflows.max(1)) / 61).max(1) as u32;
    let mut flows: Vec<Flow> = (0..nflows)
        .map(|id| {
            let mut f = Flow {
                id,
                c_isn: rng.next() as u32,
                s_isn: rng.next() as u32,
                snd_nxt: 0,
                rcv_nxt: 0,
                ooo: Vec::new(),
                rexmit: Vec::new(),
                t: 1_700_000_000_000_000_000 + i64::from(id) * 37_000,
                rtt: 200_000 + (rng.next() % 800_000) as i64,
                queue: Default::default(),
                done: false,
                rounds_left: rounds,
            };
            f.handshake();
            f
        })
        .collect();
    let file = std::fs::File::create(out)?;
    let mut w = PcapWriter::new(BufWriter::with_capacity(1 << 20, file), 96)?;
    let mut heap: BinaryHeap<std::cmp::Reverse<(i64, usize)>> = flows
        .iter()
        .enumerate()
        .map(|(i, f)| std::cmp::Reverse((f.queue[0].t, i)))
        .collect();
    let mut written = 0u64;
    let second = args
        .iter()
        .position(|a| a == "--second")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let (drop_p, dup_p) = (opt("--drop", 0.1) / 100.0, opt("--dup", 0.1) / 100.0);
    // The second point's packets: (time there, the packet), written sorted at the end.
    let mut downstream: Vec<(i64, SegSpec<'static>)> = Vec::new();
    let (mut dropped, mut duplicated) = (0u64, 0u64);
    let mut last_t = 0i64;
    while let Some(std::cmp::Reverse((_, i))) = heap.pop() {
        let f = &mut flows[i];
        let Some(p) = f.queue.pop_front() else {
            continue;
        };
        let (c_ip, s_ip) = ([10, 1, (f.id >> 8) as u8, f.id as u8], [10, 2, 0, 1]);
        let (src, dst, sport, dport) = if p.from_client {
            (c_ip, s_ip, 30000 + f.id, 5001)
        } else {
            (s_ip, c_ip, 5001, 30000 + f.id)
        };
        // Keep the file in time order across flows (a real capture is).
        last_t = last_t.max(p.t);
        let spec = SegSpec {
            ts_ns: last_t,
            src,
            dst,
            sport,
            dport,
            seq: p.seq,
            ack: p.ack,
            flags: p.flags,
            window: if p.flags & SYN != 0 { 65535 } else { 4000 },
            options: if p.flags & SYN != 0 { &SYN_OPTS } else { &[] },
            payload_len: p.len,
            ip_id: written as u16,
        };
        w.segment(&spec)?;
        written += 1;
        if second.is_some() {
            // Loss and duplication between the points act on what passes the first point
            // first: the client's packets.
            if p.from_client && rng.unit() < drop_p {
                dropped += 1;
            } else {
                // The second point is 2 ms further from the client: the client's packets
                // pass it 2 ms later, the server's 2 ms earlier.
                let shift = if p.from_client { 2_000_000 } else { -2_000_000 };
                let at = last_t + shift + (rng.next() % 100_000) as i64;
                downstream.push((at, spec));
                if p.from_client && rng.unit() < dup_p {
                    duplicated += 1;
                    downstream.push((at + 1_000, spec));
                }
            }
        }
        if f.queue.is_empty() && !f.done {
            if f.rounds_left == 0 {
                f.finish();
            } else {
                f.rounds_left -= 1;
                f.round(&mut rng, loss);
            }
        }
        if let Some(next) = f.queue.front() {
            heap.push(std::cmp::Reverse((next.t, i)));
        }
    }
    w.into_inner().into_inner().map_err(|e| e.into_error())?;
    eprintln!("wrote {written} packets in {nflows} flows to {out}");
    if let Some(path) = second {
        downstream.sort_by_key(|d| d.0);
        let file = std::fs::File::create(&path)?;
        let mut w = PcapWriter::new(BufWriter::with_capacity(1 << 20, file), 96)?;
        for (at, spec) in &downstream {
            w.segment(&SegSpec {
                ts_ns: *at,
                ..*spec
            })?;
        }
        w.into_inner().into_inner().map_err(|e| e.into_error())?;
        eprintln!(
            "wrote {} packets to {path}: dropped {dropped}, duplicated {duplicated}",
            downstream.len()
        );
    }
    Ok(())
}
