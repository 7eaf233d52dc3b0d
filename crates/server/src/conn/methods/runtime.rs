//! The runtime methods: `attention.request`, `runtime.message`, `runtime.list` and
//! `runtime.select`, translated between the protocol's types and the runtime manager's.

use std::sync::Arc;

use openphone_core::{RuntimeError, RuntimeStatus};
use openphone_policy::{Context, Role};
use openphone_protocol::endpoint::{
    AttentionAccepted, AttentionRequestParams, AttentionStatus, ErrorObject, ManagerStatus,
    RuntimeInfo, RuntimeKind, RuntimeListResult, RuntimeMessageParams, RuntimeMessageResult,
    RuntimeSelectParams, RuntimeSelectResult, RuntimeState, Surface,
};
use openphone_protocol::{ErrorCode, ToolRequest, ToolStatus};
use serde_json::{Map, Value};

use super::forbidden;
use crate::conn::{Conn, internal};

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

/// `attention.request {surface, text, runtime?, autonomy?, include_screen?, context?}`
/// (operator): a phone session routed to a runtime, which receives
/// `runtime.attention.requested`.
pub(super) async fn attention_request(
    conn: &Arc<Conn>,
    p: AttentionRequestParams,
) -> Result<AttentionAccepted, ErrorObject> {
    let mut req = openphone_core::AttentionRequest {
        surface: p.surface,
        text: p.text,
        runtime: p.runtime,
        autonomy: p.autonomy,
        include_screen: p.include_screen,
        context: p.context,
        screen: None,
    };
    if req.include_screen {
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
            .invoke(&conn.session.caller, read, Context::Interactive)
            .await;
        if result.status == ToolStatus::Ok {
            req.screen = Some(Value::Object(result.result));
        }
    }
    let accepted = conn
        .state
        .runtimes
        .request_attention(req)
        .map_err(runtime_error)?;
    let status = AttentionStatus::parse(&accepted.status)
        .ok_or_else(|| internal(format!("attention status {:?}", accepted.status)))?;
    Ok(AttentionAccepted {
        ok: accepted.ok,
        status,
        message: accepted.message,
        phone_session_id: accepted.phone_session_id,
        attention_id: accepted.attention_id,
        runtime: accepted.runtime,
        runtime_session_id: accepted.runtime_session_id,
    })
}

/// `runtime.message {phone_session_id, runtime_session_id?, text, final, output?, error?}`
/// (runtime): a reply for one of the caller's own sessions.
pub(super) fn message(
    conn: &Conn,
    p: RuntimeMessageParams,
) -> Result<RuntimeMessageResult, ErrorObject> {
    let msg = openphone_core::RuntimeMessage {
        phone_session_id: p.phone_session_id,
        runtime_session_id: p.runtime_session_id,
        text: p.text,
        is_final: p.is_final,
        output: p.output,
        error: p.error,
    };
    let session = conn
        .state
        .runtimes
        .runtime_message(&conn.session.caller.runtime, msg)
        .map_err(runtime_error)?;
    Ok(RuntimeMessageResult {
        phone_session_id: session.phone_session_id,
        status: session.status,
    })
}

/// `runtime.list {}` (operator): the runtimes, their status and routed surfaces.
pub(super) fn list(conn: &Conn) -> Result<RuntimeListResult, ErrorObject> {
    let runtimes = &conn.state.runtimes;
    let aggregate = runtimes.aggregate_status();
    let status = ManagerStatus::parse(aggregate)
        .ok_or_else(|| internal(format!("runtime manager status {aggregate:?}")))?;
    let runtimes = runtimes
        .list()
        .into_iter()
        .map(runtime_info)
        .collect::<Result<_, _>>()?;
    Ok(RuntimeListResult { status, runtimes })
}

/// One runtime as the protocol lists it.
fn runtime_info(r: RuntimeStatus) -> Result<RuntimeInfo, ErrorObject> {
    let status = RuntimeState::parse(&r.status)
        .ok_or_else(|| internal(format!("runtime status {:?}", r.status)))?;
    let surfaces = r
        .surfaces
        .iter()
        .map(|s| Surface::parse(s).ok_or_else(|| internal(format!("surface {s:?}"))))
        .collect::<Result<_, _>>()?;
    Ok(RuntimeInfo {
        id: r.id,
        kind: match r.kind {
            openphone_core::RuntimeKind::Builtin => RuntimeKind::Builtin,
            openphone_core::RuntimeKind::Websocket => RuntimeKind::Websocket,
        },
        enabled: r.enabled,
        status,
        connections: r.connections,
        surfaces,
    })
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
    let route = match surface {
        Surface::Chat => openphone_core::Surface::Chat,
        Surface::Volume => openphone_core::Surface::Volume,
        Surface::Background => openphone_core::Surface::Background,
    };
    let runtimes = &conn.state.runtimes;
    runtimes.select(route, &p.runtime).map_err(runtime_error)?;
    Ok(RuntimeSelectResult {
        surface,
        runtime: runtimes.routed(route),
    })
}
