//! Statistics, charts and reports: the presentation layer shared by the lab's experiment
//! reports, `tcptune analyze --graphs` and `tcptune watch --record` viewers.
//!
//! - [`stats`]: n, mean, standard deviation, Student-t 95% confidence interval, median, min, max.
//! - [`svg`]: one small chart type (lines, points, error bars, reference lines), written as
//!   standalone SVG with no scripts or external resources.
//! - [`html`]: a self-contained HTML page (inline CSS and SVG) that opens without a network.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod html;
pub mod stats;
pub mod svg;
