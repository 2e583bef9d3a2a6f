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
/// the path's payload rate.
pub fn bounds(e: &Evidence, ctx: &Context, rto: Option<Dur>) -> Vec<Bound> {
    let achieved = e.achieved_bps.unwrap_or(Rate::from_bps(0.0));
    let mut out = Vec::new();
    if let (Some(w), Some(rtt)) = (e.peer_window_bytes, e.rtt_s) {
        if rtt > Dur::ZERO {
            let who = if e.from_receiver {
                "window advertised"
            } else {
                "receiver's window"
            };
            out.push(bound(
                "window/RTT",
                Rate::from_bytes_per(Bytes::new(w), rtt),
                format!("{who} {} / RTT {rtt}", size(w)),
                achieved,
            ));
        }
    }
    if let (Some(p), Some(mss), Some(rtt)) = (e.loss_ratio, e.mss_bytes, e.rtt_s) {
        if let Some((m, _)) = loss_bound(e) {
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
    }
    if let (Some(g), Some(p)) = (e.path_goodput_bps, ctx.path_rate) {
        let streams = if ctx.streams > 1 {
            format!(" shared by {} streams", ctx.streams)
        } else {
            String::new()
        };
        out.push(bound(
            "path payload",
            g,
            format!(
                "{p} line rate less IP/TCP headers and {} B framing per packet{streams}",
                ctx.framing_bytes
            ),
            achieved,
        ));
    }
    out
}
