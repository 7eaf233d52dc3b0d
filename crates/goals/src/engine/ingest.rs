//! Step 1 of the tick: what happened outside it — confirmations resolved, timers elapsed,
//! and attempts left RUNNING by a process that died (re-sent with the same idempotency key,
//! never re-run blind).

use openphone_core::Invocation;
use openphone_protocol::ToolResult;
use openphone_store::ConfirmationState;

use super::{GoalEngine, Work, block, counted_attempts, retry_line};
use crate::error::GoalsError;
use crate::model::{Action, ActionKind, ActionState, AttemptOutcome, BlockerKind};
use crate::transition::Source;

impl GoalEngine {
    pub(super) async fn ingest(&self, work: &mut Work) -> Result<(), GoalsError> {
        // Confirmations past their time are timed out first, so an expiry is seen now.
        if work
            .goal
            .actions
            .iter()
            .any(|a| a.state == ActionState::NeedsApproval)
        {
            self.bridge.expire_due().await;
        }
        let now = self.now();
        let ids: Vec<String> = work
            .goal
            .actions
            .iter()
            .filter(|a| matches!(a.state, ActionState::NeedsApproval | ActionState::Running))
            .map(|a| a.id.clone())
            .collect();
        for id in ids {
            let Some(action) = work.goal.action(&id).cloned() else {
                continue;
            };
            match (action.state, &action.kind) {
                (ActionState::NeedsApproval, ActionKind::Tool { .. })
                    if action
                        .last_attempt()
                        .is_some_and(|a| a.confirmation_id.is_none()) =>
                {
                    // A process stopped between storing NEEDS_APPROVAL and recording the
                    // confirmation: ask again with the same key — the bridge joins the
                    // confirmation it may have made (or answers its final result).
                    self.execute(work, &id).await?;
                }
                (ActionState::NeedsApproval, ActionKind::Tool { .. }) => {
                    self.ingest_confirmation(work, &action, now).await?;
                }
                (ActionState::Running, ActionKind::Wait { until_ms, .. }) if *until_ms <= now => {
                    self.wait_over(work, &id, now)?;
                }
                (ActionState::Running, ActionKind::Tool { command, params }) => {
                    // Left RUNNING by a process that stopped: the same key is re-sent first.
                    let n = action.last_attempt().map_or(1, |a| a.n);
                    let request = Self::request(&work.goal, &action, command, params, n);
                    let result = self
                        .bridge
                        .call(
                            Invocation::goal(&self.caller_for(&work.goal), &work.goal.id, request)
                                .on_device(work.goal.device_id.clone()),
                        )
                        .await;
                    self.tool_result(work, &id, result, Source::Recovery)
                        .await?;
                }
                (ActionState::Running, ActionKind::Job { .. }) => {
                    self.ingest_job(work, &action, now).await?;
                }
                (ActionState::Running, ActionKind::AgentTurn { .. } | ActionKind::Verify) => {
                    // An in-process executor that did not finish: its outcome is unknown.
                    if let Some(att) = work.attempt_mut(&id) {
                        att.outcome = AttemptOutcome::OutcomeUnknown;
                        att.finished_at = Some(now);
                    }
                    work.mv(
                        &id,
                        ActionState::Blocked,
                        Source::Recovery,
                        "outcome_unknown: the daemon stopped while it ran",
                        now,
                        block(
                            BlockerKind::Failure,
                            format!("retry:{id}"),
                            retry_line(&work.goal.id, &id),
                        ),
                    )?;
                }
                // Still waiting: a timer not yet due, a question not yet answered.
                (ActionState::Running, ActionKind::Wait { .. } | ActionKind::AskUser { .. }) => {}
                // Only a tool action asks for approval.
                (
                    ActionState::NeedsApproval,
                    ActionKind::AgentTurn { .. }
                    | ActionKind::Job { .. }
                    | ActionKind::Wait { .. }
                    | ActionKind::AskUser { .. }
                    | ActionKind::Verify,
                ) => {}
                // Only NEEDS_APPROVAL and RUNNING actions are ingested (filtered above).
                (
                    ActionState::Planned
                    | ActionState::Ready
                    | ActionState::Verifying
                    | ActionState::Done
                    | ActionState::Blocked
                    | ActionState::Aborted,
                    _,
                ) => {}
            }
        }
        Ok(())
    }

    pub(super) async fn ingest_confirmation(
        &self,
        work: &mut Work,
        action: &Action,
        now: i64,
    ) -> Result<(), GoalsError> {
        let id = action.id.clone();
        let Some(cid) = action
            .last_attempt()
            .and_then(|a| a.confirmation_id.clone())
        else {
            return Ok(());
        };
        let Some(record) = self.store.get_confirmation(&cid)? else {
            return Ok(());
        };
        let goal_id = work.goal.id.clone();
        match record.state {
            ConfirmationState::Pending | ConfirmationState::Approved => {}
            ConfirmationState::Completed => {
                let by = record
                    .resolved_by
                    .clone()
                    .unwrap_or_else(|| "the user".to_owned());
                work.mv(
                    &id,
                    ActionState::Running,
                    Source::User,
                    &format!("approved by {by}"),
                    now,
                    None,
                )?;
                let result: Option<ToolResult> = record
                    .final_result
                    .clone()
                    .and_then(|v| serde_json::from_value(v).ok());
                match result {
                    Some(result) => {
                        self.tool_result(work, &id, result, Source::Executor)
                            .await?
                    }
                    None => self.unknown(work, &id, now, "the approved request left no result")?,
                }
            }
            ConfirmationState::Timeout if work.goal.deadline_at.is_none_or(|d| now < d) => {
                // The bridge's confirmations wait at most ten minutes; the goal's approval
                // waits until its deadline: ask again (an expired request costs no budget).
                if let Some(att) = work.attempt_mut(&id) {
                    att.outcome = AttemptOutcome::Expired;
                    att.finished_at = Some(now);
                    att.summary = "the approval request expired; asked again".to_owned();
                }
                if counted_attempts(action) >= 2 {
                    work.goal.retry_budget.used = work.goal.retry_budget.used.saturating_sub(1);
                }
                work.mv(
                    &id,
                    ActionState::Blocked,
                    Source::Clock,
                    "the approval request expired before the deadline",
                    now,
                    block(
                        BlockerKind::Approval,
                        format!("retry:{id}"),
                        retry_line(&goal_id, &id),
                    ),
                )?;
                work.mv(
                    &id,
                    ActionState::Ready,
                    Source::Clock,
                    "asking for approval again",
                    now,
                    None,
                )?;
            }
            ConfirmationState::Denied | ConfirmationState::Timeout => {
                let (source, why) = if record.state == ConfirmationState::Denied {
                    (Source::User, "declined by the user")
                } else {
                    (Source::Clock, "the approval expired")
                };
                if let Some(att) = work.attempt_mut(&id) {
                    att.outcome = AttemptOutcome::Declined;
                    att.finished_at = Some(now);
                    att.summary = why.to_owned();
                }
                work.mv(
                    &id,
                    ActionState::Blocked,
                    source,
                    why,
                    now,
                    block(
                        BlockerKind::Approval,
                        format!("retry:{id}"),
                        retry_line(&goal_id, &id),
                    ),
                )?;
            }
            ConfirmationState::ResultUnknown => {
                work.mv(
                    &id,
                    ActionState::Running,
                    Source::User,
                    "approved; the daemon stopped while it ran",
                    now,
                    None,
                )?;
                self.unknown(work, &id, now, "the approved request's outcome is unknown")?;
            }
        }
        Ok(())
    }
}
