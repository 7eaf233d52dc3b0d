//! Load-time validation of the manifests (`runtime-protocol.md` §4.2, §4.5–§4.7, §7).
//!
//! Every rule is a [`Rule`] with a stable id. Loading checks all of them and reports every
//! violation found (not only the first), each naming its rule and the command, event or
//! capability at fault; any violation rejects the whole set of manifests.

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde_json::{Map, Value};

use crate::manifest::{
    Capability, CapabilityRisk, Command, Confirmation, Direction, EventSpec, Executor, Exposure,
    Risk, TransportMapping, WireMapping,
};
use crate::version::{MAX_VERSION, MIN_VERSION, is_supported_version};

/// Which manifest a rule belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ManifestFile {
    Commands,
    Events,
    Capabilities,
    RuntimeSchema,
}

impl ManifestFile {
    /// The file name under `runtime/protocol/`.
    pub fn file_name(self) -> &'static str {
        match self {
            ManifestFile::Commands => "openphone-commands.json",
            ManifestFile::Events => "openphone-events.json",
            ManifestFile::Capabilities => "openphone-capabilities.json",
            ManifestFile::RuntimeSchema => "openphone-runtime.schema.json",
        }
    }
}

macro_rules! rules {
    ($( $(#[$doc:meta])* $variant:ident = ($id:literal, $file:ident) ),* $(,)?) => {
        /// A load-time rule (or a consistency warning) with a stable id.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Rule {
            $( $(#[$doc])* $variant, )*
        }

        impl Rule {
            /// Every rule.
            pub const ALL: &'static [Rule] = &[ $( Rule::$variant, )* ];

            /// Stable id, e.g. `commands.unique_names`.
            pub fn id(self) -> &'static str {
                match self { $( Rule::$variant => $id, )* }
            }

            /// The manifest the rule checks.
            pub fn file(self) -> ManifestFile {
                match self { $( Rule::$variant => ManifestFile::$file, )* }
            }
        }
    };
}

rules! {
    /// The file is a JSON object.
    CommandsJson = ("commands.json", Commands),
    /// `version` is a supported integer version (§7).
    CommandsVersion = ("commands.version", Commands),
    /// `commands` is an array of objects.
    CommandsArray = ("commands.array", Commands),
    /// Manifest-level `deprecated` is a boolean and `superseded_by` a string.
    CommandsManifestDeprecation = ("commands.manifest_deprecation", Commands),
    /// Required fields present and non-empty; schemas are objects.
    CommandRequiredFields = ("commands.required_fields", Commands),
    /// `android_tool` matches `^[a-z][a-z0-9_]{0,79}$`.
    CommandModelToolFormat = ("commands.android_tool_format", Commands),
    /// `risk`, `confirmation`, `default_exposure`, `executor` hold allowed values; flags are
    /// booleans.
    CommandEnumValues = ("commands.enum_values", Commands),
    /// Names and aliases are unique across the manifest; no alias equals a name.
    CommandUniqueNames = ("commands.unique_names", Commands),
    /// `android_tool` values are unique and collide with no name or alias.
    CommandUniqueModelTool = ("commands.unique_android_tool", Commands),
    /// `capability` is listed in the capabilities manifest.
    CommandCapabilityExists = ("commands.capability_exists", Commands),
    /// `input_schema` is an object schema whose `required` contains `reason`.
    CommandInputSchemaShape = ("commands.input_schema_shape", Commands),
    /// Input and output schemas compile as JSON Schema 2020-12.
    CommandSchemaCompiles = ("commands.schema_compiles", Commands),
    /// `confirmation == "always"` if and only if `risk == "high"`.
    CommandHighRiskAlwaysConfirms = ("commands.high_risk_always_confirms", Commands),
    /// `deprecated` / `superseded_by` follow the deprecation rules.
    CommandDeprecation = ("commands.deprecation", Commands),
    /// `mutating` is exactly `confirmation != "none"`.
    CommandMutatingFlag = ("commands.mutating_flag", Commands),
    /// Warning: `confirmation == "none"` exactly for read exposures.
    WarnReadExposure = ("commands.warn_read_exposure", Commands),
    /// Warning: every confirming command is `dangerous`.
    WarnConfirmingIsDangerous = ("commands.warn_confirming_dangerous", Commands),
    /// The file is a JSON object.
    EventsJson = ("events.json", Events),
    /// `version` equals 1.
    EventsVersion = ("events.version", Events),
    /// `events` is an array of objects with a non-empty `name`.
    EventsArray = ("events.array", Events),
    /// Event names are unique.
    EventUniqueNames = ("events.unique_names", Events),
    /// `direction` is an allowed value.
    EventDirection = ("events.direction", Events),
    /// Transport mappings name manifest events; wire names are unique per mapping.
    EventTransportMapping = ("events.transport_mapping", Events),
    /// The file is a JSON object.
    CapabilitiesJson = ("capabilities.json", Capabilities),
    /// `version` equals 1.
    CapabilitiesVersion = ("capabilities.version", Capabilities),
    /// `capabilities` is an array of objects with a non-empty `id`.
    CapabilitiesArray = ("capabilities.array", Capabilities),
    /// Capability ids are unique.
    CapabilityUniqueIds = ("capabilities.unique_ids", Capabilities),
    /// `risk` is `low`, `medium`, `high` or `critical`.
    CapabilityRiskValue = ("capabilities.risk", Capabilities),
    /// The file is a JSON object.
    RuntimeSchemaJson = ("runtime_schema.json", RuntimeSchema),
    /// The title is "OpenPhone Runtime Agent Protocol".
    RuntimeSchemaTitle = ("runtime_schema.title", RuntimeSchema),
    /// `$defs` holds the twelve message definitions.
    RuntimeSchemaDefs = ("runtime_schema.defs", RuntimeSchema),
    /// The schema compiles as JSON Schema 2020-12.
    RuntimeSchemaCompiles = ("runtime_schema.compiles", RuntimeSchema),
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    pub rule: Rule,
    /// The command, event or capability at fault, when there is one.
    pub subject: Option<String>,
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: [{}] ", self.rule.file().file_name(), self.rule.id())?;
        if let Some(subject) = &self.subject {
            write!(f, "{subject}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Every broken rule of a rejected set of manifests.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ManifestErrors(pub Vec<ManifestError>);

impl fmt::Display for ManifestErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "manifests rejected ({} broken rule(s))", self.0.len())?;
        for e in &self.0 {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

impl ManifestErrors {
    /// Whether some error is for `rule` (and, when given, names `subject`).
    pub fn has(&self, rule: Rule, subject: Option<&str>) -> bool {
        self.0
            .iter()
            .any(|e| e.rule == rule && (subject.is_none() || e.subject.as_deref() == subject))
    }
}

/// The twelve definitions the runtime schema must hold (§4.7).
pub const RUNTIME_SCHEMA_DEFS: [&str; 12] = [
    "attentionRequest",
    "toolRequest",
    "toolResult",
    "runtimeEvent",
    "confirmation",
    "assistantOutput",
    "surfacePresent",
    "surfaceReplace",
    "surfaceDismiss",
    "surfaceActionResult",
    "surfaceActionInvocation",
    "phoneSurfaceDismissed",
];

/// The title the runtime schema must carry.
pub const RUNTIME_SCHEMA_TITLE: &str = "OpenPhone Runtime Agent Protocol";

/// Information-only manifest-level deprecation of the commands manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManifestDeprecation {
    pub deprecated: bool,
    pub superseded_by: Option<String>,
}

/// Everything that passed validation.
pub(crate) struct Validated {
    pub commands: Vec<Command>,
    pub validators: Vec<jsonschema::Validator>,
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
) -> Result<Validated, ManifestErrors> {
    let mut r = Report::default();
    let caps = check_capabilities(capabilities, &mut r);
    let (events, mappings) = check_events(events, &mut r);
    let runtime_schema = check_runtime_schema(runtime_schema, &mut r);
    let cap_ids: HashSet<&str> = caps.iter().map(|c| c.id.as_str()).collect();
    let checked = check_commands(commands, &cap_ids, &mut r);
    if !r.errors.is_empty() {
        return Err(ManifestErrors(r.errors));
    }
    let Some((version, deprecation, commands, validators)) = checked else {
        // check_commands only returns None after reporting an error.
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

fn check_capabilities(text: &str, r: &mut Report) -> Vec<Capability> {
    let mut out = Vec::new();
    let Some(doc) = parse_object(text, Rule::CapabilitiesJson, r) else {
        return out;
    };
    version_exactly_one(&doc, Rule::CapabilitiesVersion, r);
    let Some(items) = doc.get("capabilities").and_then(Value::as_array) else {
        r.err(
            Rule::CapabilitiesArray,
            None,
            "`capabilities` must be an array",
        );
        return out;
    };
    let mut seen = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let Some(obj) = item.as_object() else {
            r.err(
                Rule::CapabilitiesArray,
                Some(&format!("capabilities[{i}]")),
                "must be an object",
            );
            continue;
        };
        let Some(id) = non_empty_str(obj, "id") else {
            r.err(
                Rule::CapabilitiesArray,
                Some(&format!("capabilities[{i}]")),
                "needs a non-empty string `id`",
            );
            continue;
        };
        if !seen.insert(id.to_owned()) {
            r.err(
                Rule::CapabilityUniqueIds,
                Some(id),
                "capability id listed more than once",
            );
        }
        let risk = obj
            .get("risk")
            .and_then(Value::as_str)
            .and_then(CapabilityRisk::parse);
        let Some(risk) = risk else {
            r.err(
                Rule::CapabilityRiskValue,
                Some(id),
                format!(
                    "risk must be one of low, medium, high, critical; found {}",
                    describe(obj.get("risk"))
                ),
            );
            continue;
        };
        out.push(Capability {
            id: id.to_owned(),
            risk,
            description: obj
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
    }
    out
}

fn check_events(text: &str, r: &mut Report) -> (Vec<EventSpec>, Vec<TransportMapping>) {
    let mut events = Vec::new();
    let mut mappings = Vec::new();
    let Some(doc) = parse_object(text, Rule::EventsJson, r) else {
        return (events, mappings);
    };
    version_exactly_one(&doc, Rule::EventsVersion, r);
    let Some(items) = doc.get("events").and_then(Value::as_array) else {
        r.err(Rule::EventsArray, None, "`events` must be an array");
        return (events, mappings);
    };
    let mut seen = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let Some(name) = item.as_object().and_then(|o| non_empty_str(o, "name")) else {
            r.err(
                Rule::EventsArray,
                Some(&format!("events[{i}]")),
                "must be an object with a non-empty string `name`",
            );
            continue;
        };
        if !seen.insert(name.to_owned()) {
            r.err(
                Rule::EventUniqueNames,
                Some(name),
                "event name listed more than once",
            );
        }
        let direction = item
            .get("direction")
            .and_then(Value::as_str)
            .and_then(Direction::parse);
        let Some(direction) = direction else {
            r.err(
                Rule::EventDirection,
                Some(name),
                format!(
                    "direction must be phone_to_runtime, runtime_to_phone or bidirectional; found {}",
                    describe(item.get("direction"))
                ),
            );
            continue;
        };
        events.push(EventSpec {
            name: name.to_owned(),
            direction,
            description: item
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
    }
    match doc.get("transport_mappings") {
        None => {}
        Some(Value::Array(list)) => {
            for (i, m) in list.iter().enumerate() {
                let subject = format!("transport_mappings[{i}]");
                let Some(obj) = m.as_object() else {
                    r.err(
                        Rule::EventTransportMapping,
                        Some(&subject),
                        "must be an object",
                    );
                    continue;
                };
                let (Some(runtime), Some(transport)) = (
                    non_empty_str(obj, "runtime"),
                    non_empty_str(obj, "transport"),
                ) else {
                    r.err(
                        Rule::EventTransportMapping,
                        Some(&subject),
                        "needs non-empty `runtime` and `transport`",
                    );
                    continue;
                };
                let Some(pairs) = obj.get("events").and_then(Value::as_array) else {
                    r.err(
                        Rule::EventTransportMapping,
                        Some(&subject),
                        "`events` must be an array",
                    );
                    continue;
                };
                let mut wires = HashSet::new();
                let mut out = Vec::new();
                for pair in pairs {
                    let protocol = pair
                        .get("protocol")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let wire = pair.get("wire").and_then(Value::as_str).unwrap_or_default();
                    if !seen.contains(protocol) {
                        r.err(
                            Rule::EventTransportMapping,
                            Some(&format!("{runtime}/{transport}")),
                            format!("maps `{protocol}`, which is not a manifest event"),
                        );
                    }
                    if wire.is_empty() {
                        r.err(
                            Rule::EventTransportMapping,
                            Some(&format!("{runtime}/{transport}")),
                            format!("`{protocol}` has an empty wire name"),
                        );
                    } else if !wires.insert(wire) {
                        r.err(
                            Rule::EventTransportMapping,
                            Some(&format!("{runtime}/{transport}")),
                            format!("wire name `{wire}` is used more than once"),
                        );
                    }
                    out.push(WireMapping {
                        protocol: protocol.to_owned(),
                        wire: wire.to_owned(),
                    });
                }
                mappings.push(TransportMapping {
                    runtime: runtime.to_owned(),
                    transport: transport.to_owned(),
                    events: out,
                });
            }
        }
        Some(_) => r.err(
            Rule::EventTransportMapping,
            None,
            "`transport_mappings` must be an array",
        ),
    }
    (events, mappings)
}

fn check_runtime_schema(text: &str, r: &mut Report) -> Value {
    let Some(doc) = parse_object(text, Rule::RuntimeSchemaJson, r) else {
        return Value::Null;
    };
    if doc.get("title").and_then(Value::as_str) != Some(RUNTIME_SCHEMA_TITLE) {
        r.err(
            Rule::RuntimeSchemaTitle,
            None,
            format!(
                "title must be {RUNTIME_SCHEMA_TITLE:?}, found {}",
                describe(doc.get("title"))
            ),
        );
    }
    match doc.get("$defs").and_then(Value::as_object) {
        None => r.err(Rule::RuntimeSchemaDefs, None, "`$defs` must be an object"),
        Some(defs) => {
            for name in RUNTIME_SCHEMA_DEFS {
                if !defs.get(name).is_some_and(Value::is_object) {
                    r.err(
                        Rule::RuntimeSchemaDefs,
                        Some(name),
                        "definition missing from `$defs`",
                    );
                }
            }
        }
    }
    let value = Value::Object(doc);
    if let Err(e) = jsonschema::draft202012::new(&value) {
        r.err(
            Rule::RuntimeSchemaCompiles,
            None,
            format!("does not compile: {e}"),
        );
    }
    value
}

type CheckedCommands = (
    u32,
    ManifestDeprecation,
    Vec<Command>,
    Vec<jsonschema::Validator>,
);

fn check_commands(text: &str, cap_ids: &HashSet<&str>, r: &mut Report) -> Option<CheckedCommands> {
    let doc = parse_object(text, Rule::CommandsJson, r)?;
    let version = doc.get("version");
    if !is_supported_version(version) {
        r.err(
            Rule::CommandsVersion,
            None,
            format!(
                "unsupported manifest version: supported range is {MIN_VERSION}..={MAX_VERSION}, found {}",
                describe(version)
            ),
        );
    }
    let version = version
        .and_then(Value::as_f64)
        .map(|v| v as u32)
        .unwrap_or(0);
    let mut deprecation = ManifestDeprecation::default();
    match doc.get("deprecated") {
        None => {}
        Some(Value::Bool(b)) => deprecation.deprecated = *b,
        Some(other) => r.err(
            Rule::CommandsManifestDeprecation,
            None,
            format!("manifest-level `deprecated` must be a boolean, found {other}"),
        ),
    }
    match doc.get("superseded_by") {
        None => {}
        Some(Value::String(s)) => deprecation.superseded_by = Some(s.clone()),
        Some(other) => r.err(
            Rule::CommandsManifestDeprecation,
            None,
            format!("manifest-level `superseded_by` must be a string, found {other}"),
        ),
    }
    let Some(items) = doc.get("commands").and_then(Value::as_array) else {
        r.err(Rule::CommandsArray, None, "`commands` must be an array");
        return None;
    };

    let mut commands = Vec::new();
    let mut validators = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(obj) = item.as_object() else {
            r.err(
                Rule::CommandsArray,
                Some(&format!("commands[{i}]")),
                "must be an object",
            );
            continue;
        };
        if let Some((cmd, validator)) = check_command(i, obj, cap_ids, r) {
            commands.push(cmd);
            validators.push(validator);
        }
    }
    let entries: Vec<NameEntry<'_>> = items
        .iter()
        .filter_map(Value::as_object)
        .filter_map(|obj| {
            Some(NameEntry {
                name: non_empty_str(obj, "name")?,
                aliases: obj
                    .get("aliases")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default(),
                android_tool: obj.get("android_tool").and_then(Value::as_str),
            })
        })
        .collect();
    check_names(&entries, r);
    check_deprecations(&commands, r);
    Some((version, deprecation, commands, validators))
}

/// Checks one command on its own; `None` when it cannot be built.
fn check_command(
    index: usize,
    obj: &Map<String, Value>,
    cap_ids: &HashSet<&str>,
    r: &mut Report,
) -> Option<(Command, jsonschema::Validator)> {
    let placeholder = format!("commands[{index}]");
    let name = non_empty_str(obj, "name");
    let subject = name.unwrap_or(&placeholder).to_owned();
    let s = Some(subject.as_str());
    let before = r.errors.len();

    for key in [
        "name",
        "android_tool",
        "description",
        "category",
        "default_exposure",
        "capability",
    ] {
        if non_empty_str(obj, key).is_none() {
            r.err(
                Rule::CommandRequiredFields,
                s,
                format!(
                    "`{key}` must be a non-empty string, found {}",
                    describe(obj.get(key))
                ),
            );
        }
    }
    for key in ["input_schema", "output_schema"] {
        if !obj.get(key).is_some_and(Value::is_object) {
            r.err(
                Rule::CommandRequiredFields,
                s,
                format!("`{key}` must be an object"),
            );
        }
    }
    let aliases: Vec<String> = match obj.get("aliases") {
        None => Vec::new(),
        Some(Value::Array(list))
            if list
                .iter()
                .all(|a| a.as_str().is_some_and(|a| !a.trim().is_empty())) =>
        {
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        }
        Some(other) => {
            r.err(
                Rule::CommandRequiredFields,
                s,
                format!("`aliases` must be an array of non-empty strings, found {other}"),
            );
            Vec::new()
        }
    };
    let android_tool = non_empty_str(obj, "android_tool").unwrap_or_default();
    if !android_tool.is_empty() && !is_model_tool_name(android_tool) {
        r.err(
            Rule::CommandModelToolFormat,
            s,
            format!("android_tool {android_tool:?} must match ^[a-z][a-z0-9_]{{0,79}}$"),
        );
    }

    let risk = parse_enum(obj, "risk", Risk::parse, "low, medium, high", s, r);
    let confirmation = parse_enum(
        obj,
        "confirmation",
        Confirmation::parse,
        "none, ask_before_action, always",
        s,
        r,
    );
    let exposure = parse_enum(
        obj,
        "default_exposure",
        Exposure::parse,
        "safe_read, private_read, dangerous",
        s,
        r,
    );
    let executor = parse_enum(obj, "executor", Executor::parse, "device, runtime", s, r);
    let mut flag = |key: &str| match obj.get(key) {
        Some(Value::Bool(b)) => Some(*b),
        other => {
            r.err(
                Rule::CommandEnumValues,
                s,
                format!("`{key}` must be a boolean, found {}", describe(other)),
            );
            None
        }
    };
    let mcp = flag("mcp");
    let remote_runtime = flag("remote_runtime");
    let mutating = flag("mutating");

    let capability = non_empty_str(obj, "capability").unwrap_or_default();
    if !capability.is_empty() && !cap_ids.contains(capability) {
        r.err(
            Rule::CommandCapabilityExists,
            s,
            format!("capability {capability:?} is not in the capabilities manifest"),
        );
    }

    let input_schema = obj.get("input_schema").cloned().unwrap_or(Value::Null);
    let output_schema = obj.get("output_schema").cloned().unwrap_or(Value::Null);
    if input_schema.is_object() {
        if input_schema.get("type").and_then(Value::as_str) != Some("object") {
            r.err(
                Rule::CommandInputSchemaShape,
                s,
                "input_schema must have \"type\": \"object\"",
            );
        }
        let requires_reason = input_schema
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|req| req.iter().any(|v| v.as_str() == Some("reason")));
        if !requires_reason {
            r.err(
                Rule::CommandInputSchemaShape,
                s,
                "input_schema.required must contain \"reason\"",
            );
        }
    }
    let validator = if input_schema.is_object() {
        match jsonschema::draft202012::new(&input_schema) {
            Ok(v) => Some(v),
            Err(e) => {
                r.err(
                    Rule::CommandSchemaCompiles,
                    s,
                    format!("input_schema does not compile: {e}"),
                );
                None
            }
        }
    } else {
        None
    };
    if output_schema.is_object()
        && let Err(e) = jsonschema::draft202012::new(&output_schema)
    {
        {
            r.err(
                Rule::CommandSchemaCompiles,
                s,
                format!("output_schema does not compile: {e}"),
            );
        }
    }

    if let (Some(risk), Some(confirmation)) = (risk, confirmation)
        && (confirmation == Confirmation::Always) != (risk == Risk::High)
    {
        {
            r.err(
                Rule::CommandHighRiskAlwaysConfirms,
                s,
                format!("confirmation must be \"always\" exactly when risk is \"high\" (risk {risk}, confirmation {confirmation})"),
            );
        }
    }
    if let (Some(mutating), Some(confirmation)) = (mutating, confirmation) {
        let expected = confirmation != Confirmation::None;
        if mutating != expected {
            r.err(
                Rule::CommandMutatingFlag,
                s,
                format!("mutating is {mutating} but confirmation {confirmation} means mutating must be {expected}"),
            );
        }
    }
    if let (Some(confirmation), Some(exposure)) = (confirmation, exposure) {
        let read = matches!(exposure, Exposure::SafeRead | Exposure::PrivateRead);
        if (confirmation == Confirmation::None) != read {
            r.warn(
                Rule::WarnReadExposure,
                &subject,
                format!("confirmation {confirmation} with exposure {exposure}"),
            );
        }
        if confirmation != Confirmation::None && exposure != Exposure::Dangerous {
            r.warn(
                Rule::WarnConfirmingIsDangerous,
                &subject,
                format!("confirming command has exposure {exposure}"),
            );
        }
    }

    let deprecated = match obj.get("deprecated") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            r.err(
                Rule::CommandDeprecation,
                s,
                format!("`deprecated` must be a boolean, found {other}"),
            );
            false
        }
    };
    let superseded_by = match obj.get("superseded_by") {
        None => None,
        Some(Value::String(t)) if !t.trim().is_empty() => {
            if !deprecated {
                r.err(
                    Rule::CommandDeprecation,
                    s,
                    "`superseded_by` requires \"deprecated\": true",
                );
            }
            Some(t.trim().to_owned())
        }
        Some(other) => {
            r.err(
                Rule::CommandDeprecation,
                s,
                format!("`superseded_by` must be a non-empty string, found {other}"),
            );
            None
        }
    };

    if r.errors.len() != before {
        return None;
    }
    let (Some(name), Some(risk), Some(confirmation), Some(exposure), Some(executor)) =
        (name, risk, confirmation, exposure, executor)
    else {
        return None;
    };
    let (Some(mcp), Some(remote_runtime), Some(mutating), Some(validator)) =
        (mcp, remote_runtime, mutating, validator)
    else {
        return None;
    };
    let text = |key: &str| non_empty_str(obj, key).unwrap_or_default().to_owned();
    Some((
        Command {
            name: name.to_owned(),
            aliases,
            android_tool: android_tool.to_owned(),
            description: text("description"),
            category: text("category"),
            mutating,
            executor,
            risk,
            capability: capability.to_owned(),
            confirmation,
            default_exposure: exposure,
            mcp,
            remote_runtime,
            input_schema,
            output_schema,
            deprecated,
            superseded_by,
        },
        validator,
    ))
}

fn parse_enum<T>(
    obj: &Map<String, Value>,
    key: &str,
    parse: fn(&str) -> Option<T>,
    allowed: &str,
    subject: Option<&str>,
    r: &mut Report,
) -> Option<T> {
    let parsed = obj.get(key).and_then(Value::as_str).and_then(parse);
    if parsed.is_none() {
        r.err(
            Rule::CommandEnumValues,
            subject,
            format!(
                "`{key}` must be one of {allowed}; found {}",
                describe(obj.get(key))
            ),
        );
    }
    parsed
}

/// `^[a-z][a-z0-9_]{0,79}$`.
pub fn is_model_tool_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && s.len() <= 80
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The names one raw command entry declares (checked even when other rules fail for it).
struct NameEntry<'a> {
    name: &'a str,
    aliases: Vec<&'a str>,
    android_tool: Option<&'a str>,
}

/// Rules 4 and 5: names, aliases and model-tool names are all distinct.
fn check_names(entries: &[NameEntry<'_>], r: &mut Report) {
    // Canonical names first, so an alias that equals a name is blamed on the alias's owner.
    let mut owners: HashMap<&str, &str> = HashMap::new();
    for e in entries {
        if let Some(owner) = owners.insert(e.name, e.name) {
            r.err(
                Rule::CommandUniqueNames,
                Some(e.name),
                format!("name {:?} is declared twice (first by {owner})", e.name),
            );
        }
    }
    let names: HashSet<&str> = owners.keys().copied().collect();
    for e in entries {
        for alias in &e.aliases {
            if names.contains(alias) {
                r.err(
                    Rule::CommandUniqueNames,
                    Some(e.name),
                    format!("alias {alias:?} equals the canonical name of a command"),
                );
            } else if let Some(owner) = owners.insert(alias, e.name) {
                r.err(
                    Rule::CommandUniqueNames,
                    Some(e.name),
                    format!("alias {alias:?} is already declared by {owner}"),
                );
            }
        }
    }
    let mut tools: HashMap<&str, &str> = HashMap::new();
    for e in entries {
        let Some(tool) = e.android_tool else { continue };
        if let Some(owner) = owners.get(tool) {
            r.err(
                Rule::CommandUniqueModelTool,
                Some(e.name),
                format!("android_tool {tool:?} collides with a name or alias of {owner}"),
            );
        }
        if let Some(owner) = tools.insert(tool, e.name) {
            r.err(
                Rule::CommandUniqueModelTool,
                Some(e.name),
                format!("android_tool {tool:?} is already used by {owner}"),
            );
        }
    }
}

/// Rule 9: `superseded_by` names a known command other than the command itself.
fn check_deprecations(commands: &[Command], r: &mut Report) {
    for cmd in commands {
        let Some(target) = &cmd.superseded_by else {
            continue;
        };
        let own = std::iter::once(&cmd.name)
            .chain(cmd.aliases.iter())
            .any(|n| n == target);
        if own {
            r.err(
                Rule::CommandDeprecation,
                Some(&cmd.name),
                format!("superseded_by {target:?} names the command itself"),
            );
            continue;
        }
        let known = commands
            .iter()
            .any(|c| c.name == *target || c.aliases.iter().any(|a| a == target));
        if !known {
            r.err(
                Rule::CommandDeprecation,
                Some(&cmd.name),
                format!("superseded_by {target:?} names no known command or alias"),
            );
        }
    }
}
