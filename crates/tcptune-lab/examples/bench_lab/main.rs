//! The lab's benchmark (run by `bench/lab`): iperf3 through the lab against iperf3 over a
//! plain veth pair in the same run, and the delay error of the emulator under load, measured
//! from captures at both ends of the link against an ideal link ([`tcptune_lab::linkcheck`]).
//!
//! Usage: bench_lab TCPTUNE_BINARY [SECONDS]. Needs root, iperf3 and tcpdump.

use std::io::{BufRead, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use tcptune_lab::linkcheck::{self, Seen};
use tcptune_wire::{CaptureReader, LinkType};

use serde_json::Value;
use tcptune_testkit::{steal, veth_pair, Netns};

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// iperf3 server via `server` (a command prefix), client via `client`; returns the JSON.
fn iperf(server: &[&str], client: &[&str], target: &str, port: u16, extra: &[&str]) -> Value {
    let p = port.to_string();
    let mut srv = Command::new(server[0])
        .args(&server[1..])
        .args(["iperf3", "-s", "-1", "--forceflush", "-p", &p])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start iperf3 server");
    let mut line = String::new();
    std::io::BufReader::new(srv.stdout.as_mut().expect("piped"))
        .read_line(&mut line)
        .expect("iperf3 server output");
    let out = run(Command::new(client[0])
        .args(&client[1..])
        .args(["iperf3", "-c", target, "-p", &p, "-J"])
        .args(extra));
    let _ = srv.kill();
    let _ = srv.wait();
    serde_json::from_str(&out).expect("iperf3 JSON")
}

/// The received rate iperf3 reports; a report without one stops the benchmark (a ratio
/// against a missing figure would be printed as 0).
fn gbps(j: &Value) -> f64 {
    let Some(bps) = j["end"]["sum_received"]["bits_per_second"].as_f64() else {
        eprintln!(
            "bench/lab: iperf3 reported no received rate: {}",
            j["error"]
        );
        std::process::exit(1);
    };
    bps / 1e9
}

/// A tcpdump in a lab host's namespace, on its side of the link, one direction.
struct Tcpdump {
    child: Child,
    stderr: std::io::BufReader<std::process::ChildStderr>,
    path: PathBuf,
}

impl Tcpdump {
    /// Starts the capture and returns once tcpdump says it is listening.
    /// `host` is the command prefix that runs in the host (taskset … ip netns exec NS).
    fn start(mut host: Command, direction: &str, path: PathBuf) -> Tcpdump {
        let mut child = host
            .args(["tcpdump", "-i", "eth0", "-Q", direction])
            .args([
                "-n",
                "-s",
                "128",
                "-B",
                "65536",
                "--time-stamp-precision=nano",
                "-w",
            ])
            .arg(&path)
            .arg("ip")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start tcpdump (installed by scripts/deps)");
        let mut stderr = std::io::BufReader::new(child.stderr.take().expect("piped"));
        let mut line = String::new();
        while stderr.read_line(&mut line).unwrap_or(0) > 0 && !line.contains("listening on") {
            line.clear();
        }
        assert!(
            line.contains("listening on"),
            "tcpdump did not start: {line}"
        );
        Tcpdump {
            child,
            stderr,
            path,
        }
    }

    /// Stops the capture; returns its packets and how many the kernel dropped.
    fn stop(mut self, mtu: u32) -> (Vec<Seen>, u64) {
        // Our own child (ip netns exec replaced itself with tcpdump).
        let _ = tcptune_os::process::kill(self.child.id(), tcptune_os::process::Signal::Int);
        let mut rest = String::new();
        let _ = self.stderr.read_to_string(&mut rest);
        let _ = self.child.wait();
        let dropped = rest
            .lines()
            .find(|l| l.contains("dropped by kernel"))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        let file = std::fs::File::open(&self.path).expect("the capture file");
        let mut reader = CaptureReader::new(std::io::BufReader::new(file)).expect("a pcap");
        let mut seen = Vec::new();
        while let Ok(Some(f)) = reader.next() {
            let ip = if f.link == LinkType::ETHERNET {
                f.data.get(14..).unwrap_or(&[])
            } else {
                f.data
            };
            if let Some(s) = linkcheck::decode(f.ts_ns, ip, mtu) {
                seen.push(s);
            }
        }
        let _ = std::fs::remove_file(&self.path);
        (seen, dropped)
    }
}

/// One load through the lab with captures at both ends; the load's delay errors against an
/// ideal 1 Gbit/s × 1 ms link, and the packets the captures dropped.
/// The hosts' commands (iperf3, tcpdump) run on `cpus`.
fn delay_round(
    cpus: &str,
    cl: &str,
    sv: &str,
    load_args: &[&str],
    port: &str,
    secs: &str,
    mtu: u32,
) -> (linkcheck::Errors, u64, f64) {
    let in_host = |ns: &str| {
        let mut c = Command::new("taskset");
        c.args(["-c", cpus, "ip", "netns", "exec", ns]);
        c
    };
    let mut srv = in_host(sv)
        .args(["iperf3", "-s", "-1", "-p", port, "--forceflush"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 server");
    let mut line = String::new();
    let _ = std::io::BufReader::new(srv.stdout.as_mut().expect("piped")).read_line(&mut line);
    let dir = std::env::temp_dir();
    let pid = std::process::id();
    let capture = |ns: &str, dir_: &str, end: &str| {
        let path = dir.join(format!("bench-lab-{pid}-{port}-{end}.pcap"));
        Tcpdump::start(in_host(ns), dir_, path)
    };
    let sent = capture(cl, "out", "c");
    let got = capture(sv, "in", "s");
    let before = steal::cpu_ticks();
    run(in_host(cl)
        .args(["iperf3", "-c", "198.18.0.2", "-p", port])
        .args(load_args)
        .args(["-t", secs]));
    let steal = steal::share(before, steal::cpu_ticks());
    let _ = srv.kill();
    let _ = srv.wait();
    let (sent, drop_c) = sent.stop(mtu);
    let (got, drop_s) = got.stop(mtu);
    (
        linkcheck::delay_errors(&sent, &got, 1e9, 1e6),
        drop_c + drop_s,
        steal,
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(bin) = args.get(1) else {
        eprintln!("usage: bench_lab TCPTUNE_BINARY [SECONDS]");
        std::process::exit(2);
    };
    let secs: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    let t = secs.to_string();
    let lab = "bench";
    let tcptune = |a: &[&str]| run(Command::new(bin).args(a));
    let _ = Command::new(bin)
        .args(["lab", "down", "--name", lab])
        .output();

    // Reference: plain veth between two namespaces.
    let (a, b) = (Netns::new("benchva"), Netns::new("benchvb"));
    let (_, ib) = veth_pair(&a, &b, 77);
    let ip_a = ["ip", "netns", "exec", a.name()];
    let ip_b = ["ip", "netns", "exec", b.name()];
    let veth = gbps(&iperf(&ip_b, &ip_a, &ib, 5501, &["-t", &t]));
    drop((a, b));

    tcptune(&["lab", "up", "--name", lab]);
    let (cl, sv) = (
        format!("tcptune-{lab}-client"),
        format!("tcptune-{lab}-server"),
    );
    let ip_c = ["ip", "netns", "exec", cl.as_str()];
    let ip_s = ["ip", "netns", "exec", sv.as_str()];
    let plain = gbps(&iperf(&ip_s, &ip_c, "198.18.0.2", 5502, &["-t", &t]));
    println!(
        "unimpaired, offloads on:  lab {plain:.2} Gbit/s  veth {veth:.2} Gbit/s  ratio {:.0}%  (goal >= 50%)",
        100.0 * plain / veth
    );

    tcptune(&["lab", "set", "--name", lab, "--loss", "0.1%"]);
    let lossy = gbps(&iperf(&ip_s, &ip_c, "198.18.0.2", 5503, &["-t", &t]));
    println!(
        "MTU 1500, loss 0.1%:      lab {lossy:.2} Gbit/s  veth {veth:.2} Gbit/s  ratio {:.0}%  (goal >= 1.5 Gbit/s)",
        100.0 * lossy / veth
    );

    // Delay error at 80% of a 1 Gbit/s link with 1 ms one way: every packet of the load,
    // captured where it enters the link (the client's side, outgoing) and where it leaves
    // (the server's side, incoming), against an ideal link fed the same arrivals
    // (tcptune_lab::linkcheck). Once with a paced TCP flow (offloaded super-packets), once
    // with UDP datagrams (one per packet).
    tcptune(&[
        "lab", "set", "--name", lab, "--loss", "0", "--rate", "1gbit", "--delay", "1ms",
        // A queue deep enough that the load's bursts are not dropped: the ideal link has none.
        "--queue", "20000",
    ]);
    let mtu: u32 = run(Command::new("ip").args([
        "netns",
        "exec",
        cl.as_str(),
        "cat",
        "/sys/class/net/eth0/mtu",
    ]))
    .trim()
    .parse()
    .unwrap_or(1500);
    let status = || -> Value {
        serde_json::from_str(&tcptune(&["lab", "status", "--name", lab, "--json"]))
            .unwrap_or(Value::Null)
    };
    let rounds: u32 = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0} us"));
    // Shared: everything may run anywhere (the emulator competes with the hosts for both
    // CPUs). Pinned: the emulator has CPU 0 to itself, the hosts' commands share CPU 1, as
    // when the link runs on its own core.
    let emu_pid = status()["result"]["labs"][0]["emulator_pid"]
        .as_u64()
        .unwrap_or(0)
        .to_string();
    let pins = std::env::var("PIN").unwrap_or_else(|_| "0,1".into());
    for pin in pins.split(',').map(|p| p.trim() == "1") {
        let (cpus, emu_cpus, how) = if pin {
            ("1", "0", ", emulator on CPU 0, hosts on CPU 1")
        } else {
            ("0-1", "0-1", ", shared CPUs")
        };
        run(Command::new("taskset").args(["-a", "-p", "-c", emu_cpus, &emu_pid]));
        for (name, load_args, port) in [
            (
                "TCP paced at 800 Mbit/s",
                &["--fq-rate", "800M"][..],
                "5504",
            ),
            (
                "UDP at 800 Mbit/s",
                &["-u", "-b", "800M", "-l", "1472"][..],
                "5505",
            ),
        ] {
            // Every round's figures, then all rounds' packets pooled: the tail of one round is
            // a handful of events, so rounds differ.
            let mut all = linkcheck::Errors::default();
            let mut steal_sum = 0.0;
            for round in 1..=rounds {
                let (e, dropped, steal) = delay_round(cpus, &cl, &sv, load_args, port, &t, mtu);
                steal_sum += steal;
                println!(
                    "  round {round}: {name}{how}: offered {:.2} Gbit/s, {} of {} packets matched{}: p50 {}  p99 {}  max {}  (CPU steal {:.0}%)",
                    e.offered_bps() / 1e9,
                    e.ns.len(),
                    e.keyed,
                    if dropped > 0 {
                        format!(" (capture dropped {dropped})")
                    } else {
                        String::new()
                    },
                    us(e.quantile_us(0.5)),
                    us(e.quantile_us(0.99)),
                    us(e.quantile_us(1.0)),
                    steal * 100.0,
                );
                all.merge(e);
            }
            println!(
                "delay error, {name}{how}, {rounds} rounds pooled ({} of {} packets matched): p50 {}  p99 {}  max {}  (goal p99 <= 200 us; CPU steal {:.0}%)",
                all.ns.len(),
                all.keyed,
                us(all.quantile_us(0.5)),
                us(all.quantile_us(0.99)),
                us(all.quantile_us(1.0)),
                steal_sum * 100.0 / f64::from(rounds.max(1)),
            );
            println!(
                "  measured minus the configured 1 ms alone (queueing and serialisation an ideal link has too): p50 {}  p99 {}",
                us(all.raw_quantile_us(0.5)),
                us(all.raw_quantile_us(0.99)),
            );
        }
    }
    let late = &status()["result"]["labs"][0]["emulator"]["lateness"];
    println!(
        "  emulator's own lateness (pick-up time for writing - scheduled time, all runs): p50 {} us  p99 {} us  max {} us",
        late["p50_us"], late["p99_us"], late["max_us"]
    );
    tcptune(&["lab", "down", "--name", lab]);
}
