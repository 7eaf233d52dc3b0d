//! The end of an attempt: a tool result, or a non-tool executor's answer, moves the action
//! through VERIFYING to DONE, a new attempt (with backoff) or BLOCKED; an outcome nobody
//! recorded becomes `outcome_unknown`.

use openphone_protocol::{ErrorCode, ToolResult, ToolStatus};
use serde_json::Value;

use super::{GoalEngine, Work, block, clip, counted_attempts, failure_text, retry_line};
use crate::error::GoalsError;
use crate::ids::digest;
use crate::model::{ActionState, AttemptOutcome, BlockerKind, EvidenceKind};
use crate::retry::backoff_ms;
use crate::transition::Source;

impl GoalEngine {
    /// RUNNING → BLOCKED with `outcome_unknown` (never re-executed blind).
    pub(super) fn unknown(
        &self,
        work: &mut Work,
        id: &str,
        now: i64,
        why: &str,
    ) -> Result<(), GoalsError> {
        if let Some(att) = work.attempt_mut(id) {
            att.outcome = AttemptOutcome::OutcomeUnknown;
            att.finished_at = Some(now);
            att.summary = why.to_owned();
        }
        let goal_id = work.goal.id.clone();
        work.mv(
            id,
            ActionState::Blocked,
            Source::Recovery,
            &format!("outcome_unknown: {why}; check the phone, then retry or abort"),
            now,
            block(
                BlockerKind::Failure,
                format!("unknown:{id}"),
                retry_line(&goal_id, id),
            ),
        )?;
        Ok(())
    }

    /// The end of a non-tool execution: VERIFYING, then DONE, a new attempt, or BLOCKED.
    pub(super) fn finish_other(
        &self,
        work: &mut Work,
        id: &str,
        ok: bool,
        note: String,
        now: i64,
    ) -> Result<(), GoalsError> {
        if let Some(att) = work.attempt_mut(id) {
            att.outcome = if ok {
                AttemptOutcome::Ok
            } else {
                AttemptOutcome::Failed
            };
            att.finished_at = Some(now);
            att.result_digest = crate::ids::digest_text(&note);
            att.summary = note.clone();
        }
        work.mv(
            id,
            ActionState::Verifying,
            Source::Executor,
            &clip(&note),
            now,
            None,
        )?;
        if ok {
            work.mv(
                id,
                ActionState::Done,
                Source::Verifier,
                "it succeeded",
                now,
                None,
            )
        } else {
            self.again_or_block(work, id, &note, now)
        }
    }

    /// VERIFYING → READY (with backoff) while budget remains, else → BLOCKED.
    pub(super) fn again_or_block(
        &self,
        work: &mut Work,
        id: &str,
        why: &str,
        now: i64,
    ) -> Result<(), GoalsError> {
        let budget = work.goal.retry_budget;
        let tries = work.goal.action(id).map_or(0, counted_attempts);
        let goal_id = work.goal.id.clone();
        if tries < budget.per_action && budget.used < budget.per_goal {
            let wait = backoff_ms(tries, &goal_id, id);
            work.mv(
                id,
                ActionState::Ready,
                Source::Verifier,
                &format!("{why}; retry {} in {} ms", tries + 1, wait),
                now,
                None,
            )?;
            if let Some(a) = work.goal.action_mut(id) {
                a.not_before = now.saturating_add(wait);
            }
            Ok(())
        } else {
            work.mv(
                id,
                ActionState::Blocked,
                Source::Budget,
                &format!("{why}; retry budget exhausted after {tries} attempts"),
                now,
                block(
                    BlockerKind::Budget,
                    format!("retry:{id}"),
                    retry_line(&goal_id, id),
                ),
            )
        }
    }

    /// Records a tool result on the RUNNING action `id` and moves it on.
    pub(super) async fn tool_result(
        &self,
        work: &mut Work,
        id: &str,
        result: ToolResult,
        source: Source,
    ) -> Result<(), GoalsError> {
        let now = self.now();
        let goal_id = work.goal.id.clone();
        let result_value = serde_json::to_value(&result).unwrap_or(Value::Null);
        let unknown = result
            .error
            .as_ref()
            .is_some_and(|e| e.code == ErrorCode::ExecutionResultUnknown);
        if let Some(att) = work.attempt_mut(id) {
            att.result_digest = digest(&result_value);
            att.finished_at = Some(now);
        }
        if result.status == ToolStatus::Ok {
            if let Some(att) = work.attempt_mut(id) {
                att.outcome = AttemptOutcome::Ok;
                att.summary = if result.replayed {
                    "ok (replayed)".to_owned()
                } else {
                    "ok".to_owned()
                };
            }
            work.evidence(
                id,
                EvidenceKind::ToolResult,
                format!("audit {}", result.audit_id),
                digest(&Value::Object(result.result.clone())),
                now,
            );
            let why = if result.replayed {
                "the recorded result was replayed"
            } else {
                "the command returned ok"
            };
            work.mv(id, ActionState::Verifying, Source::Executor, why, now, None)?;
            return self.verify(work, id).await;
        }
        if unknown {
            // Nothing recorded: only `expect` can tell whether it happened.
            let has_expect = work.goal.action(id).is_some_and(|a| a.expect.is_some());
            if has_expect {
                work.mv(
                    id,
                    ActionState::Verifying,
                    Source::Executor,
                    "outcome unknown; checking its effect",
                    now,
                    None,
                )?;
                let (holds, note) = self.expect_holds(&work.goal, id).await;
                if holds {
                    if let Some(att) = work.attempt_mut(id) {
                        att.outcome = AttemptOutcome::Ok;
                        att.summary = format!("outcome unknown, effect confirmed: {note}");
                    }
                    return work.mv(
                        id,
                        ActionState::Done,
                        Source::Verifier,
                        &format!("the effect is there: {note}"),
                        now,
                        None,
                    );
                }
                if let Some(att) = work.attempt_mut(id) {
                    att.outcome = AttemptOutcome::OutcomeUnknown;
                }
                return work.mv(
                    id,
                    ActionState::Blocked,
                    Source::Verifier,
                    &format!("outcome_unknown: the effect could not be confirmed ({note})"),
                    now,
                    block(
                        BlockerKind::Failure,
                        format!("unknown:{id}"),
                        retry_line(&goal_id, id),
                    ),
                );
            }
            let _ = source;
            return self.unknown(work, id, now, "the command's outcome was not recorded");
        }
        let why = failure_text(&result);
        if let Some(att) = work.attempt_mut(id) {
            att.outcome = AttemptOutcome::Failed;
            att.summary = why.clone();
        }
        if result.status == ToolStatus::NeedsConfirmation {
            // The policy now parks what the dry run allowed: ask again through NEEDS_APPROVAL.
            return work.mv(
                id,
                ActionState::Blocked,
                Source::Executor,
                &format!("the policy now asks for approval: {why}"),
                now,
                block(
                    BlockerKind::Approval,
                    format!("retry:{id}"),
                    retry_line(&goal_id, id),
                ),
            );
        }
        if is_transient(&result) {
            work.mv(
                id,
                ActionState::Verifying,
                Source::Executor,
                &format!("transient failure: {why}"),
                now,
                None,
            )?;
            return self.again_or_block(work, id, &why, now);
        }
        let kind = if result.status == ToolStatus::Denied {
            BlockerKind::Policy
        } else {
            BlockerKind::Failure
        };
        work.mv(
            id,
            ActionState::Blocked,
            Source::Executor,
            &format!("failed: {why}"),
            now,
            block(kind, format!("retry:{id}"), retry_line(&goal_id, id)),
        )
    }

    /// VERIFYING: the action's `expect` (or none) decides DONE, a new attempt, or BLOCKED.
    pub(super) async fn verify(&self, work: &mut Work, id: &str) -> Result<(), GoalsError> {
        let now = self.now();
        let has_expect = work.goal.action(id).is_some_and(|a| a.expect.is_some());
        if !has_expect {
            return work.mv(
                id,
                ActionState::Done,
                Source::Verifier,
                "no expectation to check",
                now,
                None,
            );
        }
        let (holds, note) = self.expect_holds(&work.goal, id).await;
        work.evidence(
            id,
            EvidenceKind::ToolResult,
            format!("expect: {note}"),
            crate::ids::digest_text(&note),
            now,
        );
        if holds {
            work.mv(
                id,
                ActionState::Done,
                Source::Verifier,
                &format!("expect holds: {note}"),
                now,
                None,
            )
        } else {
            self.again_or_block(work, id, &format!("expect failed: {note}"), now)
        }
    }
}

pub(super) fn is_transient(result: &ToolResult) -> bool {
    if result.status == ToolStatus::Timeout {
        return true;
    }
    let code = result.error.as_ref().map(|e| e.code.as_str()).unwrap_or("");
    ["unavailable", "rate_limited", "timeout", "busy"]
        .iter()
        .any(|w| code.contains(w))
}
