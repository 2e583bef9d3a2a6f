//! The page's update latency (event to pixel), read from `watch --web`'s page in headless
//! Chromium: the page notes, for each streamed update, the time from when its sample or event
//! was taken (the server's CLOCK_REALTIME stamp) to the animation frame after the redraw that
//! drew it (`window.tcptuneLatency()` in app.js). Shared by tests/web_latency.rs and
//! `bench/web` (examples/bench_web.rs includes this file).

#![allow(dead_code)] // each user takes the part it needs

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tcptune_testkit::cdp::Page;

/// What the page measured while it streamed.
#[derive(Debug)]
pub struct Latency {
    /// Each drawn update's latency, ms.
    pub ms: Vec<f64>,
    /// Updates the page received.
    pub updates: u64,
    /// From the first update received to the last, ms.
    pub span_ms: f64,
    /// Updates never drawn as they came (the display was frozen by a trigger).
    pub undrawn: u64,
}

impl Latency {
    /// The `q` quantile (nearest rank) of the latencies, ms.
    pub fn quantile(&self, q: f64) -> f64 {
        let mut v = self.ms.clone();
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            return f64::NAN;
        }
        let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
        v[rank - 1]
    }

    /// Updates received per second while streaming.
    pub fn per_s(&self) -> f64 {
        if self.span_ms > 0.0 {
            (self.updates.saturating_sub(1)) as f64 / (self.span_ms / 1e3)
        } else {
            0.0
        }
    }

    /// One line: p50, p95, max, updates/s.
    pub fn summary(&self) -> String {
        format!(
            "update latency p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms over {} drawn updates; {:.1} updates/s received ({} not drawn: frozen)",
            self.quantile(0.5),
            self.quantile(0.95),
            self.quantile(1.0),
            self.ms.len(),
            self.per_s(),
            self.undrawn
        )
    }
}

/// Opens `base/?conn=ID&for=SECONDS` (base `http://ADDR`) and waits for its stream to end
/// (plus a margin); what the page measured.
pub fn measure(exe: &Path, profile: &Path, base: &str, id: &str, secs: u32) -> Latency {
    let url = format!("{base}/?conn={id}&for={secs}");
    let mut page = Page::open(exe, profile, &url, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("opening {url} in chromium: {e}"));
    // The page's hook exists once app.js ran; its promise resolves when the stream has ended
    // and the last redraw was painted.
    let expr = "new Promise((r) => { const f = () => window.tcptuneEnded ? window.tcptuneEnded.then(r) : setTimeout(f, 20); f(); }).then(() => JSON.stringify(window.tcptuneLatency()))";
    let within = Duration::from_secs(u64::from(secs) + 60);
    let answer = page
        .evaluate(expr, within)
        .unwrap_or_else(|e| panic!("reading the page's latency: {e}"));
    let v: Value = serde_json::from_str(&answer).unwrap();
    let text = v["result"]["result"]["value"]
        .as_str()
        .unwrap_or_else(|| panic!("the page gave no figures: {answer}"));
    let l: Value = serde_json::from_str(text).unwrap();
    Latency {
        ms: l["ms"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_f64)
            .collect(),
        updates: l["updates"].as_u64().unwrap_or(0),
        span_ms: l["span_ms"].as_f64().unwrap_or(0.0),
        undrawn: l["undrawn"].as_u64().unwrap_or(0),
    }
}
