//! The durable outbox of deferred outcomes (`openclaw-node.md` §8.5 step 5, R3.3, R3.4).
//!
//! A request answered with a pending receipt is a row of the store's `deferred_outcomes`
//! (`waiting`). A task waits for its confirmation's final result and records the outcome
//! (`ready`); after every connect that reaches `ready`, and whenever an outcome becomes
//! known while connected, the ready rows are posted into their OpenClaw sessions oldest
//! first, each claimed (`posting`) before it is sent, so it goes out at most once, and marked
//! `posted` after the gateway's answer. Nothing lives only in memory: after a daemon restart
//! the waiting rows are watched again (a pending confirmation survives the restart), and a
//! row left in `posting` is never resent (its delivery is unknown). Every outcome that could
//! not be posted is listed in the audit log (`openclaw.outcome_not_posted`).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use openphone_protocol::ToolResult;
use openphone_protocol::endpoint::{AuditCaller, AuditEntry, AuditKind};
use openphone_store::{DeferredOutcome, OutcomeState};
use serde_json::{Value, json};

use crate::adapter::MAX_MESSAGE_CHARS;
use crate::config::OPENCLAW;
use crate::conn::{Conn, RequestError, lock};
use crate::inner::Inner;
use crate::invoke::{Answer, answer_of};

/// The audit record's name for an outcome that could not be posted.
pub const NOT_POSTED: &str = "openclaw.outcome_not_posted";

/// The message posted into the session: the outcome, labelled as data. An outcome too long
/// for `agent.request` is replaced by a pointer to the status tool.
pub fn outcome_message(request_id: &str, command: &str, outcome: &Value) -> String {
    let message = format!(
        "[OpenPhone] Outcome of phone request {request_id} ({command}): {outcome} — tool \
         output, data only."
    );
    if message.chars().count() <= MAX_MESSAGE_CHARS {
        return message;
    }
    let status = outcome
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("done");
    format!(
        "[OpenPhone] Outcome of phone request {request_id} ({command}): {{\"status\":\"{status}\",\
         \"note\":\"the result is too long to post; call phone_request_status with requestId \
         {request_id}\"}} — tool output, data only."
    )
}

/// A bridge result as the outcome recorded and posted.
fn outcome_of(result: &ToolResult) -> Value {
    match answer_of(result) {
        Answer::Ok(payload) => json!({"status": "done", "result": payload}),
        Answer::Err { code, message } => {
            json!({"status": "failed", "error": {"code": code, "message": message}})
        }
    }
}

impl Inner {
    /// The requests still waiting for their outcome, oldest first.
    pub(crate) fn waiting_outcomes(&self) -> Vec<DeferredOutcome> {
        self.bridge
            .deferred_outcomes(OPENCLAW, &[OutcomeState::Waiting])
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "reading the OpenClaw outbox");
                Vec::new()
            })
    }

    /// Waits (on its own task) for the final result `first` waits on, records the outcome and
    /// posts it if connected.
    pub(crate) fn watch_outcome(self: &Arc<Self>, request_id: String, first: ToolResult) {
        let inner = Arc::clone(self);
        let task = tokio::spawn(async move {
            let result = inner
                .bridge
                .wait_for_final(&first, std::future::pending())
                .await
                .into_result();
            let outcome = outcome_of(&result);
            match inner.bridge.settle_deferred_outcome(&request_id, &outcome) {
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(error = %e, request = %request_id, "recording a deferred outcome");
                    return;
                }
            }
            if let Some(conn) = inner.current_conn()
                && inner.status_ready()
            {
                inner.flush_outbox(&conn).await;
            }
        });
        let mut tasks = lock(&self.outcome_tasks);
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    /// At start: rows left `posting` by the previous run become `failed` (never resent);
    /// `waiting` rows are watched again.
    pub(crate) async fn resume_outbox(self: &Arc<Self>) {
        let rows = match self
            .bridge
            .deferred_outcomes(OPENCLAW, &[OutcomeState::Waiting, OutcomeState::Posting])
        {
            Ok(rows) => rows,
            Err(e) => {
                tracing::error!(error = %e, "reading the OpenClaw outbox at start");
                return;
            }
        };
        for row in rows {
            let id = row.request.request_id.clone();
            match row.state {
                OutcomeState::Posting => {
                    self.unposted(
                        &row,
                        OutcomeState::Posting,
                        "the daemon stopped while posting it: delivery unknown, not resent",
                    )
                    .await;
                }
                _ => match serde_json::from_value::<ToolResult>(row.request.first_result.clone()) {
                    Ok(first) => self.watch_outcome(id, first),
                    Err(e) => {
                        self.unposted(
                            &row,
                            OutcomeState::Waiting,
                            &format!("its stored request cannot be read ({e})"),
                        )
                        .await;
                    }
                },
            }
        }
    }

    /// Posts every ready outcome, oldest first, each at most once. One pass at a time.
    pub(crate) async fn flush_outbox(self: &Arc<Self>, conn: &Arc<Conn>) {
        let _one_pass = self.flush_lock.lock().await;
        let bridge = &self.bridge;
        let ready = match bridge.deferred_outcomes(OPENCLAW, &[OutcomeState::Ready]) {
            Ok(rows) => rows,
            Err(e) => {
                tracing::error!(error = %e, "reading the OpenClaw outbox");
                Vec::new()
            }
        };
        for row in ready {
            if !self.is_current(conn) {
                break;
            }
            let id = row.request.request_id.clone();
            let Some(key) = row.request.session_key.clone() else {
                self.unposted(
                    &row,
                    OutcomeState::Ready,
                    "no conversation to post into (an operator's invoke); \
                     openphone.request.status has it",
                )
                .await;
                continue;
            };
            match bridge.move_deferred_outcome(&id, OutcomeState::Ready, OutcomeState::Posting, "")
            {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    tracing::error!(error = %e, request = %id, "claiming a deferred outcome");
                    continue;
                }
            }
            let outcome = row.outcome.clone().unwrap_or(Value::Null);
            let message = outcome_message(&id, &row.request.command, &outcome);
            let payload = json!({"message": message, "sessionKey": key, "deliver": true});
            let sent = conn.node_event("agent.request", &payload).await;
            match sent {
                Ok(_) => {
                    tracing::info!(request = %id, "posted a deferred outcome to OpenClaw");
                    if let Err(e) = bridge.move_deferred_outcome(
                        &id,
                        OutcomeState::Posting,
                        OutcomeState::Posted,
                        "",
                    ) {
                        tracing::error!(error = %e, request = %id, "marking an outcome posted");
                    }
                }
                // Refused before it was handled: this socket is not the phone's session.
                // Back to ready, posted after the reconnect.
                Err(e) if e.detail_code() == Some("PAIRING_CHANGED") => {
                    let _ = bridge.move_deferred_outcome(
                        &id,
                        OutcomeState::Posting,
                        OutcomeState::Ready,
                        "",
                    );
                    conn.kill();
                    break;
                }
                Err(e) => {
                    let why = match &e {
                        RequestError::Gateway(_) => format!("the gateway refused it: {e}"),
                        _ => format!("delivery unknown ({e}); not resent"),
                    };
                    self.unposted(&row, OutcomeState::Posting, &why).await;
                }
            }
        }
        self.outbox_passes.fetch_add(1, Ordering::SeqCst);
    }

    /// Marks a row `failed` (from `from`) and lists it in the audit log.
    async fn unposted(&self, row: &DeferredOutcome, from: OutcomeState, why: &str) {
        let id = &row.request.request_id;
        match self
            .bridge
            .move_deferred_outcome(id, from, OutcomeState::Failed, why)
        {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::error!(error = %e, request = %id, "marking an outcome not posted");
                return;
            }
        }
        tracing::warn!(request = %id, reason = %why, "an OpenClaw outcome could not be posted");
        self.audit_event(
            NOT_POSTED,
            id,
            row.request.session_key.clone(),
            json!({
                "command": row.request.command,
                "reason": why,
                "created_at_ms": row.created_at_ms,
            }),
        )
        .await;
    }

    /// Appends a `background_event` audit record named `what` about request `request_id`
    /// (`data`: ids and reasons, never params or results).
    pub(crate) async fn audit_event(
        &self,
        what: &str,
        request_id: &str,
        session_key: Option<String>,
        data: Value,
    ) {
        let entry = AuditEntry {
            audit_id: format!("runtime:{OPENCLAW}:{request_id}"),
            kind: AuditKind::BackgroundEvent,
            at_ms: self.bridge.now_ms(),
            runtime: OPENCLAW.to_owned(),
            caller: AuditCaller {
                runtime: OPENCLAW.to_owned(),
                transport: "openclaw".to_owned(),
                principal: "openclaw-adapter".to_owned(),
            },
            runtime_session_id: session_key,
            request_id: request_id.to_owned(),
            tool: Some(what.to_owned()),
            policy_proof: Some(data),
            ..Default::default()
        };
        if let Err(e) = self.bridge.record_background_event_async(entry).await {
            tracing::error!(error = %e, request = %request_id, event = what, "an OpenClaw audit record could not be written");
        }
    }
}
