//! `tools.list` and `tools.invoke`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::NoParams;
use crate::manifest::{Confirmation, Exposure, Risk};
use crate::tool_result::ToolResult;

/// `tools.list` params: none (any fields are ignored).
pub type ToolsListParams = NoParams;

/// One command as `tools.list` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolInfo {
    /// Canonical name, `openphone.<area>.<verb>`.
    pub name: String,
    pub aliases: Vec<String>,
    /// Model-tool (snake_case) name.
    pub android_tool: String,
    pub description: String,
    pub category: String,
    /// The command's input JSON Schema.
    pub input_schema: Value,
    pub risk: Risk,
    pub confirmation: Confirmation,
    pub default_exposure: Exposure,
    /// Whether the command changes state.
    pub mutating: bool,
    /// Whether the phone's backend executes it.
    pub supported: bool,
}

/// `tools.list` result: the commands this caller may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolsListResult {
    pub tools: Vec<ToolInfo>,
}

/// `tools.invoke` params. Unknown fields are refused; missing `request_id` and `tool` are
/// empty (the bridge answers them with a tool result, not a JSON-RPC error).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolsInvokeParams {
    #[serde(default)]
    pub request_id: String,
    #[serde(default)]
    pub tool: String,
    /// The command's params object (absent: `{}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone_session_id: Option<String>,
    /// Requested autonomy, normalised leniently by the bridge (so a string, not
    /// [`crate::Autonomy`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autonomy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Confirmation timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<i64>,
    /// Wait for the final result (default `true`); with `false` a request needing
    /// confirmation is answered at once and its final result follows as a
    /// `runtime.tool.result` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<bool>,
    /// The phone to act on (`devices.list`): needed when the daemon drives several; with
    /// one, absent means that one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
}

/// `tools.invoke` result: the tool result (non-`ok` outcomes are results, not JSON-RPC errors).
pub type ToolsInvokeResult = ToolResult;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn invoke_params_default_and_refuse_unknown_fields() {
        let p: ToolsInvokeParams = serde_json::from_value(json!({})).unwrap();
        assert_eq!(p, ToolsInvokeParams::default());
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"request_id": "", "tool": ""})
        );
        let err = serde_json::from_value::<ToolsInvokeParams>(json!({"tol": "x"})).unwrap_err();
        assert!(err.to_string().contains("unknown field `tol`"), "{err}");
    }
}
