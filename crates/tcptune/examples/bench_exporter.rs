//! Benchmark: `tcptune exporter` against node_exporter's tcpstat collector (Debian
//! `prometheus-node-exporter`, every other collector off) over the same sockets in the same
//! run. Run it with `bench/exporter` (as root: it makes a network namespace per size, removed
//! at the end).
//!
//! For each size it opens that many connections into a fresh namespace from a second one over
//! a veth pair (so the exporters' namespace holds one socket per connection, as a server with
//! that many clients does), starts both exporters inside it, scrapes each once a second
//! (tcptune polls every second on its own; node_exporter works when scraped) and prints, over
//! a 10 s window, each one's CPU (user + system, as a share of one core), its median scrape
//! latency and its scrape size, and the ratios; then the kernel's part alone: the CPU of the
//! same sock_diag dump tcptune asks for, once a second, with nothing done with the answer (the
//! floor any exporter of these sockets' tcp_info pays). The connections are held by as many
//! processes as the open-file limit needs (a container's root cannot raise the hard limit,
//! often 20,000): each holds its share.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Seconds each exporter is measured over (`SECS`, default 10): CPU time comes in ticks of
/// 10 ms, so a longer window resolves smaller shares.
fn window() -> u32 {
    std::env::var("SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10)
}
const TCPTUNE_ADDR: &str = "127.0.0.1:19241";
const NODE_ADDR: &str = "127.0.0.1:9100";

struct Ns(String);
impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Descriptors a holder keeps besides its connections.
const SPARE_FDS: usize = 100;

/// The exporters' namespace's address on the veth pair, and the clients' namespace's.
const SERVER_IP: &str = "198.18.0.1";
const CLIENT_IP: &str = "198.18.0.2";

/// `--hold NS PEER CONNS`: opens the connections from PEER to listeners inside NS, says
/// "ready", keeps them until stdin closes (a separate process, so the exporters' spawns do not
/// copy its descriptors). The server ends are never accepted: established in the listeners'
/// queues, they need no descriptor and are dumped like any other socket.
fn hold(ns: &str, peer: &str, conns: usize) {
    let want = (conns + SPARE_FDS) as u64;
    let now = tcptune_os::process::raise_open_file_limit(want).unwrap_or(0);
    assert!(
        now >= want,
        "the open-file limit ({now}) is below {want}; raise it with ulimit -n"
    );
    let listeners = tcptune_kernel::sys::in_netns(ns, || {
        // One listener per 20,000 connections: the ephemeral ports (28,232) bound how many
        // connections one source address can open to one destination.
        (0..conns.div_ceil(20_000))
            .map(|_| {
                let l = TcpListener::bind(format!("{SERVER_IP}:0")).unwrap();
                tcptune_os::socket::listen(l.as_fd(), 20_000 + 16).unwrap();
                l
            })
            .collect::<Vec<TcpListener>>()
    })
    .unwrap();
    let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
    let keep = tcptune_kernel::sys::in_netns(peer, || {
        (0..conns)
            .map(|i| TcpStream::connect(addrs[i % addrs.len()]).unwrap())
            .collect::<Vec<TcpStream>>()
    })
    .unwrap();
    let sockets = (listeners, keep);
    println!("ready");
    std::io::stdout().flush().unwrap();
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(sockets);
}

/// (user, system) ticks of a process.
fn cpu_ticks(pid: u32) -> (u64, u64) {
    cpu_ticks_of(&format!("/proc/{pid}/stat"))
}

/// (user, system) ticks from a `stat` file of /proc.
fn cpu_ticks_of(path: &str) -> (u64, u64) {
    let stat = std::fs::read_to_string(path).unwrap();
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    (f[11].parse().unwrap(), f[12].parse().unwrap())
}

/// Resident memory of a process, MB.
fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// GET /metrics: (latency, body bytes).
fn scrape(addr: &str) -> Option<(Duration, usize)> {
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).ok()?;
    write!(s, "GET /metrics HTTP/1.0\r\nHost: bench\r\n\r\n").ok()?;
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).ok()?;
    let d = t.elapsed();
    let head = resp.windows(4).position(|w| w == b"\r\n\r\n")?;
    resp.starts_with(b"HTTP/1.")
        .then_some((d, resp.len() - head - 4))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn spawn_in(ns: &str, argv: &[&str]) -> Proc {
    Proc(
        Command::new("ip")
            .args(["netns", "exec", ns])
            .args(argv)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

struct Figures {
    rss_mb: f64,
    cpu_pct: f64,
    /// Of which in the kernel (system time: for tcptune, mostly the sock_diag dump).
    sys_pct: f64,
    scrape: Duration,
    bytes: usize,
}

fn measure(pid: u32, addr: &str, tck: f64) -> Figures {
    let c0 = cpu_ticks(pid);
    let t0 = Instant::now();
    let mut lat = Vec::new();
    let mut bytes = 0;
    for i in 1..=window() {
        let (d, b) = scrape(addr).expect("scrape");
        lat.push(d);
        bytes = b;
        // The scrape cadence (1 s), as Prometheus would.
        let next = Duration::from_secs(u64::from(i));
        std::thread::sleep(next.saturating_sub(t0.elapsed()));
    }
    let secs = t0.elapsed().as_secs_f64();
    let c1 = cpu_ticks(pid);
    let pct = |ticks: u64| ticks as f64 / tck / secs * 100.0;
    Figures {
        rss_mb: rss_mb(pid),
        cpu_pct: pct(c1.0 + c1.1 - c0.0 - c0.1),
        sys_pct: pct(c1.1 - c0.1),
        scrape: median(lat),
        bytes,
    }
}

/// Starts holders of `conns` connections in `ns`, each as many as the open-file limit allows;
/// returns them once all say "ready".
fn holders(ns: &str, peer: &str, conns: usize) -> Vec<Child> {
    let can = tcptune_os::process::raise_open_file_limit(1 << 20).unwrap_or(0) as usize;
    let each = can.saturating_sub(SPARE_FDS).clamp(1, 20_000);
    let mut out = Vec::new();
    let mut left = conns;
    while left > 0 {
        let n = left.min(each);
        left -= n;
        let mut h = Command::new(std::env::current_exe().unwrap())
            .args(["--hold", ns, peer, &n.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        BufReader::new(h.stdout.take().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(ready.trim(), "ready", "a socket holder failed");
        out.push(h);
    }
    out
}

fn run_size(tcptune: &str, conns: usize, tck: f64) {
    let ns = Ns(format!("tt-benchexp-{}-{conns}", std::process::id()));
    let peer = Ns(format!("tt-benchexp-{}-{conns}-c", std::process::id()));
    let veth = format!("tbe{}", std::process::id() % 100_000);
    let ip = |args: &[&str]| {
        assert!(
            Command::new("ip").args(args).status().unwrap().success(),
            "ip {args:?} failed"
        )
    };
    ip(&["netns", "add", &ns.0]);
    ip(&["netns", "add", &peer.0]);
    ip(&["-n", &ns.0, "link", "set", "lo", "up"]);
    ip(&[
        "-n", &ns.0, "link", "add", &veth, "type", "veth", "peer", "name", "c", "netns", &peer.0,
    ]);
    ip(&[
        "-n",
        &ns.0,
        "addr",
        "add",
        &format!("{SERVER_IP}/30"),
        "dev",
        &veth,
    ]);
    ip(&[
        "-n",
        &peer.0,
        "addr",
        "add",
        &format!("{CLIENT_IP}/30"),
        "dev",
        "c",
    ]);
    ip(&["-n", &ns.0, "link", "set", &veth, "up"]);
    ip(&["-n", &peer.0, "link", "set", "c", "up"]);
    let backlog = (conns + 16).to_string();
    Command::new("ip")
        .args(["netns", "exec", &ns.0, "sysctl", "-qw"])
        .arg(format!("net.core.somaxconn={backlog}"))
        .arg(format!("net.ipv4.tcp_max_syn_backlog={backlog}"))
        .status()
        .unwrap();
    let mut held = holders(&ns.0, &peer.0, conns);
    let ours = spawn_in(
        &ns.0,
        &[
            tcptune,
            "exporter",
            "--listen",
            TCPTUNE_ADDR,
            "--interval",
            "1s",
        ],
    );
    let node = spawn_in(
        &ns.0,
        &[
            "prometheus-node-exporter",
            "--collector.disable-defaults",
            "--collector.tcpstat",
            &format!("--web.listen-address={NODE_ADDR}"),
        ],
    );
    // This thread scrapes from inside the namespace.
    let f = tcptune_os::netns::open(Path::new(&format!("/run/netns/{}", ns.0))).unwrap();
    let home = tcptune_os::netns::open(Path::new("/proc/self/ns/net")).unwrap();
    tcptune_os::netns::setns(f.as_fd()).unwrap();
    let up = Instant::now();
    while scrape(TCPTUNE_ADDR).is_none() || scrape(NODE_ADDR).is_none() {
        assert!(
            up.elapsed() < Duration::from_secs(30),
            "the exporters did not start"
        );
        std::thread::sleep(Duration::from_millis(100)); // waiting for a server to listen
    }
    std::thread::sleep(Duration::from_secs(3)); // past tcptune's first polls (warm-up)
    let a = measure(ours.0.id(), TCPTUNE_ADDR, tck);
    let b = measure(node.0.id(), NODE_ADDR, tck);
    tcptune_os::netns::setns(home.as_fd()).unwrap();
    drop((ours, node));
    let (floor, sockets) = kernel_floor(&ns.0, tck);
    println!(
        "{conns:>6} connections ({sockets:>6} sockets): tcptune exporter {:>5.2}% of a core ({:>5.2}% kernel), scrape {:>6.2} ms, {:>6} B, {:>5.0} MB | node_exporter tcpstat {:>5.2}% ({:>5.2}% kernel), scrape {:>6.2} ms, {:>5} B, {:>4.0} MB | CPU ratio {:.2}x, scrape-latency ratio {:.2}x | the dump alone {floor:>5.2}%, tcptune's own work {:>5.2}% (load {})",
        a.cpu_pct,
        a.sys_pct,
        a.scrape.as_secs_f64() * 1e3,
        a.bytes,
        a.rss_mb,
        b.cpu_pct,
        b.sys_pct,
        b.scrape.as_secs_f64() * 1e3,
        b.bytes,
        b.rss_mb,
        a.cpu_pct / b.cpu_pct.max(1e-9),
        a.scrape.as_secs_f64() / b.scrape.as_secs_f64().max(1e-9),
        a.cpu_pct - floor,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split(' ')
            .next()
            .unwrap_or("?"),
    );
    for h in &mut held {
        drop(h.stdin.take());
    }
    for mut h in held {
        let _ = h.wait();
    }
}

/// The kernel's part alone: this thread's CPU (user + system: the system time is the dump,
/// the user time the receive loop) for the dump tcptune's poll asks for in `ns`, repeated
/// `DUMPS` times with nothing done with the answer, as a share of one core at one dump a
/// second; and how many sockets a dump returned.
fn kernel_floor(ns: &str, tck: f64) -> (f64, usize) {
    const DUMPS: u32 = 60;
    let mut diag = tcptune_kernel::Diag::open_in_netns(ns).unwrap();
    let req = tcptune_kernel::diag::DumpRequest {
        family: tcptune_kernel::diag::AF_UNSPEC,
        states: tcptune_exporter::poll::filter().states,
        ext: tcptune_exporter::poll::extensions(false),
        bytecode: Vec::new(),
    };
    let ticks = || {
        let (u, s) = cpu_ticks_of("/proc/thread-self/stat");
        u + s
    };
    let t0 = ticks();
    let mut sockets = 0;
    for _ in 0..DUMPS {
        sockets = diag.dump_raw(&req, |_, _| Ok(())).unwrap().sockets;
    }
    let secs = (ticks() - t0) as f64 / tck;
    (secs / f64::from(DUMPS) * 100.0, sockets)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let first = args.next();
    if first.as_deref() == Some("--hold") {
        let ns = args.next().expect("--hold NS PEER CONNS");
        let peer = args.next().expect("--hold NS PEER CONNS");
        let conns = args
            .next()
            .and_then(|s| s.parse().ok())
            .expect("--hold NS PEER CONNS");
        return hold(&ns, &peer, conns);
    }
    let tcptune = first.expect("usage: bench_exporter TCPTUNE_BINARY [CONNECTIONS...]");
    let sizes: Vec<usize> = args
        .map(|s| s.parse().expect("a number of connections"))
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1000, 10_000]
    } else {
        sizes
    };
    let tck: f64 = String::from_utf8(
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .parse()
    .unwrap();
    println!("exporter CPU over {} s with a scrape every second, both inside the namespace the connections arrive in:", window());
    for n in sizes {
        run_size(&tcptune, n, tck);
    }
}
