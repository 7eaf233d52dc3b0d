//! Rule `long-file`: no Rust file under `crates/` passes 800 lines unless its first comment
//! (the leading `//!` block) says why, in a line starting `//! Long:` (e.g.
//! `//! Long: one table of 60 cases, split it and the cases lose their order`).

use crate::{Tree, Violation};

pub const RULE: &str = "long-file";

/// The most lines a file holds without a stated reason.
pub const MAX_LINES: usize = 800;

/// The marker of the reason, at the start of a `//!` line of the leading block.
pub const MARKER: &str = "//! Long:";

pub fn check(tree: &Tree) -> Vec<Violation> {
    let mut out = Vec::new();
    for file in tree.rust() {
        let count = file.text.lines().count();
        if !file.path.starts_with("crates/") || count <= MAX_LINES {
            continue;
        }
        let reason = file
            .text
            .lines()
            .map(str::trim_start)
            .skip_while(|l| l.is_empty() || (l.starts_with("//") && !l.starts_with("//!")))
            .take_while(|l| l.starts_with("//!"))
            .any(|l| l.starts_with(MARKER) && l.len() > MARKER.len() + 3);
        if !reason {
            out.push(Violation {
                rule: RULE,
                path: file.path.clone(),
                line: MAX_LINES + 1,
                message: format!(
                    "{count} lines (more than {MAX_LINES}) and no `{MARKER} <why>` line in the first comment: split it along its seams or say why"
                ),
            });
        }
    }
    out
}
