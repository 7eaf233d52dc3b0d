//! Background safety and reviewed approvals (`agent-jobs.md` §9): what a background run hands
//! the scheduler when a state-changing tool call must wait for the user ([`ReviewProposal`]),
//! the sanitisation that decides whether such a call may be checkpointed at all
//! ([`sanitise`], §9.2), and the two stored records: the background confirmation record
//! ([`ConfirmationRecord`], §9.12, `pending_tool_request_json`) and the checkpoint
//! ([`Checkpoint`], §9.13, `checkpoint_json`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `schema` of a background confirmation record.
pub const RECORD_SCHEMA: &str = "openphone.background_confirmation.v1";
/// `schema` of a checkpoint.
pub const CHECKPOINT_SCHEMA: &str = "openphone.background_checkpoint.v1";
/// The only runtime a background review is made for.
pub const REVIEW_RUNTIME: &str = "builtin";
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
    /// [`REVIEW_RUNTIME`].
    pub runtime: String,
    /// `background-job:<job_id>`.
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
    /// `pending`, `resolving` or `resolved`.
    pub review_state: String,
    pub summary: String,
    /// `approved` or `denied`, set by the claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewed_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<i64>,
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
