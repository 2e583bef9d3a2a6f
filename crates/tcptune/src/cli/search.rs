//! `tcptune tune --search`'s arguments (flattened into `tune`).

use clap::Args;
use tcptune_model::{Dur, Probability};

/// `tune --search`: closed-loop tuning against a test server.
#[derive(Args, Debug, Clone)]
pub struct SearchArgs {
    /// Test each change the diagnosis points to against the settings in effect, in A/B trials
    /// against the server --to HOST[:PORT] (tcptune serve or iperf3 -s); keep what helps, roll
    /// back the rest. Applies under the tune snapshot, so `tune --rollback` undoes it.
    #[arg(long, requires = "to", conflicts_with_all = ["write", "apply", "rollback"])]
    pub search: bool,
    /// With --search: tune the receiving side (the server sends, as iperf3 -R).
    #[arg(short = 'R', long, requires = "search")]
    pub reverse: bool,
    /// With --search: the most tests in all.
    #[arg(long, value_name = "N", default_value_t = 25, requires = "search")]
    pub max_tests: usize,
    /// With --search: the most time in all (90s, 5min).
    #[arg(long, value_name = "DUR", default_value = "300s", requires = "search")]
    pub max_time: Dur,
    /// With --search: each test's length in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 2, requires = "search")]
    pub test_time: u32,
    /// With --search: parallel streams per test.
    #[arg(short = 'P', long, default_value_t = 1, requires = "search")]
    pub parallel: u32,
    /// With --search: the largest loaded-RTT growth a change may cause (50%).
    #[arg(long, value_name = "SHARE", default_value = "50%", requires = "search")]
    pub max_rtt_growth: Probability,
    /// With --search: run one test of the path as it is and show the hypotheses and the
    /// trials it would run; change nothing.
    #[arg(long, requires = "search")]
    pub dry_run: bool,
    /// With --search: the audit-trail file, JSON lines of every change with its evidence
    /// (default beside the snapshot: tune-search-trail[-netns-NAME].jsonl).
    #[arg(long, value_name = "FILE", requires = "search")]
    pub trail: Option<std::path::PathBuf>,
    /// With --search: run one A/A trial instead (the settings in effect as both arms, changing
    /// nothing), to see how often the decision rule calls no difference a difference.
    #[arg(long, requires = "search", hide = true)]
    pub aa_trial: bool,
}
