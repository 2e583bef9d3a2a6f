//! `tcptune serve` and `tcptune test`: glue between the command line and `tcptune-perftest`,
//! iperf3's command line (`tcptune iperf3 …`, or the binary run as `iperf3`) rewritten into
//! theirs, and iperf3's output modes (`-J`, `--json-stream`, `--logfile`, `-f`).

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use serde_json::json;
use tcptune_iperf3::{Direction, Params};
use tcptune_perftest::client::{self, ClientConfig, Family};
use tcptune_perftest::server::{Server, ServerConfig, ServerLog};
use tcptune_perftest::test_report::{interval_header, RateUnits};
use tcptune_perftest::Cidr;
use tcptune_perftest::{iperf3_text, iperf3_verbose};

pub use super::iperf3_argv::{is_iperf3_front, rewrite_argv, wants_iperf_json, Argv, HELP};
use crate::cli::{ServeArgs, TestArgs};
use crate::outcome::Outcome;
use crate::output;

/// One `--json-stream` line: `{"event":NAME,"data":DATA}`, "event" first as iperf3 writes it.
fn stream_event(name: &str, data: &serde_json::Value) -> String {
    let mut data = data.clone();
    match name {
        "start" => tcptune_perftest::cjson::iperf3_start_keys(&mut data),
        "interval" => tcptune_perftest::cjson::iperf3_interval_keys(&mut data),
        _ => {}
    }
    // Numbers as iperf3 (cJSON) writes them: `0`, not `0.0`.
    let data = tcptune_perftest::cjson::to_compact(&data);
    format!("{{\"event\":{},\"data\":{data}}}", json!(name))
}

/// iperf3's JSON error document (`-J`), or its error event (`--json-stream`).
pub fn json_error(message: &str, stream: bool) -> String {
    if stream {
        format!(
            "{}\n{}\n",
            stream_event("error", &json!(message)),
            stream_event("end", &json!({}))
        )
    } else {
        let doc = json!({
            "start": {
                "connected": [],
                "version": format!("tcptune {}", env!("CARGO_PKG_VERSION")),
                "system_info": tcptune_perftest::sock::system_info(),
            },
            "intervals": [],
            "end": {},
            "error": message,
        });
        // Invariant: a Value always serializes.
        serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
    }
}

/// Where the output goes: standard output, or `--logfile` (appended, as iperf3 does).
fn sink(logfile: Option<&std::path::Path>) -> anyhow::Result<Box<dyn Write + Send>> {
    Ok(match logfile {
        None => Box::new(std::io::stdout()),
        Some(p) => Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| {
                    format!(
                        "--logfile {}: cannot open it for appending; give a writable path",
                        p.display()
                    )
                })?,
        ),
    })
}

/// Ctrl-C (SIGINT) and SIGTERM end the test (or the server) cleanly instead of killing the
/// process.
fn catch_interrupt() -> &'static AtomicBool {
    use tcptune_os::process::Signal;
    tcptune_os::signal::catch(&[Signal::Int, Signal::Term])
}

pub fn serve(args: &ServeArgs) -> anyhow::Result<Outcome> {
    anyhow::ensure!(
        !args.json_stream,
        "--json-stream on the server is not supported; give -J for each test's document"
    );
    // -i and -f (iperf3 -s -i 10 -f m in service units) set the server's interval lines and
    // their units under `tcptune iperf3 -s`; tcptune serve logs one line per test, or with -J
    // iperf3's document of each test.
    let json = args.iperf_json;
    let text = if args.iperf3_text || json {
        let interval = match args.interval.as_deref() {
            None => 1.0,
            Some(i) => i
                .parse::<f64>()
                .ok()
                .filter(|&i| i == 0.0 || (0.1..=60.0).contains(&i))
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "-i {i} is outside 0.1..60 seconds; give -i 1 (or -i 0 for no interval \
                         reports)"
                    )
                })?,
        };
        let unit = match args.format.as_deref() {
            None => 'a',
            Some(f) => match RateUnits::from_letter(f).map_err(anyhow::Error::msg)? {
                RateUnits::Fixed(c) => c,
                RateUnits::Auto => 'a',
            },
        };
        Some(tcptune_perftest::server_text::TextOptions {
            interval: (interval > 0.0).then(|| Duration::from_secs_f64(interval)),
            unit,
            json,
        })
    } else {
        None
    };
    let allow = args
        .allow
        .iter()
        .map(|c| {
            c.parse::<Cidr>()
                .map_err(|e| anyhow::anyhow!("--allow: {e}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let host: Option<IpAddr> = match (args.bind, args.v4, args.v6) {
        (Some(ip), true, _) if !ip.is_ipv4() => {
            anyhow::bail!("-B {ip} is not an IPv4 address but -4 was given; drop one")
        }
        (Some(ip), _, true) if !ip.is_ipv6() => {
            anyhow::bail!("-B {ip} is not an IPv6 address but -6 was given; drop one")
        }
        (Some(ip), _, _) => Some(ip),
        (None, true, _) => Some(Ipv4Addr::UNSPECIFIED.into()),
        (None, _, true) => Some(Ipv6Addr::UNSPECIFIED.into()),
        (None, false, false) => None,
    };
    let mut cfg = ServerConfig {
        // Both address families where the host has IPv6 (dual-stack socket).
        bind: SocketAddr::from((host.unwrap_or(Ipv6Addr::UNSPECIFIED.into()), args.port)),
        allow,
        max_tests: args.max_tests as usize,
        one_off: args.one_off,
        timeouts: tcptune_iperf3::session::Timeouts {
            max_duration: args
                .server_max_duration
                .map(|s| tcptune_model::Dur::from_millis(s as u64 * 1000)),
            ..Default::default()
        },
        iperf3_text: text,
        diskfile: args.file.clone(),
        ..ServerConfig::default()
    };
    let server = match Server::bind(cfg.clone()) {
        Ok(s) => s,
        Err(_) if host.is_none() => {
            cfg.bind = SocketAddr::from(([0, 0, 0, 0], args.port));
            Server::bind(cfg)?
        }
        Err(e) => return Err(e.into()),
    };
    // Opened before -D detaches (and changes directory), so a relative path and a bad one are
    // both reported here.
    let out = Arc::new(Mutex::new(sink(args.logfile.as_deref())?));
    let pidfile = args
        .pidfile
        .as_ref()
        .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()));
    if args.daemon {
        // No other thread exists yet; daemon(3) forks, and the child continues here.
        tcptune_os::process::daemonize().context("-D: detaching from the terminal")?;
    }
    if let Some(p) = &pidfile {
        std::fs::write(p, format!("{}\n", std::process::id())).with_context(|| {
            format!(
                "-I {}: cannot write the process id; give a writable path",
                p.display()
            )
        })?;
    }
    let interrupted = catch_interrupt();
    let stop = server.stop_handle();
    std::thread::spawn(move || {
        // Polling an atomic the signal handler sets: the one async-signal-safe handoff.
        while !interrupted.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
        }
        stop.store(true, Ordering::Relaxed);
    });
    let iperf3 = args.iperf3_text || json;
    let one_off = args.one_off;
    let port = args.port;
    let tests = AtomicUsize::new(0);
    let to_log = args.logfile.is_some();
    let log = Arc::new(move |l: ServerLog| {
        if let (true, false, ServerLog::TestFailed { error, .. }) = (iperf3, to_log, &l) {
            // iperf3's server writes its errors to standard error unless --logfile is given.
            eprintln!("iperf3: error - {error}");
        }
        let text = if json {
            // -J: each test's document, nothing else (iperf3 prints no banner then).
            match l {
                ServerLog::Iperf3(lines) => lines.join("\n") + "\n",
                _ => String::new(),
            }
        } else if iperf3 {
            iperf3_server_lines(l, port, one_off, &tests, to_log)
        } else {
            format!("{l}\n")
        };
        if let Ok(mut o) = out.lock() {
            let _ = o.write_all(text.as_bytes());
            let _ = o.flush();
        }
    });
    let r = server.run(log);
    if let Some(p) = &pidfile {
        let _ = std::fs::remove_file(p);
    }
    r?;
    Ok(Outcome::Ok)
}

/// What iperf3's server prints for a server event: the banner when it listens on `port`
/// (again after each test, counting them, unless it serves one), the test's own lines,
/// iperf3's error line when they go to a log file (`to_log`; else the caller writes it to
/// standard error). `tests`: the tests ended so far.
fn iperf3_server_lines(
    l: ServerLog,
    port: u16,
    one_off: bool,
    tests: &AtomicUsize,
    to_log: bool,
) -> String {
    let banner = |n: usize| iperf3_text::listening(port, n).join("\n") + "\n";
    let again = || {
        let n = tests.fetch_add(1, Ordering::Relaxed) + 1;
        if one_off {
            String::new()
        } else {
            banner(n + 1)
        }
    };
    match l {
        ServerLog::Listening(_) => banner(1),
        ServerLog::Iperf3(lines) => lines.join("\n") + "\n",
        ServerLog::TestDone { .. } => again(),
        ServerLog::TestFailed { error, .. } if to_log => {
            format!("iperf3: error - {error}\n") + &again()
        }
        ServerLog::TestFailed { .. } => again(),
        ServerLog::Refused { .. } => String::new(),
    }
}

fn params(args: &TestArgs) -> anyhow::Result<Params> {
    if let Some(w) = args.window {
        anyhow::ensure!(
            w.get() > 0 && w.get() <= tcptune_iperf3::params::MAX_TCP_BUFFER,
            "-w {w} is outside 1 B..512 MiB; give a buffer size such as -w 4MiB"
        );
    }
    use tcptune_iperf3::params::{MAX_BLOCKSIZE, MAX_UDP_BLOCKSIZE, MIN_UDP_BLOCKSIZE};
    let len = match (args.length, args.udp) {
        (None, false) => tcptune_iperf3::params::DEFAULT_TCP_BLKSIZE,
        // The control connection's MSS, once it is connected (tcptune_perftest::client).
        (None, true) => 0,
        (Some(l), false) => {
            anyhow::ensure!(
                (1..=MAX_BLOCKSIZE).contains(&l.get()),
                "-l {l} is outside 1 B..1 MiB; give a block length such as -l 128KiB"
            );
            l.get() as u32
        }
        (Some(l), true) => {
            anyhow::ensure!(
                (MIN_UDP_BLOCKSIZE..=MAX_UDP_BLOCKSIZE).contains(&l.get()),
                "-l {l} is outside {MIN_UDP_BLOCKSIZE}..{MAX_UDP_BLOCKSIZE} bytes for UDP; \
                 give a datagram size such as -l 1400"
            );
            l.get() as u32
        }
    };
    anyhow::ensure!(
        !(args.omit > 0 && (args.bytes.is_some() || args.blocks.is_some())),
        "-O with -n or -k is not supported (the bytes would count from the start); give -t \
         with -O"
    );
    anyhow::ensure!(
        args.udp || !args.udp_counters_64bit,
        "--udp-counters-64bit applies to UDP tests only; add -u or drop it"
    );
    anyhow::ensure!(
        args.udp || !args.dont_fragment,
        "--dont-fragment applies to UDP tests only; add -u or drop it"
    );
    let limited = args.bytes.is_some() || args.blocks.is_some();
    Ok(Params {
        direction: if args.bidir {
            Direction::Bidirectional
        } else if args.reverse {
            Direction::Reverse
        } else {
            Direction::Forward
        },
        parallel: args.parallel,
        time_s: if limited { 0 } else { args.time },
        bytes: args.bytes.map(|b| b.get()).unwrap_or(0),
        blocks: args.blocks.unwrap_or(0),
        len,
        omit_s: args.omit,
        window: args.window.map(|w| w.get() as u32),
        congestion: args.congestion.clone(),
        mss: args.mss,
        nodelay: args.no_delay,
        // --dscp is the TOS byte's upper six bits.
        tos: args.tos.or(args.dscp.map(|d| d << 2)),
        protocol: if args.udp {
            tcptune_iperf3::Protocol::Udp
        } else {
            tcptune_iperf3::Protocol::Tcp
        },
        udp_counters_64bit: args.udp_counters_64bit,
        // iperf3's UDP default: 1 Mbit/s per stream.
        bandwidth_bps: args
            .bitrate
            .map(|(r, _)| r.bps().round() as u64)
            .or(args.udp.then_some(1_000_000)),
        burst: args.bitrate.and_then(|(_, b)| b),
        // Sent as iperf3 sends it, so an iperf3 server paces its side of -R too.
        fqrate_bps: args.fq_rate.map(|r| r.bps().round() as u64),
        server_affinity: args.affinity.and_then(|(_, m)| m),
        dont_fragment: args.dont_fragment,
        zerocopy: args.zerocopy,
        repeating_payload: args.repeating_payload,
        title: args.title.clone(),
        extra_data: args.extra_data.clone(),
        get_server_output: args.get_server_output,
        client_version: Some(format!("tcptune {}", env!("CARGO_PKG_VERSION"))),
        ..Params::default()
    })
}

/// How `test` prints.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Text,
    /// `--json`: tcptune's envelope.
    Envelope,
    /// `-J`: iperf3's document at the top level.
    Iperf,
    /// `--json-stream`: iperf3 3.17's events, one per line.
    Stream,
    /// `tcptune iperf3` without -J: iperf3's text, line for line.
    IperfText,
}

pub fn test(args: &TestArgs, json: bool) -> anyhow::Result<Outcome> {
    let mode = if args.json_stream {
        Mode::Stream
    } else if args.iperf_json {
        Mode::Iperf
    } else if json {
        Mode::Envelope
    } else if args.iperf3_text {
        Mode::IperfText
    } else {
        Mode::Text
    };
    let out = Arc::new(Mutex::new(sink(args.logfile.as_deref())?));
    let r = run_test(args, mode, &out);
    // iperf3's front end says what iperf3 says when no server answers.
    let r = match r {
        Err(e) if args.iperf3_text => Err(iperf3_worded(e)),
        r => r,
    };
    if let (Err(e), Mode::Iperf | Mode::Stream) = (&r, mode) {
        if let Ok(mut o) = out.lock() {
            let _ = o.write_all(json_error(&format!("{e:#}"), mode == Mode::Stream).as_bytes());
            let _ = o.flush();
        }
    }
    r
}

/// A test's error in iperf3's words where iperf3 has them (no server answering), else as is.
fn iperf3_worded(e: anyhow::Error) -> anyhow::Error {
    match e.downcast_ref::<tcptune_perftest::TestError>() {
        Some(tcptune_perftest::TestError::Connect { error, .. }) => {
            let os = error.to_string();
            // strerror's text, as iperf3 prints it (Rust adds " (os error N)").
            let cause = os.split(" (os error").next().unwrap_or(&os).to_string();
            anyhow::anyhow!("unable to connect to server: {cause}")
        }
        // --rcv-timeout: iperf3's IENOMSG.
        Some(tcptune_perftest::TestError::RcvTimeout(_)) => {
            anyhow::anyhow!("idle timeout for receiving data")
        }
        _ => e,
    }
}

/// What `tcptune test` (or `tcptune iperf3 -c`) asks the client to do.
fn client_config(args: &TestArgs, mode: Mode, host: &str) -> anyhow::Result<ClientConfig> {
    Ok(ClientConfig {
        host: host.to_string(),
        port: args.port,
        params: params(args)?,
        interval: (args.interval > 0.0).then(|| Duration::from_secs_f64(args.interval)),
        sample_every: Duration::from_millis(50),
        path_rate: args.path_rate,
        connect_timeout: Duration::from_millis(args.connect_timeout),
        interrupt: Some(catch_interrupt()),
        host_settings: tcptune_diagnose::advice::HostSettings::from_sysctls(
            tcptune_host::read::read_sysctl,
        ),
        bind: args.bind,
        cport: args.cport,
        // iperf3's own document (-J, --json-stream) stays iperf3's: no probes before it starts.
        latency: !args.no_latency && matches!(mode, Mode::Text | Mode::Envelope),
        family: if args.v4 {
            Some(Family::V4)
        } else if args.v6 {
            Some(Family::V6)
        } else {
            None
        },
        data_extra: tcptune_perftest::sock::Extra {
            bind_dev: args.bind_dev.clone(),
            max_pacing_rate: args.fq_rate.map(|r| (r.bps() / 8.0).round() as u64),
            user_timeout_ms: args.snd_timeout,
            keepalive: None,
        },
        control_extra: tcptune_perftest::sock::Extra {
            bind_dev: args.bind_dev.clone(),
            keepalive: args.cntl_ka,
            ..Default::default()
        },
        dont_fragment: args.dont_fragment,
        rcv_timeout: args.rcv_timeout.map(Duration::from_millis),
        diskfile: args.file.clone(),
    })
}

/// The test options whose values or combinations are refused before anything connects.
fn check_test_args(args: &TestArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.interval == 0.0 || (0.1..=60.0).contains(&args.interval),
        "-i {} is outside 0.1..60 seconds; give -i 1 (or -i 0 for no interval reports)",
        args.interval
    );
    if let Some(b) = args.bytes {
        anyhow::ensure!(b.get() > 0, "-n must be above zero; give -n 100MB");
    }
    if let Some(f) = &args.file {
        // One file cannot be both the source and the sink, and UDP streams send from memory.
        anyhow::ensure!(
            !args.bidir && !args.udp,
            "-F {} works with one-way TCP tests only; drop --bidir or -u, or drop -F",
            f.display()
        );
    }
    Ok(())
}

fn run_test(
    args: &TestArgs,
    mode: Mode,
    out: &Arc<Mutex<Box<dyn Write + Send>>>,
) -> anyhow::Result<Outcome> {
    check_test_args(args)?;
    let units = match &args.format {
        None => RateUnits::Auto,
        Some(f) => RateUnits::from_letter(f).map_err(anyhow::Error::msg)?,
    };
    let host = args.server().to_string();
    let cfg = client_config(args, mode, &host)?;
    if let Some((cpu, _)) = args.affinity {
        // Before the data threads start, so they inherit it.
        tcptune_os::process::pin_to_cpu(cpu).with_context(|| {
            format!("-A {cpu}: cannot pin to that CPU; give one of this host's CPUs")
        })?;
    }
    let stamp = args.timestamps.as_deref();
    if let Some(f) = stamp {
        // A format strftime cannot use is refused before the test, not at its first line.
        tcptune_os::localtime::strftime(f, 0).map_err(|e| {
            anyhow::anyhow!("--timestamps={f}: {e}; give a strftime format such as '%c '")
        })?;
    }
    let event = |name: &str, data: &dyn erased::Ser| {
        if let Ok(mut o) = out.lock() {
            let _ = writeln!(o, "{}", stream_event(name, &data.value()));
            let _ = o.flush();
        }
    };
    let text_layout = iperf3_text::Layout {
        side: iperf3_text::Side::Client,
        udp: args.udp,
        bidir: args.bidir,
        streams: args.parallel,
        unit: match units {
            RateUnits::Fixed(c) => c,
            RateUnits::Auto => 'a',
        },
        // The first interval is the last only in a timed test no longer than one interval.
        reverse_plain: args.reverse
            && !args.bidir
            && !(args.omit == 0
                && args.bytes.is_none()
                && args.blocks.is_none()
                && args.time > 0
                && args.interval >= args.time as f64),
    };
    let title = args.title.as_deref();
    let print_text = |lines: &[String]| {
        if let Ok(mut o) = out.lock() {
            let _ = o.write_all(stamped(&iperf3_text::titled(title, lines), stamp).as_bytes());
            let _ = o.flush();
        }
    };
    let mut on_start = |s: &tcptune_perftest::test_report::Start| match mode {
        Mode::Stream => event("start", s),
        Mode::IperfText => print_text(&iperf3_start(args, &host, s)),
        _ => {}
    };
    let mut intervals = iperf3_text::Intervals::new(text_layout.clone());
    let mut header = false;
    let mut on_interval =
        |r: &tcptune_perftest::test_report::IntervalReport, ids: &[u32]| match mode {
            Mode::Stream => event("interval", r),
            Mode::Text => {
                let mut text = String::new();
                if !header {
                    text += &interval_header();
                    text.push('\n');
                    header = true;
                }
                for l in r.lines(ids, units) {
                    text += &l;
                    text.push('\n');
                }
                if let Ok(mut o) = out.lock() {
                    let _ = o.write_all(stamped(&text, stamp).as_bytes());
                    let _ = o.flush();
                }
            }
            Mode::IperfText => print_text(&intervals.lines(r)),
            Mode::Envelope | Mode::Iperf => {}
        };
    let mut result = client::run_with(&cfg, &mut on_start, &mut on_interval)
        .with_context(|| format!("testing against {host}:{}", args.port))?;
    result.units = units;
    let problem = result.tcptune.diagnosis.problem;
    match mode {
        Mode::Envelope => output::emit("test", &result, true)?,
        Mode::Text => {
            let mut text = String::new();
            if let Some(t) = &result.title {
                text += &format!("{t}\n");
            }
            text += &result.to_string();
            if let Some(t) = &result.server_output_text {
                text += &format!("\nServer output:\n{t}");
            }
            if let Ok(mut o) = out.lock() {
                let _ = o.write_all(stamped(&text, stamp).as_bytes());
                let _ = o.flush();
            }
        }
        Mode::IperfText => print_text(&iperf3_final(&text_layout, &result, args)),
        Mode::Iperf => {
            if let Ok(mut o) = out.lock() {
                let mut doc = serde_json::to_value(&result)?;
                if result.interrupted {
                    doc["error"] = json!(INTERRUPTED);
                }
                tcptune_perftest::cjson::iperf3_keys(&mut doc);
                // Numbers as iperf3 (cJSON) writes them: `"start": 0`, not `0.0`.
                tcptune_perftest::cjson::write_pretty(&mut *o, &doc)?;
                writeln!(o)?;
                o.flush()?;
            }
        }
        Mode::Stream => {
            if let Some(v) = &result.server_output_json {
                event("server_output_json", v);
            }
            if let Some(t) = &result.server_output_text {
                event("server_output_text", t);
            }
            event("end", &result.end);
            // tcptune's additions: the samples and the diagnosis (iperf3's readers skip
            // events they do not know).
            event("tcptune", &result.tcptune);
            if result.interrupted {
                event("error", &INTERRUPTED);
            }
        }
    }
    if result.interrupted {
        return Ok(after_interrupt(args, mode));
    }
    Ok(if problem && !args.iperf3_exit_codes {
        Outcome::Problem
    } else {
        Outcome::Ok
    })
}

/// iperf3's words when its client is interrupted (IECLIENTTERM after "interrupt - ").
const INTERRUPTED: &str = "interrupt - the client has terminated";

/// How an interrupted test ends once its partial report is out: as iperf3's client (the
/// message on standard error unless a JSON document carries it, exit 1), or with tcptune's
/// error status.
fn after_interrupt(args: &TestArgs, mode: Mode) -> Outcome {
    let json = matches!(mode, Mode::Iperf | Mode::Stream);
    if args.iperf3_text {
        if !json {
            eprintln!("iperf3: {INTERRUPTED}");
        }
        return Outcome::Exit(1);
    }
    eprintln!(
        "tcptune: error: interrupted: the server was told to end the test, and the figures \
         above are this end's alone (the receiver's were not exchanged)"
    );
    Outcome::Exit(2)
}

/// iperf3's first lines of a test: "Connecting" once the control connection is up, the data
/// connections; `-V` adds the version, host, time and settings around them.
fn iperf3_start(
    args: &TestArgs,
    host: &str,
    s: &tcptune_perftest::test_report::Start,
) -> Vec<String> {
    let v = args.verbose;
    let mut lines = Vec::new();
    if v {
        let udp_len = (args.udp && args.length.is_none()).then_some(s.test_start.blksize);
        lines.extend(iperf3_verbose::verbose_head(s, udp_len));
    }
    lines.push(iperf3_text::connecting(host, args.port));
    if args.reverse {
        lines.push(iperf3_text::reverse_mode(host));
    }
    if v {
        lines.extend(iperf3_verbose::verbose_connect(s, args.udp));
    }
    lines.extend(s.connected.iter().map(iperf3_text::connected));
    if v {
        lines.push(iperf3_verbose::starting_test(s));
    }
    lines
}

/// iperf3's last lines of a test: the final block, the server's output when asked, "iperf Done.".
fn iperf3_final(
    layout: &iperf3_text::Layout,
    result: &tcptune_perftest::test_report::TestOutput,
    args: &TestArgs,
) -> Vec<String> {
    // Whether this end sent on each stream (its role tag in a bidirectional test).
    let tx: Vec<bool> = result
        .tcptune
        .streams
        .iter()
        .filter(|s| s.at == tcptune_perftest::test_report::SampledAt::Client)
        .map(|s| s.sender)
        .collect();
    let mut lines = iperf3_text::final_block(layout, &result.end, &tx);
    if args.verbose {
        // -V: "Test Complete" after the separator; CPU use and congestion control after the rows.
        lines.insert(1, iperf3_verbose::SUMMARY.into());
        lines.extend(iperf3_verbose::verbose_end(
            &result.end,
            args.udp,
            !args.reverse,
            args.bidir,
        ));
    }
    if let Some(t) = &result.server_output_text {
        // iperf3: "\nServer output:\n%s\n", the server's text ending in a newline.
        lines.push(String::new());
        lines.push("Server output:".into());
        lines.extend(t.lines().map(str::to_string));
        lines.push(String::new());
    }
    if !result.interrupted {
        // An interrupted iperf3 client ends with its error instead.
        lines.push(String::new());
        lines.push(iperf3_text::DONE.into());
    }
    lines
}

/// `text` with each line prefixed by the time now, formatted by `format` (iperf3's
/// `--timestamps`); unchanged without a format.
fn stamped(text: &str, format: Option<&str>) -> String {
    let Some(format) = format else {
        return text.to_string();
    };
    let now = (tcptune_os::process::realtime_ns() / 1_000_000_000) as i64;
    let prefix = tcptune_os::localtime::strftime(format, now).unwrap_or_default();
    text.split_inclusive('\n')
        .map(|l| format!("{prefix}{l}"))
        .collect()
}

/// A serializable value behind a trait object (the stream's events carry different types).
mod erased {
    pub trait Ser {
        fn value(&self) -> serde_json::Value;
    }
    impl<T: serde::Serialize> Ser for T {
        fn value(&self) -> serde_json::Value {
            serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn timestamps_prefix_every_line() {
        assert_eq!(stamped("a\nb\n", None), "a\nb\n");
        let t = stamped("a\nb\n", Some("[%Y] "));
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(
            lines.iter().all(|l| l.starts_with("[20") && l.len() == 8),
            "{t}"
        );
        assert!(t.ends_with("] b\n"), "{t}");
    }

    #[test]
    fn errors_under_j_are_json() {
        let v: Value = serde_json::from_str(&json_error("cannot connect", false)).unwrap();
        assert_eq!(v["error"], "cannot connect");
        assert!(v["start"]["connected"].as_array().unwrap().is_empty());
        let lines: Vec<Value> = json_error("x", true)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0], json!({"event": "error", "data": "x"}));
        assert_eq!(lines[1]["event"], "end");
    }
}
