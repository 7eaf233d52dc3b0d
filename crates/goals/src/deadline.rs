//! Deadlines (§6): the checkpoints at T−120, T−60, T−15 and T minutes (configurable), their
//! contracts, and the critical path they measure.

use std::collections::{BTreeMap, HashMap};

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
///
/// One pass over the plan in reverse topological order (each action after everything that
/// depends on it): linear in the plan's size.
pub fn remaining_path(goal: &Goal) -> BTreeMap<String, i64> {
    let index: HashMap<&str, usize> = goal
        .actions
        .iter()
        .enumerate()
        .map(|(i, a)| (a.id.as_str(), i))
        .collect();
    // Dependents of each action, and how many known dependencies each one waits on.
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); goal.actions.len()];
    let mut waiting: Vec<usize> = vec![0; goal.actions.len()];
    for (i, a) in goal.actions.iter().enumerate() {
        for d in &a.depends_on {
            if let Some(&j) = index.get(d.as_str()) {
                dependents[j].push(i);
                waiting[i] += 1;
            }
        }
    }
    // Topological order (dependencies first).
    let mut order: Vec<usize> = (0..goal.actions.len())
        .filter(|&i| waiting[i] == 0)
        .collect();
    let mut next = 0;
    while next < order.len() {
        let i = order[next];
        next += 1;
        for &j in &dependents[i] {
            waiting[j] -= 1;
            if waiting[j] == 0 {
                order.push(j);
            }
        }
    }
    if order.len() != goal.actions.len() {
        // A cycle (refused when a plan is accepted): the fixed point of repeated passes.
        return remaining_path_by_passes(goal);
    }
    let mut path = vec![0_i64; goal.actions.len()];
    for &i in order.iter().rev() {
        let a = &goal.actions[i];
        let own = if a.state.is_terminal() {
            0
        } else {
            a.estimate_ms
        };
        let tail = dependents[i].iter().map(|&j| path[j]).max().unwrap_or(0);
        path[i] = own.saturating_add(tail);
    }
    goal.actions
        .iter()
        .zip(path)
        .map(|(a, p)| (a.id.clone(), p))
        .collect()
}

/// [`remaining_path`] by passes to a fixed point: quadratic, but defined on any graph.
fn remaining_path_by_passes(goal: &Goal) -> BTreeMap<String, i64> {
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::model::Owner;
    use crate::spec::{GoalSpec, new_goal};

    /// A goal of `n` actions; action `i` depends on each earlier `j` whose bit is set in
    /// `edges[i]`, is DONE when `done[i]`, and is estimated at `estimate[i]` s.
    fn goal(n: usize, edges: &[u64], done: &[bool], estimate: &[i64]) -> Goal {
        let plan: Vec<_> = (0..n)
            .map(|i| {
                let deps: Vec<String> = (0..i)
                    .filter(|j| edges[i] >> j & 1 == 1)
                    .map(|j| format!("a{j}"))
                    .collect();
                json!({"id": format!("a{i}"), "title": format!("step {i}"), "kind": "wait",
                       "until_ms": 1, "depends_on": deps, "estimate_ms": estimate[i] * 1000})
            })
            .collect();
        let spec: GoalSpec =
            serde_json::from_value(json!({"objective": "paths", "plan": plan})).unwrap();
        let owner = Owner {
            surface: "test".to_owned(),
            phone_session: None,
            runtime: None,
        };
        let mut goal = new_goal(&spec, "goal_T".to_owned(), owner, 0).unwrap();
        for (a, d) in goal.actions.iter_mut().zip(done) {
            if *d {
                a.state = ActionState::Done;
            }
        }
        goal
    }

    #[test]
    fn remaining_path_of_a_chain_sums_what_is_left_after_each_action() {
        // a0 <- a1 <- a2 <- a3, a1 done: 4 + 0 + 2 + 1 from a0.
        let g = goal(
            4,
            &[0, 0b1, 0b10, 0b100],
            &[false, true, false, false],
            &[4, 3, 2, 1],
        );
        let paths = remaining_path(&g);
        let got: Vec<i64> = (0..4).map(|i| paths[&format!("a{i}")]).collect();
        assert_eq!(got, vec![7_000, 3_000, 3_000, 1_000]);
        assert_eq!(critical_path_ms(&g), 7_000);
    }

    proptest! {
        /// The linear pass gives what the fixed point of repeated passes gives.
        #[test]
        fn remaining_path_equals_the_fixed_point_of_passes(
            n in 1usize..40,
            edges in proptest::collection::vec(any::<u64>(), 40),
            done in proptest::collection::vec(any::<bool>(), 40),
            estimate in proptest::collection::vec(0i64..600, 40),
        ) {
            // Sparse edges, so that long chains occur.
            let edges: Vec<u64> = edges.iter().map(|e| e & e.rotate_left(7) & e.rotate_left(19)).collect();
            let g = goal(n, &edges, &done, &estimate);
            prop_assert_eq!(remaining_path(&g), remaining_path_by_passes(&g));
        }
    }
}
