//! The charts' and the heatmap's tests: well-formed SVG with every part, axes and ticks,
//! decimation, bars, cut titles and the heatmap's colours.

use super::axis::{fit, Axis};
use super::*;

fn chart() -> Chart {
    Chart::new(
        "Throughput <vs> buffer",
        "receive buffer (bytes)",
        "goodput (bit/s)",
    )
    .x_log(true)
    .series(Series::new(
        "measured",
        Style::LinePoints,
        vec![
            Point::with_err(4096.0, 1.5e6, 1.2e6, 1.8e6),
            Point::with_err(65536.0, 2.4e7, 2.2e7, 2.6e7),
        ],
    ))
    .series(Series::new(
        "window / RTT",
        Style::Dashed,
        vec![Point::new(4096.0, 1.6e6), Point::new(65536.0, 2.6e7)],
    ))
    .reference("path rate", 1e8)
}

#[test]
fn renders_well_formed_svg_with_every_part() {
    let svg = chart().render();
    let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
    assert!(
        texts.contains(&"Throughput <vs> buffer"),
        "title escaped and kept"
    );
    assert!(texts.iter().any(|t| t.starts_with("path rate (100M")));
    assert!(doc
        .descendants()
        .any(|n| n.attribute("data-series") == Some("window / RTT")));
    // One error bar per measured point, two points drawn.
    let measured = doc
        .descendants()
        .find(|n| n.attribute("data-series") == Some("measured"))
        .unwrap();
    assert_eq!(
        measured
            .children()
            .filter(|n| n.tag_name().name() == "circle")
            .count(),
        2
    );
    assert!(svg.contains("stroke-dasharray=\"6 4\""), "theory is dashed");
    assert!(!svg.contains("NaN") && !svg.contains("inf"));
    // Charts that differ get different clip ids (several share one HTML page).
    let other = Chart::new("other", "x", "y").render();
    let id = |s: &str| {
        s.split("clipPath id=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .to_string()
    };
    assert_ne!(id(&svg), id(&other));
    assert_eq!(svg, chart().render(), "rendering is deterministic");
}

#[test]
fn points_at_a_log_axis_ends_stay_off_the_frame() {
    let svg = Chart::new("t", "x", "y")
        .x_log(true)
        .series(Series::new(
            "s",
            Style::Points,
            vec![Point::new(1000.0, 1.0), Point::new(10000.0, 2.0)],
        ))
        .render();
    let xs: Vec<f64> = svg
        .split("<circle cx=\"")
        .skip(1)
        .map(|c| c.split('"').next().unwrap().parse().unwrap())
        .collect();
    // The plot spans 70 … 700 pixels (720 wide, margins 70 and 20).
    assert_eq!(xs.len(), 2);
    assert!(xs[0] > 75.0 && xs[1] < 695.0, "{xs:?}");
}

#[test]
fn nice_ticks_and_labels() {
    let a = Axis::fit([0.0, 97.0].into_iter(), false);
    assert_eq!(a.ticks, vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
    let l = Axis::fit([4096.0, 16.0 * 1048576.0].into_iter(), true);
    // Ends at the 1-2-5 steps around the data, ticks at the decades within.
    assert_eq!((l.lo, l.hi), (2000.0, 2e7));
    assert_eq!(l.ticks, vec![1e4, 1e5, 1e6, 1e7]);
    let q = Axis::fit([1000.0, 16000.0].into_iter(), true);
    assert_eq!((q.lo, q.hi), (1000.0, 20000.0));
    assert_eq!(q.ticks, vec![1000.0, 2000.0, 5000.0, 10000.0, 20000.0]);
    assert_eq!(tick_label(1.5e6), "1.5M");
    assert_eq!(tick_label(0.002), "2m");
    assert_eq!(tick_label(25.0), "25");
}

#[test]
fn empty_and_degenerate_charts_still_render() {
    for c in [
        Chart::new("empty", "x", "y"),
        Chart::new("one", "x", "y").series(Series::new(
            "s",
            Style::Line,
            vec![Point::new(1.0, 1.0)],
        )),
        Chart::new("nan", "x", "y").y_log(true).series(Series::new(
            "s",
            Style::Points,
            vec![
                Point::new(f64::NAN, 1.0),
                Point::new(1.0, 0.0),
                Point::new(2.0, 3.0),
            ],
        )),
    ] {
        let svg = c.render();
        roxmltree::Document::parse(&svg).unwrap();
        assert!(!svg.contains("NaN"), "{svg}");
    }
}

#[test]
fn decimation_keeps_extremes_and_bounds_size() {
    let pts: Vec<Point> = (0..100_000)
        .map(|i| Point::new(i as f64, if i == 54_321 { 1e9 } else { (i % 7) as f64 }))
        .collect();
    let d = decimate(&pts, 500);
    assert!(d.len() <= 2000, "{}", d.len());
    assert!(d.iter().any(|p| p.y == 1e9), "the spike survives");
    assert_eq!(d.first().unwrap().x, 0.0);
    assert_eq!(d.last().unwrap().x, 99_999.0);
}

#[test]
fn intervals_below_zero_are_cut_at_zero() {
    // Three trials with a wide CI: the whisker would reach -60; the axis starts at 0.
    let c = Chart::new("g", "x", "y").series(Series::new(
        "m",
        Style::LinePoints,
        vec![
            Point::with_err(1.0, 40.0, -60.0, 140.0),
            Point::new(2.0, 50.0),
        ],
    ));
    let svg = c.render();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let labels: Vec<&str> = doc
        .descendants()
        .filter(|n| n.attribute("text-anchor") == Some("end"))
        .filter_map(|n| n.text())
        .collect();
    assert_eq!(labels.first(), Some(&"0"), "{labels:?}");
    assert!(labels.iter().all(|l| !l.starts_with('-')), "{labels:?}");
    // Allowed where a quantity can be negative.
    let svg = c.clone().non_negative(false).render();
    assert!(svg.contains(">-"), "a negative tick when asked");
}

#[test]
fn grouped_bars_side_by_side_and_legend_in_columns() {
    let mut c = Chart::new("cats", "impairment", "goodput")
        .x_ticks(vec![(0.0, "clean".into()), (1.0, "loss".into())]);
    for k in 0..3 {
        c = c.series(Series::new(
            format!("buffer {k}"),
            Style::Bars,
            vec![Point::new(0.0, 10.0 + k as f64), Point::new(1.0, 5.0)],
        ));
    }
    let svg = c.render();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let bars: Vec<f64> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "rect" && n.attribute("fill-opacity").is_some())
        .map(|n| n.attribute("x").unwrap().parse().unwrap())
        .collect();
    assert_eq!(bars.len(), 6);
    // The three bars of one category do not overlap.
    let mut first: Vec<f64> = bars.iter().step_by(2).copied().collect();
    first.sort_by(f64::total_cmp);
    assert!(first.windows(2).all(|w| w[1] - w[0] > 10.0), "{first:?}");
    // Short labels share rows: three entries fit on one row, so the legend adds 24 px.
    let height: f64 = doc
        .root_element()
        .attribute("height")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(height, 400.0 + 24.0);
}

#[test]
fn long_titles_are_cut_to_the_chart() {
    assert_eq!(fit("short", 300.0, 10.0), "short");
    let t = fit(
        "Time-sequence (Stevens): stream 0 198.18.0.2:5201 → 198.18.0.1:40000",
        200.0,
        10.0,
    );
    assert_eq!(t.chars().count(), 20);
    assert!(t.ends_with('…'));
}

#[test]
fn decades_call_for_a_log_axis() {
    assert!(spans_decades([6e4, 4e7]));
    assert!(!spans_decades([3e7, 9e7, 0.0]));
    assert!(!spans_decades([]));
}

#[test]
fn segments_merge_per_column_into_one_spanning_interval() {
    let pts: Vec<Point> = (0..10_000)
        .map(|i| {
            let seq = i as f64 * 1448.0;
            Point::with_err(i as f64 * 1e-3, seq + 1448.0, seq, seq + 1448.0)
        })
        .collect();
    let d = decimate(&pts, 100);
    assert!(d.len() <= 101, "{}", d.len());
    assert_eq!(d[0].err.unwrap().0, 0.0);
    assert_eq!(d.last().unwrap().err.unwrap().1, 10_000.0 * 1448.0);
    // Together they still cover every byte: each starts where the previous ended.
    for w in d.windows(2) {
        assert_eq!(w[0].err.unwrap().1, w[1].err.unwrap().0);
    }
}

fn heatmap(values: [[Option<f64>; 3]; 2]) -> Heatmap {
    Heatmap {
        title: "goodput <impairment × buffer>".into(),
        row_label: "buffer".into(),
        col_label: "impairment".into(),
        value_label: "goodput (bit/s)".into(),
        rows: vec!["no limit".into(), "rmem 4096".into()],
        cols: vec!["clean".into(), "loss 1%".into(), "rtt 100ms".into()],
        cells: values
            .iter()
            .map(|r| {
                r.iter()
                    .map(|v| {
                        v.map(|v| Cell {
                            value: v,
                            text: vec![tick_label(v), "CI & more".into()],
                        })
                    })
                    .collect()
            })
            .collect(),
    }
}

/// The fill colours of the cells in drawing order (rows, then columns).
fn fills(svg: &str) -> Vec<String> {
    svg.split("<rect ")
        .filter(|r| r.contains("stroke-width=\"2\""))
        .map(|r| r.split("fill=\"").nth(1).unwrap()[..7].to_string())
        .collect()
}

fn darkness(hex: &str) -> u32 {
    let c = |i: usize| u32::from_str_radix(&hex[i..i + 2], 16).unwrap();
    3 * 255 - (c(1) + c(3) + c(5))
}

#[test]
fn heatmap_colours_cells_by_value_and_labels_each() {
    // Linear: values within a decade; a higher value is a darker cell.
    let map = heatmap([
        [Some(4.8e7), Some(4.4e7), Some(3.9e7)],
        [Some(1.2e7), None, Some(6.0e6)],
    ]);
    assert!(!map.log_scale());
    let svg = map.render();
    let f = fills(&svg);
    assert_eq!(f.len(), 6, "one rect per cell: {f:?}");
    assert!(darkness(&f[0]) > darkness(&f[1]) && darkness(&f[1]) > darkness(&f[2]));
    assert!(darkness(&f[2]) > darkness(&f[3]) && darkness(&f[3]) > darkness(&f[5]));
    assert_eq!(f[4], "#f4f4f4", "an unmeasured cell is grey");
    assert!(svg.contains(">not measured<"));
    assert!(svg.contains(">48M<") && svg.contains(">6M<"));
    // Escaped text, a colour bar from zero, nothing below it.
    assert!(svg.contains("goodput &lt;impairment × buffer&gt;") && svg.contains("CI &amp; more"));
    assert!(svg.contains(">0<") && !svg.contains(">-"));
    assert!(svg.contains(">goodput (bit/s)<"));

    // Values spanning decades (a 4 KiB buffer beside a free path): a log scale, on which
    // the small values still differ in colour.
    let map = heatmap([
        [Some(4.8e7), Some(4.4e7), Some(4.0e7)],
        [Some(1.2e7), Some(2.0e5), Some(1.0e5)],
    ]);
    assert!(map.log_scale());
    let svg = map.render();
    let f = fills(&svg);
    assert!(darkness(&f[4]) > darkness(&f[5]), "{f:?}");
    assert!(svg.contains("goodput (bit/s), log scale"));
}
