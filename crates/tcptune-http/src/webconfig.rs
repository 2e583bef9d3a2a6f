//! `--web-config FILE`: the web configuration file Prometheus exporters share
//! (exporter-toolkit's format): `tls_server_config` (served with rustls, [`crate::tls`]),
//! `basic_auth_users` (bcrypt hashes, [`crate::auth`]) and `http_server_config`'s response
//! headers. Whatever tcptune cannot honour (HTTP/2, a TLS option rustls lacks) is refused with
//! its line rather than ignored, so nobody believes a setting is in force when it is not.
//! Files it names are read relative to its own directory, as exporter-toolkit does.

use std::path::Path;
use std::sync::Arc;

use crate::auth::BasicAuth;
use crate::reply::{header, Reply};
use crate::tls::{server_config, settings, TlsError};
use crate::yaml::{Entry, Value};

/// A web configuration file is small; anything larger is not one.
const FILE_LIMIT: u64 = 1 << 20;

/// Why a web configuration was refused: one sentence naming the line or file.
#[derive(Debug, thiserror::Error)]
pub enum WebConfigError {
    /// A line is not what the web configuration allows.
    #[error("web config line {line}: {why}")]
    Line {
        /// Line number, 1-based.
        line: usize,
        /// What is wrong, and the fix.
        why: String,
    },
    /// The file could not be read.
    #[error(transparent)]
    File(#[from] tcptune_kernel::file::FileError),
    /// The file is not UTF-8 (the path).
    #[error("the web config {0} is not UTF-8 text")]
    NotText(String),
    /// The TLS settings are unusable.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

impl From<crate::yaml::Error> for WebConfigError {
    fn from((line, why): crate::yaml::Error) -> Self {
        WebConfigError::Line { line, why }
    }
}

/// The parsed configuration.
#[derive(Debug, Default)]
pub struct WebConfig {
    auth: BasicAuth,
    tls: Option<Arc<rustls::ServerConfig>>,
    headers: Vec<(String, String)>,
    /// The files it named, as read (certificate, key, client CA).
    files: Vec<std::path::PathBuf>,
}

/// The response headers exporter-toolkit sets, and the values it allows where it checks them.
const HEADERS: [(&str, &[&str]); 5] = [
    ("Content-Security-Policy", &[]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-XSS-Protection", &[]),
    ("Strict-Transport-Security", &[]),
];

fn section(e: &Entry) -> Result<&[Entry], WebConfigError> {
    match &e.value {
        Value::Map(m) => Ok(m),
        Value::Scalar(s) if s.is_empty() => Ok(&[]),
        _ => Err((
            e.line,
            format!("'{}' holds 'key: value' lines, indented under it", e.key),
        )
            .into()),
    }
}

fn http_server_config(
    entries: &[Entry],
    out: &mut Vec<(String, String)>,
) -> Result<(), WebConfigError> {
    for e in entries {
        match (e.key.as_str(), &e.value) {
            ("http2", Value::Scalar(v)) if v == "false" => {}
            ("http2", _) => {
                return Err((
                    e.line,
                    "tcptune serves HTTP/1.1 only; set http2: false or leave it out".to_string(),
                )
                    .into())
            }
            ("headers", _) => {
                for h in section(e)? {
                    let Some((name, allowed)) =
                        HEADERS.iter().find(|(n, _)| n.eq_ignore_ascii_case(&h.key))
                    else {
                        let names: Vec<&str> = HEADERS.iter().map(|(n, _)| *n).collect();
                        return Err((
                            h.line,
                            format!(
                                "header '{}' cannot be set; the web configuration sets {}",
                                h.key,
                                names.join(", ")
                            ),
                        )
                            .into());
                    };
                    let Value::Scalar(v) = &h.value else {
                        return Err(
                            (h.line, format!("'{name}' takes one value on its line")).into()
                        );
                    };
                    if v.is_empty() {
                        continue;
                    }
                    if !allowed.is_empty() && !allowed.iter().any(|a| a.eq_ignore_ascii_case(v)) {
                        return Err((
                            h.line,
                            format!("{name} is {}, not '{v}'", allowed.join(" or ")),
                        )
                            .into());
                    }
                    out.push((name.to_string(), v.clone()));
                }
            }
            (k, _) => {
                return Err((
                    e.line,
                    format!(
                        "unknown key '{k}' in http_server_config; tcptune reads http2 and headers"
                    ),
                )
                    .into())
            }
        }
    }
    Ok(())
}

impl WebConfig {
    /// Reads the file at `path` (files it names are relative to its directory).
    pub fn load(path: &Path) -> Result<WebConfig, WebConfigError> {
        let bytes = tcptune_kernel::file::read_regular_limited(path, FILE_LIMIT, "web config")?;
        let text = String::from_utf8(bytes)
            .map_err(|_| WebConfigError::NotText(path.display().to_string()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        WebConfig::parse_in(&text, dir)
    }

    /// Parses a configuration whose files are relative to the working directory.
    pub fn parse(text: &str) -> Result<WebConfig, WebConfigError> {
        WebConfig::parse_in(text, Path::new("."))
    }

    /// Parses a configuration whose files are relative to `dir`, and reads them.
    pub fn parse_in(text: &str, dir: &Path) -> Result<WebConfig, WebConfigError> {
        let mut cfg = WebConfig::default();
        for e in crate::yaml::parse(text)? {
            match e.key.as_str() {
                "basic_auth_users" => {
                    for u in section(&e)? {
                        let Value::Scalar(hash) = &u.value else {
                            return Err((u.line, format!("the password of '{}' is one bcrypt hash on its line", u.key)).into());
                        };
                        cfg.auth.add(&u.key, hash).map_err(|why| WebConfigError::Line { line: u.line, why })?;
                    }
                }
                "tls_server_config" => {
                    let s = settings(e.line, section(&e)?)?;
                    cfg.tls = Some(server_config(&s, dir)?);
                    let named = [Some(&s.cert_file), Some(&s.key_file), s.client_ca_file.as_ref()];
                    cfg.files.extend(named.into_iter().flatten().map(|f| dir.join(f)));
                }
                "http_server_config" => http_server_config(section(&e)?, &mut cfg.headers)?,
                k => return Err((e.line, format!("unknown section '{k}'; tcptune reads tls_server_config, http_server_config and basic_auth_users")).into()),
            }
        }
        Ok(cfg)
    }

    /// The files it named and read (certificate, key, client CA), relative ones joined to
    /// its directory.
    pub fn files(&self) -> &[std::path::PathBuf] {
        &self.files
    }

    /// Whether it serves TLS.
    pub fn serves_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The rustls configuration, when it serves TLS (for a server that runs its own loop over
    /// [`crate::bridge::Bridge`], as `watch --web` does for its streams).
    pub fn tls_config(&self) -> Option<Arc<rustls::ServerConfig>> {
        self.tls.clone()
    }

    /// A reply with the configured response headers added.
    pub fn with_headers(&self, mut reply: Reply) -> Reply {
        for (name, value) in &self.headers {
            reply.add_header(header(name, value));
        }
        reply
    }

    /// Whether requests must authenticate.
    pub fn needs_auth(&self) -> bool {
        self.auth.needs_auth()
    }

    /// Whether an `Authorization` header's Basic credentials match a user's hash.
    pub fn allows(&self, header: Option<&str>) -> bool {
        self.auth.allows(header)
    }
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
        assert!(!WebConfig::parse("basic_auth_users:\n")
            .unwrap()
            .needs_auth());
    }

    #[test]
    fn unsupported_or_bad_files_are_refused_in_one_sentence() {
        let e = WebConfig::parse("basic_auth_users:\n  alice: plain\n").unwrap_err();
        assert_eq!(e.to_string(), "web config line 2: the password of 'alice' is not a bcrypt hash (make one with `htpasswd -nBC 10 \"\" | tr -d ':'`)");
        let e = WebConfig::parse("users:\n").unwrap_err();
        assert!(e
            .to_string()
            .starts_with("web config line 1: unknown section 'users'"));
        let e = WebConfig::parse("http_server_config:\n  http2: true\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "web config line 2: tcptune serves HTTP/1.1 only; set http2: false or leave it out"
        );
        let e = WebConfig::parse("http_server_config:\n  headers:\n    X-Frame-Options: allow\n")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "web config line 3: X-Frame-Options is deny or sameorigin, not 'allow'"
        );
        let e = WebConfig::parse("http_server_config:\n  headers:\n    Server: x\n").unwrap_err();
        assert!(e
            .to_string()
            .starts_with("web config line 3: header 'Server' cannot be set"));
        let e = WebConfig::parse(
            "tls_server_config:\n  cert_file: /nonexistent/tt-h6.pem\n  key_file: k\n",
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot read the TLS certificate file /nonexistent/tt-h6.pem: "),
            "{e}"
        );
    }

    #[test]
    fn response_headers_are_added() {
        let cfg = WebConfig::parse("http_server_config:\n  http2: false\n  headers:\n    x-frame-options: deny\n    Content-Security-Policy: \"default-src 'self'\"\n    X-XSS-Protection: ''\n").unwrap();
        let reply = cfg.with_headers(crate::text(200, "x"));
        let got: Vec<String> = reply
            .headers()
            .iter()
            .map(|h| format!("{}: {}", h.field, h.value))
            .filter(|h| !h.starts_with("Content-Type"))
            .collect();
        assert_eq!(
            got,
            [
                "X-Frame-Options: deny",
                "Content-Security-Policy: default-src 'self'"
            ]
        );
    }
}
