//! `tcptune serve` and `tcptune test`: glue between the command line and `tcptune-perftest`.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tcptune_perf::{Direction, Params};
use tcptune_perftest::client::{self, ClientConfig};
use tcptune_perftest::report::interval_header;
use tcptune_perftest::server::{Server, ServerConfig};
use tcptune_perftest::Cidr;

use crate::cli::{ServeArgs, TestArgs};
use crate::output;
use crate::Outcome;

pub fn serve(args: &ServeArgs) -> anyhow::Result<Outcome> {
    let allow = args
        .allow
        .iter()
        .map(|c| {
            c.parse::<Cidr>()
                .map_err(|e| anyhow::anyhow!("--allow: {e}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut cfg = ServerConfig {
        // Both address families where the host has IPv6 (dual-stack socket).
        bind: SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, args.port)),
        allow,
        max_tests: args.max_tests as usize,
        one_off: args.one_off,
        ..ServerConfig::default()
    };
    let server = match Server::bind(cfg.clone()) {
        Ok(s) => s,
        Err(_) => {
            cfg.bind = SocketAddr::from(([0, 0, 0, 0], args.port));
            Server::bind(cfg)?
        }
    };
    let log = Arc::new(|l: tcptune_perftest::server::ServerLog| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{l}");
        let _ = out.flush();
    });
    server.run(log)?;
    Ok(Outcome::Ok)
}

fn params(args: &TestArgs) -> anyhow::Result<Params> {
    if let Some(w) = args.window {
        anyhow::ensure!(
            w.get() > 0 && w.get() <= tcptune_perf::params::MAX_TCP_BUFFER,
            "-w {w} is outside 1 B..512 MiB; give a buffer size such as -w 4MiB"
        );
    }
    Ok(Params {
        direction: if args.bidir {
            Direction::Bidirectional
        } else if args.reverse {
            Direction::Reverse
        } else {
            Direction::Forward
        },
        parallel: args.parallel,
        time_s: if args.bytes.is_some() { 0 } else { args.time },
        bytes: args.bytes.map(|b| b.get()).unwrap_or(0),
        window: args.window.map(|w| w.get() as u32),
        congestion: args.congestion.clone(),
        mss: args.mss,
        bandwidth_bps: args.bitrate.map(|r| r.bps().round() as u64),
        zerocopy: args.zerocopy,
        client_version: Some(format!("tcptune {}", env!("CARGO_PKG_VERSION"))),
        ..Params::default()
    })
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Ctrl-C (SIGINT) and SIGTERM end the test cleanly instead of killing the process.
fn catch_interrupt() -> &'static AtomicBool {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(
                sig,
                on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
    &INTERRUPTED
}

pub fn test(args: &TestArgs, json: bool) -> anyhow::Result<Outcome> {
    anyhow::ensure!(
        args.interval == 0.0 || (0.1..=60.0).contains(&args.interval),
        "-i {} is outside 0.1..60 seconds; give -i 1 (or -i 0 for no interval reports)",
        args.interval
    );
    if let Some(b) = args.bytes {
        anyhow::ensure!(b.get() > 0, "-n must be above zero; give -n 100MB");
    }
    let cfg = ClientConfig {
        host: args.host.clone(),
        port: args.port,
        params: params(args)?,
        interval: (args.interval > 0.0).then(|| Duration::from_secs_f64(args.interval)),
        sample_every: Duration::from_millis(50),
        path_rate: args.path_rate,
        connect_timeout: Duration::from_secs(10),
        interrupt: Some(catch_interrupt()),
        host_settings: tcptune_diagnose::advice::HostSettings::from_sysctls(
            tcptune_host::read::read_sysctl,
        ),
    };
    let mut header = false;
    let mut print = |r: &tcptune_perftest::report::IntervalReport, ids: &[u32]| {
        if json {
            return;
        }
        let mut out = std::io::stdout().lock();
        if !header {
            let _ = writeln!(out, "{}", interval_header());
            header = true;
        }
        for l in r.lines(ids) {
            let _ = writeln!(out, "{l}");
        }
        let _ = out.flush();
    };
    let out = client::run(&cfg, &mut print)
        .with_context(|| format!("testing against {}:{}", args.host, args.port))?;
    output::emit("test", &out, json)?;
    Ok(if out.tcptune.diagnosis.problem {
        Outcome::Problem
    } else {
        Outcome::Ok
    })
}
