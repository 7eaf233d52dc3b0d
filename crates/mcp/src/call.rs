//! Resolving a `tools/call` name and the errors that stop a call before the ToolBridge.

use openphone_protocol::{ErrorCode, ToolResult};
use rmcp::model::ErrorData;
use serde_json::{Map, json};

use crate::table_problem::CatalogueError;

/// Why a `tools/call` name does not lead to a callable command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The call names no tool (`mcp.md` §2: a tool result, not a protocol error).
    #[error("tools/call needs a tool name")]
    MissingName,
    /// Neither an exposed name nor any manifest name (§5.1: JSON-RPC -32602).
    #[error("Unknown tool: {0}")]
    UnknownTool(String),
    /// A manifest command with `mcp: false`, named by any of its names (§4.1; the L1 denial
    /// `tool_not_granted` / `transport_not_allowed` of `runtime-protocol.md` §8.2).
    #[error("{command} is not available over MCP")]
    NotExposed {
        /// The name the client sent.
        name: String,
        /// The canonical name it resolved to.
        command: String,
    },
    /// The manifest could not be turned into a name table.
    #[error(transparent)]
    Catalogue(#[from] CatalogueError),
}

impl CallError {
    /// The catalogue code reported for this refusal.
    pub fn code(&self) -> ErrorCode {
        match self {
            CallError::MissingName => ErrorCode::MissingTool,
            CallError::UnknownTool(_) => ErrorCode::UnknownTool,
            CallError::NotExposed { .. } => ErrorCode::ToolNotGranted,
            CallError::Catalogue(_) => ErrorCode::ToolRegistryUnavailable,
        }
    }

    /// The JSON-RPC error for refusals that are protocol errors: an unknown tool is -32602
    /// `"Unknown tool: <name>"` with `data.code: "unknown_tool"`. `None` for refusals that are
    /// tool results ([`CallError::tool_result`]).
    pub fn protocol_error(&self) -> Option<ErrorData> {
        match self {
            CallError::UnknownTool(name) => Some(ErrorData::invalid_params(
                self.to_string(),
                Some(json!({"code": ErrorCode::UnknownTool.as_str(), "name": name})),
            )),
            CallError::MissingName | CallError::NotExposed { .. } | CallError::Catalogue(_) => None,
        }
    }

    /// The tool result for refusals the model can act on (missing name, `mcp: false` command,
    /// unusable manifest), addressed to the caller's runtime and request id; `None` for an
    /// unknown tool ([`CallError::protocol_error`]).
    pub fn tool_result(&self, runtime: &str, request_id: &str) -> Option<ToolResult> {
        match self {
            CallError::UnknownTool(_) => None,
            CallError::MissingName => Some(ToolResult::failure(
                runtime,
                request_id,
                self.code(),
                "tools/call needs a `name`: one of the names tools/list returns",
            )),
            CallError::NotExposed { name, command } => {
                let mut details = Map::new();
                details.insert("policy".into(), json!("transport_not_allowed"));
                details.insert("tool".into(), json!(command));
                details.insert("requested".into(), json!(name));
                Some(
                    ToolResult::failure(
                        runtime,
                        request_id,
                        self.code(),
                        format!("{command} is never available over MCP (manifest `mcp: false`)"),
                    )
                    .with_details(details),
                )
            }
            CallError::Catalogue(_) => Some(ToolResult::failure(
                runtime,
                request_id,
                self.code(),
                "the tool list is unavailable",
            )),
        }
    }
}
