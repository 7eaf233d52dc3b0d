//! The confirming-host paths (`mcp.md` §7): below the risk floor, a host the user trusts
//! (`trust_client_confirmation`) may decide with its own prompt — `elicitation/create` mid-call
//! in the handshake era, `input_required` with a sealed `requestState` in the 2026-07-28 era —
//! while an operator may still decide on the phone; the first decision wins.

use std::collections::BTreeMap;
use std::pin::Pin;

use openphone_core::{ConfirmDecision, ConfirmingHost};
use openphone_protocol::{Command, Confirmation, ErrorCode, PendingConfirmation, ToolResult};
use rmcp::model::{
    CallToolResponse, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema, InputRequest, InputRequiredResult, ProgressToken,
};
use serde_json::Value;
use tokio::time::Sleep;

use super::seal::SealedConfirmation;
use super::tool_call::Call;
use super::{CONFIRM_INPUT, SOURCE_ELICITATION, SOURCE_INPUT_RESPONSE};

impl Call<'_> {
    /// The question a confirming host puts to its user.
    fn prompt(&self, first: &ToolResult) -> String {
        let summary = first
            .result
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let declared = self.site.client.as_ref().map(|i| i.name.as_str());
        let client = super::tool_call::client_name(&self.caller().runtime, declared);
        format!("OpenPhone: allow {client} to do this on your phone? {summary}")
    }

    /// Handshake era, confirming host: ask through `elicitation/create` while an operator may
    /// still decide on the phone; the first decision wins.
    pub(super) async fn elicit_inline(
        &self,
        first: &ToolResult,
        confirmation_id: &str,
        progress: &Option<ProgressToken>,
        local_deadline: Pin<&mut Sleep>,
    ) -> CallToolResponse {
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: self.prompt(first),
            requested_schema: ElicitationSchema::new(BTreeMap::new()),
        };
        let timeout = self.backend.settings.elicitation_timeout;
        let Some(peer) = &self.site.peer else {
            // No peer to ask (the direct path, which takes no call that could be asked
            // mid-call; kept for safety): the operator surfaces decide, as when a host gives
            // no answer.
            let ended = self.wait(first, progress, local_deadline).await;
            return self.after_wait(first, confirmation_id, ended).await;
        };
        let ask = peer.create_elicitation_with_timeout(params, Some(timeout));
        tokio::pin!(ask);
        // An operator may decide meanwhile; the request's cancellation token ends that wait.
        let operator = self
            .backend
            .bridge
            .wait_for_final(first, self.site.ct.cancelled());
        tokio::pin!(operator);
        let answer = tokio::select! {
            waited = &mut operator => {
                let ended = self.wait_end(waited).await;
                return self.after_wait(first, confirmation_id, ended).await;
            }
            a = &mut ask => a,
        };
        let decision = match answer {
            Ok(result) => decision_of(&result),
            Err(e) => {
                // No answer (timeout, transport): not a denial; the operator surfaces decide
                // within what is left of the local wait, so the call stays under the request
                // timeouts hosts use.
                tracing::info!(error = %e, "confirming host gave no answer; waiting locally");
                let ended = self.wait(first, progress, local_deadline).await;
                return self.after_wait(first, confirmation_id, ended).await;
            }
        };
        self.host_resolve(first, confirmation_id, decision, SOURCE_ELICITATION)
            .await
    }

    /// Resolves the confirmation with the host's decision (the core checks the runtime and
    /// the risk floor again); the answer is the outcome this call brought about, or the one
    /// that stood already.
    async fn host_resolve(
        &self,
        first: &ToolResult,
        confirmation_id: &str,
        decision: (ConfirmDecision, ErrorCode),
        source: &str,
    ) -> CallToolResponse {
        let host = ConfirmingHost::new(&self.caller().runtime, source);
        let bridge = &self.backend.bridge;
        match bridge
            .resolve_as_host(&host, confirmation_id, decision.0, decision.1)
            .await
        {
            Ok(result) => self.shape(&result.answering(first)),
            // Someone else decided first (or it expired): that outcome stands.
            Err(_) => {
                let result = self.decided(first).await;
                self.shape(&result)
            }
        }
    }

    /// 2026-07-28, confirming host: ask the client to collect the user's answer and call again.
    /// Without a seal (or when sealing fails) the pending result is the answer.
    pub(super) fn input_required(
        &self,
        command: &Command,
        arguments: &Value,
        first: &ToolResult,
        confirmation_id: &str,
    ) -> CallToolResponse {
        let expires_at_ms = first
            .result
            .get("expires_at_ms")
            .and_then(Value::as_i64)
            .unwrap_or(i64::MAX);
        let sealed = SealedConfirmation {
            confirmation_id: confirmation_id.to_owned(),
            tool: command.name.clone(),
            args_digest: args_digest(arguments),
            principal: self.caller().runtime.clone(),
            expires_at_ms,
        };
        let state = self
            .backend
            .seal
            .as_ref()
            .and_then(|seal| seal.seal(&sealed));
        let Some(state) = state else {
            return self.shape(first);
        };
        self.ask_again(first, state)
    }

    /// An `input_required` answer asking the host for its user's decision under `state`.
    fn ask_again(&self, first: &ToolResult, state: String) -> CallToolResponse {
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: self.prompt(first),
            requested_schema: ElicitationSchema::new(BTreeMap::new()),
        };
        let mut requests = BTreeMap::new();
        requests.insert(
            CONFIRM_INPUT.to_owned(),
            InputRequest::Elicitation(ElicitRequest::new(params)),
        );
        CallToolResponse::InputRequired(InputRequiredResult::new(Some(requests), Some(state)))
    }

    /// The retry of an `input_required` round (`mcp.md` §7.4).
    pub(super) async fn answer_input(
        &self,
        command: &Command,
        arguments: &Value,
        state: &str,
        responses: Option<&BTreeMap<String, Value>>,
    ) -> CallToolResponse {
        let invalid = |why: &str| {
            self.refuse(
                ErrorCode::ConfirmationInvalid,
                &format!("the requestState is not valid for this call: {why}"),
            )
        };
        let Some(seal) = &self.backend.seal else {
            return invalid("this server issues no request state");
        };
        let Some(sealed) = seal.open(state) else {
            return invalid("it does not open under this server's key");
        };
        if sealed.principal != self.caller().runtime
            || sealed.tool != command.name
            || sealed.args_digest != args_digest(arguments)
        {
            return invalid("it was issued for another caller, tool or arguments");
        }
        // Re-checked now, not only when the state was issued: the user may have withdrawn the
        // host's trust since, and the risk floor is never the host's to decide.
        if !self.confirming_host || command.confirmation == Confirmation::Always {
            return invalid("this caller may not answer confirmations");
        }
        let bridge = &self.backend.bridge;
        let record = bridge.confirmation(&sealed.confirmation_id).ok().flatten();
        let Some(record) = record else {
            return invalid("the confirmation it refers to does not exist");
        };
        let runtime = &self.caller().runtime;
        let first = ToolResult::needs_confirmation(
            runtime,
            &record.request_id,
            "waiting for the user's confirmation",
            &PendingConfirmation {
                confirmation_id: record.confirmation_id.clone(),
                summary: record.summary.clone(),
                timeout_ms: None,
                expires_at_ms: None,
            },
        );
        if record.state != openphone_store::ConfirmationState::Pending {
            // Decided already: the recorded outcome, never a second prompt or run.
            let result = self.decided(&first).await;
            return self.shape(&result);
        }
        if self.backend.now_ms() >= sealed.expires_at_ms.min(record.expires_at_ms) {
            bridge.expire_due().await;
            let result = self.decided(&first).await;
            return self.shape(&result);
        }
        let answer = responses.and_then(|r| r.get(CONFIRM_INPUT));
        let Some(answer) = answer else {
            // Still no answer: ask again for the same record (never an error).
            return self.ask_again(&first, state.to_owned());
        };
        let decision = match serde_json::from_value::<ElicitResult>(answer.clone()) {
            Ok(result) => decision_of(&result),
            // Fail closed on an answer we cannot read.
            Err(_) => (ConfirmDecision::Deny, ErrorCode::UserDeniedConfirmation),
        };
        self.host_resolve(
            &first,
            &sealed.confirmation_id,
            decision,
            SOURCE_INPUT_RESPONSE,
        )
        .await
    }
}

/// accept → approve; decline → deny; cancel → deny as `confirmation_cancelled`.
fn decision_of(result: &ElicitResult) -> (ConfirmDecision, ErrorCode) {
    match result.action {
        ElicitationAction::Accept => (ConfirmDecision::Approve, ErrorCode::UserDeniedConfirmation),
        ElicitationAction::Decline => (ConfirmDecision::Deny, ErrorCode::UserDeniedConfirmation),
        ElicitationAction::Cancel => (ConfirmDecision::Deny, ErrorCode::ConfirmationCancelled),
        // An action this version does not know: fail closed.
        _ => (ConfirmDecision::Deny, ErrorCode::UserDeniedConfirmation),
    }
}

fn args_digest(arguments: &Value) -> String {
    openphone_protocol::params_hash(arguments).unwrap_or_else(|_| format!("{arguments}"))
}
