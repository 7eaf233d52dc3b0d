//! Step 4, confirm: a durable pending confirmation bound to the exact request, and every way
//! it ends — resolved by an [`Operator`] or a [`ConfirmingHost`], withdrawn by its own
//! runtime, expired, or found unfinished after a restart.
//!
//! The first resolution wins (the store's conditional UPDATE). On approval the **stored**
//! request is re-validated, re-decided and executed once, under the identity lock. Every
//! ending records a final result, an audit transition, the `runtime.confirmation.resolved`
//! and `runtime.tool.result` events, and wakes whoever waits (`wait.rs`).
//!
//! This file opens a confirmation and resolves it; what follows a resolution (the approved
//! request run, the final result, the events, the wake), expiry and startup recovery are in
//! `settle.rs`; the shared types in `types.rs`.

use openphone_policy::{Caller, Context, Decision, Requirement};
use openphone_protocol::endpoint::{ConfirmationRequired, ConfirmationResolution, Event};
use openphone_protocol::{Command, ErrorCode, ToolResult};
use openphone_store as store;
use openphone_store::{
    ConfirmationRecord, IdentityKey, MAX_PENDING_PER_RUNTIME, NewConfirmation, PendingInsert,
    Resolution, SessionStatus, StoreError,
};

use super::audit::{Attempt, Unaudited};
use super::grants::{self, Grant};
use super::types::{BridgeError, ConfirmDecision, ConfirmingHost, Operator, StoredRequest};
use super::{ToolBridge, needs_confirmation, result_json};
use crate::request::NormalizedRequest;
use crate::summary::summary_for;

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
        self.store.find_approved(identity)
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
        let text = summary_for(&command.name, &command.input_schema, &reason, &req.params);
        let stored = StoredRequest {
            caller: caller.clone(),
            request: req.clone(),
            context,
            keyed: Some(keyed),
            dialog: None,
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
            Ok(PendingInsert::Created(r)) => {
                self.expiry_moved();
                (r, true)
            }
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
        // An OS dialog is the user's to answer on their own surfaces, like the risk floor.
        if !below_floor || super::os_dialogs::is_dialog_confirmation(&record) {
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
        // In a fleet, the approved request would run on this daemon's phone: only the daemon
        // whose phone it acts on may decide it.
        if let Some(fleet) = self.store.fleet()
            && let Some(host) = fleet.confirmation_host(confirmation_id)?
            && host != fleet.host_id()
        {
            return Err(BridgeError::OnAnotherHost {
                confirmation_id: confirmation_id.to_owned(),
                host,
                here: fleet.host_id().to_owned(),
            });
        }
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
                let mut result = ToolResult::failure(
                    &stored.caller.runtime,
                    &record.request_id,
                    denial.0,
                    denial.1,
                );
                // A dialog's confirmation: the user's denial dismisses the phone's dialog; a
                // runtime's withdrawal leaves it on the screen (`os_dialogs.rs`).
                let dialog = match denial.0 {
                    ErrorCode::Cancelled => self.leave_dialog(&stored, confirmation_id, label),
                    _ => self.dismiss_dialog(&stored, confirmation_id).await,
                };
                if let Some(details) = dialog {
                    result = result.with_details(details);
                }
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
}
