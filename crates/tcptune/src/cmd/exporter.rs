//! `tcptune exporter`: reads the group map and web configuration, opens the namespaces, binds
//! the listener (every bad input is one sentence and exit 2 before anything is served), then
//! serves while the library's poller runs on this thread until SIGINT or SIGTERM. The web
//! configuration is re-read when it changes (a broken new one is reported on stderr and the
//! previous one kept).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use tcptune_diagnose::Context;
use tcptune_exporter::groups::{Dimension, GroupMap, Grouping};
use tcptune_exporter::http::{Pages, REALM};
use tcptune_exporter::{poll, Aggregator, Config};
use tcptune_http::{bind, exposure_warning, serve, Access, Options, WebConfig, WebConfigFile};
use tcptune_kernel::{sys, KernelError};
use tcptune_model::Dur;

use crate::cli::ExporterArgs;
use crate::outcome::Outcome;

/// Configuration files are small; anything larger is not one.
const FILE_LIMIT: u64 = 1 << 20;
/// Request handlers: scrapes are cheap, and bcrypt checks of new credentials are slow on purpose.
const HANDLERS: usize = 2;

fn read_text(path: &Path, what: &str) -> anyhow::Result<String> {
    let bytes = tcptune_kernel::file::read_regular_limited(path, FILE_LIMIT, what)?;
    String::from_utf8(bytes)
        .ok()
        .with_context(|| format!("the {what} {} is not UTF-8 text", path.display()))
}

fn grouping(args: &ExporterArgs) -> anyhow::Result<Grouping> {
    let by = args
        .group_by
        .iter()
        .map(|d| d.trim().parse::<Dimension>())
        .collect::<Result<Vec<_>, _>>()?;
    let map = match &args.groups {
        Some(p) => GroupMap::parse(&read_text(p, "group map")?)
            .with_context(|| format!("reading the group map {}", p.display()))?,
        None => GroupMap::default(),
    };
    Ok(Grouping::new(by, map)?)
}

pub fn run(args: &ExporterArgs) -> anyhow::Result<Outcome> {
    if args.interval < Dur::from_millis(100) {
        anyhow::bail!(
            "--interval {} is too short; the kernel's chronographs tick in jiffies, so use 100ms or more",
            args.interval
        );
    }
    let grouping = grouping(args)?;
    let web: Access = match &args.web_config {
        Some(p) => WebConfigFile::load(p, Box::new(|m| eprintln!("tcptune exporter: {m}")))
            .with_context(|| format!("reading the web config {}", p.display()))?
            .into(),
        None => WebConfig::default().into(),
    };
    let names: Vec<Option<String>> = if args.all_netns {
        std::iter::once(None)
            .chain(sys::named_netns().into_iter().map(Some))
            .collect()
    } else if args.netns.is_empty() {
        vec![None]
    } else {
        args.netns.iter().cloned().map(Some).collect()
    };
    let targets = poll::open(&names).map_err(|e| match e {
        KernelError::Socket(ref io) if io.kind() == std::io::ErrorKind::PermissionDenied => {
            anyhow::anyhow!("subscribing to the kernel's TCP destroy events needs CAP_NET_ADMIN; run as root or grant the capability (the shipped systemd unit does)")
        }
        e => e.into(),
    })?;
    let agg = Aggregator::new(Config {
        grouping,
        max_series: args.max_series,
        ctx: Context::default(),
    })?;
    let max_groups = agg.max_groups();
    let listener = bind(args.listen)?;
    let warning = exposure_warning(args.listen, &web.current());
    let agg = Arc::new(Mutex::new(agg));
    let opts = Options {
        threads: HANDLERS,
        realm: REALM.into(),
    };
    let served = serve(listener, web, Pages { agg: agg.clone() }, opts)
        .context("starting the HTTP server")?;
    if let Some(w) = warning {
        eprintln!("{w}");
    }
    println!(
        "tcptune exporter: serving {}/metrics and /connections ({} namespace{}, every {}, up to {} groups besides \"other\")",
        served.url(),
        names.len(),
        if names.len() == 1 { "" } else { "s" },
        args.interval,
        max_groups
    );
    let stop = {
        use tcptune_os::process::Signal;
        tcptune_os::signal::catch(&[Signal::Int, Signal::Term])
    };
    poll::run(targets, &agg, args.interval.std(), &|| {
        stop.load(Ordering::Relaxed)
    });
    served.stop();
    Ok(Outcome::Ok)
}
