//! The rules on the socket buffers and TCP options: R16 and moderate_rcvbuf (the options),
//! the buffer maxima against the flow's BDP, the memory limits (tcp_mem) and sockets with
//! application-locked buffers.

use super::*;

impl Ctx<'_> {
    /// R16 and moderate_rcvbuf: the options every high-BDP transfer needs.
    pub(super) fn options(&mut self) {
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
    pub(super) fn buffers(&mut self) {
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

    pub(super) fn buffer_rule(
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

    /// R4: N flows' buffers against tcp_mem's pressure threshold and the budget.
    pub(super) fn memory(&mut self) {
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
    pub(super) fn locked_sockets(&mut self) {
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
}

impl Ctx<'_> {
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
}
