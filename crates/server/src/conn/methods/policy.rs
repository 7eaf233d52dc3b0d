//! `policy.explain` (operator): a dry run of one request through the policy stack.
//!
//! The request is decided as the named runtime would have it decided now — under its
//! configured authorisation (enabled, grants, `max_autonomy`), its tool policy and its
//! standing approvals — or, without `runtime`, as this operator connection. Nothing is
//! recorded or executed (`ToolBridge::explain`).

use std::sync::Arc;

use openphone_policy::{Caller, Context, Transport};
use openphone_protocol::endpoint::{ErrorObject, PolicyExplainParams, PolicyExplainResult};
use openphone_protocol::{BUILTIN_RUNTIME_ID, ErrorCode, ToolRequest, normalize_runtime_id};
use serde_json::{Map, Value};

use crate::conn::Conn;

/// The request id and reason a dry run carries (neither is a policy input, both are required
/// by validation).
const DRY_RUN_ID: &str = "policy-explain";
const DRY_RUN_REASON: &str = "policy explain (dry run)";

/// The job id a dry run "inside a background run" names (any job decides the same).
const DRY_RUN_JOB: u64 = 0;

/// `policy.explain {tool, params?, runtime?, autonomy?, phone_session_id?, transport?,
/// background?}` (operator): the explanation of the decision, or the request's validation
/// error, or `runtime_not_configured` for a runtime the configuration does not name.
pub(super) async fn explain(
    conn: &Arc<Conn>,
    p: PolicyExplainParams,
) -> Result<PolicyExplainResult, ErrorObject> {
    let transport = match p.transport.as_deref() {
        Some(raw) => Some(
            Transport::parse(raw)
                .map_err(|e| ErrorObject::new(ErrorCode::InvalidParams, e.to_string()))?,
        ),
        None => None,
    };
    let mut caller = match p.runtime.as_deref() {
        None => conn.session.caller.clone(),
        Some(raw) => runtime_caller(raw)?,
    };
    if let Some(transport) = transport {
        caller.transport = transport;
    }
    let context = if p.background.unwrap_or(false) {
        Context::job(DRY_RUN_JOB)
    } else {
        Context::Interactive
    };
    let request = ToolRequest {
        request_id: DRY_RUN_ID.to_owned(),
        tool: p.tool,
        params: p.params.unwrap_or_else(|| Value::Object(Map::new())),
        reason: Some(DRY_RUN_REASON.to_owned()),
        autonomy: p.autonomy,
        phone_session_id: p.phone_session_id,
        ..ToolRequest::default()
    };
    conn.state
        .bridge
        .explain(&caller, request, context)
        .map_err(|(code, message)| ErrorObject::new(code, message))
}

/// The caller a request of runtime `raw` would have: role runtime, over WebSocket (`builtin`:
/// in-process), its authorisation filled in by the bridge from the configuration.
fn runtime_caller(raw: &str) -> Result<Caller, ErrorObject> {
    let id = normalize_runtime_id(raw)
        .map_err(|e| ErrorObject::new(ErrorCode::InvalidParams, e.to_string()))?;
    Ok(if id == BUILTIN_RUNTIME_ID {
        Caller::builtin("daemon")
    } else {
        Caller::remote(&id, Transport::Websocket, &format!("token:{id}"))
    })
}
