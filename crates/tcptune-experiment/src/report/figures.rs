//! Every figure of the report drawn once: the goodput chart or heatmap, the time series and
//! the capture graphs, as SVG text with their file stems and captions; the SVG exporter writes
//! them under `plots/`, and the HTML page embeds the same text.

use std::path::PathBuf;

use tcptune_report::html::Block;

use super::captures::capture_analysis;
use super::chart::goodput_chart;
use super::heatmap::goodput_heatmap;
use super::results::{Exporter, NamedChart, Results};
use super::rtt::rtt_chart;
use super::time::time_charts;
use crate::run::RunError;

/// One drawn chart: its file stem under `plots/`, its caption on the page and its SVG.
pub(super) struct Figure {
    pub stem: String,
    pub caption: String,
    pub svg: String,
}

/// The report's figures, drawn once.
pub(super) struct Figures {
    /// `plots/goodput.svg`: the heatmap for two categorical settings, else the chart.
    pub goodput: String,
    /// Whether `goodput` is the heatmap (its caption differs).
    pub heatmap: bool,
    /// `plots/rtt.svg`: the round trip under load, where the points set a queue.
    pub rtt: Option<String>,
    pub over_time: Vec<Figure>,
    /// The capture flags table, when a trial kept a capture.
    pub capture_table: Option<Block>,
    pub capture_graphs: Vec<Figure>,
}

fn drawn(charts: Vec<NamedChart>) -> Vec<Figure> {
    charts
        .into_iter()
        .map(|(stem, caption, chart)| Figure {
            stem,
            caption,
            svg: chart.render(),
        })
        .collect()
}

impl Figures {
    /// Draws every figure of the results.
    pub fn draw(results: &Results) -> Figures {
        let title = format!("{}: goodput", results.plan.name);
        let heatmap = goodput_heatmap(&results.points, &title);
        let goodput = match &heatmap {
            Some(h) => h.render(),
            None => goodput_chart(&results.points, &title).render(),
        };
        let rtt = rtt_chart(
            &results.points,
            &format!("{}: round trip under load", results.plan.name),
        )
        .map(|c| c.render());
        let over_time = drawn(time_charts(results));
        let (capture_table, capture_graphs) = match capture_analysis(results) {
            Some((table, charts)) => (Some(table), drawn(charts)),
            None => (None, Vec::new()),
        };
        Figures {
            goodput,
            heatmap: heatmap.is_some(),
            rtt,
            over_time,
            capture_table,
            capture_graphs,
        }
    }
}

/// Writes every figure as `plots/<stem>.svg`: the goodput figure first (and the round trip
/// under load where there is one), then the time series,
/// then the capture graphs.
pub(super) struct SvgExporter<'a>(pub &'a Figures);

impl Exporter for SvgExporter<'_> {
    fn export(&self, results: &Results) -> Result<Vec<PathBuf>, RunError> {
        let plots_dir = results.dir.join("plots");
        std::fs::create_dir_all(&plots_dir).map_err(|cause| RunError::Io {
            path: plots_dir.display().to_string(),
            cause,
        })?;
        let goodput = plots_dir.join("goodput.svg");
        results.write(&goodput, &self.0.goodput)?;
        let mut plots = vec![goodput];
        if let Some(svg) = &self.0.rtt {
            let path = plots_dir.join("rtt.svg");
            results.write(&path, svg)?;
            plots.push(path);
        }
        for f in self.0.over_time.iter().chain(&self.0.capture_graphs) {
            let path = plots_dir.join(format!("{}.svg", f.stem));
            results.write(&path, &f.svg)?;
            plots.push(path);
        }
        Ok(plots)
    }
}
