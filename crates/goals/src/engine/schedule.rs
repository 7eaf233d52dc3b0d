//! Steps 2 and 3 of the tick: re-evaluation (PLANNED → READY when the dependencies are met,
//! the policy dry run of every READY tool action) and scheduling (critical path first, at most
//! `max_parallel` running); with the plan's dependency rules (alternatives, could-start).

use openphone_policy::Context;
use openphone_protocol::ToolRequest;
use openphone_protocol::endpoint::{Explanation, PolicyOutcome};
use serde_json::{Map, Value};

use super::{GoalEngine, Work, block, counted_attempts, retry_line, wire};
use crate::deadline::remaining_path;
use crate::error::GoalsError;
use crate::ids::{attempt_key, digest};
use crate::model::{
    Action, ActionKind, ActionState, Attempt, AttemptOutcome, BlockerKind, DecisionSummary, Goal,
};
use crate::transition::Source;

impl GoalEngine {
    /// The request of attempt `n` of a tool action.
    pub(super) fn request(
        goal: &Goal,
        action: &Action,
        command: &str,
        params: &Map<String, Value>,
        n: u32,
    ) -> ToolRequest {
        let key = attempt_key(&goal.id, &action.id, n);
        let mut params = params.clone();
        params
            .entry("reason")
            .or_insert_with(|| Value::String(action.title.clone()));
        ToolRequest {
            request_id: key.clone(),
            runtime: Some(openphone_protocol::BUILTIN_RUNTIME_ID.to_owned()),
            runtime_session_id: action.session(&goal.id),
            phone_session_id: None,
            tool: command.to_owned(),
            params: Value::Object(params),
            reason: Some(action.title.clone()),
            autonomy: Some(goal.autonomy.clone()),
            idempotency_key: Some(key),
            timeout_ms: None,
        }
    }

    /// The dry run of a tool action now (§4): the real policy stack, the goal's autonomy, the
    /// background context, then the goal's risk ceiling (`risk.rs`). A request the bridge
    /// refuses to validate is a Deny.
    pub fn dry_run(&self, goal: &Goal, action: &Action) -> Option<DecisionSummary> {
        let ActionKind::Tool { command, .. } = &action.kind else {
            return None;
        };
        let decision = self.policy_dry_run(goal, action)?;
        Some(crate::risk::cap(goal, &action.id, command, decision))
    }

    /// The policy stack's part of [`GoalEngine::dry_run`].
    pub(super) fn policy_dry_run(&self, goal: &Goal, action: &Action) -> Option<DecisionSummary> {
        let ActionKind::Tool { command, params } = &action.kind else {
            return None;
        };
        let n = u32::try_from(action.attempts.len())
            .unwrap_or(u32::MAX)
            .saturating_add(1);
        let request = Self::request(goal, action, command, params, n);
        let now = self.now();
        Some(
            match self
                .bridge
                .explain(&self.caller_for(goal), request, Context::goal(&goal.id))
            {
                Ok(explanation) => summarise(&explanation, now),
                Err((code, message)) => DecisionSummary {
                    outcome: "deny".to_owned(),
                    layer: "validation".to_owned(),
                    reason: format!("{}: {message}", code.as_str()),
                    proof_digest: crate::ids::digest_text(&message),
                    layers: vec![format!("validation: deny — {message}")],
                    change_command: None,
                    at: now,
                },
            },
        )
    }

    /// The permission envelope of the goal's plan (§4): each tool action's decision.
    pub fn envelope(&self, goal: &Goal) -> Vec<(String, DecisionSummary)> {
        goal.actions
            .iter()
            .filter_map(|a| self.dry_run(goal, a).map(|d| (a.id.clone(), d)))
            .collect()
    }

    pub(super) fn reevaluate(&self, work: &mut Work) -> Result<(), GoalsError> {
        let now = self.now();
        for i in 0..work.goal.actions.len() {
            let action = &work.goal.actions[i];
            if action.state == ActionState::Planned && deps_met(&work.goal, action) {
                let source = if action.depends_on.is_empty() {
                    Source::Clock
                } else {
                    Source::Dependency
                };
                let reason = if is_alternative(&work.goal, &action.id) {
                    "the step it replaces is blocked"
                } else if action.depends_on.is_empty() {
                    "nothing to wait for"
                } else {
                    "its dependencies are done"
                };
                let id = action.id.clone();
                work.mv(&id, ActionState::Ready, source, reason, now, None)?;
            }
        }
        for i in 0..work.goal.actions.len() {
            let action = &work.goal.actions[i];
            if action.state == ActionState::Ready
                && let Some(decision) = self.dry_run(&work.goal, action)
            {
                work.goal.actions[i].decision = Some(decision);
            }
        }
        Ok(())
    }

    /// Picks READY actions to start and moves them (RUNNING, NEEDS_APPROVAL or BLOCKED).
    pub(super) fn schedule(&self, work: &mut Work) -> Result<Vec<String>, GoalsError> {
        let now = self.now();
        let paths = remaining_path(&work.goal);
        let running = work
            .goal
            .actions
            .iter()
            .filter(|a| matches!(a.state, ActionState::Running | ActionState::Verifying))
            // Waiting on the user, a timer, an event or an agent job takes no slot.
            .filter(|a| {
                !matches!(
                    a.kind,
                    ActionKind::AskUser { .. } | ActionKind::Wait { .. } | ActionKind::Job { .. }
                )
            })
            .count();
        let mut slots = usize::try_from(work.goal.max_parallel)
            .unwrap_or(1)
            .saturating_sub(running);
        let mut ready: Vec<(usize, i64, String)> = work
            .goal
            .actions
            .iter()
            .enumerate()
            .filter(|(_, a)| a.state == ActionState::Ready && a.not_before <= now)
            .map(|(i, a)| (i, paths.get(&a.id).copied().unwrap_or(0), a.id.clone()))
            .collect();
        ready.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let goal_id = work.goal.id.clone();
        let mut started = Vec::new();
        for (_, _, id) in ready {
            let Some(action) = work.goal.action(&id).cloned() else {
                continue;
            };
            let budget = work.goal.retry_budget;
            let tries = counted_attempts(&action);
            // A first attempt is not a retry: only retries count against `per_goal`.
            if tries >= budget.per_action || (tries >= 1 && budget.used >= budget.per_goal) {
                work.mv(
                    &id,
                    ActionState::Blocked,
                    Source::Budget,
                    &format!("retry budget exhausted after {tries} attempts"),
                    now,
                    block(
                        BlockerKind::Budget,
                        format!("retry:{id}"),
                        retry_line(&goal_id, &id),
                    ),
                )?;
                continue;
            }
            // The user said no to the step this one replaces: its alternative is asked too,
            // never run in its place without them (a declined share does not become a
            // clipboard copy silently). A policy denial's alternative runs if the policy lets it.
            if let Some(primary) = declined_primary(&work.goal, &action)
                && !consented(&work.goal, &id)
            {
                work.mv(
                    &id,
                    ActionState::Blocked,
                    Source::Policy,
                    &format!(
                        "the user declined {primary}; its alternative \"{}\" runs only if they agree",
                        action.title
                    ),
                    now,
                    block(
                        BlockerKind::Input,
                        consent_token(&id),
                        format!(
                            "openphone goals answer {goal_id} {id} yes (or no to drop it)"
                        ),
                    ),
                )?;
                continue;
            }
            let decision = action.decision.clone();
            let outcome = decision.as_ref().map_or("allow", |d| d.outcome.as_str());
            if outcome == "deny" {
                let d = decision.clone().unwrap_or_else(|| summarise_none(now));
                let how = match &d.change_command {
                    // The goal's own risk ceiling: retrying cannot help (`risk.rs`).
                    Some(cmd) if d.layer == crate::risk::LAYER => cmd.clone(),
                    Some(cmd) => format!("{cmd}, then {}", retry_line(&goal_id, &id)),
                    None => format!(
                        "change the policy (openphone policy explain) or submit another plan (openphone goals plan {goal_id} <plan.json>), then {}",
                        retry_line(&goal_id, &id)
                    ),
                };
                work.mv(
                    &id,
                    ActionState::Blocked,
                    Source::Policy,
                    &format!("denied by {}: {}", d.layer, d.reason),
                    now,
                    block(BlockerKind::Policy, format!("policy:{id}"), how),
                )?;
                continue;
            }
            if slots == 0 {
                continue;
            }
            let n = u32::try_from(action.attempts.len())
                .unwrap_or(u32::MAX)
                .saturating_add(1);
            let attempt = Attempt {
                n,
                idempotency_key: attempt_key(&goal_id, &id, n),
                started_at: now,
                finished_at: None,
                outcome: AttemptOutcome::Running,
                decision_proof_digest: decision
                    .as_ref()
                    .map(|d| d.proof_digest.clone())
                    .unwrap_or_default(),
                result_digest: String::new(),
                summary: String::new(),
                confirmation_id: None,
                approval_expires_at: None,
                job_id: None,
            };
            if let Some(a) = work.goal.action_mut(&id) {
                a.attempts.push(attempt);
            }
            if tries >= 1 {
                work.goal.retry_budget.used = work.goal.retry_budget.used.saturating_add(1);
            }
            if outcome == "confirm" || outcome == "park" {
                let d = decision.clone().unwrap_or_else(|| summarise_none(now));
                if let Some(att) = work.attempt_mut(&id) {
                    att.outcome = AttemptOutcome::AwaitingApproval;
                }
                work.mv(
                    &id,
                    ActionState::NeedsApproval,
                    Source::Policy,
                    &format!("{} by {}: {}", d.outcome, d.layer, d.reason),
                    now,
                    None,
                )?;
            } else {
                let why = match &decision {
                    Some(d) => format!("allowed ({}: {})", d.layer, d.reason),
                    None => format!("{}: no command, nothing to decide", action.kind.name()),
                };
                work.mv(&id, ActionState::Running, Source::Policy, &why, now, None)?;
                slots -= 1;
            }
            started.push(id);
        }
        Ok(started)
    }
}

/// The summary of a dry run.
pub fn summarise(explanation: &Explanation, now: i64) -> DecisionSummary {
    let outcome = explanation.decision;
    let deciding = explanation
        .layers
        .iter()
        .find(|l| l.verdict == outcome && outcome != PolicyOutcome::Allow)
        .or_else(|| explanation.layers.last());
    DecisionSummary {
        outcome: wire(&outcome),
        layer: deciding.map(|l| wire(&l.layer)).unwrap_or_default(),
        reason: deciding.map(|l| l.reason.clone()).unwrap_or_default(),
        proof_digest: serde_json::to_value(explanation)
            .map(|v| digest(&v))
            .unwrap_or_default(),
        layers: explanation
            .layers
            .iter()
            .map(|l| format!("{}: {} — {}", wire(&l.layer), wire(&l.verdict), l.reason))
            .collect(),
        change_command: explanation.changes.iter().find_map(|c| c.command.clone()),
        at: now,
    }
}

pub(super) fn summarise_none(now: i64) -> DecisionSummary {
    DecisionSummary {
        outcome: "allow".to_owned(),
        layer: String::new(),
        reason: String::new(),
        proof_digest: String::new(),
        layers: Vec::new(),
        change_command: None,
        at: now,
    }
}

/// The resume token of an alternative waiting for the user's yes (`goals answer … yes`).
pub(super) fn consent_token(id: &str) -> String {
    format!("consent:{id}")
}

/// The step `action` is an alternative of, when the user declined that step's approval and
/// `action` would act (a question, a wait or a check acts on nothing).
fn declined_primary(goal: &Goal, action: &Action) -> Option<String> {
    if matches!(
        action.kind,
        ActionKind::AskUser { .. } | ActionKind::Wait { .. } | ActionKind::Verify
    ) {
        return None;
    }
    goal.actions
        .iter()
        .find(|p| {
            p.alternatives.contains(&action.id)
                && p.last_attempt()
                    .is_some_and(|a| a.outcome == AttemptOutcome::Declined)
        })
        .map(|p| p.id.clone())
}

/// Whether the user agreed to run alternative `id` (their answer is its evidence).
fn consented(goal: &Goal, id: &str) -> bool {
    goal.evidence.iter().any(|e| {
        e.action_id.as_deref() == Some(id) && e.kind == crate::model::EvidenceKind::UserAnswer
    })
}

/// Whether `id` is listed as an alternative of some action.
pub(super) fn is_alternative(goal: &Goal, id: &str) -> bool {
    goal.actions
        .iter()
        .any(|a| a.alternatives.iter().any(|x| x == id))
}

/// An action that is BLOCKED or ABORTED but one of its alternatives is DONE.
pub(super) fn replaced_by_done_alternative(goal: &Goal, a: &Action) -> bool {
    matches!(a.state, ActionState::Blocked | ActionState::Aborted)
        && a.alternatives
            .iter()
            .any(|x| goal.action(x).is_some_and(|b| b.state == ActionState::Done))
}

/// A dependency counts as met when it is DONE, replaced by a done alternative, or optional
/// and aborted. An alternative waits until the action it replaces is BLOCKED or ABORTED.
pub(super) fn deps_met(goal: &Goal, action: &Action) -> bool {
    let primaries: Vec<&Action> = goal
        .actions
        .iter()
        .filter(|p| p.alternatives.contains(&action.id))
        .collect();
    if !primaries.is_empty()
        && !primaries
            .iter()
            .any(|p| matches!(p.state, ActionState::Blocked | ActionState::Aborted))
    {
        return false;
    }
    action.depends_on.iter().all(|d| {
        goal.action(d).is_some_and(|dep| {
            dep.state == ActionState::Done
                || replaced_by_done_alternative(goal, dep)
                || (dep.optional && dep.state == ActionState::Aborted)
        })
    })
}

/// A PLANNED action that may still start: none of its dependencies is stuck.
pub(super) fn could_start(goal: &Goal, action: &Action) -> bool {
    if is_alternative(goal, &action.id) {
        return deps_met(goal, action);
    }
    action.depends_on.iter().all(|d| {
        goal.action(d).is_some_and(|dep| match dep.state {
            ActionState::Done => true,
            ActionState::Ready | ActionState::Running | ActionState::Verifying => true,
            ActionState::Planned => could_start(goal, dep),
            ActionState::NeedsApproval | ActionState::Blocked | ActionState::Aborted => false,
        })
    })
}
