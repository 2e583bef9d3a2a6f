//! What every figure shares: tick values and their SI labels, axes (linear or log, with
//! "nice" ticks), text escaped and cut to fit, the decade test for a log scale, and the FNV-1a
//! hash that names a figure's elements.

/// FNV-1a: element ids from what a chart shows, unique within a page and stable across runs.
pub(super) const FNV_START: u64 = 0xcbf29ce484222325;
pub(super) fn fnv(h: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *h = (*h ^ u64::from(*b)).wrapping_mul(0x100000001b3);
    }
}

/// Whether positive values span a decade or more (a ratio of 10 or more between the largest
/// and the smallest) that a linear axis would flatten the small ones to zero.
pub fn spans_decades(values: impl IntoIterator<Item = f64>) -> bool {
    let (lo, hi) = values
        .into_iter()
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(l, h), v| (l.min(v), h.max(v)));
    lo.is_finite() && hi / lo >= 10.0
}

/// `text` cut with "…" to fit `width` pixels at about `per_char` pixels a character (SVG has
/// no text measurement; a title wider than its chart would run off both sides).
pub(super) fn fit(text: &str, width: f64, per_char: f64) -> String {
    let max = (width / per_char).floor().max(1.0) as usize;
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", cut.trim_end())
}

/// Escapes text for SVG/HTML content and attributes.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Tick labels with SI suffixes: 1500000 → "1.5M", 0.002 → "2m".
pub fn tick_label(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e12 {
        (v / 1e12, "T")
    } else if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else if a == 0.0 || a >= 0.1 {
        (v, "")
    } else if a >= 1e-4 {
        (v * 1e3, "m")
    } else {
        (v * 1e6, "µ")
    };
    let s = format!("{scaled:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{suffix}")
}

pub(super) struct Axis {
    pub lo: f64,
    pub hi: f64,
    pub log: bool,
    pub ticks: Vec<f64>,
}

impl Axis {
    pub fn fit(values: impl Iterator<Item = f64>, log: bool) -> Axis {
        let (mut lo, mut hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
            (l.min(v), h.max(v))
        });
        if !lo.is_finite() {
            (lo, hi) = if log { (1.0, 10.0) } else { (0.0, 1.0) };
        }
        if log {
            let (l, h) = (
                lo.log10().floor(),
                hi.log10().ceil().max(lo.log10().floor() + 1.0),
            );
            let decades = (h - l) as i32;
            let mut ticks = Vec::new();
            for e in l as i32..=h as i32 {
                for m in [1.0, 2.0, 5.0] {
                    let t = m * 10f64.powi(e);
                    if (m == 1.0 || decades <= 3) && t >= 10f64.powf(l) && t <= 10f64.powf(h) {
                        ticks.push(t);
                    }
                }
            }
            // The ends at the nearest 1-2-5 step outside the data rather than whole decades:
            // 1000 … 16000 spans 1000 … 20000, not … 100000 with 40% of the width empty.
            let steps = |e: f64| [1.0, 2.0, 5.0].map(|m| m * 10f64.powf(e));
            let lo = steps(l)
                .into_iter()
                .filter(|s| *s <= lo)
                .fold(10f64.powf(l), f64::max);
            let hi = steps(h - 1.0)
                .into_iter()
                .filter(|s| *s >= hi)
                .fold(10f64.powf(h), f64::min);
            ticks.retain(|t| *t >= lo && *t <= hi);
            return Axis { lo, hi, log, ticks };
        }
        if hi <= lo {
            let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
            (lo, hi) = (lo - pad, hi + pad);
        }
        let raw = (hi - lo) / 6.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 2.5, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| *s >= raw)
            .unwrap_or(10.0 * mag);
        let (lo, hi) = ((lo / step).floor() * step, (hi / step).ceil() * step);
        let n = ((hi - lo) / step).round() as usize;
        let ticks = (0..=n).map(|i| lo + i as f64 * step).collect();
        Axis { lo, hi, log, ticks }
    }

    pub fn frac(&self, v: f64) -> f64 {
        if self.log {
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }
}
