//! The action state machine of `goals.md` §2, in one place.
//!
//! [`TABLE`] lists every legal edge with the sources that may cause it; [`check`] refuses
//! every other (from, to, source) with an [`IllegalTransition`]. [`move_action`] is the only
//! code that changes an action's state: it asks the table first, enforces that a BLOCKED
//! action carries a `resume_token` and a `how_to_resolve` line (recorded as a goal blocker),
//! and returns the transition record the caller persists with the goal document, in the same
//! store transaction, before the new state's side effect starts.

// Routers name every variant: a new one must be handled here (tidy rule `exhaustive`).
#![warn(clippy::wildcard_enum_match_arm)]

use serde::{Deserialize, Serialize};

use crate::model::{ActionState, Blocker, BlockerKind, Goal};

/// What caused a transition (the "recorded source" column of §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A time passed (a backoff, a wait, an expiry, a checkpoint).
    Clock,
    /// The action's dependencies completed.
    Dependency,
    /// The policy dry-run.
    Policy,
    /// The retry budget.
    Budget,
    /// The user (an approval, an answer, retry, abort).
    User,
    /// The executor returned.
    Executor,
    /// Start-up recovery of an interrupted attempt.
    Recovery,
    /// The verifier (`expect`).
    Verifier,
}

impl Source {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Clock => "clock",
            Source::Dependency => "dependency",
            Source::Policy => "policy",
            Source::Budget => "budget",
            Source::User => "user",
            Source::Executor => "executor",
            Source::Recovery => "recovery",
            Source::Verifier => "verifier",
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

use ActionState as S;
use Source as Src;

/// Every legal edge of §2 with the sources that may cause it. "Any non-terminal → ABORTED"
/// is spelled out per state. VERIFYING → BLOCKED is the diagram's edge for an `expect` that
/// fails with no budget left.
pub const TABLE: &[(ActionState, ActionState, &[Source])] = &[
    (S::Planned, S::Ready, &[Src::Clock, Src::Dependency]),
    (S::Ready, S::NeedsApproval, &[Src::Policy]),
    (S::Ready, S::Running, &[Src::Policy]),
    (S::Ready, S::Blocked, &[Src::Policy, Src::Budget]),
    (S::NeedsApproval, S::Running, &[Src::User, Src::Policy]),
    (S::NeedsApproval, S::Blocked, &[Src::User, Src::Clock]),
    (S::Running, S::Verifying, &[Src::Executor]),
    (
        S::Running,
        S::Blocked,
        &[Src::Executor, Src::Recovery, Src::Budget],
    ),
    (S::Verifying, S::Done, &[Src::Verifier]),
    (S::Verifying, S::Ready, &[Src::Verifier]),
    (S::Verifying, S::Blocked, &[Src::Verifier, Src::Budget]),
    (S::Blocked, S::Ready, &[Src::User, Src::Clock]),
    (S::Planned, S::Aborted, &[Src::User]),
    (S::Ready, S::Aborted, &[Src::User]),
    (S::NeedsApproval, S::Aborted, &[Src::User]),
    (S::Running, S::Aborted, &[Src::User]),
    (S::Verifying, S::Aborted, &[Src::User]),
    (S::Blocked, S::Aborted, &[Src::User]),
];

/// An edge (or a source for it) that the table does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IllegalTransition {
    /// No such edge.
    #[error("an action that is {from} cannot become {to}")]
    NoEdge { from: ActionState, to: ActionState },
    /// The edge exists, not for this source.
    #[error("{from} -> {to} is not caused by {by}")]
    WrongSource {
        from: ActionState,
        to: ActionState,
        by: Source,
    },
    /// BLOCKED without its resume path.
    #[error("an action is never BLOCKED without a resume_token and a how_to_resolve command")]
    BlockedWithoutResume,
    /// No action with this id.
    #[error("the goal has no action {0:?}")]
    UnknownAction(String),
}

/// Whether `from → to` caused by `source` is in the table.
pub fn check(from: ActionState, to: ActionState, source: Source) -> Result<(), IllegalTransition> {
    let Some((_, _, sources)) = TABLE.iter().find(|(f, t, _)| *f == from && *t == to) else {
        return Err(IllegalTransition::NoEdge { from, to });
    };
    if sources.contains(&source) {
        Ok(())
    } else {
        Err(IllegalTransition::WrongSource {
            from,
            to,
            by: source,
        })
    }
}

/// Why an action becomes BLOCKED: the blocker recorded with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockWith {
    pub kind: BlockerKind,
    /// The token that resumes it (a confirmation id, `retry:<action>`, …).
    pub resume_token: String,
    /// One line naming the exact command.
    pub how_to_resolve: String,
}

/// A transition as recorded: persisted with the document it produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    pub action_id: String,
    pub from: ActionState,
    pub to: ActionState,
    pub source: Source,
    pub reason: String,
    pub at: i64,
}

impl Transition {
    /// The store's form.
    pub fn to_store(&self) -> openphone_store::NewGoalTransition {
        openphone_store::NewGoalTransition {
            action_id: self.action_id.clone(),
            from_state: self.from.as_str().to_owned(),
            to_state: self.to.as_str().to_owned(),
            source: self.source.as_str().to_owned(),
            reason: self.reason.clone(),
            at_ms: self.at,
        }
    }
}

/// Moves one action of `goal` to `to`: refused unless the table has the edge for `source`;
/// a move to BLOCKED needs `block` (with a non-empty token and command line) and records the
/// blocker on the goal; leaving BLOCKED closes the action's blockers. Returns the record to
/// persist.
pub fn move_action(
    goal: &mut Goal,
    action_id: &str,
    to: ActionState,
    source: Source,
    reason: &str,
    now: i64,
    block: Option<BlockWith>,
) -> Result<Transition, IllegalTransition> {
    let from = goal
        .action(action_id)
        .map(|a| a.state)
        .ok_or_else(|| IllegalTransition::UnknownAction(action_id.to_owned()))?;
    check(from, to, source)?;
    let blocker = if to == ActionState::Blocked {
        let b = block
            .filter(|b| !b.resume_token.trim().is_empty() && !b.how_to_resolve.trim().is_empty())
            .ok_or(IllegalTransition::BlockedWithoutResume)?;
        let id = format!("blk_{}", goal.next_seq());
        Some(Blocker {
            id,
            action_id: Some(action_id.to_owned()),
            kind: b.kind,
            reason: reason.to_owned(),
            since: now,
            resume_token: Some(b.resume_token),
            how_to_resolve: b.how_to_resolve,
        })
    } else {
        None
    };
    // Leaving a waiting state closes what the action waited on.
    if matches!(from, ActionState::Blocked | ActionState::NeedsApproval) || to.is_terminal() {
        goal.blockers
            .retain(|b| b.action_id.as_deref() != Some(action_id));
    }
    let token = blocker.as_ref().and_then(|b| b.resume_token.clone());
    if let Some(blocker) = blocker {
        goal.blockers.push(blocker);
    }
    if let Some(action) = goal.action_mut(action_id) {
        action.state = to;
        match to {
            ActionState::Blocked => action.resume_token = token,
            ActionState::NeedsApproval => {}
            ActionState::Planned
            | ActionState::Ready
            | ActionState::Running
            | ActionState::Verifying
            | ActionState::Done
            | ActionState::Aborted => action.resume_token = None,
        }
    }
    goal.updated_at = now;
    Ok(Transition {
        action_id: action_id.to_owned(),
        from,
        to,
        source,
        reason: reason.to_owned(),
        at: now,
    })
}
