//! Benchmark: a full dump of 10,000 connections (20,000 sockets) with tcp_info, decoded and
//! derived, against `ss -tin` on the same sockets in the same run. Run it with `bench/conns`
//! (as root: it makes a network namespace, removed at the end).
//!
//! Prints, per socket: ss (process, spawn to exit, output to /dev/null); tcptune's library
//! path end to end (dump + decode + derive, in process); the kernel's share of that (the same
//! dump with nothing decoded); decode + derive alone (from the recorded answers in memory);
//! rendering text and JSON (by hand, as `conns --json`, and through serde_json for comparison);
//! and the `tcptune conns` process end to end (text and --json).
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

use tcptune_diagnose::conn::Conn;
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

/// Runs `argv` inside the namespace (setns in the child before exec, so no `ip netns exec`
/// overhead is timed), output to /dev/null; returns the wall time.
fn time_process(ns: &str, argv: &[&str]) -> Duration {
    let f = tcptune_os::netns::open(Path::new(&format!("/run/netns/{ns}"))).unwrap();
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    // The command keeps the namespace's descriptor open until it is dropped.
    tcptune_os::netns::enter_in_child(&mut cmd, f);
    let t = Instant::now();
    let st = cmd.status().unwrap();
    let d = t.elapsed();
    assert!(st.success(), "{argv:?} failed");
    d
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
    let mut rows: Vec<Conn> = Vec::with_capacity(payloads.len());
    for p in &payloads {
        let s = DiagSocket::decode(p, tail).unwrap();
        rows.push(Conn::new(s, Dur::ZERO, None, &ctx, false).0);
    }
    let table = tcptune_diagnose::conn::ConnTable {
        connections: rows,
        all: false,
    };
    let t = Instant::now();
    let text = table.to_string();
    let render_text = t.elapsed();
    // JSON as `conns --json` renders it (by hand) and through serde_json, both into a sink as
    // the process writes to /dev/null; then into memory, to check they make the same bytes.
    let t = Instant::now();
    tcptune_diagnose::json::write_table(&table.connections, 1, &mut std::io::sink()).unwrap();
    let render_json = t.elapsed();
    let t = Instant::now();
    serde_json::to_writer_pretty(std::io::BufWriter::new(std::io::sink()), &table).unwrap();
    let render_serde = t.elapsed();
    let mut json = Vec::new();
    tcptune_diagnose::json::write_table(&table.connections, 1, &mut json).unwrap();
    assert!(
        json == serde_json::to_vec_pretty(&table).unwrap(),
        "the JSON written by hand differs from serde_json's"
    );
    std::hint::black_box((&text, &json));

    // 4. ss -tin, and the tcptune process, on the same sockets, interleaved.
    let mut ss = Vec::new();

    let mut cli_text = Vec::new();
    let mut cli_json = Vec::new();
    for _ in 0..9 {
        ss.push(time_process(&ns.0, &["ss", "-tin"]));

        cli_text.push(time_process(&ns.0, &[&tcptune_bin, "conns"]));
        cli_json.push(time_process(&ns.0, &[&tcptune_bin, "conns", "--json"]));
    }
    drop(holder.stdin.take()); // the holder closes its sockets and exits
    holder.wait().unwrap();

    let n = n_sockets;
    let (k, o, d, s) = (median(kernel), median(ours), median(decode), median(ss));
    let (ct, cj) = (median(cli_text), median(cli_json));
    let ss_us = per_socket(s, n);
    let ours_us = per_socket(o, n);
    println!("sockets dumped:                {n} ({conns} connections, both ends)");
    println!(
        "ss -tin (process):             {ss_us:.3} µs/socket ({:.1} ms)",
        s.as_secs_f64() * 1e3
    );
    println!(
        "tcptune dump+decode+derive:    {ours_us:.3} µs/socket ({:.1} ms)",
        o.as_secs_f64() * 1e3
    );
    println!("ratio ss / tcptune:            {:.1}x", ss_us / ours_us);
    println!(
        "  of which the kernel's dump:  {:.3} µs/socket ({:.0}% of ours; decoding overlaps it)",
        per_socket(k, n),
        100.0 * k.as_secs_f64() / o.as_secs_f64()
    );
    println!(
        "  decode+derive alone:         {:.3} µs/socket (goal < 0.5)",
        per_socket(d, n)
    );
    println!(
        "  rendering text / JSON:       {:.3} / {:.3} µs/socket ({} / {} bytes; serde_json {:.3})",
        per_socket(render_text, n),
        per_socket(render_json, n),
        text.len(),
        json.len(),
        per_socket(render_serde, n)
    );
    println!(
        "tcptune conns (process, text): {:.3} µs/socket, ratio {:.1}x",
        per_socket(ct, n),
        s.as_secs_f64() / ct.as_secs_f64()
    );
    println!(
        "tcptune conns --json (process): {:.3} µs/socket, ratio {:.1}x",
        per_socket(cj, n),
        s.as_secs_f64() / cj.as_secs_f64()
    );
}
