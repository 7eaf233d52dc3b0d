//! Every rule on the repository itself, through the allowlist (`src/allow.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use openphone_tidy::allow::{self, Allowed};
use openphone_tidy::rules::{self, layers};
use openphone_tidy::{Package, Tree, Violation};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tree() -> &'static Tree {
    static TREE: OnceLock<Tree> = OnceLock::new();
    TREE.get_or_init(|| Tree::load(&root()).expect("the repository reads"))
}

/// The workspace's packages, from `cargo metadata --format-version 1 --no-deps`.
fn packages() -> Vec<Package> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("cargo metadata answers JSON");
    let root = metadata["workspace_root"]
        .as_str()
        .expect("a workspace root");
    Package::from_metadata(&metadata, root)
}

fn assert_clean(rule: &str, found: Vec<Violation>) {
    let (left, stale) = allow::apply(rule, found);
    let mut report = String::new();
    for v in &left {
        report.push_str(&format!("{v}\n"));
    }
    for Allowed { path, why, .. } in &stale {
        report.push_str(&format!(
            "{path}: [{rule}] allowlisted ({why}) but clean now: remove the entry from src/allow.rs\n"
        ));
    }
    assert!(report.is_empty(), "tidy rule `{rule}`:\n{report}");
}

fn run(rule: &str) {
    let (_, check) = rules::ALL
        .iter()
        .find(|(name, _)| *name == rule)
        .expect("a rule of that name");
    assert_clean(rule, check(tree()));
}

#[test]
fn device_only_in_core() {
    run(rules::device::RULE);
}

#[test]
fn cli_reads_no_field_by_name() {
    run(rules::cli_reads::RULE);
    let unused = rules::cli_reads::unused_inputs(tree());
    assert!(
        unused.is_empty(),
        "listed inputs found nowhere (remove them from rules/cli_reads.rs): {unused:?}"
    );
}

#[test]
fn no_second_command_list() {
    run(rules::command_lists::RULE);
}

#[test]
fn no_long_file_without_a_reason() {
    run(rules::long_files::RULE);
}

#[test]
fn store_only_in_core_store_and_daemon() {
    run(rules::store_calls::RULE);
}

#[test]
fn routers_are_exhaustive() {
    run(rules::exhaustive::RULE);
}

#[test]
fn shared_test_support_is_not_copied() {
    run(rules::support_copies::RULE);
}

#[test]
fn crate_layers() {
    assert_clean(layers::RULE, layers::check(tree(), &packages()));
}

#[test]
fn every_allowlist_entry_names_a_rule() {
    let mut known: Vec<&str> = rules::ALL.iter().map(|(name, _)| *name).collect();
    known.push(layers::RULE);
    for entry in allow::ALLOWED {
        assert!(known.contains(&entry.rule), "unknown rule in {entry:?}");
        assert!(!entry.why.is_empty(), "no reason in {entry:?}");
    }
}
