//! The errors of job operations, each with the wire code a tool or endpoint answers with.

use openphone_store::StoreError;

use crate::transition::IllegalTransition;
use crate::validate::InvalidJob;

/// Why a job operation failed.
#[derive(Debug, thiserror::Error)]
pub enum JobsError {
    /// The creation arguments break a rule of §5.
    #[error(transparent)]
    Invalid(#[from] InvalidJob),
    /// No job has this id.
    #[error("job_not_found: no job has id {0}")]
    NotFound(i64),
    /// Every stored job is live and the store is full, or the creating runtime holds as many
    /// live jobs as its quota allows.
    #[error("job_limit_reached: {what} (at most {limit}): {detail}")]
    LimitReached {
        /// The cap.
        limit: usize,
        /// Which cap.
        what: &'static str,
        /// What holds it.
        detail: String,
    },
    /// The operation is not allowed in the job's status (e.g. pausing a running job).
    #[error(transparent)]
    Illegal(#[from] IllegalTransition),
    /// The job kept changing under concurrent writes; nothing was written.
    #[error("job {id} kept changing while this operation ran; nothing was written, try again")]
    Contended {
        /// The job.
        id: i64,
    },
    /// The store failed.
    #[error("job store: {0}")]
    Store(StoreError),
    /// In a fleet: the review's call would run on a phone another daemon serves; only that
    /// daemon decides it.
    #[error(
        "review {confirmation_id:?} is of a job on host {host:?}, not on this daemon (host \
         {here:?}): decide it on the daemon of {host} (its inbox or dashboard); nothing was \
         decided"
    )]
    OnAnotherHost {
        confirmation_id: String,
        host: String,
        here: String,
    },
}

impl From<StoreError> for JobsError {
    fn from(error: StoreError) -> JobsError {
        match error {
            StoreError::LimitReached {
                limit,
                what,
                detail,
            } => JobsError::LimitReached {
                limit,
                what,
                detail,
            },
            other => JobsError::Store(other),
        }
    }
}

impl JobsError {
    /// The wire error code.
    pub fn code(&self) -> &'static str {
        match self {
            JobsError::Invalid(_) => "invalid_params",
            JobsError::NotFound(_) => "job_not_found",
            JobsError::LimitReached { .. } => "job_limit_reached",
            JobsError::Illegal(_) => "job_state_conflict",
            JobsError::Contended { .. } => "job_state_conflict",
            JobsError::Store(_) => "store_unavailable",
            JobsError::OnAnotherHost { .. } => "device_not_found",
        }
    }
}
