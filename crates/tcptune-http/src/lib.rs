//! The small HTTP edge of tcptune's servers (`tcptune exporter`, `watch --web`): binding with
//! one-sentence errors and a warning when a binding reaches beyond loopback ([`listen`]), a few
//! serving threads that check access and pass requests to the caller's handler
//! ([`serve`](mod@serve); [`reply`] builds the answers), and the web configuration file Prometheus
//! exporters share ([`webconfig`]: a YAML subset ([`yaml`]), basic auth ([`auth`]), TLS with rustls
//! ([`tls`], served through [`bridge`]) and response headers; re-read when it changes,
//! [`reload`]). Handlers see tiny_http's requests (re-exported as [`tiny_http`]) and answer its
//! responses; nothing in a handler depends on how the bytes travel.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
pub mod bridge;
pub mod listen;
pub mod reload;
pub mod reply;
pub mod serve;
pub mod tls;
pub mod webconfig;
pub mod yaml;

pub use listen::{bind, exposure_warning, ListenError};
pub use reload::{Access, WebConfigFile};
pub use reply::{body, header, path, query, request_header, text, Reply};
pub use serve::{serve, Handler, Options, Serving};
pub use tiny_http;
pub use webconfig::{WebConfig, WebConfigError};
