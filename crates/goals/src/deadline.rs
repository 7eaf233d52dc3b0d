//! Deadlines (§6): the checkpoints at T−120, T−60, T−15 and T minutes (configurable), their
//! contracts, and the critical path they measure.

use std::collections::BTreeMap;

use crate::model::{ActionState, Checkpoint, CheckpointOutcome, Goal};

/// A checkpoint is late when evaluated this long after its time (the daemon was down).
pub const LATE_AFTER_MS: i64 = 60_000;

/// The contract of a checkpoint `minutes` before the deadline.
pub fn contract(minutes: i64) -> &'static str {
    match minutes {
        0 => "success criteria evaluated: done, or failed with the fallback summary",
        m if m <= 15 => "every non-optional action is DONE or has a fallback running",
        m if m <= 60 => "the critical path fits in the time left, or a fallback is chosen",
        _ => "plan accepted; every approval the plan needs has been requested",
    }
}

/// The checkpoints of a deadline, earliest first.
pub fn checkpoints_for(deadline: i64, minutes: &[i64]) -> Vec<Checkpoint> {
    let mut minutes = minutes.to_vec();
    minutes.sort_unstable_by(|a, b| b.cmp(a));
    minutes.dedup();
    minutes
        .into_iter()
        .map(|m| Checkpoint {
            label: if m == 0 {
                "T".to_owned()
            } else {
                format!("T-{m}")
            },
            minutes_before: m,
            at: deadline.saturating_sub(m.saturating_mul(60_000)),
            contract: contract(m).to_owned(),
            outcome: CheckpointOutcome::Pending,
            evaluated_at: None,
            late: false,
            note: String::new(),
        })
        .collect()
}

/// The remaining estimated time of the longest chain of unfinished actions starting at each
/// action (its own estimate plus the longest chain of what depends on it), ms.
pub fn remaining_path(goal: &Goal) -> BTreeMap<String, i64> {
    let mut memo: BTreeMap<String, i64> = BTreeMap::new();
    // Dependents of each action.
    let mut dependents: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for a in &goal.actions {
        for d in &a.depends_on {
            dependents
                .entry(d.as_str())
                .or_default()
                .push(a.id.as_str());
        }
    }
    // The graph is acyclic (checked when accepted); iterate to a fixed point in reverse
    // topological order by repeated passes (plans are small).
    for _ in 0..=goal.actions.len() {
        let mut changed = false;
        for a in &goal.actions {
            let own = if a.state.is_terminal() {
                0
            } else {
                a.estimate_ms
            };
            let tail = dependents
                .get(a.id.as_str())
                .map(|ds| {
                    ds.iter()
                        .map(|d| memo.get(*d).copied().unwrap_or(0))
                        .max()
                        .unwrap_or(0)
                })
                .unwrap_or(0);
            let value = own.saturating_add(tail);
            if memo.get(&a.id) != Some(&value) {
                memo.insert(a.id.clone(), value);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    memo
}

/// The remaining time of the critical path (the longest chain of unfinished work), ms.
pub fn critical_path_ms(goal: &Goal) -> i64 {
    let paths = remaining_path(goal);
    goal.actions
        .iter()
        .filter(|a| !a.state.is_terminal())
        .map(|a| paths.get(&a.id).copied().unwrap_or(0))
        .max()
        .unwrap_or(0)
}

/// Evaluates the contract of checkpoint `minutes` now: whether it holds, and what was found.
/// (The T checkpoint is evaluated by the engine, which checks the success criteria.)
pub fn evaluate(goal: &Goal, minutes: i64, now: i64) -> (bool, String) {
    let open: Vec<&str> = goal
        .actions
        .iter()
        .filter(|a| !a.optional && !a.state.is_terminal())
        .map(|a| a.id.as_str())
        .collect();
    if minutes > 60 {
        let unrequested: Vec<&str> = goal
            .actions
            .iter()
            .filter(|a| matches!(a.state, ActionState::Planned | ActionState::Ready))
            .filter(|a| {
                a.decision
                    .as_ref()
                    .is_some_and(|d| d.outcome == "confirm" || d.outcome == "park")
            })
            .map(|a| a.id.as_str())
            .collect();
        if goal.plan_version == 0 {
            (false, "no plan has been accepted".to_owned())
        } else if !unrequested.is_empty() {
            (
                false,
                format!("approvals not yet requested: {}", unrequested.join(", ")),
            )
        } else {
            (true, format!("plan v{} accepted", goal.plan_version))
        }
    } else if minutes > 15 {
        let waiting: Vec<&str> = goal
            .actions
            .iter()
            .filter(|a| !a.optional)
            .filter(|a| matches!(a.state, ActionState::NeedsApproval | ActionState::Blocked))
            .map(|a| a.id.as_str())
            .collect();
        if !waiting.is_empty() {
            return (
                false,
                format!(
                    "the critical path waits on the user: {}",
                    waiting.join(", ")
                ),
            );
        }
        let needed = critical_path_ms(goal);
        let left = goal.deadline_at.unwrap_or(now).saturating_sub(now);
        if needed <= left {
            (
                true,
                format!(
                    "critical path needs {} min, {} min left",
                    needed / 60_000,
                    left / 60_000
                ),
            )
        } else {
            (
                false,
                format!(
                    "critical path needs {} min but only {} min are left",
                    needed / 60_000,
                    left / 60_000
                ),
            )
        }
    } else if open.is_empty() {
        (true, "every non-optional action is done".to_owned())
    } else {
        let moving = goal.actions.iter().any(|a| {
            open.contains(&a.id.as_str())
                && matches!(a.state, ActionState::Running | ActionState::Verifying)
        });
        (
            false,
            format!(
                "not done: {}{}",
                open.join(", "),
                if moving { " (some still running)" } else { "" }
            ),
        )
    }
}
