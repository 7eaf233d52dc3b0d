//! How a confirmation ends after its resolution: the approved **stored** request re-checked and
//! run once (`execute_approved`), its final result recorded with the audit transition, the
//! `runtime.confirmation.resolved` and `runtime.tool.result` events, and the wake of whoever
//! waits (`wait.rs`); confirmations timed out at their expiry; and startup recovery (approved
//! ones without an outcome become `execution_result_unknown`, never re-run).

use openphone_policy::Requirement;
use openphone_protocol::endpoint::{ConfirmationResolution, ConfirmationResolved, Event};
use openphone_protocol::{ErrorCode, ToolResult};
use openphone_store as store;
use openphone_store::{ConfirmationRecord, IdentityKey, SessionStatus, StoreError};

use super::audit::Unaudited;
use super::authority::Standing;
use super::grants::Grant;
use super::types::{BridgeError, RecoveryReport, StoredRequest};
use super::{ToolBridge, result_json};
use crate::locks::lock;
use crate::request::{Rejection, validate};

impl ToolBridge {
    /// Re-runs steps 1 and 2 on the stored request; a Confirm counts as satisfied by this
    /// approval, a Deny wins; then executes. The flag says whether it ran (false: refused now).
    pub(super) async fn execute_approved(&self, stored: &StoredRequest) -> (ToolResult, bool) {
        // Under the runtime's configuration now, not the one it had when it asked
        // (`authority.rs`).
        let standing = self.standing(&stored.caller);
        let caller = standing.caller();
        let req = &stored.request;
        let runtime = &caller.runtime;
        let (command, params_digest) = match validate(self.registry, caller, req, true) {
            Ok(v) => (v.command, v.params_digest),
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
        // The phone too, under the configuration now: a phone taken from the runtime's
        // `[[runtimes]] devices` since it asked is not acted on (`routing.rs`).
        let mut routed = req.clone();
        if let Some(mut refused) = self.route_device(caller, &mut routed) {
            if let Some(error) = refused.error.as_mut() {
                error.message = format!("denied after approval: {}", error.message);
            }
            return (refused, false);
        }
        let started = self.now_ms();
        // A dialog's confirmation answers the dialog; any other approved request runs, and a
        // dialog it raises is confirmed once (`os_dialogs.rs`).
        let result = match &stored.dialog {
            Some(dialog) => {
                let identity = self.identity_of(runtime, req, &command.name, &params_digest);
                self.approve_dialog(stored, command, &identity, dialog)
                    .await
            }
            None => {
                let result = self.execute(caller, req, command, started).await;
                self.after_approved(stored, command, &params_digest, result)
                    .await
            }
        };
        self.touch_session(
            caller,
            req.phone_session_id.as_deref(),
            SessionStatus::Running,
        );
        (result, true)
    }

    /// Stores a final result for a confirmation that ended without executing, then announces.
    pub(super) fn finish(
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
    pub(super) fn announce(
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
    pub(super) fn announce_with(
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
    pub(super) fn deliver_resolved(
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
    pub(super) fn wake(&self, confirmation_id: &str, result: &ToolResult) {
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
        // Elevations past their time end on the same tick (`crate::elevation`).
        let ended = self.expire_elevations();
        if ended > 0 {
            tracing::info!(ended, "elevations expired");
        }
        let _serial = self.expiry.lock().await;
        self.expire_due_serialised()
    }

    /// [`ToolBridge::expire_due`] under the expiry lock, which the caller holds.
    pub(super) fn expire_due_serialised(&self) -> usize {
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

    pub(super) fn finish_timeout(&self, record: &ConfirmationRecord) -> Option<ToolResult> {
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
