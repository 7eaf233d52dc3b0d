//! Load-time validation of the manifests (`runtime-protocol.md` §4.2, §4.5–§4.7, §7).
//!
//! Every rule is a [`Rule`] with a stable id. Loading checks all of them and reports every
//! violation found (not only the first), each naming its rule and the command, event or
//! capability at fault; any violation rejects the whole set of manifests.
//!
//! `rules` is the catalogue (the rules, their ids and files, the error types); one module per
//! manifest checks it (`capabilities`, `events`, `runtime_schema`, `commands`); this module
//! runs them all and keeps the helpers they share.

mod capabilities;
mod commands;
mod events;
mod rules;
mod runtime_schema;

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::manifest::{Capability, Command, EventSpec, TransportMapping};

pub use commands::ManifestDeprecation;
pub use rules::{ManifestError, ManifestErrors, ManifestFile, Rule};

/// When loading compiles the manifests' JSON Schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaCompile {
    /// Every input and output schema and the runtime schema are compiled while loading, and one
    /// that does not compile rejects the manifests (`commands.schema_compiles`,
    /// `runtime_schema.compiles`); the input validators are kept.
    AtLoad,
    /// No schema is compiled while loading; a command's input validator is compiled the first
    /// time it is used. For manifests whose schemas a test has compiled (the shipped ones): it
    /// keeps the validators of commands never called out of memory.
    OnFirstUse,
}

/// Everything that passed validation.
pub(crate) struct Validated {
    pub commands: Vec<Command>,
    /// One per command: its compiled input validator, `None` when not compiled at load.
    pub validators: Vec<Option<jsonschema::Validator>>,
    pub commands_version: u32,
    pub deprecation: ManifestDeprecation,
    pub events: Vec<EventSpec>,
    pub transport_mappings: Vec<TransportMapping>,
    pub capabilities: Vec<Capability>,
    pub runtime_schema: Value,
    pub warnings: Vec<ManifestError>,
}

/// Collects errors while checking.
#[derive(Default)]
struct Report {
    errors: Vec<ManifestError>,
    warnings: Vec<ManifestError>,
}

impl Report {
    fn err(&mut self, rule: Rule, subject: Option<&str>, message: impl Into<String>) {
        self.errors.push(ManifestError {
            rule,
            subject: subject.map(str::to_owned),
            message: message.into(),
        });
    }
    fn warn(&mut self, rule: Rule, subject: &str, message: impl Into<String>) {
        self.warnings.push(ManifestError {
            rule,
            subject: Some(subject.to_owned()),
            message: message.into(),
        });
    }
}

/// Parses and checks the four manifests.
pub(crate) fn validate(
    commands: &str,
    events: &str,
    capabilities: &str,
    runtime_schema: &str,
    compile: SchemaCompile,
) -> Result<Validated, ManifestErrors> {
    let mut r = Report::default();
    let caps = capabilities::check(capabilities, &mut r);
    let (events, mappings) = events::check(events, &mut r);
    let runtime_schema = runtime_schema::check(runtime_schema, compile, &mut r);
    let cap_ids: HashSet<&str> = caps.iter().map(|c| c.id.as_str()).collect();
    let checked = commands::check(commands, &cap_ids, compile, &mut r);
    if !r.errors.is_empty() {
        return Err(ManifestErrors(r.errors));
    }
    let Some((version, deprecation, commands, validators)) = checked else {
        // commands::check only returns None after reporting an error.
        return Err(ManifestErrors(r.errors));
    };
    Ok(Validated {
        commands,
        validators,
        commands_version: version,
        deprecation,
        events,
        transport_mappings: mappings,
        capabilities: caps,
        runtime_schema,
        warnings: r.warnings,
    })
}

fn parse_object(text: &str, rule: Rule, r: &mut Report) -> Option<Map<String, Value>> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Some(map),
        Ok(other) => {
            r.err(
                rule,
                None,
                format!(
                    "the file must hold a JSON object, found {}",
                    crate::canonical::json_type_name(&other)
                ),
            );
            None
        }
        Err(e) => {
            r.err(rule, None, format!("not valid JSON: {e}"));
            None
        }
    }
}

fn version_exactly_one(doc: &Map<String, Value>, rule: Rule, r: &mut Report) {
    let v = doc.get("version");
    if v.and_then(Value::as_f64) != Some(1.0) {
        r.err(
            rule,
            None,
            format!("version must be 1, found {}", describe(v)),
        );
    }
}

fn describe(v: Option<&Value>) -> String {
    match v {
        None => "nothing (missing)".to_owned(),
        Some(v) => v.to_string(),
    }
}

fn non_empty_str<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    obj.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}
