//! Target: the manifest loader — the registry's parse and every load-time rule — over
//! arbitrary manifest text.
//!
//! The input holds up to four manifests separated by NUL bytes, in the order commands,
//! events, capabilities, runtime schema. Events and capabilities the input does not reach are
//! the shipped ones; a runtime schema it does not reach is [`MINIMAL_RUNTIME_SCHEMA`] (the
//! shipped one takes most of a load's time to compile, and would make every run several
//! times slower; seeds that carry it still test it). Properties:
//!
//! - [`Registry::load`] never panics; a refusal names at least one broken rule and renders;
//! - an accepted registry answers every name of every command (canonical name, aliases,
//!   model-tool name) with that command, and validates params against each command's
//!   compiled input schema without panicking.

use std::borrow::Cow;

use openphone_protocol::{ManifestSources, Registry};
use serde_json::{Map, Value};

/// Separates the manifests in one input.
pub const SEPARATOR: u8 = 0;

/// The smallest runtime schema the load-time rules accept: the title and the twelve
/// definitions, each empty.
pub const MINIMAL_RUNTIME_SCHEMA: &str = r#"{"title":"OpenPhone Runtime Agent Protocol","$defs":{
"attentionRequest":{},"toolRequest":{},"toolResult":{},"runtimeEvent":{},"confirmation":{},
"assistantOutput":{},"surfacePresent":{},"surfaceReplace":{},"surfaceDismiss":{},
"surfaceActionResult":{},"surfaceActionInvocation":{},"phoneSurfaceDismissed":{}}}"#;

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let Some(sources) = sources(data) else {
        return;
    };
    match Registry::load(&sources) {
        Ok(registry) => loaded(&registry),
        Err(errors) => {
            assert!(!errors.0.is_empty(), "manifests refused without a reason");
            let _ = errors.to_string();
        }
    }
}

/// The four manifests an input stands for (`None` when a part is not UTF-8).
pub fn sources(data: &[u8]) -> Option<ManifestSources> {
    let mut sources = ManifestSources::embedded();
    sources.runtime_schema = Cow::Borrowed(MINIMAL_RUNTIME_SCHEMA);
    for (i, part) in data.split(|&b| b == SEPARATOR).take(4).enumerate() {
        let text = Cow::Owned(std::str::from_utf8(part).ok()?.to_owned());
        match i {
            0 => sources.commands = text,
            1 => sources.events = text,
            2 => sources.capabilities = text,
            _ => sources.runtime_schema = text,
        }
    }
    Some(sources)
}

fn loaded(registry: &Registry) {
    let empty = Value::Object(Map::new());
    for command in registry.commands() {
        for name in command.all_names() {
            match registry.resolve(name) {
                Some(found) => assert_eq!(
                    found.name, command.name,
                    "{name:?} resolves to another command"
                ),
                None => panic!("{name:?} of {} does not resolve", command.name),
            }
        }
        let _ = registry.validate_params(command, &empty);
        let _ = registry.validate_params(command, &command.input_schema);
    }
    for warning in registry.warnings() {
        let _ = warning.to_string();
    }
}
