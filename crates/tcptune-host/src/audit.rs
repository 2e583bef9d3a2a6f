//! The audit: every setting that limits TCP throughput, judged against a described path.
//!
//! Each rule is a function of the [`HostState`] and the [`AuditInput`] that pushes
//! [`Finding`]s: the current value, the recommended one, a verdict, why (one sentence with the
//! numbers), and the source of the rule (the kernel's ip-sysctl.rst and source, RFCs, ESnet's
//! fasterdata host tuning) in the finding's `source`. Rule ids (R1…) name the rules in the
//! README's list.

use std::fmt;

use schemars::JsonSchema;
use serde::Serialize;
use tcptune_model::kernel::{CongestionControl, KernelVersion, WindowRule, MAX_WINDOW_BYTES};
use tcptune_model::{bdp, buffers, Bytes, Dur, Probability, Rate};

use crate::state::HostState;

/// Which side of the bulk transfers this host is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Sender,
    Receiver,
    Both,
}

impl Role {
    fn receives(self) -> bool {
        matches!(self, Role::Receiver | Role::Both)
    }
    fn sends(self) -> bool {
        matches!(self, Role::Sender | Role::Both)
    }
}

/// What the host is judged against.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AuditInput {
    /// Bottleneck rate of the path, bits per second.
    pub rate_bps: Rate,
    /// Round-trip time of the path, seconds.
    pub rtt_s: Dur,
    /// Packet loss rate of the path, when known.
    pub loss: Option<Probability>,
    /// Concurrent bulk flows sharing the path (and this host's memory).
    pub flows: u32,
    /// Memory the buffers of those flows may take in all, when bounded.
    pub memory_budget_bytes: Option<Bytes>,
    pub role: Role,
    /// Size buffer maxima to this path ([`fitted`]) rather than only raising short ones.
    #[serde(default)]
    pub fit: bool,
}

/// How a setting stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Fine for this path; nothing to do.
    Fine,
    /// Worth a look; no automatic change (or the change is outside this host's reach).
    Warning,
    /// Should change; `tune` will change it.
    Change,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Fine => "fine",
            Verdict::Warning => "warning",
            Verdict::Change => "change",
        })
    }
}

/// A change `tune` can make.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// Write a sysctl. `global` ones (net.core.*, tcp_mem) cannot be set inside a namespace.
    Sysctl {
        key: String,
        value: String,
        global: bool,
    },
    /// Change an interface's txqueuelen.
    Txqueuelen { dev: String, value: u32 },
}

/// One judged setting.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Finding {
    /// Rule id in the rule table (R1, R16, …).
    pub rule: String,
    /// The setting, as a sysctl key, `dev:NAME txqueuelen`, a route, or a socket.
    pub setting: String,
    pub current: String,
    pub recommended: Option<String>,
    pub verdict: Verdict,
    /// Why, in one sentence with the numbers.
    pub why: String,
    /// Where the rule comes from.
    pub source: String,
    /// What `tune` would do, for verdict `change`.
    pub action: Option<Action>,
}

/// The audit's result.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Audit {
    pub netns: Option<String>,
    pub kernel: Option<KernelVersion>,
    pub input: AuditInput,
    /// Path BDP, bytes.
    pub bdp_bytes: Bytes,
    /// BDP of one flow's share of the path, bytes.
    pub flow_bdp_bytes: Bytes,
    /// Receive buffer maximum one flow needs, bytes.
    pub rmem_needed_bytes: Bytes,
    /// Send buffer maximum one flow needs, bytes.
    pub wmem_needed_bytes: Bytes,
    pub findings: Vec<Finding>,
    /// One plain sentence: what to do, or that nothing needs changing.
    pub summary: String,
}

impl Audit {
    pub fn changes(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.verdict == Verdict::Change)
    }
    pub fn needs_attention(&self) -> bool {
        self.findings.iter().any(|f| f.verdict != Verdict::Fine)
    }
}

/// Sysctls that are one value for the whole kernel (not per network namespace).
pub fn is_global(key: &str) -> bool {
    key.starts_with("net.core.")
        || matches!(
            key,
            "net.ipv4.tcp_mem"
                | "net.ipv4.tcp_available_congestion_control"
                | "net.ipv4.tcp_allowed_congestion_control"
                | "net.ipv4.tcp_max_orphans"
        )
}

const SRC_RMEM: &str = "ip-sysctl.rst tcp_rmem/tcp_moderate_rcvbuf; tcp_rcvbuf_grow() and the 6.6 \
                        scaling_ratio (dfa2f0483360, 697a6c8cec03)";
const SRC_WMEM: &str = "ip-sysctl.rst tcp_wmem; tcp_sndbuf_expand() (factor 2; 3 in tcp_bbr.c)";
const SRC_OPTS: &str = "tcp(7); RFC 7323 (window scaling, timestamps), RFC 2018 (SACK); ESnet \
                        fasterdata host tuning";
const SRC_MEM: &str = "ip-sysctl.rst tcp_mem (pages; pressure mode clamps every socket)";

fn fmt_bytes(b: u64) -> String {
    Bytes::new(b).short()
}

/// The maximum `--fit` gives a buffer that `needed` bytes carry: 1.5× the need (headroom for
/// an RTT that grows with queueing, and for delayed and stretched ACKs; the need itself
/// already counts the kernel's overhead, twice the window or more), rounded up like every
/// recommended buffer, and at least 128 KiB: two of the largest (64 KiB) TSO bursts, so a
/// sender can fill one while the other is in flight, whatever the BDP.
///
/// Chosen with the tuning evaluation (examples/tuning-evaluation): a 256 KiB floor used 3.4×
/// the smallest sufficient buffer on a 1 Gbit/s × 0.2 ms LAN; twice the need would let the
/// scaled 10 Gbit/s × 1.6 ms path's buffers grow to 8 + 8 MiB, twice the 4 + 4 MiB that
/// suffice there.
pub fn fitted(needed: u64) -> u64 {
    round_buffer(1.5 * needed as f64).max(128 * 1024)
}

/// Rounds a buffer size up to a readable value: a whole MiB above 4 MiB, 64 KiB below.
fn round_buffer(bytes: f64) -> u64 {
    let unit = if bytes > 4.0 * 1048576.0 {
        1048576.0
    } else {
        65536.0
    };
    ((bytes / unit).ceil() * unit) as u64
}

/// Runs every rule.
pub fn audit(state: &HostState, input: &AuditInput) -> Audit {
    let flows = input.flows.max(1);
    let path_bdp = bdp::bdp(input.rate_bps, input.rtt_s).bdp_bytes;
    let flow_rate = Rate::from_bps(input.rate_bps.bps() / flows as f64);
    let flow_bdp = bdp::bdp(flow_rate, input.rtt_s).bdp_bytes;
    let adv = state
        .sysctl("net.ipv4.tcp_adv_win_scale")
        .and_then(|v| v.trim().parse().ok());
    // Without a known kernel, assume a recent one (the 6.6+ rule).
    let kernel = state.kernel.unwrap_or(KernelVersion::SCALING_RATIO_SINCE);
    let rule = WindowRule::for_kernel(kernel, None, adv);
    let fraction = rule.payload_fraction();
    let cc = state
        .sysctl("net.ipv4.tcp_congestion_control")
        .unwrap_or("")
        .to_string();
    let rmem_needed = round_buffer(buffers::receive_buffer_for(flow_bdp, rule).get() as f64);
    let mut ctx = Ctx {
        state,
        input,
        flows,
        flow_bdp: flow_bdp.get(),
        fraction,
        cc,
        sender_cc: CongestionControl::Cubic,
        rmem_needed,
        wmem_needed: 0,
        out: Vec::new(),
    };
    // The send buffer is sized for the control the sender runs once the audit is followed: BBR
    // where it is the default, or where R13 switches a loss-limited host to it.
    if ctx.cc == "bbr" || ctx.switches_to_bbr() {
        ctx.sender_cc = CongestionControl::Bbr;
    }
    let wmem_needed = round_buffer(buffers::send_buffer_for(flow_bdp, ctx.sender_cc).get() as f64);
    ctx.wmem_needed = wmem_needed;
    ctx.options();
    ctx.buffers();
    ctx.memory();
    ctx.locked_sockets();
    ctx.congestion_control();
    ctx.interfaces();
    ctx.routes();
    ctx.config_files();
    ctx.dangerous();
    let mut findings = ctx.out;
    findings.sort_by_key(|f| std::cmp::Reverse(f.verdict));
    let summary = summarize(&findings, input, path_bdp, rmem_needed, wmem_needed);
    Audit {
        netns: state.netns.clone(),
        kernel: state.kernel,
        input: input.clone(),
        bdp_bytes: path_bdp,
        flow_bdp_bytes: flow_bdp,
        rmem_needed_bytes: Bytes::new(rmem_needed),
        wmem_needed_bytes: Bytes::new(wmem_needed),
        findings,
        summary,
    }
}

fn summarize(findings: &[Finding], input: &AuditInput, bdp: Bytes, rmem: u64, wmem: u64) -> String {
    let changes = findings
        .iter()
        .filter(|f| f.verdict == Verdict::Change)
        .count();
    let warnings = findings
        .iter()
        .filter(|f| f.verdict == Verdict::Warning)
        .count();
    let path = format!("{} × {} (BDP {})", input.rate_bps, input.rtt_s, bdp.short());
    match (changes, warnings) {
        (0, 0) => format!(
            "Nothing needs changing for {path}: the buffers already allow a full window \
             (a flow needs {} to receive and {} to send)",
            fmt_bytes(rmem),
            fmt_bytes(wmem)
        ),
        (0, w) => format!("No change needed for {path}; {w} warning(s) worth reading"),
        (c, w) => format!(
            "{c} setting(s) should change for {path} ({w} warning(s)); `tcptune tune` prints the change"
        ),
    }
}

struct Ctx<'a> {
    state: &'a HostState,
    input: &'a AuditInput,
    flows: u32,
    flow_bdp: u64,
    fraction: f64,
    cc: String,
    /// The control the sender runs after the audit's changes (the send buffer's factor).
    sender_cc: CongestionControl,
    rmem_needed: u64,
    wmem_needed: u64,
    out: Vec<Finding>,
}

impl Ctx<'_> {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        rule: &str,
        setting: &str,
        current: String,
        recommended: Option<String>,
        verdict: Verdict,
        why: String,
        source: &str,
        action: Option<Action>,
    ) {
        self.out.push(Finding {
            rule: rule.into(),
            setting: setting.into(),
            current,
            recommended,
            verdict,
            why,
            source: source.into(),
            action,
        });
    }

    fn sysctl_change(&self, key: &str, value: String) -> Option<Action> {
        Some(Action::Sysctl {
            key: key.into(),
            value,
            global: is_global(key),
        })
    }

    /// R16 and moderate_rcvbuf: the options every high-BDP transfer needs.
    fn options(&mut self) {
        let win_bound = Rate::from_bytes_per(Bytes::new(65535), self.input.rtt_s);
        let items: [(&str, String); 3] = [
            (
                "net.ipv4.tcp_window_scaling",
                format!(
                    "without window scaling the window stops at 64 KiB, so one flow gets at \
                     most {win_bound} over {} (path {})",
                    self.input.rtt_s, self.input.rate_bps
                ),
            ),
            (
                "net.ipv4.tcp_sack",
                "without SACK a loss costs a round trip per lost segment and RACK/TLP loss \
                 recovery cannot work"
                    .into(),
            ),
            (
                "net.ipv4.tcp_timestamps",
                "without timestamps RTT is sampled once per window and PAWS cannot protect \
                 fast transfers against wrapped sequence numbers"
                    .into(),
            ),
        ];
        for (key, why_off) in items {
            match self.state.sysctl_u64(key) {
                Some(0) => self.push(
                    "R16",
                    key,
                    "0".into(),
                    Some("1".into()),
                    Verdict::Change,
                    format!("{why_off}."),
                    SRC_OPTS,
                    self.sysctl_change(key, "1".into()),
                ),
                Some(v) => self.push(
                    "R16",
                    key,
                    v.to_string(),
                    None,
                    Verdict::Fine,
                    "enabled, as it should be.".into(),
                    SRC_OPTS,
                    None,
                ),
                None => {}
            }
        }
        let key = "net.ipv4.tcp_moderate_rcvbuf";
        if let Some(v) = self.state.sysctl_u64(key) {
            if v == 0 && self.input.role.receives() {
                let default = self
                    .state
                    .sysctl_field("net.ipv4.tcp_rmem", 1)
                    .unwrap_or(131072);
                self.push(
                    "R1",
                    key,
                    "0".into(),
                    Some("1".into()),
                    Verdict::Change,
                    format!(
                        "receive autotuning is off, so every socket keeps tcp_rmem's default \
                         {} (a window of about {}) while a flow needs {}.",
                        fmt_bytes(default),
                        fmt_bytes((default as f64 * self.fraction) as u64),
                        fmt_bytes(self.flow_bdp)
                    ),
                    SRC_RMEM,
                    self.sysctl_change(key, "1".into()),
                );
            }
        }
    }

    /// R1, R2, R3: per-socket buffer maxima against the per-flow BDP.
    fn buffers(&mut self) {
        let budget_per_flow = self
            .input
            .memory_budget_bytes
            .map(|b| b.get() / self.flows as u64);
        let per_flow = if self.flows > 1 {
            format!(" per flow ({} flows)", self.flows)
        } else {
            String::new()
        };
        if self.input.role.receives() {
            self.buffer_rule(
                "R1",
                "net.ipv4.tcp_rmem",
                self.rmem_needed,
                budget_per_flow,
                format!(
                    "a window of one BDP ({}{per_flow}) needs a receive buffer of BDP / {:.2} \
                     (the share of the buffer this kernel advertises as window)",
                    fmt_bytes(self.flow_bdp),
                    self.fraction
                ),
                SRC_RMEM,
            );
        }
        if self.input.role.sends() {
            self.buffer_rule(
                "R2",
                "net.ipv4.tcp_wmem",
                self.wmem_needed,
                budget_per_flow,
                format!(
                    "the sender keeps unacknowledged data plus its overhead in the send buffer: \
                     {}× the BDP of {}{per_flow} with {}",
                    self.sender_cc.sndbuf_expand_factor(),
                    fmt_bytes(self.flow_bdp),
                    if self.sender_cc == CongestionControl::Bbr && self.cc != "bbr" {
                        "bbr (recommended below)"
                    } else if self.cc.is_empty() {
                        "this congestion control"
                    } else {
                        &self.cc
                    }
                ),
                SRC_WMEM,
            );
        }
        if self.flow_bdp > MAX_WINDOW_BYTES {
            let n = (self
                .input
                .rate_bps
                .times(self.input.rtt_s)
                .to_bytes_ceil()
                .get())
            .div_ceil(MAX_WINDOW_BYTES);
            self.push(
                "R3",
                "flows",
                self.flows.to_string(),
                Some(n.to_string()),
                Verdict::Warning,
                format!(
                    "one flow's BDP of {} exceeds the largest TCP window (65535 × 2^14 = 1 GiB); \
                     use at least {n} parallel flows.",
                    fmt_bytes(self.flow_bdp)
                ),
                "RFC 7323 §2.3; tcp_select_initial_window()",
                None,
            );
        }
    }

    fn buffer_rule(
        &mut self,
        rule: &str,
        key: &str,
        needed: u64,
        budget_per_flow: Option<u64>,
        reason: String,
        source: &str,
    ) {
        let Some(current) = self.state.sysctl(key).map(str::to_string) else {
            return;
        };
        let fields: Vec<u64> = current
            .split_whitespace()
            .filter_map(|f| f.parse().ok())
            .collect();
        let [min, default, max] = fields[..] else {
            return;
        };
        let target = match budget_per_flow {
            Some(b) if b < needed => b.max(default),
            _ if self.input.fit => fitted(needed).max(default),
            _ => needed,
        };
        // --fit: the maximum becomes the fitted size, lowered or raised.
        if self.input.fit && max != target && target >= needed {
            let value = format!("{min} {default} {target}");
            let why = if max > target {
                format!(
                    "{reason}: {} is needed; the maximum {} lets autotuning grow every flow's \
                     buffer beyond it (into a deep bottleneck queue) — {} is 1.5× the need \
                     (--fit).",
                    fmt_bytes(needed),
                    fmt_bytes(max),
                    fmt_bytes(target)
                )
            } else {
                format!(
                    "{reason}: {} is needed; the maximum {} leaves little headroom for an RTT \
                     that grows with queueing — {} is 1.5× the need (--fit).",
                    fmt_bytes(needed),
                    fmt_bytes(max),
                    fmt_bytes(target)
                )
            };
            let action = self.sysctl_change(key, value.clone());
            self.push(
                rule,
                key,
                current,
                Some(value),
                Verdict::Change,
                why,
                source,
                action,
            );
            return;
        }
        if max >= needed {
            let far_above = budget_per_flow.is_some_and(|b| max > b);
            let (verdict, why) = if far_above {
                (
                    Verdict::Warning,
                    format!(
                        "{reason}: {} is enough, but {} flows could each grow to the maximum {}, \
                         {} in all, above the memory budget.",
                        fmt_bytes(needed),
                        self.flows,
                        fmt_bytes(max),
                        fmt_bytes(max * self.flows as u64)
                    ),
                )
            } else {
                (
                    Verdict::Fine,
                    format!(
                        "{reason}: {} is needed and the maximum {} allows it.",
                        fmt_bytes(needed),
                        fmt_bytes(max)
                    ),
                )
            };
            self.push(rule, key, current, None, verdict, why, source, None);
            return;
        }
        let value = format!("{min} {default} {target}");
        let bound = Rate::from_bytes_per(self.window_of(key, max), self.input.rtt_s);
        let mut why = format!(
            "{reason}: {} is needed but the maximum is {}, which holds one flow to about {bound}",
            fmt_bytes(needed),
            fmt_bytes(max)
        );
        if target < needed {
            why.push_str(&format!(
                "; the memory budget allows only {} per flow, so the path cannot be filled",
                fmt_bytes(target)
            ));
        }
        why.push_str(&format!(
            " (memory if every flow grows fully: {}).",
            fmt_bytes(target * self.flows as u64)
        ));
        self.push(
            rule,
            key,
            current,
            Some(value.clone()),
            Verdict::Change,
            why,
            source,
            self.sysctl_change(key, value),
        );
    }

    /// The window a buffer maximum of `max` bytes gives one flow: the receive side's share
    /// advertised as window, or the send side's buffer over the same expand factor (2; 3 with
    /// BBR) the needed size was computed with (the model's one rule, so the two agree).
    fn window_of(&self, key: &str, max: u64) -> Bytes {
        if key == "net.ipv4.tcp_wmem" {
            buffers::window_of_send_buffer(Bytes::new(max), self.sender_cc)
        } else {
            Bytes::new((max as f64 * self.fraction) as u64)
        }
    }

    /// R4: N flows' buffers against tcp_mem's pressure threshold and the budget.
    fn memory(&mut self) {
        let Some(pressure_pages) = self.state.sysctl_field("net.ipv4.tcp_mem", 1) else {
            return;
        };
        let page = self.state.page_size.max(1);
        let pressure = pressure_pages * page;
        let mut need = 0;
        if self.input.role.receives() {
            need += self.rmem_needed;
        }
        if self.input.role.sends() {
            need += self.wmem_needed;
        }
        let total = need * self.flows as u64;
        let used = self.state.tcp_mem_used_pages.map(|p| p * page).unwrap_or(0);
        let current = self
            .state
            .sysctl("net.ipv4.tcp_mem")
            .unwrap_or("")
            .to_string();
        if total + used > pressure {
            self.push(
                "R4",
                "net.ipv4.tcp_mem",
                current,
                None,
                Verdict::Warning,
                format!(
                    "{} flow(s) × {} of buffers = {} (plus {} in use now) exceeds the pressure \
                     threshold tcp_mem[1] = {}; in pressure mode every socket is clamped to \
                     tcp_rmem[0]; use fewer flows or add memory (never raise tcp_mem past RAM).",
                    self.flows,
                    fmt_bytes(need),
                    fmt_bytes(total),
                    fmt_bytes(used),
                    fmt_bytes(pressure)
                ),
                SRC_MEM,
                None,
            );
        } else {
            self.push(
                "R4",
                "net.ipv4.tcp_mem",
                current,
                None,
                Verdict::Fine,
                format!(
                    "{} flow(s) × {} of buffers = {} stays below the pressure threshold {}.",
                    self.flows,
                    fmt_bytes(need),
                    fmt_bytes(total),
                    fmt_bytes(pressure)
                ),
                SRC_MEM,
                None,
            );
        }
    }

    /// R5, R6, R7: applications that fix SO_RCVBUF/SO_SNDBUF, and rmem_max/wmem_max.
    fn locked_sockets(&mut self) {
        let mut rcv_too_small = false;
        let sockets = self.state.locked_sockets.clone();
        for s in &sockets {
            let Some(rcvbuf) = s.rcvbuf_locked else {
                continue;
            };
            // Twice the BDP, as for the buffer maxima (R1): a window of just one BDP leaves no
            // room for the RTT growing under load or for stretched ACKs.
            let window = (rcvbuf as f64 * self.fraction) as u64;
            if window >= 2 * self.flow_bdp {
                continue;
            }
            rcv_too_small = true;
            let bound = Rate::from_bytes_per(Bytes::new(window), self.input.rtt_s);
            let mut why =
                format!(
                "{} set SO_RCVBUF, which turns autotuning off: its {} buffer gives a window of \
                 about {} and at most {bound}, below twice the BDP of {}; remove the setsockopt \
                 or ask for at least {}.",
                s.process.as_deref().unwrap_or("the application"),
                fmt_bytes(rcvbuf),
                fmt_bytes(window),
                fmt_bytes(self.flow_bdp),
                fmt_bytes(round_buffer(2.0 * self.flow_bdp as f64 / self.fraction / 2.0))
            );
            if self
                .state
                .kernel
                .is_some_and(|k| k.at_least(6, 6) && !k.at_least(6, 10))
            {
                why.push_str(
                    " On 6.6–6.9 kernels without commit 697a6c8cec03 such a window can stay near \
                     a quarter of the buffer (R6).",
                );
            }
            self.push(
                "R5",
                &format!("socket {} → {}", s.local, s.remote),
                format!("SO_RCVBUF locked, sk_rcvbuf {}", fmt_bytes(rcvbuf)),
                Some("autotuning (no SO_RCVBUF)".into()),
                Verdict::Warning,
                why,
                "socket(7) SO_RCVBUF; ip-sysctl.rst tcp_rmem",
                None,
            );
        }
        let key = "net.core.rmem_max";
        let Some(rmem_max) = self.state.sysctl_u64(key) else {
            return;
        };
        // An application's request is capped at rmem_max and then doubled.
        let needed = round_buffer(self.flow_bdp as f64 / self.fraction / 2.0);
        if rcv_too_small && rmem_max < needed {
            self.push(
                "R5",
                key,
                rmem_max.to_string(),
                Some(needed.to_string()),
                Verdict::Change,
                format!(
                    "applications that set SO_RCVBUF are capped at rmem_max {} (doubled to {}), \
                     a window of about {}; the path needs {}.",
                    fmt_bytes(rmem_max),
                    fmt_bytes(rmem_max * 2),
                    fmt_bytes((rmem_max as f64 * 2.0 * self.fraction) as u64),
                    fmt_bytes(self.flow_bdp)
                ),
                "socket(7); net.rst rmem_max",
                self.sysctl_change(key, needed.to_string()),
            );
        } else {
            self.push(
                "R7",
                key,
                rmem_max.to_string(),
                None,
                Verdict::Fine,
                if rcv_too_small {
                    format!(
                        "rmem_max {} lets an application that sets SO_RCVBUF ask for the {} this \
                         path needs; autotuning is capped by tcp_rmem alone.",
                        fmt_bytes(rmem_max),
                        fmt_bytes(needed)
                    )
                } else {
                    "rmem_max caps only sockets that set SO_RCVBUF (none seen with too small a \
                     buffer); autotuning is capped by tcp_rmem alone."
                        .into()
                },
                "ip-sysctl.rst tcp_rmem; net.rst rmem_max",
                None,
            );
        }
    }

    /// R10, R11, R13: the congestion control against the kernel and the path's loss.
    fn congestion_control(&mut self) {
        let key = "net.ipv4.tcp_congestion_control";
        if self.cc.is_empty() {
            return;
        }
        let available = self.state.congestion_controls_available();
        let kernel = self.state.kernel;
        if self.cc == "bbr" {
            let fq = self.state.traffic_interfaces().any(|i| i.qdisc == "fq");
            if kernel.is_some_and(|k| !k.at_least(4, 13)) && !fq {
                self.push(
                    "R10",
                    key,
                    self.cc.clone(),
                    Some("fq qdisc on the egress interface".into()),
                    Verdict::Warning,
                    "BBR before 4.13 has no internal pacing and needs the fq qdisc.".into(),
                    "pacing commit 218af599fa63; tcp_bbr.c",
                    None,
                );
                return;
            }
            if kernel.is_some_and(|k| !k.at_least(4, 20)) && !fq {
                self.push(
                    "R11",
                    key,
                    self.cc.clone(),
                    Some("fq qdisc on the egress interface".into()),
                    Verdict::Warning,
                    "BBR's internal pacing works well only from 4.20; use fq before that.".into(),
                    "google/bbr quick-start",
                    None,
                );
                return;
            }
        }
        if let Some((p, bound)) = self.loss_limit() {
            let mss = self.mss();
            let flow_rate = self.input.rate_bps.bps() / self.flows as f64;
            let bbr = available.contains(&"bbr");
            self.push(
                "R13",
                key,
                self.cc.clone(),
                bbr.then(|| "bbr".to_string()),
                if bbr {
                    Verdict::Change
                } else {
                    Verdict::Warning
                },
                format!(
                    "with {p} loss over {} a loss-based control reaches about {bound} \
                     (Mathis, MSS {mss}), below the {} a flow could have; {}",
                    self.input.rtt_s,
                    Rate::from_bps(flow_rate),
                    if bbr {
                        "BBR's rate does not collapse under random loss."
                    } else {
                        "BBR would not collapse, but this kernel does not offer it."
                    }
                ),
                "Mathis et al. 1997; BBR (Cardwell et al. 2016)",
                bbr.then(|| self.sysctl_change(key, "bbr".into())).flatten(),
            );
            return;
        }
        self.push(
            "R14",
            key,
            self.cc.clone(),
            None,
            Verdict::Fine,
            format!("available here: {}.", available.join(", ")),
            "ip-sysctl.rst tcp_congestion_control",
            None,
        );
    }

    /// The MSS of the widest interface that carries traffic (IPv4 + TCP with timestamps).
    /// The path's loss and the Mathis bound of a loss-based control on it, when this host runs
    /// one and the bound is below a flow's share of the path (R13).
    fn loss_limit(&self) -> Option<(Probability, Rate)> {
        let loss_based = matches!(self.cc.as_str(), "cubic" | "reno" | "htcp");
        let p = self.input.loss.filter(|p| p.get() > 0.0 && loss_based)?;
        // Mathis et al. with C = sqrt(3/2): the loss-limited bound of Reno-style AIMD.
        let bound = Rate::from_bps(tcptune_model::mathis::mathis_bps(
            tcptune_model::Bytes::new(self.mss()),
            self.input.rtt_s,
            p.get(),
            tcptune_model::mathis::MathisConstant::Periodic.value(),
        ));
        let flow_rate = self.input.rate_bps.bps() / self.flows as f64;
        (bound.bps() < flow_rate).then_some((p, bound))
    }

    /// Whether R13 switches this host to BBR (loss-limited, and the kernel offers BBR).
    fn switches_to_bbr(&self) -> bool {
        self.loss_limit().is_some() && self.state.congestion_controls_available().contains(&"bbr")
    }

    fn mss(&self) -> u64 {
        let mtu = self
            .state
            .traffic_interfaces()
            .map(|i| i.mtu)
            .max()
            .unwrap_or(1500);
        u64::from(mtu.saturating_sub(52).max(536))
    }

    /// R15, R24: MTU probing for jumbo frames, and queues that add too much delay.
    fn interfaces(&mut self) {
        let ifaces: Vec<_> = self.state.traffic_interfaces().cloned().collect();
        let probing = self.state.sysctl_u64("net.ipv4.tcp_mtu_probing");
        if let Some(jumbo) = ifaces.iter().find(|i| i.mtu > 1500) {
            if probing == Some(0) {
                self.push(
                    "R15",
                    "net.ipv4.tcp_mtu_probing",
                    "0".into(),
                    Some("1".into()),
                    Verdict::Change,
                    format!(
                        "{} has MTU {}: if any hop on the way is 1500 and ICMP is filtered, \
                         connections stall; probing (1, not 2) recovers from such black holes.",
                        jumbo.name, jumbo.mtu
                    ),
                    "ip-sysctl.rst tcp_mtu_probing; ESnet fasterdata (use 1)",
                    self.sysctl_change("net.ipv4.tcp_mtu_probing", "1".into()),
                );
            }
        }
        for i in &ifaces {
            // Only FIFO qdiscs take their length from txqueuelen; fq/fq_codel have own limits.
            if !matches!(i.qdisc.as_str(), "pfifo_fast" | "pfifo" | "bfifo") {
                continue;
            }
            let drain = Dur::from_secs_f64(
                i.txqueuelen as f64 * i.mtu as f64 * 8.0 / self.input.rate_bps.bps(),
            );
            let limit = self.input.rtt_s.nanos().max(Dur::from_millis(20).nanos());
            let setting = format!("dev:{} txqueuelen", i.name);
            if i.txqueuelen > 1000 && drain.nanos() > 2 * limit {
                // The largest queue that still drains in one RTT (at least the default 1000).
                let fits = ((self.input.rate_bps.bytes_per_sec() * (limit as f64 / 1e9))
                    / i.mtu as f64) as u32;
                let value = fits.max(1000);
                self.push(
                    "R24",
                    &setting,
                    i.txqueuelen.to_string(),
                    Some(value.to_string()),
                    Verdict::Change,
                    format!(
                        "a full {}-packet queue of {}-byte packets takes {drain} to drain at \
                         {}, queueing delay that every flow through {} pays (bufferbloat).",
                        i.txqueuelen, i.mtu, self.input.rate_bps, i.name
                    ),
                    "ip-sysctl.rst tcp_limit_output_bytes (TSQ); ESnet fasterdata",
                    Some(Action::Txqueuelen {
                        dev: i.name.clone(),
                        value,
                    }),
                );
            } else {
                self.push(
                    "R24",
                    &setting,
                    i.txqueuelen.to_string(),
                    None,
                    Verdict::Fine,
                    format!("a full queue drains in {drain} at {}.", self.input.rate_bps),
                    "ip-sysctl.rst tcp_limit_output_bytes (TSQ)",
                    None,
                );
            }
        }
    }

    /// R21: route ssthresh that the kernel ignores.
    fn routes(&mut self) {
        let ignored = self
            .state
            .sysctl_u64("net.ipv4.tcp_no_ssthresh_metrics_save")
            == Some(1);
        for r in self.state.routes.clone() {
            if let (Some(ss), true) = (r.ssthresh, ignored) {
                self.push(
                    "R21",
                    &format!("route {} ssthresh", r.dst),
                    ss.to_string(),
                    None,
                    Verdict::Warning,
                    "with tcp_no_ssthresh_metrics_save=1 (the default) kernels without the 2025 \
                     tcp_metrics fixes ignore a route's ssthresh; check `ss -ti` shows it."
                        .into(),
                    "tcp_init_metrics(); P. Tesarik, tcp_metrics patches (2025)",
                    None,
                );
            }
        }
    }

    /// R25 and boot-time overrides: what the sysctl.d files will do at the next boot.
    fn config_files(&mut self) {
        if self.state.netns.is_some() {
            return; // sysctl.d files configure the host's own namespace only.
        }
        let files = self.state.sysctl_files.clone();
        let new_kernel = self.state.kernel.is_none_or(|k| k.at_least(6, 6));
        for l in &files {
            let short = l.key.rsplit('.').next().unwrap_or(&l.key);
            let obsolete = match short {
                "tcp_tw_recycle" => Some("was removed in Linux 4.12 (it broke clients behind NAT)"),
                "tcp_low_latency" | "tcp_fack" => Some("has had no effect for years"),
                "tcp_collapse_max_bytes" => Some("exists only in Cloudflare's patched kernel"),
                "tcp_adv_win_scale" if new_kernel => {
                    Some("does nothing since 6.6 (the per-socket scaling_ratio replaced it)")
                }
                _ => None,
            };
            if let Some(reason) = obsolete {
                self.push(
                    "R25",
                    &l.key,
                    format!("{}:{}: {}", l.path, l.line, l.value),
                    Some("remove the line".into()),
                    Verdict::Warning,
                    format!("{} {reason}; the line was copied from an old guide.", l.key),
                    "ip-sysctl.rst; cloudflare/linux patches",
                    None,
                );
            }
        }
        // The last file line for a key wins at boot; compare it with the running value.
        let mut last: std::collections::BTreeMap<&str, &crate::state::SysctlFileLine> =
            Default::default();
        for l in &files {
            last.insert(&l.key, l);
        }
        for (key, l) in last {
            let Some(running) = self.state.sysctl(key) else {
                continue;
            };
            if running != l.value {
                self.push(
                    "boot",
                    key,
                    running.to_string(),
                    Some(l.value.clone()),
                    Verdict::Warning,
                    format!(
                        "the running value differs from {}:{}, which will set {} at the next boot.",
                        l.path, l.line, l.value
                    ),
                    "sysctl.d(5)",
                    None,
                );
            }
        }
    }

    /// R26: values from copied scripts that hurt.
    fn dangerous(&mut self) {
        type Check = (&'static str, fn(u64) -> bool, &'static str, &'static str);
        let checks: [Check; 3] = [
            ("net.ipv4.tcp_retries2", |v| v < 8, "15", "fewer than 8 retries gives up on a connection after seconds of outage instead of the ≥100 s RFC 1122 asks for"),
            ("net.ipv4.tcp_syncookies", |v| v == 0, "1", "without syncookies a SYN flood fills the accept queue"),
            ("net.ipv4.tcp_abort_on_overflow", |v| v == 1, "0", "the kernel documentation warns that enabling it can harm clients of your server"),
        ];
        for (key, bad, default, why) in checks {
            if let Some(v) = self.state.sysctl_u64(key).filter(|v| bad(*v)) {
                self.push(
                    "R26",
                    key,
                    v.to_string(),
                    Some(default.into()),
                    Verdict::Change,
                    format!("{why}."),
                    "ip-sysctl.rst",
                    self.sysctl_change(key, default.into()),
                );
            }
        }
    }
}

impl fmt::Display for Audit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.input;
        writeln!(
            f,
            "Audit of {}{} for {} × {}{}, {} flow(s), role {:?}",
            self.netns
                .as_deref()
                .map(|n| format!("namespace {n}"))
                .unwrap_or_else(|| "this host".into()),
            self.kernel
                .map(|k| format!(" (kernel {k})"))
                .unwrap_or_default(),
            i.rate_bps,
            i.rtt_s,
            i.loss.map(|l| format!(", loss {l}")).unwrap_or_default(),
            i.flows,
            i.role,
        )?;
        writeln!(
            f,
            "  BDP {} (per flow {}); a flow needs a receive buffer of {} and a send buffer of {}",
            self.bdp_bytes.short(),
            self.flow_bdp_bytes.short(),
            self.rmem_needed_bytes.short(),
            self.wmem_needed_bytes.short()
        )?;
        for v in [Verdict::Change, Verdict::Warning, Verdict::Fine] {
            let group: Vec<_> = self.findings.iter().filter(|x| x.verdict == v).collect();
            if group.is_empty() {
                continue;
            }
            writeln!(f, "\n{}:", v.to_string().to_uppercase())?;
            for x in group {
                let rec = x
                    .recommended
                    .as_deref()
                    .map(|r| format!(" → {r}"))
                    .unwrap_or_default();
                writeln!(f, "  [{}] {} = {}{rec}", x.rule, x.setting, x.current)?;
                writeln!(f, "      {}", x.why)?;
                writeln!(f, "      source: {}", x.source)?;
            }
        }
        writeln!(f, "\n{}.", self.summary.trim_end_matches('.'))
    }
}
