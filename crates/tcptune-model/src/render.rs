//! Human rendering of model results: a title, aligned `name  value` rows, the formula, and the
//! caveats. One layout for every model so the output reads the same across commands.

use std::fmt;

/// Writes a model result in the common layout.
pub fn write_model(
    f: &mut fmt::Formatter<'_>,
    title: &str,
    rows: &[(&str, String)],
    formula: &str,
    caveats: &[String],
) -> fmt::Result {
    writeln!(f, "{title}")?;
    let width = rows
        .iter()
        .map(|(k, _)| k.len())
        .max()
        .unwrap_or(0)
        .max("formula".len());
    for (k, v) in rows {
        writeln!(f, "  {k:<width$}  {v}")?;
    }
    writeln!(f, "  {:<width$}  {formula}", "formula")?;
    if !caveats.is_empty() {
        writeln!(f, "  does not apply / caveats:")?;
        for c in caveats {
            writeln!(f, "    - {c}")?;
        }
    }
    Ok(())
}
