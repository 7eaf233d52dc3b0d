//! The runtime methods: `attention.request`, `runtime.message`, `runtime.list` and
//! `runtime.select`, passed to the runtime manager, which speaks the protocol's types.

use std::sync::Arc;

use openphone_core::{ElevationRefusal, Invocation, RuntimeError};
use openphone_policy::Role;
use openphone_protocol::endpoint::{
    AttentionAccepted, AttentionRequestParams, ErrorObject, RuntimeElevateParams,
    RuntimeElevateResult, RuntimeListResult, RuntimeMessageParams, RuntimeMessageResult,
    RuntimeRevokeElevationParams, RuntimeRevokeElevationResult, RuntimeSelectParams,
    RuntimeSelectResult,
};
use openphone_protocol::{ErrorCode, ToolRequest, ToolStatus};
use serde_json::{Map, Value};

use super::forbidden;
use crate::conn::Conn;

/// A runtime-manager error as a JSON-RPC error with its catalogue code.
fn runtime_error(e: RuntimeError) -> ErrorObject {
    ErrorObject::new(e.code, e.message)
}

/// `forbidden` unless the caller is a runtime.
pub(super) fn runtime_only(conn: &Conn) -> Result<(), ErrorObject> {
    match conn.session.caller.role {
        Role::Runtime => Ok(()),
        Role::Operator => Err(forbidden("runtime.message is for runtimes")),
    }
}

/// `attention.request {surface, text, runtime?, autonomy?, include_screen?, context?,
/// session_target?}` (operator): a phone session (new, or the one `session_target` continues)
/// routed to a runtime, which receives `runtime.attention.requested`; the built-in runtime is
/// handed it directly.
pub(super) async fn attention_request(
    conn: &Arc<Conn>,
    p: AttentionRequestParams,
) -> Result<AttentionAccepted, ErrorObject> {
    let mut screen = None;
    if p.include_screen {
        // The screen preflight is a read through the bridge (audited like any other).
        let mut params = Map::new();
        params.insert(
            "reason".into(),
            Value::from("screen attached to an attention request"),
        );
        params.insert("include_screenshot".into(), Value::Bool(false));
        let read = ToolRequest {
            request_id: format!("attention-screen-{}", uuid::Uuid::new_v4()),
            tool: "openphone.screen.get".into(),
            params: Value::Object(params),
            ..ToolRequest::default()
        };
        let result = conn
            .state
            .bridge
            .call(Invocation::runtime(&conn.session.caller, read))
            .await;
        if result.status == ToolStatus::Ok {
            screen = Some(Value::Object(result.result));
        }
    }
    conn.state
        .runtimes
        .request_attention(p, screen)
        .map_err(runtime_error)
}

/// `runtime.message {phone_session_id, runtime_session_id?, text, final, output?, error?}`
/// (runtime): a reply for one of the caller's own sessions.
pub(super) fn message(
    conn: &Conn,
    p: RuntimeMessageParams,
) -> Result<RuntimeMessageResult, ErrorObject> {
    let session = conn
        .state
        .runtimes
        .runtime_message(&conn.session.caller.runtime, p)
        .map_err(runtime_error)?;
    Ok(RuntimeMessageResult {
        phone_session_id: session.phone_session_id,
        status: session.status,
    })
}

/// `runtime.list {}` (operator): the runtimes, their status, routed surfaces and active
/// elevations.
pub(super) fn list(conn: &Conn) -> RuntimeListResult {
    let runtimes = &conn.state.runtimes;
    let elevations = conn.state.bridge.elevations();
    let mut list = runtimes.list();
    for info in &mut list {
        info.elevation = elevations.iter().find(|e| e.runtime == info.id).cloned();
    }
    RuntimeListResult {
        status: runtimes.aggregate_status(),
        runtimes: list,
    }
}

fn elevation_error(e: ElevationRefusal) -> ErrorObject {
    match e {
        ElevationRefusal::Forbidden(m) => forbidden(m),
        ElevationRefusal::Invalid(m) => ErrorObject::new(ErrorCode::InvalidParams, m),
        ElevationRefusal::Unrecorded(m) => ErrorObject::new(ErrorCode::AuditUnavailable, m),
    }
}

/// `runtime.elevate {runtime, to, duration_secs}` (operator): a time-limited raise of one
/// runtime's autonomy ceiling (`openphone_core::elevation`).
pub(super) fn elevate(
    conn: &Conn,
    p: RuntimeElevateParams,
) -> Result<RuntimeElevateResult, ErrorObject> {
    let (elevation, replaced) = conn
        .state
        .bridge
        .elevate(&conn.session.caller, &p.runtime, &p.to, p.duration_secs)
        .map_err(elevation_error)?;
    Ok(RuntimeElevateResult {
        elevation,
        replaced,
    })
}

/// `runtime.revoke_elevation {runtime}` (operator): ends a runtime's elevation now.
pub(super) fn revoke_elevation(
    conn: &Conn,
    p: RuntimeRevokeElevationParams,
) -> Result<RuntimeRevokeElevationResult, ErrorObject> {
    let revoked = conn
        .state
        .bridge
        .revoke_elevation(&conn.session.caller, &p.runtime)
        .map_err(elevation_error)?;
    Ok(RuntimeRevokeElevationResult { revoked })
}

/// `runtime.select {surface, runtime}` (operator): routes a surface to a runtime.
pub(super) fn select(
    conn: &Conn,
    p: RuntimeSelectParams,
) -> Result<RuntimeSelectResult, ErrorObject> {
    let Some(surface) = p.surface() else {
        return Err(ErrorObject::new(
            ErrorCode::InvalidParams,
            format!("unknown surface {:?} (chat, volume, background)", p.surface),
        ));
    };
    let runtimes = &conn.state.runtimes;
    runtimes
        .select(surface, &p.runtime)
        .map_err(runtime_error)?;
    Ok(RuntimeSelectResult {
        surface,
        runtime: runtimes.routed(surface),
    })
}
