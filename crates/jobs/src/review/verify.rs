//! Verification of a claimed review (§9.6): the 16 checks, in the specification's order,
//! before anything executes. Digests are recomputed and compared in constant time; a record
//! whose stored digests do not match is rejected, never repaired.

use openphone_protocol::{
    BUILTIN_RUNTIME_ID, background_job_session, binding_digest, params_digest,
};

use super::{
    CHECKPOINT_SCHEMA, Checkpoint, ConfirmationRecord, MAX_RECORD_CHARS, RECORD_SCHEMA,
    REVIEW_WINDOW_MS, ReviewDecision, ReviewState, digests_equal, is_tool_name, sanitise,
    serialised_chars,
};
use crate::model::{AgentJob, JobPhase};

/// The first check of §9.6 a claimed review failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("check {check} of §9.6 failed: {message}")]
pub struct VerifyFailure {
    /// The check's number in §9.6 (1–16).
    pub check: u8,
    /// What was wrong, in a sentence (never a raw param value).
    pub message: String,
}

fn fail(check: u8, message: impl Into<String>) -> VerifyFailure {
    VerifyFailure {
        check,
        message: message.into(),
    }
}

/// Runs the 16 checks of §9.6 on `job` (as written by the claim) for the tap of `tapped_id`
/// with `decision`, at `now_ms`; returns the verified record.
pub fn verify_claim(
    job: &AgentJob,
    tapped_id: &str,
    decision: ReviewDecision,
    now_ms: i64,
) -> Result<ConfirmationRecord, VerifyFailure> {
    let raw = &job.pending_tool_request_json;
    // 1. The schema (and the shape of a record at all: a closed object of typed fields).
    if raw.get("schema").and_then(|s| s.as_str()) != Some(RECORD_SCHEMA) {
        return Err(fail(
            1,
            format!("the record's schema is not {RECORD_SCHEMA}"),
        ));
    }
    let record: ConfirmationRecord = serde_json::from_value(serde_json::Value::Object(raw.clone()))
        .map_err(|e| fail(1, format!("the record is not a {RECORD_SCHEMA}: {e}")))?;
    // 2.
    if record.confirmation_id != tapped_id || job.pending_confirmation_id != tapped_id {
        return Err(fail(
            2,
            "the record's confirmation id is not the tapped one and the job's",
        ));
    }
    // 3.
    if record.job_id != job.id {
        return Err(fail(
            3,
            format!("the record is for job {}, not {}", record.job_id, job.id),
        ));
    }
    // 4.
    if record.runtime != BUILTIN_RUNTIME_ID {
        return Err(fail(
            4,
            format!("the record's runtime is not {BUILTIN_RUNTIME_ID}"),
        ));
    }
    // 5.
    if record.phone_session_id != background_job_session(record.job_id) {
        return Err(fail(5, "the record's phone session is not the job's"));
    }
    // 6.
    if !is_tool_name(&record.tool) {
        return Err(fail(6, "the record's tool is not a model-tool name"));
    }
    // 7.
    if let Err(refused) = sanitise(&record.params) {
        return Err(fail(
            7,
            format!("the record's params are refused: {refused}"),
        ));
    }
    // 8.
    if serialised_chars(raw) > MAX_RECORD_CHARS {
        return Err(fail(
            8,
            format!("the record is longer than {MAX_RECORD_CHARS} characters"),
        ));
    }
    // 9.
    if record.created_at <= 0
        || record.expires_at <= record.created_at
        || record.expires_at - record.created_at > REVIEW_WINDOW_MS
    {
        return Err(fail(9, "the record's review window is not valid"));
    }
    // 10.
    if now_ms >= record.expires_at {
        return Err(fail(10, "the review window has passed"));
    }
    // 11.
    if record.state() != Some(ReviewState::Resolving) || record.decided() != Some(decision) {
        return Err(fail(11, "the record does not hold this tap's claim"));
    }
    // 12.
    if record.idempotency_key.is_empty() {
        return Err(fail(12, "the record has no idempotency key"));
    }
    // 13.
    let Some(checkpoint) = Checkpoint::of(&job.checkpoint_json) else {
        return Err(fail(13, "the job has no readable checkpoint"));
    };
    if checkpoint.schema != CHECKPOINT_SCHEMA
        || checkpoint.job_id != record.job_id
        || checkpoint.phase != JobPhase::AwaitingReview.as_str()
        || checkpoint.tool != record.tool
        || checkpoint.idempotency_key != record.idempotency_key
    {
        return Err(fail(13, "the checkpoint does not belong to this record"));
    }
    // 14.
    if job.resume_token.is_empty() || !digests_equal(&checkpoint.resume_token, &job.resume_token) {
        return Err(fail(14, "the checkpoint's resume token is not the job's"));
    }
    // 15.
    let params = params_digest(&record.tool, &record.params)
        .map_err(|e| fail(15, format!("the params have no digest: {e}")))?;
    let params_ok = digests_equal(&params, &record.params_digest)
        & digests_equal(&params, &checkpoint.params_digest);
    if !params_ok {
        return Err(fail(
            15,
            "params_digest does not match the record's tool and params",
        ));
    }
    // 16.
    let binding = record
        .binding()
        .map(|b| binding_digest(&b))
        .ok_or_else(|| fail(16, "the record has no binding"))?;
    let binding_ok = digests_equal(&binding, &record.binding_digest)
        & digests_equal(&binding, &checkpoint.binding_digest);
    if !binding_ok {
        return Err(fail(16, "binding_digest does not match the record"));
    }
    Ok(record)
}
