//! The engine's context as a test records it beside its diagnosis, so that a recorded
//! `tcptune test --json` document can be judged again from its samples alone (a replay): every
//! field of [`Context`] in a serializable form, and back.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_model::kernel::{CongestionControl, KernelSource, KernelVersion};
use tcptune_model::{Bytes, Rate};

use crate::advice::KnownSettings;
use crate::engine::Context;

/// What the diagnosis of one direction knew besides the samples: [`Context`], field by field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ContextRecord {
    /// The bottleneck's line rate (`--path-rate`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_rate_bps: Option<Rate>,
    /// Link framing per packet charged against the line rate.
    pub framing_bytes: u32,
    /// The socket buffer the test asked for (`-w`), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_bytes: Option<u64>,
    /// The sender's rate cap (`-b`), per stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_cap_bps: Option<Rate>,
    /// The sender's congestion control, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<CongestionControl>,
    /// The kernel whose buffer arithmetic the recommendations used, and where it came from.
    pub kernel: KernelVersion,
    /// Where `kernel` came from (the running kernel, or assumed).
    pub kernel_source: KernelSource,
    /// Parallel streams in this direction.
    pub streams: u32,
    /// The settings in effect where they were known.
    #[serde(default)]
    pub settings: KnownSettings,
    /// Buffers fitted to the path were asked for (`--fit`/`--memory`).
    #[serde(default)]
    pub fit: bool,
    /// The sender was a bulk writer that always had more to send.
    #[serde(default)]
    pub bulk_sender: bool,
    /// The sender's write size (`-l`), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_bytes: Option<u64>,
    /// The sender sent with zero copy (`-Z`).
    #[serde(default)]
    pub zerocopy: bool,
    /// CPUs of the sending host, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<u32>,
    /// The receiver reads as fast as it can (absent in older records: false).
    #[serde(default)]
    pub bulk_receiver: bool,
    /// Both ends on one host over loopback (absent in older records: false).
    #[serde(default)]
    pub loopback: bool,
}

impl From<&Context> for ContextRecord {
    fn from(c: &Context) -> Self {
        ContextRecord {
            path_rate_bps: c.path_rate,
            framing_bytes: c.framing_bytes,
            window_bytes: c.window.map(Bytes::get),
            rate_cap_bps: c.rate_cap,
            congestion: c.congestion,
            kernel: c.kernel,
            kernel_source: c.kernel_source,
            streams: c.streams,
            settings: c.settings.clone(),
            fit: c.fit,
            bulk_sender: c.bulk_sender,
            write_bytes: c.write_bytes,
            zerocopy: c.zerocopy,
            cores: c.cores,
            bulk_receiver: c.bulk_receiver,
            loopback: c.loopback,
        }
    }
}

impl From<&ContextRecord> for Context {
    fn from(r: &ContextRecord) -> Self {
        Context {
            path_rate: r.path_rate_bps,
            framing_bytes: r.framing_bytes,
            window: r.window_bytes.map(Bytes::new),
            rate_cap: r.rate_cap_bps,
            congestion: r.congestion,
            kernel: r.kernel,
            kernel_source: r.kernel_source,
            streams: r.streams,
            settings: r.settings.clone(),
            fit: r.fit,
            bulk_sender: r.bulk_sender,
            write_bytes: r.write_bytes,
            zerocopy: r.zerocopy,
            cores: r.cores,
            bulk_receiver: r.bulk_receiver,
            loopback: r.loopback,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advice::HostSettings;

    #[test]
    fn a_context_survives_json_and_back() {
        let ctx = Context {
            path_rate: Some(Rate::from_bps(1e8)),
            framing_bytes: 14,
            window: Some(Bytes::new(262_144)),
            rate_cap: Some(Rate::from_bps(2e7)),
            congestion: Some(CongestionControl::Cubic),
            kernel: KernelVersion::new(6, 18),
            kernel_source: KernelSource::Detected,
            streams: 2,
            settings: KnownSettings {
                sender: Some(HostSettings {
                    tcp_rmem: Some([4096, 131_072, 33_554_432]),
                    congestion_control: Some("bbr".into()),
                    ..HostSettings::default()
                }),
                receiver: None,
            },
            fit: true,
            bulk_sender: true,
            write_bytes: Some(131_072),
            zerocopy: true,
            cores: Some(2),
            bulk_receiver: true,
            loopback: true,
        };
        let json = serde_json::to_string(&ContextRecord::from(&ctx)).unwrap();
        let back: ContextRecord = serde_json::from_str(&json).unwrap();
        let again = Context::from(&back);
        // Context has no PartialEq: compare through the record, which names every field.
        assert_eq!(ContextRecord::from(&again), ContextRecord::from(&ctx));
        assert_eq!(again.window, Some(Bytes::new(262_144)));
        assert_eq!(again.congestion, Some(CongestionControl::Cubic));
        assert_eq!(again.kernel_source, KernelSource::Detected);
    }
}
