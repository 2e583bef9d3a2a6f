//! The models' bounds for a flow's evidence: window/RTT, the loss models, the path's payload.

use super::*;

pub(super) fn bound(model: &str, rate: Rate, inputs: String, achieved: Rate) -> Bound {
    Bound {
        model: model.into(),
        rate_bps: rate,
        inputs,
        achieved_fraction: if rate.bps() > 0.0 {
            achieved.bps() / rate.bps()
        } else {
            0.0
        },
    }
}

/// The models' bounds for the evidence: window/RTT, Mathis and PFTK at the measured loss, and
/// the path's payload rate; with the models left out because their assumptions do not hold.
/// The window's bound is over the minimum RTT (the most that window can carry: an RTT taken
/// under load would give less than the flow may carry); the loss models only for a loss-based
/// congestion control.
pub fn bounds(e: &Evidence, ctx: &Context, rto: Option<Dur>) -> (Vec<Bound>, Vec<NotShown>) {
    let achieved = e.achieved_bps.unwrap_or(Rate::from_bps(0.0));
    let mut out = Vec::new();
    let mut not_shown = Vec::new();
    if let (Some(w), Some(rtt)) = (e.peer_window_bytes, e.min_rtt_s.or(e.rtt_s)) {
        if rtt > Dur::ZERO {
            let who = if e.from_receiver {
                "window advertised"
            } else {
                "receiver's window"
            };
            let which = if e.min_rtt_s.is_some() {
                "min RTT"
            } else {
                "RTT"
            };
            out.push(bound(
                "window/RTT",
                Rate::from_bytes_per(Bytes::new(w), rtt),
                format!("{who} {} / {which} {rtt}", size(w)),
                achieved,
            ));
        }
    }
    let cc = ctx.congestion.map(|c| c.to_string());
    let loss_models = invariants::loss_based(cc.as_deref());
    if let (Some(p), Some(mss), Some(rtt)) = (e.loss_ratio, e.mss_bytes, e.rtt_s) {
        match loss_bound(e) {
            Some(_) if !loss_models => not_shown.push(NotShown {
                model: "Mathis, PFTK".into(),
                why: format!(
                    "they model a loss-based congestion control (Reno, CUBIC); this flow ran \
                     {}, which does not set its rate from loss",
                    cc.as_deref().unwrap_or("another")
                ),
            }),
            Some((m, _)) => {
                out.push(bound(
                    "Mathis",
                    m,
                    format!("MSS {mss} B, RTT {rtt}, loss {}", pct(p)),
                    achieved,
                ));
                if let Some(prob) = Probability::new(p.min(1.0)) {
                    let q = PftkQuery {
                        mss: Bytes::new(mss as u64),
                        rtt,
                        loss: prob,
                        rto: rto.unwrap_or(Dur::from_millis(200)),
                        packets_per_ack: 1,
                        window: e.peer_window_bytes.map(Bytes::new),
                    };
                    if let Ok(pf) = pftk(&q) {
                        out.push(bound(
                            "PFTK",
                            pf.rate_bps,
                            format!("as Mathis, RTO {}, receiver's window", q.rto),
                            achieved,
                        ));
                    }
                }
            }
            None => {}
        }
    }
    if let (Some(g), Some(p)) = (e.path_goodput_bps, ctx.path_rate) {
        // The most one stream can carry is the whole path's payload (streams share it
        // unequally); `path_goodput_bps` is this stream's even share.
        let n = ctx.streams.max(1);
        let whole = Rate::from_bps(g.bps() * n as f64);
        let shared = if n > 1 {
            format!(", all of it ({n} streams share it)")
        } else {
            String::new()
        };
        out.push(bound(
            "path payload",
            whole,
            format!(
                "{p} line rate less IP/TCP headers and {} B framing per packet{shared}",
                ctx.framing_bytes
            ),
            achieved,
        ));
    }
    (out, not_shown)
}
