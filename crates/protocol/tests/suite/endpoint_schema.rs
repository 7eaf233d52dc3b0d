//! The endpoint's JSON Schema (`docs/endpoint.schema.json`, generated from the types by
//! `openphone_protocol::endpoint_schema`): the committed file is current, and every JSON
//! example of `docs/endpoint.md` validates against it — a request's params and a response's
//! result against their method's schemas, every frame against its frame schema.
//!
//! After changing an endpoint type: `OPENPHONE_UPDATE_SCHEMA=1 cargo test -p
//! openphone-protocol --test all endpoint_schema` rewrites the file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use openphone_protocol::endpoint_schema;
use serde_json::{Value, json};

use super::endpoint_docs::{doc_path, examples};

fn schema_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/endpoint.schema.json")
}

fn generated() -> String {
    let mut text = serde_json::to_string_pretty(&endpoint_schema()).unwrap();
    text.push('\n');
    text
}

#[test]
fn the_committed_schema_is_current() {
    let path = schema_path();
    let fresh = generated();
    if std::env::var_os("OPENPHONE_UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &fresh).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "docs/endpoint.schema.json is stale: run \
         OPENPHONE_UPDATE_SCHEMA=1 cargo test -p openphone-protocol --test all endpoint_schema"
    );
}

/// Validators of the parts of the schema document, by JSON pointer, built once each.
struct Validators {
    root: Value,
    built: BTreeMap<String, jsonschema::Validator>,
}

impl Validators {
    fn new(root: Value) -> Validators {
        Validators {
            root,
            built: BTreeMap::new(),
        }
    }

    /// The errors of `instance` against the schema at `pointer` (`#/…`).
    fn check(&mut self, pointer: &str, instance: &Value) -> Result<(), String> {
        if !self.built.contains_key(pointer) {
            let local = pointer.trim_start_matches('#');
            if self.root.pointer(local).is_none() {
                return Err(format!("the schema has no {pointer}"));
            }
            let mut schema = self.root.clone();
            schema["$ref"] = json!(pointer);
            let validator = jsonschema::validator_for(&schema).map_err(|e| e.to_string())?;
            self.built.insert(pointer.to_owned(), validator);
        }
        let errors: Vec<String> = self.built[pointer]
            .iter_errors(instance)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!("against {pointer}: {}", errors.join("; ")))
        }
    }
}

/// A method name as a JSON-pointer token (`~` and `/` escaped).
fn token(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

#[test]
fn every_documented_example_validates_against_the_schema() {
    let markdown = std::fs::read_to_string(doc_path()).unwrap();
    let mut validators = Validators::new(endpoint_schema());
    let mut failures = Vec::new();
    let mut checked = 0;
    for example in examples(&markdown) {
        let Ok(value) = serde_json::from_str::<Value>(&example.text) else {
            continue; // endpoint_docs reports examples that are not JSON
        };
        let tag: Vec<&str> = example.tag.iter().map(String::as_str).collect();
        let result = match tag.as_slice() {
            ["request"] => {
                let method = value["method"].as_str().unwrap_or_default();
                let params = value.get("params").cloned().unwrap_or_else(|| json!({}));
                validators.check("#/request", &value).and_then(|()| {
                    validators.check(&format!("#/methods/{}/params", token(method)), &params)
                })
            }
            ["response", method] => validators.check("#/response", &value).and_then(|()| {
                validators.check(
                    &format!("#/methods/{}/result", token(method)),
                    &value["result"],
                )
            }),
            ["event"] => validators.check("#/event", &value),
            ["error"] => validators.check("#/error", &value),
            _ => continue, // endpoint_docs reports untagged blocks
        };
        checked += 1;
        if let Err(why) = result {
            failures.push(format!(
                "docs/endpoint.md line {} ({}): {why}",
                example.line,
                example.tag.join(" ")
            ));
        }
    }
    assert!(checked > 50, "only {checked} examples found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_schema_refuses_what_the_types_refuse() {
    let mut validators = Validators::new(endpoint_schema());
    // An unknown member of a `deny_unknown_fields` params type, a wrong type, a bad enum value.
    let bad = [
        (
            "#/methods/confirmations.resolve/params",
            json!({"confirmation_id": "c", "decision": "approve", "extra": 1}),
        ),
        ("#/methods/sessions.get/params", json!({"session_id": 7})),
        (
            "#/methods/confirmations.resolve/params",
            json!({"confirmation_id": "c", "decision": "maybe"}),
        ),
    ];
    for (pointer, instance) in bad {
        assert!(
            validators.check(pointer, &instance).is_err(),
            "{pointer} accepted {instance}"
        );
    }
}
