//! The result of `tcptune analyze`: per-flow flags, statistics and diagnosis, with its JSON
//! shape (field names carry units) and its text rendering; [`Finished`] is the report with each
//! flow's graph series.

use std::fmt;

use schemars::JsonSchema;
use serde::Serialize;
use tcptune_model::{Bytes, Dur, Rate};

use crate::series::FlowSeries;
use crate::wireshark::Flags;

/// How many packets carry each Wireshark analysis flag (`tcp.analysis.<name>`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct FlagCounts {
    /// Packets matching `tcp.analysis.retransmission`: plain, fast and spurious together (as
    /// Wireshark's filter and expert summary count them).
    pub retransmission: u64,
    /// Retransmissions that are neither fast nor spurious (timeouts, mostly).
    pub plain_retransmission: u64,
    /// Packets matching `tcp.analysis.fast_retransmission`.
    pub fast_retransmission: u64,
    /// Packets matching `tcp.analysis.spurious_retransmission`.
    pub spurious_retransmission: u64,
    /// Packets matching `tcp.analysis.out_of_order`.
    pub out_of_order: u64,
    /// "Previous segment not captured".
    pub lost_segment: u64,
    /// "ACKed segment that wasn't captured".
    pub ack_lost_segment: u64,
    /// Packets matching `tcp.analysis.duplicate_ack`.
    pub duplicate_ack: u64,
    /// Packets matching `tcp.analysis.zero_window`.
    pub zero_window: u64,
    /// Packets matching `tcp.analysis.zero_window_probe`.
    pub zero_window_probe: u64,
    /// Packets matching `tcp.analysis.zero_window_probe_ack`.
    pub zero_window_probe_ack: u64,
    /// Packets matching `tcp.analysis.window_full`.
    pub window_full: u64,
    /// Packets matching `tcp.analysis.window_update`.
    pub window_update: u64,
    /// Packets matching `tcp.analysis.keep_alive`.
    pub keep_alive: u64,
    /// Packets matching `tcp.analysis.keep_alive_ack`.
    pub keep_alive_ack: u64,
    /// Packets matching `tcp.analysis.reused_ports`.
    pub reused_ports: u64,
}

impl FlagCounts {
    /// Counts one packet's flags.
    pub fn add(&mut self, f: Flags) {
        if f.is_empty() {
            return;
        }
        let c = |bit: u16| u64::from(f.has(bit));
        self.retransmission += u64::from(f.any_retransmission());
        self.plain_retransmission += c(Flags::RETRANSMISSION);
        self.fast_retransmission += c(Flags::FAST_RETRANSMISSION);
        self.spurious_retransmission += c(Flags::SPURIOUS_RETRANSMISSION);
        self.out_of_order += c(Flags::OUT_OF_ORDER);
        self.lost_segment += c(Flags::LOST_PACKET);
        self.ack_lost_segment += c(Flags::ACK_LOST_PACKET);
        self.duplicate_ack += c(Flags::DUPLICATE_ACK);
        self.zero_window += c(Flags::ZERO_WINDOW);
        self.zero_window_probe += c(Flags::ZERO_WINDOW_PROBE);
        self.zero_window_probe_ack += c(Flags::ZERO_WINDOW_PROBE_ACK);
        self.window_full += c(Flags::WINDOW_FULL);
        self.window_update += c(Flags::WINDOW_UPDATE);
        self.keep_alive += c(Flags::KEEP_ALIVE);
        self.keep_alive_ack += c(Flags::KEEP_ALIVE_ACK);
        self.reused_ports += c(Flags::REUSED_PORTS);
    }

    /// Adds another set of counts (flows into a capture's total).
    pub fn merge(&mut self, o: &FlagCounts) {
        for (a, b) in self.as_mut_array().into_iter().zip(o.as_array()) {
            *a += b;
        }
    }

    /// (display-filter name, count) for every flag, `retransmission` being the inclusive one.
    pub fn named(&self) -> [(&'static str, u64); 15] {
        [
            ("retransmission", self.retransmission),
            ("fast_retransmission", self.fast_retransmission),
            ("spurious_retransmission", self.spurious_retransmission),
            ("out_of_order", self.out_of_order),
            ("lost_segment", self.lost_segment),
            ("ack_lost_segment", self.ack_lost_segment),
            ("duplicate_ack", self.duplicate_ack),
            ("zero_window", self.zero_window),
            ("zero_window_probe", self.zero_window_probe),
            ("zero_window_probe_ack", self.zero_window_probe_ack),
            ("window_full", self.window_full),
            ("window_update", self.window_update),
            ("keep_alive", self.keep_alive),
            ("keep_alive_ack", self.keep_alive_ack),
            ("reused_ports", self.reused_ports),
        ]
    }

    fn as_array(&self) -> [u64; 16] {
        [
            self.retransmission,
            self.plain_retransmission,
            self.fast_retransmission,
            self.spurious_retransmission,
            self.out_of_order,
            self.lost_segment,
            self.ack_lost_segment,
            self.duplicate_ack,
            self.zero_window,
            self.zero_window_probe,
            self.zero_window_probe_ack,
            self.window_full,
            self.window_update,
            self.keep_alive,
            self.keep_alive_ack,
            self.reused_ports,
        ]
    }

    fn as_mut_array(&mut self) -> [&mut u64; 16] {
        [
            &mut self.retransmission,
            &mut self.plain_retransmission,
            &mut self.fast_retransmission,
            &mut self.spurious_retransmission,
            &mut self.out_of_order,
            &mut self.lost_segment,
            &mut self.ack_lost_segment,
            &mut self.duplicate_ack,
            &mut self.zero_window,
            &mut self.zero_window_probe,
            &mut self.zero_window_probe_ack,
            &mut self.window_full,
            &mut self.window_update,
            &mut self.keep_alive,
            &mut self.keep_alive_ack,
            &mut self.reused_ports,
        ]
    }

    /// Flags counted over all names (a packet with two flags counts twice).
    pub fn total(&self) -> u64 {
        self.named().iter().map(|(_, n)| n).sum()
    }
}

/// Options offered in a direction's SYN.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SynOptions {
    /// MSS option, bytes.
    pub mss: Option<u16>,
    /// Window scale shift as sent.
    pub window_scale: Option<u8>,
    /// SACK-permitted was offered.
    pub sack_permitted: bool,
    /// Timestamps were offered.
    pub timestamps: bool,
}

/// Min/mean/max/stdev of RTT samples, seconds.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
pub struct RttStats {
    /// RTT samples taken.
    pub samples: u64,
    /// Smallest RTT, seconds.
    pub min_s: Dur,
    /// Mean RTT, seconds.
    pub mean_s: Dur,
    /// Largest RTT, seconds.
    pub max_s: Dur,
    /// Standard deviation, seconds.
    pub stdev_s: Dur,
}

/// Advertised receive window (scaled, as Wireshark shows it), bytes.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
pub struct WindowStats {
    /// Smallest scaled window advertised, bytes.
    pub min_bytes: Bytes,
    /// Mean scaled window, bytes.
    pub mean_bytes: Bytes,
    /// Largest scaled window, bytes.
    pub max_bytes: Bytes,
    /// Packets advertising a zero window.
    pub zero_windows: u64,
}

/// tcptrace-style statistics for the packets one endpoint sent.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DirStats {
    /// Packets sent in this direction.
    pub packets: u64,
    /// Packets carrying payload.
    pub data_packets: u64,
    /// Payload bytes, retransmissions included.
    pub data_bytes: Bytes,
    /// Packets with ACK and nothing else (no payload, SYN, FIN or RST).
    pub pure_acks: u64,
    /// Packets with SYN set.
    pub syn: u64,
    /// Packets with FIN set.
    pub fin: u64,
    /// Packets with RST set.
    pub rst: u64,
    /// Payload bytes above the highest sequence number sent before (new data).
    pub unique_bytes: Bytes,
    /// Packets repeating bytes already sent (any overlap).
    pub retransmitted_packets: u64,
    /// Payload bytes of those packets.
    pub retransmitted_bytes: Bytes,
    /// Largest payload, bytes.
    pub max_segment_bytes: u32,
    /// What this direction's SYN offered, when the handshake was captured.
    pub syn_options: Option<SynOptions>,
    /// The receive window this direction advertised (scaled when the scale is known).
    pub window: Option<WindowStats>,
    /// RTT of this direction's data, by Karn's rule from the peer's ACKs.
    pub rtt: Option<RttStats>,
    /// Unique bytes over the flow's duration (tcptrace's throughput).
    pub throughput_bps: Rate,
    /// Longest gap between two packets of this direction.
    pub max_idle_s: Dur,
    /// Largest amount of data sent and not yet acknowledged, bytes.
    pub max_in_flight_bytes: Bytes,
    /// Wireshark flags on this direction's packets.
    pub flags: FlagCounts,
    /// What became of its "previous segment not captured" holes.
    pub gaps: GapCounts,
}

/// The holes Wireshark flags as "previous segment not captured", by what became of them. A hole
/// filled later in the capture was lost or reordered upstream of the capture point; from one
/// capture point a quick retransmission cannot always be told from a late original (Wireshark
/// calls both "out of order" within an RTT), so the two are counted together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct GapCounts {
    /// Filled later by any segment: the packet was lost (or delayed) upstream of the capture.
    pub filled_later: u64,
    /// Of which by segments Wireshark flags as retransmissions.
    pub filled_by_retransmission: u64,
    /// Never filled in the capture: dropped by the capture point or its buffer, or before the
    /// capture began.
    pub never_filled: u64,
}

/// One TCP conversation (Wireshark's `tcp.stream`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FlowReport {
    /// Wireshark's `tcp.stream` number (0-based, in order of first appearance).
    pub stream: u32,
    /// Endpoint that sent the first packet seen, "address:port".
    pub a: String,
    /// The other endpoint, "address:port".
    pub b: String,
    /// Which endpoint sent a pure SYN first ("a" or "b"), if any was captured.
    pub client: Option<String>,
    /// Start relative to the first packet of the capture.
    pub start_s: Dur,
    /// From the first to the last packet of the flow, seconds.
    pub duration_s: Dur,
    /// Packets of both directions.
    pub packets: u64,
    /// SYN to first ACK, when the handshake was captured (Wireshark's iRTT).
    pub initial_rtt_s: Option<Dur>,
    /// Flags on both directions' packets.
    pub flags: FlagCounts,
    /// Data sent by a and the window b advertised for it.
    pub a_to_b: DirStats,
    /// Data sent by b and the window a advertised for it.
    pub b_to_a: DirStats,
    /// Short findings from the capture alone, most important first.
    pub diagnosis: Vec<String>,
}

/// One flagged packet and why (with `--packets`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FlaggedPacket {
    /// Frame number in the file (1-based, as Wireshark numbers them).
    pub frame: u64,
    /// The flow's `tcp.stream` number.
    pub stream: u32,
    /// Time since the first packet of the capture.
    pub time_s: Dur,
    /// "a_to_b" or "b_to_a".
    pub direction: String,
    /// Flag names as in `tcp.analysis.<name>`.
    pub flags: Vec<String>,
    /// `tcp.analysis.duplicate_ack_num`.
    pub duplicate_ack_num: Option<u32>,
    /// The rule(s) that fired, with the numbers they compared.
    pub why: String,
}

/// Frames that were read but not analysed, by reason.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct Skipped {
    /// Not IP or not TCP.
    pub not_tcp: u64,
    /// IP fragments (not reassembled).
    pub fragments: u64,
    /// Headers cut short or malformed.
    pub malformed: u64,
    /// Frames on link types tcptune does not decode.
    pub unsupported_link: u64,
    /// Which link types those were, with their frames.
    pub unsupported_link_types: Vec<UnsupportedLink>,
    /// TCP segments whose IP length is shorter than their TCP header, or whose header length is
    /// below 20 bytes: counted in their flow but not analysed (as Wireshark does).
    pub not_analysed: u64,
}

/// A link type tcptune does not decode, and how many frames used it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct UnsupportedLink {
    /// LINKTYPE_* number from the pcap registry.
    pub link_type: u32,
    /// Its name, when known ("FDDI"), else "link type N".
    pub name: String,
    /// Frames with that link type.
    pub frames: u64,
}

/// The whole analysis of a capture.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AnalyzeReport {
    /// The input as given ("-" for standard input).
    pub input: String,
    /// "pcap" or "pcapng".
    pub format: String,
    /// Whose rules the flags follow: "wireshark-4.0".
    pub profile: String,
    /// Frames read.
    pub frames: u64,
    /// Frames that decoded to a TCP segment.
    pub tcp_segments: u64,
    /// Frames left out, by reason.
    pub skipped: Skipped,
    /// Set when the file is damaged: what stopped the reading. The result covers the frames
    /// before it.
    pub capture_problem: Option<String>,
    /// How the file was read where that is worth knowing: decompressed from gzip, lengths of
    /// an old pcap swapped back, records that took frame numbers without carrying packets.
    pub capture_notes: Vec<String>,
    /// Time from the first to the last frame.
    pub duration_s: Dur,
    /// Flags over all flows.
    pub flags: FlagCounts,
    /// Each conversation, in `tcp.stream` order.
    pub flows: Vec<FlowReport>,
    /// Flagged packets (only with `--packets`).
    pub packets: Option<Vec<FlaggedPacket>>,
}

impl AnalyzeReport {
    /// True when the capture shows something worth acting on (loss, zero window, window full,
    /// reordering) — the binary exits 1 then.
    pub fn found_problem(&self) -> bool {
        let f = &self.flags;
        f.retransmission + f.zero_window + f.window_full + f.out_of_order > 0
    }

    /// Why nothing in the capture could be analysed, when that is so: no complete frame could
    /// be read, or every frame was on a link type tcptune does not decode. The binary exits 2
    /// then (a report of nothing would pass for a clean capture). A capture that is read but
    /// holds no TCP (UDP only, or just a header) is a valid, empty result, not this.
    pub fn unusable(&self) -> Option<String> {
        if self.frames == 0 {
            return self
                .capture_problem
                .as_ref()
                .map(|p| format!("no frame could be read: {p}"));
        }
        let s = &self.skipped;
        if self.tcp_segments == 0 && s.unsupported_link == self.frames {
            let names: Vec<String> = s
                .unsupported_link_types
                .iter()
                .map(|l| l.name.clone())
                .collect();
            return Some(format!(
                "all {} frames are on a link type tcptune does not decode ({})",
                self.frames,
                names.join(", ")
            ));
        }
        None
    }
}

fn fmt_rate(r: Rate) -> String {
    r.to_string()
}

/// Bytes in four significant digits with a decimal prefix ("41.45 kB"), for the text report.
fn short(b: Bytes) -> String {
    b.decimal(4)
}

impl fmt::Display for AnalyzeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} {} frames, {} TCP segments in {} flows over {} (flags: {} rules)",
            self.input,
            self.format,
            self.frames,
            self.tcp_segments,
            self.flows.len(),
            self.duration_s,
            self.profile
        )?;
        if let Some(p) = &self.capture_problem {
            writeln!(f, "  warning: {p}")?;
        }
        for n in &self.capture_notes {
            writeln!(f, "  note: {n}")?;
        }
        let s = &self.skipped;
        let skipped = s.not_tcp + s.fragments + s.malformed + s.unsupported_link;
        if skipped + s.not_analysed > 0 {
            let links = if s.unsupported_link_types.is_empty() {
                String::new()
            } else {
                let each: Vec<String> = s
                    .unsupported_link_types
                    .iter()
                    .map(|l| format!("{} {}", l.frames, l.name))
                    .collect();
                format!(" ({})", each.join(", "))
            };
            writeln!(
                f,
                "  skipped: {} not TCP, {} IP fragments, {} malformed, {} on unsupported links{links}; \
                 {} TCP segments not analysed (short or bogus header)",
                s.not_tcp, s.fragments, s.malformed, s.unsupported_link, s.not_analysed
            )?;
        }
        write_flags(f, "  flags:", &self.flags)?;
        for fl in &self.flows {
            writeln!(f)?;
            writeln!(
                f,
                "stream {}  {} <-> {}  {} packets, {} from +{}{}",
                fl.stream,
                fl.a,
                fl.b,
                fl.packets,
                fl.duration_s,
                fl.start_s,
                fl.initial_rtt_s
                    .map(|r| format!(", iRTT {r}"))
                    .unwrap_or_default()
            )?;
            write_flags(f, "  flags:", &fl.flags)?;
            for (name, d) in [("a->b", &fl.a_to_b), ("b->a", &fl.b_to_a)] {
                writeln!(
                    f,
                    "  {name}  {} packets ({} data, {} pure ACKs, {} SYN, {} FIN, {} RST); data {}, \
                     unique {}, retransmitted {} packets / {}",
                    d.packets,
                    d.data_packets,
                    d.pure_acks,
                    d.syn,
                    d.fin,
                    d.rst,
                    short(d.data_bytes),
                    short(d.unique_bytes),
                    d.retransmitted_packets,
                    short(d.retransmitted_bytes)
                )?;
                writeln!(
                    f,
                    "        throughput {}, max idle {}, max in flight {}",
                    fmt_rate(d.throughput_bps),
                    d.max_idle_s,
                    short(d.max_in_flight_bytes)
                )?;
                if let Some(w) = &d.window {
                    writeln!(
                        f,
                        "        advertises a receive window of {}..{} (mean {}), zero {} times",
                        short(w.min_bytes),
                        short(w.max_bytes),
                        short(w.mean_bytes),
                        w.zero_windows
                    )?;
                }
                if let Some(r) = &d.rtt {
                    writeln!(
                        f,
                        "        RTT min {} mean {} max {} stdev {} ({} samples, Karn)",
                        r.min_s, r.mean_s, r.max_s, r.stdev_s, r.samples
                    )?;
                }
                if let Some(o) = &d.syn_options {
                    let mut opts = vec![
                        format!("MSS {}", o.mss.map(|m| m.to_string()).unwrap_or("-".into())),
                        format!(
                            "window scale {}",
                            o.window_scale.map(|m| m.to_string()).unwrap_or("-".into())
                        ),
                    ];
                    if o.sack_permitted {
                        opts.push("SACK".into());
                    }
                    if o.timestamps {
                        opts.push("timestamps".into());
                    }
                    writeln!(f, "        SYN options: {}", opts.join(", "))?;
                }
            }
            for d in &fl.diagnosis {
                writeln!(f, "  - {d}")?;
            }
        }
        if let Some(pk) = &self.packets {
            writeln!(f)?;
            writeln!(f, "flagged packets ({}):", pk.len())?;
            for p in pk {
                writeln!(
                    f,
                    "  #{} stream {} +{} {} [{}] {}",
                    p.frame,
                    p.stream,
                    p.time_s,
                    p.direction,
                    p.flags.join(","),
                    p.why
                )?;
            }
        }
        Ok(())
    }
}

fn write_flags(f: &mut fmt::Formatter<'_>, lead: &str, c: &FlagCounts) -> fmt::Result {
    let parts: Vec<String> = c
        .named()
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    if parts.is_empty() {
        writeln!(f, "{lead} none")
    } else {
        writeln!(f, "{lead} {}", parts.join(", "))
    }
}

/// A finished analysis: the report and, with `Options::series`, each flow's graph series.
pub struct Finished {
    /// The report, as `--json` prints it.
    pub report: AnalyzeReport,
    /// (stream number, series), in stream order.
    pub series: Vec<(u32, Box<FlowSeries>)>,
    /// Time of the first frame, ns since the epoch (graphs start their clock here).
    pub capture_start_ns: i64,
}
