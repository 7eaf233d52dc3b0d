//! `tools.list` and `tools.invoke`.
//!
//! The wait for a confirmation's final result is the bridge's (`wait_for_final`, stopped by
//! the daemon's shutdown); this module only chooses how the answer travels: as the response
//! (`wait: true`, the default) or as a `runtime.tool.result` event after an immediate
//! `needs_confirmation` response (`wait: false`).

use std::sync::Arc;

use openphone_core::{Invocation, Waited, waiting_on};
use openphone_protocol::endpoint::{
    Event, ToolInfo, ToolsInvokeParams, ToolsInvokeResult, ToolsListResult,
};
use openphone_protocol::{ToolRequest, ToolResult};
use serde_json::{Map, Value};

use crate::conn::{Conn, Out};
use crate::lock::lock;
use crate::shutdown::stopped;

/// `tools.list {}` (both roles): the commands this caller may use.
pub(super) fn list(conn: &Conn) -> ToolsListResult {
    let state = &conn.state;
    let caller = &conn.session.caller;
    let policy = &state.tool_policy;
    let tools = state
        .registry
        .commands()
        .filter(|command| openphone_policy::visible(command, caller, policy))
        .map(|command| ToolInfo {
            name: command.name.clone(),
            aliases: command.aliases.clone(),
            android_tool: command.android_tool.clone(),
            description: command.description.clone(),
            category: command.category.clone(),
            input_schema: command.input_schema.clone(),
            risk: command.risk,
            confirmation: command.confirmation,
            default_exposure: command.default_exposure,
            mutating: openphone_policy::is_mutating(command),
            supported: state.bridge.offers(command),
        })
        .collect();
    ToolsListResult { tools }
}

/// `tools.invoke {request_id, tool, params, …, wait?}` (both roles): one tool request through
/// the bridge. A request needing confirmation is answered when final with `wait` (the
/// default; on shutdown with its `needs_confirmation` result, the confirmation staying
/// durable), or at once without it, the final result following as a `runtime.tool.result`
/// event.
pub(super) async fn invoke(conn: &Arc<Conn>, p: ToolsInvokeParams) -> ToolsInvokeResult {
    let caller = conn.session.caller.clone();
    let device = p.device_id.clone();
    let request = ToolRequest {
        request_id: p.request_id,
        runtime: Some(caller.runtime.clone()),
        runtime_session_id: p.runtime_session_id.unwrap_or_default(),
        phone_session_id: p.phone_session_id,
        tool: p.tool,
        params: p.params.unwrap_or_else(|| Value::Object(Map::new())),
        reason: p.reason,
        autonomy: p.autonomy,
        idempotency_key: p.idempotency_key,
        timeout_ms: p.timeout_ms,
    };
    let bridge = conn.state.bridge.clone();
    // The answer is written as JSON text (`ToolResult::to_json_text`), so a read's result may
    // come back as the text the phone kept, never built as an object here.
    let first = bridge
        .call(
            Invocation::runtime(&caller, request)
                .on_device(device)
                .answered_as_text(),
        )
        .await;
    if waiting_on(&first).is_none() {
        return first;
    }
    if p.wait.unwrap_or(true) {
        let mut shutdown = conn.state.shutdown.clone();
        return bridge
            .wait_for_final(&first, stopped(&mut shutdown))
            .await
            .into_result();
    }
    tokio::spawn(follow_up(Arc::downgrade(conn), first.clone()));
    first
}

/// The `wait: false` follow-up: waits for the final result of `first` and sends it as a
/// `runtime.tool.result` event, unless the connection is gone, the daemon stops first, or the
/// connection subscribed to that event on the bus (which delivers it already).
async fn follow_up(conn: std::sync::Weak<Conn>, first: ToolResult) {
    let (bridge, mut shutdown) = match conn.upgrade() {
        Some(c) => (c.state.bridge.clone(), c.state.shutdown.clone()),
        None => return,
    };
    let result = match bridge.wait_for_final(&first, stopped(&mut shutdown)).await {
        Waited::Final(result) => result,
        Waited::Stopped(_) => return,
    };
    let Some(c) = conn.upgrade() else {
        return;
    };
    let event = Event::ToolResult(result);
    if lock(&c.subscriptions).contains(event.name()) {
        return;
    }
    let out = c.out.clone();
    drop(c);
    let _ = out.send(Out::Event(Box::new(event))).await;
}
