//! exporter-toolkit's `tls_server_config`, served with rustls: the certificate and key, the
//! client certificate policy (`client_auth_type` with `client_ca_file`), `min_version` and
//! `max_version`, `cipher_suites` in the order given (`prefer_server_cipher_suites`) and
//! `curve_preferences`, as far as rustls implements them. What it does not implement (TLS 1.0
//! and 1.1, CBC and RSA-key-exchange suites, P-521, accepting a client certificate without
//! verifying it, SAN allow-lists) is refused with the line that asks for it, never ignored.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{CipherSuite, NamedGroup, RootCertStore, ServerConfig, SupportedCipherSuite};

use crate::yaml::{Entry, Value};

/// PEM files are small; a larger one is not a certificate or key.
const PEM_LIMIT: u64 = 1 << 20;

/// Which client certificates are asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// `NoClientCert`.
    None,
    /// `VerifyClientCertIfGiven`: a client may send none; one it sends must verify.
    VerifyIfGiven,
    /// `RequireAndVerifyClientCert`.
    RequireAndVerify,
}

/// The settings as read, files not yet opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// The server's certificate chain, PEM (`cert_file`).
    pub cert_file: PathBuf,
    /// Its private key, PEM (`key_file`).
    pub key_file: PathBuf,
    /// Which client certificates are asked for (`client_auth_type`).
    pub client_auth: ClientAuth,
    /// The CA that signs client certificates, PEM (`client_ca_file`); needed to verify them.
    pub client_ca_file: Option<PathBuf>,
    /// TLS minor versions as exporter-toolkit names them: 12 or 13.
    pub min_version: u8,
    /// Highest TLS minor version, 12 or 13.
    pub max_version: u8,
    /// TLS 1.2 suites in the server's order of preference (empty: rustls's defaults).
    pub cipher_suites: Vec<CipherSuite>,
    /// Whether the server's suite order wins over the client's.
    pub prefer_server_cipher_suites: bool,
    /// Key-exchange groups in order (empty: rustls's defaults).
    pub curves: Vec<NamedGroup>,
}

/// Why the TLS configuration could not be made from its files.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A named file could not be read.
    #[error(transparent)]
    File(#[from] tcptune_kernel::file::FileError),
    /// The certificate file has no PEM certificate (the path).
    #[error("the TLS certificate file {0} holds no PEM certificate; give the server's certificate (chain) in PEM")]
    NoCert(String),
    /// The key file has no usable private key (the path).
    #[error("the TLS key file {0} holds no unencrypted PEM private key (PKCS#8, RSA or EC); give the certificate's key")]
    NoKey(String),
    /// The client CA file has no usable CA certificate (the path, why).
    #[error("the client CA file {0} holds no usable CA certificate ({1}); give the CA that signs the clients' certificates, in PEM")]
    BadCa(String, String),
    /// rustls refused the certificate with its key (the certificate's path, rustls's reason).
    #[error("rustls refused the TLS certificate {0} with its key: {1}; check that the key file holds this certificate's key")]
    Rejected(String, String),
}

/// exporter-toolkit's (Go's) TLS 1.2 suite names that rustls implements.
const SUITES: [(&str, CipherSuite); 8] = [
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    // Go's older names of the same two.
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// TLS 1.3 suites: Go ignores them in `cipher_suites` (TLS 1.3's are always on), so do we.
const TLS13_SUITES: [&str; 3] = [
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

const CURVES: [(&str, NamedGroup); 3] = [
    ("CurveP256", NamedGroup::secp256r1),
    ("CurveP384", NamedGroup::secp384r1),
    ("X25519", NamedGroup::X25519),
];

type LineError = (usize, String);

fn version(line: usize, v: &str) -> Result<u8, LineError> {
    match v {
        "TLS12" => Ok(12),
        "TLS13" => Ok(13),
        "TLS10" | "TLS11" => Err((line, format!("{v} is not implemented by rustls, which serves TLS 1.2 and 1.3 only; use TLS12 or TLS13"))),
        _ => Err((line, format!("'{v}' is not a TLS version; use TLS12 or TLS13"))),
    }
}

fn client_auth(line: usize, v: &str) -> Result<ClientAuth, LineError> {
    match v {
        "NoClientCert" | "" => Ok(ClientAuth::None),
        "VerifyClientCertIfGiven" => Ok(ClientAuth::VerifyIfGiven),
        "RequireAndVerifyClientCert" => Ok(ClientAuth::RequireAndVerify),
        "RequestClientCert" | "RequireAnyClientCert" => Err((line, format!("client_auth_type {v} accepts a certificate without verifying it, which proves nothing and is not served; use RequireAndVerifyClientCert (or VerifyClientCertIfGiven) with client_ca_file"))),
        _ => Err((line, format!("'{v}' is not a client_auth_type; use NoClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert"))),
    }
}

fn suites(items: &[(usize, String)]) -> Result<Vec<CipherSuite>, LineError> {
    let mut out = Vec::new();
    for (line, name) in items {
        if TLS13_SUITES.contains(&name.as_str()) {
            continue;
        }
        let Some(&(_, s)) = SUITES.iter().find(|(n, _)| n == name) else {
            let names: Vec<&str> = SUITES[..6].iter().map(|(n, _)| *n).collect();
            return Err((*line, format!("cipher suite '{name}' is not one rustls implements (no CBC or RSA key exchange); use some of {}", names.join(", "))));
        };
        if !out.contains(&s) {
            out.push(s);
        }
    }
    Ok(out)
}

fn curves(items: &[(usize, String)]) -> Result<Vec<NamedGroup>, LineError> {
    items
        .iter()
        .map(|(line, name)| {
            CURVES
                .iter()
                .find(|(n, _)| n == name)
                .map(|&(_, g)| g)
                .ok_or_else(|| (*line, format!("curve '{name}' is not one rustls implements here; use CurveP256, CurveP384 or X25519")))
        })
        .collect()
}

fn scalar(e: &Entry) -> Result<&str, LineError> {
    match &e.value {
        Value::Scalar(s) => Ok(s),
        _ => Err((e.line, format!("'{}' takes one value on its line", e.key))),
    }
}

fn list(e: &Entry) -> Result<&[(usize, String)], LineError> {
    match &e.value {
        Value::List(l) => Ok(l),
        Value::Scalar(s) if s.is_empty() => Ok(&[]),
        _ => Err((
            e.line,
            format!("'{}' takes a list ('- item' lines or [a, b])", e.key),
        )),
    }
}

/// Reads the `tls_server_config` section (`line` is its own line).
pub fn settings(line: usize, entries: &[Entry]) -> Result<TlsSettings, LineError> {
    let mut s = TlsSettings {
        cert_file: PathBuf::new(),
        key_file: PathBuf::new(),
        client_auth: ClientAuth::None,
        client_ca_file: None,
        min_version: 12,
        max_version: 13,
        cipher_suites: Vec::new(),
        prefer_server_cipher_suites: true,
        curves: Vec::new(),
    };
    for e in entries {
        match e.key.as_str() {
            "cert_file" => s.cert_file = scalar(e)?.into(),
            "key_file" => s.key_file = scalar(e)?.into(),
            "client_ca_file" => s.client_ca_file = Some(scalar(e)?.into()),
            "client_auth_type" => s.client_auth = client_auth(e.line, scalar(e)?)?,
            "min_version" => s.min_version = version(e.line, scalar(e)?)?,
            "max_version" => s.max_version = version(e.line, scalar(e)?)?,
            "cipher_suites" => s.cipher_suites = suites(list(e)?)?,
            "curve_preferences" => s.curves = curves(list(e)?)?,
            "prefer_server_cipher_suites" => {
                s.prefer_server_cipher_suites = match scalar(e)? {
                    "true" => true,
                    "false" => false,
                    v => return Err((e.line, format!("prefer_server_cipher_suites is true or false, not '{v}'"))),
                }
            }
            "client_allowed_sans" if list(e)?.is_empty() => {}
            "client_allowed_sans" => return Err((e.line, "client_allowed_sans is not supported by tcptune; leave it out and give the allowed clients' certificates their own CA (client_ca_file)".into())),
            "cert" | "key" | "client_ca" => return Err((e.line, format!("inline '{}' is not supported by tcptune; put it in a file and use {}_file", e.key, e.key))),
            k => return Err((e.line, format!("unknown key '{k}' in tls_server_config"))),
        }
    }
    if s.cert_file.as_os_str().is_empty() || s.key_file.as_os_str().is_empty() {
        return Err((
            line,
            "tls_server_config needs cert_file and key_file".into(),
        ));
    }
    if s.min_version > s.max_version {
        return Err((line, "min_version is above max_version".into()));
    }
    if s.client_auth != ClientAuth::None && s.client_ca_file.is_none() {
        return Err((line, "client_auth_type that verifies certificates needs client_ca_file, the CA that signs them".into()));
    }
    Ok(s)
}

fn read(dir: &Path, file: &Path, what: &str) -> Result<(Vec<u8>, String), TlsError> {
    let path = dir.join(file);
    let bytes = tcptune_kernel::file::read_regular_limited(&path, PEM_LIMIT, what)?;
    Ok((bytes, path.display().to_string()))
}

/// The provider with the suites and groups asked for, in their order.
fn provider(s: &TlsSettings) -> CryptoProvider {
    let mut p = ring::default_provider();
    if !s.cipher_suites.is_empty() {
        let all = std::mem::take(&mut p.cipher_suites);
        let tls13 = all
            .iter()
            .filter(|c| matches!(c, SupportedCipherSuite::Tls13(_)));
        let asked = s
            .cipher_suites
            .iter()
            .filter_map(|want| all.iter().find(|c| c.suite() == *want));
        p.cipher_suites = tls13.chain(asked).copied().collect();
    }
    if !s.curves.is_empty() {
        let all = std::mem::take(&mut p.kx_groups);
        p.kx_groups = s
            .curves
            .iter()
            .filter_map(|want| all.iter().find(|g| g.name() == *want).copied())
            .collect();
    }
    p
}

/// The rustls configuration, its files read relative to `dir` (the web configuration's own
/// directory, as exporter-toolkit resolves them).
pub fn server_config(s: &TlsSettings, dir: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let (pem, cert_path) = read(dir, &s.cert_file, "TLS certificate file")?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .filter_map(Result::ok)
        .collect();
    if chain.is_empty() {
        return Err(TlsError::NoCert(cert_path));
    }
    let (pem, key_path) = read(dir, &s.key_file, "TLS key file")?;
    let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|_| TlsError::NoKey(key_path))?;
    let provider = Arc::new(provider(s));
    let versions: Vec<_> = [(12, &rustls::version::TLS12), (13, &rustls::version::TLS13)]
        .into_iter()
        .filter(|(v, _)| (s.min_version..=s.max_version).contains(v))
        .map(|(_, v)| v)
        .collect();
    let rejected = |e: &dyn std::fmt::Display| TlsError::Rejected(cert_path.clone(), e.to_string());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| rejected(&e))?;
    let builder = match (&s.client_ca_file, s.client_auth) {
        (Some(ca), ClientAuth::VerifyIfGiven | ClientAuth::RequireAndVerify) => {
            let (pem, ca_path) = read(dir, ca, "client CA file")?;
            let mut roots = RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(&pem) {
                let c = c.map_err(|e| TlsError::BadCa(ca_path.clone(), e.to_string()))?;
                roots
                    .add(c)
                    .map_err(|e| TlsError::BadCa(ca_path.clone(), e.to_string()))?;
            }
            let mut v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            if s.client_auth == ClientAuth::VerifyIfGiven {
                v = v.allow_unauthenticated();
            }
            let v = v
                .build()
                .map_err(|e| TlsError::BadCa(ca_path, e.to_string()))?;
            builder.with_client_cert_verifier(v)
        }
        _ => builder.with_no_client_auth(),
    };
    let mut cfg = builder
        .with_single_cert(chain, key)
        .map_err(|e| rejected(&e))?;
    cfg.ignore_client_order = s.prefer_server_cipher_suites;
    Ok(Arc::new(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_section(text: &str) -> Result<TlsSettings, LineError> {
        let top = crate::yaml::parse(text).unwrap();
        match &top[0].value {
            Value::Map(m) => settings(top[0].line, m),
            _ => panic!("not a section"),
        }
    }

    #[test]
    fn exporter_toolkit_settings_are_read() {
        let s = read_section("tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n  min_version: TLS13\n  cipher_suites:\n    - TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384\n    - TLS_AES_128_GCM_SHA256\n    - TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305\n  prefer_server_cipher_suites: false\n  curve_preferences: [X25519, CurveP256]\n  client_allowed_sans: []\n").unwrap();
        assert_eq!(s.cert_file, Path::new("c.pem"));
        assert_eq!(s.client_auth, ClientAuth::RequireAndVerify);
        assert_eq!((s.min_version, s.max_version), (13, 13));
        assert_eq!(
            s.cipher_suites,
            [
                CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
                CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
            ]
        );
        assert!(!s.prefer_server_cipher_suites);
        assert_eq!(s.curves, [NamedGroup::X25519, NamedGroup::secp256r1]);
        let p = provider(&s);
        assert_eq!(p.kx_groups.len(), 2);
        let tls12: Vec<_> = p
            .cipher_suites
            .iter()
            .filter(|c| matches!(c, SupportedCipherSuite::Tls12(_)))
            .map(|c| c.suite())
            .collect();
        assert_eq!(tls12, s.cipher_suites, "the order given");
    }

    #[test]
    fn what_rustls_cannot_honour_is_refused_with_its_line() {
        let err = |extra: &str| {
            read_section(&format!(
                "tls_server_config:\n  cert_file: c\n  key_file: k\n{extra}"
            ))
            .unwrap_err()
        };
        let e = err("  min_version: TLS10\n");
        assert_eq!(e.0, 4);
        assert!(e.1.contains("TLS 1.2 and 1.3 only"), "{}", e.1);
        assert!(err("  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA]\n")
            .1
            .contains("no CBC"));
        assert!(err("  curve_preferences: [CurveP521]\n")
            .1
            .contains("CurveP256, CurveP384 or X25519"));
        assert!(err("  client_auth_type: RequireAnyClientCert\n")
            .1
            .contains("without verifying"));
        assert!(err("  client_auth_type: RequireAndVerifyClientCert\n")
            .1
            .contains("needs client_ca_file"));
        assert!(err("  client_allowed_sans: [a]\n")
            .1
            .contains("not supported"));
        assert!(err("  cert: x\n").1.contains("use cert_file"));
        assert!(err("  min_version: TLS13\n  max_version: TLS12\n")
            .1
            .contains("above max_version"));
        assert_eq!(
            err("  ciphers: x\n").1,
            "unknown key 'ciphers' in tls_server_config"
        );
        let e = read_section("tls_server_config:\n  cert_file: c\n").unwrap_err();
        assert_eq!(
            e,
            (1, "tls_server_config needs cert_file and key_file".into())
        );
    }
}
