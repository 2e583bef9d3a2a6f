//! Benchmark: a full dump of 10,000 connections (20,000 sockets) with tcp_info, decoded and
//! derived, against `ss -tin` on the same sockets in the same run. Run it with `bench/conns`
//! (as root: it makes a network namespace, removed at the end).
//!
//! Prints, per socket, first the comparison: ss (process, spawn to exit, output to /dev/null)
//! against the `tcptune conns` process end to end (text, --json, which is compact into
//! /dev/null as into any file or pipe, and --json --pretty), the only ratios. Then, for where
//! the time goes, tcptune's in-process figures, which have no process start and so are not set
//! against ss: the library path end to end (dump + decode + derive); the kernel's share of that
//! (the same dump with nothing decoded); decode + derive alone (from the recorded answers in
//! memory); rendering text and JSON (by hand, as `conns --json`, compact and indented, and
//! through serde_json for comparison).
//!
//! Before anything is timed, both tools run once with their output kept: each must exit 0 and
//! see every socket (ss's lines, tcptune's rows), or the benchmark exits 1 without a ratio.
//!
//! The sockets are held by a child process (this program run with `--hold`), as on a real
//! host where the tools run from a shell: spawning a command from a process that holds 20,000
//! descriptors costs ~5 ms of descriptor-table copying per spawn, which would be added to both
//! tools' times.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tcptune_conns::conn::Conn;
use tcptune_diagnose::Context;
use tcptune_kernel::diag::{ext, DumpRequest, AF_UNSPEC};
use tcptune_kernel::filter::state;
use tcptune_kernel::sys::{in_netns, Diag};
use tcptune_kernel::DiagSocket;
use tcptune_model::Dur;

const DEFAULT_CONNS: usize = 10_000;
const REPS: usize = 15;

struct Ns(String);
impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Moves this thread (the main one, which spawns the tools) into the namespace, so the tools
/// start there without a `pre_exec` hook: with one, the standard library forks (copying this
/// process's page tables, tens of MB of recorded answers and rendered rows, into every timed
/// spawn) instead of using posix_spawn, which shares them until exec, as a shell's spawn costs.
fn enter_netns(ns: &str) {
    let f = tcptune_os::netns::open(Path::new(&format!("/run/netns/{ns}")))
        .unwrap_or_else(|e| panic!("open namespace {ns}: {e}"));
    tcptune_os::netns::setns(f.as_fd()).unwrap_or_else(|e| panic!("setns into {ns}: {e}"));
}

/// Stops the benchmark: a tool failed or the tools disagree, so no figure is printed.
fn fail(why: String) -> ! {
    eprintln!("bench/conns: {why}; no ratio is printed");
    std::process::exit(1);
}

/// Runs `argv` (in this thread's namespace), output to /dev/null; returns the wall time.
fn time_process(argv: &[&str]) -> Duration {
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let t = Instant::now();
    let st = cmd
        .status()
        .unwrap_or_else(|e| fail(format!("cannot run {}: {e}", argv[0])));
    let d = t.elapsed();
    if !st.success() {
        fail(format!("{argv:?} failed ({st})"));
    }
    d
}

/// Runs `argv` once, untimed, and returns its standard output (it must exit 0).
fn output_of(argv: &[&str]) -> String {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .output()
        .unwrap_or_else(|e| fail(format!("cannot run {}: {e}", argv[0])));
    if !out.status.success() {
        fail(format!(
            "{argv:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Both tools see every socket of the namespace: ss's ESTAB lines and `tcptune conns --json`'s
/// rows, each `expected`.
fn check_agreement(tcptune_bin: &str, expected: usize) {
    let ss = output_of(&["ss", "-tin"])
        .lines()
        .filter(|l| l.starts_with("ESTAB"))
        .count();
    let doc: serde_json::Value =
        serde_json::from_str(&output_of(&[tcptune_bin, "conns", "--json"]))
            .unwrap_or_else(|e| fail(format!("tcptune conns --json printed no JSON: {e}")));
    let ours = doc["result"]["connections"]
        .as_array()
        .map_or(0, |rows| rows.len());
    if ss != expected || ours != expected {
        fail(format!(
            "the tools disagree: ss lists {ss} established sockets, tcptune conns {ours}, the namespace holds {expected}"
        ));
    }
    println!("check: ss and tcptune conns each list all {expected} sockets");
}

fn per_socket(d: Duration, n: usize) -> f64 {
    d.as_secs_f64() * 1e6 / n as f64
}

/// `--hold NS CONNS`: opens the connections inside NS, says "ready", and keeps them open
/// until its standard input closes.
fn hold(ns: &str, conns: usize) {
    raise_fd_limit(conns);
    let sockets = in_netns(ns, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        // listen() again on our listening socket only raises its backlog.
        tcptune_os::socket::listen(l.as_fd(), conns as i32 + 16).unwrap();
        let addr: SocketAddr = l.local_addr().unwrap();
        let mut keep: Vec<TcpStream> = Vec::with_capacity(conns);
        for _ in 0..conns {
            keep.push(TcpStream::connect(addr).unwrap());
        }
        (l, keep)
    })
    .unwrap();
    println!("ready");
    std::io::stdout().flush().unwrap();
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
    drop(sockets);
}

fn raise_fd_limit(conns: usize) {
    // One descriptor per connection: the server ends stay in the accept queue (established
    // sockets the dump sees like any other), which halves the descriptors needed.
    let want = (conns + 1000) as u64;
    let now = tcptune_os::process::raise_open_file_limit(want).unwrap_or(0);
    if now < want {
        eprintln!(
            "the open-file limit ({now}) is below the {want} this needs; raise it with ulimit -n"
        );
        std::process::exit(2);
    }
}

/// A fresh namespace holding `conns` loopback connections, opened by a child process (this
/// program with `--hold`), once it says they are open.
fn open_connections(conns: usize) -> (Ns, std::process::Child) {
    let ns = Ns(format!("tt-bench-{}", std::process::id()));
    let st = Command::new("ip")
        .args(["netns", "add", &ns.0])
        .status()
        .unwrap();
    assert!(st.success(), "ip netns add failed (run as root)");
    Command::new("ip")
        .args(["-n", &ns.0, "link", "set", "lo", "up"])
        .status()
        .unwrap();
    // The accept queue must hold every server end (per-namespace setting, gone with it).
    let backlog = (conns + 16).to_string();
    Command::new("ip")
        .args(["netns", "exec", &ns.0, "sysctl", "-qw"])
        .arg(format!("net.core.somaxconn={backlog}"))
        .arg(format!("net.ipv4.tcp_max_syn_backlog={backlog}"))
        .status()
        .unwrap();

    eprintln!("opening {conns} loopback connections in {} …", ns.0);
    let mut holder = Command::new(std::env::current_exe().unwrap())
        .args(["--hold", &ns.0, &conns.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready", "the socket holder failed");
    (ns, holder)
}

/// Renders the decoded rows as text and as JSON (what the CLI adds on top), timed; checks the
/// JSON written by hand is serde_json's. Returns the times and the sizes.
fn render(
    payloads: &[Vec<u8>],
    tail: tcptune_kernel::TailLayout,
    ctx: &Context,
) -> ([Duration; 4], [usize; 3]) {
    let mut rows: Vec<Conn> = Vec::with_capacity(payloads.len());
    for p in payloads {
        let s = DiagSocket::decode(p, tail).unwrap();
        rows.push(Conn::new(s, Dur::ZERO, None, ctx, false).0);
    }
    let table = tcptune_conns::conn::ConnTable {
        connections: rows,
        all: false,
    };
    let t = Instant::now();
    let text = table.to_string();
    let render_text = t.elapsed();
    // JSON as `conns --json` renders it (by hand; compact, as into a pipe or file, and
    // indented, as on a terminal) and through serde_json, into a sink as the process writes to
    // /dev/null; then into memory, to check they make the same bytes.
    use tcptune_conns::json::{write_table, Layout};
    let compact = Layout {
        level: 1,
        pretty: false,
    };
    let pretty = Layout {
        level: 1,
        pretty: true,
    };
    let t = Instant::now();
    write_table(&table.connections, compact, &mut std::io::sink()).unwrap();
    let render_json = t.elapsed();
    let t = Instant::now();
    write_table(&table.connections, pretty, &mut std::io::sink()).unwrap();
    let render_pretty = t.elapsed();
    let t = Instant::now();
    serde_json::to_writer_pretty(std::io::BufWriter::new(std::io::sink()), &table).unwrap();
    let render_serde = t.elapsed();
    let mut json = Vec::new();
    write_table(&table.connections, compact, &mut json).unwrap();
    assert!(
        json == serde_json::to_vec(&table).unwrap(),
        "the JSON written by hand differs from serde_json's"
    );
    let mut json_pretty = Vec::new();
    write_table(&table.connections, pretty, &mut json_pretty).unwrap();
    assert!(
        json_pretty == serde_json::to_vec_pretty(&table).unwrap(),
        "the indented JSON written by hand differs from serde_json's"
    );
    std::hint::black_box((&text, &json));
    (
        [render_text, render_json, render_pretty, render_serde],
        [text.len(), json.len(), json_pretty.len()],
    )
}

fn main() {
    let mut args = std::env::args().skip(1);
    let first = args.next();
    if first.as_deref() == Some("--hold") {
        let ns = args.next().expect("--hold NS CONNS");
        let conns = args
            .next()
            .and_then(|s| s.parse().ok())
            .expect("--hold NS CONNS");
        return hold(&ns, conns);
    }
    let tcptune_bin = first.expect("usage: bench_conns TCPTUNE_BINARY [CONNECTIONS]");
    let conns: usize = args
        .next()
        .map(|s| s.parse().unwrap())
        .unwrap_or(DEFAULT_CONNS);
    let (ns, mut holder) = open_connections(conns);
    let n_expected = 2 * conns;

    let mut diag = Diag::open_in_netns(&ns.0).unwrap();
    let filter = tcptune_kernel::Filter::default();
    // One request for both families, as `Diag::dump_each` sends it, asking for what a row
    // needs (as `tcptune conns` without --all).
    let reqs: Vec<DumpRequest> = [AF_UNSPEC]
        .iter()
        .map(|&family| DumpRequest {
            family,
            states: state::CONNECTED,
            ext: ext::ROWS,
            bytecode: Vec::new(),
        })
        .collect();
    let ctx = Context::default();

    // 1. The kernel alone: the same dump, every message received, nothing decoded.
    let mut kernel = Vec::new();
    let mut n_sockets = 0;
    for _ in 0..REPS {
        let t = Instant::now();
        let mut n = 0;
        for r in &reqs {
            n += diag.dump_raw(r, |_, _| Ok(())).unwrap().sockets;
        }
        kernel.push(t.elapsed());
        n_sockets = n;
    }
    assert_eq!(n_sockets, n_expected, "the dump did not see every socket");

    // 2. Ours end to end, in process: dump + decode + derive (figures and verdict per socket),
    //    decoding on a second thread while the kernel fills the next datagram, as `conns` does.
    let mut ours = Vec::new();
    let mut verdicts = 0usize;
    for _ in 0..REPS {
        let t = Instant::now();
        let start = Instant::now();
        let mut rows: Vec<Conn> = Vec::with_capacity(n_expected);
        let rows_ref = &mut rows;
        diag.dump_each_parallel(&filter, ext::ROWS, |s| {
            rows_ref.push(Conn::new(s, Dur::from(start.elapsed()), None, &ctx, false).0);
        })
        .unwrap();
        ours.push(t.elapsed());
        verdicts = rows.len();
    }
    assert_eq!(verdicts, n_expected);

    // 3. Decode + derive alone, from the kernel's answers recorded in memory.
    let mut payloads: Vec<Vec<u8>> = Vec::with_capacity(n_expected);
    for r in &reqs {
        diag.dump_raw(r, |p, _| {
            payloads.push(p.to_vec());
            Ok(())
        })
        .unwrap();
    }
    let tail = tcptune_kernel::sys::running_tail_layout();
    let mut decode = Vec::new();
    for _ in 0..REPS {
        let t = Instant::now();
        let mut rows: Vec<Conn> = Vec::with_capacity(payloads.len());
        for p in &payloads {
            let s = DiagSocket::decode(p, tail).unwrap();
            rows.push(Conn::new(s, Dur::ZERO, None, &ctx, false).0);
        }
        decode.push(t.elapsed());
        std::hint::black_box(&rows);
    }

    // 3b. Rendering the rows as text and as JSON (what the CLI adds on top).
    let (render, bytes) = render(&payloads, tail, &ctx);

    // 4. ss -tin, and the tcptune process, on the same sockets, interleaved. What the
    //    measurements above hold is freed first (spawning is then as from a small shell).
    drop(payloads);
    enter_netns(&ns.0);
    check_agreement(&tcptune_bin, n_expected);
    let mut ss = Vec::new();

    let mut cli_text = Vec::new();
    let mut cli_json = Vec::new();
    let mut cli_pretty = Vec::new();
    for _ in 0..9 {
        ss.push(time_process(&["ss", "-tin"]));

        cli_text.push(time_process(&[&tcptune_bin, "conns"]));
        cli_json.push(time_process(&[&tcptune_bin, "conns", "--json"]));
        cli_pretty.push(time_process(&[&tcptune_bin, "conns", "--json", "--pretty"]));
    }
    drop(holder.stdin.take()); // the holder closes its sockets and exits
    holder.wait().unwrap();

    print_figures(&Figures {
        n: n_sockets,
        conns,
        kernel: median(kernel),
        ours: median(ours),
        decode: median(decode),
        ss: median(ss),
        cli: [median(cli_text), median(cli_json), median(cli_pretty)],
        render,
        bytes,
    });
}

/// The medians and sizes a run measured.
struct Figures {
    n: usize,
    conns: usize,
    kernel: Duration,
    ours: Duration,
    decode: Duration,
    ss: Duration,
    /// `tcptune conns` as a process: text, --json, --json --pretty.
    cli: [Duration; 3],
    /// In process: text, JSON, JSON indented, serde_json indented.
    render: [Duration; 4],
    /// Output sizes: text, JSON, JSON indented.
    bytes: [usize; 3],
}

fn print_figures(f: &Figures) {
    let (n, conns) = (f.n, f.conns);
    let (k, o, d, s) = (f.kernel, f.ours, f.decode, f.ss);
    let [ct, cj, cp] = f.cli;
    let [render_text, render_json, render_pretty, render_serde] = f.render;
    let [text_len, json_len, pretty_len] = f.bytes;
    let ss_us = per_socket(s, n);
    let ours_us = per_socket(o, n);
    println!("sockets dumped:                {n} ({conns} connections, both ends)");
    // The comparison: process against process, spawn to exit, output to /dev/null.
    println!(
        "ss -tin (process):              {ss_us:.3} µs/socket ({:.1} ms)",
        s.as_secs_f64() * 1e3
    );
    for (what, d) in [
        ("tcptune conns (process, text): ", ct),
        ("tcptune conns --json (process):", cj),
        ("tcptune conns --json --pretty: ", cp),
    ] {
        println!(
            "{what} {:.3} µs/socket, ratio ss / tcptune {:.1}x",
            per_socket(d, n),
            s.as_secs_f64() / d.as_secs_f64()
        );
    }
    // Where tcptune's time goes, in process (no process start: not a figure to set against
    // ss's, which includes one).
    println!("in process, no ratio (the library path, where the time goes):");
    println!(
        "  dump+decode+derive:          {ours_us:.3} µs/socket ({:.1} ms)",
        o.as_secs_f64() * 1e3
    );
    println!(
        "  of which the kernel's dump:  {:.3} µs/socket ({:.0}% of it; decoding overlaps it)",
        per_socket(k, n),
        100.0 * k.as_secs_f64() / o.as_secs_f64()
    );
    println!(
        "  decode+derive alone:         {:.3} µs/socket (goal < 0.5)",
        per_socket(d, n)
    );
    println!(
        "  rendering text / JSON / JSON indented: {:.3} / {:.3} / {:.3} µs/socket ({} / {} / {} bytes; serde_json indented {:.3})",
        per_socket(render_text, n),
        per_socket(render_json, n),
        per_socket(render_pretty, n),
        text_len,
        json_len,
        pretty_len,
        per_socket(render_serde, n)
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    println!(
        "load: {} (1, 5, 15 min) on {} CPUs",
        load.join(" "),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
}
