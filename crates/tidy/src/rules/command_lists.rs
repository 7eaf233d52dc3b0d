//! Rule `command-list`: command metadata comes only from the manifest, so no second list of
//! command names exists outside `crates/protocol`. In non-test code, a list is two or more
//! distinct manifest command names (canonical names or aliases, from
//! `runtime/protocol/openphone-commands.json`) as string literals either in one bracket group
//! (`[…]`, `&[…]`, `vec![…]`, at any nesting of tuples) or joined by `|` (a pattern, a
//! `matches!`). One constant per command, a `match` arm per command and a literal naming the
//! one command a line calls are not lists. The tables that bind code to the commands a
//! component implements are listed in [`BINDINGS`] with the reason.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::{Line, Tree, Violation};

pub const RULE: &str = "command-list";

/// The manifest the names come from.
pub const MANIFEST: &str = "runtime/protocol/openphone-commands.json";

/// Tables that bind an implementation to each command it implements (which commands exist and
/// their flags still come from the manifest): (file, why).
pub const BINDINGS: &[(&str, &str)] = &[
    (
        "crates/device/src/sim/mod.rs",
        "the simulated phone's handler for each command it implements; `mutating` and the rest are read from the manifest",
    ),
    (
        "crates/device/src/sim/dialogs/mod.rs",
        "which of the simulated phone's input commands a system dialog on screen takes (a tap, a key, typing): how the simulator behaves, not command metadata",
    ),
];

/// The command names (canonical and aliases) of the manifest in `tree`.
pub fn command_names(tree: &Tree) -> BTreeSet<String> {
    let Some(manifest) = tree
        .file(MANIFEST)
        .and_then(|f| serde_json::from_str::<Value>(&f.text).ok())
    else {
        return BTreeSet::new();
    };
    let mut names = BTreeSet::new();
    for command in manifest
        .get("commands")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        names.extend(
            command
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_owned),
        );
        names.extend(
            command
                .get("aliases")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned),
        );
    }
    names
}

pub fn check(tree: &Tree) -> Vec<Violation> {
    let names = command_names(tree);
    let mut out = Vec::new();
    if names.is_empty() {
        out.push(Violation {
            rule: RULE,
            path: MANIFEST.to_owned(),
            line: 1,
            message: "no command names read from the manifest".to_owned(),
        });
        return out;
    }
    for file in tree.rust() {
        if !file.path.starts_with("crates/")
            || file.path.starts_with("crates/protocol/")
            || file.is_test_file()
            || BINDINGS.iter().any(|(p, _)| *p == file.path)
        {
            continue;
        }
        for (line, run) in lists(&file.lines(), &names) {
            out.push(Violation {
                rule: RULE,
                path: file.path.clone(),
                line,
                message: format!(
                    "a list of {} command names ({} …) outside the manifest: put the fact in the manifest and read it from the Registry",
                    run.len(),
                    run.iter().take(2).cloned().collect::<Vec<_>>().join(", ")
                ),
            });
        }
    }
    out
}

/// The lists of command names in the non-test lines: (line of the first name, the names).
fn lists(lines: &[Line], names: &BTreeSet<String>) -> Vec<(usize, BTreeSet<String>)> {
    // The non-test code as one text, and the command-name literals in it (start, end, line).
    let mut flat = String::new();
    let mut hits: Vec<(usize, usize, usize, &str)> = Vec::new();
    for line in lines.iter().filter(|l| !l.in_test) {
        let base = flat.len();
        for lit in &line.strings {
            if let (Some(end), Some(name)) = (lit.end, names.get(lit.text.as_str())) {
                hits.push((base + lit.start, base + end, line.no, name.as_str()));
            }
        }
        flat.push_str(&line.bare);
        flat.push('\n');
    }
    let mut found = Vec::new();
    let mut report = |first: Option<usize>, set: BTreeSet<String>| {
        if let Some(line) = first
            && set.len() >= 2
        {
            found.push((line, set));
        }
    };
    // Bracket groups: each name belongs to the innermost open `[`.
    let mut groups: Vec<(Option<usize>, BTreeSet<String>)> = Vec::new();
    let mut next = hits.iter().peekable();
    for (i, c) in flat.char_indices() {
        while let Some(&&(start, _, line, name)) = next.peek() {
            if start > i {
                break;
            }
            if let Some((first, set)) = groups.last_mut() {
                first.get_or_insert(line);
                set.insert(name.to_owned());
            }
            next.next();
        }
        match c {
            '[' => groups.push((None, BTreeSet::new())),
            ']' => {
                if let Some((first, set)) = groups.pop() {
                    report(first, set);
                }
            }
            _ => {}
        }
    }
    // `|` chains: consecutive names with only a `|` between them.
    let mut chain: (Option<usize>, BTreeSet<String>) = (None, BTreeSet::new());
    let mut last_end: Option<usize> = None;
    for &(start, end, line, name) in &hits {
        let joined = last_end.is_some_and(|e| {
            flat.get(e..start)
                .is_some_and(|between| between.trim() == "|")
        });
        if !joined {
            let done = std::mem::take(&mut chain);
            report(done.0, done.1);
            chain.0 = Some(line);
        }
        chain.1.insert(name.to_owned());
        last_end = Some(end);
    }
    report(chain.0, chain.1);
    found.sort();
    found.dedup();
    found
}
