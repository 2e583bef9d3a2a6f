//! `bench/web`'s measuring side: given a running `watch --web` and the transfer it shows,
//! opens the busiest connection's page in headless Chromium for SECONDS and prints the page's
//! update latency (event to pixel: p50, p95, max) and the updates it received per second.
//! Usage: bench_web ADDR SECONDS

#[path = "../tests/common/page.rs"]
mod page;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

fn fail(msg: &str) -> ! {
    eprintln!("bench_web: {msg}");
    std::process::exit(2);
}

/// The busiest connection's id in `watch --web`'s table.
fn busiest(addr: SocketAddr) -> Option<(String, f64)> {
    let mut s = TcpStream::connect(addr).ok()?;
    write!(s, "GET /api/connections HTTP/1.0\r\nHost: bench\r\n\r\n").ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let body = resp.split_once("\r\n\r\n")?.1;
    let t: serde_json::Value = serde_json::from_str(body).ok()?;
    t["connections"]
        .as_array()?
        .iter()
        .filter_map(|r| Some((r["id"].as_str()?.to_string(), r["rate_bps"].as_f64()?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [addr, secs] = &args[..] else {
        fail("usage: bench_web ADDR SECONDS");
    };
    let addr: SocketAddr = addr
        .parse()
        .unwrap_or_else(|_| fail(&format!("{addr} is not an ADDR:PORT")));
    let secs: u32 = secs
        .parse()
        .unwrap_or_else(|_| fail(&format!("{secs} is not a number of seconds")));
    let Some(exe) = tcptune_testkit::cdp::chromium() else {
        fail("chromium is not installed: run scripts/deps");
    };
    let Some((id, rate)) = busiest(addr) else {
        fail(&format!("no connection in http://{addr}/api/connections"));
    };
    let dir = tcptune_testkit::TempDir::new("bench-web");
    let l = page::measure(
        &exe,
        &dir.path().join("profile"),
        &format!("http://{addr}"),
        &id,
        secs,
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    println!(
        "bench/web: connection {id} at {:.1} Mbit/s, {secs} s in chromium; load average {} at the end",
        rate / 1e6,
        load.join(" ")
    );
    println!("bench/web: {}", l.summary());
}
