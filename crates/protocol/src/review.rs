//! Background review records (`agent-jobs.md` §9.12): the confirmation record a parked job
//! stores as its `pending_tool_request_json`, its lifecycle ([`ReviewState`]), the decision a
//! claimed tap wrote into it ([`ReviewDecision`]) and [`ReviewView`], a typed read of the
//! stored object.
//!
//! Tamper evidence reads the record as it is stored: [`ReviewView`] borrows the stored object
//! and only reads members (it never builds a new value), and [`ConfirmationRecord`] keeps
//! `review_state`, `decision` and `resolution` as the stored text (with typed accessors), so
//! a verifier sees exactly what was written — an unknown state is reported by the check that
//! looks at it, not lost in a parse. Digests are computed from the stored `tool` and `params`,
//! never from a re-serialisation of a typed copy.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::digest::Binding;

/// `schema` of a background confirmation record.
pub const RECORD_SCHEMA: &str = "openphone.background_confirmation.v1";

crate::wire_enum!(
    /// Where a review is in its lifecycle (`review_state`).
    ReviewState {
        /// Waiting for the user.
        Pending = "pending",
        /// The first tap was claimed; its decision is being applied.
        Resolving = "resolving",
        /// Settled (see `resolution`).
        Resolved = "resolved",
    }
);

crate::wire_enum!(
    /// The decision a claimed tap wrote into a review record (`decision`). Not the tap itself
    /// (`jobs.review`'s `approve` / `deny`, [`crate::endpoint::ReviewDecision`]).
    ReviewDecision {
        /// Approve: the stored call runs once.
        Approved = "approved",
        /// Deny: nothing runs.
        Denied = "denied",
    }
);

impl ReviewDecision {
    /// Approve when `approve`, else deny.
    pub fn from_approve(approve: bool) -> ReviewDecision {
        if approve {
            ReviewDecision::Approved
        } else {
            ReviewDecision::Denied
        }
    }
}

/// The background confirmation record (§9.12), stored as the job's
/// `pending_tool_request_json`. A closed object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfirmationRecord {
    /// [`RECORD_SCHEMA`].
    pub schema: String,
    /// `job-confirm-<uuid>`.
    pub confirmation_id: String,
    pub job_id: i64,
    /// The built-in runtime ([`crate::BUILTIN_RUNTIME_ID`]).
    pub runtime: String,
    /// `background-job:<job_id>` ([`crate::background_job_session`]).
    pub phone_session_id: String,
    /// The model-tool name.
    pub tool: String,
    /// The exact proposed params.
    pub params: Value,
    pub params_digest: String,
    pub binding_digest: String,
    /// `job:<job_id>:<uuid>`.
    pub idempotency_key: String,
    pub created_at: i64,
    pub expires_at: i64,
    /// The stored text of the [`ReviewState`] (read it with [`ConfirmationRecord::state`]).
    pub review_state: String,
    pub summary: String,
    /// `approved` or `denied`, set by the claim ([`ConfirmationRecord::decided`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewed_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<i64>,
}

impl ConfirmationRecord {
    /// The record of a job's `pending_tool_request_json`, if it holds a well-formed one.
    pub fn of(pending_tool_request_json: &Map<String, Value>) -> Option<ConfirmationRecord> {
        if pending_tool_request_json.is_empty() {
            return None;
        }
        serde_json::from_value(Value::Object(pending_tool_request_json.clone())).ok()
    }

    /// As the object stored in `pending_tool_request_json`.
    pub fn to_map(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        }
    }

    /// The lifecycle state, `None` when the stored text is not one.
    pub fn state(&self) -> Option<ReviewState> {
        ReviewState::parse(&self.review_state)
    }

    /// The claimed decision, `None` when there is none or it is not one.
    pub fn decided(&self) -> Option<ReviewDecision> {
        self.decision.as_deref().and_then(ReviewDecision::parse)
    }

    /// The fields `binding_digest` binds (§9.11); `None` when `job_id` or `expires_at` is
    /// negative (such a record has no digest and fails verification).
    pub fn binding(&self) -> Option<Binding<'_>> {
        Some(Binding {
            job_id: u64::try_from(self.job_id).ok()?,
            runtime: &self.runtime,
            phone_session_id: &self.phone_session_id,
            tool: &self.tool,
            params_digest: &self.params_digest,
            idempotency_key: &self.idempotency_key,
            expires_at: u64::try_from(self.expires_at).ok()?,
        })
    }
}

/// A typed read of a stored review record (a job's `pending_tool_request_json`) that borrows
/// it as stored: each accessor reads one member (a missing or mistyped member reads as empty,
/// 0 or `None`), and nothing is re-serialised. For the checks that must see a tampered record
/// exactly as it is (the executor's re-check in core, the scheduler's claim) and for display.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReviewView<'a>(&'a Map<String, Value>);

impl<'a> ReviewView<'a> {
    /// The view of a job's `pending_tool_request_json`; `None` when it holds no record (`{}`).
    pub fn of(stored: &'a Map<String, Value>) -> Option<ReviewView<'a>> {
        (!stored.is_empty()).then_some(ReviewView(stored))
    }

    /// The stored object itself.
    pub fn stored(&self) -> &'a Map<String, Value> {
        self.0
    }

    /// A string member as stored (`""` when missing or not a string).
    pub fn text(&self, member: &str) -> &'a str {
        self.0
            .get(member)
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// An integer member as stored (0 when missing or not an integer).
    fn int(&self, member: &str) -> i64 {
        self.0.get(member).and_then(Value::as_i64).unwrap_or(0)
    }

    /// `confirmation_id` (`None` when missing or not a string).
    pub fn confirmation_id(&self) -> Option<&'a str> {
        self.0.get("confirmation_id").and_then(Value::as_str)
    }

    /// The lifecycle state (`None` when missing or not one).
    pub fn state(&self) -> Option<ReviewState> {
        ReviewState::parse(self.text("review_state"))
    }

    /// The claimed decision (`None` when there is none or it is not one).
    pub fn decision(&self) -> Option<ReviewDecision> {
        ReviewDecision::parse(self.text("decision"))
    }

    /// The model-tool name under review.
    pub fn tool(&self) -> &'a str {
        self.text("tool")
    }

    /// The summary the user was shown (escape it again before showing it).
    pub fn summary(&self) -> &'a str {
        self.text("summary")
    }

    /// `idempotency_key`.
    pub fn idempotency_key(&self) -> &'a str {
        self.text("idempotency_key")
    }

    /// `expires_at` (Unix ms; 0 when missing).
    pub fn expires_at(&self) -> i64 {
        self.int("expires_at")
    }

    /// `reviewed_at` (Unix ms; 0 when missing).
    pub fn reviewed_at(&self) -> i64 {
        self.int("reviewed_at")
    }

    /// The stored `params`, as stored.
    pub fn params(&self) -> Option<&'a Value> {
        self.0.get("params")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_view_reads_what_is_stored() {
        let stored = json!({"confirmation_id": "job-confirm-1", "review_state": "resolving",
            "decision": "approved", "tool": "messages_send", "expires_at": 5, "summary": "s"});
        let Value::Object(map) = stored else {
            unreachable!()
        };
        let view = ReviewView::of(&map).unwrap();
        assert_eq!(view.state(), Some(ReviewState::Resolving));
        assert_eq!(view.decision(), Some(ReviewDecision::Approved));
        assert_eq!(view.confirmation_id(), Some("job-confirm-1"));
        assert_eq!(
            (view.tool(), view.expires_at(), view.reviewed_at()),
            ("messages_send", 5, 0)
        );
        assert!(ReviewView::of(&Map::new()).is_none());
        let mut tampered = map.clone();
        tampered.insert("review_state".into(), json!("RESOLVING"));
        assert_eq!(ReviewView::of(&tampered).unwrap().state(), None);
    }
}
