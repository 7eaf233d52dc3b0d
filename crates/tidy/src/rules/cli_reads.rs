//! Rule `cli-field`: the CLI reads no response field by name. In the non-test code of
//! `crates/cli/src`, a string-literal key read on a JSON value — `.get("…")`, `.get_mut("…")`,
//! `.pointer("…")`, or an index `x["…"]` — is a violation; the CLI parses the typed result of
//! `openphone_protocol::endpoint` instead. What is not a response is listed in [`INPUTS`] by the
//! exact expression, with the reason.

use crate::{Tree, Violation};

pub const RULE: &str = "cli-field";

/// Key reads on values that are not daemon responses: (file or module path prefix, the exact
/// expression, what the value is). A prefix keeps the entry true when the module is split.
pub const INPUTS: &[(&str, &str, &str)] = &[
    (
        "crates/cli/src/client_cmd",
        "params.get(\"reason\")",
        "the params the user typed, before they are sent",
    ),
    (
        "crates/cli/src/crash_cmd/",
        ".get(\"memory\")",
        "a command's own result (the manifest's output schema), counted by the crash test",
    ),
    (
        "crates/cli/src/crash_cmd/",
        ".get(\"memory_id\")",
        "a command's own result (the manifest's output schema), counted by the crash test",
    ),
];

/// The key-read openings the rule looks for.
const READS: &[&str] = &[".get(\"", ".get_mut(\"", ".pointer(\""];

pub fn check(tree: &Tree) -> Vec<Violation> {
    let mut out = Vec::new();
    for file in tree.rust() {
        if !file.path.starts_with("crates/cli/src/") || file.is_test_file() {
            continue;
        }
        for line in file.lines().iter().filter(|l| !l.in_test) {
            let exempt = |at: usize| {
                INPUTS.iter().any(|(path, expr, _)| {
                    file.path.starts_with(path)
                        && line
                            .code
                            .match_indices(expr)
                            .any(|(i, _)| i <= at && at < i + expr.len())
                })
            };
            for at in reads(&line.code) {
                if !exempt(at) {
                    let key: String = line.code[at..]
                        .split('"')
                        .nth(1)
                        .unwrap_or_default()
                        .to_owned();
                    out.push(Violation {
                        rule: RULE,
                        path: file.path.clone(),
                        line: line.no,
                        message: format!(
                            "reads field \"{key}\" by name: parse the method's typed result (openphone_protocol::endpoint), or list a non-response input in rules/cli_reads.rs"
                        ),
                    });
                }
            }
        }
    }
    out
}

/// The [`INPUTS`] entries no file of `tree` holds any more (remove them).
pub fn unused_inputs(tree: &Tree) -> Vec<(&'static str, &'static str)> {
    INPUTS
        .iter()
        .filter(|(path, expr, _)| {
            !tree
                .rust()
                .any(|f| f.path.starts_with(path) && f.text.contains(expr))
        })
        .map(|(path, expr, _)| (*path, *expr))
        .collect()
}

/// Byte offsets of the key reads in one line of code.
fn reads(code: &str) -> Vec<usize> {
    let mut at: Vec<usize> = READS
        .iter()
        .flat_map(|r| code.match_indices(r).map(|(i, _)| i))
        .collect();
    // An index `value["key"]`: `["` right after an expression (a name, `)` or `]`), not an
    // array or slice literal (`vec!["…"]`, `&["…"]`, `= ["…"]`).
    for (i, _) in code.match_indices("[\"") {
        if code[..i]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ')' || c == ']')
        {
            at.push(i);
        }
    }
    at.sort_unstable();
    at
}
