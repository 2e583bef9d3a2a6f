//! The test parameters a client sends after PARAM_EXCHANGE, typed and checked.
//!
//! Every key iperf3 defines is type-checked before use and range-checked as iperf3's
//! `get_parameters()` does; a wrongly typed known key is an error (iperf3 before 3.18 crashed on
//! a non-string `title` or `congestion`: CVE-2024-53580). Unknown keys are ignored so newer
//! clients keep working.

use serde_json::{Map, Value};

/// iperf3's limits (`iperf.h`).
pub const MAX_TIME_S: u64 = 86_400;
/// Longest omit period, seconds (`-O`).
pub const MAX_OMIT_S: u64 = 600;
/// Largest TCP_MAXSEG, bytes (`-M`).
pub const MAX_MSS: u64 = 32 * 1024 - 1;
/// Most parallel streams (`-P`).
pub const MAX_STREAMS: u64 = 128;
/// Largest socket buffer, bytes (`-w`).
pub const MAX_TCP_BUFFER: u64 = 512 * 1024 * 1024;
/// Largest TCP block, bytes (`-l`).
pub const MAX_BLOCKSIZE: u64 = 1024 * 1024;
/// Smallest UDP datagram payload, bytes: the sequence number and the time stamp.
pub const MIN_UDP_BLOCKSIZE: u64 = 4 + 4 + 8;
/// Largest UDP datagram payload, bytes: what fits an IPv4 datagram.
pub const MAX_UDP_BLOCKSIZE: u64 = 65535 - 8 - 20;
/// Most packets per burst (`-b RATE/BURST`).
pub const MAX_BURST: u64 = 1000;
/// iperf3's default TCP block (`-l`): 128 KiB.
pub const DEFAULT_TCP_BLKSIZE: u32 = 128 * 1024;

/// Why a parameters object was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// A known key holds the wrong JSON type.
    #[error("parameter '{key}' must be {expected}")]
    WrongType {
        /// The key.
        key: &'static str,
        /// What it should be, e.g. "an integer".
        expected: &'static str,
    },
    /// A numeric key outside iperf3's limits.
    #[error("parameter '{key}' = {value} is outside {min}..={max}")]
    OutOfRange {
        /// The key.
        key: &'static str,
        /// The value as given.
        value: String,
        /// The lowest allowed.
        min: u64,
        /// The highest allowed.
        max: u64,
    },
    /// More than one of `tcp`, `udp`, `sctp` is set.
    #[error("more than one protocol (tcp, udp, sctp) was requested")]
    ProtocolConflict,
}

impl ParamError {
    /// The iperf3 `i_errno` a server reports for this error, so a stock client prints a
    /// message it knows.
    pub fn i_errno(&self) -> i32 {
        use crate::wire::i_errno;
        match self {
            ParamError::OutOfRange { key, .. } => match *key {
                "time" => i_errno::DURATION,
                "parallel" => i_errno::NUM_STREAMS,
                "len" => i_errno::BLOCK_SIZE,
                "window" => i_errno::BUF_SIZE,
                "MSS" => i_errno::MSS,
                "omit" => i_errno::OMIT,
                "burst" => i_errno::BURST,
                "TOS" => i_errno::BAD_TOS,
                _ => i_errno::RECV_PARAMS,
            },
            _ => i_errno::RECV_PARAMS,
        }
    }
}

/// Transport of the data streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// TCP streams.
    #[default]
    Tcp,
    /// UDP datagrams (`-u`).
    Udp,
    /// SCTP (`--sctp`): parsed so the server can refuse it by name.
    Sctp,
}

/// Who sends data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// The client sends (iperf3's default).
    #[default]
    Forward,
    /// The server sends (`-R`).
    Reverse,
    /// Both send, on separate streams (`--bidir`).
    Bidirectional,
}

/// The parameters of one test.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Transport of the data streams.
    pub protocol: Protocol,
    /// Who sends.
    pub direction: Direction,
    /// Seconds to omit at the start (`-O`).
    pub omit_s: u32,
    /// Duration in seconds (`-t`); 0 when bytes or blocks end the test.
    pub time_s: u32,
    /// Bytes to send (`-n`), 0 = unset.
    pub bytes: u64,
    /// Blocks to send (`-k`), 0 = unset.
    pub blocks: u64,
    /// Parallel streams (`-P`), per direction.
    pub parallel: u32,
    /// TCP_MAXSEG (`-M`).
    pub mss: Option<u32>,
    /// TCP_NODELAY on the data streams (`-N`).
    pub nodelay: bool,
    /// Multipath TCP (`-m`).
    pub mptcp: bool,
    /// SO_SNDBUF and SO_RCVBUF on both sides (`-w`), bytes.
    pub window: Option<u32>,
    /// Block length (`-l`), bytes.
    pub len: u32,
    /// Application pacing per stream (`-b`), bits/s.
    pub bandwidth_bps: Option<u64>,
    /// SO_MAX_PACING_RATE (`--fq-rate`), bits/s.
    pub fqrate_bps: Option<u64>,
    /// Pacing timer, µs.
    pub pacing_timer_us: Option<u64>,
    /// Packets per pacing burst (`-b RATE/BURST`).
    pub burst: Option<u32>,
    /// IP TOS / traffic class byte (`-S`).
    pub tos: Option<u8>,
    /// IPv6 flow label (`-L`).
    pub flowlabel: Option<u32>,
    /// CPU the server is asked to pin itself to (`--affinity N,M`).
    pub server_affinity: Option<u32>,
    /// A title prefixed to the output (`-T`).
    pub title: Option<String>,
    /// Free text carried into the JSON output (`--extra-data`).
    pub extra_data: Option<String>,
    /// TCP_CONGESTION requested (`-C`).
    pub congestion: Option<String>,
    /// The algorithm the client got, when it says so.
    pub congestion_used: Option<String>,
    /// Encrypted credentials (`--username` with an RSA key), carried as given.
    pub authtoken: Option<String>,
    /// The client wants the server's report in the results (`--get-server-output`).
    pub get_server_output: bool,
    /// UDP packet counters are 64-bit (`--udp-counters-64bit`).
    pub udp_counters_64bit: bool,
    /// Payload is a repeating pattern instead of random (`--repeating-payload`).
    pub repeating_payload: bool,
    /// The sender uses zero-copy sends (`-Z`).
    pub zerocopy: bool,
    /// Set the IP don't-fragment bit (`--dont-fragment`).
    pub dont_fragment: bool,
    /// The receiver discards data without copying it (`--skip-rx-copy`).
    pub skip_rx_copy: bool,
    /// The client's iperf3 version string, when sent.
    pub client_version: Option<String>,
}

impl Default for Params {
    /// What `iperf3 -c HOST` asks for.
    fn default() -> Self {
        Params {
            protocol: Protocol::Tcp,
            direction: Direction::Forward,
            omit_s: 0,
            time_s: 10,
            bytes: 0,
            blocks: 0,
            parallel: 1,
            mss: None,
            nodelay: false,
            mptcp: false,
            window: None,
            len: DEFAULT_TCP_BLKSIZE,
            bandwidth_bps: None,
            fqrate_bps: None,
            pacing_timer_us: Some(1000),
            burst: None,
            tos: None,
            flowlabel: None,
            server_affinity: None,
            title: None,
            extra_data: None,
            congestion: None,
            congestion_used: None,
            authtoken: None,
            get_server_output: false,
            udp_counters_64bit: false,
            repeating_payload: false,
            zerocopy: false,
            dont_fragment: false,
            skip_rx_copy: false,
            client_version: None,
        }
    }
}

/// A flag iperf3 sends as `true` (absent or `false`: not set).
fn flag(m: &Map<String, Value>, key: &'static str) -> Result<bool, ParamError> {
    match m.get(key) {
        None | Some(Value::Bool(false)) => Ok(false),
        Some(Value::Bool(true)) => Ok(true),
        Some(_) => Err(ParamError::WrongType {
            key,
            expected: "true or false",
        }),
    }
}

/// A flag iperf3 sends as a number (any non-zero sets it).
fn number_flag(m: &Map<String, Value>, key: &'static str) -> Result<bool, ParamError> {
    match m.get(key) {
        None => Ok(false),
        Some(Value::Number(n)) => Ok(n.as_f64().is_some_and(|v| v != 0.0)),
        Some(_) => Err(ParamError::WrongType {
            key,
            expected: "a number",
        }),
    }
}

/// A whole number in [min, max], or absent.
fn int(
    m: &Map<String, Value>,
    key: &'static str,
    min: u64,
    max: u64,
) -> Result<Option<u64>, ParamError> {
    let Some(v) = m.get(key) else {
        return Ok(None);
    };
    let n = v.as_f64().ok_or(ParamError::WrongType {
        key,
        expected: "a number",
    })?;
    if n.fract() != 0.0 || n < min as f64 || n > max as f64 {
        return Err(ParamError::OutOfRange {
            key,
            value: v.to_string(),
            min,
            max,
        });
    }
    Ok(Some(n as u64))
}

/// `int` narrowed to u32 (every caller's max fits).
fn int32(
    m: &Map<String, Value>,
    key: &'static str,
    min: u64,
    max: u64,
) -> Result<Option<u32>, ParamError> {
    Ok(int(m, key, min, max.min(u32::MAX as u64))?.map(|v| v as u32))
}

fn string(m: &Map<String, Value>, key: &'static str) -> Result<Option<String>, ParamError> {
    match m.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ParamError::WrongType {
            key,
            expected: "a string",
        }),
    }
}

impl Params {
    /// The bytes that end the test, all sending streams together: `-n`, or `-k` blocks of
    /// `-l` bytes; `None` for a timed test.
    pub fn byte_limit(&self) -> Option<u64> {
        if self.bytes > 0 {
            Some(self.bytes)
        } else if self.blocks > 0 {
            Some(self.blocks.saturating_mul(self.len as u64))
        } else {
            None
        }
    }

    /// Reads and checks a parameters object.
    pub fn from_json(m: &Map<String, Value>) -> Result<Params, ParamError> {
        let d = Params::default();
        let protocols = [
            (flag(m, "tcp")?, Protocol::Tcp),
            (flag(m, "udp")?, Protocol::Udp),
            (flag(m, "sctp")?, Protocol::Sctp),
        ];
        let mut chosen = protocols.iter().filter(|(on, _)| *on).map(|(_, p)| *p);
        let protocol = chosen.next().unwrap_or(Protocol::Tcp);
        if chosen.next().is_some() {
            return Err(ParamError::ProtocolConflict);
        }
        let reverse = flag(m, "reverse")?;
        let bidirectional = flag(m, "bidirectional")?;
        let len_max = match protocol {
            Protocol::Udp => MAX_UDP_BLOCKSIZE,
            _ => MAX_BLOCKSIZE,
        };
        let len_min = match protocol {
            Protocol::Udp => MIN_UDP_BLOCKSIZE,
            _ => 1,
        };
        // UDP-only keys are checked for type and sign, then not used (TCP only for now).
        for key in ["gso", "gso_dg_size", "gso_bf_size", "gro_bf_size"] {
            int(m, key, 0, u32::MAX as u64)?;
        }
        int(m, "gro", 0, 1)?;
        Ok(Params {
            protocol,
            direction: match (bidirectional, reverse) {
                (true, _) => Direction::Bidirectional,
                (false, true) => Direction::Reverse,
                (false, false) => Direction::Forward,
            },
            omit_s: int32(m, "omit", 0, MAX_OMIT_S)?.unwrap_or(d.omit_s),
            time_s: int32(m, "time", 0, MAX_TIME_S)?.unwrap_or(d.time_s),
            bytes: int(m, "num", 0, u64::MAX >> 11)?.unwrap_or(0),
            blocks: int(m, "blockcount", 0, u64::MAX >> 11)?.unwrap_or(0),
            parallel: int32(m, "parallel", 1, MAX_STREAMS)?.unwrap_or(d.parallel),
            mss: int32(m, "MSS", 0, MAX_MSS)?.filter(|&v| v > 0),
            nodelay: flag(m, "nodelay")?,
            mptcp: flag(m, "mptcp")?,
            window: int32(m, "window", 0, MAX_TCP_BUFFER)?.filter(|&v| v > 0),
            len: int32(m, "len", len_min, len_max)?.unwrap_or(match protocol {
                Protocol::Udp => 1460,
                _ => DEFAULT_TCP_BLKSIZE,
            }),
            bandwidth_bps: int(m, "bandwidth", 0, u64::MAX >> 11)?.filter(|&v| v > 0),
            fqrate_bps: int(m, "fqrate", 0, u64::MAX >> 11)?.filter(|&v| v > 0),
            pacing_timer_us: int(m, "pacing_timer", 0, u32::MAX as u64)?,
            burst: int32(m, "burst", 1, MAX_BURST)?,
            tos: int32(m, "TOS", 0, 255)?.map(|v| v as u8),
            flowlabel: int32(m, "flowlabel", 1, 0xfffff)?,
            server_affinity: int32(m, "server_affinity", 0, 1024)?,
            title: string(m, "title")?,
            extra_data: string(m, "extra_data")?,
            congestion: string(m, "congestion")?,
            congestion_used: string(m, "congestion_used")?,
            authtoken: string(m, "authtoken")?,
            get_server_output: number_flag(m, "get_server_output")?,
            udp_counters_64bit: number_flag(m, "udp_counters_64bit")?,
            repeating_payload: number_flag(m, "repeating_payload")?,
            zerocopy: number_flag(m, "zerocopy")?,
            dont_fragment: number_flag(m, "dont_fragment")?,
            skip_rx_copy: number_flag(m, "skip_rx_copy")?,
            client_version: string(m, "client_version")?,
        })
    }

    /// The parameters object as iperf3's `send_parameters()` writes it.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_string(), v);
        };
        put(
            match self.protocol {
                Protocol::Tcp => "tcp",
                Protocol::Udp => "udp",
                Protocol::Sctp => "sctp",
            },
            Value::Bool(true),
        );
        put("omit", self.omit_s.into());
        if let Some(a) = self.server_affinity {
            put("server_affinity", a.into());
        }
        put("time", self.time_s.into());
        put("num", self.bytes.into());
        put("blockcount", self.blocks.into());
        if let Some(mss) = self.mss {
            put("MSS", mss.into());
        }
        if self.nodelay {
            put("nodelay", Value::Bool(true));
        }
        put("parallel", self.parallel.into());
        match self.direction {
            Direction::Forward => {}
            Direction::Reverse => put("reverse", Value::Bool(true)),
            Direction::Bidirectional => put("bidirectional", Value::Bool(true)),
        }
        if self.mptcp {
            put("mptcp", Value::Bool(true));
        }
        if let Some(w) = self.window {
            put("window", w.into());
        }
        put("len", self.len.into());
        for (k, v) in [
            ("bandwidth", self.bandwidth_bps),
            ("fqrate", self.fqrate_bps),
            ("pacing_timer", self.pacing_timer_us),
        ] {
            if let Some(v) = v {
                put(k, v.into());
            }
        }
        for (k, v) in [
            ("burst", self.burst),
            ("TOS", self.tos.map(u32::from)),
            ("flowlabel", self.flowlabel),
        ] {
            if let Some(v) = v {
                put(k, v.into());
            }
        }
        for (k, v) in [
            ("title", &self.title),
            ("extra_data", &self.extra_data),
            ("congestion", &self.congestion),
            ("congestion_used", &self.congestion_used),
        ] {
            if let Some(v) = v {
                put(k, Value::String(v.clone()));
            }
        }
        for (k, on) in [
            ("get_server_output", self.get_server_output),
            ("udp_counters_64bit", self.udp_counters_64bit),
            ("repeating_payload", self.repeating_payload),
            ("zerocopy", self.zerocopy),
            ("dont_fragment", self.dont_fragment),
        ] {
            if on {
                put(k, 1.into());
            }
        }
        if let Some(t) = &self.authtoken {
            put("authtoken", Value::String(t.clone()));
        }
        if self.skip_rx_copy {
            put("skip_rx_copy", 1.into());
        }
        if let Some(v) = &self.client_version {
            put("client_version", Value::String(v.clone()));
        }
        Value::Object(m)
    }

    /// Data connections the client opens: `parallel`, twice that in bidirectional mode.
    pub fn data_streams(&self) -> u32 {
        match self.direction {
            Direction::Bidirectional => self.parallel * 2,
            _ => self.parallel,
        }
    }

    /// How many of the data connections, in accept order, the server receives on (iperf3
    /// assigns roles purely by accept order: its receiving streams first).
    pub fn server_receiving_streams(&self) -> u32 {
        match self.direction {
            Direction::Forward | Direction::Bidirectional => self.parallel,
            Direction::Reverse => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<Params, ParamError> {
        Params::from_json(v.as_object().unwrap())
    }

    #[test]
    fn what_a_stock_client_sends() {
        // The shape of iperf3 3.12's `iperf3 -c H -P 4 -R -w 1M -C bbr -t 5`.
        let p = parse(json!({
            "tcp": true, "omit": 0, "time": 5, "num": 0, "blockcount": 0, "parallel": 4,
            "reverse": true, "window": 1048576, "len": 131072, "pacing_timer": 1000,
            "congestion": "bbr", "client_version": "3.12"
        }))
        .unwrap();
        assert_eq!(p.protocol, Protocol::Tcp);
        assert_eq!(p.direction, Direction::Reverse);
        assert_eq!((p.time_s, p.parallel, p.window), (5, 4, Some(1 << 20)));
        assert_eq!(p.congestion.as_deref(), Some("bbr"));
        assert_eq!(p.data_streams(), 4);
        assert_eq!(p.server_receiving_streams(), 0);
        // And back: the JSON we send parses to the same parameters.
        assert_eq!(Params::from_json(p.to_json().as_object().unwrap()), Ok(p));
    }

    #[test]
    fn bidirectional_and_defaults() {
        let p = parse(json!({"bidirectional": true, "parallel": 3})).unwrap();
        assert_eq!(p.data_streams(), 6);
        assert_eq!(p.server_receiving_streams(), 3);
        assert_eq!(p.time_s, 10);
        assert_eq!(p.len, DEFAULT_TCP_BLKSIZE);
        let d = Params::default();
        assert_eq!(parse(d.to_json()), Ok(d));
    }

    #[test]
    fn cve_2024_53580_wrong_types_are_errors_not_crashes() {
        for bad in [
            json!({"title": 5}),
            json!({"congestion": null}),
            json!({"authtoken": ["x"]}),
            json!({"extra_data": {}}),
            json!({"time": "10"}),
            json!({"parallel": true}),
            json!({"reverse": 1}),
            json!({"tcp": "yes"}),
            json!({"get_server_output": true}),
            json!({"gso": "1"}),
        ] {
            let e = parse(bad.clone()).unwrap_err();
            assert!(matches!(e, ParamError::WrongType { .. }), "{bad}: {e}");
            assert_eq!(e.i_errno(), crate::wire::i_errno::RECV_PARAMS);
        }
    }

    #[test]
    fn ranges_match_iperf3() {
        for (bad, errno) in [
            (json!({"time": 86401}), 5),
            (json!({"time": -1}), 5),
            (json!({"parallel": 0}), 6),
            (json!({"parallel": 129}), 6),
            (json!({"len": 0}), 7),
            (json!({"len": 1048577}), 7),
            (json!({"window": 536870913u64}), 8),
            (json!({"MSS": 32768}), 10),
            (json!({"omit": 601}), 12),
            (json!({"burst": 0}), 15),
            (json!({"TOS": 256}), 21),
            (json!({"time": 1.5}), 5),
            (json!({"num": -5}), 114),
        ] {
            let e = parse(bad.clone()).unwrap_err();
            assert!(matches!(e, ParamError::OutOfRange { .. }), "{bad}: {e}");
            assert_eq!(e.i_errno(), errno, "{bad}");
        }
        assert_eq!(
            parse(json!({"tcp": true, "udp": true})),
            Err(ParamError::ProtocolConflict)
        );
        // Unknown keys are ignored; 1e9 written in exponent form is a whole number.
        let p = parse(json!({"future_option": [1, 2], "bandwidth": 1e9})).unwrap();
        assert_eq!(p.bandwidth_bps, Some(1_000_000_000));
        let p = parse(json!({"udp": true, "len": 1460, "gro": 1})).unwrap();
        assert_eq!(p.protocol, Protocol::Udp);
        assert!(parse(json!({"udp": true, "len": 8})).is_err());
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            any::<i64>().prop_map(|i| json!(i)),
            "\\PC{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::hash_map("[a-z]{1,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_value_under_any_known_key_is_checked_not_trusted(
            key in prop::sample::select(vec![
                "tcp", "udp", "omit", "time", "num", "blockcount", "MSS", "nodelay", "parallel",
                "reverse", "bidirectional", "window", "len", "bandwidth", "fqrate", "burst", "TOS",
                "flowlabel", "title", "congestion", "authtoken", "get_server_output", "zerocopy",
                "client_version", "gso", "gro",
            ]),
            value in arb_json(),
        ) {
            let mut m = Map::new();
            m.insert(key.to_string(), value);
            if let Ok(p) = Params::from_json(&m) {
                // Whatever was accepted is within iperf3's limits and survives a round trip.
                prop_assert!(p.parallel >= 1 && p.parallel as u64 <= MAX_STREAMS);
                prop_assert!(p.time_s as u64 <= MAX_TIME_S);
                prop_assert_eq!(Params::from_json(p.to_json().as_object().unwrap()), Ok(p));
            }
        }
    }
}
