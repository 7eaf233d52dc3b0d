//! Audit records (`runtime-protocol.md` §15) and `audit.query` (operator only).
//!
//! [`AuditEntry`] and [`AuditRecord`] are also the store's types (`openphone_store::…`): the
//! store hashes exactly this serialisation into the chain, so a change here is a change of the
//! audit format. The hashed body is written field by field ([`AuditEntry::body_digest`], in
//! `audit/body_digest.rs`): a field added here goes there too (its tests fail until it does).
//! Records hold digests, never raw params, results or tokens.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::autonomy::Autonomy;
use crate::manifest::Risk;
use crate::tool_result::ToolStatus;

mod body_digest;

crate::wire_enum!(
    /// What an audit record is about.
    #[derive(Default)]
    AuditKind {
        /// One tool request (including denials and replays).
        #[default]
        ToolRequest = "tool_request",
        /// A confirmation changed state (approved, denied, timeout, result unknown, …).
        ConfirmationTransition = "confirmation_transition",
        /// Something background work did that no tool request records: a job's catch-up run,
        /// a discarded late report, a review resolved, a delivery that failed, a watcher
        /// firing. `tool` names the event (e.g. `assistant.background_job.review_resolved`)
        /// and `policy_proof` carries its payload: lifecycle data and digests, never raw
        /// params or results.
        BackgroundEvent = "background_event",
        /// An operator moved the world of the simulated phone (`openphone sim inject`):
        /// `tool` names what (`sim.inject.message`, …), `params_hash` digests what was
        /// injected.
        OperatorAction = "operator_action",
    }
);

crate::wire_enum!(
    /// The merged policy verdict.
    PolicyDecision {
        Allow = "allow",
        Confirm = "confirm",
        Deny = "deny",
    }
);

crate::wire_enum!(
    /// The `confirmation` field of an audit record (§15).
    AuditConfirmation {
        NotRequired = "not_required",
        Pending = "pending",
        Approved = "approved",
        Completed = "completed",
        Denied = "denied",
        Timeout = "timeout",
        ResultUnknown = "result_unknown",
        Replayed = "replayed",
    }
);

/// The authenticated caller of an audited request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditCaller {
    pub runtime: String,
    pub transport: String,
    pub principal: String,
}

/// One audit record as the caller supplies it. Only digests, never raw params or results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditEntry {
    /// `runtime:<runtime>:<request_id>` (not unique: a request and its confirmation
    /// transitions share it).
    pub audit_id: String,
    pub kind: AuditKind,
    pub at_ms: i64,
    pub runtime: String,
    pub caller: AuditCaller,
    pub phone_session_id: Option<String>,
    pub runtime_session_id: Option<String>,
    pub request_id: String,
    pub idempotency_key: Option<String>,
    /// Canonical command name.
    pub tool: Option<String>,
    pub risk: Option<Risk>,
    pub mutating: Option<bool>,
    /// Effective autonomy.
    pub autonomy: Option<Autonomy>,
    pub decision: Option<PolicyDecision>,
    /// Digest of the policy inputs / proof.
    pub proof_digest: Option<String>,
    /// Each layer's verdict and reason — no raw params.
    pub policy_proof: Option<Value>,
    pub confirmation_id: Option<String>,
    pub confirmation: Option<AuditConfirmation>,
    pub status: Option<ToolStatus>,
    pub error_code: Option<String>,
    pub duration_ms: Option<i64>,
    /// `sha256:<hex>` of the canonical params (§17).
    pub params_hash: Option<String>,
    /// Digest of the result, never the result.
    pub result_digest: Option<String>,
    /// The phone the request acted on (`[[devices]] id`), on a daemon with several phones or
    /// when the request named one; absent otherwise (so such records hash as they always did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
}

/// A stored audit record: the entry plus its place in the chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditRecord {
    pub seq: i64,
    #[serde(flatten)]
    pub entry: AuditEntry,
    pub prev_hash: String,
    pub hash: String,
}

/// `audit.query` params: a page after a sequence number. Unknown fields are refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditQueryParams {
    /// Records with a greater `seq` (default 0: from the start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<i64>,
    /// Default 100, between 1 and 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `audit.query` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditQueryResult {
    pub records: Vec<AuditRecord>,
    /// The last record's `seq` (pass it as `after` for the next page); `null` when the page
    /// is empty.
    pub next_after: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_record_is_flat_and_keeps_every_field() {
        let record = AuditRecord {
            seq: 3,
            entry: AuditEntry {
                audit_id: "runtime:hermes:r1".into(),
                risk: Some(Risk::Medium),
                autonomy: Some(Autonomy::AskBeforeAction),
                ..AuditEntry::default()
            },
            prev_hash: "p".into(),
            hash: "h".into(),
        };
        let v = serde_json::to_value(&record).unwrap();
        assert_eq!(v["seq"], 3);
        assert_eq!(v["kind"], "tool_request");
        assert_eq!(v["risk"], "medium");
        assert_eq!(v["tool"], json!(null));
        assert_eq!(v.as_object().unwrap().len(), 26);
        let back: AuditRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back, record);
    }
}

/// What is wrong with the first broken record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum AuditProblem {
    /// The row's content does not hash to its stored hash: the row was edited in place, or
    /// (records since schema 6, whose `prev_hash` is the previous row's hash) the record
    /// before it was removed or replaced.
    HashMismatch { stored: String, computed: String },
    /// The row's stored `prev_hash` is not the previous row's hash (a row before it was
    /// removed or replaced; records stored before schema 6, which store `prev_hash`).
    PrevHashMismatch { expected: String, found: String },
    /// Sequence numbers jump: records `expected..seq` are missing.
    SeqGap { expected: i64 },
    /// The newest rows are missing or the head was altered: the head names this seq / hash.
    HeadMismatch {
        head_seq: i64,
        head_hash: String,
        last_seq: i64,
        last_hash: String,
    },
    /// The row cannot be decoded (bad enum string or JSON, a column contradicting its shape,
    /// or an interned shape or proof that is missing or does not match its digest).
    Undecodable { detail: String },
}

impl std::fmt::Display for AuditProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuditProblem::HashMismatch { stored, computed } => {
                write!(
                    f,
                    "content does not match its hash (stored {stored}, computed {computed})"
                )
            }
            AuditProblem::PrevHashMismatch { expected, found } => write!(
                f,
                "prev_hash {found} is not the previous record's hash {expected}"
            ),
            AuditProblem::SeqGap { expected } => {
                write!(f, "sequence gap: expected seq {expected}, records missing")
            }
            AuditProblem::HeadMismatch {
                head_seq,
                head_hash,
                last_seq,
                last_hash,
            } => write!(
                f,
                "chain head is seq {head_seq} ({head_hash}) but the last record is seq \
                 {last_seq} ({last_hash}): newest records removed or head altered"
            ),
            AuditProblem::Undecodable { detail } => write!(f, "undecodable record: {detail}"),
        }
    }
}

/// The first broken record a walk of the audit chain found (the store's `verify_audit`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BrokenRecord {
    pub seq: i64,
    /// `None` when the record itself is missing (head mismatch).
    pub audit_id: Option<String>,
    #[serde(flatten)]
    pub problem: AuditProblem,
}

impl std::fmt::Display for BrokenRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.audit_id {
            Some(id) => write!(f, "record seq {} ({id}): {}", self.seq, self.problem),
            None => write!(f, "record seq {}: {}", self.seq, self.problem),
        }
    }
}
