//! The goodput table-heatmap, drawn instead of the chart for a sweep of exactly two categorical
//! settings.

use tcptune_report::svg::{Cell as HeatCell, Heatmap};

use super::chart::numeric;
use super::summary::{mbit, PointSummary};

/// For a sweep of exactly two settings that are both categories (an impairment × a buffer
/// limit), a table-heatmap: every combination as a cell with its mean and 95% CI, coloured by
/// the mean. Grouped bars of such a sweep read only through a legend's colours. The setting
/// with more values goes across.
pub(super) fn goodput_heatmap(points: &[PointSummary], title: &str) -> Option<Heatmap> {
    let first = points.first()?;
    if first.varied.len() != 2 || points.iter().any(|p| p.varied.len() != 2) {
        return None;
    }
    let values = |i: usize| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for p in points {
            if !out.contains(&p.varied[i].1) {
                out.push(p.varied[i].1.clone());
            }
        }
        out
    };
    let categorical = |i: usize| {
        points
            .iter()
            .any(|p| numeric(&p.varied[i].0, &p.varied[i].1).is_none())
    };
    if !categorical(0) || !categorical(1) {
        return None;
    }
    let (r, c) = if values(0).len() > values(1).len() {
        (1, 0)
    } else {
        (0, 1)
    };
    let (rows, cols) = (values(r), values(c));
    let name = |i: usize| {
        let k = &first.varied[i].0;
        if k == crate::spec::LABEL {
            String::new()
        } else {
            k.clone()
        }
    };
    let cells = rows
        .iter()
        .map(|rv| {
            cols.iter()
                .map(|cv| {
                    let p = points
                        .iter()
                        .find(|p| &p.varied[r].1 == rv && &p.varied[c].1 == cv)?;
                    let g = p.goodput_bps.as_ref()?;
                    let mut text = vec![format!("{} Mbit/s", mbit(g.mean))];
                    if let (Some(l), Some(h)) = (g.ci95_low, g.ci95_high) {
                        text.push(format!("{} – {}", mbit(l.max(0.0)), mbit(h)));
                    }
                    if p.failures > 0 {
                        text.push(format!("n = {}, {} failed", g.n, p.failures));
                    }
                    Some(HeatCell {
                        value: g.mean,
                        text,
                    })
                })
                .collect()
        })
        .collect();
    Some(Heatmap {
        title: title.to_string(),
        row_label: name(r),
        col_label: name(c),
        value_label: "mean goodput (bit/s)".into(),
        rows,
        cols,
        cells,
    })
}
