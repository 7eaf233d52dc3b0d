//! A retry joins what it retries (issue 28, item 9).
//!
//! Most MCP hosts send no idempotency key. When the user decides after the host's inline wait,
//! the host has only seen "pending", and its model calls the tool again: under a fresh request
//! id that is a new identity key, so before this rule it opened a second confirmation, and
//! approving both ran the action twice.
//!
//! The rule: an **interactive** call of a **state-changing** command **without an idempotency
//! key**, from a **runtime** that can give up waiting and call again (over the endpoint, MCP or
//! OpenClaw — not the daemon's in-process callers, the built-in runtime, jobs and goals, which
//! always wait for the decision, and not the operator: the user's own command typed twice is
//! meant twice), whose verdict **asks the user** (Confirm), joins an earlier
//! call without a key from the **same runtime, principal, runtime session and phone session**,
//! for the **same command** with the **same parameters** (the canonical params hash without
//! `reason` and the `_`-members: [`retry_digest`]), whose confirmation is
//!
//! - pending (in time) or approved and executing: the retry is answered `needs_confirmation`
//!   with that confirmation's id, so it waits for the same outcome
//!   ([`ToolBridge::wait_for_final`](super::ToolBridge::wait_for_final)) and no second
//!   confirmation opens;
//! - decided (approved and executed, denied, or result unknown) less than
//!   [`RETRY_JOIN_WINDOW_MS`] ago: the retry gets that final result, re-addressed and
//!   `replayed`, as a keyed retry does; nothing runs again, and a denial stays a denial.
//!
//! Not joined: a call with a key (the key decides, `mod.rs` step 3), a call the policy allows
//! without asking — autonomy, a standing approval or a session grant (two identical
//! auto-allowed taps are two taps) —, reads, background calls,
//! a confirmation that timed out or that its own caller withdrew (the user never decided: the
//! retry asks again), and anything decided longer ago than the window.
//!
//! The lookup reads the store ([`openphone_store::Store::find_joinable`]), so a pending
//! confirmation is joined after a daemon restart too. Two identical calls arriving together
//! are serialised by the per-identity lock on the join key (`identity.rs`), so the second
//! finds the first's confirmation.

use openphone_policy::{Caller, Context, Decision, Requirement, Role, Transport};
use openphone_protocol::{Command, ToolRequest, ToolResult, params_hash_hex};
use openphone_store as store;
use openphone_store::{ConfirmationRecord, ConfirmationState};
use serde_json::Value;

use super::audit::Attempt;
use super::types::StoredRequest;
use super::{ToolBridge, needs_confirmation, parse_result};
use crate::request::NormalizedRequest;

/// How long after the user decided a confirmation an identical call without a key still gets
/// that decision's outcome instead of a new confirmation: 5 minutes. A model that retries
/// after its host's inline wait does so within seconds to a minute; the same action asked for
/// again later than this is a new action.
pub(crate) const RETRY_JOIN_WINDOW_MS: i64 = 5 * 60 * 1000;

/// What a call without a key joins on.
pub(super) struct RetryKey {
    /// The lock key: runtime, runtime session, principal, phone session, tool, digest.
    lock: String,
    /// [`retry_digest`] of the call's params.
    digest: String,
}

impl RetryKey {
    /// The key of the per-key lock that serialises identical calls.
    pub(super) fn lock_key(&self) -> &str {
        &self.lock
    }
}

/// The params digest two calls must share to be one action: the canonical params hash
/// (`params_hash_hex`) of the params without `reason` (a model rewords it when it retries)
/// and without the members whose name starts with `_` (reserved for the phone: a runtime cannot send them). `None` for params
/// that are not an object or do not hash.
pub(super) fn retry_digest(params: &Value) -> Option<String> {
    let Value::Object(map) = params else {
        return None;
    };
    let kept: serde_json::Map<String, Value> = map
        .iter()
        .filter(|(k, _)| k.as_str() != "reason" && !k.starts_with('_'))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    params_hash_hex(&Value::Object(kept)).ok()
}

/// Whether a request as received carries an idempotency key of its own (normalisation puts
/// the request id in its place when it has none, so this is read before it). A key equal to
/// the request id is still a key: keys decide.
pub(super) fn explicitly_keyed(request: &ToolRequest) -> bool {
    request
        .idempotency_key
        .as_deref()
        .is_some_and(|key| !key.trim().is_empty())
}

/// Whether a stored confirmation's request carried a key; for a record stored before that was
/// kept, whether its key differs from its request id.
fn stored_keyed(stored: &StoredRequest) -> bool {
    stored
        .keyed
        .unwrap_or(stored.request.idempotency_key != stored.request.request_id)
}

/// Whether the verdict asks the user now: Confirm, not a background park. A call the policy
/// lets through without asking (autonomy, a standing approval, a session grant) is the user's
/// own word that such calls need no asking: each is its own action.
fn asks_the_user(decision: &Decision) -> bool {
    matches!(
        decision.requirement,
        Requirement::Confirm {
            park_for_review: false,
            ..
        }
    )
}

impl ToolBridge {
    /// The join key of a call that may join an earlier identical one, or `None` when the call
    /// is never joined (see the module documentation).
    pub(super) fn retry_key(
        caller: &Caller,
        req: &NormalizedRequest,
        keyed: bool,
        command: &Command,
        decision: &Decision,
        context: &Context,
    ) -> Option<RetryKey> {
        if !command.mutating
            || caller.role == Role::Operator
            || caller.transport == Transport::Internal
            || keyed
            || *context != Context::Interactive
            || !asks_the_user(decision)
        {
            return None;
        }
        let digest = retry_digest(&req.params)?;
        let lock = format!(
            "retry {}:{} principal={:?} phone={:?} device={:?} {} {digest}",
            caller.runtime,
            req.session_scope(),
            caller.principal,
            req.phone_session_id,
            req.device_id,
            command.name,
        );
        Some(RetryKey { lock, digest })
    }

    /// Joins the call to an earlier identical one's confirmation, if there is one (the caller
    /// holds the join key's lock): the recorded answer for this call, or `None` to go on.
    pub(super) async fn join_retry(
        &self,
        attempt: &Attempt<'_>,
        command: &Command,
        key: &RetryKey,
    ) -> Option<ToolResult> {
        let (caller, req) = (attempt.caller, attempt.req);
        let now = self.now_ms();
        let candidates = match self.store.find_joinable(
            &caller.runtime,
            req.session_scope(),
            &command.name,
            now.saturating_sub(RETRY_JOIN_WINDOW_MS),
            now,
        ) {
            Ok(list) => list,
            Err(e) => return Some(attempt.internal_error(e).await),
        };
        let mut joinable = candidates
            .into_iter()
            .filter(|record| Self::same_action(record, caller, req, &key.digest));
        // Oldest first: a live one wins, else the latest decision.
        let mut latest_decided = None;
        let live = loop {
            match joinable.next() {
                None => break None,
                Some(r) if !r.state.is_terminal() => break Some(r),
                Some(r) => latest_decided = Some(r),
            }
        };
        let record = live.or(latest_decided)?;
        let runtime = &caller.runtime;
        let answer = match (record.state, record.final_result.as_ref()) {
            (ConfirmationState::Pending, _) => (
                needs_confirmation(runtime, &req.request_id, &record),
                store::AuditConfirmation::Pending,
            ),
            (_, Some(stored)) if record.state.is_terminal() => match parse_result(stored) {
                // Recorded before this call arrived: a replay, as for a keyed retry.
                Some(result) => (
                    result.readdressed(runtime, &req.request_id),
                    store::AuditConfirmation::Replayed,
                ),
                None => {
                    let e = format!(
                        "unreadable final result of confirmation {}",
                        record.confirmation_id
                    );
                    return Some(attempt.internal_error(e).await);
                }
            },
            // Approved and executing, or decided with its result being recorded: wait for it.
            _ => (
                needs_confirmation(runtime, &req.request_id, &record),
                store::AuditConfirmation::Approved,
            ),
        };
        tracing::info!(
            confirmation = %record.confirmation_id,
            tool = %command.name,
            "a call without an idempotency key joined an identical earlier call"
        );
        Some(
            attempt
                .finish_confirmation(answer.0, Some(record.confirmation_id.clone()), answer.1)
                .await,
        )
    }

    /// Whether `record` is the confirmation of the same action as this call: made by the
    /// same principal, without a key, on the same phone, in the same phone session and
    /// interactive context, with the same parameters (runtime, runtime session and tool
    /// matched by the store), and not withdrawn by its own caller or timed out.
    fn same_action(
        record: &ConfirmationRecord,
        caller: &Caller,
        req: &NormalizedRequest,
        digest: &str,
    ) -> bool {
        if record
            .resolved_by
            .as_deref()
            .is_some_and(|by| by.ends_with(":withdrawn"))
        {
            return false;
        }
        let Ok(stored) = serde_json::from_value::<StoredRequest>(record.request.clone()) else {
            return false;
        };
        stored.caller.runtime == caller.runtime
            && stored.caller.principal == caller.principal
            && !stored_keyed(&stored)
            && stored.context == Context::Interactive
            && stored.request.phone_session_id == req.phone_session_id
            && stored.request.device_id == req.device_id
            && retry_digest(&stored.request.params).as_deref() == Some(digest)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::retry_digest;
    use serde_json::json;

    #[test]
    fn the_retry_digest_ignores_reason_and_underscore_members_only() {
        let a = retry_digest(&json!({"title": "x", "start_at": 1, "reason": "first"}));
        let b = retry_digest(&json!({"start_at": 1, "title": "x", "reason": "again", "_r": 1}));
        let c = retry_digest(&json!({"title": "y", "start_at": 1, "reason": "first"}));
        assert!(a.is_some());
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(retry_digest(&json!("not an object")), None);
    }
}
