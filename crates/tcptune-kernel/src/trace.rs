//! Per-ACK kernel state of chosen sockets, from tracepoints read through tracefs and decoded
//! here (no BPF, no compiler at run time).
//!
//! A [`Tracer`] makes a trace instance of its own (`tcptune_os::tracefs`), so other users of
//! tracing are not disturbed: its own ring buffers on the `mono` clock (CLOCK_MONOTONIC, the
//! clock of tcp_info sample times), the tcp events enabled there only, each filtered in the
//! kernel by port or socket cookie. It reads every CPU's `trace_pipe_raw` without blocking and
//! decodes the pages itself ([`ring`]) with each event's fields located through its `format`
//! file ([`format`](mod@format)), never at assumed offsets ([`decode`]).
//!
//! What the events hold (include/trace/events/tcp.h): `tcp:tcp_probe` fires at the start of
//! `tcp_rcv_established`, for each segment arriving on an established socket, *before* TCP
//! processes it, so its values are the socket's state as the segment arrived: `snd_cwnd` in
//! segments, `ssthresh` as `tcp_current_ssthresh` (outside a window reduction, at least ¾ of
//! cwnd), `snd_wnd` and `rcv_wnd` in bytes, `srtt` in µs (`srtt_us >> 3`, the kernel keeping
//! srtt × 8). `tcp:tcp_retransmit_skb` and `tcp:tcp_cong_state_set` carry no cookie: their
//! socket is named by its address, learnt from the tcp_probe events of the same socket.

use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};

use serde::Serialize;
use tcptune_os::poll::PollFd;
use tcptune_os::tracefs::{Instance, Tracefs};

pub mod decode;
pub mod event;
pub mod format;
pub mod ring;

pub use event::{TraceEvent, TraceFilter, TraceKind};

use decode::{Cap, Decoders, EVENTS};
use format::{EventFormat, PageHeader};

/// Why tracing cannot be used. Display is one sentence starting "tracing unavailable:"
/// (a caller adds what it does instead, e.g. "; using sock_diag polling").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceUnavailable {
    /// Tracing needs CAP_SYS_ADMIN.
    #[error("tracing unavailable: reading kernel tracepoints needs root (CAP_SYS_ADMIN, to mount tracefs and make a trace instance)")]
    NotPermitted,
    /// The kernel has no tracefs.
    #[error("tracing unavailable: this kernel has no tracefs (built without CONFIG_TRACING)")]
    NoTracefs,
    /// A tracepoint tcptune reads is missing.
    #[error("tracing unavailable: this kernel has no tcp:{event} tracepoint (tcp_probe came in Linux 4.16)")]
    EventMissing {
        /// The tracepoint's name in the `tcp` group.
        event: String,
    },
    /// A big-endian host: the page decoder reads little-endian only.
    #[error("tracing unavailable: tcptune decodes trace pages on little-endian hosts only")]
    BigEndian,
    /// Mounting tracefs or setting up the instance failed.
    #[error("tracing unavailable: {step} failed ({error})")]
    Setup {
        /// The step that failed, e.g. mounting tracefs.
        step: String,
        /// Why, as the OS or tracefs said.
        error: String,
    },
}

impl TraceUnavailable {
    /// The reason for an error of `step` (what was being done, e.g. "mounting tracefs").
    pub fn from_io(step: &str, e: &io::Error) -> TraceUnavailable {
        match (e.kind(), e.raw_os_error()) {
            (io::ErrorKind::PermissionDenied, _) => TraceUnavailable::NotPermitted,
            (_, Some(libc::EPERM)) => TraceUnavailable::NotPermitted,
            (_, Some(libc::ENODEV)) if step == "mounting tracefs" => TraceUnavailable::NoTracefs,
            _ => TraceUnavailable::Setup {
                step: step.to_string(),
                error: e.to_string(),
            },
        }
    }
}

/// Counts since the tracer opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct TraceStats {
    /// Events handed out.
    pub events: u64,
    /// Events dropped by the per-connection cap.
    pub dropped_by_cap: u64,
    /// Events the kernel lost (its buffer was full before we read it), as it counted them.
    pub lost_in_kernel: u64,
    /// Pages that said events were lost without saying how many.
    pub lost_uncounted_pages: u64,
    /// Pages that could not be decoded (skipped).
    pub bad_pages: u64,
}

/// How long before a read its events are final. Each CPU's buffer is in time order, but
/// while one CPU's is read the others keep filling: an event stamped just before the read
/// can reach its buffer after that buffer was drained. Events are handed out once older than
/// this (an event is written within microseconds of its time stamp).
pub const HOLD_NS: u64 = 1_000_000;

/// Pages read from one CPU's buffer in one [`Tracer::read`] at most, so a busy CPU cannot
/// keep a read going.
const MAX_PAGES_PER_READ: usize = 256;

/// The tracing session: a trace instance of our own with the tcp events on, read per CPU.
pub struct Tracer {
    inst: Instance,
    header: PageHeader,
    decoders: Decoders,
    /// The events enabled, with whether each has a `sock_cookie` field.
    events: Vec<(&'static str, bool)>,
    filter: TraceFilter,
    cap: Cap,
    cap_reported: u64,
    page: Vec<u8>,
    /// Events decoded but newer than the last read's horizon.
    pending: Vec<TraceEvent>,
    stats: TraceStats,
}

impl Tracer {
    /// Mounts tracefs if needed, makes the instance, enables tcp_probe (required) and the
    /// other tcp events this kernel has, with `filter` in the kernel.
    pub fn open(filter: &TraceFilter) -> Result<Tracer, TraceUnavailable> {
        if cfg!(target_endian = "big") {
            return Err(TraceUnavailable::BigEndian);
        }
        let fs = Tracefs::open().map_err(|e| TraceUnavailable::from_io("mounting tracefs", &e))?;
        let header = fs
            .read("events/header_page")
            .map_err(|e| TraceUnavailable::from_io("reading events/header_page", &e))
            .and_then(|t| PageHeader::parse(&t).map_err(setup("reading events/header_page")))?;
        let (decoders, events) = load_formats(&fs)?;
        let inst = Instance::create(fs)
            .map_err(|e| TraceUnavailable::from_io("creating a trace instance", &e))?;
        let step = |s: &'static str| move |e: io::Error| TraceUnavailable::from_io(s, &e);
        inst.write("trace_clock", "mono")
            .map_err(step("setting trace_clock mono"))?;
        // Wake a poller as soon as anything is buffered (the default waits for half full).
        let _ = inst.write("buffer_percent", "0");
        let page_size = inst
            .read("buffer_subbuf_size_kb")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .map_or(0, |kb| kb * 1024)
            .max(header.page_size());
        let mut t = Tracer {
            inst,
            header,
            decoders,
            events,
            filter: filter.clone(),
            cap: Cap::new(filter.max_events_per_conn_per_sec),
            cap_reported: 0,
            page: vec![0; page_size],
            pending: Vec::new(),
            stats: TraceStats::default(),
        };
        t.set_filter(filter)?;
        for (e, _) in t.events.clone() {
            t.inst
                .write(&format!("events/tcp/{e}/enable"), "1")
                .map_err(|err| TraceUnavailable::from_io(&format!("enabling tcp:{e}"), &err))?;
        }
        t.inst
            .open_pipes()
            .map_err(step("opening per_cpu trace_pipe_raw"))?;
        Ok(t)
    }

    /// Change the in-kernel filter (e.g. the user chose another connection).
    pub fn set_filter(&mut self, filter: &TraceFilter) -> Result<(), TraceUnavailable> {
        for &(e, has_cookie) in &self.events {
            let expr = decode::filter_expr(filter, has_cookie);
            self.inst
                .write(&format!("events/tcp/{e}/filter"), &expr)
                .map_err(|err| {
                    TraceUnavailable::from_io(&format!("setting the filter of tcp:{e}"), &err)
                })?;
        }
        if filter.max_events_per_conn_per_sec != self.filter.max_events_per_conn_per_sec {
            self.cap = Cap::new(filter.max_events_per_conn_per_sec);
            self.cap_reported = 0;
        }
        self.filter = filter.clone();
        Ok(())
    }

    /// Non-blocking: append what is ready, in time order across calls (events newer than
    /// [`HOLD_NS`] before the call are kept for the next one); returns how many were dropped
    /// by the cap since last call.
    pub fn read(&mut self, out: &mut Vec<TraceEvent>) -> io::Result<u64> {
        let horizon = tcptune_os::process::monotonic_ns().saturating_sub(HOLD_NS);
        let start = out.len();
        let mut pending = std::mem::take(&mut self.pending);
        for i in 0..self.inst.pipes().len() {
            for _ in 0..MAX_PAGES_PER_READ {
                let n = match self.inst.read_pipe(i, &mut self.page) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                self.take_page(n, &mut pending);
            }
        }
        decode::release(&mut pending, horizon, out);
        self.pending = pending;
        self.stats.events += (out.len() - start) as u64;
        let dropped = self.cap.dropped - self.cap_reported;
        self.cap_reported = self.cap.dropped;
        self.stats.dropped_by_cap = self.cap.dropped;
        Ok(dropped)
    }

    /// Decodes the page in `self.page[..n]` into `out`.
    fn take_page(&mut self, n: usize, out: &mut Vec<TraceEvent>) {
        let (decoders, cap, filter) = (&mut self.decoders, &mut self.cap, &self.filter);
        let page = &self.page[..n];
        match ring::parse_page(page, &self.header, |raw| {
            if let Some((e, ports)) = decoders.decode(raw.ts, raw.data) {
                if decode::wanted(filter, &e, ports) && cap.pass(&e) {
                    out.push(e);
                }
            }
        }) {
            Ok(info) => {
                self.stats.lost_in_kernel += info.missed.unwrap_or(0);
                self.stats.lost_uncounted_pages += u64::from(info.missed_unknown);
            }
            Err(_) => self.stats.bad_pages += 1,
        }
    }

    /// fds to poll (one per CPU buffer) so a caller can wait with tcptune_os::poll. They
    /// become readable as soon as an event is buffered: a caller that wants few wake-ups
    /// reads at its own pace (e.g. every 50 ms) rather than on each wake-up.
    pub fn fds(&self) -> Vec<RawFd> {
        self.inst.pipes().iter().map(|f| f.as_raw_fd()).collect()
    }

    /// Waits up to `timeout` for any CPU's buffer to hold an event (through
    /// `tcptune_os::poll`); whether one does. A signal ends the wait with `Interrupted`.
    pub fn wait(&self, timeout: std::time::Duration) -> io::Result<bool> {
        let mut fds: Vec<PollFd<'_>> = self
            .inst
            .pipes()
            .iter()
            .map(|f| PollFd::readable(f.as_fd()))
            .collect();
        Ok(tcptune_os::poll::poll(&mut fds, Some(timeout))? > 0)
    }

    /// Counts since the tracer opened.
    pub fn stats(&self) -> TraceStats {
        self.stats
    }

    /// The instance's directory (removed on drop).
    pub fn instance_dir(&self) -> &std::path::Path {
        self.inst.dir()
    }

    /// Whether tracefs was mounted for this tracer (and is unmounted on drop).
    pub fn mounted_tracefs(&self) -> bool {
        self.inst.tracefs().mounted_by_us()
    }

    /// The tcp events enabled (tcp_probe and those of the others this kernel has).
    pub fn events(&self) -> Vec<&'static str> {
        self.events.iter().map(|e| e.0).collect()
    }
}

fn setup(step: &'static str) -> impl Fn(format::FormatError) -> TraceUnavailable {
    move |e| TraceUnavailable::Setup {
        step: step.to_string(),
        error: e.to_string(),
    }
}

/// The formats of the events this kernel has: their decoders, and (name, has a cookie field).
type Loaded = (Decoders, Vec<(&'static str, bool)>);

fn load_formats(fs: &Tracefs) -> Result<Loaded, TraceUnavailable> {
    let mut decoders = Decoders::default();
    let mut events = Vec::new();
    for (e, required) in EVENTS {
        let path = format!("events/tcp/{e}/format");
        let parsed = match fs.read(&path) {
            Ok(text) => EventFormat::parse(&text).map_err(|err| err.to_string()),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                if required {
                    return Err(TraceUnavailable::EventMissing {
                        event: e.to_string(),
                    });
                }
                continue;
            }
            Err(err) => return Err(TraceUnavailable::from_io(&format!("reading {path}"), &err)),
        };
        match parsed.and_then(|f| {
            decoders.add(&f).map_err(|err| err.to_string())?;
            Ok(f.has("sock_cookie"))
        }) {
            Ok(has_cookie) => events.push((e, has_cookie)),
            // An optional event this version lays out differently is left off.
            Err(_) if !required => {}
            Err(error) => {
                return Err(TraceUnavailable::Setup {
                    step: format!("reading {path}"),
                    error,
                })
            }
        }
    }
    Ok((decoders, events))
}

#[cfg(test)]
mod tests;
