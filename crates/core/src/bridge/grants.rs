//! Session grants: what approving a confirmation `accept_for_session` makes (`approvals.md`
//! §7).
//!
//! A grant is a standing approval scoped to the approved request's phone session, runtime and
//! tool, with every target param of the command pinned to the approved request's value (or to
//! "absent"; `openphone_policy::grants`). It applies (policy layer 7, source `session_grant`)
//! only to requests made in that session while it is active, and never on the risk floor:
//! there, and wherever no grant can be made (no phone session, the session has ended, a
//! background request, a confirming host's prompt), the decision counts as a plain approval
//! and the reason is recorded. Every request a grant lets through carries the grant id in its
//! proof.
//!
//! Order, so that no grant exists without its records: whether a grant may be made is decided
//! and noted in the approval's audit record first; the request is re-checked and run; only if
//! it ran is the grant made, and the outcome's audit record names it. A grant whose outcome
//! could not be recorded is withdrawn (and kept out of every decision even if that revoke
//! cannot be written); one left behind by a crash between the two is revoked at start
//! (`ToolBridge::recover`).
//!
//! **Goal grants** (`goals.md` §4, §8: the approval package). A confirmation the goal layer
//! asked for — the built-in runtime's internal caller with principal [`GOAL_PRINCIPAL`], a
//! request id `goal_<id>:<action>:<n>` naming a stored goal — has no phone session, and its
//! steps run in the goal's background context. Approved `accept_for_session`, it makes a grant
//! scoped to that goal alone ([`goal_scope`] as its session, applying in background runs of
//! that goal only), pinning every declared param of the request (not only its target), and
//! expiring at the goal's deadline, or [`GOAL_GRANT_MAX_MS`] from now without one. Later
//! attempts of the same step of the same goal are not asked again; nothing else benefits.

use openphone_policy::{
    BackgroundRun, Caller, Context, Transport, exact_params_constraints, is_risk_floor,
    session_grant_constraints,
};
use openphone_store::{ConfirmationRecord, NewStandingApproval, StoredGoal};
use serde_json::{Map, Value, json};

use super::ToolBridge;
use super::types::StoredRequest;

/// The principal of the goal layer's requests (`openphone_goals::engine::PRINCIPAL`).
pub const GOAL_PRINCIPAL: &str = "goals";

/// The longest a goal grant lives: for a goal without a deadline, and as a cap on one with a
/// far deadline (seven days).
pub const GOAL_GRANT_MAX_MS: i64 = 7 * 24 * 60 * 60 * 1000;

/// The session a goal's grants are scoped to: `goal:<goal id>`.
pub fn goal_scope(goal_id: &str) -> String {
    openphone_protocol::goal_session(goal_id)
}

/// Whether `caller` is the goal layer's own (never a remote runtime: those are not internal).
pub(super) fn is_goal_caller(caller: &Caller) -> bool {
    caller.runtime == openphone_protocol::BUILTIN_RUNTIME_ID
        && caller.transport == Transport::Internal
        && caller.principal == GOAL_PRINCIPAL
}

/// The goal scope a request's grants are matched in: a background run of a goal, made by the
/// goal layer.
pub(super) fn goal_context_scope(caller: &Caller, context: &Context) -> Option<String> {
    match context {
        Context::Background {
            run: BackgroundRun::Goal { goal_id },
        } if is_goal_caller(caller) => Some(goal_scope(goal_id)),
        _ => None,
    }
}

/// What an approval did about a session grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Grant {
    /// A plain `approve`.
    NotAsked,
    /// `accept_for_session` made this grant (its approval id).
    Made(i64),
    /// `accept_for_session` counted as `approve`, for this reason.
    Downgraded(&'static str),
}

impl Grant {
    /// The grant id, when one was made.
    pub(super) fn grant_id(&self) -> Option<String> {
        match self {
            Grant::Made(id) => Some(id.to_string()),
            Grant::NotAsked | Grant::Downgraded(_) => None,
        }
    }

    /// Why `accept_for_session` made no grant.
    pub(super) fn downgrade_reason(&self) -> Option<&'static str> {
        match self {
            Grant::Downgraded(reason) => Some(reason),
            Grant::NotAsked | Grant::Made(_) => None,
        }
    }

    /// What the outcome's audit record notes beside `resolved_by`.
    pub(super) fn audit_note(&self) -> Option<Map<String, Value>> {
        let mut note = Map::new();
        match self {
            Grant::NotAsked => return None,
            Grant::Made(id) => {
                note.insert("decision".into(), json!("accept_for_session"));
                note.insert("grant_id".into(), json!(id.to_string()));
            }
            Grant::Downgraded(reason) => {
                note.insert("decision".into(), json!("accept_for_session"));
                note.insert("recorded_as".into(), json!("approve"));
                note.insert("downgraded".into(), json!(reason));
            }
        }
        Some(note)
    }
}

/// What the approval's audit record notes beside `resolved_by` for an `accept_for_session`:
/// the decision, and why no grant will be made when none can be.
pub(super) fn approval_note(refusal: Option<&'static str>) -> Map<String, Value> {
    let mut note = Map::new();
    note.insert("decision".into(), json!("accept_for_session"));
    if let Some(reason) = refusal {
        note.insert("recorded_as".into(), json!("approve"));
        note.insert("downgraded".into(), json!(reason));
    }
    note
}

impl ToolBridge {
    /// Whether `accept_for_session` would make a grant for this confirmation now: below the
    /// risk floor, an interactive request, in a phone session of its runtime that is active.
    pub fn session_grant_offered(&self, record: &ConfirmationRecord) -> bool {
        let Ok(stored) = serde_json::from_value::<StoredRequest>(record.request.clone()) else {
            return false;
        };
        self.grant_refusal(record, &stored).is_none()
    }

    /// Why no grant can be made for this approved request, if none can.
    pub(super) fn grant_refusal(
        &self,
        record: &ConfirmationRecord,
        stored: &StoredRequest,
    ) -> Option<&'static str> {
        let Some(command) = self.registry.resolve(&record.identity.tool) else {
            return Some("unknown_tool");
        };
        if is_risk_floor(command) {
            return Some("risk_floor");
        }
        // An OS dialog is answered once, by the user, every time (`os_dialogs.rs`).
        if stored.dialog.is_some() {
            return Some("os_dialog");
        }
        if is_goal_caller(&stored.caller) {
            return match self.goal_of(&stored.caller, &stored.request.request_id) {
                Some(goal) if goal_is_open(&goal, self.now_ms()) => None,
                Some(_) => Some("goal_ended"),
                None => Some("no_goal"),
            };
        }
        if stored.context.is_background() {
            return Some("background");
        }
        let Some(session) = stored.request.phone_session_id.as_deref() else {
            return Some("no_phone_session");
        };
        if self.own_session(&stored.caller, Some(session)).is_none() {
            return Some("session_ended");
        }
        None
    }

    /// Makes the session grant for an approved request, or says why it counts as a plain
    /// approval. A grant that cannot be stored is not made (the approval stands; the next step
    /// asks again).
    pub(super) fn grant_for_session(
        &self,
        record: &ConfirmationRecord,
        stored: &StoredRequest,
    ) -> Grant {
        if let Some(reason) = self.grant_refusal(record, stored) {
            return Grant::Downgraded(reason);
        }
        let Some(command) = self.registry.resolve(&record.identity.tool) else {
            return Grant::Downgraded("unknown_tool");
        };
        if let Some(goal) = self.goal_of(&stored.caller, &stored.request.request_id) {
            return self.grant_for_goal(record, stored, command, &goal);
        }
        let constraints: Map<String, Value> =
            session_grant_constraints(command, &stored.request.params)
                .into_iter()
                .collect();
        let new = NewStandingApproval {
            runtime: stored.caller.runtime.clone(),
            tool: command.name.clone(),
            constraints: Value::Object(constraints),
            expires_at_ms: None,
            background: false,
            phone_session_id: stored.request.phone_session_id.clone(),
            confirmation_id: Some(record.confirmation_id.clone()),
            created_by: record.resolved_by.clone(),
            note: None,
        };
        match self.store.create_approval(&new, self.now_ms()) {
            Ok(row) => Grant::Made(row.approval_id),
            Err(e) => {
                tracing::error!(error = %e, "storing a session grant");
                Grant::Downgraded("grant_not_stored")
            }
        }
    }

    /// The stored goal a goal-layer request was made for (its request id is the attempt key
    /// `goal_<id>:<action>:<n>`).
    pub(super) fn goal_of(&self, caller: &Caller, request_id: &str) -> Option<StoredGoal> {
        if !is_goal_caller(caller) {
            return None;
        }
        let goal_id = request_id
            .split(':')
            .next()
            .filter(|id| id.starts_with("goal_"))?;
        match self.store.get_goal(goal_id) {
            Ok(goal) => goal,
            Err(e) => {
                tracing::error!(error = %e, "reading the goal of a confirmation");
                None
            }
        }
    }

    /// The goal grant of an approved goal request (see the module docs).
    fn grant_for_goal(
        &self,
        record: &ConfirmationRecord,
        stored: &StoredRequest,
        command: &openphone_protocol::Command,
        goal: &StoredGoal,
    ) -> Grant {
        let now = self.now_ms();
        let cap = now.saturating_add(GOAL_GRANT_MAX_MS);
        let new = NewStandingApproval {
            runtime: stored.caller.runtime.clone(),
            tool: command.name.clone(),
            constraints: Value::Object(
                exact_params_constraints(command, &stored.request.params)
                    .into_iter()
                    .collect(),
            ),
            expires_at_ms: Some(goal.deadline_at_ms.map_or(cap, |d| d.min(cap))),
            background: true,
            phone_session_id: Some(goal_scope(&goal.goal_id)),
            confirmation_id: Some(record.confirmation_id.clone()),
            created_by: record.resolved_by.clone(),
            note: Some(format!("approved for goal {} only", goal.goal_id)),
        };
        match self.store.create_approval(&new, now) {
            Ok(row) => Grant::Made(row.approval_id),
            Err(e) => {
                tracing::error!(error = %e, "storing a goal grant");
                Grant::Downgraded("grant_not_stored")
            }
        }
    }

    /// Withdraws a grant whose outcome could not be recorded: kept out of every decision from
    /// now on (in memory, so even when the revoke below cannot be written), and revoked.
    pub(super) fn withdraw_grant(&self, grant: &Grant) {
        if let Grant::Made(id) = grant {
            crate::locks::lock(&self.withdrawn_grants).insert(*id);
            if let Err(e) =
                self.store
                    .revoke_approval(*id, "daemon:outcome-unrecorded", self.now_ms())
            {
                tracing::error!(error = %e, grant = id, "revoking an unrecorded session grant");
            }
        }
    }

    /// At start: revokes the grants of confirmations whose outcome is unknown (the daemon
    /// stopped between making the grant and recording the outcome). Returns their ids.
    pub(super) fn revoke_grants_of(&self, confirmation_ids: &[String]) -> Vec<i64> {
        if confirmation_ids.is_empty() {
            return Vec::new();
        }
        let rows = match self.store.list_approvals(None) {
            Ok(rows) => rows,
            Err(e) => {
                tracing::error!(error = %e, "reading session grants at start");
                return Vec::new();
            }
        };
        let mut revoked = Vec::new();
        for row in rows.iter().filter(|r| {
            r.revoked_at_ms.is_none()
                && r.confirmation_id
                    .as_ref()
                    .is_some_and(|c| confirmation_ids.contains(c))
        }) {
            match self.store.revoke_approval(
                row.approval_id,
                "daemon:outcome-unknown",
                self.now_ms(),
            ) {
                Ok(_) => revoked.push(row.approval_id),
                Err(e) => {
                    crate::locks::lock(&self.withdrawn_grants).insert(row.approval_id);
                    tracing::error!(error = %e, grant = row.approval_id, "revoking a session grant");
                }
            }
        }
        revoked
    }
}

/// A goal that can still use a grant: not finished, its deadline not passed.
fn goal_is_open(goal: &StoredGoal, now_ms: i64) -> bool {
    !matches!(goal.state.as_str(), "done" | "failed" | "aborted")
        && goal.deadline_at_ms.is_none_or(|d| now_ms < d)
}
