//! Socket filters in the spirit of `ss`: `state established`, `dport 443`, `sport :5201`,
//! `port 1000-2000`, `dst 198.18.0.0/24`, `src [2001:2::1]:80`, `addr 198.18.0.2`, `ipv4`.
//!
//! Different keys must all hold; the same key given twice means either (`dport 80 dport 443`).
//! A filter becomes (1) the `idiag_states` bitmask and (2) an `INET_DIAG_REQ_BYTECODE` program,
//! so the kernel skips unwanted sockets before copying their `tcp_info` (much cheaper than
//! filtering afterwards), and (3) an equivalent matcher in user space for messages the kernel
//! cannot filter (destroy events). The bytecode follows the kernel's `inet_diag_bc_run`: each
//! op `{code, yes, no}` jumps `yes` bytes when its condition holds and `no` otherwise; reaching
//! the end exactly accepts, jumping 4 bytes past it rejects. `inet_diag_bc_audit` walks the
//! program along the `yes` jumps, so every op must be reachable that way.

use std::net::IpAddr;
use std::str::FromStr;

use crate::diag::{DiagSocket, AF_INET, AF_INET6};

/// TCP state numbers (`include/net/tcp_states.h`).
pub mod state {
    /// Data flows both ways.
    pub const ESTABLISHED: u8 = 1;
    /// Our SYN is sent, no answer yet.
    pub const SYN_SENT: u8 = 2;
    /// A SYN received and answered, handshake not complete (a Fast Open child; pending
    /// connections on a listener are `NEW_SYN_RECV`).
    pub const SYN_RECV: u8 = 3;
    /// We closed; our FIN is not yet acknowledged.
    pub const FIN_WAIT1: u8 = 4;
    /// We closed and our FIN is acknowledged; the peer may still send.
    pub const FIN_WAIT2: u8 = 5;
    /// Both closed; waiting out stray segments (2 MSL).
    pub const TIME_WAIT: u8 = 6;
    /// Closed (also a socket not yet connected).
    pub const CLOSE: u8 = 7;
    /// The peer closed; we may still send.
    pub const CLOSE_WAIT: u8 = 8;
    /// The peer closed, then we did; our FIN is not yet acknowledged.
    pub const LAST_ACK: u8 = 9;
    /// Listening for connections.
    pub const LISTEN: u8 = 10;
    /// Both sides closed at once; FINs crossed.
    pub const CLOSING: u8 = 11;
    /// A pending connection on a listener (a mini socket, before accept).
    pub const NEW_SYN_RECV: u8 = 12;
    /// Every state.
    pub const ALL: u32 = (1 << 13) - 2;
    /// Connections with a peer: all but LISTEN, CLOSE, TIME_WAIT and NEW_SYN_RECV (which have
    /// no `tcp_info`), like `ss`'s default.
    pub const CONNECTED: u32 = ALL
        & !(1 << LISTEN)
        & !(1 << CLOSE)
        & !(1 << TIME_WAIT)
        & !(1 << NEW_SYN_RECV)
        & !(1 << SYN_RECV);
}

/// Why a filter did not parse. The message names the word and shows what would work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// A word that is no filter keyword.
    #[error("filter word '{0}' is not understood; use state NAME, sport/dport/port PORT[-PORT], src/dst/addr ADDR[/LEN][:PORT], ipv4 or ipv6")]
    UnknownWord(String),
    /// A keyword at the end with no value (the keyword, an example value).
    #[error("filter '{0}' needs a value after it, e.g. '{0} {1}'")]
    MissingValue(String, &'static str),
    /// Not a port or range.
    #[error("'{0}' is not a port or port range; write 443, :443 or 1000-2000")]
    BadPort(String),
    /// Not an address or prefix.
    #[error(
        "'{0}' is not an address; write 198.18.0.1, 198.18.0.0/24, [2001:2::1]:80 or 2001:2::/48"
    )]
    BadAddr(String),
    /// Not a TCP state name.
    #[error("'{0}' is not a TCP state; use established, syn-sent, syn-recv, fin-wait-1, fin-wait-2, time-wait, close, close-wait, last-ack, listen, closing, connected or all")]
    BadState(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Src,
    Dst,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Atom {
    Port {
        side: Side,
        lo: u16,
        hi: u16,
    },
    Host {
        side: Side,
        ip: IpAddr,
        prefix: u8,
        port: Option<u16>,
    },
}

/// A parsed filter: which states and families to dump, and a conjunction of disjunctions of
/// port/address conditions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// Bit `1 << state` for each wanted state.
    pub states: u32,
    /// Dump IPv4 sockets.
    pub ipv4: bool,
    /// Dump IPv6 sockets.
    pub ipv6: bool,
    clauses: Vec<(String, Vec<Atom>)>,
}

impl Default for Filter {
    fn default() -> Self {
        Filter {
            states: state::CONNECTED,
            ipv4: true,
            ipv6: true,
            clauses: Vec::new(),
        }
    }
}

fn parse_state(s: &str) -> Result<u32, FilterError> {
    let bit = |n: u8| 1u32 << n;
    Ok(match s.to_ascii_lowercase().replace('_', "-").as_str() {
        "established" | "estab" => bit(state::ESTABLISHED),
        "syn-sent" => bit(state::SYN_SENT),
        "syn-recv" => bit(state::SYN_RECV) | bit(state::NEW_SYN_RECV),
        "fin-wait-1" => bit(state::FIN_WAIT1),
        "fin-wait-2" => bit(state::FIN_WAIT2),
        "time-wait" => bit(state::TIME_WAIT),
        "close" | "closed" => bit(state::CLOSE),
        "close-wait" => bit(state::CLOSE_WAIT),
        "last-ack" => bit(state::LAST_ACK),
        "listen" | "listening" => bit(state::LISTEN),
        "closing" => bit(state::CLOSING),
        "connected" => state::CONNECTED,
        "all" => state::ALL,
        _ => return Err(FilterError::BadState(s.into())),
    })
}

fn parse_port(s: &str) -> Result<(u16, u16), FilterError> {
    let t = s.strip_prefix(':').unwrap_or(s);
    let bad = || FilterError::BadPort(s.into());
    let (lo, hi) = match t.split_once('-') {
        Some((a, b)) => (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?),
        None => {
            let p = t.parse().map_err(|_| bad())?;
            (p, p)
        }
    };
    if lo > hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

/// `198.18.0.1`, `198.18.0.0/24`, `198.18.0.1:80`, `[2001:2::1]:80`, `2001:2::/48`.
fn parse_host(s: &str) -> Result<(IpAddr, u8, Option<u16>), FilterError> {
    let bad = || FilterError::BadAddr(s.into());
    let (addr, port) = if let Some(rest) = s.strip_prefix('[') {
        let (a, after) = rest.split_once(']').ok_or_else(bad)?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse().map_err(|_| bad())?),
            None if after.is_empty() => None,
            None => return Err(bad()),
        };
        (a, port)
    } else if s.matches(':').count() == 1 {
        let (a, p) = s.split_once(':').ok_or_else(bad)?;
        (a, Some(p.parse().map_err(|_| bad())?))
    } else {
        (s, None)
    };
    let (ip, prefix) = match addr.split_once('/') {
        Some((a, l)) => (
            IpAddr::from_str(a).map_err(|_| bad())?,
            Some(l.parse::<u8>().map_err(|_| bad())?),
        ),
        None => (IpAddr::from_str(addr).map_err(|_| bad())?, None),
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let prefix = prefix.unwrap_or(max);
    if prefix > max {
        return Err(bad());
    }
    Ok((ip, prefix, port))
}

impl FromStr for Filter {
    type Err = FilterError;
    /// Parses words separated by spaces; `=`/`==` between a key and its value are allowed.
    fn from_str(s: &str) -> Result<Filter, FilterError> {
        let words: Vec<&str> = s
            .split_whitespace()
            .filter(|w| !matches!(*w, "=" | "==" | "and"))
            .collect();
        let mut f = Filter::default();
        let mut states: Option<u32> = None;
        let (mut v4_only, mut v6_only) = (false, false);
        let mut i = 0;
        while i < words.len() {
            let key = words[i].to_ascii_lowercase();
            let example = match key.as_str() {
                "state" => "established",
                "sport" | "dport" | "port" => "443",
                "src" | "dst" | "addr" | "host" => "198.18.0.0/24",
                "ipv4" | "-4" => {
                    v4_only = true;
                    i += 1;
                    continue;
                }
                "ipv6" | "-6" => {
                    v6_only = true;
                    i += 1;
                    continue;
                }
                _ => {
                    // A bare state name ("established") is accepted as in ss.
                    if let Ok(bits) = parse_state(words[i]) {
                        *states.get_or_insert(0) |= bits;
                        i += 1;
                        continue;
                    }
                    return Err(FilterError::UnknownWord(words[i].into()));
                }
            };
            let value = *words
                .get(i + 1)
                .ok_or_else(|| FilterError::MissingValue(words[i].into(), example))?;
            let sides: &[Side] = match key.as_str() {
                "sport" | "src" => &[Side::Src],
                "dport" | "dst" => &[Side::Dst],
                _ => &[Side::Src, Side::Dst],
            };
            let mut atoms = Vec::new();
            match key.as_str() {
                "state" => {
                    for v in value.split(',') {
                        *states.get_or_insert(0) |= parse_state(v)?;
                    }
                }
                "sport" | "dport" | "port" => {
                    let (lo, hi) = parse_port(value)?;
                    atoms.extend(sides.iter().map(|&side| Atom::Port { side, lo, hi }));
                }
                _ => {
                    let (ip, prefix, port) = parse_host(value)?;
                    atoms.extend(sides.iter().map(|&side| Atom::Host {
                        side,
                        ip,
                        prefix,
                        port,
                    }));
                }
            }
            if !atoms.is_empty() {
                let key = if key == "host" { "addr".into() } else { key };
                match f.clauses.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, a)) => a.extend(atoms),
                    None => f.clauses.push((key, atoms)),
                }
            }
            i += 2;
        }
        if let Some(s) = states {
            f.states = s;
        }
        if v4_only != v6_only {
            f.ipv4 = v4_only;
            f.ipv6 = v6_only;
        }
        Ok(f)
    }
}

/// Op codes of `enum inet_diag_bc_op` (only the ones that exist since 2.6).
const BC_JMP: u8 = 1;
const BC_S_GE: u8 = 2;
const BC_S_LE: u8 = 3;
const BC_D_GE: u8 = 4;
const BC_D_LE: u8 = 5;
const BC_S_COND: u8 = 7;
const BC_D_COND: u8 = 8;

fn op(code: u8, yes: u8, no: u16) -> [u8; 4] {
    let n = no.to_ne_bytes();
    [code, yes, n[0], n[1]]
}

/// Adds `reloc` to every "reject" jump of `prog` (those landing 4 bytes past its end), so that
/// after appending `reloc` bytes they still reject.
fn patch_rejects(prog: &mut [u8], reloc: usize) {
    let mut at = 0;
    while at < prog.len() {
        let remaining = prog.len() - at;
        let yes = prog[at + 1] as usize;
        let no = u16::from_ne_bytes([prog[at + 2], prog[at + 3]]) as usize;
        if no == remaining + 4 {
            let n = ((no + reloc) as u16).to_ne_bytes();
            prog[at + 2] = n[0];
            prog[at + 3] = n[1];
        }
        if yes == 0 {
            break;
        }
        at += yes;
    }
}

fn and(mut a: Vec<u8>, b: Vec<u8>) -> Vec<u8> {
    patch_rejects(&mut a, b.len());
    a.extend(b);
    a
}

fn or(mut a: Vec<u8>, b: Vec<u8>) -> Vec<u8> {
    // a's rejects land just after the jump, at the start of b; a's success falls onto the jump,
    // which skips b and so accepts.
    a.extend(op(BC_JMP, 4, (b.len() + 4) as u16));
    a.extend(b);
    a
}

fn compile_atom(a: &Atom) -> Vec<u8> {
    match *a {
        Atom::Port { side, lo, hi } => {
            let (ge, le) = match side {
                Side::Src => (BC_S_GE, BC_S_LE),
                Side::Dst => (BC_D_GE, BC_D_LE),
            };
            let cmp = |code, port: u16| {
                let mut v = op(code, 8, 12).to_vec();
                v.extend(op(0, 0, port));
                v
            };
            and(cmp(ge, lo), cmp(le, hi))
        }
        Atom::Host {
            side,
            ip,
            prefix,
            port,
        } => {
            let code = match side {
                Side::Src => BC_S_COND,
                Side::Dst => BC_D_COND,
            };
            let (family, bytes): (u8, Vec<u8>) = match ip {
                IpAddr::V4(a) => (AF_INET, a.octets().to_vec()),
                IpAddr::V6(a) => (AF_INET6, a.octets().to_vec()),
            };
            let len = 4 + 8 + bytes.len();
            let mut v = op(code, len as u8, (len + 4) as u16).to_vec();
            v.extend([family, prefix, 0, 0]);
            v.extend(port.map(i32::from).unwrap_or(-1).to_ne_bytes());
            v.extend(bytes);
            v
        }
    }
}

fn prefix_match(a: &[u8], b: &[u8], prefix: u8) -> bool {
    let full = (prefix / 8) as usize;
    let rest = prefix % 8;
    if a[..full] != b[..full] {
        return false;
    }
    if rest == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rest);
    a[full] & mask == b[full] & mask
}

fn atom_matches(a: &Atom, s: &DiagSocket) -> bool {
    match *a {
        Atom::Port { side, lo, hi } => {
            let p = match side {
                Side::Src => s.src.port(),
                Side::Dst => s.dst.port(),
            };
            (lo..=hi).contains(&p)
        }
        Atom::Host {
            side,
            ip,
            prefix,
            port,
        } => {
            let sa = match side {
                Side::Src => s.src,
                Side::Dst => s.dst,
            };
            if port.is_some_and(|p| p != sa.port()) {
                return false;
            }
            // An IPv4 condition also matches IPv4-mapped IPv6 addresses, as in the kernel.
            let have = match (ip, sa.ip()) {
                (IpAddr::V4(_), IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
                    Some(v4) => IpAddr::V4(v4),
                    None => return false,
                },
                (_, other) => other,
            };
            match (ip, have) {
                (IpAddr::V4(w), IpAddr::V4(h)) => prefix_match(&w.octets(), &h.octets(), prefix),
                (IpAddr::V6(w), IpAddr::V6(h)) => prefix_match(&w.octets(), &h.octets(), prefix),
                _ => false,
            }
        }
    }
}

impl Filter {
    /// True when the filter has port/address conditions (beyond states and families).
    pub fn has_conditions(&self) -> bool {
        !self.clauses.is_empty()
    }

    /// The `INET_DIAG_REQ_BYTECODE` program for the port/address conditions (empty: none).
    pub fn bytecode(&self) -> Vec<u8> {
        let mut prog: Option<Vec<u8>> = None;
        for (_, atoms) in &self.clauses {
            let mut clause: Option<Vec<u8>> = None;
            for a in atoms {
                let c = compile_atom(a);
                clause = Some(match clause {
                    None => c,
                    Some(prev) => or(prev, c),
                });
            }
            if let Some(c) = clause {
                prog = Some(match prog {
                    None => c,
                    Some(p) => and(p, c),
                });
            }
        }
        prog.unwrap_or_default()
    }

    /// Whether a socket passes the whole filter (states, families, conditions), as the kernel
    /// would decide it.
    pub fn matches(&self, s: &DiagSocket) -> bool {
        if self.states & (1u32 << (s.state as u32 & 31)) == 0 {
            return false;
        }
        // Like the dumps: AF_INET sockets are IPv4; AF_INET6 ones (v4-mapped too) are IPv6.
        let v4 = s.src.is_ipv4();
        if (v4 && !self.ipv4) || (!v4 && !self.ipv6) {
            return false;
        }
        self.clauses
            .iter()
            .all(|(_, atoms)| atoms.iter().any(|a| atom_matches(a, s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn sock(src: &str, dst: &str) -> DiagSocket {
        DiagSocket {
            cookie: 1,
            ..DiagSocket::from_addrs(
                state::ESTABLISHED,
                src.parse().unwrap(),
                dst.parse().unwrap(),
            )
        }
    }

    /// A transcription of the kernel's `inet_diag_bc_run` and the `yes`-walk of
    /// `inet_diag_bc_audit`, to check our programs without a kernel.
    fn run(bc: &[u8], s: &DiagSocket) -> bool {
        let mut at: i64 = 0;
        let mut len = bc.len() as i64;
        while len > 0 {
            let o = at as usize;
            let (code, yes, no) = (
                bc[o],
                bc[o + 1] as i64,
                u16::from_ne_bytes([bc[o + 2], bc[o + 3]]) as i64,
            );
            let arg = || u16::from_ne_bytes([bc[o + 6], bc[o + 7]]);
            let ok = match code {
                BC_JMP => false,
                BC_S_GE => s.src.port() >= arg(),
                BC_S_LE => s.src.port() <= arg(),
                BC_D_GE => s.dst.port() >= arg(),
                BC_D_LE => s.dst.port() <= arg(),
                BC_S_COND | BC_D_COND => {
                    let fam = bc[o + 4];
                    let prefix = bc[o + 5];
                    let port = i32::from_ne_bytes(bc[o + 8..o + 12].try_into().unwrap());
                    let sa: SocketAddr = if code == BC_S_COND { s.src } else { s.dst };
                    let n = if fam == AF_INET { 4 } else { 16 };
                    let want = &bc[o + 12..o + 12 + n];
                    if port != -1 && port != sa.port() as i32 {
                        false
                    } else {
                        match (fam, sa.ip()) {
                            (AF_INET, IpAddr::V4(a)) => prefix_match(&a.octets(), want, prefix),
                            (AF_INET6, IpAddr::V6(a)) => prefix_match(&a.octets(), want, prefix),
                            (AF_INET, IpAddr::V6(a)) => a
                                .to_ipv4_mapped()
                                .is_some_and(|v4| prefix_match(&v4.octets(), want, prefix)),
                            _ => false,
                        }
                    }
                }
                c => panic!("unexpected op {c}"),
            };
            let step = if ok { yes } else { no };
            len -= step;
            at += step;
        }
        len == 0
    }

    fn audit(bc: &[u8]) {
        let mut at = 0usize;
        let mut boundaries = vec![];
        while at < bc.len() {
            boundaries.push(at);
            let yes = bc[at + 1] as usize;
            assert!(yes >= 4 && yes % 4 == 0 && yes <= bc.len() - at, "bad yes");
            at += yes;
        }
        assert_eq!(at, bc.len());
        for &b in &boundaries {
            let no = u16::from_ne_bytes([bc[b + 2], bc[b + 3]]) as usize;
            if bc[b] != 0 {
                let target = b + no;
                assert!(no % 4 == 0 && target <= bc.len() + 4, "bad no");
                assert!(
                    target >= bc.len() || boundaries.contains(&target),
                    "no-jump into the middle of an op"
                );
            }
        }
    }

    #[test]
    fn parses_ss_like_words() {
        let f: Filter = "state established dport = :443 dport 80 src 198.18.0.0/24"
            .parse()
            .unwrap();
        assert_eq!(f.states, 1 << state::ESTABLISHED);
        assert_eq!(f.clauses.len(), 2);
        assert!(f.matches(&sock("198.18.0.1:5000", "198.18.0.2:80")));
        assert!(f.matches(&sock("198.18.0.1:5000", "198.18.0.2:443")));
        assert!(!f.matches(&sock("198.18.1.1:5000", "198.18.0.2:443")));
        assert!(!f.matches(&sock("198.18.0.1:5000", "198.18.0.2:444")));
        let f: Filter = "ipv6 port 5201".parse().unwrap();
        assert!(!f.ipv4 && f.ipv6);
    }

    #[test]
    fn bad_filters_say_what_to_write() {
        for (input, needle) in [
            ("dport", "needs a value"),
            ("dport http", "not a port"),
            ("dst 1.2.3.4/40", "not an address"),
            ("state sleeping", "not a TCP state"),
            ("frobnicate 3", "not understood"),
        ] {
            let e = input.parse::<Filter>().unwrap_err().to_string();
            assert!(e.contains(needle), "{input}: {e}");
        }
    }

    #[test]
    fn empty_filter_has_no_bytecode() {
        assert!(Filter::default().bytecode().is_empty());
    }

    proptest::proptest! {
        /// The compiled program accepts exactly the sockets the user-space matcher accepts,
        /// and passes the kernel's audit rules.
        #[test]
        fn bytecode_agrees_with_matcher(
            dports in proptest::collection::vec(0u16..6, 0..3),
            sport_lo in 0u16..6, sport_w in 0u16..3, use_sport: bool,
            net in 0u8..3, plen in 22u8..33, use_dst: bool, use_addr6: bool,
            sp in 0u16..8, dp in 0u16..8, a in 0u8..4, b in 0u8..4, v6 in proptest::bool::ANY,
        ) {
            let mut words = String::new();
            for d in &dports { words += &format!(" dport {d}"); }
            if use_sport { words += &format!(" sport {}-{}", sport_lo, sport_lo + sport_w); }
            if use_dst { words += &format!(" dst 198.18.{net}.0/{plen}"); }
            if use_addr6 { words += &format!(" addr 2001:2::{net}00/120"); }
            let f: Filter = words.parse().unwrap();
            let bc = f.bytecode();
            if !bc.is_empty() { audit(&bc); }
            let s = if v6 {
                sock(&format!("[2001:2::{a}00]:{sp}"), &format!("[::ffff:198.18.{b}.1]:{dp}"))
            } else {
                sock(&format!("198.18.{a}.1:{sp}"), &format!("198.18.{b}.1:{dp}"))
            };
            let kernel = bc.is_empty() || run(&bc, &s);
            proptest::prop_assert_eq!(kernel, f.matches(&s), "{} {:?}", words, s);
        }
    }
}
