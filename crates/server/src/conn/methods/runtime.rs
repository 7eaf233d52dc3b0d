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

/// The `device_id` member of a request's params, when it names one (a string); anything else
/// there is `invalid_params`.
pub(super) fn named_device(params: &Map<String, Value>) -> Result<Option<String>, ErrorObject> {
    match params.get("device_id") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(id)) if !id.trim().is_empty() => Ok(Some(id.trim().to_owned())),
        Some(other) => Err(ErrorObject::invalid_params(format!(
            "device_id must name a phone (a non-empty string), not {other}"
        ))),
    }
}

/// `attention.request {surface, text, runtime?, autonomy?, include_screen?, context?,
/// session_target?, device_id?}` (operator): a phone session (new, or the one `session_target`
/// continues) routed to a runtime, which receives `runtime.attention.requested`; the built-in
/// runtime is handed it directly. The session is bound to the phone `device` names (else the
/// only one its runtime is granted): its calls that name none go to it.
pub(super) async fn attention_request(
    conn: &Arc<Conn>,
    p: AttentionRequestParams,
    device: Option<String>,
) -> Result<AttentionAccepted, ErrorObject> {
    let bridge = &conn.state.bridge;
    if let Some(id) = device.as_deref() {
        bridge
            .devices()
            .resolve(Some(id))
            .map_err(|e| ErrorObject::invalid_params(e.to_string()))?;
    }
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
            .call(Invocation::runtime(&conn.session.caller, read).on_device(device.clone()))
            .await;
        if result.status == ToolStatus::Ok {
            screen = Some(Value::Object(result.result));
        }
    }
    let accepted = conn
        .state
        .runtimes
        .request_attention(p, screen)
        .map_err(runtime_error)?;
    if let Err(e) = bridge.bind_session_device(
        &accepted.phone_session_id,
        &accepted.runtime,
        device.as_deref(),
    ) {
        tracing::error!(session = %accepted.phone_session_id, error = %e,
            "binding a phone session to its phone");
    }
    Ok(accepted)
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
