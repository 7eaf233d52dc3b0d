//! The name table and the tool catalogue (`mcp.md` §4).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use openphone_protocol::{Command, Confirmation, Exposure, Registry, Risk, ToolResult};
use rmcp::model::{CallToolResult, JsonObject, MetaObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use crate::call::CallError;
use crate::names::{derived_title, is_portable_tool_name, tool_name};
use crate::result::{shape, shape_owned};
pub use crate::table_problem::{CatalogueError, TableProblem};

/// The additive read-only command that pending results point at (`mcp.md` §4.1, §7.5).
pub const CONFIRMATIONS_GET: &str = "openphone.confirmations.get";

/// `_meta` key: the manifest name of a tool.
pub const META_COMMAND: &str = "dev.openphone/command";
/// `_meta` key: the command's risk.
pub const META_RISK: &str = "dev.openphone/risk";
/// `_meta` key: the command's confirmation mode.
pub const META_CONFIRMATION: &str = "dev.openphone/confirmation";
/// `_meta` key: the command's exposure class.
pub const META_EXPOSURE: &str = "dev.openphone/exposure";
/// `_meta` key: the command's capability id.
pub const META_CAPABILITY: &str = "dev.openphone/capability";
/// `_meta` key (project addition, deprecated commands only): `true`.
pub const META_DEPRECATED: &str = "dev.openphone/deprecated";
/// `_meta` key (project addition, deprecated commands only): the replacement's exposed name.
pub const META_SUPERSEDED_BY: &str = "dev.openphone/supersededBy";

/// Categories whose inputs and outputs are OpenPhone's own state (`openWorldHint: false`).
const CLOSED_WORLD_CATEGORIES: &[&str] = &["memory", "watchers", "background", "device", "runtime"];

/// Sentence appended to `ask_before_action` descriptions.
pub const ASK_BEFORE_ACTION_SENTENCE: &str =
    "Runs after the user confirms on the phone, unless the caller is trusted for routine actions.";
/// Sentence appended to `always` descriptions.
pub const ALWAYS_SENTENCE: &str = "Always needs the user's confirmation on the phone.";
/// Sentence appended to every description.
pub const REASON_SENTENCE: &str = "Give a short `reason`; the user sees it.";

/// The name table of `mcp.md` §4.2, built once when the manifest loads: exposed name ↔
/// command, in both directions, plus the finished [`Tool`] of every listed command.
pub struct ToolTable<'r> {
    registry: &'r Registry,
    /// exposed name → (command, tool), sorted by exposed name (the listing order, §4.6)
    exposed: BTreeMap<String, (&'r Command, Tool)>,
    /// derived name of an `mcp: false` command → that command (refused, never listed)
    hidden: HashMap<String, &'r Command>,
    /// canonical name → exposed name
    by_canonical: HashMap<&'r str, String>,
    /// `openphone_confirmation_status`, listed with the manifest's tools
    status: Tool,
    /// [`crate::server_config`] of this table, built at its first use: rmcp asks for it at
    /// every 2026-07-28 request.
    server_config: std::sync::OnceLock<rmcp::model::ServerConfig>,
}

impl fmt::Debug for ToolTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolTable")
            .field("tools", &self.exposed.len())
            .field("hidden", &self.hidden.len())
            .finish_non_exhaustive()
    }
}

impl<'r> ToolTable<'r> {
    /// Builds the table and every tool; fails with all broken rules (§4.2: a derived name that
    /// is not portable, two commands deriving one name, an exposed name equal to another
    /// command's canonical name, alias or model-tool name; §4.3: non-object schemas).
    pub fn new(registry: &'r Registry) -> Result<Self, CatalogueError> {
        let mut problems = Vec::new();
        let mut derived: BTreeMap<String, &'r Command> = BTreeMap::new();
        for cmd in registry.commands() {
            let tool = tool_name(&cmd.name);
            if !is_portable_tool_name(&tool) {
                problems.push(TableProblem::NotPortable {
                    command: cmd.name.clone(),
                    tool: tool.clone(),
                });
            }
            if let Some(first) = derived.get(&tool) {
                problems.push(TableProblem::Collision {
                    tool,
                    first: first.name.clone(),
                    second: cmd.name.clone(),
                });
                continue;
            }
            if let Some(other) = registry.resolve(&tool).filter(|o| o.name != cmd.name) {
                problems.push(TableProblem::Shadows {
                    tool: tool.clone(),
                    command: cmd.name.clone(),
                    other: other.name.clone(),
                });
            }
            if cmd.mcp {
                for (which, schema) in [
                    ("input_schema", &cmd.input_schema),
                    ("output_schema", &cmd.output_schema),
                ] {
                    if schema.get("type").and_then(Value::as_str) != Some("object") {
                        problems.push(TableProblem::SchemaNotObject {
                            command: cmd.name.clone(),
                            which,
                        });
                    }
                }
            }
            derived.insert(tool, cmd);
        }
        if !problems.is_empty() {
            return Err(CatalogueError(problems));
        }
        let by_canonical: HashMap<&'r str, String> = derived
            .iter()
            .filter(|(_, cmd)| cmd.mcp)
            .map(|(tool, cmd)| (cmd.name.as_str(), tool.clone()))
            .collect();
        let mut exposed = BTreeMap::new();
        let mut hidden = HashMap::new();
        for (tool, cmd) in derived {
            if cmd.mcp {
                let replacement = cmd
                    .superseded_by
                    .as_deref()
                    .and_then(|s| registry.resolve(s))
                    .map(|r| {
                        by_canonical
                            .get(r.name.as_str())
                            .cloned()
                            .unwrap_or_else(|| r.name.clone())
                    });
                let built = build_tool(cmd, &tool, replacement.as_deref());
                exposed.insert(tool, (cmd, built));
            } else {
                hidden.insert(tool, cmd);
            }
        }
        Ok(Self {
            registry,
            exposed,
            hidden,
            by_canonical,
            status: crate::status_tool::confirmation_status_tool(),
            server_config: std::sync::OnceLock::new(),
        })
    }

    /// [`crate::server_config`] of this table, built once.
    pub fn server_config(&self) -> &rmcp::model::ServerConfig {
        self.server_config
            .get_or_init(|| crate::identity::server_config(self))
    }

    /// The registry the table was built from.
    pub fn registry(&self) -> &'r Registry {
        self.registry
    }

    /// Number of listed tools.
    pub fn len(&self) -> usize {
        self.exposed.len()
    }

    /// Whether no tool is listed.
    pub fn is_empty(&self) -> bool {
        self.exposed.is_empty()
    }

    /// Every manifest tool, sorted by exposed name; `tools/list` adds the connection's own
    /// `openphone_confirmation_status` ([`with_status_tool`]).
    pub fn tools(&self) -> Vec<Tool> {
        self.exposed.values().map(|(_, t)| t.clone()).collect()
    }

    /// One listed tool by exposed name (`get_tool`); the same value the list holds.
    pub fn tool(&self, exposed: &str) -> Option<&Tool> {
        if crate::status_tool::is_confirmation_status(exposed) {
            return Some(&self.status);
        }
        self.exposed.get(exposed).map(|(_, t)| t)
    }

    /// The exposed names, sorted.
    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.exposed.keys().map(String::as_str)
    }

    /// The exposed name of a listed command, by canonical name.
    pub fn tool_name(&self, canonical: &str) -> Option<&str> {
        self.by_canonical.get(canonical).map(String::as_str)
    }

    /// The canonical name behind an exposed name (table lookup; `None` for anything that is not
    /// a listed exposed name).
    pub fn canonical_from_tool_name(&self, exposed: &str) -> Option<&'r str> {
        self.exposed.get(exposed).map(|(c, _)| c.name.as_str())
    }

    /// Resolves the `name` of a `tools/call` (§4.2, §5.1): the table first, then the manifest's
    /// own resolution (canonical name, alias, model-tool name). An `mcp: false` command is
    /// refused under every name, including its would-be exposed name.
    pub fn resolve_call(&self, name: &str) -> Result<&'r Command, CallError> {
        let name = name.trim();
        if name.is_empty() {
            return Err(CallError::MissingName);
        }
        if let Some((cmd, _)) = self.exposed.get(name) {
            return Ok(cmd);
        }
        let found = self
            .hidden
            .get(name)
            .copied()
            .or_else(|| self.registry.resolve(name));
        match found {
            Some(cmd) if cmd.mcp => Ok(cmd),
            Some(cmd) => Err(CallError::NotExposed {
                name: name.to_owned(),
                command: cmd.name.clone(),
            }),
            None => Err(CallError::UnknownTool(name.to_owned())),
        }
    }

    /// The tool a pending result points at: `openphone.confirmations.get` when the manifest
    /// lists it, else the connection's own `openphone_confirmation_status`
    /// ([`crate::CONFIRMATION_STATUS_TOOL`]).
    pub fn confirmations_tool(&self) -> Option<&str> {
        self.tool_name(CONFIRMATIONS_GET)
            .or(Some(crate::status_tool::CONFIRMATION_STATUS_TOOL))
    }

    /// Shapes a ToolBridge result as a `CallToolResult` (§5.2, §5.3); a pending result points
    /// at the confirmation status tool.
    pub fn call_result(&self, result: &ToolResult) -> CallToolResult {
        shape(result, self.confirmations_tool())
    }

    /// [`ToolTable::call_result`] of a result the caller no longer needs: a success's data
    /// moves into the answer rather than being copied.
    pub fn call_result_owned(&self, result: ToolResult) -> CallToolResult {
        shape_owned(result, self.confirmations_tool())
    }
}

/// `tools` (sorted by name) with `openphone_confirmation_status` in its place.
pub fn with_status_tool(mut tools: Vec<Tool>) -> Vec<Tool> {
    let status = crate::status_tool::confirmation_status_tool();
    let at = tools
        .iter()
        .position(|t| t.name.as_ref() > status.name.as_ref())
        .unwrap_or(tools.len());
    tools.insert(at, status);
    tools
}

/// Every `mcp: true` command as an MCP tool, sorted by exposed name.
pub fn catalogue(registry: &Registry) -> Result<Vec<Tool>, CatalogueError> {
    Ok(ToolTable::new(registry)?.tools())
}

/// Resolves a `tools/call` name against `registry` (builds the table; a server keeps one
/// [`ToolTable`] instead).
pub fn resolve_call<'r>(registry: &'r Registry, name: &str) -> Result<&'r Command, CallError> {
    ToolTable::new(registry)
        .map_err(CallError::Catalogue)?
        .resolve_call(name)
}

/// The annotations of `mcp.md` §4.4: every meaningful hint explicit (MCP defaults
/// `destructiveHint` and `openWorldHint` to true when absent).
pub fn annotations(cmd: &Command) -> ToolAnnotations {
    let open_world = !CLOSED_WORLD_CATEGORIES.contains(&cmd.category.as_str());
    let base = ToolAnnotations::with_title(derived_title(&cmd.name));
    match cmd.default_exposure {
        Exposure::SafeRead | Exposure::PrivateRead => base.read_only(true).open_world(open_world),
        Exposure::Dangerous => base
            .read_only(false)
            .destructive(cmd.risk != Risk::Low)
            .idempotent(false)
            .open_world(open_world),
    }
}

/// The description of §4.3: the manifest's text, the confirmation sentence, the reason
/// sentence, and for a deprecated command its replacement.
pub fn description(cmd: &Command, replacement: Option<&str>) -> String {
    let mut parts = vec![cmd.description.trim().to_owned()];
    match cmd.confirmation {
        Confirmation::None => {}
        Confirmation::AskBeforeAction => parts.push(ASK_BEFORE_ACTION_SENTENCE.to_owned()),
        Confirmation::Always => parts.push(ALWAYS_SENTENCE.to_owned()),
    }
    parts.push(REASON_SENTENCE.to_owned());
    if cmd.deprecated {
        parts.push(match replacement {
            Some(r) => format!("Deprecated: use {r} instead."),
            None => "Deprecated.".to_owned(),
        });
    }
    parts.join(" ")
}

fn build_tool(cmd: &Command, exposed: &str, replacement: Option<&str>) -> Tool {
    let mut meta = JsonObject::new();
    meta.insert(META_COMMAND.into(), json!(cmd.name));
    meta.insert(META_RISK.into(), json!(cmd.risk.as_str()));
    meta.insert(META_CONFIRMATION.into(), json!(cmd.confirmation.as_str()));
    meta.insert(META_EXPOSURE.into(), json!(cmd.default_exposure.as_str()));
    meta.insert(META_CAPABILITY.into(), json!(cmd.capability));
    if cmd.deprecated {
        meta.insert(META_DEPRECATED.into(), json!(true));
        if let Some(r) = replacement {
            meta.insert(META_SUPERSEDED_BY.into(), json!(r));
        }
    }
    Tool::new(
        exposed.to_owned(),
        description(cmd, replacement),
        Arc::new(object_of(&cmd.input_schema)),
    )
    .with_title(derived_title(&cmd.name))
    .with_raw_output_schema(Arc::new(object_of(&cmd.output_schema)))
    .with_annotations(annotations(cmd))
    .with_meta(MetaObject(meta))
}

/// The schema object, unchanged (checked to be an object when the table is built).
fn object_of(schema: &Value) -> JsonObject {
    schema.as_object().cloned().unwrap_or_default()
}
