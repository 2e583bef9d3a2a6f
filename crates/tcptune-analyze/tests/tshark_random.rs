//! Differential test against tshark 4.0 on synthetic captures that exercise every rule: random
//! (seeded) conversations mixing new data, gaps, retransmissions, duplicate and partial ACKs,
//! window updates, zero windows with one-byte probes and their ACKs, keep-alives, ACKs of
//! unseen data, SYN retransmissions and port reuse, missing handshakes, window scaling on one
//! side only, and timestamps that go backwards. Every packet's flags must equal tshark's.

mod common;

use tcptune_wire::packet::flags::{ACK, FIN, RST, SYN};
use tcptune_wire::write::{PcapWriter, SegSpec};

/// xorshift64*: a tiny deterministic generator (the seed makes failures reproducible).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

struct Side {
    ip: [u8; 4],
    port: u16,
    isn: u32,
    nxt: u32,
    /// What this side last acknowledged of the peer, and its last window.
    ack: u32,
    win: u16,
}

fn syn_opts(ws: Option<u8>) -> Vec<u8> {
    let mut o = vec![2, 4, 0x05, 0xb4, 4, 2];
    if let Some(s) = ws {
        o.extend([1, 3, 3, s]);
    }
    o
}

fn scenario(rng: &mut Rng, w: &mut PcapWriter<Vec<u8>>, t: &mut i64, flow: u16) {
    let mut c = Side {
        ip: [10, 1, (flow >> 8) as u8, flow as u8],
        port: 20000 + flow,
        isn: rng.next() as u32,
        nxt: 0,
        ack: 0,
        win: 1000,
    };
    let mut s = Side {
        ip: [10, 2, 0, 1],
        port: 5001,
        isn: rng.next() as u32,
        nxt: 0,
        ack: 0,
        win: 2000,
    };
    c.nxt = c.isn;
    s.nxt = s.isn;
    let emit = |w: &mut PcapWriter<Vec<u8>>,
                t: &mut i64,
                rng: &mut Rng,
                from_client: bool,
                c: &Side,
                s: &Side,
                seq: u32,
                flags: u16,
                win: u16,
                ack: u32,
                len: u32,
                opts: &[u8]| {
        // Mostly forward in small steps (µs to tens of ms), sometimes a step back.
        *t += match rng.below(20) {
            0 => -(rng.below(2_000_000) as i64),
            1..=3 => rng.below(40_000_000) as i64,
            _ => rng.below(3_000_000) as i64,
        };
        let (a, b) = if from_client { (c, s) } else { (s, c) };
        w.segment(&SegSpec {
            ts_ns: *t,
            src: a.ip,
            dst: b.ip,
            sport: a.port,
            dport: b.port,
            seq,
            ack,
            flags,
            window: win,
            options: opts,
            payload_len: len,
            ip_id: 0,
        })
        .unwrap();
    };

    let handshake = rng.chance(85);
    let ws_c = rng.chance(70).then(|| rng.below(9) as u8);
    let ws_s = rng.chance(70).then(|| rng.below(9) as u8);
    if handshake {
        emit(
            w,
            t,
            rng,
            true,
            &c,
            &s,
            c.nxt,
            SYN,
            c.win,
            0,
            0,
            &syn_opts(ws_c),
        );
        if rng.chance(10) {
            emit(
                w,
                t,
                rng,
                true,
                &c,
                &s,
                c.nxt,
                SYN,
                c.win,
                0,
                0,
                &syn_opts(ws_c),
            );
        }
        c.nxt = c.nxt.wrapping_add(1);
        emit(
            w,
            t,
            rng,
            false,
            &c,
            &s,
            s.nxt,
            SYN | ACK,
            s.win,
            c.nxt,
            0,
            &syn_opts(ws_s),
        );
        s.nxt = s.nxt.wrapping_add(1);
        s.ack = c.nxt;
        c.ack = s.nxt;
        emit(w, t, rng, true, &c, &s, c.nxt, ACK, c.win, c.ack, 0, &[]);
    } else {
        c.nxt = c.nxt.wrapping_add(1);
        s.nxt = s.nxt.wrapping_add(1);
        s.ack = c.nxt;
        c.ack = s.nxt;
    }
    let wins = [0u16, 1, 3, 500, 2000, 65535];
    let lens = [1u32, 2, 100, 256, 512, 1448];
    for _ in 0..(20 + rng.below(80)) {
        match rng.below(100) {
            // New data from the client (sometimes exactly filling the server's window).
            0..=29 => {
                let len = if rng.chance(15) {
                    let shift = ws_s.filter(|_| ws_c.is_some()).unwrap_or(0);
                    let edge = s.ack.wrapping_add(u32::from(s.win) << shift);
                    edge.wrapping_sub(c.nxt).clamp(1, 60_000)
                } else {
                    lens[rng.below(lens.len() as u64) as usize]
                };
                emit(w, t, rng, true, &c, &s, c.nxt, ACK, c.win, c.ack, len, &[]);
                c.nxt = c.nxt.wrapping_add(len);
            }
            // A gap: data not captured.
            30..=32 => c.nxt = c.nxt.wrapping_add(lens[rng.below(6) as usize]),
            // A retransmission from somewhere at or after what the server acknowledged.
            33..=40 => {
                let back = c.nxt.wrapping_sub(s.ack);
                let from = s.ack.wrapping_add(if back > 0 {
                    rng.below(u64::from(back.min(5000))) as u32
                } else {
                    0
                });
                let len = lens[rng.below(6) as usize];
                let from = if rng.chance(20) {
                    s.ack.wrapping_sub(len)
                } else {
                    from
                };
                emit(w, t, rng, true, &c, &s, from, ACK, c.win, c.ack, len, &[]);
            }
            // The server ACKs (all, part, or a duplicate) with some window.
            41..=64 => {
                let ack = match rng.below(6) {
                    0 => s.ack,
                    1 => c.nxt.wrapping_add(rng.below(3000) as u32), // ACKs unseen data
                    2 => s.ack.wrapping_add((c.nxt.wrapping_sub(s.ack)) / 2),
                    _ => c.nxt,
                };
                let win = if rng.chance(70) {
                    s.win
                } else {
                    wins[rng.below(6) as usize]
                };
                s.ack = ack;
                s.win = win;
                emit(w, t, rng, false, &c, &s, s.nxt, ACK, win, ack, 0, &[]);
            }
            // Duplicate ACK runs.
            65..=72 => {
                for _ in 0..rng.below(4) + 1 {
                    emit(w, t, rng, false, &c, &s, s.nxt, ACK, s.win, s.ack, 0, &[]);
                }
            }
            // Zero window, probes and their ACKs.
            73..=77 => {
                s.win = 0;
                emit(w, t, rng, false, &c, &s, s.nxt, ACK, 0, s.ack, 0, &[]);
                for _ in 0..rng.below(3) + 1 {
                    emit(w, t, rng, true, &c, &s, c.nxt, ACK, c.win, c.ack, 1, &[]);
                    let ack = if rng.chance(30) {
                        c.nxt.wrapping_add(1)
                    } else {
                        s.ack
                    };
                    emit(w, t, rng, false, &c, &s, s.nxt, ACK, 0, ack, 0, &[]);
                }
            }
            // Keep-alives (0 or 1 byte at nxt-1) and their ACKs.
            78..=81 => {
                let len = rng.below(2) as u32;
                emit(
                    w,
                    t,
                    rng,
                    true,
                    &c,
                    &s,
                    c.nxt.wrapping_sub(1),
                    ACK,
                    c.win,
                    c.ack,
                    len,
                    &[],
                );
                emit(w, t, rng, false, &c, &s, s.nxt, ACK, s.win, s.ack, 0, &[]);
            }
            // Server data (so both directions have sequence state).
            82..=87 => {
                let len = lens[rng.below(6) as usize];
                emit(w, t, rng, false, &c, &s, s.nxt, ACK, s.win, s.ack, len, &[]);
                s.nxt = s.nxt.wrapping_add(len);
                if rng.chance(60) {
                    c.ack = s.nxt;
                    emit(w, t, rng, true, &c, &s, c.nxt, ACK, c.win, c.ack, 0, &[]);
                }
            }
            // Client window changes (window updates in the other direction).
            88..=90 => {
                c.win = wins[rng.below(6) as usize];
                emit(w, t, rng, true, &c, &s, c.nxt, ACK, c.win, c.ack, 0, &[]);
            }
            // A SYN on the same ports: new ISN (reuse) or the old one (retransmission).
            91..=92 => {
                let isn = if rng.chance(50) {
                    c.isn
                } else {
                    rng.next() as u32
                };
                emit(
                    w,
                    t,
                    rng,
                    true,
                    &c,
                    &s,
                    isn,
                    SYN,
                    c.win,
                    0,
                    0,
                    &syn_opts(ws_c),
                );
                if rng.chance(50) {
                    let sisn = if rng.chance(50) {
                        s.isn
                    } else {
                        rng.next() as u32
                    };
                    emit(
                        w,
                        t,
                        rng,
                        false,
                        &c,
                        &s,
                        sisn,
                        SYN | ACK,
                        s.win,
                        isn.wrapping_add(1),
                        0,
                        &syn_opts(ws_s),
                    );
                }
            }
            // FIN (and maybe its repetition) or RST.
            93..=96 => {
                emit(
                    w,
                    t,
                    rng,
                    true,
                    &c,
                    &s,
                    c.nxt,
                    FIN | ACK,
                    c.win,
                    c.ack,
                    0,
                    &[],
                );
                if rng.chance(30) {
                    emit(
                        w,
                        t,
                        rng,
                        true,
                        &c,
                        &s,
                        c.nxt,
                        FIN | ACK,
                        c.win,
                        c.ack,
                        0,
                        &[],
                    );
                }
                c.nxt = c.nxt.wrapping_add(1);
            }
            _ => {
                let seq = if rng.chance(50) {
                    s.nxt
                } else {
                    s.nxt.wrapping_add(rng.below(100) as u32)
                };
                emit(w, t, rng, false, &c, &s, seq, RST | ACK, 0, s.ack, 0, &[]);
            }
        }
    }
}

#[test]
fn flags_equal_tshark_on_random_conversations() {
    if let Some(why) = common::tshark_unusable() {
        tcptune_testkit::skip_without_tool("flags_equal_tshark_on_random_conversations", &why);
        return;
    }
    let dir = std::env::temp_dir().join(format!("tcptune-random-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut failures = Vec::new();
    let mut flagged = 0;
    for seed in [1u64, 2, 3, 4] {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed);
        let mut w = PcapWriter::new(Vec::new(), 96).unwrap();
        let mut t = 1_700_000_000_000_000_000i64;
        for flow in 0..150 {
            scenario(&mut rng, &mut w, &mut t, flow);
            t += 50_000_000;
        }
        let path = dir.join(format!("random-{seed}.pcap"));
        std::fs::write(&path, w.into_inner()).unwrap();
        let (mut diffs, n) = common::compare(&path);
        flagged += n;
        if !diffs.is_empty() {
            let total = diffs.len();
            diffs.truncate(30);
            failures.push(format!(
                "seed {seed} ({total} differences, file {}):\n  {}",
                path.display(),
                diffs.join("\n  ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "differences from tshark:\n{}",
        failures.join("\n")
    );
    assert!(
        flagged > 1000,
        "the scenarios should flag many packets, got {flagged}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
