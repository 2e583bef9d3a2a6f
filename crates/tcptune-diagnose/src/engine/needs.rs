//! What a limit needs changed, sized from the evidence (before [`crate::advice`] checks it
//! against the settings in effect).

use super::*;

pub(crate) fn query(rate: Rate, rtt: Dur, ctx: &Context) -> BufferQuery {
    BufferQuery {
        rate,
        rtt,
        flows: ctx.streams.max(1),
        sharing: FlowSharing::Shared,
        memory_budget: None,
        kernel: ctx.kernel,
        kernel_source: ctx.kernel_source,
        scaling_ratio: None,
        adv_win_scale: None,
        cc: ctx.congestion.unwrap_or(CongestionControl::Cubic),
    }
}

/// Buffers sized for the path: the model's figures (the socket buffer `-w` must ask for), the
/// maxima to recommend by the one sizing rule (what `audit` and `tune` name for the same path
/// and flow count), and the RTT they were sized for.
struct Sized {
    buffers: tcptune_model::buffers::Buffers,
    sizing: Sizing,
    rtt: Dur,
}

/// Sizes the path's buffers for `rate` × `rtt` and the context's streams, kernel and sender.
fn sized(rate: Rate, rtt: Dur, ctx: &Context) -> Option<Sized> {
    let b = buffers(&query(rate, rtt, ctx)).ok()?;
    let sizing = sizing::size(&SizingQuery {
        rate,
        rtt,
        flows: ctx.streams.max(1),
        cc: b.congestion_control,
        rule: b.window_rule,
    });
    Some(Sized {
        buffers: b,
        sizing,
        rtt,
    })
}

/// The needs a limit implies, from the evidence that shows it.
pub fn needs(limit: Limit, e: &Evidence, ctx: &Context) -> Vec<Need> {
    let mut out = Vec::new();
    // The RTT the flow measured (a window-limited flow builds no queue, so this is the path's
    // RTT plus the hosts' own delay, which the window must cover too).
    let rtt = e.rtt_s.or(e.min_rtt_s).filter(|r| *r > Dur::ZERO);
    let sized: Option<Sized> = match (ctx.path_rate, rtt) {
        (Some(rate), Some(rtt)) => sized(rate, rtt, ctx),
        _ => None,
    };
    match limit {
        Limit::ReceiverWindow => receiver_window_needs(&mut out, e, ctx, sized.as_ref()),
        Limit::SendBuffer => buffer_need(
            &mut out,
            End::Sender,
            e.send_buffer_bytes,
            false,
            sized.as_ref(),
            e,
            ctx,
        ),
        Limit::Loss => {
            let m = e
                .loss_ratio
                .map(|p| format!(" (loss {})", pct(p)))
                .unwrap_or_default();
            out.push(Need {
                knob: Knob::FindLoss,
                on: End::BothEnds,
                value: Value::Advice,
                why: format!(
                    "find where packets are lost{m}: `tc -s qdisc` drops, `ethtool -S` errors, \
                     `nstat` TcpExtTCPLostRetransmit on both ends"
                ),
            });
            if ctx.congestion != Some(CongestionControl::Bbr) {
                out.push(Need {
                    knob: Knob::CongestionControl,
                    on: End::Sender,
                    value: Value::Name("bbr".into()),
                    why: "BBR does not back off on random loss; try it where the loss is not \
                          congestion"
                        .into(),
                });
            }
        }
        Limit::Cpu => {
            let on = decision::cpu_bound(e, &[End::Sender, End::Receiver])
                .map(|c| c.end)
                .unwrap_or(End::BothEnds);
            out.push(Need {
                knob: Knob::Cpu,
                on,
                value: Value::Advice,
                why: cpu_advice(ctx, on),
            })
        }
        _ => {}
    }
    option_needs(&mut out, e);
    out
}

/// SACK, timestamps or window scaling off: each is a need of its own.
fn option_needs(out: &mut Vec<Need>, e: &Evidence) {
    let n = &e.negotiated;
    for (on, knob, name) in [
        (n.sack, Knob::Sack, "SACK"),
        (n.timestamps, Knob::Timestamps, "timestamps"),
        (n.window_scaling, Knob::WindowScaling, "window scaling"),
    ] {
        if on == Some(false) {
            out.push(Need {
                knob,
                on: End::BothEnds,
                value: Value::On,
                why: format!("turn {name} back on where it is off (both ends must offer it)"),
            });
        }
    }
}

/// A receiver's window held the flow: a larger buffer where the window was short of the BDP,
/// or the reader where it was not (or data sat unread in a large buffer).
fn receiver_window_needs(out: &mut Vec<Need>, e: &Evidence, ctx: &Context, sized: Option<&Sized>) {
    let held = super::decision::window_held(e, ctx);
    let covers_bdp = held == super::decision::WindowHeld::CoversBdp;
    let reads_slowly = held != super::decision::WindowHeld::ByBuffer;
    if reads_slowly {
        out.push(Need {
            knob: Knob::ReceiverReads,
            on: End::Receiver,
            value: Value::Advice,
            why: if covers_bdp {
                format!(
                    "its window {} already covers the BDP, yet was often full: the \
                         receiving application reads too slowly (larger reads, a faster \
                         reader); a larger buffer would not help",
                    size(e.peer_window_bytes.unwrap_or(0))
                )
            } else {
                format!(
                    "its window {} is a small part of its {} receive buffer: the data \
                         sat unread, so the receiving application (or its CPU) reads too \
                         slowly; a larger buffer would not help",
                    size(e.peer_window_bytes.unwrap_or(0)),
                    size(e.receiver_buffer_bytes.unwrap_or(0))
                )
            },
        });
    } else {
        buffer_need(
            out,
            End::Receiver,
            e.receiver_buffer_bytes,
            true,
            sized,
            e,
            ctx,
        );
    }
}

/// A buffer maximum (and, under `-w`, the socket buffer and its core limit) that lets the
/// window cover the BDP: the one sizing rule's recommended maximum (rounded; under `--fit` with
/// its headroom), never below twice the buffer that limited the flow; without the path's rate,
/// twice that buffer, or four times the window that did.
fn buffer_need(
    out: &mut Vec<Need>,
    end: End,
    measured: Option<u64>,
    recv: bool,
    sized: Option<&Sized>,
    e: &Evidence,
    ctx: &Context,
) {
    let note =
        |rate: Rate, rtt: Dur, w: Bytes| format!("BDP {rate} × {rtt} = {} per flow", size(w.get()));
    let (sys, core, name) = if recv {
        (Knob::TcpRmemMax, Knob::RmemMax, "receive")
    } else {
        (Knob::TcpWmemMax, Knob::WmemMax, "send")
    };
    // The buffer measured limited this flow: a maximum below twice it cannot be the fix;
    // nor one below 64 KiB, the kernel's own smallest default maximum.
    let floor = measured.map(|m| (2 * m).max(MIN_MAXIMUM)).unwrap_or(0);
    match sized {
        Some(Sized {
            buffers: b,
            sizing: s,
            rtt,
        }) => {
            let want = if recv { s.rmem_max } else { s.wmem_max };
            let base = sizing::round_buffer(want.max(Bytes::new(floor)));
            // Fitted only when asked: the one case a larger current maximum may be lowered.
            let n = if ctx.fit { FIT.fitted(base) } else { base }.get();
            let mut why = format!(
                "let the {name} buffer grow to {} so the window covers the BDP: {}",
                size(n),
                note(s.flow_rate, *rtt, s.window)
            );
            if !recv {
                why += &format!(", {}× the window for the send buffer", b.sndbuf_factor);
            }
            out.push(Need {
                knob: sys,
                on: end,
                value: Value::AtLeast(n),
                why,
            });
            if let Some(w) = ctx.window {
                let (so, max) = if recv {
                    (b.so_rcvbuf_bytes.get(), b.rmem_max_bytes.get())
                } else {
                    (b.so_sndbuf_bytes.get(), b.wmem_max_bytes.get())
                };
                if so > w.get() {
                    out.push(Need {
                        knob: Knob::SocketBuffer,
                        on: end,
                        value: Value::AtLeast(so),
                        why: format!(
                            "-w {} fixes the {name} buffer and turns autotuning off: drop \
                             it, or ask for {}",
                            size(w.get()),
                            size(so)
                        ),
                    });
                    out.push(Need {
                        knob: core,
                        on: end,
                        value: Value::AtLeast(max),
                        why: format!("so the kernel allows -w {}", size(so)),
                    });
                }
            }
        }
        // Neither the path's rate nor the receiver's buffer: the window that held the flow
        // still says the knob, and a size that must be exceeded.
        None if recv && floor == 0 && e.peer_window_bytes.is_some_and(|w| w > 0) => {
            let w = e.peer_window_bytes.unwrap_or(0);
            let n = (4 * w).max(MIN_MAXIMUM);
            out.push(Need {
                knob: sys,
                on: end,
                value: Value::AtLeast(n),
                why: format!(
                    "its window {} held this flow, and a window is about half the buffer \
                     that gives it: at least twice that buffer, {} (give --path-rate RATE \
                     to size it to the bandwidth-delay product)",
                    size(w),
                    size(n)
                ),
            })
        }
        None if floor > 0 => out.push(Need {
            knob: sys,
            on: end,
            value: Value::AtLeast(floor),
            why: format!(
                "the {name} buffer of {} limited this flow; at least twice it (give \
                 --path-rate RATE to size it to the bandwidth-delay product)",
                size(floor / 2)
            ),
        }),
        None => {}
    }
}

/// The CPU advice for the end that was bound, naming only what the flow did not already have:
/// zero copy and large writes for a sender, more streams while there are cores to spare.
fn cpu_advice(ctx: &Context, on: End) -> String {
    let mut ways = Vec::new();
    if on != End::Receiver {
        if !ctx.zerocopy {
            ways.push("zero-copy sends (-Z)".to_string());
        }
        if ctx
            .write_bytes
            .is_none_or(|w| w < advice::LARGE_WRITE_BYTES)
        {
            ways.push("larger writes (-l)".to_string());
        }
    }
    if ctx.cores.is_some_and(|c| ctx.streams.max(1) < c) {
        ways.push("streams on more cores (-P)".to_string());
    }
    ways.push("a host with spare CPU (or fewer other jobs on it)".to_string());
    let who = match on {
        End::Sender => "the sending process",
        End::Receiver => "the receiving process (its reads and the kernel's copies to it)",
        End::BothEnds => "the CPU",
    };
    format!(
        "{who}, not the network, set this rate: {}; the path may carry more",
        ways.join(", ")
    )
}
