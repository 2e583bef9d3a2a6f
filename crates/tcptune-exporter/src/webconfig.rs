//! `--web-config FILE`: the web configuration file Prometheus exporters share
//! (exporter-toolkit's format), the part this exporter supports: `basic_auth_users`, user
//! names mapped to bcrypt hashes. The file is YAML; the subset read here is what that format
//! uses (top-level sections holding `key: value` lines, comments, quoted strings). A section
//! this exporter cannot honour (`tls_server_config`, `http_server_config`) is refused rather
//! than ignored, so nobody believes traffic is encrypted when it is not.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

/// Why a web configuration was refused: one sentence naming the line.
#[derive(Debug, thiserror::Error)]
pub enum WebConfigError {
    #[error("web config line {line}: {why}")]
    Line { line: usize, why: String },
    #[error("web config: TLS (tls_server_config) is not supported by tcptune exporter yet; leave it out and put a TLS-terminating proxy in front, or keep the exporter on loopback")]
    Tls,
}

/// The parsed configuration.
#[derive(Debug, Default)]
pub struct WebConfig {
    /// User name → bcrypt hash.
    users: BTreeMap<String, String>,
    /// `Authorization` header values already verified (bcrypt is slow on purpose).
    verified: Mutex<HashSet<String>>,
}

/// Verified credentials remembered at most (an attacker cannot grow it: only correct ones
/// are kept).
const VERIFIED_CACHE: usize = 64;

fn unquote(v: &str) -> &str {
    let v = v.trim();
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return &v[1..v.len() - 1];
        }
    }
    v
}

/// A line without its comment (a `#` at the start or after a space, outside quotes).
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && prev.is_whitespace() => return &line[..i],
            None => {}
        }
        prev = c;
    }
    line
}

impl WebConfig {
    /// Parses the file's text.
    pub fn parse(text: &str) -> Result<WebConfig, WebConfigError> {
        let mut cfg = WebConfig::default();
        let mut section: Option<String> = None;
        for (n, raw) in text.lines().enumerate() {
            let line = n + 1;
            let err = |why: String| WebConfigError::Line { line, why };
            let body = strip_comment(raw).trim_end();
            if body.trim().is_empty() || body.trim() == "---" {
                continue;
            }
            let indented = body.starts_with([' ', '\t']);
            let (k, v) = body
                .trim()
                .split_once(':')
                .ok_or_else(|| err("expected 'key: value'".into()))?;
            let (k, v) = (unquote(k), v.trim());
            if !indented {
                match k {
                    "basic_auth_users" => {}
                    "tls_server_config" => return Err(WebConfigError::Tls),
                    "http_server_config" => {
                        return Err(err(
                            "http_server_config is not supported by tcptune exporter; leave it out"
                                .into(),
                        ))
                    }
                    _ => {
                        return Err(err(format!(
                            "unknown section '{k}'; tcptune exporter reads basic_auth_users"
                        )))
                    }
                }
                if !(v.is_empty() || v == "{}") {
                    return Err(err(format!(
                        "'{k}' holds 'user: bcrypt-hash' lines, indented under it"
                    )));
                }
                section = Some(k.to_string());
                continue;
            }
            if section.is_none() {
                return Err(err("an indented line outside a section".into()));
            }
            let hash = unquote(v);
            if k.is_empty() || k.contains(':') {
                return Err(err(format!("user name '{k}' is empty or has a ':'")));
            }
            if hash.parse::<bcrypt::HashParts>().is_err() {
                return Err(err(format!("the password of '{k}' is not a bcrypt hash (make one with `htpasswd -nBC 10 \"\" | tr -d ':'`)")));
            }
            if cfg.users.insert(k.to_string(), hash.to_string()).is_some() {
                return Err(err(format!("user '{k}' is listed twice")));
            }
        }
        Ok(cfg)
    }

    /// Whether requests must authenticate.
    pub fn needs_auth(&self) -> bool {
        !self.users.is_empty()
    }

    /// Whether an `Authorization` header's Basic credentials match a user's hash.
    pub fn allows(&self, header: Option<&str>) -> bool {
        if !self.needs_auth() {
            return true;
        }
        let Some(h) = header else { return false };
        if self.verified.lock().is_ok_and(|v| v.contains(h)) {
            return true;
        }
        let Some((user, pass)) = h
            .strip_prefix("Basic ")
            .and_then(|b| base64_decode(b.trim()))
            .and_then(|d| String::from_utf8(d).ok())
            .and_then(|s| {
                s.split_once(':')
                    .map(|(u, p)| (u.to_string(), p.to_string()))
            })
        else {
            return false;
        };
        let ok = match self.users.get(&user) {
            Some(hash) => bcrypt::verify(&pass, hash).unwrap_or(false),
            None => {
                // Same work for an unknown user (a real user's hash, so the same cost), so
                // timing does not tell which users exist.
                if let Some(hash) = self.users.values().next() {
                    let _ = bcrypt::verify(&pass, hash);
                }
                false
            }
        };
        if ok {
            if let Ok(mut v) = self.verified.lock() {
                if v.len() >= VERIFIED_CACHE {
                    v.clear();
                }
                v.insert(h.to_string());
            }
        }
        ok
    }
}

/// Standard base64 (RFC 4648, with or without padding).
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let s = s.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.chunks(4) {
        let mut acc = 0u32;
        for &c in chunk {
            acc = (acc << 6) | val(c)?;
        }
        match chunk.len() {
            4 => out.extend_from_slice(&[(acc >> 16) as u8, (acc >> 8) as u8, acc as u8]),
            3 => out.extend_from_slice(&[(acc >> 10) as u8, (acc >> 2) as u8]),
            2 => out.push((acc >> 4) as u8),
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_auth_checks_bcrypt_hashes() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let cfg =
            WebConfig::parse(&format!("# users\nbasic_auth_users:\n  alice: '{hash}'\n")).unwrap();
        assert!(cfg.needs_auth());
        // "alice:s3cret", "alice:wrong", "bob:s3cret"
        assert!(cfg.allows(Some("Basic YWxpY2U6czNjcmV0")));
        assert!(cfg.allows(Some("Basic YWxpY2U6czNjcmV0")), "cached");
        assert!(!cfg.allows(Some("Basic YWxpY2U6d3Jvbmc=")));
        assert!(!cfg.allows(Some("Basic Ym9iOnMzY3JldA==")));
        assert!(!cfg.allows(Some("Bearer x")));
        assert!(!cfg.allows(None));
        assert!(WebConfig::parse("").unwrap().allows(None));
    }

    #[test]
    fn unsupported_or_bad_files_are_refused_in_one_sentence() {
        let e = WebConfig::parse("tls_server_config:\n  cert_file: a\n").unwrap_err();
        assert!(e
            .to_string()
            .contains("TLS (tls_server_config) is not supported"));
        let e = WebConfig::parse("basic_auth_users:\n  alice: plain\n").unwrap_err();
        assert_eq!(e.to_string(), "web config line 2: the password of 'alice' is not a bcrypt hash (make one with `htpasswd -nBC 10 \"\" | tr -d ':'`)");
        let e = WebConfig::parse("users:\n").unwrap_err();
        assert!(e
            .to_string()
            .starts_with("web config line 1: unknown section 'users'"));
    }

    #[test]
    fn base64_round_trips_rfc4648_vectors() {
        for (enc, dec) in [
            ("", ""),
            ("Zg==", "f"),
            ("Zm8=", "fo"),
            ("Zm9v", "foo"),
            ("Zm9vYg", "foob"),
        ] {
            assert_eq!(base64_decode(enc).unwrap(), dec.as_bytes());
        }
        assert!(base64_decode("Z").is_none());
        assert!(base64_decode("a*b=").is_none());
    }
}
