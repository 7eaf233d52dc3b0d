//! The offline verifier of stored reviews (§9.12; `openphone jobs check-review`).
//!
//! [`check_stored`] takes a bare background confirmation record, or a whole job record (then
//! it checks the record it holds, the checkpoint's binding to it and the invariants of §2.4),
//! and names the **first** rule broken: a stable check id and a sentence. The checks, in
//! order:
//!
//! | id | rule |
//! |---|---|
//! | `input.not_object` | the input is a JSON object |
//! | `job.schema` | a job record validates against the agent-job schema (`schemas/agent-job.schema.json`) |
//! | `job.no_review` | the job holds a background confirmation record |
//! | `record.schema` | the record validates against `schemas/background-confirmation.schema.json` (closed object, types, patterns, lengths) |
//! | `record.window` | `created_at < expires_at ≤ created_at + 900000` |
//! | `record.session` | `phone_session_id == "background-job:" + job_id` |
//! | `record.blocked_material` | no blocked material in `params` (§9.2) |
//! | `record.params` | `params` has a canonical form (nesting depth, safe integers) |
//! | `record.size` | the serialised record is at most 12000 characters |
//! | `record.lifecycle` | `pending`: no decision, `reviewed_at`, resolution; `resolving`: a decision and `reviewed_at`, no resolution; `resolved`: a known resolution and `resolved_at`; times not before `created_at` |
//! | `record.params_digest` | `params_digest` recomputed from `tool` and `params` (§9.11) |
//! | `record.binding_digest` | `binding_digest` recomputed from the record (§9.11) |
//! | `record.summary` | the summary is the one §9.3 derives from `tool` and `params` |
//! | `job.record_job_id` | the record's `job_id` is the job's `id` |
//! | `job.pending_confirmation_id` | the job's `pending_confirmation_id` is the record's id |
//! | `checkpoint.shape` | `checkpoint_json` is a checkpoint (§9.13: closed, typed, its schema) |
//! | `checkpoint.size` | the serialised checkpoint is at most 12000 characters |
//! | `checkpoint.binding` | its `job_id`, `tool`, `params_digest`, `binding_digest` and `idempotency_key` are the record's, its phase `awaiting_review` |
//! | `checkpoint.resume_token` | its `resume_token` is the job's |
//! | `checkpoint.lifecycle` | `resume_pending` is false until the record is resolved, then true with the record's resolution, a `tool_result` of at most 4000 characters and `resolved_at` |
//! | `job.awaiting_review` | an `awaiting_review` job has phase `awaiting_review` and a `pending` record |
//! | `job.waiting` | a `waiting` job holds a `resolving` record |
//!
//! Digests are compared in constant time. Messages never repeat a param value.

use std::sync::OnceLock;

use openphone_protocol::canonical::check_params;
use openphone_protocol::{background_job_session, binding_digest, params_digest};
use serde::Serialize;
use serde_json::{Map, Value};

use super::{
    CHECKPOINT_SCHEMA, Checkpoint, ConfirmationRecord, MAX_RECORD_CHARS, MAX_TOOL_RESULT_CHARS,
    REVIEW_WINDOW_MS, Resolution, ReviewState, digests_equal, holds_blocked_material,
    serialised_chars, summary_of,
};
use crate::model::{AgentJob, JobPhase, JobStatus};

/// The project's background-confirmation schema (a byte-for-byte copy of
/// `schemas/background-confirmation.schema.json`, checked by a test).
pub const RECORD_SCHEMA_JSON: &str =
    include_str!("../../schemas/background-confirmation.schema.json");
/// The agent-job schema (the vendored upstream copy).
pub const JOB_SCHEMA_JSON: &str = include_str!("../../schemas/agent-job.schema.json");

/// What was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckedKind {
    /// A bare background confirmation record.
    Record,
    /// A job record and the review it holds.
    Job,
}

/// A stored review that passed every check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Checked {
    /// What the input was.
    pub kind: CheckedKind,
    /// The review's id.
    pub confirmation_id: String,
    /// The job it belongs to.
    pub job_id: i64,
    /// The model-tool name under review.
    pub tool: String,
    /// `pending`, `resolving` or `resolved`.
    pub review_state: String,
    /// The job's status (a job record only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_status: Option<JobStatus>,
}

/// The first rule a stored review breaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{check}: {message}")]
pub struct CheckFailure {
    /// The stable id of the check (see the module documentation).
    pub check: &'static str,
    /// What is wrong, in a sentence.
    pub message: String,
}

fn fail(check: &'static str, message: impl Into<String>) -> CheckFailure {
    CheckFailure {
        check,
        message: message.into(),
    }
}

/// Checks a stored background confirmation record, or a job record and its review (see the
/// module documentation); names the first failure.
pub fn check_stored(value: &Value) -> Result<Checked, CheckFailure> {
    let Value::Object(map) = value else {
        return Err(fail("input.not_object", "the input is not a JSON object"));
    };
    if map.contains_key("pending_tool_request_json") {
        check_job(value)
    } else {
        let record = check_record(value)?;
        Ok(Checked {
            kind: CheckedKind::Record,
            confirmation_id: record.confirmation_id,
            job_id: record.job_id,
            tool: record.tool,
            review_state: record.review_state,
            job_status: None,
        })
    }
}

fn validators() -> Result<&'static (jsonschema::Validator, jsonschema::Validator), CheckFailure> {
    static VALIDATORS: OnceLock<Result<(jsonschema::Validator, jsonschema::Validator), String>> =
        OnceLock::new();
    VALIDATORS
        .get_or_init(|| {
            let compile = |text: &str| {
                let schema: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
                jsonschema::validator_for(&schema).map_err(|e| e.to_string())
            };
            Ok((compile(RECORD_SCHEMA_JSON)?, compile(JOB_SCHEMA_JSON)?))
        })
        .as_ref()
        .map_err(|e| {
            fail(
                "input.schema_unavailable",
                format!("the schemas do not load: {e}"),
            )
        })
}

/// The first schema error of `value`, as a sentence naming its place.
fn schema_error(validator: &jsonschema::Validator, value: &Value) -> Option<String> {
    let error = validator.iter_errors(value).next()?;
    let path = error.instance_path().as_str().to_owned();
    let place = if path.is_empty() {
        "the object".to_owned()
    } else {
        format!("`{path}`")
    };
    Some(format!("{place}: {}", error.masked()))
}

fn check_record(value: &Value) -> Result<ConfirmationRecord, CheckFailure> {
    let (record_validator, _) = validators()?;
    if let Some(error) = schema_error(record_validator, value) {
        return Err(fail("record.schema", error));
    }
    let record: ConfirmationRecord = serde_json::from_value(value.clone())
        .map_err(|e| fail("record.schema", format!("the record does not read: {e}")))?;
    let window = record.expires_at.saturating_sub(record.created_at);
    if record.expires_at <= record.created_at || window > REVIEW_WINDOW_MS {
        return Err(fail(
            "record.window",
            format!(
                "expires_at must be after created_at and at most {REVIEW_WINDOW_MS} ms later (it is {window} ms)"
            ),
        ));
    }
    if record.phone_session_id != background_job_session(record.job_id) {
        return Err(fail(
            "record.session",
            format!(
                "phone_session_id must be `{}` for job {}",
                background_job_session(record.job_id),
                record.job_id
            ),
        ));
    }
    if holds_blocked_material(&record.params) {
        return Err(fail(
            "record.blocked_material",
            "params hold material that may be secret (§9.2); it must never be checkpointed",
        ));
    }
    if let Err(e) = check_params(&record.params) {
        return Err(fail(
            "record.params",
            format!("params have no canonical form: {e}"),
        ));
    }
    let size = value.to_string().chars().count();
    if size > MAX_RECORD_CHARS {
        return Err(fail(
            "record.size",
            format!("the record is {size} characters long, more than {MAX_RECORD_CHARS}"),
        ));
    }
    check_record_lifecycle(&record)?;
    let recomputed = params_digest(&record.tool, &record.params).map_err(|e| {
        fail(
            "record.params",
            format!("params have no canonical form: {e}"),
        )
    })?;
    if !digests_equal(&recomputed, &record.params_digest) {
        return Err(fail(
            "record.params_digest",
            "params_digest does not match the one recomputed from tool and params (§9.11)",
        ));
    }
    let binding = record
        .binding()
        .map(|b| binding_digest(&b))
        .ok_or_else(|| fail("record.binding_digest", "job_id or expires_at is negative"))?;
    if !digests_equal(&binding, &record.binding_digest) {
        return Err(fail(
            "record.binding_digest",
            "binding_digest does not match the one recomputed from the record (§9.11)",
        ));
    }
    if summary_of(&record.tool, &record.params).as_deref() != Some(record.summary.as_str()) {
        return Err(fail(
            "record.summary",
            "the summary is not the one derived from tool and params (§9.3): the user would be shown something else than what runs",
        ));
    }
    Ok(record)
}

fn check_record_lifecycle(record: &ConfirmationRecord) -> Result<(), CheckFailure> {
    let lifecycle = |message: &str| Err(fail("record.lifecycle", message.to_owned()));
    let not_before_creation = |t: Option<i64>| t.is_none_or(|t| t >= record.created_at);
    if !not_before_creation(record.reviewed_at) || !not_before_creation(record.resolved_at) {
        return lifecycle("reviewed_at and resolved_at cannot be before created_at");
    }
    match record.state() {
        Some(ReviewState::Pending) => {
            if record.decision.is_some()
                || record.reviewed_at.is_some()
                || record.resolution.is_some()
                || record.resolved_at.is_some()
            {
                return lifecycle(
                    "a pending review has no decision, reviewed_at or resolution yet",
                );
            }
        }
        Some(ReviewState::Resolving) => {
            if record.decision.is_none() || record.reviewed_at.is_none() {
                return lifecycle("a resolving review has a decision and reviewed_at");
            }
            if record.resolution.is_some() || record.resolved_at.is_some() {
                return lifecycle("a resolving review has no resolution yet");
            }
        }
        Some(ReviewState::Resolved) => {
            let Some(resolution) = record.resolution.as_deref() else {
                return lifecycle("a resolved review has a resolution");
            };
            if Resolution::parse(resolution).is_none() {
                return lifecycle("the resolution is not one of the known values (§9.8)");
            }
            if record.resolved_at.is_none() {
                return lifecycle("a resolved review has resolved_at");
            }
            if record.decision.is_some() != record.reviewed_at.is_some() {
                return lifecycle("decision and reviewed_at are set together");
            }
        }
        None => return lifecycle("review_state is not pending, resolving or resolved"),
    }
    Ok(())
}

fn check_job(value: &Value) -> Result<Checked, CheckFailure> {
    let (_, job_validator) = validators()?;
    if let Some(error) = schema_error(job_validator, value) {
        return Err(fail("job.schema", error));
    }
    let job: AgentJob = serde_json::from_value(value.clone())
        .map_err(|e| fail("job.schema", format!("the job record does not read: {e}")))?;
    if job.pending_tool_request_json.is_empty() {
        return Err(fail(
            "job.no_review",
            format!(
                "job {} (status {}) holds no background confirmation record",
                job.id, job.status
            ),
        ));
    }
    let record = check_record(&Value::Object(job.pending_tool_request_json.clone()))?;
    if record.job_id != job.id {
        return Err(fail(
            "job.record_job_id",
            format!(
                "the record is for job {}, the job is {}",
                record.job_id, job.id
            ),
        ));
    }
    if job.pending_confirmation_id != record.confirmation_id {
        return Err(fail(
            "job.pending_confirmation_id",
            "the job's pending_confirmation_id is not the record's confirmation_id",
        ));
    }
    check_checkpoint(&job, &record)?;
    let awaiting = job.status == JobStatus::AwaitingReview;
    if awaiting
        && (job.phase != JobPhase::AwaitingReview || record.state() != Some(ReviewState::Pending))
    {
        return Err(fail(
            "job.awaiting_review",
            "an awaiting_review job has phase awaiting_review and a pending record",
        ));
    }
    if job.status == JobStatus::Waiting && record.state() != Some(ReviewState::Resolving) {
        return Err(fail(
            "job.waiting",
            "a waiting job holds a resolving record",
        ));
    }
    Ok(Checked {
        kind: CheckedKind::Job,
        confirmation_id: record.confirmation_id,
        job_id: job.id,
        tool: record.tool,
        review_state: record.review_state,
        job_status: Some(job.status),
    })
}

fn check_checkpoint(job: &AgentJob, record: &ConfirmationRecord) -> Result<(), CheckFailure> {
    let map: &Map<String, Value> = &job.checkpoint_json;
    let checkpoint: Checkpoint =
        serde_json::from_value(Value::Object(map.clone())).map_err(|e| {
            fail(
                "checkpoint.shape",
                format!("checkpoint_json is not a checkpoint: {e}"),
            )
        })?;
    if checkpoint.schema != CHECKPOINT_SCHEMA {
        return Err(fail(
            "checkpoint.shape",
            format!("the checkpoint's schema is not {CHECKPOINT_SCHEMA}"),
        ));
    }
    let size = serialised_chars(map);
    if size > MAX_RECORD_CHARS {
        return Err(fail(
            "checkpoint.size",
            format!("the checkpoint is {size} characters long, more than {MAX_RECORD_CHARS}"),
        ));
    }
    let bound = checkpoint.job_id == record.job_id
        && checkpoint.phase == JobPhase::AwaitingReview.as_str()
        && checkpoint.tool == record.tool
        && checkpoint.idempotency_key == record.idempotency_key
        && digests_equal(&checkpoint.params_digest, &record.params_digest)
        && digests_equal(&checkpoint.binding_digest, &record.binding_digest);
    if !bound {
        return Err(fail(
            "checkpoint.binding",
            "the checkpoint's job_id, phase, tool, digests or idempotency key are not the record's",
        ));
    }
    if !digests_equal(&checkpoint.resume_token, &job.resume_token) {
        return Err(fail(
            "checkpoint.resume_token",
            "the checkpoint's resume_token is not the job's",
        ));
    }
    let resolved = record.state() == Some(ReviewState::Resolved);
    let consistent = if resolved {
        checkpoint.resume_pending
            && checkpoint.review_resolution == record.resolution
            && checkpoint.resolved_at.is_some()
            && checkpoint
                .tool_result
                .as_ref()
                .is_some_and(|r| r.chars().count() <= MAX_TOOL_RESULT_CHARS)
    } else {
        !checkpoint.resume_pending
            && checkpoint.review_resolution.is_none()
            && checkpoint.tool_result.is_none()
            && checkpoint.resolved_at.is_none()
    };
    if !consistent {
        return Err(fail(
            "checkpoint.lifecycle",
            "resume_pending, review_resolution, tool_result and resolved_at do not match the record's state",
        ));
    }
    Ok(())
}
