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
use tcptune_model::sizing::{self, SizingQuery};
use tcptune_model::{bdp, buffers, Bytes, Dur, Probability, Rate};

use crate::state::HostState;

mod boot;
mod path;
mod sockets;

/// Which side of the bulk transfers this host is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// It sends the bulk data: the send buffers count.
    Sender,
    /// It receives the bulk data: the receive buffers count.
    Receiver,
    /// It does both (a server with uploads and downloads, or a test host).
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
    /// Which side of the transfers this host is.
    pub role: Role,
    /// Size buffer maxima to this path ([`tcptune_model::sizing::FIT`]) rather than only
    /// raising short ones.
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
        /// The sysctl, dotted (`net.ipv4.tcp_rmem`).
        key: String,
        /// The value to write, as /proc/sys prints it.
        value: String,
        /// Whether the key is one value for the whole kernel ([`is_global`]).
        global: bool,
    },
    /// Change an interface's txqueuelen.
    Txqueuelen {
        /// The interface.
        dev: String,
        /// The queue length, packets.
        value: u32,
    },
}

/// One judged setting.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Finding {
    /// Rule id in the rule table (R1, R16, …).
    pub rule: String,
    /// The setting, as a sysctl key, `dev:NAME txqueuelen`, a route, or a socket.
    pub setting: String,
    /// The value now, as read.
    pub current: String,
    /// The value recommended, when one is.
    pub recommended: Option<String>,
    /// How the setting stands.
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
    /// The network namespace audited (`None`: the caller's own).
    pub netns: Option<String>,
    /// The kernel's version, when it was read.
    pub kernel: Option<KernelVersion>,
    /// The path and flows the host was judged against.
    pub input: AuditInput,
    /// Path BDP, bytes.
    pub bdp_bytes: Bytes,
    /// BDP of one flow's share of the path, bytes.
    pub flow_bdp_bytes: Bytes,
    /// Receive buffer maximum one flow needs, bytes.
    pub rmem_needed_bytes: Bytes,
    /// Send buffer maximum one flow needs, bytes.
    pub wmem_needed_bytes: Bytes,
    /// Every judged setting, changes first.
    pub findings: Vec<Finding>,
    /// One plain sentence: what to do, or that nothing needs changing.
    pub summary: String,
}

impl Audit {
    /// The findings `tune` will act on (verdict `change`).
    pub fn changes(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.verdict == Verdict::Change)
    }
    /// Whether any finding is not fine (a change or a warning).
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

/// The maximum `--fit` gives a buffer whose recommended maximum is `needed` bytes: the model's
/// one policy ([`sizing::FIT`]), so `test --fit` names the same value.
pub fn fitted(needed: u64) -> u64 {
    sizing::FIT.fitted(Bytes::new(needed)).get()
}

/// Rounds a buffer size up to a value people write, by the model's one rule
/// ([`sizing::round_buffer`]).
fn round_buffer(bytes: f64) -> u64 {
    sizing::round_buffer(Bytes::new(bytes.ceil() as u64)).get()
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
    // Without a known kernel, the one every command assumes.
    let kernel = state.kernel.unwrap_or(KernelVersion::ASSUMED);
    let rule = WindowRule::for_kernel(kernel, None, adv);
    let fraction = rule.payload_fraction();
    let cc = state
        .sysctl("net.ipv4.tcp_congestion_control")
        .unwrap_or("")
        .to_string();
    let mut ctx = Ctx {
        state,
        input,
        flows,
        flow_bdp: flow_bdp.get(),
        fraction,
        cc,
        sender_cc: CongestionControl::Cubic,
        rmem_needed: 0,
        wmem_needed: 0,
        out: Vec::new(),
    };
    // The send buffer is sized for the control the sender runs once the audit is followed: BBR
    // where it is the default, or where R13 switches a loss-limited host to it.
    if ctx.cc == "bbr" || ctx.switches_to_bbr() {
        ctx.sender_cc = CongestionControl::Bbr;
    }
    // The maxima to recommend: the model's one sizing rule, as `test` and `tune` name them.
    let sized = sizing::size(&SizingQuery {
        rate: input.rate_bps,
        rtt: input.rtt_s,
        flows,
        cc: ctx.sender_cc,
        rule,
    });
    let (rmem_needed, wmem_needed) = (sized.rmem_max.get(), sized.wmem_max.get());
    ctx.rmem_needed = rmem_needed;
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
