//! Privileged: `tcptune analyze A B` on captures taken at both ends of a lab link with known
//! impairments. tcpdump records the client's side (before the emulator) and the server's side
//! (after it) while a TCP stream runs; the join's lost, duplicated and reordered counts must
//! equal the emulator's own counters (`lab status --json`), and its one-way delays exceed the
//! delays the emulator drew (reproduced from its seed) by no more than what the lab adds to a
//! fixed delay measured at the same time.
//!
//! Impairments are switched on only while the stream is flowing and off before it ends, and
//! the counters are read while they are off, so the counters' differences cover exactly the
//! packets the join sees impaired. The emulator counts a reorder decision, the join a packet
//! that arrived ahead of one sent before it: the two agree while every reordered packet has
//! packets in flight to overtake, so the reordering run sends every 0.5 ms over 20 ms (about
//! 40 in flight; only a sender stalled for 20 ms, or a retransmission timeout, empties it). The client's TUN sends one MSS per packet (`gso_max_segs 1`), so each
//! packet it captures is one the emulator decides on.

use std::io::Read;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tcptune_testkit::privileged;

fn tcptune(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args(args)
        .output()
        .expect("run tcptune")
}

fn ok(args: &[&str]) -> String {
    let out = tcptune(args);
    assert!(
        out.status.success(),
        "tcptune {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A lab and what the test started in it, all removed on drop (also on panic).
struct Lab {
    name: String,
    children: Vec<Child>,
    /// tcpdump's standard error by child index (its drop count comes at the end).
    stderr: Vec<Option<BufReader<ChildStderr>>>,
    files: Vec<PathBuf>,
}

impl Lab {
    fn up(name: &str, opts: &[&str]) -> Lab {
        let mut args = vec!["lab", "up", "--backend", "emu", "--name", name];
        args.extend(opts);
        ok(&args);
        Lab {
            name: name.to_string(),
            children: Vec::new(),
            stderr: Vec::new(),
            files: Vec::new(),
        }
    }
    fn ns(&self, host: &str) -> String {
        format!("tcptune-{}-{host}", self.name)
    }
    fn set(&self, opts: &[&str]) {
        let mut args = vec!["lab", "set", "--name", &self.name];
        args.extend(opts);
        ok(&args);
    }
    /// The emulator's counters of one direction.
    fn counters(&self, dir: &str) -> Value {
        let v: Value =
            serde_json::from_str(&ok(&["lab", "status", "--name", &self.name, "--json"])).unwrap();
        v["result"]["labs"][0]["emulator"][dir].clone()
    }
    /// Starts tcpdump on the host's side of the link; returns once it listens.
    fn tcpdump(&mut self, host: &str) -> (usize, PathBuf) {
        let path = std::env::temp_dir().join(format!("{}-{host}.pcap", self.name));
        let mut child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns(host),
                "tcpdump",
                "-i",
                "eth0",
                "-n",
            ])
            .args(["-s", "128", "--immediate-mode", "-U", "-B", "8192"])
            .args(["--time-stamp-precision=nano", "-w"])
            .arg(&path)
            .arg("tcp")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start tcpdump (installed by scripts/deps)");
        let mut err = BufReader::new(child.stderr.take().expect("piped"));
        let mut line = String::new();
        while err.read_line(&mut line).unwrap_or(0) > 0 && !line.contains("listening on") {
            line.clear();
        }
        assert!(
            line.contains("listening on"),
            "tcpdump did not start: {line}"
        );
        self.children.push(child);
        self.stderr.push(Some(err));
        self.files.push(path.clone());
        (self.children.len() - 1, path)
    }
    /// A python3 program in a host, with piped standard input and output.
    fn python(&mut self, host: &str, code: &str) -> (usize, ChildStdin, BufReader<ChildStdout>) {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.ns(host), "python3", "-u", "-c", code])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start python3");
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        self.children.push(child);
        self.stderr.push(None);
        (self.children.len() - 1, stdin, stdout)
    }
    /// SIGINT to a tcpdump (it writes out and exits), and checks that it dropped nothing: a
    /// packet the capture missed would pass for one the link lost.
    fn stop(&mut self, i: usize) {
        // Our own child (ip netns exec replaced itself with tcpdump).
        tcptune_testkit::signal(self.children[i].id(), tcptune_testkit::Signal::Int);
        let mut rest = String::new();
        if let Some(mut e) = self.stderr[i].take() {
            let _ = e.read_to_string(&mut rest);
        }
        let _ = self.children[i].wait();
        assert!(
            rest.lines()
                .any(|l| l.trim() == "0 packets dropped by kernel"),
            "the capture dropped packets: {rest}"
        );
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
        let _ = tcptune(&["lab", "down", "--name", &self.name]);
    }
}

fn line(r: &mut BufReader<ChildStdout>) -> String {
    let mut l = String::new();
    r.read_line(&mut l).expect("read a line");
    l.trim().to_string()
}

/// A server that takes one connection and reads it to the end; with `gap`, it also sends 100
/// bytes every `gap` seconds on its own clock (TCP_NODELAY: one segment each) until then.
fn server(gap: Option<f64>) -> String {
    format!(
        r#"
import select, socket, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("198.18.0.2", 5001))
s.listen(1)
print("ready")
c, _ = s.accept()
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
gap = {}
t = time.monotonic()
while True:
    wait = None if gap is None else max(0.0, t - time.monotonic())
    if select.select([c], [], [], wait)[0] and not c.recv(65536):
        break
    if gap is not None and time.monotonic() >= t:
        c.send(b"y" * 100)
        t += gap
c.close()
"#,
        gap.map_or("None".to_string(), |g| g.to_string())
    )
}

/// Streams `n` writes of 100 bytes, one every `gap` seconds (TCP_NODELAY: one segment each),
/// saying "on" after the first tenth and "off" before the last tenth, then closes and reads
/// until the server's close (what an echo server sent back included).
fn client(n: u32, gap: f64) -> String {
    format!(
        r#"
import socket, time
s = socket.create_connection(("198.18.0.2", 5001))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
n, gap = {n}, {gap}
t = time.monotonic()
for i in range(n):
    if i == n // 10:
        print("on"); input()
    if i == n - n // 10:
        print("off"); input()
    s.send(b"x" * 100)
    t += gap
    d = t - time.monotonic()
    if d > 0:
        time.sleep(d)
s.shutdown(socket.SHUT_WR)
while s.recv(65536):
    pass
s.close()
print("done")
"#
    )
}

/// Runs the stream through `lab` with `impair` (lab set options) on in the middle, to `server`
/// (python code); returns the join's JSON (`--same-clock` if `same_clock`) and the
/// differences of the up direction's counters.
fn run_stream(
    lab: &mut Lab,
    (n, gap): (u32, f64),
    (impair, clear): (&[&str], &[&str]),
    server: &str,
    same_clock: bool,
) -> (Value, Value) {
    let ns = lab.ns("client");
    let st = Command::new("ip")
        .args(["-n", &ns, "link", "set", "eth0", "gso_max_segs", "1"])
        .status()
        .expect("ip link set");
    assert!(st.success());
    let (dump_c, pcap_c) = lab.tcpdump("client");
    let (dump_s, pcap_s) = lab.tcpdump("server");
    let (_, _sin, mut sout) = lab.python("server", server);
    assert_eq!(line(&mut sout), "ready");
    let (_, mut cin, mut cout) = lab.python("client", &client(n, gap));
    let before = lab.counters("up");
    assert_eq!(line(&mut cout), "on");
    if !impair.is_empty() {
        let mut on = vec!["--direction", "up"];
        on.extend(impair);
        lab.set(&on);
    }
    writeln!(cin).unwrap();
    assert_eq!(line(&mut cout), "off");
    if !clear.is_empty() {
        let mut off = vec!["--direction", "up"];
        off.extend(clear);
        lab.set(&off);
    }
    let after = lab.counters("up");
    writeln!(cin).unwrap();
    assert_eq!(line(&mut cout), "done");
    // Everything sent has left the link before the captures stop.
    let end = Instant::now() + Duration::from_secs(10);
    while lab.counters("up")["held_packets"] != 0 || lab.counters("down")["held_packets"] != 0 {
        assert!(Instant::now() < end, "the link did not drain");
        std::thread::sleep(Duration::from_millis(20));
    }
    lab.stop(dump_c);
    lab.stop(dump_s);
    let delta = |k: &str| after[k].as_u64().unwrap() - before[k].as_u64().unwrap();
    let counters = serde_json::json!({
        "dropped_loss": delta("dropped_loss"),
        "duplicated": delta("duplicated"),
        "reordered": delta("reordered"),
        "packets_in": delta("packets_in"),
    });
    let mut args = vec!["analyze", "--json"];
    if same_clock {
        args.push("--same-clock");
    }
    args.extend([pcap_c.to_str().unwrap(), pcap_s.to_str().unwrap()]);
    let out = tcptune(&args);
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "join failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    (v["result"].clone(), counters)
}

/// The join's direction from the client (`up`, to port 5001: the server's) or to it.
fn direction(join: &Value, up: bool) -> Value {
    let flows = join["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 1, "one connection: {join}");
    let key = if up { "to" } else { "from" };
    flows[0]["directions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d[key].as_str().unwrap().ends_with(":5001"))
        .cloned()
        .unwrap()
}

fn ms(v: &Value) -> f64 {
    v.as_f64().unwrap() * 1e3
}

#[test]
fn join_counts_equal_the_emulators_for_loss_and_reordering() {
    if !privileged("join_counts_equal_the_emulators_for_loss_and_reordering") {
        return;
    }
    let _one = tcptune_testkit::one_at_a_time();
    let name = format!("t-jl{}", std::process::id() % 100_000);
    let mut lab = Lab::up(
        &name,
        &[
            "--delay",
            "20ms",
            "--seed",
            "21",
            "--host",
            "both.sysctl.net.ipv6.conf.all.disable_ipv6=1",
        ],
    );
    // Reordered packets skip the delay (netem's rule), so the minimum delay one way is
    // ~0 and the NTP-style offset estimate would be off by half the delay: both captures
    // are on this host's clock, which the join is told.
    let (join, c) = run_stream(
        &mut lab,
        (6000, 0.0005),
        (
            &["--loss", "1%", "--reorder", "2%"],
            &["--loss", "0", "--reorder", "0"],
        ),
        &server(None),
        true,
    );
    let up = direction(&join, true);
    eprintln!("join: {up}\nemulator: {c}");
    assert!(up["upstream"].as_str().unwrap().ends_with("-client.pcap"));
    assert!(c["dropped_loss"].as_u64().unwrap() > 10, "{c}");
    assert!(c["reordered"].as_u64().unwrap() > 20, "{c}");
    assert_eq!(up["lost_between"], c["dropped_loss"]);
    assert_eq!(up["reordered"], c["reordered"]);
    assert_eq!(up["duplicated"], 0);
    assert_eq!(up["not_seen_upstream"], 0);
    // Losses were repaired by needed retransmissions (one may repair several losses: Linux
    // merges small segments when it retransmits), and only losses make them needed.
    let needed = up["retransmissions_needed"].as_u64().unwrap();
    assert!(
        needed > 0 && needed <= c["dropped_loss"].as_u64().unwrap(),
        "{up}"
    );
    // A fixed 20 ms: the delay of packets that were not reordered (which skip the delay).
    let d = &up["delay"];
    assert!((ms(&d["p50_s"]) - 20.0).abs() < 0.2, "{d}");
    let down = direction(&join, false);
    assert_eq!(down["lost_between"], 0);
    assert_eq!(down["reordered"], 0);
}

#[test]
fn join_counts_duplicates_as_the_emulator_does() {
    if !privileged("join_counts_duplicates_as_the_emulator_does") {
        return;
    }
    let _one = tcptune_testkit::one_at_a_time();
    let name = format!("t-jd{}", std::process::id() % 100_000);
    let mut lab = Lab::up(
        &name,
        &[
            "--delay",
            "5ms",
            "--seed",
            "22",
            "--host",
            "both.sysctl.net.ipv6.conf.all.disable_ipv6=1",
        ],
    );
    let (join, c) = run_stream(
        &mut lab,
        (3000, 0.001),
        (&["--duplicate", "3%"], &["--duplicate", "0"]),
        &server(None),
        false,
    );
    let up = direction(&join, true);
    eprintln!("join: {up}\nemulator: {c}");
    assert!(c["duplicated"].as_u64().unwrap() > 20, "{c}");
    assert_eq!(up["duplicated"], c["duplicated"]);
    assert_eq!(up["lost_between"], 0);
    assert_eq!(up["reordered"], c["reordered"]);
    assert_eq!(up["not_seen_upstream"], 0);
}

/// The one-way delays the emulator drew for the first `n` packets entering its up direction
/// with 5 ms ± 1 ms uniform jitter: the same pipeline, seed and configuration fed `n` packets,
/// sorted (seconds). The delay draws have a random stream of their own, one draw per packet.
fn drawn_delays_s(seed: u64, n: usize) -> Vec<f64> {
    let cfg = tcptune_emu::LinkConfig {
        delay_s: tcptune_model::Dur::from_millis(5),
        jitter_s: tcptune_model::Dur::from_millis(1),
        distribution: tcptune_emu::Distribution::Uniform,
        ..Default::default()
    };
    let mut d = tcptune_emu::Direction::new(cfg, seed, 0).expect("a valid link");
    for _ in 0..n {
        d.enqueue(0, vec![0u8; 60]);
    }
    let mut v = Vec::with_capacity(n);
    d.poll_each(u64::MAX, |t, _| v.push(t as f64 / 1e9));
    v.sort_by(f64::total_cmp);
    v
}

#[test]
fn join_measures_the_configured_delay_distribution() {
    if !privileged("join_measures_the_configured_delay_distribution") {
        return;
    }
    let _one = tcptune_testkit::one_at_a_time();
    tcptune_testkit::steal::retry_when_starved("join_delay", || {
        let name = format!("t-jj{}", std::process::id() % 100_000);
        // A fixed 5 ms each way, then 5 ms ± 1 ms uniform on the way up (each packet its own
        // draw). The server sends a stream like the client's on its own clock, so the way down
        // carries as many packets as the way up, alike, at a fixed delay: what the lab adds to
        // a delay (the emulator waking to read a packet and to send it on time), measured at
        // the same moment on the same kind of traffic.
        let mut lab = Lab::up(
            &name,
            &[
                "--delay",
                "5ms",
                "--seed",
                "23",
                "--host",
                "both.sysctl.net.ipv6.conf.all.disable_ipv6=1",
            ],
        );
        lab.set(&[
            "--direction",
            "up",
            "--jitter",
            "1ms",
            "--distribution",
            "uniform",
        ]);
        // One host's clock stamps both captures: no offset estimate between the measured and
        // the drawn delays (with jitter one way only the path is asymmetric, which the
        // NTP-style estimate assumes it is not).
        let (join, _) = run_stream(
            &mut lab,
            (2000, 0.003),
            (&[], &[]),
            &server(Some(0.003)),
            true,
        );
        let up = direction(&join, true);
        let down = direction(&join, false);
        let (d, fixed) = (&up["delay"], &down["delay"]);
        eprintln!("up: {d}\ndown (fixed 5 ms): {fixed}");
        assert_eq!(up["lost_between"], 0);
        assert_eq!(up["duplicated"], 0);
        assert_eq!(up["matched"], up["upstream_packets"], "{up}");
        // The lab's added delay R: the fixed direction's delays less the 5 ms. The emulator
        // reads a packet after the sender's capture saw it, so R is never negative.
        let added = |k: &str| ms(&fixed[k]) - 5.0;
        let (added_min, added_mean) = (added("min_s"), added("mean_s"));
        assert!(added_min >= 0.0, "{fixed}");
        // Mean: the configured 5 ms within 2%, once the lab's mean addition is taken off.
        assert!(
            (ms(&d["mean_s"]) - added_mean - 5.0).abs() < 0.02 * 5.0,
            "mean (lab adds {added_mean:.3} ms): {d}"
        );
        // Percentiles, against the delays D the emulator drew (reproduced from its seed, so
        // the comparison carries no sampling error). A measured delay is D + R with R drawn
        // independently of D, so its p-quantile is at least D's plus R's minimum, and at most
        // D's (p / p')-quantile plus R's p'-quantile for any p' ≥ p (the chance that both are
        // no larger is at least (p / p') · p' = p): the smallest such sum over R's quantiles
        // the join gives (p50, p90, p99, max). The minimum, whose packet may have met any R,
        // only R's maximum bounds.
        let n = up["upstream_packets"].as_u64().unwrap() as usize;
        let drawn = drawn_delays_s(23, n);
        let q = |p: f64| drawn[((n - 1) as f64 * p).round() as usize] * 1e3;
        let r = [
            (0.5, added("p50_s")),
            (0.9, added("p90_s")),
            (0.99, added("p99_s")),
            (1.0, added("max_s")),
        ];
        for (k, p) in [
            ("min_s", 0.0),
            ("p50_s", 0.5),
            ("p90_s", 0.9),
            ("p99_s", 0.99),
        ] {
            let (lower, upper) = (
                q(p) + added_min,
                r.iter()
                    .filter(|(pr, _)| (*pr > p && p > 0.0) || *pr == 1.0)
                    .map(|(pr, v)| q(p / pr) + v)
                    .fold(f64::INFINITY, f64::min),
            );
            let got = ms(&d[k]);
            eprintln!(
                "{k}: drawn {:.4} ms, measured {got:.4} ms (+{:.4}), bounds [{lower:.4}, {upper:.4}] ms",
                q(p),
                got - q(p)
            );
            assert!(
                (lower..=upper).contains(&got),
                "{k}: {got:.4} ms outside [{lower:.4}, {upper:.4}] ms (drawn {:.4} ms)",
                q(p)
            );
        }
    });
}
