//! The experiment report in a real browser: `tcptune report DIR` writes a page that Debian's
//! Chromium loads without errors, whose DOM holds the plots, and whose screenshot shows them
//! (pixels in the plot colours).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tcptune_experiment::plan::{Point, Trial};
use tcptune_experiment::run::{run, Measurement, SeriesSample, TrialRunner};
use tcptune_experiment::settings::LiveCapabilities;
use tcptune_experiment::spec::parse;

/// Goodput from window/RTT, capped by the path, with a small seed-dependent spread, and a
/// short time series per trial.
struct WindowRunner;

impl TrialRunner for WindowRunner {
    fn environment(&mut self) -> serde_json::Value {
        serde_json::json!({"backend": "test"})
    }
    fn run(&mut self, point: &Point, trial: &Trial, dir: &Path) -> Result<Measurement, String> {
        let rmem: f64 = point.settings["server.sysctl.net.ipv4.tcp_rmem"]
            .split(' ')
            .nth(2)
            .unwrap()
            .parse()
            .unwrap();
        let goodput = (rmem / 2.0 * 8.0 / 0.02).min(95e6) * (1.0 + (trial.seed % 7) as f64 / 200.0);
        let series = format!("series/{}.jsonl", trial.id);
        let lines: String = (0..20)
            .map(|i| {
                let s = SeriesSample {
                    t_s: i as f64 * 0.1,
                    goodput_bps: Some(goodput * (i as f64 / 20.0).min(1.0)),
                    snd_cwnd_bytes: Some(20_000 * (i + 1)),
                    rwnd_bytes: Some(rmem as u64 / 2),
                    rtt_s: Some(0.02),
                    retransmits: Some(0),
                    ..Default::default()
                };
                serde_json::to_string(&s).unwrap() + "\n"
            })
            .collect();
        std::fs::write(dir.join(&series), lines).map_err(|e| e.to_string())?;
        Ok(Measurement {
            goodput_bps: goodput,
            bytes: 1,
            duration_s: 2.0,
            series: Some(series),
            verdict: Some("receiver-window limited".into()),
            ..Default::default()
        })
    }
}

fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Runs a command with a deadline; the browser must not hang the test suite.
fn run_with_deadline(cmd: &mut Command, limit: Duration) -> std::process::Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("{cmd:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn browser(exe: &Path, profile: &Path, args: &[&str], url: &str) -> std::process::Output {
    run_with_deadline(
        Command::new(exe)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
            ])
            .args([
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args([
                "--enable-logging=stderr",
                "--v=0",
                "--window-size=1100,2600",
            ])
            .args(args)
            .arg(url),
        Duration::from_secs(90),
    )
}

#[test]
fn the_report_opens_in_chromium_and_shows_its_plots() {
    let Some(exe) = chromium() else {
        tcptune_testkit::skip_without_tool(
            "the_report_opens_in_chromium_and_shows_its_plots",
            "chromium is not installed (scripts/deps installs it)",
        );
        return;
    };
    let dir = std::env::temp_dir().join(format!("tt-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = parse(
        "name = \"browser\"\nrepetitions = 3\n[link]\nrate = \"100mbit\"\ndelay = \"10ms\"\n[server.sysctl]\n\"net.ipv4.tcp_rmem\" = \"4096 131072 6291456\"\n[sweep]\n\"server.sysctl.net.ipv4.tcp_rmem\" = [\"4096 16384 16384\", \"4096 131072 262144\", \"4096 131072 1048576\"]\n",
        &LiveCapabilities,
    )
    .unwrap();
    run(&spec, &mut WindowRunner, &dir, &mut |_| {}).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .arg("report")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let url = format!("file://{}", dir.join("report.html").display());
    let profile = dir.join("chromium-profile");

    let dom = browser(&exe, &profile, &["--dump-dom"], &url);
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let html = String::from_utf8_lossy(&dom.stdout);
    assert_eq!(
        html.matches("<svg").count(),
        1 + 3 * 3,
        "the goodput plot and three time plots per point in the loaded DOM"
    );
    assert!(html.contains("tcptune experiment: browser"));
    let log = String::from_utf8_lossy(&dom.stderr);
    for bad in [
        "Uncaught",
        "ERR_FILE_NOT_FOUND",
        "Failed to load",
        "Refused to",
    ] {
        assert!(!log.contains(bad), "browser reported '{bad}': {log}");
    }

    let shot = dir.join("shot.png");
    let s = browser(
        &exe,
        &profile,
        &[&format!("--screenshot={}", shot.display())],
        &url,
    );
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let bytes = &buf[..info.buffer_size()];
    // Pixels close to the first two plot colours (#0072B2 blue, #D55E00 vermilion).
    let near = |px: &[u8], c: [u8; 3]| {
        px.iter()
            .zip(c)
            .all(|(a, b)| (*a as i32 - b as i32).abs() < 40)
    };
    let (mut blue, mut red) = (0, 0);
    for px in bytes.chunks(channels) {
        blue += usize::from(near(&px[..3], [0x00, 0x72, 0xB2]));
        red += usize::from(near(&px[..3], [0xD5, 0x5E, 0x00]));
    }
    assert!(
        blue > 300 && red > 100,
        "plots not visible in the screenshot: {blue} blue, {red} red pixels"
    );
    // TCPTUNE_KEEP_TEST_OUTPUT=1 keeps the report and screenshot to look at.
    if std::env::var_os("TCPTUNE_KEEP_TEST_OUTPUT").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        eprintln!("kept {}", dir.display());
    }
}
