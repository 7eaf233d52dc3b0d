//! `inbox.list` and `inbox.resolve` (operator only): everything that waits for the user in
//! one list with one id scheme (issue 31) — runtime confirmations (`runtime-confirm-<uuid>`),
//! background job reviews (`job-confirm-<uuid>`) and goal approvals (the goal action's
//! `runtime-confirm-<uuid>`). Each item also has a short id, the first 8 hex digits of its
//! uuid; `inbox.resolve` takes the full id, the short id or any unique prefix of either and
//! routes the decision to the item's own rules (a job review still checks its digests).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ConfirmDecision;
use crate::manifest::Risk;

/// `inbox.list` params. Unknown fields are refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InboxListParams {
    /// Also list items whose window has passed (state `expired`): confirmations that timed
    /// out (the most recent 50) and reviews past their window that no tick settled yet.
    #[serde(default)]
    pub include_expired: bool,
}

crate::wire_enum!(
    /// What kind of thing waits.
    InboxKind {
        /// A runtime's tool request waiting for the user (`confirmations.*`).
        Confirmation = "confirmation",
        /// A background job's parked call (`jobs.review`).
        JobReview = "job_review",
        /// A goal action's request waiting for approval (`goals approve`).
        GoalApproval = "goal_approval",
    }
);

crate::wire_enum!(
    /// Whether an item can still be decided.
    InboxState {
        /// Waiting for the user.
        Pending = "pending",
        /// Its window passed; approving it does nothing (`inbox.resolve` says when it expired).
        Expired = "expired",
    }
);

/// One thing waiting for the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InboxItem {
    /// `runtime-confirm-<uuid>` (confirmations and goal approvals) or `job-confirm-<uuid>`.
    pub id: String,
    /// The first 8 hex digits of the uuid: what people type.
    pub short_id: String,
    pub kind: InboxKind,
    pub state: InboxState,
    /// One line: who wants what.
    pub title: String,
    /// What exactly will happen (control and bidi characters escaped).
    pub summary: String,
    /// The runtime id, `job <id>: <title>` or the goal's objective.
    pub requested_by: String,
    /// The canonical command (or the background tool name), when there is one.
    pub tool: Option<String>,
    pub risk: Option<Risk>,
    /// The phone the request acts on, when it names one.
    pub device_id: Option<String>,
    pub created_at_ms: i64,
    pub expires_at_ms: Option<i64>,
    pub job_id: Option<i64>,
    pub goal_id: Option<String>,
    pub action_id: Option<String>,
    pub phone_session_id: Option<String>,
    /// Whether `accept_for_session` would make a session grant (confirmations only).
    pub session_grant_offered: bool,
    /// Kind-specific details: a job review's record (params, digests, idempotency key); a
    /// confirmation's `request_id` and `runtime`.
    pub detail: Value,
    /// The daemon of a fleet the item belongs to: the one whose runtime asked (confirmations,
    /// goal approvals) or the job's (job reviews). Absent when not in a fleet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<super::RowHost>,
}

/// Pending items by kind (expired ones are not counted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InboxCounts {
    pub confirmation: usize,
    pub job_review: usize,
    pub goal_approval: usize,
    pub total: usize,
}

/// `inbox.list` result: the items, oldest first, and the pending counts by kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InboxListResult {
    pub items: Vec<InboxItem>,
    pub counts: InboxCounts,
}

/// `inbox.resolve` params. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InboxResolveParams {
    /// The full id, the short id, or a unique prefix of either (at least 4 characters).
    pub id: String,
    /// `accept_for_session` applies to confirmations and goal approvals only.
    pub decision: ConfirmDecision,
}

crate::wire_enum!(
    /// How a decision ended.
    InboxOutcome {
        /// Approved, and the request ran (see `result` for its status).
        Approved = "approved",
        /// Denied: nothing ran.
        Denied = "denied",
        /// Approved, but the request was refused when it was checked again (a job review whose
        /// digests no longer match, a command no longer allowed): nothing ran.
        Refused = "refused",
    }
);

/// `inbox.resolve` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InboxResolveResult {
    /// The full id the given id or prefix resolved to.
    pub id: String,
    pub kind: InboxKind,
    pub outcome: InboxOutcome,
    /// One line for a person.
    pub message: String,
    /// The kind's own answer: the final tool result (confirmations, goal approvals) or the
    /// `jobs.review` result (job reviews).
    pub result: Value,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn inbox_params_refuse_unknown_fields_and_decisions() {
        let p: InboxListParams = serde_json::from_value(json!({})).unwrap();
        assert!(!p.include_expired);
        assert!(serde_json::from_value::<InboxListParams>(json!({"all": true})).is_err());
        let p: InboxResolveParams =
            serde_json::from_value(json!({"id": "3f2a", "decision": "deny"})).unwrap();
        assert_eq!(p.decision, ConfirmDecision::Deny);
        for bad in [
            json!({"id": "3f2a", "decision": "maybe"}),
            json!({"id": "3f2a", "decision": "deny", "why": 1}),
            json!({"decision": "approve"}),
        ] {
            assert!(serde_json::from_value::<InboxResolveParams>(bad).is_err());
        }
    }
}
