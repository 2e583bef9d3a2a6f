//! Where the rows of `conns` and `watch` (and `watch --web`'s) come from: a sock_diag socket
//! per network namespace looked into (or a recorded kernel answer replayed, for CLI tests
//! without root), one dump of each turned into rows, the sockets' owning processes, and this
//! host's CPU use for the verdicts of loopback connections. All of the I/O goes through
//! `tcptune-kernel`; the time since the start is taken here and passed to the sans-IO rows.

use std::collections::HashSet;
use std::time::Instant;

use tcptune_diagnose::engine::CpuUse;
use tcptune_diagnose::Context;
use tcptune_kernel::diag::ext;
use tcptune_kernel::file::FileError;
use tcptune_kernel::filter::FilterError;
use tcptune_kernel::tcp_info::{KernelVersion, TailLayout};
use tcptune_kernel::{procs, sys, Diag, Filter, KernelError};
use tcptune_model::Dur;

use crate::conn::{Conn, History};

/// A sock_diag socket and the namespace it looks into (`None`: ours).
pub struct Target {
    /// The named network namespace (`None`: the current one).
    pub netns: Option<String>,
    /// The socket its dumps and queries go through.
    pub diag: Diag,
}

/// Why the sockets could not be looked at; each names the input and chains its cause.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// The filter's words do not parse.
    #[error("bad filter '{text}'")]
    BadFilter {
        /// The filter as given, words joined by spaces.
        text: String,
        /// What is wrong with it.
        #[source]
        source: FilterError,
    },
    /// The replayed recording cannot be read.
    #[error(transparent)]
    Replay(#[from] FileError),
    /// The replayed recording's kernel version does not parse.
    #[error("{REPLAY_KERNEL_ENV}={0} is not a kernel version such as 6.18")]
    ReplayKernel(String),
    /// A namespace's sock_diag socket cannot be opened.
    #[error(transparent)]
    Open(#[from] KernelError),
    /// A dump failed.
    #[error("{}", dump_context(.netns))]
    Dump {
        /// The namespace dumped (`None`: ours).
        netns: Option<String>,
        /// The kernel's refusal or the socket's error.
        #[source]
        source: KernelError,
    },
}

/// The filter of `conns`/`watch`'s words (ss's syntax).
pub fn parse_filter(words: &[String]) -> Result<Filter, DumpError> {
    let text = words.join(" ");
    text.parse::<Filter>()
        .map_err(|source| DumpError::BadFilter { text, source })
}

/// Recorded kernel answers to use instead of the kernel (CLI tests without root): a file of
/// netlink messages as under fixtures/kernel/, and the kernel version it came from.
pub const REPLAY_ENV: &str = "TCPTUNE_REPLAY_SOCK_DIAG";
/// The kernel version of [`REPLAY_ENV`]'s recording (default 6.18).
pub const REPLAY_KERNEL_ENV: &str = "TCPTUNE_REPLAY_KERNEL";
/// The largest recording replayed (fixtures are kilobytes; a dump of 100,000 sockets ~60 MB).
const REPLAY_LIMIT: u64 = 64 << 20;

/// A sock_diag socket in `netns` (`None`: ours), or in ours and every named namespace with
/// `all_netns`; the recording of [`REPLAY_ENV`] instead of the kernel when it is set.
pub fn targets(netns: Option<&str>, all_netns: bool) -> Result<Vec<Target>, DumpError> {
    if let Some(path) = std::env::var_os(REPLAY_ENV) {
        let rec = tcptune_kernel::file::read_regular_limited(
            std::path::Path::new(&path),
            REPLAY_LIMIT,
            &format!("{REPLAY_ENV} recording"),
        )?;
        let release = std::env::var(REPLAY_KERNEL_ENV).unwrap_or_else(|_| "6.18".into());
        let version = release
            .parse::<KernelVersion>()
            .map_err(|_| DumpError::ReplayKernel(release))?;
        return Ok(vec![Target {
            netns: netns.map(str::to_string),
            diag: Diag::replay(rec, TailLayout::for_kernel(version)),
        }]);
    }
    let mut names: Vec<Option<String>> = Vec::new();
    if all_netns {
        names.push(None);
        names.extend(sys::named_netns().into_iter().map(Some));
    } else {
        names.push(netns.map(str::to_string));
    }
    let mut out = Vec::new();
    for netns in names {
        match Diag::open_maybe_in(netns.as_deref()) {
            Ok(diag) => out.push(Target { netns, diag }),
            // Listed a moment ago and deleted since: nothing to look at there.
            Err(KernelError::NoSuchNetns(_)) if all_netns => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

/// This host's CPU use since `before`, for the verdicts of loopback connections (both of whose
/// ends run here).
pub fn host_cpu(before: Option<tcptune_kernel::cpustat::CpuTicks>) -> Option<CpuUse> {
    use tcptune_diagnose::engine::{CpuScope, End};
    let (busy, softirq, _) = before?.shares_until(&tcptune_kernel::cpustat::CpuTicks::now()?)?;
    Some(CpuUse {
        end: End::BothEnds,
        scope: CpuScope::Host,
        percent: busy * 100.0,
        cores: 1.0,
        softirq_percent: Some(softirq * 100.0),
        wait_percent: None,
    })
}

/// Highest rate first. The key is computed once per row, and rows move about once (they are
/// large; bench/conns sorts 20,000).
pub fn sort_by_rate(rows: &mut [Conn]) {
    rows.sort_by_cached_key(Conn::sort_key);
}

/// The time since `start`, as the rows take it.
pub fn since(start: Instant) -> Dur {
    Dur::from(start.elapsed())
}

/// Fills in owning processes (one /proc scan for all rows).
pub fn add_processes(rows: &mut [Conn]) {
    let inodes: HashSet<u32> = rows.iter().map(|c| c.inode).filter(|&i| i != 0).collect();
    let owners = procs::owners(&inodes);
    for c in rows {
        c.process = owners.get(&c.inode).cloned().map(Box::new);
    }
}

/// What to ask the kernel for: every row's evidence, and with `--all` the congestion
/// control's own info too.
fn row_ext(all: bool) -> u8 {
    if all {
        ext::TCPTUNE
    } else {
        ext::ROWS
    }
}

/// One dump of every target, turned into rows with the help of `history`.
pub fn sample_all(
    targets: &mut [Target],
    filter: &Filter,
    history: &mut History,
    start: Instant,
    ctx: &Context,
    all: bool,
) -> Result<Vec<Conn>, DumpError> {
    let mut rows = Vec::new();
    for t in targets.iter_mut() {
        let socks = t
            .diag
            .dump(filter, row_ext(all))
            .map_err(|source| DumpError::Dump {
                netns: t.netns.clone(),
                source,
            })?;
        let at = since(start);
        rows.extend(history.rows(t.netns.as_deref(), &socks, at, ctx, all));
    }
    Ok(rows)
}

/// One dump of every target, each socket's row handed to `each` as it is decoded (on the
/// decoding thread).
pub fn once(
    targets: &mut [Target],
    filter: &Filter,
    start: Instant,
    ctx: &Context,
    all: bool,
    mut each: impl FnMut(Conn) + Send,
) -> Result<(), DumpError> {
    for t in targets.iter_mut() {
        let at = since(start);
        let netns = t.netns.clone();
        let each = &mut each;
        t.diag
            .dump_each_parallel(filter, row_ext(all), |s| {
                let (mut c, _) = Conn::new(s, at, None, ctx, all);
                c.netns.clone_from(&netns);
                each(c);
            })
            .map_err(|source| DumpError::Dump {
                netns: t.netns.clone(),
                source,
            })?;
    }
    Ok(())
}

fn dump_context(netns: &Option<String>) -> String {
    match netns {
        Some(n) => format!("dumping sockets in network namespace '{n}'"),
        None => "dumping sockets".to_string(),
    }
}
