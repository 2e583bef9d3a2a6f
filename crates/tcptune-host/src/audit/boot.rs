//! The rules on what the next boot does and what should not be on: the sysctl.d files that
//! override the running values (R25) and settings that are dangerous on a shared host.

use super::*;

impl Ctx<'_> {
    /// R25 and boot-time overrides: what the sysctl.d files will do at the next boot.
    pub(super) fn config_files(&mut self) {
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
    pub(super) fn dangerous(&mut self) {
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
