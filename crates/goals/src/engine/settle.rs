//! Step 5 of the tick: deadline checkpoints and the goal's state afterwards (never a silent
//! stop: a goal that is not moving names a blocker).

use super::schedule::{could_start, replaced_by_done_alternative};
use super::{GoalEngine, Work};
use crate::deadline::{LATE_AFTER_MS, evaluate};
use crate::error::GoalsError;
use crate::model::{ActionKind, ActionState, Blocker, BlockerKind, CheckpointOutcome, GoalState};
use crate::report::{ReportReason, delta};

impl GoalEngine {
    pub(super) async fn checkpoints(&self, work: &mut Work) -> Result<(), GoalsError> {
        let now = self.now();
        let due: Vec<usize> = work
            .goal
            .checkpoints
            .iter()
            .enumerate()
            .filter(|(_, c)| c.outcome == CheckpointOutcome::Pending && c.at <= now)
            .map(|(i, _)| i)
            .collect();
        for i in due {
            let (minutes, at) = (
                work.goal.checkpoints[i].minutes_before,
                work.goal.checkpoints[i].at,
            );
            let (met, note) = if minutes == 0 {
                let (ok, note) = self.criteria_hold(&work.goal).await;
                work.goal.state = if ok {
                    GoalState::Done
                } else {
                    GoalState::Failed
                };
                (ok, note)
            } else {
                evaluate(&work.goal, minutes, now)
            };
            let c = &mut work.goal.checkpoints[i];
            c.outcome = if met {
                CheckpointOutcome::Met
            } else {
                CheckpointOutcome::Missed
            };
            c.evaluated_at = Some(now);
            c.late = now.saturating_sub(at) > LATE_AFTER_MS;
            c.note = note;
            let reason = if minutes == 0 {
                ReportReason::Deadline
            } else if met {
                ReportReason::Checkpoint
            } else {
                ReportReason::CheckpointMissed
            };
            // A missed contract escalates; the deadline's report is delivered whatever happened.
            if let Some(r) = delta(&mut work.goal, reason, now, !met || minutes == 0) {
                work.reports.push(r);
            }
        }
        Ok(())
    }

    /// The goal's state after a tick. A goal that is not moving and not finished always
    /// names at least one blocker (the continuity rule).
    pub(super) async fn settle_state(&self, work: &mut Work) -> Result<(), GoalsError> {
        let now = self.now();
        let goal = &work.goal;
        if goal.state.is_terminal() || goal.state == GoalState::Paused || goal.plan_version == 0 {
            return Ok(());
        }
        let open_required = goal.actions.iter().any(|a| {
            !a.optional && !a.state.is_terminal() && !replaced_by_done_alternative(goal, a)
        });
        if !open_required {
            let (ok, note) = self.criteria_hold(goal).await;
            if ok {
                work.goal.state = GoalState::Done;
                work.goal.blockers.clear();
                return Ok(());
            }
            let goal_id = work.goal.id.clone();
            if !work.goal.blockers.iter().any(|b| b.action_id.is_none()) {
                let id = format!("blk_{}", work.goal.next_seq());
                work.goal.blockers.push(Blocker {
                    id,
                    action_id: None,
                    kind: BlockerKind::External,
                    reason: format!(
                        "every action is done but the success criteria do not hold: {note}"
                    ),
                    since: now,
                    resume_token: Some(format!("plan:{goal_id}")),
                    how_to_resolve: format!("openphone goals plan {goal_id} <plan.json>"),
                });
            }
            work.goal.state = GoalState::Blocked;
            return Ok(());
        }
        let moving = goal.actions.iter().any(|a| match a.state {
            ActionState::Ready | ActionState::Verifying => true,
            ActionState::Running => !matches!(a.kind, ActionKind::AskUser { .. }),
            ActionState::Planned => could_start(goal, a),
            ActionState::NeedsApproval
            | ActionState::Done
            | ActionState::Blocked
            | ActionState::Aborted => false,
        });
        if moving {
            work.goal.state = GoalState::Active;
            return Ok(());
        }
        if goal.blockers.is_empty() {
            let goal_id = goal.id.clone();
            let stuck: Vec<String> = goal
                .actions
                .iter()
                .filter(|a| !a.state.is_terminal())
                .map(|a| a.id.clone())
                .collect();
            let id = format!("blk_{}", work.goal.next_seq());
            work.goal.blockers.push(Blocker {
                id,
                action_id: None,
                kind: BlockerKind::Dependency,
                reason: format!("no path is left for: {}", stuck.join(", ")),
                since: now,
                resume_token: Some(format!("plan:{goal_id}")),
                how_to_resolve: format!("openphone goals plan {goal_id} <plan.json>"),
            });
        }
        work.goal.state = GoalState::Blocked;
        Ok(())
    }
}
