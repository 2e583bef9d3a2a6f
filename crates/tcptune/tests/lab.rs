//! Privileged lab tests: the real binary builds labs (namespaces, TUN devices, the emulator
//! process) and we measure what goes through them. Each test uses its own lab name and removes
//! its lab on drop, also on panic. Global-sysctl and timing measurements take the write side
//! of a lock, so they neither disturb nor are disturbed by other labs. (`lab down --all` and
//! kills at every stage: tests/lab_faults.rs.)

use std::collections::HashMap;
use std::net::UdpSocket;
use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use serde_json::Value;
use tcptune_testkit::{privileged, signal, wait_for, Signal};

static GLOBAL: RwLock<()> = RwLock::new(());

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

/// A lab that is taken down when the test ends (also on panic).
struct Lab(String);

impl Lab {
    fn up(name: &str, opts: &[&str]) -> Lab {
        // The emulator explicitly: `auto` would pick netem on a kernel that has it.
        let mut args = vec!["lab", "up", "--backend", "emu", "--name", name];
        args.extend(opts);
        ok(&args);
        Lab(name.to_string())
    }
    fn ns(&self, host: &str) -> String {
        format!("tcptune-{}-{host}", self.0)
    }
    fn exec(&self, host: &str, cmd: &[&str]) -> Output {
        let mut args = vec!["lab", "exec", &self.0, host, "--"];
        args.extend(cmd);
        tcptune(&args)
    }
    fn status(&self) -> Value {
        let v: Value =
            serde_json::from_str(&ok(&["lab", "status", "--name", &self.0, "--json"])).unwrap();
        v["result"]["labs"][0].clone()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = tcptune(&["lab", "down", "--name", &self.0]);
    }
}

/// Nothing named after `lab` is left: namespaces, /etc/netns, state, processes.
fn assert_gone(lab: &str) {
    for h in ["client", "server"] {
        let ns = format!("tcptune-{lab}-{h}");
        assert!(!Path::new("/run/netns").join(&ns).exists(), "{ns} left");
        assert!(
            !Path::new("/etc/netns").join(&ns).exists(),
            "/etc/netns/{ns} left"
        );
    }
    assert!(
        !Path::new("/run/tcptune").join(lab).exists(),
        "state of {lab} left"
    );
    let procs: Vec<_> = tcptune_lab::os::lab_processes()
        .into_iter()
        .filter(|p| p.lab == lab)
        .collect();
    assert!(procs.is_empty(), "processes left: {procs:?}");
}

fn ping_min_ms(lab: &Lab) -> f64 {
    let out = lab.exec(
        "client",
        &["ping", "-c", "10", "-i", "0.02", "-q", "server"],
    );
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains("min/avg")).unwrap();
    line.split('=')
        .nth(1)
        .unwrap()
        .trim()
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Runs iperf3 (server in `server`, client in `client`) and returns its JSON.
fn iperf(lab: &Lab, port: u16, client_args: &[&str]) -> Value {
    let p = port.to_string();
    let mut srv = Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args([
            "lab",
            "exec",
            &lab.0,
            "server",
            "--",
            "iperf3",
            "-s",
            "-1",
            "--forceflush",
            "-p",
            &p,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the server listens (its first output line), not for a fixed time.
    {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(srv.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
    }
    let mut args = vec!["iperf3", "-c", "server", "-p", &p, "-J"];
    args.extend(client_args);
    let out = lab.exec("client", &args);
    let _ = srv.kill();
    let _ = srv.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn up_exec_status_down_and_nothing_is_left() {
    if !privileged("up_exec_status_down_and_nothing_is_left") {
        return;
    }
    let _g = GLOBAL.read().unwrap_or_else(|e| e.into_inner());
    let lab = Lab::up("t-basic", &["--delay", "2ms", "--loss", "0.5%"]);
    // Names resolve inside the lab, both address families work.
    for target in ["server", "198.18.0.2", "2001:2::2"] {
        let out = lab.exec("client", &["ping", "-c", "1", "-W", "2", target]);
        assert!(out.status.success(), "ping {target}");
    }
    // Exit codes pass through.
    assert_eq!(
        lab.exec("server", &["sh", "-c", "exit 3"]).status.code(),
        Some(3)
    );
    let st = lab.status();
    assert_eq!(st["state"], "running");
    assert_eq!(st["hosts"][0]["ipv4"], "198.18.0.1");
    assert_eq!(st["link"]["up"]["loss"]["model"], "random");
    assert!(st["emulator"]["up"]["packets_out"].as_u64().unwrap() >= 2);
    drop(lab);
    assert_gone("t-basic");
}

#[test]
fn kill_9_of_the_emulator_leaves_nothing_after_down_or_the_next_up() {
    if !privileged("kill_9_of_the_emulator") {
        return;
    }
    // Exclusive: another test's `lab up` would (rightly) remove the broken lab under us.
    let _g = GLOBAL.write().unwrap_or_else(|e| e.into_inner());
    let lab = Lab::up("t-kill", &["--delay", "1ms"]);
    let pid = lab.status()["emulator_pid"].as_u64().unwrap() as i32;
    signal(pid as u32, Signal::Kill);
    wait_for("the emulator to die", Duration::from_secs(5), || {
        !tcptune_lab::os::alive(pid as u32)
    });
    // Broken, unless a `lab up` elsewhere on this machine has already swept it (as it should).
    let out = tcptune(&["lab", "status", "--name", "t-kill", "--json"]);
    if out.status.success() {
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["result"]["labs"][0]["state"], "broken");
    } else {
        assert!(String::from_utf8_lossy(&out.stderr).contains("no lab named"));
    }
    // The next `lab up` of the same name clears the leftovers and works.
    let again = Lab::up("t-kill", &["--delay", "1ms"]);
    assert!(again
        .exec("client", &["ping", "-c", "1", "server"])
        .status
        .success());
    std::mem::forget(lab);
    drop(again);
    assert_gone("t-kill");
}

#[test]
fn kill_9_of_lab_up_midway_is_cleaned_by_down() {
    if !privileged("kill_9_of_lab_up_midway") {
        return;
    }
    let _g = GLOBAL.read().unwrap_or_else(|e| e.into_inner());
    for stage in ["namespace", "emulator"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tcptune"))
            .args([
                "lab",
                "up",
                "--backend",
                "emu",
                "--name",
                "t-kup",
                "--delay",
                "1ms",
            ])
            .arg("--host")
            .arg("both.sysctl.net.ipv4.tcp_sack=0")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let ns = Path::new("/run/netns/tcptune-t-kup-client");
        wait_for(stage, Duration::from_secs(10), || match stage {
            "namespace" => ns.exists(),
            _ => tcptune_lab::os::lab_processes()
                .iter()
                .any(|p| p.lab == "t-kup"),
        });
        child.kill().unwrap();
        child.wait().unwrap();
        // Once the emulator runs it removes a lab whose `lab up` died before it was ready, and
        // another test's `lab up` removes leftovers, so the lab may be gone before `lab down`
        // (which then says there is no such lab).
        let out = tcptune(&["lab", "down", "--name", "t-kup"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() || err.contains("no lab named 't-kup'"),
            "{stage}: {err}"
        );
        assert_gone("t-kup");
    }
}

#[test]
fn sigterm_to_the_emulator_takes_the_lab_down() {
    if !privileged("sigterm_to_the_emulator") {
        return;
    }
    let _g = GLOBAL.read().unwrap_or_else(|e| e.into_inner());
    let lab = Lab::up("t-term", &[]);
    let pid = lab.status()["emulator_pid"].as_u64().unwrap() as u32;
    tcptune_lab::os::stop_process(pid, Duration::from_secs(10));
    assert_gone("t-term");
    std::mem::forget(lab);
}

#[test]
fn configured_rtt_matches_ping_and_tcp_min_rtt() {
    if !privileged("configured_rtt_matches_ping_and_tcp_min_rtt") {
        return;
    }
    // Measurements run alone: other labs' traffic would compete for the 2 CPUs.
    let _g = GLOBAL.write().unwrap_or_else(|e| e.into_inner());
    tcptune_testkit::steal::retry_when_starved(
        "configured_rtt_matches_ping_and_tcp_min_rtt",
        || {
            let lab = Lab::up("t-rtt", &["--rtt", "10ms"]);
            let ping = ping_min_ms(&lab);
            assert!(
                (10.0..11.0).contains(&ping),
                "ping min {ping} ms for a 10 ms RTT"
            );
            // Paced below any bottleneck, so no queue inflates the RTT samples iperf3 reports.
            // Its min_rtt is the smallest of the srtt samples it takes once a stats interval: a
            // tenth of a second gives ten, where one (the default second) read 13 ms once in CI
            // after ping's 10.
            let j = iperf(&lab, 5301, &["-t", "1", "-b", "20M", "-i", "0.1"]);
            let min_rtt_us = j["end"]["streams"][0]["sender"]["min_rtt"]
                .as_f64()
                .unwrap();
            // BBR stamps segments with their pacing departure time, which can be a little later
            // than when they leave: allow 2% below.
            assert!(
                (9_800.0..11_500.0).contains(&min_rtt_us),
                "TCP min RTT {min_rtt_us} µs for a 10 ms RTT"
            );
        },
    );
}

#[test]
fn tcp_goodput_is_the_payload_share_of_the_rate() {
    if !privileged("tcp_goodput_is_the_payload_share_of_the_rate") {
        return;
    }
    // Measurements run alone: other labs' traffic would compete for the 2 CPUs.
    let _g = GLOBAL.write().unwrap_or_else(|e| e.into_inner());
    tcptune_testkit::steal::retry_when_starved(
        "tcp_goodput_is_the_payload_share_of_the_rate",
        || {
            let lab = Lab::up("t-rate", &["--rate", "40mbit", "--rtt", "4ms"]);
            let j = iperf(&lab, 5302, &["-t", "3", "-O", "1"]);
            let got = j["end"]["sum_received"]["bits_per_second"]
                .as_f64()
                .unwrap();
            // 1448 payload bytes (timestamps on) per 1500 + 14 bytes charged.
            let expect = 40e6 * 1448.0 / 1514.0;
            assert!(
                got > 0.9 * expect && got < 1.01 * expect,
                "goodput {got} bit/s, expected about {expect}"
            );
            let st = lab.status();
            assert_eq!(
                st["emulator"]["offloads"], false,
                "a rate segments super-packets"
            );
            // Counted per wire packet: 3 s at 40 Mbit/s is about 10000 segments.
            let up = &st["emulator"]["up"];
            assert!(up["packets_out"].as_u64().unwrap() > 5000, "{up}");
        },
    );
}

#[test]
fn window_limited_throughput_is_window_over_rtt() {
    if !privileged("window_limited_throughput_is_window_over_rtt") {
        return;
    }
    // Measurements run alone: other labs' traffic would compete for the 2 CPUs.
    let _g = GLOBAL.write().unwrap_or_else(|e| e.into_inner());
    tcptune_testkit::steal::retry_when_starved(
        "window_limited_throughput_is_window_over_rtt",
        || {
            // The receiver's buffer capped at 256 KiB (iperf3 -w would cap the sender's too).
            let lab = Lab::up(
                "t-win",
                &[
                    "--rtt",
                    "20ms",
                    "--host",
                    "server.sysctl.net.ipv4.tcp_rmem=4096 262144 262144",
                ],
            );
            let j = iperf(&lab, 5303, &["-t", "3", "-O", "1"]);
            let got = j["end"]["sum_received"]["bits_per_second"]
                .as_f64()
                .unwrap();
            let s = &j["end"]["streams"][0]["sender"];
            // The window the receiver advertised, averaged over the measured (not omitted) intervals.
            let wnds: Vec<f64> = j["intervals"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|i| i["streams"][0]["omitted"] == false)
                .map(|i| i["streams"][0]["snd_wnd"].as_f64().unwrap())
                .collect();
            let wnd = wnds.iter().sum::<f64>() / wnds.len() as f64;
            let rtt = s["mean_rtt"].as_f64().unwrap() / 1e6;
            let expect = wnd * 8.0 / rtt;
            eprintln!("window test: {got} bit/s, window {wnd} B, rtt {rtt} s, model {expect}");
            assert!(
                (got - expect).abs() < 0.1 * expect,
                "{got} bit/s vs window {wnd} B / RTT {rtt} s = {expect}"
            );
            // Never below the configured 20 ms (above it when the machine is busy: the model uses
            // the measured RTT, since queueing adds to the configured delay).
            assert!(rtt >= 0.0195, "rtt {rtt}");
        },
    );
}

fn realtime_ns() -> u64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    d.as_nanos() as u64
}

/// Receives one datagram with the kernel's arrival time (SO_TIMESTAMPNS, CLOCK_REALTIME), so
/// the delay measured does not include this test thread's scheduling latency.
fn recv_stamped(s: &UdpSocket, buf: &mut [u8]) -> Option<(usize, u64)> {
    let (n, stamp) = tcptune_os::socket::recv_timestamped(s.as_fd(), buf).ok()?;
    Some((n, stamp.unwrap_or_else(realtime_ns)))
}

/// Sends `n` numbered, time-stamped UDP datagrams from client to server every `gap`, and
/// returns (sequence, one-way delay ns) of everything received, in order of arrival.
fn udp_probe(lab: &Lab, n: u32, size: usize, gap: Duration) -> Vec<(u32, u64)> {
    let rx = tcptune_lab::os::in_netns(&lab.ns("server"), || UdpSocket::bind("198.18.0.2:9999"))
        .unwrap();
    let tx = tcptune_lab::os::in_netns(&lab.ns("client"), || {
        let s = UdpSocket::bind("198.18.0.1:0")?;
        s.connect("198.18.0.2:9999")?;
        Ok(s)
    })
    .unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    tcptune_os::socket::set_int(rx.as_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1).unwrap();
    // Room for every probe at once, so a receiver descheduled under load loses none.
    tcptune_os::socket::set_int(rx.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, 8 << 20).unwrap();
    let sent_all = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done = sent_all.clone();
    let receiver = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        loop {
            match recv_stamped(&rx, &mut buf) {
                Some((len, at)) if len >= 12 => {
                    let seq = u32::from_le_bytes(buf[0..4].try_into().unwrap());
                    let sent = u64::from_le_bytes(buf[4..12].try_into().unwrap());
                    got.push((seq, at.saturating_sub(sent)));
                }
                Some(_) => {}
                // Quiet for 500 ms: the end once the sender is done (the link's delay is a few
                // ms), a stalled sender otherwise.
                None if done.load(std::sync::atomic::Ordering::Acquire) => break,
                None => {}
            }
        }
        got
    });
    let mut pkt = vec![0u8; size.max(12)];
    let start = Instant::now();
    for seq in 0..n {
        // Pace against the clock (sleeping, so the emulator keeps a CPU on this 2-core box).
        let due = start + gap * seq;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        pkt[0..4].copy_from_slice(&seq.to_le_bytes());
        pkt[4..12].copy_from_slice(&realtime_ns().to_le_bytes());
        // A full send queue is back-pressure, not a loss of the link's: send again.
        while let Err(e) = tx.send(&pkt) {
            assert_eq!(
                e.raw_os_error(),
                Some(libc::ENOBUFS),
                "sending a probe: {e}"
            );
            std::thread::yield_now();
        }
    }
    sent_all.store(true, std::sync::atomic::Ordering::Release);
    receiver.join().unwrap()
}

fn within_binomial_99(what: &str, k: u64, n: u64, p: f64) {
    let mean = n as f64 * p;
    let half = 2.576 * (n as f64 * p * (1.0 - p)).sqrt() + 1.0;
    assert!(
        (k as f64 - mean).abs() <= half,
        "{what}: {k} of {n}, expected {mean:.1} ± {half:.1}"
    );
}

#[test]
fn loss_duplication_and_reordering_shares_are_inside_binomial_intervals() {
    if !privileged("loss_duplication_and_reordering_shares") {
        return;
    }
    // Measurements run alone: other labs' traffic would compete for the 2 CPUs.
    let _g = GLOBAL.write().unwrap_or_else(|e| e.into_inner());
    tcptune_testkit::steal::retry_when_starved(
        "loss_duplication_and_reordering_shares_are_inside_binomial_intervals",
        || {
            let (loss, dup, reorder) = (0.03, 0.04, 0.05);
            let lab = Lab::up(
                "t-imp",
                &[
                    "--direction",
                    "up",
                    "--delay",
                    "2ms",
                    "--loss",
                    "3%",
                    "--duplicate",
                    "4%",
                    "--reorder",
                    "5%",
                    "--seed",
                    "9",
                ],
            );
            let n = 20_000u32;
            let got = udp_probe(&lab, n, 100, Duration::from_micros(100));
            let mut seen: HashMap<u32, u32> = HashMap::new();
            for (seq, _) in &got {
                *seen.entry(*seq).or_default() += 1;
            }
            let missing = u64::from(n) - seen.len() as u64;
            let dups: u64 = seen.values().map(|&c| u64::from(c.saturating_sub(1))).sum();
            // netem's arithmetic: an original is lost only if it was not also drawn for duplication;
            // a copy exists if the original was drawn and not lost, and is itself lost independently.
            within_binomial_99("missing", missing, u64::from(n), (1.0 - dup) * loss);
            within_binomial_99(
                "duplicates",
                dups,
                u64::from(n),
                dup * (1.0 - loss) * (1.0 - loss),
            );
            // Reordered packets skip the 2 ms delay and overtake the ~20 sent before them: a packet
            // is early when a packet sent before it arrives after it (judged by order of arrival, so
            // scheduling delays of this test's threads cannot blur it).
            let mut suffix_min = u32::MAX;
            let mut early = 0u64;
            for (seq, _) in got.iter().rev() {
                early += u64::from(*seq > suffix_min);
                suffix_min = suffix_min.min(*seq);
            }
            within_binomial_99("reordered", early, got.len() as u64, reorder);
            let min_delay = got.iter().map(|g| g.1).min().unwrap();
            let delayed = got.iter().filter(|g| g.1 >= 2_000_000).count();
            assert!(min_delay < 1_000_000, "no packet skipped the delay");
            assert!(
                delayed as f64 > 0.9 * got.len() as f64,
                "too few packets were delayed"
            );
        },
    );
}

#[test]
fn queue_limit_bounds_the_delay_under_load() {
    if !privileged("queue_limit_bounds_the_delay_under_load") {
        return;
    }
    // Measurements run alone: other labs' traffic would compete for the 2 CPUs.
    let _g = GLOBAL.write().unwrap_or_else(|e| e.into_inner());
    tcptune_testkit::steal::retry_when_starved("queue_limit_bounds_the_delay_under_load", || {
        let lab = Lab::up(
            "t-queue",
            &[
                "--direction",
                "up",
                "--rate",
                "10mbit",
                "--delay",
                "5ms",
                "--queue",
                "50",
            ],
        );
        // 1000-byte datagrams (1028 bytes of IP + 14 overhead: 833.6 µs each at 10 Mbit/s) offered
        // at twice the rate for 0.5 s: the queue fills and stays full.
        let got = udp_probe(&lab, 1200, 1000, Duration::from_micros(417));
        let tx_ns = 1042.0 * 8.0 / 10e6 * 1e9;
        let mut delays: Vec<u64> = got.iter().map(|g| g.1).collect();
        delays.sort_unstable();
        let p50 = delays[delays.len() / 2] as f64;
        let p99 = delays[delays.len() * 99 / 100] as f64;
        eprintln!(
            "queue delays ns: p50 {p50} p99 {p99} max {}",
            delays[delays.len() - 1]
        );
        let bound = 5e6 + 50.0 * tx_ns;
        // The queue allows at most 50 packets ahead: delay ≤ 5 ms + 50 × 833.6 µs = 46.68 ms.
        // Offered at twice the rate it stays full, so the median sits at the bound; without the
        // limit the delay would grow to ~300 ms. The emulator's wakeup latency on a shared 2-core
        // machine (measured: p99 +0.8 ms alone, up to +9 ms while other sessions build on the same 2 cores) gets slack at p99.
        assert!(
            p50 <= bound + 0.5e6 && p50 >= bound - 2.0 * tx_ns,
            "median delay {p50} ns, bound {bound}"
        );
        assert!(p99 <= bound + 10e6, "p99 delay {p99} ns far above {bound}");
        let st = lab.status();
        let c = &st["emulator"]["up"];
        assert!(c["dropped_queue"].as_u64().unwrap() > 400, "{c}");
        assert_eq!(c["max_queue_packets"].as_u64().unwrap(), 50);
    });
}

#[test]
fn host_settings_apply_and_change_live() {
    if !privileged("host_settings_apply_and_change_live") {
        return;
    }
    let _g = GLOBAL.write().unwrap_or_else(|e| e.into_inner());
    let allowed_before =
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control").unwrap();
    let lab = Lab::up(
        "t-host",
        &[
            "--host",
            "both.mtu=9000",
            "--host",
            "server.txqueuelen=4000",
            "--host",
            "client.sysctl.net.ipv4.tcp_sack=0",
            "--host",
            "client.cc=cubic",
            "--host",
            "client.initcwnd=20",
            "--host",
            "server.ssthresh=100",
        ],
    );
    let link = |host: &str| {
        String::from_utf8(lab.exec(host, &["ip", "link", "show", "eth0"]).stdout).unwrap()
    };
    assert!(link("client").contains("mtu 9000"));
    assert!(link("server").contains("qlen 4000"));
    let sysctl = |host: &str, k: &str| {
        let p = format!("/proc/sys/{}", k.replace('.', "/"));
        String::from_utf8(lab.exec(host, &["cat", &p]).stdout)
            .unwrap()
            .trim()
            .to_string()
    };
    assert_eq!(sysctl("client", "net.ipv4.tcp_sack"), "0");
    assert_eq!(sysctl("server", "net.ipv4.tcp_sack"), "1");
    assert_eq!(sysctl("client", "net.ipv4.tcp_congestion_control"), "cubic");
    let allowed =
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control").unwrap();
    assert!(allowed.contains("cubic"));
    let route = String::from_utf8(lab.exec("client", &["ip", "route"]).stdout).unwrap();
    assert!(route.contains("initcwnd 20"), "{route}");
    let route = String::from_utf8(lab.exec("server", &["ip", "-6", "route"]).stdout).unwrap();
    assert!(route.contains("ssthresh 100"), "{route}");
    // Live changes: link and host.
    ok(&[
        "lab",
        "set",
        "--name",
        "t-host",
        "--rtt",
        "6ms",
        "--host",
        "client.mtu=1500",
    ]);
    assert!(link("client").contains("mtu 1500"));
    let ping = ping_min_ms(&lab);
    assert!(
        (6.0..7.0).contains(&ping),
        "ping {ping} after set --rtt 6ms"
    );
    drop(lab);
    assert_gone("t-host");
    let allowed_after =
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control").unwrap();
    assert_eq!(
        allowed_after, allowed_before,
        "global allowed list restored"
    );
}

#[test]
fn bad_input_is_one_sentence_and_creates_nothing() {
    if !privileged("bad_input_is_one_sentence_and_creates_nothing") {
        return;
    }
    let _g = GLOBAL.read().unwrap_or_else(|e| e.into_inner());
    let cases: &[(&[&str], &str)] = &[
        (&["--rate", "10bit"], "out of range"),
        (&["--delay", "20s"], "at most 10 s"),
        (&["--loss", "150%"], "between 0 and 100%"),
        (&["--reorder", "5%"], "needs a delay"),
        (&["--host", "router.mtu=1500"], "no host 'router'"),
        (
            &["--host", "client.cc=vegas"],
            "not available in this kernel",
        ),
        (
            &["--host", "client.sysctl.net.ipv4.no_such_thing=1"],
            "does not exist",
        ),
    ];
    for (opts, want) in cases {
        let mut args = vec!["lab", "up", "--name", "t-bad"];
        args.extend(*opts);
        let out = tcptune(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{opts:?}: {err}");
        assert!(err.contains(want), "{opts:?}: {err}");
        // One sentence: our errors are one line; clap's usage errors add a hint line.
        assert_eq!(err.matches("error:").count(), 1, "{opts:?}: {err}");
        assert!(
            err.lines().next().unwrap().contains(want),
            "{opts:?}: {err}"
        );
        assert_gone("t-bad");
    }
    // Unknown host for exec, a name in use, a lab that does not exist.
    let lab = Lab::up("t-bad2", &[]);
    let out = lab.exec("router", &["true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no host 'router'"));
    let out = tcptune(&["lab", "up", "--name", "t-bad2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already running"));
    assert_eq!(
        lab.status()["state"],
        "running",
        "the running lab is untouched"
    );
    let out = tcptune(&["lab", "status", "--name", "t-nope"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no lab named 't-nope'"));
}

#[test]
fn host_line_rate_makes_txqueuelen_the_nic_queue() {
    if !privileged("host_line_rate_makes_txqueuelen_the_nic_queue") {
        return;
    }
    let _g = GLOBAL.write().unwrap_or_else(|e| e.into_inner());
    tcptune_testkit::steal::retry_when_starved(
        "host_line_rate_makes_txqueuelen_the_nic_queue",
        || {
            // No link impairment; the client's NIC runs at 20 Mbit/s with a 20-packet queue.
            let lab = Lab::up(
                "t-nic",
                &[
                    "--rtt",
                    "4ms",
                    "--host",
                    "client.line_rate=20mbit",
                    "--host",
                    "client.txqueuelen=20",
                ],
            );
            let j = iperf(&lab, 5304, &["-t", "2", "-O", "1"]);
            let got = j["end"]["sum_received"]["bits_per_second"]
                .as_f64()
                .unwrap();
            assert!(
                got < 20e6 && got > 0.7 * 20e6 * 1448.0 / 1514.0,
                "goodput {got}"
            );
            // TCP Small Queues keeps one TCP flow from overflowing the device queue (as on a real
            // NIC); UDP offered at twice the line rate overflows the 20 packets.
            let before = lab.status()["hosts"][0]["nic_tx_dropped"].as_u64().unwrap();
            iperf(&lab, 5306, &["-u", "-b", "40M", "-t", "1"]);
            let dropped = lab.status()["hosts"][0]["nic_tx_dropped"].as_u64().unwrap() - before;
            assert!(
                dropped > 500,
                "only {dropped} drops from a 20-packet NIC queue at 2x its rate"
            );
            // A change of line rate applies live.
            ok(&[
                "lab",
                "set",
                "--name",
                "t-nic",
                "--host",
                "client.line_rate=5mbit",
            ]);
            let j = iperf(&lab, 5305, &["-t", "2", "-O", "1"]);
            let got = j["end"]["sum_received"]["bits_per_second"]
                .as_f64()
                .unwrap();
            assert!(
                got < 5e6 && got > 0.7 * 5e6 * 1448.0 / 1514.0,
                "goodput {got} after set"
            );
        },
    );
}

#[test]
fn spec_file_and_cpu_hog_are_applied_and_removed() {
    if !privileged("spec_file_and_cpu_hog_are_applied_and_removed") {
        return;
    }
    let _g = GLOBAL.read().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("tt-spec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("lab.json");
    std::fs::write(
        &spec,
        r#"{"link": {"up": {"delay_s": 0.003}, "down": {"delay_s": 0.001}, "seed": 5},
            "server": {"cpu_hog": true, "cpu": 0}}"#,
    )
    .unwrap();
    let lab = Lab::up("t-spec", &["--spec", spec.to_str().unwrap()]);
    let ping = ping_min_ms(&lab);
    assert!((4.0..5.0).contains(&ping), "ping {ping} ms for 3 ms + 1 ms");
    let hogs: Vec<_> = tcptune_lab::os::lab_processes()
        .into_iter()
        .filter(|p| p.lab == "t-spec" && p.role == "_hog")
        .collect();
    assert_eq!(hogs.len(), 1, "{hogs:?}");
    let status = std::fs::read_to_string(format!("/proc/{}/status", hogs[0].pid)).unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Cpus_allowed_list:") && l.ends_with("\t0")),
        "the hog is pinned to CPU 0"
    );
    // A bad spec file is one sentence naming the file.
    std::fs::write(&spec, r#"{"link": {"up": {"delay": 1}}}"#).unwrap();
    let out = tcptune(&[
        "lab",
        "up",
        "--name",
        "t-spec2",
        "--spec",
        spec.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a lab spec"));
    drop(lab);
    assert_gone("t-spec");
    assert_gone("t-spec2");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigint_to_lab_up_removes_what_it_made() {
    if !privileged("sigint_to_lab_up_removes_what_it_made") {
        return;
    }
    let _g = GLOBAL.read().unwrap_or_else(|e| e.into_inner());
    let child = Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args([
            "lab",
            "up",
            "--backend",
            "emu",
            "--name",
            "t-int",
            "--delay",
            "1ms",
        ])
        .args(["--host", "both.sysctl.net.ipv4.tcp_sack=0"])
        .args(["--host", "both.sysctl.net.ipv4.tcp_timestamps=0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ns = Path::new("/run/netns/tcptune-t-int-client");
    wait_for("the namespace", Duration::from_secs(10), || ns.exists());
    signal(child.id(), Signal::Int);
    let out = child.wait_with_output().unwrap();
    if !out.status.success() {
        // Interrupted in time: it must say so and have removed everything itself.
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("interrupted"), "{err}");
        assert_gone("t-int");
    } else {
        // The signal came after the last step: the lab is complete; take it down.
        ok(&["lab", "down", "--name", "t-int"]);
        assert_gone("t-int");
    }
}

#[test]
fn netem_backend_is_a_veth_with_qdiscs_and_refuses_what_the_kernel_lacks() {
    if !privileged("netem_backend_is_a_veth_with_qdiscs_and_refuses_what_the_kernel_lacks") {
        return;
    }
    let _g = GLOBAL.write().unwrap_or_else(|e| e.into_inner());
    let has_netem = tcptune_lab::netem::netem_available();
    // A rate-only link runs on tbf, which every kernel here has.
    ok(&[
        "lab",
        "up",
        "--backend",
        "netem",
        "--name",
        "t-veth",
        "--rate",
        "40mbit",
    ]);
    let lab = Lab("t-veth".into());
    let st = lab.status();
    assert_eq!(st["backend"], "netem");
    assert!(st["emulator"].is_null(), "no emulator process: {st}");
    let kinds: Vec<&str> = st["qdiscs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["tbf", "tbf"]);
    assert!(ping_min_ms(&lab) < 1.0, "no delay configured");
    // The same goodput expectation as the emulator's: 1448 payload bytes per 1514 charged.
    let j = iperf(&lab, 5311, &["-t", "3", "-O", "1"]);
    let got = j["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap();
    let expect = 40e6 * 1448.0 / 1514.0;
    assert!(
        got > 0.9 * expect && got < 1.01 * expect,
        "goodput {got} bit/s, expected about {expect}"
    );
    let up = &lab.status()["qdiscs"][0];
    assert_eq!(up["host"], "client");
    assert!(up["packets"].as_u64().unwrap() > 1000, "{up}");
    // `lab set` changes the qdisc in place.
    ok(&["lab", "set", "--name", "t-veth", "--rate", "20mbit"]);
    let tc = Command::new("tc")
        .args([
            "-n",
            &lab.ns("client"),
            "-j",
            "qdisc",
            "show",
            "dev",
            "eth0",
        ])
        .output()
        .unwrap();
    let q: Value = serde_json::from_slice(&tc.stdout).unwrap();
    assert_eq!(q[0]["options"]["rate"], 2_500_000, "bytes/s: {q}");
    // A delay needs netem itself: refused in one sentence where the kernel lacks it, and the
    // lab keeps running as it was.
    let out = tcptune(&["lab", "set", "--name", "t-veth", "--delay", "5ms"]);
    if has_netem {
        assert!(out.status.success());
        assert!(ping_min_ms(&lab) >= 10.0);
    } else {
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("needs the sch_netem qdisc, which this kernel lacks")
                && err.contains("--backend emu"),
            "{err}"
        );
        assert!(ping_min_ms(&lab) < 1.0);
        // Nothing is created for a lab the backend cannot run.
        let out = tcptune(&[
            "lab",
            "up",
            "--backend",
            "netem",
            "--name",
            "t-veth2",
            "--delay",
            "5ms",
        ]);
        assert_eq!(out.status.code(), Some(2));
        assert_gone("t-veth2");
        // auto picks the user-space emulator here.
        ok(&["lab", "up", "--name", "t-auto", "--rate", "40mbit"]);
        let auto = Lab("t-auto".into());
        assert_eq!(auto.status()["backend"], "emu");
        drop(auto);
        assert_gone("t-auto");
    }
    drop(lab);
    assert_gone("t-veth");
}
