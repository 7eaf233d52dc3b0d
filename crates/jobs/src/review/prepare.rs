//! Creating a review (§9.2, §9.3): the eligibility of a parked call and the two records the
//! scheduler writes when it parks the job.

use openphone_protocol::canonical::check_params;
use openphone_protocol::{
    BUILTIN_RUNTIME_ID, Command, Registry, background_job_session, binding_digest, canonical_json,
    display_text, params_digest,
};

use super::{
    CHECKPOINT_SCHEMA, Checkpoint, ConfirmationRecord, MAX_RECORD_CHARS, MAX_SUMMARY_CHARS,
    RECORD_SCHEMA, REVIEW_WINDOW_MS, ReviewProposal, ReviewRefused, ReviewState, sanitise,
    serialised_chars,
};
use crate::model::{JobPhase, truncate_chars};

/// The ids of one review (§9.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewIds {
    /// `job-confirm-<uuid>`.
    pub confirmation_id: String,
    /// `job-resume-<uuid>`.
    pub resume_token: String,
    /// `job:<job_id>:<uuid>`.
    pub idempotency_key: String,
}

impl ReviewIds {
    /// Fresh ids for a review of job `job_id` (three independent random UUIDs).
    pub fn fresh(job_id: i64) -> ReviewIds {
        ReviewIds {
            confirmation_id: format!("job-confirm-{}", uuid::Uuid::new_v4()),
            resume_token: format!("job-resume-{}", uuid::Uuid::new_v4()),
            idempotency_key: format!("job:{job_id}:{}", uuid::Uuid::new_v4()),
        }
    }
}

/// A review ready to be written: the confirmation record (`pending_tool_request_json`), the
/// checkpoint (`checkpoint_json`, `resume_pending: false`) and the job's `resume_token`.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The background confirmation record (§9.12), `review_state: pending`.
    pub record: ConfirmationRecord,
    /// The checkpoint (§9.13).
    pub checkpoint: Checkpoint,
}

impl Prepared {
    /// `Approval needed: <tool>`: the job's progress line while it waits.
    pub fn progress_text(&self) -> String {
        format!("Approval needed: {}", self.record.tool)
    }
}

/// Whether `tool` has the form of a model-tool name: `^[a-z][a-z0-9_]{0,79}$`.
pub fn is_tool_name(tool: &str) -> bool {
    let mut chars = tool.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && tool.len() <= 80
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The manifest command a parked call names (§9.2): `tool` must be a command's model-tool
/// name exactly, the command must be state-changing, and `command` (when not empty) must name
/// the same command. The runtime-level conditions of §9.2 (runtime authorisation, tool policy,
/// platform support for `builtin`) are the policy stack's: the bridge answers
/// `background.confirmation_required` only when none of those layers denied.
pub fn eligible_command(tool: &str, command: &str) -> Result<&'static Command, ReviewRefused> {
    let registry = Registry::embedded().map_err(|_| ReviewRefused::NotEligible)?;
    if !is_tool_name(tool) {
        return Err(ReviewRefused::NotEligible);
    }
    let found = registry
        .resolve(tool)
        .filter(|c| c.android_tool == tool && c.mutating)
        .ok_or(ReviewRefused::NotEligible)?;
    if !command.trim().is_empty() && registry.resolve(command).map(|c| &c.name) != Some(&found.name)
    {
        return Err(ReviewRefused::NotEligible);
    }
    Ok(found)
}

/// The summary of a review (§9.3): the tool name with `_` replaced by spaces, ` with `, the
/// canonical JSON of `params`, shown with the one escape for what a person reads
/// ([`display_text`]: a bidi override or a zero-width character reads `\u{202E}`, exactly as
/// in a foreground confirmation); cut to 1000 characters. `None` when `params` has no
/// canonical form.
pub fn summary_of(tool: &str, params: &serde_json::Value) -> Option<String> {
    let canonical = canonical_json(params).ok()?;
    Some(truncate_chars(
        &display_text(&format!("{} with {canonical}", tool.replace('_', " "))),
        MAX_SUMMARY_CHARS,
    ))
}

/// Prepares the review of `proposal` for job `job_id` at `now_ms` with fresh ids; refused
/// when the call may not be parked (§9.2: not an eligible command, params not an object of at
/// most 64 members or without a canonical form, blocked material, a record or checkpoint
/// longer than 12000 characters). A runner may call this first to learn whether a call can be
/// reviewed (`review_refused`, §9.1).
pub fn prepare(
    job_id: i64,
    proposal: &ReviewProposal,
    now_ms: i64,
) -> Result<Prepared, ReviewRefused> {
    prepare_with(job_id, proposal, now_ms, ReviewIds::fresh(job_id))
}

/// [`prepare`] with given ids (tests and vectors).
pub fn prepare_with(
    job_id: i64,
    proposal: &ReviewProposal,
    now_ms: i64,
    ids: ReviewIds,
) -> Result<Prepared, ReviewRefused> {
    if job_id < 1 || now_ms <= 0 {
        return Err(ReviewRefused::NotEligible);
    }
    eligible_command(&proposal.tool, &proposal.command)?;
    sanitise(&proposal.params)?;
    check_params(&proposal.params).map_err(|_| ReviewRefused::NotEligible)?;
    let tool = proposal.tool.clone();
    let params_digest =
        params_digest(&tool, &proposal.params).map_err(|_| ReviewRefused::NotEligible)?;
    let summary = summary_of(&tool, &proposal.params).ok_or(ReviewRefused::NotEligible)?;
    let expires_at = now_ms.saturating_add(REVIEW_WINDOW_MS);
    let mut record = ConfirmationRecord {
        schema: RECORD_SCHEMA.to_owned(),
        confirmation_id: ids.confirmation_id,
        job_id,
        runtime: BUILTIN_RUNTIME_ID.to_owned(),
        phone_session_id: background_job_session(job_id),
        tool: tool.clone(),
        params: proposal.params.clone(),
        params_digest: params_digest.clone(),
        binding_digest: String::new(),
        idempotency_key: ids.idempotency_key,
        created_at: now_ms,
        expires_at,
        review_state: ReviewState::Pending.as_str().to_owned(),
        summary,
        decision: None,
        reviewed_at: None,
        resolution: None,
        resolved_at: None,
    };
    record.binding_digest = record
        .binding()
        .map(|b| binding_digest(&b))
        .ok_or(ReviewRefused::NotEligible)?;
    let checkpoint = Checkpoint {
        schema: CHECKPOINT_SCHEMA.to_owned(),
        job_id,
        phase: JobPhase::AwaitingReview.as_str().to_owned(),
        tool,
        params_digest,
        binding_digest: record.binding_digest.clone(),
        idempotency_key: record.idempotency_key.clone(),
        resume_token: ids.resume_token,
        created_at: now_ms,
        resume_pending: false,
        review_resolution: None,
        tool_result: None,
        resolved_at: None,
    };
    // The record grows by its claim and resolution fields, the checkpoint by its resolution
    // and a bound result of up to 4000 characters: both are checked as written now; the
    // later fields are bounded (§9.12, §9.13).
    if serialised_chars(&record.to_map()) > MAX_RECORD_CHARS
        || serialised_chars(&checkpoint.to_map()) > MAX_RECORD_CHARS
    {
        return Err(ReviewRefused::TooLarge);
    }
    Ok(Prepared { record, checkpoint })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn proposal(tool: &str, params: serde_json::Value) -> ReviewProposal {
        ReviewProposal {
            tool: tool.to_owned(),
            command: String::new(),
            params,
        }
    }

    #[test]
    fn only_state_changing_manifest_commands_by_model_tool_name_are_eligible() {
        assert!(eligible_command("messages_send", "openphone.messages.send").is_ok());
        assert!(eligible_command("messages_send", "").is_ok());
        for (tool, command) in [
            ("messages_search", ""),                    // a read
            ("openphone.messages.send", ""),            // not the model-tool name
            ("no_such_tool", ""),                       // unknown
            ("messages_send", "openphone.calls.place"), // names another command
            ("Messages_send", ""),
        ] {
            assert_eq!(
                eligible_command(tool, command).err(),
                Some(ReviewRefused::NotEligible),
                "{tool} / {command}"
            );
        }
    }

    #[test]
    fn a_prepared_review_binds_its_fields() {
        let p = proposal(
            "messages_send",
            json!({"to": "Alice", "body": "hi", "reason": "r"}),
        );
        let prepared = prepare(7, &p, 1_000).unwrap();
        let r = &prepared.record;
        assert!(r.confirmation_id.starts_with("job-confirm-"));
        assert!(r.idempotency_key.starts_with("job:7:"));
        assert!(prepared.checkpoint.resume_token.starts_with("job-resume-"));
        assert_eq!(r.phone_session_id, "background-job:7");
        assert_eq!(r.expires_at, 1_000 + REVIEW_WINDOW_MS);
        assert_eq!(
            r.summary,
            "messages send with {\"body\":\"hi\",\"reason\":\"r\",\"to\":\"Alice\"}"
        );
        assert_eq!(r.params_digest, prepared.checkpoint.params_digest);
        assert_eq!(r.binding_digest, prepared.checkpoint.binding_digest);
        assert_eq!(prepared.progress_text(), "Approval needed: messages_send");
        let other = prepare(7, &p, 1_000).unwrap();
        assert_ne!(other.record.confirmation_id, r.confirmation_id);
        assert_ne!(other.record.binding_digest, r.binding_digest);
    }

    #[test]
    fn secrets_and_oversized_calls_are_refused() {
        let secret = proposal("messages_send", json!({"to": "A", "body": "Bearer x"}));
        assert_eq!(prepare(1, &secret, 1), Err(ReviewRefused::BlockedMaterial));
        let big = proposal(
            "messages_send",
            json!({"to": "A", "body": "hi, there! ".repeat(1_200)}),
        );
        assert_eq!(prepare(1, &big, 1), Err(ReviewRefused::TooLarge));
        let read = proposal("messages_search", json!({}));
        assert_eq!(prepare(1, &read, 1), Err(ReviewRefused::NotEligible));
        let unsafe_int = proposal(
            "messages_send",
            json!({"to": "A", "n": 9_007_199_254_740_993_u64}),
        );
        assert_eq!(prepare(1, &unsafe_int, 1), Err(ReviewRefused::NotEligible));
        let summary = summary_of("t", &json!({"a": "x".repeat(2_000)})).unwrap();
        assert_eq!(summary.chars().count(), MAX_SUMMARY_CHARS);
    }
}
