//! Rule `layers`: the crate graph, from `cargo metadata`. Every workspace crate has a layer
//! ([`LAYERS`], bottom-up, as ARCHITECTURE.md's code map describes them) and its normal and
//! build dependencies on workspace crates point strictly down; a crate missing from the table
//! is a violation (place it). Third-party crates a layer may not use ([`ONLY_IN`],
//! [`PURE`]) are violations too. Dev-dependencies are test plumbing and not checked, except
//! that `openphone-test-support` is only ever one.

use crate::{DepKind, Package, Tree, Violation, dep_line};

pub const RULE: &str = "layers";

/// Workspace crates by layer, bottom-up.
pub const LAYERS: &[(&str, u8)] = &[
    // Foundations: wire types and pure functions, the clock.
    ("openphone-clock", 0),
    ("openphone-protocol", 0),
    // Leaves over the foundations: pure policy, the phone, the database, the model client.
    ("openphone-policy", 1),
    ("openphone-device", 1),
    ("openphone-store", 1),
    ("openphone-model", 1),
    ("openphone-fake-model", 1),
    // The one ToolBridge.
    ("openphone-core", 2),
    // The PostgreSQL store: a second implementation of the store's interface (beside core).
    ("openphone-store-pg", 2),
    // A fake Android device over the simulated phone (beside core: it holds the phone).
    ("openphone-fake-adbd", 2),
    // The ADB backend: a real Android phone as a PhoneDevice (beside core, over device).
    ("openphone-adb", 2),
    // Services and front ends over core.
    ("openphone-jobs", 3),
    ("openphone-goals", 3),
    ("openphone-mcp", 3),
    ("openphone-openclaw", 3),
    ("openphone-hermes", 3),
    ("openphone-watchers", 4),
    ("openphone-agent", 5),
    // The daemon and the binary.
    ("openphone-server", 6),
    ("openphone-cli", 7),
    // Outside the product: the tidy tests and the shared test support (dev-dependency only).
    ("openphone-tidy", 8),
    ("openphone-test-support", 8),
];

/// Third-party crates only these workspace crates may depend on.
pub const ONLY_IN: &[(&str, &[&str], &str)] = &[
    (
        "rusqlite",
        &["openphone-store"],
        "only the store crate speaks SQL",
    ),
    (
        "postgres",
        &["openphone-store-pg"],
        "only the PostgreSQL store crate speaks to PostgreSQL",
    ),
    (
        "rmcp",
        &["openphone-mcp"],
        "only the MCP crate imports rmcp",
    ),
];

/// Crates that stay pure (no async runtime, no database, no network) and what they may not use.
pub const PURE: &[(&str, &[&str])] = &[
    ("openphone-protocol", &["tokio", "rusqlite", "reqwest"]),
    ("openphone-policy", &["tokio", "rusqlite", "reqwest"]),
    ("openphone-clock", &["tokio", "rusqlite", "reqwest"]),
];

/// The crate that is only ever a dev-dependency.
pub const DEV_ONLY: &str = "openphone-test-support";

fn layer(name: &str) -> Option<u8> {
    LAYERS.iter().find(|(n, _)| *n == name).map(|(_, l)| *l)
}

pub fn check(tree: &Tree, packages: &[Package]) -> Vec<Violation> {
    let mut out = Vec::new();
    let workspace: Vec<&str> = packages.iter().map(|p| p.name.as_str()).collect();
    for package in packages {
        let manifest = tree.file(&package.manifest).map_or("", |f| f.text.as_str());
        let mut push = |dep: &str, message: String| {
            out.push(Violation {
                rule: RULE,
                path: package.manifest.clone(),
                line: if dep.is_empty() {
                    1
                } else {
                    dep_line(manifest, dep)
                },
                message,
            });
        };
        let Some(own) = layer(&package.name) else {
            push(
                "",
                format!(
                    "{} has no layer: place it in LAYERS (rules/layers.rs) and ARCHITECTURE.md",
                    package.name
                ),
            );
            continue;
        };
        for dep in &package.deps {
            let name = dep.name.as_str();
            if dep.kind == DepKind::Dev {
                continue;
            }
            if name == DEV_ONLY {
                push(
                    name,
                    format!(
                        "{} depends on {DEV_ONLY} outside [dev-dependencies]",
                        package.name
                    ),
                );
            }
            if workspace.contains(&name)
                && let Some(theirs) = layer(name)
                && theirs >= own
            {
                push(
                    name,
                    format!(
                        "{} (layer {own}) depends on {name} (layer {theirs}): dependencies point down",
                        package.name
                    ),
                );
            }
            for (third, allowed, why) in ONLY_IN {
                if name == *third && !allowed.contains(&package.name.as_str()) {
                    push(name, format!("{} depends on {name}: {why}", package.name));
                }
            }
            for (pure, banned) in PURE {
                if package.name == *pure && banned.contains(&name) {
                    push(
                        name,
                        format!("{pure} depends on {name}: it stays pure (no async, no I/O)"),
                    );
                }
            }
        }
    }
    out
}
