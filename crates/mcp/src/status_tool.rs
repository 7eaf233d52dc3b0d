//! `openphone_confirmation_status`: how a host without progress support collects the outcome
//! of a call that answered "pending" (issue 33).
//!
//! Hosts such as Hermes Agent send no progress token and no idempotency key; when the user
//! decides after the inline wait, the call has already answered `pending`. This tool, listed
//! beside the phone's tools, takes the confirmation id of such an answer and returns where it
//! stands: `pending` (after waiting a little for a decision), `approved` with the action's
//! result, `denied`, `expired`, `cancelled`, or `failed` (approved, then the action failed or
//! its outcome is unknown). It only reads: the caller's own runtime's confirmations, never
//! another runtime's (an unknown id and another runtime's id get the same answer).
//!
//! It is a tool of the MCP connection, not a phone command, so it is not in the command
//! manifest (the endpoint has `confirmations.get` for the same question); it runs no policy,
//! opens no confirmation and writes no audit record.

use std::sync::Arc;

use rmcp::model::{JsonObject, MetaObject, Tool, ToolAnnotations};
use serde_json::json;

use crate::catalogue::{META_COMMAND, META_CONFIRMATION, META_EXPOSURE, META_RISK};

/// The exposed name of the status tool.
pub const CONFIRMATION_STATUS_TOOL: &str = "openphone_confirmation_status";
/// Its dotted name, in `_meta["dev.openphone/command"]` and accepted in `tools/call` too.
pub const CONFIRMATION_STATUS_COMMAND: &str = "openphone.confirmation_status";

/// Whether a `tools/call` name is the status tool.
pub fn is_confirmation_status(name: &str) -> bool {
    let name = name.trim();
    name == CONFIRMATION_STATUS_TOOL || name == CONFIRMATION_STATUS_COMMAND
}

/// The tool as `tools/list` shows it.
pub fn confirmation_status_tool() -> Tool {
    let input = json!({
        "type": "object",
        "properties": {
            "confirmation_id": {
                "type": "string",
                "minLength": 1,
                "maxLength": 128,
                "description": "The confirmation id a pending answer named (runtime-confirm-…)."
            },
            "reason": {
                "type": "string",
                "maxLength": 500,
                "description": "Optional; why you ask."
            }
        },
        "required": ["confirmation_id"],
        "additionalProperties": false
    });
    let output = json!({"type": "object", "additionalProperties": true});
    let mut meta = JsonObject::new();
    meta.insert(META_COMMAND.into(), json!(CONFIRMATION_STATUS_COMMAND));
    meta.insert(META_RISK.into(), json!("low"));
    meta.insert(META_CONFIRMATION.into(), json!("none"));
    meta.insert(META_EXPOSURE.into(), json!("safe_read"));
    Tool::new(
        CONFIRMATION_STATUS_TOOL,
        "The outcome of a call that answered that it is waiting for the user's confirmation: \
         pending, approved with the action's result, denied, expired, cancelled or failed. \
         Waits up to about 20 seconds for a decision before answering pending. Use it instead \
         of repeating the call.",
        Arc::new(object_of(input)),
    )
    .with_title("Confirmation Status")
    .with_raw_output_schema(Arc::new(object_of(output)))
    .with_annotations(
        ToolAnnotations::with_title("Confirmation Status")
            .read_only(true)
            .open_world(false),
    )
    .with_meta(MetaObject(meta))
}

fn object_of(value: serde_json::Value) -> JsonObject {
    match value {
        serde_json::Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}
