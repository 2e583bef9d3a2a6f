//! Which group a connection is counted in: only the dimensions the operator names
//! (`--group-by port,cidr,cc,netns`), with ports and remote networks named by a map file, so
//! the number of groups is bounded by what the operator wrote, never by the traffic.
//!
//! The map file is TOML:
//!
//! ```toml
//! [ports]            # service name = ports or ranges, matched on either end
//! web = [80, 443]
//! perf = ["5201-5210"]
//!
//! [cidrs]            # peer group = remote networks, the first match wins
//! lab = ["198.18.0.0/15", "2001:2::/48"]
//! ```

use std::net::{IpAddr, SocketAddr};

/// A dimension a group can be made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dimension {
    /// The service of the local port (or, for outgoing connections, of the remote port).
    Port,
    /// The named remote network.
    Cidr,
    /// The socket's congestion control.
    Cc,
    /// The network namespace (`host` for the exporter's own).
    Netns,
}

impl std::str::FromStr for Dimension {
    type Err = GroupError;
    fn from_str(s: &str) -> Result<Dimension, GroupError> {
        Ok(match s {
            "port" | "service" => Dimension::Port,
            "cidr" | "peer" => Dimension::Cidr,
            "cc" | "congestion" => Dimension::Cc,
            "netns" => Dimension::Netns,
            _ => return Err(GroupError::Dimension(s.to_string())),
        })
    }
}

/// Why a group map or a `--group-by` value was refused: one sentence naming the input.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    /// `--group-by` names no dimension.
    #[error("unknown --group-by dimension '{0}'; use port, cidr, cc or netns")]
    Dimension(String),
    /// A line of the group map file is wrong.
    #[error("group map line {line}: {why}")]
    Map {
        /// Line number, 1-based.
        line: usize,
        /// What is wrong, and the fix.
        why: String,
    },
    /// A dimension that needs names from the map, given without one (the dimension, its table).
    #[error("--group-by {0} needs a group map file (--groups FILE) with a [{1}] table")]
    NeedsMap(&'static str, &'static str),
}

/// A remote network: address, prefix length.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Net {
    addr: IpAddr,
    prefix: u8,
}

impl Net {
    fn parse(s: &str) -> Option<Net> {
        let (a, p) = s.split_once('/')?;
        let addr: IpAddr = a.trim().parse().ok()?;
        let prefix: u8 = p.trim().parse().ok()?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        (prefix <= max).then_some(Net { addr, prefix })
    }

    fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        let bits = |x: IpAddr| -> (u128, u32) {
            match x {
                IpAddr::V4(v) => (u32::from(v) as u128, 32),
                IpAddr::V6(v) => (u128::from(v), 128),
            }
        };
        let ((a, wa), (b, wb)) = (bits(self.addr), bits(ip));
        if wa != wb {
            return false;
        }
        let p = u32::from(self.prefix);
        p == 0 || (a >> (wa - p)) == (b >> (wb - p))
    }
}

/// The operator's names for ports and remote networks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupMap {
    ports: Vec<(u16, u16, String)>,
    cidrs: Vec<(Net, String)>,
}

fn line_of(text: &str, span: Option<std::ops::Range<usize>>) -> usize {
    span.map(|s| text[..s.start.min(text.len())].lines().count().max(1))
        .unwrap_or(1)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name != "other"
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
}

impl GroupMap {
    /// Parses a map file's text (see the module comment).
    pub fn parse(text: &str) -> Result<GroupMap, GroupError> {
        let doc: toml_edit::ImDocument<&str> =
            toml_edit::ImDocument::parse(text).map_err(|e| GroupError::Map {
                line: line_of(text, e.span()),
                why: format!("not TOML: {}", e.message()),
            })?;
        let mut map = GroupMap::default();
        for (key, item) in doc.as_table().iter() {
            let err = |why: String, span| GroupError::Map {
                line: line_of(text, span),
                why,
            };
            let Some(table) = item.as_table() else {
                return Err(err(
                    format!("'{key}' is not a table; the file has [ports] and [cidrs] tables"),
                    item.span(),
                ));
            };
            for (name, v) in table.iter() {
                if !valid_name(name) {
                    return Err(err(format!("group name '{name}' must be 1-64 letters, digits, '-', '_', '.' or ':' and not 'other'"), v.span()));
                }
                let Some(arr) = v.as_array() else {
                    return Err(err(
                        format!("'{name}' must be a list, e.g. {name} = [80, \"8000-8080\"]"),
                        v.span(),
                    ));
                };
                for e in arr.iter() {
                    let bad = |what: &str| err(format!("'{name}': {what}"), e.span());
                    match key {
                        "ports" => {
                            let range = match (e.as_integer(), e.as_str()) {
                                (Some(p), _) => u16::try_from(p).ok().map(|p| (p, p)),
                                (_, Some(s)) => parse_range(s),
                                _ => None,
                            };
                            let (lo, hi) = range.ok_or_else(|| {
                                bad("ports are numbers 1-65535 or \"LOW-HIGH\" ranges")
                            })?;
                            map.ports.push((lo, hi, name.to_string()));
                        }
                        "cidrs" => {
                            let net = e.as_str().and_then(Net::parse).ok_or_else(|| {
                                bad("networks are written \"198.18.0.0/15\" or \"2001:2::/48\"")
                            })?;
                            map.cidrs.push((net, name.to_string()));
                        }
                        _ => {
                            return Err(err(
                                format!("unknown table [{key}]; the file has [ports] and [cidrs]"),
                                item.span(),
                            ))
                        }
                    }
                }
            }
        }
        Ok(map)
    }

    fn service(&self, local: u16, remote: u16) -> Option<&str> {
        let find = |p: u16| {
            self.ports
                .iter()
                .find(|(lo, hi, _)| (*lo..=*hi).contains(&p))
        };
        find(local)
            .or_else(|| find(remote))
            .map(|(_, _, n)| n.as_str())
    }

    fn peer(&self, ip: IpAddr) -> Option<&str> {
        self.cidrs
            .iter()
            .find(|(n, _)| n.contains(ip))
            .map(|(_, name)| name.as_str())
    }
}

fn parse_range(s: &str) -> Option<(u16, u16)> {
    let (lo, hi) = match s.split_once('-') {
        Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
        None => {
            let p = s.trim().parse().ok()?;
            (p, p)
        }
    };
    (lo >= 1 && lo <= hi).then_some((lo, hi))
}

/// How connections are grouped: the dimensions in order and the names for them.
#[derive(Debug, Clone, Default)]
pub struct Grouping {
    /// The dimensions in `--group-by` order; empty: one group for every connection.
    pub by: Vec<Dimension>,
    /// The operator's names for ports and networks (`--groups FILE`).
    pub map: GroupMap,
}

/// What a connection is grouped by.
pub struct Key<'a> {
    /// The socket's local address and port.
    pub local: SocketAddr,
    /// The peer's address and port.
    pub remote: SocketAddr,
    /// The congestion control algorithm, when the dump reported it.
    pub congestion: Option<&'a str>,
    /// The network namespace; `None`: the exporter's own.
    pub netns: Option<&'a str>,
}

/// The value a connection matching no name gets in a mapped dimension.
pub const UNMAPPED: &str = "unmapped";

impl Grouping {
    /// Checks that every mapped dimension has names to map with.
    pub fn new(by: Vec<Dimension>, map: GroupMap) -> Result<Grouping, GroupError> {
        if by.contains(&Dimension::Port) && map.ports.is_empty() {
            return Err(GroupError::NeedsMap("port", "ports"));
        }
        if by.contains(&Dimension::Cidr) && map.cidrs.is_empty() {
            return Err(GroupError::NeedsMap("cidr", "cidrs"));
        }
        Ok(Grouping { by, map })
    }

    /// The group's label value: the dimensions' values joined with '/' (`all` with none).
    pub fn group(&self, k: &Key<'_>) -> String {
        if self.by.is_empty() {
            return "all".into();
        }
        let parts: Vec<&str> = self
            .by
            .iter()
            .map(|d| match d {
                Dimension::Port => self
                    .map
                    .service(k.local.port(), k.remote.port())
                    .unwrap_or(UNMAPPED),
                Dimension::Cidr => self.map.peer(k.remote.ip()).unwrap_or(UNMAPPED),
                Dimension::Cc => k.congestion.unwrap_or("unknown"),
                Dimension::Netns => k.netns.unwrap_or("host"),
            })
            .collect();
        parts.join("/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = "[ports]\nweb = [80, 443]\nperf = [\"5201-5210\"]\n\n[cidrs]\nlab = [\"198.18.0.0/15\", \"2001:2::/48\"]\n";

    fn key<'a>(l: &str, r: &str, cc: Option<&'a str>) -> Key<'a> {
        Key {
            local: l.parse().unwrap(),
            remote: r.parse().unwrap(),
            congestion: cc,
            netns: None,
        }
    }

    #[test]
    fn groups_come_from_the_named_dimensions_only() {
        let map = GroupMap::parse(MAP).unwrap();
        let g = Grouping::new(
            vec![Dimension::Port, Dimension::Cidr, Dimension::Cc],
            map.clone(),
        )
        .unwrap();
        assert_eq!(
            g.group(&key("198.18.0.2:5203", "198.18.0.1:40000", Some("cubic"))),
            "perf/lab/cubic"
        );
        // An outgoing connection is named by the remote port; IPv4-mapped peers match.
        assert_eq!(
            g.group(&key(
                "[::ffff:10.0.0.1]:50000",
                "[::ffff:198.19.1.1]:443",
                None
            )),
            "web/lab/unknown"
        );
        assert_eq!(
            g.group(&key("10.0.0.1:22", "8.8.8.8:50000", Some("bbr"))),
            "unmapped/unmapped/bbr"
        );
        let none = Grouping::new(vec![], map).unwrap();
        assert_eq!(none.group(&key("10.0.0.1:22", "8.8.8.8:1", None)), "all");
    }

    #[test]
    fn bad_maps_name_the_line() {
        let e = GroupMap::parse("[ports]\nweb = [80]\nbad = [70000]\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "group map line 3: 'bad': ports are numbers 1-65535 or \"LOW-HIGH\" ranges"
        );
        let e = GroupMap::parse("[cidrs]\nx = [\"10.0.0.0/33\"]\n").unwrap_err();
        assert!(e.to_string().starts_with("group map line 2:"), "{e}");
        let e = GroupMap::parse("[hosts]\nx = [1]\n").unwrap_err();
        assert!(e.to_string().contains("unknown table [hosts]"), "{e}");
        let e = GroupMap::parse("[ports]\nother = [1]\n").unwrap_err();
        assert!(e.to_string().contains("not 'other'"), "{e}");
        assert!(GroupMap::parse("[ports\n").is_err());
        assert!(Grouping::new(vec![Dimension::Cidr], GroupMap::default()).is_err());
        assert!("vlan".parse::<Dimension>().is_err());
    }

    #[test]
    fn prefixes_match_by_bits() {
        let n = Net::parse("198.18.0.0/15").unwrap();
        assert!(n.contains("198.19.255.255".parse().unwrap()));
        assert!(!n.contains("198.20.0.0".parse().unwrap()));
        assert!(!n.contains("2001:2::1".parse().unwrap()));
        assert!(Net::parse("0.0.0.0/0")
            .unwrap()
            .contains("1.2.3.4".parse().unwrap()));
    }
}
