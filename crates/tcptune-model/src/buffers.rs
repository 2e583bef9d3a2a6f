//! Socket buffer sizing for a path: the `tcp_rmem`/`tcp_wmem` maxima (and, for applications that
//! set `SO_RCVBUF`/`SO_SNDBUF`, the value they must ask for and the `rmem_max`/`wmem_max` that
//! allows it) so that each of N concurrent flows can keep its share of the path busy, and the
//! memory that costs against a budget.
//!
//! The receive side follows the kernel's own arithmetic ([`WindowRule`]): before 6.6 half of a
//! buffer is window (`tcp_adv_win_scale` 1), since 6.6 `scaling_ratio`/256 of it (50 % assumed).
//! The send side follows `tcp_sndbuf_expand()`: factor 2 × the window (3 for BBR). These are the
//! rules R1–R5 of the host-tuning research note. The maxima `test`, `audit` and `tune`
//! recommend (the need, rounded, and `--fit`'s headroom) come from [`crate::sizing`], which
//! sizes with the functions below; `buffers` shows the exact figures.

use schemars::JsonSchema;
use serde::Serialize;

use crate::kernel::{
    self, CongestionControl, KernelSource, KernelVersion, WindowRule, MAX_WINDOW_BYTES,
    SYSCTL_INT_MAX,
};
// The kernel's two buffer rules live beside the rules they apply (`kernel`), so that the
// sizing rule and this module both use them without depending on each other.
pub use crate::kernel::{receive_buffer_for, send_buffer_for};
use crate::sizing::{self, SizingQuery};
use crate::units::{Bytes, Dur, Rate};
use crate::ModelError;

/// The window a receive buffer of `buffer` bytes advertises at most.
pub fn window_of_receive_buffer(buffer: Bytes, rule: WindowRule) -> Bytes {
    Bytes::new(rule.window_from_space(buffer.get()))
}

/// The window a send buffer of `buffer` bytes sustains in flight.
pub fn window_of_send_buffer(buffer: Bytes, cc: CongestionControl) -> Bytes {
    Bytes::new(buffer.get() / cc.sndbuf_expand_factor() as u64)
}

/// How the N flows relate to `--rate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FlowSharing {
    /// The flows share one bottleneck of the given rate: each gets rate / N.
    Shared,
    /// Each flow has a path of the given rate to itself (a server with N clients).
    PerFlow,
}

/// What `buffers` needs to know.
#[derive(Debug, Clone, Copy)]
pub struct BufferQuery {
    /// The path's rate (all flows together, or each flow's with [`FlowSharing::PerFlow`]).
    pub rate: Rate,
    /// The round-trip time the window must cover.
    pub rtt: Dur,
    /// Concurrent bulk flows (at least 1).
    pub flows: u32,
    /// How the flows relate to `rate`.
    pub sharing: FlowSharing,
    /// Memory the host may spend on these flows' buffers (per role: receiving or sending).
    pub memory_budget: Option<Bytes>,
    /// The kernel whose buffer arithmetic applies.
    pub kernel: KernelVersion,
    /// Where `kernel` came from (given, detected, assumed).
    pub kernel_source: KernelSource,
    /// The receiver's measured `scaling_ratio` (out of 256), 6.6+ only.
    pub scaling_ratio: Option<u8>,
    /// `tcp_adv_win_scale`, before 6.6 only.
    pub adv_win_scale: Option<i8>,
    /// The sender's congestion control (the send buffer's expand factor).
    pub cc: CongestionControl,
}

/// One role (receiver or sender) against the memory budget.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SideBudget {
    /// N × the per-flow buffer maximum, bytes.
    pub needed_bytes: Bytes,
    /// Whether `needed_bytes` fits in the budget.
    pub fits: bool,
    /// The per-flow maximum the budget allows: min(need, budget / N), bytes.
    pub per_flow_cap_bytes: Bytes,
    /// The window that cap gives each flow, bytes.
    pub window_at_cap_bytes: Bytes,
    /// The aggregate rate all N flows can reach with that window, bits per second.
    pub aggregate_rate_bps: Rate,
}

/// The memory the buffers cost, and the budget check when one was given.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MemoryCost {
    /// Receiving host: N × tcp_rmem max (every flow's buffer grown to its cap), bytes.
    pub receiver_bytes: Bytes,
    /// Sending host: N × tcp_wmem max, bytes.
    pub sender_bytes: Bytes,
    /// The budget given, bytes.
    pub budget_bytes: Option<Bytes>,
    /// The receiving side against the budget, when one was given.
    pub receiver: Option<SideBudget>,
    /// The sending side against the budget, when one was given.
    pub sender: Option<SideBudget>,
}

/// Buffer sizes a path needs, and what they cost.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Buffers {
    /// Path rate as given, bits per second.
    pub rate_bps: Rate,
    /// Round-trip time, seconds.
    pub rtt_s: Dur,
    /// Concurrent bulk flows.
    pub flows: u32,
    /// How the flows relate to the rate.
    pub flow_sharing: FlowSharing,
    /// Each flow's rate: rate / N when shared, bits per second.
    pub flow_rate_bps: Rate,
    /// The kernel whose buffer arithmetic was used.
    pub kernel: KernelVersion,
    /// Where the kernel version came from.
    pub kernel_source: KernelSource,
    /// How the kernel splits a receive buffer into window and overhead.
    pub window_rule: WindowRule,
    /// Whether the 6.6+ scaling ratio was assumed (50 %) rather than given.
    pub scaling_ratio_assumed: bool,
    /// The sender's congestion control (the send buffer's factor).
    pub congestion_control: CongestionControl,
    /// Window each flow needs: its rate × RTT, bytes.
    pub window_bytes: Bytes,
    /// Smallest net.ipv4.tcp_rmem max (third field) whose window is the per-flow BDP, bytes.
    pub tcp_rmem_max_bytes: Bytes,
    /// The receive autotuner aims for twice the data delivered per RTT: the buffer that leaves
    /// it that headroom, bytes.
    pub tcp_rmem_headroom_bytes: Bytes,
    /// tcp_sndbuf_expand factor (2; 3 for BBR).
    pub sndbuf_factor: u32,
    /// net.ipv4.tcp_wmem max (third field): factor × per-flow BDP, bytes.
    pub tcp_wmem_max_bytes: Bytes,
    /// Value an application that sets SO_RCVBUF must pass (the kernel doubles it), bytes.
    pub so_rcvbuf_bytes: Bytes,
    /// net.core.rmem_max needed to let that SO_RCVBUF through, bytes.
    pub rmem_max_bytes: Bytes,
    /// Value an application that sets SO_SNDBUF must pass, bytes.
    pub so_sndbuf_bytes: Bytes,
    /// net.core.wmem_max needed to let that SO_SNDBUF through, bytes.
    pub wmem_max_bytes: Bytes,
    /// Receive window scale Linux negotiates at SYN time with tcp_rmem max at the value above
    /// (and net.core.rmem_max no larger: the kernel uses the larger of the two).
    pub rcv_wscale: u8,
    /// Whether one flow needs more than the largest TCP window (65535 × 2^14 B).
    pub exceeds_max_window: bool,
    /// Flows needed to fill the path when one cannot (BDP / 1 GiB, rounded up).
    pub min_flows: Option<u64>,
    /// The memory the buffers cost, and the budget check.
    pub memory: MemoryCost,
    /// The formula, in words.
    pub formula: String,
    /// What the figures assume and do not cover.
    pub caveats: Vec<String>,
}

/// The buffer sizes `q`'s path needs (rules R1–R5 of the host-tuning note).
pub fn buffers(q: &BufferQuery) -> Result<Buffers, ModelError> {
    if q.flows == 0 {
        return Err(ModelError::Invalid(
            "the number of flows must be at least 1; give --flows 1 or more".into(),
        ));
    }
    let n = q.flows as u64;
    let flow_rate = match q.sharing {
        FlowSharing::Shared => Rate::from_bps(q.rate.bps() / n as f64),
        FlowSharing::PerFlow => q.rate,
    };
    let rule = WindowRule::for_kernel(q.kernel, q.scaling_ratio, q.adv_win_scale);
    // The needs of one flow at its rate, by the one sizing rule (unrounded: the model shows
    // the exact figures; `sizing` also says what to recommend).
    let need = sizing::size(&SizingQuery {
        rate: flow_rate,
        rtt: q.rtt,
        flows: 1,
        cc: q.cc,
        rule,
    });
    let (window, rmem, wmem) = (need.window, need.rmem_need, need.wmem_need);
    let headroom = receive_buffer_for(Bytes::new(window.get().saturating_mul(2)), rule);
    let so_rcvbuf = kernel::setsockopt_value_for(rmem.get());
    let so_sndbuf = kernel::setsockopt_value_for(wmem.get());
    let total_rate = match q.sharing {
        FlowSharing::Shared => q.rate,
        FlowSharing::PerFlow => Rate::from_bps(q.rate.bps() * n as f64),
    };
    let exceeds_max_window = window.get() > MAX_WINDOW_BYTES;
    let min_flows = exceeds_max_window.then(|| {
        let total_bdp = total_rate.times(q.rtt).to_bytes_ceil().get();
        match q.sharing {
            FlowSharing::Shared => total_bdp.div_ceil(MAX_WINDOW_BYTES),
            FlowSharing::PerFlow => window.get().div_ceil(MAX_WINDOW_BYTES) * n,
        }
    });

    // The aggregate rate N flows reach when each window is `w`.
    let aggregate = |w: Bytes| -> Rate {
        let per_flow = Rate::from_bytes_per(w, q.rtt).bps().min(flow_rate.bps());
        Rate::from_bps(per_flow * n as f64)
    };
    let side = |need: Bytes, budget: Bytes, window_of: &dyn Fn(Bytes) -> Bytes| {
        let needed = Bytes::new(need.get().saturating_mul(n));
        let cap = Bytes::new(need.get().min(budget.get() / n));
        let w = window_of(cap).min(window);
        SideBudget {
            needed_bytes: needed,
            fits: needed <= budget,
            per_flow_cap_bytes: cap,
            window_at_cap_bytes: w,
            aggregate_rate_bps: aggregate(w),
        }
    };
    let memory = MemoryCost {
        receiver_bytes: Bytes::new(rmem.get().saturating_mul(n)),
        sender_bytes: Bytes::new(wmem.get().saturating_mul(n)),
        budget_bytes: q.memory_budget,
        receiver: q
            .memory_budget
            .map(|b| side(rmem, b, &|c| window_of_receive_buffer(c, rule))),
        sender: q
            .memory_budget
            .map(|b| side(wmem, b, &|c| window_of_send_buffer(c, q.cc))),
    };

    let scaling_ratio_assumed = q.kernel.has_scaling_ratio() && q.scaling_ratio.is_none();
    let caveats = caveats(q, window, rmem, wmem, min_flows);

    Ok(Buffers {
        rate_bps: q.rate,
        rtt_s: q.rtt,
        flows: q.flows,
        flow_sharing: q.sharing,
        flow_rate_bps: flow_rate,
        kernel: q.kernel,
        kernel_source: q.kernel_source,
        window_rule: rule,
        scaling_ratio_assumed,
        congestion_control: q.cc,
        window_bytes: window,
        tcp_rmem_max_bytes: rmem,
        tcp_rmem_headroom_bytes: headroom,
        sndbuf_factor: q.cc.sndbuf_expand_factor(),
        tcp_wmem_max_bytes: wmem,
        so_rcvbuf_bytes: Bytes::new(so_rcvbuf),
        rmem_max_bytes: Bytes::new(so_rcvbuf),
        so_sndbuf_bytes: Bytes::new(so_sndbuf),
        wmem_max_bytes: Bytes::new(so_sndbuf),
        rcv_wscale: kernel::rcv_wscale(rmem.get()),
        exceeds_max_window,
        min_flows,
        memory,
        formula: format!(
            "window = rate{} × RTT; tcp_rmem max = smallest buffer with {}; tcp_wmem max = {} × \
             window; SO_*BUF = buffer / 2; memory = N × buffer",
            match q.sharing {
                FlowSharing::Shared => " / N",
                FlowSharing::PerFlow => "",
            },
            rule,
            q.cc.sndbuf_expand_factor()
        ),
        caveats,
    })
}

/// The caveats `buffers` prints under its figures: what was assumed about the kernel, what the
/// figures do not cap, and the path's and the sizes' limits.
fn caveats(
    q: &BufferQuery,
    window: Bytes,
    rmem: Bytes,
    wmem: Bytes,
    min_flows: Option<u64>,
) -> Vec<String> {
    let scaling_ratio_assumed = q.kernel.has_scaling_ratio() && q.scaling_ratio.is_none();
    // `buffers` sets min_flows exactly when one flow needs more than the largest window.
    let exceeds_max_window = min_flows.is_some();
    let mut caveats = Vec::new();
    match q.kernel_source {
        KernelSource::Assumed => caveats.push(format!(
            "The running kernel could not be read, so {} was assumed; give --kernel to model \
             another.",
            q.kernel
        )),
        KernelSource::Detected => caveats.push(format!(
            "Kernel {} is the one running here; give --kernel for the host you are tuning.",
            q.kernel
        )),
        KernelSource::Given => {}
    }
    if scaling_ratio_assumed {
        caveats.push(
            "Since 6.6 each socket measures its own payload/truesize ratio; 50% is the \
             conservative starting value (observed 0.66 on AWS ENA at MTU 1500, up to 0.86); \
             a measured --scaling-ratio gives a smaller buffer."
                .into(),
        );
    }
    if q.scaling_ratio.is_some() && !q.kernel.has_scaling_ratio() {
        caveats.push(format!(
            "Kernel {} predates the per-socket scaling_ratio (6.6); the given ratio was ignored \
             and tcp_adv_win_scale decides.",
            q.kernel
        ));
    }
    if q.adv_win_scale.is_some() && q.kernel.has_scaling_ratio() {
        caveats.push(
            "tcp_adv_win_scale is obsolete since 6.6 (accepted, no effect); it was ignored.".into(),
        );
    }
    caveats.push(
        "These are maxima for autotuning: keep tcp_rmem/tcp_wmem min and default as they are, \
         and do not lower a larger current max (tcptune audit compares with the host)."
            .into(),
    );
    caveats.push(
        "net.core.rmem_max/wmem_max cap only SO_RCVBUF/SO_SNDBUF (and enter the SYN-time \
         window scale); they do not cap autotuning. Setting SO_RCVBUF/SO_SNDBUF turns \
         autotuning off for that socket and must happen before connect()/listen()."
            .into(),
    );
    if q.kernel.has_scaling_ratio() {
        caveats.push(
            "On 6.6 kernels before commit 697a6c8cec03 (2024) a socket with SO_RCVBUF set \
             could stay at about a quarter of its buffer as window."
                .into(),
        );
    }
    caveats.push(
        "The send buffer counts packet overhead too: with TSO it is small, but a sender of \
         small, non-TSO segments can need up to about 3× more."
            .into(),
    );
    if exceeds_max_window {
        caveats.push(format!(
            "One flow needs a {} B window, more than the largest TCP window (65535 × 2^14 = \
             1073725440 B): no buffer lets a single flow fill this path; use at least {} \
             parallel flows.",
            window.get(),
            min_flows.unwrap_or(1)
        ));
    }
    if rmem.get() > SYSCTL_INT_MAX || wmem.get() > SYSCTL_INT_MAX {
        caveats
            .push("tcp_rmem/tcp_wmem fields are C ints: 2147483647 is the most they take.".into());
    }
    if q.memory_budget.is_none() {
        caveats.push(
            "Memory is the worst case (every flow at its cap); compare it with tcp_mem (pages, \
             global), because crossing tcp_mem's pressure value shrinks every TCP socket's \
             buffers. Give --memory to size within a budget."
                .into(),
        );
    } else {
        caveats.push(
            "The budget is checked per role; a host that both sends and receives these flows \
             needs the sum."
                .into(),
        );
    }
    caveats
}

impl std::fmt::Display for Buffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let flows = if self.flows == 1 {
            "1 flow".to_string()
        } else {
            match self.flow_sharing {
                FlowSharing::Shared => {
                    format!(
                        "{} flows sharing it, {} each",
                        self.flows, self.flow_rate_bps
                    )
                }
                FlowSharing::PerFlow => format!("{} flows at that rate each", self.flows),
            }
        };
        let kernel = format!(
            "{} ({}): {}{}",
            self.kernel,
            match self.kernel_source {
                KernelSource::Given => "given",
                KernelSource::Detected => "running",
                KernelSource::Assumed => "assumed",
            },
            self.window_rule,
            if self.scaling_ratio_assumed {
                ", assumed"
            } else {
                ""
            }
        );
        let mut rows = vec![
            (
                "path",
                format!("{} × {}, {flows}", self.rate_bps, self.rtt_s),
            ),
            ("kernel", kernel),
            ("window", format!("{} per flow (BDP)", self.window_bytes)),
            (
                "tcp_rmem max",
                format!(
                    "≥ {}; {} B leaves autotuning its 2× headroom",
                    self.tcp_rmem_max_bytes,
                    self.tcp_rmem_headroom_bytes.get()
                ),
            ),
            (
                "tcp_wmem max",
                format!(
                    "≥ {} ({} × window, {})",
                    self.tcp_wmem_max_bytes, self.sndbuf_factor, self.congestion_control
                ),
            ),
            (
                "SO_RCVBUF",
                format!(
                    "apps that set it: ≥ {} B, with net.core.rmem_max ≥ {}",
                    self.so_rcvbuf_bytes.get(),
                    self.rmem_max_bytes.get()
                ),
            ),
            (
                "SO_SNDBUF",
                format!(
                    "apps that set it: ≥ {} B, with net.core.wmem_max ≥ {}",
                    self.so_sndbuf_bytes.get(),
                    self.wmem_max_bytes.get()
                ),
            ),
            (
                "window scale",
                format!(
                    "{} (chosen at SYN from the buffer maximum)",
                    self.rcv_wscale
                ),
            ),
            (
                "memory",
                format!(
                    "receiver {}, sender {} ({} × the maxima)",
                    self.memory.receiver_bytes, self.memory.sender_bytes, self.flows
                ),
            ),
        ];
        if let Some(budget) = self.memory.budget_bytes {
            for (name, side) in [
                ("budget rx", &self.memory.receiver),
                ("budget tx", &self.memory.sender),
            ] {
                if let Some(s) = side {
                    rows.push((
                        name,
                        if s.fits {
                            format!("fits in {}", budget)
                        } else {
                            format!(
                                "over {}: cap {} B per flow → window {} B → {} in all",
                                budget,
                                s.per_flow_cap_bytes.get(),
                                s.window_at_cap_bytes.get(),
                                s.aggregate_rate_bps
                            )
                        },
                    ));
                }
            }
        }
        if let Some(n) = self.min_flows {
            rows.push(("min flows", format!("{n} (one window is at most 1 GiB)")));
        }
        crate::render::write_model(
            f,
            &format!(
                "Socket buffers for {} × {}{}",
                self.rate_bps,
                self.rtt_s,
                if self.flows > 1 {
                    format!(", {} flows", self.flows)
                } else {
                    String::new()
                }
            ),
            &rows,
            &self.formula,
            &self.caveats,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(rate: &str, rtt: &str, kernel: &str) -> BufferQuery {
        BufferQuery {
            rate: rate.parse().unwrap(),
            rtt: rtt.parse().unwrap(),
            flows: 1,
            sharing: FlowSharing::Shared,
            memory_budget: None,
            kernel: kernel.parse().unwrap(),
            kernel_source: KernelSource::Given,
            scaling_ratio: None,
            adv_win_scale: None,
            cc: CongestionControl::Cubic,
        }
    }

    #[test]
    fn pre_6_6_needs_twice_the_bdp() {
        // Seed 000: 10 Gbit/s × 1.58 ms = 1975000 B; adv_win_scale 1 → 2 × BDP − 1.
        let b = buffers(&query("10gbit", "1.58ms", "6.1")).unwrap();
        assert_eq!(b.window_bytes.get(), 1_975_000);
        assert_eq!(b.window_rule, WindowRule::AdvWinScale { adv_win_scale: 1 });
        assert_eq!(b.tcp_rmem_max_bytes.get(), 3_949_999);
        assert_eq!(b.tcp_wmem_max_bytes.get(), 3_950_000);
        assert_eq!(b.so_rcvbuf_bytes.get(), 1_975_000);
        assert_eq!(b.rcv_wscale, 6);
        assert!(!b.scaling_ratio_assumed);
    }

    #[test]
    fn since_6_6_the_scaling_ratio_decides() {
        let mut q = query("10gbit", "1.58ms", "6.18");
        let b = buffers(&q).unwrap();
        assert!(b.scaling_ratio_assumed);
        assert_eq!(b.tcp_rmem_max_bytes.get(), 3_950_000); // × 256/128
        assert_eq!(b.tcp_rmem_headroom_bytes.get(), 7_900_000);
        q.scaling_ratio = Some(kernel::scaling_ratio_from_fraction(0.86)); // 220/256
        let b = buffers(&q).unwrap();
        assert!(!b.scaling_ratio_assumed);
        assert_eq!(
            b.tcp_rmem_max_bytes.get(),
            (1_975_000u64 * 256).div_ceil(220)
        );
        q.cc = CongestionControl::Bbr;
        assert_eq!(buffers(&q).unwrap().tcp_wmem_max_bytes.get(), 5_925_000);
    }

    #[test]
    fn flows_share_the_rate_and_multiply_the_memory() {
        let mut q = query("10gbit", "100ms", "6.18");
        q.flows = 4;
        let b = buffers(&q).unwrap();
        assert_eq!(b.window_bytes.get(), 31_250_000); // 125 MB / 4
        assert_eq!(b.memory.receiver_bytes.get(), 4 * 62_500_000);
        assert_eq!(b.memory.sender_bytes.get(), 4 * 62_500_000);
        q.sharing = FlowSharing::PerFlow;
        let b = buffers(&q).unwrap();
        assert_eq!(b.window_bytes.get(), 125_000_000);
        assert_eq!(b.memory.receiver_bytes.get(), 4 * 250_000_000);
    }

    #[test]
    fn a_budget_caps_each_flow_and_says_what_rate_remains() {
        let mut q = query("10gbit", "100ms", "6.18");
        q.flows = 4;
        q.memory_budget = Some("128MB".parse().unwrap());
        let b = buffers(&q).unwrap();
        let rx = b.memory.receiver.unwrap();
        assert!(!rx.fits);
        assert_eq!(rx.per_flow_cap_bytes.get(), 32_000_000);
        assert_eq!(rx.window_at_cap_bytes.get(), 16_000_000);
        // 4 × 16 MB / 100 ms = 5.12 Gbit/s.
        assert!((rx.aggregate_rate_bps.bps() - 5.12e9).abs() < 1.0);
        q.memory_budget = Some("1GB".parse().unwrap());
        let b = buffers(&q).unwrap();
        let rx = b.memory.receiver.unwrap();
        assert!(rx.fits);
        assert!((rx.aggregate_rate_bps.bps() - 10e9).abs() < 1.0);
    }

    #[test]
    fn more_than_one_gib_of_window_needs_parallel_flows() {
        // 100 Gbit/s × 100 ms = 1.25 GB > the 1 GiB largest window (65535 × 2^14, RFC 7323 §2.3).
        let b = buffers(&query("100gbit", "100ms", "6.18")).unwrap();
        assert!(b.exceeds_max_window);
        assert_eq!(b.min_flows, Some(2));
        assert!(b.caveats.iter().any(|c| c.contains("1073725440")));
        assert!(b.caveats.iter().any(|c| c.contains("C ints")));
        let b = buffers(&query("10gbit", "100ms", "6.18")).unwrap();
        assert!(!b.exceeds_max_window && b.min_flows.is_none());
    }

    #[test]
    fn zero_flows_is_refused() {
        let mut q = query("1gbit", "1ms", "6.1");
        q.flows = 0;
        assert!(buffers(&q).is_err());
    }

    #[test]
    fn text_names_the_values_a_person_sets() {
        let t = buffers(&query("1gbit", "50ms", "6.1")).unwrap().to_string();
        assert!(t.contains("tcp_rmem max"), "{t}");
        assert!(t.contains("6.1 (given): window = buf − buf>>1"), "{t}");
        assert!(t.contains("does not apply"), "{t}");
    }

    proptest::proptest! {
        #[test]
        fn the_recommended_buffer_gives_the_window(
            bps in 1e5f64..1e11, rtt_us in 10u64..1_000_000, ratio in 1u8..=255, old: bool,
        ) {
            let mut q = query("1gbit", "1ms", if old { "5.15" } else { "6.6" });
            q.rate = Rate::from_bps(bps);
            q.rtt = Dur::from_micros(rtt_us);
            q.scaling_ratio = Some(ratio);
            let b = buffers(&q).unwrap();
            let w = window_of_receive_buffer(b.tcp_rmem_max_bytes, b.window_rule);
            proptest::prop_assert!(w >= b.window_bytes);
            // SO_RCVBUF doubled is the same buffer (to within the rounding of the halving).
            proptest::prop_assert!(b.so_rcvbuf_bytes.get() * 2 >= b.tcp_rmem_max_bytes.get());
            let s = window_of_send_buffer(b.tcp_wmem_max_bytes, b.congestion_control);
            proptest::prop_assert_eq!(s, b.window_bytes);
        }
    }
}
