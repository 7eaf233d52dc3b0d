//! One `tools/call` in flight: resolve the name, read the `_meta` keys, invoke the bridge, and
//! when the answer waits on a confirmation, wait for it the way [`choose`] picks — locally
//! with progress (this module) or through the confirming host ([`super::host`]).

use std::time::Duration;

use openphone_core::{Invocation, Waited, waiting_on};
use openphone_policy::Caller;
use openphone_protocol::{Confirmation, ErrorCode, ToolRequest, ToolResult, ToolStatus};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequestParams, ProgressNotificationParam,
    ProgressToken,
};
use serde_json::Value;

use super::site::{Site, StructuredText, TextAnswer};
use super::strategy::{ElicitationModes, Era, Strategy, StrategyInputs, choose};
use super::{
    MAX_IDEMPOTENCY_KEY_LEN, META_AUTONOMY, META_DEVICE_ID, META_IDEMPOTENCY_KEY, McpBackend,
    PhoneMcp,
};
use crate::strict::META_DUPLICATE_KEY;

/// The longest any wait for an already-decided confirmation's final result may take.
const DECIDED_WAIT: Duration = Duration::from_secs(30);

/// A request id for a call without an idempotency key (or a refusal before the bridge).
///
/// A UUIDv7: ids made later sort later (the `uuid` crate orders those of one process), so the
/// audit's index on request ids grows at its end and a batch of records touches one or two of
/// its pages. Random (v4) ids put every record on a page of its own: under load that was 4–8
/// KB more written to the log per call, more as the index grew (`bench/writes.sh`).
pub(super) fn fresh_request_id() -> String {
    format!("mcp-{}", uuid::Uuid::now_v7())
}

/// One `tools/call` in flight.
pub(super) struct Call<'a> {
    /// The connection's handler (its explicit cancels, its fixed principal).
    pub(super) handler: &'a PhoneMcp,
    /// The daemon's shared backend.
    pub(super) backend: &'a McpBackend,
    /// The principal's caller, its audit label naming the client (`clientInfo`, never used
    /// for authorisation).
    pub(super) caller: Caller,
    /// `trust_client_confirmation` of the runtime.
    pub(super) confirming_host: bool,
    /// The request: its id, `_meta`, cancellation token, client and peer.
    pub(super) site: &'a Site,
    /// Start of the call on the bridge's clock (ms): a confirmation created since is this
    /// call's own.
    pub(super) started_ms: i64,
}

/// Client names MCP SDKs send when the host sets none (the Python SDK's `mcp`, rmcp's `rmcp`):
/// they say nothing about who is calling, so the runtime the token names stands in for them.
pub const GENERIC_CLIENT_NAMES: [&str; 5] = ["mcp", "rmcp", "mcp-client", "client", "unknown"];

/// The name a person reads for the calling host: the client's self-declared name (trimmed to
/// 64 printable characters), or — when it is empty or an SDK default
/// ([`GENERIC_CLIENT_NAMES`]) — the runtime its bearer token names (`hermes`).
pub fn client_name(runtime: &str, declared: Option<&str>) -> String {
    let name: String = declared
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_control())
        .take(64)
        .collect();
    let name = name.trim();
    let generic = name.is_empty()
        || GENERIC_CLIENT_NAMES
            .iter()
            .any(|g| g.eq_ignore_ascii_case(name));
    if generic {
        runtime.to_owned()
    } else {
        name.to_owned()
    }
}

/// `caller` with the client's name in its audit label: `token:mcp client:Claude`; a host that
/// sent a generic name is labelled with its token's runtime (`client:hermes`, [`client_name`]).
/// The name is the client's word, never used for authorisation.
pub(super) fn audited_caller(
    caller: &Caller,
    client: Option<&rmcp::model::Implementation>,
) -> Caller {
    let mut caller = caller.clone();
    let name = client_name(&caller.runtime, client.map(|i| i.name.as_str()));
    if !name.trim().is_empty() {
        caller.principal = format!("{} client:{}", caller.principal, name);
    }
    caller
}

/// How this call's wait for a pending confirmation ended.
pub(super) enum WaitEnd {
    /// The final result, addressed to this call.
    Final(ToolResult),
    /// Still undecided: the local deadline passed, or the connection closed.
    StillPending,
    /// The client cancelled the call explicitly.
    Cancelled,
}

impl Call<'_> {
    /// The caller every request of this call is made as.
    pub(super) fn caller(&self) -> &Caller {
        &self.caller
    }

    /// The MCP answer for a ToolBridge result.
    pub(super) fn shape(&self, result: &ToolResult) -> CallToolResponse {
        if let Some(answer) = self.shape_text(result) {
            return answer;
        }
        if result.is_text_only() {
            // Its object is built from the text (`call_result` would read an empty one).
            return self.shape_owned(result.clone());
        }
        CallToolResponse::Complete(self.backend.table.call_result(result))
    }

    /// [`Call::shape`] of a result this call is done with (its data moves into the answer).
    pub(super) fn shape_owned(&self, result: ToolResult) -> CallToolResponse {
        if let Some(answer) = self.shape_text(&result) {
            return answer;
        }
        CallToolResponse::Complete(self.backend.table.call_result_owned(result))
    }

    /// On the direct path, the answer to a success that exists only as text: the answer goes
    /// to the site ([`TextAnswer`]: its bytes are written from it), the call answers with the
    /// placeholder. `None` for every other result, or a second one (the site keeps one).
    fn shape_text(&self, result: &ToolResult) -> Option<CallToolResponse> {
        let slot = self.site.structured_text.as_ref()?;
        if result.status != ToolStatus::Ok {
            return None;
        }
        let text = result.only_text()?;
        let summary = crate::text_summary::summary_of_text(&text, result.replayed)?;
        let answer = TextAnswer {
            text,
            summary,
            request_id: result.request_id.clone(),
            audit_id: result.audit_id.clone(),
            replayed: result.replayed,
        };
        slot.put(answer)
            .then(|| CallToolResponse::Complete(StructuredText::placeholder()))
    }

    /// A refusal before the bridge, under a fresh request id.
    pub(super) fn refuse(&self, code: ErrorCode, message: &str) -> CallToolResponse {
        let result =
            ToolResult::failure(&self.caller().runtime, &fresh_request_id(), code, message);
        self.shape_owned(result)
    }

    /// Runs the call to its answer.
    pub(super) async fn run(
        self,
        request: CallToolRequestParams,
    ) -> Result<CallToolResponse, McpError> {
        // The transport read the raw text and found a key given twice (`strict.rs`): the
        // parsed arguments kept only one of the values, so nothing here can be trusted.
        let duplicate = self.site.meta.0.get(META_DUPLICATE_KEY).or_else(|| {
            request
                .meta
                .as_ref()
                .and_then(|m| m.0.get(META_DUPLICATE_KEY))
        });
        if let Some(key) = duplicate {
            let key = key.as_str().unwrap_or_default();
            return Ok(self.refuse(
                ErrorCode::InvalidParams,
                &format!(
                    "the call holds the key {key:?} more than once in one object; duplicate \
                     keys are refused, so send each key once"
                ),
            ));
        }
        let name = request.name.trim();
        if crate::status_tool::is_confirmation_status(name) {
            let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
            return Ok(self.confirmation_status(&arguments).await);
        }
        let command = match self.backend.table.resolve_call(name) {
            Ok(c) => c,
            Err(e) => {
                if let Some(err) = e.protocol_error() {
                    return Err(err);
                }
                let result = e
                    .tool_result(&self.caller().runtime, &fresh_request_id())
                    .unwrap_or_else(|| {
                        ToolResult::failure(
                            &self.caller().runtime,
                            &fresh_request_id(),
                            e.code(),
                            e.to_string(),
                        )
                    });
                return Ok(self.shape_owned(result));
            }
        };
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        // rmcp moves the request's `_meta` into the context before the handler runs.
        let meta = &self.site.meta;
        let meta_str = |key: &str| -> Result<Option<String>, String> {
            match meta
                .0
                .get(key)
                .or_else(|| request.meta.as_ref().and_then(|m| m.0.get(key)))
            {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(format!("`_meta[\"{key}\"]` must be a string")),
            }
        };
        let key = match meta_str(META_IDEMPOTENCY_KEY) {
            Ok(k) => k,
            Err(m) => return Ok(self.refuse(ErrorCode::InvalidParams, &m)),
        };
        if let Some(k) = &key
            && (k.is_empty() || k.len() > MAX_IDEMPOTENCY_KEY_LEN)
        {
            return Ok(self.refuse(
                ErrorCode::InvalidParams,
                &format!(
                    "`_meta[\"{META_IDEMPOTENCY_KEY}\"]` must be 1 to {MAX_IDEMPOTENCY_KEY_LEN} characters"
                ),
            ));
        }
        let autonomy = match meta_str(META_AUTONOMY) {
            Ok(a) => a,
            Err(m) => return Ok(self.refuse(ErrorCode::InvalidParams, &m)),
        };
        // The phone, among several; none: the bridge's default (the runtime's only phone).
        let device = match meta_str(META_DEVICE_ID) {
            Ok(d) => d,
            Err(m) => return Ok(self.refuse(ErrorCode::InvalidParams, &m)),
        };

        // A retry of the modern confirmation round: resolve the sealed record, never re-invoke.
        if let Some(state) = request.request_state.as_deref() {
            return Ok(self
                .answer_input(command, &arguments, state, request.input_responses.as_ref())
                .await);
        }

        let request_id = key
            .as_ref()
            .map_or_else(fresh_request_id, |k| format!("mcp:{k}"));
        let reason = arguments
            .get("reason")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let tool_request = ToolRequest {
            request_id,
            runtime: Some(self.caller().runtime.clone()),
            runtime_session_id: String::new(),
            phone_session_id: None,
            tool: command.name.clone(),
            params: arguments.clone(),
            reason,
            autonomy,
            idempotency_key: key,
            timeout_ms: Some(self.backend.settings.confirmation_timeout_ms),
        };
        let progress = self.site.meta.get_progress_token();
        let bridge = &self.backend.bridge;
        if self.site.ct.is_cancelled() {
            return Ok(self.shape_owned(cancelled_result(&self.caller().runtime)));
        }
        // The whole local wait, counted from the invoke: what a confirming host's prompt
        // leaves of it is still the operator's.
        let local_deadline = tokio::time::sleep(self.backend.settings.local_confirmation_wait);
        tokio::pin!(local_deadline);
        // Never dropped half-way: a device action that started is allowed to finish.
        let mut invocation = Invocation::mcp_host(self.caller(), tool_request).on_device(device);
        if self.site.structured_text.is_some() {
            // The direct path writes a read's result into the answer as the phone's text.
            invocation = invocation.answered_as_text();
        }
        let first = bridge.call(invocation).await;
        let Some(confirmation_id) = waiting_on(&first) else {
            return Ok(self.shape_owned(first));
        };
        if self.site.ct.is_cancelled() && self.explicitly_cancelled().await {
            return Ok(self
                .after_wait(&first, &confirmation_id, WaitEnd::Cancelled)
                .await);
        }
        self.notify(
            &progress,
            1.0,
            "waiting for the user's confirmation on the phone",
        )
        .await;

        match choose(&self.strategy_inputs(command, &first)) {
            Strategy::InputRequired => {
                Ok(self.input_required(command, &arguments, &first, &confirmation_id))
            }
            Strategy::ElicitForm => Ok(self
                .elicit_inline(&first, &confirmation_id, &progress, local_deadline)
                .await),
            Strategy::Local { approval_url } => Ok(self
                .local(&first, &confirmation_id, &progress, approval_url)
                .await),
        }
    }

    /// What the choice of confirmation strategy depends on, read from the request, the
    /// connection, the runtime's trust and the daemon's settings.
    fn strategy_inputs(
        &self,
        command: &openphone_protocol::Command,
        first: &ToolResult,
    ) -> StrategyInputs {
        let era = self.site.era();
        let elicitation = match era {
            // Form mode: declared, or no mode named at all (the older shape).
            // rmcp requires them in this era's `_meta`, as the direct path does.
            Era::Stateless => self
                .site
                .meta
                .client_capabilities()
                .and_then(|c| c.elicitation)
                .map_or_else(ElicitationModes::default, |e| ElicitationModes {
                    form: e.form.is_some() || e.url.is_none(),
                    url: e.url.is_some(),
                }),
            Era::Handshake => self.site.session_elicitation(),
        };
        StrategyInputs {
            era,
            elicitation,
            confirming_host: self.confirming_host,
            // An OS dialog the request raised is the user's to answer, like the risk floor.
            risk_floor: command.confirmation == Confirmation::Always
                || first.error.as_ref().map(|e| e.code)
                    == Some(ErrorCode::FrameworkConfirmationRequired),
            can_seal: self.backend.seal.is_some(),
            approval_page: self.backend.settings.approval_url_base.is_some(),
        }
    }

    /// The local path: wait for an operator up to the configured time.
    async fn local(
        &self,
        first: &ToolResult,
        confirmation_id: &str,
        progress: &Option<ProgressToken>,
        approval_url: bool,
    ) -> CallToolResponse {
        let url_elicitation = if approval_url {
            self.offer_approval_url(first, confirmation_id)
        } else {
            None
        };
        let deadline = tokio::time::sleep(self.backend.settings.local_confirmation_wait);
        let ended = self.wait(first, progress, deadline).await;
        if let Some(task) = url_elicitation {
            task.abort();
        }
        self.after_wait(first, confirmation_id, ended).await
    }

    /// The answer after a wait: the final result, the pending one, or — for an explicit
    /// cancel of the call that created the confirmation — the withdrawn request's result.
    pub(super) async fn after_wait(
        &self,
        first: &ToolResult,
        confirmation_id: &str,
        ended: WaitEnd,
    ) -> CallToolResponse {
        match ended {
            WaitEnd::Final(result) => self.shape_owned(result),
            WaitEnd::StillPending => self.shape(first),
            WaitEnd::Cancelled => {
                if !self.created_here(confirmation_id) {
                    // A keyed retry joined a confirmation an earlier call made: cancelling the
                    // retry does not take the request away from the user.
                    return self.shape(first);
                }
                let result = match self
                    .backend
                    .bridge
                    .withdraw(self.caller(), confirmation_id)
                    .await
                {
                    Ok(withdrawn) => withdrawn.answering(first),
                    // Already decided: the decision stands (an approval may have run).
                    Err(_) => self.decided(first).await,
                };
                tracing::info!(confirmation_id, "mcp call cancelled while waiting");
                self.shape(&result)
            }
        }
    }

    /// Whether the confirmation was created during this call (not joined by a keyed retry):
    /// both times are read from the bridge's clock.
    fn created_here(&self, confirmation_id: &str) -> bool {
        self.backend
            .bridge
            .confirmation(confirmation_id)
            .ok()
            .flatten()
            .is_some_and(|r| r.created_at_ms >= self.started_ms)
    }

    /// The final result of the confirmation `first` waits on, once it is decided (or about to
    /// be), within [`DECIDED_WAIT`]; `first` if none comes.
    pub(super) async fn decided(&self, first: &ToolResult) -> ToolResult {
        self.backend
            .bridge
            .wait_for_final(first, tokio::time::sleep(DECIDED_WAIT))
            .await
            .into_result()
    }

    /// Waits until `deadline` for the final result of the confirmation `first` waits on,
    /// sending progress beside the wait; distinguishes an explicit cancel from a connection
    /// that merely closed.
    pub(super) async fn wait(
        &self,
        first: &ToolResult,
        progress: &Option<ProgressToken>,
        deadline: impl Future<Output = ()>,
    ) -> WaitEnd {
        let ct = &self.site.ct;
        // What ends the local wait: its deadline, or the request's cancellation token (an
        // explicit cancel, a closed connection, a shutdown).
        let stop = async {
            tokio::select! {
                () = deadline => {}
                () = ct.cancelled() => {}
            }
        };
        let waiting = self.backend.bridge.wait_for_final(first, stop);
        tokio::pin!(waiting);
        let period = self.backend.settings.progress_interval;
        let mut ticker = tokio::time::interval(period);
        // The first tick is one period from now, not at once.
        ticker.reset();
        let mut step = 1.0;
        loop {
            tokio::select! {
                waited = &mut waiting => return self.wait_end(waited).await,
                _ = ticker.tick(), if progress.is_some() => {
                    step += 1.0;
                    self.notify(progress, step, "still waiting for the user's confirmation on the phone").await;
                }
            }
        }
    }

    /// What a finished [`ToolBridge::wait_for_final`](openphone_core::ToolBridge::wait_for_final)
    /// means for this call: stopped by the cancellation token, it is a cancel only if the
    /// client asked for one.
    pub(super) async fn wait_end(&self, waited: Waited) -> WaitEnd {
        match waited {
            Waited::Final(result) => WaitEnd::Final(result),
            Waited::Stopped(_) => {
                if self.site.ct.is_cancelled() && self.explicitly_cancelled().await {
                    WaitEnd::Cancelled
                } else {
                    WaitEnd::StillPending
                }
            }
        }
    }

    /// Whether the request's cancellation token fired for a cancel (withdraw the request)
    /// rather than for a connection that closed (keep it pending for a respawned client).
    pub(super) async fn explicitly_cancelled(&self) -> bool {
        if self.backend.is_shutting_down() {
            // A daemon stopping is no cancel: the confirmation stays for after the restart.
            return false;
        }
        // `notifications/cancelled` trips the token just before the handler records it; a
        // closing connection trips it too, and then the transport closes.
        for _ in 0..50 {
            if self.handler.was_cancelled(&self.site.id) {
                return true;
            }
            if self.site.transport_closed() {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if self.handler.was_cancelled(&self.site.id) {
            return true;
        }
        // On a socket connection that is still open only a cancel trips the token. Over HTTP a
        // dropped response stream (how a 2026-07-28 client gives up) may just be a lost
        // connection: the confirmation stays for the user and the keyed retry.
        self.handler.principal.is_some() && !self.site.transport_closed()
    }

    pub(super) async fn notify(&self, progress: &Option<ProgressToken>, step: f64, message: &str) {
        let (Some(token), Some(peer)) = (progress, &self.site.peer) else {
            return;
        };
        let param = ProgressNotificationParam::new(token.clone(), step).with_message(message);
        if let Err(e) = peer.notify_progress(param).await {
            tracing::debug!(error = %e, "progress notification not delivered");
        }
    }

    /// Sends a URL-mode elicitation pointing at the approval page (the strategy chose to offer
    /// it: a handshake-era client that declared URL mode, a daemon with a page); the answer
    /// only says whether the user opened it, so it is not awaited.
    fn offer_approval_url(
        &self,
        first: &ToolResult,
        confirmation_id: &str,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let base = self.backend.settings.approval_url_base.as_ref()?;
        let summary = first
            .result
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let params = ElicitRequestParams::UrlElicitationParams {
            meta: None,
            message: format!(
                "OpenPhone needs your confirmation on the phone: {summary}. \
                 Open the page to see the request and where to approve or deny it."
            ),
            url: format!("{base}{confirmation_id}"),
            elicitation_id: confirmation_id.to_owned(),
        };
        let peer = self.site.peer.clone()?;
        let timeout = self.backend.settings.local_confirmation_wait;
        Some(tokio::spawn(async move {
            if let Err(e) = peer
                .create_elicitation_with_timeout(params, Some(timeout))
                .await
            {
                tracing::debug!(error = %e, "url elicitation not answered");
            }
        }))
    }
}

fn cancelled_result(runtime: &str) -> ToolResult {
    ToolResult::failure(
        runtime,
        &fresh_request_id(),
        ErrorCode::Cancelled,
        "the call was cancelled before it ran",
    )
}

#[cfg(test)]
mod tests {
    use super::fresh_request_id;

    /// Random request ids spread the audit index's writes over its whole width (a page of
    /// the log per record); ids that sort in the order they were made keep them at its end.
    #[test]
    fn fresh_request_ids_sort_in_the_order_they_were_made_even_across_threads() {
        let threads: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(|| (0..2_000).map(|_| fresh_request_id()).collect()))
            .collect();
        let mut all = std::collections::BTreeSet::new();
        for thread in threads {
            let ids: Vec<String> = thread.join().unwrap();
            for pair in ids.windows(2) {
                assert!(pair[0] < pair[1], "{} made before {}", pair[0], pair[1]);
            }
            for id in ids {
                let uuid = id.strip_prefix("mcp-").expect("the mcp- prefix");
                let parsed = uuid::Uuid::parse_str(uuid).unwrap();
                assert_eq!(parsed.get_version_num(), 7, "{id}");
                assert_eq!(parsed.hyphenated().to_string(), uuid, "canonical text");
                assert!(all.insert(id), "an id made twice");
            }
        }
        assert_eq!(all.len(), 8_000);
    }
}
