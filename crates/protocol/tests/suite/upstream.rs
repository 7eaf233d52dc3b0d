//! Wire compatibility with the upstream project's public manifests.
//!
//! The reference copies live outside the repository, in
//! `../shared/reference/openphone-upstream/` beside the checkout (override with
//! `OPENPHONE_UPSTREAM_REFERENCE`). Everything but descriptions and this project's additions
//! (`mutating`, `executor`) must be identical.

use std::path::PathBuf;

use serde_json::Value;

use super::support::Docs;

fn reference_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("OPENPHONE_UPSTREAM_REFERENCE") {
        return PathBuf::from(dir);
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference/openphone-upstream");
    assert!(
        dir.is_dir(),
        "upstream reference not found at {} (set OPENPHONE_UPSTREAM_REFERENCE)",
        dir.display()
    );
    dir
}

fn read(rel: &str) -> Value {
    let path = reference_dir().join(rel);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn read_ours(rel: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Removes every string-valued `description` member and the named keys, at any depth.
fn strip(value: &mut Value, extra: &[&str]) {
    match value {
        Value::Object(map) => {
            if map.get("description").is_some_and(Value::is_string) {
                map.remove("description");
            }
            for key in extra {
                map.remove(*key);
            }
            for v in map.values_mut() {
                strip(v, extra);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| strip(v, extra)),
        _ => {}
    }
}

fn assert_same(mut ours: Value, mut upstream: Value, extra: &[&str], what: &str) {
    strip(&mut ours, extra);
    strip(&mut upstream, &[]);
    pretty_assertions::assert_eq!(ours, upstream, "{what} differs from upstream");
}

#[test]
fn commands_match_upstream_except_descriptions() {
    let docs = Docs::shipped();
    assert_same(
        docs.commands,
        read("runtime/protocol/openphone-commands.json"),
        &["mutating", "executor"],
        "commands manifest",
    );
}

#[test]
fn events_match_upstream() {
    assert_same(
        Docs::shipped().events,
        read("runtime/protocol/openphone-events.json"),
        &[],
        "events manifest",
    );
}

#[test]
fn capabilities_match_upstream() {
    assert_same(
        Docs::shipped().capabilities,
        read("ios/shared/contracts/capabilities.json"),
        &[],
        "capabilities manifest",
    );
}

#[test]
fn runtime_schema_matches_upstream() {
    assert_same(
        Docs::shipped().runtime_schema,
        read("runtime/protocol/openphone-runtime.schema.json"),
        &[],
        "runtime schema",
    );
}

#[test]
fn job_schemas_match_upstream() {
    for rel in [
        "schemas/agent-job.schema.json",
        "schemas/background-confirmation.schema.json",
    ] {
        assert_same(read_ours(rel), read(rel), &[], rel);
    }
}

#[test]
fn descriptions_are_our_own_words() {
    // No description may share a run of eight consecutive words with upstream's description of
    // the same command.
    let ours = Docs::shipped().commands;
    let upstream = read("runtime/protocol/openphone-commands.json");
    let words =
        |s: &str| -> Vec<String> { s.split_whitespace().map(|w| w.to_lowercase()).collect() };
    for (a, b) in ours["commands"]
        .as_array()
        .unwrap()
        .iter()
        .zip(upstream["commands"].as_array().unwrap())
    {
        let (wa, wb) = (
            words(a["description"].as_str().unwrap()),
            words(b["description"].as_str().unwrap()),
        );
        for window in wa.windows(8) {
            let hit = wb.windows(8).any(|w| w == window);
            assert!(
                !hit,
                "{}: description repeats upstream text: {:?}",
                a["name"],
                window.join(" ")
            );
        }
    }
}
