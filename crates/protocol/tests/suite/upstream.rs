//! Wire compatibility with the upstream project's public manifests.
//!
//! The upstream facts are vendored as test data in `tests/fixtures/upstream/` (each reference
//! file with its prose `description` strings removed, and hashes of upstream's command
//! descriptions; `refresh.py` there regenerates them from a reference copy). Everything but
//! descriptions and this project's additions (`mutating`, `executor`, `service`,
//! `grant_targets`, the params in `PROJECT_PARAMS`, and the commands and
//! events marked `"project": true`) must be identical.

use std::path::PathBuf;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::support::Docs;

fn reference_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream")
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

/// Removes this project's own commands (marked `"project": true`: the goal commands upstream
/// does not have) so the rest compares with upstream.
fn without_project_commands(mut commands: Value) -> Value {
    if let Some(list) = commands.get_mut("commands").and_then(Value::as_array_mut) {
        list.retain(|c| c.get("project") != Some(&Value::Bool(true)));
    }
    commands
}

/// Params this project added to upstream's commands: (command, param).
const PROJECT_PARAMS: &[(&str, &str)] = &[
    ("openphone.screen.get", "format"),
    ("openphone.jobs.create", "device_id"),
    ("openphone.goals.create", "device_id"),
];

/// Removes [`PROJECT_PARAMS`] from the commands' input schemas.
fn without_project_params(mut commands: Value) -> Value {
    for c in commands
        .get_mut("commands")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let name = c
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        for (command, param) in PROJECT_PARAMS {
            if name == *command
                && let Some(props) = c
                    .pointer_mut("/input_schema/properties")
                    .and_then(Value::as_object_mut)
            {
                assert!(props.remove(*param).is_some(), "{command} lost {param}");
            }
        }
    }
    commands
}

#[test]
fn commands_match_upstream_except_descriptions() {
    let docs = Docs::shipped();
    assert_same(
        without_project_params(without_project_commands(docs.commands)),
        read("runtime/protocol/openphone-commands.json"),
        &[
            "mutating",
            "executor",
            "service",
            "grant_targets",
            "safer_alternative",
        ],
        "commands manifest",
    );
}

/// Removes this project's own events (marked `"project": true`: the background-job, watcher
/// and phone-world events upstream does not have) so the rest compares with upstream.
fn without_project_events(mut events: Value) -> Value {
    if let Some(list) = events.get_mut("events").and_then(Value::as_array_mut) {
        list.retain(|e| e.get("project") != Some(&Value::Bool(true)));
    }
    events
}

#[test]
fn events_match_upstream() {
    assert_same(
        without_project_events(Docs::shipped().events),
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

/// The hash `refresh.py` keeps for one 8-word run: SHA-256 of the lower-cased words joined by
/// single spaces, first 16 hex digits.
fn run_hash(window: &[String]) -> String {
    let digest = Sha256::digest(window.join(" ").as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The 8-word runs of `description` whose hash is among `upstream`.
fn copied_runs(description: &str, upstream: &[&str]) -> Vec<String> {
    let words: Vec<String> = description
        .split_whitespace()
        .map(str::to_lowercase)
        .collect();
    words
        .windows(8)
        .filter(|w| upstream.contains(&run_hash(w).as_str()))
        .map(|w| w.join(" "))
        .collect()
}

#[test]
fn descriptions_are_our_own_words() {
    // No description may share a run of eight consecutive words with upstream's description of
    // the same command. Upstream's text is not kept here: only a hash of each of its 8-word runs.
    let ours = Docs::shipped().commands;
    let shingles = read("description-shingles.json");
    let total: usize = shingles
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_array().unwrap().len())
        .sum();
    assert!(total > 200, "only {total} upstream hashes vendored");
    for command in ours["commands"].as_array().unwrap() {
        let name = command["name"].as_str().unwrap();
        if command.get("project") == Some(&Value::Bool(true)) {
            // Upstream has no such command: nothing to compare with.
            assert!(shingles.get(name).is_none(), "{name} is upstream's too");
            continue;
        }
        let upstream: Vec<&str> = shingles[name]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: no upstream description hashes"))
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let copied = copied_runs(command["description"].as_str().unwrap(), &upstream);
        assert!(
            copied.is_empty(),
            "{name}: description repeats upstream text: {copied:?}"
        );
    }
}

#[test]
fn description_check_catches_a_copied_run() {
    // The Rust hash agrees with refresh.py's (this value is Python's
    // sha256("one two three four five six seven eight").hexdigest()[:16]) ...
    let known = "one two three four five six seven eight";
    let words: Vec<String> = known.split(' ').map(str::to_owned).collect();
    assert_eq!(run_hash(&words), "62d51a1fd36f8eb3");
    // ... and a description that contains such a run, in any case, is caught.
    let upstream = ["62d51a1fd36f8eb3"];
    assert_eq!(
        copied_runs(
            "Then ONE two three four five six seven eight again",
            &upstream
        ),
        vec![known.to_owned()]
    );
    assert!(copied_runs("one two three four five six seven", &upstream).is_empty());
}
