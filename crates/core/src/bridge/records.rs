//! What the front ends (server methods, MCP, OpenClaw, the dashboard) may read or record
//! through core instead of holding the store: each method returns protocol or store record
//! types and keeps the store handle inside core.
//!
//! - confirmations: one by id, the pending ones (all, or one runtime's), the recently expired;
//! - phone sessions: one by id, a filtered list;
//! - the audit log: a page of it, its chain walked, and the records of what is not a tool
//!   request (an oversize frame, an operator's act, a background event);
//! - deferred outcomes (OpenClaw's outbox): recorded, read, settled and moved.

use openphone_policy::Caller;
use openphone_protocol::endpoint::{AuditCaller, AuditKind};
use openphone_store::{
    AuditEntry, AuditRecord, ConfirmationFilter, ConfirmationRecord, ConfirmationState,
    DeferredOutcome, NewDeferredOutcome, OutcomeState, PhoneSession, SessionFilter, StoreError,
    VerifyReport,
};
use serde_json::Value;

use super::ToolBridge;

impl ToolBridge {
    /// The confirmation `id` names, in any state; `None` when there is none.
    pub fn confirmation(&self, id: &str) -> Result<Option<ConfirmationRecord>, StoreError> {
        self.store.get_confirmation(id)
    }

    /// The pending confirmations, newest first: every runtime's (`None`) or one runtime's.
    pub fn pending_confirmations(
        &self,
        runtime: Option<&str>,
    ) -> Result<Vec<ConfirmationRecord>, StoreError> {
        self.store.list_confirmations(&ConfirmationFilter {
            state: Some(ConfirmationState::Pending),
            runtime: runtime.map(str::to_owned),
            limit: None,
        })
    }

    /// The most recent `limit` confirmations that expired unanswered (`timeout`), newest
    /// first (the inbox lists them with `include_expired`).
    pub fn expired_confirmations(
        &self,
        limit: usize,
    ) -> Result<Vec<ConfirmationRecord>, StoreError> {
        self.store.list_confirmations(&ConfirmationFilter {
            state: Some(ConfirmationState::Timeout),
            runtime: None,
            limit: Some(limit),
        })
    }

    /// The phone session `id` names; `None` when there is none.
    pub fn phone_session(&self, id: &str) -> Result<Option<PhoneSession>, StoreError> {
        self.store.get_session(id)
    }

    /// The phone sessions `filter` selects, newest first.
    pub fn phone_sessions(&self, filter: &SessionFilter) -> Result<Vec<PhoneSession>, StoreError> {
        self.store.list_sessions(filter)
    }

    /// The audit records after sequence number `after`, at most `limit`.
    pub fn audit_page(&self, after: i64, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        self.store.export_audit(after, limit)
    }

    /// Walks the audit hash chain (blocking: call it off the async threads) and names the
    /// first broken record, if any.
    pub fn verify_audit_chain(&self) -> Result<VerifyReport, StoreError> {
        self.store.verify_audit()
    }

    /// Records a frame an authenticated `caller` sent over the size limit (no content, only
    /// the fact: a `tool_request` record with `payload_too_large`). A failure is logged.
    pub fn record_oversize_frame(&self, caller: &Caller) {
        let now = self.now_ms();
        let runtime = caller.runtime.clone();
        let request_id = format!("frame-{now}");
        let entry = AuditEntry {
            audit_id: format!("endpoint:{runtime}:{request_id}"),
            kind: AuditKind::ToolRequest,
            at_ms: now,
            runtime: runtime.clone(),
            caller: AuditCaller {
                runtime,
                transport: caller.transport.as_str().to_owned(),
                principal: caller.principal.clone(),
            },
            request_id,
            status: Some(openphone_protocol::ToolStatus::Error),
            error_code: Some("payload_too_large".into()),
            ..Default::default()
        };
        if let Err(e) = self.store.append_audit(&entry) {
            tracing::error!(error = %e, "recording an oversize frame");
        }
    }

    /// Records an operator's act that is not a tool request (an `operator_action` record:
    /// `what` names it, `params_hash` digests `args`, never the arguments themselves) under
    /// `request_id`. The caller lets the act happen only when this succeeds.
    pub fn record_operator_action(
        &self,
        caller: &Caller,
        what: &str,
        args: &Value,
        request_id: String,
    ) -> Result<(), StoreError> {
        let entry = AuditEntry {
            audit_id: format!("endpoint:{}:{request_id}", caller.runtime),
            kind: AuditKind::OperatorAction,
            at_ms: self.now_ms(),
            runtime: caller.runtime.clone(),
            caller: AuditCaller {
                runtime: caller.runtime.clone(),
                transport: caller.transport.as_str().to_owned(),
                principal: caller.principal.clone(),
            },
            request_id,
            tool: Some(what.to_owned()),
            params_hash: openphone_protocol::digest::params_hash(args).ok(),
            ..Default::default()
        };
        self.store.append_audit(&entry).map(|_| ())
    }

    /// Records something that happened outside any tool request (a `background_event`
    /// record: the entry's kind is set here; its `tool` names the event, its `policy_proof`
    /// holds ids and lifecycle data only).
    pub fn record_background_event(
        &self,
        mut entry: AuditEntry,
    ) -> Result<AuditRecord, StoreError> {
        entry.kind = AuditKind::BackgroundEvent;
        self.store.append_audit(&entry)
    }

    /// [`ToolBridge::record_background_event`] off the async threads.
    pub async fn record_background_event_async(
        &self,
        mut entry: AuditEntry,
    ) -> Result<AuditRecord, StoreError> {
        entry.kind = AuditKind::BackgroundEvent;
        self.store.append_audit_async(entry).await
    }

    /// Records a request whose outcome is posted later (a runtime's outbox row, `waiting`).
    pub fn defer_outcome(&self, request: &NewDeferredOutcome) -> Result<(), StoreError> {
        self.store.insert_deferred_outcome(request, self.now_ms())
    }

    /// The deferred outcome of request `request_id`; `None` when there is none.
    pub fn deferred_outcome(
        &self,
        request_id: &str,
    ) -> Result<Option<DeferredOutcome>, StoreError> {
        self.store.get_deferred_outcome(request_id)
    }

    /// `runtime`'s deferred outcomes in one of `states`, oldest first.
    pub fn deferred_outcomes(
        &self,
        runtime: &str,
        states: &[OutcomeState],
    ) -> Result<Vec<DeferredOutcome>, StoreError> {
        self.store.list_deferred_outcomes(runtime, states)
    }

    /// Records the outcome of a waiting request (it becomes `ready` to post).
    pub fn settle_deferred_outcome(
        &self,
        request_id: &str,
        outcome: &Value,
    ) -> Result<bool, StoreError> {
        self.store
            .deferred_outcome_known(request_id, outcome, self.now_ms())
    }

    /// Moves a deferred outcome from state `from` to `to` (with `note`); `false` when it was
    /// not in `from`.
    pub fn move_deferred_outcome(
        &self,
        request_id: &str,
        from: OutcomeState,
        to: OutcomeState,
        note: &str,
    ) -> Result<bool, StoreError> {
        self.store
            .move_deferred_outcome(request_id, from, to, note, self.now_ms())
    }
}
