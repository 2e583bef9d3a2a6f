//! Hand-written SVG graphs of a flow's series (filled in below).

use std::path::{Path, PathBuf};

use crate::Finished;

/// Writes the graphs of the `max_flows` flows with the most data into `dir`; returns the
/// files written.
pub fn write_graphs(
    dir: &Path,
    done: &Finished,
    max_flows: usize,
) -> std::io::Result<Vec<PathBuf>> {
    let _ = (dir, done, max_flows);
    Ok(Vec::new())
}
