//! The phone's command surface on the gateway (`openclaw-node.md` §7, §9), derived from the
//! command manifest: the commands the `openclaw` runtime may see (policy layers 1 and 2 for its
//! configured authorisation and tool policy) that this daemon can run, plus the adapter's own
//! `openphone.request.status`. No hand-written list.
//!
//! OpenClaw command names are the manifest's canonical names (all `openphone.*`, so every one
//! needs the gateway's `gateway.nodes.commands.allow`); tool names are `phone_<model-tool name>`.

use std::collections::BTreeMap;

use openphone_policy::{Caller, ToolPolicy};
use openphone_protocol::{Command, Registry};
use serde_json::{Value, json};

/// The adapter's own status command (§8.5 step 6), part of every declared surface.
pub const REQUEST_STATUS: &str = "openphone.request.status";
/// Its tool name.
pub const REQUEST_STATUS_TOOL: &str = "phone_request_status";
/// `pluginId` of every published tool.
pub const PLUGIN_ID: &str = "openphone";

/// One published tool.
#[derive(Debug, Clone, PartialEq)]
pub struct PhoneTool {
    /// The OpenClaw command (= the manifest's canonical name).
    pub command: String,
    /// The tool name (`phone_<model-tool name>`).
    pub name: String,
    pub description: String,
    pub parameters: Value,
    /// Whether the command changes something (and so usually asks the user).
    pub mutating: bool,
}

/// The declared commands and their tools.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandSurface {
    tools: Vec<PhoneTool>,
    by_command: BTreeMap<String, usize>,
}

/// Whether a tool name satisfies the gateway's pattern `^[A-Za-z][A-Za-z0-9_-]{0,63}$`.
pub fn valid_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl CommandSurface {
    /// The surface `caller` (the `openclaw` runtime under its configured authorisation) gets
    /// under `tool_policy`, keeping only what `runnable` accepts (device support or a daemon
    /// service), in manifest order, then the status command.
    pub fn new(
        registry: &'static Registry,
        caller: &Caller,
        tool_policy: &ToolPolicy,
        runnable: impl Fn(&Command) -> bool,
    ) -> CommandSurface {
        let mut tools = Vec::new();
        for command in registry.commands() {
            if command.deprecated
                || !command.remote_runtime
                || !openphone_policy::visible(command, caller, tool_policy)
                || !runnable(command)
            {
                continue;
            }
            let name = format!("phone_{}", command.android_tool);
            if !valid_tool_name(&name) {
                tracing::warn!(command = %command.name, "tool name not allowed by OpenClaw; not published");
                continue;
            }
            tools.push(PhoneTool {
                command: command.name.clone(),
                name,
                description: command.description.clone(),
                parameters: command.input_schema.clone(),
                mutating: command.mutating,
            });
        }
        tools.push(PhoneTool {
            command: REQUEST_STATUS.to_owned(),
            name: REQUEST_STATUS_TOOL.to_owned(),
            description: "Status and result of an earlier phone request that answered \
                          pending_confirmation (pass its requestId)."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {"requestId": {"type": "string"}},
                "required": ["requestId"],
                "additionalProperties": false,
            }),
            mutating: false,
        });
        let by_command = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.command.clone(), i))
            .collect();
        CommandSurface { tools, by_command }
    }

    /// `connect.commands`: sorted, stable.
    pub fn commands(&self) -> Vec<String> {
        let mut names: Vec<String> = self.by_command.keys().cloned().collect();
        names.sort();
        names
    }

    /// The tools, in manifest order.
    pub fn tools(&self) -> &[PhoneTool] {
        &self.tools
    }

    /// The declared tool for `command`.
    pub fn get(&self, command: &str) -> Option<&PhoneTool> {
        self.by_command.get(command).map(|i| &self.tools[*i])
    }

    /// The `node.pluginTools.update` params.
    pub fn plugin_tools_params(&self) -> Value {
        let tools: Vec<Value> = self
            .tools
            .iter()
            .map(|t| {
                json!({
                    "pluginId": PLUGIN_ID,
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "command": t.command,
                })
            })
            .collect();
        json!({"tools": tools})
    }

    /// The gateway command that allowlists every declared command (custom commands are in no
    /// default list); merge it with the gateway's existing entries.
    pub fn allow_command(&self) -> String {
        let list = serde_json::to_string(&self.commands()).unwrap_or_default();
        format!("openclaw config set gateway.nodes.commands.allow '{list}' --strict-json")
    }
}
