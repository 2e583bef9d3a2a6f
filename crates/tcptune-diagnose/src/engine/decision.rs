//! The decision: which class limits the flow, from its evidence, in the order the engine's
//! documentation gives.

use super::*;

/// A decision before the evidence text.
pub(super) struct Decision {
    pub(super) limit: Limit,
    pub(super) share: Option<f64>,
    /// The evidence for this class, in words.
    pub(super) why: String,
    pub(super) missing: Vec<String>,
}

impl Decision {
    fn new(limit: Limit, share: Option<f64>, why: String) -> Decision {
        Decision {
            limit,
            share,
            why,
            missing: Vec::new(),
        }
    }
}

/// The most the receiver's window can carry: over the minimum RTT.
pub(super) fn min_rtt_window_bound(e: &Evidence) -> Option<Rate> {
    let (w, r) = (e.peer_window_bytes?, e.min_rtt_s.or(e.rtt_s)?);
    (r > Dur::ZERO).then(|| Rate::from_bytes_per(Bytes::new(w), r))
}

/// What the receiver's window carries at the flow's smoothed RTT (a window-limited flow
/// builds no queue, so about what it achieves).
pub(super) fn window_bound(e: &Evidence) -> Option<Rate> {
    let (w, r) = (e.peer_window_bytes?, e.rtt_s?);
    (r > Dur::ZERO).then(|| Rate::from_bytes_per(Bytes::new(w), r))
}

/// The busiest CPU figure of the given ends that is bound. A host's figure decides only where no
/// process was measured: other processes' load is in it (a busy neighbour is not our limit).
pub(super) fn cpu_bound<'e>(e: &'e Evidence, ends: &[End]) -> Option<&'e CpuUse> {
    let processes = e.cpu.iter().any(|c| c.scope == CpuScope::Process);
    e.cpu
        .iter()
        .filter(|c| !(processes && c.scope == CpuScope::Host))
        .filter(|c| ends.contains(&c.end) || c.end == End::BothEnds)
        .filter(|c| c.bound())
        .max_by(|a, b| a.load().total_cmp(&b.load()))
}

pub(super) fn dominant(s: &Shares) -> (Limit, f64) {
    let mut best = (Limit::ReceiverWindow, s.rwnd);
    for c in [
        (Limit::SendBuffer, s.sndbuf),
        (Limit::Network, s.network),
        (Limit::Application, s.application.unwrap_or(0.0)),
    ] {
        if c.1 > best.1 {
            best = c;
        }
    }
    best
}

/// What held a receiver-window-limited flow, by the one rule the verdict's words and the
/// advice (`needs.rs`) share, at the flow's RTT (a window-limited flow builds no queue, so that
/// is the path's RTT plus the hosts' own delay, which the window must cover too; over a veth
/// the minimum RTT is a few µs and would call any window large enough).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WindowHeld {
    /// The window was short of what the path needs: a larger buffer.
    ByBuffer,
    /// The window covered the BDP at the flow's RTT, yet was often full: the reader.
    CoversBdp,
    /// The window was a small part of a large buffer: data sat unread, the reader.
    Backlog,
}

/// The BDP at the flow's RTT, per stream, where the path's rate is known.
pub(super) fn flow_bdp_bytes(ctx: &Context, e: &Evidence) -> Option<u64> {
    let rate = ctx.path_rate?;
    let rtt = e.rtt_s.or(e.min_rtt_s).filter(|r| *r > Dur::ZERO)?;
    Some((rate.bytes_per_sec() / ctx.streams.max(1) as f64 * rtt.secs()).ceil() as u64)
}

/// The rule of [`WindowHeld`].
pub(super) fn window_held(e: &Evidence, ctx: &Context) -> WindowHeld {
    let covers_bdp = matches!(
        (flow_bdp_bytes(ctx, e), e.peer_window_bytes),
        (Some(bdp), Some(w)) if w >= bdp
    );
    let backlog = matches!(
        (e.receiver_buffer_bytes, e.peer_window_bytes),
        (Some(b), Some(w)) if (w as f64) < UNREAD_BACKLOG * b as f64 / 2.0
    );
    if covers_bdp {
        WindowHeld::CoversBdp
    } else if backlog {
        WindowHeld::Backlog
    } else {
        WindowHeld::ByBuffer
    }
}

/// The decision, with a class its own bound rules out turned into conflicting evidence.
pub(super) fn decide(obs: &Observations<'_>, e: &Evidence, ctx: &Context) -> Decision {
    invariants::checked(decide_unchecked(obs, e, ctx), e, ctx)
}

fn decide_unchecked(obs: &Observations<'_>, e: &Evidence, ctx: &Context) -> Decision {
    let sender_seen = !obs.sender.is_empty();
    let moved_any = moved(obs.sender, |i| i.bytes_sent) > 0
        || moved(obs.receiver, |i| i.bytes_received) > 0
        || obs.capture.is_some_and(|c| c.payload_bytes > 0)
        || obs.delivered.is_some_and(|(b, _)| b > 0);
    if !moved_any {
        return Decision::new(Limit::Idle, None, "no data sent or received".into());
    }
    let achieved = e.achieved_bps;
    // 2. At the path's capacity, whatever else the counters say.
    if let (Some(a), Some(g)) = (achieved, e.path_goodput_bps) {
        if a.bps() >= AT_CAPACITY * g.bps() {
            return Decision::new(
                Limit::PathCapacity,
                None,
                format!(
                    "{a} is {} of the {g} of payload the path carries",
                    pct(a.bps() / g.bps())
                ),
            );
        }
    }
    // 3. The sender's rate cap.
    if let (Some(a), Some(cap)) = (achieved, ctx.rate_cap) {
        if a.bps() >= AT_RATE_CAP * cap.bps() {
            return Decision::new(
                Limit::Application,
                None,
                format!("the -b rate cap {cap} holds it ({a})"),
            );
        }
    }
    if let (Some(a), Some(cap)) = (achieved, e.max_pacing_rate_bps) {
        if a.bps() >= AT_RATE_CAP * cap.bps() {
            return Decision::new(
                Limit::Application,
                None,
                format!("the application capped its pacing rate at {cap} (SO_MAX_PACING_RATE)"),
            );
        }
    }
    if sender_seen {
        let reported = obs
            .sender
            .last()
            .is_some_and(|s| s.info.busy_time_us.is_some());
        return decide_sender(e, ctx, reported);
    }
    if let Some(c) = obs.capture {
        return decide_capture(c, e, ctx);
    }
    decide_receiver(obs, e, ctx)
}

pub(super) fn decide_sender(e: &Evidence, ctx: &Context, chronographs_reported: bool) -> Decision {
    let Some(shares) = e.shares else {
        let mut d = Decision::new(Limit::NotEnoughEvidence, None, String::new());
        d.missing.push(if chronographs_reported {
            // Lifetime figures with no busy time: the chronographs never ran for this socket.
            "busy time: the kernel counted none for this connection (its data never waited \
             in flight long enough); watch it over an interval (conns --over, watch)"
                .into()
        } else {
            "the sender's busy/rwnd/sndbuf-limited times (tcp_info since Linux 4.10; this \
             kernel did not report them)"
                .into()
        });
        return d;
    };
    let (dom, share) = dominant(&shares);
    let window_rate = window_bound(e);
    let at_window = match (e.achieved_bps, window_rate) {
        (Some(a), Some(w)) => a.bps() >= AT_WINDOW_BOUND * w.bps(),
        _ => false,
    };
    // A window that allows less than the flow's loss rate would, with cwnd well above it: the
    // window was the ceiling and the losses took a little more off (seed 001's untuned path:
    // 75% of window/RTT, 3 retransmissions, a loss bound 1.3× the window's).
    let window_under_loss_bound = match (e.achieved_bps, window_rate, loss_bound(e)) {
        (Some(a), Some(w), Some((_, b))) => {
            w.bps() < b.bps() && a.bps() >= AT_WINDOW_BOUND_RECEIVER * w.bps()
        }
        _ => false,
    };
    let window_evidence = e.window_full_samples.is_some_and(|s| s >= 0.5)
        || (e.cwnd_over_window.is_some_and(|r| r >= CWND_OVER_WINDOW)
            && (at_window || window_under_loss_bound));
    let cwnd_had_room = match (e.in_flight_bytes, e.cwnd_bytes) {
        (Some(f), Some(c)) => (f as f64) < IN_FLIGHT_SHORT * c as f64,
        _ => false,
    };
    let full = e.sndbuf_full_samples.unwrap_or(0.0);
    let sndbuf_evidence = full >= SNDBUF_FULL_SAMPLES
        || (cwnd_had_room && (shares.sndbuf >= SNDBUF_SOME || full >= SNDBUF_SOME));
    let app_evidence = e
        .app_limited_samples
        .is_some_and(|s| s >= APP_LIMITED_SAMPLES);
    let mut d = match dom {
        Limit::Network | Limit::Application if window_evidence => {
            // The kernel's rwnd clock misses window-limited time when pacing or TSO defers a
            // send the window would not allow (it books it as busy): cwnd far above a window
            // kept full decides it.
            let (c, w) = (e.cwnd_bytes.unwrap_or(0), e.peer_window_bytes.unwrap_or(0));
            Decision::new(
                Limit::ReceiverWindow,
                None,
                format!(
                    "cwnd {} is {:.1}× the receiver's window {} it keeps full",
                    size(c),
                    c as f64 / w.max(1) as f64,
                    size(w)
                ),
            )
        }
        Limit::Network if sndbuf_evidence => Decision::new(
            Limit::SendBuffer,
            None, // the clock booked this time as network; the samples say why
            format!(
                "send buffer {} full in {} of samples and sndbuf-limited {} of the time, with \
                 {} in flight against cwnd {}",
                size(e.send_buffer_bytes.unwrap_or(0)),
                pct(full),
                pct(shares.sndbuf),
                size(e.in_flight_bytes.unwrap_or(0)),
                size(e.cwnd_bytes.unwrap_or(0)),
            ),
        ),
        Limit::Network if app_evidence && ctx.bulk_sender => behind_bulk_sender(e, None),
        Limit::Network if app_evidence => Decision::new(
            Limit::Application,
            None, // the clock booked this time as network; the samples say why
            format!(
                "in {} of samples nothing waited to be sent and cwnd had room: the sender had \
                 nothing more to send",
                pct(e.app_limited_samples.unwrap_or(0.0))
            ),
        ),
        Limit::ReceiverWindow => {
            Decision::new(Limit::ReceiverWindow, Some(share), window_why(e, ctx))
        }
        Limit::SendBuffer => Decision::new(
            Limit::SendBuffer,
            Some(share),
            format!("send buffer {}", size(e.send_buffer_bytes.unwrap_or(0))),
        ),
        Limit::Application if ctx.bulk_sender => behind_bulk_sender(e, Some(share)),
        Limit::Application => {
            Decision::new(Limit::Application, Some(share), "nothing to send".into())
        }
        _ => network(e, ctx, share),
    };
    // CPU: a busy sender looks application-limited, a busy receiver keeps its window closed,
    // a busy host shows as cwnd/pacing; the CPU figure decides.
    let cpu_ends: &[End] = match d.limit {
        Limit::Application | Limit::ConflictingEvidence => &[End::Sender],
        Limit::ReceiverWindow if !window_short(ctx, e) => &[End::Receiver],
        Limit::Network => &[End::Sender, End::Receiver],
        _ => &[],
    };
    if let Some(c) = cpu_bound(e, cpu_ends) {
        d = Decision::new(
            Limit::Cpu,
            None,
            format!("{}; the socket showed {}", c.describe(), d.limit.label()),
        );
    }
    what_the_signs_mean(d, e, ctx)
}

/// A receiver-window verdict's reason, saying of the reader only what the advice says
/// ([`window_held`]): the window against the BDP at the flow's RTT, or, the path's rate
/// unknown, what it allows at that RTT.
fn window_why(e: &Evidence, ctx: &Context) -> String {
    let w = e.peer_window_bytes.unwrap_or(0);
    let mut why = format!("its window {}", size(w));
    match (
        flow_bdp_bytes(ctx, e),
        window_bound(e).or(min_rtt_window_bound(e)),
    ) {
        (Some(bdp), _) => {
            let cmp = if w < bdp { "<" } else { "≥" };
            why += &format!(" {cmp} BDP {} (at the flow's RTT)", size(bdp));
        }
        (None, Some(wr)) => {
            why += &format!(" allows {wr}");
            if let Some(a) = e.achieved_bps.filter(|a| a.bps() < wr.bps() / 4.0) {
                why += &format!("; {a} is far lower: the window was often closed");
            }
        }
        _ => {}
    }
    match window_held(e, ctx) {
        WindowHeld::CoversBdp => {
            why += ": the receiving application reads slowly (the window is often closed)"
        }
        WindowHeld::Backlog => {
            why += &format!(
                ": data sat unread in its {} receive buffer, so the receiving application \
                 reads slowly",
                size(e.receiver_buffer_bytes.unwrap_or(0))
            )
        }
        WindowHeld::ByBuffer => {}
    }
    why
}

/// Whether the receiver read slowly: its window covers the BDP, or allows four times what
/// arrived over the minimum RTT, or is a small part of its buffer (data sat unread).
pub(super) fn reads_slowly(e: &Evidence, ctx: &Context) -> bool {
    // Over the flow's own RTT, as `window_short`: over a veth the minimum RTT is a few µs and
    // the hosts' own delay, which the window must cover too, is most of the RTT.
    let covers_bdp = ctx.path_rate.is_some() && !window_short(ctx, e);
    let far_above = matches!(
        (e.achieved_bps, window_bound(e)),
        (Some(a), Some(w)) if a.bps() < w.bps() / 4.0
    );
    let backlog = matches!(
        (e.receiver_buffer_bytes, e.peer_window_bytes),
        (Some(b), Some(w)) if (w as f64) < UNREAD_BACKLOG * b as f64 / 2.0
    );
    covers_bdp || far_above || backlog
}

/// What a class means where the context says more than the socket: on loopback there is no
/// network, only the CPUs that move the bytes; a test's receiver reads as fast as it can, so
/// one that read slowly fell behind. (A queue that formed does not make a flow "at the path's
/// capacity" without the path's rate: a competing flow or a CPU-bound receiver's late ACKs
/// raise the RTT too.)
fn what_the_signs_mean(d: Decision, e: &Evidence, ctx: &Context) -> Decision {
    let busy_host = || {
        e.cpu
            .iter()
            .find(|c| c.scope == CpuScope::Host && c.bound())
            .map(CpuUse::describe)
    };
    match d.limit {
        Limit::Network if ctx.loopback => {
            let host = busy_host().map(|h| format!("; {h}")).unwrap_or_default();
            Decision::new(
                Limit::Cpu,
                None,
                format!(
                    "on loopback there is no network: the CPUs that run both ends and their \
                     softirq work move the bytes ({}){host}",
                    d.why
                ),
            )
        }
        // On loopback no path needs a window: an autotuned one closes only when the reader
        // did not read.
        Limit::ReceiverWindow
            if ctx.bulk_receiver
                && (reads_slowly(e, ctx) || (ctx.loopback && ctx.window.is_none())) =>
        {
            let behind = format!(
                "{}; yet the receiver is a bulk reader that reads as fast as it can: it fell \
                 behind its socket",
                d.why
            );
            match busy_host() {
                Some(h) => Decision::new(Limit::Cpu, None, format!("{behind} while {h}")),
                None => {
                    let mut c = Decision::new(Limit::ConflictingEvidence, None, behind);
                    c.missing.push(
                        "what kept the receiver from reading: its CPU time and run-queue wait \
                         over the test (run the server under `tcptune serve` on this host, or \
                         look at its host's load)"
                            .into(),
                    );
                    c
                }
            }
        }
        _ => d,
    }
}

/// Whether the receiver's window is below the BDP (its buffer, not its reading, limits). The
/// BDP here is at the flow's smoothed RTT: a window-limited flow builds no queue, so that is
/// the path's RTT plus the hosts' own delay, which the window must cover too (over a veth the
/// minimum RTT is a few µs and the hosts' delay is most of it).
pub(super) fn window_short(ctx: &Context, e: &Evidence) -> bool {
    matches!(
        (flow_bdp_bytes(ctx, e), e.peer_window_bytes),
        (Some(bdp), Some(w)) if w < bdp
    )
}

/// A bulk sender (always more to send) whose socket often had nothing queued: it fell behind
/// its own socket. Not the application's choice: a CPU decides it where the figures say so (its
/// own process's, checked by the caller, or a host kept fully busy, here), otherwise the
/// evidence conflicts and the verdict says what was measured.
fn behind_bulk_sender(e: &Evidence, share: Option<f64>) -> Decision {
    let samples = e
        .app_limited_samples
        .map(|s| format!("in {} of samples ", pct(s)))
        .unwrap_or_default();
    let idle = share
        .map(|s| format!(", and the kernel booked {} of the time as not busy", pct(s)))
        .unwrap_or_default();
    let behind = format!(
        "{samples}nothing waited to be sent{idle}, yet the sender is a bulk writer that always \
         has more to send: it fell behind its socket"
    );
    if let Some(h) = e
        .cpu
        .iter()
        .find(|c| c.scope == CpuScope::Host && c.bound())
    {
        return Decision::new(Limit::Cpu, None, format!("{behind} while {}", h.describe()));
    }
    let mut d = Decision::new(Limit::ConflictingEvidence, None, behind);
    let measured: Vec<String> = e.cpu.iter().map(CpuUse::describe).collect();
    d.missing.push(if measured.is_empty() {
        "the sending process's CPU time and run-queue wait over the test (it could not keep \
         its socket fed, and nothing else paced it)"
            .into()
    } else {
        format!(
            "what kept the sender from writing: neither it nor the host was CPU-bound ({}), and \
             nothing paced it",
            measured.join("; ")
        )
    });
    d
}

/// The flow's Mathis bound at its loss rate, and what a loss-based congestion control
/// averages there: the larger of Mathis and CUBIC's response function. Not special-cased for
/// BBR: Linux's BBR also cuts cwnd to what is in flight in each recovery, and a path that keeps
/// it recovering (reordering) holds it near this bound too. None without loss.
pub(super) fn loss_bound(e: &Evidence) -> Option<(Rate, Rate)> {
    let loss = e.loss_ratio.unwrap_or(0.0);
    let (mss, rtt) = (Bytes::new(e.mss_bytes? as u64), e.rtt_s?);
    if loss <= 0.0 || rtt <= Dur::ZERO {
        return None;
    }
    let m = Rate::from_bps(mathis_bps(mss, rtt, loss, MathisConstant::Periodic.value()));
    let bound = Probability::new(loss.min(1.0))
        .and_then(|p| tcptune_model::cubic::cubic(mss, rtt, p).ok())
        .map_or(m, |c| Rate::from_bps(c.rate_bps.bps().max(m.bps())));
    Some((m, bound))
}

/// Whether a flow's loss set its rate, with the words for it either way: the one comparison
/// of the loss with the loss bound, for a sender's samples and for a capture alike.
pub(super) struct LossJudgement {
    /// The loss set the rate.
    pub(super) holds: bool,
    /// "N retransmitted, loss p (Mathis bound …)[; reordering …]" when it holds; otherwise
    /// "N retransmitted (loss p), too few or too bunched to set this rate: …" (empty without loss).
    pub(super) words: String,
    /// The words after the counts: " (Mathis bound …)[; reordering …]", or ", too few …".
    pub(super) detail: String,
}

pub(super) fn judge_loss(e: &Evidence, ctx: &Context) -> LossJudgement {
    let loss = e.loss_ratio.unwrap_or(0.0);
    let bounds = loss_bound(e);
    let (mathis, loss_bound) = (bounds.map(|b| b.0), bounds.map(|b| b.1));
    let cc = ctx.congestion.map(|c| c.to_string());
    let loss_based = invariants::loss_based(cc.as_deref());
    // Mathis describes loss-based congestion controls only: no flow under BBR is "near" it.
    let near_mathis = match (mathis, e.achieved_bps) {
        (Some(m), Some(a)) => loss_based && a.bps() >= NEAR_MATHIS * m.bps(),
        _ => false,
    };
    let beyond_bound = match (e.achieved_bps, loss_bound) {
        (Some(a), Some(b)) => a.bps() > BEYOND_LOSS_BOUND * b.bps(),
        _ => false,
    };
    let retransmitted = e.retransmits.unwrap_or(0);
    // Under a loss-based congestion control, a flow far beyond what it averages at its loss
    // rate was not held by that loss, however high the rate (one bunched overshoot); under BBR
    // only a loss rate that puts it in its long-term mode does.
    let significant = if loss_based {
        loss >= LOSS_SIGNIFICANT && !beyond_bound
    } else {
        loss >= BBR_LOSS_HOLDS
    };
    if significant || (loss > 0.0 && near_mathis && !beyond_bound) {
        let mut m = mathis
            .filter(|_| loss_based)
            .map(|m| format!(" (Mathis bound {m})"))
            .unwrap_or_default();
        let reord = e.reordering_seen.unwrap_or(0);
        let dsack = e.dsack_dups.unwrap_or(0);
        if reord > 0 || dsack > 0 {
            m += &format!(
                "; the path reordered ({reord} reordering events, {dsack} retransmissions the \
                 receiver had already: D-SACK), so some of this loss was not loss: the sender \
                 slowed down for packets that arrived late"
            );
        }
        let words = format!("{retransmitted} retransmitted, loss {}{m}", pct(loss));
        return LossJudgement {
            holds: true,
            words,
            detail: m,
        };
    }
    if loss <= 0.0 {
        return LossJudgement {
            holds: false,
            words: String::new(),
            detail: String::new(),
        };
    }
    // Losses that did not set the rate are still said, with why they did not.
    let reason = match (beyond_bound, loss_bound, mathis) {
        _ if !loss_based => format!(
            ", below the {}% at which BBR lets loss set its rate",
            BBR_LOSS_HOLDS * 100.0
        ),
        (true, Some(b), _) => format!(
            ", too few or too bunched to set this rate: it carried more than \
             {BEYOND_LOSS_BOUND}× the {b} a \
             loss-based congestion control averages at that loss rate"
        ),
        (false, _, Some(m)) if e.achieved_bps.is_some() && loss_based => format!(
            ", not what held it: it carried under {NEAR_MATHIS}× the Mathis bound {m} for that \
             loss"
        ),
        _ => String::new(),
    };
    LossJudgement {
        holds: false,
        words: format!("{retransmitted} retransmitted (loss {}){reason}", pct(loss)),
        detail: reason,
    }
}

pub(super) fn network(e: &Evidence, ctx: &Context, share: f64) -> Decision {
    let loss = judge_loss(e, ctx);
    if loss.holds {
        return Decision::new(Limit::Loss, Some(share), loss.words);
    }
    let mut why = format!("cwnd {}", size(e.cwnd_bytes.unwrap_or(0)));
    if let (Some(r), Some(m)) = (e.rtt_s, e.min_rtt_s) {
        why += &format!(", RTT {r} (min {m})");
    }
    if !loss.words.is_empty() {
        why += "; ";
        why += &loss.words;
    }
    let mut d = Decision::new(Limit::Network, Some(share), why);
    if ctx.path_rate.is_none() {
        d.missing.push(
            "the path's rate (--path-rate RATE): without it a full path cannot be told from \
             a congestion-control limit"
                .into(),
        );
    }
    d
}

pub(super) fn decide_receiver(obs: &Observations<'_>, e: &Evidence, ctx: &Context) -> Decision {
    let sender_missing = "the sending end's tcp_info (its chronographs say what held it back; \
                          run `tcptune serve` or `tcptune conns` on the sending host)";
    if obs.receiver.is_empty() {
        let mut d = Decision::new(Limit::NotEnoughEvidence, None, String::new());
        d.missing.push(sender_missing.into());
        return d;
    }
    let (a, w) = (e.achieved_bps, window_bound(e));
    if let (Some(a), Some(w)) = (a, w) {
        if a.bps() >= AT_WINDOW_BOUND_RECEIVER * w.bps() {
            let mut why = format!(
                "the window it advertised, {} per RTT {}, allows {w}: about what it got, {a} \
                 (seen from the receiver only)",
                size(e.peer_window_bytes.unwrap_or(0)),
                e.rtt_s.unwrap_or(Dur::ZERO)
            );
            if let Some(b) = e.receiver_buffer_bytes {
                why += &format!("; receive buffer {}", size(b));
            }
            if let Some(c) = cpu_bound(e, &[End::Receiver]).filter(|_| !window_short(ctx, e)) {
                return Decision::new(
                    Limit::Cpu,
                    None,
                    format!("{}; the receiver kept its window closed", c.describe()),
                );
            }
            return Decision::new(Limit::ReceiverWindow, None, why);
        }
    }
    if let Some(c) = cpu_bound(e, &[End::Sender, End::Receiver]) {
        return Decision::new(Limit::Cpu, None, c.describe());
    }
    let mut d = Decision::new(Limit::NotEnoughEvidence, None, String::new());
    if let (Some(a), Some(w)) = (a, w) {
        d.why = format!(
            "not the receiver's window: it allowed {w}, {:.1}× the {a} that arrived",
            w.bps() / a.bps().max(1.0)
        );
    }
    d.missing.push(sender_missing.into());
    if ctx.path_rate.is_none() {
        d.missing
            .push("the path's rate (--path-rate RATE), to tell a full path".into());
    }
    d
}

pub(super) fn decide_capture(c: &CaptureEvidence, e: &Evidence, ctx: &Context) -> Decision {
    let data = c.data_packets.max(1) as f64;
    let full = c.window_full as f64 / data;
    if c.zero_window > 0 || full >= 0.05 {
        let mut why = format!(
            "the receiver's window was full for {} of data segments",
            pct(full)
        );
        if c.zero_window > 0 {
            why += &format!(
                " and it advertised a zero window {} times: its application did not read fast \
                 enough",
                c.zero_window
            );
        }
        return Decision::new(Limit::ReceiverWindow, Some(full), why);
    }
    let loss = e.loss_ratio.unwrap_or(0.0);
    let counts = format!(
        "{} retransmissions ({} of data segments: {} fast, {} after a timeout)",
        c.retransmissions,
        pct(loss),
        c.fast_retransmissions,
        c.timeout_retransmissions
    );
    // The same comparison with the loss bound a test makes: the capture has the loss rate,
    // the MSS and the RTT it needs.
    let judged = judge_loss(e, ctx);
    if judged.holds {
        return Decision::new(Limit::Loss, None, format!("{counts}{}", judged.detail));
    }
    let mut d = Decision::new(Limit::NotEnoughEvidence, None, String::new());
    if loss > 0.0 {
        d.why = format!("{counts}{}", judged.detail);
    }
    d.missing.push(
        "a capture shows windows and loss but not the sender's cwnd, send buffer or \
         application: sample tcp_info on the sender (tcptune watch/test)"
            .into(),
    );
    d
}

/// The class, share and one-line reason from the observations (cheap: no bounds or advice).
/// `over` names the time the shares cover ("of the last 5 s", "of its busy time").
pub fn classify(obs: &Observations<'_>, ctx: &Context, over: &str) -> (Verdict, Evidence) {
    let e = evidence(obs, ctx);
    let d = decide(obs, &e, ctx);
    let text = verdict_text(&d, &e, over);
    (
        Verdict {
            limit: d.limit,
            share: d.share,
            text,
            missing: d.missing,
        },
        e,
    )
}

pub(super) fn verdict_text(d: &Decision, e: &Evidence, over: &str) -> String {
    let mut t = d.limit.label().to_string();
    if let Some(s) = d.share {
        t += &format!(" {} {over}", pct(s));
    }
    if let Some(a) = e.achieved_bps.filter(|_| d.limit != Limit::Idle) {
        t += &format!(" at {a}");
    }
    if !d.why.is_empty() {
        t += ": ";
        t += &d.why;
    }
    if !d.missing.is_empty() {
        t += "; missing: ";
        t += &d.missing.join("; ");
    }
    for m in &e.missing_options {
        t += "; ";
        t += m;
    }
    t
}
