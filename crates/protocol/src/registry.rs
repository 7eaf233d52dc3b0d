//! The typed, validated registry of commands, events and capabilities.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use serde::Serialize;
use serde_json::Value;

use crate::canonical::{CanonicalError, check_params, json_type_name};
use crate::manifest::{Capability, Command, EventSpec, TransportMapping};
use crate::validate::{
    ManifestDeprecation, ManifestError, ManifestErrors, Rule, SchemaCompile, validate,
};

/// The text of the four manifests.
#[derive(Debug, Clone)]
pub struct ManifestSources {
    pub commands: Cow<'static, str>,
    pub events: Cow<'static, str>,
    pub capabilities: Cow<'static, str>,
    pub runtime_schema: Cow<'static, str>,
}

impl ManifestSources {
    /// The manifests shipped with this build (`runtime/protocol/`, embedded at compile time).
    pub fn embedded() -> Self {
        Self {
            commands: Cow::Borrowed(include_str!(
                "../../../runtime/protocol/openphone-commands.json"
            )),
            events: Cow::Borrowed(include_str!(
                "../../../runtime/protocol/openphone-events.json"
            )),
            capabilities: Cow::Borrowed(include_str!(
                "../../../runtime/protocol/openphone-capabilities.json"
            )),
            runtime_schema: Cow::Borrowed(include_str!(
                "../../../runtime/protocol/openphone-runtime.schema.json"
            )),
        }
    }
}

/// One field-level problem with tool params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// Dotted path of the field (`x`, `delivery.mode`, `items[0]`); empty for the params object
    /// itself.
    pub field: String,
    pub message: String,
}

impl FieldError {
    /// The field as a JSON pointer (RFC 6901): `delivery.mode` → `/delivery/mode`,
    /// `items[0]` → `/items/0`; empty for the params object itself.
    pub fn pointer(&self) -> String {
        fn push(out: &mut String, token: &str) {
            if !token.is_empty() {
                out.push('/');
                out.push_str(&token.replace('~', "~0").replace('/', "~1"));
            }
        }
        let mut out = String::new();
        for segment in self.field.split('.').filter(|s| !s.is_empty()) {
            let name_end = segment.find('[').unwrap_or(segment.len());
            push(&mut out, &segment[..name_end]);
            let mut rest = &segment[name_end..];
            while let Some(stripped) = rest.strip_prefix('[') {
                let close = stripped.find(']').unwrap_or(stripped.len());
                push(&mut out, &stripped[..close]);
                rest = stripped.get(close + 1..).unwrap_or("");
            }
        }
        out
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

/// A command's input validator, compiled at load or on first use (`Err`: the schema's compile
/// error).
type LazyValidator = OnceLock<Result<jsonschema::Validator, String>>;

/// The validated manifests, with lookup by any command name and input validators compiled at
/// load or on first use ([`SchemaCompile`]).
pub struct Registry {
    commands: Vec<Command>,
    /// One per command, in the same order.
    validators: Vec<LazyValidator>,
    /// canonical name, alias or model-tool name → index into `commands`
    index: HashMap<String, usize>,
    commands_version: u32,
    deprecation: ManifestDeprecation,
    events: Vec<EventSpec>,
    transport_mappings: Vec<TransportMapping>,
    capabilities: Vec<Capability>,
    runtime_schema: Value,
    warnings: Vec<ManifestError>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("commands", &self.commands.len())
            .field("events", &self.events.len())
            .field("capabilities", &self.capabilities.len())
            .finish_non_exhaustive()
    }
}

static EMBEDDED: OnceLock<Result<Registry, ManifestErrors>> = OnceLock::new();

impl Registry {
    /// Parses and validates manifests, compiling every schema; any broken rule rejects them
    /// all.
    pub fn load(sources: &ManifestSources) -> Result<Self, ManifestErrors> {
        Self::load_with(sources, SchemaCompile::AtLoad)
    }

    /// Parses and validates manifests, compiling their schemas at load or leaving that to
    /// first use ([`SchemaCompile`]; [`Registry::compile_all`] compiles the rest later).
    pub fn load_with(
        sources: &ManifestSources,
        compile: SchemaCompile,
    ) -> Result<Self, ManifestErrors> {
        let v = validate(
            &sources.commands,
            &sources.events,
            &sources.capabilities,
            &sources.runtime_schema,
            compile,
        )?;
        let mut index = HashMap::new();
        for (i, cmd) in v.commands.iter().enumerate() {
            for name in cmd.all_names() {
                index.insert(name.to_owned(), i);
            }
        }
        Ok(Self {
            commands: v.commands,
            validators: v
                .validators
                .into_iter()
                .map(|compiled| match compiled {
                    Some(validator) => OnceLock::from(Ok(validator)),
                    None => OnceLock::new(),
                })
                .collect(),
            index,
            commands_version: v.commands_version,
            deprecation: v.deprecation,
            events: v.events,
            transport_mappings: v.transport_mappings,
            capabilities: v.capabilities,
            runtime_schema: v.runtime_schema,
            warnings: v.warnings,
        })
    }

    /// The shipped manifests, validated once per process. Their schemas are compiled on first
    /// use (a test compiles all of them, [`Registry::compile_all`]), so the validators of
    /// commands a process never calls take no memory.
    pub fn embedded() -> Result<&'static Registry, ManifestErrors> {
        EMBEDDED
            .get_or_init(|| {
                Registry::load_with(&ManifestSources::embedded(), SchemaCompile::OnFirstUse)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// All commands, in manifest order.
    pub fn commands(&self) -> impl ExactSizeIterator<Item = &Command> {
        self.commands.iter()
    }

    /// Resolves a canonical name, alias or model-tool name (trimmed, case-sensitive).
    pub fn resolve(&self, name: &str) -> Option<&Command> {
        self.index.get(name.trim()).map(|&i| &self.commands[i])
    }

    /// Validates tool params against the command's input schema, plus the protocol's own rules
    /// (an object; no `_`-prefixed key, which is reserved for the phone; nesting depth; no
    /// integer beyond ±(2^53 − 1)). Extra keys are allowed. Every problem is reported.
    pub fn validate_params(
        &self,
        command: &Command,
        params: &Value,
    ) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        let Some(obj) = params.as_object() else {
            return Err(vec![FieldError {
                field: String::new(),
                message: format!(
                    "params must be a JSON object, got {}",
                    json_type_name(params)
                ),
            }]);
        };
        for key in obj.keys().filter(|k| k.starts_with('_')) {
            errors.push(FieldError {
                field: key.clone(),
                message: "keys starting with `_` are reserved for the phone".to_owned(),
            });
        }
        match check_params(params) {
            Ok(()) => {}
            Err(CanonicalError::UnsafeInteger { path }) => errors.push(FieldError {
                field: dotted_from_dollar(&path),
                message: "integer beyond ±(2^53 − 1) cannot be hashed portably".to_owned(),
            }),
            Err(e) => errors.push(FieldError {
                field: String::new(),
                message: e.to_string(),
            }),
        }
        match self.validator_for(command) {
            Some(Ok(validator)) => {
                for e in validator.iter_errors(params) {
                    errors.push(field_error(&e));
                }
            }
            Some(Err(e)) => errors.push(FieldError {
                field: String::new(),
                message: format!(
                    "the phone cannot check these params: {}'s input schema does not compile: {e}",
                    command.name
                ),
            }),
            None => {}
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// The command's input validator, compiled now if it was not yet; `None` for a command not
    /// in this registry.
    fn validator_for(&self, command: &Command) -> Option<&Result<jsonschema::Validator, String>> {
        let i = *self.index.get(command.name.as_str())?;
        let slot = self.validators.get(i)?;
        Some(slot.get_or_init(|| compile(&self.commands[i].input_schema)))
    }

    /// Compiles every schema not compiled yet: each command's input schema (kept for use) and
    /// output schema, and the runtime schema. Reports every one that does not compile, under
    /// the rules loading with [`SchemaCompile::AtLoad`] checks.
    pub fn compile_all(&self) -> Result<(), ManifestErrors> {
        let mut errors = Vec::new();
        for (cmd, slot) in self.commands.iter().zip(&self.validators) {
            let mut fail = |which: &str, e: &str| {
                errors.push(ManifestError {
                    rule: Rule::CommandSchemaCompiles,
                    subject: Some(cmd.name.clone()),
                    message: format!("{which} does not compile: {e}"),
                });
            };
            if let Err(e) = slot.get_or_init(|| compile(&cmd.input_schema)) {
                fail("input_schema", e);
            }
            if cmd.output_schema.is_object()
                && let Err(e) = compile(&cmd.output_schema)
            {
                fail("output_schema", &e);
            }
        }
        if let Err(e) = compile(&self.runtime_schema) {
            errors.push(ManifestError {
                rule: Rule::RuntimeSchemaCompiles,
                subject: None,
                message: format!("does not compile: {e}"),
            });
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ManifestErrors(errors))
        }
    }

    /// The commands manifest's version.
    pub fn commands_version(&self) -> u32 {
        self.commands_version
    }

    /// Manifest-level deprecation (information only; it disables nothing).
    pub fn deprecation(&self) -> &ManifestDeprecation {
        &self.deprecation
    }

    /// All events, in manifest order.
    pub fn events(&self) -> &[EventSpec] {
        &self.events
    }

    /// An event by name.
    pub fn event(&self, name: &str) -> Option<&EventSpec> {
        self.events.iter().find(|e| e.name == name)
    }

    /// Transport name mappings (e.g. OpenClaw `node.event`).
    pub fn transport_mappings(&self) -> &[TransportMapping] {
        &self.transport_mappings
    }

    /// All capabilities, in manifest order.
    pub fn capabilities(&self) -> &[Capability] {
        &self.capabilities
    }

    /// A capability by id.
    pub fn capability(&self, id: &str) -> Option<&Capability> {
        self.capabilities.iter().find(|c| c.id == id)
    }

    /// The runtime message schema.
    pub fn runtime_schema(&self) -> &Value {
        &self.runtime_schema
    }

    /// Consistency warnings (rules that SHOULD hold).
    pub fn warnings(&self) -> &[ManifestError] {
        &self.warnings
    }
}

/// Compiles a schema as JSON Schema 2020-12, the error as text.
fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::draft202012::new(schema).map_err(|e| e.to_string())
}

fn field_error(e: &jsonschema::ValidationError<'_>) -> FieldError {
    let base = pointer_to_dotted(e.instance_path().as_str());
    match e.kind() {
        jsonschema::error::ValidationErrorKind::Required { property } => {
            let prop = property
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| property.to_string());
            FieldError {
                field: if base.is_empty() {
                    prop
                } else {
                    format!("{base}.{prop}")
                },
                message: "required field is missing".to_owned(),
            }
        }
        _ => FieldError {
            field: base,
            message: e.masked().to_string(),
        },
    }
}

/// `/delivery/mode` → `delivery.mode`; `/items/0` → `items[0]`.
fn pointer_to_dotted(pointer: &str) -> String {
    let mut out = String::new();
    for raw in pointer.split('/').skip(1) {
        let seg = raw.replace("~1", "/").replace("~0", "~");
        if !seg.is_empty() && seg.chars().all(|c| c.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&seg);
        }
    }
    out
}

/// `$.a.b[0]` → `a.b[0]`.
fn dotted_from_dollar(path: &str) -> String {
    path.trim_start_matches('$')
        .trim_start_matches('.')
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_become_dotted_paths() {
        assert_eq!(pointer_to_dotted(""), "");
        assert_eq!(pointer_to_dotted("/x"), "x");
        assert_eq!(pointer_to_dotted("/delivery/mode"), "delivery.mode");
        assert_eq!(pointer_to_dotted("/items/0/a~1b"), "items[0].a/b");
        assert_eq!(dotted_from_dollar("$.a.b[0]"), "a.b[0]");
    }
}
