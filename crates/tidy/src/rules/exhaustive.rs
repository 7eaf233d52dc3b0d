//! Rule `exhaustive`: routers and policy-relevant matches name every variant, so a new variant
//! is a compile error where it must be handled, never silently nothing. In the
//! [`ZONES`], non-test code holds no `_ => {}` / `_ => ()` catch-all, and each file of
//! [`MODULES`] turns on `clippy::wildcard_enum_match_arm` (`#![warn(…)]` or `#![deny(…)]` for
//! the module, or `#[warn(…)]` on its router function; CI's `-D warnings` makes a warning
//! fatal), so clippy refuses any wildcard arm over an enum there.

use crate::{Tree, Violation};

pub const RULE: &str = "exhaustive";

/// Where a catch-all that does nothing is refused (path prefixes).
pub const ZONES: &[&str] = &[
    "crates/policy/src/",
    "crates/goals/src/",
    "crates/jobs/src/transition.rs",
    "crates/jobs/src/review/",
    "crates/core/src/bridge/",
    "crates/server/src/conn/methods/",
];

/// Files that must turn on `clippy::wildcard_enum_match_arm`: the routers and state machines.
pub const MODULES: &[&str] = &[
    "crates/goals/src/engine/mod.rs",
    "crates/goals/src/service.rs",
    "crates/goals/src/transition.rs",
    "crates/jobs/src/transition.rs",
    "crates/server/src/conn/methods/mod.rs",
];

/// The lint the [`MODULES`] turn on.
pub const LINT: &str = "clippy::wildcard_enum_match_arm";

pub fn check(tree: &Tree) -> Vec<Violation> {
    let mut out = Vec::new();
    for file in tree.rust() {
        if !ZONES.iter().any(|z| file.path.starts_with(z)) || file.is_test_file() {
            continue;
        }
        for line in file.lines().iter().filter(|l| !l.in_test) {
            let squeezed: String = line.bare.chars().filter(|c| !c.is_whitespace()).collect();
            if squeezed.contains("_=>{}") || squeezed.contains("_=>()") {
                out.push(Violation {
                    rule: RULE,
                    path: file.path.clone(),
                    line: line.no,
                    message: "a catch-all arm that does nothing: name the variants (a new one must be handled here)".to_owned(),
                });
            }
        }
    }
    for module in MODULES {
        match tree.file(module) {
            None => out.push(Violation {
                rule: RULE,
                path: (*module).to_owned(),
                line: 1,
                message: "listed as a router in rules/exhaustive.rs but missing: update MODULES"
                    .to_owned(),
            }),
            Some(file) => {
                let on = file.lines().iter().any(|l| {
                    let attr = l.bare.replace(' ', "");
                    ["#![warn(", "#![deny(", "#[warn(", "#[deny("]
                        .iter()
                        .any(|open| attr.starts_with(&format!("{open}{LINT})")))
                });
                if !on {
                    out.push(Violation {
                        rule: RULE,
                        path: file.path.clone(),
                        line: 1,
                        message: format!("a router without `#![warn({LINT})]`"),
                    });
                }
            }
        }
    }
    out
}
