//! `tcptune _trace`: the tracer's events for the chosen sockets as JSON lines on standard
//! output until the duration passes or a signal comes, then one line of counts on standard
//! error with the reader's own CPU time per second (what `bench/trace` reads). Reads are
//! paced (a wake-up, then a short gathering pause) so a busy connection costs a few reads a
//! second per CPU rather than one per event.

use std::io::{BufWriter, Write};
use std::time::{Duration, Instant};

use tcptune_kernel::trace::{TraceFilter, Tracer};
use tcptune_os::process::{cpu_times, Signal};

use crate::cli::TraceArgs;
use crate::outcome::Outcome;

/// How long events gather after a wake-up before they are read.
const PACE: Duration = Duration::from_millis(50);

pub fn run(args: &TraceArgs) -> anyhow::Result<Outcome> {
    let filter = TraceFilter {
        ports: args.ports.clone(),
        cookies: args.cookies.clone(),
        max_events_per_conn_per_sec: args.max_per_sec,
    };
    let mut tracer = Tracer::open(&filter)?;
    tcptune_os::signal::catch(&[Signal::Int, Signal::Term]);
    eprintln!(
        "_trace: tracing {} in {}{}",
        tracer.events().join(", "),
        tracer.instance_dir().display(),
        if tracer.mounted_tracefs() {
            " (tracefs mounted for this run)"
        } else {
            ""
        }
    );
    let start = Instant::now();
    let (u0, s0) = cpu_times();
    let end = args.duration.map(|d| start + d.std());
    let mut out = Vec::new();
    let mut stdout = BufWriter::new(std::io::stdout().lock());
    loop {
        out.clear();
        tracer.read(&mut out)?;
        if !args.count_only {
            for e in &out {
                serde_json::to_writer(&mut stdout, e)?;
                stdout.write_all(b"\n")?;
            }
            stdout.flush()?;
        }
        let now = Instant::now();
        if tcptune_os::signal::caught() || end.is_some_and(|e| now >= e) {
            break;
        }
        let left = end.map_or(Duration::from_secs(1), |e| e - now);
        match tracer.wait(left.min(Duration::from_secs(1))) {
            Ok(true) => std::thread::sleep(PACE.min(left)),
            Ok(false) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let (u1, s1) = cpu_times();
    let cpu = (u1 + s1).saturating_sub(u0 + s0).as_secs_f64();
    let st = tracer.stats();
    eprintln!(
        "_trace: {} events in {secs:.2} s, {} dropped by the cap, {} lost in the kernel buffer; reader CPU {:.2}% of one core",
        st.events,
        st.dropped_by_cap,
        st.lost_in_kernel,
        100.0 * cpu / secs.max(1e-9)
    );
    Ok(Outcome::Ok)
}
