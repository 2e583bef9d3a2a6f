//! `summary.csv`: one row per sweep point, one column per swept setting, then the statistics
//! (the file `compare` and `report --against` read back). With `repetitions = "auto"` the
//! last column, `stopped`, says why each point took no more trials (`precise`, `maximum`).

use std::path::PathBuf;

use super::results::{Exporter, Results};
use super::summary::PointSummary;
use crate::run::RunError;

pub(super) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `summary.csv`: one row per point, one column per swept setting, then the statistics.
pub fn summary_csv(points: &[PointSummary]) -> String {
    let keys: Vec<&str> = points
        .first()
        .map(|p| p.varied.iter().map(|(k, _)| k.as_str()).collect())
        .unwrap_or_default();
    let mut out = String::from("point");
    for k in &keys {
        out.push(',');
        out.push_str(&csv_field(k));
    }
    out.push_str(",n,mean_bps,sd_bps,ci95_low_bps,ci95_high_bps,median_bps,min_bps,max_bps,retransmits_mean,rtt_min_s_mean,sndbuf_peak_bytes_mean,rcvbuf_peak_bytes_mean,expected_bps,failures,verdict,failure_causes,stopped\n");
    let f = |v: Option<f64>| v.map(|x| format!("{x:.6}")).unwrap_or_default();
    for p in points {
        out.push_str(&p.index.to_string());
        for (_, v) in &p.varied {
            out.push(',');
            out.push_str(&csv_field(v));
        }
        let g = p.goodput_bps.as_ref();
        out.push_str(&format!(
            ",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            g.map(|g| g.n).unwrap_or(0),
            f(g.map(|g| g.mean)),
            f(g.and_then(|g| g.sd)),
            f(g.and_then(|g| g.ci95_low)),
            f(g.and_then(|g| g.ci95_high)),
            f(g.map(|g| g.median)),
            f(g.map(|g| g.min)),
            f(g.map(|g| g.max)),
            f(p.retransmits_mean),
            f(p.rtt_min_s_mean),
            f(p.sndbuf_peak_mean),
            f(p.rcvbuf_peak_mean),
            f(p.theory.expected_bps),
            p.failures,
            csv_field(p.verdict.as_deref().unwrap_or("")),
            csv_field(&p.failure_causes.join("; ")),
            p.stopped
                .map(crate::stopping::Stop::key)
                .unwrap_or_default(),
        ));
    }
    out
}

/// Writes `summary.csv` into the results directory.
pub(super) struct CsvExporter;

impl Exporter for CsvExporter {
    fn export(&self, results: &Results) -> Result<Vec<PathBuf>, RunError> {
        let path = results.dir.join("summary.csv");
        results.write(&path, summary_csv(&results.points))?;
        Ok(vec![path])
    }
}
