//! The rule catalogue: every load-time rule (and consistency warning) with its stable id and
//! the manifest it checks, and the errors that name them.

use std::fmt;

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
    /// `service` is given exactly for `executor: "runtime"` and names a service; `grant_targets`,
    /// when given, is on a state-changing command and lists params of its input schema;
    /// `safer_alternative`, when given, names a lower-risk command and maps its params.
    CommandProjectFields = ("commands.project_fields", Commands),
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
