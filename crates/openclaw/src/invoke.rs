//! Invocations (`openclaw-node.md` §8): `node.invoke.request` → the ToolBridge as runtime
//! `openclaw` → exactly one `node.invoke.result` before the gateway's deadline.
//!
//! The invoke's `idempotencyKey` is the bridge request's identity key, so a replayed invoke
//! answers from the recorded result and never runs twice. A request that waits for the user's
//! confirmation is held until the deadline (`timeoutMs` minus a margin); if the user has not
//! decided by then, the answer is an `ok:true` pending receipt, and the outcome is posted into
//! the OpenClaw session when the user decides (deferral, §8.5; the durable outbox is
//! `outbox.rs`). While it is held, an empty progress chunk goes out every
//! `progress_every_ms`. While it is pending, the same command with the same params from the
//! same session attaches to it instead of asking twice. A command still executing at the
//! deadline is answered `TIMEOUT` (it finishes, and its result is replayable by the key).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use openphone_core::{Invocation, Waited, waiting_on};
use openphone_protocol::{ErrorCode, ToolRequest, ToolResult, ToolStatus};
use openphone_store::NewDeferredOutcome;
use serde_json::{Map, Value, json};

use crate::config::OPENCLAW;
use crate::conn::Conn;
use crate::inner::Inner;
use crate::surface::REQUEST_STATUS;

/// The answer to one invoke.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Ok(Value),
    Err { code: String, message: String },
}

impl Answer {
    fn err(code: &str, message: impl Into<String>) -> Answer {
        Answer::Err {
            code: code.to_owned(),
            message: message.into(),
        }
    }

    /// The `node.invoke.result` params (payload as `payloadJSON`, no `error` when ok).
    pub fn result_params(&self, id: &str, node_id: &str) -> Value {
        match self {
            Answer::Ok(payload) => json!({
                "id": id, "nodeId": node_id, "ok": true, "payloadJSON": payload.to_string(),
            }),
            Answer::Err { code, message } => json!({
                "id": id, "nodeId": node_id, "ok": false,
                "error": {"code": code, "message": message},
            }),
        }
    }
}

/// The audit record's name for a result the gateway ignored (it had given up).
pub const LATE_RESULT: &str = "openclaw.invoke_result_late";

/// One invoke being answered.
struct Call<'a> {
    conn: &'a Arc<Conn>,
    id: &'a str,
    command: &'a str,
    session_key: Option<String>,
    idempotency_key: Option<String>,
    /// When the answer must be out.
    deadline: Instant,
}

/// The hold before answering: `timeoutMs` minus `max(1 500 ms, 5 %)`; absent → 30 000;
/// `0` → the configured ceiling.
pub fn hold_for(timeout_ms: Option<u64>, ceiling_ms: u64) -> Duration {
    let timeout = match timeout_ms {
        None => 30_000,
        Some(0) => return Duration::from_millis(ceiling_ms),
        Some(t) => t,
    };
    let margin = (timeout / 20).max(1_500);
    Duration::from_millis(timeout.saturating_sub(margin))
}

/// The adapter's code for a bridge result that is not ok (§8.3 table).
pub fn error_code(result: &ToolResult) -> &'static str {
    let code = result.error.as_ref().map(|e| e.code);
    match (result.status, code) {
        (_, Some(ErrorCode::InvalidParams)) => "INVALID_PARAMS",
        (
            _,
            Some(
                ErrorCode::UnknownTool
                | ErrorCode::UnknownCommand
                | ErrorCode::ToolNotSupportedByPhonePlatform,
            ),
        ) => "UNSUPPORTED_COMMAND",
        (_, Some(ErrorCode::UserDeniedConfirmation)) => "USER_DENIED",
        (ToolStatus::Timeout, _) | (_, Some(ErrorCode::Timeout)) => "CONFIRMATION_TIMEOUT",
        (_, Some(ErrorCode::Cancelled | ErrorCode::ConfirmationCancelled)) => "CANCELLED",
        (_, Some(ErrorCode::RateLimited)) => "BUSY",
        (_, Some(ErrorCode::DaemonUnavailable | ErrorCode::FrameworkUnavailable)) => "UNAVAILABLE",
        (ToolStatus::Denied, _) => "PHONE_POLICY_DENIED",
        (ToolStatus::Cancelled, _) => "CANCELLED",
        _ => "INTERNAL",
    }
}

/// A bridge result as an invoke answer.
pub fn answer_of(result: &ToolResult) -> Answer {
    if result.status == ToolStatus::Ok {
        let mut payload = result.result.clone();
        if result.replayed {
            payload.insert("replayed".into(), Value::Bool(true));
        }
        return Answer::Ok(Value::Object(payload));
    }
    let (code, message) = match &result.error {
        Some(e) => (e.code.as_str(), e.message.clone()),
        None => (
            result.status.as_str(),
            "the phone refused this request".into(),
        ),
    };
    let ours = error_code(result);
    let message = match ours {
        "USER_DENIED" => format!("The user declined this action on the phone. ({message})"),
        "PHONE_POLICY_DENIED" => format!(
            "OpenPhone policy denied this request [{code}]: {message}. The user can change \
             this on the phone."
        ),
        _ => format!("[{code}] {message}"),
    };
    Answer::err(ours, message)
}

fn params_key(params: &Value) -> String {
    openphone_protocol::canonical_json(params).unwrap_or_else(|_| params.to_string())
}

impl Inner {
    /// Handles one `node.invoke.request` and sends its result.
    pub(crate) async fn handle_invoke(self: &Arc<Self>, conn: &Arc<Conn>, payload: Value) {
        let str_of = |k: &str| payload.get(k).and_then(Value::as_str).map(str::to_owned);
        let Some(id) = str_of("id") else {
            tracing::warn!("node.invoke.request without an id ignored");
            return;
        };
        let node_id = str_of("nodeId").unwrap_or_default();
        let device_id = self.identity.device_id();
        if node_id != device_id {
            tracing::warn!(%node_id, "node.invoke.request for another node ignored");
            return;
        }
        let command = str_of("command").unwrap_or_default();
        let session_key = str_of("sessionKey").filter(|k| !k.is_empty());
        let idempotency_key = str_of("idempotencyKey").filter(|k| !k.is_empty());
        let hold = hold_for(
            payload.get("timeoutMs").and_then(Value::as_u64),
            self.config.invoke_ceiling_ms,
        );
        // Measured from receipt: every answer goes out before it (R2.1).
        let deadline = tokio::time::sleep(hold).deadline();
        let params = match payload.get("paramsJSON") {
            None | Some(Value::Null) => Ok(Value::Object(Map::new())),
            Some(Value::String(text)) => serde_json::from_str::<Value>(text)
                .map_err(|e| format!("paramsJSON is not JSON: {e}")),
            Some(_) => Err("paramsJSON must be a JSON string".to_owned()),
        }
        .and_then(|v| match v {
            Value::Object(_) => Ok(v),
            Value::Null => Ok(Value::Object(Map::new())),
            _ => Err("params must be a JSON object".to_owned()),
        });
        let answer = match params {
            Err(message) => Answer::err("INVALID_PARAMS", message),
            Ok(params) => {
                let call = Call {
                    conn,
                    id: &id,
                    command: &command,
                    session_key,
                    idempotency_key,
                    deadline,
                };
                self.answer_invoke(call, params).await
            }
        };
        match conn
            .request("node.invoke.result", answer.result_params(&id, &device_id))
            .await
        {
            Ok(reply) if reply.get("ignored").and_then(Value::as_bool) == Some(true) => {
                tracing::warn!(invoke = %id, %command, "late invoke result: the gateway had already given up");
                self.audit_event(
                    LATE_RESULT,
                    &id,
                    None,
                    json!({"command": command, "reason": "the gateway answered ignored:true"}),
                )
                .await;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, invoke = %id, "sending node.invoke.result"),
        }
    }

    async fn answer_invoke(self: &Arc<Self>, call: Call<'_>, params: Value) -> Answer {
        let Call {
            conn,
            id,
            command,
            session_key,
            idempotency_key,
            deadline,
        } = call;
        if command == REQUEST_STATUS {
            return self.request_status(&params);
        }
        if self.surface.get(command).is_none() {
            return Answer::err(
                "UNSUPPORTED_COMMAND",
                format!(
                    "{command:?} is not a command this phone declared; use one of its \
                     published phone_* tools"
                ),
            );
        }
        let digest = params_key(&params);
        // A retry of a request still waiting for the user attaches to it (§8.5 step 7).
        let attached = self
            .waiting_outcomes()
            .into_iter()
            .find(|d| {
                d.request.command == command
                    && d.request.params_digest == digest
                    && d.request.session_key == session_key
            })
            .map(|d| d.request.receipt);
        if let Some(receipt) = attached {
            return Answer::Ok(receipt);
        }
        let (phone_session_id, autonomy) = match session_key
            .as_deref()
            .and_then(|k| self.phone_session_for_key(k))
        {
            Some((id, autonomy)) => (Some(id), Some(autonomy)),
            None => (None, None),
        };
        let request = ToolRequest {
            request_id: id.to_owned(),
            runtime: Some(OPENCLAW.to_owned()),
            runtime_session_id: session_key
                .clone()
                .unwrap_or_else(|| "openclaw-operator".to_owned()),
            phone_session_id,
            tool: command.to_owned(),
            params,
            reason: Some(match &session_key {
                Some(key) => format!("requested by OpenClaw agent (session {key})"),
                None => "requested by an OpenClaw operator".to_owned(),
            }),
            autonomy,
            idempotency_key,
            timeout_ms: Some(self.config.confirmation_timeout_ms),
        };
        // The bridge runs on its own task: past the deadline the answer is our own TIMEOUT,
        // and the work still finishes and records its result (replayable by the key).
        let bridge = Arc::clone(&self.bridge);
        let caller = self.caller.clone();
        let work =
            tokio::spawn(async move { bridge.call(Invocation::openclaw(&caller, request)).await });
        let first = match tokio::time::timeout_at(deadline, work).await {
            Ok(Ok(first)) => first,
            Ok(Err(e)) => {
                tracing::error!(error = %e, invoke = %id, "an OpenClaw invoke's handler failed");
                return Answer::err(
                    "INTERNAL",
                    format!("the phone's handler failed; correlation id {id}"),
                );
            }
            Err(_) => {
                return Answer::err(
                    "TIMEOUT",
                    format!(
                        "The phone did not finish {command} before the gateway's deadline. It \
                         keeps running and its result is recorded: repeating this call with \
                         the same idempotency key returns it without running it again."
                    ),
                );
            }
        };
        let Some(confirmation_id) = waiting_on(&first) else {
            return answer_of(&first);
        };
        // Held for the user, with an empty progress chunk now and then (§8.4, §8.5 step 2).
        let wait = self
            .bridge
            .wait_for_final(&first, tokio::time::sleep_until(deadline));
        tokio::pin!(wait);
        let waited = tokio::select! {
            waited = &mut wait => waited,
            () = self.keep_alive(conn, id) => wait.await,
        };
        match waited {
            Waited::Final(result) => answer_of(&result),
            Waited::Stopped(first) => {
                self.defer(&confirmation_id, command, &digest, session_key, first)
            }
        }
    }

    /// Sends an empty `node.invoke.progress` chunk every `progress_every_ms` (never more than
    /// one a second), `seq` from 0, until dropped.
    async fn keep_alive(&self, conn: &Arc<Conn>, id: &str) {
        let every = Duration::from_millis(self.config.progress_every_ms.max(1_000));
        let node_id = self.identity.device_id();
        let mut seq = 0u64;
        loop {
            tokio::time::sleep(every).await;
            conn.send_only(
                "node.invoke.progress",
                json!({"invokeId": id, "nodeId": node_id, "seq": seq, "chunk": ""}),
            );
            seq += 1;
        }
    }

    /// Answers with a pending receipt; the request goes into the durable outbox, and its
    /// outcome is posted when the user decides (`outbox.rs`).
    fn defer(
        self: &Arc<Self>,
        confirmation_id: &str,
        command: &str,
        digest: &str,
        session_key: Option<String>,
        first: ToolResult,
    ) -> Answer {
        let expires = first
            .pending_confirmation()
            .and_then(|p| p.expires_at_ms)
            .unwrap_or_default();
        let receipt = json!({
            "status": "pending_confirmation",
            "requestId": confirmation_id,
            "command": command,
            "expiresAtMs": expires,
            "note": "Waiting for the user to approve on the phone. Do not repeat this call; \
                     the outcome will be posted to this conversation. Use phone_request_status \
                     with requestId to check.",
        });
        let entry = NewDeferredOutcome {
            runtime: OPENCLAW.to_owned(),
            request_id: confirmation_id.to_owned(),
            command: command.to_owned(),
            params_digest: digest.to_owned(),
            session_key,
            receipt: receipt.clone(),
            first_result: serde_json::to_value(&first).unwrap_or(Value::Null),
        };
        if let Err(e) = self.bridge.defer_outcome(&entry) {
            // Without its outbox row the outcome could not be posted after a restart: say
            // so now instead of promising it.
            tracing::error!(error = %e, request = %confirmation_id, "recording a deferred OpenClaw request");
            return Answer::err(
                "INTERNAL",
                format!(
                    "the phone could not record request {confirmation_id} for a later answer \
                     ({e}); it is still waiting for the user: check it with \
                     phone_request_status"
                ),
            );
        }
        self.watch_outcome(confirmation_id.to_owned(), first);
        Answer::Ok(receipt)
    }

    /// `openphone.request.status {requestId}`.
    fn request_status(&self, params: &Value) -> Answer {
        let Some(request_id) = params.get("requestId").and_then(Value::as_str) else {
            return Answer::err("INVALID_PARAMS", "requestId (a string) is required");
        };
        match self.bridge.deferred_outcome(request_id) {
            Ok(Some(entry)) if entry.request.runtime == OPENCLAW => {
                return Answer::Ok(entry.outcome.unwrap_or(entry.request.receipt));
            }
            Ok(_) => {}
            Err(e) => return Answer::err("INTERNAL", format!("reading the request: {e}")),
        }
        match self.bridge.confirmation(request_id) {
            Ok(Some(record)) => Answer::Ok(json!({
                "status": record.state.as_str(),
                "requestId": request_id,
                "result": record.final_result,
            })),
            Ok(None) => Answer::err("INVALID_PARAMS", format!("no phone request {request_id:?}")),
            Err(e) => Answer::err("INTERNAL", format!("reading the request: {e}")),
        }
    }
}
