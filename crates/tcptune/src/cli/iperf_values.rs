//! Values of iperf3's options as iperf3 reads them (`-b 100M`, `-w 256K`, `-S 0x10`,
//! `--dscp EF`, `-A 2,3`, `--cntl-ka=60/10/5`), each refused in one sentence that says what
//! would work.

use tcptune_model::{Bytes, Rate};

/// A number with iperf3's one-letter suffix (k, m, g, t in either case), and that suffix's
/// multiplier (`base` to the power of its position), as iperf3's `unit_atof` reads them.
fn iperf_suffixed(s: &str, base: f64) -> Option<f64> {
    let (num, mult) = match s.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => {
            let pow = match c.to_ascii_lowercase() {
                'k' => 1,
                'm' => 2,
                'g' => 3,
                't' => 4,
                _ => return None,
            };
            (&s[..i], base.powi(pow))
        }
        _ => (s, 1.0),
    };
    let v: f64 = num.parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some(v * mult)
}

/// A size in tcptune's units (128KiB, 1MB) or iperf3's (128K, 1M: powers of 1024).
pub(super) fn iperf_bytes(s: &str) -> Result<Bytes, String> {
    s.parse::<Bytes>().or_else(|e| {
        iperf_suffixed(s, 1024.0)
            .map(|v| Bytes::new(v.round() as u64))
            .ok_or_else(|| e.to_string())
    })
}

/// A rate in tcptune's units (100mbit, 12MB/s) or iperf3's (100M: bits/s, powers of 1000).
pub(super) fn iperf_rate(s: &str) -> Result<Rate, String> {
    s.parse::<Rate>().or_else(|e| {
        iperf_suffixed(s, 1000.0)
            .map(Rate::from_bps)
            .ok_or_else(|| e.to_string())
    })
}

/// `-b RATE[/BURST]`: the rate and iperf3's burst of packets.
pub(super) fn iperf_rate_burst(s: &str) -> Result<(Rate, Option<u32>), String> {
    match s.split_once('/') {
        Some((rate, burst)) => {
            let b = burst
                .parse::<u32>()
                .ok()
                .filter(|b| (1..=1000).contains(b))
                .ok_or_else(|| {
                    format!("'{burst}' is not a burst size; give -b RATE/N with N from 1 to 1000")
                })?;
            Ok((iperf_rate(rate)?, Some(b)))
        }
        None => Ok((iperf_rate(s)?, None)),
    }
}

/// A DSCP as iperf3 reads --dscp: a number (decimal, 0x hex, 0 octal) or a name.
pub(super) fn parse_dscp(s: &str) -> Result<u8, String> {
    let named = match s.to_ascii_uppercase().as_str() {
        "EF" => Some(46),
        "VA" | "VOICE-ADMIT" => Some(44),
        "LE" => Some(1),
        n => n
            .strip_prefix("CS")
            .and_then(|d| d.parse::<u8>().ok())
            .filter(|d| *d <= 7)
            .map(|d| d << 3)
            .or_else(|| {
                let d = n.strip_prefix("AF")?.as_bytes();
                match d {
                    [c @ b'1'..=b'4', p @ b'1'..=b'3'] => {
                        Some(((c - b'0') << 3) | ((p - b'0') << 1))
                    }
                    _ => None,
                }
            }),
    };
    named
        .or_else(|| parse_tos(s).ok())
        .filter(|d| *d < 64)
        .ok_or_else(|| {
            format!("'{s}' is not a DSCP; give 0..63 (e.g. 46) or a name such as EF, AF41, CS1")
        })
}

/// `--cntl-ka[=IDLE/INTERVAL/COUNT]`: empty fields are 0 (the system's value).
pub(super) fn parse_keepalive(s: &str) -> Result<(u32, u32, u32), String> {
    let mut v = [0u32; 3];
    let fields: Vec<&str> = if s.is_empty() {
        vec![]
    } else {
        s.split('/').collect()
    };
    if fields.len() > 3 {
        return Err(format!(
            "'{s}' has more than three fields; give IDLE/INTERVAL/COUNT"
        ));
    }
    for (slot, f) in v.iter_mut().zip(fields) {
        if !f.is_empty() {
            *slot = f.parse().map_err(|_| {
                format!(
                    "'{f}' in '{s}' is not a whole number; give IDLE/INTERVAL/COUNT, e.g. 60/10/5"
                )
            })?;
        }
    }
    Ok((v[0], v[1], v[2]))
}

/// `-A N[,M]`: this end's CPU and, optionally, the server's.
pub(super) fn parse_affinity(s: &str) -> Result<(u32, Option<u32>), String> {
    let bad = || format!("'{s}' is not a CPU number; give -A N or -A N,M (N here, M the server)");
    let (n, m) = match s.split_once(',') {
        Some((n, m)) => (n, Some(m)),
        None => (s, None),
    };
    let n = n.parse().map_err(|_| bad())?;
    let m = m.map(|m| m.parse().map_err(|_| bad())).transpose()?;
    Ok((n, m))
}

/// A TOS byte in decimal, hex (0x…) or octal (0…), as iperf3 reads -S.
pub(super) fn parse_tos(s: &str) -> Result<u8, String> {
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u32::from_str_radix(h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        u32::from_str_radix(&s[1..], 8)
    } else {
        s.parse::<u32>()
    };
    v.ok()
        .and_then(|v| u8::try_from(v).ok())
        .ok_or_else(|| format!("'{s}' is not a TOS byte; give 0..255, e.g. 0x10 or 184"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3s_spellings() {
        assert_eq!(parse_dscp("EF"), Ok(46));
        assert_eq!(parse_dscp("af41"), Ok(34));
        assert_eq!(parse_dscp("CS1"), Ok(8));
        assert_eq!(parse_dscp("0x2e"), Ok(46));
        assert!(parse_dscp("64").unwrap_err().contains("not a DSCP"));
        assert!(parse_dscp("AF51").is_err());
        assert_eq!(parse_keepalive(""), Ok((0, 0, 0)));
        assert_eq!(parse_keepalive("60//5"), Ok((60, 0, 5)));
        assert!(parse_keepalive("1/2/3/4").is_err());
        assert_eq!(parse_affinity("2"), Ok((2, None)));
        assert_eq!(parse_affinity("2,3"), Ok((2, Some(3))));
        assert!(parse_affinity("2,x").is_err());
        let (r, b) = iperf_rate_burst("100M/10").unwrap();
        assert_eq!((r.bps(), b), (100e6, Some(10)));
        assert_eq!(iperf_rate_burst("1gbit").unwrap().1, None);
        assert!(iperf_rate_burst("1M/0").is_err());
    }
}
