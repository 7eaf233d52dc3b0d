//! The user's operations on a goal: a new plan, an answer to a question, retry, pause,
//! resume and abort. Each runs under the goal's lock through [`GoalEngine::update`].

use super::GoalEngine;
use crate::error::GoalsError;
use crate::model::{ActionKind, ActionState, AttemptOutcome, EvidenceKind, Goal, GoalState};
use crate::spec::{ActionSpec, accept_plan};
use crate::transition::Source;

impl GoalEngine {
    /// Accepts a new plan for the goal (§1: a re-plan replaces only what has not started).
    pub async fn submit_plan(&self, id: &str, plan: &[ActionSpec]) -> Result<Goal, GoalsError> {
        self.update(id, |work, now| {
            accept_plan(&mut work.goal, plan, now)?;
            Ok(())
        })
        .await
    }

    /// The user's answer to an `ask_user` action: recorded as evidence, the action proceeds.
    pub async fn answer(&self, id: &str, action: &str, text: &str) -> Result<Goal, GoalsError> {
        if text.trim().is_empty() {
            return Err(GoalsError::invalid("answer", "must not be empty"));
        }
        self.update(id, |work, now| {
            let a = work
                .goal
                .action(action)
                .ok_or_else(|| GoalsError::NoAction(action.to_owned()))?;
            if a.state == ActionState::Blocked
                && a.resume_token.as_deref()
                    == Some(super::schedule::consent_token(action).as_str())
            {
                return consent(work, action, text, now);
            }
            if !(matches!(a.kind, ActionKind::AskUser { .. }) && a.state == ActionState::Running) {
                return Err(GoalsError::invalid(
                    "action",
                    "is not an ask_user action waiting for an answer",
                ));
            }
            work.goal
                .blockers
                .retain(|b| b.action_id.as_deref() != Some(action));
            work.evidence(
                action,
                EvidenceKind::UserAnswer,
                text.trim().to_owned(),
                crate::ids::digest_text(text.trim()),
                now,
            );
            if let Some(att) = work.attempt_mut(action) {
                att.outcome = AttemptOutcome::Ok;
                att.finished_at = Some(now);
                att.summary = "answered".to_owned();
            }
            work.mv(
                action,
                ActionState::Verifying,
                Source::Executor,
                "the user answered",
                now,
                None,
            )?;
            work.mv(
                action,
                ActionState::Done,
                Source::Verifier,
                "an answer is all it needs",
                now,
                None,
            )?;
            Ok(())
        })
        .await
    }

    /// `goals retry`: a BLOCKED action (or every one) becomes READY; its budget is renewed.
    pub async fn retry(&self, id: &str, action: Option<&str>) -> Result<Goal, GoalsError> {
        self.update(id, |work, now| {
            let targets: Vec<String> = work
                .goal
                .actions
                .iter()
                .filter(|a| a.state == ActionState::Blocked)
                .filter(|a| action.is_none_or(|x| x == a.id))
                .map(|a| a.id.clone())
                .collect();
            if targets.is_empty() {
                return Err(GoalsError::invalid("action", "no BLOCKED action to retry"));
            }
            for t in targets {
                work.mv(
                    &t,
                    ActionState::Ready,
                    Source::User,
                    "the user asked to retry",
                    now,
                    None,
                )?;
                if let Some(a) = work.goal.action_mut(&t) {
                    a.not_before = 0;
                    a.decision = None;
                }
            }
            work.goal.retry_budget.used = 0;
            if work.goal.state == GoalState::Blocked {
                work.goal.state = GoalState::Active;
            }
            Ok(())
        })
        .await
    }

    /// Pauses the goal: nothing is scheduled until resumed.
    pub async fn pause(&self, id: &str) -> Result<Goal, GoalsError> {
        self.update(id, |work, _| {
            if work.goal.state.is_terminal() {
                return Err(GoalsError::invalid(
                    "goal",
                    format!("the goal is {}", work.goal.state),
                ));
            }
            work.goal.state = GoalState::Paused;
            Ok(())
        })
        .await
    }

    /// Resumes a paused goal.
    pub async fn resume(&self, id: &str) -> Result<Goal, GoalsError> {
        self.update(id, |work, _| {
            if work.goal.state != GoalState::Paused {
                return Err(GoalsError::invalid("goal", "is not paused"));
            }
            work.goal.state = GoalState::Active;
            Ok(())
        })
        .await
    }

    /// Aborts the goal (every non-terminal action becomes ABORTED), or one action. The
    /// confirmations its aborted actions waited on are withdrawn, so a late approval runs
    /// nothing.
    pub async fn abort(&self, id: &str, action: Option<&str>) -> Result<Goal, GoalsError> {
        let waiting: Vec<String> = self
            .get(id)?
            .actions
            .iter()
            .filter(|a| a.state == ActionState::NeedsApproval)
            .filter(|a| action.is_none_or(|x| x == a.id))
            .filter_map(|a| a.last_attempt().and_then(|t| t.confirmation_id.clone()))
            .collect();
        let goal = self.abort_actions(id, action).await?;
        for cid in waiting {
            if let Err(e) = self.bridge.withdraw(&Self::caller(), &cid).await {
                tracing::info!(goal = %id, confirmation = %cid, error = %e, "not withdrawn (already resolved)");
            }
        }
        Ok(goal)
    }

    pub(super) async fn abort_actions(
        &self,
        id: &str,
        action: Option<&str>,
    ) -> Result<Goal, GoalsError> {
        self.update(id, |work, now| {
            if work.goal.state.is_terminal() {
                return Err(GoalsError::invalid(
                    "goal",
                    format!("the goal is {}", work.goal.state),
                ));
            }
            let targets: Vec<String> = work
                .goal
                .actions
                .iter()
                .filter(|a| !a.state.is_terminal())
                .filter(|a| action.is_none_or(|x| x == a.id))
                .map(|a| a.id.clone())
                .collect();
            if let Some(x) = action
                && targets.is_empty()
            {
                return Err(GoalsError::NoAction(x.to_owned()));
            }
            for t in targets {
                work.mv(
                    &t,
                    ActionState::Aborted,
                    Source::User,
                    "aborted by the user",
                    now,
                    None,
                )?;
            }
            if action.is_none() {
                work.goal.state = GoalState::Aborted;
                work.goal.blockers.clear();
            }
            Ok(())
        })
        .await
    }
}

/// The user's yes or no to an alternative of a step they declined (`schedule.rs`): yes is
/// recorded as their answer and the alternative becomes READY (it is then decided by the
/// policy like any step); no drops it (ABORTED).
fn consent(work: &mut super::Work, action: &str, text: &str, now: i64) -> Result<(), GoalsError> {
    let answer = text.trim().to_ascii_lowercase();
    let yes = match answer.as_str() {
        "yes" | "y" | "ok" => true,
        "no" | "n" => false,
        _ => {
            return Err(GoalsError::invalid(
                "answer",
                "must be yes or no: whether the alternative of the declined step may run",
            ));
        }
    };
    if !yes {
        return work.mv(
            action,
            ActionState::Aborted,
            Source::User,
            "the user said no to the alternative",
            now,
            None,
        );
    }
    work.evidence(
        action,
        EvidenceKind::UserAnswer,
        "yes: run the alternative".to_owned(),
        crate::ids::digest_text(&answer),
        now,
    );
    work.mv(
        action,
        ActionState::Ready,
        Source::User,
        "the user agreed to the alternative",
        now,
        None,
    )?;
    if work.goal.state == GoalState::Blocked {
        work.goal.state = GoalState::Active;
    }
    Ok(())
}
