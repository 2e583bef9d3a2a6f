//! `tcptune watch --web` and `tcptune view`: checks the address (loopback unless `--listen`),
//! reads the web configuration, binds (a bad address or a port in use is one sentence and
//! exit 2 before anything runs), then serves `tcptune_web`'s page while its live loop polls
//! (or, for `view`, from a recording) until SIGINT or SIGTERM.

use std::fs::File;
use std::io::BufWriter;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use tcptune_conns::dump::{parse_filter, targets};
use tcptune_diagnose::Context;
use tcptune_kernel::trace::Tracer;
use tcptune_web::http::{bind, exposure_warning, serve, Shared, WebConfig};
use tcptune_web::hub::Hub;
use tcptune_web::live::{self, Live};
use tcptune_web::record::Recorder;
use tcptune_web::scope::{Limits, Scope};
use tcptune_web::store::{Bounds, Store};
use tcptune_web::update::Source;

use crate::cli::{AccessArgs, ViewArgs, WatchArgs};
use crate::outcome::Outcome;

/// Request handlers besides the streams' own threads.
const HANDLERS: usize = 2;
/// The page's sampling interval at most ("several times a second").
const PAGE_INTERVAL: Duration = Duration::from_millis(250);
/// Shorter dumps of every socket would cost more than they show.
const SHORTEST: Duration = Duration::from_millis(50);

/// The address to serve on: `--listen` as given, else `--web`'s, which must be loopback;
/// `None` without either.
pub fn address(web: Option<SocketAddr>, access: &AccessArgs) -> anyhow::Result<Option<SocketAddr>> {
    match (web, access.listen) {
        (_, Some(a)) => Ok(Some(a)),
        (Some(a), None) if !a.ip().is_loopback() => bail!(
            "--web {a} is not a loopback address; the page shows this host's connections, so serving it wider takes --listen {a} (with --web-config for a password)"
        ),
        (w, None) => Ok(w),
    }
}

/// The web configuration, as the exporter reads it (TLS, basic auth, headers).
fn web_config(access: &AccessArgs) -> anyhow::Result<WebConfig> {
    let Some(p) = &access.web_config else {
        return Ok(WebConfig::default());
    };
    WebConfig::load(p).with_context(|| format!("reading the web config {}", p.display()))
}

/// The exporter's warning when the page reaches beyond loopback without protection.
fn warn_exposure(addr: SocketAddr, web: &WebConfig) {
    if let Some(w) = exposure_warning(addr, web) {
        eprintln!("tcptune: {w}");
    }
}

fn stop_flag() -> &'static std::sync::atomic::AtomicBool {
    use tcptune_os::process::Signal;
    tcptune_os::signal::catch(&[Signal::Int, Signal::Term])
}

/// `watch --web`.
pub fn watch(args: &WatchArgs, addr: SocketAddr, json: bool) -> anyhow::Result<Outcome> {
    if json {
        bail!("--json does not apply to --web: the page's data is /api/connections, and --record FILE keeps it as JSON lines");
    }
    let web = web_config(&args.web.access)?;
    let filter = parse_filter(&args.sock.filter)?;
    let listener = bind(addr)?;
    warn_exposure(addr, &web);
    let targets = targets(args.sock.netns.as_deref(), args.sock.all_netns)?;
    let interval = args.interval.std().clamp(SHORTEST, PAGE_INTERVAL);
    let (tracer, reason) = match Tracer::open(&live::filter_of(Vec::new())) {
        Ok(t) => (Some(t), None),
        Err(e) => (None, Some(format!("{e}; using sock_diag polling"))),
    };
    let source = Source {
        per_ack: tracer.is_some(),
        interval_s: interval.as_secs_f64(),
        reason,
    };
    let recorder = match &args.record {
        Some(p) => {
            let f = File::create(p)
                .with_context(|| format!("cannot create the record file {}", p.display()))?;
            Some(Recorder::new(BufWriter::new(f), &source)?)
        }
        None => None,
    };
    let origin = tcptune_os::process::monotonic_ns();
    // The same instant on the wall clock: streamed updates say when they were taken on the
    // clock the page reads (the page's update latency, `bench/web`).
    let origin_wall_ms = tcptune_os::process::realtime_ns() as f64 / 1e6;
    let scope = Scope::new(
        Context::with_path_rate(args.sock.rate),
        Limits::default(),
        origin,
        tracer.is_some(),
    );
    let hub =
        Arc::new(Hub::new(Store::new(Bounds::default(), source.clone())).stamping(origin_wall_ms));
    let served = serve(
        listener,
        Arc::new(Shared {
            hub: hub.clone(),
            web,
        }),
        HANDLERS,
    )
    .context("starting the HTTP server")?;
    println!(
        "tcptune watch: serving {}/ ({}; Ctrl-C to stop)",
        served.url(),
        match &source.reason {
            None => format!(
                "per-ACK tracing, table every {}",
                tcptune_model::Dur::from(interval)
            ),
            Some(r) => format!("polled every {}: {r}", tcptune_model::Dur::from(interval)),
        }
    );
    let stop = stop_flag();
    let start = Instant::now();
    let until = args.duration.map(|d| d.std());
    let result = Live {
        targets,
        filter,
        scope,
        hub: &hub,
        interval,
        recorder,
        tracer,
    }
    .run(&|| stop.load(Ordering::Relaxed) || until.is_some_and(|d| start.elapsed() >= d));
    served.stop();
    result?;
    Ok(Outcome::Ok)
}

/// `tcptune view FILE`.
pub fn view(args: &ViewArgs) -> anyhow::Result<Outcome> {
    let addr = address(Some(args.web), &args.access)?.unwrap_or(args.web);
    let web = web_config(&args.access)?;
    let store = super::view_open::open(&args.file)?;
    let listener = bind(addr)?;
    warn_exposure(addr, &web);
    let hub = Arc::new(Hub::new(store));
    let served = serve(listener, Arc::new(Shared { hub, web }), HANDLERS)
        .context("starting the HTTP server")?;
    println!(
        "tcptune view: serving {} at {}/ (Ctrl-C to stop)",
        args.file.display(),
        served.url()
    );
    let stop = stop_flag();
    while !stop.load(Ordering::Relaxed) {
        // Nothing to do but serve: look at the stop flag a few times a second.
        std::thread::sleep(Duration::from_millis(200));
    }
    served.stop();
    Ok(Outcome::Ok)
}
