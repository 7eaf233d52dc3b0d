//! Rule `store-call`: `.store()` (the bridge's store handle) is called only in core, the store
//! crate and the daemon's construction — tests included. Front ends ask core for what they
//! need through methods returning protocol types.

use crate::{Tree, Violation};

pub const RULE: &str = "store-call";

/// Where `.store()` may be called.
pub const PLACES: &[&str] = &[
    "crates/core/",
    "crates/store/",
    "crates/server/src/daemon.rs",
];

pub fn check(tree: &Tree) -> Vec<Violation> {
    let mut out = Vec::new();
    for file in tree.rust() {
        if !file.path.starts_with("crates/") || PLACES.iter().any(|p| file.path.starts_with(p)) {
            continue;
        }
        for line in file.lines() {
            // The method call, and the same call spelled as a path (`ToolBridge::store(&b)`).
            if line.bare.contains(".store()") || line.bare.contains("ToolBridge::store(") {
                out.push(Violation {
                    rule: RULE,
                    path: file.path.clone(),
                    line: line.no,
                    message: "`.store()` outside core, store and the daemon's construction: ask core through a method returning protocol types".to_owned(),
                });
            }
        }
    }
    out
}
