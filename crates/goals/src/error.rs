//! The errors of goal operations, each with the wire code the endpoint answers with.

use openphone_store::StoreError;

use crate::spec::InvalidGoal;
use crate::transition::IllegalTransition;

/// Why a goal operation failed.
#[derive(Debug, thiserror::Error)]
pub enum GoalsError {
    /// Bad input, naming the field.
    #[error(transparent)]
    Invalid(#[from] InvalidGoal),
    /// No goal has this id.
    #[error("goal_not_found: no goal has id {0:?}")]
    NotFound(String),
    /// The goal has no action with this id.
    #[error("goal_action_not_found: the goal has no action {0:?}")]
    NoAction(String),
    /// An edge the state machine refuses.
    #[error("goal_state_conflict: {0}")]
    Illegal(#[from] IllegalTransition),
    /// A stored goal document could not be read.
    #[error("goal {0} is stored in a form this build cannot read: {1}")]
    Corrupt(String, String),
    /// The store failed (a lost compare-and-set is `Conflict`).
    #[error("goal store: {0}")]
    Store(#[from] StoreError),
    /// Something that cannot happen did.
    #[error("internal error: {0}")]
    Internal(String),
}

impl GoalsError {
    /// An [`InvalidGoal`] error.
    pub fn invalid(field: &str, message: impl Into<String>) -> GoalsError {
        GoalsError::Invalid(InvalidGoal {
            field: field.to_owned(),
            message: message.into(),
        })
    }

    /// The wire error code.
    pub fn code(&self) -> &'static str {
        match self {
            GoalsError::Invalid(_) => "invalid_params",
            GoalsError::NotFound(_) => "goal_not_found",
            GoalsError::NoAction(_) => "goal_action_not_found",
            GoalsError::Illegal(_) => "goal_state_conflict",
            GoalsError::Store(StoreError::Conflict { .. }) => "goal_state_conflict",
            GoalsError::Corrupt(..) | GoalsError::Store(_) => "store_unavailable",
            GoalsError::Internal(_) => "internal_error",
        }
    }
}
