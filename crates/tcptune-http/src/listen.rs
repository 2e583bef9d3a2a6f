//! Binding the listener, so a port in use or an address that is not this host's is one clear
//! sentence before anything is served, and saying what a binding beyond loopback exposes.

use std::io;
use std::net::{SocketAddr, TcpListener};

use crate::webconfig::WebConfig;

/// Why the listener could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// Another socket holds the port.
    #[error("cannot listen on {0}: the port is in use; pick another with --listen ADDR:PORT")]
    InUse(SocketAddr),
    /// The address is not assigned to any interface here.
    #[error("cannot listen on {0}: the address is not one of this host's; use 127.0.0.1:PORT or an address `ip -br addr` lists")]
    NotHere(SocketAddr),
    /// Any other bind or listen failure.
    #[error("cannot listen on {0}: {1}")]
    Other(SocketAddr, io::Error),
}

/// Binds the listener.
pub fn bind(addr: SocketAddr) -> Result<TcpListener, ListenError> {
    TcpListener::bind(addr).map_err(|e| match e.kind() {
        io::ErrorKind::AddrInUse => ListenError::InUse(addr),
        io::ErrorKind::AddrNotAvailable => ListenError::NotHere(addr),
        _ => ListenError::Other(addr, e),
    })
}

/// The warning to print when `addr` serves beyond this host without both TLS and basic auth
/// (`None` on loopback, or when both are on). The pages show peer addresses and what limits
/// them, so widening the default is allowed but never silent.
pub fn exposure_warning(addr: SocketAddr, web: &WebConfig) -> Option<String> {
    if addr.ip().is_loopback() {
        return None;
    }
    let missing: Vec<&str> = [
        (!web.serves_tls()).then_some("TLS (tls_server_config)"),
        (!web.needs_auth()).then_some("basic auth (basic_auth_users)"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if missing.is_empty() {
        return None;
    }
    Some(format!(
        "warning: listening on {addr} serves other hosts without {}; add {} to a --web-config file, or listen on 127.0.0.1",
        missing.join(" or "),
        if missing.len() == 1 { "it" } else { "them" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_in_use_is_one_sentence() {
        let l = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = l.local_addr().unwrap();
        let e = bind(addr).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "cannot listen on {addr}: the port is in use; pick another with --listen ADDR:PORT"
            )
        );
    }

    #[test]
    fn widening_without_protection_is_warned() {
        let open = WebConfig::default();
        assert_eq!(
            exposure_warning("127.0.0.1:1".parse().unwrap(), &open),
            None
        );
        assert_eq!(exposure_warning("[::1]:1".parse().unwrap(), &open), None);
        let w = exposure_warning("0.0.0.0:19241".parse().unwrap(), &open).unwrap();
        assert_eq!(w, "warning: listening on 0.0.0.0:19241 serves other hosts without TLS (tls_server_config) or basic auth (basic_auth_users); add them to a --web-config file, or listen on 127.0.0.1");
        let hash = bcrypt::hash("x", 4).unwrap();
        let auth = WebConfig::parse(&format!("basic_auth_users:\n  a: '{hash}'\n")).unwrap();
        let w = exposure_warning("[::]:1".parse().unwrap(), &auth).unwrap();
        assert!(w.contains("without TLS (tls_server_config); add it"), "{w}");
    }
}
