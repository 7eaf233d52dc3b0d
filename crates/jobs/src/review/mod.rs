//! Background safety and reviewed approvals (`agent-jobs.md` §9).
//!
//! A background run never executes a state-changing command by itself: it ends with a
//! [`ReviewProposal`] ([`crate::RunResult::Parked`]) and the scheduler parks the job on a
//! review of exactly that call. This module holds the pieces that need no store or clock:
//!
//! - [`sanitise`] (§9.2): may a call be checkpointed at all (no blocked material, ≤ 64 params);
//! - [`prepare`] (§9.3): the background confirmation record ([`ConfirmationRecord`], §9.12,
//!   stored as `pending_tool_request_json`) and the checkpoint ([`Checkpoint`], §9.13,
//!   `checkpoint_json`) of a parked call, with their ids, window, digests (§9.11) and summary;
//! - [`verify_claim`] (§9.6): the 16 checks a claimed review passes before anything runs;
//! - [`bound`] (§9.7): the bound results a resolution hands the resumed run;
//! - [`ReviewExecutor`] (§9.7): what executes an approved call — [`BridgeReviewExecutor`]
//!   runs the stored request through `ToolBridge::invoke_reviewed`;
//! - [`check_stored`] (§9.12): the offline verifier behind `openphone jobs check-review`;
//! - [`replay_for`] (§9.9): the stored outcome a resumed run gets for the reviewed call.
//!
//! The scheduler's side — parking, claiming the first tap, committing, expiry, crash repair —
//! is in `scheduler/review_ops.rs` ([`crate::Scheduler::resolve_review`]).

pub mod bound;
mod check;
pub mod executor;
mod prepare;
mod verify;

pub use bound::BoundResult;
pub use check::{CheckFailure, Checked, CheckedKind, check_stored};
pub use executor::{BridgeReviewExecutor, ExecutionFailure, ReviewExecutor};
pub use prepare::{
    Prepared, ReviewIds, eligible_command, is_tool_name, prepare, prepare_with, summary_of,
};
pub use verify::{VerifyFailure, verify_claim};

use openphone_protocol::{ErrorCode, params_digest};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use openphone_protocol::review::{
    ConfirmationRecord, RECORD_SCHEMA, ReviewDecision, ReviewState, ReviewView,
};
/// `schema` of a checkpoint.
pub const CHECKPOINT_SCHEMA: &str = "openphone.background_checkpoint.v1";
/// The review window (§6.1): 15 minutes.
pub const REVIEW_WINDOW_MS: i64 = 900_000;
/// Most members `params` may have.
pub const MAX_PARAMS_MEMBERS: usize = 64;
/// Longest serialised record or checkpoint.
pub const MAX_RECORD_CHARS: usize = 12_000;
/// Longest bound result string.
pub const MAX_TOOL_RESULT_CHARS: usize = 4_000;
/// Longest summary.
pub const MAX_SUMMARY_CHARS: usize = 1_000;
/// Longest `confirmation_id` and `idempotency_key`.
pub const MAX_ID_CHARS: usize = 200;
/// Longest `resolution`.
pub const MAX_RESOLUTION_CHARS: usize = 120;
/// A review whose decision was claimed this long ago without being committed is settled by
/// the crash repair of §9.10 (10 minutes, the stale-run threshold).
pub const STALE_RESOLUTION_MS: i64 = 600_000;
/// The audit event of a settled review (§9.14; `tool` of the audit record).
pub const AUDIT_EVENT: &str = "assistant.background_job.review_resolved";
/// `schema` of the audit payload (§9.14).
pub const AUDIT_SCHEMA: &str = "openphone.background_review_audit.v1";
/// The `reason` of a tap that found nothing to claim.
pub const CLAIM_UNAVAILABLE: &str = "claim_unavailable";
/// The `reason` of a tap on an id no review ever had (code `job_not_found`): neither a job
/// holds it nor was a review with it ever settled (audited).
pub const NO_SUCH_REVIEW: &str = "no_such_review";

/// `background-job:<job_id>`: the runtime session and phone session of a job's tool calls (the
/// protocol's one constructor of the key). Source files call
/// [`openphone_protocol::background_job_session`]; this name stays for the test suite's support.
pub use openphone_protocol::background_job_session as job_session;

/// The audit id of a review's records: `background-review:<confirmation_id>`.
pub fn audit_id(confirmation_id: &str) -> String {
    format!("background-review:{confirmation_id}")
}

/// How a review ended (`resolution`, §9.8 **\[project\]**).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// Approved, verified and executed (whatever the execution's outcome).
    Approved,
    /// Denied by the user.
    Denied,
    /// A denial left unfinished by a crash, committed by the repair of §9.10.
    DeniedAfterRestart,
    /// The window passed without a claimed tap.
    ApprovalExpired,
    /// The claimed review failed verification (§9.6): nothing ran.
    BindingInvalid,
    /// The approved command is no longer allowed in the background: nothing ran.
    NotEligible,
    /// The job was stopped while the review was open.
    JobStopped,
    /// An approval left unfinished by a crash: the action may or may not have run; never
    /// replayed.
    ResultUnknown,
}

impl Resolution {
    /// Every resolution.
    pub const ALL: [Resolution; 8] = [
        Resolution::Approved,
        Resolution::Denied,
        Resolution::DeniedAfterRestart,
        Resolution::ApprovalExpired,
        Resolution::BindingInvalid,
        Resolution::NotEligible,
        Resolution::JobStopped,
        Resolution::ResultUnknown,
    ];

    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Resolution::Approved => "approved",
            Resolution::Denied => "denied",
            Resolution::DeniedAfterRestart => "denied_after_restart",
            Resolution::ApprovalExpired => "approval_expired",
            Resolution::BindingInvalid => "binding_invalid",
            Resolution::NotEligible => "not_eligible",
            Resolution::JobStopped => "job_stopped",
            Resolution::ResultUnknown => "result_unknown",
        }
    }

    /// Reads a wire value.
    pub fn parse(text: &str) -> Option<Resolution> {
        Resolution::ALL.into_iter().find(|r| r.as_str() == text)
    }
}

impl std::fmt::Display for Resolution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The answer to a tap (§9.5, §9.8): what the tapper is told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewAnswer {
    /// `background.review_resolved`, `background.review_expired`,
    /// `background.review_already_resolved`, `background.review_commit_failed`, or
    /// `job_not_found` for an id no review ever had.
    pub code: ErrorCode,
    /// [`CLAIM_UNAVAILABLE`] for `background.review_already_resolved`, [`NO_SUCH_REVIEW`] for
    /// `job_not_found`, else `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The tapped id.
    pub confirmation_id: String,
    /// The job the review belongs to, when one was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<i64>,
    /// How this tap resolved the review (only when this tap claimed it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Resolution>,
    /// The `status` of the bound result (only when this tap claimed the review): `ok`,
    /// `background.action_denied`, `background.review_error`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_status: Option<String>,
}

impl ReviewAnswer {
    /// A tap that changed nothing: `code`, with `claim_unavailable` for an already resolved
    /// review and `no_such_review` for an id no review ever had.
    pub fn unclaimed(code: ErrorCode, confirmation_id: &str, job_id: Option<i64>) -> ReviewAnswer {
        ReviewAnswer {
            reason: match code {
                ErrorCode::BackgroundReviewAlreadyResolved => Some(CLAIM_UNAVAILABLE.to_owned()),
                ErrorCode::JobNotFound => Some(NO_SUCH_REVIEW.to_owned()),
                _ => None,
            },
            code,
            confirmation_id: confirmation_id.to_owned(),
            job_id,
            resolution: None,
            result_status: None,
        }
    }

    /// True when the tap was applied (`background.review_resolved`).
    pub fn is_resolved(&self) -> bool {
        self.code == ErrorCode::BackgroundReviewResolved
    }
}

/// A state-changing tool call a background run wants made: the run ends with it
/// ([`crate::RunResult::Parked`]) and the scheduler parks the job on a review of exactly this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewProposal {
    /// The command's model-tool name (`android_tool`, e.g. `messages_send`).
    pub tool: String,
    /// The canonical command name (e.g. `openphone.messages.send`).
    pub command: String,
    /// The exact proposed params (without `reason`'s bridge additions; as the model gave
    /// them).
    pub params: Value,
}

/// Why a state-changing call cannot be parked for review (`review_refused`, §9.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum ReviewRefused {
    /// Not a manifest command that may be reviewed (unknown, not mutating, not allowed for
    /// `builtin`, or params not an object / more than 64 members).
    #[error("not_eligible")]
    NotEligible,
    /// The params hold something that may be secret (§9.2).
    #[error("blocked_material")]
    BlockedMaterial,
    /// The record or the checkpoint would be longer than 12000 characters.
    #[error("too_large")]
    TooLarge,
}

impl ReviewRefused {
    /// The wire value of `review_refused`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewRefused::NotEligible => "not_eligible",
            ReviewRefused::BlockedMaterial => "blocked_material",
            ReviewRefused::TooLarge => "too_large",
        }
    }
}

const BLOCKED_KEY_PARTS: [&str; 9] = [
    "api_key",
    "authorization",
    "credential",
    "private_key",
    "token",
    "secret",
    "password",
    "cookie",
    "screenshot",
];

/// §9.2: `params` must be an object of at most 64 members with no blocked material at any
/// depth. Rejects; never edits.
pub fn sanitise(params: &Value) -> Result<(), ReviewRefused> {
    let Value::Object(map) = params else {
        return Err(ReviewRefused::NotEligible);
    };
    if map.len() > MAX_PARAMS_MEMBERS {
        return Err(ReviewRefused::NotEligible);
    }
    if holds_blocked_material(params) {
        return Err(ReviewRefused::BlockedMaterial);
    }
    Ok(())
}

/// Whether `value` holds blocked material anywhere (§9.2).
pub fn holds_blocked_material(value: &Value) -> bool {
    match value {
        Value::Object(map) => object_blocked(map),
        Value::Array(items) => items.iter().any(holds_blocked_material),
        Value::String(s) => string_blocked(s),
        _ => false,
    }
}

fn object_blocked(map: &Map<String, Value>) -> bool {
    let base64_data = map
        .get("encoding")
        .and_then(Value::as_str)
        .is_some_and(|e| e == "base64")
        && map.contains_key("data");
    base64_data
        || map.iter().any(|(key, value)| {
            let lower = key.to_lowercase();
            lower == "auth"
                || BLOCKED_KEY_PARTS.iter().any(|part| lower.contains(part))
                || holds_blocked_material(value)
        })
}

fn string_blocked(s: &str) -> bool {
    let lower = s.trim().to_lowercase();
    if lower.starts_with("bearer ")
        || lower.starts_with("basic ")
        || lower.starts_with("data:image/")
    {
        return true;
    }
    if let Some(start) = s.find("-----BEGIN")
        && s[start..].contains("PRIVATE KEY-----")
    {
        return true;
    }
    s.chars().count() > 2048
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '+' | '/' | '=' | '-' | '_')
                || c.is_ascii_whitespace()
        })
}

/// The review checkpoint (§9.13), stored as the job's `checkpoint_json`. It never holds raw
/// params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// [`CHECKPOINT_SCHEMA`].
    pub schema: String,
    pub job_id: i64,
    /// `awaiting_review`.
    pub phase: String,
    /// The model-tool name.
    pub tool: String,
    pub params_digest: String,
    pub binding_digest: String,
    pub idempotency_key: String,
    /// Equals the job's `resume_token`.
    pub resume_token: String,
    pub created_at: i64,
    /// `false` while awaiting review, `true` once resolved.
    pub resume_pending: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_resolution: Option<String>,
    /// The bound result (a JSON object serialised to at most 4000 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<i64>,
}

impl Checkpoint {
    /// The checkpoint of a job's `checkpoint_json`, if it holds one.
    pub fn of(checkpoint_json: &Map<String, Value>) -> Option<Checkpoint> {
        if checkpoint_json.is_empty() {
            return None;
        }
        serde_json::from_value(Value::Object(checkpoint_json.clone())).ok()
    }

    /// As the object stored in `checkpoint_json`.
    pub fn to_map(&self) -> Map<String, Value> {
        to_map(self)
    }
}

/// A struct as a JSON object (empty if it were ever not one).
fn to_map<T: Serialize>(value: &T) -> Map<String, Value> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// Characters of the compact serialisation of `map` (as the store writes it).
pub fn serialised_chars(map: &Map<String, Value>) -> usize {
    Value::Object(map.clone()).to_string().chars().count()
}

/// What a resumed run gets for a call (§9.9): when the job's checkpoint holds a settled
/// review (`resume_pending: true`) of the model-tool `tool` with these `params` (same
/// `params_digest`), the stored bound result — the final outcome of the reviewed action, to
/// return instead of executing anything, however often the call is repeated — or, when the
/// checkpoint lost its result, a `background.review_result_missing` result. `None` for any
/// other call (a state-changing one then starts a new review).
pub fn replay_for(
    checkpoint_json: &Map<String, Value>,
    tool: &str,
    params: &Value,
) -> Option<String> {
    let checkpoint = Checkpoint::of(checkpoint_json)?;
    if !checkpoint.resume_pending || checkpoint.tool != tool {
        return None;
    }
    let digest = params_digest(tool, params).ok()?;
    if !digests_equal(&digest, &checkpoint.params_digest) {
        return None;
    }
    Some(match checkpoint.tool_result {
        Some(result) => result,
        None => BoundResult::error(ErrorCode::BackgroundReviewResultMissing, None, tool).text,
    })
}

/// Constant-time comparison of two digests (§9.6).
pub fn digests_equal(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocked_material_is_found_at_any_depth() {
        assert_eq!(sanitise(&json!({"to": "Alice", "body": "hi"})), Ok(()));
        for bad in [
            json!({"max_tokens": 5}),
            json!({"nested": [{"Auth": "x"}]}),
            json!({"a": {"data": "AAAA", "encoding": "base64"}}),
            json!({"h": " Bearer abc"}),
            json!({"img": "data:image/png;base64,xx"}),
            json!({"k": "-----BEGIN RSA PRIVATE KEY-----\nabc"}),
            json!({"blob": "A".repeat(2049)}),
        ] {
            assert_eq!(sanitise(&bad), Err(ReviewRefused::BlockedMaterial), "{bad}");
        }
        assert_eq!(sanitise(&json!({"blob": "A".repeat(2048)})), Ok(()));
        assert_eq!(sanitise(&json!([1])), Err(ReviewRefused::NotEligible));
        let wide: Map<String, Value> = (0..65).map(|i| (format!("k{i}"), json!(i))).collect();
        assert_eq!(
            sanitise(&Value::Object(wide)),
            Err(ReviewRefused::NotEligible)
        );
    }
}
