//! `openphone jobs check-review`: placeholder until the review layer lands (replaced by it).

use std::path::Path;
use std::process::ExitCode;

/// Checks a stored review record.
pub fn run(path: &Path, _json: bool) -> ExitCode {
    eprintln!(
        "cannot check {}: the review checker is not built yet",
        path.display()
    );
    ExitCode::from(2)
}
