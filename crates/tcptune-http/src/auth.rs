//! exporter-toolkit's `basic_auth_users`: user names mapped to bcrypt hashes, checked against a
//! request's `Authorization: Basic` header. bcrypt is slow on purpose, so credentials already
//! verified are remembered (only correct ones: an attacker cannot grow the cache).

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

/// The users and the credentials already verified.
#[derive(Debug, Default)]
pub struct BasicAuth {
    /// User name → bcrypt hash.
    users: BTreeMap<String, String>,
    /// `Authorization` header values already verified.
    verified: Mutex<HashSet<String>>,
}

/// Verified credentials remembered at most.
const VERIFIED_CACHE: usize = 64;

impl BasicAuth {
    /// Adds a user; the sentence says why not (a name with ':', not a bcrypt hash, twice).
    pub fn add(&mut self, user: &str, hash: &str) -> Result<(), String> {
        if user.is_empty() || user.contains(':') {
            return Err(format!("user name '{user}' is empty or has a ':'"));
        }
        if hash.parse::<bcrypt::HashParts>().is_err() {
            return Err(format!("the password of '{user}' is not a bcrypt hash (make one with `htpasswd -nBC 10 \"\" | tr -d ':'`)"));
        }
        if self
            .users
            .insert(user.to_string(), hash.to_string())
            .is_some()
        {
            return Err(format!("user '{user}' is listed twice"));
        }
        Ok(())
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
