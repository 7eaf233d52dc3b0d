//! Step 4, confirm: a durable pending confirmation bound to the exact request, and every way
//! it ends — resolved by an [`Operator`] or a [`ConfirmingHost`], withdrawn by its own
//! runtime, expired, or found unfinished after a restart.
//!
//! The first resolution wins (the store's conditional UPDATE). On approval the **stored**
//! request is re-validated, re-decided and executed once, under the identity lock. Every
//! ending records a final result, an audit transition, the `runtime.confirmation.resolved`
//! and `runtime.tool.result` events, and wakes whoever waits (`wait.rs`).

use openphone_policy::{Caller, Context, Decision, Requirement, Role};
pub use openphone_protocol::endpoint::ConfirmDecision;
use openphone_protocol::endpoint::{
    ConfirmationRequired, ConfirmationResolution, ConfirmationResolved, Event,
};
use openphone_protocol::{Command, ErrorCode, ToolResult};
use openphone_store as store;
use openphone_store::{
    ConfirmationRecord, IdentityKey, MAX_PENDING_PER_RUNTIME, NewConfirmation, PendingInsert,
    Resolution, SessionStatus, StoreError,
};
use serde::{Deserialize, Serialize};

use super::audit::{Attempt, Unaudited};
use super::authority::Standing;
use super::grants::{self, Grant};
use super::{ToolBridge, needs_confirmation, result_json};
use crate::locks::lock;
use crate::request::{NormalizedRequest, Rejection, validate};
use crate::summary::summary;

/// An operator principal: the only kind of caller that can resolve a confirmation. It can be
/// made only from a caller whose credential has the operator role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    principal: String,
    surface: String,
}

impl Operator {
    /// The operator behind `caller`, or `None` for a runtime credential.
    pub fn from_caller(caller: &Caller) -> Option<Operator> {
        match caller.role {
            Role::Operator => Some(Operator {
                principal: caller.principal.clone(),
                surface: caller.transport.as_str().to_owned(),
            }),
            Role::Runtime => None,
        }
    }

    /// `<surface>:<principal>`, recorded as `resolved_by`.
    pub fn label(&self) -> String {
        format!("{}:{}", self.surface, self.principal)
    }
}

/// A host the user designated as a confirming host for one runtime (`mcp.md` §7.1, config
/// `trust_client_confirmation`): its own confirmation dialog may approve that runtime's
/// requests below the risk floor. Made by the daemon from its configuration only; the label
/// (`<source>:<runtime>`) is recorded as `resolved_by`, so audit tells these resolutions apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmingHost {
    runtime: String,
    source: String,
}

impl ConfirmingHost {
    /// `runtime`'s host, resolving through `source` (`mcp_elicitation`, `mcp_input_response`).
    pub fn new(runtime: &str, source: &str) -> ConfirmingHost {
        ConfirmingHost {
            runtime: runtime.to_owned(),
            source: source.to_owned(),
        }
    }

    /// `<source>:<runtime>`, recorded as `resolved_by`.
    pub fn label(&self) -> String {
        format!("{}:{}", self.source, self.runtime)
    }
}

/// Why a resolve call did nothing.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// Unknown, expired or already resolved (`pending_confirmation_not_found`).
    #[error("no pending confirmation {0:?} (unknown, expired or already resolved)")]
    PendingConfirmationNotFound(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A confirming host tried to resolve a confirmation of the risk floor.
    #[error("confirmation {0:?} needs the user's approval on the phone (confirmation: always)")]
    RiskFloor(String),
    /// A stored confirmation could not be read back.
    #[error("unreadable stored request: {0}")]
    CorruptRecord(String),
}

impl BridgeError {
    /// The catalogue code of the error.
    pub fn code(&self) -> ErrorCode {
        match self {
            BridgeError::PendingConfirmationNotFound(_) => ErrorCode::PendingConfirmationNotFound,
            BridgeError::RiskFloor(_) => ErrorCode::ConfirmationRequired,
            BridgeError::Store(_) | BridgeError::CorruptRecord(_) => ErrorCode::ToolError,
        }
    }
}

/// What startup recovery found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Approved confirmations whose execution outcome is unknown (never re-run).
    pub result_unknown: Vec<String>,
    /// Pending confirmations whose time passed while the daemon was down.
    pub timed_out: Vec<String>,
    /// Pending confirmations still in time, resolvable again.
    pub still_pending: Vec<String>,
    /// Direct executions (state-changing requests that ran without a confirmation) the daemon
    /// stopped during, by audit id: their final result is `execution_result_unknown`, never
    /// re-run.
    pub executions_unknown: Vec<String>,
}

/// The request as stored with its confirmation: everything needed to re-check and execute it
/// after approval, possibly after a restart. Executed params always come from here.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct StoredRequest {
    pub(super) caller: Caller,
    pub(super) request: NormalizedRequest,
    pub(super) context: Context,
    /// Whether the request carried an idempotency key of its own (a retry without one may
    /// join it only if it did not, `retry.rs`); absent in records stored before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) keyed: Option<bool>,
}

impl ToolBridge {
    /// When a new confirmation expires: the request's timeout from now; for a goal's step
    /// (`grants.rs`), the goal's deadline — capped at [`super::GOAL_GRANT_MAX_MS`] from now,
    /// never sooner than the request's own timeout — so a goal's approval waits as long as
    /// the goal does instead of being asked again every ten minutes.
    fn confirmation_expiry(&self, caller: &Caller, req: &NormalizedRequest, started: i64) -> i64 {
        let own = started + req.timeout_ms;
        match self.goal_of(caller, &req.request_id) {
            Some(goal) => {
                let cap = started.saturating_add(super::GOAL_GRANT_MAX_MS);
                goal.deadline_at_ms.map_or(cap, |d| d.min(cap)).max(own)
            }
            None => own,
        }
    }

    /// A confirmation for this identity that is still waiting or executing.
    pub(super) fn live_confirmation(
        &self,
        identity: &IdentityKey,
    ) -> Result<Option<ConfirmationRecord>, StoreError> {
        if let Some(pending) = self.store.find_pending(identity, self.now_ms())? {
            return Ok(Some(pending));
        }
        let executing = self.store.list_confirmations(&store::ConfirmationFilter {
            state: Some(store::ConfirmationState::Approved),
            runtime: Some(identity.runtime.clone()),
            limit: None,
        })?;
        Ok(executing.into_iter().find(|r| r.identity == *identity))
    }

    /// Stores the request with a pending confirmation (or finds the one already stored for
    /// this identity) and answers `needs_confirmation`.
    pub(super) async fn confirm(
        &self,
        attempt: &Attempt<'_>,
        command: &Command,
        decision: &Decision,
        identity: IdentityKey,
        context: Context,
        keyed: bool,
    ) -> ToolResult {
        let (caller, req, started) = (attempt.caller, attempt.req, attempt.started);
        let runtime = caller.runtime.clone();
        let reason = req.reason.clone().unwrap_or_default();
        let text = summary(&command.name, &reason, &req.params);
        let stored = StoredRequest {
            caller: caller.clone(),
            request: req.clone(),
            context,
            keyed: Some(keyed),
        };
        let request_json = match serde_json::to_value(&stored) {
            Ok(v) => v,
            Err(e) => return attempt.internal_error(e).await,
        };
        let new = NewConfirmation {
            confirmation_id: format!("runtime-confirm-{}", uuid::Uuid::new_v4()),
            identity,
            request_id: req.request_id.clone(),
            request: request_json,
            phone_session_id: req.phone_session_id.clone(),
            summary: text,
            risk: command.risk,
            created_at_ms: started,
            expires_at_ms: self.confirmation_expiry(caller, req, started),
        };
        let (record, created) = match self.store.insert_pending(&new, MAX_PENDING_PER_RUNTIME) {
            Ok(PendingInsert::Created(r)) => (r, true),
            Ok(PendingInsert::Existing(r)) => (r, false),
            Ok(PendingInsert::TooMany { pending }) => {
                return attempt
                    .finish(ToolResult::failure(
                        &runtime,
                        &req.request_id,
                        ErrorCode::RateLimited,
                        format!(
                            "{runtime} already has {pending} confirmations waiting for the user"
                        ),
                    ))
                    .await;
            }
            Err(e) => return attempt.internal_error(e).await,
        };
        let result = attempt
            .finish_confirmation(
                self.explained_confirmation(
                    attempt,
                    command,
                    decision,
                    &stored.context,
                    needs_confirmation(&runtime, &req.request_id, &record),
                ),
                Some(record.confirmation_id.clone()),
                store::AuditConfirmation::Pending,
            )
            .await;
        if result.error.as_ref().map(|e| e.code) == Some(ErrorCode::AuditUnavailable) {
            // Not announced: its approval would need an audit record the log cannot take.
            return result;
        }
        let required = ConfirmationRequired {
            confirmation_id: record.confirmation_id.clone(),
            request_id: req.request_id.clone(),
            runtime: runtime.clone(),
            runtime_session_id: req.runtime_session_id.clone(),
            tool: command.name.clone(),
            summary: record.summary.clone(),
            reason,
            autonomy: decision.effective_autonomy,
            timeout_ms: record.expires_at_ms - record.created_at_ms,
            expires_at_ms: record.expires_at_ms,
            risk: command.risk,
            phone_session_id: req.phone_session_id.clone(),
            created,
            session_grant_offered: matches!(
                decision.requirement,
                Requirement::Confirm {
                    one_shot: false,
                    ..
                }
            ) && (self
                .own_session(caller, req.phone_session_id.as_deref())
                .is_some()
                || self.goal_of(caller, &req.request_id).is_some()),
            result: result.clone(),
        };
        self.publish(&Event::ConfirmationRequired(required), &runtime);
        self.touch_session(
            caller,
            req.phone_session_id.as_deref(),
            SessionStatus::WaitingForConfirmation,
        );
        result
    }

    /// Resolves a pending confirmation. Only an [`Operator`] can; the first resolution wins.
    /// Approval executes the stored request (re-checked against policy now) exactly once.
    /// Returns the final tool result.
    pub async fn resolve(
        &self,
        operator: &Operator,
        confirmation_id: &str,
        decision: ConfirmDecision,
    ) -> Result<ToolResult, BridgeError> {
        let denial = (
            ErrorCode::UserDeniedConfirmation,
            "the user denied this request",
        );
        self.resolve_as(&operator.label(), confirmation_id, decision, denial)
            .await
    }

    /// Resolves a pending confirmation through a host the user designated as a confirming
    /// host for `host.runtime` (`mcp.md` §7.1): only that runtime's own confirmations, and
    /// never one of the risk floor (`confirmation: "always"`), which only an [`Operator`] can
    /// approve. A denial records `denial` as the code (`user_denied_confirmation` for a
    /// decline, `confirmation_cancelled` for a dismissed prompt).
    pub async fn resolve_as_host(
        &self,
        host: &ConfirmingHost,
        confirmation_id: &str,
        decision: ConfirmDecision,
        denial: ErrorCode,
    ) -> Result<ToolResult, BridgeError> {
        let record = self
            .store
            .get_confirmation(confirmation_id)?
            .filter(|r| r.identity.runtime == host.runtime)
            .ok_or_else(|| BridgeError::PendingConfirmationNotFound(confirmation_id.to_owned()))?;
        let below_floor = self
            .registry
            .resolve(&record.identity.tool)
            .is_some_and(|c| c.confirmation != openphone_protocol::Confirmation::Always);
        if !below_floor {
            return Err(BridgeError::RiskFloor(confirmation_id.to_owned()));
        }
        let message = match denial {
            ErrorCode::ConfirmationCancelled => "the user dismissed the confirmation prompt",
            _ => "the user denied this request",
        };
        // A host's prompt approves one request; only the user's own surfaces make a rule
        // that outlives it.
        let decision = match decision {
            ConfirmDecision::AcceptForSession => ConfirmDecision::Approve,
            other => other,
        };
        self.resolve_as(&host.label(), confirmation_id, decision, (denial, message))
            .await
    }

    /// Withdraws a runtime's own pending confirmation (its call was cancelled): the request
    /// never executes and its final result is `cancelled`. Only the runtime that made the
    /// request can withdraw it, and only while it is still pending; withdrawing can never
    /// approve anything.
    pub async fn withdraw(
        &self,
        caller: &Caller,
        confirmation_id: &str,
    ) -> Result<ToolResult, BridgeError> {
        let owned = self
            .store
            .get_confirmation(confirmation_id)?
            .is_some_and(|r| r.identity.runtime == caller.runtime);
        if !owned {
            return Err(BridgeError::PendingConfirmationNotFound(
                confirmation_id.to_owned(),
            ));
        }
        let label = format!("{}:{}:withdrawn", caller.transport.as_str(), caller.runtime);
        let denial = (
            ErrorCode::Cancelled,
            "the request was cancelled by its caller before it ran",
        );
        self.resolve_as(&label, confirmation_id, ConfirmDecision::Deny, denial)
            .await
    }

    pub(super) async fn resolve_as(
        &self,
        label: &str,
        confirmation_id: &str,
        decision: ConfirmDecision,
        denial: (ErrorCode, &str),
    ) -> Result<ToolResult, BridgeError> {
        let now = self.now_ms();
        let resolution = match decision {
            ConfirmDecision::Approve | ConfirmDecision::AcceptForSession => Resolution::Approve,
            ConfirmDecision::Deny => Resolution::Deny,
        };
        let record = match self.store.resolve(confirmation_id, resolution, label, now) {
            Ok(r) => r,
            Err(e) if e.is_pending_confirmation_not_found() => {
                // An expired one was just moved to `timeout`: give it its final result.
                if let StoreError::ConfirmationNotPending { .. } = &e {
                    self.expire_due().await;
                }
                return Err(BridgeError::PendingConfirmationNotFound(
                    confirmation_id.to_owned(),
                ));
            }
            Err(e) => return Err(e.into()),
        };
        let stored: StoredRequest = match serde_json::from_value(record.request.clone()) {
            Ok(s) => s,
            Err(e) => {
                // Nothing can be executed from an unreadable record; close it with an error so
                // no one waits for it forever.
                let failure = ToolResult::failure(
                    &record.identity.runtime,
                    &record.request_id,
                    ErrorCode::ToolError,
                    "the stored request could not be read; nothing was executed",
                );
                let closed = match decision {
                    ConfirmDecision::Approve | ConfirmDecision::AcceptForSession => self
                        .store
                        .complete(&record.confirmation_id, &result_json(&failure), now),
                    ConfirmDecision::Deny => self.store.attach_final_result(
                        &record.confirmation_id,
                        &result_json(&failure),
                        now,
                    ),
                };
                if let Err(store_error) = closed {
                    tracing::error!(error = %store_error, "closing an unreadable confirmation");
                }
                self.wake(&record.confirmation_id, &failure);
                return Err(BridgeError::CorruptRecord(format!(
                    "confirmation {confirmation_id}: {e}"
                )));
            }
        };
        match decision {
            ConfirmDecision::Deny => {
                let result = ToolResult::failure(
                    &stored.caller.runtime,
                    &record.request_id,
                    denial.0,
                    denial.1,
                );
                self.finish(
                    &record,
                    &stored,
                    result,
                    store::AuditConfirmation::Denied,
                    ConfirmationResolution::Denied,
                    None,
                )
            }
            ConfirmDecision::Approve | ConfirmDecision::AcceptForSession => {
                // The identity lock keeps a retry of the same request from running beside it.
                let _identity_guard = self.lock_identity(&record.identity).await;
                // `accept_for_session`: whether a grant may be made is decided now and noted
                // in the approval's audit record; the grant itself is made only after that
                // record is written and the re-checked request has run (`grants.rs`).
                let refusal = match decision {
                    ConfirmDecision::AcceptForSession => Some(self.grant_refusal(&record, &stored)),
                    ConfirmDecision::Approve | ConfirmDecision::Deny => None,
                };
                // Fail closed: nothing runs without the audit record of its approval.
                let audited = self.audit_transition_noted(
                    &record,
                    &stored,
                    store::AuditConfirmation::Approved,
                    None,
                    None,
                    refusal.map(grants::approval_note),
                );
                let (result, ran) = match audited {
                    Ok(()) => self.execute_approved(&stored).await,
                    Err(_) => (
                        ToolResult::failure(
                            &stored.caller.runtime,
                            &record.request_id,
                            ErrorCode::AuditUnavailable,
                            "the phone could not write its audit log, so the approved request \
                             was not executed; the daemon's log names the cause",
                        ),
                        false,
                    ),
                };
                let grant = match refusal {
                    None => Grant::NotAsked,
                    Some(Some(reason)) => Grant::Downgraded(reason),
                    Some(None) if !ran => Grant::Downgraded("not_run"),
                    Some(None) => self.grant_for_session(&record, &stored),
                };
                let duration = self.now_ms() - now;
                // The completion and its audit record in one transaction: a crash between
                // them would leave an executed request without its record.
                let entry = self.transition_entry(
                    &record,
                    &stored,
                    store::AuditConfirmation::Completed,
                    Some(&result),
                    Some(duration),
                    grant.audit_note(),
                );
                let together = self.store.complete_audited(
                    &record.confirmation_id,
                    &result_json(&result),
                    self.now_ms(),
                    entry.clone(),
                );
                match together {
                    Ok(done) => {
                        self.log_line(&entry);
                        return Ok(self.deliver_resolved(
                            &done,
                            &stored,
                            &result,
                            ConfirmationResolution::Approved,
                            &grant,
                        ));
                    }
                    Err(e) => tracing::error!(
                        error = %e,
                        confirmation = %record.confirmation_id,
                        "completing an approved request together with its audit record"
                    ),
                }
                // The record could not be written with it (the audit log refused, say): the
                // result is still recorded when it can be, and the outcome is withheld from
                // every recipient unless its audit record can be written after all.
                match self.store.complete(
                    &record.confirmation_id,
                    &result_json(&result),
                    self.now_ms(),
                ) {
                    Ok(done) => Ok(self.announce_with(
                        &done,
                        &stored,
                        &result,
                        store::AuditConfirmation::Completed,
                        ConfirmationResolution::Approved,
                        Some(duration),
                        &grant,
                    )),
                    Err(e) => {
                        // Executed but neither result nor outcome recorded: whoever waits
                        // learns that, never the unrecorded result itself, and no grant
                        // outlives it.
                        self.withdraw_grant(&grant);
                        let unrecorded = Unaudited::RanUnrecorded
                            .answer(&stored.caller.runtime, &result.request_id);
                        self.wake(&record.confirmation_id, &unrecorded);
                        Err(e.into())
                    }
                }
            }
        }
    }

    /// Re-runs steps 1 and 2 on the stored request; a Confirm counts as satisfied by this
    /// approval, a Deny wins; then executes. The flag says whether it ran (false: refused now).
    async fn execute_approved(&self, stored: &StoredRequest) -> (ToolResult, bool) {
        // Under the runtime's configuration now, not the one it had when it asked
        // (`authority.rs`).
        let standing = self.standing(&stored.caller);
        let caller = standing.caller();
        let req = &stored.request;
        let runtime = &caller.runtime;
        let command = match validate(self.registry, caller, req, true) {
            Ok(v) => v.command,
            Err(Rejection { code, message, .. }) => {
                return (
                    ToolResult::failure(runtime, &req.request_id, code, message),
                    false,
                );
            }
        };
        let session_autonomy = self.session_autonomy(caller, req.phone_session_id.as_deref());
        let decision = self.decide(caller, command, req, session_autonomy, &stored.context);
        if let Requirement::Deny {
            code,
            policy_detail,
            reason,
        } = &decision.requirement
        {
            let details = self.denial_details(caller, command, &decision, policy_detail.as_str());
            let reason = match standing {
                Standing::Removed(_) => format!("runtime `{runtime}` is no longer configured"),
                Standing::Configured(_) => reason.clone(),
            };
            let refused = ToolResult::failure(
                runtime,
                &req.request_id,
                *code,
                format!("denied after approval: {reason}"),
            )
            .with_details(details);
            return (refused, false);
        }
        let started = self.now_ms();
        let result = self.execute(caller, req, command, started).await;
        self.touch_session(
            caller,
            req.phone_session_id.as_deref(),
            SessionStatus::Running,
        );
        (result, true)
    }

    /// Stores a final result for a confirmation that ended without executing, then announces.
    fn finish(
        &self,
        record: &ConfirmationRecord,
        stored: &StoredRequest,
        result: ToolResult,
        state: store::AuditConfirmation,
        resolution: ConfirmationResolution,
        duration: Option<i64>,
    ) -> Result<ToolResult, BridgeError> {
        let done = self.store.attach_final_result(
            &record.confirmation_id,
            &result_json(&result),
            self.now_ms(),
        )?;
        Ok(self.announce(&done, stored, &result, state, resolution, duration))
    }

    /// Audit, events and waiters for a confirmation that reached its final result; returns
    /// the answer given out. No answer leaves without its audit record: when the outcome's
    /// record cannot be written, every recipient gets `audit_unavailable` instead of the result.
    fn announce(
        &self,
        record: &ConfirmationRecord,
        stored: &StoredRequest,
        result: &ToolResult,
        state: store::AuditConfirmation,
        resolution: ConfirmationResolution,
        duration: Option<i64>,
    ) -> ToolResult {
        self.announce_with(
            record,
            stored,
            result,
            state,
            resolution,
            duration,
            &Grant::NotAsked,
        )
    }

    /// [`Self::announce`], naming the session grant an `accept_for_session` made (or why it
    /// made none) in the `runtime.confirmation.resolved` event.
    #[allow(clippy::too_many_arguments)]
    fn announce_with(
        &self,
        record: &ConfirmationRecord,
        stored: &StoredRequest,
        result: &ToolResult,
        state: store::AuditConfirmation,
        resolution: ConfirmationResolution,
        duration: Option<i64>,
        grant: &Grant,
    ) -> ToolResult {
        let withheld;
        let audited = self.audit_transition_noted(
            record,
            stored,
            state,
            Some(result),
            duration,
            grant.audit_note(),
        );
        let result = match audited {
            Ok(_) => result,
            Err(_) => {
                // No grant outlives an outcome that left no record.
                self.withdraw_grant(grant);
                withheld = Unaudited::Withheld.answer(&stored.caller.runtime, &result.request_id);
                &withheld
            }
        };
        self.deliver_resolved(record, stored, result, resolution, grant)
    }

    /// Events and waiters for a confirmation whose final result is recorded and audited;
    /// returns the answer given out.
    fn deliver_resolved(
        &self,
        record: &ConfirmationRecord,
        stored: &StoredRequest,
        result: &ToolResult,
        resolution: ConfirmationResolution,
        grant: &Grant,
    ) -> ToolResult {
        let runtime = &stored.caller.runtime;
        let resolved = ConfirmationResolved {
            confirmation_id: record.confirmation_id.clone(),
            request_id: record.request_id.clone(),
            runtime: runtime.clone(),
            runtime_session_id: stored.request.runtime_session_id.clone(),
            tool: record.identity.tool.clone(),
            resolution: match (resolution, grant) {
                (ConfirmationResolution::Approved, Grant::Made(_)) => {
                    ConfirmationResolution::ApprovedForSession
                }
                (other, _) => other,
            },
            grant_id: grant.grant_id(),
            downgraded: grant.downgrade_reason().map(str::to_owned),
            result: result.clone(),
        };
        self.publish(&Event::ConfirmationResolved(resolved), runtime);
        self.publish_result(&stored.caller, result);
        self.touch_session(
            &stored.caller,
            stored.request.phone_session_id.as_deref(),
            SessionStatus::Running,
        );
        self.wake(&record.confirmation_id, result);
        result.clone()
    }

    /// Hands a confirmation's final result to every request waiting on it.
    fn wake(&self, confirmation_id: &str, result: &ToolResult) {
        if let Some(tx) = lock(&self.waiters).remove(confirmation_id) {
            let _ = tx.send(Some(result.clone()));
        }
    }

    /// Before a request looks for its recorded final result: a confirmation of `identity` that
    /// is still pending although its time has run out is timed out now (with every other one
    /// due), and an expiry run under way is waited for, so the request finds the recorded
    /// `timeout`. The timer that expires confirmations ticks once a second: without this a
    /// retry arriving just after the expiry (typically from a runtime that lost its wait to a
    /// daemon restart) found no live confirmation and no final result, and asked the user a
    /// second time (issue 11).
    pub(super) async fn expire_overdue(&self, identity: &IdentityKey) -> Result<(), StoreError> {
        // Held by a timer run from its first write to its last final result.
        let _serial = self.expiry.lock().await;
        // `find_pending` skips those expired by the given time: from the start of time, it
        // finds any still in state `pending`.
        let overdue = self
            .store
            .find_pending(identity, i64::MIN)?
            .is_some_and(|pending| pending.expires_at_ms <= self.now_ms());
        if overdue {
            self.expire_due_serialised();
        }
        Ok(())
    }

    /// Times out every pending confirmation past its expiry. Returns how many.
    pub async fn expire_due(&self) -> usize {
        let _serial = self.expiry.lock().await;
        self.expire_due_serialised()
    }

    /// [`ToolBridge::expire_due`] under the expiry lock, which the caller holds.
    fn expire_due_serialised(&self) -> usize {
        let now = self.now_ms();
        let expired = match self.store.expire_due(now) {
            Ok(list) => list,
            Err(e) => {
                tracing::error!(error = %e, "expiring confirmations");
                return 0;
            }
        };
        let mut done = 0;
        for record in &expired {
            if self.finish_timeout(record).is_some() {
                done += 1;
            }
        }
        // Then any left in `timeout` without a final result (moved there by a late resolve
        // call, or by an earlier run that stopped before finishing them).
        let unfinished = self
            .store
            .list_confirmations(&store::ConfirmationFilter {
                state: Some(store::ConfirmationState::Timeout),
                ..Default::default()
            })
            .unwrap_or_default();
        for record in unfinished.iter().filter(|r| r.final_result.is_none()) {
            if self.finish_timeout(record).is_some() {
                done += 1;
            }
        }
        done
    }

    fn finish_timeout(&self, record: &ConfirmationRecord) -> Option<ToolResult> {
        let stored: StoredRequest = serde_json::from_value(record.request.clone()).ok()?;
        let result = ToolResult::failure(
            &stored.caller.runtime,
            &record.request_id,
            ErrorCode::Timeout,
            "the confirmation expired before the user answered",
        );
        self.finish(
            record,
            &stored,
            result,
            store::AuditConfirmation::Timeout,
            ConfirmationResolution::Timeout,
            None,
        )
        .map_err(|e| tracing::error!(error = %e, "finishing a timed-out confirmation"))
        .ok()
    }

    /// Startup recovery: direct executions without an outcome, and approved confirmations
    /// whose outcome is unknown, become `execution_result_unknown` (never re-run); pending
    /// confirmations past their expiry time out; the rest stay pending.
    pub async fn recover(&self) -> Result<RecoveryReport, BridgeError> {
        let mut report = RecoveryReport {
            executions_unknown: self.recover_executions()?,
            ..RecoveryReport::default()
        };
        let recovery = self.store.recover_after_restart(self.now_ms())?;
        for record in &recovery.result_unknown {
            if let Ok(stored) = serde_json::from_value::<StoredRequest>(record.request.clone()) {
                let result = ToolResult::failure(
                    &stored.caller.runtime,
                    &record.request_id,
                    ErrorCode::ExecutionResultUnknown,
                    "the daemon stopped while this approved action ran; it is not run again",
                );
                self.finish(
                    record,
                    &stored,
                    result,
                    store::AuditConfirmation::ResultUnknown,
                    ConfirmationResolution::ResultUnknown,
                    None,
                )?;
            }
            report.result_unknown.push(record.confirmation_id.clone());
        }
        // A grant made for a request whose outcome is unknown is not left standing.
        self.revoke_grants_of(&report.result_unknown);
        for record in &recovery.timed_out {
            self.finish_timeout(record);
            report.timed_out.push(record.confirmation_id.clone());
        }
        report.still_pending = recovery
            .still_pending
            .iter()
            .map(|r| r.confirmation_id.clone())
            .collect();
        Ok(report)
    }
}
