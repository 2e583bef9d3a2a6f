//! What a command found when it ran to completion, which `main` turns into the exit code.

/// What a command found, when it ran to completion.
pub enum Outcome {
    /// Nothing to report beyond the result (exit 0).
    Ok,
    /// The command ran and found a problem worth acting on (exit 1), so scripts can branch.
    Problem,
    /// Pass on a command's exit code (`lab exec`).
    Exit(u8),
}
