//! Recording: the audit record of every tool request ([`Attempt`]) and of every confirmation
//! transition, and the log line beside each.
//!
//! The audit log never holds raw params or results, only their digests (`params_hash`, a
//! digest of the result object).

use openphone_policy::{Caller, Decision, Requirement};
use openphone_protocol::{Command, ErrorCode, ToolResult, ToolStatus, params_hash};
use openphone_store as store;
use openphone_store::{ConfirmationRecord, StoreError};
use serde_json::json;

use super::ToolBridge;
use super::types::StoredRequest;
use crate::request::NormalizedRequest;

/// One tool request on its way through [`ToolBridge::invoke`]: what its audit record needs,
/// gathered as the steps learn it, so each way out of the pipeline records its outcome with
/// one call (`finish`, `finish_confirmation`, `finish_executed`, `internal_error`).
#[derive(Clone, Copy)]
pub(super) struct Attempt<'a> {
    bridge: &'a ToolBridge,
    pub(super) caller: &'a Caller,
    pub(super) req: &'a NormalizedRequest,
    /// When the request arrived (bridge clock); the audit record's time.
    pub(super) started: i64,
    /// Known once step 1 passed.
    command: Option<&'a Command>,
    /// Known once step 2 ran.
    decision: Option<&'a Decision>,
    /// The params' digest (64 hex), known once step 1 passed (computed once, reused here).
    params_digest: Option<&'a str>,
}

impl<'a> Attempt<'a> {
    /// A request that has just arrived.
    pub(super) fn new(
        bridge: &'a ToolBridge,
        caller: &'a Caller,
        req: &'a NormalizedRequest,
        started: i64,
    ) -> Attempt<'a> {
        Attempt {
            bridge,
            caller,
            req,
            started,
            command: None,
            decision: None,
            params_digest: None,
        }
    }

    /// The same request, validated as `command` (its params digest `params_digest`) and
    /// decided as `decision`.
    pub(super) fn decided<'b>(
        &self,
        command: &'b Command,
        params_digest: &'b str,
        decision: &'b Decision,
    ) -> Attempt<'b>
    where
        'a: 'b,
    {
        Attempt {
            command: Some(command),
            decision: Some(decision),
            params_digest: Some(params_digest),
            ..*self
        }
    }

    /// Records `result` as the request's outcome and returns it; when the audit record cannot
    /// be written, returns `audit_unavailable` instead (nothing ran for this request).
    pub(super) async fn finish(&self, result: ToolResult) -> ToolResult {
        match self.record(&result, None, None).await {
            Ok(()) => result,
            Err(e) => self.audit_unavailable(&e, Unaudited::NothingRan),
        }
    }

    /// Records `result`, an outcome tied to a confirmation (`confirmation_id`, when known, in
    /// `state`), and returns it (or `audit_unavailable`, as [`Attempt::finish`]).
    pub(super) async fn finish_confirmation(
        &self,
        result: ToolResult,
        confirmation_id: Option<String>,
        state: store::AuditConfirmation,
    ) -> ToolResult {
        match self
            .record(&result, Some((confirmation_id, state)), None)
            .await
        {
            Ok(()) => result,
            Err(e) => self.audit_unavailable(&e, Unaudited::NothingRan),
        }
    }

    /// Records `result`, the outcome of executing a read, which took `duration_ms`, and
    /// returns it; when its audit record cannot be written the result is withheld and the
    /// answer is `audit_unavailable`.
    ///
    /// The record of a read of the `safe_read` class is answered once it is in the
    /// write-ahead log, its fsync following at once; a private read's (and every other
    /// record) once fsynced (docs/security.md, "What is durable when").
    ///
    /// The result is sealed ([`ToolResult::seal`]): written to JSON text once, for its digest
    /// here and for the endpoint's answer.
    pub(super) async fn finish_executed(
        &self,
        mut result: ToolResult,
        duration_ms: i64,
    ) -> ToolResult {
        let digest = result.seal();
        let (entry, proof) = self.entry_parts(
            result.audit_id.clone(),
            Some((&result, digest)),
            None,
            Some(duration_ms),
        );
        let relaxed = self.command.is_some_and(is_safe_read);
        match self
            .bridge
            .append_audit_durably(entry, proof, !relaxed)
            .await
        {
            Ok(()) => result,
            Err(e) => self.audit_unavailable(&e, Unaudited::Withheld),
        }
    }

    /// The store failed before anything ran: logs `error`, records and returns a `tool_error`.
    pub(super) async fn internal_error(&self, error: impl std::fmt::Display) -> ToolResult {
        let tool = self
            .command
            .map_or(self.req.tool.as_str(), |c| c.name.as_str());
        tracing::error!(error = %error, tool = %tool, "tool bridge storage failure");
        self.finish(ToolResult::failure(
            &self.caller.runtime,
            &self.req.request_id,
            ErrorCode::ToolError,
            "the phone could not record this request; nothing was executed",
        ))
        .await
    }

    /// The answer when an audit record (or the executing record beside it) could not be
    /// written: `audit_unavailable`, never the outcome it would have recorded.
    pub(super) fn audit_unavailable(&self, error: &StoreError, what: Unaudited) -> ToolResult {
        let tool = self
            .command
            .map_or(self.req.tool.as_str(), |c| c.name.as_str());
        tracing::error!(error = %error, tool = %cut_log(tool), request = %cut_log(&self.req.request_id),
            "the audit log cannot be written: refusing the request");
        what.answer(&self.caller.runtime, &self.req.request_id)
    }

    /// The audit record of the attempt, written with the executing record before a direct
    /// execution's side effect: the decision and the params digest, no outcome yet.
    pub(super) fn attempt_entry(&self) -> store::AuditEntry {
        let audit_id = openphone_protocol::audit_id(&self.caller.runtime, &self.req.request_id);
        let mut entry = self.entry(
            audit_id,
            None,
            Some((None, store::AuditConfirmation::NotRequired)),
            None,
        );
        entry.at_ms = self.bridge.now_ms();
        entry
    }

    /// The audit record of `result`, the outcome of a direct execution that took
    /// `duration_ms`.
    pub(super) fn outcome_entry(&self, result: &ToolResult, duration_ms: i64) -> store::AuditEntry {
        self.entry(
            result.audit_id.clone(),
            Some(result),
            None,
            Some(duration_ms),
        )
    }

    async fn record(
        &self,
        result: &ToolResult,
        confirmation: Option<(Option<String>, store::AuditConfirmation)>,
        duration_ms: Option<i64>,
    ) -> Result<(), StoreError> {
        let (entry, proof) = self.entry_parts(
            result.audit_id.clone(),
            Some((result, result_digest(result))),
            confirmation,
            duration_ms,
        );
        self.bridge.append_audit_durably(entry, proof, true).await
    }

    /// The audit record, its policy proof inside (for the records stored with other rows:
    /// a direct execution's attempt and outcome).
    fn entry(
        &self,
        audit_id: String,
        result: Option<&ToolResult>,
        confirmation: Option<(Option<String>, store::AuditConfirmation)>,
        duration_ms: Option<i64>,
    ) -> store::AuditEntry {
        let result = result.map(|r| (r, result_digest(r)));
        let (mut entry, proof) = self.entry_parts(audit_id, result, confirmation, duration_ms);
        if let Some(proof) = proof {
            entry.policy_proof = Some(proof.value().clone());
        }
        entry
    }

    /// The audit record of a result whose digest is known already, and its policy proof
    /// beside it, shared, not copied ([`ToolBridge::append_audit_durably`] stores it as if it
    /// were inside; `None` when the record has no proof, or its proof is inside already).
    fn entry_parts(
        &self,
        audit_id: String,
        result: Option<(&ToolResult, Option<String>)>,
        confirmation: Option<(Option<String>, store::AuditConfirmation)>,
        duration_ms: Option<i64>,
    ) -> (store::AuditEntry, Option<store::AuditProof>) {
        let (result, result_digest) = match result {
            Some((r, digest)) => (Some(r), digest),
            None => (None, None),
        };
        let (caller, req, command, decision) = (self.caller, self.req, self.command, self.decision);
        let (confirmation_id, confirmation_state) = match confirmation {
            Some((id, state)) => (id, Some(state)),
            None => (
                None,
                decision.map(|_| {
                    if result.is_some_and(|r| r.status == ToolStatus::NeedsConfirmation) {
                        store::AuditConfirmation::Pending
                    } else {
                        store::AuditConfirmation::NotRequired
                    }
                }),
            ),
        };
        let (proof, policy_proof, proof_digest) = match decision {
            Some(d) => match self.bridge.proof_json(&d.proof) {
                (Ok(proof), digest) => (Some(proof), None, Some(digest)),
                (Err(value), digest) => (None, Some(value), Some(digest)),
            },
            None => (None, None, None),
        };
        let entry = store::AuditEntry {
            audit_id,
            kind: store::AuditKind::ToolRequest,
            at_ms: self.started,
            runtime: caller.runtime.clone(),
            caller: audit_caller(caller),
            phone_session_id: req.phone_session_id.clone(),
            runtime_session_id: Some(req.session_scope().to_owned()),
            request_id: req.request_id.clone(),
            idempotency_key: Some(req.idempotency_key.clone()),
            tool: Some(command.map_or_else(|| req.tool.clone(), |c| c.name.clone())),
            risk: command.map(|c| c.risk),
            mutating: command.map(|c| c.mutating),
            autonomy: decision.and_then(|d| store::Autonomy::parse(d.effective_autonomy.as_str())),
            decision: decision.map(|d| policy_decision(&d.requirement)),
            proof_digest,
            policy_proof,
            confirmation_id,
            confirmation: confirmation_state,
            status: result.map(|r| r.status),
            error_code: result.and_then(|r| r.error.as_ref().map(|e| e.code.as_str().to_owned())),
            duration_ms,
            params_hash: match self.params_digest {
                Some(hex) => Some(format!("sha256:{hex}")),
                None => params_hash(&req.params).ok(),
            },
            result_digest,
            device_id: req.device_id.clone(),
        };
        (entry, proof)
    }
}

/// What an `audit_unavailable` answer stands in for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unaudited {
    /// Nothing ran for this request.
    NothingRan,
    /// A read ran; its result is not given out.
    Withheld,
    /// A direct execution ran but its outcome could not be recorded.
    RanUnrecorded,
}

impl Unaudited {
    /// The `audit_unavailable` answer to request `request_id` of `runtime`.
    pub(super) fn answer(self, runtime: &str, request_id: &str) -> ToolResult {
        let message = match self {
            Unaudited::NothingRan => {
                "the phone could not write its audit log, so nothing was executed; the daemon's \
                 log names the cause"
            }
            Unaudited::Withheld => {
                "the phone could not write its audit log, so this result is withheld; the \
                 daemon's log names the cause"
            }
            Unaudited::RanUnrecorded => {
                "the action ran, but its result and audit record could not be written; it is \
                 not run again (a retry with the same key answers execution_result_unknown)"
            }
        };
        ToolResult::failure(runtime, request_id, ErrorCode::AuditUnavailable, message)
    }
}

/// Proofs already turned into JSON, with their digests: the same few proofs recur on every
/// call (a runtime's reads, its confirmed writes…), and serialising, canonicalising and
/// hashing one for every audit record showed in profiles, as did copying it into each record.
/// So a proof is kept made ready for the audit ([`store::AuditProof`]: its stored text and
/// digest computed once) and shared by the records carrying it. Cleared when full.
#[derive(Default)]
pub(super) struct ProofCache {
    by_proof: std::collections::HashMap<Vec<openphone_policy::Verdict>, (ProofJson, String)>,
}

/// A proof made ready for the audit, or (should it not be storable, which the store then
/// refuses as before) its JSON to put inside the record.
type ProofJson = Result<store::AuditProof, serde_json::Value>;

/// Most distinct proofs kept.
const PROOF_CACHE_LIMIT: usize = 512;

impl ToolBridge {
    /// A proof as the audit stores it (made ready, shared) and its digest
    /// (`Decision::proof_digest`).
    pub(super) fn proof_json(&self, proof: &[openphone_policy::Verdict]) -> (ProofJson, String) {
        if let Some(found) = crate::locks::lock(&self.proofs).by_proof.get(proof) {
            return found.clone();
        }
        let value = serde_json::to_value(proof).unwrap_or(serde_json::Value::Null);
        let value = store::AuditProof::new(value.clone()).map_err(|_| value);
        let digest = openphone_policy::proof_digest(proof);
        let mut cache = crate::locks::lock(&self.proofs);
        if cache.by_proof.len() >= PROOF_CACHE_LIMIT {
            cache.by_proof.clear();
        }
        cache
            .by_proof
            .insert(proof.to_vec(), (value.clone(), digest.clone()));
        (value, digest)
    }

    /// The audit record of a confirmation's transition, with an optional note merged into its
    /// resolution object (beside `resolved_by`): how an `accept_for_session` ended (the grant
    /// id, or why it counted as a plain approval).
    pub(super) fn audit_transition_noted(
        &self,
        record: &ConfirmationRecord,
        stored: &StoredRequest,
        state: store::AuditConfirmation,
        result: Option<&ToolResult>,
        duration_ms: Option<i64>,
        note: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> Result<(), StoreError> {
        let entry = self.transition_entry(record, stored, state, result, duration_ms, note);
        self.append_audit(&entry)
    }

    /// The audit record of a confirmation transition, not yet written.
    pub(super) fn transition_entry(
        &self,
        record: &ConfirmationRecord,
        stored: &StoredRequest,
        state: store::AuditConfirmation,
        result: Option<&ToolResult>,
        duration_ms: Option<i64>,
        note: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> store::AuditEntry {
        let caller = &stored.caller;
        let command = self.registry.resolve(&record.identity.tool);
        store::AuditEntry {
            audit_id: openphone_protocol::audit_id(&caller.runtime, &record.request_id),
            kind: store::AuditKind::ConfirmationTransition,
            at_ms: self.now_ms(),
            runtime: caller.runtime.clone(),
            caller: audit_caller(caller),
            phone_session_id: record.phone_session_id.clone(),
            runtime_session_id: Some(record.identity.runtime_session_id.clone()),
            request_id: record.request_id.clone(),
            idempotency_key: Some(record.identity.idempotency_key.clone()),
            tool: Some(record.identity.tool.clone()),
            risk: Some(record.risk),
            mutating: command.map(|c| c.mutating),
            autonomy: None,
            decision: None,
            proof_digest: None,
            policy_proof: match (&record.resolved_by, note) {
                (None, None) => None,
                (by, note) => {
                    let mut object = note.unwrap_or_default();
                    if let Some(by) = by {
                        object.insert("resolved_by".to_owned(), json!(by));
                    }
                    Some(serde_json::Value::Object(object))
                }
            },
            confirmation_id: Some(record.confirmation_id.clone()),
            confirmation: Some(state),
            status: result.map(|r| r.status),
            error_code: result.and_then(|r| r.error.as_ref().map(|e| e.code.as_str().to_owned())),
            duration_ms,
            params_hash: Some(format!("sha256:{}", record.identity.params_digest)),
            result_digest: result.and_then(result_digest),
            device_id: stored.request.device_id.clone(),
        }
    }

    /// Appends `entry` to the audit log and writes its log line; the caller decides what a
    /// failure means (fail closed: nothing runs, nothing is answered without its record).
    pub(super) fn append_audit(&self, entry: &store::AuditEntry) -> Result<(), StoreError> {
        let written = self.store.append_audit(entry).map(|_| ());
        if let Err(e) = &written {
            tracing::error!(error = %e, audit_id = %cut_log(&entry.audit_id), "writing the audit log");
        }
        self.log_line(entry);
        written
    }

    /// [`ToolBridge::append_audit`] for the per-call records, `entry`'s policy proof (if any)
    /// given beside it, shared: awaits the group commit, so the records of concurrent calls
    /// share one fsync; answered before the fsync when `durable` is false (only for the record
    /// of an executed safe read: [`is_safe_read`]). The record is not read back.
    pub(super) async fn append_audit_durably(
        &self,
        entry: store::AuditEntry,
        proof: Option<store::AuditProof>,
        durable: bool,
    ) -> Result<(), StoreError> {
        let access = tracing::enabled!(target: ACCESS_LOG_TARGET, tracing::Level::INFO)
            .then(|| entry.clone());
        let written = self
            .store
            .append_audit_proven_async(entry, proof, durable)
            .await
            .map(|_| ());
        match &written {
            // The access line follows the written record, as it does for the other writes.
            Ok(()) => {
                if let Some(entry) = &access {
                    self.log_line(entry);
                }
            }
            Err(e) => tracing::error!(error = %e, "writing the audit log"),
        }
        written
    }

    /// The §15 log line of an audit record: the access line, at `info` under the target
    /// [`ACCESS_LOG_TARGET`], which the daemon leaves off unless asked for
    /// (`openphone serve --access-log`); the audit log itself always has the record.
    pub(super) fn log_line(&self, entry: &store::AuditEntry) {
        if !tracing::enabled!(target: ACCESS_LOG_TARGET, tracing::Level::INFO) {
            return;
        }
        tracing::info!(
            target: ACCESS_LOG_TARGET,
            event = "runtime_tool",
            runtime = %cut_log(&entry.runtime),
            session = %cut_log(entry.runtime_session_id.as_deref().unwrap_or("")),
            request = %cut_log(&entry.request_id),
            tool = %cut_log(entry.tool.as_deref().unwrap_or("")),
            risk = %entry.risk.map_or("", |r| r.as_str()),
            mutating = entry.mutating.unwrap_or(false),
            autonomy = %entry.autonomy.map_or("", |a| a.as_str()),
            status = %entry.status.map_or("", |s| s.as_str()),
            caller = %cut_log(&entry.caller.principal),
        );
    }
}

/// Whether `command` is a safe read: changes nothing and reads nothing private (its exposure
/// class is `safe_read`). Its executed call's audit record has the relaxed promise.
pub(super) fn is_safe_read(command: &Command) -> bool {
    !command.mutating && command.default_exposure == openphone_protocol::Exposure::SafeRead
}

/// The `tracing` target of the per-call access line (`event=runtime_tool …`).
pub const ACCESS_LOG_TARGET: &str = "openphone::access";

/// §15 log-line values: at most 160 characters, spaces replaced by `_`, and (the values are
/// the runtime's word) control and invisible characters escaped, so a request id cannot start
/// a forged line.
fn cut_log(value: &str) -> openphone_protocol::LogValue<'_> {
    openphone_protocol::log_value(value)
}

fn audit_caller(caller: &Caller) -> store::Caller {
    store::Caller {
        runtime: caller.runtime.clone(),
        transport: caller.transport.as_str().to_owned(),
        principal: caller.principal.clone(),
    }
}

fn policy_decision(requirement: &Requirement) -> store::PolicyDecision {
    match requirement {
        Requirement::Allow => store::PolicyDecision::Allow,
        Requirement::Confirm { .. } => store::PolicyDecision::Confirm,
        Requirement::Deny { .. } => store::PolicyDecision::Deny,
    }
}

/// A digest of a result, for the audit (never the result itself).
fn result_digest(result: &ToolResult) -> Option<String> {
    if result.result.is_empty() {
        return None;
    }
    openphone_protocol::object_hash(&result.result).ok()
}
