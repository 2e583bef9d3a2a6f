//! The live loop: a sock_diag dump of every namespace each interval (through
//! `tcptune-kernel`, like `conns`, `watch` and the exporter), trace events in between when a
//! tracer is open, each turned into updates by the [`Scope`] and handed to the [`Hub`] (and a
//! recording). The only I/O of the crate besides HTTP.

use std::fs::File;
use std::io::BufWriter;
use std::time::Duration;

use tcptune_kernel::diag::ext;
use tcptune_kernel::trace::{TraceFilter, Tracer};
use tcptune_kernel::{Filter, KernelError};
use tcptune_os::process::monotonic_ns;

use crate::hub::Hub;
use crate::record::Recorder;
use crate::scope::Scope;
use crate::update::Update;

/// A namespace looked into (`None`: ours): `conns`' and `watch`'s own.
pub use tcptune_conns::dump::Target;

/// Why the live loop stopped early.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// A dump failed (the namespace, `None` for ours; the kernel's error).
    #[error("dumping sockets{where_}: {1}", where_ = .0.as_ref().map(|n| format!(" in network namespace '{n}'")).unwrap_or_default())]
    Dump(Option<String>, KernelError),
    /// Writing the `--record` file failed.
    #[error("writing the recording: {0}")]
    Record(std::io::Error),
}

/// Per-ACK events kept per connection and second by the tracer's in-kernel cap.
pub const TRACE_CAP_PER_S: u32 = 2000;

/// What the loop runs with.
pub struct Live<'a> {
    /// The namespaces to dump each interval.
    pub targets: Vec<Target>,
    /// Which sockets to dump.
    pub filter: Filter,
    /// The core that turns dumps and trace events into updates.
    pub scope: Scope,
    /// Where updates are published.
    pub hub: &'a Hub,
    /// Time between dumps.
    pub interval: Duration,
    /// The `--record` file, when asked.
    pub recorder: Option<Recorder<BufWriter<File>>>,
    /// Per-ACK trace events, when tracing works here.
    pub tracer: Option<Tracer>,
}

/// The tracer's in-kernel filter for the kept connections. An empty cookie list would trace
/// every socket, so none kept is cookie 0, which is no socket's (the kernel's start at 1).
pub fn filter_of(mut cookies: Vec<u64>) -> TraceFilter {
    if cookies.is_empty() {
        cookies.push(0);
    }
    TraceFilter {
        ports: Vec::new(),
        cookies,
        max_events_per_conn_per_sec: TRACE_CAP_PER_S,
    }
}

/// How often trace buffers are read between dumps.
const TRACE_SLICE: Duration = Duration::from_millis(50);

impl Live<'_> {
    fn emit(&mut self, updates: &[Update]) -> Result<(), LiveError> {
        if updates.is_empty() {
            return Ok(());
        }
        self.hub.publish(updates);
        if let Some(r) = &mut self.recorder {
            r.write(updates).map_err(LiveError::Record)?;
        }
        Ok(())
    }

    fn poll(&mut self) -> Result<(), LiveError> {
        let mut dumps = Vec::with_capacity(self.targets.len());
        for t in &mut self.targets {
            let socks = t
                .diag
                .dump(&self.filter, ext::ROWS)
                .map_err(|e| LiveError::Dump(t.netns.clone(), e))?;
            dumps.push((t.netns.clone(), socks));
        }
        let watched = self.hub.watched();
        let updates = self.scope.dump(monotonic_ns(), dumps, &watched);
        self.emit(&updates)?;
        if let Some(tr) = &mut self.tracer {
            let filter = filter_of(self.scope.kept());
            // A filter the kernel refuses leaves the previous one in place; the polled
            // figures go on regardless.
            let _ = tr.set_filter(&filter);
        }
        Ok(())
    }

    fn read_trace(&mut self) -> Result<(), LiveError> {
        let Some(tr) = &mut self.tracer else {
            return Ok(());
        };
        let mut events = Vec::new();
        // A read error (the instance removed under us) is handled like the tracer's absence.
        if tr.read(&mut events).is_err() {
            self.tracer = None;
            return Ok(());
        }
        let updates = self.scope.trace(&events);
        self.emit(&updates)
    }

    /// Runs until `stop` says so.
    pub fn run(mut self, stop: &dyn Fn() -> bool) -> Result<(), LiveError> {
        let mut next = std::time::Instant::now();
        while !stop() {
            self.poll()?;
            next += self.interval;
            let now = std::time::Instant::now();
            if next < now {
                next = now; // fell behind: no burst of catch-up dumps
            }
            while std::time::Instant::now() < next && !stop() {
                let left = next.saturating_duration_since(std::time::Instant::now());
                // The sampling clock, not a synchronisation: wait for the next dump, reading
                // the trace buffers meanwhile.
                match &self.tracer {
                    // Woken early when a trace buffer has something.
                    Some(tr) => {
                        let _ = tr.wait(left.min(TRACE_SLICE));
                    }
                    None => std::thread::sleep(left.min(TRACE_SLICE)),
                }
                self.read_trace()?;
            }
        }
        Ok(())
    }
}
