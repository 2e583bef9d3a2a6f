//! Renders a sample chart (throughput against receive buffer with CI bars, the window/RTT
//! theory curve and the path rate) to stdout, to look at the chart style.

use tcptune_report::svg::{Chart, Point, Series, Style};

fn main() {
    let bufs: [f64; 6] = [4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0];
    let rtt: f64 = 0.02;
    let measured: Vec<Point> = bufs
        .iter()
        .map(|b| {
            let y = (b * 0.5 * 8.0 / rtt).min(95e6) * 0.93;
            Point::with_err(*b, y, y * 0.9, y * 1.1)
        })
        .collect();
    let theory: Vec<Point> = bufs
        .iter()
        .map(|b| Point::new(*b, b * 0.5 * 8.0 / rtt))
        .collect();
    let svg = Chart::new(
        "Goodput against receive buffer (100 Mbit/s, 20 ms)",
        "tcp_rmem max (bytes)",
        "goodput (bit/s)",
    )
    .x_log(true)
    .y_max(120e6)
    .series(Series::new(
        "measured (mean, 95% CI)",
        Style::LinePoints,
        measured,
    ))
    .series(Series::new(
        "window / RTT (half the buffer)",
        Style::Dashed,
        theory,
    ))
    .reference("path rate", 100e6)
    .render();
    print!("{svg}");
}
