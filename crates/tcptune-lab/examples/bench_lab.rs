//! The lab's benchmark (run by `bench/lab`): iperf3 through the lab against iperf3 over a
//! plain veth pair in the same run, and the delay error of the emulator under load.
//!
//! Usage: bench_lab TCPTUNE_BINARY [SECONDS]. Needs root and iperf3.

use std::io::BufRead;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tcptune_testkit::{veth_pair, Netns};

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

fn gbps(j: &Value) -> f64 {
    j["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0)
        / 1e9
}

fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// One datagram with its kernel arrival time (SO_TIMESTAMPNS).
fn recv_stamped(fd: i32, buf: &mut [u8]) -> Option<(usize, u64)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut cbuf = [0u64; 16];
    // SAFETY: plain data, pointers to live locals.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cbuf);
    // SAFETY: valid socket and msghdr.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return None;
    }
    // SAFETY: walking the control messages the kernel wrote.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                return Some((
                    n as usize,
                    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64,
                ));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Some((n as usize, realtime_ns()))
}

/// One-way delays (ns) of `n` small probes sent every `gap` from client to server.
fn probe(lab: &str, n: u32, gap: Duration, size: usize, spin: bool) -> Vec<u64> {
    let ns = |h: &str| format!("tcptune-{lab}-{h}");
    let rx = tcptune_lab::os::in_netns(&ns("server"), || UdpSocket::bind("198.18.0.2:9998"))
        .expect("probe receiver");
    let tx = tcptune_lab::os::in_netns(&ns("client"), || {
        let s = UdpSocket::bind("198.18.0.1:0")?;
        s.connect("198.18.0.2:9998")?;
        Ok(s)
    })
    .expect("probe sender");
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let one: libc::c_int = 1;
    // SAFETY: setsockopt with a live int.
    unsafe {
        libc::setsockopt(
            rx.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    let t = std::thread::spawn(move || {
        let mut d = Vec::new();
        let mut buf = [0u8; 2048];
        while let Some((len, at)) = recv_stamped(rx.as_raw_fd(), &mut buf) {
            if len >= 8 {
                let sent = u64::from_le_bytes(buf[0..8].try_into().unwrap_or([0; 8]));
                d.push(at.saturating_sub(sent));
            }
        }
        d
    });
    let start = Instant::now();
    let mut pkt = vec![0u8; size.max(8)];
    for i in 0..n {
        let due = start + gap * i;
        if spin {
            while Instant::now() < due {
                std::hint::spin_loop();
            }
        } else if let Some(w) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(w);
        }
        pkt[0..8].copy_from_slice(&realtime_ns().to_le_bytes());
        let _ = tx.send(&pkt);
    }
    t.join().unwrap_or_default()
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

    // Delay error: 1 Gbit/s, 1 ms one way, a load at 80% plus 1000 probes/s; once with a
    // paced TCP flow (offloaded super-packets), once with UDP datagrams (one per packet).
    tcptune(&[
        "lab", "set", "--name", lab, "--loss", "0", "--rate", "1gbit", "--delay", "1ms",
    ]);
    let bytes_in = |v: &Value| v["result"]["labs"][0]["emulator"]["up"]["bytes_in"].as_f64();
    let status = || -> Value {
        serde_json::from_str(&tcptune(&["lab", "status", "--name", lab, "--json"]))
            .unwrap_or(Value::Null)
    };
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
        let mut srv = Command::new("ip")
            .args([
                "netns",
                "exec",
                sv.as_str(),
                "iperf3",
                "-s",
                "-1",
                "-p",
                port,
            ])
            .args(["--forceflush"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("iperf3 server");
        let mut line = String::new();
        let _ = std::io::BufReader::new(srv.stdout.as_mut().expect("piped")).read_line(&mut line);
        let load_secs = (secs + 2).to_string();
        let mut load = Command::new("ip")
            .args([
                "netns",
                "exec",
                cl.as_str(),
                "iperf3",
                "-c",
                "198.18.0.2",
                "-p",
                port,
            ])
            .args(load_args)
            .args(["-t", &load_secs])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("iperf3 load");
        std::thread::sleep(Duration::from_secs(1)); // let the load reach its rate
        let (t0, b0) = (Instant::now(), bytes_in(&status()).unwrap_or(0.0));
        let mut d = probe(lab, secs * 1000, Duration::from_millis(1), 64, false);
        let st = status();
        let offered = (bytes_in(&st).unwrap_or(0.0) - b0) * 8.0 / t0.elapsed().as_secs_f64() / 1e9;
        let _ = load.wait();
        let _ = srv.kill();
        let _ = srv.wait();
        d.sort_unstable();
        if d.is_empty() {
            println!("delay error, {name}: no probe arrived");
            continue;
        }
        // Expected: 1 ms plus the probe's own serialisation (92 B + 14 at 1 Gbit/s); the
        // excess includes real queueing behind the load's bursts.
        let expect = 1_000_000.0 + 0.85e3;
        let pct = |q: f64| d[((d.len() - 1) as f64 * q) as usize] as f64 - expect;
        println!(
            "delay error, {name} (offered {offered:.2} Gbit/s, {} probes): p50 {:.0} us  p99 {:.0} us  max {:.0} us  (goal p99 <= 200 us)",
            d.len(),
            pct(0.5) / 1e3,
            pct(0.99) / 1e3,
            pct(1.0) / 1e3
        );
    }
    // The load is the probe stream itself: 1472-byte datagrams (1514 B charged, 12.1 µs at
    // 1 Gbit/s) evenly spaced every 15.1 µs (80%), so no queue forms and every datagram's
    // expected delay is exactly 1 ms + 12.1 µs: the rest is error.
    let mut d = probe(lab, secs * 66_000, Duration::from_nanos(15_140), 1472, true);
    d.sort_unstable();
    if !d.is_empty() {
        let expect = 1_000_000.0 + 12_112.0;
        let pct = |q: f64| d[((d.len() - 1) as f64 * q) as usize] as f64 - expect;
        println!(
            "delay error, evenly paced UDP probes at 80% ({} received of {}): p50 {:.0} us  p99 {:.0} us  max {:.0} us  (goal p99 <= 200 us)",
            d.len(),
            secs * 66_000,
            pct(0.5) / 1e3,
            pct(0.99) / 1e3,
            pct(1.0) / 1e3
        );
    }
    let late = &status()["result"]["labs"][0]["emulator"]["lateness"];
    println!(
        "  emulator's own lateness (pick-up time for writing - scheduled time, all runs): p50 {} us  p99 {} us  max {} us",
        late["p50_us"], late["p99_us"], late["max_us"]
    );
    tcptune(&["lab", "down", "--name", lab]);
}
